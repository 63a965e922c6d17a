"""Host NIC counters from a fake sysfs tree and recorded-layout ``ethtool -S`` output.

The recorded tree (tests/data/sysfs, see its README) holds two mlx5 ports and one rxe port;
a test that needs a host with one kind copies those devices into a temporary root.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from agent.observe import hostnic
from agent.observe.hostnic import (
    DCQCN_COUNTERS,
    HW_COUNTERS,
    MLX5_COUNTERS,
    RXE_COUNTERS,
    HostNicReader,
    NicReadError,
    PortPause,
    host_nic_present,
    missing_dcqcn_counters,
    parse_ethtool_stats,
    pause_from_stats,
    provides_dcqcn,
    rdma_devices_on,
    rdma_netdevs,
    read_hw_counters,
    run_ethtool,
)
from exporters import metrics
from exporters.collector import RoceCollector
from exporters.poller import NicPoller
from exporters.store import SnapshotStore

SYSFS = Path(__file__).resolve().parents[1] / "data" / "sysfs"
ETHTOOL = SYSFS / "ethtool"
INFINIBAND = Path("class") / "infiniband"

MLX5_0 = {
    "np_cnp_sent": 18234,
    "np_ecn_marked_roce_packets": 412877,
    "rp_cnp_handled": 17958,
    "rp_cnp_ignored": 3,
    "out_of_sequence": 41,
    "packet_seq_err": 44,
    "duplicate_request": 0,  # mlx5 has it too (retransmission q counters)
}
RXE0 = {
    "rcvd_seq_err": 35,
    "out_of_seq_request": 37,
    "duplicate_request": 12,
    "completer_retry_err": 41,
    "retry_exceeded_err": 2,
    "rcvd_rnr_err": 0,
    "send_rnr_err": 0,
    "retry_rnr_exceeded_err": 0,
    "send_err": 0,
    "link_downed": 1,
    "sent_pkts": 1843226,
    "rcvd_pkts": 1840107,
    "rdma_sends": 5002,
    "rdma_recvs": 5000,
}
MLX5_ONLY = sorted(set(MLX5_COUNTERS) - set(RXE_COUNTERS))
RXE_ONLY = sorted(set(RXE_COUNTERS) - set(MLX5_COUNTERS) - {"duplicate_request"})


def recorded_ethtool(interface: str) -> str:
    return (ETHTOOL / f"{interface}.txt").read_text()


def host(root: Path, *devices: str) -> Path:
    """A sysfs root holding only ``devices`` of the recorded tree."""
    for device in devices:
        shutil.copytree(SYSFS / INFINIBAND / device, root / INFINIBAND / device)
    return root


def counters_dir(root: Path, device: str) -> Path:
    return root / INFINIBAND / device / "ports" / "1" / "hw_counters"


# --------------------------------------------------------------------------- sysfs


def test_hw_counters_are_read_per_device_and_port() -> None:
    counters = read_hw_counters(SYSFS)
    assert set(counters) == {("mlx5_0", "1"), ("mlx5_1", "1"), ("rxe0", "1")}
    assert counters[("mlx5_0", "1")] == MLX5_0
    assert counters[("rxe0", "1")] == RXE0


@pytest.mark.parametrize(
    ("devices", "port", "expected", "absent"),
    [
        # rxe: its own set, none of mlx5's DCQCN or sequence counters, no lifespan.
        (("rxe0",), ("rxe0", "1"), RXE0, [*MLX5_ONLY, "ack_deferred", "lifespan"]),
        # mlx5: its set as before (plus duplicate_request, which the port has too).
        (("mlx5_0",), ("mlx5_0", "1"), MLX5_0, [*RXE_ONLY, "lifespan"]),
        # The firmware lacks rp_cnp_ignored: absent, not 0.
        (
            ("mlx5_1",),
            ("mlx5_1", "1"),
            {
                "np_cnp_sent": 7,
                "np_ecn_marked_roce_packets": 95,
                "rp_cnp_handled": 5,
                "out_of_sequence": 0,
                "packet_seq_err": 1,
                "duplicate_request": 0,
            },
            ["rp_cnp_ignored", *RXE_ONLY],
        ),
    ],
    ids=["rxe", "mlx5", "mlx5-without-a-counter"],
)
def test_only_the_counters_a_nic_provides(
    tmp_path: Path,
    devices: tuple[str, ...],
    port: tuple[str, str],
    expected: dict[str, int],
    absent: list[str],
) -> None:
    counters = read_hw_counters(host(tmp_path, *devices))
    assert counters == {port: expected}
    assert not set(absent) & set(counters[port])


def _make_unreadable(path: Path) -> None:
    # A directory in place of the file: reading it fails with an OSError, as a counter whose
    # driver query fails does (core/sysfs.c show_hw_stats returns the driver's error, EINVAL).
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda p: p.write_text("N/A\n"), None),
        (lambda p: p.write_text(""), None),
        (lambda p: p.write_text("-1\n"), None),
        (lambda p: p.write_text("12 packets\n"), None),
        (lambda p: p.write_text("\u00b2\n"), None),  # a digit to str.isdigit, not to int()
        (lambda p: p.write_bytes(b"\xff\xfe\n"), None),
        (_make_unreadable, None),
        (lambda p: p.unlink(), None),
        (lambda p: p.write_text("  77\n"), 77),
    ],
    ids=["N/A", "empty", "negative", "text", "superscript", "not-utf8", "unreadable", "missing",
         "spaces"],
)  # fmt: skip
def test_a_counter_that_does_not_read_an_integer_is_absent(
    tmp_path: Path, change: Any, expected: int | None
) -> None:
    root = host(tmp_path, "rxe0")
    change(counters_dir(root, "rxe0") / "rcvd_seq_err")
    values = read_hw_counters(root)[("rxe0", "1")]
    assert values.get("rcvd_seq_err") == expected
    assert values["out_of_seq_request"] == 37  # the others are still read


def test_a_port_that_provides_none_of_the_counters_is_listed_empty(tmp_path: Path) -> None:
    root = host(tmp_path, "rxe0")
    for path in counters_dir(root, "rxe0").iterdir():
        path.write_text("N/A\n")
    assert read_hw_counters(root) == {("rxe0", "1"): {}}


def test_every_counter_read_has_a_metric_and_a_documented_source() -> None:
    assert len(set(HW_COUNTERS)) == len(HW_COUNTERS)
    documented = {c.name for c in metrics.NIC_COUNTERS if c.exported}
    assert documented == set(HW_COUNTERS)
    for name in HW_COUNTERS:
        assert f"roce_nic_{name}_total" in metrics.BY_NAME, name
    # Every file of the recorded rxe port is either read or documented as left alone.
    skipped = {c.name for c in metrics.NIC_COUNTERS if not c.exported}
    on_disk = {p.name for p in counters_dir(SYSFS, "rxe0").iterdir()}
    assert on_disk == set(RXE_COUNTERS) | skipped == set(RXE0) | {"ack_deferred", "lifespan"}


@pytest.mark.parametrize(
    ("counters", "dcqcn", "missing"),
    [
        (MLX5_0, True, ()),
        ({k: v for k, v in MLX5_0.items() if k != "rp_cnp_ignored"}, True, ()),
        (RXE0, False, DCQCN_COUNTERS),
        ({"np_cnp_sent": 1}, False, ("rp_cnp_handled",)),
        ({}, False, DCQCN_COUNTERS),
        (list(MLX5_0), True, ()),  # names alone work as well as a reading
    ],
    ids=["mlx5", "mlx5-without-rp_cnp_ignored", "rxe", "np-only", "nothing", "names"],
)
def test_provides_dcqcn(counters: Any, dcqcn: bool, missing: tuple[str, ...]) -> None:
    assert provides_dcqcn(counters) is dcqcn
    assert missing_dcqcn_counters(counters) == missing


def test_recorded_rxe_port_is_not_a_dcqcn_nic() -> None:
    counters = read_hw_counters(SYSFS)
    assert [port for port, values in sorted(counters.items()) if not provides_dcqcn(values)] == [
        ("rxe0", "1")
    ]
    assert missing_dcqcn_counters(counters[("rxe0", "1")])[0] == "np_cnp_sent"


def test_netdevs_come_from_gid_attrs_or_the_pci_function() -> None:
    assert rdma_netdevs(SYSFS) == ["ens1f0np0", "ens1f1np1", "eth1"]


def test_rxe_netdev_comes_from_its_gids_alone() -> None:
    # rxe has no PCI function (no device/net/); two GIDs on eth1, slot 2 unused.
    assert not (SYSFS / INFINIBAND / "rxe0" / "device").exists()
    assert rdma_devices_on("eth1", SYSFS) == ["rxe0/1"]


# --------------------------------------------------------------------------- ethtool


def test_ethtool_names_are_stripped_and_non_numbers_skipped() -> None:
    stats = parse_ethtool_stats(recorded_ethtool("ens1f1np1"))
    assert stats["tx_pause_storm_warning_events"] == 1  # printed with a trailing space
    assert "NIC statistics" not in stats
    assert stats["rx_prio4_pause_duration"] == 1_000_000


def test_virtio_net_stats_are_per_queue() -> None:
    stats = parse_ethtool_stats(recorded_ethtool("eth1"))
    assert stats["rx_queue_0_packets"] == 1841932
    assert stats["tx_queue_0_tx_timeouts"] == 0
    assert len(stats) == 14 and not [name for name in stats if "prio" in name]


@pytest.mark.parametrize(
    ("interface", "rx_frames", "tx_frames", "rx_us", "tx_us", "listed"),
    [
        (
            "ens1f0np0",
            (0, 0, 0, 1523, 0, 0, 0, 0),
            (0, 0, 0, 2847, 0, 0, 0, 0),
            (0, 0, 0, 48736, 0, 0, 0, 0),
            (0, 0, 0, 91104, 0, 0, 0, 0),
            (3,),
        ),
        (
            "ens1f1np1",
            (0, 0, 0, 12, 2, 0, 0, 0),
            (0, 0, 0, 0, 1, 0, 0, 0),
            (0, 0, 0, 250, 1_000_000, 0, 0, 0),
            (0, 0, 0, 0, 3, 0, 0, 0),
            (3, 4),
        ),
    ],
)
def test_pause_per_priority_with_absent_priorities_zero_and_not_listed(
    interface: str,
    rx_frames: tuple[int, ...],
    tx_frames: tuple[int, ...],
    rx_us: tuple[int, ...],
    tx_us: tuple[int, ...],
    listed: tuple[int, ...],
) -> None:
    pause = pause_from_stats(parse_ethtool_stats(recorded_ethtool(interface)))
    assert pause == PortPause(rx_frames, tx_frames, rx_us, tx_us, listed)


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        (parse_ethtool_stats(recorded_ethtool("eth1")), None),  # virtio_net: per-queue only
        ({}, None),  # a driver without statistics
        ({"rx_pause_ctrl_phy": 4, "rx_prio3_bytes": 99, "rx_prio3_packets": 5}, None),
        ({"rx_prio3_pause": 1}, PortPause(rx_frames=(0, 0, 0, 1, 0, 0, 0, 0), listed=(3,))),
        ({"tx_prio5_pause_duration": 0}, PortPause(listed=(5,))),  # listed: a real 0
    ],
    ids=["virtio_net", "no-stats", "other-per-priority-counters", "one-priority", "listed-zero"],
)
def test_pause_is_none_when_the_driver_lists_no_pause_counter(
    stats: dict[str, int], expected: PortPause | None
) -> None:
    assert pause_from_stats(stats) == expected


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "expected"),
    [
        (0, "NIC statistics:\n     rx_queue_0_packets: 5\n", "", "NIC statistics:\n"),
        (94, "", "no stats available\n", ""),  # ethtool's do_gstats: nothing to report
        (1, "", "Cannot get stats strings information: No such device\n", None),
    ],
    ids=["stats", "no-stats", "failure"],
)
def test_run_ethtool(
    monkeypatch: pytest.MonkeyPatch, returncode: int, stdout: str, stderr: str, expected: str | None
) -> None:
    def fake_run(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert args == ["ethtool", "-S", "eth1"]
        return subprocess.CompletedProcess(args, returncode, stdout, stderr)

    monkeypatch.setattr(hostnic.subprocess, "run", fake_run)
    if expected is None:
        with pytest.raises(NicReadError, match="No such device") as caught:
            run_ethtool("eth1")
        assert caught.value.source == "ethtool"
    else:
        assert run_ethtool("eth1").startswith(expected)


def test_reader_reports_pause_only_where_the_driver_lists_it() -> None:
    nic = HostNicReader(SYSFS, recorded_ethtool).read()
    assert set(nic.pause) == {"ens1f0np0", "ens1f1np1", "eth1"}
    assert nic.pause["eth1"] is None
    assert nic.pause["ens1f0np0"] is not None


# --------------------------------------------------------------------------- exporter


def render(store: SnapshotStore) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(RoceCollector(store))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            assert sample.labels.pop("fabric") == "lab", sample  # on every series
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def scraped(root: Path) -> dict[str, float]:
    store = SnapshotStore("lab", [])
    poller = NicPoller(HostNicReader(root, recorded_ethtool), store, 1.0, 1.0)
    poller.succeeded(poller.poll(), 0.01)
    return render(store)


def test_nic_metrics_in_base_units() -> None:
    found = scraped(SYSFS)
    assert found["roce_nic_np_cnp_sent_total{port=1,rdma_device=mlx5_0}"] == 18234
    # mlx5_1's firmware has no rp_cnp_ignored file: no series, rather than a made-up 0.
    assert "roce_nic_rp_cnp_ignored_total{port=1,rdma_device=mlx5_1}" not in found
    assert found["roce_nic_rp_cnp_ignored_total{port=1,rdma_device=mlx5_0}"] == 3
    assert found["roce_nic_packet_seq_err_total{port=1,rdma_device=mlx5_0}"] == 44
    assert found[
        "roce_nic_pause_duration_seconds_total{direction=rx,interface=ens1f0np0,priority=3}"
    ] == pytest.approx(0.048736)
    assert found[
        "roce_nic_pause_duration_seconds_total{direction=rx,interface=ens1f1np1,priority=4}"
    ] == pytest.approx(1.0)
    assert found["roce_nic_pause_frames_total{direction=tx,interface=ens1f0np0,priority=3}"] == 2847
    # Priority 7 is not listed by mlx5 (PFC off there): not read, so no series (issue #41).
    assert "roce_nic_pause_frames_total{direction=tx,interface=ens1f0np0,priority=7}" not in found
    assert found["roce_nic_collect_errors_total{source=ethtool}"] == 0


def _series(found: dict[str, float], family: str) -> set[str]:
    return {name for name in found if name.startswith(family + "{")}


@pytest.mark.parametrize(
    ("devices", "present", "absent_families"),
    [
        (
            ("rxe0",),
            {
                "roce_nic_port_info{dcqcn=no,port=1,rdma_device=rxe0}": 1,
                "roce_nic_rcvd_seq_err_total{port=1,rdma_device=rxe0}": 35,
                "roce_nic_out_of_seq_request_total{port=1,rdma_device=rxe0}": 37,
                "roce_nic_retry_exceeded_err_total{port=1,rdma_device=rxe0}": 2,
                "roce_nic_duplicate_request_total{port=1,rdma_device=rxe0}": 12,
                "roce_nic_link_downed_total{port=1,rdma_device=rxe0}": 1,
                "roce_nic_sent_pkts_total{port=1,rdma_device=rxe0}": 1843226,
                "roce_nic_rdma_recvs_total{port=1,rdma_device=rxe0}": 5000,
                "roce_nic_collect_errors_total{source=ethtool}": 0,
            },
            [
                *(f"roce_nic_{name}_total" for name in MLX5_ONLY),
                "roce_nic_ack_deferred_total",
                "roce_nic_lifespan_total",
                # virtio_net lists no per-priority pause: no series, not 8 zeros.
                "roce_nic_pause_frames_total",
                "roce_nic_pause_duration_seconds_total",
            ],
        ),
        (
            ("mlx5_0", "mlx5_1"),
            {
                "roce_nic_port_info{dcqcn=yes,port=1,rdma_device=mlx5_0}": 1,
                "roce_nic_port_info{dcqcn=yes,port=1,rdma_device=mlx5_1}": 1,
                "roce_nic_np_cnp_sent_total{port=1,rdma_device=mlx5_1}": 7,
                "roce_nic_out_of_sequence_total{port=1,rdma_device=mlx5_0}": 41,
                "roce_nic_pause_frames_total{direction=rx,interface=ens1f1np1,priority=4}": 2,
                "roce_nic_pause_frames_total{direction=rx,interface=ens1f1np1,priority=3}": 12,
            },
            [f"roce_nic_{name}_total" for name in RXE_ONLY],
        ),
    ],
    ids=["rxe-host", "mlx5-host"],
)
def test_a_host_gets_the_series_of_its_nic_kind_only(
    tmp_path: Path, devices: tuple[str, ...], present: dict[str, float], absent_families: list[str]
) -> None:
    found = scraped(host(tmp_path, *devices))
    for name, value in present.items():
        assert found.get(name) == value, name
    for family in absent_families:
        assert not _series(found, family), family


def test_mixed_host_counts_pause_series_of_the_mlx5_ports_only() -> None:
    found = scraped(SYSFS)
    interfaces = {
        name.split("interface=")[1].split(",")[0]
        for name in _series(found, "roce_nic_pause_frames_total")
    }
    assert interfaces == {"ens1f0np0", "ens1f1np1"}
    # The priorities each driver listed (ens1f0np0: 3; ens1f1np1: 3, 4), rx and tx.
    assert len(_series(found, "roce_nic_pause_frames_total")) == (1 + 2) * 2
    assert {n for n in _series(found, "roce_nic_port_info") if "dcqcn=no" in n} == {
        "roce_nic_port_info{dcqcn=no,port=1,rdma_device=rxe0}"
    }


def test_ethtool_failure_is_counted_by_source() -> None:
    def broken(interface: str) -> str:
        raise NicReadError("ethtool", f"ethtool -S {interface}: no such device")

    store = SnapshotStore("lab", [])
    poller = NicPoller(HostNicReader(SYSFS, broken), store, 1.0, 1.0)
    with pytest.raises(NicReadError) as caught:
        poller.poll()
    poller.failed("other", 0.01, caught.value)
    found = render(store)
    assert found["roce_nic_collect_errors_total{source=ethtool}"] == 1
    # Nothing read yet: no NIC series besides the error counters.
    nic = [name for name in found if name.startswith("roce_nic_")]
    assert all(name.startswith("roce_nic_collect_errors_total") for name in nic), nic


def test_auto_mode_follows_sys_class_infiniband(tmp_path: Path) -> None:
    assert host_nic_present(SYSFS)
    assert not host_nic_present(tmp_path)
    (tmp_path / "class" / "infiniband").mkdir(parents=True)
    assert not host_nic_present(tmp_path)  # the class exists but holds no device
    assert host_nic_present(host(tmp_path, "rxe0"))


def test_missing_sysfs_is_a_sysfs_error(tmp_path: Path) -> None:
    with pytest.raises(NicReadError) as caught:
        read_hw_counters(tmp_path)
    assert caught.value.source == "sysfs"

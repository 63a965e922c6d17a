"""Host NIC counters from a fake sysfs tree and recorded-layout ``ethtool -S`` output."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from agent.hostnic import (
    HostNicReader,
    NicReadError,
    host_nic_present,
    parse_ethtool_stats,
    pause_from_stats,
    rdma_netdevs,
    read_hw_counters,
)
from exporters.collector import RoceCollector
from exporters.poller import NicPoller
from exporters.store import SnapshotStore

SYSFS = Path(__file__).resolve().parents[1] / "data" / "sysfs"
ETHTOOL = SYSFS / "ethtool"


def recorded_ethtool(interface: str) -> str:
    return (ETHTOOL / f"{interface}.txt").read_text()


def test_hw_counters_are_read_per_device_and_port() -> None:
    counters = read_hw_counters(SYSFS)
    assert set(counters) == {("mlx5_0", "1"), ("mlx5_1", "1")}
    assert counters[("mlx5_0", "1")] == {
        "np_cnp_sent": 18234,
        "np_ecn_marked_roce_packets": 412877,
        "rp_cnp_handled": 17958,
        "rp_cnp_ignored": 3,
        "out_of_sequence": 41,
        "packet_seq_err": 44,
    }
    assert counters[("mlx5_1", "1")]["rp_cnp_ignored"] == 0  # the firmware lacks the file


def test_netdevs_come_from_gid_attrs_or_the_pci_function() -> None:
    assert rdma_netdevs(SYSFS) == ["ens1f0np0", "ens1f1np1"]


def test_ethtool_names_are_stripped_and_non_numbers_skipped() -> None:
    stats = parse_ethtool_stats(recorded_ethtool("ens1f1np1"))
    assert stats["tx_pause_storm_warning_events"] == 1  # printed with a trailing space
    assert "NIC statistics" not in stats
    assert stats["rx_prio4_pause_duration"] == 1_000_000


@pytest.mark.parametrize(
    ("interface", "rx_frames", "tx_frames", "rx_us", "tx_us"),
    [
        (
            "ens1f0np0",
            (0, 0, 0, 1523, 0, 0, 0, 0),
            (0, 0, 0, 2847, 0, 0, 0, 0),
            (0, 0, 0, 48736, 0, 0, 0, 0),
            (0, 0, 0, 91104, 0, 0, 0, 0),
        ),
        (
            "ens1f1np1",
            (0, 0, 0, 12, 2, 0, 0, 0),
            (0, 0, 0, 0, 1, 0, 0, 0),
            (0, 0, 0, 250, 1_000_000, 0, 0, 0),
            (0, 0, 0, 0, 3, 0, 0, 0),
        ),
    ],
)
def test_pause_per_priority_with_absent_priorities_zero(
    interface: str,
    rx_frames: tuple[int, ...],
    tx_frames: tuple[int, ...],
    rx_us: tuple[int, ...],
    tx_us: tuple[int, ...],
) -> None:
    pause = pause_from_stats(parse_ethtool_stats(recorded_ethtool(interface)))
    assert pause.rx_frames == rx_frames
    assert pause.tx_frames == tx_frames
    assert pause.rx_duration_us == rx_us
    assert pause.tx_duration_us == tx_us


def test_rx_prio_bytes_are_not_taken_for_pause() -> None:
    pause = pause_from_stats({"rx_prio3_bytes": 99, "rx_prio3_packets": 5, "rx_prio3_pause": 1})
    assert pause.rx_frames[3] == 1


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


def test_nic_metrics_in_base_units() -> None:
    store = SnapshotStore("lab", [])
    poller = NicPoller(HostNicReader(SYSFS, recorded_ethtool), store, 1.0, 1.0)
    poller.succeeded(poller.poll(), 0.01)
    found = render(store)
    assert found["roce_nic_np_cnp_sent_total{port=1,rdma_device=mlx5_0}"] == 18234
    assert found["roce_nic_rp_cnp_ignored_total{port=1,rdma_device=mlx5_1}"] == 0
    assert found["roce_nic_packet_seq_err_total{port=1,rdma_device=mlx5_0}"] == 44
    assert found[
        "roce_nic_pause_duration_seconds_total{direction=rx,interface=ens1f0np0,priority=3}"
    ] == pytest.approx(0.048736)
    assert found[
        "roce_nic_pause_duration_seconds_total{direction=rx,interface=ens1f1np1,priority=4}"
    ] == pytest.approx(1.0)
    assert found["roce_nic_pause_frames_total{direction=tx,interface=ens1f0np0,priority=3}"] == 2847
    assert found["roce_nic_pause_frames_total{direction=tx,interface=ens1f0np0,priority=7}"] == 0
    assert found["roce_nic_collect_errors_total{source=ethtool}"] == 0


def test_ethtool_failure_is_counted_by_source() -> None:
    def broken(interface: str) -> str:
        raise NicReadError("ethtool", f"ethtool -S {interface}: no such device")

    store = SnapshotStore("lab", [])
    poller = NicPoller(HostNicReader(SYSFS, broken), store, 1.0, 1.0)
    with pytest.raises(NicReadError) as caught:
        poller.poll()
    poller.failed("other", 0.01, caught.value)
    assert render(store)["roce_nic_collect_errors_total{source=ethtool}"] == 1


def test_auto_mode_follows_sys_class_infiniband(tmp_path: Path) -> None:
    assert host_nic_present(SYSFS)
    assert not host_nic_present(tmp_path)
    (tmp_path / "class" / "infiniband").mkdir(parents=True)
    assert not host_nic_present(tmp_path)  # the class exists but holds no device


def test_missing_sysfs_is_a_sysfs_error(tmp_path: Path) -> None:
    with pytest.raises(NicReadError) as caught:
        read_hw_counters(tmp_path)
    assert caught.value.source == "sysfs"

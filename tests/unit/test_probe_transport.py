"""Probe transport on RDMA hosts: detecting a RoCE NIC on the probed interface, choosing the
run's UDP port, and the probes' frames, filter and parsers on that port."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.intent.model import ProbePolicy
from agent.observe.hostnic import rdma_devices_on
from agent.observe.probes.analysis import RoceAnalyzer
from agent.observe.probes.packets import Flow, RoceTemplate, cnp_packet, parse_roce
from agent.observe.probes.rawsock import ROCE_OR_PFC_FILTER, roce_or_pfc_filter
from agent.observe.probes.runner import ProbeHandle, Runner
from agent.observe.probes.transport import ROCE, choose_transport, decide, inspect_interface

SYSFS = Path(__file__).resolve().parents[1] / "data" / "sysfs"
REPO = Path(__file__).resolve().parents[2]


def _gid(root: Path, device: str, port: str, index: int, netdev: str | None) -> None:
    """One GID slot of a fake /sys/class/infiniband tree (None: an unused slot, empty)."""
    ndevs = root / "class" / "infiniband" / device / "ports" / port / "gid_attrs" / "ndevs"
    ndevs.mkdir(parents=True, exist_ok=True)
    (ndevs / str(index)).write_text(f"{netdev}\n" if netdev else "")


@pytest.fixture
def rxe_and_mlx5(tmp_path: Path) -> Path:
    """rxe0 on eth1 (several GIDs: link-local and the IPv4-mapped one), mlx5_0 on eth2, an
    unused slot on mlx5_0 and mlx5_1 with no GID yet, only its PCI function's netdev eth3."""
    _gid(tmp_path, "rxe0", "1", 0, "eth1")
    _gid(tmp_path, "rxe0", "1", 1, "eth1")
    _gid(tmp_path, "mlx5_0", "1", 0, "eth2")
    _gid(tmp_path, "mlx5_0", "1", 3, None)
    _gid(tmp_path, "mlx5_1", "1", 0, None)
    (tmp_path / "class" / "infiniband" / "mlx5_1" / "device" / "net" / "eth3").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize(
    ("interface", "expected"),
    [
        ("eth1", ["rxe0/1"]),
        ("eth2", ["mlx5_0/1"]),
        ("eth3", ["mlx5_1"]),  # no GID yet: the device alone, found by its netdev
        ("eth9", []),
        ("lo", []),
    ],
)
def test_rdma_devices_on_an_interface(
    rxe_and_mlx5: Path, interface: str, expected: list[str]
) -> None:
    assert rdma_devices_on(interface, rxe_and_mlx5) == expected


def test_recorded_mlx5_tree_and_a_host_without_infiniband(tmp_path: Path) -> None:
    assert rdma_devices_on("ens1f0np0", SYSFS) == ["mlx5_0/1"]
    assert rdma_devices_on("ens1f1np1", SYSFS) == ["mlx5_1"]  # its GID slot is empty
    assert rdma_devices_on("eth1", tmp_path) == []


def test_inspect_role_reports_the_interface(rxe_and_mlx5: Path) -> None:
    assert inspect_interface("eth1", rxe_and_mlx5) == {
        "role": "inspect", "interface": "eth1", "rdma": ["rxe0/1"],
    }  # fmt: skip


RDMA = {"h3:eth1": ["mlx5_0/1"]}


@pytest.mark.parametrize(
    ("policy", "found", "port", "reason"),
    [
        ({}, {}, 4791, "RoCEv2's port: no RDMA device"),
        ({}, {"h1:eth1": []}, 4791, "RoCEv2's port: no RDMA device"),
        ({}, RDMA, 54791, "h3:eth1 carries RDMA mlx5_0/1: its NIC would take UDP 4791"),
        ({"rdma_udp_port": 6000}, RDMA, 6000, "h3:eth1 carries RDMA mlx5_0/1"),
        ({"udp_port": 5000}, {}, 5000, "set by validation.probe.udp_port"),
        ({"udp_port": 4791}, RDMA, 4791, "WARNING: h3:eth1 carries RDMA mlx5_0/1 would take"),
    ],
)
def test_the_run_port_follows_the_policy_and_the_hosts(
    policy: dict[str, Any], found: dict[str, list[str]], port: int, reason: str
) -> None:
    chosen = decide(ProbePolicy(**policy), found)
    assert chosen.udp_port == port
    assert reason in chosen.reason
    assert chosen.rdma == {k: v for k, v in found.items() if v}
    assert chosen.summary().startswith(f"probes on UDP {port}: ")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("rdma_udp_port", 4791, "rdma_udp_port: Expected: a port other than 4791"),
        ("udp_port", 0, "greater than or equal to 1"),
        ("udp_port", 70000, "less than or equal to 65535"),
        ("udp_port", "sometimes", "udp_port"),
    ],
)
def test_bad_probe_ports_are_refused(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ProbePolicy(**{field: value})


class _InspectRunner(Runner):
    """Answers the ``inspect`` role from a fake sysfs tree, like the worker would on the host."""

    def __init__(self, host: str, sysfs: Path, log: list[str]) -> None:
        self.host, self.sysfs, self.log = host, sysfs, log

    def start(self, role: str, spec: dict[str, Any]) -> ProbeHandle:
        self.log.append(f"{self.host}:{role}:{spec['ifname']}")
        result = inspect_interface(spec["ifname"], self.sysfs)
        outer = self

        class Done(ProbeHandle):
            host = outer.host

            def wait_ready(self, timeout: float = 0) -> None: ...

            def result(self, timeout: float) -> dict[str, Any]:
                return result

            def kill(self) -> None: ...

        return Done()


def test_choose_inspects_each_interface_once_and_only_when_it_matters(rxe_and_mlx5: Path) -> None:
    log: list[str] = []
    h1, h3 = _InspectRunner("h1", rxe_and_mlx5, log), _InspectRunner("h3", rxe_and_mlx5, log)
    ends = [("h1", "eth9", h1), ("h3", "eth2", h3), ("h3", "eth2", h3)]
    chosen = choose_transport(ProbePolicy(), ends)
    assert (chosen.udp_port, chosen.rdma) == (54791, {"h3:eth2": ["mlx5_0/1"]})
    assert sorted(log) == ["h1:inspect:eth9", "h3:inspect:eth2"]
    log.clear()
    assert choose_transport(ProbePolicy(udp_port=5000), ends).udp_port == 5000
    assert log == []  # a port set by hand that no NIC takes: nothing to ask
    assert "WARNING" in choose_transport(ProbePolicy(udp_port=4791), ends).reason
    assert choose_transport(ProbePolicy(), []) == ROCE


def test_worker_inspect_role_and_its_bad_input() -> None:
    def worker(spec: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "agent.observe.probes.worker", "inspect", spec],
            capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
        )  # fmt: skip
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    assert worker('{"ifname": "lo"}') == {"role": "inspect", "interface": "lo", "rdma": []}
    for bad in ("{}", '{"ifname": "../../etc"}', '{"ifname": 3}'):
        assert worker(bad)["error"].startswith("ValueError: ifname: Expected: an interface name")


FLOW = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.0.1", "198.18.0.3", qpn=0x100)


def test_frames_on_the_alternate_port_keep_dscp_bth_and_icrc() -> None:
    alt = Flow(**{**FLOW.__dict__, "udp_port": 54791})
    frame = RoceTemplate(alt).frame(psn=7, seq=7, sent_ns=1)
    assert int.from_bytes(frame[36:38], "big") == 54791
    view = parse_roce(frame, udp_port=54791)
    assert view is not None
    assert (view.dscp, view.qpn, view.psn, view.icrc_valid) == (26, 0x100, 7, True)
    assert parse_roce(frame) is None  # not RoCEv2's port: not ours to count
    assert parse_roce(RoceTemplate(FLOW).frame(0, 0, 0), udp_port=54791) is None
    cnp = bytes(cnp_packet("02:00:00:00:00:02", "02:00:00:00:00:01", "198.18.0.3",
                           "198.18.0.1", 0x100, udp_port=54791))  # fmt: skip
    assert int.from_bytes(cnp[36:38], "big") == 54791


def test_analyzer_counts_only_its_port() -> None:
    alt = RoceTemplate(Flow(**{**FLOW.__dict__, "udp_port": 54791}))
    analyzer = RoceAnalyzer(udp_port=54791)
    for psn in range(5):
        analyzer.feed(alt.frame(psn, psn, 0))
        analyzer.feed(RoceTemplate(FLOW).frame(psn, psn, 0))
    assert analyzer.frames == 5
    [(key, stats)] = analyzer.flows.items()
    assert key == ("198.18.0.1", "198.18.0.3", 0x100)
    assert stats.received == 5


def test_bpf_filter_matches_the_port_it_was_built_for() -> None:
    assert roce_or_pfc_filter() == ROCE_OR_PFC_FILTER
    program = roce_or_pfc_filter(54791)
    assert program[9][3] == 54791
    assert [ins for i, ins in enumerate(program) if i != 9] == [
        ins for i, ins in enumerate(ROCE_OR_PFC_FILTER) if i != 9
    ]
    with pytest.raises(ValueError, match=r"udp_port must be 1\.\.65535"):
        roce_or_pfc_filter(0)

"""The compact example fabrics (issue #29) load into the fabric they describe.

pod-32-leaf.yml: 4 spines, 32 leaves, 32 hosts with 8 NICs (256 GPUs) in about a hundred
lines; pod-mixed.yml: EOS spines, NVUE and SONiC leaves, hosts that declare their RDMA NICs.
Loading needs the loader's ranges, peer patterns, derived link ends and port defaults
(agent/intent/expand.py); the line count does not.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.intent.portnames import check_port_name

FABRICS = Path(__file__).resolve().parents[2] / "playbooks" / "fabrics"
POD_32 = FABRICS / "pod-32-leaf.yml"
POD_MIXED = FABRICS / "pod-mixed.yml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_FABRIC_PASSWORD", "x")  # only checked to be set


def test_pod_32_leaf_is_short() -> None:
    """The issue's measure: about 1 000 port lines for 256 GPUs written port by port."""
    assert len(POD_32.read_text(encoding="utf-8").splitlines()) < 300


def _links(intent: FabricIntent) -> set[frozenset[str]]:
    return {
        frozenset((f"{d.name}:{p.name}", p.peer))
        for d in intent.devices
        for p in d.ports
        if p.peer is not None
    }


def _assert_links_symmetric(intent: FabricIntent) -> None:
    ends = {f"{d.name}:{p.name}": p for d in intent.devices for p in d.ports}
    for name, port in ends.items():
        assert port.peer in ends, name
        other = ends[port.peer]
        assert other.peer == name
        assert (other.speed, other.mtu, other.cable_m) == (port.speed, port.mtu, port.cable_m)


def test_pod_32_leaf_loads_every_port_on_both_ends() -> None:
    intent = load_fabric(POD_32).intent
    roles = Counter(d.role for d in intent.devices)
    assert roles == {"spine": 4, "leaf": 32, "host": 32}
    ports = {d.name: len(d.ports) for d in intent.devices}
    assert all(ports[f"spine{s}"] == 32 for s in range(1, 5))
    assert all(ports[f"leaf{n}"] == 8 + 4 for n in range(1, 33))
    assert all(ports[f"gpu{n}"] == 8 for n in range(1, 33))
    assert sum(ports.values()) == 4 * 32 + 32 * 12 + 32 * 8 == 768
    assert len(_links(intent)) == 768 // 2
    _assert_links_symmetric(intent)
    leaf10 = intent.device("leaf10")
    assert leaf10 is not None
    # group 2, rail 1: port 3 -> gpu11's eth1; uplink 2 -> spine2's port 10, 30 m
    assert {p.name: p.peer for p in leaf10.ports}["Ethernet1/3"] == "gpu11:eth1"
    uplink = leaf10.port_named("Ethernet1/34")
    assert uplink is not None and uplink.peer == "spine2:Ethernet1/10"
    assert (uplink.speed, uplink.mtu, uplink.cable_m) == (400_000_000_000, 9214, 30)
    host_port = leaf10.port_named("Ethernet1/3")
    assert host_port is not None and host_port.cable_m == 3


def test_pod_mixed_loads_three_platforms_with_their_own_names() -> None:
    intent = load_fabric(POD_MIXED).intent
    platforms = Counter(d.platform for d in intent.devices)
    assert platforms == {"arista_eos": 2, "cumulus_nvue": 2, "sonic": 2, "linux_host": 8}
    for device in intent.devices:
        for port in device.ports:
            assert check_port_name(device.platform, port.name) is None, (device.name, port.name)
    _assert_links_symmetric(intent)
    leaf3 = intent.device("leaf3")
    assert leaf3 is not None
    uplink = leaf3.port_named("Ethernet240")
    assert uplink is not None and uplink.peer == "spine1:Ethernet1/3"
    assert uplink.cable_m == 30 and str(uplink.ipv4) == "198.18.0.5/31"
    gpu5 = intent.device("gpu5")
    assert gpu5 is not None and [p.rdma_device for p in gpu5.ports] == ["mlx5_0"]
    assert len(intent.devices) == 14 and sum(len(d.ports) for d in intent.devices) == 32

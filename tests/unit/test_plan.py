"""The plan resolves ``auto`` with the tuning maths; per-port headroom equals tuning's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.intent import sizing
from agent.intent.loader import load_fabric
from agent.intent.plan import DevicePlan, Plan, build_plan

ROOT = Path(__file__).resolve().parents[2]
POD = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
LAB = ROOT / "playbooks" / "fabrics" / "lab-leafspine.yml"


@pytest.fixture(scope="module")
def pod_plan() -> Plan:
    return build_plan(load_fabric(POD).intent)


def _device(plan: Plan, name: str) -> DevicePlan:
    device = plan.device(name)
    assert device is not None
    return device


@pytest.mark.parametrize(
    ("device", "port", "cable_m"),
    [("spine1", "Ethernet1/1", 30), ("leaf1", "Ethernet1/1", 30), ("leaf8", "Ethernet120", 3)],
)
def test_pod_headroom_matches_tuning(
    pod_plan: Plan, device: str, port: str, cable_m: float
) -> None:
    plan_port = next(p for p in _device(pod_plan, device).ports if p.name == port)
    expected = sizing.pfc_headroom(400_000_000_000, cable_m, 9214)
    headroom = plan_port.headroom[3]
    assert (headroom.xoff, headroom.xon, headroom.size) == (
        expected.xoff,
        expected.xon,
        expected.size,
    )
    assert headroom.source == "auto"
    assert headroom.size == headroom.xon + headroom.xoff


def test_longer_cable_needs_more_headroom(pod_plan: Plan) -> None:
    leaf = _device(pod_plan, "leaf1")
    uplink = next(p for p in leaf.ports if p.name == "Ethernet1/1").headroom[3]
    downlink = next(p for p in leaf.ports if p.name == "Ethernet1/9").headroom[3]
    assert uplink.xoff > downlink.xoff


def test_pause_threshold_sits_above_ecn_max(pod_plan: Plan) -> None:
    port = _device(pod_plan, "leaf1").ports[0]
    assert port.ecn[0].max_bytes == 1_500_000
    assert port.headroom[3].pause_threshold == 1_500_000 + 2 * 9214


def test_dscp_map_keeps_other_traffic_out_of_the_lossless_class(pod_plan: Plan) -> None:
    device = _device(pod_plan, "spine1")
    assert device.dscp_to_priority == {26: 3, 48: 6}
    assert device.default_priority == 0


def test_hosts_get_nic_settings(pod_plan: Plan) -> None:
    nic = _device(pod_plan, "gpu01").nic
    assert nic is not None
    assert nic.pfc_vector == "00010000"
    assert nic.dcqcn["cnp_dscp"] == 48 and nic.dcqcn["cnp_802p_prio"] == 6
    assert set(nic.dcqcn) >= {"rpg_time_reset", "rpg_ai_rate", "min_time_between_cnps"}
    assert _device(pod_plan, "spine1").nic is None


def test_lab_overrides_reach_the_plan() -> None:
    plan = build_plan(load_fabric(LAB).intent)
    ecn = _device(plan, "leaf1").ports[0].ecn[0]
    assert (ecn.min_bytes, ecn.max_bytes, ecn.max_probability) == (6000, 18000, 100)

"""The twin's network: the plan's knobs as the shared model's parameters, links and routing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.twin.network import (
    PROPAGATION_S_PER_M,
    TwinError,
    build_network,
    ecmp_pick,
    flow_hash,
    load_network,
    roce_frame_bytes,
    roce_payload_bytes,
)
from tests.unit.twin_fabrics import LAB_LEAFSPINE, POD_400G, star


def test_pod_ports_carry_the_plan() -> None:
    loaded = load_fabric(POD_400G)
    plan = build_plan(loaded.intent)
    net = build_network(loaded.intent, plan)
    leaf = plan.device("leaf1")
    assert leaf is not None
    for port_plan, spec in zip(leaf.ports, net.switches["leaf1"].ports, strict=True):
        head = port_plan.headroom[3]
        assert spec.buffer is not None and spec.qos is not None
        # XOFF at the plan's pause threshold, headroom = SONiC xoff, XON xon below it.
        assert spec.buffer.xoff_bytes == head.pause_threshold
        assert spec.buffer.headroom_bytes == head.xoff
        assert spec.buffer.xon_bytes == head.pause_threshold - head.xon
        assert spec.qos.pfc_enabled and spec.qos.pfc_priorities == [3]
        ecn = spec.qos.queues[3].ecn
        assert ecn is not None
        assert (ecn.min_bytes, ecn.max_bytes, ecn.max_probability) == (
            port_plan.ecn[0].min_bytes,
            port_plan.ecn[0].max_bytes,
            port_plan.ecn[0].max_probability,
        )
        assert spec.qos.queues[6].strict  # CNP queue
        assert spec.qos.queues[0].bandwidth_percent == 50
        assert spec.speed_bps == port_plan.speed_bps and spec.mtu == port_plan.mtu
        assert spec.propagation_s == pytest.approx(port_plan.cable_m * 5e-9)


# (watchdog action in the intent, the model's action)
WATCHDOG = [("drop", "drop"), ("forward", "forward"), ("alert", "alert")]


@pytest.mark.parametrize(("intent_action", "model_action"), WATCHDOG)
def test_watchdog_mapping(tmp_path: Path, intent_action: str, model_action: str) -> None:
    net = star(
        tmp_path,
        2,
        "100G",
        overrides=f"pfc: {{watchdog: {{action: {intent_action}, detection_ms: 50, "
        f"polling_ms: 20, restoration_ms: 70}}}}",
    )
    qos = net.switches["leaf1"].ports[0].qos
    assert qos is not None and qos.watchdog is not None
    wd = qos.watchdog
    timers = (wd.detection_ms, wd.polling_ms, wd.restoration_ms)
    assert (wd.action, *timers) == (model_action, 50, 20, 70)


def test_hosts_nic_parameters(tmp_path: Path) -> None:
    net = star(tmp_path, 2, "40G", dcqcn={"rpg_ai_rate": 40, "min_time_between_cnps": 50})
    nic = net.hosts["h1"]
    assert nic.dcqcn["rpg_ai_rate"] == 40 and nic.dcqcn["min_time_between_cnps"] == 50
    assert (nic.roce_dscp, nic.roce_priority, nic.cnp_dscp, nic.cnp_priority) == (26, 3, 48, 6)
    assert nic.pfc_priorities == [3] and nic.leaf == "leaf1"


def test_routing_is_shortest_path_ecmp() -> None:
    net = load_network(POD_400G)
    routes = net.routes_to("gpu09")  # behind leaf2
    assert len(routes["leaf1"]) == 4  # four spines, equal cost
    assert all(len(routes[f"spine{i}"]) == 1 for i in range(1, 5))
    assert routes["leaf2"] == tuple(
        p.index for p in net.switches["leaf2"].ports if p.peer_device == "gpu09"
    )
    paths = {tuple(net.path("gpu01", "gpu09", flow_hash("gpu01", "gpu09", s))) for s in range(64)}
    assert len(paths) == 4  # the source port spreads flows over every spine
    first = net.path("gpu01", "gpu09", flow_hash("gpu01", "gpu09", 49152))
    assert first == net.path("gpu01", "gpu09", flow_hash("gpu01", "gpu09", 49152))
    assert [hop[0] for hop in first][::2] == ["leaf1", "leaf2"]


def test_ecmp_pick_is_deterministic_and_salted() -> None:
    choices = (0, 1, 2, 3)
    picks_a = [ecmp_pick("a", choices, h) for h in range(256)]
    picks_b = [ecmp_pick("b", choices, h) for h in range(256)]
    assert picks_a == [ecmp_pick("a", choices, h) for h in range(256)]
    assert picks_a != picks_b  # two tiers do not polarise
    assert set(picks_a) == set(choices)


def test_lab_fabric_loads() -> None:
    net = load_network(LAB_LEAFSPINE)
    assert sorted(net.hosts) == ["h1", "h2", "h3", "h4"]
    # 10 Mb/s lab ports standing for 1 Gb/s (time_dilation 100): the twin runs the latter.
    assert net.time_dilation == 100
    assert all(h.port.speed_bps == 1_000_000_000 for h in net.hosts.values())
    assert all(p.speed_bps == 1_000_000_000 for s in net.switches.values() for p in s.ports)
    assert PROPAGATION_S_PER_M == 5e-9


@pytest.mark.parametrize(
    ("mtu", "payload"),
    [
        (9214, 4096),  # jumbo Ethernet still carries 4096-byte RoCE packets
        (9000, 4096),
        (4200, 4096),  # the usual RoCE setting: 4096 + 96 fits
        (4096, 2048),  # 4096 does not leave room for the RoCE headers
        (1500, 1024),
        (1024, 512),
        (300, 256),
    ],
)
def test_roce_payload_is_the_largest_ib_mtu_that_fits(mtu: int, payload: int) -> None:
    assert roce_payload_bytes(mtu) == payload
    assert roce_frame_bytes(mtu) == payload + 62
    assert roce_frame_bytes(mtu, 1000) == 1062  # the lab probes' payload


def test_links_must_agree(tmp_path: Path) -> None:
    text = POD_400G.read_text().replace(
        '{name: Ethernet1/9, speed: 400G, cable_m: 3, mtu: 9214, peer: "gpu01:eth0"}',
        '{name: Ethernet1/9, speed: 400G, cable_m: 3, mtu: 9214, peer: "gpu02:eth0"}',
        1,
    )
    bad = tmp_path / "bad.yml"
    bad.write_text(text)
    # The loader's rule IR011 refuses it first, located; the twin never sees a crossed link.
    with pytest.raises(IntentError, match=r"bad.yml:\d+:\d+: .*IR011"):
        load_network(bad)


def test_scenario_without_enough_hosts_is_an_error(tmp_path: Path) -> None:
    from agent.twin.workloads import build_scenario

    net = star(tmp_path, 3, "100G")
    with pytest.raises(TwinError, match="Expected: >= 4 Actual: 3"):
        build_scenario(net, "incast", 3)
    with pytest.raises(TwinError, match="another leaf"):
        build_scenario(net, "victim", 1)

"""The CLI really drives the data plane: a 2:1 incast through a lab switch configured only
with netmiko (``arista_eos``). PFC off -> tail drops; PFC on -> pause frames, no drop; and the
``| json`` shows report the same numbers as the data plane's own counters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.lab.support import mgmt as mf
from tests.lab.support import vswitch as fx

pytestmark = [pytest.mark.lab, fx.requires_vswitch_lab]

ROCE_PORT = 4791
COUNT = 700  # frames per sender: ~0.57 s alone at 10 Mb/s, ~1.1 s through the bottleneck

LOSSLESS = [
    "qos profile LOSSLESS",
    "priority-flow-control on",
    "priority-flow-control priority 3 no-drop",
    "interface Ethernet1-3",
    "service-profile LOSSLESS",
]


@pytest.fixture(scope="module")
def switch() -> Iterator[mf.ManagedSwitch]:
    with mf.managed_switch("mgi") as managed:
        yield managed


def _incast(switch: mf.ManagedSwitch) -> dict[str, Any]:
    """h1 and h2 send COUNT frames each at line rate to h3 (pause-honouring senders)."""
    h3 = switch.topo.host(3)
    with fx.Rig(switch.topo) as rig:
        rig.sink(h3, ROCE_PORT)
        capture = rig.capture(h3)
        results = fx.incast_into_h3(switch.topo, switch.vswitch, COUNT, start_in=0.8)
        received = {(u.src_ip, u.seq) for u in capture.udp(ROCE_PORT)}
    return {"results": results, "received": received}


def _json(conn: Any, command: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(conn.send_command(f"{command} | json"))
    return data


def test_pfc_configured_over_ssh_turns_drops_into_pauses(switch: mf.ManagedSwitch) -> None:
    with switch.connect() as conn:
        # PFC off (factory config): the 2:1 incast overflows eth3's queue 3.
        conn.send_command("clear counters")
        lossy = _incast(switch)
        drops = _json(conn, "show interfaces counters queue drops")
        egress = drops["interfaces"]["Ethernet3"]["trafficClasses"]["TC3"]["egressQueueCounters"]
        dropped = egress["countersSum"]["droppedPackets"]
        assert dropped > 0
        assert dropped == 2 * COUNT - len(lossy["received"])
        assert dropped == switch.counters()["ports"]["eth3"]["queues"]["3"]["tail_drops"]
        pfc = _json(conn, "show priority-flow-control counters")["interfaceCounters"]
        assert pfc["Ethernet1"]["txFrames"] == pfc["Ethernet2"]["txFrames"] == 0

        # PFC on for priority 3, through the CLI only.
        output = conn.send_config_set(LOSSLESS)
        assert "%" not in output, output
        status = _json(conn, "show priority-flow-control")["interfaceStatuses"]
        assert all(status[f"Ethernet{i}"]["priorities"] == [3] for i in (1, 2, 3))
        conn.send_command("clear counters")
        lossless = _incast(switch)
        assert len(lossless["received"]) == 2 * COUNT, switch.vswitch.log_tail()
        assert all(r["xoff_rx"] >= 1 and r["paused_s"] > 0 for r in lossless["results"])

        live = switch.counters()["ports"]
        drops = _json(conn, "show interfaces counters queue drops")["interfaces"]
        for name in ("Ethernet1", "Ethernet2", "Ethernet3"):
            for tc in drops[name]["trafficClasses"].values():
                assert tc["egressQueueCounters"]["countersSum"]["droppedPackets"] == 0
                assert tc["ingressVoqCounters"]["countersSum"]["droppedPackets"] == 0
        pfc = _json(conn, "show priority-flow-control counters")["interfaceCounters"]
        for name, port in (("Ethernet1", "eth1"), ("Ethernet2", "eth2")):
            tx = sum(live[port]["pfc"]["tx_xoff"]) + sum(live[port]["pfc"]["tx_xon"])
            assert pfc[name]["txFrames"] == tx > 0
        queues = _json(conn, "show interfaces counters queue")["egressQueueCounters"]
        tc3 = queues["interfaces"]["Ethernet3"]["ucastQueues"]["trafficClasses"]["TC3"]
        assert tc3["dropPrecedences"]["DP0"]["enqueuedPackets"] == 2 * COUNT

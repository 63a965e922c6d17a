"""The leaf-spine lab's data plane through the vswitches' control sockets (lab-only: a real
switch has none). Tests set QoS here when the SSH management plane and the push path are not
what they test, and read the counters a switch keeps for itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lab.vswitch.client import VswitchClient
from tests.lab.support.labs import Lab

SWITCH_PORTS = {"spine1": 2, "spine2": 2, "leaf1": 4, "leaf2": 4}


def control(lab: Lab, switch: str) -> VswitchClient:
    """A client of ``switch``'s control socket (use it in ``with``)."""
    return VswitchClient(str(lab.status["nodes"][switch]["control_socket"]))


def counters(lab: Lab, switch: str) -> dict[str, Any]:
    """The vswitch's own counters (lab-only ones such as fault_corrupted live only here)."""
    with control(lab, switch) as client:
        found: dict[str, Any] = client.counters()
    return found


@contextmanager
def faults_on(lab: Lab, switch: str, faults: list[dict[str, Any]]) -> Iterator[None]:
    """``switch``'s vswitch runs with ``faults`` inside the ``with``, with none after it."""
    with control(lab, switch) as client:
        client.set_faults(faults)
    try:
        yield
    finally:
        with control(lab, switch) as client:
            client.set_faults([])


def set_qos(lab: Lab, pfc: bool, ecn: bool, watchdog: bool = False) -> None:
    """Every switch port alike: DSCP 26 in queue 3 (lossless with ``pfc``, ECN 6-18 KB with
    ``ecn``), 48 in strict queue 6; counters cleared."""
    for switch, count in SWITCH_PORTS.items():
        queue3: dict[str, Any] = {"bandwidth_percent": 50}
        if ecn:
            queue3["ecn"] = {"min_bytes": 6000, "max_bytes": 18000, "max_probability": 100}
        qos = {
            "trust": "dscp",
            "dscp_to_tc": {"26": 3, "48": 6},
            "watchdog": {"enabled": watchdog, "detection_ms": 300, "restoration_ms": 600,
                         "polling_ms": 100, "action": "drop"},
            "ports": {
                f"eth{i}": {"pfc_enabled": pfc, "pfc_priorities": [3] if pfc else [],
                            "watchdog": None,
                            "queues": {"3": queue3, "6": {"strict": True},
                                       "0": {"bandwidth_percent": 50}}}
                for i in range(1, count + 1)
            },
        }  # fmt: skip
        with control(lab, switch) as client:
            client.call({"cmd": "set_qos", "qos": qos})
            client.call({"cmd": "clear_counters"})


def switch_totals(lab: Lab) -> dict[str, int]:
    """Queue 3's drops and marks and priority 3's pause frames, summed over every switch."""
    totals = {"tail_drops": 0, "headroom_drops": 0, "pfc_tx": 0, "ecn_marked": 0}
    for switch in SWITCH_PORTS:
        for port in counters(lab, switch)["ports"].values():
            totals["tail_drops"] += port["queues"]["3"]["tail_drops"]
            totals["ecn_marked"] += port["queues"]["3"]["ecn_marked"]
            totals["headroom_drops"] += port["ingress"]["headroom_drops"][3]
            totals["pfc_tx"] += port["pfc"]["tx_xoff"][3]
    return totals

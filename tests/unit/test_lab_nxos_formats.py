"""The recorded NX-OS outputs (tests/data/platforms/cisco_nxos/, see its SOURCE.md) against
both the agent's driver and the lab's NX-OS switch.

For each recording: the driver reads it; the lab, given the recording's values (its
configuration and its data plane's counters), answers the same command; the two are compared
line for line where the lab counts everything the recording shows, else in shape (every number
masked, the rows the lab's data plane does not count left out, as the test says), and the driver
reads the lab's answer to the same values.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from agent.device import lldp as discover
from agent.device.platforms.cisco_nxos import CiscoNxos
from tests.unit.lab_nxos_support import NxosSwitch, run
from tests.unit.platform_helpers import ROOT

DATA = ROOT / "tests" / "data" / "platforms" / "cisco_nxos"
LOSSLESS_PORTS = [
    "configure terminal",
    "policy-map type network-qos NQ",
    "class type network-qos c-8q-nq3",
    "pause pfc-cos 3",
    "system qos",
    "service-policy type network-qos NQ",
    "priority-flow-control watch-dog-interval on",
    "interface ethernet 1/1-2",
    "priority-flow-control mode on",
    "end",
]


def recorded(name: str) -> list[str]:
    """A recording's lines, its comment line (``! Format: …``) and blank lines left out."""
    lines = (DATA / name).read_text().splitlines()
    return [x for x in lines if x.strip() and not x.startswith("! Format")]


def lab_answer(command: str, counters: dict[str, Any], count: int = 2) -> list[str]:
    switch = NxosSwitch(count=count)
    switch.dataplane.counters_snapshot = counters

    async def answer() -> str:
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, *LOSSLESS_PORTS)
        return await terminal.execute(command)

    return [x for x in asyncio.run(answer()).splitlines() if x.strip()]


def shape(lines: list[str]) -> list[str]:
    """Numbers (with the blanks that align them) and day and month names masked: what stays
    is the layout."""
    masked = [re.sub(r"\s*\d[\d,]*", " N", x) for x in lines]
    return [
        re.sub(
            r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b",
            "D",
            x,
        )
        for x in masked
    ]


def pfc_counters(port: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """The data plane's counters for ports {index: (rx pause frames, tx pause frames)} (all on
    priority 3, as XOFF)."""
    return {
        "ports": {
            f"eth{i}": {
                "pfc": {
                    "rx_xoff": [0, 0, 0, rx, 0, 0, 0, 0], "rx_xon": [0] * 8,
                    "tx_xoff": [0, 0, 0, tx, 0, 0, 0, 0], "tx_xon": [0] * 8,
                }
            }
            for i, (rx, tx) in port.items()
        }
    }  # fmt: skip


def test_priority_flow_control_table_is_reproduced_line_for_line() -> None:
    recording = recorded("show_interface_priority_flow_control.txt")
    counters = pfc_counters({1: (4088353, 1890), 2: (0, 12)})
    assert lab_answer("show interface priority-flow-control", counters) == recording
    found = CiscoNxos.counters_from_text("sw1", 0.0, {"pfc": "\n".join(recording)})
    assert sorted(found.interfaces) == ["Ethernet1/1", "Ethernet1/2"]


def test_queuing_boxes_and_pfc_statistics_have_the_recordings_shape() -> None:
    recording = recorded("show_queuing_interface.txt")
    # The recording's first box (QOS GROUP 0 of Ethernet1/1) with the values the lab counts
    # (unicast only: its OOBFC and multicast columns are 0), and its PFC table.
    queue0 = {"tx_packets": 12, "tx_bytes": 1200, "tail_drops": 1}
    pfc = {"rx_xoff": [0, 0, 0, 12, 0, 0, 0, 0], "tx_xoff": [0, 0, 0, 11, 0, 0, 0, 0]}
    ingress = {"headroom_drops": [0, 0, 0, 10, 0, 0, 0, 0]}  # "Ingress MMU Drop Pkts 10"
    counters = {"ports": {"eth1": {"queues": {"0": queue0}, "pfc": pfc, "ingress": ingress}}}
    lab = lab_answer("show queuing interface ethernet 1/1", counters, count=1)
    # The lab's ECN row is its own (no recording with ECN marks): left out to compare.
    box = [x for x in lab[:11] if not x.startswith("|ECN Marked Pkts")]
    assert shape(box[:10]) == shape(recording[:10])
    assert box[:6] == recording[:6]  # the rules, the title and the column heads exactly
    table = recording.index("PFC Statistics")
    lab_table = lab.index("PFC Statistics")
    assert lab[lab_table : lab_table + 6] == recording[table : table + 6]  # COS 0 row too
    # Port Ingress Statistics: its title, rule and drop row (the lab counts no bytes for them).
    ingress_at = recording.index("Port Ingress Statistics")
    lab_ingress = lab.index("Port Ingress Statistics")
    assert lab[lab_ingress - 1 : lab_ingress + 2] == recording[ingress_at - 1 : ingress_at + 2]
    assert shape([lab[lab_ingress + 2]]) == shape([recording[ingress_at + 2]])
    assert lab[lab_ingress + 3] == "PFC Statistics"
    cos3 = next(x for x in lab if re.match(r"\s+3\s", x))
    assert shape([cos3]) == shape([next(x for x in recording if re.match(r"\s+3\s+3", x))])
    read = CiscoNxos.counters_from_text("sw1", 0.0, {"queuing": "\n".join(lab)})
    eth1 = read.interfaces["Ethernet1/1"]
    assert (eth1.queues[0].tx_packets, eth1.queues[0].dropped_packets) == (12, 1)
    assert (eth1.pfc_tx[3], eth1.pfc_rx[3]) == (11, 12)
    assert eth1.headroom_drops == (0, 0, 0, 10, 0, 0, 0, 0)


def test_pfc_watchdog_boxes_have_the_recordings_shape() -> None:
    recording = recorded("show_queuing_pfc_queue_detail.txt")
    # The lab's data plane counts storms, restorations and the packets the watchdog dropped:
    # the recording's drained and ingress rows have no counterpart and are left out of both.
    counted = ("Shutdown|", "Restored|")

    def kept(lines: list[str]) -> list[str]:
        return [x for x in lines if not x.startswith("|") or any(c in x for c in counted)
                or "QOS GROUP" in x or "Stats" in x]  # fmt: skip

    wd = {"state": "stormed", "storms_detected": 1, "storms_restored": 2, "dropped_packets": 4}
    quiet = {"state": "operational"}
    counters = {"ports": {"eth1": {"queues": {"3": {"watchdog": wd}}},
                          "eth2": {"queues": {"3": {"watchdog": quiet}}}}}  # fmt: skip
    lab = lab_answer("show queuing pfc-queue detail", counters)
    assert kept(lab) == kept(recording)
    read = CiscoNxos.counters_from_text("sw1", 0.0, {"watchdog": "\n".join(lab)})
    both = CiscoNxos.counters_from_text("sw1", 0.0, {"watchdog": "\n".join(recording)})
    assert {n: i.watchdog for n, i in read.interfaces.items()} == {
        n: i.watchdog for n, i in both.interfaces.items()
    }


def test_checkpoint_summary_has_ciscos_recorded_shape() -> None:
    recording = [x.strip() for x in recorded("show_checkpoint_summary.genie.txt")]
    switch = NxosSwitch()

    async def answer() -> str:
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "checkpoint bgp-Wed_May_31_12_56_56_2017")
        return await terminal.execute("show checkpoint summary user")

    lab = [x for x in asyncio.run(answer()).splitlines() if x.strip()]
    # The entry's lines as recorded (genieparser's recording puts its header lines inside the
    # entry; the lab prints them first, as show commands put headers before what they head).
    entry = [x for x in recording if not x.startswith(("User Checkpoint", "---"))]
    assert shape(lab[2:7]) == shape(entry[:5])
    title = recording.index("User Checkpoint Summary")
    assert lab[:2] == recording[title : title + 2]
    [session] = CiscoNxos.sessions_from_text("sw1", "\n".join(lab).replace("bgp-", "roce-agent-"))
    assert session.user == "admin"
    [recorded_session] = CiscoNxos.sessions_from_text(
        "sw1", "\n".join(recording).replace("bgp-", "roce-agent-")
    )
    assert recorded_session.user == "admin"


def test_lldp_neighbour_detail_text_has_the_recorded_fields_in_order() -> None:
    recording = recorded("show_lldp_neighbors_detail.genie.txt")
    keys = [x.split(":")[0].strip() for x in recording if re.match(r"\s*[A-Z][\w ]*: ", x)]
    first = keys[: keys.index("Chassis id", 1)]
    # the recording's first neighbour is an IOS router whose description runs over lines
    first = [k for k in first if k not in ("Technical Support",)]
    switch = NxosSwitch()

    async def answer() -> str:
        await switch.personality.start()
        return await switch.terminal().execute("show lldp neighbors detail")

    lab = asyncio.run(answer()).splitlines()
    lab_keys = [x.split(":")[0].strip() for x in lab if re.match(r"[A-Z][\w ]*: ", x)]
    assert lab_keys[: len(first)] == first
    # the legend and the column heads, as recorded (the recording is indented)
    assert [x.strip() for x in lab[:4]] == [x.strip() for x in recording[:4]]


def test_interface_json_has_the_recorded_keys_and_types() -> None:
    recording = json.loads((DATA / "show_interface.napalm.json").read_text())
    switch = NxosSwitch()

    async def answer() -> str:
        await switch.personality.start()
        return await switch.terminal().execute("show interface | json")

    lab = json.loads(asyncio.run(answer()))
    recorded_row = recording["TABLE_interface"]["ROW_interface"][0]
    lab_row = lab["TABLE_interface"]["ROW_interface"][0]
    read = ("interface", "state", "admin_state", "eth_mtu", "eth_bw", "eth_speed")
    assert {k: type(lab_row[k]) for k in read} == {k: type(recorded_row[k]) for k in read}
    assert set(discover.nxos_ports(recording)) == {"Ethernet1/1", "Ethernet1/2"}
    assert discover.nxos_ports(lab)["Ethernet1/1"].speed_bps == 10_000_000
    health = CiscoNxos.link_health_from_json(recording)
    assert {n: h.up for n, h in health.items()} == {"Ethernet1/1": False, "Ethernet1/2": False}

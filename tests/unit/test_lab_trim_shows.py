"""Packet trimming through the lab's SONiC and NVUE personalities (issue #47): the trimming
configuration the agent pushes reaches the data plane (which queues trim, the size, DSCP and
queue of trimmed frames), and the trim counters are shown in the vendors' formats:

* SONiC 202511 ``show queue counters [IFACE] --trim [-j]`` (scripts/queuestat; sonic-utilities
  tests/queue_counter_test vectors ``trim_eth0_counters`` / ``trim_counters_all_json``) and
  ``show interfaces counters trim [IFACE] [-j]`` (portstat -T; tests/portstat_input vector
  ``trim_counters_all`` / ``trim_counters_all_json``);
* Cumulus Linux 5.15 ``nv show system forwarding packet-trim counters`` and ``nv show interface
  <if> packet-trim counters`` ("Packet Trimming", CumulusNetworks/docs commit 504c13c2).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.platforms.sonic import Sonic
from lab.mgmt.dataplane_qos import TranslationError, to_vswitch_qos
from lab.mgmt.model import SwitchConfig, TrimSettings, TxQueue
from tests.unit.sonic_lab_helpers import LabSonic, run
from tests.unit.test_lab_nvue_driver import lab_connection
from tests.unit.test_lab_trimming import trim_plan

COUNTERS: dict[str, Any] = {
    "ports": {
        "eth1": {
            "oper_up": True,
            "trim": {"trimmed": 20000, "trim_sent": 12000, "trim_dropped": 8000},
            "queues": {"3": {"trimmed": 20000, "trim_sent": 12000, "trim_dropped": 8000}},
        },
        "eth2": {
            "oper_up": False,
            "trim": {"trimmed": 0, "trim_sent": 0, "trim_dropped": 0},
            "queues": {},
        },
    }
}

SONIC_QUEUE_TRIM = """\
For namespace :
     Port    TxQ    Trim/pkts    TrimSent/pkts    TrimDrop/pkts
---------  -----  -----------  ---------------  ---------------
Ethernet0    UC0            0                0                0
Ethernet0    UC1            0                0                0
Ethernet0    UC2            0                0                0
Ethernet0    UC3       20,000           12,000            8,000
Ethernet0    UC4            0                0                0
Ethernet0    UC5            0                0                0
Ethernet0    UC6            0                0                0
Ethernet0    UC7            0                0                0"""

SONIC_PORT_TRIM = """\
    IFACE    STATE    TRIM_PKTS    TRIM_TX_PKTS    TRIM_DRP_PKTS
---------  -------  -----------  --------------  ---------------
Ethernet0        U       20,000          12,000            8,000
Ethernet4        D            0               0                0"""

NVUE_GLOBAL = """\
Global
 trimmed-packets      12,000
 trimmed-drop-packets 8,000
Port-Level
-------------
interface  trimmed-packets
---------  ---------------
swp1       12000
swp2       0"""

NVUE_PORT = """\
traffic-class  trimmed-packets-tx
-------------  ------------------
3              20000"""

TRIM_512 = {"size_bytes": 512, "dscp": 48, "queue": 6}


def _trims(qos: dict[str, Any]) -> dict[str, Any]:
    """Per data-plane port: its trim settings and the queues that trim."""
    return {
        name: (port.get("trim"), sorted(q for q, e in port["queues"].items() if e.get("trim")))
        for name, port in qos["ports"].items()
    }


def test_sonic_trimming_reaches_the_data_plane_and_shows_its_counters() -> None:
    device = trim_plan("sonic", ["Ethernet0", "Ethernet4"])

    async def scenario() -> tuple[dict[str, Any], list[str]]:
        lab = await LabSonic().start()
        before = Sonic.state_from_config_db(
            json.loads(await lab.run("sudo sonic-cfggen -d --print-data"))
        )
        lines = Sonic().render_changes(Sonic().desired(device), before)
        await lab.write("/tmp/p.json", "\n".join(lines))
        await lab.run("sudo config apply-patch /tmp/p.json")
        lab.dataplane.counters_snapshot = COUNTERS
        outputs = [
            await lab.run(command)
            for command in (
                "show queue counters Ethernet0 --trim",
                "show queue counters Ethernet0 -T -j",
                "show interfaces counters trim",
                "show interfaces counters trim Ethernet0 --json",
                "show interfaces counters trim Ethernet9",
            )
        ]
        return lab.qos(), outputs

    qos, outputs = run(scenario())
    assert _trims(qos) == {"eth1": (TRIM_512, ["3"]), "eth2": (TRIM_512, ["3"])}
    assert all(not port["pfc_enabled"] for port in qos["ports"].values())
    queue_text, queue_json, port_text, port_json, unknown = outputs
    assert queue_text == SONIC_QUEUE_TRIM
    found = json.loads(queue_json)
    assert list(found) == ["Ethernet0"] and list(found["Ethernet0"]) == [f"UC{q}" for q in range(8)]
    assert found["Ethernet0"]["UC3"] == {
        "trimdroppacket": "8,000", "trimpacket": "20,000", "trimsentpacket": "12,000"}  # fmt: skip
    assert queue_json.startswith('{\n  "Ethernet0": {\n    "UC0": {\n      "trimdroppacket"')
    assert port_text == SONIC_PORT_TRIM
    assert port_json == (
        '{\n    "Ethernet0": {\n        "STATE": "U",\n        "TRIM_DRP_PKTS": "8,000",\n'
        '        "TRIM_PKTS": "20,000",\n        "TRIM_TX_PKTS": "12,000"\n    }\n}'
    )
    assert unknown == "Interface Ethernet9 doesn't exist"


NVUE_ROWS: list[tuple[str, list[str], dict[str, Any]]] = [
    (
        "lossy-multi-tc alone: the default profile, TC 1-3 on every port",
        ["nv set qos roce mode lossy-multi-tc"],
        {p: ({"size_bytes": 256, "dscp": 11, "queue": 0}, ["1", "2", "3"])
         for p in ("eth1", "eth2")},
    ),
    (
        "enabled by hand: only the listed classes of the listed port",
        ["nv set qos roce mode lossy-multi-tc",
         "nv set system forwarding packet-trim state enabled",
         "nv set system forwarding packet-trim size 300",
         "nv set system forwarding packet-trim remark dscp 10",
         "nv set system forwarding packet-trim switch-priority 6",
         "nv set interface swp2 packet-trim egress-eligibility traffic-class 3"],
        {"eth1": ({"size_bytes": 300, "dscp": 10, "queue": 6}, ["1", "2", "3"]),
         "eth2": ({"size_bytes": 300, "dscp": 10, "queue": 6}, ["3"])},
    ),
    (
        "state disabled: nothing trims",
        ["nv set qos roce mode lossy-multi-tc",
         "nv set system forwarding packet-trim state disabled"],
        {},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "lines", "expected"), NVUE_ROWS, ids=[r[0] for r in NVUE_ROWS])
def test_nvue_packet_trim_reaches_the_data_plane(
    name: str, lines: list[str], expected: dict[str, Any]
) -> None:
    with lab_connection() as (switch, conn):
        terminal = switch.terminal("admin")
        for line in [*lines, "nv config apply -y"]:
            output = conn.loop.run_until_complete(terminal.execute(line))
        assert output.startswith("applied"), output
        trims = {p: t for p, t in _trims(switch.qos()).items() if t != (None, [])}
        assert trims == expected


def test_nvue_port_level_remark_is_refused_by_the_lab() -> None:
    with lab_connection() as (switch, conn):
        terminal = switch.terminal("admin")
        for line in (
            "nv set qos roce mode lossy-multi-tc",
            "nv set system forwarding packet-trim remark dscp port-level",
        ):
            conn.loop.run_until_complete(terminal.execute(line))
        output = conn.loop.run_until_complete(terminal.execute("nv config apply -y"))
        assert "port-level" in output and not output.startswith("applied")


def test_nvue_shows_the_trim_counters_in_the_5_15_format() -> None:
    device = trim_plan("cumulus_nvue", ["swp1", "swp2"])
    driver = CumulusNvue()
    with lab_connection() as (switch, conn):
        with driver.transaction(conn, driver.render(device), 90) as txn:
            driver.confirm(conn, txn)
        assert _trims(switch.qos()) == {"eth1": (TRIM_512, ["3"]), "eth2": (TRIM_512, ["3"])}
        switch.dataplane.counters_snapshot = COUNTERS
        terminal = switch.terminal("admin")

        def show(line: str) -> str:
            return str(conn.loop.run_until_complete(terminal.execute(line)))

        assert show("nv show system forwarding packet-trim counters") == NVUE_GLOBAL
        assert show("nv show interface swp1 packet-trim counters") == NVUE_PORT
        assert show("nv show interface swp1 counters packet-trim") == NVUE_PORT
        assert json.loads(show("nv show interface swp1 counters packet-trim -o json")) == {
            "3": {"trimmed-packets-tx": 20000}
        }


def test_a_trimming_queue_without_trim_settings_is_refused() -> None:
    config = SwitchConfig.empty("leaf1", ["Ethernet1"])
    config.interfaces["Ethernet1"].qos.tx_queues[3] = TxQueue(trim=True)
    with pytest.raises(TranslationError, match="packet trimming is not set"):
        to_vswitch_qos(config)
    config.trim = TrimSettings(size_bytes=32, dscp=48, queue=6)
    with pytest.raises(TranslationError, match="at least 64 bytes"):
        to_vswitch_qos(config)
    config.trim = TrimSettings(size_bytes=100_000, dscp=48, queue=6)
    assert to_vswitch_qos(config)["ports"]["eth1"]["trim"]["size_bytes"] == 9216

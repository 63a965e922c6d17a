"""The agent's NVUE driver (agent/device/platforms/cumulus_nvue.py) against the lab's NVUE
personality, and both against the outputs NVIDIA documents.

1. Every profile renders, applies with ``--confirm``, confirms and reads back with no drift;
   consecutive pushes of different profiles converge through ``render_changes``; a hand
   change is found; counters and pending revisions read as the driver expects.
2. Outputs copied from NVIDIA's user guide (tests/data/platforms/cumulus_nvue/docs/, see its
   SOURCE.md) are read into the JSON shape of their tables; the driver parses that shape, and
   the lab switch's ``-o json`` answer for the same command has the same structure.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agent.device.lldp import read_nvue
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.state import diff
from agent.intent.plan import DevicePlan
from lab.mgmt.nvue.shows import counters_qos_json, pfc_watchdog_json, roce_text
from lab.mgmt.nvue.translate import effective
from tests.unit.lab_nvue_support import LoopConnection, NvueSwitch
from tests.unit.platform_helpers import PROFILES, ROOT, single_device_plan

DOCS = ROOT / "tests" / "data" / "platforms" / "cumulus_nvue" / "docs"
DRIVER = CumulusNvue()


def plan(profile: str) -> DevicePlan:
    ports: list[tuple[str, str, float]] = [("swp1", "10M", 5), ("swp2", "10M", 30)]
    return single_device_plan("cumulus_nvue", ports, profile, username="cumulus")


@contextmanager
def lab_connection() -> Iterator[tuple[NvueSwitch, LoopConnection]]:
    loop = asyncio.new_event_loop()
    try:
        switch = NvueSwitch()
        loop.run_until_complete(switch.personality.start())
        yield switch, LoopConnection(switch, loop)
    finally:
        loop.close()


def push(conn: LoopConnection, device: DevicePlan) -> list[str]:
    """What the agent's push does: read, diff, render the changes, apply, confirm."""
    desired = DRIVER.desired(device)
    lines = DRIVER.render_changes(desired, DRIVER.read_state(conn))
    with DRIVER.transaction(conn, lines, 90) as txn:
        DRIVER.confirm(conn, txn)
    return lines


def drift(conn: LoopConnection, device: DevicePlan) -> list[tuple[str, str, Any]]:
    found = diff("leaf1", DRIVER.desired(device), DRIVER.read_state(conn), DRIVER.managed)
    return [(d.interface, d.setting, d.actual) for d in found]


# ----------------------------------------------------------------------------- driver <-> lab


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_applies_confirms_and_reads_back_without_drift(profile: str) -> None:
    with lab_connection() as (switch, conn):
        device = plan(profile)
        with DRIVER.transaction(conn, DRIVER.render(device), 90) as txn:
            DRIVER.confirm(conn, txn)
        assert drift(conn, device) == []
        confirmed = conn.sent.index("nv config apply --confirm-yes")
        assert conn.sent[confirmed + 1] == "nv config save"
        assert switch.qos()["ports"]["eth1"]["pfc_enabled"] is True


def test_consecutive_pushes_of_different_profiles_converge() -> None:
    with lab_connection() as (switch, conn):
        lines = {}
        for profile in ("sonic-default", "nvidia-default", "pfc-only"):
            lines[profile] = push(conn, plan(profile))
            assert drift(conn, plan(profile)) == [], profile
        # sonic-default's lossless priority 4 was taken out again, in the data plane too
        assert "nv unset qos pfc default-global switch-priority" in lines["nvidia-default"]
        assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == [3]
        assert push(conn, plan("pfc-only")) == []  # converged: nothing left to change


def test_a_switch_goes_back_to_its_factory_state_watchdog_off_included() -> None:
    """What the fault drill's reset does: push the state read before the first change."""
    with lab_connection() as (switch, conn):
        factory = DRIVER.read_state(conn)
        assert not factory.watchdog.enabled
        push(conn, plan("nvidia-default"))
        lines = DRIVER.render_changes(factory, DRIVER.read_state(conn))
        assert "nv unset interface swp1 qos pfc-watchdog" in lines
        with DRIVER.transaction(conn, lines, 90) as txn:
            DRIVER.confirm(conn, txn)
        back = diff("leaf1", factory, DRIVER.read_state(conn), DRIVER.managed)
        assert back == []
        assert switch.qos()["ports"]["eth1"]["watchdog"]["enabled"] is False
        assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == []


def test_a_hand_change_over_ssh_is_found_as_drift() -> None:
    with lab_connection() as (switch, conn):
        push(conn, plan("nvidia-default"))
        hand = switch.terminal("admin")
        for line in (
            "nv set qos congestion-control default-global traffic-class 3 min-threshold 15000",
            "nv config apply -y",
        ):
            conn.loop.run_until_complete(hand.execute(line))
        assert drift(conn, plan("nvidia-default")) == [
            ("swp1", "queue[3].ecn", "15000-1500000@100%"),
            ("swp2", "queue[3].ecn", "15000-1500000@100%"),
        ]


def test_leaving_a_transaction_unconfirmed_rolls_the_data_plane_back() -> None:
    with lab_connection() as (switch, conn):
        before = switch.qos()
        with DRIVER.transaction(conn, DRIVER.render(plan("nvidia-default")), 90) as txn:
            assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == [3]
        assert txn.rolled_back and switch.qos() == before


def test_a_refused_line_detaches_the_staged_revision() -> None:
    with lab_connection() as (_, conn):
        lines = ["nv set qos roce mode lossless", "nv set qos pfc default-global switch-priority 9"]
        with (
            pytest.raises(Exception, match="Invalid value '9'"),
            DRIVER.transaction(conn, lines, 60),
        ):
            pytest.fail("must not run")
        assert conn.sent[-1] == "nv config detach"
        assert conn.show("nv config diff") == ""


def test_pending_revisions_are_read_as_the_driver_documents() -> None:
    with lab_connection() as (_, conn):
        conn.show("nv set qos roce")
        staged = DRIVER.read_sessions(conn)
        assert [(s.live, s.rollback_in_s) for s in staged] == [(False, None)]
        conn.show("nv config apply --confirm 5m -y")
        live = DRIVER.read_sessions(conn)
        assert [(s.live, s.rollback_in_s) for s in live] == [(True, 300.0)]
        DRIVER.abort_session(conn, live[0])
        assert DRIVER.read_sessions(conn) == []


def test_counters_come_from_the_data_plane() -> None:
    with lab_connection() as (switch, conn):
        push(conn, plan("nvidia-default"))
        queues = {str(tc): {"tx_packets": 10 + tc, "tx_bytes": 1000 * tc, "tail_drops": 0,
                            "ecn_marked": 0, "watchdog": {}} for tc in range(8)}  # fmt: skip
        queues["3"] |= {"ecn_marked": 42, "watchdog": {"state": "stormed", "storms_detected": 2}}
        switch.dataplane.counters_snapshot = {
            "ports": {
                "eth1": {
                    "pfc": {"rx_xoff": [0, 0, 0, 7, 0, 0, 0, 0], "rx_xon": [0, 0, 0, 1] + [0] * 4,
                            "tx_xoff": [0, 0, 0, 5, 0, 0, 0, 0], "tx_xon": [0] * 8},
                    "ingress": {"headroom_drops": [0, 0, 0, 4, 0, 0, 0, 0]},
                    "queues": queues,
                }
            }
        }  # fmt: skip
        counters = DRIVER.read_counters(conn).interfaces["swp1"]
        assert counters.pfc_rx[3] == 8 and counters.pfc_tx[3] == 5
        assert (counters.queues[3].tx_packets, counters.queues[3].tx_bytes) == (13, 3000)
        assert counters.queues[3].ecn_marked_packets == 42  # TC 3 is the only ECN class
        assert counters.headroom_drops[3] == 4
        assert counters.watchdog[3].storms_detected == 2 and counters.watchdog[3].stormed


def test_discovery_reads_ports_and_lldp_neighbours() -> None:
    with lab_connection() as (_, conn):
        found = read_nvue(conn)
        assert found.name == "leaf1"
        assert {n: p.speed_bps for n, p in found.ports.items()} == {
            "swp1": 10_000_000,
            "swp2": 10_000_000,
        }
        assert [(n.local_port, n.system_name, n.port) for n in found.neighbors] == [
            ("swp1", "h1", "eth1")
        ]


# ----------------------------------------------------------------------------- vendor outputs


def table_rows(block: list[str]) -> tuple[list[str], list[list[str]]]:
    """A column table (header, dashes, rows) -> header names and cells, split on the
    columns the dash rule draws."""
    rule = next(i for i, line in enumerate(block) if re.fullmatch(r"\s*-[-\s]*", line))
    spans = [m.span() for m in re.finditer(r"-+", block[rule])]
    header = block[rule - 1]
    names = [header[a : (spans[i + 1][0] if i + 1 < len(spans) else None)].strip()
             for i, (a, _) in enumerate(spans)]  # fmt: skip
    rows = []
    for line in block[rule + 1 :]:
        if not line.strip():
            continue
        cells = [line[a : (spans[i + 1][0] if i + 1 < len(spans) else None)].strip()
                 for i, (a, _) in enumerate(spans)]  # fmt: skip
        rows.append(cells)
    return names, rows


def number(cell: str) -> int | str:
    """``0 Bytes`` -> 0; other cells as they are."""
    head = cell.split()[0] if cell.split() else cell
    return int(head) if head.isdigit() else cell


def sections(text: str) -> dict[str, list[str]]:
    """Titled tables (``Title`` over ``====``) of one documented output."""
    lines = text.splitlines()[1:]  # without the command line
    found: dict[str, list[str]] = {"": []}
    title = ""
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and re.fullmatch(r"\s*=+\s*", lines[i + 1]):
            title = line.strip()
            found[title] = []
        elif not re.fullmatch(r"\s*=+\s*", line):
            found[title].append(line)
    return found


COUNTER_TABLES = {
    "Ingress Buffer Statistics": "ingress-buffer-stats",
    "Egress Queue Statistics": "egress-queue-stats",
    "PFC Statistics": "pfc-stats",
}


def documented_counters() -> dict[str, Any]:
    tables = sections((DOCS / "nv_show_interface_swp1_counters_qos.txt").read_text())
    data: dict[str, Any] = {}
    for title, key in COUNTER_TABLES.items():
        names, rows = table_rows(tables[title])
        data[key] = {
            row[0]: dict(zip(names[1:], map(number, row[1:]), strict=True)) for row in rows
        }
    names, rows = table_rows(tables["Qos Port Statistics"])
    data["port-stats"] = {
        direction: {row[0]: number(row[col]) for row in rows if row[col] != "n/a"}
        for direction, col in (("rx-stats", 1), ("tx-stats", 2))
    }
    return data


def documented_watchdog() -> dict[str, Any]:
    tables = sections((DOCS / "nv_show_interface_swp1_qos_pfc_watchdog.txt").read_text())
    _, top = table_rows(tables[""])
    names, rows = table_rows(tables["PFC WD Status"])
    return {
        top[0][0]: top[0][2],
        "status": {row[0]: dict(zip(names[1:], map(number, row[1:]), strict=True)) for row in rows},
    }


def shape(data: Any) -> Any:
    """The keys of a JSON document, recursively (values dropped)."""
    if isinstance(data, dict):
        return {key: shape(value) for key, value in data.items()}
    return None


def test_the_driver_parses_the_documented_watchdog_table() -> None:
    state = DRIVER.state_from_config({"interface": {"swp1": {"type": "swp"}}})
    counters = DRIVER.counters_from_json(
        "sw1", 0.0, state, {"swp1": {}}, {"swp1": documented_watchdog()}
    )
    watchdog = counters.interfaces["swp1"].watchdog
    assert [(tc, w.storms_detected, w.stormed) for tc, w in sorted(watchdog.items())] == [
        (0, 0, False), (1, 3, False), (2, 2, True), (3, 0, False),
        (4, 0, False), (5, 0, False), (6, 0, False), (7, 3, True),
    ]  # fmt: skip
    assert watchdog[2].storms_restored == 1  # two detections, one still going on


def test_the_lab_answers_the_documented_shapes() -> None:
    assert shape(counters_qos_json({}, "swp1")) == shape(documented_counters())
    assert shape(pfc_watchdog_json({}, "swp1", True)) == shape(documented_watchdog())


def test_the_driver_reads_the_documented_counters_as_zero() -> None:
    state = DRIVER.state_from_config({"interface": {"swp1": {"type": "swp"}}})
    counters = DRIVER.counters_from_json(
        "sw1", 0.0, state, {"swp1": documented_counters()}, {"swp1": {}}
    ).interfaces["swp1"]
    assert counters.pfc_rx == (0,) * 8 and counters.headroom_drops == (0,) * 8
    assert all(q.tx_packets == 0 for q in counters.queues.values())


def roce_rows(text: str) -> dict[str, str]:
    """``nv show qos roce``'s first table: row path -> applied value (else operational)."""
    block = sections(text)[""]
    names, rows = table_rows(block)
    rule = next(i for i, line in enumerate(block) if re.fullmatch(r"\s*-[-\s]*", line))
    found: dict[str, str] = {}
    parent = ""
    for line, cells in zip(block[rule + 1 :], rows, strict=False):
        key = cells[0]
        if line.startswith("  "):
            key = f"{parent}.{key}"
        else:
            parent = key
        value = cells[names.index("applied")] or cells[names.index("operational")]
        found[key] = value
    return found


def test_show_qos_roce_matches_the_documented_table() -> None:
    documented = roce_rows((DOCS / "nv_show_qos_roce.txt").read_text())
    with lab_connection() as (switch, conn):
        conn.show("nv set qos roce mode lossless-single-ipool")
        conn.show("nv config apply -y")
        lab = roce_rows("cmd\n" + conn.show("nv show qos roce"))
        state = effective(switch.personality.store.applied.tree)
    assert {k: v for k, v in lab.items() if k in documented} == documented
    assert roce_text(state).splitlines()[0].split() == ["operational", "applied"]

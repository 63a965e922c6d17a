"""CONFIG_DB -> the lab data plane: what each SONiC table does to the ``set_qos`` payload the
data plane accepted, and the agent's own SONiC driver driving the lab switch in-process."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agent.device.platforms.base import Connection
from agent.device.platforms.sonic import Sonic
from agent.device.state import diff
from tests.unit.platform_helpers import single_device_plan
from tests.unit.sonic_lab_helpers import LabSonic, run


def test_factory_config_db_in_the_data_plane() -> None:
    async def scenario() -> dict[str, Any]:
        lab = await LabSonic().start()
        return lab.qos()

    qos = run(scenario())
    assert qos["trust"] == "dscp"
    assert qos["dscp_to_tc"]["26"] == 1 and qos["dscp_to_tc"]["3"] == 3
    assert qos["dscp_to_tc"]["8"] == 0 and len(qos["dscp_to_tc"]) == 64
    assert qos["watchdog"]["enabled"] is True and qos["watchdog"]["detection_ms"] == 200
    eth1 = qos["ports"]["eth1"]
    assert (eth1["pfc_enabled"], eth1["pfc_priorities"]) == (True, [3, 4])
    assert eth1["queues"]["3"] == {
        "ecn": {"min_bytes": 1048576, "max_bytes": 2097152, "max_probability": 5},
        "bandwidth_percent": 15,
    }
    assert eth1["queues"]["0"] == {"bandwidth_percent": 14}
    assert "7" not in eth1["queues"]
    assert eth1["watchdog"]["detection_ms"] == 200 and eth1["watchdog"]["polling_ms"] == 200


def _op(op: str, path: str, value: Any = None) -> dict[str, Any]:
    return {"op": op, "path": path, **({"value": value} if value is not None else {})}


# (what, patch, (port, key path in the payload), expected value)
EFFECTS = [
    (
        "pfc_enable 3 only",
        [_op("replace", "/PORT_QOS_MAP/Ethernet4/pfc_enable", "3")],
        ("eth2", "pfc_priorities"),
        [3],
    ),
    (
        "strict scheduler",
        [_op("replace", "/SCHEDULER/scheduler.1", {"type": "STRICT"})],
        ("eth1", "queues.4"),
        {"ecn": {"min_bytes": 1048576, "max_bytes": 2097152, "max_probability": 5}, "strict": True},
    ),
    (
        "ECN off (ecn_none)",
        [_op("replace", "/WRED_PROFILE/AZURE_LOSSLESS/ecn", "ecn_none")],
        ("eth1", "queues.3"),
        {"bandwidth_percent": 15},
    ),
    (
        "watchdog alert on one port",
        [_op("replace", "/PFC_WD/Ethernet0/action", "alert")],
        ("eth1", "watchdog.action"),
        "alert",
    ),
    (
        "watchdog removed from a port",
        [_op("remove", "/PFC_WD/Ethernet4")],
        ("eth2", "watchdog.enabled"),
        False,
    ),
    (
        "detection time",
        [_op("replace", "/PFC_WD/Ethernet4/detection_time", "400")],
        ("eth2", "watchdog.detection_ms"),
        400,
    ),
    (
        "no DSCP map on a port: untrusted",
        [_op("remove", "/PORT_QOS_MAP/Ethernet4/dscp_to_tc_map")],
        ("eth2", "trust"),
        "none",
    ),
    (
        "DSCP 26 to TC 3",
        [_op("replace", "/DSCP_TO_TC_MAP/AZURE/26", "3")],
        ("", "dscp_to_tc.26"),
        3,
    ),
]


def _dig(qos: dict[str, Any], port: str, path: str) -> Any:
    value: Any = qos["ports"][port] if port else qos
    for key in path.split("."):
        value = value[key]
    return value


@pytest.mark.parametrize(("what", "ops", "where", "expected"), EFFECTS, ids=[e[0] for e in EFFECTS])
def test_config_db_change_reaches_the_data_plane(
    what: str, ops: list[dict[str, Any]], where: tuple[str, str], expected: Any
) -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        await lab.write("/tmp/p.json", json.dumps(ops))
        out = await lab.run("sudo config apply-patch /tmp/p.json")
        assert out.endswith("Patch applied successfully."), out
        assert _dig(lab.qos(), *where) == expected

    run(scenario())


def test_per_port_dscp_maps_are_refused_by_the_lab() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        ops = [
            _op("add", "/DSCP_TO_TC_MAP/OTHER", {str(d): "0" for d in range(64)}),
            _op("replace", "/PORT_QOS_MAP/Ethernet4/dscp_to_tc_map", "OTHER"),
        ]
        await lab.write("/tmp/p.json", json.dumps(ops))
        out = await lab.run("sudo config apply-patch /tmp/p.json")
        assert "ports bind different DSCP_TO_TC_MAPs (AZURE, OTHER)" in out
        assert "OTHER" not in lab.switch.db["DSCP_TO_TC_MAP"]

    run(scenario())


# ------------------------------------------------------------------ the agent's driver, in-process


class ShellConnection(Connection):
    """The agent's Connection, answered by the lab switch's shell (its loop in a thread)."""

    def __init__(self, lab: LabSonic, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(netmiko=None, device="leaf1")
        self.lab, self.loop = lab, loop

    def _execute(self, line: str) -> str:
        future = asyncio.run_coroutine_threadsafe(self.lab.shell.execute(line), self.loop)
        return future.result(timeout=30)

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        return self._execute(command)

    def send_lines(
        self, lines: list[str], read_timeout: float = 30.0, terminator: str = "#"
    ) -> str:
        assert terminator == r"^> "  # the heredoc's lines are answered with bash's PS2
        for line in lines:
            assert self._execute(line) == ""
            expected = "> " if line != lines[-1] else "admin@leaf1:~$ "
            assert self.lab.shell.prompt() == expected
        return ""


@pytest.fixture
def lab_in_thread() -> Iterator[tuple[LabSonic, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    lab = asyncio.run_coroutine_threadsafe(LabSonic().start(), loop).result(timeout=30)
    yield lab, loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    loop.close()


def test_driver_transaction_applies_the_plan_and_confirms(
    lab_in_thread: tuple[LabSonic, asyncio.AbstractEventLoop],
) -> None:
    lab, loop = lab_in_thread
    conn = ShellConnection(lab, loop)
    plan = single_device_plan(
        "sonic", [("Ethernet0", "10M", 1), ("Ethernet4", "10M", 1)], "nvidia-default"
    )
    platform = Sonic()
    before = platform.read_state(conn)
    assert diff("leaf1", platform.desired(plan), before)
    lines = platform.render_changes(platform.desired(plan), before)  # as the push path does
    with platform.transaction(conn, lines, confirm_timeout_s=60) as txn:
        assert json.loads(conn.show("sudo config list-checkpoints")) == [txn.name]
        [session] = platform.read_sessions(conn)
        assert session.rolls_back and session.rollback_in_s == 60.0
        platform.confirm(conn, txn)
    assert diff("leaf1", platform.desired(plan), platform.read_state(conn)) == []
    assert platform.read_sessions(conn) == []
    assert lab.qos()["dscp_to_tc"]["26"] == 3
    assert lab.qos()["ports"]["eth1"]["pfc_priorities"] == [3]


def test_driver_leaving_unconfirmed_rolls_back(
    lab_in_thread: tuple[LabSonic, asyncio.AbstractEventLoop],
) -> None:
    lab, loop = lab_in_thread
    conn = ShellConnection(lab, loop)
    plan = single_device_plan(
        "sonic", [("Ethernet0", "10M", 1), ("Ethernet4", "10M", 1)], "nvidia-default"
    )
    factory, factory_qos = lab.switch.db, lab.qos()
    platform = Sonic()
    with platform.transaction(conn, platform.render(plan), confirm_timeout_s=60) as txn:
        assert lab.qos() != factory_qos
    assert txn.rolled_back and not txn.notes
    assert lab.switch.db == factory and lab.qos() == factory_qos
    assert platform.read_sessions(conn) == []


def test_driver_orphan_checkpoint_is_read_from_its_content(
    lab_in_thread: tuple[LabSonic, asyncio.AbstractEventLoop],
) -> None:
    """A checkpoint without its timer (the agent died before arming it): equal to the running
    CONFIG_DB, nothing went in and aborting only deletes it; different, the patch is live and
    aborting rolls back to it."""
    lab, loop = lab_in_thread
    conn = ShellConnection(lab, loop)
    platform = Sonic()
    name = "roce-agent-20260101-000000-001"
    conn.show(f"sudo config checkpoint {name}")
    [session] = platform.read_sessions(conn)
    assert (session.live, session.rolls_back) == (False, False)
    changed = '[{"op": "replace", "path": "/DSCP_TO_TC_MAP/AZURE/26", "value": "3"}]'
    conn.send_lines(["cat > /tmp/c.json <<'EOF'", changed, "EOF"], terminator=r"^> ")
    assert conn.show("sudo config apply-patch /tmp/c.json").endswith("Patch applied successfully.")
    [session] = platform.read_sessions(conn)
    assert (session.live, session.rolls_back) == (True, False)
    platform.abort_session(conn, session)
    assert platform.read_sessions(conn) == []
    assert lab.switch.db["DSCP_TO_TC_MAP"]["AZURE"]["26"] == "1"  # rolled back
    conn.show(f"sudo config checkpoint {name}")
    [session] = platform.read_sessions(conn)
    assert (session.live, session.rolls_back) == (False, False)
    platform.abort_session(conn, session)  # nothing applied: the checkpoint is deleted
    assert platform.read_sessions(conn) == []


# (timer state as list-timers --all prints it, live, rolls back)
TIMER_STATES = [
    ("Sun 2026-11-29 02:10:00 UTC 4min 58s left n/a n/a {n}-rollback.timer {n}-rollback.service",
     True, True),
    ("n/a n/a Sun 2026-11-29 02:10:00 UTC 3s ago {n}-rollback.timer {n}-rollback.service",
     True, False),
    ("", True, False),  # content unknown here: live until read_sessions compares it
]  # fmt: skip


@pytest.mark.parametrize(
    ("timers", "live", "rolls_back"), TIMER_STATES, ids=["running", "elapsed", "none"]
)
def test_driver_reads_the_timer_state(timers: str, live: bool, rolls_back: bool) -> None:
    name = "roce-agent-20260101-000000-001"
    [session] = Sonic.sessions_from_text("s1", json.dumps([name]), timers.format(n=name))
    assert (session.live, session.rolls_back) == (live, rolls_back)


def test_driver_unsaved_names_the_qos_a_reload_would_lose_until_config_save(
    lab_in_thread: tuple[LabSonic, asyncio.AbstractEventLoop],
) -> None:
    lab, loop = lab_in_thread
    conn = ShellConnection(lab, loop)
    platform = Sonic()
    conn.show("sudo config save -y")
    assert platform.unsaved(conn) == []
    patch = [_op("replace", "/PORT_QOS_MAP/Ethernet0/pfc_enable", "3")]  # factory: 3,4
    conn.send_lines(["cat > /tmp/p.json <<'EOF'", json.dumps(patch), "EOF"], terminator=r"^> ")
    assert "Patch applied successfully" in conn.show("sudo config apply-patch /tmp/p.json")
    unsaved = platform.unsaved(conn)
    assert unsaved and all(line.startswith("Ethernet0 ") for line in unsaved), unsaved
    assert any("pfc" in line for line in unsaved), unsaved
    conn.show("sudo config save -y")
    assert platform.unsaved(conn) == []

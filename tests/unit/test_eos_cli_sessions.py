"""lab.mgmt config sessions: diff, commit, abort, commit timer + confirm/rollback (fake clock),
visibility across terminals, sessions kept after a disconnect (as on EOS), the pending cap.
No root needed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from lab.mgmt.eos.cli import CliSession
from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.eos.render import render_text
from lab.mgmt.eos.sessions import format_duration, parse_commit_timer
from lab.mgmt.switch import PortInfo, SwitchManager
from lab.mgmt.testing import FakeClock, FakeDataplane, fake_switch_config

Scenario = Callable[[EosPersonality, FakeDataplane, FakeClock], Awaitable[None]]


def run(scenario: Scenario) -> None:
    async def main() -> None:
        dataplane = FakeDataplane(fake_switch_config("leaf1", ["eth1", "eth2"]))
        clock = FakeClock()
        manager = SwitchManager(
            "leaf1", [PortInfo("Ethernet1"), PortInfo("Ethernet2")], dataplane, clock
        )
        eos = EosPersonality(manager)
        await eos.start()
        await scenario(eos, dataplane, clock)

    asyncio.run(main())


async def lines(cli: CliSession, *commands: str) -> list[str]:
    return [await cli.execute(command) for command in commands]


def state(eos: EosPersonality, name: str) -> str:
    return eos.sessions[name].state


def pfc_on(dataplane: FakeDataplane) -> bool:
    return bool(dataplane.config["qos"]["ports"].get("eth1", {}).get("pfc_enabled"))


@pytest.mark.parametrize(
    ("text", "seconds"), [("00:00:03", 3), ("0:05:00", 300), ("12:00:01", 43201)]
)
def test_commit_timer_values(text: str, seconds: int) -> None:
    assert parse_commit_timer(text) == seconds


@pytest.mark.parametrize("text", ["00:00:00", "1:2:3", "00:60:00", "3", "aa:bb:cc"])
def test_bad_commit_timer_values(text: str) -> None:
    with pytest.raises(ValueError):
        parse_commit_timer(text)


def test_format_duration() -> None:
    assert format_duration(2.2) == "0:00:03"
    assert format_duration(3725) == "1:02:05"


def test_session_edits_nothing_until_commit() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, _clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        before = render_text(eos.manager.running)
        assert await lines(cli, "configure session s1", "interface Ethernet1") == ["", ""]
        assert cli.prompt() == "leaf1(config-s-s1-if-Et1)#"
        await lines(cli, "priority-flow-control on", "priority-flow-control priority 3 no-drop")
        assert render_text(eos.manager.running) == before and not pfc_on(dataplane)
        diff = await cli.execute("show session-config diffs")
        assert diff.splitlines()[:2] == [
            "--- system:/running-config",
            "+++ session:/s1-session-config",
        ]
        assert "+   priority-flow-control on" in diff.splitlines()
        assert "+   priority-flow-control priority 3 no-drop" in diff.splitlines()
        assert "priority-flow-control on" in await cli.execute("show session-config")
        assert await cli.execute("commit") == ""
        assert cli.prompt() == "leaf1#"
        assert pfc_on(dataplane)
        assert "   priority-flow-control on" in render_text(eos.manager.running).splitlines()
        sessions = await cli.execute("show configuration sessions | json")
        assert '"state": "completed"' in sessions

    run(scenario)


def test_abort_discards_and_end_keeps_the_session_pending() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, _clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        await lines(cli, "configure session s1", "interface Ethernet1", "priority-flow-control on")
        assert await cli.execute("end") == ""
        assert eos.sessions["s1"].state == "pending"
        await cli.execute("configure session s1")  # re-enter: the edits are still there
        assert "+   priority-flow-control on" in await cli.execute("show session-config diffs")
        assert await cli.execute("abort") == ""
        assert "s1" not in eos.sessions and not pfc_on(dataplane)
        assert await cli.execute("configure session s1 commit") == "% Session s1 does not exist"

    run(scenario)


def test_commit_timer_expiry_rolls_back() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        other = CliSession(eos, "ops", "vty2")
        before = render_text(eos.manager.running)
        await lines(cli, "configure session s1", "interface Ethernet1", "priority-flow-control on")
        assert await cli.execute("commit timer 00:00:03") == ""
        assert pfc_on(dataplane) and render_text(eos.manager.running) != before
        table = await other.execute("show configuration sessions detail")
        assert "pendingCommitTimer" in table and "0:00:03" in table
        clock.advance(2.0)
        await eos.sessions.run_expired_timers()
        assert pfc_on(dataplane)
        clock.advance(1.5)
        await eos.sessions.run_expired_timers()
        assert not pfc_on(dataplane)
        assert render_text(eos.manager.running) == before
        assert "s1" not in eos.sessions

    run(scenario)


def test_confirmed_commit_from_another_terminal_stays() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        other = CliSession(eos, "admin", "vty2")
        await lines(cli, "configure session s1", "interface Ethernet1", "priority-flow-control on")
        await cli.execute("commit timer 00:00:10")
        cli.disconnect()  # the committing connection is gone; the timer keeps running
        assert state(eos, "s1") == "pendingCommitTimer"
        assert await other.execute("configure session s1 commit") == ""
        assert state(eos, "s1") == "completed"
        assert not clock.armed()
        clock.advance(60)
        await eos.sessions.run_expired_timers()
        assert pfc_on(dataplane)

    run(scenario)


def test_one_unconfirmed_commit_at_a_time_and_abort_rolls_it_back() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, _clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        other = CliSession(eos, "admin", "vty2")
        await lines(cli, "configure session s1", "interface Ethernet1", "priority-flow-control on")
        await cli.execute("commit timer 00:05:00")
        await lines(other, "configure session s2", "qos map dscp 10 to traffic-class 5")
        refused = await other.execute("commit")
        assert refused.startswith("% Cannot commit session s2: session s1 has a pending commit")
        assert other.prompt() == "leaf1(config-s-s2)#"
        assert dataplane.config["qos"]["dscp_to_tc"] == {}
        assert await cli.execute("configure session s1 abort") == ""
        assert not pfc_on(dataplane)
        assert await other.execute("commit") == ""
        assert dataplane.config["qos"]["dscp_to_tc"] == {"10": 5}

    run(scenario)


def test_disconnect_keeps_pending_sessions_like_eos() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, _clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        before = render_text(eos.manager.running)
        await lines(cli, "configure session cut", "interface Ethernet1", "priority-flow-control on")
        cli.disconnect()
        watcher = CliSession(eos, "ops", "vty2")
        data = json.loads(await watcher.execute("show configuration sessions detail | json"))
        entry = data["sessions"]["cut"]
        assert (entry["state"], entry["user"], entry["terminal"]) == ("pending", "admin", "")
        assert entry["commitTimerRemaining"] is None and entry["createdTime"] > 0
        assert data["maxOpenSessions"] == 5
        assert render_text(eos.manager.running) == before and not pfc_on(dataplane)
        # Another connection can pick the session up again, and commit it.
        await lines(watcher, "configure session cut", "commit")
        assert pfc_on(dataplane)

    run(scenario)


def test_leaked_sessions_fill_the_pending_cap_across_connections() -> None:
    async def scenario(eos: EosPersonality, _dataplane: FakeDataplane, _clock: FakeClock) -> None:
        for i in range(5):
            cli = CliSession(eos, "admin", f"vty{i}")
            await lines(cli, f"configure session leak{i}", "interface Ethernet1")
            cli.disconnect()
        late = CliSession(eos, "admin", "vty9")
        assert await late.execute("configure session one-more") == (
            "% Maximum number of pending sessions has been reached"
        )
        assert await late.execute("configure session leak0 abort") == ""
        assert await late.execute("configure session one-more") == ""

    run(scenario)


def test_refused_commit_keeps_session_and_running_config() -> None:
    async def scenario(eos: EosPersonality, dataplane: FakeDataplane, _clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        before = render_text(eos.manager.running)
        await lines(
            cli,
            "configure session bad",
            "interface Ethernet1",
            "uc-tx-queue 1",
            "bandwidth percent 80",
            "uc-tx-queue 2",
            "bandwidth percent 80",
        )
        error = await cli.execute("commit")
        assert error.startswith("% Data plane refused the change:")
        assert "adds up to 160" in error
        assert render_text(eos.manager.running) == before
        assert eos.sessions["bad"].state == "pending"
        assert cli.prompt().startswith("leaf1(config-s-bad")

    run(scenario)


def test_session_limits_and_names() -> None:
    async def scenario(eos: EosPersonality, _dataplane: FakeDataplane, _clock: FakeClock) -> None:
        cli = CliSession(eos, "admin", "vty1")
        for i in range(5):
            assert await cli.execute(f"configure session s{i}") == ""
            await cli.execute("end")
        assert await cli.execute("configure session s5") == (
            "% Maximum number of pending sessions has been reached"
        )
        await cli.execute("configure session s0")
        await cli.execute("abort")
        await cli.execute("configure session")
        assert cli.prompt() == "leaf1(config-s-session1)#"
        assert await cli.execute("rollback clean-config") == ""
        assert await cli.execute("show session-config named s1 diffs") == ""

    run(scenario)

"""NVUE personality: nv set/unset/diff, apply with and without confirm, the confirm timer,
revisions that outlive their SSH session, history, save + restart, refused input.

In-process (FakeDataplane validates every payload as the real data plane would, FakeClock
drives the confirm timer); what a test asserts is what a user sees: the terminal's output and
the QoS the data plane runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from tests.unit.lab_nvue_support import NvueSwitch, run

LOSSLESS_TC3 = "nv set qos congestion-control default-global traffic-class 3 min-threshold 20000"


def scenario(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def no_drop(switch: NvueSwitch, port: str = "eth1") -> Any:
    return switch.qos()["ports"][port]["pfc_priorities"]


def ecn_min(switch: NvueSwitch, port: str = "eth1", tc: str = "3") -> Any:
    return switch.qos()["ports"][port]["queues"].get(tc, {}).get("ecn", {}).get("min_bytes")


# ----------------------------------------------------------------------------- refused input


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("nv set qos bogus 1", "Error: Invalid Command: qos bogus (unknown keyword 'bogus')"),
        ("nv set qos roce mode fast", "Error: Invalid value 'fast': expected one of lossless, "
         "lossy, lossless-single-ipool, lossy-multi-tc"),
        ("nv set qos pfc default-global switch-priority 8",
         "Error: Invalid value '8': 8 is not in integer:0 - 7"),
        ("nv set qos pfc my_pfc switch-priority 3",
         "Error: Invalid value 'my_pfc': the lab switch supports profile(s) default-global only"),
        ("nv set qos egress-scheduler default-global traffic-class 3 bw-percent 0",
         "Error: Invalid value '0': 0 is not in integer:1 - 100"),
        ("nv set qos congestion-control default-global traffic-class 3 probability x",
         "Error: Invalid value 'x': expected integer:0 - 100"),
        ("nv set interface swp9 qos pfc-watchdog",
         "Error: Invalid value 'swp9': interface swp9 does not exist"),
        ("nv set qos mapping default-global trust",
         "Error: Incomplete Command: nv set qos mapping default-global trust <arg> "
         "(enum:l2, l3, port, both)"),
        ("nv set qos roce mode lossless extra",
         "Error: Invalid Command: qos roce mode lossless extra (unknown keyword 'extra')"),
        ("nv frobnicate", "Error: Invalid Command: frobnicate"),
        ("ls /etc", "-bash: ls: command not found"),
    ],
)  # fmt: skip
def test_refused_input_answers_with_nvue_text_and_stages_nothing(line: str, message: str) -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        assert await terminal.execute(line) == message
        assert await terminal.execute("nv config diff") == ""

    scenario(test)


# ----------------------------------------------------------------------------- set / unset / diff


def test_set_and_unset_edit_the_pending_revision_and_diff_shows_it() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        watchdog = "nv set interface swp1-2 qos pfc-watchdog"
        await run(terminal, "nv set qos roce", LOSSLESS_TC3, watchdog)
        diff = json.loads(await terminal.execute("nv config diff -o json"))
        assert diff == [
            {
                "set": {
                    "qos": {
                        "roce": {"enable": "on"},
                        "congestion-control": {
                            "default-global": {"traffic-class": {"3": {"min-threshold": 20000}}}
                        },
                    },
                    "interface": {
                        "swp1": {"qos": {"pfc-watchdog": {}}},
                        "swp2": {"qos": {"pfc-watchdog": {}}},
                    },
                }
            }
        ]
        # unset prunes what it empties; nothing applied yet, so the data plane is untouched
        await run(terminal, "nv unset qos congestion-control", "nv unset interface swp1-2 qos")
        diff = json.loads(await terminal.execute("nv config diff -o json"))
        assert diff == [{"set": {"qos": {"roce": {"enable": "on"}}}}]
        assert no_drop(switch) == []

    scenario(test)


def test_diff_of_an_applied_change_being_undone_lists_the_unset() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply -y", "nv unset qos roce")
        assert json.loads(await terminal.execute("nv config diff -o json")) == [
            {"unset": {"qos": {}}}  # unset prunes the containers it empties
        ]
        assert (await terminal.execute("nv config diff")).startswith("- unset:\n    qos:")

    scenario(test)


def test_detach_discards_the_pending_revision() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config detach")
        assert await terminal.execute("nv config diff") == ""
        assert await terminal.execute("nv config apply -y") == "applied [rev_id: 3]"
        assert no_drop(switch) == []  # the detached RoCE change was not applied

    scenario(test)


# ----------------------------------------------------------------------------- apply / confirm


def test_apply_reaches_the_data_plane() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        outputs = await run(terminal, "nv set qos roce", LOSSLESS_TC3, "nv config apply -y")
        assert outputs[-1] == "applied [rev_id: 2]"
        assert switch.qos()["dscp_to_tc"]["26"] == 3
        assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == [3]
        assert ecn_min(switch) == 20000
        assert await terminal.execute("nv config diff") == ""

    scenario(test)


def test_confirm_yes_keeps_and_confirm_no_rolls_back() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply -y")
        await run(terminal, LOSSLESS_TC3, "nv config apply --confirm 90s -y")
        assert ecn_min(switch) == 20000
        assert await terminal.execute("nv config apply --confirm-no") == "Rolled back [rev_id: 4]"
        assert ecn_min(switch) == 150000  # RoCE's default again, in the data plane
        await run(terminal, LOSSLESS_TC3, "nv config apply --confirm 90s -y")
        assert await terminal.execute("nv config apply --confirm-yes") == "Confirmed [rev_id: 5]"
        await switch.expire(3600)
        assert ecn_min(switch) == 20000
        assert await terminal.execute("nv config apply --confirm-status") == (
            "No applied revision is waiting for confirmation"
        )

    scenario(test)


def test_the_confirm_timer_rolls_back_by_itself() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply -y")
        await run(terminal, LOSSLESS_TC3, "nv config apply --confirm 2m -y")
        await switch.expire(119)
        assert ecn_min(switch) == 20000
        assert "1 seconds left" in await terminal.execute("nv config apply --confirm-status")
        await switch.expire(1)
        assert ecn_min(switch) == 150000
        history = await terminal.execute("nv config history")
        assert "Rollback of revision 3: confirm timer expired" in history
        assert "Error: there is no applied" in await terminal.execute(
            "nv config apply --confirm-yes"
        )

    scenario(test)


def test_confirm_without_a_time_waits_ten_minutes() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply --confirm")
        assert "600 seconds left" in await terminal.execute("nv config apply --confirm-status")

    scenario(test)


def test_a_second_apply_is_refused_while_one_waits_for_confirmation() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply --confirm 60s -y", LOSSLESS_TC3)
        refused = await terminal.execute("nv config apply -y")
        assert refused.startswith("Error: revision 2 is applied and waiting for confirmation")
        assert ecn_min(switch) == 150000

    scenario(test)


@pytest.mark.parametrize("value", ["0", "10x", "-5"])
def test_a_bad_confirm_time_is_refused_and_nothing_applies(value: str) -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce")
        output = await terminal.execute(f"nv config apply --confirm={value} -y")
        assert output.startswith("Error: Invalid value")
        assert no_drop(switch) == []

    scenario(test)


def test_a_revision_the_data_plane_refuses_is_not_applied() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal()
        await run(
            terminal,
            "nv set qos roce",
            "nv set qos congestion-control default-global traffic-class 3 min-threshold 900000",
            "nv set qos congestion-control default-global traffic-class 3 max-threshold 1000",
        )
        refused = await terminal.execute("nv config apply -y")
        assert refused.startswith("Error: Invalid config: ")
        assert no_drop(switch) == []
        assert "min-threshold: 900000" in await terminal.execute("nv config diff")

    scenario(test)


# ----------------------------------------------------------------------------- sessions


def test_a_pending_revision_survives_its_disconnected_terminal() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        first = switch.terminal()
        await run(first, "nv set qos roce")
        first.disconnect()
        second = switch.terminal()
        assert "roce:" in await second.execute("nv config diff")
        # another user's pending revision is theirs alone
        assert await switch.terminal("admin").execute("nv config diff") == ""
        assert await second.execute("nv config apply -y") == "applied [rev_id: 2]"
        assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == [3]

    scenario(test)


def test_an_unconfirmed_apply_survives_its_terminal_and_another_one_confirms_it() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        first = switch.terminal()
        await run(first, "nv set qos roce", "nv config apply --confirm 5m -y")
        first.disconnect()
        second = switch.terminal("admin")
        status = await second.execute("nv config apply --confirm-status")
        assert status == (
            "Revision 2 is waiting for confirmation: 300 seconds left before the automatic rollback"
        )
        await run(second, "nv config apply --confirm-yes")
        await switch.expire(600)
        assert switch.qos()["ports"]["eth1"]["pfc_priorities"] == [3]

    scenario(test)


def test_history_lists_revision_date_user_and_type_newest_first() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal("admin")
        await run(terminal, "nv set qos roce", 'nv config apply -y -m "roce on"')
        lines = (await terminal.execute("nv config history")).splitlines()
        assert lines[0].split() == ["Rev", "ID", "Date", "User", "Type", "Message"]
        assert lines[2].split()[0] == "2" and lines[2].split()[2:] == ["admin", "CLI", "roce", "on"]
        assert lines[3].split()[0] == "1" and "startup configuration" in lines[3]

    scenario(test)


# ----------------------------------------------------------------------------- startup


def test_save_and_restart_on_the_same_state_dir_restores_the_applied_revision(
    tmp_path: Path,
) -> None:
    async def test() -> None:
        switch = NvueSwitch(tmp_path)
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", LOSSLESS_TC3, "nv config apply --confirm 60s -y")
        await run(terminal, "nv config apply --confirm-yes", "nv config save")
        assert "min-threshold: 20000" in (tmp_path / "startup.yaml").read_text()
        await switch.personality.close()

        again = NvueSwitch(tmp_path)
        await again.personality.start()
        assert again.qos() == switch.qos()
        shown = json.loads(await again.terminal().execute("nv config show -o json"))
        assert shown[1]["set"]["qos"]["roce"] == {"enable": "on"}

    scenario(test)


def test_an_unconfirmed_apply_is_not_saved(tmp_path: Path) -> None:
    async def test() -> None:
        switch = NvueSwitch(tmp_path)
        await switch.personality.start()
        terminal = switch.terminal()
        await run(terminal, "nv set qos roce", "nv config apply -y")  # auto save
        await run(terminal, LOSSLESS_TC3, "nv config apply --confirm 60s -y")
        await switch.personality.close()
        again = NvueSwitch(tmp_path)
        await again.personality.start()
        assert ecn_min(again) == 150000

    scenario(test)


def test_a_startup_file_that_is_not_nvue_starts_from_defaults(tmp_path: Path) -> None:
    async def test() -> None:
        (tmp_path / "startup.yaml").write_text("just: [text\n")
        switch = NvueSwitch(tmp_path)
        await switch.personality.start()
        assert no_drop(switch) == []
        assert switch.dataplane.set_qos_calls  # the defaults were pushed

    scenario(test)


# ----------------------------------------------------------------------------- shell


def test_the_shell_looks_like_cumulus_linux_to_netmiko_linux() -> None:
    async def test() -> None:
        switch = NvueSwitch()
        await switch.personality.start()
        terminal = switch.terminal("cumulus")
        assert terminal.prompt() == "cumulus@leaf1:mgmt:~$ "
        assert await terminal.execute("") == ""
        assert await terminal.execute("hostname") == "leaf1"
        assert await terminal.execute("nv 'set") == "-bash: syntax error: unexpected end of file"
        assert await terminal.execute("exit") == "" and terminal.closed

    scenario(test)

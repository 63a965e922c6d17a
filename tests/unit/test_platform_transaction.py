"""The one transaction flow (Platform.transaction / Platform.confirm): where each platform's
kill points fall among the commands it sends, against the lines the fault drill breaks
(agent/ops/faultdrill.py CHANGE_LINES: where the change goes live and where it is confirmed).

A kill point is recorded in the command stream instead of killing the test."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.device.platforms.arista_eos import AristaEos
from agent.device.platforms.base import Connection, Platform
from agent.device.platforms.cisco_nxos import CiscoNxos
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.platforms.linux_host import LinuxHost
from agent.device.platforms.sonic import Sonic
from agent.ops.faultdrill import CHANGE_LINES
from tests.unit.lab_nxos_support import ssh_nxos
from tests.unit.platform_helpers import RecordingConnection


class ScriptedNetmiko:
    """Records what an EOS session is sent (netmiko's two calls the platform uses)."""

    base_prompt = "leaf1"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_command(self, command: str, **_: Any) -> str:
        self.sent.append(command)
        return ""

    def send_config_set(self, lines: list[str], **_: Any) -> str:
        self.sent.extend(lines)
        return ""


SONIC_SUCCESS = {
    "sudo config checkpoint": "Checkpoint created successfully.\n",
    "sudo config apply-patch": "Patch applied successfully.\n",
    "sudo config delete-checkpoint": "Checkpoint deleted successfully.\n",
}


def eos() -> tuple[Platform, Connection, list[str]]:
    netmiko = ScriptedNetmiko()
    return AristaEos(), Connection(netmiko, "leaf1"), netmiko.sent


def recorded(platform: Platform, replies: dict[str, str] | None = None) -> Any:
    def build() -> tuple[Platform, Connection, list[str]]:
        conn = RecordingConnection("leaf1", replies)
        return platform, conn, conn.sent

    return build


def linux_host() -> tuple[Platform, Connection, list[str]]:
    conn = RecordingConnection("host1", {"mlnx_qos -i": "Priority trust state: dscp\n"})
    platform = LinuxHost(apply_hosts=True)
    platform.interfaces = ["eth0"]
    return platform, conn, conn.sent


def confirmed_run(
    build: Any, monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> tuple[list[str], Any]:
    """A transaction confirmed at once; the commands sent with ``KILL <point>`` where each
    kill point was passed."""
    platform, conn, sent = build()

    def record(point: str, device: str | None = None) -> None:
        sent.append(f"KILL {point}")

    monkeypatch.setattr("agent.device.platforms.base.kill_point", record)
    monkeypatch.setattr("agent.device.platforms.linux_host.kill_point", record)
    with platform.transaction(conn, lines, 5, name="roce-agent-1") as txn:
        platform.confirm(conn, txn)
    return sent, txn


# What each platform's save step sends (NVUE "nv config save", SONiC "config save", EOS and
# NX-OS "copy running-config startup-config").
SAVE = re.compile(r"\bsave\b|^copy running-config startup-config$")


@pytest.fixture
def nxos(tmp_path: Path) -> Iterator[Any]:
    """The NX-OS driver against the lab's NX-OS switch over SSH (its transaction copies a file
    over SCP: a recorded connection has no SSH to do it on)."""
    with ssh_nxos(tmp_path) as switch:
        yield lambda: (CiscoNxos(), switch.conn, switch.conn.sent)


NXOS_LINES = ["priority-flow-control watch-dog-interval on", "feature lldp"]
DRILLED = {
    "arista_eos": eos,
    "sonic": recorded(Sonic(), SONIC_SUCCESS),
    "cumulus_nvue": recorded(CumulusNvue()),
    "cisco_nxos": "nxos",  # the fixture above
}


@pytest.mark.parametrize("platform", sorted(DRILLED))
def test_kill_points_sit_on_the_drill_lines(
    platform: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """in-session: the lines sent, the change not live yet (the next command is the one that
    makes it live); before-save: confirmed (after the confirm line), nothing saved yet."""
    build, lines = DRILLED[platform], ["line one"]
    if isinstance(build, str):  # a lab switch: lines it accepts
        build, lines = request.getfixturevalue(build), NXOS_LINES
    sent, txn = confirmed_run(build, monkeypatch, lines)
    lines = CHANGE_LINES[platform]
    in_session = sent.index("KILL in-session")
    assert re.search(lines.commit, sent[in_session + 1])
    assert not any(re.search(lines.commit, command) for command in sent[:in_session])
    before_save = sent.index("KILL before-save")
    confirm = next(i for i, command in enumerate(sent) if re.search(lines.confirm, command))
    assert confirm < before_save
    assert not any(SAVE.search(command) for command in sent[:before_save])
    assert any(SAVE.search(command) for command in sent[before_save:])
    assert txn.committed and txn.confirmed and not txn.rolled_back


@pytest.mark.parametrize(
    ("build", "kills", "sent_before_in_session"),
    [
        (eos, ["in-session", "before-save"], 2),
        (recorded(Sonic(), SONIC_SUCCESS), ["in-session", "before-save"], 2),
        (recorded(CumulusNvue()), ["in-session", "before-save"], 2),
        # NX-OS stages a whole configuration file (one SCP copy, not lines on the CLI).
        ("nxos", ["in-session", "before-save"], 0),
        # A host has no session: in-session is mid-change, after its first command; and it
        # has nothing to save.
        (linux_host, ["in-session"], 1),
    ],
    ids=["arista_eos", "sonic", "cumulus_nvue", "cisco_nxos", "linux_host"],
)
def test_every_platform_passes_its_kill_points_in_order(
    build: Any,
    kills: list[str],
    sent_before_in_session: int,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    lines = ["line one", "line two"]
    if isinstance(build, str):  # a lab switch: lines it accepts
        build, lines = request.getfixturevalue(build), NXOS_LINES
    sent, _ = confirmed_run(build, monkeypatch, lines)
    passed = [c.removeprefix("KILL ") for c in sent if c.startswith("KILL ")]
    assert list(dict.fromkeys(passed)) == kills
    in_session = sent.index("KILL in-session")
    assert sum("line" in command for command in sent[:in_session]) == sent_before_in_session

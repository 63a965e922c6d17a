"""How many SSH sessions a rollout holds at once: ``apply: {parallelism}`` in agent.yaml and in
a playbook's ``apply`` step reach the push path; a bad value names file, line and field."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.app.daemon_config import load_config
from agent.device.fanout import DEFAULT_PARALLELISM
from agent.intent.loader import load_fabric
from agent.ops.playbooks import PlaybookRunner, load_playbook
from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.launcher import host_public_key
from lab.mgmt.persistence import load_or_create_host_key
from lab.mgmt.ssh_server import AuthSettings, Faults, SshSettings, start_ssh_server
from lab.mgmt.switch import LoopClock, PortInfo, SwitchManager
from lab.mgmt.testing import FakeDataplane, fake_switch_config
from tests.unit.problems import the_one_problem

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "playbooks" / "fabrics" / "pod-400g.yml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_FABRIC_PASSWORD", "x")  # pod-400g's credentials: only checked


def write_agent_yaml(folder: Path, apply_line: str) -> Path:
    config = folder / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nexporter: null\n{apply_line}\n")
    return config


@pytest.mark.parametrize(
    ("apply_line", "expected"),
    [("", DEFAULT_PARALLELISM), ("apply: {parallelism: 48}", 48), ("apply: {canary: 2}", 32)],
)
def test_agent_yaml_parallelism(tmp_path: Path, apply_line: str, expected: int) -> None:
    loaded = load_config(write_agent_yaml(tmp_path, apply_line))
    assert loaded.config.apply.parallelism == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "greater than or equal to 1"), ("many", "valid integer"), ("1.5", "valid integer")],
)
def test_bad_parallelism_names_file_line_and_field(
    tmp_path: Path, value: str, message: str
) -> None:
    config = write_agent_yaml(tmp_path, f"apply:\n  parallelism: {value}")
    problem = the_one_problem(load_config, config, 4)
    assert problem.field == "apply.parallelism"
    assert message in problem.message

    # The daemon itself: exit 2, one line with FILE:LINE and the field, nothing started.
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"{config}:4" in result.output and "apply.parallelism" in result.output
    assert "Traceback" not in result.output


def test_bad_parallelism_in_a_playbook_names_file_line_and_field(tmp_path: Path) -> None:
    playbook = tmp_path / "roll.yml"
    playbook.write_text("name: roll\nsteps:\n  - apply:\n      parallelism: 0\n")
    problem = the_one_problem(load_playbook, playbook, 4)
    assert problem.field.endswith("apply.parallelism")


@dataclass
class SessionSpans(Faults):
    """The fault knobs, and each SSH shell's span from its first command to its last reply:
    the most spans that ever overlapped is how many sessions the agent held at once. (Counting
    connections from their accept to their close would not do: the event loop may handle a
    closed connection's end after the next one's accept, so a machine busy elsewhere would see
    two sessions where the agent held one.)"""

    spans: dict[asyncio.Task[Any], list[float]] = field(default_factory=dict)

    def delay_for(self, line: str) -> float:
        delay = super().delay_for(line)
        shell = asyncio.current_task()  # one task per SSH shell; kept, so never reused
        assert shell is not None
        now = time.monotonic()
        self.spans.setdefault(shell, [now, now])[1] = now + delay
        return delay

    @property
    def peak(self) -> int:
        """The most spans open at one instant: at each span's start, it and every span that
        started no later and ends after it (spans that only touch do not overlap)."""
        spans = list(self.spans.values())
        return max(
            (sum(1 for other in spans if other is span or other[0] <= span[0] < other[1])
             for span in spans),
            default=0,
        )  # fmt: skip


class LabSwitches:
    """``count`` lab management planes (the real SSH server and EOS CLI over a fake data
    plane) on one event-loop thread. ``commit timer`` is held back 0.3 s, like a NOS's commit,
    so sessions that are allowed to overlap do."""

    def __init__(self, state: Path, count: int) -> None:
        self.state = state
        self.sessions = SessionSpans(delay_s=0.3, slow_on=re.compile(r"^commit timer"))
        self.ports: dict[str, int] = {}
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stopping: asyncio.Event | None = None
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self._main(count),)
        )
        self.thread.start()
        assert self.ready.wait(20)

    async def _main(self, count: int) -> None:
        key = load_or_create_host_key(self.state)
        servers = []
        for index in range(1, count + 1):
            name = f"sw{index}"
            manager = SwitchManager(
                name,
                [PortInfo(f"Ethernet{i}", 10_000_000) for i in (1, 2)],
                FakeDataplane(fake_switch_config(name, ["eth1", "eth2"])),
                LoopClock(),
            )
            eos = EosPersonality(manager, self.state / name)
            await eos.start()
            settings = SshSettings("127.0.0.1", 0, key, AuthSettings("admin", "secret", None))
            server = await start_ssh_server(settings, eos, self.sessions)
            servers.append(server)
            self.ports[name] = int(server.sockets[0].getsockname()[1])
        self.stopping = asyncio.Event()
        self.ready.set()
        await self.stopping.wait()
        for server in servers:
            server.close()

    def fabric(self) -> Path:
        host_key = host_public_key(self.state)
        lines = [
            "name: sessions",
            "profile: nvidia-default",
            "defaults: {username: admin, credentials: {password_env: ROCE_TEST_PASSWORD}}",
            "devices:",
        ]
        for name, port in self.ports.items():
            lines += [
                f"  - {{name: {name}, platform: arista_eos, role: leaf, host: 127.0.0.1,",
                f"     port: {port}, host_key: {host_key},",
                "     ports: [{name: Ethernet1, speed: 10M, cable_m: 1, mtu: 9000},",
                "             {name: Ethernet2, speed: 10M, cable_m: 1, mtu: 9000}]}",
            ]
        path = self.state / "fabric.yml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def stop(self) -> None:
        assert self.stopping is not None
        self.loop.call_soon_threadsafe(self.stopping.set)
        self.thread.join(10)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (", parallelism: 1", 1),
        (", parallelism: 2", 2),
        ("", 3),  # the default (32), so as many as there are switches
    ],
)
def test_playbook_apply_step_holds_that_many_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, expected: int
) -> None:
    """What the switches see: at most ``parallelism`` SSH sessions at once, and every switch
    changed."""
    monkeypatch.setenv("ROCE_TEST_PASSWORD", "secret")
    switches = LabSwitches(tmp_path / "switches", 3)
    try:
        intent = load_fabric(switches.fabric()).intent
        playbook = tmp_path / "roll.yml"
        playbook.write_text(f"name: roll\nsteps:\n  - apply: {{devices: all, canary: 0{line}}}\n")
        report = PlaybookRunner(intent, tmp_path / "state").run(load_playbook(playbook))
    finally:
        switches.stop()
    assert [step.status for step in report.steps] == ["success"]
    applied = sorted(r.device for r in report.applied if r.result == "applied")
    assert applied == ["sw1", "sw2", "sw3"]
    assert switches.sessions.peak == expected

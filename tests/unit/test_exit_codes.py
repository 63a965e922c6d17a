"""One exit-code contract for every command (docs/cli-conventions.md, "Exit codes"):
0 all as intended, 1 a device not as intended (or unverified, or not reached while others
were), 2 the command could not do its job (bad input, nothing reachable, internal error).

The click tree is walked: every command that takes a FABRIC has a row below (a new command
without one fails :func:`test_every_fabric_command_has_a_row`), run against a fabric whose
switches and hosts all hang up on connect (loopback listeners that count the attempts). A
command that works offline must contact nothing and must not fail for it; one that talks to
devices exits 2, with each device named on one line and no traceback. The same walk against a
healthy lab: tests/lab/test_exit_codes_lab.py.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console

from agent.app.cli import main
from agent.app.support import (
    AS_INTENDED,
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    NOT_AS_INTENDED,
    NOT_REACHED,
    NOT_TRIED,
    DeviceProgress,
    exit_code,
)
from agent.device.fanout import run_each
from tests.unit.ssh_peers import FakeSwitch, RawPeer, close_at_once
from tests.unit.test_cli_conventions import LEAVES  # the one walk of the command tree

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "playbooks" / "fabrics" / "lab-leafspine.yml"
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
HOSTS = ("h1", "h2", "h3", "h4")


# --------------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        ([AS_INTENDED, AS_INTENDED], EXIT_OK),
        ([AS_INTENDED, NOT_AS_INTENDED], EXIT_FAILED),
        ([AS_INTENDED, NOT_REACHED], EXIT_FAILED),
        ([NOT_AS_INTENDED, NOT_REACHED], EXIT_FAILED),
        ([NOT_REACHED, NOT_REACHED], EXIT_ERROR),
        ([NOT_REACHED, NOT_TRIED, NOT_TRIED], EXIT_ERROR),  # the canary was not reached
        ([AS_INTENDED, NOT_TRIED], EXIT_FAILED),
        ([NOT_REACHED], EXIT_ERROR),
        ([AS_INTENDED], EXIT_OK),
        ([], EXIT_OK),
    ],
)
def test_the_contract(outcomes: list[str], code: int) -> None:
    assert exit_code(outcomes) == code


# --------------------------------------------------------------------------- the walk


FABRIC_COMMANDS = sorted(
    path.removeprefix("roce-agent ")
    for path, command in LEAVES.items()
    if any(p.name == "fabric" for p in command.params)
)


@dataclass(frozen=True)
class Row:
    """How a command runs on the fabric (``{F}``: the fabric file) and what it must do when
    nothing answers: ``offline`` commands contact nothing and exit 0; the others exit 2."""

    args: str
    offline: bool = False
    exempt: str = ""  # why the command is not run here (and where it is tested instead)


ROWS: dict[str, list[Row]] = {
    "check": [Row("check {F}", offline=True)],
    "plan": [Row("plan {F} -o json", offline=True)],
    "render": [Row("render {F}", offline=True)],
    "twin": [Row("twin {F} --duration 100us -o json", offline=True)],
    "tune": [
        Row(
            "tune {F}",
            exempt="searches the twin, contacts no device: its own exit codes are tested in "
            "tests/unit/test_twin_tune.py",
        )
    ],
    "exporter": [
        Row(
            "exporter {F}",
            exempt="a server that runs until stopped and exports roce_device_up 0 for a "
            "device it cannot read (tests/unit/test_exporter_poller.py)",
        )
    ],
    "diff": [Row("diff {F}"), Row("diff {F} -o json")],
    "drift": [Row("drift {F}"), Row("drift {F} -o junit")],
    "apply": [
        Row("apply {F} --dry-run"),
        Row("apply {F} --yes"),
        Row("apply {F} --yes --canary 0"),
    ],
    "validate": [Row("validate {F} --no-traffic"), Row("validate {F} -o json")],
    "run": [Row("run validate {F}")],
    "nccl": [Row("nccl {F}"), Row("nccl {F} -o json")],
    "locate": [Row("locate {F}")],
    "probe allreduce": [Row("probe allreduce {F} --hosts h1,h2")],
    "probe incast": [Row("probe incast {F} --to h3 --from h1,h2")],
    "probe nccl": [Row("probe nccl {F}")],
    "probe pairwise": [Row("probe pairwise {F}")],
    "probe perftest": [Row("probe perftest {F}")],
    "probe storm": [Row("probe storm {F} --host h1")],
}


def test_every_fabric_command_has_a_row() -> None:
    assert sorted(ROWS) == FABRIC_COMMANDS


class Peers:
    """One loopback listener per device, each hanging up at once; :attr:`accepted` counts
    the connection attempts of them all."""

    def __init__(self, count: int) -> None:
        self.peers = [RawPeer(close_at_once) for _ in range(count)]

    @property
    def accepted(self) -> int:
        return sum(peer.accepted for peer in self.peers)

    def close(self) -> None:
        for peer in self.peers:
            peer.close()


@pytest.fixture(scope="module")
def nothing_answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Peers]]:
    """The lab's fabric with every switch and host behind a listener that hangs up at once
    (every host an SSH host with an RDMA device, so the host commands try them too)."""
    document = yaml.safe_load(LAB.read_text())
    document.pop("emulation", None)
    peers = Peers(len(document["devices"]))
    for device, peer in zip(document["devices"], peers.peers, strict=True):
        device["port"] = peer.port
        if device["role"] == "host":
            del device["netns"]
            device["host"] = "127.0.0.1"
            for port in device["ports"]:
                port["rdma_device"] = "rxe0"
    path = tmp_path_factory.mktemp("walk") / "nothing-answers.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        yield path, peers
    finally:
        peers.close()


CASES = [
    pytest.param(row, id=row.args.replace("{F} ", "").replace(" {F}", ""))
    for rows in ROWS.values()
    for row in rows
]


@pytest.mark.parametrize("row", CASES)
def test_nothing_reachable(
    row: Row,
    nothing_answers: tuple[Path, Peers],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if row.exempt:
        pytest.skip(row.exempt)
    fabric, peer = nothing_answers
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "x")
    monkeypatch.setenv("ROCE_AGENT_STATE_DIR", str(tmp_path / "state"))
    before = peer.accepted
    args = ["--connect-timeout", "1s", *row.args.format(F=fabric).split()]
    started = time.monotonic()
    result = CliRunner().invoke(main, args)
    took = time.monotonic() - started
    assert "Traceback" not in result.stderr, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), result.stderr
    if row.offline:
        assert result.exit_code == EXIT_OK, result.stderr
        assert peer.accepted == before, "an offline command contacted a device"
        return
    assert result.exit_code == EXIT_ERROR, (result.exit_code, result.stdout[-2000:], result.stderr)
    assert peer.accepted > before
    assert took < 30
    for line in result.stderr.splitlines():
        assert len(line) < 2000, "one line per device, not a page per line"
        assert "\\n" not in line


@pytest.mark.parametrize("command", ["diff", "drift"])
def test_one_error_line_per_switch(
    command: str, nothing_answers: tuple[Path, Peers], monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric, _ = nothing_answers
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "x")
    result = CliRunner().invoke(main, ["--connect-timeout", "1s", command, str(fabric)])
    assert result.exit_code == EXIT_ERROR
    lines = result.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == list(SWITCHES)
    for line, switch in zip(lines, SWITCHES, strict=True):
        assert line.startswith(f"error: {switch}: unreachable: 127.0.0.1:")
        assert "closed the connection before its SSH banner" in line and ". Fix: " in line


# --------------------------------------------------------------------------- some reachable


def test_one_switch_reached_one_not_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch that logs in (and whose replies are not EOS's) beside one that hangs up:
    the run did its job for one of them, so 1, not 2; the reached one is `failed`."""
    switch = FakeSwitch()
    peer = RawPeer(close_at_once)
    try:
        text = f"""name: two
profile: nvidia-default
defaults:
  username: admin
  credentials: {{password_env: ROCE_TEST_PW}}
  known_hosts: {switch.known_hosts(tmp_path / "kh")}
devices:
- {{name: leaf1, platform: arista_eos, role: leaf, host: 127.0.0.1, port: {switch.port},
   ports: [{{name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9100, peer: "leaf2:Ethernet1"}}]}}
- {{name: leaf2, platform: arista_eos, role: leaf, host: 127.0.0.1, port: {peer.port},
   ports: [{{name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9100, peer: "leaf1:Ethernet1"}}]}}
"""
        fabric = tmp_path / "two.yml"
        fabric.write_text(text)
        monkeypatch.setenv("ROCE_TEST_PW", "right")
        result = CliRunner().invoke(main, ["--connect-timeout", "2s", "diff", str(fabric)])
    finally:
        switch.stop()
        peer.close()
    assert result.exit_code == EXIT_FAILED, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: leaf1: command failed: ")
    assert lines[1].startswith("error: leaf2: unreachable: ")


# --------------------------------------------------------------------------- progress


def test_progress_counts_devices_and_names_the_slowest() -> None:
    screen = io.StringIO()
    err = Console(file=screen, force_terminal=True, width=120)
    release = threading.Event()

    def work(name: str) -> str:
        if name == "leaf9":
            release.wait(5)
        return name

    with DeviceProgress("diff", ["leaf1", "leaf2", "leaf9"], err=err) as progress:
        worker = threading.Thread(
            target=run_each, args=({n: n for n in ("leaf1", "leaf2", "leaf9")}, work, 3)
        )
        worker.start()
        time.sleep(1.3)  # rich refreshes ten times a second
        assert progress.slowest().startswith("slowest: leaf9 1 s")
        release.set()
        worker.join()
    shown = screen.getvalue()
    assert "diff" in shown and "2/3" in shown and "slowest: leaf9" in shown


def test_no_progress_off_a_terminal_or_for_one_device() -> None:
    screen = io.StringIO()
    with DeviceProgress("diff", ["leaf1", "leaf2"], err=Console(file=screen)):
        run_each({"a": 1, "b": 2}, lambda x: time.sleep(0.2), 2)
    assert screen.getvalue() == ""
    screen = io.StringIO()
    with DeviceProgress("diff", ["leaf1"], err=Console(file=screen, force_terminal=True)):
        run_each({"leaf1": 1}, lambda x: time.sleep(0.2), 1)
    assert screen.getvalue() == ""

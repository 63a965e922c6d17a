"""The write-ahead audit, the operator identity, the state-dir check, the drill kill points
and the EOS session parser (recorded replies). No devices: the live side is in
tests/lab/test_sessions_lab.py."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.device.platforms.arista_eos import AristaEos
from agent.device.push import KILL_POINTS, AuditLog, StateDirError, operator

REPO = Path(__file__).resolve().parents[2]


def test_operator_is_the_real_uid_and_sudo_user_only_a_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUDO_USER", "mallory")
    who = operator()
    assert who["uid"] == os.getuid()
    assert who["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert who["claimed_sudo_user"] == "mallory"
    monkeypatch.delenv("SUDO_USER")
    assert "claimed_sudo_user" not in operator()


def test_intent_then_result_pair_and_incomplete_attempts(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "state")
    log.check()
    log.write(record="intent", attempt="a1", fabric="f", device="leaf1", session="roce-agent-1")
    log.write(record="intent", attempt="a2", fabric="f", device="leaf2", session="roce-agent-2")
    log.write(record="result", attempt="a1", result="applied")
    log.write(record="intent", attempt="a3", fabric="other", device="leaf2", session="s3")
    # A crash mid-write leaves a torn last line: skipped, never fatal.
    with log.path.open("a") as handle:
        handle.write('{"record": "result", "attempt": "a2", "res')
    assert [a["attempt"] for a in log.incomplete()] == ["a2", "a3"]
    assert [a["attempt"] for a in log.incomplete("f", "leaf2")] == ["a2"]
    assert log.incomplete("f", "leaf1") == []
    with log.path.open("a") as handle:
        handle.write("\n")
    log.write(record="reconciled", attempt="a2", outcome="confirmed")
    assert [a["attempt"] for a in log.incomplete("f")] == []
    entry = json.loads(log.path.read_text().splitlines()[0])
    assert entry["operator"]["uid"] == os.getuid() and entry["time"]


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda tmp: tmp / "file" / "state", "Not a directory"),
        (lambda tmp: tmp / "log-is-a-dir", "Is a directory"),
    ],
    ids=["under-a-file", "audit-log-not-a-file"],
)
def test_unusable_state_dir_is_refused(tmp_path: Path, make: Any, why: str) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "log-is-a-dir" / "audit.jsonl").mkdir(parents=True)
    with pytest.raises(StateDirError, match=why) as caught:
        AuditLog(make(tmp_path)).check()
    assert caught.value.exit_code == 2


def test_apply_with_unusable_state_dir_exits_2_before_any_connection(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    fabric = REPO / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"
    result = CliRunner().invoke(
        main,
        ["apply", str(fabric), "--yes", "--state-dir", str(tmp_path / "file" / "state")],
        env={"ROCE_LAB_PASSWORD": "unused"},
    )
    assert result.exit_code == 2, result.output
    assert "state dir" in result.output and "Nothing was contacted" in result.output
    assert "Traceback" not in result.output


def test_audit_command_lists_attempts_and_incomplete_ones(tmp_path: Path) -> None:
    log = AuditLog(tmp_path)
    log.write(record="intent", attempt="a1", fabric="f", device="leaf1", session="s1")
    log.write(record="result", attempt="a1", result="applied")
    log.write(record="intent", attempt="a2", fabric="f", device="leaf2", session="s2")
    runner = CliRunner()
    full = runner.invoke(main, ["audit", "--state-dir", str(tmp_path), "--output", "json"])
    assert full.exit_code == 0, full.output
    statuses = {a["attempt"]: a["status"] for a in json.loads(full.output)["attempts"]}
    assert statuses == {"a1": "applied", "a2": "incomplete"}
    only = runner.invoke(main, ["audit", "--incomplete", "--state-dir", str(tmp_path)])
    assert only.exit_code == 1
    assert "leaf2" in only.output and "leaf1" not in only.output

    log.write(record="reconciled", attempt="a2", device="leaf2", outcome="device equals the plan")
    log.write(record="intent", attempt="a3", fabric="f", device="[bold]x\x1b[2J", session="s3")
    log.write(record="result", attempt="a3", result="failed", error="[red]refused[/red]")
    settled = runner.invoke(main, ["audit", "--incomplete", "--state-dir", str(tmp_path)])
    assert settled.exit_code == 0, settled.output
    assert "no incomplete attempt" in settled.output
    table = runner.invoke(main, ["audit", "--state-dir", str(tmp_path)])
    # Text from the log is shown as it is: neither rich markup nor a terminal escape.
    assert "[red]refused[/red]" in table.output and "\x1b" not in table.output
    assert "[bold]x\\x1b[2J" in table.output


@pytest.mark.parametrize(
    ("setting", "point", "device", "killed"),
    [
        ("after-intent", "after-intent", "leaf1", True),
        ("after-intent@leaf1", "after-intent", "leaf1", True),
        ("after-intent@leaf2", "after-intent", "leaf1", False),
        ("in-session", "after-commit", "leaf1", False),
        ("mid-batch", "mid-batch", None, True),
        ("", "after-confirm", "leaf1", False),
    ],
)
def test_kill_points(setting: str, point: str, device: str | None, killed: bool) -> None:
    env = {**os.environ, "ROCE_AGENT_KILL_AT": setting}
    code = (
        "from agent.device.push import kill_point; "
        f"kill_point({point!r}, {device!r}); print('alive')"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=REPO, timeout=60)  # fmt: skip
    assert (done.returncode == -9) == killed, done.stderr
    assert ("alive" in done.stdout) == (not killed)


def test_kill_point_names_are_the_documented_ones() -> None:
    assert KILL_POINTS == ("after-intent", "in-session", "after-commit", "before-save",
                           "after-confirm", "mid-batch")  # fmt: skip
    docs = "".join(path.read_text() for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")])
    assert all(f"`{point}`" in docs for point in KILL_POINTS)


EOS_SESSIONS = {
    "sessions": {
        "roce-agent-20261123-101500-123": {
            "state": "pendingCommitTimer",
            "user": "admin",
            "terminal": "",
            "commitTimerRemaining": 241.5,
            "completedTime": 0,
            "createdTime": 940.0,
        },
        "leak": {"state": "pending", "user": "ops", "terminal": "vty3", "createdTime": 100.0},
        "old": {"state": "completed", "user": "ops", "completedTime": 50.0},
        "instances-form": {
            "state": "pending",
            "instances": {"1234": {"user": "netops", "terminal": "vty7"}},
        },
    },
    "maxSavedSessions": 1,
    "maxOpenSessions": 5,
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("roce-agent-20261123-101500-123",
         {"state": "pendingCommitTimer", "user": "admin", "age_s": 60.0, "rollback_in_s": 241.5,
          "live": True}),
        ("leak", {"state": "pending", "user": "ops", "age_s": 900.0, "rollback_in_s": None,
                  "live": False}),
        ("instances-form", {"state": "pending", "user": "netops", "age_s": None,
                            "rollback_in_s": None, "live": False}),
    ],
)  # fmt: skip
def test_eos_sessions_from_json(name: str, expected: dict[str, Any]) -> None:
    found = {s.name: s for s in AristaEos.sessions_from_json("leaf1", EOS_SESSIONS, now=1000.0)}
    assert "old" not in found  # completed sessions are history
    session = found[name]
    assert {k: getattr(session, k) for k in expected} == expected
    assert session.kind == "EOS session" and session.device == "leaf1"
    assert session.ours == name.startswith("roce-agent-")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    ("intent", "age_s", "in_use"),
    [
        pytest.param({"pid": "parent"}, 5.0, True, id="live-process-on-this-host"),
        pytest.param({"pid": "dead"}, 5.0, False, id="dead-process"),
        pytest.param({"pid": "parent", "host": "elsewhere"}, 5.0, False, id="other-host"),
        pytest.param({"pid": "self"}, 5.0, False, id="this-very-process"),
        pytest.param(None, 5.0, True, id="unknown-and-young"),
        pytest.param(None, 600.0, False, id="unknown-and-old"),
    ],
)
def test_leaked_or_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, intent: dict[str, Any] | None,
    age_s: float, in_use: bool,
) -> None:  # fmt: skip
    import socket

    from agent.device.push import Pusher
    from agent.device.state import PendingSession
    from agent.intent.loader import load_fabric

    monkeypatch.setenv("ROCE_LAB_PASSWORD", "unused")
    fabric = REPO / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"
    pusher = Pusher.for_intent(load_fabric(fabric).intent, tmp_path)
    device = pusher.intent.devices[0]
    name = "roce-agent-20261123-101000-001"
    if intent is not None:
        pids = {"parent": os.getppid(), "dead": _dead_pid(), "self": os.getpid()}
        assert pusher.audit is not None
        pusher.audit.write(
            record="intent", attempt="a1", fabric=pusher.intent.name, device=device.name,
            session=name, pid=pids[intent["pid"]],
            host=intent.get("host", socket.gethostname()),
        )  # fmt: skip
    session = PendingSession(device.name, name, "EOS session", "pending", age_s=age_s)
    assert pusher._in_use(device, session) is in_use


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from agent.device.push import AuditLog\n"
        "log = AuditLog(Path(sys.argv[1]))\n"
        "for i in range(40): log.write(record='event', writer=sys.argv[2], n=i, pad='x' * 5000)\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(w)], cwd=REPO)
        for w in range(6)
    ]
    assert all(w.wait(timeout=120) == 0 for w in writers)
    entries = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert len(entries) == 240
    for writer in range(6):
        assert [e["n"] for e in entries if e["writer"] == str(writer)] == list(range(40))


@pytest.mark.parametrize(
    ("rolls_back", "waits"),
    [(False, False), (True, True)],
    ids=["nxos-checkpoint-fails-at-once", "timer-session-is-waited-for"],
)
def test_wait_is_not_futile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rolls_back: bool, waits: bool
) -> None:
    """``--pending wait`` on a change nothing will ever undo (an NX-OS checkpoint) fails the
    device at once, naming why, instead of sitting out the whole wait."""
    import time

    from agent.device.push import DeviceResult, Pusher, _Change
    from agent.device.state import PendingSession, QosState
    from agent.intent.loader import load_fabric

    monkeypatch.setenv("ROCE_LAB_PASSWORD", "unused")
    fabric = REPO / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"
    pusher = Pusher.for_intent(load_fabric(fabric).intent, tmp_path, pending_timeout_s=0.5)
    device = pusher.intent.devices[0]
    session = PendingSession(
        device.name, "roce-agent-x", "checkpoint", "checkpoint", live=True, rolls_back=rolls_back
    )

    class OnePending:
        def read_sessions(self, _conn: object) -> list[PendingSession]:
            return [session]

    monkeypatch.setattr("agent.device.push.PENDING_POLL_S", 0.1)
    result = DeviceResult(device.name, "cisco_nxos", "no-change")
    started = time.monotonic()
    platform: Any = OnePending()  # only read_sessions is reached on this path
    change = _Change(device, platform, None, result, QosState())  # type: ignore[arg-type]
    settled = pusher._settle(change, "wait")
    elapsed = time.monotonic() - started
    assert not settled and result.result == "pending"
    assert ("waiting cannot help" in (result.error or "")) is not waits
    assert (elapsed >= 0.5) is waits


def _raw(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def _record(n: int) -> bytes:
    return (json.dumps({"record": "intent", "attempt": f"a{n}", "device": "leaf1"}) + "\n").encode()


# (what happens to the log between two reads, attempts seen after it, why)
GROWTH_CASES: list[tuple[str, list[str], str]] = [
    ("append", ["a0", "a1", "a2", "a3"], "only the new records are read, all are returned"),
    ("torn", ["a0", "a1"], "a line still being written is left for the next read"),
    ("torn-then-finished", ["a0", "a1", "a3"], "once its newline lands, the line counts"),
    ("garbage", ["a0", "a1", "a3"], "a torn line from a crash is skipped, not fatal"),
    ("replaced", ["a7"], "a new file (another inode) is read from its start"),
    ("truncated", ["a8"], "a shorter file is read from its start"),
]


@pytest.mark.parametrize(("change", "expected", "why"), GROWTH_CASES)
def test_records_read_incrementally(
    tmp_path: Path, change: str, expected: list[str], why: str
) -> None:
    log = AuditLog(tmp_path)
    _raw(log.path, _record(0) + _record(1))
    assert [r["attempt"] for r in log.records()] == ["a0", "a1"]
    first_offset = log._offset
    if change == "append":
        _raw(log.path, _record(2) + _record(3))
    elif change == "torn":
        _raw(log.path, _record(3)[:-10])
    elif change == "torn-then-finished":
        _raw(log.path, _record(3)[:-10])
        assert [r["attempt"] for r in log.records()] == ["a0", "a1"]
        _raw(log.path, _record(3)[-10:])
    elif change == "garbage":
        _raw(log.path, b'{"record": "intent", "att\n' + _record(3))
    elif change == "replaced":
        log.path.unlink()
        _raw(log.path, _record(7))
    elif change == "truncated":
        log.path.write_bytes(_record(8))
    assert [r["attempt"] for r in log.records()] == expected, why
    if change == "append":
        assert log._offset > first_offset
    assert log.records() == log.records()  # a read with nothing new changes nothing

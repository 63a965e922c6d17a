"""Sessions are state, live against lab switches over SSH: runs killed at each step (the
``ROCE_AGENT_KILL_AT`` drill points), what drift/apply/audit see afterwards, and replies lost
on the way back from the switch (the lab's ``faults.json`` knobs).

One lab for the module; every test first puts leaf1 (or leaf2) in a known drifted state.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.device.fanout import results_or_raise, run_each
from lab.mgmt.launcher import set_faults
from lab.runtime import MGMT_SUFFIX
from tests.lab.support import eos
from tests.lab.support.labs import Lab, LabFactory, requires_lab, run_agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
PASSWORD = "sessions-lab-7c1d"
DRIFT_LINE = "qos map dscp 14 to traffic-class 3"


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    started = module_labs.start("se", password=PASSWORD)
    converge(started, tmp_path_factory.mktemp("initial"))
    return started


def agent(
    state: Path, *args: str, kill_at: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The agent with its own state directory; ``kill_at``: the drill point where it SIGKILLs
    itself (``$ROCE_AGENT_KILL_AT``, unset without one)."""
    drill = {"ROCE_AGENT_STATE_DIR": str(state), "ROCE_AGENT_KILL_AT": kill_at or None}
    return run_agent(*args, timeout=timeout, password=PASSWORD, env=drill)


def fabric(lab: Lab) -> str:
    return str(lab.status["fabric_file"])


def converge(lab: Lab, state: Path) -> None:
    done = agent(state, "apply", fabric(lab), "--yes", "--pending", "abort")
    assert done.returncode == 0, done.stdout + done.stderr


SESSIONS_SHOW = "show configuration sessions detail | json"


def pending(sessions_json: str) -> dict[str, dict[str, Any]]:
    data = json.loads(sessions_json)
    return {n: s for n, s in data["sessions"].items() if s["state"] != "completed"}


def open_sessions(lab: Lab, switch: str) -> dict[str, dict[str, Any]]:
    return pending(eos.show(lab, switch, SESSIONS_SHOW))


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Independent read-only steps side by side (their order proves nothing)."""
    outcomes = run_each({str(i): call for i, call in enumerate(calls)}, lambda call: call())
    return list(results_or_raise(outcomes).values())


def drift_switch(lab: Lab, switch: str) -> str:
    eos.configure(lab, switch, [DRIFT_LINE])
    return eos.show(lab, switch, "show running-config")


def records(state: Path) -> list[dict[str, Any]]:
    path = state / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def devices(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {d["device"]: d for d in json.loads(done.stdout)["devices"]}


def faults(lab: Lab, switch: str, **knobs: object) -> None:
    processes = json.loads((lab.state_dir / "state.json").read_text())["processes"]
    pid = int(processes[switch + MGMT_SUFFIX]["pid"])
    set_faults(lab.state_dir / f"{switch}-mgmt", pid, **knobs)
    time.sleep(0.2)  # the process reloads on SIGUSR1, from its event loop


def apply_with_reply_lost(
    lab: Lab, state: Path, switch: str, cut_on: str
) -> subprocess.CompletedProcess[str]:
    """``apply --device SWITCH`` while the switch drops its connection after running the
    command that matches ``cut_on``, before replying."""
    faults(lab, switch, cut_on=cut_on, cut_when="after")
    try:
        return agent(state, "apply", fabric(lab), "--device", switch, "--yes", "--output", "json")
    finally:
        faults(lab, switch)


def killed_after_commit(lab: Lab, state: Path, switch: str) -> str:
    """A run SIGKILLed while its change is live under a 300 s timer; the session name."""
    drift_switch(lab, switch)
    done = agent(state, "apply", fabric(lab), "--device", switch, "--yes",
                 kill_at=f"after-commit@{switch}")  # fmt: skip
    assert done.returncode == -9, done.stderr
    sessions, running = eos.shows(lab, switch, SESSIONS_SHOW, "show running-config")
    [(name, session)] = pending(sessions).items()
    assert name.startswith("roce-agent-") and session["state"] == "pendingCommitTimer"
    assert DRIFT_LINE not in running  # the change is live
    return name


def test_killed_with_live_change_is_not_read_as_converged(lab: Lab, tmp_path: Path) -> None:
    name = killed_after_commit(lab, tmp_path, "leaf1")
    incomplete, drift = together(
        lambda: agent(tmp_path, "audit", "--incomplete", "--output", "json"),
        lambda: agent(tmp_path, "drift", fabric(lab), "--device", "leaf1"),
    )
    assert incomplete.returncode == 1
    [attempt] = json.loads(incomplete.stdout)["attempts"]
    assert attempt["session"] == name and attempt["status"] == "incomplete"
    assert attempt["operator"]["uid"] == os.getuid()

    assert drift.returncode == 1
    assert f"leaf1: pending EOS session {name!r} (pendingCommitTimer" in drift.stderr
    assert "rolls back in" in drift.stderr

    waited = agent(tmp_path, "apply", fabric(lab), "--device", "leaf1", "--yes",
                   "--pending-timeout", "2s", "--output", "json")  # fmt: skip
    assert waited.returncode == 1
    leaf1 = devices(waited)["leaf1"]
    assert leaf1["result"] == "pending" and name in leaf1["error"]

    own = agent(tmp_path, "apply", fabric(lab), "--device", "leaf1", "--yes",
                "--pending", "confirm-own", "--output", "json")  # fmt: skip
    assert own.returncode == 0, own.stdout + own.stderr
    leaf1 = devices(own)["leaf1"]
    assert leaf1["result"] == "no-change"
    assert any(note.startswith("confirmed own EOS session") for note in leaf1["notes"])
    sessions, drift, incomplete = together(
        lambda: open_sessions(lab, "leaf1"),
        lambda: agent(tmp_path, "drift", fabric(lab), "--device", "leaf1"),
        lambda: agent(tmp_path, "audit", "--incomplete"),
    )
    assert sessions == {}
    assert drift.returncode == 0
    assert incomplete.returncode == 0
    reconciled = [r for r in records(tmp_path) if r["record"] == "reconciled"]
    assert reconciled[-1]["attempt"] == attempt["attempt"]
    assert "confirmed" in reconciled[-1]["outcome"]


def test_confirm_own_refuses_a_session_the_audit_does_not_know(lab: Lab, tmp_path: Path) -> None:
    name = killed_after_commit(lab, tmp_path / "run", "leaf2")
    stranger = tmp_path / "other-state-dir"  # no intent record for that session here
    done = agent(stranger, "apply", fabric(lab), "--device", "leaf2", "--yes",
                 "--pending", "confirm-own", "--output", "json")  # fmt: skip
    assert done.returncode == 1
    assert devices(done)["leaf2"]["result"] == "pending"
    assert open_sessions(lab, "leaf2")[name]["state"] == "pendingCommitTimer"
    aborted = agent(stranger, "apply", fabric(lab), "--device", "leaf2", "--yes",
                    "--pending", "abort", "--output", "json")  # fmt: skip
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    leaf2 = devices(aborted)["leaf2"]
    # Rolled back by the abort, then applied again by this run.
    assert leaf2["result"] == "applied"
    assert any(name in note and "aborted" in note for note in leaf2["notes"])
    assert open_sessions(lab, "leaf2") == {}


def test_leaked_uncommitted_session_is_reported_then_cleaned(lab: Lab, tmp_path: Path) -> None:
    drifted = drift_switch(lab, "leaf1")
    done = agent(tmp_path, "apply", fabric(lab), "--device", "leaf1", "--yes",
                 kill_at="in-session")  # fmt: skip
    assert done.returncode == -9
    sessions, running = eos.shows(lab, "leaf1", SESSIONS_SHOW, "show running-config")
    [(name, session)] = pending(sessions).items()
    assert session["state"] == "pending"  # kept after the connection died, like EOS
    assert running == drifted  # never committed

    drift = agent(tmp_path, "drift", fabric(lab), "--device", "leaf1")
    assert drift.returncode == 1 and name in drift.stderr

    fixed = agent(tmp_path, "apply", fabric(lab), "--device", "leaf1", "--yes", "--output",
                  "json")  # fmt: skip
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    leaf1 = devices(fixed)["leaf1"]
    assert leaf1["result"] == "applied"
    assert any(f"aborted leaked EOS session {name!r}" in note for note in leaf1["notes"])
    assert open_sessions(lab, "leaf1") == {}


def test_killed_after_confirm_is_reconciled_from_the_device(lab: Lab, tmp_path: Path) -> None:
    drift_switch(lab, "leaf1")
    done = agent(tmp_path, "apply", fabric(lab), "--device", "leaf1", "--yes",
                 kill_at="after-confirm@leaf1")  # fmt: skip
    assert done.returncode == -9
    (sessions, running), incomplete = together(
        lambda: eos.shows(lab, "leaf1", SESSIONS_SHOW, "show running-config"),
        lambda: agent(tmp_path, "audit", "--incomplete", "--output", "json"),
    )
    assert pending(sessions) == {}
    assert DRIFT_LINE not in running  # confirmed
    [attempt] = json.loads(incomplete.stdout)["attempts"]
    again = agent(tmp_path, "apply", fabric(lab), "--device", "leaf1", "--yes")
    assert again.returncode == 0
    [reconciled] = [r for r in records(tmp_path) if r["record"] == "reconciled"]
    assert reconciled["attempt"] == attempt["attempt"]
    assert "device equals the plan" in reconciled["outcome"]


def test_lost_reply_to_the_confirm_is_checked_on_the_switch(lab: Lab, tmp_path: Path) -> None:
    drift_switch(lab, "leaf2")
    confirm = r"^configure session roce-agent-\S+ commit$"
    done = apply_with_reply_lost(lab, tmp_path, "leaf2", cut_on=confirm)
    leaf2 = devices(done)["leaf2"]
    # The confirm ran; its reply was lost. The fresh read proves the change is final.
    assert done.returncode == 0, done.stdout
    assert leaf2["result"] == "applied"
    assert any("verified on a fresh connection" in note for note in leaf2["notes"])
    sessions, running = eos.shows(lab, "leaf2", SESSIONS_SHOW, "show running-config")
    assert pending(sessions) == {}
    assert DRIFT_LINE not in running
    [result] = [r for r in records(tmp_path) if r["record"] == "result"]
    assert result["result"] == "applied"


def test_lost_reply_to_commit_timer_rolls_back_for_real(lab: Lab, tmp_path: Path) -> None:
    drifted = drift_switch(lab, "leaf2")
    done = apply_with_reply_lost(lab, tmp_path, "leaf2", cut_on=r"^commit timer ")
    leaf2 = devices(done)["leaf2"]
    # The commit ran (the change went live under its timer) but the agent never heard so:
    # it must not leave it live for the timer, nor call it applied.
    assert done.returncode == 1
    assert leaf2["result"] == "failed"
    assert any("aborted EOS session" in note for note in leaf2["notes"])
    assert any("old state is in place" in note for note in leaf2["notes"])
    sessions, running = eos.shows(lab, "leaf2", SESSIONS_SHOW, "show running-config")
    assert pending(sessions) == {}
    assert running == drifted
    converge(lab, tmp_path)


def test_unwritable_state_dir_touches_nothing(lab: Lab, tmp_path: Path) -> None:
    drifted = drift_switch(lab, "leaf1")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = agent(blocker / "state", "apply", fabric(lab), "--yes")
    assert done.returncode == 2
    assert "state dir" in done.stderr and "Nothing was contacted" in done.stderr
    assert "Traceback" not in done.stderr
    running, sessions = eos.shows(lab, "leaf1", "show running-config", SESSIONS_SHOW)
    assert running == drifted
    assert pending(sessions) == {}
    converge(lab, tmp_path)


def test_validate_fails_on_a_pending_session(lab: Lab, tmp_path: Path) -> None:
    playbook = tmp_path / "sessions.yml"
    playbook.write_text(
        "name: sessions\nsteps:\n  - collect: {counters: false}\n  - checks: {ids: [RC009]}\n"
    )
    clean = agent(tmp_path, "validate", fabric(lab), "--playbook", str(playbook), "--output",
                  "json")  # fmt: skip
    assert clean.returncode == 0, clean.stdout + clean.stderr
    operator = eos.connect(lab, "spine2")
    try:
        operator.send_command("configure session ops-window", expect_string=r"#")
        operator.send_command("end", expect_string=r"#")
        done = agent(tmp_path, "validate", fabric(lab), "--playbook", str(playbook), "--output",
                     "json")  # fmt: skip
    finally:
        operator.send_command("configure session ops-window abort", expect_string=r"#")
        operator.disconnect()
    assert done.returncode == 1
    failed = [c for c in json.loads(done.stdout)["checks"] if c["status"] == "failure"]
    assert [(c["check"], c["device"]) for c in failed] == [("RC009", "spine2")]
    assert "EOS session 'ops-window' (pending, user admin" in failed[0]["messages"][0]

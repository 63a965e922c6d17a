"""The push path against lab switches over SSH (netmiko arista_eos), as a user runs it.

One lab for the module, started with a distinctive password so the last test can prove it
never leaks into output or the audit log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.device.fanout import results_or_raise, run_each
from agent.device.platforms.arista_eos import AristaEos
from agent.device.platforms.base import ConfigRejected, Connection
from tests.lab.support import eos
from tests.lab.support.eos import configure
from tests.lab.support.labs import PASSWORD_ENV, REPO, Lab, LabFactory, requires_lab, run_agent
from tests.lab.support.loopback import free_port

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
SECRET = "Tr0ub4dor-lab-9f3e"
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
OUTPUTS: list[str] = []


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("pu", password=SECRET)


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit")


def agent(audit_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = run_agent(
        *args, timeout=timeout, password=SECRET, env={"ROCE_AGENT_STATE_DIR": str(audit_dir)}
    )
    OUTPUTS.extend([done.stdout, done.stderr])
    return done


def as_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def by_device(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {d["device"]: d for d in as_json(done)["devices"]}


def running_config(lab: Lab, switch: str) -> str:
    return eos.show(lab, switch)


def running_config_diffs(lab: Lab, switch: str) -> str:
    """What a reload of ``switch`` would lose (EOS ``show running-config diffs``)."""
    return eos.show(lab, switch, "show running-config diffs")


def sessions(lab: Lab, switch: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(eos.show(lab, switch, "show configuration sessions | json"))
    return data


def per_switch(read: Callable[[Lab, str], Any], lab: Lab) -> dict[str, Any]:
    """``read`` on every switch side by side (independent logins; order proves nothing)."""
    return results_or_raise(run_each({s: s for s in SWITCHES}, lambda s: read(lab, s)))


def session_names(lab: Lab, switch: str) -> set[str]:
    return set(sessions(lab, switch).get("sessions", {}))


def audit_lines(audit_dir: Path) -> list[dict[str, Any]]:
    path = audit_dir / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def fabric(lab: Lab) -> str:
    return str(lab.status["fabric_file"])


def test_apply_from_factory_config_then_idempotent(lab: Lab, audit_dir: Path) -> None:
    before = agent(audit_dir, "drift", fabric(lab), "--output", "json")
    assert before.returncode == 1
    assert all(d["changes"] > 0 for d in as_json(before)["devices"])

    applied = agent(audit_dir, "apply", fabric(lab), "--yes", "--output", "json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert {d["result"] for d in as_json(applied)["devices"]} == {"applied"}
    records = audit_lines(audit_dir)
    assert [r["record"] for r in records].count("intent") == 4
    results = [r for r in records if r["record"] == "result"]
    assert {r["result"] for r in results} == {"applied"} and len(results) == 4
    # Every result pairs with the intent written before its session (same attempt id).
    intents = {r["attempt"]: r for r in records if r["record"] == "intent"}
    assert all(intents[r["attempt"]]["session"] == r["session"] for r in results)

    with ThreadPoolExecutor(max_workers=1) as pool:  # read-only, beside the session reads
        drifting = pool.submit(agent, audit_dir, "drift", fabric(lab), "--output", "json")
        known_sessions = per_switch(session_names, lab)
        after = drifting.result()
    assert after.returncode == 0 and all(d["changes"] == 0 for d in as_json(after)["devices"])
    # Saved, not only running: a switch that reloads comes back lossless.
    assert per_switch(running_config_diffs, lab) == {switch: "" for switch in SWITCHES}

    again = agent(audit_dir, "apply", fabric(lab), "--yes", "--output", "json")
    assert again.returncode == 0
    assert {d["result"] for d in as_json(again)["devices"]} == {"no-change"}
    assert len(audit_lines(audit_dir)) == 8  # nothing attempted, nothing logged
    assert per_switch(session_names, lab) == known_sessions


def test_hand_changed_threshold_is_drift_and_apply_fixes_exactly_it(
    lab: Lab, audit_dir: Path
) -> None:
    configure(lab, "leaf2", [
        "interface Ethernet3", "uc-tx-queue 3",
        "random-detect ecn minimum-threshold 7000 bytes maximum-threshold 18000 bytes "
        "max-mark-probability 100",
    ])  # fmt: skip
    drift = agent(audit_dir, "drift", fabric(lab), "--output", "json")
    assert drift.returncode == 1
    differences = [x for d in as_json(drift)["devices"] for x in d["differences"]]
    assert differences == [
        {
            "device": "leaf2",
            "interface": "Ethernet3",
            "setting": "queue[3].ecn",
            "expected": "6000-18000@100%",
            "actual": "7000-18000@100%",
        }
    ]
    fixed = by_device(agent(audit_dir, "apply", fabric(lab), "--yes", "--output", "json"))
    assert fixed["leaf2"]["result"] == "applied" and fixed["leaf2"]["changes"] == 1
    assert fixed["leaf2"]["lines"] == [
        "interface Ethernet3",
        "   uc-tx-queue 3",
        "      random-detect ecn minimum-threshold 6000 bytes maximum-threshold 18000 bytes "
        "max-mark-probability 100",
        "   exit",
    ]
    assert {fixed[s]["result"] for s in ("spine1", "spine2", "leaf1")} == {"no-change"}
    assert agent(audit_dir, "drift", fabric(lab)).returncode == 0


def test_refused_line_leaves_the_device_unchanged(lab: Lab) -> None:
    before = running_config(lab, "leaf1")
    connection = Connection(eos.connect(lab, "leaf1"), "leaf1")
    try:
        with pytest.raises(ConfigRejected, match="bogus-command"), AristaEos().transaction(
            connection, ["interface Ethernet1", "   no priority-flow-control", "bogus-command 42"],
            confirm_timeout_s=60,
        ):  # fmt: skip
            pytest.fail("the transaction must not be entered after a refused line")
    finally:
        connection.close()
    assert running_config(lab, "leaf1") == before
    assert not [s for s in sessions(lab, "leaf1").get("sessions", {}).values()
                if s.get("state") != "completed"]  # fmt: skip


def test_foreign_pending_session_blocks_device_and_stops_later_batches(
    lab: Lab, audit_dir: Path
) -> None:
    # drift everywhere: DSCP 10 into the lossless class
    per_switch(
        lambda lab, switch: configure(lab, switch, ["qos map dscp 10 to traffic-class 3"]), lab
    )
    # Another operator's unconfirmed commit on spine2: its timer can still change the switch,
    # so apply must not read it as the state to diff against (default --pending wait).
    blocker = eos.connect(lab, "spine2")
    try:
        blocker.send_command("configure session operator-change", expect_string=r"#")
        blocker.send_command("qos map dscp 12 to traffic-class 3", expect_string=r"#")
        blocker.send_command("commit timer 00:05:00", expect_string=r"#")
        spine2_before = running_config(lab, "spine2")
        started = time.monotonic()
        done = agent(audit_dir, "apply", fabric(lab), "--yes", "--canary", "0", "--batch-size",
                     "2", "--pending-timeout", "3s", "--output", "json")  # fmt: skip
        assert done.returncode == 1
        results = by_device(done)
        assert results["spine1"]["result"] == "applied"
        assert results["spine2"]["result"] == "pending"
        assert "operator-change" in results["spine2"]["error"]
        assert "after waiting 3s" in results["spine2"]["error"]
        assert results["spine2"]["pending"][0]["user"] == "admin"
        assert 200 < results["spine2"]["pending"][0]["rollback_in_s"] <= 300
        assert time.monotonic() - started >= 3  # it did wait
        assert results["leaf1"]["result"] == results["leaf2"]["result"] == "skipped"
        assert running_config(lab, "spine2") == spine2_before  # nothing of ours was sent
        drift = agent(audit_dir, "drift", fabric(lab), "--device", "spine2")
        assert drift.returncode == 1 and "operator-change" in drift.stderr
    finally:
        blocker.send_command("configure session operator-change abort", expect_string=r"#")
        blocker.disconnect()
    assert agent(audit_dir, "apply", fabric(lab), "--yes").returncode == 0
    assert agent(audit_dir, "drift", fabric(lab)).returncode == 0


def test_agent_killed_before_confirm_the_switch_rolls_back(lab: Lab, audit_dir: Path) -> None:
    configure(lab, "leaf1", ["qos map dscp 14 to traffic-class 3"])
    watcher = eos.connect(lab, "leaf1")  # one login reads and polls, as often as it likes
    drifted = str(watcher.send_command("show running-config"))
    env = {**os.environ, PASSWORD_ENV: SECRET, "ROCE_AGENT_STATE_DIR": str(audit_dir)}
    process: subprocess.Popen[bytes] | None = None
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent", "apply", fabric(lab), "--device", "leaf1", "--yes",
             "--confirm-timeout", "5s", "--hold", "60s"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            listed = json.loads(watcher.send_command("show configuration sessions | json"))
            pending = [s for s in listed.get("sessions", {}).values()
                       if s.get("state") == "pendingCommitTimer"]  # fmt: skip
            if pending:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the agent never committed with a timer")
        assert "qos map dscp 14" not in watcher.send_command("show running-config")  # live
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=5)
        deadline = time.monotonic() + 15
        while (
            time.monotonic() < deadline and watcher.send_command("show running-config") != drifted
        ):
            time.sleep(0.1)
    finally:
        watcher.disconnect()
        if process is not None and process.poll() is None:
            process.kill()
    assert running_config(lab, "leaf1") == drifted  # the switch undid it by itself
    incomplete = agent(audit_dir, "audit", "--incomplete", "--output", "json")
    assert incomplete.returncode == 1
    [attempt] = as_json(incomplete)["attempts"]
    assert attempt["device"] == "leaf1" and attempt["status"] == "incomplete"
    assert agent(audit_dir, "apply", fabric(lab), "--yes").returncode == 0
    assert agent(audit_dir, "audit", "--incomplete").returncode == 0  # reconciled
    reconciled = [r for r in audit_lines(audit_dir) if r["record"] == "reconciled"]
    assert reconciled[-1]["attempt"] == attempt["attempt"]


@pytest.mark.parametrize("ghost_first", [False, True], ids=["batch", "canary"])
def test_unreachable_device(lab: Lab, audit_dir: Path, tmp_path: Path, ghost_first: bool) -> None:
    document = yaml.safe_load(Path(fabric(lab)).read_text())
    ghost = {"name": "ghost", "platform": "arista_eos", "role": "leaf", "host": "127.0.0.1",
             "port": free_port(), "ports": []}  # fmt: skip
    document["devices"] = (
        [ghost, *document["devices"]] if ghost_first else [*document["devices"], ghost]
    )
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(document))
    configure(lab, "leaf2", ["qos map dscp 16 to traffic-class 3"])
    done = agent(audit_dir, "apply", str(path), "--yes", "--output", "json")
    # The canary not reached stops everything: nothing was reached, the run could not do its
    # job (2); in a batch the others proceed (1: one device not as intended).
    assert done.returncode == (2 if ghost_first else 1)
    results = by_device(done)
    assert results["ghost"]["result"] == "unreachable"
    assert "refused or dropped the TCP connection" in results["ghost"]["error"]
    if ghost_first:
        assert {results[s]["result"] for s in SWITCHES} == {"skipped"}
        assert agent(audit_dir, "apply", fabric(lab), "--yes").returncode == 0
    else:
        assert results["leaf2"]["result"] == "applied"
        assert {results[s]["result"] for s in ("spine1", "spine2", "leaf1")} == {"no-change"}


def test_no_password_anywhere(lab: Lab, audit_dir: Path) -> None:
    assert OUTPUTS, "run with the other tests of this module"
    assert all(SECRET not in text for text in OUTPUTS)
    assert SECRET not in (audit_dir / "audit.jsonl").read_text()

"""The agent drives a lab switch that speaks SONiC (``lab up --nos sonic``), as a user runs it:
apply, drift, an operator's hand change through GCU found by drift, a change whose confirm
never comes undone by the switch's own ``systemd-run`` timer. ``validate`` with traffic
through a SONiC leaf: ``test_mixed_nos_traffic_lab.py``.

The lab is the one-leaf incast topology with every switch speaking SONiC: the agent connects
with netmiko ``linux`` and sudo, reads CONFIG_DB (``sonic-cfggen -d --print-data``) and the
sonic-utilities show commands, and changes the switch with ``config checkpoint`` /
``apply-patch`` / ``rollback``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.lab.support.dataplane import control
from tests.lab.support.labs import (
    PASSWORD_ENV,
    REPO,
    Lab,
    agent_state_dir,
    incast_lab_speaking,
    requires_lab,
)
from tests.lab.support.labs import run_agent_in as agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
SWITCH = "leaf1"
HEREDOC_PROMPT = r"^> "  # bash's PS2, what each heredoc line is answered with

lab = incast_lab_speaking("sonic")
audit_dir = agent_state_dir()


def fabric(lab: Lab) -> str:
    return str(lab.status["fabric_file"])


def connect(lab: Lab) -> Any:
    """An operator's SSH login (netmiko ``linux``, as the agent's SONiC driver uses)."""
    from netmiko import ConnectHandler

    node, credentials = lab.status["nodes"][SWITCH], lab.status["credentials"]
    return ConnectHandler(
        device_type="linux",
        host=node["mgmt_host"],
        port=node["mgmt_port"],
        username=credentials["username"],
        password=credentials["password"],
        fast_cli=True,
    )


def config_db(session: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(session.send_command("sudo sonic-cfggen -d --print-data"))
    return data


def dataplane_ecn(lab: Lab, port: str = "eth1", queue: str = "3") -> dict[str, Any] | None:
    with control(lab, SWITCH) as client:
        qos = client.get_config()["qos"]
    found: dict[str, Any] | None = (
        qos["ports"].get(port, {}).get("queues", {}).get(queue, {}).get("ecn")
    )
    return found


def hand_patch(session: Any, ops: list[dict[str, Any]]) -> str:
    """``sudo config apply-patch`` of ``ops``, the file written with a heredoc."""
    session.send_config_set(
        ["cat > /tmp/operator.json <<'EOF'", json.dumps(ops), "EOF"],
        enter_config_mode=False,
        exit_config_mode=False,
        terminator=HEREDOC_PROMPT,
    )
    return str(session.send_command("sudo config apply-patch /tmp/operator.json", read_timeout=30))


def test_apply_then_no_drift(lab: Lab, audit_dir: Path) -> None:
    with connect(lab) as session:
        before = config_db(session)
    assert before["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3,4"  # factory QoS
    applied = agent(audit_dir, "apply", fabric(lab), "--yes", "--output", "json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    [device] = json.loads(applied.stdout)["devices"]
    assert (device["device"], device["result"]) == (SWITCH, "applied")
    with connect(lab) as session:
        after = config_db(session)
        checkpoints = json.loads(session.send_command("sudo config list-checkpoints"))
    assert after["DSCP_TO_TC_MAP"]["ROCE"]["26"] == "3"
    assert after["PORT_QOS_MAP"]["Ethernet4"]["dscp_to_tc_map"] == "ROCE"
    assert checkpoints == []  # confirmed: the agent deleted its checkpoint
    assert dataplane_ecn(lab) == {"min_bytes": 6000, "max_bytes": 18000, "max_probability": 100}
    assert agent(audit_dir, "drift", fabric(lab)).returncode == 0


def test_hand_change_is_found_by_drift(lab: Lab, audit_dir: Path) -> None:
    assert agent(audit_dir, "apply", fabric(lab), "--yes").returncode == 0
    with connect(lab) as session:
        [profile] = [n for n in config_db(session)["WRED_PROFILE"] if n.startswith("ROCE_ECN")]
        out = hand_patch(
            session,
            [
                {
                    "op": "replace",
                    "path": f"/WRED_PROFILE/{profile}/green_max_threshold",
                    "value": "24000",
                }
            ],
        )
    assert out.strip().endswith("Patch applied successfully."), out
    assert dataplane_ecn(lab) == {"min_bytes": 6000, "max_bytes": 24000, "max_probability": 100}
    drift = agent(audit_dir, "drift", fabric(lab), "--output", "json")
    assert drift.returncode == 1, drift.stdout + drift.stderr
    assert "queue[3].ecn" in drift.stdout and "24000" in drift.stdout
    assert agent(audit_dir, "apply", fabric(lab), "--yes").returncode == 0
    assert dataplane_ecn(lab) == {"min_bytes": 6000, "max_bytes": 18000, "max_probability": 100}
    assert agent(audit_dir, "drift", fabric(lab)).returncode == 0


def test_refused_hand_patch_changes_nothing(lab: Lab) -> None:
    with connect(lab) as session:
        before = config_db(session)
        out = hand_patch(
            session, [{"op": "remove", "path": "/WRED_PROFILE/AZURE_LOSSLESS/no_such_field"}]
        )
        assert "Failed to apply patch due to: Validate json patch:" in out
        assert "can't remove a non-existent object 'no_such_field'" in out
        assert config_db(session) == before


def test_unconfirmed_change_is_rolled_back_by_the_switch_timer(lab: Lab, audit_dir: Path) -> None:
    """The agent dies holding an unconfirmed change: the switch's systemd-run timer runs
    ``config rollback`` and the old CONFIG_DB (and data plane) come back without the agent."""
    assert agent(audit_dir, "apply", fabric(lab), "--yes").returncode == 0
    with connect(lab) as session:
        [profile] = [n for n in config_db(session)["WRED_PROFILE"] if n.startswith("ROCE_ECN")]
        hand_patch(
            session,
            [
                {
                    "op": "replace",
                    "path": f"/WRED_PROFILE/{profile}/green_min_threshold",
                    "value": "3000",
                }
            ],
        )
        drifted = config_db(session)
    env = {**os.environ, PASSWORD_ENV: "admin", "ROCE_AGENT_STATE_DIR": str(audit_dir)}
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "apply", fabric(lab), "--yes",
         "--confirm-timeout", "5s", "--hold", "60s"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with connect(lab) as watcher:
            deadline = time.monotonic() + 30
            timers = ""
            while time.monotonic() < deadline:  # the timer is armed first, then the patch
                timers = str(watcher.send_command("systemctl list-timers --plain --no-legend"))
                if "-rollback.timer" in timers and config_db(watcher) != drifted:
                    break
                time.sleep(0.2)
            else:
                pytest.fail(f"the agent's change never went live under its timer: {timers!r}")
            assert " left " in timers
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=5)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and config_db(watcher) != drifted:
                time.sleep(0.2)
            assert config_db(watcher) == drifted  # the switch undid it by itself
            elapsed = str(watcher.send_command("systemctl list-timers --all --plain --no-legend"))
    finally:
        if process.poll() is None:
            process.kill()
    assert "n/a n/a" in elapsed  # the timer elapsed (RemainAfterElapsed)
    assert dataplane_ecn(lab) == {"min_bytes": 3000, "max_bytes": 18000, "max_probability": 100}
    # the next apply settles the dead run's checkpoint and brings the switch to the intent
    assert agent(audit_dir, "apply", fabric(lab), "--yes", "--pending", "abort").returncode == 0
    assert agent(audit_dir, "drift", fabric(lab)).returncode == 0

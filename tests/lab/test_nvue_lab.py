"""The agent against a lab leaf that speaks NVIDIA Cumulus Linux (NVUE), as a user runs it.

One lab for the module: containerlab/roce-incast.clab.yml (one leaf, five hosts) brought up
with ``lab up --nos nvue``, so the leaf's management plane is lab.mgmt.nvue and the lab's
fabric file names it ``platform: cumulus_nvue`` with ports ``swp1..5``. The tests run in
order: apply from factory config, drift clean, a hand change over SSH found by drift and
fixed, and an apply whose confirm never comes rolled back by the switch's confirm timer.
Validate with traffic through an NVUE leaf is in test_mixed_nos_traffic_lab.py (serial: its
verdict measures the data plane).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lab.vswitch.client import VswitchClient
from tests.lab.support.labs import (
    Lab,
    agent_state_dir,
    apply_from_factory,
    incast_lab_speaking,
    requires_lab,
)
from tests.lab.support.labs import run_agent_in as agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
LEAF = "leaf1"
HAND_CHANGE = "nv set qos congestion-control default-global traffic-class 3 min-threshold 7000"

lab = incast_lab_speaking("nvue")
state = agent_state_dir()


def as_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def leaf(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    [device] = as_json(done)["devices"]
    assert device["device"] == LEAF
    return device  # type: ignore[no-any-return]


def dataplane_queue3(lab: Lab) -> Any:
    """What the leaf's data plane runs on port eth1's queue 3 (its control socket)."""
    with VswitchClient(str(lab.status["nodes"][LEAF]["control_socket"])) as client:
        return client.get_config()["qos"]["ports"]["eth1"]["queues"]["3"]


def exec_on_leaf(lab: Lab, *lines: str) -> str:
    return lab.exec(LEAF, *lines)


def test_the_fabric_file_names_the_leaf_a_cumulus_switch(lab: Lab) -> None:
    intent = lab.intent()
    [device] = [d for d in intent.devices if d.name == LEAF]
    assert device.platform == "cumulus_nvue"
    assert [p.name for p in device.ports] == [f"swp{i}" for i in range(1, 6)]


def test_apply_from_factory_then_drift_is_clean(lab: Lab, state: Path) -> None:
    apply_from_factory(state, lab.status["fabric_file"], LEAF)
    # the profile's ECN thresholds (6 KB..18 KB on the lossless queue) run in the data plane
    assert dataplane_queue3(lab)["ecn"] == {
        "min_bytes": 6000,
        "max_bytes": 18000,
        "max_probability": 100,
    }
    # confirmed and saved: nothing waits, and startup holds what runs
    assert exec_on_leaf(lab, "nv config apply --confirm-status").strip() == (
        "No applied revision is waiting for confirmation"
    )
    assert exec_on_leaf(lab, "nv config diff applied startup").strip() == ""


def test_a_hand_change_over_ssh_is_drift_and_apply_fixes_it(lab: Lab, state: Path) -> None:
    fabric = lab.status["fabric_file"]
    assert "applied [rev_id:" in exec_on_leaf(lab, HAND_CHANGE, "nv config apply -y")
    assert dataplane_queue3(lab)["ecn"]["min_bytes"] == 7000
    drift = agent(state, "drift", fabric, "--output", "json")
    assert drift.returncode == 1
    assert {(d["setting"], d["expected"], d["actual"]) for d in leaf(drift)["differences"]} == {
        ("queue[3].ecn", "6000-18000@100%", "7000-18000@100%")
    }
    fixed = agent(state, "apply", fabric, "--yes", "--output", "json")
    assert fixed.returncode == 0 and leaf(fixed)["result"] == "applied"
    assert dataplane_queue3(lab)["ecn"]["min_bytes"] == 6000


def test_an_apply_whose_confirm_never_comes_is_rolled_back_by_the_switch(
    lab: Lab, state: Path
) -> None:
    fabric = lab.status["fabric_file"]
    exec_on_leaf(lab, HAND_CHANGE, "nv config apply -y")
    # the agent holds its change unconfirmed past the switch's 5 s confirm timer
    held = agent(state, "apply", fabric, "--yes", "--confirm-timeout", "5s", "--hold", "12s",
                 "--output", "json")  # fmt: skip
    assert held.returncode == 1
    assert leaf(held)["result"] == "failed"
    assert dataplane_queue3(lab)["ecn"]["min_bytes"] == 7000  # the hand change, back again
    history = exec_on_leaf(lab, "nv config history")
    assert "confirm timer expired" in history
    repaired = agent(state, "apply", fabric, "--yes", "--output", "json")
    assert repaired.returncode == 0 and dataplane_queue3(lab)["ecn"]["min_bytes"] == 6000

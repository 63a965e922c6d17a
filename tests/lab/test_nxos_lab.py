"""The agent against a lab leaf that speaks Cisco NX-OS, as a user runs it (issue #46).

One lab for the module: containerlab/roce-incast.clab.yml (one leaf, five hosts) brought up
with ``lab up --nos nxos``, so the leaf's management plane is lab.mgmt.nxos and the lab's
fabric file names it ``platform: cisco_nxos`` with ports ``Ethernet1/1..5``. In order: apply
from factory config (checkpoint, the whole configuration to bootflash: over SCP, ``configure
replace`` with its commit timer, commit, save) and drift clean; a hand change on a host-facing
port made on the switch's own CLI (``no priority-flow-control mode on``) found by drift and
repaired by apply; an apply whose confirm never comes undone by the switch's commit timer;
``validate --no-traffic``, the exporter and ``discover`` against the NX-OS leaf. Validate with
traffic through an NX-OS switch is in test_mixed_nos_traffic_lab.py (serial: its verdict
measures the data plane); the fault drill on NX-OS in test_fault_drill.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.vswitch.client import VswitchClient
from tests.lab.support.labs import (
    Lab,
    agent_state_dir,
    apply_from_factory,
    exporter_serving,
    incast_lab_speaking,
    requires_lab,
)
from tests.lab.support.labs import run_agent_in as agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
LEAF = "leaf1"
HOST_PORT = "Ethernet1/3"  # cabled to host h3
HAND_CHANGE = ("configure terminal", "interface ethernet 1/3", "no priority-flow-control mode on",
               "end")  # fmt: skip

lab = incast_lab_speaking("nxos")
state = agent_state_dir()


def leaf(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    devices = {d["device"]: d for d in json.loads(done.stdout)["devices"]}
    return devices[LEAF]  # type: ignore[no-any-return]


def dataplane_port(lab: Lab, port: str = "eth3") -> Any:
    """What the leaf's data plane runs on one port (its control socket)."""
    with VswitchClient(str(lab.status["nodes"][LEAF]["control_socket"])) as client:
        return client.get_config()["qos"]["ports"].get(port, {})


def exec_on_leaf(lab: Lab, *lines: str) -> str:
    return lab.exec(LEAF, *lines)


def test_the_fabric_file_names_the_leaf_a_nexus(lab: Lab) -> None:
    [device] = [d for d in lab.intent().devices if d.name == LEAF]
    assert device.platform == "cisco_nxos"
    assert [p.name for p in device.ports] == [f"Ethernet1/{i}" for i in range(1, 6)]
    assert exec_on_leaf(lab, "show hostname").strip() == LEAF


def test_apply_from_factory_then_drift_is_clean(lab: Lab, state: Path) -> None:
    apply_from_factory(state, lab.status["fabric_file"], LEAF)
    # the profile runs in the data plane: PFC on priority 3, ECN on its queue
    port = dataplane_port(lab)
    assert port["pfc_enabled"] is True and port["pfc_priorities"] == [3]
    assert port["queues"]["3"]["ecn"] == {"min_bytes": 6000, "max_bytes": 18000,
                                          "max_probability": 100}  # fmt: skip
    # confirmed, saved and cleaned up: no checkpoint, no file, nothing a reload would lose
    assert "roce-agent" not in exec_on_leaf(lab, "show checkpoint summary")
    assert ".cfg" not in exec_on_leaf(lab, "dir bootflash:")
    assert exec_on_leaf(lab, "show running-config diff").strip() == ""


def test_a_hand_change_on_the_cli_is_drift_and_apply_repairs_it(lab: Lab, state: Path) -> None:
    fabric = lab.status["fabric_file"]
    assert "%" not in exec_on_leaf(lab, *HAND_CHANGE)
    assert dataplane_port(lab)["pfc_enabled"] is False
    drift = agent(state, "drift", fabric, "--output", "json")
    assert drift.returncode == 1, drift.stdout + drift.stderr
    found = {(d["interface"], d["setting"], str(d["actual"])) for d in leaf(drift)["differences"]}
    assert found == {(HOST_PORT, "pfc_enabled", "False"), (HOST_PORT, "pfc_priorities", "[]")}
    fixed = agent(state, "apply", fabric, "--yes", "--output", "json")
    assert fixed.returncode == 0 and leaf(fixed)["result"] == "applied"
    assert dataplane_port(lab)["pfc_enabled"] is True
    assert agent(state, "drift", fabric).returncode == 0


def test_an_apply_whose_confirm_never_comes_is_undone_by_the_switch(lab: Lab, state: Path) -> None:
    """configure replace's commit timer (30 s at least) runs out while the agent holds its
    change unconfirmed: NX-OS puts the configuration from before the replace back."""
    fabric = lab.status["fabric_file"]
    exec_on_leaf(lab, *HAND_CHANGE)
    held = agent(state, "apply", fabric, "--yes", "--confirm-timeout", "5s", "--hold", "40s",
                 "--output", "json", timeout=300)  # fmt: skip
    assert held.returncode == 1, held.stdout + held.stderr
    assert leaf(held)["result"] == "failed"
    assert dataplane_port(lab)["pfc_enabled"] is False  # the hand change, back again
    assert "roce-agent" not in exec_on_leaf(lab, "show checkpoint summary")
    repaired = agent(state, "apply", fabric, "--yes", "--output", "json")
    assert repaired.returncode == 0 and dataplane_port(lab)["pfc_enabled"] is True


def test_validate_reads_the_nexus_through_its_driver(lab: Lab, state: Path) -> None:
    assert agent(state, "apply", lab.status["fabric_file"], "--yes").returncode == 0
    done = agent(state, "validate", lab.status["fabric_file"], "--no-traffic", "-o", "json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    on_leaf = {r["check"]: r["status"] for r in report["checks"] if r.get("device") == LEAF}
    # drift (RC008), pending changes (RC009) and the counter checks ran on the Nexus
    assert on_leaf.get("RC008") == "success" and on_leaf.get("RC009") == "success", on_leaf
    assert "error" not in on_leaf.values(), on_leaf


@pytest.fixture
def exporter(lab: Lab) -> Iterator[str]:
    with exporter_serving(lab.status["fabric_file"]) as url:
        yield url


def test_the_exporter_reads_the_nexus(exporter: str) -> None:
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(exporter, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            time.sleep(0.5)
            continue
        if re.search(rf'roce_device_up\{{[^}}]*device="{LEAF}"[^}}]*\}} 1', text):
            break
        time.sleep(1)
    assert re.search(rf'roce_device_up\{{[^}}]*device="{LEAF}"[^}}]*\}} 1', text), text[-2000:]
    for metric in ("roce_pfc_frames_total", "roce_queue_transmitted_packets_total",
                   "roce_queue_ecn_marked_packets_total", "roce_pfc_watchdog_stormed"):  # fmt: skip
        pattern = rf'{metric}\{{[^}}]*device="{LEAF}"[^}}]*interface="Ethernet1/1"'
        assert re.search(pattern, text), metric


def test_discover_reads_the_nexus_lldp(lab: Lab, state: Path) -> None:
    done = agent(state, "discover", lab.status["fabric_file"], "-o", "json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    devices = {d["name"]: d for d in json.loads(done.stdout)["devices"]}
    assert devices[LEAF]["platform"] == "cisco_nxos" and devices[LEAF]["role"] == "leaf"
    assert {p["name"]: p["peer"] for p in devices[LEAF]["ports"]} == {
        f"Ethernet1/{i}": f"h{i}:eth1" for i in range(1, 6)
    }

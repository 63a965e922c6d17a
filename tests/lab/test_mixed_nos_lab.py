"""A mixed-NOS fabric live: an EOS spine, an NX-OS spine, a SONiC leaf and an NVUE leaf
(issue #32, item 2; NX-OS: issue #46).

One lab of ``containerlab/roce-leafspine-mixed.clab.yml``; the agent runs as a user runs it
(``python -m agent …`` in a subprocess, netmiko over SSH to each switch's personality): a
rollout with a canary and batches, drift, a hand change on each NOS made the way its operator
makes it (``roce-agent lab exec``: EOS CLI, NX-OS CLI, a GCU patch, ``nv set`` + ``nv config
apply``)
found by ``drift`` and repaired by ``apply``, and the exporter's metrics. The control plane
only (``lab_parallel``); validate with traffic and ``locate`` are in
``test_mixed_nos_traffic_lab.py``.
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

from tests.lab.support.labs import (
    REPO,
    Lab,
    LabFactory,
    exporter_serving,
    requires_lab,
    run_agent,
)

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
MIXED = REPO / "containerlab" / "roce-leafspine-mixed.clab.yml"
PLATFORMS = {"spine1": "arista_eos", "spine2": "cisco_nxos", "leaf1": "sonic",
             "leaf2": "cumulus_nvue"}  # fmt: skip
# A hand change per NOS, as its operator makes it: each moves the RoCE priority's PFC.
HAND_CHANGES = {
    "spine1": ["configure", "interface Ethernet1", "qos trust cos", "end"],
    "spine2": [
        "configure terminal",
        "interface ethernet 1/1",
        "no priority-flow-control mode on",
        "end",
    ],
    "leaf1": [
        "cat > /tmp/hand.json <<'EOF'",
        '[{"op": "replace", "path": "/PORT_QOS_MAP/Ethernet0/pfc_enable", "value": "3,4"}]',
        "EOF",
        "sudo config apply-patch /tmp/hand.json",
    ],
    "leaf2": ["nv set qos pfc default-global switch-priority 3,4", "nv config apply -y"],
}


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("mx", MIXED, password="admin")


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mxaudit")


@pytest.fixture
def lossless(lab: Lab, state_dir: Path) -> Lab:
    """The fabric at its intent (a no-op after the rollout test): the tests that read counters
    or send traffic do not depend on the order they run in."""
    done = agent(state_dir, "apply", fabric(lab), "--yes")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return lab


def fabric(lab: Lab) -> str:
    return str(lab.status["fabric_file"])


def agent(state_dir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``roce-agent ARGS``; commands that write an audit log write it under ``state_dir``."""
    audited = ["--state-dir", str(state_dir)] if args[0] in ("apply", "validate") else []
    return run_agent(*args, *audited, timeout=timeout)


def by_device(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert done.stdout, done.stderr
    return {d["device"]: d for d in json.loads(done.stdout)["devices"]}


def test_every_switch_speaks_its_nos(lab: Lab) -> None:
    nodes = lab.current_status()["nodes"]
    assert {n: nodes[n]["nos"] for n in PLATFORMS} == {
        "spine1": "eos", "spine2": "nxos", "leaf1": "sonic", "leaf2": "nvue",
    }  # fmt: skip
    assert "Internal build version" in lab.cli("exec", "spine1", "show version").stdout  # EOS
    nxos = json.loads(
        lab.cli("exec", "spine2", "show interface priority-flow-control | json").stdout
    )
    assert "TABLE_module" in nxos
    sonic = json.loads(lab.cli("exec", "leaf1", "sudo sonic-cfggen -d --print-data").stdout)
    assert "PORT_QOS_MAP" in sonic and "Ethernet0" in sonic["PORT"]
    nvue = json.loads(lab.cli("exec", "leaf2", "nv show qos roce -o json").stdout)
    assert isinstance(nvue, dict) and nvue


def test_rollout_with_a_canary_and_batches_reaches_every_nos(lab: Lab, state_dir: Path) -> None:
    before = by_device(agent(state_dir, "drift", fabric(lab), "--output", "json"))
    assert all(before[s]["differences"] for s in PLATFORMS), before
    done = agent(
        state_dir, "apply", fabric(lab), "--yes", "--canary", "1", "--batch-size", "2",
        "--confirm-timeout", "60s", "--output", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    results = by_device(done)
    assert {s: results[s]["result"] for s in PLATFORMS} == dict.fromkeys(PLATFORMS, "applied")
    assert agent(state_dir, "drift", fabric(lab)).returncode == 0
    again = by_device(agent(state_dir, "apply", fabric(lab), "--yes", "--output", "json"))
    assert {s: again[s]["result"] for s in PLATFORMS} == dict.fromkeys(PLATFORMS, "no-change")


def test_a_hand_change_on_each_nos_is_drift_and_apply_repairs_it(lab: Lab, state_dir: Path) -> None:
    for switch, lines in HAND_CHANGES.items():
        done = lab.cli("exec", switch, *lines)
        assert done.returncode == 0, (switch, done.stdout, done.stderr)
    drift = agent(state_dir, "drift", fabric(lab), "--output", "json")
    assert drift.returncode == 1, drift.stdout + drift.stderr
    drifted = {d: r for d, r in by_device(drift).items() if r["differences"]}
    assert set(drifted) == set(HAND_CHANGES), drifted
    settings = {d: {x["setting"] for x in r["differences"]} for d, r in drifted.items()}
    assert any("trust" in s for s in settings["spine1"]), settings
    assert any("pfc" in s.lower() for s in settings["spine2"]), settings
    assert any("pfc" in s.lower() for s in settings["leaf1"]), settings
    assert any("pfc" in s.lower() for s in settings["leaf2"]), settings
    fixed = by_device(agent(state_dir, "apply", fabric(lab), "--yes", "--output", "json"))
    assert {s: fixed[s]["result"] for s in HAND_CHANGES} == dict.fromkeys(HAND_CHANGES, "applied")
    assert agent(state_dir, "drift", fabric(lab)).returncode == 0


@pytest.fixture
def exporter(lossless: Lab) -> Iterator[str]:
    with exporter_serving(fabric(lossless)) as url:
        yield url


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def test_the_exporter_reads_every_nos(lab: Lab, exporter: str) -> None:
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline:
        try:
            text = _scrape(exporter)
        except OSError:
            time.sleep(0.5)
            continue
        up = dict(re.findall(r'roce_device_up\{[^}]*device="(\w+)"[^}]*\} (\S+)', text))
        if all(float(up.get(s, 0)) == 1 for s in PLATFORMS):
            break
        time.sleep(1)
    up = dict(re.findall(r'roce_device_up\{[^}]*device="(\w+)"[^}]*\} (\S+)', text))
    errors = [line for line in text.splitlines() if line.startswith("roce_poll_errors_total")]
    assert {s: float(up.get(s, 0)) for s in PLATFORMS} == dict.fromkeys(PLATFORMS, 1), (up, errors)
    # Each NOS's counters arrive under its own port names.
    ports = (("leaf1", "Ethernet8"), ("leaf2", "swp3"), ("spine1", "Ethernet1"),
             ("spine2", "Ethernet1/1"))  # fmt: skip
    for device, port in ports:
        pattern = rf'roce_pfc_\w+_total\{{[^}}]*device="{device}"[^}}]*interface="{port}"'
        assert re.search(pattern, text), (device, port)

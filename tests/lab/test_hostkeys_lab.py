"""Host key checking against lab switches over SSH, as a user runs the agent.

`lab up` pins every switch's key in the fabric file, so checking is on and the agent works;
a fabric without keys is refused (or learns them with --trust-on-first-use); a switch whose
key was rotated (lab fault knob, SIGUSR2 to its management process) is refused with both
fingerprints, whatever the source of the expected key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.mgmt.launcher import rotate_host_key
from tests.lab.support.labs import Lab, LabFactory, requires_lab, run_agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("hk")


def agent(home: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The agent with its own state directory and ``$HOME`` (where ~/.ssh/known_hosts is)."""
    return run_agent(
        *args, timeout=180, env={"ROCE_AGENT_STATE_DIR": str(state), "HOME": str(home)}
    )


def results(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {d["device"]: d for d in json.loads(done.stdout)["devices"]}


def scanned_keys(lab: Lab) -> dict[str, str]:
    """Each switch's key as OpenSSH's ssh-keyscan sees it (independent of the agent)."""
    keys = {}
    for switch in SWITCHES:
        node = lab.status["nodes"][switch]
        out = subprocess.run(
            ["ssh-keyscan", "-t", "ed25519", "-p", str(node["mgmt_port"]), node["mgmt_host"]],
            capture_output=True, text=True, timeout=20,
        ).stdout.split()  # fmt: skip
        keys[switch] = f"{out[1]} {out[2]}"
    return keys


def sha256(line: str) -> str:
    digest = hashlib.sha256(base64.b64decode(line.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def without_keys(lab: Lab, path: Path, **defaults: str) -> Path:
    document = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    for device in document["devices"]:
        device.pop("host_key", None)
    document["defaults"].update(defaults)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_lab_up_pins_the_switch_keys_and_the_agent_connects(lab: Lab, tmp_path: Path) -> None:
    document = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    pinned = {d["name"]: d["host_key"] for d in document["devices"] if d["name"] in SWITCHES}
    assert pinned == scanned_keys(lab)
    done = agent(tmp_path, tmp_path, "drift", lab.status["fabric_file"], "--output", "json")
    assert done.returncode == 1, done.stderr  # factory QoS differs; every switch was read
    assert {r["result"] for r in results(done).values()} == {"changes"}


def test_unknown_keys_are_refused_then_learnt_on_first_use(lab: Lab, tmp_path: Path) -> None:
    fabric = without_keys(lab, tmp_path / "fabric.yml")
    state = tmp_path / "state"
    refused = agent(tmp_path, state, "drift", str(fabric), "--output", "json")
    assert refused.returncode == 2
    for switch, result in results(refused).items():
        assert result["result"] == "host key unknown"
        assert result["error"].startswith(f"{switch}: host key unknown: the host key of 127.0.0.1:")
        assert "is not known, refusing to connect" in result["error"]
    assert not (state / "known_hosts").exists()

    learnt = agent(
        tmp_path, state, "--trust-on-first-use", "drift", str(fabric), "--output", "json"
    )
    assert learnt.returncode == 1, learnt.stdout + learnt.stderr
    recorded = (state / "known_hosts").read_text().splitlines()
    keys = scanned_keys(lab)
    ports = {s: lab.status["nodes"][s]["mgmt_port"] for s in SWITCHES}
    assert sorted(recorded) == sorted(f"[127.0.0.1]:{ports[s]} {keys[s]}" for s in SWITCHES)
    again = agent(tmp_path, state, "drift", str(fabric), "--output", "json")  # no flag now
    assert again.returncode == 1 and {r["result"] for r in results(again).values()} == {"changes"}


def test_user_known_hosts_is_a_source(lab: Lab, tmp_path: Path) -> None:
    fabric = without_keys(lab, tmp_path / "fabric.yml")
    keys = scanned_keys(lab)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh/known_hosts").write_text("".join(
        f"[127.0.0.1]:{lab.status['nodes'][s]['mgmt_port']} {keys[s]}\n" for s in SWITCHES
    ))  # fmt: skip
    done = agent(tmp_path, tmp_path / "state", "drift", str(fabric), "--output", "json")
    assert done.returncode == 1 and {r["result"] for r in results(done).values()} == {"changes"}


def test_rotated_key_is_refused_with_both_fingerprints(lab: Lab, tmp_path: Path) -> None:
    before = scanned_keys(lab)
    tofu_fabric = without_keys(lab, tmp_path / "tofu.yml", host_key_policy="tofu")
    state = tmp_path / "state"
    assert agent(tmp_path, state, "drift", str(tofu_fabric)).returncode == 1  # learnt
    processes = json.loads((lab.state_dir / "state.json").read_text())["processes"]
    rotate_host_key(int(processes["leaf1:mgmt"]["pid"]))
    deadline = time.monotonic() + 10
    while scanned_keys(lab)["leaf1"] == before["leaf1"] and time.monotonic() < deadline:
        time.sleep(0.2)
    after = scanned_keys(lab)["leaf1"]
    assert after != before["leaf1"]
    port = lab.status["nodes"]["leaf1"]["mgmt_port"]

    for fabric in (lab.status["fabric_file"], str(tofu_fabric)):  # pinned, then learnt
        started = time.monotonic()
        alone = agent(tmp_path, state, "drift", fabric, "--device", "leaf1")
        assert alone.returncode == 2, alone.stdout + alone.stderr  # could not be read
        done = agent(tmp_path, state, "drift", fabric, "--output", "json")
        assert done.returncode == 1, done.stdout + done.stderr  # the others differ
        leaf1 = results(done)["leaf1"]
        assert leaf1["result"] == "host key changed"
        assert leaf1["error"].startswith(
            f"leaf1: host key changed: the host key of 127.0.0.1:{port} has changed"
        )
        assert f"Expected: {sha256(before['leaf1'])} (ssh-ed25519)" in leaf1["error"]
        assert f"Actual: {sha256(after)} (ssh-ed25519)" in leaf1["error"]
        assert time.monotonic() - started < 30  # refused at once, not after connect retries
        assert {results(done)[s]["result"] for s in ("spine1", "spine2", "leaf2")} == {"changes"}

    # apply: the refused switch is reported as such, the others proceed (exit 1).
    applied = agent(
        tmp_path, state, "apply", lab.status["fabric_file"], "--yes", "--output", "json"
    )
    assert applied.returncode == 1
    by_device = results(applied)
    assert by_device["leaf1"]["result"] == "host key changed"
    assert {by_device[s]["result"] for s in ("spine1", "spine2", "leaf2")} == {"applied"}


def test_pinned_key_of_a_type_the_switch_lacks_is_refused(lab: Lab, tmp_path: Path) -> None:
    import asyncssh

    ecdsa = asyncssh.generate_private_key("ecdsa-sha2-nistp256").export_public_key().decode()
    document = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    for device in document["devices"]:
        if device["name"] == "leaf2":
            device["host_key"] = " ".join(ecdsa.split()[:2])
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(yaml.safe_dump(document, sort_keys=False))
    done = agent(tmp_path, tmp_path, "drift", str(fabric), "--device", "leaf2", "--output", "json")
    assert done.returncode == 2
    error = results(done)["leaf2"]["error"]
    assert "has changed, refusing to connect" in error
    assert f"Expected: {sha256(ecdsa)} (ecdsa-sha2-nistp256)" in error
    assert "Actual: no key of that type offered" in error

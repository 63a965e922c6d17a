"""The exit-code contract against a healthy lab (docs/cli-conventions.md, "Exit codes"), as a
user runs the commands (own process, real exit code): the unit walk
(tests/unit/test_exit_codes.py) has every command that reads a fabric fail alike when nothing
answers; here the same commands on one lab -- before the fabric is applied (1: the switches
are not as intended), after (0), with one switch moved to a port where nothing listens (1:
reached while another was not), and with all of them moved away (2).

Control plane only (SSH reads and one apply, no traffic, no rate): marker lab_parallel.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lab.support.labs import Lab, LabFactory, requires_lab, run_agent
from tests.lab.support.loopback import free_port

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
OFFLINE = ["check", "plan", "render"]


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("ex")


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exit-state")


def agent(state: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    done = run_agent(*args, env={"ROCE_AGENT_STATE_DIR": str(state)}, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def fabric_of(lab: Lab) -> Path:
    return Path(lab.status["fabric_file"])


def moved(lab: Lab, folder: Path, names: tuple[str, ...]) -> Path:
    """The lab's fabric with ``names`` moved to loopback ports where nothing listens."""
    document: dict[str, Any] = yaml.safe_load(fabric_of(lab).read_text())
    for device in document["devices"]:
        if device["name"] in names:
            device["port"] = free_port()
    path = folder / f"moved-{'-'.join(names)}.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def results(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {d["device"]: d["result"] for d in json.loads(done.stdout)["devices"]}


def test_the_contract_on_a_lab(lab: Lab, state: Path, tmp_path: Path) -> None:
    fabric = fabric_of(lab)
    for command in OFFLINE:
        done = agent(state, command, fabric)
        assert done.returncode == 0, (command, done.stderr)

    # Factory configuration: every switch differs from the intent.
    for command in (["diff"], ["drift"], ["apply", "--dry-run"]):
        done = agent(state, *command, fabric, "-o", "json")
        assert done.returncode == 1, (command, done.stderr)
        assert set(results(done).values()) <= {"changes", "no-change"}
        assert done.stderr.count("error: ") == 0  # differences are not errors

    applied = agent(state, "apply", fabric, "--yes", "-o", "json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert set(results(applied).values()) == {"applied"}

    # As intended now: every read-only command agrees.
    for command in (["diff"], ["drift"], ["apply", "--dry-run"], ["apply", "--yes"]):
        done = agent(state, *command, fabric, "-o", "json")
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert set(results(done).values()) == {"no-change"}

    # One switch not reached, the others as intended: 1, and one line naming it.
    one_away = moved(lab, tmp_path, ("leaf2",))
    for command in (["diff"], ["drift"], ["apply", "--dry-run", "--canary", "0"]):
        done = agent(state, "--connect-timeout", "3s", *command, one_away, "-o", "json")
        assert done.returncode == 1, (command, done.stderr)
        assert results(done)["leaf2"] == "unreachable"
        assert {results(done)[s] for s in SWITCHES if s != "leaf2"} == {"no-change"}
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: leaf2: unreachable: 127.0.0.1:")

    # Nothing reached: 2, every command alike (issue #41, finding 4).
    all_away = moved(lab, tmp_path, SWITCHES)
    for command in (["diff"], ["drift"], ["apply", "--dry-run"], ["validate", "--no-traffic"]):
        done = agent(state, "--connect-timeout", "2s", *command, all_away)
        assert done.returncode == 2, (command, done.stderr)


def test_validate_without_traffic_on_the_applied_lab(lab: Lab, state: Path) -> None:
    """Read-only validation of the lab as applied above: the checks judge what was read; the
    lab's namespace hosts have no RoCE NIC to read, so their host checks are not judged."""
    done = agent(state, "validate", fabric_of(lab), "--no-traffic", "-o", "json")
    report = json.loads(done.stdout)
    assert report["checks"], "the switches were read and judged"
    statuses = {c["device"]: c["status"] for c in report["checks"] if c["device"] in SWITCHES}
    assert set(statuses) == set(SWITCHES)
    assert done.returncode == (0 if report["passed"] else 1), (done.returncode, done.stderr)

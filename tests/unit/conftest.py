"""Shared fixtures of the unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.unit.bounded_cli import bounded_runner

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables 200 columns wide, so a test reads a cell whole (a pipe gets 100 and folds
    them); the width rules themselves are tested in test_readable_output.py, whose tests set
    or remove COLUMNS."""
    monkeypatch.setenv("COLUMNS", "200")


# ``roce-agent`` runs, each in its own forked process under 2 GiB and 30 s.
bounded_cli = pytest.fixture(scope="session", name="bounded_cli")(bounded_runner)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A recorded (not running) leaf-spine lab in phase ``up``: the ``state.json`` and fabric
    file ``lab up`` would write for containerlab/roce-leafspine.clab.yml, nothing started."""
    from lab import runtime
    from lab.addressing import build_plan, fabric_document
    from lab.topology.loader import load_topology

    topology = load_topology(REPO / "containerlab" / "roce-leafspine.clab.yml")
    plan = build_plan(topology, "flt")
    directory = tmp_path / "flt"
    directory.mkdir()
    state = runtime._new_state(plan, topology, directory)
    state.data["phase"] = "up"
    state.save()
    ports = {s.name: 1000 + i for i, s in enumerate(plan.switches())}
    (directory / runtime.FABRIC_FILE).write_text(yaml.safe_dump(fabric_document(plan, ports)))
    return directory

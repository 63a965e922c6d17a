"""`roce-agent locate` against faults injected in the lab (issue #15, item 4).

One leaf-spine lab configured by `roce-agent apply`; `roce-agent locate` through the CLI
(without `--load`: its incast doubles the run's processes on the shared CI machine, and
neither case here needs congestion) with no fault (exit 0, no suspect, every path clean) and
with a bad optic on one link direction (exit 1, that link first with its FCS evidence), whose
verdict is then fed to the
exporter's store as the daemon does. Every fault kind, on seeded random elements, with the
accuracy and the time to verdict: `bench/locate.py` (about 20 s per run, too long for this
suite); each kind's rule: tests/unit/test_locate.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LAB_UNAVAILABLE, REPO, Lab, running_lab

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from exporters.fasttext import render_text
from exporters.store import SnapshotStore
from lab.faults import LabFaults

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=str(LAB_UNAVAILABLE)),
]
SEED = 15
DURATION_S = 2.0  # mesh seconds per run: the faults here cost tens of packets per path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = f"lo{os.getpid()}"
    with running_lab(name, tmp_path_factory.mktemp("locatelab") / name) as started:
        applied = subprocess.run(
            [sys.executable, "-m", "agent", "apply", started.status["fabric_file"], "--yes",
             "--state-dir", str(started.state_dir / "agent")],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stdout + applied.stderr
        yield started


@pytest.fixture(scope="module")
def intent(lab: Lab) -> FabricIntent:
    return load_fabric(Path(lab.status["fabric_file"])).intent


def _locate_cli(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "locate", lab.status["fabric_file"],
         "--duration", str(DURATION_S), *args],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip


def test_no_fault_no_suspect_exit_0(lab: Lab) -> None:
    done = _locate_cli(lab, "--output", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["fault_found"] is False and verdict["suspects"] == []
    assert verdict["paths"] == 20 and verdict["bad_paths"] == 0  # 4 same-leaf + 8 pairs x 2
    assert verdict["summary"].startswith("no fault found")


def test_a_faulty_run_exits_1_names_the_link_and_feeds_the_exporter(
    lab: Lab, intent: FabricIntent
) -> None:
    faults = LabFaults(lab.state_dir)
    added = faults.add("corrupt", "leaf1:Ethernet2>spine2", percent=5.0)  # the fabric's names
    try:
        done = _locate_cli(lab, "--output", "json")
    finally:
        faults.remove(added.id)
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    first = verdict["suspects"][0]
    assert (first["kind"], first["element"]) == ("link", "leaf1:Ethernet2>spine2"), verdict
    assert any("FCS errors" in line for line in first["evidence"]), first
    assert any(c["device"] == "spine2" and c.get("fcs_errors") for c in verdict["counters_moved"])
    # The daemon feeds this verdict to its exporter: the suspect becomes a series.
    store = SnapshotStore.for_fabric(intent)
    store.update_locate(verdict)
    text = render_text(store.snapshot()).decode()
    assert (
        f'roce_locate_suspect{{element="leaf1:Ethernet2>spine2",fabric="{intent.name}",'
        'kind="link"} 0.9' in text
    ), text

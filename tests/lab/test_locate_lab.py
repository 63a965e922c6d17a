"""`roce-agent locate` against faults injected in the lab (issue #15, item 4).

One leaf-spine lab configured by `roce-agent apply`; for each fault kind one target drawn
with a fixed seed from the elements that kind can break (bench/locate.py: the same draw and
trial code, several trials per kind, accuracy and time to verdict), plus a run with no fault:
locate (with --load, as the bench) must rank the injected element first, and raise no
suspect when nothing is wrong. The no-fault run goes through the CLI (exit 0, JSON), a faulty
one through the CLI too (exit 1, Markdown), and one verdict is fed to the exporter's store as
the daemon does, so `roce_locate_suspect` names the element.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import LAB_UNAVAILABLE, REPO, Lab, running_lab

from agent.intent import FabricIntent
from agent.loader import load_fabric
from agent.locate_fabric import as_json, run_locate
from exporters.fasttext import render_text
from exporters.store import SnapshotStore
from lab.faults import LabFaults

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=str(LAB_UNAVAILABLE)),
]
SEED = 15
DURATION_S = 2.0  # mesh seconds per run: the faults here cost tens of packets per path


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_locate", REPO / "bench" / "locate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_locate"] = module
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


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
        [sys.executable, "-m", "agent", "locate", lab.status["fabric_file"], "--load",
         "--duration", str(DURATION_S), *args],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip


def test_no_fault_no_suspect_exit_0(lab: Lab) -> None:
    done = _locate_cli(lab, "--output", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["fault_found"] is False and verdict["suspects"] == []
    # 4 same-leaf pairs + 8 cross-leaf pairs x 2 spines, and the 4 flows of the load
    assert verdict["paths"] == 24 and verdict["bad_paths"] == 0
    assert verdict["summary"].startswith("no fault found")


KINDS = BENCH.KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_locate_names_the_injected_fault_first(lab: Lab, intent: FabricIntent, kind: str) -> None:
    (trial,) = [t for t in BENCH.draw(intent, (kind,), 1, SEED) if t.kind == kind]
    outcome = BENCH.run_trial(
        intent, LabFaults(lab.state_dir), trial, DURATION_S, locate=run_locate
    )
    assert outcome.right, outcome.as_dict()
    assert not LabFaults(lab.state_dir).list()  # removed again


def test_a_faulty_run_exits_1_with_markdown_and_feeds_the_exporter(
    lab: Lab, intent: FabricIntent
) -> None:
    faults = LabFaults(lab.state_dir)
    added = faults.add("corrupt", "leaf1:eth2>spine2", percent=5.0)
    try:
        done = _locate_cli(lab, "--output", "markdown")
        run = run_locate(intent, duration_s=DURATION_S)
    finally:
        faults.remove(added.id)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "| 1 | link | `leaf1:Ethernet2>spine2` |" in done.stdout, done.stdout
    assert "FCS errors" in done.stdout
    store = SnapshotStore.for_fabric(intent)
    store.update_locate(as_json(run))
    text = render_text(store.snapshot()).decode()
    assert (
        'roce_locate_suspect{fabric="roce-leafspine",kind="link",'
        'element="leaf1:Ethernet2>spine2"} 0.9' in text
    ), text

"""`roce-agent locate` against faults injected in the lab (issue #15, item 4).

One leaf-spine lab configured by `roce-agent apply`; `roce-agent locate` through the CLI
(without `--load`: its incast doubles the run's processes on the shared CI machine, and
neither case here needs congestion) with no fault (exit 0, no suspect, every path clean) and
with a bad optic on one link direction (exit 1, that link first with its FCS evidence), whose
verdict is then fed to the exporter's store as the daemon does. Every fault kind, on seeded
random elements, with the accuracy and the time to verdict: `bench/locate.py` (its runs are
too long for this suite); each kind's rule: tests/unit/test_locate.py.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from agent.intent.model import FabricIntent
from exporters.fasttext import render_text
from exporters.store import SnapshotStore
from lab.faults import LabFaults
from tests.lab.support.labs import Lab, LabFactory, apply_fabric, requires_lab, run_agent

pytestmark = [pytest.mark.lab, requires_lab]
SEED = 15
DURATION_S = 2.0  # mesh seconds per run: the faults here cost tens of packets per path


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("lo", password="admin")
    apply_fabric(started)
    return started


@pytest.fixture(scope="module")
def intent(lab: Lab) -> FabricIntent:
    return lab.intent()


def _locate_cli(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return run_agent("locate", lab.status["fabric_file"], "--duration", f"{DURATION_S:g}s", *args)


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


def test_an_adaptive_run_stops_when_sure(lab: Lab) -> None:
    """Without --duration the mesh runs in rounds until the SPRT has decided every path
    (issue #30): on a clean fabric, every path clean and the run stopped confident. At a
    5 % floor a path needs 77 clean probes, a few seconds of the mesh."""
    done = run_agent(
        "locate", lab.status["fabric_file"], "--min-loss", "5%", "--max-duration", "50s",
        "--output", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert (verdict["stopped"], verdict["confidence"], verdict["min_loss"]) == (
        "confident", 0.95, 0.05,
    ), verdict  # fmt: skip
    assert verdict["rounds"] >= 1 and verdict["time_to_verdict_s"] <= 50
    assert {p["sprt"] for p in verdict["probed_paths"]} == {"clean"}
    assert all(p["sent"] >= 77 for p in verdict["probed_paths"])

"""``roce-agent validate`` on a lab leaf that speaks NVUE (``lab up --nos nvue``), after the
agent applied the fabric through it: every check passes and the wire probes lose nothing.

Not ``lab_parallel``: the verdict measures the data plane (drops, pause frames), which needs
the CPU the lab's hosts and vswitch run on. Traffic stays inside the lab's namespaces
(198.18.0.0/15).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.lab.support.labs import INCAST, Lab, LabFactory, apply_fabric, requires_lab, run_agent

pytestmark = [pytest.mark.lab, requires_lab]


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("nvv", INCAST, nos="nvue")
    apply_fabric(started)
    return started


def test_validate_passes_on_the_nvue_leaf(lab: Lab) -> None:
    done = run_agent(
        "validate", lab.status["fabric_file"], "--output", "json",
        "--state-dir", str(lab.state_dir / "agent"), timeout=600,
    )  # fmt: skip
    report: dict[str, Any] = json.loads(done.stdout)
    failed = [(c["check"], c["messages"]) for c in report["checks"]
              if c["status"] not in ("success", "skipped")]  # fmt: skip
    assert done.returncode == 0 and failed == [], failed
    # the checks read the leaf through the NVUE driver: RC008 (drift) and RC009 (no pending
    # revision) ran on it, not skipped
    ran = {c["check"] for c in report["checks"] if c["device"] == "leaf1"}
    assert {"RC008", "RC009", "RC101"} <= ran
    lossless = [s for s in report["steps"] if "no loss" in s["name"]]
    assert lossless and all(s["detail"]["totals"]["lost"] == 0 for s in lossless)

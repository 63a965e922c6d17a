"""The twin predicts the lab (issue #13): 2:1 and 4:1 incast, paused, CE and goodput fractions
within ±15 % (:mod:`agent.ops.twin_vs_lab`), with the hosts' DCQCN on and with PFC alone.

The lab is ``containerlab/roce-incast.clab.yml`` (one leaf, five hosts, 10 Mb/s ports standing
for 1 Gb/s), configured by ``roce-agent apply`` from its own fabric file, the file the twin
reads too. One lab run of 4 s per case against the twin's median over three seeds. The twin
runs about 5 % above the lab's CE fraction with DCQCN on; a 2 s lab run spreads ±8 % around
its median, which put single runs outside ±15 % (CE 0.219 against 0.274 once in CI); 4 s
runs spread ±2 % (``bench/twin_vs_lab.py`` runs several and shows them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import INCAST, INCAST_NODES, LAB_UNAVAILABLE, REPO, Lab, start_lab, stop_lab

from agent.intent.loader import load_fabric
from agent.ops.twin_vs_lab import compare, measure_lab, median, predict_lab
from agent.twin.network import build_network

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=str(LAB_UNAVAILABLE)),
]
DURATION_S = 4.0
TWIN_SEEDS = (1, 2, 3)
RECEIVER = "h5"
# (case, senders, the hosts' DCQCN on), and what must happen on both sides.
CASES = [
    ("2:1", ["h1", "h2"], True),
    ("4:1", ["h1", "h2", "h3", "h4"], True),
    ("4:1 PFC only", ["h1", "h2", "h3", "h4"], False),  # 2:1 PFC only: bench/twin_vs_lab.py
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = f"tw{os.getpid()}"
    state_dir = tmp_path_factory.mktemp("twinlab") / name
    started = start_lab(name, state_dir, INCAST)
    try:
        os.environ.setdefault("ROCE_LAB_PASSWORD", "admin")
        applied = subprocess.run(
            [sys.executable, "-m", "agent", "apply", started.status["fabric_file"], "--yes",
             "--state-dir", str(state_dir / "agent")],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stdout + applied.stderr
        yield started
    finally:
        stop_lab(name, state_dir, INCAST_NODES)


@pytest.mark.parametrize(("case", "senders", "dcqcn"), CASES, ids=[c[0] for c in CASES])
def test_twin_predicts_the_lab_incast(lab: Lab, case: str, senders: list[str], dcqcn: bool) -> None:
    intent = load_fabric(Path(lab.status["fabric_file"])).intent
    measured, result = measure_lab(intent, RECEIVER, senders, DURATION_S, dcqcn=dcqcn)
    network = build_network(intent)
    runs = [
        predict_lab(intent, RECEIVER, senders, DURATION_S, dcqcn=dcqcn, seed=seed, network=network)
        for seed in TWIN_SEEDS
    ]
    # The senders started together (the measure assumes it) and nothing was lost.
    assert result["start_late_s"] < 0.05, result["start_late_s"]
    assert result["totals"]["lost"] == 0
    assert all(report.lossless_drops == 0 for _, report in runs)
    predicted = median([measures for measures, _ in runs])
    rows: list[dict[str, Any]] = [a.as_dict() for a in compare(measured, predicted)]
    assert all(row["agrees"] for row in rows), (case, rows)
    # Not agreement by both being zero: each case has a measure the knob moves.
    if dcqcn:
        assert measured.ce_fraction > 0.1 and measured.goodput_fraction < 0.85, measured
    else:
        assert measured.paused_fraction > 0.4, measured

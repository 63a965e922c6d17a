"""The twin predicts the lab (issue #13): 2:1 and 4:1 incast, paused, CE and goodput fractions
within ±15 % (:mod:`agent.ops.twin_vs_lab`), with the hosts' DCQCN on and with PFC alone.

The lab is ``containerlab/roce-incast.clab.yml`` (one leaf, five hosts, 10 Mb/s ports standing
for 1 Gb/s), configured by ``roce-agent apply`` from its own fabric file, the file the twin
reads too. One lab run of 4 s per case against the twin's median over three seeds: shorter
lab runs spread too far around their median for a single run to stay within ±15 %
(``bench/twin_vs_lab.py`` runs several and shows the spread).
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.ops.twin_vs_lab import LabIncast, compare, measure_lab, median, predict_lab
from agent.twin.network import build_network
from tests.lab.support.labs import INCAST, Lab, LabFactory, apply_fabric, requires_lab

pytestmark = [pytest.mark.lab, requires_lab]
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
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("tw", INCAST)
    apply_fabric(started)
    return started


@pytest.mark.parametrize(("case", "senders", "dcqcn"), CASES, ids=[c[0] for c in CASES])
def test_twin_predicts_the_lab_incast(lab: Lab, case: str, senders: list[str], dcqcn: bool) -> None:
    intent = lab.intent()
    incast = LabIncast(RECEIVER, senders, DURATION_S, dcqcn=dcqcn)
    measured, result = measure_lab(intent, incast)
    network = build_network(intent)
    runs = [predict_lab(intent, incast, seed=seed, network=network) for seed in TWIN_SEEDS]
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

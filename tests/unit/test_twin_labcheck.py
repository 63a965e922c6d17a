"""The lab-versus-twin comparison's arithmetic (the lab side is tests/lab/test_twin_vs_lab.py)."""

from __future__ import annotations

import os

import pytest

from agent.intent.loader import load_fabric
from agent.ops.twin_vs_lab import (
    IncastMeasures,
    LabIncast,
    agree,
    compare,
    from_lab,
    predict_lab,
)
from tests.unit.twin_fabrics import LAB_LEAFSPINE

# (lab, twin, agree?, why)
AGREE_CASES = [
    (0.50, 0.57, True, "within 15 %"),
    (0.50, 0.43, True, "within 15 % below"),
    (0.50, 0.58, False, "16 % above"),
    (0.0, 0.019, True, "both under 0.02: noise"),
    (0.012, 0.0, True, "one pause in the lab, none in the twin"),
    (0.0, 0.03, False, "the twin pauses, the lab does not"),
    (0.9, 0.0, False, "nothing in common"),
]


@pytest.mark.parametrize(("lab", "twin", "expected", "why"), AGREE_CASES)
def test_agreement_rule(lab: float, twin: float, expected: bool, why: str) -> None:
    assert agree(lab, twin) is expected, why


def test_compare_names_every_measure() -> None:
    rows = compare(IncastMeasures(0.5, 0.25, 0.8), IncastMeasures(0.5, 0.4, 0.8))
    assert [(r.measure, r.agrees) for r in rows] == [
        ("paused_fraction", True),
        ("ce_fraction", False),
        ("goodput_fraction", True),
    ]


def test_lab_measures_from_a_recorded_incast() -> None:
    """2 s of 2:1 incast at 10 Mb/s, 1000-byte payloads (shape of scenarios.incast)."""
    result = {
        "flows": [
            {"received": 1000, "ce_marked": 250, "paused_s": 1.0},
            {"received": 1000, "ce_marked": 250, "paused_s": 0.5},
        ]
    }
    measured = from_lab(result, 2.0, 10_000_000, 1000)
    assert measured == IncastMeasures(
        paused_fraction=1.5 / 4, ce_fraction=0.25, goodput_fraction=2000 * 8000 / 20_000_000
    )


def test_the_twin_runs_what_the_lab_stands_for() -> None:
    """PFC alone, 2:1 on the leaf-spine lab's fabric (D = 100): half of the time paused, the
    bottleneck full (1000-byte payloads: 0.924 of the wire, plus what the fabric still held
    when the senders stopped -- the lab counts it too), every packet marked."""
    os.environ.setdefault("ROCE_LAB_PASSWORD", "admin")
    intent = load_fabric(LAB_LEAFSPINE).intent
    measured, report = predict_lab(intent, LabIncast("h3", ["h1", "h2"], 2.0, dcqcn=False))
    assert report.speed_bps == 1_000_000_000 and report.duration_s == pytest.approx(0.025)
    assert measured.paused_fraction == pytest.approx(0.5, abs=0.05)
    assert 0.924 <= measured.goodput_fraction <= 1.0
    assert measured.ce_fraction > 0.9
    assert report.lossless_drops == 0

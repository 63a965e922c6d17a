"""The ECN sweep's decision from measured runs (the lab measures; this is what it concludes)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.intent.units import parse_size
from agent.ops.playbooks import (
    EcnCandidate,
    SweepSpec,
    add_twin_prediction,
    load_playbook,
    playbook_path,
    sweep_recommendation,
)
from agent.ops.twin_vs_lab import IncastMeasures

LOW = EcnCandidate(min_threshold="3KB", max_threshold="9KB", max_probability=100)
HIGH = EcnCandidate(min_threshold="20KB", max_threshold="28KB", max_probability=100)


def run(pfc: int, goodput: float = 0.6, lost: int = 0, paused: float = 0.1) -> dict[str, Any]:
    return {
        "lost": lost,
        "pfc_frames": pfc,
        "paused_s": paused,
        "ce_marked": 1000,
        "cnps": 500,
        "goodput_bps": goodput * 10e6,
        "paused_fraction": paused / 2,
        "ce_fraction": 0.5,
        "goodput_fraction": goodput,
    }


CASES = [
    # (runs of LOW, runs of HIGH, floor, recommended, why)
    ([run(0)], [run(50)], 0.4, LOW, "one run each: the fewest pauses"),
    ([run(0, lost=39), run(0), run(4)], [run(50), run(48), run(46)], 0.4, LOW,
     "one disturbed run (loss) out of three does not decide: median loss 0"),
    ([run(0, lost=39), run(0, lost=3), run(4)], [run(50), run(48), run(46)], 0.4, HIGH,
     "loss in most runs excludes the set"),
    ([run(0, goodput=0.39), run(2, goodput=0.5), run(1, goodput=0.38)], [run(50)] * 3, 0.4, HIGH,
     "median goodput below the floor excludes the set"),
    ([run(24), run(0), run(0)], [run(10), run(14), run(12)], 0.4, LOW,
     "a start-up outlier of pauses is outvoted"),
    ([run(5, paused=0.3)] * 3, [run(5, paused=0.2)] * 3, 0.4, HIGH,
     "equal pauses: the less paused time"),
    ([run(0, lost=1)] * 3, [run(0, goodput=0.1)] * 3, 0.4, None, "nothing eligible"),
]  # fmt: skip


@pytest.mark.parametrize(("low", "high", "floor", "expected", "why"), CASES)
def test_recommendation_is_decided_by_the_median_of_the_runs(
    low: list[dict[str, Any]],
    high: list[dict[str, Any]],
    floor: float,
    expected: EcnCandidate | None,
    why: str,
) -> None:
    decided = sweep_recommendation([LOW, HIGH], [low, high], floor)
    best = decided["recommended"]
    if expected is None:
        assert best is None, why
        return
    assert best is not None, why
    assert best["min_threshold"] == (3000 if expected is LOW else 20000), why


def test_every_run_stays_in_the_row_and_losses_are_counted() -> None:
    decided = sweep_recommendation([LOW], [[run(0, lost=39), run(0), run(4)]], 0.4)
    (row,) = decided["candidates"]
    assert row["lost"] == 0 and row["runs_with_loss"] == 1
    assert [r["lost"] for r in row["runs"]] == [39, 0, 0]
    assert row["pfc_frames"] == 0


def test_the_shipped_sweep_repeats_each_candidate() -> None:
    spec = load_playbook(playbook_path("ecn-sweep")).steps[0].ecn_sweep
    assert isinstance(spec, SweepSpec)
    assert spec.repeats >= 3 and len(spec.candidates) >= 3


def test_the_table_shows_the_medians_not_the_runs() -> None:
    from rich.console import Console

    from agent.app.validate import render_table
    from agent.ops.playbooks import Report

    report = Report("ecn-sweep", "lab", 0.0)
    report.recommendation = sweep_recommendation(
        [LOW, HIGH], [[run(0), run(2), run(0, lost=3)], [run(40)] * 3], 0.4
    )
    add_twin_prediction(
        report.recommendation, [IncastMeasures(0.0, 0.25, 0.7), IncastMeasures(0.1, 0.1, 0.8)], 0.4
    )
    console = Console(width=250, record=True)
    render_table(report, console)
    text = console.export_text()
    assert "runs w/ loss" in text and "'runs'" not in text
    # lab medians (goodput 60 %, paused 0.1 s of 2 s) and the twin's prediction, side by side
    assert "lab goodput" in text and "60.0%" in text and "twin goodput" in text and "70.0%" in text
    assert "recommended: {'min_threshold': 3000" in text
    assert "twin would pick: {'min_threshold': 3000" in text


TWIN_CASES = [
    # (twin's LOW, twin's HIGH, floor, the twin's pick, why)
    (IncastMeasures(0.0, 0.3, 0.7), IncastMeasures(0.2, 0.1, 0.9), 0.4, LOW, "fewest pauses"),
    (IncastMeasures(0.0, 0.3, 0.6), IncastMeasures(0.0, 0.1, 0.9), 0.4, HIGH,
     "equal pauses: the most goodput"),
    (IncastMeasures(0.0, 0.3, 0.3), IncastMeasures(0.2, 0.1, 0.9), 0.4, HIGH,
     "below the goodput floor"),
    (IncastMeasures(0.0, 0.3, 0.3), IncastMeasures(0.0, 0.1, 0.2), 0.4, None, "nothing eligible"),
]  # fmt: skip


@pytest.mark.parametrize(("low", "high", "floor", "expected", "why"), TWIN_CASES)
def test_the_twin_prediction_sits_next_to_the_lab_and_picks_by_the_same_rule(
    low: IncastMeasures,
    high: IncastMeasures,
    floor: float,
    expected: EcnCandidate | None,
    why: str,
) -> None:
    decided = sweep_recommendation([LOW, HIGH], [[run(0)], [run(50)]], floor)
    add_twin_prediction(decided, [low, high], floor)
    assert [row["twin"] for row in decided["candidates"]] == [low.as_dict(), high.as_dict()]
    assert decided["recommended"]["min_threshold"] == 3000  # the lab's pick is untouched
    pick = decided["twin_recommended"]
    if expected is None:
        assert pick is None, why
    else:
        assert pick is not None and pick["min_threshold"] == parse_size(expected.min_threshold)

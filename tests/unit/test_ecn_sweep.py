"""The ECN sweep's decision from measured runs (the lab measures; this is what it concludes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import AgentError, IntentError
from agent.intent.loader import load_fabric
from agent.intent.plan import nic_plan
from agent.intent.units import parse_size
from agent.ops.playbooks import load_playbook, playbook_path
from agent.ops.sweep import (
    EcnCandidate,
    SweepSpec,
    add_twin_prediction,
    dcqcn_label,
    host_lines,
    neighbours,
    sweep_candidates,
    sweep_recommendation,
    sweep_verdict,
    with_setting,
)
from agent.ops.twin_vs_lab import IncastMeasures

REPO = Path(__file__).resolve().parents[2]

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
    # the check of a recommendation: current, the recommendation (ECN and DCQCN) and its
    # neighbours on both axes, three runs each, against the goal of issue 26
    assert spec.repeats >= 3 and spec.current and spec.neighbours == ["ecn", "dcqcn"]
    assert isinstance(spec.recommendation, EcnCandidate) and spec.recommendation.dcqcn_values()
    assert spec.min_goodput_fraction >= 0.9 and spec.max_paused_fraction <= 0.01


def test_the_table_shows_the_medians_not_the_runs() -> None:
    from rich.console import Console

    from agent.app.playbook_report import render_table
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
    assert "w/ loss" in text and "'runs'" not in text
    # lab medians (goodput 60 %, paused 0.1 s of 2 s) and the twin's prediction, side by side
    # headers on three lines ("lab" / "goodput" / "%"), the cells bare percentages
    header = next(line for line in text.splitlines() if "goodput" in line)
    assert header.count("goodput") == 2  # the lab's and the twin's
    assert re.search(r"│ *60\.0│", text) and re.search(r"│ *70\.0│", text)
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


# ------------------------------------------------------------------ DCQCN candidates, the check

LAB_FABRIC = REPO / "playbooks" / "fabrics" / "lab-leafspine.yml"


def _playbook(tmp_path: Path, sweep: dict[str, Any]) -> Path:
    path = tmp_path / "check.yml"
    path.write_text(yaml.safe_dump({"name": "check", "steps": [{"ecn_sweep": sweep}]}))
    return path


def _problem(exc: IntentError) -> str:
    return "\n".join(str(p) for p in exc.problems)


BAD_SWEEPS = [
    # (ecn_sweep block, the field the error names, why)
    ({"candidates": [{"min_threshold": "3KB", "max_threshold": "9KB",
                      "dcqcn": {"rpg_time_rest": 15}}]},
     "steps[0].ecn_sweep.candidates[0].dcqcn.rpg_time_rest", "a misspelt DCQCN parameter"),
    ({"candidates": [{"min_threshold": "3KB", "max_threshold": "9KB",
                      "dcqcn": {"rpg_gd": 99}}]},
     "steps[0].ecn_sweep.candidates[0].dcqcn.rpg_gd", "a DCQCN value out of its range"),
    ({"candidates": [{"min_threshold": "3XB", "max_threshold": "9KB"}]},
     "steps[0].ecn_sweep.candidates[0].min_threshold", "a threshold that is not a size"),
    ({"candidates": [{"min_threshold": "9KB", "max_threshold": "3KB"}]},
     "steps[0].ecn_sweep.candidates[0]", "min above max"),
    ({"repeats": 3}, "steps[0].ecn_sweep", "nothing to try"),
    ({"current": True, "neighbours": ["pfc"]}, "steps[0].ecn_sweep.neighbours[0]",
     "an axis the sweep does not move"),
    ({"current": True, "max_paused_fraction": 2}, "steps[0].ecn_sweep.max_paused_fraction",
     "a fraction above 1"),
    ({"recommendation": {"min_threshold": "3KB", "max_threshold": "9KB",
                         "dcqcn": {"rpg_ai_rate": 0}}},
     "steps[0].ecn_sweep.recommendation", "explicit recommendation values are checked too"),
]  # fmt: skip


@pytest.mark.parametrize(("sweep", "field", "why"), BAD_SWEEPS)
def test_a_bad_sweep_names_the_field_and_line(
    tmp_path: Path, sweep: dict[str, Any], field: str, why: str
) -> None:
    path = _playbook(tmp_path, sweep)
    with pytest.raises(IntentError) as caught:
        load_playbook(path)
    text = _problem(caught.value)
    assert field in text, why
    assert f"{path}:" in text, why  # file:line of the playbook


BAD_OVERRIDES = [
    # (override file, the field the error names, why)
    ({"overrides": {"nic": {"dcqcn": {"rpg_ai_rate": -5}}}}, "overrides.nic.dcqcn.rpg_ai_rate",
     "a negative rate step"),
    ({"overrides": {"ecn": {"queues": {3: {"min_threshold": "lots"}}}}},
     "overrides.ecn.queues[3].min_threshold", "a threshold that is not a size"),
    ({"overrides": {"buffers": {"pause_threshold": 30000}}}, "overrides",
     "nothing the sweep can try"),
    ({"overrides": ["ecn"]}, "overrides", "not a mapping"),
]  # fmt: skip


@pytest.mark.parametrize(("override", "field", "why"), BAD_OVERRIDES)
def test_a_bad_recommendation_file_names_its_own_file_field_and_line(
    tmp_path: Path, override: dict[str, Any], field: str, why: str
) -> None:
    (tmp_path / "override.yml").write_text(yaml.safe_dump(override))
    path = _playbook(tmp_path, {"current": True, "recommendation": "override.yml"})
    with pytest.raises(IntentError) as caught:
        load_playbook(path)
    text = _problem(caught.value)
    assert f"{tmp_path / 'override.yml'}:" in text and field in text, (why, text)


def test_a_missing_recommendation_file_fails_at_load_naming_it(tmp_path: Path) -> None:
    path = _playbook(tmp_path, {"current": True, "recommendation": "nowhere.yml"})
    with pytest.raises(AgentError, match=r"nowhere\.yml"):
        load_playbook(path)


def test_bad_input_exits_2_before_any_device_is_contacted(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agent.app.cli import main

    path = _playbook(
        tmp_path,
        {"candidates": [{"min_threshold": "3KB", "max_threshold": "9KB",
                         "dcqcn": {"rpg_time_rest": 15}}]},
    )  # fmt: skip
    done = CliRunner().invoke(main, ["run", str(path), str(LAB_FABRIC)])
    assert done.exit_code == 2, done.output
    assert "rpg_time_rest" in done.output and f"{path}:" in done.output


def _override_file(tmp_path: Path) -> Path:
    # What `roce-agent tune --write-override` writes: the fabric's overrides: block, merged.
    path = tmp_path / "override.yml"
    path.write_text(
        "# roce-agent tune: ...\n"
        "overrides:\n"
        "  ecn:\n    queues:\n      3: {min_threshold: 3000, max_threshold: 9000, "
        "max_probability: 100}\n"
        "  buffers: {pause_threshold: 30000}\n"
        "  nic:\n    dcqcn: {rpg_time_reset: 15, rpg_ai_rate: 40}\n"
    )
    return path


def test_current_recommendation_and_neighbours_from_a_tune_override(tmp_path: Path) -> None:
    intent = load_fabric(LAB_FABRIC).intent
    _override_file(tmp_path)
    path = _playbook(tmp_path, {"current": True, "recommendation": "override.yml"})
    spec = load_playbook(path).steps[0].ecn_sweep
    assert spec is not None and spec.recommendation == str(tmp_path / "override.yml")
    candidates, notes = sweep_candidates(spec, intent, "h3")
    names = [c.name for c in candidates]
    assert names == ["current", "recommended", "ECN ÷1.5", "ECN ×1.5", "DCQCN slower",
                     "DCQCN faster"]  # fmt: skip
    current, best, lower, higher, slower, faster = candidates
    # current: the fabric file's overrides (6-18 KB, the lab's DCQCN), every NIC parameter
    assert (current.min_threshold, current.max_threshold) == (6000, 18000)
    assert current.dcqcn_values()["rpg_time_reset"] == 55
    assert current.dcqcn_values() == {
        k: v for k, v in nic_plan(intent.profile).dcqcn.items() if k in current.dcqcn_values()
    }
    assert (best.min_threshold, best.max_threshold) == (3000, 9000)
    assert best.dcqcn_values()["rpg_time_reset"] == 15
    assert (lower.min_threshold, higher.max_threshold) == (2000, 13500)
    assert slower.dcqcn_values()["rpg_time_reset"] == 22  # 15 x 1.5, rounded
    assert faster.dcqcn_values()["rpg_time_reset"] == 10
    assert "buffers" in notes[0]  # what the sweep does not try is said, not dropped


def test_the_hosts_run_the_dcqcn_apply_would_write_on_their_nics() -> None:
    intent = load_fabric(LAB_FABRIC).intent
    candidate = EcnCandidate(
        min_threshold="3KB", max_threshold="9KB", dcqcn={"rpg_time_reset": 15, "rpg_gd": 12}
    )
    tuned = with_setting(intent, candidate)
    # the probe senders' reaction point takes the NIC plan's DCQCN (scenarios._send_spec)
    assert nic_plan(tuned.profile).dcqcn["rpg_time_reset"] == 15
    assert nic_plan(tuned.profile).dcqcn["rpg_ai_rate"] == 40  # unset: the fabric's
    lines = host_lines(tuned, "h1")
    assert "echo 15 | sudo tee /sys/class/net/eth1/ecn/roce_rp/rpg_time_reset > /dev/null" in lines
    assert any(line.startswith("echo 12 ") and line.endswith("roce_rp/rpg_gd > /dev/null")
               for line in lines)  # fmt: skip
    assert dcqcn_label(intent, candidate) == "rpg_time_reset 15, rpg_gd 12"
    assert dcqcn_label(intent, LOW) == "as the fabric"


@given(
    low=st.integers(1000, 200_000),
    spread=st.integers(0, 200_000),
    timer=st.integers(2, 1000),
    step=st.floats(1.1, 4),
)
@settings(max_examples=60, deadline=None)
def test_neighbours_bracket_the_recommendation(
    low: int, spread: int, timer: int, step: float
) -> None:
    intent = load_fabric(LAB_FABRIC).intent
    best = EcnCandidate(
        name="recommended", min_threshold=low, max_threshold=low + spread,
        dcqcn={"rpg_time_reset": timer},
    )  # fmt: skip
    lower, higher, slower, faster = neighbours(best, intent, ["ecn", "dcqcn"], step)
    assert lower.min_threshold < best.min_threshold < higher.min_threshold
    assert lower.max_threshold <= best.max_threshold <= higher.max_threshold
    assert (
        lower.min_threshold <= lower.max_threshold and higher.min_threshold <= higher.max_threshold
    )
    assert (
        faster.dcqcn_values()["rpg_time_reset"] <= timer <= slower.dcqcn_values()["rpg_time_reset"]
    )
    assert slower.dcqcn_values()["rpg_time_reset"] > faster.dcqcn_values()["rpg_time_reset"]
    for n in (lower, higher):
        assert n.dcqcn_values() == best.dcqcn_values()  # one axis at a time


def _row(name: str, goodput: float, paused: float = 0.0, lost: int = 0) -> dict[str, Any]:
    return {**run(0, goodput=goodput, lost=lost, paused=paused * 2), "paused_fraction": paused}


VERDICTS = [
    # (current's goodput, recommended's (goodput, paused, lost), passed, reason, why)
    (0.80, (0.92, 0.0, 0), True, None, "meets everything, beats current"),
    (0.80, (0.88, 0.0, 0), False, "goodput 88.0% < 90%", "below the floor"),
    (0.80, (0.93, 0.05, 0), False, "paused 5.0% > 1%", "too much PFC"),
    (0.80, (0.93, 0.0, 2), False, "lost 2 frames", "loss"),
    (0.95, (0.93, 0.0, 0), False, "does not beat the current", "current is better"),
]  # fmt: skip


@pytest.mark.parametrize(("current", "best", "passed", "reason", "why"), VERDICTS)
def test_the_check_of_a_recommendation(
    current: float, best: tuple[float, float, int], passed: bool, reason: str | None, why: str
) -> None:
    spec = SweepSpec.model_validate(
        {"current": True, "recommendation": {"min_threshold": 3000, "max_threshold": 9000},
         "min_goodput_fraction": 0.9, "max_paused_fraction": 0.01, "neighbours": []}
    )  # fmt: skip
    cur = EcnCandidate(name="current", min_threshold=6000, max_threshold=18000)
    rec = EcnCandidate(name="recommended", min_threshold=3000, max_threshold=9000)
    goodput, paused, lost = best
    decided = sweep_recommendation(
        [cur, rec], [[_row("current", current)], [_row("recommended", goodput, paused, lost)]],
        spec.min_goodput_fraction, spec.max_paused_fraction,
    )  # fmt: skip
    verdict = sweep_verdict(decided, spec)
    assert verdict is not None and verdict["passed"] is passed, why
    if reason:
        assert any(reason in r for r in verdict["reasons"]), (why, verdict["reasons"])


def test_twin_agreement_per_measure() -> None:
    decided = sweep_recommendation([LOW], [[run(0, goodput=0.9)]], 0.4)
    add_twin_prediction(decided, [IncastMeasures(0.05, 0.5, 0.8)], 0.4, [{"lost": 0, "cnps": 600}])
    agreement = decided["candidates"][0]["agreement"]
    # lab: paused 0.05, CE 0.5, goodput 0.9, lost 0, CNPs 500
    assert agreement == {"paused_fraction": True, "ce_fraction": True, "goodput_fraction": True,
                         "lost": True, "cnps": False}  # fmt: skip


def test_the_table_names_each_setting_its_dcqcn_and_the_check() -> None:
    from rich.console import Console

    from agent.app.playbook_report import render_table
    from agent.ops.playbooks import Report

    cur = EcnCandidate(name="current", min_threshold=6000, max_threshold=18000)
    rec = EcnCandidate(name="recommended", min_threshold=3000, max_threshold=9000,
                       dcqcn={"rpg_time_reset": 15})  # fmt: skip
    spec = SweepSpec.model_validate({"current": True, "recommendation": rec.model_dump()})
    report = Report("ecn-sweep", "lab", 0.0)
    decided = sweep_recommendation([cur, rec], [[run(0, goodput=0.79)], [run(0, goodput=0.92)]],
                                   0.9)  # fmt: skip
    add_twin_prediction(decided, [IncastMeasures(0.0, 0.5, 0.73), IncastMeasures(0.0, 0.5, 0.9)],
                        0.9, [{"lost": 0, "cnps": 500}, {"lost": 0, "cnps": 500}])  # fmt: skip
    decided["candidates"][0]["dcqcn_change"] = "as the fabric"
    decided["candidates"][1]["dcqcn_change"] = "rpg_time_reset 15"
    decided["check"] = sweep_verdict(decided, spec)
    report.recommendation = decided
    console = Console(width=160, record=True)
    render_table(report, console)
    text = console.export_text()
    assert "3-9 @100" in text and "T 15" in text and "as the fabric" in text
    assert "check of the recommendation: PASS" in text
    assert "best in the lab: {'name': 'recommended'" in text


@pytest.mark.parametrize(
    ("timer", "step", "expected"),
    [(1, 1.5, ["DCQCN slower"]), (2, 4.0, ["DCQCN slower", "DCQCN faster"])],
)
def test_a_timer_at_its_floor_has_no_faster_neighbour(
    timer: int, step: float, expected: list[str]
) -> None:
    intent = load_fabric(LAB_FABRIC).intent
    best = EcnCandidate(min_threshold=3000, max_threshold=9000, dcqcn={"rpg_time_reset": timer})
    found = neighbours(best, intent, ["dcqcn"], step)
    assert [n.name for n in found] == expected
    assert all(n.dcqcn_values()["rpg_time_reset"] >= 1 for n in found)

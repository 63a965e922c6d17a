"""Judging a candidate: the constraints it misses, its objective value, and the ranking.

Ranking (:func:`ranked`, lexicographic): feasible candidates by the objective, then worst
utilisation (higher first), then index; then the rejected ones by how close they came.  For
the queue objective, the candidates whose p99 :func:`ties` with the best (within
:data:`TIE_BAND`, or one 1 KiB bucket of the histogram the p99 is read from) come first by their
worst utilisation over the whole run: a p99 difference the twin cannot measure does not buy
idle link time.
Lexicographic, not a weighted score: the constraints bound pause, utilisation and fairness, the
objective is the one thing left to optimise, and a weight between kilobytes and percent would
be arbitrary.  No change without a measured gain: a feasible current setting that
:func:`ties` with the best stays the recommendation (:func:`agent.twin.tune.decision.decide`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.twin.tune.objectives import (
    QUEUE,
    QUEUE_RESOLUTION_BYTES,
    TIE_BAND,
    Objectives,
    ObjectiveSpec,
)
from agent.twin.tune.results import RunMetrics, Trial
from agent.twin.tune.text import pct

Constraint = Literal["completed", "drops", "paused", "utilisation", "onset", "goodput", "jain"]


@dataclass(frozen=True)
class Miss:
    """A hard constraint (:class:`~agent.twin.tune.objectives.Objectives`) a candidate misses:
    which one, the run where it is worst (its load point and seed), the value measured there
    and the limit it breaks."""

    constraint: Constraint
    run: RunMetrics
    value: float = 0.0
    limit: float = 0.0
    margin: float = 0.0  # of the limit: the twin's measured error (goodput)
    own: bool = False  # the margin was measured at this very setting

    def __str__(self) -> str:
        return f"{self._what()} ({self.run.where()})"

    def _what(self) -> str:
        match self.constraint:
            case "completed":
                return "collective did not complete"
            case "drops":
                return f"lossless drops {self.run.lossless_drops} > 0"
            case "paused":
                return f"paused {pct(self.value)} > {pct(self.limit)}"
            case "utilisation":
                return f"utilisation {pct(self.value)} < {pct(self.limit)}"
            case "onset":
                return (
                    f"utilisation over the whole run {pct(self.value)} < {pct(self.limit)}: "
                    "slow to recover from the onset"
                )
            case "goodput":
                return f"goodput {pct(self.value)} < {pct(self.limit)}{self._margin()}"
            case "jain":
                return f"Jain {self.value:.2f} < {self.limit:.2f}"

    def _margin(self) -> str:
        if not self.margin:
            return ""
        where = " at this setting" if self.own else ""
        return f" (the floor + {pct(self.margin)}, the twin's error measured{where})"


def _unfinished(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    run = next((r for r in runs if not r.completed), None)
    return None if run is None else Miss("completed", run)


def _dropped(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    run = max(runs, key=lambda r: r.lossless_drops)
    return Miss("drops", run, run.lossless_drops) if run.lossless_drops else None


def _paused(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    run = max(runs, key=lambda r: r.paused_fraction)
    ceiling = objectives.max_paused_fraction
    return (
        Miss("paused", run, run.paused_fraction, ceiling) if run.paused_fraction > ceiling else None
    )


def _idle(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    run = min(runs, key=lambda r: r.utilisation)
    floor = objectives.min_utilisation
    return Miss("utilisation", run, run.utilisation, floor) if run.utilisation < floor else None


def _slow_onset(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    whole = [r for r in runs if r.utilisation_whole is not None]
    if not whole:
        return None
    run = min(whole, key=lambda r: r.utilisation_whole or 0.0)
    value, floor = run.utilisation_whole or 0.0, objectives.min_utilisation
    return Miss("onset", run, value, floor) if value < floor else None


def _short_of_goodput(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    floor = objectives.goodput_floor
    judged = [r for r in runs if r.goodput_fraction is not None]
    if floor is None or not judged:
        return None
    run = min(judged, key=lambda r: r.goodput_fraction or 0.0)
    value = run.goodput_fraction or 0.0
    margin = objectives.goodput_margin
    own = objectives.at_setting
    return Miss("goodput", run, value, floor, margin, own) if value < floor else None


def _unfair(runs: Sequence[RunMetrics], objectives: Objectives) -> Miss | None:
    judged = [r for r in runs if r.jain is not None]
    if not judged:
        return None
    run = min(judged, key=lambda r: r.jain or 0.0)
    value, floor = run.jain or 0.0, objectives.min_jain
    return Miss("jain", run, value, floor) if value < floor else None


# One reader per constraint, in the order a candidate's reasons are listed.
_CONSTRAINTS: tuple[Callable[[Sequence[RunMetrics], Objectives], Miss | None], ...] = (
    _unfinished,
    _dropped,
    _paused,
    _idle,
    _slow_onset,
    _short_of_goodput,
    _unfair,
)


def misses(runs: Sequence[RunMetrics], objectives: Objectives) -> list[Miss]:
    """The hard constraints a candidate misses over its runs (empty: feasible)."""
    if not runs:
        return []
    found = (check(runs, objectives) for check in _CONSTRAINTS)
    return [miss for miss in found if miss is not None]


def evaluate(runs: Sequence[RunMetrics], objectives: Objectives) -> list[str]:
    """The hard constraints a candidate misses (empty: feasible), in words, each with the
    worst run's load point and seed: a trial's reasons."""
    return [str(miss) for miss in misses(runs, objectives)]


def objective_value(trial: Trial, objective: ObjectiveSpec = QUEUE) -> float:
    """The objective as a number to minimise (busbw negated): its mean over the seeds at the
    heaviest load point -- the stated job (N senders, N ranks); the lighter points are there
    for the constraints (a 2-rank ring reaches line rate with any setting, and averaging it in
    would hide the differences that matter)."""
    if not trial.runs:
        return math.inf
    heaviest = max(r.senders for r in trial.runs)
    value = mean_at(trial, heaviest, objective.metric)
    return -value if objective.maximise else value


def violation(t: Trial, objectives: Objectives | None = None) -> float:
    """How far a trial is from feasible: the sum of each constraint's shortfall relative to
    its limit (utilisation and Jain below their floors, pause above its ceiling as a share of
    what is left), plus 1 for a lossless drop or an unfinished collective -- so that halving
    keeps a fair candidate at 89 % over an unfair one at 95 % (the sum ranks both misses)."""
    o = objectives or Objectives()
    if not t.runs:
        return math.inf
    score = 0.0
    if t.drops() or not all(r.completed for r in t.runs):
        score += 1.0
    score += max(0.0, o.min_utilisation - t.worst_utilisation()) / max(o.min_utilisation, 1e-9)
    score += max(0.0, t.worst_paused() - o.max_paused_fraction) / max(
        1 - o.max_paused_fraction, 1e-9
    )
    fairness = t.worst_jain()
    if fairness is not None:
        score += max(0.0, o.min_jain - fairness) / max(o.min_jain, 1e-9)
    return score


def ties(value: float, best: float, objective: ObjectiveSpec = QUEUE) -> bool:
    """``value`` is no measured difference from ``best`` on the objective (both as
    :func:`objective_value` gives them): within :data:`TIE_BAND`, and for the queue objective
    also within one bucket of the depth histogram the p99 is read from."""
    band = abs(best) * TIE_BAND
    if not objective.maximise:
        band = max(band, QUEUE_RESOLUTION_BYTES)
    return value <= best + band


def ranked(trials: Sequence[Trial], objective: ObjectiveSpec = QUEUE) -> list[Trial]:
    """Feasible trials by the objective then utilisation (the table's order), then the
    rejected ones by how close they came (:func:`violation`), then those halving dropped
    (later rung first), then the invalid ones. For the queue objective, the feasible trials
    that :func:`ties` with the best p99 come first by their utilisation over the whole run
    (module docstring: Ranking)."""
    values = [objective_value(t, objective) for t in trials if t.feasible]
    best = min(values, default=math.inf)

    def key(t: Trial) -> tuple[Any, ...]:
        if t.invalid is not None:
            return (3, 0, 0, 0, t.candidate.index)
        if t.pruned is not None:
            return (
                2,
                -t.rung,
                round(violation(t), 6),
                objective_value(t, objective),
                t.candidate.index,
            )
        if not t.reasons:
            value = objective_value(t, objective)
            if not objective.maximise and ties(value, best, objective):
                return (0, 0, -t.worst_whole_utilisation(), value, t.candidate.index)
            return (0, 1, value, -t.worst_utilisation(), t.candidate.index)
        return (1, round(violation(t), 6), -t.worst_utilisation(), t.candidate.index)

    return sorted(trials, key=key)


def mean_at(t: Trial, senders: int, name: str = "busbw_Bps") -> float:
    """The mean of ``name`` over the runs at one load point."""
    values = [float(getattr(r, name)) for r in t.runs if r.senders == senders]
    return sum(values) / len(values) if values else 0.0

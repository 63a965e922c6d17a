"""What tune decides at one speed, and why: :func:`decide` makes the one record
(:class:`~agent.twin.tune.results.Decision`) that the table, the JSON, the written override and
the explanation are all rendered from, so that they cannot name different settings.

Three outcomes (:data:`~agent.twin.tune.results.DecisionKind`):

* ``change`` -- a candidate measured better than the fabric's current setting on the objective
  (beyond :func:`~agent.twin.tune.judge.ties`), or the current setting misses a constraint
  that a candidate meets: that candidate is recommended;
* ``no change`` -- the current setting meets every constraint and no candidate measured better
  (the best ties with it, or it is the best): keep it.  The best-measured candidate is named
  with its number, so a reader sees what it was compared with;
* ``none`` -- no candidate meets the hard constraints: nothing is recommended, the closest
  (the ranking's first) is named.

Why a record and not the ranking's first: the ranking orders candidates by what was measured,
ties included, and on a fabric where every candidate measured the same (a rail-optimised pod:
each ring hop on its own leaf) its first is an arbitrary tied candidate.  Before this record,
the table and the override followed "no change" while the explanation named that tied
candidate as recommended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from agent.twin.tune.judge import objective_value, ranked, ties
from agent.twin.tune.objectives import QUEUE, TIE_BAND, ObjectiveSpec
from agent.twin.tune.results import Decision, HeldOut, Trial


def decide(trials: Sequence[Trial], objective: ObjectiveSpec = QUEUE) -> Decision:
    """The decision over a speed's trials (module docstring): the ranking's first when it is
    feasible and measured better than a feasible current setting, else no change; with
    nothing feasible, no recommendation and the closest."""
    order = ranked(trials, objective)
    first = order[0] if order else None
    if first is None or not first.feasible:
        return Decision("none", first, None, _none_why(first))
    best = min((t for t in trials if t.feasible), key=lambda t: objective_value(t, objective))
    current = next((t for t in trials if t.candidate.current and t.feasible), None)
    if current is None:
        why = "the current setting misses a constraint" if _has_current(trials) else ""
        return Decision("change", first, best, why)
    if current is first or ties(objective_value(current, objective),
                                objective_value(best, objective), objective):  # fmt: skip
        return Decision("no change", current, best, _tie_why(current, best, objective))
    return Decision("change", first, best, _gain_why(current, first, best, objective))


def _has_current(trials: Sequence[Trial]) -> bool:
    return any(t.candidate.current for t in trials)


def _none_why(closest: Trial | None) -> str:
    if closest is None:
        return "no candidate ran"
    return "; ".join(closest.reasons) or closest.invalid or closest.pruned or "no candidate ran"


def _value_text(trial: Trial, objective: ObjectiveSpec) -> str:
    value = objective_value(trial, objective)
    return objective.value_text(-value if objective.maximise else value)


def _tie_why(current: Trial, best: Trial, objective: ObjectiveSpec) -> str:
    if best is current:
        return f"the current setting measured best ({_value_text(current, objective)})"
    return (
        f"the best measured, #{best.candidate.index} {best.candidate.label()}, "
        f"{_value_text(best, objective)} against {_value_text(current, objective)} today: "
        f"within {TIE_BAND:.0%}"
        + ("" if objective.maximise else " or a 1 KiB bucket")
        + ", no measured gain"
    )


def _gain_why(current: Trial, first: Trial, best: Trial, objective: ObjectiveSpec) -> str:
    gain = (
        f"{_value_text(best, objective)} against {_value_text(current, objective)} with the "
        f"current setting: more than {TIE_BAND:.0%}"
        + ("" if objective.maximise else " and a 1 KiB bucket")
        + " better"
    )
    if first is best:
        return gain
    return (
        f"the best measured, #{best.candidate.index}, {gain}; #{first.candidate.index} ties with "
        f"it ({_value_text(first, objective)}) and idles the link least over the whole run"
    )


def indistinguishable(
    trials: Sequence[Trial], objective: ObjectiveSpec = QUEUE, *, feasible: bool = True
) -> bool:
    """Every candidate still in the search measured the same on the objective (the best and
    the worst :func:`ties`) and fared the same on the constraints -- all met them, or (with
    ``feasible`` False, a halving rung's smaller job) all missed them: at that fidelity the
    job cannot tell settings apart.  The search asks it at every rung and, all met, at the
    end; flat throughout, widening the grid would only move along a flat objective."""
    finished = [t for t in trials if t.invalid is None and t.pruned is None and t.runs]
    verdicts = {t.feasible for t in finished}
    if len(finished) < 2 or len(verdicts) > 1 or (feasible and verdicts != {True}):
        return False
    values = [objective_value(t, objective) for t in finished]
    return ties(max(values), min(values), objective)


def no_load(decision: Decision, trials: Sequence[Trial], objective: ObjectiveSpec,
            heavier: list[str]) -> Decision:  # fmt: skip
    """``decision`` (no change) saying why nothing was told apart, and which heavier jobs
    (``heavier``, as tune's options) might."""
    finished = [t for t in trials if t.invalid is None and t.pruned is None and t.runs]
    low = min(finished, key=lambda t: -objective_value(t, objective))
    high = min(finished, key=lambda t: objective_value(t, objective))
    would = "; heavier jobs to try: " + ", ".join(heavier) if heavier else ""
    why = (
        f"this job does not load the fabric enough to tell settings apart: at every rung of "
        f"the search the candidates measured within {TIE_BAND:.0%} of each other and fared "
        f"alike on the constraints; the {len(finished)} run in full, all meeting them, measured "
        f"{_value_text(low, objective)} to {_value_text(high, objective)} (the grid was not "
        f"widened){would}"
    )
    return replace(decision, why=why)


def held_out(decision: Decision, trials: Sequence[Trial], held: HeldOut) -> Decision:
    """``decision`` (a change) kept when its pick held where it was not chosen; else, when
    today's setting met every constraint in the search, no change, saying where the pick did
    not hold (a pick that only wins on the searched seeds and placement is not one to push)."""
    refuted = held.refuted
    current = next((t for t in trials if t.candidate.current and t.feasible), None)
    if not refuted or current is None or decision.trial is None:
        return decision
    why = (
        f"the best measured, #{decision.trial.candidate.index} "
        f"{decision.trial.candidate.label()}, did not hold where the search had not run it: "
        f"{refuted}"
    )
    return Decision("no change", current, decision.best, why, held_out=True)

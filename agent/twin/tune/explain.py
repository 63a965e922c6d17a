"""Explaining a speed's search in words: its decision (:attr:`SpeedResult.decision
<agent.twin.tune.results.SpeedResult.decision>`: a change, no change, or none), why not the
recommendation's neighbours, or why nothing passed, and the change from today's setting in the
user's terms (:func:`user_summary`).  Every sentence names the decision's setting, never the
ranking's first: on a fabric where every candidate measured the same they differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agent.intent.units import format_size, format_speed
from agent.twin.tune.judge import mean_at, objective_value, ties
from agent.twin.tune.objectives import QUEUE, TIE_BAND, Objectives, ObjectiveSpec
from agent.twin.tune.results import Decision, SpeedResult, Trial
from agent.twin.tune.space import Candidate
from agent.twin.tune.text import and_list, gbs, pct
from agent.twin.verdicts import kb


def _axis_value(c: Candidate, axis: str) -> str:
    if axis == "min":
        return f"min {format_size(c.ecn.min_bytes)}"
    if axis == "ratio":
        return f"max {format_size(c.ecn.max_bytes)}"
    if axis == "probability":
        return f"{c.ecn.max_probability} %"
    if axis == "qps":
        return f"{c.qps} QPs"
    values = dict(c.dcqcn)
    if axis == "rpg_time_reset":
        return f"rpg_time_reset {values.get(axis)} us"
    return f"rpg_ai_rate {values.get(axis)} Mb/s"


def neighbours(
    best: Candidate, trials: Sequence[Trial], names: Sequence[str] = ("min", "ratio", "probability")
) -> list[tuple[str, str, Trial]]:
    """(axis, "lower"/"higher", trial): the nearest searched candidate on each side of ``best``
    along each axis, every other axis equal."""
    if best.axes is None:
        return []
    out: list[tuple[str, str, Trial]] = []
    for axis, name in enumerate(names):
        line = [
            (t.candidate.axes[axis], t)
            for t in trials
            if t.candidate.axes is not None and _on_line(t.candidate.axes, best.axes, axis)
        ]
        lower = [(v, t) for v, t in line if v < best.axes[axis]]
        higher = [(v, t) for v, t in line if v > best.axes[axis]]
        if lower:
            out.append((name, "lower", max(lower, key=_level)[1]))
        if higher:
            out.append((name, "higher", min(higher, key=_level)[1]))
    return out


def _on_line(axes: tuple[float, ...], best: tuple[float, ...], axis: int) -> bool:
    """``axes`` is another point than ``best`` on the line through it along ``axis``."""
    return (
        len(axes) == len(best)
        and axes != best
        and all(v == best[i] for i, v in enumerate(axes) if i != axis)
    )


def _level(entry: tuple[float, Trial]) -> float:
    return entry[0]


def _why_not(other: Trial, best: Trial, frame: int, objective: ObjectiveSpec = QUEUE) -> str:
    if other.invalid is not None:
        return f"breaks {other.invalid}"
    if other.pruned is not None:
        return other.pruned
    if other.reasons:
        return other.reasons[0]
    if objective.maximise:
        bw, best_bw = -objective_value(other, objective), -objective_value(best, objective)
        if bw < best_bw * (1 - TIE_BAND):
            return f"{objective.value_text(bw)} ({(bw / best_bw - 1) * 100:.0f} %)"
        what, value = (
            ("slowest job", f"{bw:.1%} of its bound") if objective.beside else ("busbw", gbs(bw))
        )
        return f"{what} about equal ({value}, within {TIE_BAND:.0%}), ranked after it"
    p99, best_p99 = objective_value(other, objective), objective_value(best, objective)
    if not ties(p99, best_p99, objective) and p99 > best_p99 + frame:
        change = (p99 / best_p99 - 1) * 100 if best_p99 else math.inf
        return f"p99 {kb(p99)} (+{change:.0f} %)"
    return (
        f"p99 about equal ({kb(p99)}, within {TIE_BAND:.0%}, a 1 KiB bucket or a frame), "
        f"ranked after it (utilisation over the whole run {pct(other.worst_whole_utilisation())}"
        f" vs {pct(best.worst_whole_utilisation())})"
    )


def _jain_text(t: Trial) -> str:
    value = t.worst_jain()
    return "-" if value is None else f"{value:.2f}"


def _summary(t: Trial, objective: ObjectiveSpec = QUEUE) -> str:
    heaviest = max((r.senders for r in t.runs), default=0)
    head = (
        f"{objective.value_text(mean_at(t, heaviest, objective.metric))}, "
        if objective.maximise
        else ""
    )
    return (
        f"{head}p99 {kb(mean_at(t, heaviest, 'queue_p99_bytes'))}, utilisation "
        f"{pct(t.worst_utilisation())}, paused {pct(t.worst_paused())}, Jain {_jain_text(t)}"
    )


def _jobs_line(objective: ObjectiveSpec, current: Trial, best: Trial, n: int) -> str:
    """Jobs side by side: the slowest job's share of its bound, then each job's busbw."""
    each = [
        f"{job.name} {_job_busbw(current, n, k) / 1e9:.1f} → {gbs(_job_busbw(best, n, k))}"
        for k, job in enumerate(objective.jobs)
    ]
    return (
        f"slowest job's share of its bound {mean_at(current, n, 'bound_fraction'):.1%} → "
        f"{mean_at(best, n, 'bound_fraction'):.1%} (busbw {', '.join(each)})"
    )


def _job_busbw(trial: Trial, n: int, k: int) -> float:
    """Job ``k``'s busbw at ``n`` ranks, the mean of the seeds."""
    values = [r.job_busbw[k] for r in trial.runs if r.senders == n and len(r.job_busbw) > k]
    return sum(values) / len(values) if values else 0.0


def user_summary(speed: SpeedResult, objective: ObjectiveSpec = QUEUE) -> str:
    """Current -> recommended in the user's terms (busbw, p99 queue, utilisation, fairness,
    pause), worst load point and seed for the constraints, means for the objective.  For no
    change, current -> the best measured candidate, saying there was no measured gain; with no
    recommendation, current -> the closest candidate, saying what it misses."""
    decision = speed.decision
    best = _compared(decision)
    current = next((t for t in speed.ecn.trials if t.candidate.current), None)
    if best is None or current is None or not current.runs or not best.runs:
        return ""
    parts = []
    # The objective's numbers at the stated job (N senders or ranks, mean of the seeds): a
    # mean over the load points would mix rings of different sizes into a number no job sees.
    n = max(r.senders for r in best.runs)
    if objective.beside:
        parts.append(_jobs_line(objective, current, best, n))
    elif objective.maximise:
        what = {"allreduce": "all-reduce", "alltoall": "all-to-all", "sendrecv": "send/recv"}.get(
            objective.busbw_of, objective.busbw_of
        )
        parts.append(
            f"{what} busbw at {n} ranks {mean_at(current, n) / 1e9:.1f} → {gbs(mean_at(best, n))}"
        )
    p99 = "queue_p99_bytes"
    parts.append(f"p99 queue {mean_at(current, n, p99) / 1e3:.0f} → {kb(mean_at(best, n, p99))}")
    parts.append(
        f"utilisation {current.worst_utilisation() * 100:.0f} → "
        f"{best.worst_utilisation() * 100:.0f} %"
    )
    parts.append(f"Jain {_jain_text(current)} → {_jain_text(best)}")
    parts.append(f"paused {best.worst_paused() * 100:.0f} %")
    loads = and_list(speed.load_points)
    unit = "ranks" if objective.maximise else "senders"
    return (
        f"{format_speed(speed.speed_bps)}: "
        + ", ".join(parts)
        + f" ({_arrow(decision, best)}; {loads} {unit}, worst seed)"
    )


def _compared(decision: Decision) -> Trial | None:
    """What the summary sets beside today's setting: the recommendation, the best measured
    candidate for no change, the closest with none."""
    if decision.kind == "no change":
        return decision.best or decision.trial
    return decision.trial


def _arrow(decision: Decision, shown: Trial) -> str:
    if decision.kind == "change":
        return "current → recommended"
    if decision.kind == "no change":
        if shown is decision.trial:
            return "no change: the current setting measured best"
        if decision.held_out:
            return (
                f"current → the best measured, #{shown.candidate.index}: its gain did not hold "
                "where it was not chosen, no change"
            )
        return f"current → the best measured, #{shown.candidate.index}: no measured gain, no change"
    reason = shown.reasons[0] if shown.reasons else (shown.invalid or "")
    return f"current → closest, NOT recommended: {reason}"


def explain(
    speed: SpeedResult,
    objectives: Objectives,
    dcqcn_tuned: bool,
    objective: ObjectiveSpec = QUEUE,
    names: Sequence[str] = ("min", "ratio", "probability"),
) -> str:
    """One line: the decision and why -- the recommendation and why not its neighbours, or
    why the current setting stays, or why nothing passed -- ending with the decision again, so
    that no note between (a widening's "ranked first") reads as the last word."""
    best = speed.decision.recommended
    if best is None:
        return _nothing_passed(speed, dcqcn_tuned)
    parts = _why_best(speed, best, objectives, objective, names)
    return "; ".join([*parts, f"decision: {speed.decision.headline()}"])


def _nothing_passed(speed: SpeedResult, dcqcn_tuned: bool) -> str:
    """Why no candidate passed: the rejections by first word, the closest one's reasons, and
    a hint at the DCQCN search when most failed on utilisation and it was off."""
    stage = speed.ecn
    rejected = [t for t in stage.trials if not t.feasible and t.pruned is None]
    counts: dict[str, int] = {}
    for t in rejected:
        word = (t.invalid or (t.reasons[0] if t.reasons else "pruned")).split(" ")[0]
        counts[word] = counts.get(word, 0) + 1
    close = speed.decision.trial  # the closest: what a "none" decision rests on
    hint = ""
    if counts.get("utilisation", 0) >= len(rejected) / 2 and not dcqcn_tuned:
        hint = "; the hosts' DCQCN recovers too slowly for this speed -- try --dcqcn"
    closest = (
        f"; closest {close.candidate.label()}: {', '.join(close.reasons)}"
        if close is not None and close.reasons
        else ""
    )
    why = ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    pruned = sum(t.pruned is not None for t in stage.trials)
    dropped = f", {pruned} dropped by halving" if pruned else ""
    edges = "".join(f"; {e}" for e in speed.edges)
    return (
        f"{format_speed(speed.speed_bps)}: no candidate meets the constraints ({len(rejected)} of "
        f"{len(rejected)} fully run rejected: {why}{dropped}){closest}{edges}{hint}"
    )


def _why_best(
    speed: SpeedResult,
    best: Trial,
    objectives: Objectives,
    objective: ObjectiveSpec,
    names: Sequence[str],
) -> list[str]:
    """The recommendation, then why not each neighbour, the edges, the pause threshold it ran
    with when that is not the fabric's, and why not the current setting."""
    stage, frame = speed.ecn, speed.frame_bytes
    feasible = sum(t.feasible for t in stage.trials)
    constraints = f"{objectives.describe()} at every load point and seed"
    decision = speed.decision
    head = f"{format_speed(speed.speed_bps)}: {decision.headline()} -- {_summary(best, objective)}"
    held = [str(speed.held_out)] if speed.held_out is not None else []
    if decision.kind == "no change":
        return [
            head,
            f"{feasible} candidates meet {constraints}; {decision.why}",
            *speed.edges,
            *held,
        ]
    parts = [f"{head}; {objective.describe()} of the {feasible} candidates meeting {constraints}"]
    for axis, word, other in neighbours(best.candidate, stage.trials, names):
        parts.append(
            f"not {_axis_value(other.candidate, axis)} ({word} {axis}): "
            f"{_why_not(other, best, frame, objective)}"
        )
    parts.extend(speed.edges)
    parts.extend(held)
    current = next((t for t in stage.trials if t.candidate.current), None)
    if current is not None and current is not best:
        parts.append(
            f"current {current.candidate.label()}: {_why_not(current, best, frame, objective)}"
        )
    return parts

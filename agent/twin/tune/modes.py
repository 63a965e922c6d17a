"""``tune --modes lossless,lossy-trim``: the same tune once per RoCE mode, side by side.

Each mode's tune is the whole search (:func:`agent.twin.tune.search.tune`) on the fabric with
its RoCE class in that mode, as ``twin --mode`` rewrites it (:func:`agent.twin.network.with_mode`):
ECN and DCQCN (and QPs) are searched in both; in lossy-trim the queue's limit, where trimming
starts, caps ECN's ramp instead of the pause threshold, and the runs take the per-flow paths
lossless runs take, with selective repeat (:func:`agent.twin.tune.runs.run_options`): the
comparison is the mode's, not the path choice's.

A mode's row is its decision's trial (the recommendation, or today's setting for no change;
the best ranked when nothing met the constraints) at the stated job (the heaviest load point),
as ``twin --compare-modes`` reports a run (:class:`agent.twin.compare.ModeRow`): busbw the
seeds' mean, the counts the seeds' mean, completion times and queues the worst seed's.  The
recommendation is :func:`agent.twin.compare.recommend`'s, on those rows; what switching needs
is :func:`agent.twin.compare.support`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agent.intent.model import FabricIntent
from agent.intent.plan import trim_plan
from agent.twin.compare import (
    ModeRow,
    Support,
    comparison_notes,
    recommend,
    support,
)
from agent.twin.network import MODES, TwinError, with_mode
from agent.twin.tune.judge import mean_at, ranked
from agent.twin.tune.results import RunMetrics, Trial, TuneResult
from agent.twin.tune.space import Candidate
from common.plain import plain


def parse_modes(text: str) -> tuple[str, ...]:
    """``--modes``' value: known modes, each once, in the order given (a :class:`ValueError`
    saying what was expected otherwise)."""
    modes = tuple(m.strip() for m in text.split(","))
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"Expected: modes among {', '.join(MODES)} Actual: {unknown[0]!r}")
    repeated = sorted({m for m in modes if modes.count(m) > 1})
    if repeated:
        raise ValueError(f"Expected: each mode once Actual: {repeated[0]} twice in {text!r}")
    return modes


def mode_values(intent: FabricIntent) -> dict[str, Any]:
    """The profile override that puts a fabric in ``intent``'s mode: ``mode``, and in
    lossy-trim the trimming as the twin ran it (its defaults written out, so the file says
    what was simulated)."""
    values: dict[str, Any] = {"mode": intent.profile.mode}
    trim = trim_plan(intent.profile)
    if trim is not None:
        values["trim"] = {
            "size_bytes": trim.size_bytes,
            "dscp": trim.dscp,
            "priority": trim.priority,
        }
    return values


@dataclass(frozen=True)
class ModeTune:
    """One mode's tune, its row and its decided setting in words."""

    mode: str
    result: TuneResult
    row: ModeRow | None  # None: the dominant speed was not searched or nothing ran
    settings: str

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "settings": self.settings,
            "row": None if self.row is None else plain(self.row),
            "tune": self.result.to_json(),
        }


@dataclass(frozen=True)
class ModesResult:
    """Every mode's tune, the mode to run and why, and what switching needs."""

    fabric_mode: str
    tunes: list[ModeTune]
    recommended: str
    reason: str
    support: Support
    notes: list[str] = field(default_factory=list)

    def chosen(self) -> TuneResult:
        """The recommended mode's tune: its override is the one written."""
        return next(t.result for t in self.tunes if t.mode == self.recommended)

    def to_json(self) -> dict[str, Any]:
        return {
            "fabric_mode": self.fabric_mode,
            "modes": [t.to_json() for t in self.tunes],
            "recommended_mode": self.recommended,
            "reason": self.reason,
            "notes": list(self.notes),
            "support": self.support.to_json(),
        }


def tune_modes(
    intent: FabricIntent, modes: tuple[str, ...], search: Callable[[FabricIntent], TuneResult]
) -> ModesResult:
    """``search`` (one tune) on the fabric in each of ``modes``; with two, the recommendation
    by :func:`agent.twin.compare.recommend`; with one, that mode."""
    tunes = [_tune_mode(intent, mode, search) for mode in modes]
    rows = [t.row for t in tunes if t.row is not None]
    notes = _path_notes(rows)
    notes += [f"{t.mode}: {_no_pick(t.result)}" for t in tunes if _no_pick(t.result)]
    if len(rows) == len(MODES):
        recommended, reason = recommend(rows)
    else:
        recommended, reason = tunes[0].mode, "the only mode tuned"
    return ModesResult(intent.profile.mode, tunes, recommended, reason, support(intent), notes)


def _path_notes(rows: list[ModeRow]) -> list[str]:
    """Both modes ran on the fabric's per-flow ECMP paths (so the difference is the mode's);
    what spraying would add is ``twin --compare-modes``' to show.  Anything else is
    :func:`agent.twin.compare.comparison_notes`' point."""
    notes = comparison_notes(rows)
    if notes or len(rows) < len(MODES):
        return notes
    return [
        f"both modes ran on {rows[0].paths} paths (per-flow ECMP), so the difference is the "
        "mode's; `twin --compare-modes` with the decided setting also shows what spraying "
        "adds to each"
    ]


def _tune_mode(
    intent: FabricIntent, mode: str, search: Callable[[FabricIntent], TuneResult]
) -> ModeTune:
    if mode == intent.profile.mode:
        return _mode_tune(mode, search(intent))
    moved = with_mode(intent, mode)
    result = replace(search(moved), mode_override=mode_values(moved))
    return _mode_tune(mode, result)


def _mode_tune(mode: str, result: TuneResult) -> ModeTune:
    trial = decided_trial(result)
    if trial is None or not trial.runs:
        return ModeTune(mode, result, None, "-")
    row = best_row(mode, trial, result.dominant_speed_bps)
    return ModeTune(mode, result, row, settings_text(trial.candidate, result))


def _no_pick(result: TuneResult) -> str:
    if result.decision().recommended is not None:
        return ""
    return "no candidate met the constraints: its row is the best ranked candidate's"


def decided_trial(result: TuneResult) -> Trial | None:
    """The dominant speed's decided trial (its recommendation, or today's setting for no
    change), else its best ranked one."""
    speed = result.dominant()
    if speed is None:
        return None
    if speed.decision.trial is not None:
        return speed.decision.trial
    order = ranked(speed.ecn.trials, result.objective)
    return order[0] if order else None


def settings_text(candidate: Candidate, result: TuneResult) -> str:
    """The candidate in the override's terms: ECN (KB, %), DCQCN, and QPs (collective)."""
    ecn = candidate.ecn
    low, high = (f"{v / 1000:.1f}".removesuffix(".0") for v in (ecn.min_bytes, ecn.max_bytes))
    text = f"ECN {low}-{high} KB @{ecn.max_probability}%, DCQCN {candidate.dcqcn_label()}"
    if result.objective.name == "collective":
        text += f", {candidate.qps} QP{'s' if candidate.qps > 1 else ''}"
    return text + (" (today's)" if candidate.current else "")


def best_row(mode: str, trial: Trial, speed_bps: int) -> ModeRow:
    """``trial``'s runs at its heaviest load point as one row (module docstring)."""
    heaviest = max(r.senders for r in trial.runs)
    runs = [r for r in trial.runs if r.senders == heaviest]
    rows = [r.mode_rows[0] for r in runs if r.mode_rows]
    return ModeRow(
        mode=mode,
        job="",
        completed=all(r.completed for r in runs),
        **_throughputs(trial, runs, speed_bps),
        **_tails(rows),
        queue_peak_bytes=max(r.queue_peak_bytes for r in runs),
        queue_p99_bytes=max(r.queue_p99_bytes for r in runs),
        max_paused_fraction=max(r.paused_fraction_whole or r.paused_fraction for r in runs),
        lossless_drops=max(r.lossless_drops for r in runs),
        **_counts(rows),
    )


def _tails(rows: list[ModeRow]) -> dict[str, Any]:
    """How the runs went (paths, recovery: every seed's the same) and the worst seed's
    message completion times."""
    return {
        "paths": rows[0].paths if rows else "flow",
        "recovery": rows[0].recovery if rows else "go-back-n",
        "completion_p50_s": _worst([row.completion_p50_s for row in rows]),
        "completion_p99_s": _worst([row.completion_p99_s for row in rows]),
        "completion_max_s": _worst([row.completion_max_s for row in rows]),
    }


def _throughputs(trial: Trial, runs: list[RunMetrics], speed_bps: int) -> dict[str, Any]:
    """A collective's time and busbw (the seeds' mean, as the ranking reads it), or a
    scenario's goodput."""
    if any(r.busbw_Bps for r in runs):
        return {
            "time_s": _mean([r.duration_s for r in runs]),
            "busbw_GBps": mean_at(trial, runs[0].senders, "busbw_Bps") / 1e9,
            "goodput_Gbps": None,
        }
    return {"time_s": None, "busbw_GBps": None, "goodput_Gbps": _goodput(runs, speed_bps)}


def _counts(rows: list[ModeRow]) -> dict[str, Any]:
    """The seeds' mean of each count (the fabric's, the same in every job's row)."""
    names = ("pfc_frames", "trimmed", "trim_dropped", "retransmitted", "timeouts",
             "reorder_depth", "lossy_drops")  # fmt: skip
    return {n: round(_mean([getattr(row, n) for row in rows]) or 0) for n in names}


def _goodput(runs: list[RunMetrics], speed_bps: int) -> float:
    """The queue objective's throughput, Gb/s: the receiver's goodput (incast, victim), else
    the bottleneck's window utilisation (all-to-all), times the line rate; the seeds' mean."""
    shares = [r.goodput_fraction if r.goodput_fraction is not None else r.utilisation
              for r in runs]  # fmt: skip
    return (_mean(shares) or 0.0) * speed_bps / 1e9


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _worst(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def check_modes_options(modes: tuple[str, ...], fabric_mode: str, given: list[str]) -> None:
    """Options that measure the fabric as it runs (a lab check's report, the finalists for
    one) refused with a mode other than the fabric's (``given``: those on the command line,
    as typed); a :class:`TwinError` naming the first."""
    other = [m for m in modes if m != fabric_mode]
    if given and other:
        raise TwinError(
            f"tune {given[0]}: Expected: --modes {fabric_mode} alone with {given[0]} (the lab "
            f"check measures the fabric as it runs, {fabric_mode}) Actual: --modes "
            f"{','.join(modes)} {given[0]}"
        )


def _cell(value: float | None, scale: float, digits: int = 1) -> str:
    return "-" if value is None else f"{value * scale:,.{digits}f}"


def _kb(value: int) -> str:
    return f"{value / 1000:,.0f}"


def _throughput(row: ModeRow) -> tuple[str, str]:
    if row.busbw_GBps is not None:
        return "busbw GB/s", _cell(row.busbw_GBps, 1, 2)
    return "goodput Gb/s", _cell(row.goodput_Gbps, 1, 2)


_ROWS: list[tuple[str, Callable[[ModeRow], str]]] = [
    ("paths / recovery", lambda r: f"{r.paths} / {r.recovery}"),
    ("completed", lambda r: "yes" if r.completed else "no"),
    ("message completion p99 us", lambda r: _cell(r.completion_p99_s, 1e6)),
    ("queue p99 / peak KB", lambda r: f"{_kb(r.queue_p99_bytes)} / {_kb(r.queue_peak_bytes)}"),
    ("PFC frames", lambda r: str(r.pfc_frames)),
    ("max paused %", lambda r: f"{r.max_paused_fraction:.1%}".removesuffix("%")),
    ("trimmed / trim-dropped", lambda r: f"{r.trimmed} / {r.trim_dropped}"),
    ("retransmitted frames", lambda r: str(r.retransmitted)),
    ("lossless drops", lambda r: str(r.lossless_drops)),
]


def table_rows(result: ModesResult) -> list[tuple[str, list[str]]]:
    """The side-by-side table's rows (metric, one cell per mode): the decided setting, then
    the objective's throughput, the tail, the queue, pauses, trims and retransmissions."""
    tunes = result.tunes
    rows = [r for r in (t.row for t in tunes) if r is not None]
    named = _throughput(rows[0])[0] if rows else "busbw GB/s"
    out = [("setting", [t.settings for t in tunes]),
           (named, [_throughput(t.row)[1] if t.row else "-" for t in tunes])]  # fmt: skip
    for name, cell in _ROWS:
        out.append((name, [cell(t.row) if t.row else "-" for t in tunes]))
    return out


def support_lines(needs: Support) -> list[str]:
    """What the fabric must support to run lossy-trim, one line each."""
    lines = [f"cannot trim: {name} ({platform}): {why}"
             for name, platform, why in needs.switches_cannot]  # fmt: skip
    lines += [f"trimming unknown: {name} ({platform}): not a platform intent rule IR022 knows"
              for name, platform in needs.switches_unknown]  # fmt: skip
    if not needs.switches_cannot and not needs.switches_unknown:
        lines.append("switches: every switch's platform trims")
    lines.append(f"NICs: {needs.nics}")
    return lines

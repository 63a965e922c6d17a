"""``twin --compare-modes``: the same run once per RoCE mode (lossless with PFC, lossy with
packet trimming), side by side, with a recommendation and what the fabric needs to switch.

A row is one mode's run of one job (or of the scenario): busbw and the collective's time
(collectives), goodput (scenarios), each message's completion time (p50, p99, max), the
busiest port's queue (peak, p99), PFC frames and the largest paused fraction, trims,
retransmissions and timeouts.  The recommendation compares busbw (collectives) or goodput
(scenarios), then the p99 message completion time; a difference under :data:`NOISE` is
called a tie, and a tie keeps the fabric as it is.  Not compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from common.plain import plain

if TYPE_CHECKING:
    from agent.intent.model import FabricIntent
    from agent.twin.collective_report import CollectiveReport
    from agent.twin.results import TwinReport
    from agent.twin.trimming import TrimFacts

# Two runs of one seed closer than this (relative) are called a tie.  It is not the spread
# between seeds, which bench/trim_modes.py measures per job (none for a collective that
# never queues, tens of percent for per-flow ECMP whose collisions a seed moves): a verdict
# to rely on is one that holds over several --seed values.
NOISE: Final = 0.02
# What no shipping RoCE NIC does, and the twin assumes of every NIC in lossy-trim.
NIC_REQUIREMENT: Final = (
    "every GPU NIC must answer a trimmed frame with a NAK of exactly its PSN and resend it at "
    "once (UEC transport); no shipping RoCE NIC does -- a RoCE NIC of today drops the trimmed "
    "frame (ICRC/length check) and recovers by PSN gap or timeout"
)


@dataclass(frozen=True)
class ModeRow:
    """One mode's run of one job (``job``: its name, "" for a lone collective or scenario)."""

    mode: str
    job: str
    paths: str
    recovery: str
    completed: bool
    time_s: float | None  # the collective's time (None: a scenario)
    busbw_GBps: float | None
    goodput_Gbps: float | None  # a scenario's in-order goodput (None: a collective)
    completion_p50_s: float | None
    completion_p99_s: float | None
    completion_max_s: float | None
    queue_peak_bytes: int
    queue_p99_bytes: int
    pfc_frames: int
    max_paused_fraction: float
    trimmed: int
    trim_dropped: int
    retransmitted: int
    timeouts: int
    reorder_depth: int
    lossless_drops: int
    lossy_drops: int


@dataclass(frozen=True)
class Support:
    """What the fabric must support to run lossy-trim: each switch that cannot trim (name,
    platform, why), the platforms that can, and the NICs' requirement."""

    switches_cannot: list[tuple[str, str, str]]
    switches_unknown: list[tuple[str, str]]
    trimming_platforms: dict[str, str]
    nics: str = NIC_REQUIREMENT

    def to_json(self) -> dict[str, Any]:
        """The switches as objects (``switch``, ``platform``, ``why``), not tuples."""
        return {
            "switches_cannot": [
                {"switch": name, "platform": platform, "why": why}
                for name, platform, why in self.switches_cannot
            ],
            "switches_unknown": [
                {"switch": name, "platform": platform} for name, platform in self.switches_unknown
            ],
            "trimming_platforms": dict(self.trimming_platforms),
            "nics": self.nics,
        }


@dataclass(frozen=True)
class Comparison:
    """Both modes' rows, the recommended mode and why, and what switching needs."""

    fabric: str
    workload: str
    rows: list[ModeRow]
    recommended: str
    reason: str
    support: Support
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain(self)
        data["support"] = self.support.to_json()
        return data


def _trim_row(trim: TrimFacts | None) -> dict[str, Any]:
    if trim is None:  # pragma: no cover - every report of this module's runs has its facts
        return {"paths": "flow", "completion_p50_s": None, "completion_p99_s": None,
                "completion_max_s": None, "trimmed": 0, "trim_dropped": 0,
                "retransmitted": 0, "reorder_depth": 0}  # fmt: skip
    return {
        "paths": trim.paths,
        "completion_p50_s": trim.completion_p50_s,
        "completion_p99_s": trim.completion_p99_s,
        "completion_max_s": trim.completion_max_s,
        "trimmed": trim.trimmed,
        "trim_dropped": trim.trim_dropped,
        "retransmitted": trim.retransmitted,
        "reorder_depth": trim.reorder_depth,
    }


def collective_row(mode: str, report: CollectiveReport, recovery: str) -> ModeRow:
    """A collective's (one job's) run as a row."""
    return ModeRow(
        mode=mode,
        job=report.job,
        recovery=recovery,
        completed=report.completed,
        time_s=report.time_s,
        busbw_GBps=report.busbw_Bps / 1e9,
        goodput_Gbps=None,
        **_measured(report),
    )


def scenario_row(mode: str, report: TwinReport) -> ModeRow:
    """A scenario's run as a row (its flows are endless: no completion times)."""
    return ModeRow(
        mode=mode,
        job="",
        recovery=report.recovery,
        completed=True,
        time_s=None,
        busbw_GBps=None,
        goodput_Gbps=report.goodput_bps / 1e9,
        **_measured(report),
    )


def _measured(report: CollectiveReport | TwinReport) -> dict[str, Any]:
    """What a collective's and a scenario's reports both hold: queues, pauses, drops, trims."""
    return {
        "queue_peak_bytes": report.queue_peak_bytes,
        "queue_p99_bytes": report.queue_p99_bytes,
        "pfc_frames": report.pfc_frames,
        "max_paused_fraction": report.max_paused_fraction,
        "timeouts": report.timeouts,
        "lossless_drops": report.lossless_drops,
        "lossy_drops": report.lossy_drops,
        **_trim_row(report.trim),
    }


def support(intent: FabricIntent) -> Support:
    """The fabric's switches that cannot trim (intent rule IR022's platforms), those whose
    platform the rule does not know, and the NICs' requirement."""
    from agent.intent.rules import NOT_TRIMMING, TRIMMING_PLATFORMS

    cannot: list[tuple[str, str, str]] = []
    unknown: list[tuple[str, str]] = []
    for device in intent.devices:
        if device.role == "host":
            continue
        why = NOT_TRIMMING.get(device.platform)
        if why is not None:
            cannot.append((device.name, device.platform, why))
        elif device.platform not in TRIMMING_PLATFORMS:
            unknown.append((device.name, device.platform))
    return Support(cannot, unknown, dict(TRIMMING_PLATFORMS))


def comparison_notes(rows: list[ModeRow]) -> list[str]:
    """What the reader must know to read the rows: what the path choice alone changed (the
    lossless control on lossy-trim's paths), or that the modes ran different path choices
    (the gain may be the spraying's, not the trimming's)."""
    lossless = _by_paths([r for r in rows if r.mode == "lossless"])
    if len(lossless) > 1:
        return [_paths_note(lossless)]
    paths = {row.mode: row.paths for row in rows}
    if len(set(paths.values())) <= 1:
        return []
    said = ", ".join(f"{mode} {how}" for mode, how in paths.items())
    return [
        f"the modes chose their paths differently ({said}): part of the difference is the "
        "path choice's; give --paths to run both the same way"
    ]


def _by_paths(rows: list[ModeRow]) -> dict[str, list[ModeRow]]:
    out: dict[str, list[ModeRow]] = {}
    for row in rows:
        out.setdefault(row.paths, []).append(row)
    return out


def _paths_note(lossless: dict[str, list[ModeRow]]) -> str:
    """Lossless on per-flow ECMP against lossless on sprayed paths: the paths' own part."""
    flow, sprayed = (lossless[p] for p in sorted(lossless, key=lambda p: p != "flow"))
    what, unit = _measure(flow + sprayed)
    base, other = _score(flow)[0], _score(sprayed)[0]
    change = _relative(other, base)
    versus = f"{flow[0].paths} paths ({other:.2f} vs {base:.2f} {unit})"
    if abs(change) <= NOISE:
        said = f"the same {what} as with {versus}, within {NOISE:.0%}"
    else:
        said = f"{abs(change):.1%} {'higher' if change > 0 else 'lower'} {what} than with {versus}"
    return (
        f"the paths alone: lossless with {sprayed[0].paths} paths has {said}; a lossless fabric "
        "gets that from spraying or adaptive routing with NICs that take frames out of order, "
        "without trimming -- the recommendation compares the modes on the same paths"
    )


def _measure(rows: list[ModeRow]) -> tuple[str, str]:
    if any(r.busbw_GBps is not None for r in rows):
        return "busbw", "GB/s"
    return "goodput", "Gb/s"


def _relative(better: float, worse: float) -> float:
    return (better - worse) / worse if worse else 0.0


def _score(rows: list[ModeRow]) -> tuple[float, float | None]:
    """A mode's throughput (busbw, or goodput; jobs summed) and its worst p99 completion."""
    throughput = sum((r.busbw_GBps if r.busbw_GBps is not None else r.goodput_Gbps) or 0.0
                     for r in rows)  # fmt: skip
    tails = [r.completion_p99_s for r in rows if r.completion_p99_s is not None]
    return throughput, max(tails) if tails else None


def recommend(rows: list[ModeRow]) -> tuple[str, str]:
    """The mode to run and why: an incomplete run loses; then the higher throughput; then,
    within :data:`NOISE`, the lower p99 completion; a tie on both keeps lossless (nothing to
    change on the fabric).  Where lossless also ran on lossy-trim's paths (the control),
    the modes are compared on those paths, and the reason says so."""
    trimming = [r for r in rows if r.mode == "lossy-trim"]
    lossless = [r for r in rows if r.mode == "lossless"]
    same = [r for r in lossless if r.paths in {t.paths for t in trimming}]
    if same and len(same) < len(lossless):
        mode, reason = _decide({"lossless": same, "lossy-trim": trimming}, rows)
        return mode, f"{reason} (both on {same[0].paths} paths)"
    return _decide({"lossless": lossless, "lossy-trim": trimming}, rows)


def _decide(by_mode: dict[str, list[ModeRow]], rows: list[ModeRow]) -> tuple[str, str]:
    done = {mode: all(r.completed for r in mine) for mode, mine in by_mode.items()}
    if done["lossless"] != done["lossy-trim"]:
        winner = "lossless" if done["lossless"] else "lossy-trim"
        return winner, f"only {winner} completed every message within the time allowed"
    what, unit = _measure(rows)
    scores = {mode: _score(mine) for mode, mine in by_mode.items()}
    high, low = sorted(scores, key=lambda mode: scores[mode][0], reverse=True)
    gain = _relative(scores[high][0], scores[low][0])
    if gain > NOISE:
        return high, (
            f"{high} has {gain:.1%} higher {what} ({scores[high][0]:.2f} vs "
            f"{scores[low][0]:.2f} {unit})"
        )
    said = (
        f"{what} within {NOISE:.0%} ({scores['lossless'][0]:.2f} vs "
        f"{scores['lossy-trim'][0]:.2f} {unit}: a tie)"
    )
    return _by_tail({mode: score[1] for mode, score in scores.items()}, said)


def _by_tail(tails: dict[str, float | None], said: str) -> tuple[str, str]:
    """Throughput tied (``said`` says so): the lower p99 message completion time, beyond the
    noise, decides; else lossless stays."""
    known = {mode: tail for mode, tail in tails.items() if tail is not None}
    if len(known) == len(tails):
        fast, slow = sorted(known, key=lambda mode: known[mode])
        cut = (known[slow] - known[fast]) / known[slow] if known[slow] else 0.0
        if cut > NOISE:
            return fast, (
                f"{said}; {fast} has a {cut:.1%} lower p99 message completion time "
                f"({known[fast] * 1e6:,.1f} vs {known[slow] * 1e6:,.1f} us)"
            )
        said += "; p99 message completion time too"
    return "lossless", f"{said}: a tie, and lossless needs no change to the fabric or the NICs"

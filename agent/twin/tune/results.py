"""A tune's results: each run's measures, each candidate's trial, each speed's search, the whole.

:class:`RunMetrics` is one seed at one load point of one candidate; :class:`Trial` a candidate
with its runs and its verdict (invalid, rejected, dropped by halving, or feasible);
:class:`Stage` and :class:`Rung` a speed's trials and its batches; :class:`Decision` what a
speed's search decided (:func:`agent.twin.tune.decision.decide` makes it; the table, the JSON,
the override and the explanation are rendered from it); :class:`SpeedResult` one speed's
search; :class:`TuneResult` the tune, with the override it recommends and its JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agent.intent.model import FabricIntent
from agent.intent.units import format_speed
from agent.twin.compare import ModeRow
from agent.twin.tune.notes import EdgeNote
from agent.twin.tune.objectives import (
    QUEUE_RESOLUTION_BYTES,
    TIE_BAND,
    Objectives,
    ObjectiveSpec,
)
from agent.twin.tune.space import Candidate


@dataclass(frozen=True)
class RunMetrics:
    """One seed at one load point of one candidate (window = the measurement window)."""

    seed: int
    utilisation: float
    paused_fraction: float
    queue_p99_bytes: int
    queue_peak_bytes: int  # whole run: the onset
    ce_fraction: float
    lossless_drops: int  # whole run
    pause_threshold_bytes: int
    bottleneck: str | None
    events: int
    wall_s: float
    paused_fraction_whole: float = 0.0  # whole run, the onset included (shown, not judged)
    senders: int = 0  # the load point (ranks for a collective); 0: not recorded
    jain: float | None = None  # over the flows crossing the bottleneck, window goodput
    busbw_Bps: float = 0.0  # collective only
    duration_s: float = 0.0  # simulated (a collective's: its completion time)
    completed: bool = True  # a collective finished within the run's limit
    ranks: bool = False  # the load point counts a collective's ranks, not senders
    utilisation_whole: float | None = None  # whole run, onset included; scenarios only
    bound_fraction: float | None = None  # collective: busbw / the NICs' bound (jobs: slowest's)
    job_busbw: tuple[float, ...] = ()  # jobs side by side: each job's busbw, in file order
    # The receiver's goodput over the whole run in the lab check's terms (payload bits / its
    # line rate x run time); scenarios with a receiver only.
    goodput_fraction: float | None = None
    # The run as ``twin --compare-modes`` reports it (one row per job): PFC frames, trims,
    # retransmissions, message completion times; ``tune --modes`` compares its modes on them.
    mode_rows: tuple[ModeRow, ...] = ()

    def where(self) -> str:
        if not self.senders:
            return f"seed {self.seed}"
        return f"{self.senders} {'ranks' if self.ranks else 'senders'}, seed {self.seed}"


@dataclass
class Trial:
    candidate: Candidate
    runs: list[RunMetrics] = field(default_factory=list)
    invalid: str | None = None  # the rule the candidate breaks (never simulated)
    reasons: list[str] = field(default_factory=list)
    pruned: str | None = None  # successive halving: the rung that dropped it, and why
    rung: int = 0  # the last rung it ran
    variant: FabricIntent | None = field(default=None, repr=False, compare=False)

    @property
    def feasible(self) -> bool:
        return self.invalid is None and not self.reasons and self.pruned is None

    def mean(self, name: str) -> float:
        return sum(float(getattr(r, name)) for r in self.runs) / len(self.runs) if self.runs else 0

    def worst_utilisation(self) -> float:
        return min((r.utilisation for r in self.runs), default=0.0)

    def worst_whole_utilisation(self) -> float:
        """Over the whole run, the onset's recovery included (scenario runs; a collective's
        runs have none: their window utilisation stands in)."""
        return min(
            (r.utilisation if r.utilisation_whole is None else r.utilisation_whole
             for r in self.runs),
            default=0.0,
        )  # fmt: skip

    def worst_paused(self) -> float:
        return max((r.paused_fraction for r in self.runs), default=0.0)

    def worst_jain(self) -> float | None:
        values = [r.jain for r in self.runs if r.jain is not None]
        return min(values) if values else None

    def worst_goodput(self) -> float | None:
        """The receiver's goodput in the lab check's terms, the worst run's (None: no run
        with one receiver)."""
        values = [r.goodput_fraction for r in self.runs if r.goodput_fraction is not None]
        return min(values) if values else None

    def drops(self) -> int:
        return max((r.lossless_drops for r in self.runs), default=0)

    def to_json(self) -> dict[str, Any]:
        c = self.candidate
        return {
            "index": c.index,
            "current": c.current,
            "ecn": asdict(c.ecn),
            "dcqcn": dict(c.dcqcn),
            "qps": c.qps,
            "feasible": self.feasible,
            "invalid": self.invalid,
            "reasons": list(self.reasons),
            "pruned": self.pruned,
            "rung": self.rung,
            "utilisation": self.mean("utilisation"),
            "utilisation_worst": self.worst_utilisation(),
            "utilisation_whole_run_worst": self.worst_whole_utilisation(),
            "paused_fraction": self.mean("paused_fraction"),
            "paused_fraction_worst": self.worst_paused(),
            "paused_fraction_whole_run": self.mean("paused_fraction_whole"),
            "jain_worst": self.worst_jain(),
            "goodput_fraction_worst": self.worst_goodput(),
            "queue_p99_bytes": round(self.mean("queue_p99_bytes")),
            "queue_peak_bytes": round(self.mean("queue_peak_bytes")),
            "busbw_Bps": self.mean("busbw_Bps"),
            "bound_fraction": (
                self.mean("bound_fraction")
                if self.runs and all(r.bound_fraction is not None for r in self.runs)
                else None
            ),
            "ce_fraction": self.mean("ce_fraction"),
            "lossless_drops": self.drops(),
            "pause_threshold_bytes": self.runs[0].pause_threshold_bytes if self.runs else None,
            "runs": [_run_json(r) for r in self.runs],
        }


def _run_json(run: RunMetrics) -> dict[str, Any]:
    """A run's JSON: its measures (the mode rows are ``tune --modes``' summary's, given there
    once per mode, not per run)."""
    data = asdict(run)
    del data["mode_rows"]
    return data


@dataclass
class Stage:
    """The trials of one speed's search (what was decided is the speed's :class:`Decision`)."""

    kind: str  # "joint" (or "ecn" for an ECN-only search)
    trials: list[Trial]


DecisionKind = Literal["change", "no change", "none"]


@dataclass(frozen=True)
class Decision:
    """One speed's decision: its ``kind``, the ``trial`` it rests on (the recommended one; the
    current setting's for ``no change``; the closest for ``none``, None when nothing ran), the
    best-measured feasible trial it was compared with (``best``), and why, in words."""

    kind: DecisionKind
    trial: Trial | None
    best: Trial | None
    why: str
    held_out: bool = False  # no change because the best did not hold on held-out runs

    @classmethod
    def undecided(cls) -> Decision:
        """A speed not searched yet."""
        return cls("none", None, None, "not searched")

    @property
    def recommended(self) -> Trial | None:
        """The setting to use (the current one for ``no change``); None for ``none``."""
        return None if self.kind == "none" else self.trial

    @property
    def changes(self) -> bool:
        """The fabric's setting changes: an override carries new values."""
        return self.kind == "change"

    def headline(self) -> str:
        """The decision in one phrase, the setting named: what every rendering says."""
        label = self.trial.candidate.label() if self.trial is not None else ""
        if self.kind == "change":
            return f"recommended: {label}"
        if self.kind == "no change" and self.held_out:
            return (
                "no change: the best candidate's gain did not hold where it was not chosen; "
                f"keep the current setting, {label}"
            )
        if self.kind == "no change":
            return f"no change: no candidate measured better than the current setting, {label}"
        return "no candidate meets the constraints"

    def verdict(self, trial: Trial) -> str | None:
        """The table's verdict for ``trial`` when the decision is about it (None otherwise)."""
        if trial is self.recommended:
            return "recommended" if self.kind == "change" else "recommended: no change"
        if self.kind == "no change" and trial.feasible:
            return "ok, no measured gain over current"
        return None

    def to_json(self) -> dict[str, Any]:
        trial, best = self.trial, self.best
        return {
            "kind": self.kind,
            "index": trial.candidate.index if trial is not None else None,
            "setting": trial.candidate.label() if trial is not None else None,
            "recommended": self.recommended is not None,
            "best_measured": best.candidate.index if best is not None else None,
            "headline": self.headline(),
            "why": self.why,
        }


@dataclass(frozen=True)
class Rung:
    """One batch of the search: how long, at which load points and seeds, how many ran."""

    duration_s: float
    points: tuple[tuple[int, int], ...]  # (senders or ranks, seed)
    candidates: int
    runs: int
    kept: int
    fidelity: str = ""  # "1.25 ms" per run, or a collective's "4MiB"
    sample_rails: int = 0  # a job's rung run on its first rails only (0: every rail)

    def to_json(self) -> dict[str, Any]:
        return {
            "duration_s": self.duration_s,
            "points": [{"senders": n, "seed": s} for n, s in self.points],
            "candidates": self.candidates,
            "runs": self.runs,
            "kept": self.kept,
            "fidelity": self.fidelity,
            "sample_rails": self.sample_rails or None,
        }


# ------------------------------------------------------ held out (agent.twin.tune.holdout)


@dataclass(frozen=True)
class Condition:
    """One held-out condition: a ``seed`` at ``hosts``, each job's placement in the job
    file's order (None: the searched placement), or a scenario's ``senders`` count the search
    did not run (None: the stated one)."""

    label: str
    seed: int
    hosts: tuple[tuple[str, ...], ...] | None = None  # each job's NICs; None: as searched
    senders: int | None = None

    @property
    def kind(self) -> str:
        """What it holds out: a seed, a placement or a sender count."""
        if self.hosts is not None:
            return "placements"
        return "sender counts" if self.senders is not None else "seeds"


@dataclass(frozen=True)
class HeldOutRun:
    """The pick and today's setting under one condition, with the constraints each misses."""

    condition: Condition
    pick: RunMetrics
    current: RunMetrics
    pick_misses: tuple[str, ...]
    current_misses: tuple[str, ...]
    objective: ObjectiveSpec = field(default_factory=lambda: ObjectiveSpec("collective"))

    def value(self, run: RunMetrics) -> float:
        """The objective's metric of ``run`` (busbw; jobs side by side: the slowest's share)."""
        return float(getattr(run, self.objective.metric))

    def text(self, run: RunMetrics) -> str:
        return self.objective.value_text(self.value(run))

    @property
    def ratio(self) -> float:
        """The pick's gain over today's, above 1 when it is better: its busbw over today's, or
        today's p99 queue over its own (1.0 when the divisor measured nothing)."""
        pick, today = self.value(self.pick), self.value(self.current)
        if self.objective.maximise:
            return pick / today if today else 1.0
        return today / pick if pick else 1.0

    def refutes(self) -> str:
        """Why this run refutes the pick ("" when it does not)."""
        new = [m for m in self.pick_misses if not self.current_misses]
        if new:
            return (
                f"at {self.condition.label} it misses {new[0]}, where today's setting meets "
                "every constraint"
            )
        pick, today = self.value(self.pick), self.value(self.current)
        if self.objective.maximise and pick < today * (1 - TIE_BAND):
            return (
                f"at {self.condition.label} its {self.text(self.pick)} is "
                f"{(1 - pick / today) * 100:.0f} % below today's {self.text(self.current)} "
                f"(more than {TIE_BAND:.0%})"
            )
        if not self.objective.maximise and pick > today + max(
            today * TIE_BAND, QUEUE_RESOLUTION_BYTES
        ):
            above = f"{(pick / today - 1) * 100:.0f} % above" if today else "above"
            return (
                f"at {self.condition.label} its {self.text(self.pick)} is {above} today's "
                f"{self.text(self.current)} (more than {TIE_BAND:.0%} and one 1 KiB bucket)"
            )
        return ""


@dataclass
class HeldOut:
    """The held-out runs of a pick; ``short`` says why fewer placements ran than asked."""

    runs: list[HeldOutRun] = field(default_factory=list)
    short: str = ""

    @property
    def refuted(self) -> str:
        """The first condition that refutes the pick ("" when it holds in all)."""
        return next((why for run in self.runs if (why := run.refutes())), "")

    @property
    def worst(self) -> HeldOutRun | None:
        """The run where the pick fared worst against today's setting."""
        return min(self.runs, key=lambda r: (not r.pick_misses, r.ratio), default=None)

    def __str__(self) -> str:
        worst = self.worst
        if worst is None:
            return f"held out: nothing ran ({self.short})" if self.short else "held out: none"
        kinds = [r.condition.kind for r in self.runs]
        counted = " and ".join(
            f"{kinds.count(k)} {k if kinds.count(k) > 1 else k[:-1]}" for k in dict.fromkeys(kinds)
        )
        maximise = worst.objective.maximise
        sign = 1 if maximise else -1
        lowest = min(self.runs, key=lambda r: sign * r.value(r.pick))
        said = [
            f"held out ({counted} the search did not run): the pick's "
            f"{'lowest' if maximise else 'highest'}, {lowest.text(lowest.pick)}, at "
            f"{lowest.condition.label} (today's setting {lowest.text(lowest.current)} there)"
        ]
        if worst is not lowest:
            said.append(
                f"its least gain over today's at {worst.condition.label}: "
                f"{worst.text(worst.pick)} against {worst.text(worst.current)}"
            )
        said.append("the pick did not hold" if self.refuted else "the pick holds in every one")
        if self.short:
            said.append(self.short)
        return "; ".join(said)

    def to_json(self) -> dict[str, Any]:
        return {
            "holds": not self.refuted,
            "refuted": self.refuted or None,
            "note": self.short or None,
            "runs": [
                {
                    "condition": r.condition.label,
                    "seed": r.condition.seed,
                    "hosts": [list(h) for h in r.condition.hosts] if r.condition.hosts else None,
                    "senders": r.condition.senders,
                    "metric": r.objective.metric,
                    "value": r.value(r.pick),
                    "current_value": r.value(r.current),
                    "busbw_Bps": r.pick.busbw_Bps,
                    "current_busbw_Bps": r.current.busbw_Bps,
                    "bound_fraction": r.pick.bound_fraction,
                    "current_bound_fraction": r.current.bound_fraction,
                    "misses": list(r.pick_misses),
                    "current_misses": list(r.current_misses),
                }
                for r in self.runs
            ],
        }


@dataclass
class SpeedResult:
    speed_bps: int
    senders: int
    pause_threshold_bytes: int
    host_ports: int
    frame_bytes: int
    stages: list[Stage]
    explanation: str = ""
    method: str = "grid"  # "grid" or "halving"
    rungs: list[Rung] = field(default_factory=list)
    load_points: tuple[int, ...] = ()
    edge_notes: list[EdgeNote] = field(default_factory=list)  # the edges and widening
    summary: str = ""  # current -> recommended, in the user's terms
    decision: Decision = field(default_factory=Decision.undecided)
    held_out: HeldOut | None = None  # a recommended change run where it was not chosen

    @property
    def ecn(self) -> Stage:
        return self.stages[-1]

    @property
    def recommended(self) -> Trial | None:
        return self.decision.recommended

    @property
    def runs(self) -> int:
        """Every run of the speed: its rungs', and the pick's and today's held out."""
        held = 2 * len(self.held_out.runs) if self.held_out is not None else 0
        return sum(r.runs for r in self.rungs) + held

    @property
    def edges(self) -> list[str]:
        """The edge notes in words, as the explanation and the JSON show them."""
        return [str(note) for note in self.edge_notes]


@dataclass
class TuneResult:
    fabric: str
    profile: str
    scenario: str
    duration_s: float
    seeds: tuple[int, ...]
    objectives: Objectives
    speeds: list[SpeedResult]
    dominant_speed_bps: int
    roce_queue: int
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)
    dcqcn: bool = True
    # ``tune --modes``: the profile values that put the fabric in the mode this tune ran
    # (``mode``, ``trim``), when it is not the fabric's own; part of the override.
    mode_override: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """A recommendation (a change or no change) for every speed."""
        return all(s.recommended is not None for s in self.speeds)

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.speeds)

    def dominant(self) -> SpeedResult | None:
        return next((s for s in self.speeds if s.speed_bps == self.dominant_speed_bps), None)

    def decision(self) -> Decision:
        """The dominant speed's decision: what the override carries."""
        speed = self.dominant()
        return Decision.undecided() if speed is None else speed.decision

    def override(self) -> dict[str, Any] | None:
        """The profile override values of the dominant speed's decision: the recommended
        setting's for a change, none (``{}``) for no change, None without a recommendation."""
        decision = self.decision()
        if decision.recommended is None:
            return None
        if not decision.changes:
            return dict(self.mode_override)
        best = decision.recommended.candidate
        values: dict[str, Any] = {
            "ecn": {
                "queues": {
                    self.roce_queue: {
                        "min_threshold": best.ecn.min_bytes,
                        "max_threshold": best.ecn.max_bytes,
                        "max_probability": best.ecn.max_probability,
                    }
                }
            }
        }
        if best.dcqcn:
            values["nic"] = {"dcqcn": dict(best.dcqcn)}
        return {**self.mode_override, **values}

    def qps_per_connection(self) -> int | None:
        """The decided QPs per connection (an NCCL setting, the profile's ``job:``): the
        recommendation's, or the fabric's own for no change."""
        recommended = self.decision().recommended
        if recommended is None or self.objective.name != "collective":
            return None
        return recommended.candidate.qps

    def to_json(self) -> dict[str, Any]:
        return {
            "fabric": self.fabric,
            "profile": self.profile,
            "scenario": self.scenario,
            "objective": asdict(self.objective),
            "dcqcn_searched": self.dcqcn,
            "duration_s": self.duration_s,
            "seeds": list(self.seeds),
            "objectives": asdict(self.objectives),
            "dominant_speed": format_speed(self.dominant_speed_bps),
            "complete": self.complete,
            "decision": self.decision().to_json(),
            "override": self.override(),
            "qps_per_connection": self.qps_per_connection(),
            "runs": self.runs,
            "wall_s": self.wall_s,
            "notes": list(self.notes),
            "speeds": [_speed_json(s) for s in self.speeds],
        }


def _speed_json(s: SpeedResult) -> dict[str, Any]:
    return {
        "speed": format_speed(s.speed_bps),
        "senders": s.senders,
        "load_points": list(s.load_points),
        "host_ports": s.host_ports,
        "pause_threshold_bytes": s.pause_threshold_bytes,
        "method": s.method,
        "runs": s.runs,
        "rungs": [r.to_json() for r in s.rungs],
        "recommended": s.recommended.candidate.index if s.recommended else None,
        "decision": s.decision.to_json(),
        "summary": s.summary,
        "edges": s.edges,
        "held_out": s.held_out.to_json() if s.held_out is not None else None,
        "explanation": s.explanation,
        "stages": [
            {
                "kind": st.kind,
                "best": s.recommended.candidate.index if s.recommended else None,
                "trials": [t.to_json() for t in st.trials],
            }
            for st in s.stages
        ],
    }

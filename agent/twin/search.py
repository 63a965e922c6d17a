"""``roce-agent tune``: search ECN x DCQCN x QPs per connection jointly per link speed, in the twin.

For each host-facing link speed of the fabric, candidates are run in the twin on a workload at
that speed and judged against hard constraints; the feasible one with the best objective is
recommended.  Every candidate is the fabric's own intent with the candidate's values put where
a profile override puts them (``profile.ecn.queues.<RoCE queue>``, ``profile.nic.dcqcn``),
planned, rule-checked (:mod:`agent.intent.rules`, as ``check`` does) and simulated -- so a row
is what ``roce-agent twin`` shows for the fabric with that override.

The space (:class:`Space`, per speed), searched jointly (one candidate = one point of the
product, not one axis after the other -- an earlier version tuned DCQCN with the current ECN,
then ECN with that DCQCN, and never saw the pairs that interact):

* ECN on the RoCE queue: min in microseconds of line time (:data:`MIN_LEVELS_US`, at least two
  frames), max as a multiple of min (:data:`RATIO_LEVELS`), probability at max
  (:data:`PROBABILITY_LEVELS`); ``--candidates`` evenly spread levels (20: 5 x 2 x 2, as
  :func:`grid_shape` picks).  Max is capped two frames below the fabric's current pause
  threshold at that speed (rule IR005 with an explicit threshold; with ``auto`` the plan puts
  the pause threshold at max + 2 MTU, so it moves with max, and the cap keeps it from rising).
* DCQCN rate increase on every NIC (``dcqcn=True``, the default): ``rpg_time_reset``
  (:data:`RESET_LEVELS_US`: mlx5's 300 us, the DCQCN paper's 55 us, and between/faster) x
  ``rpg_ai_rate`` as a fraction of the line rate (:data:`AI_FRACTION_LEVELS`: mlx5's 5 Mb/s at
  100 Gb/s = 1/20000 up to 1/250), ``rpg_hai_rate`` tied at :data:`HAI_OVER_AI` x ai (the
  paper's R_HAI / R_AI ratio; tying it keeps the space 4 x 4, not 4 x 4 x 4).
* QPs per connection (:data:`QPS_LEVELS`), only for the collective objective (NCCL's
  ``NCCL_IB_QPS_PER_CONNECTION``: more QPs, more UDP source ports, fewer ECMP collisions); the
  queue objective's incast has one QP per sender, so the axis is 1 there.

Search method (:func:`plan_method`): the full grid when candidates x seeds x load points is at
most :data:`FULL_GRID_MAX_RUNS` runs; otherwise successive halving (Jamieson & Talwalkar,
AISTATS 2016; Li et al., "Hyperband", JMLR 2018): every candidate runs short (a quarter of the
duration, the heaviest load point, the first seed), the best third (:data:`HALVING_ETA`, at least
:data:`HALVING_MIN_SURVIVORS`) run at half the duration at every load point, and the best third
of those run the full duration at every load point and seed -- only those can be recommended
(a collective's rungs are a sixteenth, a quarter and all of its size, the best quarter kept).
The fabric's current setting always runs every rung (it is the reference).  Why halving and not
optuna's TPE: halving is deterministic without a sampler seed, needs no dependency, and every
rung is one batch that the process pool (``--jobs``) or a Dask cluster (``--executor``,
:func:`dask_runner`) runs in parallel, where TPE is sequential by nature (each suggestion waits
for the previous results) and models a smooth response that a feasibility cliff (Jain,
utilisation) is not.  The number of runs and the method are in the
output and the JSON.

Load points: the scenario (or collective) at three sizes, N, N // 2 + 1 and max(2, N // 4)
senders (ranks for a collective): a setting that serves 8 senders can starve 2 (one flow's rate
increase outruns the other's, Jain 0.5) and the other way round (issue #26: a corner that was
fine at 8 starved six of seven flows at 7).  The middle point is there because two were not
enough: on the 40G star a search at 4 and 2 senders recommended a setting at 98 % utilisation
at both that gave 84-90 % at 3 (the property test, tests/unit/test_tune_search.py, found it).
N <= 2 is one point, N = 3 two.

Constraints (:class:`Objectives`), hard, at every load point and in every seed: no lossless drop
(headroom overrun or tail drop on a no-drop priority) over the whole run; paused fraction (the
most-paused switch port or NIC) at most ``max_paused_fraction``; bottleneck utilisation at least
``min_utilisation``; Jain's fairness index at least ``min_jain`` (0.9) over the goodput of the
flows whose path crosses the bottleneck port (the victim of the ``victim`` scenario does not),
all over the measurement window; and, for a scenario, the bottleneck's utilisation over the
whole run at least ``min_utilisation`` too: every collective step starts with a burst, and a
setting whose senders take half the run to recover from the onset (a slow additive increase)
idles the link at each one, which the window does not see (issue #26: tune's pick at 100 % in
the window delivered 89 % goodput in the lab, over the whole run).  A candidate failing one is
rejected with the reason and where (sender count, seed).

Objectives (:class:`ObjectiveSpec`), at the heaviest load point (the stated job), mean of the
seeds: ``collective`` (the default) maximises a collective's bus bandwidth
(:mod:`agent.twin.collectives`: ring all-reduce of 64 MiB, nccl-tests' ``-b 64M``, ranks =
min(8, hosts at the speed) alternating over two leaves, :func:`collective_hosts`); ``queue``
minimises the bottleneck's time-weighted p99 queue on the scenario.  No change without a
measured gain: a feasible current setting that :func:`ties` with the best stays the
recommendation.

Measurement window: the second half of the run.  Every flow of an incast starts at line rate,
so the first microseconds fill the queue to about N x the pause threshold whatever the setting
(no shared buffer is modelled); the onset still counts for lossless drops and is shown as the
queue peak.

Ranking (:func:`ranked`, lexicographic): feasible candidates by the objective, then worst
utilisation (higher first), then index; then the rejected ones by how close they came.  For
the queue objective, the candidates whose p99 :func:`ties` with the best (within
:data:`TIE_BAND`, or one 1 KiB bucket of the histogram the p99 is read from) come first by their
worst utilisation over the whole run: a p99 difference the twin cannot measure does not buy
idle link time.
Lexicographic, not a weighted score: the constraints bound pause, utilisation and fairness, the
objective is the one thing left to optimise, and a weight between kilobytes and percent would
be arbitrary.

Edges (:func:`widen`): a recommendation on the lowest or highest searched level of an axis says
so, and the axis gets one more level in that direction (min and the DCQCN axes by the grid's
own step, QPs x 2); the new point (the recommendation with that axis moved; with several
axes, also all of them moved at once) runs at full fidelity and the recommendation is
re-chosen -- at most :data:`MAX_WIDENINGS` times.  With nothing feasible the search widens
around the closest candidate.  Axes that cannot widen
say why (probability is 1-100 %, max is capped below the pause threshold, min floors at two
frames).

One set per fabric: the intent has one ECN setting per queue for every port and one DCQCN
setting for every NIC, so the override carries the recommendation of the fabric's dominant
speed (most host-facing ports; ties: the faster).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from agent.intent.model import FabricIntent, Profile
from agent.intent.plan import Plan, build_plan
from agent.intent.rules import RULES
from agent.intent.units import format_size, format_speed
from agent.twin.cluster import DEFAULT_TIMEOUT_S as CLUSTER_TIMEOUT_S
from agent.twin.cluster import DaskMap
from agent.twin.collectives import MAX_QPS as COLLECTIVE_MAX_QPS
from agent.twin.collectives import CollectiveSpec, ideal_time_s, nccl_tests_size, run_collective
from agent.twin.engine import Engine, SwitchPort
from agent.twin.network import TwinError, TwinNetwork, build_network, roce_frame_bytes
from agent.twin.results import MAX_DURATION_S as TWIN_MAX_DURATION_S
from agent.twin.results import jain, simulate, time_weighted_p99
from agent.twin.verdicts import PAUSED_CEILING, UTILISATION_FLOOR, kb
from agent.twin.workloads import Scenario, ScenarioName, build_scenario

TUNE_SCENARIOS: tuple[ScenarioName, ...] = ("incast", "all-to-all", "victim")
OBJECTIVES = ("queue", "collective")
ObjectiveName = Literal["queue", "collective"]
DEFAULT_OBJECTIVE: ObjectiveName = "collective"
DEFAULT_SENDERS = 8
DEFAULT_DURATION_S = 10e-3
DEFAULT_CANDIDATES = 20
# The collective objective's ECN settings per speed (2 x 2 x 2): its runs cost 5-10 x an
# incast's and the space is x 3 for QPs (docs/tuning.md, measured).
COLLECTIVE_CANDIDATES = 8
DEFAULT_SEEDS = (1, 2)
MIN_CANDIDATES, MAX_CANDIDATES = 4, 120
MAX_DURATION_S = 0.1  # times candidates x seeds: a bound on one command's work

# Queueing delay at line rate where marking starts: the DCQCN paper's 5 KB at 40 Gb/s is
# 1 us, NVIDIA's 150 KB at 100 Gb/s 12 us (agent.intent.sizing.ECN_ANCHORS); the grid spans both.
MIN_LEVELS_US = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
RATIO_LEVELS = (2, 4, 8, 16)  # max / min: the paper 40, NVIDIA 10, SONiC 2
PROBABILITY_LEVELS = (1, 5, 20, 100)  # the paper 1 %, NVIDIA 100 %
TIE_BAND = 0.05
# The p99 queue is read from a time-weighted histogram of 1 KiB depth buckets (_Mark, the
# ``depth >> 10`` key): p99s closer than one bucket are not a measured difference.
QUEUE_RESOLUTION_BYTES = 1 << 10
# MAC header + FCS around an MTU-sized packet: the largest frame a port takes. The grid keeps
# room for two below the pause threshold (the twin's RoCE frames, at most 4158 B, are smaller).
ETH_OVERHEAD = 18

# DCQCN rate increase: rpg_time_reset in us (mlx5 default 300 us, NVIDIA's "DCQCN parameters"
# page / mlx5 sysfs; the DCQCN paper's T = 55 us, Zhu et al. SIGCOMM'15 Table 1) and rpg_ai_rate
# as a fraction of the line rate (mlx5's 5 Mb/s at 100 Gb/s = 1/20000; the paper's 40 Mb/s at
# 40 Gb/s = 1/1000).  rpg_hai_rate = 5 x ai (the paper's R_HAI / R_AI).
RESET_LEVELS_US = (20, 55, 100, 300)
AI_FRACTION_LEVELS = (1 / 20000, 1 / 4000, 1 / 1000, 1 / 250)
HAI_OVER_AI = 5
# NCCL_IB_QPS_PER_CONNECTION (NCCL environment variables docs: default 1); Meta's RoCE paper
# (Gangidi et al., SIGCOMM'24 §5) scales QPs to spread a collective's few flows over ECMP.
# A level above 1 runs with NCCL_IB_SPLIT_DATA_ON_QPS=1 and the recommendation names both.
QPS_LEVELS = (1, 2, 4)
MAX_QPS = COLLECTIVE_MAX_QPS  # the twin's bound on a run's work (NCCL accepts up to 128)

# Search method: the full grid up to this many runs (about a minute of engine time at 400 G on
# this machine's measured 0.3-0.6 s per 5 ms run); successive halving above it.
FULL_GRID_MAX_RUNS = 160
HALVING_ETA = 3
# The collective's rungs: a sixteenth, a quarter and all of the size, the best quarter kept
# (its short runs already show the ECMP collisions and the rate recovery that decide busbw).
COLLECTIVE_RUNG_FRACTIONS = (1 / 16, 1 / 4, 1.0)
COLLECTIVE_ETA = 4
HALVING_MIN_SURVIVORS = 4
MAX_WIDENINGS = 2
MIN_JAIN = 0.9

# The collective objective's defaults: nccl-tests' all_reduce_perf -b 64M (doc/PERFORMANCE.md),
# ranks = min(8, hosts at the speed): one 8-GPU server's worth of NICs, a ring small enough to
# simulate per candidate.
COLLECTIVE_SIZE_BYTES = 64 * 2**20
COLLECTIVE_MAX_RANKS = 8
COLLECTIVE_SLACK = 3  # a collective's run may take this many times its line-rate time
COLLECTIVE_WORKLOADS = ("allreduce", "allgather", "reducescatter", "alltoall")


@dataclass(frozen=True)
class Objectives:
    # The twin's verdicts use the same limits (agent.twin.verdicts).
    max_paused_fraction: float = PAUSED_CEILING
    min_utilisation: float = UTILISATION_FLOOR
    min_jain: float = MIN_JAIN


@dataclass(frozen=True)
class ObjectiveSpec:
    """What a candidate is run on and what is optimised (module docstring: Objectives)."""

    name: ObjectiveName = "queue"
    workload: str = "allreduce"  # collective only
    ranks: int | None = None  # collective only; None: min(8, hosts at the speed)
    size_bytes: int = COLLECTIVE_SIZE_BYTES

    @property
    def maximise(self) -> bool:
        return self.name == "collective"

    @property
    def metric(self) -> str:
        """The RunMetrics field optimised."""
        return "busbw_Bps" if self.name == "collective" else "queue_p99_bytes"

    def describe(self) -> str:
        if self.name == "collective":
            return f"the highest {self.workload} busbw"
        return "the lowest p99 queue"


@dataclass(frozen=True)
class EcnSetting:
    min_bytes: int
    max_bytes: int
    max_probability: int

    def label(self) -> str:
        return f"{_size(self.min_bytes)}-{_size(self.max_bytes)} @{self.max_probability} %"


def _size(value: int) -> str:
    """As people write thresholds (``150KB``); a clamped one (two frames, 18464 B) in kB."""
    text = format_size(value)
    return f"{value / 1000:.1f}KB" if text.isdigit() else text


@dataclass(frozen=True)
class Candidate:
    """One point to try: ECN for the RoCE queue, the NICs' DCQCN values it changes, QPs."""

    index: int  # 0 = the fabric's current setting
    ecn: EcnSetting
    dcqcn: tuple[tuple[str, int], ...] = ()
    axes: tuple[float, ...] | None = None  # level values in Space.names order; None: current
    qps: int = 1

    @property
    def current(self) -> bool:
        return self.index == 0

    def dcqcn_label(self) -> str:
        short = {"rpg_time_reset": "T", "rpg_ai_rate": "AI", "rpg_hai_rate": "HAI"}
        return " ".join(f"{short.get(k, k)} {v}" for k, v in self.dcqcn) or "current"

    def dcqcn_long(self) -> str:
        units = {"rpg_time_reset": "us", "rpg_ai_rate": "Mb/s", "rpg_hai_rate": "Mb/s"}
        return ", ".join(f"{k} {v} {units.get(k, '')}".rstrip() for k, v in self.dcqcn)

    def label(self) -> str:
        parts = [f"ECN {self.ecn.label()}"]
        if self.dcqcn:
            parts.append(f"DCQCN {self.dcqcn_label()}")
        if self.qps != 1:
            parts.append(f"{self.qps} QPs")
        return ", ".join(parts)


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
            "queue_p99_bytes": round(self.mean("queue_p99_bytes")),
            "queue_peak_bytes": round(self.mean("queue_peak_bytes")),
            "busbw_Bps": self.mean("busbw_Bps"),
            "ce_fraction": self.mean("ce_fraction"),
            "lossless_drops": self.drops(),
            "pause_threshold_bytes": self.runs[0].pause_threshold_bytes if self.runs else None,
            "runs": [asdict(r) for r in self.runs],
        }


@dataclass
class Stage:
    """The trials of one speed's search and the chosen one (None: nothing feasible)."""

    kind: str  # "joint" (or "ecn" for an ECN-only search)
    trials: list[Trial]
    best: Trial | None
    closest: Trial | None  # the best-ranked trial when nothing is feasible


@dataclass(frozen=True)
class Rung:
    """One batch of the search: how long, at which load points and seeds, how many ran."""

    duration_s: float
    points: tuple[tuple[int, int], ...]  # (senders or ranks, seed)
    candidates: int
    runs: int
    kept: int
    fidelity: str = ""  # "1.25 ms" per run, or a collective's "4MiB"

    def to_json(self) -> dict[str, Any]:
        return {
            "duration_s": self.duration_s,
            "points": [{"senders": n, "seed": s} for n, s in self.points],
            "candidates": self.candidates,
            "runs": self.runs,
            "kept": self.kept,
            "fidelity": self.fidelity,
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
    edges: list[str] = field(default_factory=list)  # what the widening did, in words
    summary: str = ""  # current -> recommended, in the user's terms

    @property
    def ecn(self) -> Stage:
        return self.stages[-1]

    @property
    def recommended(self) -> Trial | None:
        return self.ecn.best

    @property
    def runs(self) -> int:
        return sum(r.runs for r in self.rungs)


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

    @property
    def complete(self) -> bool:
        """A recommendation for every speed."""
        return all(s.recommended is not None for s in self.speeds)

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.speeds)

    def dominant(self) -> SpeedResult | None:
        return next((s for s in self.speeds if s.speed_bps == self.dominant_speed_bps), None)

    def override(self) -> dict[str, Any] | None:
        """The profile override values for the dominant speed's recommendation."""
        speed = self.dominant()
        if speed is None or speed.recommended is None:
            return None
        best = speed.recommended.candidate
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
        return values

    def qps_per_connection(self) -> int | None:
        """The recommended QPs per connection (an NCCL setting, not in the fabric file)."""
        speed = self.dominant()
        if speed is None or speed.recommended is None or self.objective.name != "collective":
            return None
        return speed.recommended.candidate.qps

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
        "summary": s.summary,
        "edges": list(s.edges),
        "explanation": s.explanation,
        "stages": [
            {
                "kind": st.kind,
                "best": st.best.candidate.index if st.best else None,
                "trials": [t.to_json() for t in st.trials],
            }
            for st in s.stages
        ],
    }


# ------------------------------------------------------------------------------ the grid


def _spread(levels: Sequence[Any], count: int) -> list[int]:
    """``count`` indices of ``levels`` evenly spread over its range, ends included."""
    if count >= len(levels):
        return list(range(len(levels)))
    if count == 1:
        return [len(levels) // 2]
    return sorted({round(i * (len(levels) - 1) / (count - 1)) for i in range(count)})


def grid_shape(candidates: int) -> tuple[int, int, int]:
    """Levels per axis (min, ratio, probability): the largest product <= ``candidates``,
    then the most balanced, then more levels of min (the knob with the largest effect)."""
    best: tuple[int, int, int] = (1, 1, 1)
    best_key: tuple[int, int, int, int] = (0, 0, 0, 0)
    for a in range(1, len(MIN_LEVELS_US) + 1):
        for b in range(1, len(RATIO_LEVELS) + 1):
            for c in range(1, len(PROBABILITY_LEVELS) + 1):
                product = a * b * c
                if product > candidates:
                    continue
                key = (product, min(a, b, c), a, c)
                if key > best_key:
                    best, best_key = (a, b, c), key
    return best


def ecn_cap(speed_bps: int, frame: int, pause_threshold: int) -> int:
    """The largest ECN max a candidate may have: two frames below the pause threshold (the
    frame that crosses max still fits under it, and with ``pause_threshold: auto`` = max + 2
    MTU the pause threshold never rises above today's), rounded down to whole kB."""
    cap = (pause_threshold - 2 * frame) // 1000 * 1000
    if cap <= 4 * frame:
        raise TwinError(
            f"tune {format_speed(speed_bps)}: pause threshold. Expected: room for an ECN ramp "
            f"below it (more than 5 frames of {frame} B) Actual: {format_size(pause_threshold)}"
        )
    return cap


def ecn_setting(
    speed_bps: int, frame: int, cap: int, min_us: float, ratio: float, probability: float
) -> EcnSetting:
    """The ECN setting of one point of the axes: min = ``min_us`` of line time (at least two
    frames), max = ratio x min (at least two frames above min, at most ``cap``; a clamped max
    lowers min to keep a one-frame ramp)."""
    base = max(round(min_us * 1e-6 * speed_bps / 8), 2 * frame)
    high = min(max(round(base * ratio), base + 2 * frame), cap)
    low = min(base, high - frame)
    return EcnSetting(low, high, int(probability))


def ecn_levels(
    speed_bps: int, mtu: int, pause_threshold: int, candidates: int = DEFAULT_CANDIDATES
) -> tuple[list[float], list[float], list[float]]:
    """The ECN axes' levels (min us, ratio, probability) for ``candidates`` settings: the
    largest shape whose distinct settings (clamped settings collapse into one) still fit, so
    that 20 asked gives 20 when the pause threshold allows."""
    frame = mtu + ETH_OVERHEAD
    cap = ecn_cap(speed_bps, frame, pause_threshold)
    best: tuple[list[float], list[float], list[float]] = ([], [], [])
    best_count = 0
    for budget in range(candidates, 2 * candidates + 1):
        a, b, c = grid_shape(budget)
        levels = (
            [MIN_LEVELS_US[i] for i in _spread(MIN_LEVELS_US, a)],
            [float(RATIO_LEVELS[i]) for i in _spread(RATIO_LEVELS, b)],
            [float(PROBABILITY_LEVELS[i]) for i in _spread(PROBABILITY_LEVELS, c)],
        )
        count = len({ecn_setting(speed_bps, frame, cap, *p) for p in itertools.product(*levels)})
        if count > candidates:
            break
        if count > best_count:
            best, best_count = levels, count
    return best


def grid_candidates(
    speed_bps: int, mtu: int, pause_threshold: int, candidates: int = DEFAULT_CANDIDATES
) -> list[Candidate]:
    """ECN candidates for a speed (index from 1, with their axis values): every one has
    2 frames <= min < max <= the pause threshold - 2 frames.  Duplicates (clamped settings)
    are dropped, so the grid may be a little smaller than asked for a small pause threshold."""
    frame = mtu + ETH_OVERHEAD
    cap = ecn_cap(speed_bps, frame, pause_threshold)
    out: list[Candidate] = []
    seen: set[EcnSetting] = set()
    for point in itertools.product(*ecn_levels(speed_bps, mtu, pause_threshold, candidates)):
        setting = ecn_setting(speed_bps, frame, cap, *point)
        if setting not in seen:
            seen.add(setting)
            out.append(Candidate(len(out) + 1, setting, axes=point))
    return out


def ecn_grid(
    speed_bps: int, mtu: int, pause_threshold: int, candidates: int = DEFAULT_CANDIDATES
) -> list[EcnSetting]:
    """The settings of :func:`grid_candidates`."""
    return [c.ecn for c in grid_candidates(speed_bps, mtu, pause_threshold, candidates)]


def dcqcn_values(
    speed_bps: int, reset_us: float, ai_fraction: float
) -> tuple[tuple[str, int], ...]:
    """The NIC values of one DCQCN point, scaled to the speed (hai = 5 x ai)."""
    ai = max(1, round(speed_bps * ai_fraction / 1e6))
    return (
        ("rpg_time_reset", max(1, round(reset_us))),
        ("rpg_ai_rate", ai),
        ("rpg_hai_rate", ai * HAI_OVER_AI),
    )


# Axis name -> (unit for the explanation, lowest value it may take, highest, widening factor).
# Why these bounds: min floors at two frames (ecn_setting), the ratio at 1 (max = min + 2
# frames), probability is a percentage, rpg_time_reset and rpg_ai_rate are positive integers
# in mlx5's sysfs units, QPs per connection 1..128 in NCCL.
AXIS_BOUNDS: dict[str, tuple[float, float, float]] = {
    "min": (0.05, 1000.0, 2.0),
    "ratio": (1.0, 64.0, 2.0),
    "probability": (1.0, 100.0, 0.0),  # 0: no widening, 1 and 100 are the range's ends
    "rpg_time_reset": (1.0, 10_000.0, 2.5),
    "rpg_ai_rate": (1 / 1_000_000, 1 / 16, 4.0),
    "qps": (1.0, float(MAX_QPS), 2.0),
}


@dataclass
class Space:
    """The searched axes of one speed: level values per axis (ascending, widenable)."""

    speed_bps: int
    frame: int
    cap: int
    levels: dict[str, list[float]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.levels)

    def candidate(self, index: int, point: Sequence[float]) -> Candidate:
        values = dict(zip(self.names, point, strict=True))
        ecn = ecn_setting(
            self.speed_bps, self.frame, self.cap,
            values["min"], values["ratio"], values["probability"],
        )  # fmt: skip
        dcqcn: tuple[tuple[str, int], ...] = ()
        if "rpg_time_reset" in values:
            dcqcn = dcqcn_values(self.speed_bps, values["rpg_time_reset"], values["rpg_ai_rate"])
        qps = int(values.get("qps", 1))
        return Candidate(index, ecn, dcqcn, tuple(point), qps)

    def points(self) -> Iterator[tuple[float, ...]]:
        return itertools.product(*self.levels.values())

    def size(self) -> int:
        return math.prod(len(v) for v in self.levels.values())

    def describe(self) -> str:
        return " x ".join(f"{len(v)} {k}" for k, v in self.levels.items())

    def widen(self, axis: str, direction: int) -> tuple[float | None, str]:
        """Add one level beyond the lowest (-1) or highest (+1) level of ``axis``: the new
        value, or None and why it cannot."""
        low, high, factor = AXIS_BOUNDS[axis]
        levels = self.levels[axis]
        edge = levels[0] if direction < 0 else levels[-1]
        if factor == 0:
            return None, f"{axis} {_axis_text(axis, edge, self.speed_bps)} is the end of its range"
        value = edge / factor if direction < 0 else edge * factor
        if axis == "qps":
            value = float(max(1, round(value)))
        if not low <= value <= high or value == edge:
            return None, f"{axis} {_axis_text(axis, edge, self.speed_bps)} is at its bound"
        if (
            axis == "min"
            and direction < 0
            and round(edge * 1e-6 * self.speed_bps / 8) <= 2 * self.frame
        ):
            return None, f"min is at its floor of two frames ({format_size(2 * self.frame)})"
        if axis in ("min", "ratio") and direction > 0 and self._max_capped():
            return (
                None,
                f"ECN max is at its cap {format_size(self.cap)} (pause threshold - 2 frames)",
            )
        levels.insert(0 if direction < 0 else len(levels), value)
        return value, ""

    def _max_capped(self) -> bool:
        top = ecn_setting(self.speed_bps, self.frame, self.cap, self.levels["min"][-1],
                          self.levels["ratio"][-1], 100)  # fmt: skip
        return top.max_bytes >= self.cap


def _axis_text(axis: str, value: float, speed_bps: int) -> str:
    if axis == "min":
        return f"{value:g} us"
    if axis == "ratio":
        return f"x{value:g}"
    if axis == "probability":
        return f"{value:g} %"
    if axis == "rpg_time_reset":
        return f"{round(value)} us"
    if axis == "rpg_ai_rate":
        return f"{max(1, round(speed_bps * value / 1e6))} Mb/s"
    return f"{value:g}"


# ------------------------------------------------------------------------------ candidates


def candidate_intent(
    intent: FabricIntent, ecn: EcnSetting | None, dcqcn: Iterable[tuple[str, int]] = ()
) -> tuple[FabricIntent | None, str | None]:
    """The intent with the candidate where a profile override puts it, and the first rule
    (as ``check`` runs them) it breaks, if any."""
    data = intent.profile.model_dump()
    if ecn is not None:
        data["ecn"]["queues"][intent.profile.roce.priority] = {
            "min_threshold": ecn.min_bytes,
            "max_threshold": ecn.max_bytes,
            "max_probability": ecn.max_probability,
        }
    for name, value in dcqcn:
        data["nic"]["dcqcn"][name] = value
    try:
        profile = Profile.model_validate(data)
    except ValueError as exc:
        return None, str(exc).splitlines()[0]
    variant = intent.model_copy(update={"profile": profile})
    plan = build_plan(variant)
    for registered in RULES:
        for violation in registered.check(variant, plan):
            return None, f"{registered.rule_id} {violation.message()}"
    return variant, None


def current_ecn(
    plan: Plan, roce: int, speed_bps: int, dilation: int = 1
) -> tuple[EcnSetting, int, int, int]:
    """(ECN of the RoCE queue, pause threshold, MTU, host-facing ports) at a speed, from the
    switch ports facing hosts at that speed; the lowest pause threshold and the largest MTU
    when they differ between ports (the tightest cap, the largest frame).  ``speed_bps`` is
    the twin's: on a time-dilated lab (``emulation.time_dilation`` D) a port of the plan runs
    at 1/D of the speed it stands for."""
    hosts = {d.name for d in plan.devices if d.role == "host"}
    found: list[tuple[EcnSetting, int, int]] = []
    for device in plan.devices:
        if device.role == "host":
            continue
        for port in device.ports:
            peer = (port.peer or "").partition(":")[0]
            if peer not in hosts or port.speed_bps * dilation != speed_bps:
                continue
            ecn = next((e for e in port.ecn if e.queue == roce), None)
            head = port.headroom.get(roce)
            if ecn is None or head is None:
                raise TwinError(
                    f"tune {format_speed(speed_bps)}: {device.name}:{port.name}. Expected: ECN "
                    f"and PFC on the RoCE queue {roce} (a lossless profile with ECN) "
                    "Actual: " + ("no ECN" if ecn is None else "no PFC")
                )
            found.append(
                (
                    EcnSetting(ecn.min_bytes, ecn.max_bytes, ecn.max_probability),
                    head.pause_threshold,
                    port.mtu,
                )
            )
    if not found:
        raise TwinError(f"tune: no switch port faces a host at {format_speed(speed_bps)}")
    return (
        found[0][0],
        min(p for _, p, _ in found),
        max(m for _, _, m in found),
        len(found),
    )


def host_speeds(network: TwinNetwork) -> dict[int, int]:
    """Host NIC speed -> number of hosts."""
    speeds: dict[int, int] = {}
    for host in network.hosts.values():
        speeds[host.port.speed_bps] = speeds.get(host.port.speed_bps, 0) + 1
    return speeds


# ------------------------------------------------------------------------------ one run


class _Mark:
    """Cumulative counters at the start of the measurement window (the switch ports' in the
    engine's ticks, the NICs' in the model's seconds)."""

    def __init__(self, engine: Engine, now: float) -> None:
        self.t_s = now
        self.ticks = ticks = engine.clock.ticks
        self.ports: dict[str, tuple[int, int, dict[int, int]]] = {}
        for node in engine.switches.values():
            for port in node.ports:
                hist = dict(port.depth_hist)
                key = port.depth >> 10
                hist[key] = hist.get(key, 0) + (ticks - port.depth_t)
                paused = port.pause_meter.paused - max(0, port.pause_meter.until - ticks)
                self.ports[port.name] = (port.tx_bytes, paused, hist)
        self.nics = {
            name: nic.pause.paused_s - max(0.0, nic.pause.paused_until - now)
            for name, nic in engine.nics.items()
        }
        self.flows = [(f.rx_packets, f.rx_ce, f.delivered_bytes) for f in engine.flows]


class _WindowStart:
    """Takes a :class:`_Mark` at the first sample at or after ``start_s``."""

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.mark: _Mark | None = None

    def __call__(self, engine: Engine, now: float) -> None:
        if self.mark is None and now >= self.start_s - 1e-12:
            self.mark = _Mark(engine, now)


def _bottleneck(engine: Engine, scenario: Scenario) -> SwitchPort | None:
    if scenario.receiver is not None:
        for node in engine.switches.values():
            for port in node.ports:
                if port.spec.peer_device == scenario.receiver:
                    return port
    ports = [p for n in engine.switches.values() for p in n.ports if p.depth_peak]
    return max(ports, key=lambda p: (p.depth_peak, p.tx_bytes), default=None)


def run_candidate(
    network: TwinNetwork,
    scenario_name: ScenarioName,
    *,
    senders: int,
    speed_bps: int,
    duration_s: float,
    seed: int,
    pause_threshold: int,
    payload_bytes: int | None = None,
) -> RunMetrics:
    """One seed of one candidate's network: whole-run drops and onset peak, window metrics."""
    scenario = build_scenario(network, scenario_name, senders, speed_bps)
    window_start = _WindowStart(duration_s / 2)
    engine, whole = simulate(
        network,
        scenario,
        senders=senders,
        duration_s=duration_s,
        seed=seed,
        on_sample=window_start,
        payload_bytes=payload_bytes,
    )
    mark = window_start.mark
    if mark is None:  # pragma: no cover - the engine samples up to the end of the run
        raise TwinError("tune: the twin took no sample in the measurement window")
    window = duration_s - mark.t_s
    window_ticks = engine.end - mark.ticks
    bottleneck = _bottleneck(engine, scenario)
    utilisation = 0.0
    p99 = 0
    paused = 0.0
    whole_utilisation = (
        bottleneck.tx_bytes * 8 / (bottleneck.spec.speed_bps * engine.duration_s)
        if bottleneck is not None and engine.duration_s > 0
        else None
    )
    for node in engine.switches.values():
        for port in node.ports:
            tx0, paused0, hist0 = mark.ports[port.name]
            paused = max(paused, (port.pause_meter.paused - paused0) / window_ticks)
            if port is bottleneck:
                utilisation = (port.tx_bytes - tx0) * 8 / (port.spec.speed_bps * window)
                hist = {k: v - hist0.get(k, 0) for k, v in port.depth_hist.items()}
                p99 = min(time_weighted_p99(hist, window_ticks), port.depth_peak)
    for name, nic in engine.nics.items():
        paused = max(paused, (nic.pause.paused_s - mark.nics[name]) / window)
    packets = sum(f.rx_packets - m[0] for f, m in zip(engine.flows, mark.flows, strict=True))
    marked = sum(f.rx_ce - m[1] for f, m in zip(engine.flows, mark.flows, strict=True))
    return RunMetrics(
        senders=senders,
        duration_s=duration_s,
        jain=_bottleneck_jain(network, engine, mark, bottleneck),
        seed=seed,
        utilisation=utilisation,
        paused_fraction=paused,
        queue_p99_bytes=p99,
        queue_peak_bytes=bottleneck.depth_peak if bottleneck else 0,
        ce_fraction=marked / packets if packets else 0.0,
        lossless_drops=whole.lossless_drops,
        pause_threshold_bytes=pause_threshold,
        bottleneck=bottleneck.name if bottleneck else None,
        events=engine.events,
        wall_s=whole.wall_s,
        paused_fraction_whole=whole.max_paused_fraction,
        utilisation_whole=whole_utilisation,
    )


def _bottleneck_jain(
    network: TwinNetwork, engine: Engine, mark: _Mark, bottleneck: SwitchPort | None
) -> float | None:
    """Jain over the window goodput (in-order received bytes) of the flows whose path crosses
    the bottleneck port: flows elsewhere (a victim flow) do not compete there."""
    if bottleneck is None:
        return None
    hop = (bottleneck.spec.device, bottleneck.spec.index)
    shares = [
        float(f.delivered_bytes - m[2])
        for f, m in zip(engine.flows, mark.flows, strict=True)
        if hop in network.path(f.src, f.dst, f.hash)
    ]
    return jain(shares)


@dataclass(frozen=True)
class Job:
    intent: FabricIntent
    scenario: ScenarioName
    senders: int
    speed_bps: int
    duration_s: float
    seed: int
    roce: int
    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)
    qps: int = 1
    label: str = ""  # the progress bar's
    payload_bytes: int | None = None  # RoCE payload per frame (None: the ports' RoCE MTU)


def run_job(job: Job) -> RunMetrics:
    """A job of the process pool: plan and build the candidate's network, run one seed."""
    plan = build_plan(job.intent)
    dilation = job.intent.emulation.time_dilation
    _, pause, _, _ = current_ecn(plan, job.roce, job.speed_bps, dilation)
    if job.objective.name == "collective":
        return run_collective_job(job, build_network(job.intent, plan), pause)
    return run_candidate(
        build_network(job.intent, plan),
        job.scenario,
        senders=job.senders,
        speed_bps=job.speed_bps,
        duration_s=job.duration_s,
        seed=job.seed,
        pause_threshold=pause,
        payload_bytes=job.payload_bytes,
    )


def collective_hosts(network: TwinNetwork, speed_bps: int, ranks: int) -> tuple[str, ...]:
    """The collective's ranks: alternating over the first two leaves with hosts at the speed
    (every ring hop crosses the spines, where ECMP collisions and DCQCN decide busbw; on one
    leaf every setting measured the same 49.0 GB/s at 400G), or fabric order on one leaf."""
    by_leaf: dict[str, list[str]] = {}
    for host in network.hosts.values():
        if host.port.speed_bps == speed_bps:
            by_leaf.setdefault(host.leaf, []).append(host.name)
    groups = list(by_leaf.values())[:2]
    if len(groups) < 2:
        return tuple(groups[0][:ranks]) if groups else ()
    out: list[str] = []
    for i in range(max(len(g) for g in groups)):
        out.extend(g[i] for g in groups if i < len(g))
    return tuple(out[:ranks])


def run_collective_job(job: Job, network: TwinNetwork, pause: int) -> RunMetrics:
    """One seed of a collective (``job.senders`` ranks) on the candidate's network."""
    spec = CollectiveSpec(
        workload=job.objective.workload,  # type: ignore[arg-type]
        ranks=job.senders,
        size_bytes=job.objective.size_bytes,
        qps_per_connection=job.qps,
        # Q QPs spread a connection over Q paths only when each message is split across them
        # (NCCL_IB_SPLIT_DATA_ON_QPS=1); with NCCL's default 0 a connection with one slice in
        # flight uses one QP (agent.twin.collectives, docs/collectives.md).
        split_data_on_qps=job.qps > 1,
        hosts=collective_hosts(network, job.speed_bps, job.senders),
        speed_bps=job.speed_bps,
    )
    report = run_collective(network, spec, seed=job.seed)
    busiest = report.links[0] if report.links else None
    return RunMetrics(
        seed=job.seed,
        utilisation=busiest.utilisation if busiest is not None else 0.0,
        paused_fraction=report.max_paused_fraction,
        queue_p99_bytes=report.queue_p99_bytes,
        queue_peak_bytes=report.queue_peak_bytes,
        ce_fraction=report.ce_fraction,
        lossless_drops=report.lossless_drops,
        pause_threshold_bytes=pause,
        bottleneck=report.busiest_port,
        events=report.events,
        wall_s=report.wall_s,
        senders=job.senders,
        jain=report.jain,
        busbw_Bps=report.busbw_Bps,
        duration_s=report.time_s,
        completed=report.completed,
        ranks=True,
    )


# ------------------------------------------------------------------------------ judging


def and_list(values: Iterable[object]) -> str:
    """``8, 5 and 2``."""
    items = [str(v) for v in values]
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def mib(value: float) -> str:
    """A collective's size as nccl-tests' -b writes it (MiB)."""
    return f"{value / 2**20:g} MiB"


def gbs(value: float) -> str:
    """Bytes per second in GB/s, as nccl-tests prints busbw."""
    return f"{value / 1e9:.1f} GB/s"


def evaluate(runs: Sequence[RunMetrics], objectives: Objectives) -> list[str]:
    """The hard constraints a candidate misses (empty: feasible), each with the worst run's
    load point and seed."""
    if not runs:
        return []
    reasons: list[str] = []
    unfinished = next((r for r in runs if not r.completed), None)
    if unfinished is not None:
        reasons.append(f"collective did not complete ({unfinished.where()})")
    drops = max(runs, key=lambda r: r.lossless_drops)
    if drops.lossless_drops:
        reasons.append(f"lossless drops {drops.lossless_drops} > 0 ({drops.where()})")
    paused = max(runs, key=lambda r: r.paused_fraction)
    if paused.paused_fraction > objectives.max_paused_fraction:
        reasons.append(
            f"paused {_pct(paused.paused_fraction)} > {_pct(objectives.max_paused_fraction)} "
            f"({paused.where()})"
        )
    util = min(runs, key=lambda r: r.utilisation)
    if util.utilisation < objectives.min_utilisation:
        reasons.append(
            f"utilisation {_pct(util.utilisation)} < {_pct(objectives.min_utilisation)} "
            f"({util.where()})"
        )
    whole = [r for r in runs if r.utilisation_whole is not None]
    onset = min(whole, key=lambda r: r.utilisation_whole or 0.0) if whole else None
    if onset is not None and (onset.utilisation_whole or 0.0) < objectives.min_utilisation:
        reasons.append(
            f"utilisation over the whole run {_pct(onset.utilisation_whole or 0.0)} < "
            f"{_pct(objectives.min_utilisation)}: slow to recover from the onset ({onset.where()})"
        )
    judged = [r for r in runs if r.jain is not None]
    if judged:
        unfair = min(judged, key=lambda r: r.jain or 0.0)
        if (unfair.jain or 0.0) < objectives.min_jain:
            reasons.append(f"Jain {unfair.jain:.2f} < {objectives.min_jain:.2f} ({unfair.where()})")
    return reasons


QUEUE = ObjectiveSpec()


def objective_value(trial: Trial, objective: ObjectiveSpec = QUEUE) -> float:
    """The objective as a number to minimise (busbw negated): its mean over the seeds at the
    heaviest load point -- the stated job (N senders, N ranks); the lighter points are there
    for the constraints (a 2-rank ring reaches line rate with any setting, and averaging it in
    would hide the differences that matter)."""
    if not trial.runs:
        return math.inf
    heaviest = max(r.senders for r in trial.runs)
    value = _at(trial, heaviest, objective.metric)
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


def recommend(trials: Sequence[Trial], objective: ObjectiveSpec = QUEUE) -> Trial | None:
    """The first of :func:`ranked` if it is feasible -- unless the current setting is
    feasible too and :func:`ties` with the best on the objective: no change without a
    measured gain (module docstring: Ranking)."""
    first = ranked(trials, objective)[0] if trials else None
    if first is None or not first.feasible:
        return None
    current = next((t for t in trials if t.candidate.current and t.feasible), None)
    if current is not None and current is not first:
        best = min(objective_value(t, objective) for t in trials if t.feasible)
        if ties(objective_value(current, objective), best, objective):
            return current
    return first


# ------------------------------------------------------------------------------ explaining


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
            t
            for t in trials
            if t.candidate.axes is not None
            and len(t.candidate.axes) == len(best.axes)
            and t.candidate.axes != best.axes
            and all(v == best.axes[i] for i, v in enumerate(t.candidate.axes) if i != axis)
        ]
        lower = [t for t in line if t.candidate.axes[axis] < best.axes[axis]]  # type: ignore[index]
        higher = [t for t in line if t.candidate.axes[axis] > best.axes[axis]]  # type: ignore[index]
        if lower:
            out.append((name, "lower", max(lower, key=lambda t: t.candidate.axes[axis])))  # type: ignore[index]
        if higher:
            out.append((name, "higher", min(higher, key=lambda t: t.candidate.axes[axis])))  # type: ignore[index]
    return out


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
            return f"busbw {gbs(bw)} ({(bw / best_bw - 1) * 100:.0f} %)"
        return f"busbw about equal ({gbs(bw)}, within {TIE_BAND:.0%}), ranked after it"
    p99, best_p99 = objective_value(other, objective), objective_value(best, objective)
    if not ties(p99, best_p99, objective) and p99 > best_p99 + frame:
        change = (p99 / best_p99 - 1) * 100 if best_p99 else math.inf
        return f"p99 {kb(p99)} (+{change:.0f} %)"
    return (
        f"p99 about equal ({kb(p99)}, within {TIE_BAND:.0%}, a 1 KiB bucket or a frame), "
        f"ranked after it (utilisation over the whole run {_pct(other.worst_whole_utilisation())}"
        f" vs {_pct(best.worst_whole_utilisation())})"
    )


def _jain_text(t: Trial) -> str:
    value = t.worst_jain()
    return "-" if value is None else f"{value:.2f}"


def _summary(t: Trial, objective: ObjectiveSpec = QUEUE) -> str:
    heaviest = max((r.senders for r in t.runs), default=0)
    head = f"busbw {gbs(_at(t, heaviest))}, " if objective.maximise else ""
    return (
        f"{head}p99 {kb(_at(t, heaviest, 'queue_p99_bytes'))}, utilisation "
        f"{_pct(t.worst_utilisation())}, paused {_pct(t.worst_paused())}, Jain {_jain_text(t)}"
    )


def user_summary(speed: SpeedResult, objective: ObjectiveSpec = QUEUE) -> str:
    """Current -> recommended in the user's terms (busbw, p99 queue, utilisation, fairness,
    pause), worst load point and seed for the constraints, means for the objective.  With no
    recommendation, current -> the closest candidate, saying what it misses."""
    best = speed.recommended or speed.ecn.closest
    current = next((t for t in speed.ecn.trials if t.candidate.current), None)
    if best is None or current is None or not current.runs or not best.runs:
        return ""
    what_best = "recommended" if best.feasible else "closest, NOT recommended: " + best.reasons[0]
    parts = []
    # The objective's numbers at the stated job (N senders or ranks, mean of the seeds): a
    # mean over the load points would mix rings of different sizes into a number no job sees.
    n = max(r.senders for r in best.runs)
    if objective.maximise:
        what = {"allreduce": "all-reduce", "alltoall": "all-to-all"}.get(
            objective.workload, objective.workload
        )
        parts.append(f"{what} busbw at {n} ranks {_at(current, n) / 1e9:.1f} → {gbs(_at(best, n))}")
    p99 = "queue_p99_bytes"
    parts.append(f"p99 queue {_at(current, n, p99) / 1e3:.0f} → {kb(_at(best, n, p99))}")
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
        + f" (current → {what_best}; {loads} {unit}, worst seed)"
    )


def _at(t: Trial, senders: int, name: str = "busbw_Bps") -> float:
    """The mean of ``name`` over the runs at one load point."""
    values = [float(getattr(r, name)) for r in t.runs if r.senders == senders]
    return sum(values) / len(values) if values else 0.0


def explain(
    speed: SpeedResult,
    objectives: Objectives,
    dcqcn_tuned: bool,
    objective: ObjectiveSpec = QUEUE,
    names: Sequence[str] = ("min", "ratio", "probability"),
) -> str:
    """One line: the recommendation and why not its neighbours (or why nothing passed)."""
    best = speed.ecn.best
    if best is None:
        return _nothing_passed(speed, dcqcn_tuned)
    return "; ".join(_why_best(speed, best, objectives, objective, names))


def _nothing_passed(speed: SpeedResult, dcqcn_tuned: bool) -> str:
    """Why no candidate passed: the rejections by first word, the closest one's reasons, and
    a hint at the DCQCN search when most failed on utilisation and it was off."""
    stage = speed.ecn
    rejected = [t for t in stage.trials if not t.feasible and t.pruned is None]
    counts: dict[str, int] = {}
    for t in rejected:
        word = (t.invalid or (t.reasons[0] if t.reasons else "pruned")).split(" ")[0]
        counts[word] = counts.get(word, 0) + 1
    close = stage.closest
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
    parts = [
        f"{format_speed(speed.speed_bps)}: {best.candidate.label()} -- "
        f"{_summary(best, objective)}; {objective.describe()} of the {feasible} candidates "
        f"meeting no lossless drop, paused <= {_pct(objectives.max_paused_fraction)}, "
        f"utilisation >= {_pct(objectives.min_utilisation)} and Jain >= "
        f"{objectives.min_jain:.2f} at every load point and seed"
    ]
    for axis, word, other in neighbours(best.candidate, stage.trials, names):
        parts.append(
            f"not {_axis_value(other.candidate, axis)} ({word} {axis}): "
            f"{_why_not(other, best, frame, objective)}"
        )
    parts.extend(speed.edges)
    current = next((t for t in stage.trials if t.candidate.current), None)
    if current is not None and current is not best:
        parts.append(
            f"current {current.candidate.label()}: {_why_not(current, best, frame, objective)}"
        )
    return parts


# ------------------------------------------------------------------------------ the search

# A runner yields each job's metrics in job order, as each is done (a caller can show
# progress as it consumes them).
Runner = Callable[[list[Job]], Iterator[RunMetrics]]


def serial_runner(jobs: list[Job]) -> Iterator[RunMetrics]:
    return (run_job(job) for job in jobs)


def pool_runner(workers: int) -> Runner:
    """Run the jobs in ``workers`` processes (each job plans and builds its own network)."""

    def run(jobs: list[Job]) -> Iterator[RunMetrics]:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            yield from pool.map(run_job, jobs, chunksize=1)

    return run


def dask_runner(
    address: str, *, timeout_s: float = CLUSTER_TIMEOUT_S, quiet: bool = True
) -> DaskMap[Job, RunMetrics]:
    """Run the jobs on the workers of an existing Dask cluster, whose scheduler is at
    ``address`` (``tcp://HOST:PORT``, as ``dask scheduler`` prints it): the same runs and the
    same results as :func:`serial_runner`, in job order (:mod:`agent.twin.cluster`).

    Connects now, within ``timeout_s``, and checks that every worker runs this
    ``agent.__version__``; :class:`~agent.twin.cluster.ClusterError` otherwise, or when the
    cluster is lost during a batch. Close it when the search is done (a context manager).
    ``distributed`` is imported here, not with this module (``tune --executor`` only)."""
    import agent

    return DaskMap(
        address, run_job, expected_version=agent.__version__, timeout_s=timeout_s, quiet=quiet
    )


def load_points(n: int) -> tuple[int, ...]:
    """The load points a candidate must pass: N, N // 2 + 1 and max(2, N // 4) senders (or
    ranks), most first (module docstring: Load points)."""
    return (n,) if n <= 2 else tuple(sorted({n, n // 2 + 1, max(2, n // 4)}, reverse=True))


def plan_method(candidates: int, seeds: int, points: int, method: str = "auto") -> str:
    """ "grid" when candidates x seeds x load points <= FULL_GRID_MAX_RUNS, else "halving"."""
    if method != "auto":
        return method
    return "grid" if candidates * seeds * points <= FULL_GRID_MAX_RUNS else "halving"


def rung_plan(
    method: str, points: Sequence[int], seeds: Sequence[int], collective: bool = False
) -> list[tuple[float, tuple[tuple[int, int], ...]]]:
    """(fraction of the duration -- of the size for a collective --, (load point, seed)
    pairs) per rung; the last is the full evaluation every recommendable candidate gets."""
    full = tuple((n, s) for n in points for s in seeds)
    if method == "grid":
        return [(1.0, full)]
    first, second, _ = COLLECTIVE_RUNG_FRACTIONS if collective else (0.25, 0.5, 1.0)
    return [
        (first, ((points[0], seeds[0]),)),
        (second, tuple((n, seeds[0]) for n in points)),
        (1.0, full),
    ]


def tune(
    intent: FabricIntent,
    *,
    speeds: Sequence[int] = (),
    scenario: ScenarioName = "incast",
    senders: int = DEFAULT_SENDERS,
    duration_s: float = DEFAULT_DURATION_S,
    candidates: int | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    dcqcn: bool = True,
    objectives: Objectives | None = None,
    objective: ObjectiveSpec | None = None,
    qps_levels: Sequence[int] = QPS_LEVELS,
    method: str = "auto",
    runner: Runner = serial_runner,
    payload_bytes: int | None = None,
) -> TuneResult:
    """Tune every host-facing speed (or ``speeds``); see the module docstring.
    ``payload_bytes``: the RoCE payload per frame the hosts send (objective queue; default
    the ports' RoCE MTU)."""
    objectives = objectives or Objectives()
    objective = objective or ObjectiveSpec()
    if candidates is None:
        collective = objective.name == "collective"
        candidates = COLLECTIVE_CANDIDATES if collective else DEFAULT_CANDIDATES
    _check_options(scenario, duration_s, candidates, seeds, qps_levels, method)
    if payload_bytes is not None and objective.name != "queue":
        raise TwinError(
            "tune --payload. Expected: with --objective queue (a collective sends the ports' "
            f"RoCE MTU) Actual: --objective {objective.name}"
        )
    started = time.perf_counter()
    plan = build_plan(intent)
    present = host_speeds(build_network(intent, plan))
    _check_speeds(speeds, present)
    chosen = sorted(set(speeds) or present, reverse=True)
    _check_objective(objective, {s: present[s] for s in chosen})
    search = _Search(
        intent, plan, scenario, senders, duration_s, candidates, tuple(seeds), dcqcn,
        objectives, objective,
        tuple(sorted(set(qps_levels))) if objective.name == "collective" else (1,),
        method, runner, payload_bytes,
    )  # fmt: skip
    notes: list[str] = []
    results = [search.speed(speed, present[speed], notes) for speed in chosen]
    dominant = max(present, key=lambda s: (present[s], s))
    if len(present) > 1:
        notes.append(
            f"one ECN/DCQCN setting per fabric (profile): the override carries "
            f"{format_speed(dominant)}'s ({present[dominant]} of "
            f"{sum(present.values())} hosts); the other speeds' rows are advice only"
        )
    return TuneResult(
        fabric=intent.name,
        profile=intent.profile.name,
        scenario=scenario if objective.name == "queue" else objective.workload,
        duration_s=duration_s,
        seeds=tuple(seeds),
        objectives=objectives,
        speeds=results,
        dominant_speed_bps=dominant,
        roce_queue=intent.profile.roce.priority,
        wall_s=time.perf_counter() - started,
        notes=notes,
        objective=objective,
        dcqcn=dcqcn,
    )


def _check_options(
    scenario: ScenarioName,
    duration_s: float,
    candidates: int,
    seeds: Sequence[int],
    qps_levels: Sequence[int],
    method: str,
) -> None:
    if scenario not in TUNE_SCENARIOS:
        raise TwinError(
            f"tune --scenario. Expected: one of {', '.join(TUNE_SCENARIOS)} Actual: {scenario}"
        )
    if not (math.isfinite(duration_s) and 0 < duration_s <= MAX_DURATION_S):
        raise TwinError(
            f"tune --duration. Expected: more than 0 and at most {MAX_DURATION_S * 1e3:g} ms "
            f"Actual: {duration_s!r}"
        )
    if not MIN_CANDIDATES <= candidates <= MAX_CANDIDATES:
        raise TwinError(
            f"tune --candidates. Expected: {MIN_CANDIDATES}-{MAX_CANDIDATES} Actual: {candidates}"
        )
    if not seeds:
        raise TwinError("tune --seeds. Expected: at least 1 Actual: 0")
    if not qps_levels or any(not 1 <= q <= MAX_QPS for q in qps_levels):
        raise TwinError(
            f"tune --qps. Expected: QPs per connection 1-{MAX_QPS} "
            f"Actual: {', '.join(map(str, qps_levels)) or 'none'}"
        )
    if method not in ("auto", "grid", "halving"):
        raise TwinError(f"tune --method. Expected: auto, grid or halving Actual: {method}")


def _check_objective(objective: ObjectiveSpec, hosts: dict[int, int]) -> None:
    """The fabric can evaluate the objective at every speed tuned."""
    if objective.name not in OBJECTIVES:
        raise TwinError(
            f"tune --objective. Expected: one of {', '.join(OBJECTIVES)} Actual: {objective.name}"
        )
    if objective.name == "queue":
        return
    if objective.workload not in COLLECTIVE_WORKLOADS:
        raise TwinError(
            f"tune --workload. Expected: one of {', '.join(COLLECTIVE_WORKLOADS)} "
            f"Actual: {objective.workload}"
        )
    if objective.size_bytes <= 0:
        raise TwinError(f"tune --size. Expected: more than 0 bytes Actual: {objective.size_bytes}")
    for speed, count in hosts.items():
        if count < 2:
            raise TwinError(
                f"tune --objective collective: {format_speed(speed)} has {count} host. "
                "Expected: at least 2 hosts at every speed tuned (use --speed) "
                f"Actual: {count}"
            )
        if objective.ranks is not None and not 2 <= objective.ranks <= count:
            raise TwinError(
                f"tune --ranks: {format_speed(speed)}. Expected: 2-{count} (the hosts at "
                f"that speed) Actual: {objective.ranks}"
            )
        _check_collective_time(
            objective, speed, objective.ranks or min(COLLECTIVE_MAX_RANKS, count)
        )


def _check_collective_time(objective: ObjectiveSpec, speed: int, ranks: int) -> None:
    """A collective the twin can finish: COLLECTIVE_SLACK x its line-rate time within the
    twin's simulated-time bound (a 64 MiB all-reduce at a lab's 10 Mb/s needs 94 s)."""
    workload = objective.workload
    size = nccl_tests_size(workload, ranks, objective.size_bytes)  # type: ignore[arg-type]
    need = ideal_time_s(workload, ranks, size, speed)  # type: ignore[arg-type]
    if COLLECTIVE_SLACK * need > TWIN_MAX_DURATION_S:
        largest = objective.size_bytes * TWIN_MAX_DURATION_S / (COLLECTIVE_SLACK * need)
        raise TwinError(
            f"tune --size: {format_speed(speed)}. Expected: a collective the twin finishes "
            f"within {TWIN_MAX_DURATION_S:g} s ({COLLECTIVE_SLACK} x its line-rate time), "
            f"--size at most {mib(largest)} here, or --objective queue Actual: "
            f"{mib(objective.size_bytes)} takes {need:.3g} s at line rate"
        )


def _check_speeds(speeds: Sequence[int], present: dict[int, int]) -> None:
    """The fabric has hosts to tune for, at every asked speed."""
    if not present:
        raise TwinError("tune: Expected: hosts with a NIC linked to a switch Actual: none")
    for speed in speeds:
        if speed not in present:
            have = ", ".join(format_speed(s) for s in sorted(present))
            raise TwinError(
                f"tune --speed: no host NIC at {format_speed(speed)}. Expected: one of {have} "
                f"Actual: {format_speed(speed)}"
            )


def build_space(
    speed_bps: int, mtu: int, pause: int, candidates: int, dcqcn: bool, qps: Sequence[int]
) -> Space:
    """The joint space of one speed (module docstring)."""
    mins, ratios, probs = ecn_levels(speed_bps, mtu, pause, candidates)
    levels: dict[str, list[float]] = {"min": mins, "ratio": ratios, "probability": probs}
    if dcqcn:
        levels["rpg_time_reset"] = [float(v) for v in RESET_LEVELS_US]
        levels["rpg_ai_rate"] = list(AI_FRACTION_LEVELS)
    levels["qps"] = [float(q) for q in qps]
    frame = mtu + ETH_OVERHEAD
    return Space(speed_bps, frame, ecn_cap(speed_bps, frame, pause), levels)


def space_candidates(
    space: Space, points: Iterable[Sequence[float]], seen: set[Any], start: int
) -> list[Candidate]:
    """Distinct candidates of ``points`` (settings equal after clamping run once)."""
    out: list[Candidate] = []
    for point in points:
        c = space.candidate(start + len(out), point)
        key = (c.ecn, c.dcqcn, c.qps)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


@dataclass(frozen=True)
class _Search:
    """One tune's settings, the same for every speed it tunes."""

    intent: FabricIntent
    plan: Plan
    scenario: ScenarioName
    senders: int
    duration_s: float
    candidates: int
    seeds: tuple[int, ...]
    dcqcn: bool
    objectives: Objectives
    objective: ObjectiveSpec
    qps: tuple[int, ...]
    method: str
    runner: Runner
    payload_bytes: int | None = None

    def speed(self, speed: int, hosts: int, notes: list[str]) -> SpeedResult:
        """The joint search at one speed: grid or halving, then widening at the edges."""
        roce = self.intent.profile.roce.priority
        dilation = self.intent.emulation.time_dilation
        ecn_now, pause, mtu, host_ports = current_ecn(self.plan, roce, speed, dilation)
        if self.payload_bytes is not None:
            # The grid's frame bounds (min >= 2 frames, max <= pause threshold - 2 frames) use
            # the frame the hosts send, not the MTU's (the lab's probes send 1000-byte payloads
            # under a 30 KB pause threshold).
            mtu = roce_frame_bytes(mtu, self.payload_bytes) - ETH_OVERHEAD
        senders = self._senders(speed, hosts, notes)
        points = load_points(senders)
        space = build_space(speed, mtu, pause, self.candidates, self.dcqcn, self.qps)
        current = Candidate(0, ecn_now)
        seen: set[Any] = {(current.ecn, current.dcqcn, current.qps)}
        cands = [current, *space_candidates(space, space.points(), seen, 1)]
        method = plan_method(len(cands), len(self.seeds), len(points), self.method)
        result = SpeedResult(speed, senders, pause, host_ports, mtu + ETH_OVERHEAD, [])
        result.method, result.load_points = method, points
        trials = self._validated(cands)
        collective = self.objective.name == "collective"
        self._halve(result, trials, rung_plan(method, points, self.seeds, collective))
        self._widen(result, space, trials, seen)
        best = recommend(trials, self.objective)
        closest = ranked(trials, self.objective)[0] if best is None and trials else None
        result.stages = [Stage("joint" if self.dcqcn else "ecn", trials, best, closest)]
        self._pause_note(result)
        result.summary = user_summary(result, self.objective)
        result.explanation = explain(
            result, self.objectives, self.dcqcn, self.objective, space.names
        )
        return result

    def _senders(self, speed: int, hosts: int, notes: list[str]) -> int:
        """As many senders (ranks) as asked, or as the hosts at this speed allow (noted)."""
        if self.objective.name == "collective":
            return min(self.objective.ranks or COLLECTIVE_MAX_RANKS, hosts)
        limit = hosts - 1 if self.scenario == "incast" else hosts
        senders = min(self.senders, limit)
        if senders < self.senders:
            notes.append(
                f"{format_speed(speed)}: {senders} senders (only {hosts} hosts at this speed)"
            )
        return senders

    def _validated(self, cands: list[Candidate]) -> list[Trial]:
        """Trials, with the rule each invalid candidate breaks (those never run)."""
        trials = []
        for c in cands:
            trial = Trial(c)
            trial.variant, trial.invalid = candidate_intent(self.intent, c.ecn, c.dcqcn)
            trials.append(trial)
        return trials

    def _halve(
        self,
        result: SpeedResult,
        trials: list[Trial],
        rungs: list[tuple[float, tuple[tuple[int, int], ...]]],
    ) -> None:
        """Run the rungs; after each but the last keep the best 1/eta (and the current)."""
        alive = [t for t in trials if t.invalid is None]
        for number, (fraction, points) in enumerate(rungs):
            runs = self._run(alive, result.speed_bps, fraction, points, number)
            last = number == len(rungs) - 1
            kept = alive if last else self._survivors(alive, number, fraction, points)
            result.rungs.append(
                Rung(
                    self.duration_s * fraction,
                    points,
                    len(alive),
                    runs,
                    len(kept),
                    self._fidelity(fraction),
                )
            )
            alive = kept

    def _fidelity(self, fraction: float) -> str:
        if self.objective.name == "collective":
            return mib(self.objective.size_bytes * fraction)
        return f"{self.duration_s * fraction * 1e3:g} ms"

    def _survivors(
        self, alive: list[Trial], number: int, fraction: float, points: tuple[tuple[int, int], ...]
    ) -> list[Trial]:
        order = ranked(alive, self.objective)
        eta = COLLECTIVE_ETA if self.objective.name == "collective" else HALVING_ETA
        keep = max(HALVING_MIN_SURVIVORS, math.ceil(len(alive) / eta))
        for place, trial in enumerate(order[keep:], start=keep + 1):
            if not trial.candidate.current:
                trial.pruned = (
                    f"dropped by halving at rung {number + 1} "
                    f"({self._fidelity(fraction)}): ranked {place} of {len(order)}"
                    + (f", {trial.reasons[0]}" if trial.reasons else "")
                )
        return [t for t in alive if t.pruned is None]

    def _run(
        self,
        trials: list[Trial],
        speed: int,
        fraction: float,
        points: tuple[tuple[int, int], ...],
        number: int,
    ) -> int:
        """Run ``trials`` at ``points`` for ``fraction`` of the duration; their runs replace
        the earlier rung's.  Returns the number of runs."""
        roce = self.intent.profile.roce.priority
        objective = self.objective
        if objective.name == "collective":
            objective = replace(objective, size_bytes=max(1, int(objective.size_bytes * fraction)))
        duration = self.duration_s * fraction  # a collective runs until it completes
        jobs: list[Job] = []
        owners: list[Trial] = []
        for trial in trials:
            c = trial.candidate
            variant = trial.variant or self.intent  # _validated set it on every valid one
            trial.runs, trial.rung = [], number
            for n, seed in points:
                label = f"tune {format_speed(speed)} rung {number + 1}"
                jobs.append(Job(self.intent if c.current else variant, self.scenario, n, speed,
                                duration, seed, roce, objective, c.qps, label,
                                self.payload_bytes))  # fmt: skip
                owners.append(trial)
        for trial, metrics in zip(owners, self.runner(jobs), strict=True):
            trial.runs.append(metrics)
        for trial in trials:
            trial.reasons = evaluate(trial.runs, self.objectives)
        return len(jobs)

    def _widen(
        self, result: SpeedResult, space: Space, trials: list[Trial], seen: set[Any]
    ) -> None:
        """Widen the axes the recommendation sits on the edge of (module docstring: Edges)."""
        full = tuple((n, s) for n in result.load_points for s in self.seeds)
        for _ in range(MAX_WIDENINGS):
            # Around the recommendation, or, when nothing passed, around the closest: a
            # search that failed at the edge of its range has not looked beyond it.
            best = ranked(trials, self.objective)[0] if trials else None
            if best is None or best.candidate.axes is None or not best.runs:
                return
            new_points, words = self._edge_points(space, best.candidate)
            result.edges.extend(w for w in words if w not in result.edges)
            fresh = space_candidates(space, new_points, seen, len(trials))
            if not fresh:
                return
            added = self._validated(fresh)
            trials.extend(added)
            valid = [t for t in added if t.invalid is None]
            runs = self._run(valid, result.speed_bps, 1.0, full, len(result.rungs))
            result.rungs.append(
                Rung(self.duration_s, full, len(valid), runs, len(valid), self._fidelity(1.0))
            )
            after = ranked(trials, self.objective)[0]
            word = "recommended" if after.feasible else "closest"
            result.edges.append(f"after widening, {word}: {after.candidate.label()}")
        best = ranked(trials, self.objective)[0] if trials else None
        if best is not None and best.candidate.axes is not None and best.runs:
            for name, direction in _edges(space, best.candidate):
                if any(
                    (e.startswith(f"edge: {name} ") and "end of its range" in e)
                    or ("floor" in e and name == "min")
                    for e in result.edges
                ):
                    continue  # already said why it cannot widen
                result.edges.append(
                    f"edge: still at the {'lowest' if direction < 0 else 'highest'} "
                    f"{name} searched (widening limit {MAX_WIDENINGS} reached)"
                )

    def _edge_points(self, space: Space, best: Candidate) -> tuple[list[list[float]], list[str]]:
        """The new point beyond ``best`` on each axis it is on the edge of (every other axis
        as ``best``: each costs a full evaluation) and, when several widen, the point with all
        of them moved (rate-increase knobs pay off together), and the edges in words."""
        assert best.axes is not None
        points: list[list[float]] = []
        words: list[str] = []
        for name, direction in _edges(space, best):
            axis = space.names.index(name)
            side = "lowest" if direction < 0 else "highest"
            was = _axis_text(name, best.axes[axis], space.speed_bps)
            value, why = space.widen(name, direction)
            if value is None:
                words.append(f"edge: {name} {was} is the {side} level searched and {why}")
                continue
            words.append(
                f"edge: {name} {was} was the {side} level searched: widened to "
                f"{_axis_text(name, value, space.speed_bps)}"
            )
            point = list(best.axes)
            point[axis] = value
            points.append(point)
        if len(points) > 1:  # and every widened axis at once: knobs that move together
            corner = list(best.axes)
            for point in points:
                corner = [
                    p if p != b else c for p, b, c in zip(point, best.axes, corner, strict=True)
                ]
            points.append(corner)
        return points, words

    def _pause_note(self, result: SpeedResult) -> None:
        """A recommendation that moves the pause threshold: by how much, and why it is safe."""
        best = result.recommended
        if best is None or not best.runs:
            return
        before, after = result.pause_threshold_bytes, best.runs[0].pause_threshold_bytes
        if before == after:
            return
        variant, _ = candidate_intent(self.intent, best.candidate.ecn, best.candidate.dcqcn)
        roce = self.intent.profile.roce.priority
        dilation = self.intent.emulation.time_dilation
        old = _host_headroom(self.plan, roce, result.speed_bps, dilation)
        new = (
            _host_headroom(build_plan(variant), roce, result.speed_bps, dilation)
            if variant
            else None
        )
        same = old is not None and new is not None and old.xoff == new.xoff
        headroom = (
            f"headroom above it unchanged (xoff {format_size(old.xoff)}, sized from cable and "
            "speed, not from the threshold)"
            if same and old is not None
            else f"headroom CHANGES: xoff {old and format_size(old.xoff)} → "
            f"{new and format_size(new.xoff)}"
        )
        loads = and_list(result.load_points)
        unit = "ranks" if self.objective.name == "collective" else "senders"
        result.edges.append(
            f"pause threshold {kb(before)} → {kb(after)} ({kb(after - before)}): the profile's "
            f"pause_threshold: auto puts it at ECN max + 2 MTU; safe because {headroom}, ECN "
            f"max {kb(best.candidate.ecn.max_bytes)} < pause threshold {kb(after)} (IR005), and "
            f"no lossless drop at {loads} {unit} in any seed"
        )


def _edges(space: Space, c: Candidate) -> list[tuple[str, int]]:
    """(axis, -1 lowest / +1 highest) for each searched axis (more than one level) on whose
    end ``c`` sits."""
    assert c.axes is not None
    out = []
    for axis, (name, levels) in enumerate(space.levels.items()):
        if len(levels) < 2:
            continue
        if c.axes[axis] == levels[0]:
            out.append((name, -1))
        elif c.axes[axis] == levels[-1]:
            out.append((name, 1))
    return out


def _host_headroom(plan: Plan, roce: int, speed_bps: int, dilation: int = 1) -> Any:
    hosts = {d.name for d in plan.devices if d.role == "host"}
    for device in plan.devices:
        for port in device.ports:
            peer = (port.peer or "").partition(":")[0]
            host_facing = device.role != "host" and peer in hosts
            if host_facing and port.speed_bps * dilation == speed_bps:
                return port.headroom.get(roce)
    return None

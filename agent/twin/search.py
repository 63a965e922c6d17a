"""``roce-agent tune``: search ECN (and, optionally, DCQCN) settings per link speed in the twin.

For each host-facing link speed of the fabric, a grid of ECN settings for the RoCE queue
(min, max, probability at max) is run in the twin on a scenario at that speed (default: an
N:1 incast onto one host port) and judged against stated objectives.  Every candidate is the
fabric's own intent with the candidate's values put where a profile override puts them, then
planned, rule-checked (:mod:`agent.intent.rules`, as ``check`` does) and simulated -- so a row of
the
table is what ``roce-agent twin`` shows for the fabric with that override, measured over the
steady-state window below.

Grid (per speed, :func:`ecn_grid`): min in microseconds of line time at the speed
(:data:`MIN_LEVELS_US`, at least two frames), max as a multiple of min
(:data:`RATIO_LEVELS`), probability 1-100 % (:data:`PROBABILITY_LEVELS`); evenly spread levels
of each axis, as many as fit in the asked number of candidates (20: 5 mins x 2 ratios x 2
probabilities).  Max is capped below the fabric's current pause threshold at that speed: with
an explicit ``pause_threshold`` that is rule IR005 (ECN marks before PFC pauses); with
``auto`` the plan puts the pause threshold at max + 2 MTU, so the threshold moves with max
(and is simulated so), and the cap keeps tune from letting a priority group hold more buffer
than it does today.  The fabric's current setting always runs too, as the reference row.

Objectives (:class:`Objectives`):

* hard: no lossless drop (headroom overrun or tail drop on a no-drop priority) in any seed,
  over the whole run; paused fraction (the most-paused switch port or NIC) at most
  ``max_paused_fraction`` and bottleneck utilisation at least ``min_utilisation``, in every
  seed, over the measurement window.  A candidate failing one is rejected with the reason;
* minimised: the bottleneck's time-weighted p99 queue depth over the window (mean of the
  seeds).

Measurement window: the second half of the run.  Every flow of an incast starts at line rate,
so the first microseconds fill the queue to about N x the pause threshold whatever the ECN
setting (no shared buffer is modelled); over a whole short run the p99 would measure that
onset, not the setting.  The onset still counts for lossless drops and is shown as the queue
peak.  The window starts at the first twin sample at or after half the run (the engine's
samples are at most 10 us apart for runs up to 20 ms).

Ranking (:func:`ranked`, lexicographic): feasible candidates by mean p99 queue, then by
worst-seed utilisation (higher first), then grid order.  Why lexicographic and not a weighted
score: the hard objectives already bound pause and utilisation, the queue is the one thing
left to minimise, and a weight between kilobytes and percent would be arbitrary.  An earlier
version counted p99 values within 5 % as equal and let utilisation decide among them: on a
40G star the two tied candidates then swapped places from one seed pair to the next (their
utilisations differ by less than the seed spread, their p99s do not), so the plain order it
is.  Neighbours within :data:`TIE_BAND` of the recommendation's p99 are called "about equal"
in the explanation.

DCQCN (``dcqcn=True``): first a small grid of the reaction point's rate-increase parameters
(``rpg_time_reset``, ``rpg_ai_rate``, ``rpg_hai_rate`` = 5 x ai as in the paper's R_HAI / R_AI
ratio) with the fabric's current ECN, the best one kept (by the same ranking; if none is
feasible, the one closest to feasible), then the ECN grid with it.

One set per fabric: the intent has one ECN setting per queue for every port
(:func:`agent.intent.plan.ecn_for_port`; ``auto`` scales one cited anchor with speed, it cannot be
set per speed) and one DCQCN setting for every NIC.  The override therefore carries the
recommendation of the fabric's dominant speed (most host-facing ports; ties: the faster).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.intent.model import FabricIntent, Profile
from agent.intent.plan import Plan, build_plan
from agent.intent.rules import RULES
from agent.intent.units import format_size, format_speed
from agent.twin.engine import Engine, SwitchPort
from agent.twin.network import TwinError, TwinNetwork, build_network
from agent.twin.results import simulate, time_weighted_p99
from agent.twin.verdicts import PAUSED_CEILING, UTILISATION_FLOOR
from agent.twin.workloads import Scenario, ScenarioName, build_scenario

TUNE_SCENARIOS: tuple[ScenarioName, ...] = ("incast", "all-to-all", "victim")
DEFAULT_SENDERS = 8
DEFAULT_DURATION_S = 10e-3
DEFAULT_CANDIDATES = 20
DEFAULT_SEEDS = (1, 2)
MIN_CANDIDATES, MAX_CANDIDATES = 4, 120
MAX_DURATION_S = 0.1  # times candidates x seeds: a bound on one command's work

# Queueing delay at line rate where marking starts: the DCQCN paper's 5 KB at 40 Gb/s is
# 1 us, NVIDIA's 150 KB at 100 Gb/s 12 us (agent.intent.sizing.ECN_ANCHORS); the grid spans both.
MIN_LEVELS_US = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
RATIO_LEVELS = (2, 4, 8, 16)  # max / min: the paper 40, NVIDIA 10, SONiC 2
PROBABILITY_LEVELS = (1, 5, 20, 100)  # the paper 1 %, NVIDIA 100 %
TIE_BAND = 0.05
# MAC header + FCS around an MTU-sized packet: the largest frame a port takes. The grid keeps
# room for two below the pause threshold (the twin's RoCE frames, at most 4158 B, are smaller).
ETH_OVERHEAD = 18

# DCQCN grid: rpg_time_reset (us) and rpg_ai_rate as a fraction of the line rate (the paper's
# 40 Mb/s at 40 Gb/s is 1/1000; mlx5's 5 Mb/s at 100 Gb/s is 1/20000).
DCQCN_TIME_RESET_US = (55, 20)  # the paper's T = 55 us, and faster
DCQCN_AI_FRACTION = (1 / 1000, 1 / 250)
HAI_OVER_AI = 5


@dataclass(frozen=True)
class Objectives:
    # The twin's verdicts use the same limits (agent.twin.verdicts).
    max_paused_fraction: float = PAUSED_CEILING
    min_utilisation: float = UTILISATION_FLOOR


@dataclass(frozen=True)
class EcnSetting:
    min_bytes: int
    max_bytes: int
    max_probability: int

    def label(self) -> str:
        return (
            f"{format_size(self.min_bytes)}-{format_size(self.max_bytes)} @{self.max_probability} %"
        )


@dataclass(frozen=True)
class Candidate:
    """One setting to try: ECN for the RoCE queue and the NICs' DCQCN values it changes."""

    index: int  # 0 = the fabric's current setting
    ecn: EcnSetting
    dcqcn: tuple[tuple[str, int], ...] = ()
    axes: tuple[int, int, int] | None = None  # (min, ratio, probability) level; None: current

    @property
    def current(self) -> bool:
        return self.index == 0

    def dcqcn_label(self) -> str:
        short = {"rpg_time_reset": "T", "rpg_ai_rate": "AI", "rpg_hai_rate": "HAI"}
        return " ".join(f"{short.get(k, k)} {v}" for k, v in self.dcqcn) or "current"

    def dcqcn_long(self) -> str:
        units = {"rpg_time_reset": "us", "rpg_ai_rate": "Mb/s", "rpg_hai_rate": "Mb/s"}
        return ", ".join(f"{k} {v} {units.get(k, '')}".rstrip() for k, v in self.dcqcn)


@dataclass(frozen=True)
class RunMetrics:
    """One seed of one candidate (window = the measurement window, see the module docstring)."""

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


@dataclass
class Trial:
    candidate: Candidate
    runs: list[RunMetrics] = field(default_factory=list)
    invalid: str | None = None  # the rule the candidate breaks (never simulated)
    reasons: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return self.invalid is None and not self.reasons

    def mean(self, name: str) -> float:
        return sum(float(getattr(r, name)) for r in self.runs) / len(self.runs) if self.runs else 0

    def worst_utilisation(self) -> float:
        return min((r.utilisation for r in self.runs), default=0.0)

    def worst_paused(self) -> float:
        return max((r.paused_fraction for r in self.runs), default=0.0)

    def drops(self) -> int:
        return max((r.lossless_drops for r in self.runs), default=0)

    def to_json(self) -> dict[str, Any]:
        c = self.candidate
        return {
            "index": c.index,
            "current": c.current,
            "ecn": asdict(c.ecn),
            "dcqcn": dict(c.dcqcn),
            "feasible": self.feasible,
            "invalid": self.invalid,
            "reasons": list(self.reasons),
            "utilisation": self.mean("utilisation"),
            "utilisation_worst": self.worst_utilisation(),
            "paused_fraction": self.mean("paused_fraction"),
            "paused_fraction_worst": self.worst_paused(),
            "paused_fraction_whole_run": self.mean("paused_fraction_whole"),
            "queue_p99_bytes": round(self.mean("queue_p99_bytes")),
            "queue_peak_bytes": round(self.mean("queue_peak_bytes")),
            "ce_fraction": self.mean("ce_fraction"),
            "lossless_drops": self.drops(),
            "pause_threshold_bytes": self.runs[0].pause_threshold_bytes if self.runs else None,
            "runs": [asdict(r) for r in self.runs],
        }


@dataclass
class Stage:
    """One grid of one speed: the trials and the chosen one (None: nothing feasible)."""

    kind: str  # "ecn" or "dcqcn"
    trials: list[Trial]
    best: Trial | None
    closest: Trial | None  # the best-ranked trial when nothing is feasible


@dataclass
class SpeedResult:
    speed_bps: int
    senders: int
    pause_threshold_bytes: int
    host_ports: int
    frame_bytes: int
    stages: list[Stage]
    explanation: str = ""

    @property
    def ecn(self) -> Stage:
        return self.stages[-1]

    @property
    def recommended(self) -> Trial | None:
        return self.ecn.best


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

    @property
    def complete(self) -> bool:
        """A recommendation for every speed."""
        return all(s.recommended is not None for s in self.speeds)

    def override(self) -> dict[str, Any] | None:
        """The profile override values for the dominant speed's recommendation."""
        speed = next((s for s in self.speeds if s.speed_bps == self.dominant_speed_bps), None)
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

    def to_json(self) -> dict[str, Any]:
        return {
            "fabric": self.fabric,
            "profile": self.profile,
            "scenario": self.scenario,
            "duration_s": self.duration_s,
            "seeds": list(self.seeds),
            "objectives": asdict(self.objectives),
            "dominant_speed": format_speed(self.dominant_speed_bps),
            "complete": self.complete,
            "override": self.override(),
            "wall_s": self.wall_s,
            "notes": list(self.notes),
            "speeds": [
                {
                    "speed": format_speed(s.speed_bps),
                    "senders": s.senders,
                    "host_ports": s.host_ports,
                    "pause_threshold_bytes": s.pause_threshold_bytes,
                    "recommended": s.recommended.candidate.index if s.recommended else None,
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
                for s in self.speeds
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


def grid_candidates(
    speed_bps: int, mtu: int, pause_threshold: int, candidates: int = DEFAULT_CANDIDATES
) -> list[Candidate]:
    """ECN candidates for a speed (index from 1, with their axis levels): every one has
    2 frames <= min < max <= the pause threshold - 2 frames (so the frame
    that crosses max still fits under the pause).  A max that would reach that cap is clamped
    to it (and min lowered to keep a one-frame ramp); duplicates are dropped, so the grid may
    be a little smaller than asked for a small pause threshold."""
    frame = mtu + ETH_OVERHEAD
    # Two frames below the pause: the frame that crosses max still fits under it, and with
    # ``pause_threshold: auto`` (max + 2 MTU) the pause threshold never rises above today's.
    # Rounded down to whole kilobytes, as people write thresholds.
    cap = (pause_threshold - 2 * frame) // 1000 * 1000
    if cap <= 4 * frame:
        raise TwinError(
            f"tune {format_speed(speed_bps)}: pause threshold. Expected: room for an ECN ramp "
            f"below it (more than 5 frames of {frame} B) Actual: {format_size(pause_threshold)}"
        )
    # Clamped settings collapse into one: take the largest shape whose distinct settings
    # still fit in the budget, so that 20 asked gives 20 when the pause threshold allows.
    best: list[Candidate] = []
    for budget in range(candidates, 2 * candidates + 1):
        grid = _grid(speed_bps, frame, cap, grid_shape(budget))
        if len(grid) > candidates:
            break
        if len(grid) > len(best):
            best = grid
    return best


def _grid(speed_bps: int, frame: int, cap: int, shape: tuple[int, int, int]) -> list[Candidate]:
    a, b, c = shape
    out: list[Candidate] = []
    seen: set[EcnSetting] = set()
    for ia, i in enumerate(_spread(MIN_LEVELS_US, a)):
        base = max(round(MIN_LEVELS_US[i] * 1e-6 * speed_bps / 8), 2 * frame)
        for jb, j in enumerate(_spread(RATIO_LEVELS, b)):
            high = min(max(base * RATIO_LEVELS[j], base + 2 * frame), cap)
            low = min(base, high - frame)
            for kc, k in enumerate(_spread(PROBABILITY_LEVELS, c)):
                setting = EcnSetting(low, high, PROBABILITY_LEVELS[k])
                if setting not in seen:
                    seen.add(setting)
                    out.append(Candidate(len(out) + 1, setting, axes=(ia, jb, kc)))
    return out


def ecn_grid(
    speed_bps: int, mtu: int, pause_threshold: int, candidates: int = DEFAULT_CANDIDATES
) -> list[EcnSetting]:
    """The settings of :func:`grid_candidates`."""
    return [c.ecn for c in grid_candidates(speed_bps, mtu, pause_threshold, candidates)]


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


def current_ecn(plan: Plan, roce: int, speed_bps: int) -> tuple[EcnSetting, int, int, int]:
    """(ECN of the RoCE queue, pause threshold, MTU, host-facing ports) at a speed, from the
    switch ports facing hosts at that speed; the lowest pause threshold and the largest MTU
    when they differ between ports (the tightest cap, the largest frame)."""
    hosts = {d.name for d in plan.devices if d.role == "host"}
    found: list[tuple[EcnSetting, int, int]] = []
    for device in plan.devices:
        if device.role == "host":
            continue
        for port in device.ports:
            peer = (port.peer or "").partition(":")[0]
            if peer not in hosts or port.speed_bps != speed_bps:
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


def dcqcn_grid(speed_bps: int, current: dict[str, int]) -> list[tuple[tuple[str, int], ...]]:
    """rpg_time_reset x rpg_ai_rate (hai = 5 x ai), scaled to the speed; the current values
    are the reference row (index 0), not part of this list."""
    out: list[tuple[tuple[str, int], ...]] = []
    for reset in DCQCN_TIME_RESET_US:
        for fraction in DCQCN_AI_FRACTION:
            ai = max(1, round(speed_bps * fraction / 1e6))
            values = (
                ("rpg_time_reset", reset),
                ("rpg_ai_rate", ai),
                ("rpg_hai_rate", ai * HAI_OVER_AI),
            )
            if any(current.get(k) != v for k, v in values) and values not in out:
                out.append(values)
    return out


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
        self.flows = [(f.rx_packets, f.rx_ce) for f in engine.flows]


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
    )


@dataclass(frozen=True)
class Job:
    intent: FabricIntent
    scenario: ScenarioName
    senders: int
    speed_bps: int
    duration_s: float
    seed: int
    roce: int


def run_job(job: Job) -> RunMetrics:
    """A job of the process pool: plan and build the candidate's network, run one seed."""
    plan = build_plan(job.intent)
    _, pause, _, _ = current_ecn(plan, job.roce, job.speed_bps)
    return run_candidate(
        build_network(job.intent, plan),
        job.scenario,
        senders=job.senders,
        speed_bps=job.speed_bps,
        duration_s=job.duration_s,
        seed=job.seed,
        pause_threshold=pause,
    )


# ------------------------------------------------------------------------------ judging


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def kb(value: float) -> str:
    """A measured depth in kB (1000 B, as :mod:`agent.intent.units` reads KB)."""
    return f"{value / 1000:.0f} KB" if value < 10e6 else f"{value / 1e6:.1f} MB"


def evaluate(runs: Sequence[RunMetrics], objectives: Objectives) -> list[str]:
    """The hard objectives a candidate misses (empty: feasible), worst seed first named."""
    reasons: list[str] = []
    drops = max(runs, key=lambda r: r.lossless_drops)
    if drops.lossless_drops:
        reasons.append(f"lossless drops {drops.lossless_drops} > 0 (seed {drops.seed})")
    paused = max(runs, key=lambda r: r.paused_fraction)
    if paused.paused_fraction > objectives.max_paused_fraction:
        reasons.append(
            f"paused {_pct(paused.paused_fraction)} > {_pct(objectives.max_paused_fraction)} "
            f"(seed {paused.seed})"
        )
    util = min(runs, key=lambda r: r.utilisation)
    if util.utilisation < objectives.min_utilisation:
        reasons.append(
            f"utilisation {_pct(util.utilisation)} < {_pct(objectives.min_utilisation)} "
            f"(seed {util.seed})"
        )
    return reasons


def ranked(trials: Sequence[Trial]) -> list[Trial]:
    """Feasible trials by p99 queue then utilisation (the table's order), then the rejected
    ones by how close they came (fewer missed objectives, higher utilisation, less pause)."""

    def key(t: Trial) -> tuple[Any, ...]:
        if t.feasible:
            return (0, t.mean("queue_p99_bytes"), -t.worst_utilisation(), t.candidate.index)
        if t.invalid is not None:
            return (2, 0, 0, 0, t.candidate.index)
        return (
            1,
            len(t.reasons),
            -t.worst_utilisation(),
            t.worst_paused(),
            t.candidate.index,
        )

    return sorted(trials, key=key)


def recommend(trials: Sequence[Trial]) -> Trial | None:
    """The first of :func:`ranked` if it is feasible (module docstring: Ranking)."""
    first = ranked(trials)[0] if trials else None
    return first if first is not None and first.feasible else None


# ------------------------------------------------------------------------------ explaining

_AXIS_NAMES = ("min", "max", "probability")


def _axis_value(c: Candidate, axis: int) -> str:
    if axis == 0:
        return f"min {format_size(c.ecn.min_bytes)}"
    if axis == 1:
        return f"max {format_size(c.ecn.max_bytes)}"
    return f"{c.ecn.max_probability} %"


def neighbours(best: Candidate, trials: Sequence[Trial]) -> list[tuple[str, Trial]]:
    """The grid's candidates one level away from ``best`` on one axis (lower, then higher)."""
    if best.axes is None:
        return []
    by_axes = {t.candidate.axes: t for t in trials if t.candidate.axes is not None}
    out: list[tuple[str, Trial]] = []
    for axis in range(3):
        for step, word in ((-1, "lower"), (1, "higher")):
            # The nearest existing level on that side (a clamped setting may be missing).
            for distance in range(1, 8):
                pos = list(best.axes)
                pos[axis] += step * distance
                found = by_axes.get((pos[0], pos[1], pos[2]))
                if found is not None:
                    out.append((f"{word} {_AXIS_NAMES[axis]}", found))
                    break
                if pos[axis] < 0 or pos[axis] > 8:
                    break
    return out


def _why_not(other: Trial, best: Trial, frame: int) -> str:
    if other.invalid is not None:
        return f"breaks {other.invalid}"
    if other.reasons:
        return other.reasons[0]
    p99, best_p99 = other.mean("queue_p99_bytes"), best.mean("queue_p99_bytes")
    if p99 > max(best_p99 * (1 + TIE_BAND), best_p99 + frame):
        change = (p99 / best_p99 - 1) * 100 if best_p99 else math.inf
        return f"p99 {kb(p99)} (+{change:.0f} %)"
    return (
        f"p99 about equal ({kb(p99)}, within {TIE_BAND:.0%} or a frame), ranked after it "
        f"(utilisation {_pct(other.worst_utilisation())} vs {_pct(best.worst_utilisation())})"
    )


def _summary(t: Trial) -> str:
    return (
        f"p99 {kb(t.mean('queue_p99_bytes'))}, utilisation "
        f"{_pct(t.worst_utilisation())}, paused {_pct(t.worst_paused())}"
    )


def explain(speed: SpeedResult, objectives: Objectives, dcqcn_tuned: bool) -> str:
    """One line: the recommendation and why not its grid neighbours (or why nothing passed)."""
    best = speed.ecn.best
    if best is None:
        return _nothing_passed(speed, dcqcn_tuned)
    return "; ".join(_why_best(speed, best, objectives)) + _dcqcn_part(speed)


def _dcqcn_part(speed: SpeedResult) -> str:
    """The DCQCN values the ECN grid ran with, when tune searched them ("" when not)."""
    if len(speed.stages) < 2:
        return ""
    dstage = speed.stages[0]
    chosen = dstage.best or dstage.closest
    if chosen is None:
        return ""
    if chosen.candidate.current:
        return "; DCQCN: the NICs' current values are best"
    part = f"; DCQCN {chosen.candidate.dcqcn_long()}"
    base = next((t for t in dstage.trials if t.candidate.current), None)
    if base is not None:
        part += (
            f" (with the current ECN: utilisation {_pct(chosen.worst_utilisation())} "
            f"vs {_pct(base.worst_utilisation())} with the NICs' current values)"
        )
    return part


def _nothing_passed(speed: SpeedResult, dcqcn_tuned: bool) -> str:
    """Why no candidate passed: the rejections by first word, the closest one's reasons, and
    a hint at --dcqcn when most failed on utilisation."""
    stage = speed.ecn
    rejected = [t for t in stage.trials if not t.feasible]
    counts: dict[str, int] = {}
    for t in rejected:
        word = (t.invalid or t.reasons[0]).split(" ")[0]
        counts[word] = counts.get(word, 0) + 1
    close = stage.closest
    hint = ""
    if counts.get("utilisation", 0) >= len(rejected) / 2 and not dcqcn_tuned:
        hint = "; the hosts' DCQCN recovers too slowly for this speed -- try --dcqcn"
    closest = (
        f"; closest {close.candidate.ecn.label()}: {', '.join(close.reasons)}"
        if close is not None and close.reasons
        else ""
    )
    why = ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (
        f"{format_speed(speed.speed_bps)}: no candidate meets the objectives ({len(rejected)} of "
        f"{len(stage.trials)} rejected: {why}){closest}{_dcqcn_part(speed)}{hint}"
    )


def _why_best(speed: SpeedResult, best: Trial, objectives: Objectives) -> list[str]:
    """The recommendation, then why not each grid neighbour, the pause threshold it ran
    with when that is not the fabric's, and why not the current setting."""
    stage, frame = speed.ecn, speed.frame_bytes
    feasible = sum(t.feasible for t in stage.trials)
    parts = [
        f"{format_speed(speed.speed_bps)}: {best.candidate.ecn.label()} -- {_summary(best)}; "
        f"the lowest p99 of the {feasible} candidates meeting paused <= "
        f"{_pct(objectives.max_paused_fraction)} and utilisation >= "
        f"{_pct(objectives.min_utilisation)}"
    ]
    for word, other in neighbours(best.candidate, stage.trials):
        parts.append(
            f"not {_axis_value(other.candidate, _AXIS_NAMES.index(word.split()[1]))} "
            f"({word}): {_why_not(other, best, frame)}"
        )
    pause = best.runs[0].pause_threshold_bytes if best.runs else speed.pause_threshold_bytes
    if pause != speed.pause_threshold_bytes:
        parts.append(
            f"note: pause threshold {kb(pause)} instead of {kb(speed.pause_threshold_bytes)} "
            "(the profile's auto: ECN max + 2 MTU)"
        )
    current = next((t for t in stage.trials if t.candidate.current), None)
    if current is not None and current is not best:
        parts.append(f"current {current.candidate.ecn.label()}: {_why_not(current, best, frame)}")
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


def _run_stage(
    kind: str,
    intent: FabricIntent,
    candidates: list[Candidate],
    *,
    scenario: ScenarioName,
    senders: int,
    speed_bps: int,
    duration_s: float,
    seeds: Sequence[int],
    objectives: Objectives,
    runner: Runner,
) -> Stage:
    trials = [Trial(c) for c in candidates]
    jobs: list[Job] = []
    owners: list[Trial] = []
    roce = intent.profile.roce.priority
    for trial in trials:
        c = trial.candidate
        variant, broken = candidate_intent(intent, c.ecn, c.dcqcn)
        if variant is None:
            trial.invalid = broken
            continue
        for seed in seeds:
            jobs.append(Job(variant, scenario, senders, speed_bps, duration_s, seed, roce))
            owners.append(trial)
    for trial, metrics in zip(owners, runner(jobs), strict=True):
        trial.runs.append(metrics)
    for trial in trials:
        if trial.invalid is None:
            trial.reasons = evaluate(trial.runs, objectives)
    best = recommend(trials)
    closest = ranked(trials)[0] if best is None and trials else None
    return Stage(kind, trials, best, closest)


def tune(
    intent: FabricIntent,
    *,
    speeds: Sequence[int] = (),
    scenario: ScenarioName = "incast",
    senders: int = DEFAULT_SENDERS,
    duration_s: float = DEFAULT_DURATION_S,
    candidates: int = DEFAULT_CANDIDATES,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    dcqcn: bool = False,
    objectives: Objectives | None = None,
    runner: Runner = serial_runner,
) -> TuneResult:
    """Tune every host-facing speed (or ``speeds``); see the module docstring."""
    objectives = objectives or Objectives()
    _check_options(scenario, duration_s, candidates, seeds)
    started = time.perf_counter()
    plan = build_plan(intent)
    present = host_speeds(build_network(intent, plan))
    _check_speeds(speeds, present)
    search = _Search(
        intent, plan, scenario, senders, duration_s, candidates, seeds, dcqcn, objectives, runner
    )
    notes: list[str] = []
    results = [
        search.speed(speed, present[speed], notes)
        for speed in sorted(set(speeds) or present, reverse=True)
    ]
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
        scenario=scenario,
        duration_s=duration_s,
        seeds=tuple(seeds),
        objectives=objectives,
        speeds=results,
        dominant_speed_bps=dominant,
        roce_queue=intent.profile.roce.priority,
        wall_s=time.perf_counter() - started,
        notes=notes,
    )


def _check_options(
    scenario: ScenarioName, duration_s: float, candidates: int, seeds: Sequence[int]
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


@dataclass(frozen=True)
class _Search:
    """One tune's settings, the same for every speed it tunes."""

    intent: FabricIntent
    plan: Plan
    scenario: ScenarioName
    senders: int
    duration_s: float
    candidates: int
    seeds: Sequence[int]
    dcqcn: bool
    objectives: Objectives
    runner: Runner

    def speed(self, speed: int, hosts: int, notes: list[str]) -> SpeedResult:
        """The DCQCN grid (when asked), then the ECN grid with its pick, at one speed."""
        ecn_now, pause, mtu, host_ports = current_ecn(
            self.plan, self.intent.profile.roce.priority, speed
        )
        senders = self._senders(speed, hosts, notes)
        stages: list[Stage] = []
        chosen_dcqcn: tuple[tuple[str, int], ...] = ()
        if self.dcqcn:
            dcands = [Candidate(0, ecn_now)] + [
                Candidate(i + 1, ecn_now, values)
                for i, values in enumerate(dcqcn_grid(speed, _nic_dcqcn(self.plan)))
            ]
            dstage = self._stage("dcqcn", dcands, senders, speed)
            stages.append(dstage)
            pick = dstage.best or dstage.closest
            chosen_dcqcn = pick.candidate.dcqcn if pick is not None else ()
        ecands = [Candidate(0, ecn_now, chosen_dcqcn)] + [
            Candidate(c.index, c.ecn, chosen_dcqcn, c.axes)
            for c in grid_candidates(speed, mtu, pause, self.candidates)
        ]
        stages.append(self._stage("ecn", ecands, senders, speed))
        result = SpeedResult(speed, senders, pause, host_ports, mtu + ETH_OVERHEAD, stages)
        result.explanation = explain(result, self.objectives, self.dcqcn)
        return result

    def _senders(self, speed: int, hosts: int, notes: list[str]) -> int:
        """As many senders as asked, or as the hosts at this speed allow (noted)."""
        limit = hosts - 1 if self.scenario == "incast" else hosts
        senders = min(self.senders, limit)
        if senders < self.senders:
            notes.append(
                f"{format_speed(speed)}: {senders} senders (only {hosts} hosts at this speed)"
            )
        return senders

    def _stage(self, kind: str, candidates: list[Candidate], senders: int, speed: int) -> Stage:
        return _run_stage(
            kind,
            self.intent,
            candidates,
            scenario=self.scenario,
            senders=senders,
            speed_bps=speed,
            duration_s=self.duration_s,
            seeds=self.seeds,
            objectives=self.objectives,
            runner=self.runner,
        )


def _nic_dcqcn(plan: Plan) -> dict[str, int]:
    nic = next((d.nic for d in plan.devices if d.nic is not None), None)
    return dict(nic.dcqcn) if nic is not None else {}

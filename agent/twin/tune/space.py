"""The searched space of one speed: ECN x DCQCN x QPs per connection, its levels and its points.

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

A space can widen an axis by one level beyond either end (:meth:`Space.widen`), within the
bounds of :data:`AXIS_BOUNDS`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from agent.intent.units import format_size, format_speed
from agent.twin.collectives import MAX_QPS as COLLECTIVE_MAX_QPS
from agent.twin.network import TwinError
from agent.twin.tune.objectives import SettingKey

DEFAULT_CANDIDATES = 20
# Queueing delay at line rate where marking starts: the DCQCN paper's 5 KB at 40 Gb/s is
# 1 us, NVIDIA's 150 KB at 100 Gb/s 12 us (agent.intent.sizing.ECN_ANCHORS); the grid spans both.
MIN_LEVELS_US = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
RATIO_LEVELS = (2, 4, 8, 16)  # max / min: the paper 40, NVIDIA 10, SONiC 2
PROBABILITY_LEVELS = (1, 5, 20, 100)  # the paper 1 %, NVIDIA 100 %
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

    def setting_key(self) -> SettingKey:
        """The setting as a lab check's row names it (ECN, then the DCQCN values it sets)."""
        ecn = self.ecn
        return (ecn.min_bytes, ecn.max_bytes, ecn.max_probability, tuple(sorted(self.dcqcn)))

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


class NothingToTune(TwinError):
    """The fabric gives tune nothing to search -- no speed with the two hosts a workload
    needs, or no room for an ECN ramp below a pause threshold: tune ran and has nothing to
    recommend (exit 1, as a search without a recommendation); the fabric is not bad input."""

    exit_code = 1


def ecn_cap(speed_bps: int, frame: int, pause_threshold: int) -> int:
    """The largest ECN max a candidate may have: two frames below the pause threshold (the
    frame that crosses max still fits under it, and with ``pause_threshold: auto`` = max + 2
    MTU the pause threshold never rises above today's), rounded down to whole kB."""
    cap = (pause_threshold - 2 * frame) // 1000 * 1000
    if cap <= 4 * frame:
        raise NothingToTune(
            f"tune {format_speed(speed_bps)}: nothing to tune: the pause threshold leaves no "
            f"room for an ECN ramp. Expected: more than 5 frames of {frame} B below it "
            f"Actual: {format_size(pause_threshold)} (with smaller frames, --payload: the RoCE "
            "payload the hosts send)"
        )
    return cap


@dataclass(frozen=True)
class EcnRoom:
    """The room an ECN ramp has at a speed: the line rate, the largest frame a port takes
    and the cap on ECN max (:func:`ecn_cap`)."""

    speed_bps: int
    frame: int
    cap: int


def ecn_room(speed_bps: int, mtu: int, pause_threshold: int) -> EcnRoom:
    """The :class:`EcnRoom` at a speed for frames of ``mtu`` under ``pause_threshold``."""
    frame = mtu + ETH_OVERHEAD
    return EcnRoom(speed_bps, frame, ecn_cap(speed_bps, frame, pause_threshold))


def ecn_setting(room: EcnRoom, min_us: float, ratio: float, probability: float) -> EcnSetting:
    """The ECN setting of one point of the axes: min = ``min_us`` of line time (at least two
    frames), max = ratio x min (at least two frames above min, at most the cap; a clamped max
    lowers min to keep a one-frame ramp)."""
    base = max(round(min_us * 1e-6 * room.speed_bps / 8), 2 * room.frame)
    high = min(max(round(base * ratio), base + 2 * room.frame), room.cap)
    low = min(base, high - room.frame)
    return EcnSetting(low, high, int(probability))


def ecn_levels(
    room: EcnRoom, candidates: int = DEFAULT_CANDIDATES
) -> tuple[list[float], list[float], list[float]]:
    """The ECN axes' levels (min us, ratio, probability) for ``candidates`` settings: the
    largest shape whose distinct settings (clamped settings collapse into one) still fit, so
    that 20 asked gives 20 when the pause threshold allows."""
    best: tuple[list[float], list[float], list[float]] = ([], [], [])
    best_count = 0
    for budget in range(candidates, 2 * candidates + 1):
        a, b, c = grid_shape(budget)
        levels = (
            [MIN_LEVELS_US[i] for i in _spread(MIN_LEVELS_US, a)],
            [float(RATIO_LEVELS[i]) for i in _spread(RATIO_LEVELS, b)],
            [float(PROBABILITY_LEVELS[i]) for i in _spread(PROBABILITY_LEVELS, c)],
        )
        count = len({ecn_setting(room, *p) for p in itertools.product(*levels)})
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
    room = ecn_room(speed_bps, mtu, pause_threshold)
    out: list[Candidate] = []
    seen: set[EcnSetting] = set()
    for point in itertools.product(*ecn_levels(room, candidates)):
        setting = ecn_setting(room, *point)
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


LimitKind = Literal["range", "bound", "floor", "cap"]
End = Literal["lowest", "highest"]


@dataclass(frozen=True)
class Limit:
    """Why an axis takes no level beyond ``value``, its end: the end of its range (``range``,
    probability's 1 and 100 %), a bound of :data:`AXIS_BOUNDS` (``bound``), min's floor of two
    frames (``floor``) or ECN max's cap below the pause threshold (``cap``); ``size_bytes`` is
    the floor's or the cap's size."""

    kind: LimitKind
    axis: str
    value: float
    speed_bps: int
    size_bytes: int = 0

    def __str__(self) -> str:
        if self.kind == "floor":
            return f"min is at its floor of two frames ({format_size(self.size_bytes)})"
        if self.kind == "cap":
            return (
                f"ECN max is at its cap {format_size(self.size_bytes)} (pause threshold - 2 frames)"
            )
        level = f"{self.axis} {axis_text(self.axis, self.value, self.speed_bps)}"
        return (
            f"{level} is the end of its range"
            if self.kind == "range"
            else f"{level} is at its bound"
        )


@dataclass(frozen=True)
class Edge:
    """A pick on the ``end`` level (``value``) of a searched axis: widened to ``widened_to``,
    or stopped there by ``limit``."""

    axis: str
    end: End
    value: float
    speed_bps: int
    widened_to: float | None = None
    limit: Limit | None = None

    def __str__(self) -> str:
        was = axis_text(self.axis, self.value, self.speed_bps)
        if self.widened_to is None:
            return f"edge: {self.axis} {was} is the {self.end} level searched and {self.limit}"
        now = axis_text(self.axis, self.widened_to, self.speed_bps)
        return f"edge: {self.axis} {was} was the {self.end} level searched: widened to {now}"


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

    @property
    def room(self) -> EcnRoom:
        return EcnRoom(self.speed_bps, self.frame, self.cap)

    def candidate(self, index: int, point: Sequence[float]) -> Candidate:
        values = dict(zip(self.names, point, strict=True))
        ecn = ecn_setting(self.room, values["min"], values["ratio"], values["probability"])
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

    def extend(self, axis: str, direction: int) -> Edge:
        """One more level beyond the lowest (-1) or highest (+1) level of ``axis``: the edge,
        widened to the new level (added to the axis) or with the limit that stops it."""
        levels = self.levels[axis]
        at = levels[0] if direction < 0 else levels[-1]
        edge = Edge(axis, "lowest" if direction < 0 else "highest", at, self.speed_bps)
        beyond = self._beyond(axis, direction, at)
        if isinstance(beyond, Limit):
            return replace(edge, limit=beyond)
        levels.insert(0 if direction < 0 else len(levels), beyond)
        return replace(edge, widened_to=beyond)

    def widen(self, axis: str, direction: int) -> tuple[float | None, str]:
        """:meth:`extend` in words: the new level, or None and why it cannot widen."""
        edge = self.extend(axis, direction)
        return edge.widened_to, "" if edge.limit is None else str(edge.limit)

    def _beyond(self, axis: str, direction: int, at: float) -> float | Limit:
        """The level after ``at`` in ``direction``, or what stops the axis there."""
        low, high, factor = AXIS_BOUNDS[axis]
        if factor == 0:
            return Limit("range", axis, at, self.speed_bps)
        value = at / factor if direction < 0 else at * factor
        if axis == "qps":
            value = float(max(1, round(value)))
        if not low <= value <= high or value == at:
            return Limit("bound", axis, at, self.speed_bps)
        if axis == "min" and direction < 0 and self._bytes(at) <= 2 * self.frame:
            return Limit("floor", axis, at, self.speed_bps, 2 * self.frame)
        if axis in ("min", "ratio") and direction > 0 and self._max_capped():
            return Limit("cap", axis, at, self.speed_bps, self.cap)
        return value

    def _bytes(self, microseconds: float) -> int:
        """Bytes of line time: what a level of min stands for."""
        return round(microseconds * 1e-6 * self.speed_bps / 8)

    def ends(self, c: Candidate) -> list[tuple[str, int]]:
        """(axis, -1 lowest / +1 highest) for each searched axis (more than one level) on
        whose end ``c`` sits."""
        assert c.axes is not None
        out = []
        for axis, (name, levels) in enumerate(self.levels.items()):
            if len(levels) < 2:
                continue
            if c.axes[axis] == levels[0]:
                out.append((name, -1))
            elif c.axes[axis] == levels[-1]:
                out.append((name, 1))
        return out

    def _max_capped(self) -> bool:
        top = ecn_setting(self.room, self.levels["min"][-1], self.levels["ratio"][-1], 100)
        return top.max_bytes >= self.cap


def axis_text(axis: str, value: float, speed_bps: int) -> str:
    """A level of ``axis`` as the explanation writes it (rpg_ai_rate in Mb/s at the speed)."""
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


def build_space(room: EcnRoom, candidates: int, dcqcn: bool, qps: Sequence[int]) -> Space:
    """The joint space of one speed (module docstring)."""
    mins, ratios, probs = ecn_levels(room, candidates)
    levels: dict[str, list[float]] = {"min": mins, "ratio": ratios, "probability": probs}
    if dcqcn:
        levels["rpg_time_reset"] = [float(v) for v in RESET_LEVELS_US]
        levels["rpg_ai_rate"] = list(AI_FRACTION_LEVELS)
    levels["qps"] = [float(q) for q in qps]
    return Space(room.speed_bps, room.frame, room.cap, levels)


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

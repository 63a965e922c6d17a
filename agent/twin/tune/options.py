"""What a tune may be asked: its defaults, its bounds, and the checks of what it was asked.

Every check raises a :class:`~agent.twin.network.TwinError` that names the option, what it
expected and what it got, before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

from agent.intent.units import format_speed
from agent.twin.collectives import ideal_time_s, nccl_tests_size
from agent.twin.network import TwinError
from agent.twin.results import MAX_DURATION_S as TWIN_MAX_DURATION_S
from agent.twin.tune.objectives import (
    COLLECTIVE_MAX_RANKS,
    COLLECTIVE_SLACK,
    COLLECTIVE_WORKLOADS,
    OBJECTIVES,
    Objectives,
    ObjectiveSpec,
)
from agent.twin.tune.runners import Runner, serial_runner
from agent.twin.tune.space import DEFAULT_CANDIDATES, MAX_QPS, QPS_LEVELS, NothingToTune
from agent.twin.tune.text import mib
from agent.twin.workloads import ScenarioName

TUNE_SCENARIOS: tuple[ScenarioName, ...] = ("incast", "all-to-all", "victim")
DEFAULT_SENDERS = 8
DEFAULT_DURATION_S = 10e-3
# The collective objective's ECN settings per speed (2 x 2 x 2): its runs cost 5-10 x an
# incast's and the space is x 3 for QPs (docs/tuning.md, measured).
COLLECTIVE_CANDIDATES = 8
DEFAULT_SEEDS = (1, 2)
MIN_CANDIDATES, MAX_CANDIDATES = 4, 120
MAX_DURATION_S = 0.1  # times candidates x seeds: a bound on one command's work


class TuneOptions(TypedDict, total=False):
    """What ``tune`` may be asked, each keyword optional (its default: :class:`TuneSettings`).

    ``speeds``: the host speeds to tune (default: every one the fabric has); ``scenario``,
    ``senders``, ``duration_s`` and ``payload_bytes`` (the RoCE payload per frame the hosts
    send, objective queue only; default the ports' RoCE MTU): the queue objective's workload;
    ``candidates``: ECN settings per speed; ``seeds``; ``dcqcn``: search the NICs' rate
    increase too; ``objectives``: the constraints; ``objective``: what is optimised;
    ``qps_levels``: QPs per connection (collective only); ``method``: auto, grid or halving;
    ``runner``: who runs the jobs (:mod:`agent.twin.tune.runners`); ``rail_sample``: let the
    shorter rungs run one rail of a job whose rails share no link (``bench/tune.py`` compares
    the search without it).
    """

    speeds: Sequence[int]
    scenario: ScenarioName
    senders: int
    duration_s: float
    candidates: int | None
    seeds: Sequence[int]
    dcqcn: bool
    objectives: Objectives
    objective: ObjectiveSpec
    qps_levels: Sequence[int]
    method: str
    runner: Runner
    payload_bytes: int | None
    rail_sample: bool


@dataclass(frozen=True)
class TuneSettings:
    """A tune's :class:`TuneOptions` with the defaults of those not given."""

    speeds: Sequence[int] = ()
    scenario: ScenarioName = "incast"
    senders: int = DEFAULT_SENDERS
    duration_s: float = DEFAULT_DURATION_S
    candidates: int | None = None  # None: COLLECTIVE_CANDIDATES or DEFAULT_CANDIDATES
    seeds: Sequence[int] = DEFAULT_SEEDS
    dcqcn: bool = True
    objectives: Objectives = field(default_factory=Objectives)
    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)
    qps_levels: Sequence[int] = QPS_LEVELS
    method: str = "auto"
    runner: Runner = serial_runner
    payload_bytes: int | None = None
    rail_sample: bool = True

    @property
    def collective(self) -> bool:
        return self.objective.name == "collective"

    @property
    def candidate_count(self) -> int:
        """ECN settings per speed: as asked, or the objective's default."""
        if self.candidates is not None:
            return self.candidates
        return COLLECTIVE_CANDIDATES if self.collective else DEFAULT_CANDIDATES

    @property
    def qps(self) -> tuple[int, ...]:
        """The QPs per connection searched: the levels asked for a collective, else 1."""
        return tuple(sorted(set(self.qps_levels))) if self.collective else (1,)


def check_options(settings: TuneSettings) -> None:
    """The options each within its bounds, before anything runs."""
    scenario, duration_s = settings.scenario, settings.duration_s
    candidates, qps_levels = settings.candidate_count, settings.qps_levels
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
    if not settings.seeds:
        raise TwinError("tune --seeds. Expected: at least 1 Actual: 0")
    if not qps_levels or any(not 1 <= q <= MAX_QPS for q in qps_levels):
        raise TwinError(
            f"tune --qps. Expected: QPs per connection 1-{MAX_QPS} "
            f"Actual: {', '.join(map(str, qps_levels)) or 'none'}"
        )
    if settings.method not in ("auto", "grid", "halving"):
        raise TwinError(f"tune --method. Expected: auto, grid or halving Actual: {settings.method}")
    if settings.payload_bytes is not None and settings.objective.name != "queue":
        raise TwinError(
            "tune --payload. Expected: with --objective queue (a collective sends the ports' "
            f"RoCE MTU) Actual: --objective {settings.objective.name}"
        )


def _check_collective(objective: ObjectiveSpec) -> None:
    """A collective tune runs, with an algorithm NCCL runs it with."""
    if objective.workload not in COLLECTIVE_WORKLOADS:
        raise TwinError(
            f"tune --workload. Expected: one of {', '.join(COLLECTIVE_WORKLOADS)} "
            f"Actual: {objective.workload}"
        )
    if objective.algorithm == "tree" and objective.workload != "allreduce":
        raise TwinError(
            f"tune --algorithm: Expected: ring or auto for {objective.workload} (NCCL's tree "
            "runs all-reduce only) Actual: tree"
        )


def check_objective(objective: ObjectiveSpec, hosts: dict[int, int]) -> None:
    """The fabric can evaluate the objective at every speed tuned."""
    if objective.name not in OBJECTIVES:
        raise TwinError(
            f"tune --objective. Expected: one of {', '.join(OBJECTIVES)} Actual: {objective.name}"
        )
    if objective.name == "queue":
        return
    _check_collective(objective)
    if objective.size_bytes <= 0:
        raise TwinError(f"tune --size. Expected: more than 0 bytes Actual: {objective.size_bytes}")
    if objective.job is not None:  # placed, its ranks checked, when the job file was read
        for job in objective.jobs:
            for part in job.parts:
                each = replace(objective, workload=part.workload, size_bytes=part.size_bytes,
                               job=job)  # fmt: skip
                for speed in hosts:
                    check_collective_time(each, speed, job.ranks)
        return
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
        check_collective_time(objective, speed, objective.ranks or min(COLLECTIVE_MAX_RANKS, count))


def check_collective_time(objective: ObjectiveSpec, speed: int, ranks: int) -> None:
    """A collective the twin can finish: COLLECTIVE_SLACK x its line-rate time within the
    twin's simulated-time bound (a 64 MiB all-reduce at a lab's 10 Mb/s needs 94 s)."""
    workload = objective.workload
    size = nccl_tests_size(workload, ranks, objective.size_bytes)  # type: ignore[arg-type]
    need = ideal_time_s(workload, ranks, size, speed)  # type: ignore[arg-type]
    if COLLECTIVE_SLACK * need > TWIN_MAX_DURATION_S:
        largest = objective.size_bytes * TWIN_MAX_DURATION_S / (COLLECTIVE_SLACK * need)
        option = "--size" if objective.job is None else f"job {objective.job.name}'s size"
        raise TwinError(
            f"tune {option}: {format_speed(speed)}. Expected: a collective the twin finishes "
            f"within {TWIN_MAX_DURATION_S:g} s ({COLLECTIVE_SLACK} x its line-rate time), "
            f"{option} at most {mib(largest)} here, or --objective queue Actual: "
            f"{mib(objective.size_bytes)} takes {need:.3g} s at line rate"
        )


MIN_HOSTS = 2  # an incast's sender and receiver, a collective's two ranks on two hosts


def tunable_speeds(present: dict[int, int], notes: list[str]) -> list[int]:
    """The speeds tune searches when none is asked for: those with at least
    :data:`MIN_HOSTS` hosts, fastest first; the others are left with a note.  None at all:
    :class:`NothingToTune`."""
    chosen = sorted((s for s, n in present.items() if n >= MIN_HOSTS), reverse=True)
    alone = sorted((s for s, n in present.items() if n < MIN_HOSTS), reverse=True)
    counts = ", ".join(f"{format_speed(s)} {present[s]} host" for s in alone)
    if not chosen:
        raise NothingToTune(
            f"tune: nothing to tune: Expected: {MIN_HOSTS} hosts or more with a NIC at one "
            f"speed (a workload's two ends; tune runs one rank per host) Actual: {counts}"
        )
    if alone:
        notes.append(f"not tuned: {counts} (a workload needs {MIN_HOSTS} hosts at a speed)")
    return chosen


def check_speeds(speeds: Sequence[int], present: dict[int, int]) -> None:
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

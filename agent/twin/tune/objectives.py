"""What a tune optimises and the hard constraints every candidate must meet.

Constraints (:class:`Objectives`), hard, at every load point and in every seed: no lossless drop
(headroom overrun or tail drop on a no-drop priority) over the whole run; paused fraction (the
most-paused switch port or NIC) at most ``max_paused_fraction``; bottleneck utilisation at least
``min_utilisation``; Jain's fairness index at least ``min_jain`` (0.9) over the goodput of the
flows whose path crosses the bottleneck port (the victim of the ``victim`` scenario does not),
all over the measurement window; and, for a scenario, the bottleneck's utilisation over the
whole run at least ``min_utilisation`` too: every collective step starts with a burst, and a
setting whose senders take half the run to recover from the onset (a slow additive increase)
idles the link at each one, which the window does not see (issue #26: tune's pick at 100 % in
the window delivered 89 % goodput in the lab, over the whole run).  With ``min_goodput`` (``tune
--min-goodput``, the lab check's floor), the receiver's goodput over the whole run in the lab
check's terms -- payload bits delivered / (its line rate x run time), so 1000-byte packets fill a
wire at 92.4 % -- at least ``min_goodput`` plus ``goodput_margin``, the twin's goodput error
measured by a lab check (:mod:`agent.twin.tune.calibration`).  A candidate failing one is
rejected with the reason and where (sender count, seed): :mod:`agent.twin.tune.judge`.

Objectives (:class:`ObjectiveSpec`), at the heaviest load point (the stated job), mean of the
seeds: ``collective`` (the default) maximises a collective's bus bandwidth
(:mod:`agent.twin.collectives`: ring all-reduce of 64 MiB, nccl-tests' ``-b 64M``, on every
GPU NIC at the speed, rail-aligned, as ``twin --workload`` runs it -- a :class:`TunedJob` the
search makes per speed; with ``--ranks N``, N ranks one per host alternating over two leaves
(more when two hold fewer), :func:`agent.twin.tune.runs.collective_hosts`), or a job file's job
(``tune --job``, :class:`TunedJob`: its own hosts, every GPU on its own NIC, its collective and
size);
``queue`` minimises the bottleneck's time-weighted p99 queue on the scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from agent.twin.placement import CollectiveSpec
from agent.twin.step import StepPart, describe_step
from agent.twin.tune.text import gbs, mib, pct
from agent.twin.verdicts import PAUSED_CEILING, UTILISATION_FLOOR, kb
from agent.twin.workloads import AlgorithmName

OBJECTIVES = ("queue", "collective")
ObjectiveName = Literal["queue", "collective"]
DEFAULT_OBJECTIVE: ObjectiveName = "collective"
MIN_JAIN = 0.9

# The collective objective's defaults: nccl-tests' all_reduce_perf -b 64M (doc/PERFORMANCE.md)
# on every GPU NIC.  COLLECTIVE_MAX_RANKS: the ranks of the one-rank-per-host fallback (hosts
# with different NIC counts at one speed) and of the size check before the job is placed.
COLLECTIVE_SIZE_BYTES = 64 * 2**20
COLLECTIVE_MAX_RANKS = 8
MAX_TUNE_RANKS = 64  # tune --ranks: a ring every candidate can afford
COLLECTIVE_SLACK = 3  # a collective's run may take this many times its line-rate time
COLLECTIVE_WORKLOADS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")
TIE_BAND = 0.05  # objective values closer than this share are not a measured difference
# The p99 queue is read from a time-weighted histogram of 1 KiB depth buckets (runs._Mark, the
# ``depth >> 10`` key): p99s closer than one bucket are not a measured difference.
QUEUE_RESOLUTION_BYTES = 1 << 10
# A setting as a lab check and tune both name it: ECN min and max bytes, max probability %,
# and the DCQCN values it sets, sorted by name.
SettingKey = tuple[int, int, int, tuple[tuple[str, int], ...]]


def full_key(key: SettingKey, base: tuple[tuple[str, int], ...]) -> SettingKey:
    """``key`` with every DCQCN value of ``base`` it does not set."""
    low, high, probability, dcqcn = key
    return (low, high, probability, tuple(sorted({**dict(base), **dict(dcqcn)}.items())))


@dataclass(frozen=True)
class Objectives:
    """The hard constraints (module docstring: Constraints); the twin's verdicts use the same
    limits (:mod:`agent.twin.verdicts`)."""

    max_paused_fraction: float = PAUSED_CEILING
    min_utilisation: float = UTILISATION_FLOOR
    min_jain: float = MIN_JAIN
    # The lab check's goodput floor (None: not judged) and the twin's measured error above it:
    # at a setting a lab check ran, that setting's own (``measured``), elsewhere the typical one.
    min_goodput: float | None = None
    goodput_margin: float = 0.0
    margin_source: str = ""  # where the margins were measured, in words
    measured: tuple[tuple[SettingKey, float], ...] = ()
    at_setting: bool = False  # goodput_margin is the setting's own (for_setting)
    # The fabric's DCQCN values: a setting's key names every one (its own over these), so a
    # lab check's row that lists them all and tune's candidate that lists its own match.
    dcqcn_base: tuple[tuple[str, int], ...] = ()

    @property
    def goodput_floor(self) -> float | None:
        """What the twin's goodput must reach: the floor plus the measured error."""
        return None if self.min_goodput is None else self.min_goodput + self.goodput_margin

    def for_setting(self, key: SettingKey) -> Objectives:
        """The constraints of one setting: its own measured error when a lab check ran it."""
        own = dict(self.measured).get(full_key(key, self.dcqcn_base))
        return self if own is None else replace(self, goodput_margin=own, at_setting=True)

    def describe(self) -> str:
        """The constraints in words, as the header and the explanation state them."""
        goodput = ""
        if self.min_goodput is not None:
            goodput = f", goodput >= {pct(self.min_goodput)}"
            if self.goodput_margin:
                goodput += f" + {pct(self.goodput_margin)} (the twin's measured error)"
            if self.measured:
                goodput += " (at a setting the lab checked: its own error)"
        return (
            f"no lossless drop, paused <= {pct(self.max_paused_fraction)}, utilisation >= "
            f"{pct(self.min_utilisation)}{goodput} and Jain >= {self.min_jain:.2f}"
        )


@dataclass(frozen=True)
class TunedJob:
    """A job of a job file (``tune --job``), or the default job of every GPU NIC at a speed
    (name ""): its name, its collective as placed on the fabric (its NICs host by host, each
    host's in rail order) and its NICs per host.
    Its load points are its first hosts (every NIC of each): a rung or a lighter load point
    runs the same job on fewer whole hosts, never on part of a host's rails."""

    name: str
    spec: CollectiveSpec
    nics_per_host: int
    # A job file's step (its collectives, one after the other; :mod:`agent.twin.step`): the
    # objective is then the step's busbw. () for a job of one collective (``spec``'s).
    step: tuple[StepPart, ...] = ()

    def __post_init__(self) -> None:
        if not self.spec.hosts or not self.spec.speed_bps:
            raise ValueError(f"job {self.name}: a tuned job is a placed one (hosts and speed)")

    @property
    def placed(self) -> tuple[str, ...]:
        """Its NICs, host by host, each host's in rail order."""
        return self.spec.hosts or ()

    @property
    def speed_bps(self) -> int:
        return self.spec.speed_bps or 0  # set: __post_init__

    @property
    def hosts(self) -> int:
        return len(self.placed) // self.nics_per_host

    @property
    def ranks(self) -> int:
        return len(self.placed)

    @property
    def parts(self) -> tuple[StepPart, ...]:
        """Its step's collectives; its one collective without a step."""
        one = StepPart(self.spec.workload, self.spec.size_bytes, 1, self.spec.channels)
        return self.step or (one,)

    def what(self) -> str:
        """``allreduce of 64 MiB``, or ``step allreduce 64 MiB x1 + alltoall 16 MiB x4``."""
        tree = ", all-reduce by tree" if self.spec.algorithm == "tree" else ""
        if self.step:
            return f"step {describe_step(self.step)}{tree}"
        return f"{self.spec.workload} of {mib(self.spec.size_bytes)}{tree}"

    def collective(self, ranks: int, qps: int, size_bytes: int) -> CollectiveSpec:
        """The job on its first ``ranks`` NICs (whole hosts), with ``qps`` QPs per connection
        and ``size_bytes`` (a rung's fraction of the job's size). At the job file's own QPs its
        own split; at a searched level a message is split across QPs above 1, as for the
        default job (one QP carries a connection's one slice in flight otherwise)."""
        own = qps == self.spec.qps_per_connection
        return replace(
            self.spec,
            ranks=ranks,
            hosts=self.placed[:ranks],
            size_bytes=size_bytes,
            qps_per_connection=qps,
            split_data_on_qps=self.spec.split_data_on_qps if own else qps > 1,
        )


@dataclass(frozen=True)
class ObjectiveSpec:
    """What a candidate is run on and what is optimised (module docstring: Objectives)."""

    name: ObjectiveName = "queue"
    workload: str = "allreduce"  # collective only
    ranks: int | None = None  # collective only; None: every GPU NIC at the speed (a TunedJob)
    size_bytes: int = COLLECTIVE_SIZE_BYTES
    job: TunedJob | None = None  # collective only: a job file's job (its own workload and size)
    # The job file's other jobs, run beside ``job``: the objective is then the slowest job's
    # share of its NICs' bound (max-min: no job is given up for another's gain).
    beside: tuple[TunedJob, ...] = ()
    # NCCL's algorithm for the all-reduce without a job file (``auto`` is resolved once, at
    # ``size_bytes``, before the search); a job file's jobs carry their own.
    algorithm: AlgorithmName = "ring"

    @property
    def jobs(self) -> tuple[TunedJob, ...]:
        """Every job of the job file, in file order (none without one)."""
        return (self.job, *self.beside) if self.job is not None else ()

    @property
    def maximise(self) -> bool:
        return self.name == "collective"

    @property
    def metric(self) -> str:
        """The RunMetrics field optimised."""
        if self.beside:
            return "bound_fraction"
        return "busbw_Bps" if self.name == "collective" else "queue_p99_bytes"

    def describe(self) -> str:
        if self.beside:
            names = ", ".join(j.name for j in self.jobs)
            return f"the highest share of its NICs' bound for the slowest of jobs {names}"
        if self.name == "collective":
            job = f" of job {self.job.name}" if self.job is not None and self.job.name else ""
            return f"the highest {self.busbw_of} busbw{job}"
        return "the lowest p99 queue"

    @property
    def busbw_of(self) -> str:
        """Whose busbw is optimised: the collective's, or a job file's step's."""
        return "step" if self.job is not None and self.job.step else self.workload

    def value_text(self, value: float) -> str:
        """The metric's ``value`` (busbw positive) as the explanation says it."""
        if self.beside:
            return f"slowest job at {value:.1%} of its bound"
        if self.name == "collective":
            return f"{'step ' if self.busbw_of == 'step' else ''}busbw {gbs(value)}"
        return f"p99 {kb(value)}"


QUEUE = ObjectiveSpec()
"""The queue objective: the default of the judging functions that take one."""

"""A training step of several collectives: a job file's ``step`` (``twin --job``, ``tune --job``).

A training step calls several collectives on the same GPUs: a data-parallel job an all-reduce
of its gradients, a sharded one (FSDP / ZeRO-3) an all-gather of the parameters and a
reduce-scatter of the gradients, a mixture-of-experts layer an all-to-all before and after its
experts, a pipeline a send/recv at each stage boundary.  The user states each with its size and
how many times one step calls it (``per_step``); the twin runs each on the job's GPUs, one after
the other, and reports:

* each collective's own report (busbw, drops, pauses, queues, verdict), as ``--workload`` would;
* the step's collective time, ``T = sum(per_step x time)``, and each collective's share of it
  (``per_step x time / T``): the shares of the step, from the twin's times at this setting
  rather than from a profile taken on today's fabric (a profile's shares change with the
  setting; counts do not);
* the step's busbw, ``sum(share x busbw)``: the bus bytes the step moves over its collective
  time, which ``tune`` maximises for such a job -- the same as minimising ``T``.

Not modelled: collectives of one step overlapping one another (NCCL runs the calls of one
communicator in stream order; calls on two communicators -- data parallel and expert parallel
-- may overlap on the GPU and on the NICs, which the twin does not run), and compute between
them.  Several jobs side by side each run one collective (the twin does not model how two
jobs' steps interleave): a job with a ``step`` runs alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Unpack

from agent.twin.collective_report import CollectiveReport
from agent.twin.collectives import CollectiveOptions, run_collectives
from agent.twin.network import TwinNetwork
from agent.twin.placement import CollectiveSpec
from agent.twin.workloads import AlgorithmName, CollectiveName

MAX_STEP_COLLECTIVES = 8
MAX_PER_STEP = 100_000


@dataclass(frozen=True)
class StepPart:
    """One collective of a step: what it is, its size, its channels, its calls per step."""

    workload: CollectiveName
    size_bytes: int
    per_step: int = 1
    channels: int = 1
    # Its own algorithm (tune resolves ``auto`` at each collective's stated size); None: the
    # job's, for an all-reduce.
    algorithm: AlgorithmName | None = None

    def of(self, job: CollectiveSpec, fraction: float = 1.0) -> CollectiveSpec:
        """This collective on ``job``'s GPUs with the job's QPs, PXN and (for an all-reduce)
        algorithm; ``fraction`` of its size (a tune rung's)."""
        return replace(
            job,
            workload=self.workload,
            size_bytes=max(1, round(self.size_bytes * fraction)),
            channels=self.channels,
            algorithm=self.algorithm or (job.algorithm if self.workload == "allreduce" else "ring"),
        )

    def describe(self) -> str:
        """``alltoall 16 MiB x4``."""
        return f"{self.workload} {self.size_bytes / 2**20:g} MiB x{self.per_step}"


def describe_step(parts: tuple[StepPart, ...]) -> str:
    """``allreduce 64 MiB x1 + alltoall 16 MiB x4``."""
    return " + ".join(part.describe() for part in parts)


@dataclass(frozen=True)
class StepReport:
    """A step's collectives, each with its report, and what they add up to."""

    job: str
    parts: tuple[StepPart, ...]
    reports: tuple[CollectiveReport, ...]

    @property
    def completed(self) -> bool:
        return all(r.completed for r in self.reports)

    @property
    def passed(self) -> bool:
        """The lossless promise held in every collective of the step."""
        return all(r.passed for r in self.reports)

    @property
    def time_s(self) -> float:
        """The step's collective time; a lower bound when one did not complete."""
        return sum(p.per_step * r.time_s for p, r in zip(self.parts, self.reports, strict=True))

    @property
    def shares(self) -> tuple[float, ...]:
        """Each collective's share of the step's collective time."""
        total = self.time_s
        if total <= 0:
            return tuple(0.0 for _ in self.parts)
        return tuple(
            p.per_step * r.time_s / total for p, r in zip(self.parts, self.reports, strict=True)
        )

    @property
    def busbw_Bps(self) -> float:
        """The step's bus bytes over its collective time; 0 when one did not complete (its
        bytes and time are not the step's)."""
        if not self.completed:
            return 0.0
        return sum(s * r.busbw_Bps for s, r in zip(self.shares, self.reports, strict=True))

    @property
    def line_rate_fraction(self) -> float:
        """Each collective's busbw over its own bound (nccl-tests' busbw at the NICs' line
        rate; an all-to-all through PXN's differs from a ring's), weighted by its share of the
        step; 0 when one did not complete."""
        if not self.completed:
            return 0.0
        return sum(s * r.line_rate_fraction for s, r in zip(self.shares, self.reports, strict=True))

    def to_json(self) -> dict[str, Any]:
        collectives = []
        for part, report, share in zip(self.parts, self.reports, self.shares, strict=True):
            data = report.to_json()
            data.update(
                per_step=part.per_step,
                time_per_step_s=part.per_step * report.time_s,
                share_of_step=share,
            )
            collectives.append(data)
        return {
            "job": self.job,
            "step": describe_step(self.parts),
            "completed": self.completed,
            "passed": self.passed,
            "time_s": self.time_s,
            "busbw_Bps": self.busbw_Bps,
            "busbw_GBps": self.busbw_Bps / 1e9,
            "line_rate_fraction": self.line_rate_fraction,
            "collectives": collectives,
        }


def run_step(
    network: TwinNetwork,
    job: CollectiveSpec,
    parts: tuple[StepPart, ...],
    name: str = "",
    fraction: float = 1.0,
    **options: Unpack[CollectiveOptions],
) -> StepReport:
    """Each collective of the step on ``job``'s GPUs, one run each, one after the other (the
    same seed and options for each)."""
    reports = tuple(
        run_collectives(network, [part.of(job, fraction)], [name], **options)[0] for part in parts
    )
    return StepReport(name, parts, reports)

"""Who runs a batch of jobs: this process, a local process pool, or an existing Dask cluster.

A runner takes a batch of :class:`~agent.twin.tune.runs.Job` and yields each job's metrics in
job order, as each is done (a caller can show progress as it consumes them); the search cannot
tell one runner from another, and each gives the same results.

:data:`RUNNERS` names them: each entry is a factory that takes :class:`RunnerOptions` and gives
a context manager around its runner (a Dask connection is closed when the search is done; the
local runners hold nothing), imported only when that name is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from agent.twin.cluster import DEFAULT_TIMEOUT_S as CLUSTER_TIMEOUT_S
from agent.twin.cluster import DaskMap
from agent.twin.tune.results import RunMetrics
from agent.twin.tune.runs import Job, run_job
from common.registry import Entry, Registry

# A runner yields each job's metrics in job order, as each is done (a caller can show
# progress as it consumes them).
Runner = Callable[[list[Job]], Iterator[RunMetrics]]


def serial_runner(jobs: list[Job]) -> Iterator[RunMetrics]:
    """The jobs one after the other, in this process."""
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


@dataclass(frozen=True)
class RunnerOptions:
    """What the runner factories of :data:`RUNNERS` read: ``jobs`` local processes (pool),
    the cluster's scheduler ``address`` and its connection ``timeout_s`` (dask), and whether
    the cluster client's own logs are kept ``quiet``."""

    jobs: int = 1
    address: str = ""
    timeout_s: float = CLUSTER_TIMEOUT_S
    quiet: bool = True


RunnerFactory = Callable[[RunnerOptions], AbstractContextManager[Runner]]


def open_serial(options: RunnerOptions) -> AbstractContextManager[Runner]:
    """The jobs one after the other in this process."""
    return nullcontext(serial_runner)


def open_pool(options: RunnerOptions) -> AbstractContextManager[Runner]:
    """The jobs in ``options.jobs`` local processes."""
    return nullcontext(pool_runner(options.jobs))


def open_dask(options: RunnerOptions) -> AbstractContextManager[Runner]:
    """The jobs on the Dask cluster at ``options.address``, connected now."""
    return dask_runner(options.address, timeout_s=options.timeout_s, quiet=options.quiet)


RUNNERS: Registry[RunnerFactory] = Registry(
    "runner",
    {
        "serial": Entry("agent.twin.tune.runners:open_serial", "one job after the other here"),
        "pool": Entry("agent.twin.tune.runners:open_pool", "local processes (--jobs)"),
        "dask": Entry(
            "agent.twin.tune.runners:open_dask", "an existing Dask cluster's workers (--executor)"
        ),
    },
)

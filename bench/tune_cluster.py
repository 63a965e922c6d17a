"""Bench: ``roce-agent tune`` evaluations per second in one process (``--jobs 1``) and on a Dask
cluster of K workers (``--executor``, issue #31 part 3), measured in one run.

The search is fixed and small: the 40G star of 5 hosts with the DCQCN paper's thresholds
(:func:`agent.twin.network.star_fabric_yaml`, test_twin_tune.py's), objective queue, the 8:1
incast scaled to 4 senders (load points 4, 3, 2), 5 ms per run, 20 ECN candidates, DCQCN kept,
seeds 1 and 2: a full grid of about 130 evaluations (one evaluation = one ``run_job``: plan,
rule checks, build, simulate, judge). The cluster is a ``LocalCluster`` on this machine:
K worker processes of one thread each, the scheduler and the client in this process, all on
127.0.0.1. Its time counts from the connection (the ``dask`` runner: connect, version check) to the
last result; starting the cluster does not count (a real one is already running).

It prints both rates, their ratio, a check that both searches gave the same numbers, and an
*extrapolation* (not a measurement) to K workers on hosts of their own. This machine has 2 cores
that other jobs share: the K = 2 workers compete with the scheduler, the client and whatever
else runs. So the bench also measures, just before the cluster's run, how much K CPU-bound
processes get done here at the same time compared with one (the parallelism the machine gives
at that moment), and states Dask's efficiency against that -- its own cost (scheduling,
sending each job's fabric, answers one by one) -- rather than against an ideal K.

Usage: ``.venv/bin/python bench/tune_cluster.py [--workers K]`` (K: 1..8, default 2).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from distributed import LocalCluster

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.twin.network import PAPER_DCQCN, star_fabric_yaml
from agent.twin.tune.objectives import ObjectiveSpec
from agent.twin.tune.results import TuneResult
from agent.twin.tune.runners import RUNNERS, Runner, RunnerOptions
from agent.twin.tune.search import tune

LOOPBACK = "127.0.0.1"
SEARCH: dict[str, Any] = {
    "senders": 4,
    "duration_s": 5e-3,
    "candidates": 20,
    "seeds": (1, 2),
    "dcqcn": False,
}
SIZE = "40G star, incast of 4/3/2 senders, 5 ms runs"
TEN_MINUTES_S = 600.0
BURN_LOOPS = 10_000_000  # about half a second of one core in CPython
EXTRAPOLATE_TO = (8, 32)


def _intent(folder: Path) -> FabricIntent:
    path = folder / "star.yml"
    path.write_text(star_fabric_yaml(5, "40G", profile="dcqcn-paper", dcqcn=PAPER_DCQCN))
    return load_fabric(path).intent


def _search(intent: FabricIntent, runner: Runner) -> tuple[TuneResult, float]:
    # objective queue: the incast; a collective's runs cost 5-10 x more (docs/tuning.md)
    started = time.perf_counter()
    result = tune(intent, objective=ObjectiveSpec("queue"), runner=runner, **SEARCH)
    return result, time.perf_counter() - started


def _burn(loops: int) -> int:
    total = 0
    for i in range(loops):
        total += i
    return total


def _parallelism(workers: int) -> float:
    """How many times one process's throughput ``workers`` CPU-bound processes get here now."""
    started = time.perf_counter()
    _burn(BURN_LOOPS)
    one_s = time.perf_counter() - started
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_burn, [1] * workers))  # the processes started, not timed
        started = time.perf_counter()
        list(pool.map(_burn, [BURN_LOOPS] * workers))
        all_s = time.perf_counter() - started
    return workers * one_s / all_s


def _numbers(result: TuneResult) -> list[Any]:
    """Every trial's measured numbers, wall clocks left out."""
    trials = [t for s in result.speeds for st in s.stages for t in st.trials]
    return [
        (t.candidate.index, [{k: v for k, v in asdict(r).items() if k != "wall_s"} for r in t.runs])
        for t in trials
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, choices=range(1, 9), default=2, metavar="K")
    workers = parser.parse_args().workers
    with tempfile.TemporaryDirectory() as folder:
        intent = _intent(Path(folder))
    with RUNNERS.load("serial")(RunnerOptions()) as runner:
        local, local_s = _search(intent, runner)
    local_rate = local.runs / local_s
    print(f"local, --jobs 1: {local.runs} evaluations in {local_s:.1f} s = {local_rate:.1f}/s")

    parallel = _parallelism(workers)
    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host=LOOPBACK,
        scheduler_port=0, dashboard_address=f"{LOOPBACK}:0",
        worker_dashboard_address=f"{LOOPBACK}:0",
    )  # fmt: skip
    try:
        up_s = time.perf_counter() - started
        began = time.perf_counter()
        with RUNNERS.load("dask")(RunnerOptions(address=cluster.scheduler_address)) as runner:
            remote, _ = _search(intent, runner)
        remote_s = time.perf_counter() - began
    finally:
        cluster.close()
    remote_rate = remote.runs / remote_s
    print(
        f"LocalCluster, {workers} workers x 1 thread: {remote.runs} evaluations in "
        f"{remote_s:.1f} s = {remote_rate:.1f}/s (connect and version check included; the "
        f"cluster took {up_s:.1f} s to start, not counted)"
    )
    same = _numbers(local) == _numbers(remote)
    print(f"same results (every number but the wall clock): {'yes' if same else 'NO'}")
    ratio = remote_rate / local_rate
    kept = ratio / parallel
    efficiency = min(kept, 1.0)  # above 1: the noise of a shared machine, not a gain
    print(f"ratio cluster / local: {ratio:.2f} with {workers} workers")
    print(
        f"this machine just before: {workers} CPU-bound processes got {parallel:.2f} x one's "
        f"work done (2 cores, shared with other jobs); against that, Dask kept {kept:.0%}"
        + (
            " (over 100 %: the machine's load changed between the two measurements)"
            if kept > 1
            else " (the rest is its scheduling and transfer cost)"
        )
    )
    per_ten = local_rate * TEN_MINUTES_S
    print(
        f"extrapolated, not measured: a single machine (one process, as here) does "
        f"~{per_ten:,.0f} evaluations of this size ({SIZE}) in 10 minutes; K workers on "
        f"hosts of their own ~K x {local_rate:.1f}/s x {efficiency:.0%}: "
        + "; ".join(f"K = {k}: ~{k * per_ten * efficiency:,.0f}" for k in EXTRAPOLATE_TO)
        + " in 10 minutes (assumes hosts as fast as this one and a scheduler that keeps up)"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Bench: ``roce-agent tune`` on ``playbooks/fabrics/pod-400g.yml`` (issue #26 item 7: goal
``tune --objective collective --jobs 2`` under 5 minutes on this machine).

Rows, each timed end to end (plan + rule checks + build + simulate + judge), with the method,
the runs per rung, the engine's own time (summed over the workers) and the rest:

1. ``--objective queue --jobs 2``: the joint ECN x DCQCN search on the 8:1 incast (5 ms runs,
   seeds 1, 2, load points 8, 5, 2);
2. ``--objective collective --ranks 8 --jobs 2``: ring all-reduce of 64 MiB over 8 ranks
   alternating over two leaves, ECN x DCQCN x QPs per connection (the default before issue #43);
3. (``--pod``) the default job on ``playbooks/fabrics/pod-32-leaf.yml``: every GPU NIC (32 hosts
   x 8 NICs, one ring per rail), ``--jobs 2``; issue #43's goal: at most 10 minutes;
4. (``--rail-sample``) the rail sample against the search without it, in the same run: a
   32-GPU job on pod-32-leaf (hosts gpu1, gpu2, gpu9, gpu10: two leaf groups, every rail
   crossing the spines), searched with its shorter rungs on rail 0 alone and on every rail:
   the wall times, their ratio and whether the decisions are the same;
5. (``--profile``) the collective search's first rung alone in one process under cProfile: the
   top functions by own time -- where the time goes.

Usage: ``.venv/bin/python bench/tune.py [--queue-only | --collective-only] [--pod]
[--rail-sample] [--profile]`` (``--pod`` or ``--rail-sample`` alone skip rows 1 and 2).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from dataclasses import replace
from pathlib import Path

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.intent.plan import build_plan
from agent.twin.network import build_network
from agent.twin.placement import CollectiveSpec, place_ranks
from agent.twin.tune.fabric import candidate_intent, current_ecn
from agent.twin.tune.objectives import ObjectiveSpec, TunedJob
from agent.twin.tune.results import TuneResult
from agent.twin.tune.runners import pool_runner
from agent.twin.tune.runs import Job, run_job
from agent.twin.tune.search import tune
from agent.twin.tune.space import build_space, ecn_room, space_candidates

ROOT = Path(__file__).resolve().parents[1]
POD = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
POD_32_LEAF = ROOT / "playbooks" / "fabrics" / "pod-32-leaf.yml"
SPEED = 400_000_000_000
POD_GOAL_S = 600.0  # issue #43: the default job on pod-32-leaf, --jobs 2
SAMPLE_HOSTS = ("gpu1", "gpu2", "gpu9", "gpu10")


def _row(name: str, result: TuneResult, wall: float) -> None:
    runs = [r for s in result.speeds for t in s.ecn.trials for r in t.runs]
    for speed in result.speeds:
        rungs = " -> ".join(
            f"{r.candidates} x {len(r.points)} at {r.fidelity} = {r.runs}" for r in speed.rungs
        )
        print(f"{name}: {speed.method}, {speed.runs} runs ({rungs})", flush=True)
    engine = sum(r.wall_s for r in runs)
    print(
        f"  wall {wall:6.1f} s; engine time of the kept runs {engine:6.1f} s (2 workers, the "
        f"runs of dropped rungs not kept); {sum(r.events for r in runs) / 1e6:.2f} M events",
        flush=True,
    )
    for speed in result.speeds:
        print(f"  {speed.summary}", flush=True)
        print(f"  {speed.explanation}", flush=True)


def profile_first_rung(count: int = 12) -> None:
    """The collective's first rung (a sixteenth of 64 MiB, 8 ranks), ``count`` candidates in
    this process under cProfile."""
    intent = load_fabric(POD).intent
    plan = build_plan(intent)
    _, pause, mtu, _ = current_ecn(plan, intent.profile.roce.priority, SPEED)
    space = build_space(ecn_room(SPEED, mtu, pause), 8, True, (1, 2, 4))
    cands = space_candidates(space, space.points(), set(), 1)[:count]
    objective = ObjectiveSpec("collective", size_bytes=(64 << 20) // 16)
    jobs = []
    for c in cands:
        variant, _ = candidate_intent(intent, c.ecn, c.dcqcn)
        if variant is not None:
            jobs.append(Job(variant, "incast", 8, SPEED, 5e-3, 1, 3, objective, c.qps))
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for job in jobs:
        run_job(job)
    profiler.disable()
    wall = time.perf_counter() - started
    print(f"profile: {len(jobs)} first-rung runs in {wall:.1f} s ({wall / len(jobs):.2f} s each)")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
    print(out.getvalue())


def pod_row() -> None:
    """Row 3: the default job on pod-32-leaf, timed end to end against the goal."""
    intent = load_fabric(POD_32_LEAF).intent
    started = time.perf_counter()
    result = tune(intent, objective=ObjectiveSpec("collective"), runner=pool_runner(2))
    wall = time.perf_counter() - started
    _row("pod-32-leaf, the default job, --jobs 2", result, wall)
    verdict = "yes" if wall <= POD_GOAL_S else "NO"
    print(f"  goal: at most {POD_GOAL_S:.0f} s: {verdict}", flush=True)


def _sample_job(intent: FabricIntent) -> TunedJob:
    spec = CollectiveSpec("allreduce", 0, 64 << 20, hosts=SAMPLE_HOSTS)
    placement = place_ranks(build_network(intent), spec)
    placed = replace(spec, ranks=len(placement.endpoints), hosts=tuple(placement.endpoints),
                     speed_bps=placement.speed_bps)  # fmt: skip
    return TunedJob("sample", placed, placement.rails)


def rail_sample_row() -> None:
    """Row 4: the same search with and without the rail sample, one after the other."""
    intent = load_fabric(POD_32_LEAF).intent
    job = _sample_job(intent)
    objective = ObjectiveSpec("collective", "allreduce", job.ranks, job.spec.size_bytes, job)
    walls, picks = [], []
    for sample in (True, False):
        started = time.perf_counter()
        result = tune(intent, objective=objective, runner=pool_runner(2), rail_sample=sample)
        walls.append(time.perf_counter() - started)
        _row(f"{job.ranks}-GPU job, rail sample {'on' if sample else 'off'}", result, walls[-1])
        (speed,) = result.speeds
        trial = speed.decision.trial
        picks.append((speed.decision.kind, trial.candidate.label() if trial else None))
    same = "the same decision" if picks[0] == picks[1] else f"DIFFERENT decisions: {picks}"
    print(f"  with the sample / without: {walls[0] / walls[1]:.2f} of the wall time; {same}")


def main() -> None:
    if "--pod" in sys.argv:
        pod_row()
    if "--rail-sample" in sys.argv:
        rail_sample_row()
    asked = set(sys.argv)
    if {"--pod", "--rail-sample"} & asked and not {"--queue-only", "--collective-only"} & asked:
        return
    intent = load_fabric(POD).intent
    cases: list[tuple[str, ObjectiveSpec]] = []
    if "--collective-only" not in sys.argv:
        cases.append(("--objective queue --jobs 2", ObjectiveSpec("queue")))
    if "--queue-only" not in sys.argv:
        cases.append(
            ("--objective collective --ranks 8 --jobs 2", ObjectiveSpec("collective", ranks=8))
        )
    for name, objective in cases:
        started = time.perf_counter()
        result = tune(intent, duration_s=5e-3, objective=objective, runner=pool_runner(2))
        _row(name, result, time.perf_counter() - started)
    if "--profile" in sys.argv:
        profile_first_rung()


if __name__ == "__main__":
    main()

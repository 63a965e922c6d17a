"""Bench: ``roce-agent tune`` over a 20-candidate ECN grid for every host speed of
``playbooks/fabrics/pod-400g.yml`` (issue #13 item 6: goal under 2 minutes on this machine).

Runs, each timed end to end (plan + build + simulate + judge), with the events simulated and
the engine's own time, so the rest (planning, rule checks, building the network, the report,
the process pool) shows as the difference:

1. the fabric as shipped (NVIDIA thresholds, mlx5 default DCQCN), serial;
2. ``--dcqcn`` (4 DCQCN candidates, then the 20-candidate ECN grid), serial and with 2
   processes;
3. stability: ``--dcqcn`` with seeds 3, 4 instead of 1, 2, and with 10 ms instead of 5 ms
   per run (the convergence horizon): is the recommendation the same?

Usage: ``.venv/bin/python bench/tune.py [--quick]`` (``--quick``: runs 1 and 2 only).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agent.intent.loader import load_fabric
from agent.twin.search import TuneResult, pool_runner, serial_runner, tune

ROOT = Path(__file__).resolve().parents[1]
POD = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"


def _summary(name: str, result: TuneResult, wall: float) -> dict[str, object]:
    runs = [r for s in result.speeds for st in s.stages for t in st.trials for r in t.runs]
    candidates = sum(len(st.trials) for s in result.speeds for st in s.stages)
    engine = sum(r.wall_s for r in runs)
    events = sum(r.events for r in runs)
    override = result.override()
    print(
        f"{name:<34} {wall:6.1f} s  {candidates:3d} candidates x {len(result.seeds)} seeds = "
        f"{len(runs):3d} runs, {events / 1e6:5.2f} M events, engine {engine:5.1f} s "
        f"({events / engine / 1e3 if engine else 0:.0f} k ev/s), other {wall - engine:5.1f} s"
        f"{' (pool: engine time summed over 2 workers)' if 'jobs 2' in name else ''}",
        flush=True,
    )
    for speed in result.speeds:
        print(f"  {speed.explanation}", flush=True)
    return {"override": override}


def main() -> None:
    quick = "--quick" in sys.argv
    intent = load_fabric(POD).intent
    cases: list[tuple[str, dict[str, object]]] = [
        ("as shipped, serial", {}),
        ("--dcqcn, serial", {"dcqcn": True}),
        ("--dcqcn, jobs 2", {"dcqcn": True, "runner": pool_runner(2)}),
    ]
    if not quick:
        cases += [
            (
                "--dcqcn, jobs 2, seeds 3 4",
                {"dcqcn": True, "runner": pool_runner(2), "seeds": (3, 4)},
            ),
            (
                "--dcqcn, jobs 2, 10 ms",
                {"dcqcn": True, "runner": pool_runner(2), "duration_s": 10e-3},
            ),
        ]
    overrides: dict[str, object] = {}
    for name, kwargs in cases:
        kwargs.setdefault("runner", serial_runner)
        kwargs.setdefault("duration_s", 5e-3)
        started = time.perf_counter()
        result = tune(intent, candidates=20, **kwargs)  # type: ignore[arg-type]
        wall = time.perf_counter() - started
        overrides[name] = _summary(name, result, wall)["override"]
    if not quick:
        base = overrides["--dcqcn, jobs 2"]
        for name in ("--dcqcn, serial", "--dcqcn, jobs 2, seeds 3 4", "--dcqcn, jobs 2, 10 ms"):
            same = "same" if overrides[name] == base else f"DIFFERENT: {overrides[name]}"
            print(f"recommendation of '{name}' vs '--dcqcn, jobs 2': {same}")


if __name__ == "__main__":
    main()

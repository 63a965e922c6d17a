"""The twin against the lab (issue #13): does the twin, run at what the lab stands for,
predict the lab's measured incast?

Brings up ``containerlab/roce-incast.clab.yml`` (one leaf, five hosts, 10 Mb/s ports standing
for 1 Gb/s: time_dilation 100), pushes the fabric's lossless profile with ``roce-agent apply``,
then for 2:1 and 4:1 incast onto h5, each with the hosts' DCQCN on and off (PFC alone), runs
the lab incast ``--repeats`` times and the twin once per seed (1..repeats), and prints the
paused, CE and goodput fractions side by side (medians) and whether they agree
(:mod:`agent.ops.twin_vs_lab`: within 15 %, or both under 2 %). Tears the lab down at the end.

    python bench/twin_vs_lab.py [--repeats 3] [--duration 4]    (root: the lab needs netns)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.ops.twin_vs_lab import LabIncast, compare, measure_lab, median, predict_lab
from agent.twin.network import TwinNetwork, build_network
from common.signals import unwind_on_termination

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "containerlab" / "roce-incast.clab.yml"
CASES = [
    ("2:1", ["h1", "h2"], True),
    ("4:1", ["h1", "h2", "h3", "h4"], True),
    ("2:1 PFC only", ["h1", "h2"], False),
    ("4:1 PFC only", ["h1", "h2", "h3", "h4"], False),
]
RECEIVER = "h5"


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, check=False
    )


def _case(
    intent: FabricIntent,
    network: TwinNetwork,
    case: tuple[str, list[str], bool],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One case's row: the lab and the twin, ``args.repeats`` runs each, and their agreement."""
    label, senders, dcqcn = case
    lab_runs, twin_runs, twin_wall = [], [], 0.0
    incast = LabIncast(RECEIVER, senders, args.duration, dcqcn=dcqcn)
    for seed in range(1, args.repeats + 1):
        lab_runs.append(measure_lab(intent, incast)[0])
        started = time.perf_counter()
        twin_runs.append(predict_lab(intent, incast, seed=seed, network=network)[0])
        twin_wall += time.perf_counter() - started
    lab, twin = median(lab_runs), median(twin_runs)
    return {
        "case": label,
        "lab_runs": [r.as_dict() for r in lab_runs],
        "twin_runs": [r.as_dict() for r in twin_runs],
        "agreement": [a.as_dict() for a in compare(lab, twin)],
        "twin_wall_s": round(twin_wall / args.repeats, 3),
    }


def _table(rows: list[dict[str, Any]], args: argparse.Namespace) -> bool:
    """Print the rows as a table; True when every measure agrees."""
    print(
        f"\nlab vs twin, {args.repeats} runs each (median), {args.duration:g} s of lab time "
        f"= {args.duration * 10:g} ms at 1 Gb/s, incast onto {RECEIVER}"
    )
    print("| case | measure | lab (runs) | lab median | twin median | agrees (±15 %) |")
    print("|---|---|---|---|---|---|")
    agreed = total = 0
    for row in rows:
        for i, agreement in enumerate(row["agreement"]):
            measure = agreement["measure"]
            runs = ", ".join(f"{r[measure]:.3f}" for r in row["lab_runs"])
            total += 1
            agreed += agreement["agrees"]
            print(
                f"| {row['case'] if i == 0 else ''} | {measure} | {runs} | {agreement['lab']:.3f} "
                f"| {agreement['twin']:.3f} | {'yes' if agreement['agrees'] else 'NO'} |"
            )
    print(f"\n{agreed} of {total} measures agree; twin wall time per run: "
          + ", ".join(f"{r['case']} {r['twin_wall_s']:.2f} s" for r in rows))  # fmt: skip
    return agreed == total


def main() -> int:
    unwind_on_termination()  # the lab is torn down even when the run is stopped
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0, help="lab seconds per run")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    os.environ.setdefault("ROCE_LAB_PASSWORD", "admin")
    name = f"tl{os.getpid()}"
    state = Path(tempfile.mkdtemp(prefix="twin-vs-lab-")) / name
    up = _agent("lab", "up", str(TOPOLOGY), "--name", name, "--state-dir", str(state))
    if up.returncode != 0:
        print(up.stdout, up.stderr, file=sys.stderr)
        return 2
    try:
        fabric = state / "fabric.yml"
        applied = _agent("apply", str(fabric), "--yes", "--state-dir", str(state / "agent"))
        if applied.returncode != 0:
            print(applied.stdout, applied.stderr, file=sys.stderr)
            return 2
        intent = load_fabric(fabric).intent
        network = build_network(intent)
        rows = [_case(intent, network, case, args) for case in CASES]
    finally:
        _agent("lab", "down", "--lab", name, "--state-dir", str(state))
        shutil.rmtree(state.parent, ignore_errors=True)  # the fabric file, the audit log
    agreed = _table(rows, args)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if agreed else 1


if __name__ == "__main__":
    sys.exit(main())

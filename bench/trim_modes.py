"""Lossless or trimming? ``twin --compare-modes`` on jobs and fabrics the comparison was not
built on, over several seeds (issue #47: "docs/trimming.md says when each mode wins on the
measured jobs").

Each case is one ``roce-agent twin FABRIC ... --compare-modes -o json`` process: lossless on
its per-flow ECMP paths, lossless on sprayed paths (the control) and lossy-trim on sprayed
paths, each job's busbw (or a scenario's goodput), p99 message completion, PFC frames, trims
and retransmissions, and the recommendation with its reason.  The table prints one line per
case and seed; the summary counts, per case, which mode the seeds recommend, and the spread of
each row's busbw over the seeds (the noise the recommendation's 2 % tie rule stands for).

With ``--tune``, also ``tune --modes lossless,lossy-trim`` on three jobs (one seed, four ECN
settings on the grid): each mode's decided setting, its row and the recommendation.

    python bench/trim_modes.py [--seeds 3] [--cases NAME,...] [--tune] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FABRICS = REPO / "playbooks" / "fabrics"
JOBS = REPO / "playbooks" / "jobs"


@dataclass(frozen=True)
class Case:
    name: str
    fabric: Path
    args: tuple[str, ...]


CASES: tuple[Case, ...] = (
    Case("incast-16:1-400g", FABRICS / "pod-400g.yml",
         ("--scenario", "incast", "--senders", "16", "--speed", "400G", "--duration", "2ms")),
    Case("allreduce-8-pod400g", FABRICS / "pod-400g.yml",
         ("--workload", "allreduce", "--ranks", "8", "--size", "64MB")),
    Case("alltoall-8-pod400g", FABRICS / "pod-400g.yml",
         ("--workload", "alltoall", "--ranks", "8", "--size", "16MB")),
    Case("alltoall-16-pod400g", FABRICS / "pod-400g.yml",
         ("--workload", "alltoall", "--ranks", "16", "--size", "16MB")),
    Case("train+moe-pod32leaf", FABRICS / "pod-32-leaf.yml",
         ("--job", str(JOBS / "pod-32-leaf-train-and-moe.yml"))),
    Case("allreduce-lab-leafspine", FABRICS / "lab-leafspine.yml",
         ("--workload", "allreduce", "--size", "16MB")),
    Case("alltoall-lab-leafspine", FABRICS / "lab-leafspine.yml",
         ("--workload", "alltoall", "--size", "16MB")),
)  # fmt: skip


TWIN_DATA = REPO / "tests" / "data" / "twin"
# tune --modes lossless,lossy-trim: one seed, four ECN settings on the grid, DCQCN not searched.
TUNE_COMMON = ("--modes", "lossless,lossy-trim", "--seeds", "1", "--candidates", "4",
               "--method", "grid", "--no-dcqcn")  # fmt: skip
TUNE_CASES: tuple[Case, ...] = (
    Case("tune-queue-incast-16:1", TWIN_DATA / "incast-400g.yml",
         ("--objective", "queue", "--scenario", "incast", "--senders", "16", "--duration", "1ms",
          "--min-utilisation", "0", "--min-jain", "0", "--max-paused", "100")),
    Case("tune-allreduce-4", TWIN_DATA / "incast-400g.yml",
         ("--objective", "collective", "--workload", "allreduce", "--ranks", "4",
          "--size", "1MiB")),
    Case("tune-alltoall-leafspine", TWIN_DATA / "leaf-spine-400g.yml",
         ("--objective", "collective", "--workload", "alltoall", "--size", "16MiB",
          "--qps", "1")),
)  # fmt: skip


def run_tune(case: Case) -> dict[str, Any]:
    """One ``tune --modes`` process; its JSON (exit 1: no candidate met the constraints)."""
    command = [sys.executable, "-m", "agent", "tune", str(case.fabric), *case.args,
               *TUNE_COMMON, "-o", "json", "--no-progress"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{case.name}: exit {done.returncode}\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def tune_lines(case: Case, data: dict[str, Any]) -> list[str]:
    lines = []
    for entry in data["modes"]:
        row = entry["row"]
        lines.append(f"| {case.name} | {label(row)} | {entry['settings']} | {cell(row)} | "
                     f"{data['recommended_mode']} | {data['reason']} |")  # fmt: skip
    lines += [f"|  | note |  |  |  | {note} |" for note in data["notes"]]
    return lines


def run_case(case: Case, seed: int) -> dict[str, Any]:
    """One ``--compare-modes`` process; its JSON."""
    command = [
        sys.executable, "-m", "agent", "twin", str(case.fabric), *case.args,
        "--compare-modes", "--seed", str(seed), "-o", "json", "--no-progress",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{case.name} seed {seed}: exit {done.returncode}\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def throughput(row: dict[str, Any]) -> float:
    """busbw (GB/s) of a collective's row, goodput (Gb/s) of a scenario's."""
    value = row["busbw_GBps"] if row["busbw_GBps"] is not None else row["goodput_Gbps"]
    return float(value or 0.0)


def label(row: dict[str, Any]) -> str:
    job = f" {row['job']}" if row["job"] else ""
    return f"{row['mode']}/{row['paths']}{job}"


def cell(row: dict[str, Any]) -> str:
    p99 = row["completion_p99_s"]
    tail = f" p99 {p99 * 1e6:,.0f}us" if p99 is not None else ""
    return (
        f"{throughput(row):.2f}{tail} pfc {row['pfc_frames']} trim {row['trimmed']}"
        f"/{row['trim_dropped']} retx {row['retransmitted']} to {row['timeouts']}"
        f"{'' if row['completed'] else ' NOT COMPLETED'}"
    )


def spread(values: Sequence[float]) -> float:
    """(max - min) / min over the seeds, 0 for one seed."""
    low = min(values)
    return (max(values) - low) / low if low else 0.0


def summarize(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Per case: the recommendations over the seeds and each row's busbw spread."""
    lines = [
        "",
        "| case | recommended (seeds) | busbw spread over seeds, per row |",
        "|---|---|---|",
    ]
    for name, runs in results.items():
        picks: dict[str, int] = {}
        for run in runs:
            picks[run["recommended"]] = picks.get(run["recommended"], 0) + 1
        by_row: dict[str, list[float]] = {}
        for run in runs:
            for row in run["rows"]:
                by_row.setdefault(label(row), []).append(throughput(row))
        spreads = ", ".join(f"{key} {spread(v):.1%}" for key, v in by_row.items())
        said = ", ".join(f"{mode} {count}/{len(runs)}" for mode, count in picks.items())
        lines.append(f"| {name} | {said} | {spreads} |")
    return lines


def compare_all(cases: list[Case], seeds: int) -> dict[str, list[dict[str, Any]]]:
    """Every case at seeds 1..N, a table line per row as it finishes."""
    print("| case | seed | row | busbw GB/s (goodput Gb/s) ... | recommended | reason |")
    print("|---|---|---|---|---|---|")
    results: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        for seed in range(1, seeds + 1):
            data = run_case(case, seed)
            results.setdefault(case.name, []).append(data)
            for row in data["rows"]:
                print(f"| {case.name} | {seed} | {label(row)} | {cell(row)} | "
                      f"{data['recommended']} | {data['reason']} |", flush=True)  # fmt: skip
            for note in data["notes"]:
                print(f"|  |  | note |  |  | {note} |")
    return results


def tune_all() -> dict[str, list[dict[str, Any]]]:
    """Every tune case, its lines as it finishes."""
    print("\n| tune case | row | decided setting | busbw GB/s (goodput Gb/s) ... | "
          "recommended | reason |\n|---|---|---|---|---|---|")  # fmt: skip
    results: dict[str, list[dict[str, Any]]] = {}
    for case in TUNE_CASES:
        data = run_tune(case)
        results[case.name] = [data]
        print("\n".join(tune_lines(case, data)), flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N per case")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--json", type=Path, help="write every run's JSON here")
    parser.add_argument("--tune", action="store_true", help="also tune --modes (3 cases)")
    args = parser.parse_args(argv)
    wanted = {c for c in args.cases.split(",") if c}
    cases = [c for c in CASES if not wanted or c.name in wanted]
    if wanted - {c.name for c in cases}:
        parser.error(f"--cases: unknown {sorted(wanted - {c.name for c in cases})}")
    print(f"twin --compare-modes, {datetime.now(UTC).isoformat(timespec='seconds')}, "
          f"{platform.python_version()}, {os.cpu_count()} CPUs")  # fmt: skip
    results = compare_all(cases, args.seeds)
    print("\n".join(summarize(results)))
    if args.tune:
        results.update(tune_all())
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

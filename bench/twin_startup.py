"""The twin's start-up: what a 10 ms run costs besides the simulation (issue #31: under 0.3 s).

Start-up is everything in a ``roce-agent twin FABRIC --scenario incast --duration 10ms -o json``
process that is not the simulation: interpreter start, imports, loading and planning the fabric,
building the network and the engine -- and, after the run, the report and its JSON.  Each case
is one fresh process, timed from outside (``time.perf_counter`` around ``subprocess.run``); the
simulation is the ``wall_s`` the command reports in its JSON, which times ``Engine.run`` alone
(:func:`agent.twin.results.simulate`), so start-up = total - ``wall_s``, run by run.

Cases, ``--runs`` fresh processes each (min and median; start-up is taken per run):

- ``python -c pass``: the bare interpreter (with the venv's site), the floor;
- ``python -c "import agent.app.cli"``: the command line's own imports;
- ``twin`` on a small star fabric (``agent.twin.network.star_fabric_yaml(3, "100G")``, 2:1
  incast) and on ``playbooks/fabrics/pod-400g.yml`` (2:1 incast at 400 Gb/s);
- the same two through the Python API in a fresh interpreter (``load_network`` + ``run_twin``,
  which returns the same ``wall_s``).

The code measured is the ``agent`` package this interpreter imports (``PYTHONPATH`` decides,
so the script measures another checkout too: ``PYTHONPATH=/tmp/base python
bench/twin_startup.py``); the fabric files come from that checkout.  Bytecode: an installed
package runs from compiled ``.pyc`` files, so one untimed warm-up run of every case writes
them first (``PYTHONDONTWRITEBYTECODE`` is dropped from the children's environment; with
``--keep-env`` it is not, and a tree without ``__pycache__`` compiles every module every run).

    python bench/twin_startup.py [--runs 7] [--keep-env]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import agent
from agent.twin.network import star_fabric_yaml

GOAL_S = 0.3  # issue #31: start-up under 0.3 s for a 10 ms run
DURATION = "10ms"

# A fresh interpreter's run through the Python API; prints the engine's wall time last.
API_RUN = (
    "import sys; from pathlib import Path; "
    "from agent.twin.network import load_network; from agent.twin.results import run_twin; "
    "r = run_twin(load_network(Path(sys.argv[1])), 'incast', senders=2, duration_s=0.01); "
    "print(r.wall_s)"
)


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    # how the simulation's wall time is read from stdout: "json", "last-line" or None (none)
    simulated: str | None = None


@dataclass(frozen=True)
class Timing:
    total_s: list[float]
    simulation_s: list[float]

    @property
    def startup_s(self) -> list[float]:
        return [t - s for t, s in zip(self.total_s, self.simulation_s, strict=True)]


def code_root() -> Path:
    """The checkout whose ``agent`` this interpreter imports (``PYTHONPATH`` decides)."""
    return Path(agent.__file__).resolve().parents[1]


def child_env(root: Path, keep_env: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    if not keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cases(root: Path, star: Path) -> list[Case]:
    py = sys.executable
    pod = root / "playbooks" / "fabrics" / "pod-400g.yml"
    twin = [py, "-m", "agent", "twin"]
    run = ["--scenario", "incast", "--senders", "2", "--duration", DURATION, "-o", "json"]
    return [
        Case("python -c pass", [py, "-c", "pass"]),
        Case("python -c 'import agent.app.cli'", [py, "-c", "import agent.app.cli"]),
        Case("twin incast 2:1, star 3x100G", [*twin, str(star), *run], "json"),
        Case("twin incast 2:1, pod-400g", [*twin, str(pod), *run], "json"),
        Case("run_twin (API), star 3x100G", [py, "-c", API_RUN, str(star)], "last-line"),
        Case("run_twin (API), pod-400g", [py, "-c", API_RUN, str(pod)], "last-line"),
    ]


def run_once(case: Case, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """One fresh process: (total wall time, the simulation's part of it)."""
    started = time.perf_counter()
    done = subprocess.run(case.argv, env=env, cwd=cwd, capture_output=True, text=True)
    total = time.perf_counter() - started
    # twin exits 1 when a lossless class dropped frames: still a run, still timed
    if done.returncode not in (0, 1) or (case.simulated is None and done.returncode):
        sys.exit(f"{case.name}: exit {done.returncode}\n{done.stderr.strip()}")
    if case.simulated == "json":
        return total, float(json.loads(done.stdout)["wall_s"])
    if case.simulated == "last-line":
        return total, float(done.stdout.strip().splitlines()[-1])
    return total, 0.0


def measure(case: Case, env: dict[str, str], cwd: Path, runs: int) -> Timing:
    run_once(case, env, cwd)  # warm-up: writes the bytecode, fills the page cache
    totals, simulated = [], []
    for _ in range(runs):
        total, simulation = run_once(case, env, cwd)
        totals.append(total)
        simulated.append(simulation)
    return Timing(totals, simulated)


def _min_median(values: Sequence[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f}"


def startup_table(runs: int = 7, keep_env: bool = False) -> None:
    """Print the start-up table (seconds, min / median of ``runs`` fresh processes a case)."""
    root = code_root()
    env = child_env(root, keep_env)
    with tempfile.TemporaryDirectory() as tmp:
        star = Path(tmp) / "star-3-100G.yml"
        star.write_text(star_fabric_yaml(3, "100G"))
        print(
            f"\ntwin start-up, {DURATION} runs (issue #31 goal: start-up < {GOAL_S} s); "
            f"code: {root}; {runs} fresh processes a case, min / median; bytecode "
            f"{'as the environment has it' if keep_env else 'cached (one warm-up run)'}"
        )
        print("| case | total (s) | simulation (s) | start-up (s) | goal |")
        print("|---|---|---|---|---|")
        for case in cases(root, star):
            timing = measure(case, env, root, runs)
            sim = _min_median(timing.simulation_s) if case.simulated else "-"
            goal = ""
            if case.simulated:
                goal = "met" if statistics.median(timing.startup_s) < GOAL_S else "MISSED"
            print(
                f"| {case.name} | {_min_median(timing.total_s)} | {sim} | "
                f"{_min_median(timing.startup_s)} | {goal} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per case")
    parser.add_argument(
        "--keep-env", action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE in the children's environment if it is set",
    )  # fmt: skip
    args = parser.parse_args()
    startup_table(max(1, args.runs), args.keep_env)


if __name__ == "__main__":
    main()

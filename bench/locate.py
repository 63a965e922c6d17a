"""How often does ``roce-agent locate`` name the injected fault first, and how fast (#15)?

Brings up ``containerlab/roce-leafspine.clab.yml``, pushes its lossless profile (``apply``),
then for each fault kind runs ``--trials`` trials, each on a target drawn at random (seeded)
from the elements that kind can break, plus ``--trials`` runs with no fault at all: inject
the fault (``lab fault add``), run locate (the same ``run_locate`` as the CLI, with
``--load``), remove the fault. A trial is right when the first suspect is the injected
element; a no-fault run is right when there is no suspect. Prints accuracy per kind and time
to verdict, and exits 1 below ``--goal`` (95 %).

    python bench/locate.py [--trials 3] [--seed 1] [--kinds loss,storm] [--duration 3]
                           [--json]     (root: the lab needs netns)

The lab test (tests/lab/test_locate_lab.py) runs one seeded trial per kind with the same
code (``TRIALS``, ``draw``, ``run_trial``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.errors import AgentError  # noqa: E402  (after the path insert above)
from agent.intent.loader import load_fabric  # noqa: E402
from agent.intent.model import FabricIntent  # noqa: E402
from agent.observe.locate.gather import LocateRun, run_locate  # noqa: E402
from lab.faults import LabFaults  # noqa: E402

TOPOLOGY = ROOT / "containerlab" / "roce-leafspine.clab.yml"


def lab_name(fabric_port: str) -> str:
    """The fabric's ``Ethernet3`` is the lab topology's ``eth3``."""
    return "eth" + fabric_port.removeprefix("Ethernet")


@dataclass(frozen=True)
class Trial:
    """One fault: the ``lab fault add`` arguments and the suspect locate must rank first."""

    kind: str
    target: str  # lab spelling
    params: dict[str, Any]
    expected: tuple[str, str] | None  # (kind, element) in the fabric's names; None: no fault

    def label(self) -> str:
        return "no fault" if self.expected is None else f"{self.kind} {self.target}"


def _switch_ports(intent: FabricIntent) -> list[tuple[str, str, str, str]]:
    """(switch, port, peer device, peer port) for every cabled switch port."""
    roles = {d.name: d.role for d in intent.devices}
    out = []
    for device in intent.devices:
        if device.role == "host":
            continue
        for port in device.ports:
            if port.peer is not None:
                peer, _, peer_port = port.peer.partition(":")
                if peer in roles:
                    out.append((device.name, port.name, peer, peer_port))
    return out


def _is_host(intent: FabricIntent, name: str) -> bool:
    device = intent.device(name)
    return device is not None and device.role == "host"


def pools(intent: FabricIntent) -> dict[str, list[Trial]]:
    """Every trial each kind can make on this fabric."""
    ports = _switch_ports(intent)
    egress = [(s, p, peer) for s, p, peer, _ in ports]
    hosts = sorted(d.name for d in intent.devices if d.role == "host")
    host_links = [(peer, s) for s, _, peer, _ in ports if _is_host(intent, peer)]
    fabric_links = [(s, p, peer, q) for s, p, peer, q in ports if not _is_host(intent, peer)]
    roles = {d.name: d.role for d in intent.devices}
    spine_ports = [(s, p) for s, p, _, _ in fabric_links if roles[s] == "spine"]

    def direction(switch: str, port: str, peer: str) -> tuple[str, str]:
        return f"{switch}:{lab_name(port)}>{peer}", f"{switch}:{port}>{peer}"

    def cable(a: str, pa: str, b: str, pb: str) -> str:
        x, y = sorted((f"{a}:{pa}", f"{b}:{pb}"))
        return f"{x}<>{y}"

    out: dict[str, list[Trial]] = {
        "loss": [
            Trial("loss", t, {"percent": 5.0}, ("link", e))
            for t, e in (direction(*x) for x in egress)
        ],
        "corrupt": [
            Trial("corrupt", t, {"percent": 5.0}, ("link", e))
            for t, e in (direction(s, p, peer) for s, p, peer, _ in fabric_links)
        ]
        + [
            Trial("corrupt", f"{h}>{s}", {"percent": 5.0}, ("link", f"{h}>{s}"))
            for h, s in host_links
        ],
        "icrc": [
            Trial("icrc", t, {"percent": 5.0}, ("link", e))
            for t, e in (direction(*x) for x in egress)
        ],
        "latency": [
            Trial("latency", t, {"ms": 20.0}, ("link", e))
            for t, e in (direction(*x) for x in egress)
        ],
        "down": [
            Trial("down", f"{s}:{lab_name(p)}", {}, ("link", cable(s, p, peer, q)))
            for s, p, peer, q in fabric_links
            if s < peer
        ],
        "storm": [Trial("storm", h, {}, ("host-nic", h)) for h in hosts],
        "misclassify": [
            Trial("misclassify", f"{s}:{lab_name(p)}", {}, ("port", f"{s}:{p}"))
            for s, p, _, _ in ports
        ],
        "asic-misclassify": [
            Trial("asic-misclassify", f"{s}:{lab_name(p)}", {}, ("port", f"{s}:{p}"))
            for s, p, _, _ in ports
        ],
        # Pause reaches the spines' ports under the load (the congested leaf pauses them).
        "ignore-pfc": [
            Trial("ignore-pfc", f"{s}:{lab_name(p)}", {}, ("port", f"{s}:{p}"))
            for s, p in spine_ports
        ],
    }
    return out


KINDS = ("loss", "corrupt", "icrc", "latency", "down", "storm", "misclassify",
         "asic-misclassify", "ignore-pfc")  # fmt: skip


def draw(intent: FabricIntent, kinds: tuple[str, ...], trials: int, seed: int) -> list[Trial]:
    """``trials`` targets per kind (seeded, without repeats while the pool lasts), plus
    ``trials`` no-fault runs, interleaved so a slow spell of the machine hits every kind."""
    rng = random.Random(seed)
    available = pools(intent)
    per_kind = {}
    for kind in kinds:
        pool = available[kind]
        picks = rng.sample(pool, min(trials, len(pool)))
        per_kind[kind] = picks + [rng.choice(pool) for _ in range(trials - len(picks))]
    out = []
    for round_ in range(trials):
        out += [per_kind[kind][round_] for kind in kinds]
        out.append(Trial("none", "", {}, None))
    return out


@dataclass
class Outcome:
    trial: Trial
    first: tuple[str, str] | None
    seconds: float
    summary: str
    failed: bool = False

    @property
    def right(self) -> bool:
        return not self.failed and self.first == self.trial.expected

    def as_dict(self) -> dict[str, Any]:
        return {
            "fault": self.trial.label(),
            "expected": list(self.trial.expected) if self.trial.expected else None,
            "first_suspect": list(self.first) if self.first else None,
            "right": self.right,
            "time_to_verdict_s": round(self.seconds, 1),
            "summary": self.summary,
        }


def run_trial(
    intent: FabricIntent,
    faults: LabFaults,
    trial: Trial,
    duration_s: float,
    locate: Callable[..., LocateRun] = run_locate,
) -> Outcome:
    added = faults.add(trial.kind, trial.target, **trial.params) if trial.expected else None
    try:
        run = locate(intent, duration_s=duration_s, load=True)
    finally:
        if added is not None:
            faults.remove(added.id)
    suspects = run.verdict.suspects
    first = (suspects[0].kind, suspects[0].element) if suspects else None
    return Outcome(trial, first, run.duration_s, run.verdict.as_dict()["summary"])


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, check=False
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="per kind, and with no fault")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--duration", type=float, default=3.0, help="mesh seconds per run")
    parser.add_argument("--goal", type=float, default=0.95)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or args.trials < 1:
        print(f"--kinds: Expected: some of {','.join(KINDS)}; --trials >= 1", file=sys.stderr)
        return 2
    os.environ.setdefault("ROCE_LAB_PASSWORD", "admin")
    name = f"lb{os.getpid()}"
    state = Path(tempfile.mkdtemp(prefix="locate-bench-")) / name
    up = _agent("lab", "up", str(TOPOLOGY), "--name", name, "--state-dir", str(state))
    if up.returncode != 0:
        print(up.stdout, up.stderr, file=sys.stderr)
        return 2
    outcomes: list[Outcome] = []
    try:
        applied = _agent("apply", str(state / "fabric.yml"), "--yes",
                         "--state-dir", str(state / "agent"))  # fmt: skip
        if applied.returncode != 0:
            print(applied.stdout, applied.stderr, file=sys.stderr)
            return 2
        intent = load_fabric(state / "fabric.yml").intent
        faults = LabFaults(state)
        for trial in draw(intent, kinds, args.trials, args.seed):
            try:
                outcome = run_trial(intent, faults, trial, args.duration)
            except AgentError as exc:  # locate could not run: a wrong trial, said why
                outcome = Outcome(trial, None, 0.0, f"error: {exc}")
                outcome.failed = True
            outcomes.append(outcome)
            mark = "ok " if outcome.right else "MISS"
            print(f"{mark} {trial.label():40} -> {outcome.summary} ({outcome.seconds:.0f} s)",
                  flush=True)  # fmt: skip
    finally:
        _agent("lab", "down", "--lab", name, "--state-dir", str(state))
        shutil.rmtree(state.parent, ignore_errors=True)
    print(f"\nlocate on the leaf-spine lab, {args.trials} trial(s) per kind, seed {args.seed}, "
          f"--load, {args.duration:g} s mesh")  # fmt: skip
    print("| fault kind | right first | time to verdict (median, max) |")
    print("|---|---|---|")
    for kind in (*kinds, "none"):
        mine = [o for o in outcomes if o.trial.kind == kind]
        if not mine:
            continue
        times = [o.seconds for o in mine]
        label = "no fault (no suspect)" if kind == "none" else kind
        print(f"| {label} | {sum(o.right for o in mine)} of {len(mine)} | "
              f"{statistics.median(times):.0f} s, {max(times):.0f} s |")  # fmt: skip
    right = sum(o.right for o in outcomes)
    print(f"\n{right} of {len(outcomes)} right ({right / len(outcomes):.0%}); goal "
          f"{args.goal:.0%}")  # fmt: skip
    if args.json:
        print(json.dumps([o.as_dict() for o in outcomes], indent=2))
    return 0 if right >= args.goal * len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

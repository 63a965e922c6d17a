"""How often does ``roce-agent locate`` name the injected fault first, and how fast (#15, #30)?

Brings up ``containerlab/roce-leafspine.clab.yml``, pushes its lossless profile (``apply``),
then runs a seeded matrix of trials, each: inject one fault (``lab fault add``), run locate
(the same ``run_locate`` as the CLI, with its defaults: no ``--load``), remove the fault.

- ``loss`` and ``corrupt`` at each of ``--rates`` (with ``--matrix``: 0.5, 1, 2, 5 %; else
  5 %) on ``--trials`` random link directions of each direction kind: host>leaf, leaf>host,
  leaf>spine, spine>leaf;
- ``latency`` (+20 ms) on each direction kind a switch egress can delay (not host>leaf);
- ``--trials`` random targets of every other kind the lab can inject (``lab fault`` kinds;
  ``host-stall`` when the lab has it); ``asic-misclassify`` and ``ignore-pfc`` run with
  ``--load``, as an operator must: without congestion they change nothing on the wire;
- ``--no-fault`` runs with nothing injected (default ``--trials``; with ``--matrix`` 4 times
  that).

``--kinds`` narrows any of it to some kinds.

Prints, per fault kind and rate, first-suspect accuracy (a tie is not first), precision,
recall, tied groups, false suspects and time to verdict, then the issue's goals PASS/FAIL
(exit 1 when one fails). ``--records FILE`` appends each trial as one JSON line (the schema
and the scoring: ``datasets/locate/README.md``; the tables come from
``datasets/locate/score.py``). locate's adaptive run (``confidence``, ``max_duration_s``,
``min_loss``) is used when ``run_locate`` takes them; otherwise a fixed ``--duration`` mesh,
and the output says so.

    python bench/locate.py --matrix [--trials 1] [--seed 1] [--records FILE]
    python bench/locate.py --kinds loss,storm --rates 2 --trials 2 [--no-fault 1]
                                                          (root: the lab needs netns)
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import inspect
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import typing
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict, Unpack

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.errors import AgentError  # noqa: E402 -- after the sys.path insert above
from agent.intent.loader import load_fabric  # noqa: E402 -- after the sys.path insert above
from agent.intent.model import FabricIntent  # noqa: E402 -- after the sys.path insert above
from agent.observe.locate.gather import LocateRun, as_json, run_locate  # noqa: E402 -- after the sys.path insert above
from common.signals import unwind_on_termination  # noqa: E402 -- after the sys.path insert above
from lab import faults as lab_faults  # noqa: E402 -- after the sys.path insert above
from lab.faults import LabFaults  # noqa: E402 -- after the sys.path insert above

TOPOLOGY = ROOT / "containerlab" / "roce-leafspine.clab.yml"
SCORE_FILE = ROOT / "datasets" / "locate" / "score.py"


def _score_module() -> ModuleType:
    """The data set's scorer (stdlib only, runnable on its own): one definition of the
    metrics for this bench and for anyone scoring the published records."""
    spec = importlib.util.spec_from_file_location("locate_score", SCORE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["locate_score"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


score = _score_module()

RATES = (0.5, 1.0, 2.0, 5.0)  # percent
RATE_KINDS: tuple[str, ...] = score.RATE_KINDS
DIRECTIONS: tuple[str, ...] = score.DIRECTIONS
LATENCY_MS = 20.0
OTHER_RATE = 5.0  # icrc's percent
STALL_MS = 30.0  # host-stall: descheduled this long every 100 ms
# Faults of the lossless machinery change nothing on the wire without congestion.
NEEDS_LOAD = frozenset({"asic-misclassify", "ignore-pfc"})
BASE_KINDS = (
    "loss",
    "corrupt",
    "icrc",
    "latency",
    "down",
    "storm",
    "misclassify",
    "asic-misclassify",
    "ignore-pfc",
)
# Adaptive locate (#30): run_locate's keywords, and the values the bench passes.
ADAPTIVE = {"confidence": 0.95, "max_duration_s": 60.0, "min_loss": 0.005}
FIXED_DURATION_S = 5.0  # the CLI's default --duration, for a locate without them


def lab_kinds() -> tuple[str, ...]:
    """Every kind this bench can inject: the base ones, plus ``host-stall`` when the lab's
    fault registry has it (added by #30)."""
    extra = ("host-stall",) if "host-stall" in lab_faults.KINDS else ()
    return BASE_KINDS + extra


KINDS = lab_kinds()


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
    direction: str | None = None  # one of DIRECTIONS, for faults on a link direction
    rate: float | None = None  # percent, for the RATE_KINDS

    def label(self) -> str:
        if self.expected is None:
            return "no fault"
        rate = f" {self.rate:g}%" if self.rate is not None else ""
        return f"{self.kind}{rate} {self.target}"


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


def directions(intent: FabricIntent) -> dict[str, list[tuple[str, str]]]:
    """Every link direction of the fabric by its kind (``host>leaf`` ...): (lab target,
    the fabric's link name as locate names it)."""
    roles = {d.name: d.role for d in intent.devices}
    out: dict[str, list[tuple[str, str]]] = {d: [] for d in DIRECTIONS}
    for switch, port, peer, _ in _switch_ports(intent):
        out.setdefault(f"{roles[switch]}>{roles[peer]}", []).append(
            (f"{switch}:{lab_name(port)}>{peer}", f"{switch}:{port}>{peer}")
        )
        if roles[peer] == "host":  # the host's direction into this switch
            out.setdefault(f"host>{roles[switch]}", []).append(
                (f"{peer}>{switch}", f"{peer}>{switch}")
            )
    return out


def pools(intent: FabricIntent) -> dict[str, list[Trial]]:
    """Every trial each kind that is not drawn per direction can make on this fabric."""
    ports = _switch_ports(intent)
    roles = {d.name: d.role for d in intent.devices}
    hosts = sorted(n for n, r in roles.items() if r == "host")
    fabric_links = [(s, p, peer, q) for s, p, peer, q in ports if roles[peer] != "host"]
    every_port = [(s, p) for s, p, _, _ in ports]
    return {
        "icrc": _icrc_trials(intent),
        "down": _down_trials(fabric_links),
        "storm": [Trial("storm", h, {}, ("host-nic", h)) for h in hosts],
        "misclassify": _port_trials("misclassify", every_port),
        "asic-misclassify": _port_trials("asic-misclassify", every_port),
        # Pause reaches the spines' ports under the load (the congested leaf pauses them).
        "ignore-pfc": _port_trials(
            "ignore-pfc", [(s, p) for s, p, _, _ in fabric_links if roles[s] == "spine"]
        ),
        "host-stall": _stall_trials(hosts),
    }


def _icrc_trials(intent: FabricIntent) -> list[Trial]:
    """Corruption at a switch egress: every direction a switch sends on."""
    egress = [
        t
        for kind, found in directions(intent).items()
        if not kind.startswith("host>")
        for t in found
    ]
    return [Trial("icrc", t, {"percent": OTHER_RATE}, ("link", e)) for t, e in egress]


def _down_trials(fabric_links: Sequence[tuple[str, str, str, str]]) -> list[Trial]:
    """A switch port down: each cable between switches once, named as locate names it."""
    return [
        Trial("down", f"{s}:{lab_name(p)}", {}, ("link", _cable(s, p, peer, q)))
        for s, p, peer, q in fabric_links
        if s < peer
    ]


def _cable(a: str, pa: str, b: str, pb: str) -> str:
    x, y = sorted((f"{a}:{pa}", f"{b}:{pb}"))
    return f"{x}<>{y}"


def _port_trials(kind: str, chosen: Sequence[tuple[str, str]]) -> list[Trial]:
    return [Trial(kind, f"{s}:{lab_name(p)}", {}, ("port", f"{s}:{p}")) for s, p in chosen]


def _stall_trials(hosts: Sequence[str]) -> list[Trial]:
    """A slow host is the host, not its access link (#30, item 4)."""
    stall = lab_faults.KINDS.get("host-stall")
    stall_params = {"ms": STALL_MS} if stall is not None and "ms" in stall.allowed else {}
    return [Trial("host-stall", h, dict(stall_params), ("host", h)) for h in hosts]


def _pick(rng: random.Random, pool: Sequence[Any], n: int) -> list[Any]:
    """``n`` of ``pool``, without repeats while the pool lasts."""
    picks = rng.sample(list(pool), min(n, len(pool)))
    return picks + [rng.choice(pool) for _ in range(n - len(picks))]


def _direction_trials(
    rng: random.Random,
    kind: str,
    by_direction: dict[str, list[tuple[str, str]]],
    rates: Sequence[float | None],
    trials: int,
) -> list[Trial]:
    out = []
    for rate in rates:
        for direction in DIRECTIONS:
            pool = by_direction.get(direction, [])
            if kind == "latency" and direction.startswith("host>"):
                continue  # the lab delays a switch egress; a host's own sending is host-stall
            for target, element in _pick(rng, pool, trials) if pool else []:
                if rate is None:
                    params: dict[str, Any] = {"ms": LATENCY_MS}
                else:  # the vswitch's own drop seed, so that a trial can be replayed
                    params = {"percent": rate, "seed": rng.randrange(1, 2**31)}
                out.append(Trial(kind, target, params, ("link", element), direction, rate))
    return out


class DrawOptions(TypedDict, total=False):
    """:func:`draw`'s loss and corruption rates (percent, default :data:`RATES`) and its
    number of no-fault runs (default: ``trials``)."""

    rates: Sequence[float]
    no_fault: int | None


def draw(
    intent: FabricIntent,
    kinds: Sequence[str],
    trials: int,
    seed: int,
    **options: Unpack[DrawOptions],
) -> list[Trial]:
    """The seeded matrix: per rate kind, rate and direction kind ``trials`` random
    directions; latency per direction kind; ``trials`` random targets of every other kind;
    ``no_fault`` runs with nothing injected (default ``trials``). Shuffled (seeded), so a slow
    spell of the machine hits every kind, not one."""
    rates, no_fault = options.get("rates", RATES), options.get("no_fault")
    rng = random.Random(seed)
    by_direction = directions(intent)
    others = pools(intent)
    out: list[Trial] = []
    for kind in kinds:
        if kind in RATE_KINDS:
            out += _direction_trials(rng, kind, by_direction, rates, trials)
        elif kind == "latency":
            out += _direction_trials(rng, kind, by_direction, [None], trials)
        else:
            out += _pick(rng, others[kind], trials)
    out += [Trial("none", "", {}, None) for _ in range(trials if no_fault is None else no_fault)]
    rng.shuffle(out)
    return out


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Settings:
    """How each trial runs locate: adaptive (#30) when ``run_locate`` takes its keywords,
    else a fixed mesh; ``note`` says which, for the output."""

    adaptive: bool
    duration_s: float | None
    confidence: float | None = None
    max_duration_s: float | None = None
    min_loss: float | None = None
    load: bool = False  # every trial with --load (else only the NEEDS_LOAD kinds)
    note: str = ""

    def kwargs(self, trial: Trial) -> dict[str, Any]:
        out: dict[str, Any] = {"load": self.load or trial.kind in NEEDS_LOAD}
        if self.adaptive:
            out.update(
                confidence=self.confidence,
                max_duration_s=self.max_duration_s,
                min_loss=self.min_loss,
            )
        out["duration_s"] = self.duration_s
        return out

    def as_dict(self, trial: Trial) -> dict[str, Any]:
        return {
            "mode": "adaptive" if self.adaptive and self.duration_s is None else "fixed",
            "load": self.load or trial.kind in NEEDS_LOAD,
            "duration_s": self.duration_s,
            "confidence": self.confidence,
            "max_duration_s": self.max_duration_s,
            "min_loss": self.min_loss,
        }


def settings_for(
    locate: Callable[..., Any], duration_s: float | None, load: bool, **adaptive: float
) -> Settings:
    """Adaptive when ``locate`` takes confidence, max_duration_s and min_loss and no
    ``duration_s`` was asked for; otherwise a fixed mesh of ``duration_s`` (default: the
    CLI's 5 s), saying why."""
    values = {**ADAPTIVE, **adaptive}
    takes = keywords(locate)
    missing = sorted(set(ADAPTIVE) - takes)
    if not missing:
        if duration_s is None:
            note = (
                "adaptive locate: confidence {confidence:g}, max {max_duration_s:g} s, "
                "min loss {min_loss:.2%}"
            ).format(**values)
        else:
            note = f"fixed {duration_s:g} s mesh (--duration), adaptive locate not used"
        return Settings(True, duration_s, load=load, note=note, **values)
    fixed = FIXED_DURATION_S if duration_s is None else duration_s
    note = (
        f"fixed {fixed:g} s mesh: this locate has no adaptive run (run_locate does not "
        f"take {', '.join(missing)})"
    )
    return Settings(False, fixed, load=load, note=note)


def keywords(locate: Callable[..., Any]) -> set[str]:
    """The keywords ``locate`` takes: its named parameters, and the keys of the TypedDict
    its ``**options`` are typed with (``Unpack[...]``), as run_locate's are."""
    names = set()
    for parameter in inspect.signature(locate).parameters.values():
        if parameter.kind is not parameter.VAR_KEYWORD:
            names.add(parameter.name)
            continue
        hint = typing.get_type_hints(locate, include_extras=True).get(parameter.name)
        if typing.get_origin(hint) is typing.Unpack:
            names |= set(typing.get_args(hint)[0].__annotations__)
    return names


@dataclass
class Outcome:
    trial: Trial
    run: LocateRun | None
    seconds: float
    error: str | None = None
    started_at: str = ""

    def verdict(self) -> dict[str, Any] | None:
        return None if self.run is None else as_json(self.run)

    def first(self) -> tuple[str, str] | None:
        """``Verdict.first`` where locate has it (#30: None when rank 1 is tied), else the
        rank-1 suspect."""
        if self.run is None:
            return None
        verdict = self.run.verdict
        if hasattr(verdict, "first"):
            top = verdict.first() if callable(verdict.first) else verdict.first
            return None if top is None else (top.kind, top.element)
        return (verdict.suspects[0].kind, verdict.suspects[0].element) if verdict.suspects else None

    @property
    def right(self) -> bool:
        if self.run is None:
            return False
        if self.trial.expected is None:
            return not self.run.verdict.suspects
        return self.first() == self.trial.expected

    def summary(self) -> str:
        if self.run is None:
            return f"error: {self.error}"
        return str(self.run.verdict.as_dict()["summary"])


def run_trial(
    intent: FabricIntent,
    faults: LabFaults,
    trial: Trial,
    settings: Settings,
    locate: Callable[..., LocateRun] = run_locate,
) -> Outcome:
    started = _now()
    added = faults.add(trial.kind, trial.target, **trial.params) if trial.expected else None
    try:
        run = locate(intent, **settings.kwargs(trial))
    except AgentError as exc:  # locate could not run: a wrong trial, said why
        return Outcome(trial, None, 0.0, str(exc), started)
    finally:
        if added is not None:
            faults.remove(added.id)
    return Outcome(trial, run, run.duration_s, None, started)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def code_version() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def _observations(run: LocateRun) -> dict[str, Any]:
    """What the ranking saw, so that another method can rank the same inputs: every path
    with its hop probes, and every switch port's counters over the run."""
    return {
        "paths": [asdict(p) for p in run.paths],
        "ports": [asdict(p) for p in run.ports],
    }


@dataclass(frozen=True)
class RunInfo:
    """What every record of one bench run shares."""

    run_id: str
    seed: int
    code_version: str
    settings: Settings
    machine: dict[str, Any] = field(default_factory=dict)


def record(outcome: Outcome, index: int, info: RunInfo) -> dict[str, Any]:
    """One trial as one data set line (schema: datasets/locate/README.md)."""
    trial, run = outcome.trial, outcome.run
    verdict = outcome.verdict()
    suspects = verdict["suspects"] if verdict else []
    extra = {k: getattr(run, k) for k in ("stopped", "rounds", "confidence") if hasattr(run, k)}
    return {
        "schema": score.SCHEMA,
        "id": f"{info.run_id}/{index:03d}",
        "fault": {
            "kind": trial.kind,
            "target": trial.target or None,
            "params": trial.params,
            "rate_percent": trial.rate,
            "direction": trial.direction,
        },
        "expected": (
            None
            if trial.expected is None
            else {"kind": trial.expected[0], "element": trial.expected[1]}
        ),
        # The matrix seed and the index redraw this trial; the fault's seed, its drops.
        "seed": {"matrix": info.seed, "index": index, "fault": trial.params.get("seed")},
        "settings": info.settings.as_dict(trial),
        "time_to_verdict_s": None if run is None else round(outcome.seconds, 2),
        "verdict": verdict,
        "evidence": suspects[0]["evidence"] if suspects else [],
        "run": extra,
        "observations": None if run is None else _observations(run),
        "error": outcome.error,
        "code_version": info.code_version,
        "started_at": outcome.started_at,
        "machine": info.machine,
    }


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, check=False
    )


# --------------------------------------------------------------------------- command line


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x.rstrip("%")) for x in text.split(",") if x)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments, checked: bad input exits 2 naming the option."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = [k for k in args.kinds if k not in KINDS]
    if unknown or not args.kinds:
        parser.error(f"--kinds: Expected: some of {','.join(KINDS)}. Actual: {unknown}")
    if args.trials < 1:
        parser.error(f"--trials: Expected: >= 1. Actual: {args.trials}")
    if args.no_fault is not None and args.no_fault < 0:
        parser.error(f"--no-fault: Expected: >= 0. Actual: {args.no_fault}")
    args.rates = _rates(parser, args.rates, args.matrix)
    if args.duration is not None and args.duration <= 0:
        parser.error(f"--duration: Expected: > 0 seconds. Actual: {args.duration:g}")
    if args.matrix and args.no_fault is None:
        args.no_fault = 4 * args.trials
    return args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="loss and corruption at 0.5,1,2,5 %% (else 5 %%), 4 no-fault runs per --trials",
    )
    parser.add_argument("--trials", type=int, default=1, help="per kind, rate and direction kind")
    parser.add_argument(
        "--no-fault",
        type=int,
        default=None,
        dest="no_fault",
        help="runs with no fault (default: --trials, 4x with --matrix)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument(
        "--rates", default=None, help="loss and corruption percentages (default: 5; --matrix: all)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="a fixed mesh of this many seconds (default: adaptive)",
    )
    parser.add_argument("--load", action="store_true", help="every trial with --load")
    parser.add_argument("--records", type=Path, help="append each trial here (JSON lines)")
    parser.add_argument("--json", action="store_true", help="the summary as JSON at the end")
    return parser


def _rates(parser: argparse.ArgumentParser, text: str | None, matrix: bool) -> tuple[float, ...]:
    """--rates as percentages (default: 5, with --matrix every one of RATES)."""
    if text is None:
        text = ",".join(f"{r:g}" for r in (RATES if matrix else (OTHER_RATE,)))
    try:
        rates = _floats(text)
    except ValueError:
        parser.error(f"--rates: Expected: percentages like 0.5,1,2,5. Actual: {text!r}")
    if not rates or any(not 0 < r <= 100 for r in rates):
        parser.error(f"--rates: Expected: each 0 < rate <= 100. Actual: {rates}")
    return rates


def report(records: Sequence[dict[str, Any]], note: str) -> bool:
    """The tables and the goals; True when no goal failed."""
    trials = [score.score(r) for r in records]
    print(f"\nlocate on the leaf-spine lab, {len(trials)} trials; {note}")
    print(score.markdown(trials, ("kind", "rate")))
    rated = [t for t in trials if t.kind in RATE_KINDS]
    if rated:
        print("\nloss and corruption by direction kind:")
        print(score.markdown(rated, ("kind", "direction")))
    print()
    lines = score.goal_lines(trials)
    print("\n".join(lines))
    return not any(line.startswith("FAIL") for line in lines)


def _lab_up(name: str, state: Path) -> bool:
    up = _agent("lab", "up", str(TOPOLOGY), "--name", name, "--state-dir", str(state))
    if up.returncode != 0:
        print(up.stdout, up.stderr, file=sys.stderr)
        return False
    applied = _agent(
        "apply", str(state / "fabric.yml"), "--yes", "--state-dir", str(state / "agent")
    )
    if applied.returncode != 0:
        print(applied.stdout, applied.stderr, file=sys.stderr)
        return False
    return True


def run_matrix(args: argparse.Namespace, state: Path, info: RunInfo) -> list[dict[str, Any]]:
    intent = load_fabric(state / "fabric.yml").intent
    faults = LabFaults(state)
    trials = draw(
        intent, args.kinds, args.trials, args.seed, rates=args.rates, no_fault=args.no_fault
    )
    records = []
    for index, trial in enumerate(trials):
        outcome = run_trial(intent, faults, trial, info.settings)
        line = record(outcome, index, info)
        records.append(line)
        if args.records is not None:
            with args.records.open("a") as out:
                out.write(json.dumps(line, sort_keys=True) + "\n")
        mark = "ok  " if outcome.right else "MISS"
        print(
            f"{mark} {trial.label():42} -> {outcome.summary()} ({outcome.seconds:.0f} s)",
            flush=True,
        )
    return records


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    unwind_on_termination()  # the lab is torn down even when the run is stopped
    settings = settings_for(run_locate, args.duration, args.load)
    print(settings.note, flush=True)
    os.environ.setdefault("ROCE_LAB_PASSWORD", "admin")
    name = f"lb{os.getpid()}"
    state = Path(tempfile.mkdtemp(prefix="locate-bench-")) / name
    started = datetime.datetime.now(datetime.UTC)
    info = RunInfo(
        run_id=f"{started:%Y%m%dT%H%M%SZ}-s{args.seed}",
        seed=args.seed,
        code_version=code_version(),
        settings=settings,
        machine={"cpus": os.cpu_count(), "loadavg_1m_at_start": round(os.getloadavg()[0], 2)},
    )
    try:
        if not _lab_up(name, state):
            return 2
        records = run_matrix(args, state, info)
    finally:
        _agent("lab", "down", "--lab", name, "--state-dir", str(state))
        shutil.rmtree(state.parent, ignore_errors=True)
    if not records:
        return 2
    trials = [score.score(r) for r in records]
    ok = report(records, settings.note)
    if args.json:
        groups = score.grouped(trials, ("kind", "rate"))
        print(
            json.dumps(
                {
                    "groups": [
                        {"kind": k[0], "rate": k[1], **asdict(s)} for k, s in groups.items()
                    ],
                    "goals": [asdict(g) for g in score.goals(trials)],
                },
                indent=2,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

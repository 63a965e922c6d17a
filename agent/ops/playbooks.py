"""Playbooks: ordered procedures (validate, rollout, storm drill, ECN sweep) that the CLI and
the daemon run the same way.

A playbook is YAML: a name, whether to roll back on failure, and steps. Each step is one of

* ``collect: {counters: true, window_s: 5, hosts: false, switches: true}`` — switch state
  and two counter snapshots; ``hosts: true`` also reads the RDMA hosts' pre-flight facts;
* ``checks: {ids: all | [RC001, …], inputs: {RC006: {max_detection_ms: 500}}}``;
* ``probe: {scenario: pairwise | incast | storm, …}`` — hosts ``auto`` picks them from the
  fabric (incast: two senders on another leaf than the receiver);
* ``apply: {devices: canary | rest | all | [names], canary: 1, batch_size: 8, parallelism: 32}``;
* ``ecn_sweep: {candidates: [{min_threshold, max_threshold, max_probability}], …}`` — the
  closed loop that tries threshold sets under incast and recommends one;
* ``locate: {duration_s: 5, rate_per_host_bps: 400000}`` — which link, port, switch or host
  NIC is behind a symptom (:mod:`agent.observe.locate.gather`); fails when it finds a suspect;
* ``perftest: {scenario: pairwise | incast | bidirectional, pairs, to, from, duration_s}`` —
  line-rate acceptance with perftest on the hosts whose ports declare an ``rdma_device``
  (:mod:`agent.observe.perftest.scenario`); skipped, saying so, when no host declares one;
* ``nccl: {tests: [all_reduce_perf], min_busbw_fraction: 0.9, hosts}`` — NCCL acceptance with
  nccl-tests on the RDMA hosts that have GPUs (:mod:`agent.observe.nccltests.run`); skipped,
  saying why per host, when fewer than two hosts have a GPU;
* ``fault_drill: {rows: all | [names], confirm_timeout_s: 5}`` — lab only: break rollouts
  on purpose (kill points, SSH cuts, restarts, slow replies, bad credentials, a new host
  key) and check what each leaves behind (:mod:`agent.ops.faultdrill`).

A failed step stops the playbook; with ``rollback_on_failure`` every device this run changed
is put back to the state it had before (through the same transaction path).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.device.failures import NOT_CONNECTED
from agent.device.fanout import DEFAULT_PARALLELISM
from agent.device.push import DeviceResult, Pusher, Rollout
from agent.device.state import QosState
from agent.errors import AgentError, IntentError, Problem
from agent.intent.model import Device, FabricIntent
from agent.intent.shard import WHOLE, Shard, shard_index
from agent.observe.checks import CATALOG, CheckResult, Collected, default_ids, needs
from agent.observe.collect import collect
from agent.observe.probes import scenarios
from agent.ops.sweep import (
    RECOMMENDED,
    EcnCandidate,
    SweepSpec,
    add_twin_prediction,
    dcqcn_label,
    host_lines,
    resolve_files,
    sweep_candidates,
    sweep_recommendation,
    sweep_verdict,
    with_setting,
)
from agent.ops.twin_vs_lab import LabIncast, measure_lab, predict_lab
from common.resources import builtin_playbooks
from common.validation import validation_problems
from common.yamlsource import load_yaml

PLAYBOOKS = builtin_playbooks()


class StepModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CollectSpec(StepModel):
    counters: bool = True
    window_s: float = Field(default=0.0, ge=0, le=3600)
    # Compare with the snapshot of the previous collect step (drops, storms, pauses since).
    since_previous: bool = False
    switches: bool = True  # false: no switch is read (validate --hosts-only)
    hosts: bool = False  # also the RDMA hosts' pre-flight facts (agent/observe/collect.py)


class ChecksSpec(StepModel):
    ids: Literal["all"] | list[str] = "all"
    inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ProbeSpec(StepModel):
    scenario: Literal["pairwise", "incast", "storm"]
    duration_s: float = Field(default=2.0, gt=0, le=600)
    rate: str | None = None
    to: str = "auto"
    senders: list[str] | Literal["auto"] = Field(default="auto", alias="from")
    host: str = "auto"
    traffic_from: str | None = "auto"


class ApplySpec(StepModel):
    devices: Literal["canary", "rest", "all"] | list[str] = "all"
    canary: int = Field(default=1, ge=0)
    batch_size: int = Field(default=8, ge=1)
    parallelism: int = Field(default=DEFAULT_PARALLELISM, ge=1)  # SSH sessions at once
    confirm_timeout_s: int = Field(default=300, ge=5, le=3600)
    # A live pending session on a device: as `apply --pending/--pending-timeout` (docs/push.md).
    pending: Literal["wait", "abort", "confirm-own"] = "wait"
    pending_timeout_s: float = Field(default=360.0, ge=0, le=3600, allow_inf_nan=False)


class LocateSpec(StepModel):
    duration_s: float = Field(default=5.0, gt=0, le=600)
    rate_per_host_bps: int = Field(default=400_000, gt=0)
    load: bool = False


class PerftestStepSpec(StepModel):
    scenario: Literal["pairwise", "incast", "bidirectional"] = "pairwise"
    # "CLIENT:SERVER" pairs, or auto: every pair of RDMA hosts, in rounds of disjoint pairs
    pairs: list[Annotated[str, Field(pattern=r"^[^:\s]+:[^:\s]+$")]] | Literal["auto"] = "auto"
    to: str = "auto"  # incast: the last RDMA host
    senders: list[str] | Literal["auto"] = Field(default="auto", alias="from")
    duration_s: float | None = Field(default=None, gt=0, le=3600)  # None: the fabric's policy


class NcclStepSpec(StepModel):
    tests: list[str] | None = None  # None: the fabric's validation.nccl.tests
    min_busbw_fraction: float | None = Field(default=None, gt=0, le=1)
    hosts: list[str] | None = None  # None: every RDMA host with a GPU


class FaultDrillSpec(StepModel):
    rows: list[str] | Literal["all"] = "all"
    confirm_timeout_s: int = Field(default=5, ge=5, le=60)
    slow_delay_s: float = Field(default=100.0, gt=0, le=600)


STEP_KINDS = (
    "collect", "checks", "probe", "apply", "ecn_sweep", "fault_drill", "locate", "perftest",
    "nccl",
)  # fmt: skip


class Step(StepModel):
    collect: CollectSpec | None = None
    checks: ChecksSpec | None = None
    probe: ProbeSpec | None = None
    apply: ApplySpec | None = None
    ecn_sweep: SweepSpec | None = None
    fault_drill: FaultDrillSpec | None = None
    locate: LocateSpec | None = None
    perftest: PerftestStepSpec | None = None
    nccl: NcclStepSpec | None = None
    name: str | None = None
    stop_on_failure: bool = True

    def kind(self) -> str:
        kinds = [k for k in STEP_KINDS if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(f"each step has exactly one of {', '.join(STEP_KINDS)}")
        return kinds[0]


class Playbook(StepModel):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    description: str = ""
    rollback_on_failure: bool = False
    steps: list[Step] = Field(min_length=1)


def load_playbook(path: Path) -> Playbook:
    """Load and validate a playbook; errors name file, line and field."""
    data, source = load_yaml(path)
    try:
        playbook = Playbook.model_validate(data)
        for step in playbook.steps:
            step.kind()
        playbook = _resolve_files(playbook, path.resolve().parent)
        unknown = [
            check_id
            for step in playbook.steps
            if step.checks and step.checks.ids != "all"
            for check_id in step.checks.ids
            if check_id not in CATALOG
        ]
        if unknown:
            raise AgentError(f"{path}: unknown check ID(s) {', '.join(unknown)}")
        return playbook
    except ValidationError as exc:
        raise IntentError(validation_problems(exc, data, source)) from None
    except ValueError as exc:
        raise IntentError([Problem(source.locate(("steps",)), "steps", str(exc))]) from None


def _resolve_files(playbook: Playbook, base: Path) -> Playbook:
    """A sweep's recommendation and candidates files, relative to the playbook, made absolute
    and read once (a bad file fails here, naming its own file and line, before anything is
    pushed)."""
    steps = [
        step.model_copy(update={"ecn_sweep": resolve_files(step.ecn_sweep, base)})
        if step.ecn_sweep is not None
        else step
        for step in playbook.steps
    ]
    return playbook.model_copy(update={"steps": steps})


def playbook_path(name_or_path: str) -> Path:
    """A path, or the name of a shipped playbook (``validate`` → playbooks/validate.yml)."""
    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate
    shipped = PLAYBOOKS / f"{name_or_path}.yml"
    if shipped.is_file():
        return shipped
    raise AgentError(f"playbook {name_or_path!r} not found (a file, or one of playbooks/*.yml)")


# Steps that send traffic or change devices; `validate --no-traffic` runs none of them.
TRAFFIC_KINDS = ("probe", "perftest", "nccl", "locate", "ecn_sweep", "fault_drill")
WRITE_KINDS = ("apply", "ecn_sweep", "fault_drill")


def step_check_ids(spec: ChecksSpec) -> list[str]:
    """The check IDs a ``checks`` step runs ("all": :func:`default_ids`)."""
    return default_ids() if spec.ids == "all" else list(spec.ids)


def playbook_check_ids(playbook: Playbook) -> list[str]:
    """Every check ID the playbook's ``checks`` steps run, in order, once each."""
    ids: dict[str, None] = {}
    for step in playbook.steps:
        if step.checks is not None:
            ids.update(dict.fromkeys(step_check_ids(step.checks)))
    return list(ids)


def _skip_reason(kind: str, no_traffic: bool, traffic_wanted: bool) -> str | None:
    """Why a step that is neither ``collect`` nor ``checks`` is left out, or None to run it."""
    if no_traffic:
        if kind in WRITE_KINDS:
            return "--no-traffic is read-only: this step changes the devices"
        return "--no-traffic: this step sends traffic"
    if not traffic_wanted:
        return "--checks: none of the selected checks needs this step"
    return None


def select_steps(
    playbook: Playbook, only: Sequence[str] = (), *, no_traffic: bool = False
) -> tuple[Playbook, dict[int, str]]:
    """The playbook narrowed for ``validate --checks ONLY`` and ``--no-traffic``, and the
    steps to skip (index -> why, as the report says it).

    ``--no-traffic`` keeps only ``collect`` and ``checks`` steps (read-only, like ``netq check
    roce`` or ANTA's ``nrfu``) and drops the checks that need traffic. ``--checks`` runs only
    those checks; the playbook's other steps (probes, perftest, …) run only if a selected
    check needs traffic. Raises ValueError naming the conflict (the caller names the option).
    """
    wanted = list(only)
    if no_traffic:
        clash = [c for c in wanted if "traffic" in needs(c)]
        if clash:
            raise ValueError(f"{', '.join(clash)} need(s) traffic, which --no-traffic forbids")
    _runnable(playbook, wanted)
    traffic_wanted = not wanted or any("traffic" in needs(c) for c in wanted)
    skip: dict[int, str] = {}
    steps: list[Step] = []
    for index, step in enumerate(playbook.steps):
        kind = step.kind()
        if kind == "checks":
            assert step.checks is not None
            ids, reason = _narrowed(step.checks, wanted, no_traffic)
            step = step.model_copy(update={"checks": step.checks.model_copy(update={"ids": ids})})
            if reason is not None:
                skip[index] = reason
        elif kind != "collect":
            reason = _skip_reason(kind, no_traffic, traffic_wanted)
            if reason is not None:
                skip[index] = reason
        steps.append(step)
    return playbook.model_copy(update={"steps": steps}), skip


def _runnable(playbook: Playbook, wanted: list[str]) -> None:
    """Raise ValueError if the playbook runs none of some selected checks: asking for a check
    the playbook cannot run must not turn into a run that quietly checks nothing."""
    runnable: set[str] = set()
    for step in playbook.steps:
        if step.checks is not None:
            runnable |= set(CATALOG) if step.checks.ids == "all" else set(step.checks.ids)
    missing = [c for c in wanted if c not in runnable]
    if missing:
        runs = ", ".join(c for c in CATALOG if c in runnable) or "no check"
        raise ValueError(
            f"Expected: checks that playbook {playbook.name} runs ({runs}) "
            f"Actual: {', '.join(missing)}"
        )


def _narrowed(
    spec: ChecksSpec, wanted: list[str], no_traffic: bool
) -> tuple[list[str], str | None]:
    """A checks step's IDs after --checks/--no-traffic, and why it is skipped if none is left.
    A step of ``ids: all`` runs exactly the selected checks (drill ones too, if asked for); a
    step with its own list runs the selected ones that are on it."""
    ids = step_check_ids(spec)
    if wanted:
        ids = list(wanted) if spec.ids == "all" else [c for c in wanted if c in ids]
    if no_traffic:
        ids = [c for c in ids if "traffic" not in needs(c)]
    if ids:
        return ids, None
    if wanted:
        return ids, f"--checks: none of {', '.join(wanted)} is run by this step"
    return ids, "--no-traffic: every check of this step needs traffic"


@dataclass
class StepReport:
    name: str
    kind: str
    status: str  # success | failure | skipped | error
    detail: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0


@dataclass
class Report:
    playbook: str
    fabric: str
    started: float
    steps: list[StepReport] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)
    applied: list[DeviceResult] = field(default_factory=list)
    rolled_back: list[DeviceResult] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None
    error: str | None = None
    # validate --checks/--no-traffic: what was asked for (the skipped steps say why)
    selection: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(s.status in ("success", "skipped") for s in self.steps)

    def as_dict(self) -> dict[str, Any]:
        return {
            "playbook": self.playbook,
            "fabric": self.fabric,
            "started": self.started,
            "passed": self.passed,
            "error": self.error,
            "steps": [s.__dict__ for s in self.steps],
            "checks": [c.as_dict() for c in self.checks],
            "probes": self.probes,
            "applied": [r.as_dict() for r in self.applied],
            "rolled_back": [r.as_dict() for r in self.rolled_back],
            "recommendation": self.recommendation,
            **({"selection": self.selection} if self.selection is not None else {}),
        }


class PlaybookRunner:
    """Runs a playbook over one fabric."""

    def __init__(
        self,
        intent: FabricIntent,
        audit_dir: Path | None = None,
        on_step: Callable[[StepReport], None] | None = None,
        fabric_file: Path | None = None,
        shard: Shard = WHOLE,
    ) -> None:
        self.intent = intent
        # A daemon of shard K/N collects, checks and applies on its own switches only, and
        # runs a probe only if its target host is in its shard (agent/intent/shard.py).
        self.shard = shard
        self.fabric_file = fabric_file  # the fault drill re-runs `apply` on this file
        self.pusher = Pusher.for_intent(intent, audit_dir)
        self.audit_dir = audit_dir
        self.on_step = on_step
        self.collected: Collected | None = None
        self.before: dict[str, QosState] = {}
        owned = shard.select(d.name for d in intent.devices if d.role != "host")
        self.switches = self.pusher.select(owned) if owned else []

    # ------------------------------------------------------------------ hosts

    def _hosts(self) -> list[Device]:
        return [d for d in self.intent.devices if d.role == "host"]

    def _leaf_of(self, host: Device) -> str | None:
        port = next((p for p in host.ports if p.peer), None)
        return port.peer.partition(":")[0] if port and port.peer else None

    def _incast_hosts(self, to: str, senders: list[str] | Literal["auto"]) -> tuple[str, list[str]]:
        hosts = self._hosts()
        if not hosts:
            raise AgentError("the fabric has no hosts to probe from")
        receiver = hosts[-1].name if to == "auto" else to
        if senders != "auto":
            return receiver, list(senders)
        leaf = self._leaf_of(next(h for h in hosts if h.name == receiver))
        remote = [h.name for h in hosts if h.name != receiver and self._leaf_of(h) != leaf]
        local = [h.name for h in hosts if h.name != receiver and h.name not in remote]
        chosen = (remote + local)[:2]
        if not chosen:
            raise AgentError("incast needs at least one host besides the receiver")
        return receiver, chosen

    # ------------------------------------------------------------------ steps

    def _collect(self, spec: CollectSpec) -> StepReport:
        earlier = self.collected
        switches = self.switches if spec.switches else []
        self.collected = collect(
            self.pusher, switches, spec.counters, spec.window_s, hosts=spec.hosts
        )
        if earlier is not None:
            self.collected.probes = list(earlier.probes)
        if spec.since_previous and earlier is not None:
            for name, data in self.collected.devices.items():
                old = earlier.devices.get(name)
                if old is not None and old.counters is not None and data.counters is not None:
                    data.previous = old.counters
        unreachable = {
            n: d.error
            for n, d in self.collected.devices.items()
            if d.error and d.device.role != "host"
        }
        if unreachable and len(unreachable) == len(switches):
            raise AgentError(
                "no switch could be read: " + "; ".join(map(str, unreachable.values()))
            )
        return StepReport(
            "collect",
            "collect",
            "success" if not unreachable else "failure",
            {"unreachable": unreachable},
        )

    def _checks(self, spec: ChecksSpec, report: Report) -> StepReport:
        if self.collected is None:
            self._collect(CollectSpec(window_s=0))
        assert self.collected is not None
        ids = step_check_ids(spec)
        results: list[CheckResult] = []
        for check_id in ids:
            check = CATALOG[check_id](spec.inputs.get(check_id))
            results.extend(check.run(self.collected))
        report.checks.extend(results)
        failed = [r for r in results if r.status in ("failure", "error", "unverified")]
        return StepReport(
            "checks",
            "checks",
            "failure" if failed else "success",
            {
                "checks": len(results),
                "failed": len(failed),
                "unverified": sum(r.status == "unverified" for r in results),
            },
        )

    def _not_ours(self, name: str, target: str, kind: str = "probe") -> StepReport | None:
        """A skipped step if another shard owns the probe whose target host is ``target``."""
        if self.shard.owns_probe(target):
            return None
        owner = f"{shard_index(target, self.shard.count)}/{self.shard.count}"
        return StepReport(name, kind, "skipped", {"target": target, "owner": owner})

    def _probe_target(self, spec: ProbeSpec) -> str:
        """The host that decides which shard runs the probe: the first host of a pairwise
        mesh, the receiver of an incast, the stormed host."""
        hosts = self._hosts()
        if not hosts:
            raise AgentError("the fabric has no hosts to probe from")
        if spec.scenario == "pairwise":
            return hosts[0].name
        if spec.scenario == "incast":
            return hosts[-1].name if spec.to == "auto" else spec.to
        return hosts[-1].name if spec.host == "auto" else spec.host

    def _probe(self, spec: ProbeSpec, report: Report) -> StepReport:
        if not self.shard.whole:
            skipped = self._not_ours(f"probe {spec.scenario}", self._probe_target(spec))
            if skipped is not None:
                return skipped
        rate = None
        if spec.rate:
            from agent.intent.units import parse_speed

            rate = parse_speed(spec.rate)
        if spec.scenario == "pairwise":
            result = scenarios.pairwise(self.intent, None, rate or 1_000_000, spec.duration_s)
        elif spec.scenario == "incast":
            to, senders = self._incast_hosts(spec.to, spec.senders)
            result = scenarios.incast(self.intent, to, senders, spec.duration_s, rate)
        else:
            hosts = self._hosts()
            host = hosts[-1].name if spec.host == "auto" else spec.host
            traffic = spec.traffic_from
            if traffic == "auto":
                traffic = next((h.name for h in hosts if h.name != host), None)
            result = scenarios.storm(self.intent, host, spec.duration_s, traffic_from=traffic)
        report.probes.append(result)
        if self.collected is not None:
            self.collected.probes.append(result)
        return StepReport(
            f"probe {spec.scenario}",
            "probe",
            "success" if result["passed"] else "failure",
            {
                "failures": result.get("failures", []),
                "totals": result.get("totals"),
                "transport": result.get("transport"),
            },
        )

    def _apply(self, spec: ApplySpec, report: Report) -> StepReport:
        if spec.devices == "canary":
            devices = self.switches[: spec.canary]
        elif spec.devices == "rest":
            devices = self.switches[spec.canary :]
        elif spec.devices == "all":
            devices = self.switches
        else:
            # Names of other shards' switches are theirs to apply; unknown names still fail.
            devices = [d for d in self.pusher.select(spec.devices) if self.shard.owns(d.name)]
        self.pusher.confirm_timeout_s = spec.confirm_timeout_s
        self.pusher.pending_policy = spec.pending
        self.pusher.pending_timeout_s = spec.pending_timeout_s
        results = self.pusher.apply_all(
            devices,
            Rollout(
                canary=min(spec.canary, len(devices)),
                batch_size=spec.batch_size,
                parallelism=spec.parallelism,
            ),
        )
        for result in results:
            # "unknown": the change may be live (its reply was lost and the switch could not
            # be read back), so a rollback must put it back too.
            if result.before is not None and result.result in ("applied", "unknown"):
                self.before.setdefault(result.device, result.before)
        report.applied.extend(results)
        bad = [
            r
            for r in results
            if r.result in ("failed", *NOT_CONNECTED, "skipped", "pending", "unknown")
        ]
        return StepReport(
            f"apply {spec.devices if isinstance(spec.devices, str) else 'devices'}",
            "apply",
            "failure" if bad else "success",
            {r.device: r.result for r in results},
        )

    def _sweep(self, spec: SweepSpec, report: Report) -> StepReport:
        to, senders = self._incast_hosts(spec.to, spec.senders)
        # The sweep is one experiment on the whole fabric (its candidates go to every
        # switch): run once, by the shard of its incast's receiver, like a probe.
        skipped = self._not_ours("ecn sweep", to, "ecn_sweep")
        if skipped is not None:
            return skipped
        original = self.intent
        candidates, notes = sweep_candidates(spec, original, to)
        runs: list[list[dict[str, Any]]] = [[] for _ in candidates]
        try:
            for _ in range(spec.repeats):
                for index, candidate in enumerate(candidates):
                    runs[index].append(self._sweep_run(original, candidate, to, senders, spec))
        finally:
            back = Pusher.for_intent(original, self.audit_dir)
            back.apply_all(back.select(()), Rollout(canary=0, batch_size=64))
        decided = sweep_recommendation(
            candidates, runs, spec.min_goodput_fraction, spec.max_paused_fraction
        )
        incast = LabIncast(to, senders, spec.duration_s)
        predicted = [predict_lab(with_setting(original, c), incast) for c in candidates]
        add_twin_prediction(
            decided,
            [measures for measures, _ in predicted],
            spec.min_goodput_fraction,
            [{"lost": r.lossless_drops, "cnps": r.cnps_received} for _, r in predicted],
        )
        for row, candidate in zip(decided["candidates"], candidates, strict=True):
            row["dcqcn_change"] = dcqcn_label(original, candidate)
        decided["incast"] = {"to": to, "from": senders, "duration_s": spec.duration_s,
                             "repeats": spec.repeats}  # fmt: skip
        decided["notes"] = notes
        decided["check"] = sweep_verdict(decided, spec)
        chosen = _chosen_candidate(decided)
        if chosen is not None:
            # What `apply --include-hosts` writes on a real host's NIC for it: the lab's
            # senders ran these values (agent.ops.sweep).
            setting = with_setting(original, candidates[chosen])
            decided["host_nic_lines"] = host_lines(setting, senders[0])
        report.recommendation = decided
        best = decided["recommended"]
        passed = decided["check"]["passed"] if decided["check"] else best is not None
        return StepReport("ecn sweep", "ecn_sweep", "success" if passed else "failure", decided)

    def _sweep_run(
        self,
        original: FabricIntent,
        candidate: EcnCandidate,
        to: str,
        senders: list[str],
        spec: SweepSpec,
    ) -> dict[str, Any]:
        """Push one setting (ECN to the switches, DCQCN in the hosts' plan, which the lab's
        senders run) and measure one incast with it."""
        intent = with_setting(original, candidate)
        pusher = Pusher.for_intent(intent, self.audit_dir)
        applied = pusher.apply_all(pusher.select(()), Rollout(canary=0, batch_size=64))
        if any(r.result not in ("applied", "no-change") for r in applied):
            raise AgentError(f"could not apply candidate {candidate.label()}")
        measured, result = measure_lab(intent, LabIncast(to, senders, spec.duration_s))
        totals = result["totals"]
        return {
            "lost": totals["lost"],
            "pfc_frames": totals["pfc_frames_received"],
            "paused_s": totals["paused_s"],
            "ce_marked": totals["ce_marked"],
            "cnps": totals["cnps_received"],
            "goodput_bps": result["receiver"]["goodput_bps"],
            **measured.as_dict(),
            # The 1-minute load average after the run: on a shared machine a loaded run
            # pauses more (the switches are user-space processes), and the report says so.
            "load": round(os.getloadavg()[0], 2),
        }

    # ------------------------------------------------------------------ run

    def run(self, playbook: Playbook, skip: Mapping[int, str] | None = None) -> Report:
        """Run the steps in order; a step whose index is in ``skip`` is not run and is
        reported as skipped with that reason (``validate --no-traffic``, ``--checks``)."""
        report = Report(playbook.name, self.intent.name, time.time())
        for index, step in enumerate(playbook.steps):
            if skip and index in skip:
                name = step.name or step.kind()
                outcome = StepReport(name, step.kind(), "skipped", {"reason": skip[index]})
            else:
                outcome = self._run_step(step, report)
            report.steps.append(outcome)
            if self.on_step:
                self.on_step(outcome)
            if outcome.status in ("failure", "error") and step.stop_on_failure:
                self._stop_after(playbook, index, report, skip or {})
                break
        return report

    def _run_step(self, step: Step, report: Report) -> StepReport:
        """One step, timed; an agent error is the step's outcome, not the run's end."""
        started = time.monotonic()
        kind = step.kind()
        try:
            outcome = self._runners(report)[kind](getattr(step, kind))
        except AgentError as exc:
            outcome = StepReport(kind, kind, "error", {"error": str(exc)})
        outcome.name = step.name or outcome.name
        outcome.duration_s = round(time.monotonic() - started, 3)
        return outcome

    def _runners(self, report: Report) -> dict[str, Callable[[Any], StepReport]]:
        """The runner of each kind of step (:data:`STEP_KINDS`), given the step's spec."""
        return {
            "collect": self._collect,
            "checks": lambda spec: self._checks(spec, report),
            "probe": lambda spec: self._probe(spec, report),
            "apply": lambda spec: self._apply(spec, report),
            "ecn_sweep": lambda spec: self._sweep(spec, report),
            "fault_drill": self._fault_drill,
            "locate": self._locate,
            "perftest": self._perftest,
            "nccl": self._nccl,
        }

    def _stop_after(
        self, playbook: Playbook, index: int, report: Report, skip: Mapping[int, str]
    ) -> None:
        """A step failed: the later steps are skipped, and what was applied is rolled back
        when the playbook asks for it. A step that was to be skipped anyway keeps its reason."""
        for later_index, later in enumerate(playbook.steps[index + 1 :], start=index + 1):
            detail = {"reason": skip[later_index]} if later_index in skip else {}
            name = later.name or later.kind()
            report.steps.append(StepReport(name, later.kind(), "skipped", detail))
        if playbook.rollback_on_failure and self.before:
            self._rollback(report)

    def _locate(self, spec: LocateSpec) -> StepReport:
        from agent.observe.locate.gather import as_json, run_locate

        # locate probes every host pair and reads every switch (reads only): one experiment
        # on the whole fabric, run once, by the shard of the mesh's first host, like pairwise.
        anchor = self._probe_target(ProbeSpec(scenario="pairwise"))
        skipped = self._not_ours("locate", anchor, "locate")
        if skipped is not None:
            return skipped
        run = run_locate(
            self.intent,
            duration_s=spec.duration_s,
            rate_per_host_bps=spec.rate_per_host_bps,
            load=spec.load,
        )
        status = "failure" if run.verdict.fault_found else "success"
        return StepReport("locate", "locate", status, as_json(run))

    def _perftest(self, spec: PerftestStepSpec) -> StepReport:
        from agent.observe.perftest.scenario import PerftestError, rdma_hosts, run_perftest

        name = f"perftest {spec.scenario}"
        hosts = [d.name for d in rdma_hosts(self.intent)]
        if len(hosts) < 2:
            reason = "fewer than two hosts declare an rdma_device: no perftest to run"
            return StepReport(name, "perftest", "skipped", {"reason": reason})
        # One experiment on the whole fabric, run by the shard of its receiver (incast) or of
        # the first RDMA host (pairs), as a probe is.
        anchor = hosts[0]
        if spec.scenario == "incast":
            anchor = hosts[-1] if spec.to == "auto" else spec.to
        skipped = self._not_ours(name, anchor, "perftest")
        if skipped is not None:
            return skipped
        pairs = (
            None
            if spec.pairs == "auto"
            else [(client, server) for client, _, server in (p.partition(":") for p in spec.pairs)]
        )
        try:
            report = run_perftest(
                self.intent,
                spec.scenario,
                pairs=pairs,
                to=None if spec.to == "auto" else spec.to,
                senders=None if spec.senders == "auto" else spec.senders,
                duration_s=spec.duration_s,
            )
        except PerftestError as exc:
            raise AgentError(str(exc)) from None
        status = "success" if report.passed else "failure"
        return StepReport(name, "perftest", status, report.as_json())

    def _nccl(self, spec: NcclStepSpec) -> StepReport:
        from agent.observe.nccltests.run import NcclProbeError, run_nccl_acceptance
        from agent.observe.perftest.scenario import rdma_hosts

        hosts = spec.hosts or [d.name for d in rdma_hosts(self.intent)]
        if not hosts:
            reason = "no host declares an rdma_device: no nccl-tests to run"
            return StepReport("nccl", "nccl", "skipped", {"reason": reason})
        # One experiment on the whole fabric, run by the shard of its first host, as perftest.
        skipped = self._not_ours("nccl", hosts[0], "nccl")
        if skipped is not None:
            return skipped
        changes: dict[str, Any] = {}
        if spec.tests is not None:
            changes["tests"] = spec.tests
        if spec.min_busbw_fraction is not None:
            changes["min_busbw_fraction"] = spec.min_busbw_fraction
        try:
            policy = self.intent.validation.nccl.model_validate(
                {**self.intent.validation.nccl.model_dump(), **changes}
            )
            report = run_nccl_acceptance(self.intent, hosts=spec.hosts, policy=policy)
        except (NcclProbeError, ValidationError) as exc:
            raise AgentError(str(exc)) from None
        if report.skipped is not None:
            return StepReport("nccl", "nccl", "skipped", report.as_json())
        status = "success" if report.passed else "failure"
        return StepReport("nccl", "nccl", status, report.as_json())

    def _fault_drill(self, spec: FaultDrillSpec) -> StepReport:
        from agent.ops import faultdrill

        if self.fabric_file is None or self.audit_dir is None:
            raise AgentError("fault_drill needs the fabric file and a state dir")
        drill = faultdrill.Drill(self.fabric_file, self.audit_dir, spec.confirm_timeout_s)
        rows = faultdrill.select_rows(
            None if spec.rows == "all" else list(spec.rows), spec.slow_delay_s, drill.platform
        )
        results = drill.run(faultdrill.resolve_rows(drill, rows))
        passed = all(r.passed for r in results)
        detail = {
            "matrix": faultdrill.matrix_rows(results),
            "rows": [r.as_dict() for r in results],
        }
        return StepReport("fault drill", "fault_drill", "success" if passed else "failure", detail)

    def _rollback(self, report: Report) -> None:
        known = {d.name: d for d in self.switches}
        for name, before in self.before.items():
            report.rolled_back.append(self.pusher.restore(known[name], before))


def _chosen_candidate(decided: dict[str, Any]) -> int | None:
    """The index of the sweep's setting a host's NIC would get: the recommendation the
    sweep checked, else the lab's pick, else none."""
    names = [row["name"] for row in decided["candidates"]]
    if RECOMMENDED in names:
        return names.index(RECOMMENDED)
    best = decided["recommended"]
    return None if best is None else int(decided["candidates"].index(best))

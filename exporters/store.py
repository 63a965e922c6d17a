"""The snapshot store: what pollers, probes and checks write, and what a scrape reads.

Every update builds a new immutable :class:`Snapshot` and swaps one reference under a lock, so
a scrape takes the current snapshot without locking and never waits for a device, a probe or a
poll in progress. Updates are rare (one per poll per device) next to what they replace, so
copy-on-write of the per-device map is cheap.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from agent import __version__
from agent.device.state import Counters, InterfaceCounters, PendingSession, UnreadFamily
from agent.errors import AgentError
from agent.intent.model import FabricIntent
from agent.intent.plan import Plan, build_plan
from agent.intent.shard import WHOLE, Shard
from agent.observe.hostnic import NicCounters
from agent.observe.locate.topology import Topology
from exporters.metrics import (
    CHECK_RESULTS,
    LOCATE_KINDS,
    NIC_ERROR_SOURCES,
    POLL_ERROR_REASONS,
    TELEMETRY_TRANSPORTS,
)
from exporters.probe_deltas import (
    BUCKET_BOUNDS,
    FlowDelta,
    HostDirectory,
    ProbeRun,
    parse_probe_result,
)
from exporters.probe_files import SKIP_REASONS

CHECK_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,40}")
# Result words of other tools (ANTA: success/failure) mapped onto ours.
RESULT_ALIASES = {
    "success": "pass",
    "passed": "pass",
    "ok": "pass",
    "failure": "fail",
    "failed": "fail",
    "skip": "skipped",
    "unset": "skipped",
}
FABRIC_WIDE = "fabric"


@dataclass(frozen=True)
class IntendedClass:
    interface: str
    priority: int
    pfc: bool
    ecn: bool


@dataclass(frozen=True)
class SwitchInventory:
    """What the fabric file says about one switch: its ports and intended classes."""

    device: str
    interfaces: tuple[str, ...]
    classes: tuple[IntendedClass, ...]

    @cached_property
    def lossless(self) -> Mapping[str, frozenset[int]]:
        """Per interface, the priorities the intent makes lossless (PFC on)."""
        out: dict[str, set[int]] = {}
        for cls in self.classes:
            if cls.pfc:
                out.setdefault(cls.interface, set()).add(cls.priority)
        return {name: frozenset(priorities) for name, priorities in out.items()}


@dataclass(frozen=True)
class DeviceStatus:
    up: bool = False
    polls: int = 0
    errors: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(POLL_ERROR_REASONS, 0))
    last_duration_s: float | None = None
    last_success_at: float | None = None
    last_error: str | None = None
    last_reason: str | None = None  # of POLL_ERROR_REASONS: why the latest poll failed
    transport: str | None = None  # of TELEMETRY_TRANSPORTS; None until decided

    @property
    def state(self) -> str:
        """One of :data:`exporters.metrics.DEVICE_STATES`: what is known of the device now."""
        if self.up:
            return "up"
        return self.last_reason or "not_polled_yet"


@dataclass(frozen=True)
class Complement:
    """Counter families a switch's gNMI stream does not carry, read over SSH instead (at the
    configuration read's pace): the latest such read, or why there is none."""

    families: frozenset[UnreadFamily]
    counters: Counters | None = None  # None: not read yet, or the latest read failed
    why: str = "not read over SSH yet"

    def fill(self, counters: Counters) -> Counters:
        """``counters`` with this complement's families taken from the SSH read, or marked
        not read (with why) where there is no usable one: per family, so one the SSH read
        could not read either (a switch that does not trim) leaves the others read."""
        unread = dict(counters.unread)
        taken: list[UnreadFamily] = []
        for family in sorted(self.families):
            why = self._why_not(counters, family)
            if why is None:
                unread.pop(family, None)
                taken.append(family)
            else:
                unread[family] = why
        if not taken:
            return counters.model_copy(update={"unread": unread})
        assert self.counters is not None
        read = self.counters.interfaces
        # A port the SSH read did not list reported no trim counter (the others are whole
        # tables: _why_not refuses those with a port missing).
        blank = InterfaceCounters()
        interfaces = {
            name: interface.model_copy(
                update={family: getattr(read.get(name, blank), family) for family in taken}
            )
            for name, interface in counters.interfaces.items()
        }
        update: dict[str, object] = {"interfaces": interfaces, "unread": unread}
        if "trim" in taken:
            update["trim_unread"] = self.counters.trim_unread
        return counters.model_copy(update=update)

    def _why_not(self, counters: Counters, family: UnreadFamily) -> str | None:
        if self.counters is None:
            return self.why
        # The whole-table families stand or fall together, as one read; trim on its own (a
        # switch that does not trim still has its headroom and watchdog counters).
        together = [family] if family == "trim" else sorted(self.families - {"trim"})
        for other in together:
            if other in self.counters.unread:
                return f"not read over SSH either: {self.counters.unread[other]}"
        missing = sorted(set(counters.interfaces) - set(self.counters.interfaces))
        if missing and family != "trim":
            return f"the SSH read did not report {', '.join(missing[:3])}"
        return None


@dataclass(frozen=True)
class DeviceView:
    inventory: SwitchInventory
    counters: Counters | None = None
    status: DeviceStatus = DeviceStatus()
    drift: int | None = None
    sessions_pending: int | None = None  # None: never read
    sessions_oldest_age_s: float | None = None
    # Per interface, priorities whose PFC, headroom or watchdog counter was ever non-zero.
    active: Mapping[str, frozenset[int]] = field(default_factory=dict)
    # Families a gNMI stream lacks, read over SSH (None: the transport reads them all).
    complement: Complement | None = None

    def interface_names(self) -> list[str]:
        """The interfaces the device reported in its latest successful poll: fabric ports in
        fabric order, then the others sorted. None before the first successful poll: nothing
        is invented for a port the device did not report."""
        if self.counters is None:
            return []
        reported = self.counters.interfaces
        names = [n for n in self.inventory.interfaces if n in reported]
        known = set(names)
        names += sorted(n for n in reported if n not in known)
        return names

    def priorities(self, interface: str) -> tuple[int, ...]:
        """The priorities that get PFC, headroom and watchdog series on ``interface``: those
        the intent makes lossless, plus every one whose counter was ever non-zero."""
        lossless = self.inventory.lossless.get(interface, frozenset())
        active = self.active.get(interface, frozenset())
        return tuple(sorted(lossless | active)) if active else tuple(sorted(lossless))


def _nonzero(counters: InterfaceCounters) -> frozenset[int]:
    """Priorities with a non-zero per-priority PFC, headroom or watchdog counter."""
    found = {p for p, value in enumerate(counters.pfc_rx) if value}
    found.update(p for p, value in enumerate(counters.pfc_tx) if value)
    found.update(p for p, value in enumerate(counters.headroom_drops) if value)
    found.update(
        p
        for p, w in counters.watchdog.items()
        if w.storms_detected or w.storms_restored or w.stormed
    )
    return frozenset(found)


def _merge_active(
    active: Mapping[str, frozenset[int]], counters: Counters
) -> Mapping[str, frozenset[int]]:
    # Kept forever once seen: a series that appeared must not vanish when its counter is
    # cleared, or rate() and increase() would see it disappear and reappear.
    merged = dict(active)
    for name, interface in counters.interfaces.items():
        found = _nonzero(interface)
        if found and not found <= merged.get(name, frozenset()):
            merged[name] = merged.get(name, frozenset()) | found
    return merged if merged != active else active


@dataclass(frozen=True)
class FlowTotals:
    """A flow's running totals over probe runs: a count only where some result carried it,
    latency only once some result carried samples (None: never read, so no series)."""

    counts: Mapping[str, int] = field(default_factory=dict)  # of probe_deltas.FLOW_COUNTS
    latency_buckets: tuple[int, ...] | None = None  # per bucket, not cumulative
    latency_sum_s: float = 0.0
    latency_count: int = 0
    last_run_lost: int | None = None


@dataclass(frozen=True)
class ProbeTotals:
    flows: Mapping[tuple[str, str, str], FlowTotals] = field(default_factory=dict)
    invalid: Mapping[tuple[str, str], int] = field(default_factory=dict)
    paused_s: Mapping[tuple[str, str, int], float] = field(default_factory=dict)
    runs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    last_run_at: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckOutcome:
    """One check's latest result on one device (``device`` "" for fabric-wide checks)."""

    check: str
    device: str
    result: str  # pass | fail | error | skipped (success/failure accepted)


@dataclass(frozen=True)
class LocateResult:
    """The latest locate run: only it is served, so a suspect a later run clears is gone."""

    at: float
    paths: int
    bad_paths: int
    suspects: Mapping[tuple[str, str], float]  # (kind, element) -> confidence


@dataclass(frozen=True)
class LocateElements:
    """Per suspect kind, every name a locate run may give an element of this fabric: what
    :mod:`agent.observe.locate.rank` names, built from the same :class:`Topology`. A suspect label
    outside
    these sets is refused, so a label value can only ever be a name of the fabric file."""

    by_kind: Mapping[str, frozenset[str]]

    @classmethod
    def from_intent(cls, intent: FabricIntent) -> LocateElements:
        topology = Topology.from_intent(intent)
        switches = [d for d in intent.devices if d.role != "host"]
        return cls(
            {
                "link": frozenset(topology.links)
                | frozenset(link.cable for link in topology.links.values()),
                "port": frozenset(f"{d.name}:{p.name}" for d in switches for p in d.ports),
                "switch": frozenset(d.name for d in switches),
                "host-nic": frozenset(d.name for d in intent.devices if d.role == "host"),
                # host delay, not the network (agent.observe.locate.rank._host_delay)
                "host": frozenset(d.name for d in intent.devices if d.role == "host"),
            }
        )


LOCATE_SHAPES = {
    "link": "a directed link (leaf1:Ethernet3>spine1, h1>leaf1) or a cable (a:p<>b:q)",
    "port": "a switch port (leaf1:Ethernet3)",
    "switch": "a switch name",
    "host-nic": "a host name",
    "host": "a host name",
}


@dataclass(frozen=True)
class Snapshot:
    fabric: str
    version: str
    devices: Mapping[str, DeviceView]
    probes: ProbeTotals = ProbeTotals()
    checks: Mapping[tuple[str, str], str] = field(default_factory=dict)
    checks_at: float | None = None
    nic: NicCounters | None = None
    nic_errors: Mapping[str, int] = field(default_factory=dict)
    host_drift: Mapping[str, int] = field(default_factory=dict)  # drift of non-switch devices
    # Probe result files skipped, by reason; empty when no results directory is read.
    probe_files_skipped: Mapping[str, int] = field(default_factory=dict)
    generation: int = 0
    shard: str = str(WHOLE)
    owned_devices: int = 0  # fabric devices (switches and hosts) this exporter owns
    locate: LocateResult | None = None


class StoreError(AgentError):
    """An update the store refuses (unknown device, unknown result word)."""


def _oldest(sessions: Sequence[PendingSession]) -> float | None:
    """The oldest pending change's age; 0 with none; None when none of them has an age."""
    if not sessions:
        return 0.0
    ages = [s.age_s for s in sessions if s.age_s is not None]
    return max(ages) if ages else None


def inventory_from_plan(plan: Plan) -> list[SwitchInventory]:
    """Switches (every device but hosts) with their ports and intended classes."""
    switches = []
    for device in plan.devices:
        if device.role == "host":
            continue
        classes = []
        for port in device.ports:
            marked = {ecn.queue for ecn in port.ecn}
            for priority in range(8):
                classes.append(
                    IntendedClass(
                        port.name, priority, priority in port.pfc_priorities, priority in marked
                    )
                )
        switches.append(
            SwitchInventory(device.name, tuple(p.name for p in device.ports), tuple(classes))
        )
    return switches


def host_directory(intent: FabricIntent) -> HostDirectory:
    hosts = [d for d in intent.devices if d.role == "host"]
    by_ip = {str(p.ipv4.ip): d.name for d in hosts for p in d.ports if p.ipv4 is not None}
    return HostDirectory(frozenset(d.name for d in hosts), by_ip, intent.profile.roce.priority)


@dataclass(frozen=True)
class ConfigRead:
    """What a poll read of a switch's configuration besides its counters: how many settings
    differ from the plan, and its pending sessions. None: not read by this poll (the last
    values stay)."""

    drift: int | None = None
    sessions: Sequence[PendingSession] | None = None

    def changes(self) -> dict[str, Any]:
        """The device view's fields this read changes."""
        changed: dict[str, Any] = {}
        if self.drift is not None:
            changed["drift"] = self.drift
        if self.sessions is not None:
            changed["sessions_pending"] = len(self.sessions)
            changed["sessions_oldest_age_s"] = _oldest(self.sessions)
        return changed


@dataclass(frozen=True)
class FabricIndex:
    """What the store checks fed results against besides its switches: the hosts (probe
    results name them, or their addresses), every device's name (drift and check results
    may be about any) and the elements locate can blame. Empty: a store that accepts only
    its switches' results."""

    hosts: HostDirectory = field(default_factory=lambda: HostDirectory(frozenset(), {}, 3))
    device_names: Iterable[str] = ()
    locate_elements: LocateElements = field(default_factory=lambda: LocateElements({}))


class SnapshotStore:
    """Thread-safe owner of the current :class:`Snapshot`."""

    def __init__(
        self,
        fabric: str,
        switches: Iterable[SwitchInventory],
        index: FabricIndex | None = None,
        shard: Shard = WHOLE,
    ) -> None:
        index = index or FabricIndex()
        views = {s.device: DeviceView(s) for s in switches if shard.owns(s.device)}
        self._lock = threading.Lock()
        self._hosts = index.hosts
        # Every fabric device this shard owns may carry drift or check results (hosts too).
        self._known_devices = frozenset(views) | frozenset(shard.select(index.device_names))
        self._shard = shard
        # Locate judges the whole fabric, whatever the shard: its elements are the fabric's.
        self._locate_elements = index.locate_elements
        self._snapshot = Snapshot(
            fabric=fabric,
            version=__version__,
            devices=views,
            shard=str(shard),
            owned_devices=len(self._known_devices),
        )

    @classmethod
    def for_fabric(
        cls, intent: FabricIntent, plan: Plan | None = None, shard: Shard = WHOLE
    ) -> SnapshotStore:
        plan = plan or build_plan(intent)
        index = FabricIndex(
            host_directory(intent),
            tuple(d.name for d in intent.devices),
            LocateElements.from_intent(intent),
        )
        return cls(intent.name, inventory_from_plan(plan), index, shard)

    def _unknown(self, what: str, device: str) -> StoreError:
        where = f"fabric {self._snapshot.fabric}"
        if not self._shard.whole:
            where += f" shard {self._shard}"
        return StoreError(f"no {what} named {device!r} in {where}")

    def snapshot(self) -> Snapshot:
        """The current snapshot (immutable: safe to read without a lock)."""
        return self._snapshot

    def _swap(self, **changes: Any) -> None:
        """Replace fields of the snapshot; callers hold the lock."""
        current = self._snapshot
        self._snapshot = replace(current, generation=current.generation + 1, **changes)

    def _view(self, device: str) -> DeviceView:
        view = self._snapshot.devices.get(device)
        if view is None:
            raise self._unknown("switch", device)
        return view

    def _put(self, device: str, view: DeviceView) -> None:
        self._swap(devices={**self._snapshot.devices, device: view})

    # ------------------------------------------------------------------ switches

    def update_counters(
        self,
        device: str,
        counters: Counters,
        duration_s: float | None,
        config: ConfigRead | None = None,
        at: float | None = None,
    ) -> None:
        """A successful poll: new counters, the device is up (and, when read, its drift and
        pending sessions)."""
        config = config or ConfigRead()
        with self._lock:
            view = self._view(device)
            if view.complement is not None:
                counters = view.complement.fill(counters)
            status = replace(
                view.status,
                up=True,
                polls=view.status.polls + 1,
                last_duration_s=duration_s,
                last_success_at=at if at is not None else time.time(),
                last_error=None,
                last_reason=None,
            )
            self._put(device, replace(view, counters=counters, status=status,
                                      active=_merge_active(view.active, counters),
                                      **config.changes()))  # fmt: skip

    def complete_sample(self, device: str, counters: Counters, at: float) -> None:
        """The rest of a sample already counted by :meth:`update_counters` (a stream's sample
        that arrived in parts): its counters replace the partial ones, no new poll."""
        with self._lock:
            view = self._view(device)
            if view.complement is not None:
                counters = view.complement.fill(counters)
            status = replace(view.status, up=True, last_success_at=at,
                             last_error=None, last_reason=None)  # fmt: skip
            self._put(device, replace(view, counters=counters, status=status,
                                      active=_merge_active(view.active, counters)))  # fmt: skip

    def set_complement(self, device: str, complement: Complement) -> None:
        """The SSH read of the families ``device``'s stream lacks: its latest result (or, with
        ``counters`` None, why there is none). The device's counters take it at once."""
        with self._lock:
            view = self._view(device)
            counters = view.counters
            if counters is not None:
                counters = complement.fill(counters)
            self._put(device, replace(view, complement=complement, counters=counters,
                                      active=_merge_active(view.active, counters)
                                      if counters is not None else view.active))  # fmt: skip

    def update_config(self, device: str, config: ConfigRead) -> None:
        """A configuration-only read (drift, pending sessions) of a switch whose counters come
        from another transport: its up state and counters stay as they are."""
        with self._lock:
            view = self._view(device)
            self._put(device, replace(view, **config.changes()))

    def record_poll_failure(
        self, device: str, reason: str, duration_s: float | None, error: str = ""
    ) -> None:
        """A failed poll: the device is down; its last counters stay (they are monotonic)."""
        if reason not in POLL_ERROR_REASONS:
            reason = "other"
        with self._lock:
            view = self._view(device)
            errors = dict(view.status.errors)
            errors[reason] += 1
            status = replace(
                view.status,
                up=False,
                polls=view.status.polls + 1,
                errors=errors,
                last_duration_s=duration_s,
                last_error=error or reason,
                last_reason=reason,
            )
            self._put(device, replace(view, status=status))

    def set_transport(self, device: str, transport: str) -> None:
        """How the device's counters are read from now on (gnmi or ssh)."""
        if transport not in TELEMETRY_TRANSPORTS:
            raise StoreError(
                f"transport of {device}: {transport!r} is not one of "
                f"{', '.join(TELEMETRY_TRANSPORTS)}"
            )
        with self._lock:
            view = self._view(device)
            self._put(device, replace(view, status=replace(view.status, transport=transport)))

    # ------------------------------------------------------------------ compliance

    def update_drift(self, device: str, items: int) -> None:
        """How many settings of ``device`` differ from the plan."""
        if items < 0:
            raise StoreError(f"drift of {device} cannot be negative ({items})")
        with self._lock:
            if device not in self._known_devices:
                raise self._unknown("device", device)
            view = self._snapshot.devices.get(device)
            if view is not None:
                self._put(device, replace(view, drift=items))
            else:  # a host: drift without counters
                self._swap(host_drift={**self._snapshot.host_drift, device: items})

    def update_checks(self, outcomes: Iterable[CheckOutcome], replace_all: bool = True) -> None:
        """The latest check results. ``replace_all`` drops results not in ``outcomes`` (a full
        validation run); False merges them (one check re-run)."""
        fresh: dict[tuple[str, str], str] = {}
        for outcome in outcomes:
            if not CHECK_ID_RE.fullmatch(outcome.check):
                raise StoreError(f"check ID {outcome.check!r} is not a short identifier")
            device = outcome.device or FABRIC_WIDE
            if device != FABRIC_WIDE and device not in self._known_devices:
                raise StoreError(f"check {outcome.check}: {self._unknown('device', device)}")
            result = RESULT_ALIASES.get(outcome.result.lower(), outcome.result.lower())
            if result not in CHECK_RESULTS:
                raise StoreError(
                    f"check {outcome.check}: result {outcome.result!r} is not one of "
                    f"{', '.join(CHECK_RESULTS)}"
                )
            fresh[(outcome.check, device)] = result
        with self._lock:
            merged = fresh if replace_all else {**self._snapshot.checks, **fresh}
            self._swap(checks=merged, checks_at=time.time())

    # ------------------------------------------------------------------ probes

    def update_probe(self, result: Mapping[str, Any], at: float | None = None) -> None:
        """Add one probe result (scenario or receiver JSON) to the running probe totals."""
        run = parse_probe_result(result, self._hosts)
        with self._lock:
            self._swap(probes=_merge_probe(self._snapshot.probes, run, at or time.time()))

    # ------------------------------------------------------------------ locate

    def update_locate(self, result: Mapping[str, Any], at: float | None = None) -> None:
        """The latest locate run (``agent.observe.locate.gather.as_json``); it replaces the previous
        one whole. Refused, with nothing changed, when any part of it does not fit."""
        fabric = self._snapshot.fabric
        paths, bad_paths, suspects = parse_locate(result, self._locate_elements, fabric)
        with self._lock:
            self._swap(
                locate=LocateResult(
                    at if at is not None else time.time(), paths, bad_paths, suspects
                )
            )

    # ------------------------------------------------------------------ host NIC

    def update_nic(self, nic: NicCounters) -> None:
        with self._lock:
            self._swap(nic=nic)

    def record_nic_failure(self, source: str) -> None:
        self._count("nic_errors", NIC_ERROR_SOURCES, source, "NIC counter source")

    def enable_nic(self) -> None:
        """Declare host NIC collection on, so its error counters exist from the first scrape."""
        self._enable("nic_errors", NIC_ERROR_SOURCES)

    # ------------------------------------------------------------------ probe result files

    def enable_probe_files(self) -> None:
        """Declare a probe results directory read, so its skip counts exist from the start."""
        self._enable("probe_files_skipped", SKIP_REASONS)

    def record_probe_file_skipped(self, reason: str) -> None:
        self._count("probe_files_skipped", SKIP_REASONS, reason, "reason for a skipped file")

    # ------------------------------------------------------------------ the exporter's counts

    def _enable(self, name: str, keys: tuple[str, ...]) -> None:
        """Counts of the exporter's own events, 0 for each key from now on (real zeros: the
        events were watched for and did not happen)."""
        with self._lock:
            if not getattr(self._snapshot, name):
                self._swap(**{name: dict.fromkeys(keys, 0)})

    def _count(self, name: str, keys: tuple[str, ...], key: str, what: str) -> None:
        if key not in keys:
            raise StoreError(f"unknown {what} {key!r}")
        with self._lock:
            counts = {**dict.fromkeys(keys, 0), **getattr(self._snapshot, name)}
            counts[key] += 1
            self._swap(**{name: counts})


def _merge_probe(totals: ProbeTotals, run: ProbeRun, at: float) -> ProbeTotals:
    flows = dict(totals.flows)
    for (src, dst), delta in run.flows.items():
        key = (run.scenario, src, dst)
        flows[key] = _merge_flow(flows.get(key, FlowTotals()), delta)
    invalid = dict(totals.invalid)
    for host, count in run.invalid.items():
        invalid[(run.scenario, host)] = invalid.get((run.scenario, host), 0) + count
    paused = dict(totals.paused_s)
    # Only the priorities a result measured (0 included): a priority nobody measured on a
    # host has no series rather than 0 s.
    for (host, priority), seconds in run.paused_s.items():
        slot = (run.scenario, host, priority)
        paused[slot] = paused.get(slot, 0.0) + seconds
    runs = dict(totals.runs)
    if run.passed is not None:
        for verdict in ("pass", "fail"):
            runs.setdefault((run.scenario, verdict), 0)
        runs[(run.scenario, "pass" if run.passed else "fail")] += 1
    return ProbeTotals(
        flows=flows,
        invalid=invalid,
        paused_s=paused,
        runs=runs,
        last_run_at={**totals.last_run_at, run.scenario: at},
    )


def _merge_flow(old: FlowTotals, delta: FlowDelta) -> FlowTotals:
    counts = dict(old.counts)
    for key, value in delta.counts.items():
        counts[key] = counts.get(key, 0) + value
    buckets = old.latency_buckets
    if delta.latency_buckets is not None:
        buckets = tuple(
            a + b
            for a, b in zip(
                buckets or (0,) * len(BUCKET_BOUNDS), delta.latency_buckets, strict=True
            )
        )
    return FlowTotals(
        counts=counts,
        latency_buckets=buckets,
        latency_sum_s=old.latency_sum_s + delta.latency_sum_s,
        latency_count=old.latency_count + delta.latency_count,
        # The latest run's loss, when it carried one; else the flow has no such figure.
        last_run_lost=delta.counts.get("lost"),
    )


def _count(result: Mapping[str, Any], key: str) -> int:
    value = result.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreError(
            f"locate result {key}: Expected: a count (an integer >= 0). Actual: {_shown(value)}"
        )
    return value


def _shown(value: Any) -> str:
    """A value for an error message, cut short: the input may be anything."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_locate(
    result: Mapping[str, Any], elements: LocateElements, fabric: str
) -> tuple[int, int, dict[tuple[str, str], float]]:
    """Paths, bad paths and ``{(kind, element): confidence}`` of one locate run, or a
    :class:`StoreError` naming the first field that is wrong."""
    if not isinstance(result, Mapping):
        raise StoreError(
            "locate result: Expected: a JSON object (`roce-agent locate --output json`). "
            f"Actual: {type(result).__name__}"
        )
    paths, bad_paths = _count(result, "paths"), _count(result, "bad_paths")
    if bad_paths > paths:
        raise StoreError(
            f"locate result bad_paths: Expected: at most paths ({paths}). Actual: {bad_paths}"
        )
    listed = result.get("suspects")
    if not isinstance(listed, list):
        raise StoreError(f"locate result suspects: Expected: a list. Actual: {_shown(listed)}")
    suspects: dict[tuple[str, str], float] = {}
    for index, item in enumerate(listed):
        where = f"locate result suspects[{index}]"
        if not isinstance(item, Mapping):
            raise StoreError(f"{where}: Expected: an object. Actual: {_shown(item)}")
        kind = item.get("kind")
        if kind not in LOCATE_KINDS:
            raise StoreError(
                f"{where}.kind: Expected: one of {', '.join(LOCATE_KINDS)}. Actual: {_shown(kind)}"
            )
        element = item.get("element")
        if not isinstance(element, str) or element not in elements.by_kind.get(kind, ()):
            raise StoreError(
                f"{where}.element: Expected: {LOCATE_SHAPES[kind]} of fabric {fabric}. "
                f"Actual: {_shown(element)}"
            )
        confidence = item.get("confidence")
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not math.isfinite(confidence)
            or not 0 <= confidence <= 1
        ):
            raise StoreError(
                f"{where}.confidence: Expected: a number from 0 to 1. Actual: {_shown(confidence)}"
            )
        # One element named twice (by a counter and by the config read) is one series.
        suspects[(kind, element)] = max(float(confidence), suspects.get((kind, element), 0.0))
    return paths, bad_paths, suspects

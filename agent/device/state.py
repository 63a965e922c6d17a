"""Normalized device state and counters: what every platform reads into, and diffs against.

``QosState`` is the lossless configuration of one device in vendor-neutral terms (traffic
class = priority = egress queue, as every profile here uses). The desired state comes from the
plan (:func:`desired_state`); each platform's ``read_state`` parses the device into the same
model, and :func:`diff` compares the two setting by setting. ``Counters`` is the normalized
counter snapshot the exporter and the counter checks use.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.intent.plan import DevicePlan
from common.text import natural_item_key

PRIORITIES = range(8)
DSCPS = range(64)


class StateModel(BaseModel):
    model_config = ConfigDict(frozen=True)


class EcnState(StateModel):
    min_bytes: int
    max_bytes: int
    max_probability: int


class QueueState(StateModel):
    ecn: EcnState | None = None
    strict: bool = False
    bandwidth_percent: int | None = None


class WatchdogState(StateModel):
    enabled: bool = False
    detection_ms: int | None = None
    restoration_ms: int | None = None
    polling_ms: int | None = None
    action: str | None = None  # drop | forward | alert


class TrimState(StateModel):
    """Packet trimming on the switch: trimmed frames keep ``size_bytes`` and leave re-marked
    ``dscp`` in the queue of ``priority``."""

    size_bytes: int
    dscp: int | None  # None: derived from the traffic class (SONiC's "from-tc")
    priority: int | None  # None: the queue follows the DSCP (SONiC's "dynamic")

    def text(self) -> str:
        dscp = "from the TC" if self.dscp is None else self.dscp
        queue = "from the DSCP" if self.priority is None else self.priority
        return f"{self.size_bytes} B, DSCP {dscp}, priority {queue}"


class InterfaceState(StateModel):
    pfc_enabled: bool = False
    pfc_priorities: tuple[int, ...] = ()
    queues: dict[int, QueueState] = Field(default_factory=dict)
    # Egress queues whose frames the switch trims instead of dropping (packet trimming).
    trim_queues: tuple[int, ...] = ()
    # The interface's effective trust, when the platform reads it per interface (EOS); the
    # plan has one trust per device, so desired states leave it None.
    trust: str | None = None
    # QoS classification rules applied on the interface that match UDP ports (e.g. an ACL on
    # "udp ... eq 4791" setting a traffic class), as the platform describes them. The agent
    # never configures any (RoCE is classified by DSCP), so desired states leave it empty and
    # diff does not compare it; check RC010 reports them.
    udp_port_classifiers: tuple[str, ...] = ()


class QosState(StateModel):
    """The QoS configuration of one device, normalized."""

    trust: str = "none"  # dscp | pcp | none
    dscp_to_priority: dict[int, int] = Field(default_factory=dict)  # all 64 DSCPs
    watchdog: WatchdogState = WatchdogState()
    interfaces: dict[str, InterfaceState] = Field(default_factory=dict)
    trim: TrimState | None = None  # None: packet trimming off (or not a platform that trims)


def full_dscp_map(non_default: dict[int, int], default_priority: int) -> dict[int, int]:
    return {dscp: non_default.get(dscp, default_priority) for dscp in DSCPS}


def desired_state(device: DevicePlan) -> QosState:
    """The state a switch must be in for the plan: every fabric port lossless."""
    interfaces = {}
    for port in device.ports:
        queues: dict[int, QueueState] = {}
        for queue in PRIORITIES:
            ecn = next((e for e in port.ecn if e.queue == queue), None)
            strict = queue in device.ets.strict
            weight = device.ets.weights.get(queue)
            if ecn is None and not strict and weight is None:
                continue
            queues[queue] = QueueState(
                ecn=EcnState(
                    min_bytes=ecn.min_bytes,
                    max_bytes=ecn.max_bytes,
                    max_probability=ecn.max_probability,
                )
                if ecn
                else None,
                strict=strict,
                bandwidth_percent=None if strict else weight,
            )
        interfaces[port.name] = InterfaceState(
            pfc_enabled=bool(port.pfc_priorities),
            pfc_priorities=tuple(port.pfc_priorities),
            queues=queues,
            trim_queues=_trim_queues(device),
        )
    watchdog = device.watchdog
    return QosState(
        trust=device.trust,
        dscp_to_priority=full_dscp_map(device.dscp_to_priority, device.default_priority),
        watchdog=WatchdogState(
            enabled=watchdog.enabled,
            detection_ms=watchdog.detection_ms if watchdog.enabled else None,
            restoration_ms=watchdog.restoration_ms if watchdog.enabled else None,
            polling_ms=watchdog.polling_ms if watchdog.enabled else None,
            action=watchdog.action if watchdog.enabled else None,
        ),
        interfaces=interfaces,
        trim=_trim_state(device),
    )


def _trim_queues(device: DevicePlan) -> tuple[int, ...]:
    return tuple(device.trim.queues) if device.trim else ()


def _trim_state(device: DevicePlan) -> TrimState | None:
    trim = device.trim
    if trim is None:
        return None
    return TrimState(size_bytes=trim.size_bytes, dscp=trim.dscp, priority=trim.priority)


@dataclass(frozen=True)
class Difference:
    """One setting that is not as intended."""

    device: str
    interface: str  # "" for device-wide settings
    setting: str
    expected: Any
    actual: Any

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "interface": self.interface or None,
            "setting": self.setting,
            "expected": self.expected,
            "actual": self.actual,
        }

    def __str__(self) -> str:
        where = f"{self.device} {self.interface}".strip()
        return f"{where}: {self.setting}: Expected: {self.expected} Actual: {self.actual}"


def _queue_items(queue: QueueState | None) -> dict[str, Any]:
    queue = queue or QueueState()
    ecn = queue.ecn
    return {
        "ecn": None if ecn is None else f"{ecn.min_bytes}-{ecn.max_bytes}@{ecn.max_probability}%",
        "strict": queue.strict,
        "bandwidth_percent": queue.bandwidth_percent,
    }


def _watchdog_fields(desired: QosState) -> tuple[str, ...]:
    """The watchdog settings the plan cares about: all of them when it is on; else only that
    it is off, except for a trimming class with PFC on no port, where none: the watchdog
    watches paused queues and nothing pauses, so whatever the switch has is moot."""
    if desired.watchdog.enabled:
        return ("enabled", "detection_ms", "restoration_ms", "polling_ms", "action")
    if any(i.pfc_priorities for i in desired.interfaces.values()) or desired.trim is None:
        return ("enabled",)
    return ()


def _trim_text(trim: TrimState | None) -> str:
    return "off" if trim is None else trim.text()


def diff(
    device: str, desired: QosState, actual: QosState, managed: frozenset[str] | None = None
) -> list[Difference]:
    """Every setting of ``desired`` that ``actual`` does not match.

    Only interfaces the plan names are compared (others are not ours). ``managed`` limits the
    comparison to settings the platform can configure (e.g. no watchdog polling interval).
    """

    def wanted(setting: str) -> bool:
        return managed is None or setting.split("[")[0].split(".")[0] in managed

    found: list[Difference] = []

    def check(interface: str, setting: str, expected: Any, got: Any) -> None:
        if expected != got and wanted(setting):
            found.append(Difference(device, interface, setting, expected, got))

    per_interface = {
        name: have.trust
        for name, have in actual.interfaces.items()
        if name in desired.interfaces and have.trust is not None
    }
    if actual.trust == "mixed" and per_interface:
        # Name the interfaces that differ, not just "mixed": a port trusting CoS sends RoCE
        # to a lossy class, and the operator (and `locate`) need to know which one.
        for name, trust in sorted(per_interface.items(), key=natural_item_key):
            check(name, "trust", desired.trust, trust)
    else:
        check("", "trust", desired.trust, actual.trust)
    for dscp in DSCPS:
        check(
            "",
            f"dscp_to_priority[{dscp}]",
            desired.dscp_to_priority.get(dscp),
            actual.dscp_to_priority.get(dscp),
        )
    for field in _watchdog_fields(desired):
        expected = getattr(desired.watchdog, field)
        check("", f"watchdog.{field}", expected, getattr(actual.watchdog, field))
    check("", "trim", _trim_text(desired.trim), _trim_text(actual.trim))
    for name, want in desired.interfaces.items():
        have = actual.interfaces.get(name)
        if have is None:
            found.append(Difference(device, name, "interface", "present", "missing"))
            continue
        check(name, "pfc_enabled", want.pfc_enabled, have.pfc_enabled)
        check(name, "pfc_priorities", list(want.pfc_priorities), list(have.pfc_priorities))
        check(name, "trim_queues", list(want.trim_queues), list(have.trim_queues))
        for queue in PRIORITIES:
            mine = _queue_items(want.queues.get(queue))
            theirs = _queue_items(have.queues.get(queue))
            for key in mine:
                check(name, f"queue[{queue}].{key}", mine[key], theirs[key])
    return found


# --------------------------------------------------------------------------- counters


class QueueCounters(StateModel):
    tx_packets: int = 0
    tx_bytes: int = 0
    dropped_packets: int = 0
    ecn_marked_packets: int = 0
    watermark_bytes: int | None = None


class WatchdogCounters(StateModel):
    storms_detected: int = 0
    storms_restored: int = 0
    stormed: bool = False


TrimColumn = Literal["trimmed", "sent", "dropped"]
TRIM_COLUMNS: tuple[TrimColumn, ...] = ("trimmed", "sent", "dropped")


class TrimCounters(StateModel):
    """Packet trimming counters (SAI ``*_TRIM_PACKETS``, OpenConfig ``trim-pkts``): frames
    trimmed instead of dropped (sent + dropped), trimmed frames sent, trimmed frames dropped
    at the trim queue. None: the device did not report that column (never a 0 for it)."""

    trimmed: int | None = None
    sent: int | None = None
    dropped: int | None = None


class InterfaceTrim(StateModel):
    """One interface's trim counters: the whole port and per egress queue, as reported."""

    port: TrimCounters | None = None  # None: no port-level figure reported
    queues: dict[int, TrimCounters] = Field(default_factory=dict)


class InterfaceCounters(StateModel):
    pfc_rx: tuple[int, ...] = (0,) * 8
    pfc_tx: tuple[int, ...] = (0,) * 8
    queues: dict[int, QueueCounters] = Field(default_factory=dict)
    watchdog: dict[int, WatchdogCounters] = Field(default_factory=dict)
    headroom_drops: tuple[int, ...] = (0,) * 8
    trim: InterfaceTrim = InterfaceTrim()


class LinkHealth(StateModel):
    """One interface's link: up or not (None: not reported) and its error counters
    (monotonic, as the device reports them)."""

    up: bool | None = None
    fcs_errors: int = 0
    in_errors: int = 0
    out_errors: int = 0


UnreadFamily = Literal["headroom_drops", "watchdog", "trim"]


class Counters(StateModel):
    """A counter snapshot of one device (monotonic counters, as the device reports them)."""

    device: str
    collected_at: float
    interfaces: dict[str, InterfaceCounters] = Field(default_factory=dict)
    # Counter families the transport did not read, with why (a NOS that does not publish
    # them over gNMI): their fields hold no reading, so no series is made from them.
    unread: dict[UnreadFamily, str] = Field(default_factory=dict)
    # Trim columns the device did not report anywhere, with why (a release without the
    # column, N/A on this ASIC): the family was read, these columns of it were not.
    trim_unread: dict[TrimColumn, str] = Field(default_factory=dict)

    def queue_items(self) -> Iterator[tuple[str, int, QueueCounters]]:
        for name, interface in sorted(self.interfaces.items(), key=natural_item_key):
            for queue, counters in sorted(interface.queues.items()):
                yield name, queue, counters


@dataclass(frozen=True)
class PendingSession:
    """A change on a device that is not final yet: it can still be confirmed, committed or
    rolled back, so the device's running state is not settled while it exists.

    ``kind`` says what the NOS calls it (EOS session, NX-OS checkpoint, SONiC rollback timer,
    NVUE pending revision, host write-ahead record). ``live`` is True when the change is
    already in the running state and will be undone by itself (``rollback_in_s``); False for
    an edit buffer that changes nothing until someone commits it.
    """

    device: str
    name: str
    kind: str
    state: str
    user: str | None = None
    age_s: float | None = None
    rollback_in_s: float | None = None
    live: bool = False
    # False where nothing on the device will ever undo it (a SONiC checkpoint
    # without its timer): waiting for such a change is futile.
    rolls_back: bool = True

    @property
    def ours(self) -> bool:
        """Named like the agent's own sessions (``roce-agent-*``): a claim, checked against
        the write-ahead audit before the agent acts on it as its own."""
        return self.name.startswith("roce-agent-")

    def describe(self) -> str:
        parts = [f"{self.kind} {self.name!r} ({self.state}"]
        if self.user:
            parts.append(f", user {self.user}")
        if self.age_s is not None:
            parts.append(f", age {self.age_s:.0f}s")
        if self.rollback_in_s is not None:
            parts.append(f", rolls back in {self.rollback_in_s:.0f}s")
        elif self.live and not self.rolls_back:
            parts.append(", never rolls back by itself")
        elif self.live:
            parts.append(", rolls back by itself, time unknown")
        return "".join(parts) + ")"

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "name": self.name,
            "kind": self.kind,
            "state": self.state,
            "user": self.user,
            "age_s": None if self.age_s is None else round(self.age_s, 1),
            "rollback_in_s": None if self.rollback_in_s is None else round(self.rollback_in_s, 1),
            "live": self.live,
        }

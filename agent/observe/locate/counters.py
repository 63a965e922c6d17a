"""What the switches' own reads name: per port, what moved during the run (counter deltas
and link state, :class:`PortSymptoms`), and the suspects those deltas and the configuration
read back point at directly -- a port down, FCS errors, a pause storm, pause not honoured,
lossless drops, a setting that differs from the plan. A counter names its element, so these
suspects come before the probes' and explain away the path symptoms they cause."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agent.device.state import Counters, Difference, InterfaceCounters, LinkHealth
from agent.intent.model import Profile
from agent.observe.checks.base import DeviceData
from agent.observe.locate.evidence import ALL_SYMPTOMS, LOSS
from agent.observe.locate.topology import DirectedLink, Topology
from agent.observe.locate.verdict import Suspect, SuspectKind
from common.text import natural_key

# A storm: pause frames arriving all through the run, on average this many per second, or
# fewer with the PFC watchdog declaring a storm. A storming NIC refreshes XOFF before its
# quanta run out, many times a second; PFC that works sends a few per congestion episode,
# and one lost XON trips the watchdog with no more pause frames than that.
STORM_PFC_PER_S = 50.0
STORM_WITH_WATCHDOG_PER_S = 10.0


@dataclass(frozen=True)
class PortSymptoms:
    """What moved on one switch port during the run (deltas) and its link state after."""

    device: str
    port: str
    up: bool | None = None
    fcs_errors: int = 0
    in_errors: int = 0
    lossless_drops: int = 0  # queue + headroom drops on the intent's lossless priorities
    lossy_drops: int = 0  # egress queue drops on the other priorities
    headroom_drops: int = 0  # ingress drops beyond the headroom (lossless priorities)
    lossless_tx: int = 0  # frames sent from the lossless priorities' egress queues
    lossy_tx: int = 0  # ... and from the other queues
    pfc_rx: int = 0
    pfc_tx: int = 0
    storms: int = 0  # PFC watchdog storms detected


@dataclass(frozen=True)
class SwitchReads:
    """One switch's counters and link health, read before and after a run (no counters
    before: each counts from zero)."""

    before: Counters | None
    after: Counters
    links_before: Mapping[str, LinkHealth]
    links_after: Mapping[str, LinkHealth]


def port_symptoms(
    before: Counters | None,
    after: Counters,
    links_before: Mapping[str, LinkHealth],
    links_after: Mapping[str, LinkHealth],
    lossless: Iterable[int],
) -> list[PortSymptoms]:
    """Per port of one switch: the counter deltas between two snapshots (a counter that went
    backwards — cleared or wrapped — counts from zero) and the link state after; every
    priority outside ``lossless`` counts as lossy."""
    return _port_symptoms(SwitchReads(before, after, links_before, links_after), lossless, ())


def switch_symptoms(first: DeviceData, last: DeviceData, profile: Profile) -> list[PortSymptoms]:
    """:func:`port_symptoms` of a switch read twice around a run, on the profile's lossless
    priorities, with its CNP priority left out of ``lossy_tx``: RoCE senders cause that
    lossy traffic, so it says nothing about misclassified RoCE. Nothing when the second
    read has no counters."""
    if last.counters is None:
        return []
    reads = SwitchReads(first.counters, last.counters, first.links or {}, last.links or {})
    return _port_symptoms(reads, profile.pfc.priorities, (profile.cnp.priority,))


def _port_symptoms(
    reads: SwitchReads, lossless: Iterable[int], control: Iterable[int]
) -> list[PortSymptoms]:
    """``control``: priorities of the fabric's own lossy traffic, left out of ``lossy_tx``."""
    ordered = sorted(set(lossless))
    control = set(control)
    before, after = reads.before, reads.after
    found = []
    for name in sorted(set(after.interfaces) | set(reads.links_after), key=natural_key):
        new = after.interfaces.get(name)
        old = before.interfaces.get(name) if before is not None else None
        health = reads.links_after.get(name, LinkHealth())
        was = reads.links_before.get(name, LinkHealth())
        moved = _queue_deltas(new, old, ordered, control) if new is not None else _QueueDeltas()
        found.append(
            PortSymptoms(
                device=after.device,
                port=name,
                up=health.up,
                fcs_errors=delta(health.fcs_errors, was.fcs_errors),
                in_errors=delta(health.in_errors, was.in_errors),
                lossless_drops=moved.drops,
                lossy_drops=moved.lossy,
                headroom_drops=moved.headroom,
                lossless_tx=moved.lossless_tx,
                lossy_tx=moved.lossy_tx,
                pfc_rx=moved.pfc_rx,
                pfc_tx=moved.pfc_tx,
                storms=moved.storms,
            )
        )
    return found


@dataclass
class _QueueDeltas:
    """What moved in one port's queues, PFC and watchdog counters (PortSymptoms' fields)."""

    drops: int = 0
    lossy: int = 0
    headroom: int = 0
    lossless_tx: int = 0
    lossy_tx: int = 0
    pfc_rx: int = 0
    pfc_tx: int = 0
    storms: int = 0


def _queue_deltas(
    new: InterfaceCounters, old: InterfaceCounters | None, lossless: list[int], control: set[int]
) -> _QueueDeltas:
    moved = _QueueDeltas()
    moved.lossy = sum(_queue_drops(new, old, p) for p in new.queues if p not in lossless)
    for p, queue in new.queues.items():
        was_queue = old.queues.get(p) if old is not None else None
        sent = delta(queue.tx_packets, was_queue.tx_packets if was_queue else 0)
        if p in lossless:
            moved.lossless_tx += sent
        elif p not in control:
            moved.lossy_tx += sent
    for p in lossless:
        headroom = delta(new.headroom_drops[p], old.headroom_drops[p] if old else 0)
        moved.drops += _queue_drops(new, old, p) + headroom
        moved.headroom += headroom
        moved.pfc_rx += delta(new.pfc_rx[p], old.pfc_rx[p] if old else 0)
        moved.pfc_tx += delta(new.pfc_tx[p], old.pfc_tx[p] if old else 0)
        moved.storms += _storms(new, old, p)
    return moved


def _storms(new: InterfaceCounters, old: InterfaceCounters | None, priority: int) -> int:
    dog = new.watchdog.get(priority)
    if dog is None:
        return 0
    old_dog = old.watchdog.get(priority) if old is not None else None
    return delta(dog.storms_detected, old_dog.storms_detected if old_dog else 0)


def delta(new: int, old: int) -> int:
    """A monotonic counter's increase; one that went backwards (cleared, wrapped) counts
    from zero."""
    return new - old if new >= old else new


def _queue_drops(new: InterfaceCounters, old: InterfaceCounters | None, priority: int) -> int:
    queue = new.queues.get(priority)
    was = old.queues.get(priority) if old is not None else None
    if queue is None:
        return 0
    return delta(queue.dropped_packets, was.dropped_packets if was is not None else 0)


def from_counters(
    topology: Topology, ports: Sequence[PortSymptoms], duration_s: float
) -> list[Suspect]:
    """The suspects the ports' counter deltas over a run of ``duration_s`` name."""
    suspects = _CounterSuspects({(p.device, p.port): p for p in ports})
    for port in ports:
        arriving = topology.into(port.device, port.port)
        seen = _PortSeen(port, arriving, topology.out_of(port.device, port.port))
        suspects.down(seen)
        suspects.errors(seen)
        suspects.storm(seen, duration_s)
        if port.headroom_drops and port.pfc_tx and seen.arriving is not None:
            suspects.pause_ignored(seen, seen.arriving)
        elif port.lossless_drops:
            suspects.lossless_drops(seen)
    return list(suspects.found.values())


@dataclass(frozen=True)
class _PortSeen:
    """A switch port whose counters moved, and the links that arrive at it and leave it."""

    port: PortSymptoms
    arriving: DirectedLink | None
    leaving: DirectedLink | None

    @property
    def where(self) -> str:
        return f"{self.port.device}:{self.port.port}"

    @property
    def both(self) -> set[str]:
        return {x.name for x in (self.arriving, self.leaving) if x is not None}


@dataclass(frozen=True)
class _Claim:
    """What one counter says about one element: how sure, why, and the links whose path
    symptoms (``symptoms``) it explains."""

    kind: SuspectKind
    element: str
    confidence: float
    why: str
    links: set[str]
    symptoms: frozenset[str] = LOSS


class _CounterSuspects:
    """The suspects switch counters name, one per (kind, element), each with every reason."""

    def __init__(self, by_end: dict[tuple[str, str], PortSymptoms]) -> None:
        self.by_end = by_end
        self.found: dict[tuple[SuspectKind, str], Suspect] = {}

    def add(self, claim: _Claim) -> Suspect:
        """The claim's suspect, with this reason added to any it already has."""
        key = (claim.kind, claim.element)
        suspect = self.found.setdefault(
            key, Suspect(claim.kind, claim.element, claim.confidence, [])
        )
        suspect.confidence = max(suspect.confidence, claim.confidence)
        suspect.evidence.append(claim.why)
        suspect.explains |= claim.links
        suspect.symptoms = claim.symptoms
        return suspect

    def down(self, seen: _PortSeen) -> None:
        if seen.port.up is False and seen.arriving is not None:
            why = f"{seen.where} is down"
            self.add(_Claim("link", seen.arriving.cable, 0.95, why, seen.both, ALL_SYMPTOMS))

    def errors(self, seen: _PortSeen) -> None:
        port, arriving = seen.port, seen.arriving
        if max(port.fcs_errors, port.in_errors) and arriving is not None:
            why = (
                f"{seen.where} received {port.fcs_errors} frames with FCS errors "
                f"({port.in_errors} input errors) during the run"
            )
            self.add(_Claim("link", arriving.name, 0.9, why, {arriving.name}))

    def storm(self, seen: _PortSeen, duration_s: float) -> None:
        """A storm is pause sent without end: a high rate for the whole run. A watchdog event
        alone is not one (a lost XON holds a port paused until its quanta run out)."""
        port, arriving, leaving = seen.port, seen.arriving, seen.leaving
        rate = port.pfc_rx / duration_s if duration_s > 0 else 0.0
        storming = rate >= STORM_PFC_PER_S or (
            port.storms > 0 and rate >= STORM_WITH_WATCHDOG_PER_S
        )
        if not storming or arriving is None:
            return
        peer = arriving.tx[0]
        why = (
            f"{seen.where} received {port.pfc_rx} pause frames from {peer} "
            f"({port.pfc_rx / duration_s:.0f}/s); the PFC watchdog detected "
            f"{port.storms} storm(s)"
        )
        kind: SuspectKind = "host-nic" if arriving.tx_host else "port"
        element = peer if arriving.tx_host else f"{arriving.tx[0]}:{arriving.tx[1]}"
        # A paused port delays what it still carries: latency too.
        delayed = {leaving.name} if leaving else set()
        self.add(_Claim(kind, element, 0.9, why, delayed, ALL_SYMPTOMS))

    def pause_ignored(self, seen: _PortSeen, arriving: DirectedLink) -> None:
        """This ingress asked its neighbour to pause and still overflowed: the neighbour kept
        sending -- either it ignores pause, or it sent the traffic from a queue that pause
        does not stop (it classified RoCE into a lossy class)."""
        port = seen.port
        peer, peer_port = arriving.tx
        sender = self.by_end.get(arriving.tx)
        asked = f"{seen.where} sent {port.pfc_tx} pause frames to {peer} and still dropped "
        if sender is not None and sender.lossy_tx > sender.lossless_tx:
            why = (
                f"{asked}{port.headroom_drops} lossless frames; {peer}:{peer_port} sent "
                f"{sender.lossy_tx} frames from lossy queues and {sender.lossless_tx} from "
                f"the lossless one: {peer} classifies RoCE into a lossy class"
            )
            suspect = self.add(_Claim("port", f"{peer}:{peer_port}", 0.8, why, {arriving.name}))
            suspect.ingress_of = arriving.tx
            return
        why = f"{asked}{port.headroom_drops} lossless frames: {peer} does not honour pause"
        kind: SuspectKind = "host-nic" if arriving.tx_host else "port"
        element = peer if arriving.tx_host else f"{peer}:{peer_port}"
        suspect = self.add(_Claim(kind, element, 0.8, why, {arriving.name}))
        suspect.pause_over = frozenset(seen.both)

    def lossless_drops(self, seen: _PortSeen) -> None:
        """Queue drops lose frames leaving by this port, headroom drops frames arriving."""
        port, arriving, leaving = seen.port, seen.arriving, seen.leaving
        lost_on = set()
        queue_drops = port.lossless_drops > port.headroom_drops
        if queue_drops and leaving is not None:
            lost_on.add(leaving.name)
        if port.headroom_drops and arriving is not None:
            lost_on.add(arriving.name)
        why = f"{seen.where} dropped {port.lossless_drops} frames of a lossless class"
        dropped = self.add(_Claim("port", seen.where, 0.5, why, lost_on))
        if queue_drops and arriving is not None:
            # The pause that stops this egress arrives over the link from the peer: a lost
            # XON holds the queue paused until it overflows or the watchdog drops.
            dropped.pause_over = frozenset({arriving.name})


def from_config(topology: Topology, differences: Sequence[Difference]) -> list[Suspect]:
    """Configuration read back that differs from the plan: the element itself is the suspect
    (the same differences `drift` reports). It explains the symptoms of every path through
    that port (both directions), or through the whole switch for a switch-wide setting."""
    suspects: dict[str, Suspect] = {}
    for d in differences:
        kind: SuspectKind
        if d.interface:
            element, kind = f"{d.device}:{d.interface}", "port"
            ends = {(d.device, d.interface)}
        else:
            element, kind = d.device, "switch"
            ends = {link.tx for link in topology.links.values() if link.tx[0] == d.device}
        suspect = suspects.setdefault(element, Suspect(kind, element, 0.95, []))
        suspect.explains |= {
            link.name for link in topology.links.values() if link.tx in ends or link.rx in ends
        }
        suspect.evidence.append(
            f"{d.setting}: Expected: {d.expected}. Actual: {d.actual} (configuration read back)"
        )
    return list(suspects.values())

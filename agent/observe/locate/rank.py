"""From symptoms to a culprit (issue #15): which link, port, switch or host NIC.

Joins three kinds of evidence with the topology and ranks suspects:

1. **Switch counters and state**, read before and after a probing run: a port that is down,
   frames received with FCS errors, a host port that keeps receiving pause frames until the
   watchdog acts (a storming NIC), lossless drops at an ingress that sent XOFF (the neighbour
   does not honour pause), and every place where the configuration read back differs from
   the plan. A counter names its element directly, so these suspects come first and *explain
   away* the probe symptoms they cause.
2. **Path-aware probes** (:mod:`agent.observe.probes.paths`): each probe flow's source port pins one
   ECMP path, known hop by hop from a traceroute with the same 5-tuple, so each flow's loss,
   ICRC errors and latency belong to a known list of directed links.
3. **Tomography** over what the counters do not explain: the directed link whose paths lose
   (or corrupt, or delay) the most compared with the paths that do NOT cross it — the
   comparison R-Pingmesh (Liu et al., SIGCOMM 2024, §4) and Pingmesh (Guo et al., SIGCOMM
   2015, §5) use to tell a network fault from an end-host fault: a fault of one host shows on
   every path of that host and on no other, a link fault on the paths through that link
   whatever their hosts. The greedy pick of the link that explains the most remaining bad
   paths is the set cover NetBouncer and R-Pingmesh use.

A host's access link and its NIC lie on exactly the same paths, so probes alone cannot tell
them apart; switch counters can (FCS errors on the leaf port: the cable or optic; pauses
from the host: the NIC), and the suspect says which it is or that it cannot tell.

Links on exactly the same probed paths are split by the hop probes with a sequential test,
or reported as one tied group with equal rank that says which probes would split it (see
"ties" below and :mod:`agent.observe.locate.followup`).

Pure functions over plain data: no I/O here (``agent.app.locate`` collects and probes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agent.device.state import Counters, Difference, InterfaceCounters, LinkHealth
from agent.errors import AgentError
from agent.intent.model import FabricIntent
from agent.observe.locate.stats import Sprt, loss_interval

SuspectKind = Literal["link", "port", "switch", "host-nic", "host"]

# A path is bad for loss when it lost at least this share of what it sent, and at least
# LOSS_MIN_PACKETS (one lost packet in a short run is not a pattern).
LOSS_FLOOR = 0.01
LOSS_MIN_PACKETS = 2
# Latency: a path is slow when its median one-way latency exceeds the fastest path of the
# same hop count by this much (absolute, and relative to that baseline). The floor stays
# well above a lab sender's Python scheduling jitter on a loaded machine.
LATENCY_FLOOR_MS = 5.0
LATENCY_RELATIVE = 0.5
# A storm: pause frames arriving all through the run, on average this many per second, or
# fewer with the PFC watchdog declaring a storm. A storming NIC refreshes XOFF before its
# quanta run out, many times a second; PFC that works sends a few per congestion episode,
# and one lost XON trips the watchdog with no more pause frames than that.
STORM_PFC_PER_S = 50.0
STORM_WITH_WATCHDOG_PER_S = 10.0
# The sequential test that splits links on the same paths (see "ties" below): the run's
# confidence, and the smallest loss rate it must find (agent.observe.locate.gather's own).
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN_LOSS = 0.005


ALL_SYMPTOMS = frozenset({"loss", "icrc", "latency"})
LOAD_WEIGHT = 100  # a loading flow's path counts this many probe paths (see _resolve_ingress)
LOSS = frozenset({"loss"})


class LocateError(AgentError):
    """Inputs that cannot be joined (a path over a link the fabric does not have)."""


# --------------------------------------------------------------------------- topology


@dataclass(frozen=True)
class DirectedLink:
    """One direction of a cable: frames leave ``tx`` and arrive at ``rx``."""

    name: str
    tx: tuple[str, str]  # (device, port)
    rx: tuple[str, str]
    tx_host: bool
    rx_host: bool

    @property
    def cable(self) -> str:
        """Both directions' common name: ``leaf1:Ethernet1<>spine1:Ethernet1``."""
        a, b = sorted((f"{self.tx[0]}:{self.tx[1]}", f"{self.rx[0]}:{self.rx[1]}"))
        return f"{a}<>{b}"


def link_name(device: str, port: str, peer: str, from_host: bool) -> str:
    """``leaf1:Ethernet1>spine1`` (a switch port's egress) or ``h1>leaf1`` (a host's)."""
    return f"{device}>{peer}" if from_host else f"{device}:{port}>{peer}"


@dataclass(frozen=True)
class Topology:
    links: dict[str, DirectedLink]
    hosts: frozenset[str]

    @classmethod
    def from_intent(cls, intent: FabricIntent) -> Topology:
        roles = {d.name: d.role for d in intent.devices}
        links: dict[str, DirectedLink] = {}
        for device in intent.devices:
            for port in device.ports:
                if port.peer is None:
                    continue
                peer, _, peer_port = port.peer.partition(":")
                if peer not in roles:
                    continue  # a peer outside the fabric file: nothing to probe through it
                from_host = device.role == "host"
                name = link_name(device.name, port.name, peer, from_host)
                links[name] = DirectedLink(
                    name,
                    (device.name, port.name),
                    (peer, peer_port),
                    from_host,
                    roles[peer] == "host",
                )
        hosts = frozenset(n for n, role in roles.items() if role == "host")
        return cls(links, hosts)

    def into(self, device: str, port: str) -> DirectedLink | None:
        """The direction that arrives at ``device:port``."""
        return next((link for link in self.links.values() if link.rx == (device, port)), None)

    def out_of(self, device: str, port: str) -> DirectedLink | None:
        return next((link for link in self.links.values() if link.tx == (device, port)), None)


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class HopProbe:
    """TTL-limited probes of one path that expire at one switch on the way (mtr's method):
    sent, answered with ICMP time exceeded, and answered with a quote of the probe that
    differs from what was sent (corrupted before that switch)."""

    sent: int
    answered: int
    corrupted: int = 0
    rtt_min_ms: float | None = None


@dataclass(frozen=True)
class PathResult:
    """One probe flow pinned to one path (its UDP source port) and what it saw."""

    src: str
    dst: str
    sport: int
    links: tuple[str, ...]  # directed links, the source host's first (agent.observe.probes.paths)
    sent: int
    received: int
    icrc_errors: int = 0
    latency_ms: float | None = None  # one-way, received in user space
    # hops[i]: probes that expire at the switch ``links[i]`` leads to (one per switch hop).
    hops: tuple[HopProbe | None, ...] = ()
    load: bool = False  # a flow of `locate --load`'s incast, not a probe
    # One-way from the kernel's receive stamp (agent.observe.probes.timestamps), None without;
    # and how long the receiving host held the frames before user space read them (p90).
    kernel_latency_ms: float | None = None
    host_delay_ms: float | None = None
    timestamp_source: str = "user"
    # The adaptive run's sequential test on this path (agent.observe.locate.stats.Sprt):
    # True lossy, False clean, None undecided or a fixed run (then LOSS_FLOOR decides).
    lossy: bool | None = None

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.received)

    @property
    def vanished(self) -> int:
        """Lost without a trace: not the ones the receiving NIC dropped for a bad ICRC."""
        return max(0, self.lost - self.icrc_errors)

    @property
    def label(self) -> str:
        return f"{self.src}→{self.dst} (sport {self.sport}{', load' if self.load else ''})"


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


def port_symptoms(
    before: Counters | None,
    after: Counters,
    links_before: dict[str, LinkHealth],
    links_after: dict[str, LinkHealth],
    lossless: Iterable[int],
    control: Iterable[int] = (),
) -> list[PortSymptoms]:
    """Per port of one switch: the counter deltas between two snapshots (a counter that went
    backwards — cleared or wrapped — counts from zero) and the link state after.
    ``control``: priorities of the fabric's own lossy traffic (CNPs), left out of
    ``lossy_tx`` — RoCE senders cause it, so it says nothing about misclassified RoCE."""
    lossless = sorted(set(lossless))
    control = set(control)

    found = []
    for name in sorted(set(after.interfaces) | set(links_after)):
        new = after.interfaces.get(name)
        old = before.interfaces.get(name) if before is not None else None
        health = links_after.get(name, LinkHealth())
        was = links_before.get(name, LinkHealth())
        moved = _queue_deltas(new, old, lossless, control) if new is not None else _QueueDeltas()
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


# --------------------------------------------------------------------------- verdict


@dataclass
class Suspect:
    kind: SuspectKind
    element: str
    confidence: float
    evidence: list[str]
    explains: set[str] = field(default_factory=set)  # directed links whose symptoms it explains
    paths: int = 0  # bad paths it explains
    # A switch port sending RoCE from a lossy queue: the culprit is the ingress of that switch
    # the traffic came in by, found from the paths (see _resolve_ingress).
    ingress_of: tuple[str, str] | None = None
    # "Does not honour pause": the cable's two directions -- the pause goes one way, the
    # frames in flight come the other (see _slow_links).
    pause_over: frozenset[str] = frozenset()
    # The path symptoms it accounts for (a drop counter explains loss, not latency).
    symptoms: frozenset[str] = field(default_factory=lambda: ALL_SYMPTOMS)
    found_by: str | None = None  # the path symptom tomography found it by (None: a counter)
    rank: int = 0  # 1 is first; the members of a tied group share one (set by _order)
    # Links the probes could not tell this one from (a tied group), and the probes that
    # would split them on a real fabric.
    tied_with: list[str] = field(default_factory=list)
    split_by: list[str] = field(default_factory=list)
    tie: Tie | None = None  # what the tied group's members share (kept when it is split)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "kind": self.kind,
            "element": self.element,
            "confidence": round(self.confidence, 2),
            "evidence": self.evidence,
            "paths_explained": self.paths,
            "tied_with": self.tied_with,
            "split_by": self.split_by,
        }


@dataclass
class Verdict:
    suspects: list[Suspect]
    paths: int
    bad_paths: int
    unexplained: list[str]  # bad paths no suspect accounts for
    notes: list[str] = field(default_factory=list)
    # The targeted probes run to split tied groups (agent.observe.locate.followup).
    follow_ups: list[FollowUpResult] = field(default_factory=list)

    @property
    def fault_found(self) -> bool:
        return bool(self.suspects)

    @property
    def first(self) -> Suspect | None:
        """The suspect ranked first on its own; None when there is none or rank 1 is a tied
        group (a tie is never first: naming one of its members would be a coin flip)."""
        if not self.suspects or self.suspects[0].tied_with:
            return None
        return self.suspects[0]

    @property
    def tied(self) -> bool:
        """Whether some suspects remain a tied group the probes could not split."""
        return any(s.tied_with for s in self.suspects)

    def as_dict(self) -> dict[str, Any]:
        ranked = [
            {**s.as_dict(), "rank": s.rank or i} for i, s in enumerate(self.suspects, start=1)
        ]
        return {
            "fault_found": self.fault_found,
            "summary": summary(self),
            "suspects": ranked,
            "tied": self.tied,
            "follow_ups": [r.as_dict() for r in self.follow_ups],
            "paths": self.paths,
            "bad_paths": self.bad_paths,
            "unexplained_paths": self.unexplained,
            "notes": self.notes,
        }


def summary(verdict: Verdict) -> str:
    if not verdict.suspects:
        return (
            f"no fault found ({verdict.paths} paths probed, none bad, no counter or setting "
            "pointing at one)"
        )
    first = verdict.first
    if first is None:
        top = verdict.suspects[0]
        group = [top.element, *top.tied_with]
        return (
            f"tied: {top.kind} {' or '.join(sorted(group))} (confidence {top.confidence:.2f}): "
            "the probes could not tell them apart"
        )
    return f"{first.kind} {first.element} (confidence {first.confidence:.2f})"


@dataclass(frozen=True)
class _Symptom:
    """One way a path can be bad, and how much of it each path shows."""

    name: str
    amount: Callable[[PathResult], float]  # lost packets, ICRC errors, excess latency
    total: Callable[[PathResult], float]  # the denominator: sent packets, or 1 per path
    bad: Callable[[PathResult], bool]
    describe: str


def locate(
    topology: Topology,
    paths: Sequence[PathResult],
    ports: Sequence[PortSymptoms],
    differences: Sequence[Difference] = (),
    *,
    duration_s: float = 1.0,
    loaded: Sequence[tuple[str, ...]] = (),
    confidence: float = DEFAULT_CONFIDENCE,
    min_loss: float = DEFAULT_MIN_LOSS,
) -> Verdict:
    """Rank the suspects; ``Verdict.suspects`` is empty when nothing is wrong. ``loaded``:
    the links of the flows that loaded the fabric (``locate --load``), which carry most of
    the traffic a misclassifying port sends into a lossy queue. ``confidence`` and
    ``min_loss``: the sequential test that splits links on the same paths (see
    :func:`_tie_or_split`)."""
    settings = _Settings(confidence, min_loss)
    _check_links(topology, paths)
    measured = [p for p in paths if p.sent > 0]
    notes = [f"{p.label}: nothing sent, not used" for p in paths if p.sent == 0]
    suspects = _from_counters(topology, ports, duration_s) + _from_config(topology, differences)
    suspects += _host_delay(measured)
    symptoms = _symptoms(measured)
    bad = {p.label: p for p in measured if any(s.bad(p) for s in symptoms)}
    suspects = [
        _resolve_ingress(topology, s, [p.links for p in bad.values()], loaded) for s in suspects
    ]
    for suspect in suspects:
        suspect.paths = len(_explained_by([suspect], bad.values()))
    suspects, explained = _from_paths(topology, measured, ports, symptoms, bad, suspects, settings)
    suspects = _order(_untie_missing(_slow_links(suspects)))
    unexplained = sorted(label for label in bad if label not in explained)
    return Verdict(suspects, len(measured), len(bad), unexplained, notes)


def _from_paths(
    topology: Topology,
    measured: Sequence[PathResult],
    ports: Sequence[PortSymptoms],
    symptoms: Sequence[_Symptom],
    bad: dict[str, PathResult],
    known: Sequence[Suspect],
    settings: _Settings,
) -> tuple[list[Suspect], set[str]]:
    """``known`` and, symptom by symptom, the links tomography finds behind the bad paths
    no suspect so far explains; the labels of the bad paths explained."""
    suspects = list(known)
    explained: set[str] = set()
    for symptom in symptoms:
        # A counter explains the symptoms it causes: drops explain loss, not a slow path.
        causes = [s for s in suspects if symptom.name in s.symptoms]
        covered = _explained_by(causes, (p for p in bad.values() if symptom.bad(p)))
        found = _tomography(topology, measured, symptom, covered, settings)
        if symptom.name == "loss":
            found = [_lossy_class(topology, s, bad.values(), ports) for s in found]
            # The members of a tied group all lead to the same misclassifying port: once.
            unique = {(s.kind, s.element): s for s in reversed(found)}
            found = [s for s in found if unique[(s.kind, s.element)] is s]
        suspects += found
        explained |= covered | _explained_by(found, bad.values())
    return suspects, explained


def _check_links(topology: Topology, paths: Iterable[PathResult]) -> None:
    for path in paths:
        unknown = [name for name in path.links if name not in topology.links]
        if unknown:
            raise LocateError(
                f"path {path.label}: link {unknown[0]!r}: Expected: a link of the fabric. "
                "Actual: not in the fabric file"
            )


def _explained_by(suspects: Sequence[Suspect], paths: Iterable[PathResult]) -> set[str]:
    """The labels of ``paths`` that cross a link one of ``suspects`` explains."""
    return {p.label for p in paths if any(s.explains & set(p.links) for s in suspects)}


def _symptoms(paths: Sequence[PathResult]) -> list[_Symptom]:
    def lossy(p: PathResult) -> bool:
        if p.lossy is not None:
            # The test's decision holds at the run's confidence, down to --min-loss (below
            # the fixed floor: 0.5 % loss is lossy once enough probes show it).
            return p.lossy and p.vanished > 0
        return p.vanished >= LOSS_MIN_PACKETS and p.vanished >= LOSS_FLOOR * p.sent

    baseline: dict[int, float] = {}
    for p in paths:
        if (latency := _latency(p)) is not None:
            hops = len(p.links)
            baseline[hops] = min(baseline.get(hops, latency), latency)

    def excess(p: PathResult) -> float:
        latency = _latency(p)
        if latency is None:
            return 0.0
        return max(0.0, latency - baseline[len(p.links)])

    def slow(p: PathResult) -> bool:
        if _latency(p) is None:
            return False
        base = baseline[len(p.links)]
        return excess(p) > max(LATENCY_FLOOR_MS, LATENCY_RELATIVE * base)

    return [
        _Symptom(
            "icrc",
            lambda p: p.icrc_errors,
            lambda p: p.sent,
            lambda p: p.icrc_errors > 0,
            "arrived with a bad ICRC",
        ),
        _Symptom("loss", lambda p: p.vanished, lambda p: p.sent, lossy, "lost"),
        _Symptom("latency", excess, lambda p: 1.0, slow, "were slow"),
    ]


def _latency(p: PathResult) -> float | None:
    """The path's one-way latency as close to the NIC as its receiver stamped it: the
    kernel's receive stamp leaves out the time the receiving host took to read the frame."""
    return p.kernel_latency_ms if p.kernel_latency_ms is not None else p.latency_ms


def _host_delay(paths: Sequence[PathResult]) -> list[Suspect]:
    """A host that held the frames of every path into it for longer than the latency floor
    between the kernel's receive stamp and its probe process reading them: the host is slow
    (descheduled, stopped, overloaded), not its access link, whose kernel-stamped latency
    says how the network did (R-Pingmesh, SIGCOMM 2024, §4.2: host delay vs network RTT)."""
    into: dict[str, list[PathResult]] = {}
    for p in paths:
        if not p.load and p.received > 0:  # a path that delivered nothing says nothing here
            into.setdefault(p.dst, []).append(p)
    found = []
    for host, mine in sorted(into.items()):
        delays = [p.host_delay_ms for p in mine if p.host_delay_ms is not None]
        if len(delays) < len(mine) or min(delays) <= LATENCY_FLOOR_MS:
            continue  # a receiver without kernel stamps cannot tell
        stamped = sorted({p.timestamp_source for p in mine})
        found.append(
            Suspect(
                "host",
                host,
                confidence=0.8,
                evidence=[
                    f"host delay, not the network: {host} held the probes of all "
                    f"{len(mine)} paths into it {min(delays):.1f}–{max(delays):.1f} ms "
                    f"(90th percentile) between the kernel's receive stamp "
                    f"({'/'.join(stamped)}) and its probe process reading them",
                    "the kernel-stamped latency of those paths is what the network did; its "
                    "access link is judged by that",
                ],
                symptoms=frozenset(),
                found_by="host-delay",
            )
        )
    return found


def _tomography(
    topology: Topology,
    paths: Sequence[PathResult],
    symptom: _Symptom,
    explained: set[str],
    settings: _Settings,
) -> list[Suspect]:
    """Greedy set cover of the bad paths no counter explained, by the directed link whose
    paths show the symptom most compared with the paths that do not cross it. Paths a counter
    explains are left out of both rates: their cause is known, and a port dropping heavily
    elsewhere must not hide a link that loses less (R-Pingmesh compares unexplained paths)."""
    remaining = {p.label: p for p in paths if symptom.bad(p) and p.label not in explained}
    paths = [p for p in paths if p.label not in explained]
    found: list[Suspect] = []
    while remaining:
        names = sorted({n for p in remaining.values() for n in p.links})
        best = max((_Candidate.of(n, paths, remaining, symptom) for n in names), key=_score)
        if best.score <= 0:
            break
        found += _link_suspects(topology, paths, symptom, best, len(remaining), settings)
        for p in best.covered:
            del remaining[p.label]
    return found


@dataclass(frozen=True)
class _Candidate:
    """A directed link as tomography weighs it: the symptom's rate on the paths through it
    and elsewhere, and the remaining bad paths it would explain."""

    name: str
    rate_in: float
    rate_out: float
    covered: list[PathResult]

    @classmethod
    def of(
        cls,
        name: str,
        paths: Sequence[PathResult],
        remaining: dict[str, PathResult],
        symptom: _Symptom,
    ) -> _Candidate:
        through = [p for p in paths if name in p.links]
        elsewhere = [p for p in paths if name not in p.links]
        covered = [p for p in remaining.values() if name in p.links]
        return cls(name, _rate(through, symptom), _rate(elsewhere, symptom), covered)

    @property
    def score(self) -> float:
        return len(self.covered) * (self.rate_in - self.rate_out)


def _score(candidate: _Candidate) -> float:
    return candidate.score


def _link_suspects(
    topology: Topology,
    paths: Sequence[PathResult],
    symptom: _Symptom,
    best: _Candidate,
    remaining: int,
    settings: _Settings,
) -> list[Suspect]:
    """The link tomography picked, with its evidence and confidence; or, when other links lie
    on exactly its paths, the one the hop probes show the symptom rising at -- and where they
    cannot tell, every such link as one tied group (see :func:`_tie_or_split`)."""
    name, covered = best.name, best.covered
    rates = best.rate_in + best.rate_out
    purity = best.rate_in / rates if rates else 0.0
    base = purity * len(covered) / remaining
    twins = _same_paths(topology, paths, name)
    if twins:
        return _tie_or_split(topology, paths, symptom, best, base, twins, settings)
    return [
        Suspect(
            "link",
            name,
            confidence=round(base * 0.9, 2),
            evidence=_link_evidence(topology.links[name], paths, symptom, best),
            explains={name},
            paths=len(covered),
            found_by=symptom.name,
        )
    ]


def _link_evidence(
    link: DirectedLink, paths: Sequence[PathResult], symptom: _Symptom, best: _Candidate
) -> list[str]:
    through = [p for p in paths if link.name in p.links]
    bad_through = sum(1 for p in through if symptom.bad(p))
    unit = "" if symptom.name != "latency" else " ms"
    covered = best.covered
    evidence = [
        f"{bad_through} of {len(through)} paths through {link.name} {symptom.describe} "
        f"({_format_rate(best.rate_in, symptom)}{unit}); paths elsewhere "
        f"{_format_rate(best.rate_out, symptom)}{unit}",
        "paths: " + ", ".join(p.label for p in covered[:6]) + (" …" if len(covered) > 6 else ""),
    ]
    if link.tx_host or link.rx_host:
        host = link.tx[0] if link.tx_host else link.rx[0]
        evidence.append(
            f"{host}'s NIC lies on the same paths as this link; no switch counter moved, "
            "so the probes cannot tell the cable from the NIC"
        )
    return evidence


def _slow_links(suspects: list[Suspect]) -> list[Suspect]:
    """Pause that failed over a link the probes found bad: a lossy link loses the pause
    frames too (a lost XOFF: the neighbour keeps sending; a lost XON: it stays paused until
    the watchdog drops), and frames in flight on a slow link outrun the headroom planned for
    its length. The link is the culprit then, not a neighbour that ignores pause."""
    bad_links = {s.element: s for s in suspects if s.found_by in ("loss", "latency")}
    kept = []
    for suspect in suspects:
        link = next((bad_links[n] for n in sorted(suspect.pause_over) if n in bad_links), None)
        if link is None:
            kept.append(suspect)
            continue
        slow = link.found_by == "latency"
        link.evidence += [
            f"{why}; but the pause went over this {'slow' if slow else 'lossy'} link: "
            + (
                "its delay exceeds what the headroom allows for"
                if slow
                else "pause frames were lost on it"
            )
            for why in suspect.evidence
        ]
        link.confidence = max(link.confidence, suspect.confidence)
    return kept


def _resolve_ingress(
    topology: Topology,
    suspect: Suspect,
    bad: Sequence[tuple[str, ...]],
    loaded: Sequence[tuple[str, ...]],
) -> Suspect:
    """A switch that sends RoCE from a lossy queue out of one port misclassified it where it
    came in: on the paths that leave by that port, the link into the switch before it. The
    load's flows (line rate) outweigh the probes' bad paths (a trickle)."""
    if suspect.ingress_of is None:
        return suspect
    entering: dict[tuple[str, str], int] = {}
    for links, weight in [*((p, LOAD_WEIGHT) for p in loaded), *((p, 1) for p in bad)]:
        for before, after in itertools.pairwise(links):
            if topology.links[after].tx == suspect.ingress_of:
                end = topology.links[before].rx
                entering[end] = entering.get(end, 0) + weight
    if not entering:
        return suspect
    device, port = max(sorted(entering), key=lambda end: entering[end])
    suspect.element = f"{device}:{port}"
    suspect.evidence.append(
        f"the paths leaving by {suspect.ingress_of[0]}:{suspect.ingress_of[1]} enter "
        f"{device} at {port}: that ingress is where the class is chosen"
    )
    return suspect


def _lossy_class(
    topology: Topology,
    suspect: Suspect,
    bad: Iterable[PathResult],
    ports: Sequence[PortSymptoms],
) -> Suspect:
    """Loss behind a link, and lossy-queue drops further down those paths while only the
    lossless class was sent: the port by which those paths entered the dropping switch
    classifies RoCE into a lossy class (a data plane that disagrees with its configuration:
    the config read found nothing)."""
    # Each switch classifies at its own ingress, so drops in a lossy queue of switch D come
    # from traffic that entered D by a port that misclassified it: on the bad paths, the
    # link into D just before the dropping egress.
    entering: dict[tuple[str, str], int] = {}
    drops: dict[tuple[str, str], int] = {}
    dropping = {(p.device, p.port): p.lossy_drops for p in ports if p.lossy_drops > 0}
    for path in bad:
        if suspect.element not in path.links:
            continue
        for before, after in itertools.pairwise(path.links):
            egress = topology.links[after].tx
            if egress in dropping:
                ingress = topology.links[before].rx
                entering[ingress] = entering.get(ingress, 0) + 1
                drops[egress] = dropping[egress]
    if not entering:
        return suspect
    device, port = max(sorted(entering), key=lambda end: entering[end])
    where = ", ".join(f"{d}:{p} ({n})" for (d, p), n in sorted(drops.items()))
    return Suspect(
        "port",
        f"{device}:{port}",
        confidence=max(suspect.confidence, 0.8),
        evidence=[
            f"RoCE entering {device} at {port} is lost, and lossy queues of {device} dropped "
            f"packets on its paths ({where}) while the probes used only the lossless class: "
            f"{device}:{port} classifies RoCE into a lossy class",
            *suspect.evidence,
        ],
        explains=suspect.explains,
        paths=suspect.paths,
    )


def _hop_rate(path: PathResult, index: int, symptom: _Symptom) -> float | None:
    """The symptom's rate in the probes that expire after ``links[index]`` (the path's own
    end-to-end rate for its last link, which leads to the host); 0 before the first link."""
    if index < 0:
        return 0.0
    if index == len(path.links) - 1:
        if symptom.name == "latency":
            return None  # one-way latency and hop round trips do not compare
        return symptom.amount(path) / symptom.total(path) if symptom.total(path) else None
    hop = path.hops[index] if index < len(path.hops) else None
    if hop is None or not hop.sent:
        return None
    if symptom.name == "loss":
        return 1 - hop.answered / hop.sent
    if symptom.name == "icrc":
        return hop.corrupted / hop.answered if hop.answered else None
    return hop.rtt_min_ms  # latency: the round trip to that hop


def _split_twins(
    name: str, twins: list[str], covered: Sequence[PathResult], symptom: _Symptom
) -> tuple[str, str | None, list[str]]:
    """Links on exactly the same paths: the one where the symptom starts (TTL-limited probes
    show it after that link and not before) is the culprit. Without hop probes, unchanged."""
    rises: dict[str, float] = {}
    for candidate in [name, *twins]:
        steps = []
        for path in covered:
            if candidate not in path.links:
                continue
            index = path.links.index(candidate)
            after, before = _hop_rate(path, index, symptom), _hop_rate(path, index - 1, symptom)
            if after is not None and before is not None:
                steps.append(after - before)
        if steps:
            rises[candidate] = sum(steps) / len(steps)
    if len(rises) < len(twins) + 1:
        return name, None, twins
    ranked = sorted(rises, key=lambda c: (-rises[c], c))
    best, runner_up = ranked[0], ranked[1]
    floor = LATENCY_FLOOR_MS / 2 if symptom.name == "latency" else LOSS_FLOOR
    if rises[best] - rises[runner_up] < floor:
        return name, None, twins

    def amount(value: float) -> str:
        return f"{value:+.1f} ms round trip" if symptom.name == "latency" else f"{value:+.1%}"

    note = f"TTL-limited probes: {symptom.name} rises {amount(rises[best])} across {best}; " + (
        ", ".join(f"{amount(rises[c])} across {c}" for c in ranked[1:])
    )
    return best, note, []


def _rate(paths: Sequence[PathResult], symptom: _Symptom) -> float:
    total = sum(symptom.total(p) for p in paths)
    return sum(symptom.amount(p) for p in paths) / total if total else 0.0


def _format_rate(rate: float, symptom: _Symptom) -> str:
    return f"{rate:.1f}" if symptom.name == "latency" else f"{rate:.1%}"


def _same_paths(topology: Topology, paths: Sequence[PathResult], name: str) -> list[str]:
    """Other links crossed by exactly the same probed paths (the probes cannot split them)."""
    mine = {p.label for p in paths if name in p.links}
    others = sorted({n for p in paths for n in p.links} - {name})
    return [n for n in others if {p.label for p in paths if n in p.links} == mine]


def _from_counters(
    topology: Topology, ports: Sequence[PortSymptoms], duration_s: float
) -> list[Suspect]:
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


class _CounterSuspects:
    """The suspects switch counters name, one per (kind, element), each with every reason."""

    def __init__(self, by_end: dict[tuple[str, str], PortSymptoms]) -> None:
        self.by_end = by_end
        self.found: dict[tuple[SuspectKind, str], Suspect] = {}

    def add(
        self,
        kind: SuspectKind,
        element: str,
        confidence: float,
        why: str,
        links: set[str],
        symptoms: frozenset[str] = LOSS,
    ) -> Suspect:
        suspect = self.found.setdefault((kind, element), Suspect(kind, element, confidence, []))
        suspect.confidence = max(suspect.confidence, confidence)
        suspect.evidence.append(why)
        suspect.explains |= links
        suspect.symptoms = symptoms
        return suspect

    def down(self, seen: _PortSeen) -> None:
        if seen.port.up is False and seen.arriving is not None:
            self.add(
                "link", seen.arriving.cable, 0.95, f"{seen.where} is down", seen.both, ALL_SYMPTOMS
            )

    def errors(self, seen: _PortSeen) -> None:
        port, arriving = seen.port, seen.arriving
        if max(port.fcs_errors, port.in_errors) and arriving is not None:
            self.add(
                "link",
                arriving.name,
                0.9,
                f"{seen.where} received {port.fcs_errors} frames with FCS errors "
                f"({port.in_errors} input errors) during the run",
                {arriving.name},
            )

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
        self.add(kind, element, 0.9, why, {leaving.name} if leaving else set(), ALL_SYMPTOMS)

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
            suspect = self.add("port", f"{peer}:{peer_port}", 0.8, why, {arriving.name})
            suspect.ingress_of = arriving.tx
            return
        why = f"{asked}{port.headroom_drops} lossless frames: {peer} does not honour pause"
        kind: SuspectKind = "host-nic" if arriving.tx_host else "port"
        element = peer if arriving.tx_host else f"{peer}:{peer_port}"
        suspect = self.add(kind, element, 0.8, why, {arriving.name})
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
        dropped = self.add("port", seen.where, 0.5, why, lost_on)
        if queue_drops and arriving is not None:
            # The pause that stops this egress arrives over the link from the peer: a lost
            # XON holds the queue paused until it overflows or the watchdog drops.
            dropped.pause_over = frozenset({arriving.name})


def _from_config(topology: Topology, differences: Sequence[Difference]) -> list[Suspect]:
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


# --------------------------------------------------------------------------- ties
#
# Links on exactly the same probed paths (leaf1->spine2 and spine2->leaf2 in a two-leaf
# fabric) cannot be told apart by the paths. TTL-limited probes can: those expiring at
# spine2 cross leaf1->spine2 and not spine2->leaf2. Each kind of probe, by the members of
# the group it crosses, is a binomial sample of the group's symptom, and Wald's sequential
# probability ratio test (agent.observe.locate.stats) calls it clean or lossy at the run's
# confidence -- or not yet. A member is the culprit when the probes that cross it (and the
# members before it) are lossy and those that stop just before it are clean: the loss
# rises across it. Until then the group stays tied, with equal rank, and says which probes
# would split it. No fixed floor: the test decides, or nothing does.

# H0 (clean) at a quarter of H1's rate: the ratio stats.Sprt.for_min_loss uses for paths.
CLEAN_SHARE = 0.25
MAX_LOSSY_SHARE = 0.5  # H1's rate never above it (a group losing more is not subtle)
Decision = Literal["h0", "h1"]
_DECISION_WORDS = {"h0": "clean", "h1": "lossy", None: "undecided"}


@dataclass(frozen=True)
class _Settings:
    confidence: float = DEFAULT_CONFIDENCE
    min_loss: float = DEFAULT_MIN_LOSS


@dataclass(frozen=True)
class FollowUpResult:
    """Probes of one tied group that cross the same members of it (``crosses``), pooled:
    how many were sent (answered, for corruption), how many of them lost (corrupted), and
    the sequential test's decision on that rate: "h0" clean, "h1" lossy, None undecided."""

    group: tuple[str, ...]
    crosses: frozenset[str]
    probes: tuple[str, ...]  # which probes: "h1→h3 (sport 49153) TTL 2, expiring at spine2"
    sent: int
    lost: int
    decision: Decision | None
    symptom: str = "loss"
    note: str | None = None  # why the probing stopped short (a host that could not probe)

    def describe(self) -> str:
        crossing = ", ".join(sorted(self.crosses)) or "none of them"
        verb = "corrupted" if self.symptom == "icrc" else "lost"
        if not self.sent and self.decision == "h0":
            return f"crossing {crossing}: {self.probes[0]} (clean)"
        rate = f" ({self.lost / self.sent:.1%})" if self.sent else ""
        return (
            f"crossing {crossing}: {self.lost} of {self.sent} {verb}{rate}, "
            f"{_DECISION_WORDS[self.decision]}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": list(self.group),
            "crosses": sorted(self.crosses),
            "symptom": self.symptom,
            "probes": list(self.probes),
            "sent": self.sent,
            "lost": self.lost,
            "decision": _DECISION_WORDS[self.decision],
            **({"note": self.note} if self.note else {}),
        }


@dataclass(frozen=True)
class Tie:
    """What the members of a tied group share: all of them (``group``, sorted), the symptom,
    the test's hypotheses -- H1: at least ``p1``, the group's own rate on its paths (the
    lower end of its interval, at least ``min_loss``); H0: at most ``p0`` -- and the hop
    evidence so far (the run's hop probes, then any follow-ups)."""

    group: tuple[str, ...]
    symptom: str
    p0: float
    p1: float
    confidence: float
    base: float  # the group's purity x coverage: confidence before the 0.9/0.6 factor
    evidence: tuple[FollowUpResult, ...] = ()


def _tie_or_split(
    topology: Topology,
    paths: Sequence[PathResult],
    symptom: _Symptom,
    best: _Candidate,
    base: float,
    twins: list[str],
    settings: _Settings,
) -> list[Suspect]:
    """The tied group of ``best`` and its twins, settled as far as the run's hop probes go."""
    group = tuple(sorted([best.name, *twins]))
    covered = best.covered
    if symptom.name == "latency":
        # Hop round trips are no binomial sample: the fixed floor still splits latency.
        name, note, left = _split_twins(best.name, twins, covered, symptom)
        tie = Tie(group, symptom.name, 0.0, 0.0, settings.confidence, base)
        if not left:
            suspect = _member(topology, paths, symptom, best, name, tie, [])
            suspect.confidence = round(base * 0.9, 2)
            suspect.evidence += [note] if note else []
            return [suspect]
        members = [_member(topology, paths, symptom, best, m, tie, list(group)) for m in group]
        return _settle(members, tie, "hop probes")
    # Every probe path through the group, not only the bad ones: picking the paths that lost
    # most would put H1 above the culprit's own rate.
    through = [p for p in paths if best.name in p.links and not p.load]
    p0, p1 = _hypotheses(through, symptom, settings)
    tie = Tie(group, symptom.name, p0, p1, settings.confidence, base)
    tie = replace(tie, evidence=tuple(_hop_evidence(tie, through)))
    members = [_member(topology, paths, symptom, best, m, tie, list(group)) for m in group]
    return _settle(members, tie, "hop probes")


def _member(
    topology: Topology,
    paths: Sequence[PathResult],
    symptom: _Symptom,
    best: _Candidate,
    name: str,
    tie: Tie,
    group: list[str],
) -> Suspect:
    others = [m for m in group if m != name]
    evidence = _link_evidence(topology.links[name], paths, symptom, best)
    if others:
        evidence.append(
            f"every probed path through it crosses {', '.join(others)} too: the paths alone "
            "cannot tell them apart"
        )
    return Suspect(
        "link",
        name,
        confidence=round(tie.base * 0.6, 2),
        evidence=evidence,
        explains={name},
        paths=len(best.covered),
        found_by=symptom.name,
        tied_with=others,
        split_by=split_by(topology, best.covered, tie.group),
        tie=tie,
    )


def _hypotheses(
    covered: Sequence[PathResult], symptom: _Symptom, settings: _Settings
) -> tuple[float, float]:
    """H1: a probe crossing the culprit sees at least the rate the group's paths showed --
    the lower end of its Wilson interval, so that a true culprit meets H1 with the run's
    confidence -- and never less than ``min_loss``; H0: a quarter of that."""
    sent = sum(p.sent for p in covered)
    lost = sum(round(symptom.amount(p)) for p in covered)
    low = loss_interval(sent, min(lost, sent), settings.confidence)[0] if sent else 0.0
    p1 = min(MAX_LOSSY_SHARE, max(settings.min_loss, low))
    return p1 * CLEAN_SHARE, p1


def _counts(path: PathResult, t: int, symptom: str) -> tuple[int, int] | None:
    """(trials, events) of the probes of ``path`` that cross its first ``t`` links: the hop
    probes expiring at the switch ``links[t - 1]`` leads to, or the path itself for all."""
    if t == len(path.links):
        events = path.icrc_errors if symptom == "icrc" else path.vanished
        return path.sent, min(events, path.sent)
    hop = path.hops[t - 1] if t - 1 < len(path.hops) else None
    if hop is None or not hop.sent:
        return None
    if symptom == "icrc":
        return hop.answered, hop.corrupted
    return hop.sent, hop.sent - hop.answered


def _hop_evidence(tie: Tie, covered: Sequence[PathResult]) -> list[FollowUpResult]:
    """The run's hop probes of the group's paths, pooled by the members they cross: per
    member, the probes that stop just before it and those just past it, each kind once."""
    pooled: dict[frozenset[str], list[Any]] = {}
    seen: set[tuple[str, int]] = set()
    members = set(tie.group)
    before_host = False
    for path in covered:
        for name in members & set(path.links):
            index = path.links.index(name)
            before_host |= index == 0
            for t in (index, index + 1):
                counts = _counts(path, t, tie.symptom) if t else None
                if counts is None or (path.label, t) in seen:
                    continue
                seen.add((path.label, t))
                row = pooled.setdefault(frozenset(members & set(path.links[:t])), [0, 0, []])
                row[0] += counts[0]
                row[1] += counts[1]
                where = "end to end" if t == len(path.links) else f"TTL {t}"
                row[2].append(f"{path.src}→{path.dst} (sport {path.sport}) {where}")
    found = []
    for crosses, (sent, lost, probes) in sorted(pooled.items(), key=lambda i: sorted(i[0])):
        decision = Sprt(tie.p0, tie.p1, tie.confidence).update(sent, lost) if sent else None
        found.append(
            FollowUpResult(tie.group, crosses, tuple(probes), sent, lost, decision, tie.symptom)
        )
    if before_host and frozenset() not in pooled:
        found.insert(0, _nothing_before(tie))
    return found


def _nothing_before(tie: Tie) -> FollowUpResult:
    """Before a host's own link lies only the host: clean without a probe."""
    return FollowUpResult(
        tie.group, frozenset(), ("nothing but the host lies before it",), 0, 0, "h0", tie.symptom
    )


@dataclass(frozen=True)
class _Judgement:
    """Which members the evidence clears, and which it shows the symptom rising at: the
    probes crossing it lossy (``lossy``), those stopping just before it clean (``clean``)."""

    cleared: dict[str, FollowUpResult]
    risen: dict[str, tuple[FollowUpResult, FollowUpResult]]


def _judge(tie: Tie) -> _Judgement:
    # A later result for the same kind of probe replaces an earlier one: the follow-ups
    # continue the run's own test (seeded with its counts).
    kinds = {r.crosses: r for r in tie.evidence}
    clean = {s: r for s, r in kinds.items() if r.decision == "h0"}
    cleared = {m: r for s, r in sorted(clean.items(), key=lambda i: len(i[0])) for m in s}
    risen: dict[str, tuple[FollowUpResult, FollowUpResult]] = {}
    for crosses, lossy in sorted(kinds.items(), key=lambda i: (len(i[0]), sorted(i[0]))):
        if lossy.decision != "h1":
            continue
        for member in sorted(crosses):
            before = clean.get(crosses - {member})
            if before is not None and member not in cleared and member not in risen:
                risen[member] = (lossy, before)
    return _Judgement(cleared, risen)


def _settle(members: list[Suspect], tie: Tie, stage: str) -> list[Suspect]:
    """The tied ``members`` after the evidence in ``tie``: the members the symptom rises at
    (or the one left when the test cleared every other), each ranked on its own; else the
    members not cleared, still tied. Cleared members leave the list; their evidence stays
    with the ones left."""
    judged = _judge(tie)
    by_name = {s.element: s for s in members}
    for suspect in members:
        suspect.tie = tie
    playing = [m for m in tie.group if m in by_name]
    winners = [m for m in playing if m in judged.risen]
    left = [m for m in playing if m not in judged.cleared]
    if not winners and len(left) == 1 and len(playing) > 1:
        winners = left
    if winners:
        return [_winner(by_name[w], tie, judged, playing, winners, stage) for w in winners]
    if not left:  # every member cleared although their paths lose: the test says nothing
        left = playing
    for name in left:
        suspect = by_name[name]
        suspect.tied_with = [m for m in left if m != name]
        suspect.tie = tie
        if suspect.tied_with:
            suspect.evidence.append(_undecided(tie, stage, judged))
    return [by_name[m] for m in left]


def _test_words(tie: Tie) -> str:
    return (
        f"sequential test at confidence {tie.confidence:.2f}: lossy at ≥ {tie.p1:.2%}, "
        f"clean at ≤ {tie.p0:.2%}"
    )


def _probes_text(result: FollowUpResult, limit: int = 3) -> str:
    shown = ", ".join(result.probes[:limit])
    return shown + (" …" if len(result.probes) > limit else "")


def _winner(
    suspect: Suspect,
    tie: Tie,
    judged: _Judgement,
    playing: list[str],
    winners: list[str],
    stage: str,
) -> Suspect:
    name = suspect.element
    suspect.tied_with = []
    suspect.confidence = round(tie.base * 0.9, 2)
    risen = judged.risen.get(name)
    if risen is not None:
        lossy, before = risen
        suspect.evidence.append(
            f"{stage}: {tie.symptom} rises across {name}: probes {lossy.describe()} "
            f"[{_probes_text(lossy)}]; probes {before.describe()} [{_probes_text(before)}] "
            f"({_test_words(tie)})"
        )
    else:
        verb = "corrupt" if tie.symptom == "icrc" else "lose"
        suspect.evidence.append(
            f"{stage}: by elimination -- every other link on its paths tested clean "
            f"({_test_words(tie)}) and these paths {verb}"
        )
    for other in playing:
        if other in winners or other == name:
            continue
        cleared = judged.cleared.get(other)
        if cleared is not None:
            suspect.evidence.append(
                f"{stage}: {other} cleared: probes {cleared.describe()} [{_probes_text(cleared)}]"
            )
        else:
            suspect.evidence.append(
                f"{stage}: {other} could not be cleared: every probe past it also crosses "
                f"{name}, where the {tie.symptom} already rises"
            )
    return suspect


def _undecided(tie: Tie, stage: str, judged: _Judgement) -> str:
    if tie.symptom == "latency":
        return (
            f"{stage}: the round trips to the switches on the way rise by less than "
            f"{LATENCY_FLOOR_MS / 2:g} ms more across one of them than across the others"
        )
    kinds = {r.crosses: r for r in tie.evidence}
    shown = "; ".join(r.describe() for _, r in sorted(kinds.items(), key=lambda i: sorted(i[0])))
    cleared = sorted(judged.cleared)
    return f"{stage} did not split the group ({_test_words(tie)}): {shown or 'no hop probes'}" + (
        f"; cleared: {', '.join(cleared)}" if cleared else ""
    )


def split_by(topology: Topology, covered: Sequence[PathResult], group: Sequence[str]) -> list[str]:
    """The probes that would split the group on a real fabric: per pair of members in path
    order, TTL-limited probes expiring at the switch between them, the same switch's own
    address (ICMP echo), and a host whose path reaches the later one without the earlier."""
    texts: list[str] = []
    members = set(group)
    for path in sorted(covered, key=lambda p: p.label):
        order = [n for n in path.links if n in members]
        for earlier, later in itertools.pairwise(order):
            index = path.links.index(earlier)
            switch = topology.links[earlier].rx[0]
            link = topology.links[earlier]
            elsewhere = "another host" if link.tx_host else f"a host not behind {link.tx[0]}"
            for text in (
                f"TTL-limited probes from {path.src} expiring at {switch} (TTL {index + 1}) "
                f"cross {earlier} but not {later}",
                f"probes from {path.src} to {switch}'s own address (ICMP echo) cross "
                f"{earlier} but not {later}",
                f"probes from a host whose path reaches {later} without crossing {earlier} "
                f"(none among the probed paths: {elsewhere})",
            ):
                if text not in texts:
                    texts.append(text)
        if texts:
            break  # one path's pairs name the probes; the others' say the same
    return texts


def _untie_missing(suspects: list[Suspect]) -> list[Suspect]:
    """A tied member another rule replaced (a lossy class found behind the loss) leaves the
    group: the others stop naming it."""
    names = {s.element for s in suspects if s.tied_with}
    for suspect in suspects:
        suspect.tied_with = [n for n in suspect.tied_with if n in names]
    return suspects


def _order(suspects: list[Suspect]) -> list[Suspect]:
    """Sorted by confidence, then paths explained; a tied group's members side by side with
    one rank (standard competition ranking: 1, 1, 3)."""

    def key(s: Suspect) -> tuple[float, int, str, str]:
        return (-s.confidence, -s.paths, min([s.element, *s.tied_with]), s.element)

    suspects.sort(key=key)
    previous: frozenset[str] | None = None
    rank = 0
    for position, suspect in enumerate(suspects, start=1):
        group = frozenset([suspect.element, *suspect.tied_with]) if suspect.tied_with else None
        if group is None or group != previous:
            rank = position
        suspect.rank = rank
        previous = group
    return suspects


def resolve_ties(verdict: Verdict, results: Sequence[FollowUpResult]) -> Verdict:
    """The verdict after the follow-up probes of its tied groups: each group settled again
    with the new evidence (see :func:`_settle`), the suspects ranked again, and the
    follow-ups recorded. A group the follow-ups did not decide stays tied and says so."""
    groups: dict[tuple[str, ...], list[Suspect]] = {}
    kept: list[Suspect] = []
    for suspect in verdict.suspects:
        # Copies: the verdict given stays as it was.
        suspect = replace(
            suspect, evidence=list(suspect.evidence), tied_with=list(suspect.tied_with)
        )
        if suspect.tied_with and suspect.tie is not None:
            groups.setdefault(suspect.tie.group, []).append(suspect)
        else:
            kept.append(suspect)
    for group, members in groups.items():
        mine = tuple(r for r in results if r.group == group)
        tie = members[0].tie
        assert tie is not None
        if mine:
            tie = replace(tie, evidence=(*tie.evidence, *mine))
        kept += _settle(members, tie, "follow-up probes") if mine else members
    return Verdict(
        _order(kept),
        verdict.paths,
        verdict.bad_paths,
        verdict.unexplained,
        verdict.notes,
        [*verdict.follow_ups, *results],
    )

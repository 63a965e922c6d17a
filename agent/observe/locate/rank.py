"""From symptoms to a culprit (issue #15): which link, port, switch or host NIC -- the join.

Joins three kinds of evidence with the topology (:mod:`agent.observe.locate.topology`) and
ranks suspects:

1. **Switch counters and state**, read before and after a probing run
   (:mod:`agent.observe.locate.counters`): a port that is down, frames received with FCS
   errors, a host port that keeps receiving pause frames until the watchdog acts (a
   storming NIC), lossless drops at an ingress that sent XOFF (the neighbour does not
   honour pause), and every place where the configuration read back differs from the plan.
   A counter names its element directly, so these suspects come first and *explain away*
   the probe symptoms they cause.
2. **Path-aware probes** (:mod:`agent.observe.probes.paths`,
   :mod:`agent.observe.locate.evidence`): each probe flow's source port pins one ECMP path,
   known hop by hop from a traceroute with the same 5-tuple, so each flow's loss, ICRC
   errors and latency belong to a known list of directed links.
3. **Tomography** over what the counters do not explain
   (:mod:`agent.observe.locate.tomography`): the directed link whose paths lose (or
   corrupt, or delay) the most compared with the paths that do NOT cross it.

A host's access link and its NIC lie on exactly the same paths, so probes alone cannot tell
them apart; switch counters can (FCS errors on the leaf port: the cable or optic; pauses
from the host: the NIC), and the suspect says which it is or that it cannot tell.

Links on exactly the same probed paths are split by the hop probes with a sequential test,
or reported as one tied group with equal rank that says which probes would split it
(:mod:`agent.observe.locate.ties`, :mod:`agent.observe.locate.followup`).

Here: the join itself -- the rules that weigh one kind of evidence against another (a slow
or lossy link under a failed pause, the ingress that misclassified RoCE, a host that held
its frames) -- and the ranking. Pure functions over plain data: no I/O
(:mod:`agent.observe.locate.gather` traces, probes and reads the switches).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypedDict, Unpack

from agent.device.state import Difference
from agent.errors import AgentError
from agent.observe.locate.counters import PortSymptoms, from_config, from_counters
from agent.observe.locate.evidence import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MIN_LOSS,
    LATENCY_FLOOR_MS,
    PathResult,
    SplitTest,
    Symptom,
    symptoms,
)
from agent.observe.locate.ties import settle
from agent.observe.locate.tomography import tomography
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import FollowUpResult, Suspect, Verdict

LOAD_WEIGHT = 100  # a loading flow's path counts this many probe paths (see _resolve_ingress)


class LocateError(AgentError):
    """Inputs that cannot be joined (a path over a link the fabric does not have)."""


class LocateOptions(TypedDict, total=False):
    """:func:`locate`'s settings: the run's length (for counter rates), the links of the
    flows that loaded the fabric, and the sequential test that splits links on the same
    paths."""

    duration_s: float
    loaded: Sequence[tuple[str, ...]]
    confidence: float
    min_loss: float


@dataclass(frozen=True)
class _Join:
    """What the path rules weigh: the fabric, the paths that sent, the bad ones among them
    (by label), the ports' symptoms, the path symptoms and the test that splits ties."""

    topology: Topology
    measured: list[PathResult]
    bad: dict[str, PathResult]
    ports: Sequence[PortSymptoms]
    symptoms: list[Symptom]
    split: SplitTest


def locate(
    topology: Topology,
    paths: Sequence[PathResult],
    ports: Sequence[PortSymptoms],
    differences: Sequence[Difference] = (),
    **options: Unpack[LocateOptions],
) -> Verdict:
    """Rank the suspects; ``Verdict.suspects`` is empty when nothing is wrong. ``loaded``:
    the links of the flows that loaded the fabric (``locate --load``), which carry most of
    the traffic a misclassifying port sends into a lossy queue. ``confidence`` and
    ``min_loss``: the sequential test that splits links on the same paths (see
    :func:`agent.observe.locate.ties.tie_or_split`). ``duration_s``: the run's length, 1 s
    unless given."""
    split = SplitTest(
        options.get("confidence", DEFAULT_CONFIDENCE), options.get("min_loss", DEFAULT_MIN_LOSS)
    )
    _check_links(topology, paths)
    measured = [p for p in paths if p.sent > 0]
    notes = [f"{p.label}: nothing sent, not used" for p in paths if p.sent == 0]
    duration_s = options.get("duration_s", 1.0)
    suspects = from_counters(topology, ports, duration_s) + from_config(topology, differences)
    suspects += _host_delay(measured)
    path_symptoms = symptoms(measured)
    bad = {p.label: p for p in measured if any(s.bad(p) for s in path_symptoms)}
    loaded = options.get("loaded", ())
    suspects = [
        _resolve_ingress(topology, s, [p.links for p in bad.values()], loaded) for s in suspects
    ]
    for suspect in suspects:
        suspect.paths = len(_explained_by([suspect], bad.values()))
    join = _Join(topology, measured, bad, ports, path_symptoms, split)
    suspects, explained = _from_paths(join, suspects)
    suspects = _order(_untie_missing(_slow_links(suspects)))
    unexplained = sorted(label for label in bad if label not in explained)
    return Verdict(suspects, len(measured), len(bad), unexplained, notes)


def _from_paths(join: _Join, known: Sequence[Suspect]) -> tuple[list[Suspect], set[str]]:
    """``known`` and, symptom by symptom, the links tomography finds behind the bad paths
    no suspect so far explains; the labels of the bad paths explained."""
    suspects = list(known)
    explained: set[str] = set()
    bad = join.bad.values()
    for symptom in join.symptoms:
        # A counter explains the symptoms it causes: drops explain loss, not a slow path.
        causes = [s for s in suspects if symptom.name in s.symptoms]
        covered = _explained_by(causes, (p for p in bad if symptom.bad(p)))
        found = tomography(join.topology, join.measured, symptom, covered, join.split)
        if symptom.name == "loss":
            found = [_lossy_class(join.topology, s, bad, join.ports) for s in found]
            # The members of a tied group all lead to the same misclassifying port: once.
            unique = {(s.kind, s.element): s for s in reversed(found)}
            found = [s for s in found if unique[(s.kind, s.element)] is s]
        suspects += found
        explained |= covered | _explained_by(found, bad)
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
    why = (
        f"the paths leaving by {suspect.ingress_of[0]}:{suspect.ingress_of[1]} enter "
        f"{device} at {port}: that ingress is where the class is chosen"
    )
    return replace(suspect, element=f"{device}:{port}", evidence=[*suspect.evidence, why])


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
    with the new evidence (see :func:`agent.observe.locate.ties.settle`), the suspects
    ranked again, and the follow-ups recorded. A group the follow-ups did not decide stays
    tied and says so."""
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
        kept += settle(members, tie, "follow-up probes") if mine else members
    return Verdict(
        _order(kept),
        verdict.paths,
        verdict.bad_paths,
        verdict.unexplained,
        verdict.notes,
        [*verdict.follow_ups, *results],
    )

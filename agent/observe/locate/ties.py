"""Tied groups: links on exactly the same probed paths, split by the hop probes or kept tied.

Links on exactly the same probed paths (leaf1->spine2 and spine2->leaf2 in a two-leaf
fabric) cannot be told apart by the paths. TTL-limited probes can: those expiring at
spine2 cross leaf1->spine2 and not spine2->leaf2. Each kind of probe, by the members of
the group it crosses, is a binomial sample of the group's symptom, and Wald's sequential
probability ratio test (agent.observe.locate.stats) calls it clean or lossy at the run's
confidence -- or not yet. A member is the culprit when the probes that cross it (and the
members before it) are lossy and those that stop just before it are clean: the loss
rises across it. Until then the group stays tied, with equal rank, and says which probes
would split it. No fixed floor: the test decides, or nothing does. Latency is the
exception: hop round trips are no binomial sample, so a fixed floor on their rise splits
a latency group.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.observe.locate.evidence import (
    LATENCY_FLOOR_MS,
    LOSS_FLOOR,
    Candidate,
    PathResult,
    SplitTest,
    Symptom,
    Weighing,
    link_evidence,
)
from agent.observe.locate.stats import CLEAN_SHARE, Sprt, loss_interval
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import FollowUpResult, Suspect, Tie

MAX_LOSSY_SHARE = 0.5  # H1's rate never above it (a group losing more is not subtle)


def tie_or_split(
    weighing: Weighing, best: Candidate, base: float, twins: list[str]
) -> list[Suspect]:
    """The tied group of ``best`` and its twins, settled as far as the run's hop probes go."""
    symptom, split = weighing.symptom, weighing.split
    group = tuple(sorted([best.name, *twins]))
    if symptom.name == "latency":
        # Hop round trips are no binomial sample: the fixed floor still splits latency.
        name, note, left = _split_twins(best.name, twins, best.covered, symptom)
        tie = Tie(group, symptom.name, 0.0, 0.0, split.confidence, base)
        if not left:
            suspect = _member(weighing, best, name, tie, [])
            evidence = [*suspect.evidence, *([note] if note else [])]
            return [replace(suspect, confidence=round(base * 0.9, 2), evidence=evidence)]
        members = [_member(weighing, best, m, tie, list(group)) for m in group]
        return settle(members, tie, "hop probes")
    # Every probe path through the group, not only the bad ones: picking the paths that lost
    # most would put H1 above the culprit's own rate.
    through = [p for p in weighing.paths if best.name in p.links and not p.load]
    p0, p1 = _hypotheses(through, symptom, split)
    tie = Tie(group, symptom.name, p0, p1, split.confidence, base)
    tie = replace(tie, evidence=tuple(_hop_evidence(tie, through)))
    members = [_member(weighing, best, m, tie, list(group)) for m in group]
    return settle(members, tie, "hop probes")


def _member(weighing: Weighing, best: Candidate, name: str, tie: Tie, group: list[str]) -> Suspect:
    topology, symptom = weighing.topology, weighing.symptom
    others = [m for m in group if m != name]
    evidence = link_evidence(topology.links[name], weighing.paths, symptom, best)
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
    covered: Sequence[PathResult], symptom: Symptom, split: SplitTest
) -> tuple[float, float]:
    """H1: a probe crossing the culprit sees at least the rate the group's paths showed --
    the lower end of its Wilson interval, so that a true culprit meets H1 with the run's
    confidence -- and never less than ``min_loss``; H0: a quarter of that."""
    sent = sum(p.sent for p in covered)
    lost = sum(round(symptom.amount(p)) for p in covered)
    low = loss_interval(sent, min(lost, sent), split.confidence)[0] if sent else 0.0
    p1 = min(MAX_LOSSY_SHARE, max(split.min_loss, low))
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


@dataclass(frozen=True)
class _Settling:
    """One settling of a tied group: its tie, what the evidence judged, the members still
    in play (in the group's order), the winners among them, and the stage that decided
    ("hop probes", "follow-up probes")."""

    tie: Tie
    judged: _Judgement
    playing: list[str]
    winners: list[str]
    stage: str


def settle(members: Sequence[Suspect], tie: Tie, stage: str) -> list[Suspect]:
    """The tied ``members`` after the evidence in ``tie``, as new suspects (the ones given
    stay as they are): the members the symptom rises at (or the one left when the test
    cleared every other), each ranked on its own; else the members not cleared, still
    tied. Cleared members leave the list; their evidence stays with the ones left."""
    judged = _judge(tie)
    by_name = {s.element: s for s in members}
    playing = [m for m in tie.group if m in by_name]
    left = [m for m in playing if m not in judged.cleared]
    winners = [m for m in playing if m in judged.risen]
    if not winners and len(left) == 1 and len(playing) > 1:
        winners = left
    if winners:
        settling = _Settling(tie, judged, playing, winners, stage)
        return [_winner(by_name[w], settling) for w in winners]
    # Every member cleared although their paths lose: the test says nothing.
    return _still_tied([by_name[m] for m in left or playing], tie, stage, judged)


def _still_tied(members: list[Suspect], tie: Tie, stage: str, judged: _Judgement) -> list[Suspect]:
    """``members`` as one tied group; each says why the evidence did not split it."""
    names = [m.element for m in members]
    tied = []
    for suspect in members:
        others = [m for m in names if m != suspect.element]
        why = [_undecided(tie, stage, judged)] if others else []
        tied.append(replace(suspect, tied_with=others, tie=tie, evidence=[*suspect.evidence, *why]))
    return tied


def _test_words(tie: Tie) -> str:
    return (
        f"sequential test at confidence {tie.confidence:.2f}: lossy at ≥ {tie.p1:.2%}, "
        f"clean at ≤ {tie.p0:.2%}"
    )


def _probes_text(result: FollowUpResult, limit: int = 3) -> str:
    shown = ", ".join(result.probes[:limit])
    return shown + (" …" if len(result.probes) > limit else "")


def _winner(suspect: Suspect, settling: _Settling) -> Suspect:
    """``suspect`` named on its own: why the symptom rises at it, and what became of each
    other member of its group."""
    tie, name = settling.tie, suspect.element
    evidence = [*suspect.evidence, _why_won(name, settling)]
    for other in settling.playing:
        if other not in settling.winners and other != name:
            evidence.append(_why_not(other, name, settling))
    return replace(
        suspect, tie=tie, tied_with=[], confidence=round(tie.base * 0.9, 2), evidence=evidence
    )


def _why_won(name: str, settling: _Settling) -> str:
    tie, stage = settling.tie, settling.stage
    risen = settling.judged.risen.get(name)
    if risen is not None:
        lossy, before = risen
        return (
            f"{stage}: {tie.symptom} rises across {name}: probes {lossy.describe()} "
            f"[{_probes_text(lossy)}]; probes {before.describe()} [{_probes_text(before)}] "
            f"({_test_words(tie)})"
        )
    verb = "corrupt" if tie.symptom == "icrc" else "lose"
    return (
        f"{stage}: by elimination -- every other link on its paths tested clean "
        f"({_test_words(tie)}) and these paths {verb}"
    )


def _why_not(other: str, name: str, settling: _Settling) -> str:
    stage = settling.stage
    cleared = settling.judged.cleared.get(other)
    if cleared is not None:
        return f"{stage}: {other} cleared: probes {cleared.describe()} [{_probes_text(cleared)}]"
    return (
        f"{stage}: {other} could not be cleared: every probe past it also crosses "
        f"{name}, where the {settling.tie.symptom} already rises"
    )


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


def _hop_rate(path: PathResult, index: int, symptom: Symptom) -> float | None:
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
    name: str, twins: list[str], covered: Sequence[PathResult], symptom: Symptom
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

"""Targeted follow-up probes that split a tied group (issue #30).

When links lie on exactly the same probed paths (leaf1->spine2 and spine2->leaf2 in a
two-leaf fabric), the run's verdict ties them (:mod:`agent.observe.locate.ties`).
These follow-ups probe where they differ: TTL-limited probes with a traced path's own
5-tuple that expire at the switch between two members cross the earlier one and not the
later one (mtr's method, :func:`agent.observe.probes.hops.probe_hops`), and probes from
any source whose path crosses only some members do the same. Each kind of probe -- by the
members it crosses -- is one sequential test (Wald's SPRT, :mod:`agent.observe.locate.stats`)
that continues the run's own hop counts; the probing grows round by round (more tries each
round) until every test decides or the time is up. :func:`agent.observe.locate.rank.resolve_ties`
then names the member the symptom rises at, or keeps the group tied and says so.

:func:`plan_follow_ups` is pure; :func:`run_follow_ups` probes (through ``prober``, by
default the hosts' own hop probes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from agent.errors import AgentError
from agent.observe.locate.evidence import PathResult
from agent.observe.locate.rank import resolve_ties
from agent.observe.locate.stats import Sprt
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import FollowUpResult, Suspect, Tie, Verdict
from agent.observe.probes.hops import MAX_HOP_ROUNDS, HopCount
from agent.observe.probes.packets import ROCE_UDP_PORT
from agent.observe.probes.paths import Path

if TYPE_CHECKING:
    from agent.intent.model import FabricIntent

__all__ = ["FollowUp", "FollowUpResult", "follow_up", "plan_follow_ups", "run_follow_ups"]

PER_KIND = 4  # sources (paths) probed per kind of probe: more power per round, bounded cost
FIRST_TRIES = 50  # probes per hop and path in the first round; doubled each round after
MIN_TRIES = 10  # a round smaller than this is not worth a worker start
RATE_PPS = 200  # per source host: the hop probes' own pace (under a switch's ICMP policer)
# A round's fixed cost beyond its packets: the worker's start on the host and the wait for
# the last answers (HopSpec.wait_s).
ROUND_OVERHEAD_S = 2.0

Key = tuple[str, str, int]  # (src, dst, sport)
Prober = Callable[..., dict[Key, tuple[HopCount | None, ...]]]


@dataclass(frozen=True)
class Findings:
    """What a locate run concluded, and from what: the fabric's topology, every probed path's
    result and the verdict ranked on them (the follow-ups' starting point)."""

    topology: Topology
    paths: Sequence[PathResult]
    verdict: Verdict


@dataclass(frozen=True)
class FollowUp:
    """TTL-limited probes of one traced path that expire at one switch: they cross the
    members ``crosses`` of the tied ``group`` (and stop before the others)."""

    group: tuple[str, ...]
    crosses: frozenset[str]
    src: str
    dst: str
    sport: int
    ttl: int
    at: str  # the switch they expire at
    symptom: str
    p0: float  # the test's hypotheses (the tie's)
    p1: float
    prior: tuple[int, int] = (0, 0)  # the run's own counts of this kind: the test goes on

    @property
    def key(self) -> Key:
        return (self.src, self.dst, self.sport)

    @property
    def label(self) -> str:
        return f"{self.src}→{self.dst} (sport {self.sport}) TTL {self.ttl}, expiring at {self.at}"


def _tied_groups(verdict: Verdict) -> list[tuple[Tie, list[Suspect]]]:
    groups: dict[tuple[str, ...], tuple[Tie, list[Suspect]]] = {}
    for suspect in verdict.suspects:
        if suspect.tied_with and suspect.tie is not None:
            groups.setdefault(suspect.tie.group, (suspect.tie, []))[1].append(suspect)
    return list(groups.values())


def plan_follow_ups(
    topology: Topology,
    paths: Sequence[PathResult],
    verdict: Verdict,
    per_kind: int = PER_KIND,
) -> list[FollowUp]:
    """Per tied group of ``verdict``, the hop probes that split it: for each member, on the
    traced ``paths`` through it, the probes that stop at the switch just before it and just
    past it (a member that is a path's last link is past only end to end: the mesh's own
    counts), grouped by the members they cross; kinds the run's hop probes already decided
    are left out, and each kind keeps ``per_kind`` paths, different sources first. Latency
    ties are left out: round trips are no binomial sample for the sequential test."""
    planned: list[FollowUp] = []
    for tie, _ in _tied_groups(verdict):
        if tie.symptom not in ("loss", "icrc"):
            continue
        kinds = _candidates(topology, paths, tie)
        for crosses in sorted(kinds, key=sorted):
            planned += _spread(kinds[crosses], per_kind)
    return planned


def _candidates(
    topology: Topology, paths: Sequence[PathResult], tie: Tie
) -> dict[frozenset[str], list[FollowUp]]:
    """Every undecided kind of probe of ``tie``'s group, with the paths that can send it."""
    decided = {r.crosses for r in tie.evidence if r.decision is not None}
    prior = {r.crosses: (r.sent, r.lost) for r in tie.evidence}
    members = set(tie.group)
    kinds: dict[frozenset[str], list[FollowUp]] = {}
    for path in sorted(paths, key=lambda p: p.label):
        if path.load:
            continue
        for t in _ttls(path, members):
            crosses = frozenset(members & set(path.links[:t]))
            if crosses in decided:
                continue
            at = topology.links[path.links[t - 1]].rx[0]
            follow = FollowUp(
                tie.group, crosses, path.src, path.dst, path.sport, t, at,
                tie.symptom, tie.p0, tie.p1, prior.get(crosses, (0, 0)),
            )  # fmt: skip
            kinds.setdefault(crosses, []).append(follow)
    return kinds


def _ttls(path: PathResult, members: set[str]) -> list[int]:
    """The TTLs whose probes stop just before or just past a member (switch hops only)."""
    ttls = set()
    for name in members & set(path.links):
        index = path.links.index(name)
        ttls |= {t for t in (index, index + 1) if 0 < t < len(path.links)}
    return sorted(ttls)


def _spread(candidates: list[FollowUp], limit: int) -> list[FollowUp]:
    """Up to ``limit`` of them, one per source first (a source's own link is then not all
    the evidence), in a stable order."""
    chosen: list[FollowUp] = []
    sources: set[str] = set()
    for candidate in candidates:
        if candidate.src not in sources and len(chosen) < limit:
            chosen.append(candidate)
            sources.add(candidate.src)
    for candidate in candidates:
        if candidate not in chosen and len(chosen) < limit:
            chosen.append(candidate)
    return chosen


@dataclass
class _Kind:
    """One sequential test: the follow-ups that cross the same members of one group."""

    group: tuple[str, ...]
    crosses: frozenset[str]
    symptom: str
    test: Sprt
    probes: list[FollowUp] = field(default_factory=list)

    def result(self, note: str | None) -> FollowUpResult:
        return FollowUpResult(
            self.group,
            self.crosses,
            tuple(f.label for f in self.probes),
            self.test.sent,
            self.test.lost,
            self.test.decision,
            self.symptom,
            note,
        )


def _kinds(follow_ups: Iterable[FollowUp], confidence: float) -> dict[Any, _Kind]:
    kinds: dict[Any, _Kind] = {}
    for f in follow_ups:
        kind = kinds.get((f.group, f.crosses))
        if kind is None:
            test = Sprt(f.p0, f.p1, confidence)
            if f.prior[0]:
                test.update(*f.prior)
            kind = kinds[(f.group, f.crosses)] = _Kind(f.group, f.crosses, f.symptom, test)
        kind.probes.append(f)
    return kinds


def _round_cost_s(probing: dict[Key, int], tries: int, rate_pps: int) -> float:
    """A round's time: every source sends its paths' hops ``tries`` times at ``rate_pps``,
    all sources at once."""
    per_source: dict[str, int] = {}
    for (src, _, _), hops in probing.items():
        per_source[src] = per_source.get(src, 0) + hops
    return max(per_source.values(), default=0) * tries / rate_pps + ROUND_OVERHEAD_S


def _fit_tries(probing: dict[Key, int], tries: int, rate_pps: int, left_s: float) -> int:
    """``tries``, or fewer so the round ends before the deadline (0: no round fits)."""
    if _round_cost_s(probing, tries, rate_pps) <= left_s:
        return tries
    per_try = _round_cost_s(probing, 1, rate_pps) - ROUND_OVERHEAD_S
    fitting = int((left_s - ROUND_OVERHEAD_S) / per_try) if per_try > 0 else 0
    return fitting if fitting >= MIN_TRIES else 0


def _events(hop: HopCount, symptom: str) -> tuple[int, int]:
    if symptom == "icrc":
        return hop.answered, hop.corrupted
    return hop.sent, hop.sent - hop.answered


class FollowUpOptions(TypedDict, total=False):
    """How :func:`run_follow_ups` probes: the run's UDP port, the pace per source host
    (:data:`RATE_PPS`), probes per hop and path in the first round (:data:`FIRST_TRIES`),
    the prober (default: the hosts' own hop probes) and the clock (tests)."""

    udp_port: int
    rate_pps: int
    first_tries: int
    prober: Prober | None
    clock: Callable[[], float]


def run_follow_ups(
    intent: FabricIntent,
    follow_ups: Sequence[FollowUp],
    confidence: float,
    deadline_s: float,
    **options: Unpack[FollowUpOptions],
) -> list[FollowUpResult]:
    """Probe until every kind of follow-up is decided or ``deadline_s`` seconds from now:
    round after round, each undecided kind's paths hop by hop (``first_tries`` probes per
    hop, doubled each round, fewer for a last round that must fit the time), every source
    at once. One result per kind, with its counts (the run's own included) and decision. A
    host that cannot probe stops the follow-ups; the results say so."""
    prober = options.get("prober")
    if prober is None:
        from agent.observe.probes.hops import probe_hops

        prober = probe_hops
    clock = options.get("clock", time.monotonic)
    rate_pps, udp_port = options.get("rate_pps", RATE_PPS), options.get("udp_port", ROCE_UDP_PORT)
    started = clock()
    kinds = _kinds(follow_ups, confidence)
    tries, note = options.get("first_tries", FIRST_TRIES), None
    while True:
        active = [k for k in kinds.values() if k.test.decision is None]
        probing = _probing(active)
        left = deadline_s - (clock() - started)
        tries = _fit_tries(probing, min(tries, MAX_HOP_ROUNDS), rate_pps, left)
        if not active or not tries:
            if active:
                note = f"undecided when the time ran out ({deadline_s:.0f} s for follow-ups)"
            break
        paths = [
            Path(src, dst, sport, (None,) * hops) for (src, dst, sport), hops in probing.items()
        ]
        try:
            counts = prober(intent, paths, tries=tries, rate_pps=rate_pps, udp_port=udp_port)
        except AgentError as exc:
            note = f"follow-up probes stopped: {exc}"
            break
        for kind in active:
            kind.test.update(*_pooled(kind, counts))
        tries *= 2
    return [k.result(note if k.test.decision is None else None) for k in kinds.values()]


def _probing(active: Iterable[_Kind]) -> dict[Key, int]:
    """Per path the undecided kinds send on, the highest TTL they need."""
    probing: dict[Key, int] = {}
    for kind in active:
        for f in kind.probes:
            probing[f.key] = max(probing.get(f.key, 0), f.ttl)
    return probing


def _pooled(kind: _Kind, counts: dict[Key, tuple[HopCount | None, ...]]) -> tuple[int, int]:
    """(trials, events) of one kind's probes in a round: its paths' hops at its TTL."""
    sent = lost = 0
    for f in kind.probes:
        hops = counts.get(f.key, ())
        hop = hops[f.ttl - 1] if f.ttl - 1 < len(hops) else None
        if hop is not None:
            trials, events = _events(hop, kind.symptom)
            sent, lost = sent + trials, lost + events
    return sent, lost


def follow_up(
    intent: FabricIntent,
    found: Findings,
    confidence: float,
    deadline_s: float,
    **options: Unpack[FollowUpOptions],
) -> Verdict:
    """The verdict with its tied groups split by follow-up probes where they can be (plan,
    probe, resolve); unchanged when it has no tie or there is no time."""
    planned = plan_follow_ups(found.topology, found.paths, found.verdict)
    if not planned or deadline_s <= 0:
        return found.verdict
    results = run_follow_ups(intent, planned, confidence, deadline_s, **options)
    return resolve_ties(found.verdict, results)

"""Tomography over what the switch counters do not explain: the directed link whose paths
show a symptom (loss, ICRC errors, latency) most compared with the paths that do NOT cross
it.

That comparison is how R-Pingmesh (Liu et al., SIGCOMM 2024, §4) and Pingmesh (Guo et al.,
SIGCOMM 2015, §5) tell a network fault from an end-host fault: a fault of one host shows on
every path of that host and on no other, a link fault on the paths through that link
whatever their hosts. The greedy pick of the link that explains the most remaining bad
paths is the set cover NetBouncer and R-Pingmesh use. Links on exactly the same paths go
to :mod:`agent.observe.locate.ties`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.observe.locate.evidence import (
    Candidate,
    PathResult,
    SplitTest,
    Symptom,
    Weighing,
    link_evidence,
)
from agent.observe.locate.ties import tie_or_split
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import Suspect


def tomography(
    topology: Topology,
    paths: Sequence[PathResult],
    symptom: Symptom,
    explained: set[str],
    split: SplitTest,
) -> list[Suspect]:
    """Greedy set cover of the bad paths no counter explained, by the directed link whose
    paths show the symptom most compared with the paths that do not cross it. Paths a counter
    explains are left out of both rates: their cause is known, and a port dropping heavily
    elsewhere must not hide a link that loses less (R-Pingmesh compares unexplained paths)."""
    remaining = {p.label: p for p in paths if symptom.bad(p) and p.label not in explained}
    weighing = Weighing(topology, [p for p in paths if p.label not in explained], symptom, split)
    found: list[Suspect] = []
    while remaining:
        names = sorted({n for p in remaining.values() for n in p.links})
        candidates = (Candidate.of(n, weighing.paths, remaining, symptom) for n in names)
        best = max(candidates, key=_score)
        if best.score <= 0:
            break
        found += _link_suspects(weighing, best, len(remaining))
        for p in best.covered:
            del remaining[p.label]
    return found


def _score(candidate: Candidate) -> float:
    return candidate.score


def _link_suspects(weighing: Weighing, best: Candidate, remaining: int) -> list[Suspect]:
    """The link tomography picked, with its evidence and confidence; or, when other links lie
    on exactly its paths, the one the hop probes show the symptom rising at -- and where they
    cannot tell, every such link as one tied group (see :func:`ties.tie_or_split`)."""
    name, covered = best.name, best.covered
    rates = best.rate_in + best.rate_out
    purity = best.rate_in / rates if rates else 0.0
    base = purity * len(covered) / remaining
    twins = same_paths(weighing.paths, name)
    if twins:
        return tie_or_split(weighing, best, base, twins)
    return [
        Suspect(
            "link",
            name,
            confidence=round(base * 0.9, 2),
            evidence=link_evidence(
                weighing.topology.links[name], weighing.paths, weighing.symptom, best
            ),
            explains={name},
            paths=len(covered),
            found_by=weighing.symptom.name,
        )
    ]


def same_paths(paths: Sequence[PathResult], name: str) -> list[str]:
    """Other links crossed by exactly the same probed paths (the probes cannot split them)."""
    mine = {p.label for p in paths if name in p.links}
    others = sorted({n for p in paths for n in p.links} - {name})
    return [n for n in others if {p.label for p in paths if n in p.links} == mine]

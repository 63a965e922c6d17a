"""Tied groups and the follow-up probes that split them (issue #30): links on exactly the same
probed paths -- leaf1:Ethernet2>spine2 and spine2:Ethernet2>leaf2 in the lab's two leaves --
are one group with one rank until TTL-limited probes show where the loss rises, at the
run's confidence, and a tie is never first. Hop counts are drawn from seeded binomials."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.observe.locate.evidence import HopProbe, PathResult
from agent.observe.locate.followup import (
    Findings,
    FollowUp,
    follow_up,
    plan_follow_ups,
    run_follow_ups,
)
from agent.observe.locate.rank import locate, resolve_ties
from agent.observe.locate.stats import Sprt
from agent.observe.locate.ties import split_by
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import Verdict
from agent.observe.probes.hops import HopCount
from agent.observe.probes.paths import Path
from tests.unit.test_locate import FABRIC, route, routes

UPLINK_A = "leaf1:Ethernet2>spine2"  # leaf1 -> spine2: first on the paths h1/h2 -> h3/h4
DOWNLINK_B = "spine2:Ethernet2>leaf2"  # spine2 -> leaf2: right after it, on the same paths
TWINS = (UPLINK_A, DOWNLINK_B)
CONFIDENCE = 0.95


@pytest.fixture(scope="module")
def topology() -> Topology:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    return Topology.from_intent(load_fabric(FABRIC / "lab-leafspine-fabric.yml").intent)


def _share(loss: dict[str, float], links: Sequence[str]) -> float:
    share = 1.0
    for link in links:
        share *= 1 - loss.get(link, 0.0)
    return share


def drawn_mesh(
    rng: np.random.Generator, loss: dict[str, float], sent: int = 2000, hop_sent: int = 40
) -> list[PathResult]:
    """The lab's mesh (every ordered pair, both spines across leaves), its end-to-end and hop
    counts drawn from binomials; the ICMP answers' way back is clean."""
    results = []
    sport = 49152
    for src, dst, links in routes():
        sport += 1
        received = int(rng.binomial(sent, _share(loss, links)))
        hops = tuple(
            HopProbe(hop_sent, int(rng.binomial(hop_sent, _share(loss, links[:t]))))
            for t in range(1, len(links))
        )
        results.append(PathResult(src, dst, sport, links, sent, received, hops=hops))
    return results


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SimulatedHops:
    """probe_hops on the synthetic lab: per hop, answers drawn from a binomial with the
    share that survives the links before it; each round advances the clock by its cost."""

    def __init__(
        self,
        rng: np.random.Generator,
        loss: dict[str, float],
        paths: Sequence[PathResult],
        clock: Clock,
    ) -> None:
        self.rng, self.loss, self.clock = rng, loss, clock
        self.links = {(p.src, p.dst, p.sport): p.links for p in paths}
        self.rounds: list[int] = []

    def __call__(
        self, intent: Any, paths: list[Path], *, tries: int, rate_pps: int, udp_port: int
    ) -> dict[tuple[str, str, int], tuple[HopCount | None, ...]]:
        self.rounds.append(tries)
        out: dict[tuple[str, str, int], tuple[HopCount | None, ...]] = {}
        per_source: dict[str, int] = {}
        for path in paths:
            links = self.links[(path.src, path.dst, path.sport)]
            out[(path.src, path.dst, path.sport)] = tuple(
                HopCount(tries, int(self.rng.binomial(tries, _share(self.loss, links[:t]))))
                for t in range(1, len(path.hops) + 1)
            )
            per_source[path.src] = per_source.get(path.src, 0) + len(path.hops)
        self.clock.now += max(per_source.values()) * tries / rate_pps + 2.0
        return out


def settle(
    topology: Topology, loss: dict[str, float], seed: int, deadline_s: float = 60.0
) -> tuple[Verdict, Verdict, SimulatedHops]:
    """The run's verdict, and the verdict after the follow-ups (simulated)."""
    rng = np.random.default_rng(seed)
    paths = drawn_mesh(rng, loss)
    verdict = locate(topology, paths, [], confidence=CONFIDENCE)
    clock = Clock()
    prober = SimulatedHops(rng, loss, paths, clock)
    after = follow_up(
        None,  # type: ignore[arg-type]  # the simulated prober needs no fabric
        Findings(topology, paths, verdict),
        CONFIDENCE,
        deadline_s,
        prober=prober,
        clock=clock,
    )
    return verdict, after, prober


# --------------------------------------------------------------------------- the tie


@pytest.mark.parametrize("culprit", TWINS)
def test_the_issue_tie_is_split_by_follow_ups_at_2_percent(
    topology: Topology, culprit: str
) -> None:
    """The issue's miss: 2 % loss on one of the twins, 40 hop probes a hop. The run's own
    hop probes cannot decide; the verdict is a tie (rank 1 twice, never first) that says
    what would split it; the follow-ups name the culprit with the counts that decided."""
    verdict, after, prober = settle(topology, {culprit: 0.02}, seed=30)
    tied = [s for s in verdict.suspects if s.tied_with]
    assert verdict.first is None and verdict.tied, verdict.as_dict()
    assert sorted(s.element for s in tied) == sorted(TWINS)
    assert [s.rank for s in tied] == [1, 1]
    assert (
        "TTL-limited probes from h1 expiring at spine2 (TTL 2) cross leaf1:Ethernet2>spine2 "
        "but not spine2:Ethernet2>leaf2"
    ) in tied[0].split_by
    document = verdict.as_dict()
    assert document["tied"] is True and document["suspects"][0]["tied_with"]

    first = after.first
    assert first is not None and first.element == culprit, after.as_dict()
    assert first.rank == 1 and not first.tied_with and first.confidence > tied[0].confidence
    assert any(f"loss rises across {culprit}" in e for e in first.evidence), first.evidence
    assert not any(s.element in TWINS and s is not first for s in after.suspects)
    assert after.as_dict()["tied"] is False and after.follow_ups
    decided = after.as_dict()["follow_ups"]
    assert all(r["decision"] in ("clean", "lossy") for r in decided), decided
    assert prober.rounds[:2] == [50, 100]  # growing tries


def test_hop_probes_that_already_decide_leave_no_tie(topology: Topology) -> None:
    """5 % loss right after the switch between them: 40 probes a hop on four paths decide."""
    rng = np.random.default_rng(7)
    paths = drawn_mesh(rng, {DOWNLINK_B: 0.05}, hop_sent=200)
    verdict = locate(topology, paths, [], confidence=CONFIDENCE)
    assert verdict.first is not None and verdict.first.element == DOWNLINK_B, verdict.as_dict()
    assert not verdict.tied and plan_follow_ups(topology, paths, verdict) == []


def test_an_undecided_group_stays_tied_and_says_so(topology: Topology) -> None:
    """No time to decide 1.5 % loss: the group stays tied, equal rank, and the follow-ups
    say they ran out of time."""
    _, after, prober = settle(topology, {DOWNLINK_B: 0.015}, seed=3, deadline_s=2.6)
    assert after.first is None and after.tied, after.as_dict()
    assert {s.rank for s in after.suspects if s.tied_with} == {1}
    notes = [r.note for r in after.follow_ups if r.decision is None]
    assert notes and all("time ran out" in (n or "") for n in notes)
    assert any("did not split the group" in e for e in after.suspects[0].evidence)
    assert prober.rounds == [20]  # (2.6 s - 2 s start) / (6 hops / 200 per s): shrunk to fit


def test_the_plan_probes_before_and_past_each_member(topology: Topology) -> None:
    rng = np.random.default_rng(1)
    paths = drawn_mesh(rng, {DOWNLINK_B: 0.02})
    verdict = locate(topology, paths, [], confidence=CONFIDENCE)
    planned = plan_follow_ups(topology, paths, verdict)
    by_kind: dict[frozenset[str], list[FollowUp]] = {}
    for f in planned:
        by_kind.setdefault(f.crosses, []).append(f)
    # Before the first (TTL 1, at leaf1), between them (TTL 2, at spine2), past both (TTL 3).
    expected = {frozenset(): (1, "leaf1"), frozenset({UPLINK_A}): (2, "spine2"),
                frozenset(TWINS): (3, "leaf2")}  # fmt: skip
    undecided = {r.crosses for r in verdict.suspects[0].tie.evidence if r.decision is None}  # type: ignore[union-attr]
    assert set(by_kind) == undecided and undecided <= set(expected)
    for crosses, kind in by_kind.items():
        assert {(f.ttl, f.at) for f in kind} == {expected[crosses]}
        assert len(kind) == 4 and {f.src for f in kind} == {"h1", "h2"}
        assert all(f.prior[0] > 0 for f in kind)  # the run's own counts start the test


def test_a_host_that_cannot_probe_stops_the_follow_ups_and_they_say_so(
    topology: Topology,
) -> None:
    rng = np.random.default_rng(30)
    paths = drawn_mesh(rng, {DOWNLINK_B: 0.02})
    verdict = locate(topology, paths, [], confidence=CONFIDENCE)

    def broken(*_: Any, **__: Any) -> Any:
        raise AgentError("h1: no route to 10.0.0.5")

    results = run_follow_ups(
        None,  # type: ignore[arg-type]
        plan_follow_ups(topology, paths, verdict),
        CONFIDENCE,
        60.0,
        prober=broken,
    )
    assert results and all("no route to 10.0.0.5" in (r.note or "") for r in results)
    assert resolve_ties(verdict, results).first is None


# --------------------------------------------------------------------------- split_by

SPLIT_CASES = [
    (
        "a leaf uplink and the spine downlink after it",
        TWINS,
        route("h1", "h3", "spine2"),
        [
            "TTL-limited probes from h1 expiring at spine2 (TTL 2) cross leaf1:Ethernet2>spine2 "
            "but not spine2:Ethernet2>leaf2",
            "probes from h1 to spine2's own address (ICMP echo) cross leaf1:Ethernet2>spine2 "
            "but not spine2:Ethernet2>leaf2",
            "probes from a host whose path reaches spine2:Ethernet2>leaf2 without crossing "
            "leaf1:Ethernet2>spine2 (none among the probed paths: a host not behind leaf1)",
        ],
    ),
    (
        "a host's own link and the uplink after it",
        ("h2>leaf1", "leaf1:Ethernet1>spine1"),
        route("h2", "h4", "spine1"),
        [
            "TTL-limited probes from h2 expiring at leaf1 (TTL 1) cross h2>leaf1 but not "
            "leaf1:Ethernet1>spine1",
            "probes from h2 to leaf1's own address (ICMP echo) cross h2>leaf1 but not "
            "leaf1:Ethernet1>spine1",
            "probes from a host whose path reaches leaf1:Ethernet1>spine1 without crossing "
            "h2>leaf1 (none among the probed paths: another host)",
        ],
    ),
    (
        "three links in a row: one split per pair",
        ("leaf2:Ethernet1>spine1", "spine1:Ethernet1>leaf1", "leaf1:Ethernet3>h1"),
        route("h4", "h1", "spine1"),
        [
            "TTL-limited probes from h4 expiring at spine1 (TTL 2) cross leaf2:Ethernet1>spine1 "
            "but not spine1:Ethernet1>leaf1",
            "probes from h4 to spine1's own address (ICMP echo) cross leaf2:Ethernet1>spine1 "
            "but not spine1:Ethernet1>leaf1",
            "probes from a host whose path reaches spine1:Ethernet1>leaf1 without crossing "
            "leaf2:Ethernet1>spine1 (none among the probed paths: a host not behind leaf2)",
            "TTL-limited probes from h4 expiring at leaf1 (TTL 3) cross spine1:Ethernet1>leaf1 "
            "but not leaf1:Ethernet3>h1",
            "probes from h4 to leaf1's own address (ICMP echo) cross spine1:Ethernet1>leaf1 "
            "but not leaf1:Ethernet3>h1",
            "probes from a host whose path reaches leaf1:Ethernet3>h1 without crossing "
            "spine1:Ethernet1>leaf1 (none among the probed paths: a host not behind spine1)",
        ],
    ),
]


@pytest.mark.parametrize(
    ("case", "group", "links", "expected"), SPLIT_CASES, ids=[c[0] for c in SPLIT_CASES]
)
def test_split_by_names_the_probe_between_each_pair(
    topology: Topology, case: str, group: tuple[str, ...], links: tuple[str, ...],
    expected: list[str],
) -> None:  # fmt: skip
    path = PathResult(links[0].split(">")[0], links[-1].split(">")[1], 49152, links, 100, 98)
    assert split_by(topology, [path], sorted(group)) == expected


# --------------------------------------------------------------------------- the error rate


def _outcome(after: Verdict, culprit: str) -> str:
    """right: the culprit first; wrong: the other twin first; else still tied or elsewhere."""
    first = after.first
    if first is None:
        return "tied" if after.tied else "none"
    if first.element == culprit:
        return "right"
    return "wrong" if first.element in TWINS else "other"


def _error_bound(trials: int, rate: float) -> int:
    """The most errors a test with error ``rate`` makes in ``trials`` draws, but for a chance
    below 1 in 1000 (binomial upper tail, normal approximation, z = 3.1)."""
    return math.ceil(trials * rate + 3.1 * math.sqrt(trials * rate * (1 - rate)))


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    loss=st.floats(min_value=0.005, max_value=0.05),
    culprit=st.sampled_from(TWINS),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_resolve_ties_never_picks_the_wrong_twin_beyond_the_confidence(
    topology: Topology, loss: float, culprit: str, seed: int
) -> None:
    """For loss in [0.5 %, 5 %] on either twin: over seeded draws, the verdict after the
    follow-ups names the culprit or stays tied; the other twin first no more often than
    1 - confidence allows."""
    trials = 30
    outcomes = [
        _outcome(settle(topology, {culprit: loss}, seed + i)[1], culprit) for i in range(trials)
    ]
    wrong = outcomes.count("wrong")
    assert wrong <= _error_bound(trials, 1 - CONFIDENCE), (loss, culprit, outcomes)
    assert "other" not in outcomes, outcomes


def test_the_error_rate_at_a_small_loss_over_many_draws(topology: Topology) -> None:
    """A hard case, 1.2 % (just above the 1 % a path must lose today to count as bad, so
    that the group forms): 200 draws per twin, errors within the bound, and most draws
    decided within the minute."""
    for culprit in TWINS:
        outcomes = [
            _outcome(settle(topology, {culprit: 0.012}, 1000 + i)[1], culprit) for i in range(200)
        ]
        assert outcomes.count("wrong") <= _error_bound(200, 1 - CONFIDENCE), outcomes
        assert outcomes.count("right") >= 100, outcomes


# --------------------------------------------------------------------------- the outputs


def test_the_table_and_the_ticket_show_one_rank_for_a_tie_and_what_would_split_it(
    topology: Topology,
) -> None:
    from rich.console import Console

    from agent.app.locate import render_markdown, render_table
    from agent.observe.locate.gather import LocateRun

    verdict, after, _ = settle(topology, {DOWNLINK_B: 0.02}, seed=30)
    run = LocateRun(verdict, [], 20.0, {})
    rows = [line for line in render_markdown(run).splitlines() if line.startswith("| 1")]
    assert [row.split(" | ")[0] for row in rows] == ["| 1 tied", "| 1 tied"], rows
    assert all("would split them: TTL-limited probes from h1 expiring at spine2" in r for r in rows)
    console = Console(record=True, width=400)
    render_table(run, console)
    text = console.export_text()
    assert text.count("1 tied") == 2 and "tied: link leaf1:Ethernet2>spine2 or" in text

    console = Console(record=True, width=400)
    render_table(LocateRun(after, [], 20.0, {}), console)
    text = console.export_text()
    assert "1 tied" not in text and "locate: link spine2:Ethernet2>leaf2" in text, text
    assert "follow-up probes crossing leaf1:Ethernet2>spine2:" in text


def test_a_latency_tie_without_hop_round_trips_stays_tied_and_gets_no_follow_up(
    topology: Topology,
) -> None:
    rng = np.random.default_rng(2)
    paths = [
        PathResult(p.src, p.dst, p.sport, p.links, p.sent, p.received,
                   latency_ms=0.5 * len(p.links) + (20.0 if DOWNLINK_B in p.links else 0.0))
        for p in drawn_mesh(rng, {})
    ]  # fmt: skip
    verdict = locate(topology, paths, [], confidence=CONFIDENCE)
    assert verdict.first is None and {s.element for s in verdict.suspects} == set(TWINS)
    assert any("round trips" in e for e in verdict.suspects[0].evidence)
    assert plan_follow_ups(topology, paths, verdict) == []


def test_a_tied_group_behind_a_misclassifying_port_names_that_port_once(
    topology: Topology,
) -> None:
    """Loss behind the twins and lossy-queue drops further down: every member leads to the
    same ingress, which is named once, on its own."""
    from agent.observe.locate.counters import PortSymptoms

    rng = np.random.default_rng(4)
    paths = drawn_mesh(rng, {DOWNLINK_B: 0.03}, hop_sent=10)
    ports = [PortSymptoms("leaf2", "Ethernet3", up=True, lossy_drops=30),
             PortSymptoms("leaf2", "Ethernet4", up=True, lossy_drops=8)]  # fmt: skip
    verdict = locate(topology, paths, ports, confidence=CONFIDENCE)
    named = [(s.kind, s.element) for s in verdict.suspects]
    assert named == [("port", "leaf2:Ethernet2")], verdict.as_dict()
    assert verdict.first is not None and not verdict.tied


def test_the_test_s_lossy_rate_comes_from_every_path_through_the_group_not_the_bad_ones(
    topology: Topology,
) -> None:
    """A path through the twins that happened to lose nothing still counts: H1 taken from
    the bad paths alone would sit above the culprit's own rate."""
    from agent.observe.locate.stats import loss_interval

    rng = np.random.default_rng(5)
    paths = drawn_mesh(rng, {DOWNLINK_B: 0.02})
    through = [p for p in paths if DOWNLINK_B in p.links]
    clean = through[0]
    paths[paths.index(clean)] = PathResult(clean.src, clean.dst, clean.sport, clean.links,
                                           clean.sent, clean.sent, hops=clean.hops)  # fmt: skip
    verdict = locate(topology, paths, [], confidence=CONFIDENCE)
    tie = verdict.suspects[0].tie
    assert tie is not None and verdict.suspects[0].paths == 3  # the three bad paths
    sent = sum(p.sent for p in through)
    lost = sum(p.sent - p.received for p in through[1:])
    assert tie.p1 == pytest.approx(loss_interval(sent, lost, CONFIDENCE)[0])
    assert tie.p0 == pytest.approx(tie.p1 / 4)


# --------------------------------------------------------------------------- below the floor


def _decided(paths: list[PathResult], min_loss: float) -> list[PathResult]:
    """Each path as the adaptive run hands it to rank: with its sequential test's decision."""
    decided = []
    for path in paths:
        test = Sprt.for_min_loss(min_loss, CONFIDENCE)
        decision = test.update(path.sent, path.vanished)
        decided.append(replace(path, lossy={"h1": True, "h0": False}.get(decision or "")))
    return decided


@pytest.mark.parametrize("seed", range(6))
def test_half_a_percent_is_named_once_the_sequential_test_calls_its_paths_lossy(
    topology: Topology, seed: int
) -> None:
    """0.5 % loss, under the fixed 1 % floor: a fixed run finds nothing, the adaptive run's
    per-path decisions make the link (or its tied group) the first suspect."""
    rng = np.random.default_rng(seed)
    culprit = "leaf1:Ethernet1>spine1"
    paths = drawn_mesh(rng, {culprit: 0.005}, sent=4000, hop_sent=40)
    fixed = locate(topology, paths, [], confidence=CONFIDENCE, min_loss=0.005)
    assert not fixed.suspects
    adaptive = locate(topology, _decided(paths, 0.005), [], confidence=CONFIDENCE, min_loss=0.005)
    assert adaptive.suspects
    first_rank = [s for s in adaptive.suspects if s.rank == 1]
    assert culprit in {s.element for s in first_rank}

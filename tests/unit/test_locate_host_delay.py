"""Host delay vs link delay (issue #30, item 4) in the locate join, on synthetic rows of the
lab's leaf-spine mesh: a host that reads its probes late is a ``host`` suspect when the
kernel stamped the frames, never its access link; latency on that access link still names
the link; without kernel stamps the two look the same (and the link is blamed, as before)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import pytest

from agent.intent.loader import load_fabric
from agent.observe.locate.evidence import LATENCY_FLOOR_MS, PathResult
from agent.observe.locate.rank import locate
from agent.observe.locate.topology import Topology
from tests.unit.test_locate import FABRIC, routes

SENT = 200
ACCESS_INTO_H3 = "leaf2:Ethernet3>h3"


@pytest.fixture(scope="module")
def topology() -> Topology:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    return Topology.from_intent(load_fabric(FABRIC / "lab-leafspine-fabric.yml").intent)


@dataclass
class Case:
    """What the mesh's receivers saw."""

    link_delay_ms: dict[str, float] = field(default_factory=dict)  # extra on the wire
    host_delay_ms: dict[str, float] = field(default_factory=dict)  # receiver held frames (p90)
    kernel_stamps: bool = True  # the receivers had SO_TIMESTAMPING (software)
    # What user space adds to the minimum latency when the host stalls: the fastest frame of
    # a stalled receiver is read late too when stalls are long and frequent.
    user_min_shift: float = 1.0


def mesh(case: Case) -> list[PathResult]:
    rows = []
    sport = 49152
    for src, dst, links in routes():
        sport += 1
        wire = 0.5 * len(links) + sum(case.link_delay_ms.get(x, 0.0) for x in links)
        held = case.host_delay_ms.get(dst, 0.05)
        user = wire + case.user_min_shift * (held if held > 1 else 0.0)
        rows.append(
            PathResult(
                src, dst, sport, links, SENT, SENT,
                latency_ms=user,
                kernel_latency_ms=wire if case.kernel_stamps else None,
                host_delay_ms=held if case.kernel_stamps else None,
                timestamp_source="software" if case.kernel_stamps else "user",
            )
        )  # fmt: skip
    return rows


def kinds(topology: Topology, rows: list[PathResult]) -> list[tuple[str, str]]:
    return [(s.kind, s.element) for s in locate(topology, rows, []).suspects]


CASES = [
    pytest.param(Case(), [], id="no-fault"),
    pytest.param(Case(host_delay_ms={"h3": 25.0}), [("host", "h3")], id="h3-stalled-kernel"),
    pytest.param(
        Case(host_delay_ms={"h3": 25.0}, kernel_stamps=False),
        [("link", ACCESS_INTO_H3)],
        id="h3-stalled-user-space-only-blames-the-link",
    ),
    pytest.param(
        Case(link_delay_ms={ACCESS_INTO_H3: 20.0}), [("link", ACCESS_INTO_H3)], id="access-link"
    ),
    pytest.param(
        Case(link_delay_ms={ACCESS_INTO_H3: 20.0}, kernel_stamps=False),
        [("link", ACCESS_INTO_H3)],
        id="access-link-user-space",
    ),
    pytest.param(
        Case(link_delay_ms={ACCESS_INTO_H3: 20.0}, host_delay_ms={"h3": 25.0}),
        [("host", "h3"), ("link", ACCESS_INTO_H3)],
        id="both",
    ),
    pytest.param(
        Case(host_delay_ms={"h3": LATENCY_FLOOR_MS}), [], id="host-delay-at-the-floor-is-not"
    ),
]


@pytest.mark.parametrize(("case", "expected"), CASES)
def test_host_delay_is_told_from_link_delay(
    topology: Topology, case: Case, expected: list[tuple[str, str]]
) -> None:
    assert sorted(kinds(topology, mesh(case))) == sorted(expected)


def test_the_host_suspect_says_it_is_not_the_network(topology: Topology) -> None:
    verdict = locate(topology, mesh(Case(host_delay_ms={"h3": 25.0})), [])
    (suspect,) = verdict.suspects
    assert suspect.as_dict()["kind"] == "host"
    assert "host delay, not the network" in suspect.evidence[0]
    assert "software" in suspect.evidence[0]
    assert verdict.bad_paths == 0  # the kernel-stamped latency is clean: no slow path


def test_one_path_without_host_delay_clears_the_host(topology: Topology) -> None:
    """All its paths, not some: one flow read in time means the host was not stalled for
    that flow, so the delay is not the host's alone."""
    rows = mesh(Case(host_delay_ms={"h3": 25.0}))
    first = next(i for i, r in enumerate(rows) if r.dst == "h3")
    rows[first] = replace(rows[first], host_delay_ms=0.1)
    assert ("host", "h3") not in kinds(topology, rows)


def test_a_receiver_without_kernel_stamps_on_one_path_cannot_tell(topology: Topology) -> None:
    rows = mesh(Case(host_delay_ms={"h3": 25.0}))
    first = next(i for i, r in enumerate(rows) if r.dst == "h3")
    rows[first] = replace(rows[first], host_delay_ms=None, kernel_latency_ms=None)
    assert ("host", "h3") not in kinds(topology, rows)


def test_kernel_latency_is_used_for_the_latency_symptom_when_present(
    topology: Topology,
) -> None:
    """User-space latency 30 ms high on every path into h3 with clean kernel stamps: no slow
    path at all; the same rows read from user space only: every path into h3 is slow."""
    rows = mesh(Case(host_delay_ms={"h3": 30.0}))
    assert locate(topology, rows, []).bad_paths == 0
    user_only = [replace(r, kernel_latency_ms=None, host_delay_ms=None) for r in rows]
    into_h3 = sum(1 for r in rows if r.dst == "h3")
    assert locate(topology, user_only, []).bad_paths == into_h3

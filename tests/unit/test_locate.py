"""The locate join (agent.observe.locate.rank) on the lab's leaf-spine topology with synthetic
symptoms:
one row per fault kind, the suspect it must rank first, and the no-fault row that must raise
none. The lab matrix (tests/lab/test_locate_lab.py) proves the same against injected faults."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent.device.state import Counters, Difference, InterfaceCounters, LinkHealth, QueueCounters
from agent.intent.loader import load_fabric
from agent.observe.locate.counters import PortSymptoms, port_symptoms
from agent.observe.locate.evidence import HopProbe, PathResult
from agent.observe.locate.rank import LocateError, locate
from agent.observe.locate.topology import Topology

FABRIC = Path(__file__).resolve().parents[1] / "data" / "platforms" / "arista_eos"
SENT = 200
HOST_LEAF = {"h1": ("leaf1", "Ethernet3"), "h2": ("leaf1", "Ethernet4"),
             "h3": ("leaf2", "Ethernet3"), "h4": ("leaf2", "Ethernet4")}  # fmt: skip
UPLINK = {("leaf1", "spine1"): "Ethernet1", ("leaf1", "spine2"): "Ethernet2",
          ("leaf2", "spine1"): "Ethernet1", ("leaf2", "spine2"): "Ethernet2",
          ("spine1", "leaf1"): "Ethernet1", ("spine1", "leaf2"): "Ethernet2",
          ("spine2", "leaf1"): "Ethernet1", ("spine2", "leaf2"): "Ethernet2"}  # fmt: skip


@pytest.fixture(scope="module")
def topology() -> Topology:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    return Topology.from_intent(load_fabric(FABRIC / "lab-leafspine-fabric.yml").intent)


def route(src: str, dst: str, spine: str | None) -> tuple[str, ...]:
    leaf_a, _ = HOST_LEAF[src]
    leaf_b, port_b = HOST_LEAF[dst]
    links = [f"{src}>{leaf_a}"]
    if spine is not None:
        links += [
            f"{leaf_a}:{UPLINK[(leaf_a, spine)]}>{spine}",
            f"{spine}:{UPLINK[(spine, leaf_b)]}>{leaf_b}",
        ]
    return (*links, f"{leaf_b}:{port_b}>{dst}")


def routes() -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """Every ordered host pair of the 2x2 lab and each of its paths (one per spine across
    leaves, the leaf alone within one): ``(src, dst, links)`` in a fixed order."""
    for src in HOST_LEAF:
        for dst in HOST_LEAF:
            if src == dst:
                continue
            same_leaf = HOST_LEAF[src][0] == HOST_LEAF[dst][0]
            for spine in [None] if same_leaf else ["spine1", "spine2"]:
                yield src, dst, route(src, dst, spine)


@dataclass
class Fault:
    """What a fault does to the synthetic mesh."""

    loss: dict[str, float] = field(default_factory=dict)  # link -> share lost
    icrc: dict[str, float] = field(default_factory=dict)
    delay_ms: dict[str, float] = field(default_factory=dict)
    lost_to: dict[str, float] = field(default_factory=dict)  # destination host -> share
    avoid: set[str] = field(default_factory=set)  # links no path uses (down)
    hop_probes: bool = True  # TTL-limited probes to every switch of every path
    ports: list[PortSymptoms] = field(default_factory=list)
    config: list[Difference] = field(default_factory=list)


def mesh(fault: Fault) -> list[PathResult]:
    results = []
    sport = 49152
    for src, dst, links in routes():
        if fault.avoid & set(links):
            continue
        sport += 1
        share = 1.0
        for link in links:
            share *= 1 - fault.loss.get(link, 0.0)
        share *= 1 - fault.lost_to.get(dst, 0.0)
        icrc = sum(round(SENT * fault.icrc.get(link, 0.0)) for link in links)
        received = round(SENT * share) - icrc
        latency = 0.5 * len(links) + sum(fault.delay_ms.get(x, 0.0) for x in links)
        hops = tuple(hop(fault, links[: i + 1]) for i in range(len(links) - 1))
        results.append(
            PathResult(src, dst, sport, links, SENT, received, icrc, latency,
                       hops if fault.hop_probes else ())
        )  # fmt: skip
    return results


def hop(fault: Fault, before: tuple[str, ...], sent: int = 50) -> HopProbe:
    """Probes expiring after ``before``: lost and corrupted on those links (the ICMP answer's
    way back is taken as clean here)."""
    share = 1.0
    for link in before:
        share *= 1 - fault.loss.get(link, 0.0)
    corrupted = sum(round(sent * fault.icrc.get(link, 0.0)) for link in before)
    return HopProbe(sent, round(sent * share), corrupted)


CASES: list[tuple[str, Fault, tuple[str, str] | None]] = [
    ("no fault", Fault(), None),
    ("silent loss on a leaf uplink", Fault(loss={"leaf1:Ethernet1>spine1": 0.05}),
     ("link", "leaf1:Ethernet1>spine1")),
    ("silent loss on a spine downlink", Fault(loss={"spine2:Ethernet2>leaf2": 0.03}),
     ("link", "spine2:Ethernet2>leaf2")),
    ("bad optic: FCS errors at the receiving switch",
     Fault(loss={"leaf1:Ethernet1>spine1": 0.05},
           ports=[PortSymptoms("spine1", "Ethernet1", up=True, fcs_errors=40, in_errors=40)]),
     ("link", "leaf1:Ethernet1>spine1")),
    ("corruption only the receiving NIC sees (ICRC)", Fault(icrc={"spine1:Ethernet2>leaf2": 0.04}),
     ("link", "spine1:Ethernet2>leaf2")),
    ("link down: rerouted, the ports say so",
     Fault(avoid={"leaf2:Ethernet2>spine2", "spine2:Ethernet2>leaf2"},
           ports=[PortSymptoms("leaf2", "Ethernet2", up=False),
                  PortSymptoms("spine2", "Ethernet2", up=False)]),
     ("link", "leaf2:Ethernet2<>spine2:Ethernet2")),
    ("storming host: blame the NIC, not the link to it",
     Fault(lost_to={"h3": 0.3},
           ports=[PortSymptoms("leaf2", "Ethernet3", up=True, pfc_rx=5000, storms=1)]),
     ("host-nic", "h3")),
    ("misconfigured port the config read sees",
     Fault(config=[Difference("leaf1", "Ethernet3", "trust", "dscp", "cos")]),
     ("port", "leaf1:Ethernet3")),
    ("neighbour ignores pause: drops where XOFF was sent",
     Fault(loss={"spine1:Ethernet2>leaf2": 0.02},
           ports=[PortSymptoms("leaf2", "Ethernet1", up=True, lossless_drops=12,
                               headroom_drops=12, pfc_tx=30),
                  PortSymptoms("spine1", "Ethernet2", up=True, lossless_tx=900, lossy_tx=40)]),
     ("port", "spine1:Ethernet2")),
    ("upstream switch sends RoCE from a lossy queue: pause cannot stop it",
     Fault(loss={"spine1:Ethernet2>leaf2": 0.02},
           ports=[PortSymptoms("leaf2", "Ethernet1", up=True, lossless_drops=12,
                               headroom_drops=12, pfc_tx=30),
                  PortSymptoms("spine1", "Ethernet2", up=True, lossless_tx=40, lossy_tx=900)]),
     ("port", "spine1:Ethernet1")),
    ("the ASIC puts RoCE from one port in a lossy class (seen under load only)",
     Fault(loss={"spine1:Ethernet2>leaf2": 0.04},
           ports=[PortSymptoms("leaf2", "Ethernet3", up=True, lossy_drops=30),
                  PortSymptoms("leaf2", "Ethernet4", up=True, lossy_drops=8)]),
     ("port", "leaf2:Ethernet1")),
    ("extra latency on one link", Fault(delay_ms={"leaf1:Ethernet2>spine2": 20.0}),
     ("link", "leaf1:Ethernet2>spine2")),
    ("a slow link outruns the headroom: blame the link, not the pause",
     Fault(delay_ms={"leaf1:Ethernet1>spine1": 20.0},
           ports=[PortSymptoms("spine1", "Ethernet1", up=True, lossless_drops=9,
                               headroom_drops=9, pfc_tx=12)]),
     ("link", "leaf1:Ethernet1>spine1")),
    ("a lossy link loses the pause frames too: blame the link, not the pause",
     Fault(loss={"spine2:Ethernet1>leaf1": 0.05},
           ports=[PortSymptoms("spine2", "Ethernet1", up=True, lossless_drops=167,
                               headroom_drops=167, pfc_tx=14),
                  PortSymptoms("leaf1", "Ethernet2", up=True, lossless_drops=354, storms=1,
                               pfc_rx=12)]),
     ("link", "spine2:Ethernet1>leaf1")),
    # Lab, spine2:eth2>leaf2 losing 5 %: lost XONs held leaf2's queue to spine2 paused until
    # it overflowed, and the paths back lost four times more than the faulty direction.
    ("a lossy link loses the XON: the paused egress drops more than the link",
     Fault(loss={"spine2:Ethernet2>leaf2": 0.05, "leaf2:Ethernet2>spine2": 0.22},
           ports=[PortSymptoms("leaf2", "Ethernet2", up=True, lossless_drops=431)]),
     ("link", "spine2:Ethernet2>leaf2")),
    ("loss on a host's access link", Fault(loss={"h2>leaf1": 0.05}), ("link", "h2>leaf1")),
    ("one lost packet is noise", Fault(loss={}, lost_to={}), None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "fault", "expected"), CASES, ids=[c[0] for c in CASES])
def test_first_suspect(
    topology: Topology, case: str, fault: Fault, expected: tuple[str, str] | None
) -> None:
    paths = mesh(fault)
    if case == "one lost packet is noise":
        first = paths[0]
        paths[0] = PathResult(first.src, first.dst, first.sport, first.links, SENT, SENT - 1)
    verdict = locate(topology, paths, fault.ports, fault.config, duration_s=5.0)
    if expected is None:
        assert not verdict.fault_found and verdict.bad_paths == 0, verdict.as_dict()
        assert verdict.as_dict()["summary"].startswith("no fault found")
        return
    first_suspect = verdict.suspects[0]
    assert (first_suspect.kind, first_suspect.element) == expected, verdict.as_dict()
    assert first_suspect.evidence and 0 < first_suspect.confidence <= 1
    assert not verdict.unexplained, verdict.as_dict()  # every bad path is accounted for


def test_a_storming_nic_explains_away_the_link_to_it(topology: Topology) -> None:
    fault = next(f for name, f, _ in CASES if name.startswith("storming host"))
    verdict = locate(topology, mesh(fault), fault.ports, duration_s=5.0)
    assert [(s.kind, s.element) for s in verdict.suspects] == [("host-nic", "h3")]
    assert verdict.suspects[0].paths == verdict.bad_paths > 0


def test_an_access_link_says_it_cannot_be_told_from_the_nic(topology: Topology) -> None:
    verdict = locate(topology, mesh(Fault(loss={"h2>leaf1": 0.05})), [])
    assert any("cannot tell the cable from the NIC" in e for e in verdict.suspects[0].evidence)


def test_a_path_over_an_unknown_link_is_refused(topology: Topology) -> None:
    bogus = PathResult("h1", "h3", 1, ("h1>leaf1", "leaf1:Ethernet9>spine7"), 10, 10)
    with pytest.raises(
        LocateError, match=r"leaf1:Ethernet9>spine7.*Expected: a link of the fabric"
    ):
        locate(topology, [bogus], [])


def _counters(device: str, **interfaces: dict[str, Any]) -> Counters:
    return Counters(
        device=device,
        collected_at=0.0,
        interfaces={name: InterfaceCounters(**values) for name, values in interfaces.items()},
    )


def test_port_symptoms_are_deltas_and_a_cleared_counter_counts_from_zero() -> None:
    before = _counters(
        "leaf2",
        Ethernet1={"pfc_tx": (0, 0, 0, 5, 0, 0, 0, 0),
                   "queues": {3: QueueCounters(dropped_packets=2), 0: QueueCounters()}},
        Ethernet3={"pfc_rx": (0, 0, 0, 900, 0, 0, 0, 0)},
    )  # fmt: skip
    after = _counters(
        "leaf2",
        Ethernet1={"pfc_tx": (0, 0, 0, 35, 0, 0, 0, 0),
                   "queues": {3: QueueCounters(dropped_packets=14),
                              0: QueueCounters(dropped_packets=9)},
                   "headroom_drops": (0, 0, 0, 3, 0, 0, 0, 0)},
        Ethernet3={"pfc_rx": (0, 0, 0, 50, 0, 0, 0, 0)},
    )  # fmt: skip
    health_before = {"Ethernet1": LinkHealth(up=True, fcs_errors=10)}
    health_after = {
        "Ethernet1": LinkHealth(up=True, fcs_errors=25),
        "Ethernet3": LinkHealth(up=False),
    }
    found = {s.port: s for s in port_symptoms(before, after, health_before, health_after, [3])}
    assert found["Ethernet1"] == PortSymptoms(
        "leaf2",
        "Ethernet1",
        up=True,
        fcs_errors=15,
        lossless_drops=12 + 3,
        lossy_drops=9,
        headroom_drops=3,
        pfc_tx=30,
    )  # the lossy queue 0's drops are counted apart
    assert found["Ethernet3"] == PortSymptoms("leaf2", "Ethernet3", up=False, pfc_rx=50)


def test_without_hop_probes_links_on_the_same_paths_are_one_tied_group_and_say_so(
    topology: Topology,
) -> None:
    fault = Fault(loss={"spine2:Ethernet2>leaf2": 0.03}, hop_probes=False)
    verdict = locate(topology, mesh(fault), [])
    twins = {"spine2:Ethernet2>leaf2", "leaf1:Ethernet2>spine2"}
    top = verdict.suspects[:2]
    assert verdict.first is None and verdict.tied
    assert {s.element for s in top} == twins and [s.rank for s in top] == [1, 1]
    for suspect in top:
        assert suspect.confidence < 0.9 and suspect.tied_with == sorted(twins - {suspect.element})
        assert any("the paths alone cannot tell them apart" in e for e in suspect.evidence)
    assert verdict.as_dict()["summary"].startswith("tied: link leaf1:Ethernet2>spine2 or ")


def test_the_ticket_formats_name_the_first_suspect_and_its_evidence(topology: Topology) -> None:
    from rich.console import Console

    from agent.app.locate import render_markdown, render_table
    from agent.observe.locate.gather import LocateRun, as_json

    fault = Fault(loss={"leaf1:Ethernet1>spine1": 0.05})
    verdict = locate(topology, mesh(fault), [])
    run = LocateRun(verdict, mesh(fault), 21.5, {"paths": 3.0},
                    [PortSymptoms("spine1", "Ethernet1", up=True, fcs_errors=4)])  # fmt: skip
    markdown = render_markdown(run).splitlines()
    assert markdown[0].startswith("**locate:** link leaf1:Ethernet1>spine1 (confidence 0.90)")
    assert markdown[4].startswith("| 1 | link | `leaf1:Ethernet1>spine1` | 0.90 | 4 of 4 paths")
    console = Console(record=True, width=200)
    render_table(run, console)
    assert "leaf1:Ethernet1>spine1" in console.export_text()
    document = as_json(run)
    assert document["suspects"][0]["rank"] == 1 and document["time_to_verdict_s"] == 21.5
    assert document["counters_moved"] == [
        {"device": "spine1", "port": "Ethernet1", "fcs_errors": 4}
    ]

"""Ties in the lab (issue #30): silent 2 % loss on a spine->leaf direction, picked at random
(seeded), shares every probed path with the leaf->spine uplink before it. The run's verdict
and the targeted follow-up probes (real TTL-limited probes from the hosts) must name the
faulty direction first or report the two as one tied group -- never the upstream link.

The follow-ups run here beside `run_locate` (gather calls them once the adaptive run has
its verdict); the bench measures how often they split the tie."""

from __future__ import annotations

import random

import pytest

from agent.intent.model import FabricIntent
from agent.observe.locate.followup import Findings, follow_up
from agent.observe.locate.gather import run_locate
from agent.observe.locate.topology import Topology
from lab.faults import LabFaults
from tests.lab.support.labs import Lab, LabFactory, apply_fabric, requires_lab

pytestmark = [pytest.mark.lab, requires_lab]
SEED = 30
SPINE_TO_LEAF = ("spine1:Ethernet1>leaf1", "spine1:Ethernet2>leaf2",
                 "spine2:Ethernet1>leaf1", "spine2:Ethernet2>leaf2")  # fmt: skip
UPSTREAM = {"spine1:Ethernet1>leaf1": "leaf2:Ethernet1>spine1",
            "spine1:Ethernet2>leaf2": "leaf1:Ethernet1>spine1",
            "spine2:Ethernet1>leaf1": "leaf2:Ethernet2>spine2",
            "spine2:Ethernet2>leaf2": "leaf1:Ethernet2>spine2"}  # fmt: skip
FOLLOW_UP_S = 40.0


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("ti", password="admin")
    apply_fabric(started)
    return started


def test_loss_on_a_spine_downlink_is_named_first_or_tied_never_the_upstream_link(
    lab: Lab,
) -> None:
    intent: FabricIntent = lab.intent()
    target = random.Random(SEED).choice(SPINE_TO_LEAF)
    faults = LabFaults(lab.state_dir)
    added = faults.add("loss", target, percent=2.0)
    try:
        run = run_locate(intent, duration_s=5.0)
        after = follow_up(
            intent,
            Findings(Topology.from_intent(intent), run.paths, run.verdict),
            0.95,
            FOLLOW_UP_S,
            udp_port=run.transport.udp_port,
        )
    finally:
        faults.remove(added.id)
    document = after.as_dict()
    first = after.first
    assert first is None or first.element == target, document
    if first is None:
        top = after.suspects[0]
        assert target in {top.element, *top.tied_with}, document
        assert top.split_by, document
    assert first is None or UPSTREAM[target] not in {s.element for s in after.suspects[:1]}
    print(f"{target}: before {run.verdict.as_dict()['summary']}; after {document['summary']}")
    for result in document["follow_ups"]:
        print(result)

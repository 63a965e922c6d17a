"""Traffic through the lab built by ``roce-agent lab up``: hosts talk through the vswitches.

Plain UDP sockets in the hosts' namespaces, as an application would send; the fabric is
containerlab/roce-leafspine.clab.yml (h1, h2 on leaf1; h3, h4 on leaf2; two spines).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Lab, ns_run, requires_lab, udp_exchange

pytestmark = [pytest.mark.lab, requires_lab]


def _kernel_rx(lab: Lab, node: str, ifname: str) -> int:
    data = json.loads(ns_run(lab.netns(node), "ip", "-s", "-j", "link", "show", "dev", ifname))
    return int(data[0]["stats64"]["rx"]["packets"])


def _vswitch_rx(lab: Lab, node: str, ifname: str) -> int:
    from lab.vswitch.client import VswitchClient

    sock = lab.status["nodes"][node]["control_socket"]
    with VswitchClient(sock) as client:
        counters: dict[str, Any] = client.counters()
    return int(counters["ports"][ifname]["rx_packets"])


def test_hosts_on_different_leaves_talk_through_leaf_spine_leaf(leafspine_lab: Lab) -> None:
    received = udp_exchange(leafspine_lab, "h1", "h3", flows=4, per_flow=3)
    assert len(received) == 12
    assert {r["src"] for r in received} == {"198.18.0.9"}
    # leaf1, a spine and leaf2 each decrement the TTL once (Linux sends UDP with TTL 64).
    assert {r["ttl"] for r in received} == {61}
    assert sorted(r["data"] for r in received) == sorted(
        f"flow{f}-{n}" for f in range(4) for n in range(3)
    )


def test_hosts_on_the_same_leaf_talk_through_one_switch(leafspine_lab: Lab) -> None:
    received = udp_exchange(leafspine_lab, "h2", "h1", first_sport=41000, dst_port=5001)
    assert [(r["src"], r["ttl"]) for r in received] == [("198.18.0.11", 63)]


def test_ecmp_spreads_flows_over_both_spines(leafspine_lab: Lab) -> None:
    # leaf1's uplinks end on spine1:eth1 and spine2:eth1; the kernel counts what arrives
    # there independently of the vswitch.
    before = {s: _kernel_rx(leafspine_lab, s, "eth1") for s in ("spine1", "spine2")}
    vs_before = {s: _vswitch_rx(leafspine_lab, s, "eth1") for s in ("spine1", "spine2")}
    flows = 32
    received = udp_exchange(
        leafspine_lab, "h2", "h4", flows=flows, per_flow=2, first_sport=42000, dst_port=5002
    )
    assert len(received) == 2 * flows
    assert {r["ttl"] for r in received} == {61}
    spread = {s: _kernel_rx(leafspine_lab, s, "eth1") - before[s] for s in before}
    vs_spread = {s: _vswitch_rx(leafspine_lab, s, "eth1") - vs_before[s] for s in vs_before}
    assert sum(spread.values()) >= 2 * flows
    assert min(spread.values()) >= flows // 4, f"ECMP did not spread {flows} flows: {spread}"
    assert min(vs_spread.values()) >= flows // 4, vs_spread
    # a flow never splits: both packets of each source port arrive in order
    by_flow: dict[int, list[str]] = {}
    for r in received:
        by_flow.setdefault(r["sport"], []).append(r["data"])
    assert all(d == sorted(d) for d in by_flow.values())

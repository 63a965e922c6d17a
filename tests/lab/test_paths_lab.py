"""Path discovery on the leaf-spine lab: UDP traceroute with the probe's 5-tuple, answered by
the lab switches' ICMP time exceeded, mapped onto the fabric file; the lab's own ECMP hash is
the cross-check (here only: the agent never imports ``lab``). Also the tracer against a Linux
router (the kernel's ICMP, not the lab switch's) and the receiver's ICRC check against a
switch port that corrupts RoCE frames.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent.intent.model import FabricIntent
from agent.observe.probes.hops import probe_hops
from agent.observe.probes.packets import Flow, RoceTemplate
from agent.observe.probes.paths import BASE_SPORT, Path, discover, trace, trace_many
from agent.observe.probes.runner import NetnsRunner
from lab.addressing import build_plan
from lab.topology.loader import load_topology
from lab.vswitch.forwarding import ecmp_index
from tests.lab.support.dataplane import faults_on
from tests.lab.support.labs import LEAFSPINE, Lab, requires_lab

pytestmark = [pytest.mark.lab, requires_lab]

HOSTS = ("h1", "h2", "h3", "h4")
LEAF_OF = {"h1": "leaf1", "h2": "leaf1", "h3": "leaf2", "h4": "leaf2"}


def predicted_spine(lab: Lab, intent: FabricIntent, src: str, dst: str, sport: int) -> str:
    """The spine the lab's ECMP hash sends this 5-tuple to from the source's leaf."""
    plan = build_plan(load_topology(LEAFSPINE), lab.name)
    leaf = plan.nodes[LEAF_OF[src]]
    src_dev, dst_dev = intent.device(src), intent.device(dst)
    assert src_dev is not None and dst_dev is not None
    src_ip, dst_ip = (str(d.ports[0].ipv4.ip) for d in (src_dev, dst_dev) if d.ports[0].ipv4)
    route = next(r for r in leaf.routes if ipaddress.IPv4Address(dst_ip) in r.prefix)
    flow = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", src_ip, dst_ip, sport=sport)
    frame = RoceTemplate(flow).frame(0, 0, 0)
    hop = route.nexthops[ecmp_index(frame, 20, len(route.nexthops))]
    return next(i.peer_node for i in leaf.interfaces if i.ifname == hop.port)


def check_hops(intent: FabricIntent, path: Path) -> None:
    """Every hop is the switch the cabling says, named by the port the probe came in on."""
    src, dst = path.src, path.dst
    assert path.full, path
    expected_switches = [LEAF_OF[src]] if LEAF_OF[src] == LEAF_OF[dst] else None
    switches = [h.switch for h in path.hops if h is not None]
    if expected_switches is not None:
        assert switches == expected_switches
    else:
        assert switches[0] == LEAF_OF[src] and switches[2] == LEAF_OF[dst]
        assert switches[1] in ("spine1", "spine2") and len(switches) == 3
    previous = src
    for hop in path.hops:
        assert hop is not None
        device = intent.device(hop.switch)
        assert device is not None
        port = device.port_named(hop.port)
        assert port is not None and port.ipv4 is not None
        assert str(port.ipv4.ip) == hop.ip  # the answer came from the ingress port
        assert port.peer is not None and port.peer.split(":")[0] == previous
        previous = hop.switch


def test_every_pair_every_spine_as_the_lab_hash_predicts(leafspine_lab: Lab) -> None:
    intent = leafspine_lab.intent()
    pairs = [(a, b) for a in HOSTS for b in HOSTS if a != b]
    started = time.monotonic()
    found = discover(intent, pairs, max_sports=16, patience=4)
    took = time.monotonic() - started
    assert set(found) == set(pairs)
    for (src, dst), paths in found.items():
        for path in paths:
            check_hops(intent, path)
            hops = [h for h in path.hops if h is not None]
            links = path.links()
            assert links[0] == f"{src}>{LEAF_OF[src]}"
            assert links[-1] == f"{LEAF_OF[dst]}:{hops[-1].egress}>{dst}"
            if len(hops) == 3:
                assert hops[1].switch == predicted_spine(
                    leafspine_lab, intent, src, dst, path.sport
                )
        spines = sorted(h.switch for p in paths for h in p.hops if h and "spine" in h.switch)
        if LEAF_OF[src] == LEAF_OF[dst]:
            assert len(paths) == 1
        else:
            assert spines == ["spine1", "spine2"], (src, dst, [p.links() for p in paths])
    print(f"discovery of {len(pairs)} pairs: {took:.1f} s")
    assert took < 30


def test_a_traced_port_equals_the_hash_for_many_ports(leafspine_lab: Lab) -> None:
    intent = leafspine_lab.intent()
    sports = range(BASE_SPORT + 100, BASE_SPORT + 104)
    for sport, path in zip(
        sports, trace_many(intent, "h2", [("h3", s) for s in sports]), strict=True
    ):
        assert path.sport == sport
        check_hops(intent, path)
        assert path.hops[1] is not None
        assert path.hops[1].switch == predicted_spine(leafspine_lab, intent, "h2", "h3", sport)

    # the README's example
    assert trace(intent, "h1", "h3", 49161).links() == (
        "h1>leaf1", "leaf1:Ethernet2>spine2", "spine2:Ethernet2>leaf2", "leaf2:Ethernet3>h3",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "answered_share", "corrupted_share"),
    [
        (None, (1, 1, 1), (0, 0, 0)),
        ({"kind": "drop", "direction": "tx", "percent": 50}, (1, 0.5, 0.5), (0, 0, 0)),
        ({"kind": "icrc_error", "percent": 50}, (1, 1, 1), (0, 0.5, 0.5)),
    ],
    ids=["no-fault", "loss-on-leaf1-uplink", "corruption-on-leaf1-uplink"],
)
def test_hop_probes_show_where_a_path_loses_or_corrupts(
    leafspine_lab: Lab,
    fault: dict[str, Any] | None,
    answered_share: tuple[float, ...],
    corrupted_share: tuple[float, ...],
) -> None:
    """leaf1's eth1 (Ethernet1, toward spine1) breaks: the path through spine1 shows it from
    its second hop on, the path through spine2 not at all."""
    intent = leafspine_lab.intent()
    traced = trace_many(intent, "h1", [("h3", 49152), ("h3", 49153)])
    via = {p.hops[1].switch: p for p in traced if p.hops[1] is not None}
    assert set(via) == {"spine1", "spine2"}, traced
    paths = [via["spine1"], via["spine2"]]
    tries = 40
    faults = [] if fault is None else [{**fault, "port": "eth1", "seed": 11}]
    with faults_on(leafspine_lab, "leaf1", faults):
        counts = probe_hops(intent, paths, tries=tries, rate_pps=500)
    broken, intact = (counts[("h1", "h3", p.sport)] for p in paths)
    assert [(h.sent, h.answered, h.corrupted) for h in intact if h is not None] == [
        (tries, tries, 0)
    ] * 3, intact
    for hop, answered, corrupted in zip(broken, answered_share, corrupted_share, strict=True):
        assert hop is not None and hop.sent == tries
        assert abs(hop.answered - answered * tries) <= 0.2 * tries, broken
        assert abs(hop.corrupted - corrupted * hop.answered) <= 0.2 * tries, broken


# --------------------------------------------------------------------------- Linux router


@pytest.fixture
def linux_router() -> Iterator[dict[str, str]]:
    """Namespaces a -- r -- b (r a Linux router), named after this test's PID."""
    pid = os.getpid()
    names = {"a": f"pta{pid}", "r": f"ptr{pid}", "b": f"ptb{pid}"}
    script = f"""
set -e
for n in {names["a"]} {names["r"]} {names["b"]}; do ip netns add $n; done
ip link add pt1x{pid} netns {names["a"]} type veth peer name pt1y{pid} netns {names["r"]}
ip link add pt2x{pid} netns {names["r"]} type veth peer name pt2y{pid} netns {names["b"]}
ip -n {names["a"]} link set pt1x{pid} name eth1 up
ip -n {names["r"]} link set pt1y{pid} name eth1 up
ip -n {names["r"]} link set pt2x{pid} name eth2 up
ip -n {names["b"]} link set pt2y{pid} name eth1 up
ip -n {names["a"]} addr add 198.18.200.1/31 dev eth1
ip -n {names["r"]} addr add 198.18.200.0/31 dev eth1
ip -n {names["r"]} addr add 198.18.200.2/31 dev eth2
ip -n {names["b"]} addr add 198.18.200.3/31 dev eth1
ip -n {names["a"]} route add 198.18.200.0/24 via 198.18.200.0
ip -n {names["b"]} route add 198.18.200.0/24 via 198.18.200.2
ip netns exec {names["r"]} sysctl -qw net.ipv4.ip_forward=1
mac() {{ ip netns exec $1 cat /sys/class/net/$2/address; }}
ip -n {names["a"]} neigh replace 198.18.200.0 lladdr $(mac {names["r"]} eth1) dev eth1
ip -n {names["r"]} neigh replace 198.18.200.1 lladdr $(mac {names["a"]} eth1) dev eth1
ip -n {names["r"]} neigh replace 198.18.200.3 lladdr $(mac {names["b"]} eth1) dev eth2
ip -n {names["b"]} neigh replace 198.18.200.2 lladdr $(mac {names["r"]} eth2) dev eth1
"""
    try:
        subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True)
        yield names
    finally:
        for name in names.values():
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_tracer_reads_a_linux_routers_time_exceeded(linux_router: dict[str, str]) -> None:
    runner = NetnsRunner("a", linux_router["a"])
    spec = {"probes": [["198.18.200.3", 49152], ["198.18.200.3", 49153]], "max_ttl": 4,
            "stop_at": {}}  # fmt: skip
    result = runner.start("trace", spec).result(timeout=30)
    for probe in result["probes"]:
        hops = [(h["ip"], h["icmp_type"], h["icmp_code"]) for h in probe["hops"]]
        # the router's time exceeded, then the destination's port unreachable (a Linux host)
        assert hops == [("198.18.200.0", 11, 0), ("198.18.200.3", 3, 3)]
        assert probe["reached"]
    # stop_at: the router's answer ends the trace, nothing is sent to the destination
    result = runner.start(
        "trace",
        {"probes": [["198.18.200.3", 49160]], "stop_at": {"198.18.200.3": ["198.18.200.0"]}},
    ).result(30)
    (probe,) = result["probes"]
    assert [h["ip"] for h in probe["hops"]] == ["198.18.200.0"] and probe["reached"]


# --------------------------------------------------------------------------- ICRC


def test_receiver_drops_frames_whose_icrc_a_switch_broke(leafspine_lab: Lab) -> None:
    intent = leafspine_lab.intent()
    icrc = [{"kind": "icrc_error", "port": "eth3", "percent": 50, "seed": 7}]
    with faults_on(leafspine_lab, "leaf2", icrc):
        result = _send_and_receive(leafspine_lab, intent, count=200)
    (flow,) = result["flows"]
    assert flow["received"] + flow["icrc_errors"] == 200
    assert 60 <= flow["icrc_errors"] <= 140, flow  # 50 % of 200, seeded
    # Dropped like a NIC drops them: they leave gaps, counted as lost. (Not the ones before
    # the first frame that arrived: the analyser counts no head loss; seed 7 corrupts 2.)
    assert flow["icrc_errors"] - 5 <= flow["lost"] <= flow["icrc_errors"], flow


def _send_and_receive(lab: Lab, intent: FabricIntent, count: int) -> dict[str, Any]:
    h1, h3 = intent.device("h1"), intent.device("h3")
    assert h1 is not None and h3 is not None and h1.ports[0].ipv4 and h3.ports[0].ipv4
    receiver = NetnsRunner("h3", lab.netns("h3")).start("receive", {
        "ifname": "eth1", "duration_s": 20, "idle_timeout_s": 1.0, "link_speed_bps": 10_000_000,
        "notification_point": False,
        "expected": {f"{h1.ports[0].ipv4.ip}/256": count},  # tail loss counts too
    })  # fmt: skip
    receiver.wait_ready()
    sender = NetnsRunner("h1", lab.netns("h1")).start("send", {
        "ifname": "eth1", "dst_ip": str(h3.ports[0].ipv4.ip), "rate_bps": 2_000_000,
        "link_speed_bps": 10_000_000, "count": count, "size": 256,
    })  # fmt: skip
    sender.result(timeout=30)
    return receiver.result(timeout=40)

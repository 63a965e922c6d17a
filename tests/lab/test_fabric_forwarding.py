"""Traffic through the lab built by ``roce-agent lab up``: hosts talk through the vswitches.

Plain UDP sockets in the hosts' namespaces, as an application would send; the fabric is
containerlab/roce-leafspine.clab.yml (h1, h2 on leaf1; h3, h4 on leaf2; two spines).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.lab.support import dataplane
from tests.lab.support.labs import Lab, ns_run, requires_lab

pytestmark = [pytest.mark.lab, requires_lab]
IP_RECVTTL = 12  # linux/in.h; Python's socket module has no name for it
IP_TTL = 2

# Receiver: prints "ready", then one JSON line per datagram with the TTL it arrived with.
RECEIVER = f"""
import json, socket, sys, time
bind_ip, port = sys.argv[1], int(sys.argv[2])
count, timeout = int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, {IP_RECVTTL}, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((bind_ip, port))
print("ready", flush=True)
deadline = time.monotonic() + timeout
got = 0
while got < count and time.monotonic() < deadline:
    s.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        data, anc, _, src = s.recvmsg(65535, 64)
    except socket.timeout:
        break
    ttl = next((int.from_bytes(v, "little") for lv, t, v in anc if t == {IP_TTL}), None)
    line = {{"src": src[0], "sport": src[1], "ttl": ttl, "data": data.decode()}}
    print(json.dumps(line), flush=True)
    got += 1
"""

# Sender: FLOWS sockets with consecutive source ports, PER_FLOW datagrams each.
SENDER = """
import socket, sys, time
src_ip, dst_ip, dst_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
first_sport, flows, per_flow = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
for flow in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src_ip, first_sport + flow))
    for n in range(per_flow):
        s.sendto(f"flow{flow}-{n}".encode(), (dst_ip, dst_port))
        time.sleep(0.002)
    s.close()
"""


def udp_exchange(
    lab: Lab,
    src: str,
    dst: str,
    *,
    flows: int = 1,
    per_flow: int = 1,
    first_sport: int = 40000,
    dst_port: int = 5000,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """Send UDP from host ``src`` to host ``dst`` with normal sockets; what ``dst`` received."""
    src_ip = lab.status["nodes"][src]["interfaces"][0]["ipv4"].split("/")[0]
    dst_ip = lab.status["nodes"][dst]["interfaces"][0]["ipv4"].split("/")[0]
    total = flows * per_flow
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", lab.netns(dst), sys.executable, "-c", RECEIVER,
         dst_ip, str(dst_port), str(total), str(timeout)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        ns_run(
            lab.netns(src), sys.executable, "-c", SENDER, src_ip, dst_ip, str(dst_port),
            str(first_sport), str(flows), str(per_flow),
        )  # fmt: skip
        out, err = receiver.communicate(timeout=timeout + 10)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    assert receiver.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _kernel_rx(lab: Lab, node: str, ifname: str) -> int:
    data = json.loads(ns_run(lab.netns(node), "ip", "-s", "-j", "link", "show", "dev", ifname))
    return int(data[0]["stats64"]["rx"]["packets"])


def _vswitch_rx(lab: Lab, node: str, ifname: str) -> int:
    return int(dataplane.counters(lab, node)["ports"][ifname]["rx_packets"])


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

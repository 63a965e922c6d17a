"""lab.vswitch L3 forwarding: UDP between hosts, ping, ARP, TTL, no route, ECMP."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from tests.lab.support import frames
from tests.lab.support import vswitch as fx

IP_RECVTTL = 12  # Linux; not exported by the socket module

pytestmark = [pytest.mark.lab, fx.requires_vswitch_lab]


@pytest.fixture(scope="module")
def topo() -> Iterator[fx.Topology]:
    with fx.Topology.create("fwd", n_hosts=3) as topology:
        yield topology


def _udp_socket(ns: str, bind_ip: str, port: int) -> socket.socket:
    with fx.in_netns(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((bind_ip, port))
    sock.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
    sock.settimeout(0.2)
    return sock


def _recv_ttl(sock: socket.socket) -> tuple[bytes, int] | None:
    try:
        data, ancdata, _flags, _addr = sock.recvmsg(2048, 64)
    except TimeoutError:
        return None
    ttl = -1
    for level, kind, payload in ancdata:
        if level == socket.IPPROTO_IP and kind == socket.IP_TTL:
            ttl = int.from_bytes(payload[:4], sys.byteorder)
    return data, ttl


def test_udp_between_hosts_is_routed_and_rewritten(topo: fx.Topology) -> None:
    """A kernel UDP socket receives it: TTL-1, MACs rewritten, IP checksum valid; ping works."""
    config = topo.base_config()
    config["neighbors"] = [n for n in config["neighbors"] if n["port"] != "eth3"]  # h3: ARP
    h1, h2, h3 = topo.host(1), topo.host(2), topo.host(3)
    with fx.Rig(topo) as rig:
        switch = rig.switch(config)
        capture = rig.capture(h2)
        rx2 = rig.enter_context(_udp_socket(h2.ns, h2.ip, 5001))
        rx3 = rig.enter_context(_udp_socket(h3.ns, h3.ip, 5001))
        tx = rig.enter_context(_udp_socket(h1.ns, h1.ip, 5000))
        # h1's kernel first ARPs for its gateway (the switch): the first datagrams may wait.
        got = _first_delivered(lambda: tx.sendto(b"hello-h2", (h2.ip, 5001)), rx2, tries=10)
        assert got is not None, switch.log_tail()
        assert got == (b"hello-h2", 63)

        assert fx.wait_for(lambda: capture.udp(5001), 1.0)
        wire = capture.udp(5001)[0]
        assert wire.eth_src == frames.mac_bytes(h2.switch_mac)
        assert wire.eth_dst == frames.mac_bytes(h2.mac)
        assert wire.ip_checksum_ok
        assert (wire.src_ip, wire.dst_ip, wire.ttl) == (h1.ip, h2.ip, 63)

        # h3 is not a static neighbor: the first packet is dropped while the switch ARPs.
        delivered = _first_delivered(lambda: tx.sendto(b"hello-h3", (h3.ip, 5001)), rx3, 20)
        assert delivered == (b"hello-h3", 63), switch.log_tail()
        with switch.client() as client:
            eth1 = client.counters()["ports"]["eth1"]
        assert eth1["drops"]["arp_unresolved"] >= 1

        assert fx.icmp_ping(h1.ns, h1.switch_ip, count=3) == 3  # the switch answers
        assert fx.icmp_ping(h1.ns, h2.switch_ip, count=2) == 2  # its other port too
        assert fx.icmp_ping(h1.ns, h2.ip, count=2) == 2  # and forwards ICMP both ways


def _first_delivered(
    send: Callable[[], object], receiver: socket.socket, tries: int
) -> tuple[bytes, int] | None:
    """Send until ``receiver`` gets a datagram (what and its TTL), at most ``tries`` times."""
    for _ in range(tries):
        send()
        got = _recv_ttl(receiver)
        if got is not None:
            return got
    return None


def test_ttl_expiry_and_no_route_are_dropped_and_counted(topo: fx.Topology) -> None:
    h1, h2 = topo.host(1), topo.host(2)

    def udp(dst_ip: str, dport: int, ttl: int = 64) -> bytes:
        return frames.build_udp(h1.mac, h1.switch_mac, h1.ip, dst_ip, 7, dport, b"x", ttl=ttl)

    with fx.Rig(topo) as rig:
        switch = rig.switch(topo.base_config())
        capture = rig.capture(h2)
        raw = rig.raw(h1)
        raw.send(udp(h2.ip, 7001, ttl=1))
        # 198.19.200.1 is in the benchmarking range but routed nowhere in this lab.
        raw.send(udp("198.19.200.1", 7002))
        raw.send(udp(h2.ip, 7003, ttl=2))
        assert fx.wait_for(lambda: capture.udp(7003), 2.0)
        time.sleep(0.1)
        assert not capture.udp(7001)
        with switch.client() as client:
            drops = client.counters()["ports"]["eth1"]["drops"]
        assert drops == {"ttl": 1, "no_route": 1, "arp_unresolved": 0}
        assert capture.udp(7003)[0].ttl == 1


def test_ecmp_spreads_flows_by_udp_source_port(topo: fx.Topology) -> None:
    """Route 198.18.100.0/24 via h2 and h3: flows (source ports) split, each flow sticks."""
    config = topo.base_config()
    h1, h2, h3 = topo.host(1), topo.host(2), topo.host(3)
    config["routes"] = [
        {
            "prefix": "198.18.100.0/24",
            "nexthops": [{"ip": h2.ip, "port": "eth2"}, {"ip": h3.ip}],
        }
    ]
    flows = range(20000, 20064)
    with fx.Rig(topo) as rig:
        rig.switch(config)
        cap2, cap3 = rig.capture(h2), rig.capture(h3)
        raw = rig.raw(h1)
        for _ in range(3):
            for sport in flows:
                raw.send(
                    frames.build_udp(
                        h1.mac, h1.switch_mac, h1.ip, "198.18.100.7", sport, 4791, b"roce", dscp=26
                    )
                )
        total = 3 * len(flows)
        assert fx.wait_for(lambda: len(cap2.udp(4791)) + len(cap3.udp(4791)) >= total, 3.0)
        via2 = {u.sport for u in cap2.udp(4791)}
        via3 = {u.sport for u in cap3.udp(4791)}
        assert via2 | via3 == set(flows)
        assert not via2 & via3, "a flow was split over both next hops"
        assert len(via2) >= 16 and len(via3) >= 16, (len(via2), len(via3))
        for capture, host in ((cap2, h2), (cap3, h3)):
            for u in capture.udp(4791):
                assert u.eth_dst == frames.mac_bytes(host.mac) and u.ip_checksum_ok

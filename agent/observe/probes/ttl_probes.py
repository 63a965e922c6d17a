"""TTL-limited RoCEv2 probe frames and the ICMP errors that answer them, on the source host.

A probe frame carries the probed flow's own 5-tuple (addresses, UDP source port, UDP
destination port, a BTH), so ECMP switches hash it onto the flow's path; its TTL makes it
expire at one switch of that path, which answers with ICMP time exceeded from the port the
packet arrived on (RFC 792; RFC 1812 §4.3.2.4 lets a router pick that address). The
answer quotes the probe, which ties it back to the probe and the TTL through the IP
identification. The trace (:mod:`agent.observe.probes.traceroute`) and the hop probes
(:mod:`agent.observe.probes.hops`) send these frames and read these answers.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from agent.observe.probes.packets import (
    ECN_ECT0,
    ICRC_LEN,
    IP_OFFSET,
    MIN_PROBE_PAYLOAD,
    Flow,
    RoceTemplate,
    icrc,
    pack_icrc,
)

# The QP of trace packets: no scenario uses it (they use 0x100 + index), so a receiver that
# happens to run at the destination counts trace packets apart from the mesh's flows.
TRACE_QPN = 0xFFFF
MAX_PROBES = 4096
ICMP_TIME_EXCEEDED = 11
ICMP_UNREACHABLE = 3
IPV4_MIN_HEADER = 20
UDP_HEADER = 8
MAX_READS = 256  # ICMP packets read per wake-up


def check_ipv4(text: Any, where: str) -> str:
    """``text`` as an IPv4 address; ValueError naming ``where`` for anything else."""
    try:
        return str(ipaddress.IPv4Address(text))
    except (ValueError, TypeError):
        raise ValueError(f"{where}: Expected: an IPv4 address Actual: {text!r}") from None


def check_ranges(fields: Sequence[tuple[str, Any, int, int]], where: str = "") -> None:
    """Each (name, value, low, high): an int within [low, high]; ValueError naming the
    field (``where`` before its name) for anything else."""
    for name, value, low, high in fields:
        if not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{where}{name}: Expected: {low}..{high} Actual: {value!r}")


def worker_json(spec: Any) -> dict[str, Any]:
    """A spec dataclass as the worker's JSON argument: its fields in order, tuples as lists
    (the spec's ``from_json`` reads it back)."""
    return {f.name: _listed(getattr(spec, f.name)) for f in fields(spec)}


def _listed(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_listed(item) for item in value]
    if isinstance(value, dict):
        return {key: _listed(item) for key, item in value.items()}
    return value


def probe_id(ttl: int, attempt: int) -> int:
    """The IP identification of one trace packet: TTL and try. Routers quote the IP header
    whole even when they quote only 8 bytes after it (RFC 792), so the answer to a late try
    is never taken for another TTL's."""
    return (ttl << 8) | attempt


def ipv4_checksum(header: bytes | bytearray) -> int:
    """RFC 791 header checksum (the checksum field itself must be zero in ``header``)."""
    total: int = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def trace_frame(template: bytes, ttl: int, attempt: int) -> bytes:
    """A trace packet: the probe frame with this TTL and :func:`probe_id`."""
    return probe_frame(template, ttl, probe_id(ttl, attempt))


def probe_frame(template: bytes, ttl: int, ident: int) -> bytes:
    """The probe frame with this TTL and IP identification; IP checksum and ICRC made right.

    The ICRC masks TTL and the IP checksum but covers the identification, so it is
    recomputed: the packet is a valid RoCEv2 packet for whichever NIC sees it.
    """
    frame = bytearray(template)
    struct.pack_into("!H", frame, IP_OFFSET + 4, ident)
    frame[IP_OFFSET + 8] = ttl
    frame[IP_OFFSET + 10 : IP_OFFSET + 12] = b"\x00\x00"
    struct.pack_into("!H", frame, IP_OFFSET + 10, ipv4_checksum(frame[IP_OFFSET : IP_OFFSET + 20]))
    frame[-ICRC_LEN:] = pack_icrc(icrc(bytes(frame)))
    return bytes(frame)


@dataclass(frozen=True)
class IcmpAnswer:
    """One ICMP error that quotes a UDP packet: who answered, and what it quoted."""

    from_ip: str
    icmp_type: int
    icmp_code: int
    src_ip: str  # of the quoted packet
    dst_ip: str
    ident: int
    sport: int
    dport: int
    # The quoted bytes after the quoted IP header (UDP, BTH, payload: as many as the router
    # quoted), to tell whether the probe was changed on the way.
    quoted_l4: bytes = field(default=b"", compare=False, repr=False)


def parse_icmp(packet: bytes) -> IcmpAnswer | None:
    """An IPv4 packet as a raw ICMP socket delivers it; None unless it is a time exceeded or
    destination unreachable quoting an IPv4 UDP packet (enough of it for the ports)."""
    if len(packet) < IPV4_MIN_HEADER or packet[0] >> 4 != 4 or packet[9] != 1:
        return None
    outer = (packet[0] & 0x0F) * 4
    if outer < IPV4_MIN_HEADER or len(packet) < outer + 8:
        return None
    icmp_type, icmp_code = packet[outer], packet[outer + 1]
    if icmp_type not in (ICMP_TIME_EXCEEDED, ICMP_UNREACHABLE):
        return None
    quoted = outer + 8
    if len(packet) < quoted + IPV4_MIN_HEADER or packet[quoted] >> 4 != 4:
        return None
    inner = (packet[quoted] & 0x0F) * 4
    if inner < IPV4_MIN_HEADER or packet[quoted + 9] != 17:
        return None
    udp = quoted + inner
    if len(packet) < udp + 4:
        return None
    sport, dport = struct.unpack_from("!HH", packet, udp)
    return IcmpAnswer(
        from_ip=socket.inet_ntoa(packet[12:16]),
        icmp_type=icmp_type,
        icmp_code=icmp_code,
        src_ip=socket.inet_ntoa(packet[quoted + 12 : quoted + 16]),
        dst_ip=socket.inet_ntoa(packet[quoted + 16 : quoted + 20]),
        ident=struct.unpack_from("!H", packet, quoted + 4)[0],
        sport=sport,
        dport=dport,
        quoted_l4=bytes(packet[udp:]),
    )


@dataclass
class TtlProbe:
    """One probed flow from this host: its frame, where it leaves, and (for a trace) the
    answers per TTL so far."""

    dst_ip: str
    sport: int
    src_ip: str
    ifname: str
    template: bytes
    stop_at: frozenset[str]
    hops: list[dict[str, Any] | None] = field(default_factory=list)
    sent_at: dict[int, float] = field(default_factory=dict)  # IP identification -> time
    done: bool = False
    reached: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "dst_ip": self.dst_ip,
            "sport": self.sport,
            "hops": self.hops,
            "reached": self.reached,
        }


@dataclass(frozen=True)
class ProbeTargets:
    """What to build probe frames for: (destination IPv4, UDP source port) pairs, their
    DSCP and UDP destination port, and per destination the addresses whose answer ends a
    trace there."""

    targets: Sequence[tuple[str, int]]
    dscp: int
    udp_port: int
    stop_at: dict[str, tuple[str, ...]] = field(default_factory=dict)


def build_probes(wanted: ProbeTargets) -> list[TtlProbe]:
    """One probe frame per (destination, source port), addressed like the kernel would."""
    from agent.observe.probes.rawsock import interface_mac
    from agent.observe.probes.sender import resolve_path

    routes: dict[str, tuple[str, str, str]] = {}
    probes = []
    for dst_ip, sport in wanted.targets:
        if dst_ip not in routes:
            try:
                routes[dst_ip] = resolve_path(dst_ip)
            except (OSError, KeyError, IndexError, ValueError) as exc:
                raise RuntimeError(f"no route to {dst_ip} on this host: {exc}") from None
        ifname, src_ip, next_hop_mac = routes[dst_ip]
        flow = Flow(
            src_mac=interface_mac(ifname),
            dst_mac=next_hop_mac,
            src_ip=src_ip,
            dst_ip=dst_ip,
            dscp=wanted.dscp,
            ecn=ECN_ECT0,
            sport=sport,
            qpn=TRACE_QPN,
            size=MIN_PROBE_PAYLOAD,
            udp_port=wanted.udp_port,
        )
        probes.append(
            TtlProbe(
                dst_ip, sport, src_ip, ifname, RoceTemplate(flow).frame(0, 0, 0),
                frozenset(wanted.stop_at.get(dst_ip, ())),
            )
        )  # fmt: skip
    return probes


@contextmanager
def probe_sockets(
    probes: Sequence[TtlProbe],
) -> Iterator[tuple[socket.socket, dict[str, socket.socket]]]:
    """A raw ICMP socket for the answers and a send-only port per interface, closed after."""
    from agent.observe.probes.rawsock import REJECT_ALL_FILTER, open_port

    senders: dict[str, socket.socket] = {}
    icmp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    try:
        icmp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        icmp.setblocking(False)
        for ifname in {p.ifname for p in probes}:
            senders[ifname] = open_port(ifname, bpf=REJECT_ALL_FILTER)
        yield icmp, senders
    finally:
        icmp.close()
        for sock in senders.values():
            sock.close()


def read_answers(icmp: socket.socket, timeout: float) -> Iterator[bytes]:
    """The ICMP packets that arrive within ``timeout`` s of the first wait: those waiting
    when the socket turns readable, at most :data:`MAX_READS` of them, so that a flood of
    other ICMP cannot hold a probe run past its deadlines."""
    readable, _, _ = select.select([icmp], [], [], timeout)
    if not readable:
        return
    for _ in range(MAX_READS):
        try:
            yield icmp.recv(65535)
        except BlockingIOError:
            return

"""Which switches and ports a RoCEv2 probe crosses: traceroute with the probe's own 5-tuple.

ECMP switches hash the 5-tuple, and RoCEv2 keeps its entropy in the UDP source port, so the
path of a probe is learnt the way operators learn it on real fabrics: UDP packets with the
probe's addresses, source port, UDP destination port 4791 and a BTH, sent with IP TTL 1, 2,
... from the source host; each switch that drops one for its TTL answers with ICMP time
exceeded from the port the packet arrived on (RFC 792; RFC 1812 §4.3.2.4 lets a router pick
that address, and the lab switch does). The answering address names (switch, ingress port)
through the fabric intent's port addresses.

Two halves: :func:`run_trace` runs on the source host (lab: in its namespace, real hosts:
over SSH, via ``python -m agent.observe.probes.worker trace``; raw sockets, so as root) and reports
which address answered which TTL; :func:`trace` and :func:`discover` run on the agent and map
the answers onto the fabric. Probes of one source host go out together, one TTL at a time, so
a discovery round costs one worker start per source host, whatever the number of ports.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.device.fanout import results_or_raise, run_each
from agent.errors import AgentError
from agent.observe.probes.packets import (
    ECN_ECT0,
    ICRC_LEN,
    IP_OFFSET,
    MIN_PROBE_PAYLOAD,
    ROCE_UDP_PORT,
    Flow,
    RoceTemplate,
    icrc,
    pack_icrc,
)

if TYPE_CHECKING:
    from agent.intent.model import FabricIntent
    from agent.observe.probes.runner import Runner

BASE_SPORT = 49152  # the first source port of the pairwise probes (scenarios.BASE_SPORT)
# The QP of trace packets: no scenario uses it (they use 0x100 + index), so a receiver that
# happens to run at the destination counts trace packets apart from the mesh's flows.
TRACE_QPN = 0xFFFF
MAX_TTL = 64
MAX_TRIES = 5
MAX_PROBES = 4096
DEFAULT_WAIT_S = 0.5
DEFAULT_RATE_PPS = 500
ICMP_TIME_EXCEEDED = 11
ICMP_UNREACHABLE = 3
UNKNOWN = "?"
_IPV4_MIN_HEADER = 20
_UDP_HEADER = 8
MAX_READS = 256  # ICMP packets read per wake-up
WORKER_MARGIN_S = 15.0  # interpreter start (lab) or SSH login, on a loaded host


class PathError(AgentError):
    """A trace that cannot run (unknown host, bad parameters) or returned nonsense."""


# --------------------------------------------------------------------------- on the host


@dataclass(frozen=True)
class TraceSpec:
    """What one source host traces: (destination IPv4, UDP source port) probes, TTL 1..n."""

    probes: tuple[tuple[str, int], ...]
    dscp: int = 26
    max_ttl: int = 8
    tries: int = 2
    wait_s: float = DEFAULT_WAIT_S
    rate_pps: int = DEFAULT_RATE_PPS
    # Per destination: addresses whose answer ends its trace (the ports of the switches the
    # destination hangs off: the last hop before it; a RoCE NIC never answers itself).
    stop_at: dict[str, tuple[str, ...]] = field(default_factory=dict)
    udp_port: int = ROCE_UDP_PORT  # the run's (agent.observe.probes.transport): ECMP hashes it too

    def __post_init__(self) -> None:
        if not 1 <= len(self.probes) <= MAX_PROBES:
            raise ValueError(f"probes: Expected: 1..{MAX_PROBES} Actual: {len(self.probes)}")
        for index, probe in enumerate(self.probes):
            if not (isinstance(probe, Sequence) and len(probe) == 2):
                raise ValueError(f"probes[{index}]: Expected: [dst_ip, sport] Actual: {probe!r}")
            _ipv4(probe[0], f"probes[{index}].dst_ip")
            if not isinstance(probe[1], int) or not 0 < probe[1] <= 0xFFFF:
                raise ValueError(f"probes[{index}].sport: Expected: 1..65535 Actual: {probe[1]!r}")
        for name, value, low, high in (
            ("dscp", self.dscp, 0, 63),
            ("udp_port", self.udp_port, 1, 0xFFFF),
            ("max_ttl", self.max_ttl, 1, MAX_TTL),
            ("tries", self.tries, 1, MAX_TRIES),
            ("rate_pps", self.rate_pps, 1, 100_000),
        ):
            if not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name}: Expected: {low}..{high} Actual: {value!r}")
        if not 0.001 <= self.wait_s <= 10:
            raise ValueError(f"wait_s: Expected: 0.001..10 s Actual: {self.wait_s!r}")
        for dst, addresses in self.stop_at.items():
            _ipv4(dst, "stop_at")
            for address in addresses:
                _ipv4(address, f"stop_at[{dst}]")

    @classmethod
    def from_json(cls, data: Any) -> TraceSpec:
        """The spec from the worker's JSON argument (lists for tuples); ValueError naming the
        field for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
            raise ValueError(f"probes: Expected: a list of [dst_ip, sport] Actual: {data!r:.100}")
        stop_at = data.get("stop_at") or {}
        if not isinstance(stop_at, dict) or not all(isinstance(v, list) for v in stop_at.values()):
            raise ValueError(
                f"stop_at: Expected: {{dst_ip: [address, ...]}} Actual: {stop_at!r:.100}"
            )
        data = dict(data)
        data["probes"] = tuple(tuple(p) if isinstance(p, list) else p for p in data["probes"])
        data["stop_at"] = {k: tuple(v) for k, v in stop_at.items()}
        return cls(**data)

    def budget_s(self) -> float:
        """Longest the trace can take: every TTL and try waits in full, sends paced."""
        sends = len(self.probes) * self.max_ttl * self.tries
        return self.max_ttl * self.tries * self.wait_s + sends / self.rate_pps


def _ipv4(text: Any, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except (ValueError, TypeError):
        raise ValueError(f"{where}: Expected: an IPv4 address Actual: {text!r}") from None


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
    if len(packet) < _IPV4_MIN_HEADER or packet[0] >> 4 != 4 or packet[9] != 1:
        return None
    outer = (packet[0] & 0x0F) * 4
    if outer < _IPV4_MIN_HEADER or len(packet) < outer + 8:
        return None
    icmp_type, icmp_code = packet[outer], packet[outer + 1]
    if icmp_type not in (ICMP_TIME_EXCEEDED, ICMP_UNREACHABLE):
        return None
    quoted = outer + 8
    if len(packet) < quoted + _IPV4_MIN_HEADER or packet[quoted] >> 4 != 4:
        return None
    inner = (packet[quoted] & 0x0F) * 4
    if inner < _IPV4_MIN_HEADER or packet[quoted + 9] != 17:
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
class _Probe:
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


def _build_probes(spec: TraceSpec) -> list[_Probe]:
    return _templates(
        [(dst_ip, sport) for dst_ip, sport in spec.probes], spec.dscp, spec.stop_at, spec.udp_port
    )


def _templates(
    targets: Sequence[tuple[str, int]],
    dscp: int,
    stop_at: dict[str, tuple[str, ...]],
    udp_port: int,
) -> list[_Probe]:
    """One probe frame per (destination, source port), addressed like the kernel would."""
    from agent.observe.probes.rawsock import interface_mac
    from agent.observe.probes.sender import resolve_path

    routes: dict[str, tuple[str, str, str]] = {}
    probes = []
    for dst_ip, sport in targets:
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
            dscp=dscp,
            ecn=ECN_ECT0,
            sport=sport,
            qpn=TRACE_QPN,
            size=MIN_PROBE_PAYLOAD,
            udp_port=udp_port,
        )
        probes.append(
            _Probe(
                dst_ip, sport, src_ip, ifname, RoceTemplate(flow).frame(0, 0, 0),
                frozenset(stop_at.get(dst_ip, ())),
            )
        )  # fmt: skip
    return probes


@contextmanager
def _probe_sockets(
    probes: Sequence[_Probe],
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


def run_trace(spec: TraceSpec) -> dict[str, Any]:
    """Trace every probe of ``spec`` from this host; JSON-ready result (hops per TTL)."""
    probes = _build_probes(spec)
    by_key = {(p.dst_ip, p.sport): p for p in probes}
    sources = {p.src_ip for p in probes}
    ignored = 0
    with _probe_sockets(probes) as (icmp, senders):
        gap = 1.0 / spec.rate_pps
        start = time.monotonic()
        for ttl in range(1, spec.max_ttl + 1):
            active = [p for p in probes if not p.done]
            if not active:
                break
            for p in active:
                p.hops.append(None)
            for attempt in range(spec.tries):
                waiting = [p for p in active if p.hops[ttl - 1] is None and not p.done]
                if not waiting:
                    break
                next_send = time.monotonic()
                for p in waiting:
                    while (left := next_send - time.monotonic()) > 0:
                        ignored += _collect(icmp, by_key, sources, left, spec.udp_port)
                    senders[p.ifname].send(trace_frame(p.template, ttl, attempt))
                    p.sent_at[probe_id(ttl, attempt)] = time.monotonic()
                    next_send += gap
                deadline = time.monotonic() + spec.wait_s
                while any(p.hops[ttl - 1] is None and not p.done for p in waiting):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    ignored += _collect(icmp, by_key, sources, left, spec.udp_port)
        ignored += _collect(icmp, by_key, sources, 0.0, spec.udp_port)
        elapsed = time.monotonic() - start
    return {
        "role": "trace",
        "src_ips": sorted(sources),
        "duration_s": round(elapsed, 6),
        "icmp_ignored": ignored,
        "probes": [p.as_dict() for p in probes],
    }


def _collect(
    icmp: socket.socket,
    by_key: dict[tuple[str, int], _Probe],
    sources: set[str],
    timeout: float,
    udp_port: int,
) -> int:
    """Read ICMP answers for up to ``timeout`` s; returns how many were not ours."""
    ignored = 0
    readable, _, _ = select.select([icmp], [], [], timeout)
    if not readable:
        return 0
    # Bounded, so that a flood of other ICMP cannot hold the trace past its deadlines.
    for _ in range(MAX_READS):
        try:
            packet = icmp.recv(65535)
        except BlockingIOError:
            return ignored
        now = time.monotonic()
        answer = parse_icmp(packet)
        probe = (
            by_key.get((answer.dst_ip, answer.sport))
            if answer is not None and answer.dport == udp_port and answer.src_ip in sources
            else None
        )
        ttl = (answer.ident >> 8) if answer is not None else 0
        if answer is None or probe is None or not 1 <= ttl <= len(probe.hops):
            ignored += 1
            continue
        if answer.ident not in probe.sent_at or probe.hops[ttl - 1] is not None:
            ignored += 1  # not a packet we sent, or a second answer (both tries answered)
            continue
        probe.hops[ttl - 1] = {
            "ttl": ttl,
            "ip": answer.from_ip,
            "icmp_type": answer.icmp_type,
            "icmp_code": answer.icmp_code,
            "rtt_s": round(now - probe.sent_at[answer.ident], 6),
        }
        if answer.icmp_type == ICMP_UNREACHABLE or answer.from_ip in probe.stop_at:
            # The destination said port unreachable (a Linux host, not a NIC), a router
            # could not forward it, or the last switch before the destination answered.
            probe.done = True
            probe.reached = answer.from_ip == probe.dst_ip or answer.from_ip in probe.stop_at
            del probe.hops[ttl:]
    return ignored


# mtr's method, with the probe's 5-tuple: many packets per hop, each expiring at that hop.
HOP_ROUND_BITS = 10  # IP identification = TTL << 10 | round: 63 hops, 1024 rounds
MAX_HOP_ROUNDS = 1 << HOP_ROUND_BITS
_BTH_RESV8A = _UDP_HEADER + 4  # in the bytes after the IP header: a switch may rewrite it


@dataclass(frozen=True)
class HopSpec:
    """Per-hop probing from one host: ``count`` packets to each of a path's ``hops`` switch
    hops (TTL 1..hops), per (destination IPv4, UDP source port, hops)."""

    probes: tuple[tuple[str, int, int], ...]
    count: int = 20
    dscp: int = 26
    rate_pps: int = 200
    wait_s: float = 1.0
    udp_port: int = ROCE_UDP_PORT

    def __post_init__(self) -> None:
        if not 1 <= len(self.probes) <= MAX_PROBES:
            raise ValueError(f"probes: Expected: 1..{MAX_PROBES} Actual: {len(self.probes)}")
        for index, probe in enumerate(self.probes):
            if not (isinstance(probe, Sequence) and len(probe) == 3):
                raise ValueError(
                    f"probes[{index}]: Expected: [dst_ip, sport, hops] Actual: {probe!r}"
                )
            _ipv4(probe[0], f"probes[{index}].dst_ip")
            for name, value, low, high in (
                ("sport", probe[1], 1, 0xFFFF),
                ("hops", probe[2], 1, (1 << (16 - HOP_ROUND_BITS)) - 1),
            ):
                if not isinstance(value, int) or not low <= value <= high:
                    raise ValueError(
                        f"probes[{index}].{name}: Expected: {low}..{high} Actual: {value!r}"
                    )
        for name, value, low, high in (
            ("count", self.count, 1, MAX_HOP_ROUNDS),
            ("dscp", self.dscp, 0, 63),
            ("udp_port", self.udp_port, 1, 0xFFFF),
            ("rate_pps", self.rate_pps, 1, 100_000),
        ):
            if not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name}: Expected: {low}..{high} Actual: {value!r}")
        if not 0.001 <= self.wait_s <= 10:
            raise ValueError(f"wait_s: Expected: 0.001..10 s Actual: {self.wait_s!r}")

    @classmethod
    def from_json(cls, data: Any) -> HopSpec:
        if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
            raise ValueError(
                f"probes: Expected: a list of [dst_ip, sport, hops] Actual: {data!r:.100}"
            )
        data = dict(data)
        data["probes"] = tuple(tuple(p) if isinstance(p, list) else p for p in data["probes"])
        return cls(**data)

    def budget_s(self) -> float:
        return sum(p[2] for p in self.probes) * self.count / self.rate_pps + self.wait_s


def changed_on_the_way(sent_l4: bytes, quoted_l4: bytes) -> bool:
    """Whether the quoted UDP/BTH/payload bytes differ from what was sent, over what the
    router quoted, up to the ICRC (which differs per packet: it covers the identification);
    the BTH reserved byte is left out, as the ICRC leaves it out."""
    end = min(len(quoted_l4), len(sent_l4) - ICRC_LEN)
    return any(quoted_l4[i] != sent_l4[i] for i in range(end) if i != _BTH_RESV8A)


def run_hops(spec: HopSpec) -> dict[str, Any]:
    """Send every probe's packets hop by hop, round by round; count the answers per hop."""
    probes = _templates([(d, s) for d, s, _ in spec.probes], spec.dscp, {}, spec.udp_port)
    tally = _HopTally(spec, probes)
    with _probe_sockets(probes) as (icmp, senders):
        gap = 1.0 / spec.rate_pps
        start = next_send = time.monotonic()
        for round_index in range(spec.count):
            for probe in probes:
                key = (probe.dst_ip, probe.sport)
                for ttl in range(1, tally.hops[key] + 1):
                    while (left := next_send - time.monotonic()) > 0:
                        tally.collect(icmp, left)
                    ident = ttl << HOP_ROUND_BITS | round_index
                    senders[probe.ifname].send(probe_frame(probe.template, ttl, ident))
                    tally.sent(key, ttl, ident, time.monotonic())
                    next_send = max(next_send + gap, time.monotonic() - gap)
        deadline = time.monotonic() + spec.wait_s
        while (left := deadline - time.monotonic()) > 0 and tally.waiting():
            tally.collect(icmp, left)
        elapsed = time.monotonic() - start
    return {
        "role": "hops",
        "src_ips": sorted(tally.sources),
        "duration_s": round(elapsed, 6),
        "icmp_ignored": tally.ignored,
        "probes": [
            {"dst_ip": d, "sport": s, "hops": tally.stats[(d, s)]} for d, s, _ in spec.probes
        ],
    }


class _HopTally:
    """What :func:`run_hops` sent to each hop of each probe, and the answers that came back."""

    def __init__(self, spec: HopSpec, probes: Sequence[_Probe]) -> None:
        self.udp_port = spec.udp_port
        self.hops = {
            (p.dst_ip, p.sport): n for (_, _, n), p in zip(spec.probes, probes, strict=True)
        }
        self.stats: dict[tuple[str, int], list[dict[str, Any]]] = {
            key: [{"sent": 0, "answered": 0, "corrupted": 0, "rtt_min_s": None} for _ in range(n)]
            for key, n in self.hops.items()
        }
        self.sent_at: dict[tuple[str, int, int], float] = {}
        self.sent_l4 = {
            key: p.template[IP_OFFSET + 20 :] for key, p in zip(self.hops, probes, strict=True)
        }
        self.sources = {p.src_ip for p in probes}
        self.seen: set[tuple[str, int, int]] = set()
        self.ignored = 0

    def sent(self, key: tuple[str, int], ttl: int, ident: int, at: float) -> None:
        self.sent_at[(key[0], key[1], ident)] = at
        self.stats[key][ttl - 1]["sent"] += 1

    def waiting(self) -> bool:
        return any(row["answered"] < row["sent"] for rows in self.stats.values() for row in rows)

    def collect(self, icmp: socket.socket, timeout: float) -> None:
        """Read ICMP answers for up to ``timeout`` s (a bounded number of them)."""
        readable, _, _ = select.select([icmp], [], [], timeout)
        if not readable:
            return
        for _ in range(MAX_READS):
            try:
                packet = icmp.recv(65535)
            except BlockingIOError:
                return
            if not self._take(parse_icmp(packet)):
                self.ignored += 1

    def _rows(self, answer: IcmpAnswer | None) -> list[dict[str, Any]] | None:
        """The hop rows of the probe ``answer`` quotes, if it answers one of ours."""
        if answer is None or answer.src_ip not in self.sources:
            return None
        if answer.dport != self.udp_port or answer.icmp_type != ICMP_TIME_EXCEEDED:
            return None
        return self.stats.get((answer.dst_ip, answer.sport))

    def _take(self, answer: IcmpAnswer | None) -> bool:
        """Count an answer; False when it is not one of ours, or a duplicate."""
        rows = self._rows(answer)
        if answer is None or rows is None:
            return False
        ttl, index = answer.ident >> HOP_ROUND_BITS, answer.ident & (MAX_HOP_ROUNDS - 1)
        if not 1 <= ttl <= len(rows) or index >= rows[ttl - 1]["sent"]:
            return False
        sent_key = (answer.dst_ip, answer.sport, answer.ident)
        if sent_key in self.seen:
            return False  # a duplicate answer
        self.seen.add(sent_key)
        row = rows[ttl - 1]
        row["answered"] += 1
        # The fastest answer: a delay on the way there (or back) shows in every one.
        rtt = time.monotonic() - self.sent_at.get(sent_key, time.monotonic())
        row["rtt_min_s"] = rtt if row["rtt_min_s"] is None else min(row["rtt_min_s"], rtt)
        if changed_on_the_way(self.sent_l4[(answer.dst_ip, answer.sport)], answer.quoted_l4):
            row["corrupted"] += 1
        return True


# --------------------------------------------------------------------------- on the agent


@dataclass(frozen=True)
class Hop:
    """A switch a probe crossed and the port it arrived on (the address that answered).

    ``egress`` is the port it left by toward the next hop, from the intent (the next hop's
    ingress port's peer; for the last hop, the port toward the destination); None when the
    next hop is unknown.
    """

    switch: str
    port: str
    ip: str
    egress: str | None = None

    @property
    def known(self) -> bool:
        return self.switch != UNKNOWN


@dataclass(frozen=True)
class Path:
    """The hops of one probe from host ``src`` to host ``dst`` with UDP source port ``sport``.

    A hop that did not answer (ICMP rate-limited, or the probe dropped silently) is None;
    ``complete`` says the trace reached the last switch before ``dst`` (or ``dst`` itself).
    """

    src: str
    dst: str
    sport: int
    hops: tuple[Hop | None, ...]
    complete: bool = True

    def links(self) -> tuple[str, ...]:
        """Directed links as ``lab fault`` names them: ``h1>leaf1``, ``leaf1:PORT>spine1``
        (PORT: leaf1's egress port), ..., ``leaf2:PORT>h3``; ``?`` where a hop is unknown.
        The last link (to ``dst``) only when the path is complete."""
        names = []
        prev, prev_port = self.src, None
        for hop in self.hops:
            node = hop.switch if hop is not None else UNKNOWN
            names.append(f"{prev}:{prev_port}>{node}" if prev_port else f"{prev}>{node}")
            prev, prev_port = node, hop.egress if hop is not None else None
        if self.complete and self.hops:
            names.append(f"{prev}:{prev_port}>{self.dst}" if prev_port else f"{prev}>{self.dst}")
        return tuple(names)

    @property
    def full(self) -> bool:
        """Complete and every hop answered and known."""
        return self.complete and all(h is not None and h.known for h in self.hops)

    def hop_key(self) -> tuple[tuple[str, str] | None, ...]:
        """The hop sequence (switch, ingress port) that tells paths apart."""
        return tuple((h.switch, h.port) if h is not None else None for h in self.hops)

    def covers(self, other: Path) -> bool:
        """Whether this path agrees with ``other`` wherever ``other`` has a known hop."""
        if len(other.hops) > len(self.hops) or (
            other.complete and len(other.hops) != len(self.hops)
        ):
            return False
        return all(
            b is None or not b.known or (a is not None and (a.switch, a.port) == (b.switch, b.port))
            for a, b in zip(self.hops, other.hops, strict=False)
        )


class _Fabric:
    """The intent's addresses and cabling, for mapping answers onto switches and ports."""

    def __init__(self, intent: FabricIntent) -> None:
        self.intent = intent
        self.port_of: dict[str, tuple[str, str]] = {}
        self.peer: dict[tuple[str, str], tuple[str, str]] = {}
        self.roles = {d.name: d.role for d in intent.devices}
        for device in intent.devices:
            for port in device.ports:
                if port.ipv4 is not None and device.role != "host":
                    self.port_of[str(port.ipv4.ip)] = (device.name, port.name)
                if port.peer is not None:
                    peer_device, _, peer_port = port.peer.partition(":")
                    self.peer[(device.name, port.name)] = (peer_device, peer_port)

    def last_switch_ports(self, host: str) -> dict[str, str]:
        """{switch: its port toward ``host``} for each switch ``host`` is cabled to."""
        device = self.intent.device(host)
        out: dict[str, str] = {}
        for port in device.ports if device is not None else ():
            peer = self.peer.get((host, port.name))
            if peer is not None and self.roles.get(peer[0]) not in (None, "host"):
                out.setdefault(peer[0], peer[1])
        return out

    def stop_addresses(self, host: str) -> tuple[str, ...]:
        """Every port address of the switches ``host`` hangs off: any of them answering
        means the next hop is ``host``."""
        switches = set(self.last_switch_ports(host))
        return tuple(sorted(ip for ip, (dev, _) in self.port_of.items() if dev in switches))

    def path(self, src: str, dst: str, probe: Any) -> Path:
        """The Path of one row of the worker's result; PathError if the row is not one."""
        try:
            return self._path(src, dst, probe)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PathError(
                f"trace {src} -> {dst}: Expected: a probe result with dst_ip, sport, hops, "
                f"reached Actual: {probe!r:.200}"
            ) from None

    def _path(self, src: str, dst: str, probe: dict[str, Any]) -> Path:
        hops: list[Hop | None] = []
        dst_ip = probe["dst_ip"]
        for answer in probe["hops"]:
            if answer is None:
                hops.append(None)
            elif answer["ip"] == dst_ip:
                continue  # the destination host itself said port unreachable: not a hop
            else:
                switch, port = self.port_of.get(answer["ip"], (UNKNOWN, UNKNOWN))
                hops.append(Hop(switch, port, answer["ip"]))
        complete = bool(probe["reached"])
        toward_dst = self.last_switch_ports(dst)
        for index, hop in enumerate(hops):
            if hop is None or not hop.known:
                continue
            egress = None
            following = hops[index + 1] if index + 1 < len(hops) else None
            if following is not None and following.known:
                peer = self.peer.get((following.switch, following.port))
                if peer is not None and peer[0] == hop.switch:
                    egress = peer[1]
            elif index == len(hops) - 1 and complete:
                egress = toward_dst.get(hop.switch)
            if egress is not None:
                hops[index] = Hop(hop.switch, hop.port, hop.ip, egress)
        return Path(src, dst, int(probe["sport"]), tuple(hops), complete)


def _host_ip(intent: FabricIntent, name: str) -> str:
    from agent.observe.probes.scenarios import ScenarioError, endpoint

    try:
        return endpoint(intent, name).ip
    except ScenarioError as exc:
        raise PathError(str(exc)) from None


Tracer = Callable[[str, Sequence[tuple[str, int]]], list[Path]]


def trace_many(
    intent: FabricIntent,
    src: str,
    probes: Sequence[tuple[str, int]],
    *,
    dscp: int | None = None,
    max_ttl: int = 8,
    tries: int = 2,
    wait_s: float = DEFAULT_WAIT_S,
    rate_pps: int = DEFAULT_RATE_PPS,
    runner: Runner | None = None,
    udp_port: int = ROCE_UDP_PORT,
) -> list[Path]:
    """Trace (destination host, source port) probes from host ``src`` in one worker run, to
    UDP ``udp_port`` (the run's: the destination port is part of what ECMP hashes)."""
    from agent.observe.probes.runner import ProbeError
    from agent.observe.probes.scenarios import ScenarioError, endpoint

    try:
        source = endpoint(intent, src)
    except ScenarioError as exc:
        raise PathError(str(exc)) from None
    fabric = _Fabric(intent)
    dst_ips = {dst: _host_ip(intent, dst) for dst, _ in probes}
    for dst in dst_ips:
        if dst == src:
            raise PathError(f"trace {src} -> {dst}: source and destination are the same host")
    try:
        spec = TraceSpec(
            probes=tuple((dst_ips[dst], sport) for dst, sport in probes),
            dscp=intent.profile.roce.dscp if dscp is None else dscp,
            max_ttl=max_ttl,
            tries=tries,
            wait_s=wait_s,
            rate_pps=rate_pps,
            stop_at={dst_ips[d]: fabric.stop_addresses(d) for d in dst_ips},
            udp_port=udp_port,
        )
    except ValueError as exc:
        raise PathError(f"trace from {src}: {exc}") from None
    handle = (runner or source.runner).start("trace", _spec_json(spec))
    try:
        result = handle.result(timeout=spec.budget_s() + WORKER_MARGIN_S)
    except ProbeError as exc:
        raise PathError(str(exc)) from None
    answers = result.get("probes")
    if not isinstance(answers, list) or len(answers) != len(probes):
        raise PathError(
            f"trace from {src}: Expected: {len(probes)} probe results Actual: {answers!r:.200}"
        )
    return [fabric.path(src, dst, a) for (dst, _), a in zip(probes, answers, strict=True)]


def _spec_json(spec: TraceSpec) -> dict[str, Any]:
    return {
        "probes": [list(p) for p in spec.probes],
        "dscp": spec.dscp,
        "max_ttl": spec.max_ttl,
        "tries": spec.tries,
        "wait_s": spec.wait_s,
        "rate_pps": spec.rate_pps,
        "stop_at": {k: list(v) for k, v in spec.stop_at.items()},
        "udp_port": spec.udp_port,
    }


def trace(
    intent: FabricIntent,
    src: str,
    dst: str,
    sport: int,
    *,
    dscp: int | None = None,
    max_ttl: int = 8,
    tries: int = 2,
    runner: Runner | None = None,
    udp_port: int = ROCE_UDP_PORT,
) -> Path:
    """The path of the RoCEv2 probe ``src`` -> ``dst`` with UDP source port ``sport``."""
    return trace_many(
        intent, src, [(dst, sport)], dscp=dscp, max_ttl=max_ttl, tries=tries, runner=runner,
        udp_port=udp_port,
    )[0]  # fmt: skip


@dataclass
class _Discovery:
    pair: tuple[str, str]
    tried: int = 0
    streak: int = 0
    done: bool = False
    full: dict[tuple[Any, ...], Path] = field(default_factory=dict)
    partial: list[Path] = field(default_factory=list)

    def take(self, path: Path, max_sports: int, patience: int) -> None:
        """Account the next source port's path (in source-port order)."""
        self.tried += 1
        if path.full and path.hop_key() not in self.full:
            self.full[path.hop_key()] = path
            self.streak = 0
        else:
            # A partial answer (a silent hop) is no evidence of a new path.
            if not path.full:
                self.partial.append(path)
            self.streak += 1
        if self.streak >= patience or self.tried >= max_sports:
            self.done = True

    def paths(self) -> list[Path]:
        """Distinct full paths, plus partial ones no full path explains (deduplicated)."""
        out = list(self.full.values())
        for path in self.partial:
            if not any(known.covers(path) for known in out):
                out.append(path)
        return out


def discover(
    intent: FabricIntent,
    pairs: Iterable[tuple[str, str]],
    *,
    max_sports: int = 16,
    patience: int = 4,
    runner: Callable[[str], Runner] | None = None,
    tracer: Tracer | None = None,
    udp_port: int = ROCE_UDP_PORT,
) -> dict[tuple[str, str], list[Path]]:
    """The ECMP paths between each (source, destination) host pair.

    Source ports ``BASE_SPORT``, ``BASE_SPORT + 1``, ... are traced per pair until
    ``patience`` ports in a row bring no new path or ``max_sports`` were tried; one Path per
    distinct hop sequence, in the order found (its ``sport`` is the first port that took it).
    The result is the same as tracing one port at a time; the ports go out in rounds, one
    worker run per source host and round, all source hosts at once. ``runner(host)`` gives
    the runner of a host (default: its namespace or SSH); ``tracer(src, [(dst, sport)])``
    replaces the tracing itself (tests).
    """
    states = _discovery_states(intent, pairs, max_sports, patience)
    if tracer is None:

        def tracer(src: str, probes: Sequence[tuple[str, int]]) -> list[Path]:
            return trace_many(
                intent, src, probes, runner=runner(src) if runner else None, udp_port=udp_port
            )

    chosen: Tracer = tracer
    first_round = True
    while any(not s.done for s in states.values()):
        batch = 2 * patience if first_round else patience
        first_round = False
        plan = _round_plan(states.values(), batch, max_sports)
        results = _trace_round(chosen, plan)
        for src, items in plan.items():
            for (state, _), path in zip(items, results[src], strict=True):
                if not state.done:
                    state.take(path, max_sports, patience)
    return {pair: state.paths() for pair, state in states.items()}


def _discovery_states(
    intent: FabricIntent, pairs: Iterable[tuple[str, str]], max_sports: int, patience: int
) -> dict[tuple[str, str], _Discovery]:
    """One discovery per distinct pair, once the settings and every host are known good."""
    if not 1 <= max_sports <= 4096:
        raise PathError(f"max_sports: Expected: 1..4096 Actual: {max_sports}")
    if not 1 <= patience <= max_sports:
        raise PathError(f"patience: Expected: 1..max_sports ({max_sports}) Actual: {patience}")
    states: dict[tuple[str, str], _Discovery] = {}
    for src, dst in pairs:
        if src == dst:
            raise PathError(f"pair {src} -> {dst}: source and destination are the same host")
        for host in (src, dst):
            _host_ip(intent, host)
        states.setdefault((src, dst), _Discovery((src, dst)))
    return states


RoundPlan = dict[str, list[tuple[_Discovery, int]]]  # source host -> (discovery, sport)


def _round_plan(states: Iterable[_Discovery], batch: int, max_sports: int) -> RoundPlan:
    """The next ``batch`` source ports of every unfinished pair, by source host."""
    plan: RoundPlan = {}
    for state in states:
        if state.done:
            continue
        for offset in range(min(batch, max_sports - state.tried)):
            plan.setdefault(state.pair[0], []).append((state, BASE_SPORT + state.tried + offset))
    return plan


def _trace_round(tracer: Tracer, plan: RoundPlan) -> dict[str, list[Path]]:
    """One round's traces, one tracer run per source host, all source hosts at once."""
    probes = {src: (src, [(s.pair[1], sport) for s, sport in items]) for src, items in plan.items()}
    traced = results_or_raise(run_each(probes, lambda job: tracer(*job), parallelism=None))
    for src, items in plan.items():
        if len(traced[src]) != len(items):
            raise PathError(
                f"tracer for {src}: Expected: {len(items)} paths Actual: {len(traced[src])}"
            )
    return traced


@dataclass(frozen=True)
class HopCount:
    """Per-hop probes of one path that expire at one switch (mtr's method): sent, answered
    with ICMP time exceeded, and answered with a quote that differs from what was sent (the
    probe was changed before that switch)."""

    sent: int
    answered: int
    corrupted: int = 0
    rtt_min_ms: float | None = None  # the fastest answer's round trip


def probe_hops(
    intent: FabricIntent,
    paths: Iterable[Path],
    *,
    tries: int = 20,
    rate_pps: int = 200,
    runner: Callable[[str], Runner] | None = None,
    udp_port: int = ROCE_UDP_PORT,
) -> dict[tuple[str, str, int], tuple[HopCount | None, ...]]:
    """Send ``tries`` packets with each path's 5-tuple to each of its switch hops (TTL 1..n),
    all source hosts at once, each paced at ``rate_pps`` (keep the answers a switch must
    send under its ICMP policer: a policed answer counts as unanswered); per (src, dst,
    sport), one HopCount per hop of the path, in order."""
    from agent.observe.probes.runner import ProbeError

    by_src: dict[str, list[Path]] = {}
    for path in paths:
        if path.hops:
            by_src.setdefault(path.src, []).append(path)
    if not by_src:
        return {}

    def one_host(
        src: str, mine: list[Path]
    ) -> dict[tuple[str, str, int], tuple[HopCount | None, ...]]:
        dst_ips = {p.dst: _host_ip(intent, p.dst) for p in mine}
        try:
            spec = HopSpec(
                probes=tuple((dst_ips[p.dst], p.sport, len(p.hops)) for p in mine),
                count=tries,
                dscp=intent.profile.roce.dscp,
                rate_pps=rate_pps,
                udp_port=udp_port,
            )
        except ValueError as exc:
            raise PathError(f"hop probes from {src}: {exc}") from None
        from agent.observe.probes.scenarios import ScenarioError, endpoint

        try:
            chosen = runner(src) if runner else endpoint(intent, src).runner
        except ScenarioError as exc:
            raise PathError(str(exc)) from None
        handle = chosen.start("hops", {
            "probes": [list(p) for p in spec.probes], "count": spec.count, "dscp": spec.dscp,
            "rate_pps": spec.rate_pps, "wait_s": spec.wait_s, "udp_port": spec.udp_port,
        })  # fmt: skip
        try:
            result = handle.result(timeout=spec.budget_s() + WORKER_MARGIN_S)
        except ProbeError as exc:
            raise PathError(str(exc)) from None
        rows = result.get("probes")
        if not isinstance(rows, list) or len(rows) != len(mine):
            raise PathError(
                f"hop probes from {src}: Expected: {len(mine)} results Actual: {rows!r:.200}"
            )
        out: dict[tuple[str, str, int], tuple[HopCount | None, ...]] = {}
        for path, row in zip(mine, rows, strict=True):
            try:
                out[(path.src, path.dst, path.sport)] = tuple(
                    HopCount(
                        int(h["sent"]),
                        int(h["answered"]),
                        int(h["corrupted"]),
                        float(h["rtt_min_s"]) * 1000 if h.get("rtt_min_s") is not None else None,
                    )
                    for h in row["hops"]
                )
            except (KeyError, TypeError, ValueError):
                raise PathError(
                    f"hop probes {path.src} -> {path.dst}: Expected: hops with sent, answered, "
                    f"corrupted Actual: {row!r:.200}"
                ) from None
        return out

    merged: dict[tuple[str, str, int], tuple[HopCount | None, ...]] = {}
    jobs = {src: (src, mine) for src, mine in by_src.items()}
    outcomes = run_each(jobs, lambda job: one_host(*job), parallelism=None)
    for part in results_or_raise(outcomes).values():
        merged.update(part)
    return merged


def pingmesh_pairs(intent: FabricIntent) -> list[tuple[str, str]]:
    """Pingmesh-style pairs: every ordered pair of hosts under one leaf (ToR-local), and for
    each pair of leaves one host of each, both directions (cross-ToR); the host picked for
    a leaf rotates with the leaf pairs, so the cross-ToR probes do not all start on one NIC.
    Rates per host are bounded by the caller."""
    fabric = _Fabric(intent)
    by_leaf: dict[str, list[str]] = {}
    for device in intent.devices:
        if device.role != "host":
            continue
        port = next((p for p in device.ports if p.ipv4 is not None), None)
        peer = fabric.peer.get((device.name, port.name)) if port is not None else None
        if peer is not None and fabric.roles.get(peer[0]) not in (None, "host"):
            by_leaf.setdefault(peer[0], []).append(device.name)
    leaves = sorted(by_leaf)
    pairs = [(a, b) for leaf in leaves for a in by_leaf[leaf] for b in by_leaf[leaf] if a != b]
    for index, (left, right) in enumerate(
        (a, b) for i, a in enumerate(leaves) for b in leaves[i + 1 :]
    ):
        x = by_leaf[left][index % len(by_leaf[left])]
        y = by_leaf[right][index % len(by_leaf[right])]
        pairs += [(x, y), (y, x)]
    return pairs

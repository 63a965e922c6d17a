"""RoCEv2, CNP and PFC frames: scapy for building and dissecting, raw bytes for hot paths.

scapy (``scapy.contrib.roce``, ``scapy.contrib.mac_control``) is the reference: it builds a
frame once, with the ICRC it computes when ``icrc`` is unset. Senders then send thousands of
frames per second, which scapy cannot build (≈5 k packets/s), so :class:`RoceTemplate` keeps
the bytes of one scapy frame and patches PSN, sequence and timestamp in place, recomputing the
ICRC with ``zlib.crc32`` over the same masked fields as scapy's ``BTH.compute_icrc``
(InfiniBand Architecture Specification, Annex A17 "RoCEv2", ICRC over a pseudo-LRH of 0xFF
bytes and the IP/UDP/BTH headers with their variant fields set to 1s).
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict, Unpack

from scapy.contrib.mac_control import MACControlClassBasedFlowControl
from scapy.contrib.roce import BTH, CNP_OPCODE, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

ROCE_UDP_PORT = 4791  # IANA; a RoCE NIC's RDMA engine takes these frames for its own GIDs
RC_SEND_ONLY = 0x04
UD_SEND_ONLY = 0x64
# The General Services QP every RDMA port has (IBTA spec 13.5.1): the one QP that takes UD
# packets from anyone, with this Q_Key. What a test sends to make a real RDMA stack check the
# ICRC of frames it never set up a connection for.
GSI_QPN = 1
GSI_QKEY = 0x80010000
DETH = struct.Struct("!IxBH")  # Q_Key, reserved, source QP (24 bits, split 8 + 16)
ECN_NOT_ECT = 0b00
ECN_ECT1 = 0b01
ECN_ECT0 = 0b10
ECN_CE = 0b11
PFC_DESTINATION = "01:80:c2:00:00:01"  # IEEE 802.3 Annex 31B MAC Control multicast address
MAC_CONTROL_ETHERTYPE = 0x8808
PFC_OPCODE = 0x0101  # IEEE 802.1Qbb class-based flow control
ETHERNET_MIN_FRAME = 60  # without FCS

# Offsets in an untagged IPv4 RoCEv2 frame.
ETH_LEN = 14
IP_OFFSET = ETH_LEN
UDP_OFFSET = IP_OFFSET + 20
BTH_OFFSET = UDP_OFFSET + 8
PAYLOAD_OFFSET = BTH_OFFSET + 12
ICRC_LEN = 4

# Probe payload: what the receiver needs to count loss beyond PSN wrap and measure latency.
PROBE_MAGIC = b"RFA1"
PROBE_HEADER = struct.Struct("!4sIQQ")  # magic, flow id, 64-bit sequence, send time (ns)
MIN_PROBE_PAYLOAD = PROBE_HEADER.size


def _ip_header(frame: bytes) -> tuple[int, int]:
    """(header length, total length) of the IPv4 header at IP_OFFSET."""
    ihl = (frame[IP_OFFSET] & 0x0F) * 4
    total = struct.unpack_from("!H", frame, IP_OFFSET + 2)[0]
    return ihl, total


def icrc(frame: bytes) -> int:
    """ICRC of an Ethernet/IPv4/UDP/BTH frame whose last 4 bytes are the ICRC field.

    Same masking as scapy's ``BTH.compute_icrc``: IP TOS, TTL and checksum, the UDP checksum
    and the BTH reserved byte (FECN/BECN/resv6) count as all 1s, behind 8 bytes of 0xFF.
    Returned as the integer scapy stores (the wire bytes read little-endian).
    """
    ihl = (frame[IP_OFFSET] & 0x0F) * 4
    ip = frame[IP_OFFSET : IP_OFFSET + ihl]
    udp = IP_OFFSET + ihl
    masked = b"".join(
        (
            _PSEUDO_LRH,
            ip[0:1], b"\xff", ip[2:8], b"\xff", ip[9:10], b"\xff\xff", ip[12:],  # TOS TTL csum
            frame[udp : udp + 6], b"\xff\xff",  # UDP checksum
            frame[udp + 8 : udp + 12], b"\xff", frame[udp + 13 : udp + 20],  # BTH resv8a
        )
    )  # fmt: skip
    crc = zlib.crc32(masked)
    return zlib.crc32(memoryview(frame)[udp + 20 : len(frame) - ICRC_LEN], crc) & 0xFFFFFFFF


_PSEUDO_LRH = b"\xff" * 8


def pack_icrc(value: int) -> bytes:
    """Wire bytes of an ICRC value (scapy's ``BTH.pack_icrc``: little-endian on the wire)."""
    return struct.pack("<I", value & 0xFFFFFFFF)


def icrc_ok(frame: bytes) -> bool:
    return frame[-ICRC_LEN:] == pack_icrc(icrc(frame))


@dataclass(frozen=True)
class Flow:
    """One RoCEv2 flow (a QP) between two endpoints."""

    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    dscp: int = 26
    ecn: int = ECN_ECT0
    sport: int = 49152  # the entropy field ECMP hashes on
    qpn: int = 0x12
    flow_id: int = 0
    size: int = 256  # UDP payload bytes from BTH to ICRC inclusive would vary; this is BTH payload
    udp_port: int = ROCE_UDP_PORT  # destination port (agent.observe.probes.transport chooses it)
    # UD SEND ONLY with a DETH (Q_Key, source QP) instead of RC SEND ONLY: see ud_to_gsi().
    deth: tuple[int, int] | None = None

    @property
    def opcode(self) -> int:
        return RC_SEND_ONLY if self.deth is None else UD_SEND_ONLY

    def extension(self) -> bytes:
        """Transport headers between BTH and the payload (the DETH of a UD packet)."""
        if self.deth is None:
            return b""
        qkey, source_qp = self.deth
        return DETH.pack(qkey, source_qp >> 16 & 0xFF, source_qp & 0xFFFF)

    def __post_init__(self) -> None:
        if not 0 <= self.dscp <= 63:
            raise ValueError(f"dscp must be 0..63, got {self.dscp}")
        if not 0 <= self.ecn <= 3:
            raise ValueError(f"ecn must be 0..3, got {self.ecn}")
        if not 0 < self.sport <= 0xFFFF:
            raise ValueError(f"sport must be 1..65535, got {self.sport}")
        if not 0 <= self.qpn <= 0xFFFFFF:
            raise ValueError(f"qpn must be 0..0xFFFFFF, got {self.qpn}")
        if not 0 < self.udp_port <= 0xFFFF:
            raise ValueError(f"udp_port must be 1..65535, got {self.udp_port}")
        if not MIN_PROBE_PAYLOAD <= self.size <= 9000:
            raise ValueError(f"size must be {MIN_PROBE_PAYLOAD}..9000 bytes, got {self.size}")


def probe_payload(flow_id: int, seq: int, sent_ns: int, size: int) -> bytes:
    header = PROBE_HEADER.pack(PROBE_MAGIC, flow_id, seq, sent_ns)
    return header + bytes(size - len(header))


def ud_to_gsi(flow: Flow) -> Flow:
    """The same flow as UD SEND ONLY packets to the GSI QP (QP1, its Q_Key, from QP1): a real
    RDMA stack counts such a packet as received only when its ICRC is right (rxe:
    ``rxe_rcv`` checks the header, then the ICRC, then counts ``rcvd_pkts``)."""
    from dataclasses import replace

    return replace(flow, qpn=GSI_QPN, deth=(GSI_QKEY, GSI_QPN))


def roce_packet(flow: Flow, psn: int, seq: int = 0, sent_ns: int = 0) -> Packet:
    """The reference frame, built by scapy: RC SEND ONLY with ack request and our payload
    (UD SEND ONLY with the flow's DETH when it has one; scapy has no DETH layer: raw bytes,
    which its ICRC covers like any payload)."""
    return (
        Ether(src=flow.src_mac, dst=flow.dst_mac)
        / IP(src=flow.src_ip, dst=flow.dst_ip, tos=(flow.dscp << 2) | flow.ecn, id=0, flags="DF")
        / UDP(sport=flow.sport, dport=flow.udp_port, chksum=0)
        / BTH(opcode=flow.opcode, dqpn=flow.qpn, psn=psn & 0xFFFFFF, ackreq=flow.deth is None)
        / Raw(flow.extension() + probe_payload(flow.flow_id, seq, sent_ns, flow.size))
    )


class CnpMarking(TypedDict, total=False):
    """A CNP's DSCP (48) and UDP port (RoCEv2's)."""

    dscp: int
    udp_port: int


def cnp_packet(
    src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, qpn: int, **marking: Unpack[CnpMarking]
) -> Packet:
    """A congestion notification packet (BTH opcode 0x81, BECN set, 16 bytes of padding), to
    the UDP port the probe's data came on (the sender listens where it sends)."""
    dscp, udp_port = marking.get("dscp", 48), marking.get("udp_port", ROCE_UDP_PORT)
    return (
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, tos=(dscp << 2) | ECN_NOT_ECT, id=0, flags="DF")
        / UDP(sport=udp_port, dport=udp_port, chksum=0)
        / BTH(opcode=CNP_OPCODE, becn=1, dqpn=qpn & 0xFFFFFF)
        / CNPPadding()
    )


def pfc_packet(src_mac: str, quanta: Sequence[int | None]) -> Packet:
    """A PFC frame; ``quanta[p]`` is the pause time of priority p, None = class not enabled."""
    if len(quanta) != 8:
        raise ValueError(f"PFC carries 8 priorities, got {len(quanta)}")
    fields: dict[str, Any] = {}
    for priority, value in enumerate(quanta):
        if value is not None:
            if not 0 <= value <= 0xFFFF:
                raise ValueError(f"quanta must be 0..65535, got {value}")
            fields[f"c{priority}_enabled"] = 1
            fields[f"c{priority}_pause_time"] = value
    return Ether(src=src_mac, dst=PFC_DESTINATION, type=MAC_CONTROL_ETHERTYPE) / (
        MACControlClassBasedFlowControl(**fields)
    )


def pfc_frame(src_mac: str, quanta: Sequence[int | None]) -> bytes:
    """Raw PFC frame bytes, padded to the Ethernet minimum, all 8 quanta fields present."""
    return _pad(bytes(pfc_packet(src_mac, quanta)))


def _pad(frame: bytes) -> bytes:
    return frame + bytes(max(0, ETHERNET_MIN_FRAME - len(frame)))


class RoceTemplate:
    """Frames of one flow from one scapy-built template, patched in place per packet."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self._template = bytearray(bytes(roce_packet(flow, psn=0)))
        ihl, _ = _ip_header(bytes(self._template))
        if ihl != 20:
            raise ValueError("templates assume a 20-byte IPv4 header")
        # Everything before the PSN word is constant: fold it into a CRC prefix once.
        masked = bytearray(self._template)
        masked[IP_OFFSET + 1] = 0xFF
        masked[IP_OFFSET + 8] = 0xFF
        masked[IP_OFFSET + 10 : IP_OFFSET + 12] = b"\xff\xff"
        masked[UDP_OFFSET + 6 : UDP_OFFSET + 8] = b"\xff\xff"
        masked[BTH_OFFSET + 4] = 0xFF
        self._crc_prefix = zlib.crc32(b"\xff" * 8 + bytes(masked[IP_OFFSET : BTH_OFFSET + 8]))
        self._payload_offset = PAYLOAD_OFFSET + len(flow.extension())
        self._psn_word = 0x80000000 if flow.deth is None else 0  # AckReq: RC only
        self.length = len(self._template)

    def frame(self, psn: int, seq: int, sent_ns: int) -> bytes:
        """The frame for one packet: same bytes scapy would build for these fields."""
        buf = self._template
        struct.pack_into("!I", buf, BTH_OFFSET + 8, self._psn_word | (psn & 0xFFFFFF))
        PROBE_HEADER.pack_into(
            buf, self._payload_offset, PROBE_MAGIC, self.flow.flow_id, seq, sent_ns
        )
        crc = zlib.crc32(memoryview(buf)[BTH_OFFSET + 8 : self.length - ICRC_LEN], self._crc_prefix)
        struct.pack_into("<I", buf, self.length - ICRC_LEN, crc & 0xFFFFFFFF)
        return bytes(buf)


class RoceView(NamedTuple):
    """The fields a receiver needs from one RoCEv2 frame, parsed from raw bytes.

    A NamedTuple because the receiver builds one per frame: it is several times cheaper to
    create than a frozen dataclass.
    """

    src_ip: str
    dst_ip: str
    dscp: int
    ecn: int
    sport: int
    opcode: int
    becn: bool
    qpn: int
    psn: int
    ackreq: bool
    flow_id: int | None
    seq: int | None
    sent_ns: int | None
    src_mac: bytes
    icrc_valid: bool


class MalformedFrame(ValueError):
    """A frame on the probe's UDP port that is not a well-formed RoCEv2 packet."""


# Ethernet type, IPv4 without options, UDP and BTH in one unpack from byte 12: every field
# the receiver and the ICRC need, 42 bytes read by one call instead of a slice per field.
_FIXED = struct.Struct("!HBBHHHBBHQHHHHBBHII")
_FIXED_END = 12 + _FIXED.size  # == PAYLOAD_OFFSET
# The same fields with the ICRC's variant ones (TOS, TTL, IP and UDP checksums, BTH resv8a)
# set to 1s, packed back: the masked header in one call, without copying the frame.
_MASKED = struct.Struct("!BBHHHBBHQHHHHBBHII")
_LRH_CRC = zlib.crc32(_PSEUDO_LRH)
_ICRC_FIELD = struct.Struct("<I")
_SHORT_COPY = 2048  # payloads up to this are sliced (cheaper), longer ones read in place

# What the analyser needs from a RoCEv2 frame, as a plain tuple (no object per frame):
# (src and dst IPv4 as one 64-bit int, TOS, UDP source port, BTH opcode, BTH word 2 (resv8a
# and destination QP), BTH word 3 (ack request and PSN), probe flow id, probe sequence, probe
# send time, end of the UDP packet, the fixed-header unpack or None when the IP header has
# options).
RoceFields = tuple[
    int, int, int, int, int, int, int | None, int | None, int | None, int,
    tuple[int, ...] | None,
]  # fmt: skip


def parse_roce_fields(frame: bytes, udp_port: int = ROCE_UDP_PORT) -> RoceFields | None:
    """The fields of an Ethernet/IPv4/UDP frame to ``udp_port`` (RoCEv2's 4791, or the probes'
    alternate port on RDMA hosts); None if it is not RoCEv2 at all.

    Raises :class:`MalformedFrame` for frames on that port that are truncated or
    inconsistent. The ICRC is not checked: :func:`roce_icrc_ok` does it, so a caller can skip
    it for frames it will not account.
    """
    if len(frame) < _FIXED_END + ICRC_LEN:
        return _parse_general(frame, udp_port)
    header = _FIXED.unpack_from(frame, 12)
    if header[1] != 0x45 or header[0] != 0x0800 or header[7] != 17:
        return _parse_general(frame, udp_port)  # options, or not IPv4/UDP at all
    if header[11] != udp_port:
        return None
    udp_len = header[12]
    end = UDP_OFFSET + udp_len  # trailing Ethernet padding is not part of the packet
    if udp_len < 8 + 12 + ICRC_LEN or len(frame) < end:
        raise MalformedFrame(f"truncated RoCEv2 frame ({len(frame)} bytes, UDP length {udp_len})")
    flow_id = seq = sent_ns = None
    if end - ICRC_LEN - PAYLOAD_OFFSET >= PROBE_HEADER.size:
        magic, probe_flow, probe_seq, probe_sent = PROBE_HEADER.unpack_from(frame, PAYLOAD_OFFSET)
        if magic == PROBE_MAGIC:
            flow_id, seq, sent_ns = probe_flow, probe_seq, probe_sent
    return (
        header[9], header[2], header[10], header[14], header[17], header[18],
        flow_id, seq, sent_ns, end, header,
    )  # fmt: skip


def _parse_general(frame: bytes, udp_port: int = ROCE_UDP_PORT) -> RoceFields | None:
    """:func:`parse_roce_fields` for short frames and IPv4 headers with options."""
    if len(frame) < UDP_OFFSET + 8 or frame[12:14] != b"\x08\x00":
        return None
    version_ihl = frame[IP_OFFSET]
    ihl = (version_ihl & 0x0F) * 4
    if version_ihl >> 4 != 4 or frame[IP_OFFSET + 9] != 17 or ihl < 20:
        return None
    udp = IP_OFFSET + ihl
    if len(frame) < udp + 8:
        return None
    sport, dport, udp_len = struct.unpack_from("!HHH", frame, udp)
    if dport != udp_port:
        return None
    bth = udp + 8
    if udp_len < 8 + 12 + ICRC_LEN or len(frame) < udp + udp_len or len(frame) < bth + 16:
        raise MalformedFrame(f"truncated RoCEv2 frame ({len(frame)} bytes, UDP length {udp_len})")
    end = udp + udp_len
    opcode = frame[bth]
    qword, pword = struct.unpack_from("!II", frame, bth + 4)
    payload = bth + 12
    flow_id = seq = sent_ns = None
    if (
        end - ICRC_LEN - payload >= PROBE_HEADER.size
        and frame[payload : payload + 4] == PROBE_MAGIC
    ):
        _, flow_id, seq, sent_ns = PROBE_HEADER.unpack_from(frame, payload)
    addr = int.from_bytes(frame[IP_OFFSET + 12 : IP_OFFSET + 20], "big")
    return (
        addr, frame[IP_OFFSET + 1], sport, opcode, qword, pword, flow_id, seq, sent_ns, end,
        None,
    )  # fmt: skip


# What the analyser needs from a trimmed RoCEv2 frame: (source and destination IPv4 as one
# 64-bit int, TOS, BTH word 2 (destination QP), BTH word 3 (PSN), probe sequence or None).
TrimmedFields = tuple[int, int, int, int, int | None]


def parse_trimmed(frame: bytes, udp_port: int = ROCE_UDP_PORT) -> TrimmedFields | None:
    """The fields of a RoCEv2 frame a switch trimmed (packet trimming: SONiC
    doc/packet_trimming/packet-trimming-design.md, Cumulus "Packet Trimming"), None when
    ``frame`` is not one.  Trimmed: shorter than the 14 B of Ethernet plus the IPv4 total
    length says, and still holding the whole BTH (a trim size is at least 64 B).  The lab's
    switch leaves the total length as the sender wrote it (lab/vswitch/dataplane.py); a
    switch that rewrote it would make the frame look whole, with a bad ICRC."""
    if len(frame) < UDP_OFFSET + 8 or frame[12:14] != b"\x08\x00":
        return None
    version_ihl = frame[IP_OFFSET]
    ihl = (version_ihl & 0x0F) * 4
    if version_ihl >> 4 != 4 or ihl < 20 or frame[IP_OFFSET + 9] != 17:
        return None
    total = (frame[IP_OFFSET + 2] << 8) | frame[IP_OFFSET + 3]
    udp = IP_OFFSET + ihl
    bth = udp + 8
    if len(frame) >= IP_OFFSET + total or len(frame) < bth + 12:
        return None
    if (frame[udp + 2] << 8) | frame[udp + 3] != udp_port:
        return None
    qword, pword = struct.unpack_from("!II", frame, bth + 4)
    payload = bth + 12
    seq = None
    if len(frame) >= payload + PROBE_HEADER.size and frame[payload : payload + 4] == PROBE_MAGIC:
        seq = PROBE_HEADER.unpack_from(frame, payload)[2]
    addr = int.from_bytes(frame[IP_OFFSET + 12 : IP_OFFSET + 20], "big")
    return addr, frame[IP_OFFSET + 1], qword, pword, seq


def roce_icrc_ok(frame: bytes, fields: RoceFields) -> bool:
    """Whether the ICRC of a frame :func:`parse_roce_fields` accepted is right."""
    end, header = fields[9], fields[10]
    if header is None:
        return icrc_ok(frame[:end])
    (_, version_ihl, _, total, ident, fragment, _, protocol, _, addr, sport, dport, udp_len, _,
     opcode, bth_flags, pkey, qword, pword) = header  # fmt: skip
    crc = zlib.crc32(
        _MASKED.pack(
            version_ihl, 0xFF, total, ident, fragment, 0xFF, protocol, 0xFFFF, addr,
            sport, dport, udp_len, 0xFFFF, opcode, bth_flags, pkey, qword | 0xFF000000, pword,
        ),
        _LRH_CRC,
    )  # fmt: skip
    stop = end - ICRC_LEN
    if stop - PAYLOAD_OFFSET > _SHORT_COPY:
        crc = zlib.crc32(memoryview(frame)[PAYLOAD_OFFSET:stop], crc)
    else:
        crc = zlib.crc32(frame[PAYLOAD_OFFSET:stop], crc)
    return bool(_ICRC_FIELD.unpack_from(frame, stop)[0] == crc)


def roce_view(frame: bytes, fields: RoceFields, icrc_valid: bool) -> RoceView:
    """The :class:`RoceView` of a frame :func:`parse_roce_fields` accepted."""
    _, tos, sport, opcode, qword, pword, flow_id, seq, sent_ns, _, _ = fields
    addresses = frame[IP_OFFSET + 12 : IP_OFFSET + 20]
    texts = _ADDRESS_TEXT.get(addresses)
    if texts is None:
        texts = _address_texts(addresses)
    # tuple.__new__ skips the keyword handling of the generated __new__: cheaper per frame.
    return _new_view(
        RoceView,
        (
            texts[0],
            texts[1],
            tos >> 2,
            tos & 0b11,
            sport,
            opcode,
            qword & 0x40000000 != 0,
            qword & 0xFFFFFF,
            pword & 0xFFFFFF,
            pword & 0x80000000 != 0,
            flow_id,
            seq,
            sent_ns,
            bytes(frame[6:12]),
            icrc_valid,
        ),
    )


_new_view = tuple.__new__
# inet_ntoa costs more than the rest of a view, and a receiver sees few distinct address
# pairs. Bounded, because anyone can send it frames from any address.
_ADDRESS_TEXT: dict[bytes, tuple[str, str]] = {}
_ADDRESS_TEXT_MAX = 4096


def _address_texts(addresses: bytes) -> tuple[str, str]:
    """Dotted text of the source and destination in 8 bytes of an IPv4 header (inet_ntoa)."""
    if len(_ADDRESS_TEXT) >= _ADDRESS_TEXT_MAX:
        _ADDRESS_TEXT.clear()
    texts = _ADDRESS_TEXT[addresses] = (
        socket.inet_ntoa(addresses[:4]),
        socket.inet_ntoa(addresses[4:8]),
    )
    return texts


def address_texts(frame: bytes) -> tuple[str, str]:
    """(source, destination) IPv4 addresses of an Ethernet/IPv4 frame as text."""
    addresses = frame[IP_OFFSET + 12 : IP_OFFSET + 20]
    return _ADDRESS_TEXT.get(addresses) or _address_texts(addresses)


def parse_roce(
    frame: bytes, check_icrc: bool = True, udp_port: int = ROCE_UDP_PORT
) -> RoceView | None:
    """Parse an Ethernet/IPv4/UDP frame to ``udp_port``; None if it is not RoCEv2 at all.

    Raises :class:`MalformedFrame` for frames on that port that are truncated or
    inconsistent, so the caller can count them as invalid instead of crashing.
    """
    fields = parse_roce_fields(frame, udp_port)
    if fields is None:
        return None
    return roce_view(frame, fields, roce_icrc_ok(frame, fields) if check_icrc else True)


@dataclass(frozen=True)
class PfcView:
    src_mac: bytes
    enabled: int  # class-enable vector, bit p = priority p
    quanta: tuple[int, ...]  # 8 values

    def paused(self, priority: int) -> bool:
        return bool(self.enabled >> priority & 1) and self.quanta[priority] > 0


def parse_pfc(frame: bytes) -> PfcView | None:
    """Parse a PFC frame (ethertype 0x8808, opcode 0x0101); None for anything else."""
    if len(frame) < 14 + 2 + 2 + 16 or frame[12:14] != b"\x88\x08":
        return None
    opcode, enabled = struct.unpack_from("!HH", frame, 14)
    if opcode != PFC_OPCODE:
        return None
    quanta = struct.unpack_from("!8H", frame, 18)
    return PfcView(src_mac=bytes(frame[6:12]), enabled=enabled & 0xFF, quanta=quanta)

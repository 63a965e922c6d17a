"""Raw-bytes parsing and building of the few frame types the switch handles.

The hot path never builds objects per packet: offsets into the frame, ``struct`` and
incremental checksum updates (RFC 1624) only.  The module is compiled with the switch's data
plane (:mod:`lossless.compiled`): its constants are ``Final`` so that compiled callers inline
them.
"""

from __future__ import annotations

import struct
from typing import Final

ETH_HEADER_LEN: Final = 14
MIN_FRAME_LEN: Final = 60  # 64-byte minimum Ethernet frame without the 4-byte FCS
WIRE_OVERHEAD: Final = 20  # preamble + SFD (8) + inter-frame gap (12), bytes

ETHERTYPE_IPV4: Final = 0x0800
ETHERTYPE_ARP: Final = 0x0806
ETHERTYPE_MAC_CONTROL: Final = 0x8808

# IEEE 802.1Qbb clause 36 / IEEE 802.3 Annex 31D: PFC is a MAC Control frame sent to the
# reserved multicast 01-80-C2-00-00-01 with opcode 0x0101, a 2-octet class-enable vector
# (low octet: one bit per priority) and eight 2-octet pause-time fields (one per priority,
# in quanta of 512 bit times; their meaning is ``lossless.pfc``'s) -- always all eight
# (sonic-mgmt PR #7420 fixed a storm generator that only wrote seven), padded to the minimum
# frame size.
PFC_DST_MAC: Final = bytes.fromhex("0180c2000001")
MAC_CONTROL_OPCODE_PAUSE: Final = 0x0001
MAC_CONTROL_OPCODE_PFC: Final = 0x0101

IP_PROTO_ICMP: Final = 1
IP_PROTO_TCP: Final = 6
IP_PROTO_UDP: Final = 17

ECN_MASK: Final = 0x03
ECN_CE: Final = 0x03
ECN_NOT_ECT: Final = 0x00

BROADCAST_MAC: Final = b"\xff" * 6
ZERO_MAC: Final = b"\x00" * 6

_PFC_STRUCT: Final = struct.Struct("!6s6sHHH8H")
_ARP_STRUCT: Final = struct.Struct("!6s6sHHHBBH6s4s6s4s")

# What the forwarding path reads of an Ethernet/IPv4 frame, in one call instead of a dozen
# index operations: destination MAC, version/IHL, TOS, the two flags/fragment-offset bytes,
# TTL, protocol, header checksum and the destination address (bytes 0-33).
IPV4_FIELDS: Final = struct.Struct("!6s8xBB4xBBBBH4xI")
# The routed frame's new Ethernet addresses (next hop's MAC, then the egress port's).
ETH_ADDRESSES: Final = struct.Struct("!12s")


def mac_to_bytes(mac: str) -> bytes:
    """``"02:00:00:00:01:01"`` -> 6 bytes."""
    return bytes.fromhex(mac.replace(":", ""))


def mac_to_str(mac: bytes) -> str:
    """6 bytes -> ``"02:00:00:00:01:01"``."""
    return ":".join(f"{b:02x}" for b in mac)


def pad_frame(frame: bytes) -> bytes:
    """Pad a frame to the 60-byte Ethernet minimum (FCS excluded)."""
    if len(frame) >= MIN_FRAME_LEN:
        return frame
    return frame + bytes(MIN_FRAME_LEN - len(frame))


def wire_time(frame_len: int, speed_bps: float) -> float:
    """Seconds a frame occupies the wire: (len + preamble/SFD/IFG) * 8 / speed."""
    return (max(frame_len, MIN_FRAME_LEN) + WIRE_OVERHEAD) * 8 / speed_bps


def checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 Internet checksum of ``data``."""
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def checksum_update(old_checksum: int, old_word: int, new_word: int) -> int:
    """Incrementally update a checksum when one 16-bit word changes (RFC 1624, eqn. 3)."""
    total = (~old_checksum & 0xFFFF) + (~old_word & 0xFFFF) + new_word
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build_pfc(src_mac: bytes, quanta: list[int] | tuple[int, ...], class_enable: int) -> bytes:
    """A PFC frame: ``quanta[p]`` for each of the 8 priorities, ``class_enable`` bit p = valid."""
    if len(quanta) != 8:
        raise ValueError("PFC needs exactly 8 pause-time fields")
    frame = _PFC_STRUCT.pack(
        PFC_DST_MAC,
        src_mac,
        ETHERTYPE_MAC_CONTROL,
        MAC_CONTROL_OPCODE_PFC,
        class_enable & 0xFF,
        *quanta,
    )
    return pad_frame(frame)


def build_pfc_single(src_mac: bytes, priority: int, quanta: int) -> bytes:
    """PFC frame for one priority: XOFF (``quanta`` > 0) or XON (``quanta`` == 0)."""
    values = [0] * 8
    values[priority] = quanta
    return build_pfc(src_mac, values, 1 << priority)


def parse_pfc(frame: bytes | bytearray) -> tuple[int, list[int]] | None:
    """``(class_enable_vector, quanta[8])`` of a PFC frame, or None if it is not PFC."""
    if len(frame) < ETH_HEADER_LEN + 20:
        return None
    _dst, _src, ethertype, opcode, cev, *quanta = _PFC_STRUCT.unpack_from(frame)
    if ethertype != ETHERTYPE_MAC_CONTROL or opcode != MAC_CONTROL_OPCODE_PFC:
        return None
    return cev & 0xFF, list(quanta)


def build_arp(op: int, src_mac: bytes, src_ip: bytes, dst_mac: bytes, dst_ip: bytes) -> bytes:
    """ARP request (op 1, broadcast) or reply (op 2, unicast to ``dst_mac``)."""
    frame = _ARP_STRUCT.pack(
        BROADCAST_MAC if op == 1 else dst_mac,
        src_mac,
        ETHERTYPE_ARP,
        1,  # hardware type Ethernet
        ETHERTYPE_IPV4,
        6,
        4,
        op,
        src_mac,
        src_ip,
        ZERO_MAC if op == 1 else dst_mac,
        dst_ip,
    )
    return pad_frame(frame)


def parse_arp(frame: bytes | bytearray) -> tuple[int, bytes, bytes, bytes, bytes] | None:
    """``(op, sender_mac, sender_ip, target_mac, target_ip)`` of an Ethernet/IPv4 ARP."""
    if len(frame) < 42:
        return None
    (_d, _s, _t, htype, ptype, hlen, plen, op, smac, sip, tmac, tip) = _ARP_STRUCT.unpack_from(
        frame
    )
    if htype != 1 or ptype != ETHERTYPE_IPV4 or hlen != 6 or plen != 4:
        return None
    return op, smac, sip, tmac, tip


def build_icmp_echo_reply(request: bytes | bytearray, src_mac: bytes, dst_mac: bytes) -> bytes:
    """Echo reply to an IPv4 ICMP echo request frame (addresses swapped, TTL 64)."""
    ihl = (request[14] & 0x0F) * 4
    total_len = (request[16] << 8) | request[17]
    ip_header = bytearray(request[14 : 14 + ihl])
    icmp = bytearray(request[14 + ihl : 14 + total_len])
    src_ip, dst_ip = bytes(ip_header[12:16]), bytes(ip_header[16:20])
    ip_header[12:16] = dst_ip
    ip_header[16:20] = src_ip
    ip_header[8] = 64
    ip_header[10:12] = b"\x00\x00"
    struct.pack_into("!H", ip_header, 10, checksum(ip_header))
    icmp[0] = 0  # echo reply
    icmp[2:4] = b"\x00\x00"
    struct.pack_into("!H", icmp, 2, checksum(icmp))
    return pad_frame(dst_mac + src_mac + b"\x08\x00" + bytes(ip_header) + bytes(icmp))


ICMP_TIME_EXCEEDED: Final = 11
# RFC 1812 4.3.2.7: no ICMP error about an ICMP error (these types), so two routers can never
# bounce errors at each other.
ICMP_ERROR_TYPES: Final = frozenset({3, 4, 5, 11, 12})
# RFC 1812 4.3.2.3 allows quoting more than the RFC 792 minimum (IP header + 8 bytes); 64
# bytes cover the UDP header, the RoCEv2 BTH and the start of its payload.
ICMP_QUOTE_BYTES: Final = 64


def build_icmp_time_exceeded(
    original: bytes | bytearray, src_ip: bytes, src_mac: bytes, dst_mac: bytes
) -> bytes:
    """ICMP time exceeded (type 11, code 0) from ``src_ip`` to the source of ``original``
    (an Ethernet/IPv4 frame as received), quoting its IP header and 64 bytes after it."""
    ihl = (original[14] & 0x0F) * 4
    total_len = (original[16] << 8) | original[17]
    end = min(len(original), 14 + max(total_len, ihl), 14 + ihl + ICMP_QUOTE_BYTES)
    quote = bytes(original[14:end])
    icmp = bytearray(struct.pack("!BBHI", ICMP_TIME_EXCEEDED, 0, 0, 0) + quote)
    struct.pack_into("!H", icmp, 2, checksum(icmp))
    header = bytearray(
        struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,  # DSCP 0, not-ECT
            20 + len(icmp),
            0,
            0,
            64,
            IP_PROTO_ICMP,
            0,
            src_ip,
            bytes(original[26:30]),
        )
    )
    struct.pack_into("!H", header, 10, checksum(header))
    return pad_frame(dst_mac + src_mac + b"\x08\x00" + bytes(header) + bytes(icmp))


ROCE_UDP_PORT: Final = 4791
_UDP_HEADER_LEN: Final = 8
_BTH_LEN: Final = 12
_ICRC_LEN: Final = 4


def roce_flip_offset(frame: bytes | bytearray) -> int:
    """Where :func:`corrupt_roce` would flip a byte: the first byte after the BTH, or the last
    BTH byte if there is no payload; 0 if the frame is not an unfragmented IPv4/UDP frame to
    port 4791 long enough for a BTH and an ICRC."""
    if len(frame) < 34 or frame[12] != 0x08 or frame[13] != 0x00 or frame[23] != IP_PROTO_UDP:
        return 0
    if (frame[20] & 0x3F) or frame[21]:
        return 0  # a fragment: the BTH is only in the first one, leave all alone
    l4 = 14 + (frame[14] & 0x0F) * 4
    ip_end = min(len(frame), 14 + ((frame[16] << 8) | frame[17]))
    bth = l4 + _UDP_HEADER_LEN
    if ip_end < bth + _BTH_LEN + _ICRC_LEN or (frame[l4 + 2] << 8) | frame[l4 + 3] != ROCE_UDP_PORT:
        return 0
    payload = bth + _BTH_LEN
    return payload if payload < ip_end - _ICRC_LEN else payload - 1


def corrupt_roce(frame: bytearray) -> bool:
    """Flip one byte of a RoCEv2 frame's BTH payload (see :func:`roce_flip_offset`) so its
    ICRC no longer matches; the IP header is untouched and a non-zero UDP checksum is fixed
    up, so only the ICRC tells.  False (frame unchanged) if it is not RoCEv2."""
    offset = roce_flip_offset(frame)
    if not offset:
        return False
    l4 = 14 + (frame[14] & 0x0F) * 4
    word_at = offset - ((offset - l4) & 1)  # 16-bit word (from the UDP header) holding it
    old_word = (frame[word_at] << 8) | frame[word_at + 1]
    frame[offset] ^= 0xFF
    udp_csum = (frame[l4 + 6] << 8) | frame[l4 + 7]
    if udp_csum:
        new_word = (frame[word_at] << 8) | frame[word_at + 1]
        fixed = checksum_update(udp_csum, old_word, new_word) or 0xFFFF
        frame[l4 + 6] = fixed >> 8
        frame[l4 + 7] = fixed & 0xFF
    return True

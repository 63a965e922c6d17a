"""The frames the vswitch tests put on the wire and read back, built and parsed here with
``struct`` alone (independent of the switch's own packet code), and the raw sockets for them."""

from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35
PFC_DST = bytes.fromhex("0180c2000001")


def mac_bytes(mac: str) -> bytes:
    """``"02:00:..."`` -> bytes."""
    return bytes.fromhex(mac.replace(":", ""))


def inet_checksum(data: bytes) -> int:
    """RFC 1071 checksum."""
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build_udp(
    src_mac: str,
    dst_mac: str,
    src_ip: str,
    dst_ip: str,
    sport: int,
    dport: int,
    payload: bytes,
    dscp: int = 0,
    ecn: int = 0,
    ttl: int = 64,
    size: int | None = None,
) -> bytes:
    """Ethernet/IPv4/UDP frame with valid IP and UDP checksums; padded to ``size`` bytes."""
    if size is not None:
        payload = payload + bytes(max(0, size - 42 - len(payload)))
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    udp_len = 8 + len(payload)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    udp_csum = inet_checksum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", udp_csum) + udp[8:]
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, (dscp << 2) | ecn, 20 + udp_len, 0, 0x4000, ttl, 17, 0, src, dst
    )
    ip = ip[:10] + struct.pack("!H", inet_checksum(ip)) + ip[12:]
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00" + ip + udp


def build_pfc(src_mac: str, quanta: dict[int, int]) -> bytes:
    """PFC frame with the given per-priority quanta (enable bits set for those priorities)."""
    cev = 0
    times = [0] * 8
    for prio, value in quanta.items():
        cev |= 1 << prio
        times[prio] = value
    frame = PFC_DST + mac_bytes(src_mac) + struct.pack("!HHH8H", 0x8808, 0x0101, cev, *times)
    return frame + bytes(60 - len(frame))


@dataclass(frozen=True)
class Udp:
    """The fields of a captured Ethernet/IPv4/UDP frame the tests look at."""

    ts: float
    eth_dst: bytes
    eth_src: bytes
    tos: int
    ttl: int
    ip_checksum_ok: bool
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    payload: bytes

    @property
    def ecn(self) -> int:
        """ECN field (3 = CE)."""
        return self.tos & 3

    @property
    def seq(self) -> int:
        """Sequence number the test senders put in the first 4 payload bytes."""
        return int.from_bytes(self.payload[:4], "big")


def parse_udp(ts: float, frame: bytes) -> Udp | None:
    """Decode an IPv4/UDP frame, or None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    total = struct.unpack_from("!H", frame, 16)[0]
    l4 = 14 + ihl
    sport, dport, udp_len = struct.unpack_from("!HHH", frame, l4)
    return Udp(
        ts=ts,
        eth_dst=frame[0:6],
        eth_src=frame[6:12],
        tos=frame[15],
        ttl=frame[22],
        ip_checksum_ok=inet_checksum(frame[14 : 14 + ihl]) == 0,
        src_ip=socket.inet_ntoa(frame[26:30]),
        dst_ip=socket.inet_ntoa(frame[30:34]),
        sport=sport,
        dport=dport,
        payload=frame[l4 + 8 : min(l4 + udp_len, 14 + total)],
    )


def parse_pfc(frame: bytes) -> tuple[int, list[int]] | None:
    """``(class_enable_vector, quanta[8])`` of a PFC frame, or None."""
    if len(frame) < 34 or frame[0:6] != PFC_DST or frame[12:16] != b"\x88\x08\x01\x01":
        return None
    cev, *quanta = struct.unpack_from("!H8H", frame, 16)
    return cev, list(quanta)


def open_packet_socket(ifname: str, rcvbuf: int = 16 << 20) -> socket.socket:
    """Raw socket on ``ifname`` in the *current* netns, kernel rx timestamps, no own echo."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((ifname, ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return sock


def recv_timestamped(sock: socket.socket, timeout: float) -> tuple[float, bytes] | None:
    """One frame and its kernel receive time (CLOCK_REALTIME), or None on timeout."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        return None
    data, ancdata, _flags, _addr = sock.recvmsg(65536, 64)
    ts = time.time()
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", payload[:16])
            ts = sec + nsec / 1e9
    return ts, data

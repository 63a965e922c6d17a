"""AF_PACKET sockets with a kernel BPF filter and a receive buffer large enough for bursts.

The filter runs in the kernel, so a receiver on a busy host only wakes up for RoCEv2 (UDP
4791, or the probes' alternate port) and MAC Control (PFC, ethertype 0x8808) frames. scapy's
default 64 KiB socket buffer lost 176 of 500 frames of a burst on this kind of machine
(LAB-NOTES); 4 MiB lost none.
"""

from __future__ import annotations

import ctypes
import socket

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # linux/if_packet.h; Python's socket module has no name for it
SO_ATTACH_FILTER = 26  # asm-generic/socket.h
RECEIVE_BUFFER = 1 << 22

# Classic BPF opcodes (linux/filter.h): class | size | mode.
BPF_LD_H_ABS = 0x28
BPF_LD_B_ABS = 0x30
BPF_LD_H_IND = 0x48
BPF_LDX_B_MSH = 0xB1  # X = 4 * (pkt[k] & 0x0f): the IPv4 header length
BPF_JEQ_K = 0x15
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
ACCEPT = 0x40000
REJECT = 0

Instruction = tuple[int, int, int, int]

ROCE_UDP_PORT = (
    4791  # also agent.observe.probes.packets.ROCE_UDP_PORT; this module imports no scapy
)


def roce_or_pfc_filter(udp_port: int = ROCE_UDP_PORT) -> tuple[Instruction, ...]:
    """ "ether proto 0x8808 or (ip and udp dst port PORT)", the program tcpdump -dd compiles for
    that expression, minus its IPv6 branch: RoCEv2 over IPv4 is what the fabric carries.
    PORT is 4791, or the probes' alternate port on hosts whose NIC would take 4791."""
    if not 0 < udp_port <= 0xFFFF:
        raise ValueError(f"udp_port must be 1..65535, got {udp_port}")
    return (
        (BPF_LD_H_ABS, 0, 0, 12),  # 0: A = ethertype
        (BPF_JEQ_K, 8, 0, 0x8808),  # 1: MAC Control → accept (10)
        (BPF_JEQ_K, 0, 8, 0x0800),  # 2: not IPv4 → reject (11)
        (BPF_LD_B_ABS, 0, 0, 23),  # 3: A = IP protocol
        (BPF_JEQ_K, 0, 6, 17),  # 4: not UDP → reject
        (BPF_LD_H_ABS, 0, 0, 20),  # 5: A = flags + fragment offset
        (BPF_JSET_K, 4, 0, 0x1FFF),  # 6: a non-first fragment has no UDP header → reject
        (BPF_LDX_B_MSH, 0, 0, 14),  # 7: X = IP header length
        (BPF_LD_H_IND, 0, 0, 16),  # 8: A = UDP destination port (14 + X + 2)
        (BPF_JEQ_K, 0, 1, udp_port),  # 9: the probe's port → accept, else reject
        (BPF_RET_K, 0, 0, ACCEPT),  # 10
        (BPF_RET_K, 0, 0, REJECT),  # 11
    )


ROCE_OR_PFC_FILTER = roce_or_pfc_filter()

# Send-only sockets (storm injector) accept nothing, so their buffer never fills.
REJECT_ALL_FILTER: tuple[Instruction, ...] = ((BPF_RET_K, 0, 0, REJECT),)


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


def attach_filter(sock: socket.socket, program: tuple[Instruction, ...]) -> None:
    """Attach a classic BPF program (``setsockopt(SO_ATTACH_FILTER)`` with a sock_fprog)."""
    instructions = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    fprog = _SockFprog(len(program), instructions)
    # sock_fprog holds a pointer, so it is passed as its raw bytes (len, padding, pointer).
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, bytes(fprog))


def open_port(
    ifname: str,
    *,
    bpf: tuple[Instruction, ...] | None = ROCE_OR_PFC_FILTER,
    ignore_outgoing: bool = True,
    blocking: bool = False,
) -> socket.socket:
    """An AF_PACKET socket bound to ``ifname`` for sending and (filtered) receiving."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        if ignore_outgoing:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        if bpf is not None:
            attach_filter(sock, bpf)
        sock.bind((ifname, 0))
        # Frames that arrived between socket() and the filter are unfiltered: drop them.
        sock.setblocking(False)
        while True:
            try:
                sock.recv(65536)
            except BlockingIOError:
                break
        sock.setblocking(blocking)
    except OSError:
        sock.close()
        raise
    return sock


def interface_mac(ifname: str) -> str:
    """The MAC address of a local interface (sysfs)."""
    with open(f"/sys/class/net/{ifname}/address", encoding="ascii") as handle:
        return handle.read().strip()


def mac_bytes(mac: str) -> bytes:
    return bytes(int(part, 16) for part in mac.split(":"))


def mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)

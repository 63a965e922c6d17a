"""AF_PACKET port sockets (one per switch port), and what the kernel says of a port: its
dropped frames and whether its link is up."""

from __future__ import annotations

import fcntl
import socket
import struct

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
# Not exported by Python's socket module; without it a raw-socket forwarder receives a copy
# of every frame it transmits.
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32

PACKET_STATISTICS = 6
_TPACKET_STATS = struct.Struct("II")  # struct tpacket_stats {tp_packets, tp_drops}

DEFAULT_BUFFER_BYTES = 4 << 20

_SIOCGIFFLAGS = 0x8913
_IFF_UP = 0x1
_IFF_RUNNING = 0x40  # RFC 2863 operational state "up" (carrier and not dormant)


class PortSocketError(OSError):
    """A port's interface cannot be opened."""


def open_port_socket(ifname: str, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> socket.socket:
    """Non-blocking raw socket bound to ``ifname`` (all ethertypes, promiscuous, no echo).

    The large receive buffer absorbs bursts while the single-threaded loop is busy
    elsewhere (the 64 KiB default lost a third of a 500-frame burst in the prototype).
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.bind((ifname, ETH_P_ALL))
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        for force, plain in (
            (SO_RCVBUFFORCE, socket.SO_RCVBUF),
            (SO_SNDBUFFORCE, socket.SO_SNDBUF),
        ):
            try:  # the FORCE variants (root) ignore net.core.[rw]mem_max
                sock.setsockopt(socket.SOL_SOCKET, force, buffer_bytes)
            except PermissionError:
                sock.setsockopt(socket.SOL_SOCKET, plain, buffer_bytes)
        # Frames to the configured port MAC must arrive even if the kernel interface has a
        # different address.
        ifindex = socket.if_nametoindex(ifname)
        mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
        sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise PortSocketError(exc.errno, f"port {ifname}: {exc.strerror}") from None
    return sock


def take_kernel_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped because the socket's receive buffer was full, since the
    previous call (PACKET_STATISTICS resets on read).  Non-zero means the switch fell behind
    real time on this port."""
    try:
        raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
    except OSError:
        return 0
    _packets, drops = _TPACKET_STATS.unpack(raw)
    return int(drops)


def interface_running(ifname: str, fd: int) -> bool:
    """Administratively up and running (carrier), asked of the kernel with SIOCGIFFLAGS on the
    port's own socket ``fd`` -- the switch's network namespace, whatever /sys is mounted."""
    request = struct.pack("16sH14x", ifname.encode(), 0)
    try:
        reply = fcntl.ioctl(fd, _SIOCGIFFLAGS, request)
    except OSError:
        return False  # the interface is gone (ENODEV): no link
    flags: int = struct.unpack_from("16sH", reply)[1]
    return bool(flags & _IFF_UP and flags & _IFF_RUNNING)

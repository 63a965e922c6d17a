"""Receive timestamps as close to the NIC as the host offers, and how long the host held a probe.

A probe's one-way latency is its receive time minus the send time its sender wrote into it.
Taken in user space (``time.time_ns()`` when the probe process reads the frame), the receive
time includes every moment the receiving process was not running: a descheduled, stopped or
overloaded host looks exactly like a slow link. The kernel can stamp each frame where it
enters the host instead (Documentation/networking/timestamping.rst, "SO_TIMESTAMPING"):

* ``SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE``: the NIC stamps the frame
  in its PHC clock (only where the driver has hardware RX stamping switched on:
  ``SIOCSHWTSTAMP``; the probes never reconfigure a NIC, ptp4l may own that setting);
* ``SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE``: the kernel stamps it when
  the driver hands it to the stack (``netif_receive_skb``), before any process runs;
* neither: user space, as before.

Each frame's stamps arrive as ``SCM_TIMESTAMPING`` ancillary data of ``recvmsg``: three
``struct timespec`` (``ts[0]`` software, ``ts[1]`` unused, ``ts[2]`` raw hardware). The
receiver asks for all it may get and takes, per frame, the closest to the NIC that is there.
A hardware stamp is in the NIC's own clock; it is used only when that clock agrees with the
system clock the sender stamped with (phc2sys keeps them together; a PHC left in TAI is 37 s
off), otherwise the software stamp is.

The difference between the user-space and the kernel receive time is the host's own delay:
R-Pingmesh (Liu et al., SIGCOMM 2024, §4.2) separates it from the network's RTT with NIC
timestamps the same way, so a slow host is not blamed on its access link.

The sender side stays in user space: the send time must be written into the frame before
the kernel sends it, and reading back ``SOF_TIMESTAMPING_TX_SOFTWARE`` from the error queue
would need a second, per-frame message to the receiver. A stalled sender stamps the frame
when it runs again, so its stall shows as a gap in sending, not as latency.
"""

from __future__ import annotations

import socket
import struct
import time
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

TimestampSource = Literal["hardware", "software", "user"]
SOURCES: tuple[TimestampSource, ...] = ("hardware", "software", "user")

# linux/net_tstamp.h, asm-generic/socket.h (Python's socket module names none of them).
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
SCM_TIMESTAMPING = SO_TIMESTAMPING
SOF_TIMESTAMPING_RX_HARDWARE = 1 << 2
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_RAW_HARDWARE = 1 << 6
HARDWARE_FLAGS = SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE
SOFTWARE_FLAGS = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE

# struct scm_timestamping: struct timespec ts[3] (two native longs each: 64-bit Linux).
_TIMESPEC = struct.Struct("@qq")
SCM_TIMESTAMPING_SIZE = 3 * _TIMESPEC.size
ANCILLARY_SPACE = socket.CMSG_SPACE(SCM_TIMESTAMPING_SIZE)

# A hardware stamp further than this from the time the frame was read is in another clock
# (an unsynchronised PHC), not a delay: the software stamp is used instead.
MAX_CLOCK_DISAGREEMENT_NS = 1_000_000_000

# Host delay histogram: upper bounds in seconds (a stalled host holds frames for tens of ms).
HOST_DELAY_BUCKETS_S = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
HOST_DELAY_QUANTILE = 0.9


def enable_rx_timestamps(sock: Any) -> TimestampSource:
    """Ask the kernel to stamp received frames, the closest to the NIC first; what was
    granted ("user" when neither: the caller stamps in user space). Hardware granted on the
    socket still needs the NIC's RX stamping on: frames say per frame what they carry."""
    for flags, source in (
        (HARDWARE_FLAGS | SOFTWARE_FLAGS, "hardware"),
        (SOFTWARE_FLAGS, "software"),
    ):
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
        except OSError:
            continue
        return source  # type: ignore[return-value]
    return "user"


def kernel_stamp(
    ancillary: Iterable[tuple[int, int, bytes]], user_ns: int
) -> tuple[int | None, TimestampSource]:
    """The receive time the kernel gave one frame (ns since the epoch) and where it was
    taken; (None, "user") when it gave none."""
    for level, kind, data in ancillary:
        if level != socket.SOL_SOCKET or kind != SCM_TIMESTAMPING:
            continue
        if len(data) < SCM_TIMESTAMPING_SIZE:
            continue
        software = _ns(data, 0)
        hardware = _ns(data, 2)
        if hardware and abs(user_ns - hardware) <= MAX_CLOCK_DISAGREEMENT_NS:
            return hardware, "hardware"
        if software:
            return software, "software"
    return None, "user"


def _ns(data: bytes, index: int) -> int:
    seconds, nanoseconds = _TIMESPEC.unpack_from(data, index * _TIMESPEC.size)
    return int(seconds) * 1_000_000_000 + int(nanoseconds)


def receive(sock: socket.socket) -> tuple[bytes, int, int | None, TimestampSource]:
    """One frame with its user-space receive time and the kernel's (None: none given)."""
    frame, ancillary, _, _ = sock.recvmsg(65536, ANCILLARY_SPACE)
    user_ns = time.time_ns()
    kernel_ns, source = kernel_stamp(ancillary, user_ns)
    return frame, user_ns, kernel_ns, source


def weakest(sources: Iterable[str]) -> TimestampSource:
    """The source furthest from the NIC among ``sources`` (a row is as good as its worst
    frame); "user" for none."""
    seen = set(sources)
    return next((s for s in reversed(SOURCES) if s in seen), "user")


@dataclass(slots=True)
class HostDelay:
    """Per flow: how long the receiving host held its frames (user-space read time minus
    the kernel's receive stamp), and its kernel-stamped one-way latency."""

    count: int = 0
    max_s: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(HOST_DELAY_BUCKETS_S) + 1))
    sources: dict[str, int] = field(default_factory=dict)
    kernel_count: int = 0
    kernel_latency_min_s: float | None = None
    kernel_latency_sum_s: float = 0.0

    def observe(
        self, user_ns: int, kernel_ns: int | None, source: TimestampSource, sent_ns: int
    ) -> None:
        self.sources[source] = self.sources.get(source, 0) + 1
        if kernel_ns is None:
            return
        held = max(0, user_ns - kernel_ns) / 1e9
        self.count += 1
        self.max_s = max(self.max_s, held)
        self.buckets[_bucket(held)] += 1
        if sent_ns:
            latency = max(0, kernel_ns - sent_ns) / 1e9
            self.kernel_count += 1
            self.kernel_latency_sum_s += latency
            if self.kernel_latency_min_s is None or latency < self.kernel_latency_min_s:
                self.kernel_latency_min_s = latency

    def quantile_s(self, q: float = HOST_DELAY_QUANTILE) -> float | None:
        """The upper bound of the bucket holding the ``q`` quantile (None: no samples)."""
        if not self.count:
            return None
        wanted = q * self.count
        seen = 0
        for index, n in enumerate(self.buckets):
            seen += n
            if seen >= wanted:
                return HOST_DELAY_BUCKETS_S[index] if index < len(HOST_DELAY_BUCKETS_S) else None
        return None

    @property
    def source(self) -> TimestampSource:
        return weakest(self.sources)

    def as_dict(self) -> dict[str, Any]:
        p90 = self.quantile_s()
        if p90 is None and self.count:
            p90 = self.max_s  # beyond the last bucket
        return {
            "timestamp_source": self.source,
            "timestamps": dict(sorted(self.sources.items())),
            "kernel_latency": {
                "count": self.kernel_count,
                "min_s": self.kernel_latency_min_s,
                "avg_s": (
                    self.kernel_latency_sum_s / self.kernel_count if self.kernel_count else None
                ),
            },
            "host_delay": {
                "count": self.count,
                "p90_s": p90,
                "max_s": self.max_s if self.count else None,
            },
        }


def _bucket(seconds: float) -> int:
    """The first bucket whose upper bound is at least ``seconds`` (the last: beyond all)."""
    return bisect_left(HOST_DELAY_BUCKETS_S, seconds)

"""Byte-accounted egress queues and the per-port scheduler (strict priority + DWRR / ETS)."""

from __future__ import annotations

from collections import deque

from lab.vswitch.config import NUM_CLASSES, PortQosConfig

# Bytes of credit per unit of weight: the smallest weight still gets one full-size frame per
# round, so one pick never loops more than two rounds.
_QUANTUM_BYTES = 1600


# A frame waiting in an egress queue and who it is charged to on ingress:
# (frame, ingress port index, ingress priority).  A plain tuple: one is built per packet.
QueuedPacket = tuple[bytearray, int, int]


class EgressQueue:
    """One egress queue: FIFO of frames, its depth in bytes and its counters."""

    __slots__ = (
        "depth_bytes",
        "ecn_marked",
        "packets",
        "tail_drops",
        "tx_bytes",
        "tx_packets",
        "watermark_bytes",
    )

    def __init__(self) -> None:
        self.packets: deque[QueuedPacket] = deque()
        self.depth_bytes = 0
        self.watermark_bytes = 0
        self.tx_packets = 0
        self.tx_bytes = 0
        self.tail_drops = 0
        self.ecn_marked = 0

    def push(self, packet: QueuedPacket) -> None:
        """Append and account (depth, watermark)."""
        self.packets.append(packet)
        self.depth_bytes += len(packet[0])
        if self.depth_bytes > self.watermark_bytes:
            self.watermark_bytes = self.depth_bytes

    def pop(self) -> QueuedPacket:
        """Remove the head packet and release its bytes."""
        packet = self.packets.popleft()
        self.depth_bytes -= len(packet[0])
        return packet

    def clear_counters(self) -> None:
        """Zero the cumulative counters (not the depth)."""
        self.tx_packets = self.tx_bytes = self.tail_drops = self.ecn_marked = 0


def scheduler_weights(qos: PortQosConfig) -> tuple[list[bool], list[int]]:
    """``(strict[8], weight[8])`` of a port.

    Queues with ``bandwidth_percent`` use it; other non-strict queues share what is left of
    100 % equally (at least 1 each), so a port without configuration is plain equal DWRR.
    """
    strict = [False] * NUM_CLASSES
    weights = [0] * NUM_CLASSES
    unset: list[int] = []
    for tc in range(NUM_CLASSES):
        cfg = qos.queues.get(tc)
        if cfg is not None and cfg.strict:
            strict[tc] = True
        elif cfg is not None and cfg.bandwidth_percent is not None:
            weights[tc] = cfg.bandwidth_percent
        else:
            unset.append(tc)
    if unset:
        configured = sum(weights)
        share = max(1, (100 - configured) // len(unset))
        for tc in unset:
            weights[tc] = share
    return strict, weights


class Scheduler:
    """Strict-priority queues first (highest number first), then deficit weighted round robin.

    ``pick`` takes the queues and a per-queue "may transmit now" mask (non-empty and not
    paused) and returns the queue to transmit from next, charging DWRR credit.
    """

    __slots__ = ("_current", "_deficit", "_granted", "_quantum", "_strict_order", "_wrr_order")

    def __init__(self, strict: list[bool], weights: list[int]) -> None:
        self._strict_order = [tc for tc in reversed(range(NUM_CLASSES)) if strict[tc]]
        self._wrr_order = [tc for tc in range(NUM_CLASSES) if not strict[tc]]
        lightest = min((weights[tc] for tc in self._wrr_order), default=1) or 1
        self._quantum = [_QUANTUM_BYTES * w // lightest for w in weights]
        self._deficit = [0] * NUM_CLASSES
        self._current = 0
        self._granted = False

    def pick(self, queues: list[EgressQueue], eligible: list[bool]) -> int | None:
        """Queue to serve next, or None if no queue is eligible."""
        for tc in self._strict_order:
            if eligible[tc]:
                return tc
        order = self._wrr_order
        ready = [tc for tc in order if eligible[tc]]
        if not ready:
            return None
        deficit = self._deficit
        if len(ready) == 1:
            # Only one backlogged queue: DWRR would serve it and reset idle credit anyway.
            tc = ready[0]
            for other in order:
                deficit[other] = 0
            self._current = order.index(tc)
            self._granted = False
            return tc
        # Each visit adds >= one 1600-byte frame of credit, so a handful of passes over the
        # ring always finds a packet (more for jumbo frames).
        for _ in range(len(order) * 48):
            tc = order[self._current]
            if not eligible[tc]:
                deficit[tc] = 0  # an idle (or paused) queue does not hoard credit
                self._advance()
                continue
            if not self._granted:
                deficit[tc] += self._quantum[tc]
                self._granted = True
            head_len = len(queues[tc].packets[0][0])
            if deficit[tc] >= head_len:
                deficit[tc] -= head_len
                return tc
            self._advance()
        return None  # pragma: no cover - frames are < 48 quanta

    def _advance(self) -> None:
        self._current = (self._current + 1) % len(self._wrr_order)
        self._granted = False

"""Byte-accounted egress queues and the per-port scheduler: strict priority, then ETS.

IEEE 802.1Qaz ETS has two kinds of traffic class: strict-priority ones, served first, and
bandwidth-allocated ones that share what strict traffic leaves by their configured
percentages, an idle class's share going to the others; the standard leaves the sharing
algorithm open and names weighted round robin, and implementations commonly use deficit
round robin (Dell FTOS DCB guide, "Enhanced Transmission Selection": "Bandwidth allocated by
the ETS algorithm is made available after strict-priority groups are serviced. If a priority
group does not use its allocated bandwidth, the unused bandwidth is made available to other
priority groups"; Microchip LAN969x "Enhanced Transmission Selection (ETS)").  Here: strict
queues first, the highest-numbered first (IEEE 802.1Q strict priority), then deficit weighted
round robin (Shreedhar & Varghese, SIGCOMM 1995) with a quantum per queue
proportional to ``bandwidth_percent``; queues without a percentage share what is left of
100 % equally (at least 1 each), so a port without configuration is plain equal DWRR.  A
paused or empty queue is skipped and keeps no credit (no burst after a pause).

:func:`enqueue` is a frame's way in: admission (headroom for lossless priorities, tail drop
for lossy ones), WRED/ECN marking, queueing and the ingress charge that may make an XOFF due.

Packet trimming (lossy RoCE; SONiC doc/packet_trimming/packet-trimming-design.md, SAI
``SAI_BUFFER_PROFILE_PACKET_ADMISSION_FAIL_ACTION_DROP_AND_TRIM``; Cumulus Linux "Packet
Trimming"): a lossy queue whose ``trim_bytes`` is set does not tail-drop a frame that fails
admission; :func:`enqueue` answers :data:`TRIMMED` and the owner cuts the frame to
:func:`trimmed_length`, re-marks its DSCP and offers it to the trimmed packets' queue with
:func:`admit_trimmed`, where it may still be dropped (SAI's ``DROPPED_TRIM_PACKETS``).  The
queue that trimmed counts ``trimmed`` (SAI ``TRIM_PACKETS``: sent and dropped) and
``trim_dropped``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any, Final, Generic, TypeVar

from lossless.config import NUM_CLASSES, PortQosConfig
from lossless.pfc import IngressAccounting, ReceivedPause
from lossless.wred import EcnMarker

# Bytes of credit per unit of weight: the smallest weight still gets one full-size frame per
# round, so one pick never loops more than two rounds.
_QUANTUM_BYTES: Final = 1600

FrameT = TypeVar("FrameT", bound=Sized)
ItemT = TypeVar("ItemT")


class Fifo(Generic[ItemT]):
    """First in, first out, on two lists: items arrive on ``_tail``; ``_head`` holds the oldest
    ones in reverse, refilled from ``_tail`` (reversed in place) when it runs out, so both ends
    are a list's append and pop from its end -- native operations compiled, where a
    :class:`collections.deque`'s are generic method calls by name (one per frame each way on
    the twin's and the lab switch's hot paths).  Every item is moved once: amortised O(1).
    ``count`` is how many it holds (``len()`` too).
    """

    __slots__ = ("_head", "_tail", "count")

    def __init__(self) -> None:
        self._head: list[ItemT] = []
        self._tail: list[ItemT] = []
        self.count = 0

    def append(self, item: ItemT) -> None:
        self._tail.append(item)
        self.count += 1

    def popleft(self) -> ItemT:
        """The oldest item, out (IndexError when empty, as a deque's)."""
        head = self._head
        if not head:
            head = self._tail
            head.reverse()
            self._head = head
            self._tail = []
        item = head.pop()
        self.count -= 1
        return item

    def first(self) -> ItemT:
        """The oldest item, left in (IndexError when empty)."""
        return self._head[-1] if self._head else self._tail[0]

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[ItemT]:
        """Every item, oldest first (over a copy)."""
        return iter(self._head[::-1] + self._tail)


# A frame waiting in an egress queue and who it is charged to on ingress:
# (frame, ingress port index, ingress priority).  A plain tuple: one is built per packet.
QueuedPacket = tuple[FrameT, int, int]


class EgressQueue(Generic[FrameT]):
    """One egress queue: FIFO of frames (anything with a length in bytes), depth, counters."""

    __slots__ = (
        "depth_bytes",
        "ecn_marked",
        "packets",
        "tail_drops",
        "trim_bytes",
        "trim_dropped",
        "trimmed",
        "tx_bytes",
        "tx_packets",
        "watermark_bytes",
    )

    def __init__(self, trim_bytes: int = 0) -> None:
        self.packets: Fifo[QueuedPacket[FrameT]] = Fifo()
        self.depth_bytes = 0
        self.watermark_bytes = 0
        self.tx_packets = 0
        self.tx_bytes = 0
        self.tail_drops = 0
        self.ecn_marked = 0
        # Over its limit a frame is trimmed to this size (0: tail-dropped); set by the owner
        # from PortQosConfig.trim_sizes().
        self.trim_bytes = trim_bytes
        self.trimmed = 0
        self.trim_dropped = 0

    def push(self, packet: QueuedPacket[FrameT]) -> None:
        """Append and account (depth, watermark)."""
        self.packets.append(packet)
        depth = self.depth_bytes + len(packet[0])
        self.depth_bytes = depth
        if depth > self.watermark_bytes:
            self.watermark_bytes = depth

    def pop(self) -> QueuedPacket[FrameT]:
        """Remove the head packet and release its bytes."""
        packet = self.packets.popleft()
        self.depth_bytes -= len(packet[0])
        return packet

    def clear_counters(self) -> None:
        """Zero the cumulative counters (not the depth)."""
        self.tx_packets = self.tx_bytes = self.tail_drops = self.ecn_marked = 0
        self.trimmed = self.trim_dropped = 0


# What :func:`enqueue` did with a frame (bits; 0 = dropped).
QUEUED: Final = 1
MARKED: Final = 2  # the owner sets CE in the frame (the queue already counted it)
XOFF_DUE: Final = 4  # the owner sends an XOFF for the frame's priority out of its ingress port
TRIMMED: Final = 8  # not queued: the owner trims the frame and offers it to admit_trimmed


def enqueue(  # noqa: PLR0913 -- once a frame (lab switch, twin): a parameter object would be an allocation a frame (measured with mypyc: 17 -> 60 ns a call)
    queue: EgressQueue[FrameT],
    ingress: IngressAccounting,
    marker: EcnMarker | None,
    packet: QueuedPacket[FrameT],
    length: int,
    ecn_capable: bool,
    limit_bytes: int,
) -> int:
    """Admit, mark and account one frame of priority ``packet[2]`` arriving on ``ingress``.

    Admission: a lossless priority is refused only beyond ``xoff + headroom`` of its ingress
    (a headroom drop, :mod:`lossless.pfc`), a lossy one beyond the egress queue's
    ``limit_bytes`` (a tail drop).  Marking (:mod:`lossless.wred`) is drawn for ECN-capable
    frames from the depth the frame finds (a marker that decides at dequeue is asked by
    :func:`mark_on_dequeue` instead).  Then the frame is queued and charged to its ingress,
    which may make an XOFF due.  One call per frame: this is the switch's hot path.
    """
    tc = packet[2]
    if ingress.lossless[tc]:
        if ingress.buffered_bytes[tc] + length > ingress.headroom_limit:
            ingress.headroom_drops[tc] += 1
            return 0
    elif queue.depth_bytes + length > limit_bytes:
        if queue.trim_bytes:
            queue.trimmed += 1
            return TRIMMED
        queue.tail_drops += 1
        return 0
    status = QUEUED
    if (
        marker is not None
        and ecn_capable
        and not marker.at_dequeue
        and marker.should_mark(queue.depth_bytes)
    ):
        queue.ecn_marked += 1
        status |= MARKED
    queue.push(packet)
    if ingress.charge(tc, length):
        status |= XOFF_DUE
    return status


def trimmed_length(length: int, trim_bytes: int) -> int:
    """A trimmed frame's length: cut to ``trim_bytes``; a frame not longer is sent whole (the
    SONiC design's note on ``size``)."""
    return length if length <= trim_bytes else trim_bytes


def admit_trimmed(  # noqa: PLR0913 -- once per trimmed frame, as enqueue (no parameter object)
    trimmed_from: EgressQueue[Any],
    trim_queue: EgressQueue[FrameT],
    ingress: IngressAccounting,
    packet: QueuedPacket[FrameT],
    length: int,
    limit_bytes: int,
) -> int:
    """A frame :func:`enqueue` answered :data:`TRIMMED` for, cut to ``length`` and carrying
    the trim queue's priority in ``packet[2]``, into ``trim_queue``: tail-dropped beyond
    ``limit_bytes`` (counted as ``trim_dropped`` of the queue it was trimmed from, and as a
    tail drop of the trim queue), never ECN-marked (it already tells of congestion), charged
    to its ingress.  :data:`QUEUED`, or 0 when dropped."""
    status = enqueue(trim_queue, ingress, None, packet, length, False, limit_bytes)
    if not status:
        trimmed_from.trim_dropped += 1
    return status


def mark_on_dequeue(queue: EgressQueue[Any], marker: EcnMarker) -> bool:
    """A marker that decides at dequeue (``marker.at_dequeue``): after an ECN-capable frame
    left ``queue`` (:meth:`EgressQueue.pop`), is it marked CE?  Drawn from the depth it left
    behind, as the outside simulators do (:mod:`lossless.wred`); counted in the queue."""
    if not marker.should_mark(queue.depth_bytes):
        return False
    queue.ecn_marked += 1
    return True


def eligible_classes(
    queues: list[EgressQueue[Any]], pause: ReceivedPause, override: list[bool], now: float
) -> list[bool]:
    """Per class: may transmit now -- something queued, and not paused (or the watchdog
    overrides the pause).  The scheduler's input."""
    eligible = [False] * NUM_CLASSES
    fill_eligible(eligible, queues, pause, override, now)
    return eligible


def fill_eligible(
    eligible: list[bool],
    queues: list[EgressQueue[Any]],
    pause: ReceivedPause,
    override: list[bool],
    now: float,
) -> None:
    """:func:`eligible_classes` into a list the caller keeps (one per port, no allocation per
    frame on the twin's hot path)."""
    until = pause.paused_until
    for tc in range(NUM_CLASSES):
        # depth_bytes, not the deque's truth: an int compare where the deque is a generic
        # call (compiled); every frame has bytes, so both say "something queued".
        eligible[tc] = queues[tc].depth_bytes > 0 and (until[tc] <= now or override[tc])


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

    __slots__ = (
        "_credit",
        "_current",
        "_deficit",
        "_granted",
        "_position",
        "_quantum",
        "_strict_order",
        "_wrr_order",
    )

    def __init__(self, strict: list[bool], weights: list[int]) -> None:
        self._strict_order = [tc for tc in reversed(range(NUM_CLASSES)) if strict[tc]]
        self._wrr_order = [tc for tc in range(NUM_CLASSES) if not strict[tc]]
        # Each class's place in the round (-1 for a strict one).
        self._position = [-1] * NUM_CLASSES
        for place, tc in enumerate(self._wrr_order):
            self._position[tc] = place
        lightest = min((weights[tc] for tc in self._wrr_order), default=1) or 1
        self._quantum = [_QUANTUM_BYTES * w // lightest for w in weights]
        self._deficit = [0] * NUM_CLASSES
        self._credit = False  # some deficit may be above 0 (only the round grants credit)
        self._current = 0
        self._granted = False

    def pick(self, queues: list[EgressQueue[Any]], eligible: list[bool]) -> int | None:
        """Queue to serve next, or None if no queue is eligible."""
        for tc in self._strict_order:
            if eligible[tc]:
                return tc
        order = self._wrr_order
        ready = 0
        only = -1
        for tc in order:
            if eligible[tc]:
                ready += 1
                only = tc
        if not ready:
            return None
        deficit = self._deficit
        if ready == 1:
            # Only one backlogged queue: DWRR would serve it and reset idle credit anyway.
            if self._credit:
                for other in order:
                    deficit[other] = 0
                self._credit = False
            self._current = self._position[only]
            self._granted = False
            return only
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
                self._credit = True
            head_len = len(queues[tc].packets.first()[0])
            if deficit[tc] >= head_len:
                deficit[tc] -= head_len
                return tc
            self._advance()
        return None  # pragma: no cover - frames are < 48 quanta

    def _advance(self) -> None:
        self._current = (self._current + 1) % len(self._wrr_order)
        self._granted = False

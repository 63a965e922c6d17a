"""The twin's flows: a RoCE QP (:class:`Flow`, both of its ends), what a run is asked to
simulate (:class:`FlowSpec`), and a NIC's heap of flows by their next send time.

A flow's sender side (PSNs sent, acknowledged, asked again) and its responder side (the
expected PSN, what it delivered in order) are kept on the flow; what happens to them per
frame is the engine's (:mod:`agent.twin.engine`).  Compiled with the engine
(:mod:`lossless.compiled`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Final

from mypy_extensions import i64

from agent.twin.network import flow_hash
from lossless.clock import to_ticks
from lossless.dcqcn import DcqcnReactionPoint
from lossless.queues import Fifo

NEVER: Final = 1 << 61  # a tick no run reaches (a flow without a stop time); a short int, compiled


def _earlier(a: Flow, b: Flow) -> bool:
    return a.next_at < b.next_at or (a.next_at == b.next_at and a.index < b.index)


def flows_push(flows: list[Flow], flow: Flow) -> None:
    """Onto a NIC's heap of flows, ordered by ``(next_at, index)``: the flow due first (the
    lower index first at the same tick) is ``flows[0]``.  The key lives on the flow, so
    re-timing the head costs no allocation (:func:`flows_sift_head`)."""
    flows.append(flow)
    index: i64 = len(flows) - 1
    while index:
        parent: i64 = (index - 1) >> 1
        above = flows[parent]
        if not _earlier(flow, above):
            break
        flows[index] = above
        index = parent
    flows[index] = flow


def flows_sift_head(flows: list[Flow]) -> None:
    """The head's ``next_at`` changed: restore the heap order (most NICs send one flow)."""
    size: i64 = len(flows)
    if size == 1:
        return
    head = flows[0]
    index: i64 = 0
    child: i64 = 1
    while child < size:
        below = flows[child]
        right: i64 = child + 1
        if right < size and _earlier(flows[right], below):
            child = right
            below = flows[right]
        if not _earlier(below, head):
            break
        flows[index] = below
        index = child
        child = 2 * index + 1
    flows[index] = head


def flows_pop(flows: list[Flow]) -> None:
    """Take the head off a NIC's heap of flows."""
    last = flows.pop()
    if flows:
        flows[0] = last
        flows_sift_head(flows)


class Flow:
    """A RoCE QP from ``src`` to ``dst``: its DCQCN reaction point, its PSNs on both ends
    (sender and responder), its posted messages and its counters.

    PSNs count data frames (a 24-bit PSN wraps in a real QP; here it is an unbounded int).
    ``end_psn`` is one past the last PSN posted: :data:`NEVER` for an infinite flow, which
    always has a full frame to send.  ``short`` holds the frame length of each message's last
    frame when it is shorter than the NIC's frame.  ``msgs`` are the messages the responder
    has not yet received in full, in order: ``(end_psn, tag, nbytes)``.
    """

    __slots__ = (
        "acked",
        "cnps_rx",
        "completions",
        "delivered_bytes",
        "dst",
        "end_psn",
        "epsn",
        "hash",
        "in_heap",
        "index",
        "last_sent",
        "max_psn",
        "messages_done",
        "msgs",
        "nak_out",
        "naks",
        "next_at",
        "ooo",
        "ooo_peak",
        "posted_at",
        "rcv_high",
        "retx",
        "retx_bytes",
        "retx_packets",
        "rp",
        "rto_at",
        "rto_pending",
        "rx_bytes",
        "rx_ce",
        "rx_packets",
        "short",
        "snd_psn",
        "src",
        "start_at",
        "start_s",
        "stop_at",
        "stop_s",
        "timeouts",
        "trim_dropped",
        "trimmed",
        "trims_rx",
        "tx_bytes",
        "tx_packets",
        "udp_sport",
        "unacked",
    )

    def __init__(self, index: int, spec: FlowSpec, rp: DcqcnReactionPoint) -> None:
        self.index = index
        self.src = spec.src
        self.dst = spec.dst
        self.udp_sport = spec.udp_sport
        self.hash = spec.hash_value()
        self.rp = rp
        self.start_s = spec.start_s
        self.stop_s = spec.stop_s
        self.start_at = to_ticks(spec.start_s)
        self.stop_at = to_ticks(spec.stop_s) if math.isfinite(spec.stop_s) else NEVER
        self.next_at = self.start_at
        self.last_sent = -1
        self.tx_bytes = self.tx_packets = 0
        self.rx_bytes = self.rx_packets = self.rx_ce = 0
        self.cnps_rx = 0
        # Sender: the next PSN to send, one past the highest sent, one past the last posted.
        self.snd_psn = 0
        self.max_psn = 0
        self.end_psn = NEVER if spec.size_bytes is None else 0
        self.short: dict[int, int] = {}
        self.msgs: Fifo[tuple[int, object, int]] = Fifo()
        self.posted_at: Fifo[int] = Fifo()  # the tick each message in ``msgs`` was posted
        # Each delivered message's completion time (ticks from its post to its last byte in
        # order at the responder): the tail the mode comparison reports, per job.
        self.completions: list[int] = []
        self.in_heap = False  # an entry in the sending NIC's heap of flows
        # Sender's recovery: every PSN before ``acked`` is acknowledged; ``retx`` the PSNs a
        # selective-repeat NAK asked for; the retransmission deadline (0: nothing
        # outstanding) and whether a timer event is pending (it re-arms itself lazily).
        self.acked = 0
        self.retx: deque[int] = deque()
        self.rto_at = 0
        self.rto_pending = False
        self.retx_bytes = self.retx_packets = self.timeouts = self.naks = 0
        # Responder: the expected PSN; frame bytes and messages received in order; frames
        # accepted since the last ACK; a go-back-N NAK outstanding; selective repeat's
        # out-of-order frames (PSN -> frame length) and one past the highest PSN seen.
        self.epsn = 0
        self.delivered_bytes = 0
        self.messages_done = 0
        self.unacked = 0
        self.nak_out = False
        self.ooo: dict[int, int] = {}
        self.rcv_high = 0
        # The most frames held out of order at once (the reorder depth), and the trimmed
        # frames that reached the responder (each an explicit loss signal).
        self.ooo_peak = 0
        self.trims_rx = 0
        # Its frames a switch trimmed (sent on or dropped at the trim queue), and of those
        # dropped at the trim queue: a job's own trims in a run of several.
        self.trimmed = 0
        self.trim_dropped = 0

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}:{self.udp_sport}"

    def acknowledge(self, psn: int, timeout_at: int) -> None:
        """Every PSN before ``psn`` is delivered: the retransmission deadline moves to
        ``timeout_at``, or is cleared when nothing is outstanding."""
        if psn <= self.acked:
            return
        self.acked = psn
        if self.snd_psn < psn:
            self.snd_psn = psn
        self.rto_at = timeout_at if psn < self.max_psn else 0

    def resending(self, psn: int, length: int) -> None:
        """A retransmission of ``psn``: counted; the sender moves past it (go-back-N, a
        timeout) or takes it off the PSNs a selective NAK asked for."""
        self.retx_packets += 1
        self.retx_bytes += length
        retx = self.retx
        if retx and retx[0] == psn:
            retx.popleft()
        if psn == self.snd_psn:
            self.snd_psn = psn + 1

    def retx_psn(self, psn: int) -> int:
        """Selective repeat: the first PSN a NAK asked for that is still unacknowledged
        (``psn``, the next new one, when none is)."""
        retx = self.retx
        while retx and retx[0] < self.acked:
            retx.popleft()
        return retx[0] if retx else psn


@dataclass(frozen=True)
class FlowSpec:
    """A QP to simulate.  ``size_bytes``: None is an infinite source paced by DCQCN (the
    scenarios' flows); an int is a flow of messages -- 0 sends nothing until
    :meth:`Engine.post` gives it a message, more posts one message of that size (tag None)
    at ``start_s``."""

    src: str
    dst: str
    start_s: float = 0.0
    stop_s: float = float("inf")
    udp_sport: int = 49152
    size_bytes: int | None = None

    def hash_value(self) -> int:
        return flow_hash(self.src, self.dst, self.udp_sport)

"""The analysis engine shared by the live receiver and offline pcap analysis.

Per QP: PSN/sequence tracking (lost = gaps never filled, reordered = a gap filled late,
duplicates), CE marks, CNPs, ICRC errors, one-way latency. Per priority: PFC frames,
XOFF/XON, paused time (quanta × 512 bit times at link speed, cut short by a later frame for the
same priority) and storms (a continuous pause longer than a threshold).

It works on raw frames and timestamps only, so a capture taken with tcpdump on a host gives the
same numbers as the live receiver.

State is bounded whatever the input, because the live receiver accepts frames from anyone on
UDP 4791 and a capture can be crafted: at most ``max_flows`` QPs are tracked (frames of
further flows are counted as ``untracked_frames``), and missing PSNs are kept as ranges, at
most ``MAX_RANGES_PER_QP`` per QP and ``max_missing_ranges`` in all. A range given up to a cap
is counted as lost at once, as a gap over ``MAX_GAP`` always was; a late packet from it is then
counted as a duplicate. Every overflow is reported, none is fatal.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scapy.contrib.roce import CNP_OPCODE

from agent.observe.probes.packets import (
    ECN_CE,
    ROCE_UDP_PORT,
    MalformedFrame,
    PfcView,
    RoceFields,
    RoceView,
    TrimmedFields,
    address_texts,
    parse_pfc,
    parse_roce_fields,
    parse_trimmed,
    roce_icrc_ok,
    roce_view,
)
from lossless.pfc import pause_duration

PSN_MODULO = 1 << 24
# A jump this large is a new stream (or a restarted sender), not a gap of lost packets.
MAX_GAP = 1 << 20
DEFAULT_MAX_FLOWS = 65_536
MAX_RANGES_PER_QP = 1024
DEFAULT_MAX_MISSING_RANGES = 1 << 18  # ≈ 20 MB of range bookkeeping at most
PFC_ETHERTYPE = b"\x88\x08"
IPV4_ETHERTYPE = b"\x08\x00"
VLAN_ETHERTYPES = (b"\x81\x00", b"\x88\xa8", b"\x91\x00")  # 802.1Q, 802.1ad, legacy QinQ
MAX_VLAN_TAGS = 2
MAX_STORMS_LISTED = 1024
LATENCY_BUCKETS_S = (
    0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
_BUCKET_NAMES = (*map(str, LATENCY_BUCKETS_S), "+Inf")
_NO_BUCKETS = (0,) * len(_BUCKET_NAMES)


class RangeBudget:
    """Missing-PSN ranges all QPs of one analyser may hold together."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def give_back(self) -> None:
        self.used -= 1


def untag(frame: bytes) -> tuple[bytes, int | None]:
    """Strip up to two VLAN tags (802.1Q, 802.1ad QinQ); returns the frame and the inner PCP."""
    pcp = None
    for _ in range(MAX_VLAN_TAGS):
        if frame[12:14] not in VLAN_ETHERTYPES or len(frame) < 18:
            break
        pcp = frame[14] >> 5
        frame = frame[:12] + frame[16:]
    return frame, pcp


@dataclass(slots=True)  # one per tracked QP, up to max_flows of them
class QpStats:
    """Counters of one flow, keyed by (source IP, destination IP, destination QP)."""

    src_ip: str
    dst_ip: str
    qpn: int
    received: int = 0
    lost: int = 0
    reordered: int = 0
    duplicates: int = 0
    ce_marked: int = 0
    cnps: int = 0
    icrc_errors: int = 0
    # Frames a switch trimmed (cut, re-marked, sent on ahead): neither drops nor corrupt.
    trimmed: int = 0
    trimmed_dscp: int | None = None
    dscp: int | None = None
    highest: int | None = None
    first: int | None = None
    uses_sequence: bool = False
    latency_count: int = 0
    latency_sum_s: float = 0.0
    latency_min_s: float | None = None
    latency_max_s: float | None = None
    # None until the first latency sample: most flows of a capture never have one.
    latency_buckets: list[int] | None = None
    pcp: int | None = None
    missing_overflow: int = 0  # missing-PSN ranges given up to a cap (counted as lost)
    budget: RangeBudget | None = field(default=None, repr=False, compare=False)
    # Missing numbers as sorted, disjoint, inclusive ranges [_starts[i], _ends[i]]: memory is
    # O(ranges), not O(gap), and a late packet is found by bisection.
    _starts: list[int] = field(default_factory=list, repr=False)
    _ends: list[int] = field(default_factory=list, repr=False)
    _missing_count: int = field(default=0, repr=False)

    def track(self, number: int) -> None:
        """Account one packet with sequence (or unwrapped PSN) ``number``."""
        self.received += 1
        highest = self.highest
        if highest is None:
            self.highest = self.first = number
            return
        if number == highest + 1:
            self.highest = number
        elif number > highest:
            gap = number - highest - 1
            if gap > MAX_GAP:
                self.lost += gap  # counted at once: too large to wait for late arrivals
            else:
                self._add_range(highest + 1, number - 1)
            self.highest = number
        elif self._starts and self._fill(number):
            self.reordered += 1
        else:
            self.duplicates += 1
            self.received -= 1

    def _add_range(self, start: int, end: int) -> None:
        budget = self.budget
        if budget is not None and not budget.take():
            self.lost += end - start + 1
            self.missing_overflow += 1
            return
        self._starts.append(start)
        self._ends.append(end)
        self._missing_count += end - start + 1
        if len(self._starts) > MAX_RANGES_PER_QP:
            self._give_up_oldest()

    def _give_up_oldest(self) -> None:
        start, end = self._starts.pop(0), self._ends.pop(0)
        self._missing_count -= end - start + 1
        self.lost += end - start + 1
        self.missing_overflow += 1
        if self.budget is not None:
            self.budget.give_back()

    def _fill(self, number: int) -> bool:
        """Remove ``number`` from the missing ranges; False if it was not missing."""
        starts, ends = self._starts, self._ends
        index = bisect_right(starts, number) - 1
        if index < 0 or number > ends[index]:
            return False
        start, end = starts[index], ends[index]
        self._missing_count -= 1
        if start == end:
            del starts[index], ends[index]
            if self.budget is not None:
                self.budget.give_back()
        elif number == start:
            starts[index] = number + 1
        elif number == end:
            ends[index] = number - 1
        else:  # split in two: one more range, under the same caps
            ends[index] = number - 1
            if self.budget is not None and not self.budget.take():
                self._missing_count -= end - number
                self.lost += end - number
                self.missing_overflow += 1
                return True
            starts.insert(index + 1, number + 1)
            ends.insert(index + 1, end)
            if len(starts) > MAX_RANGES_PER_QP:
                self._give_up_oldest()
        return True

    def observe_latency(self, seconds: float) -> None:
        self.latency_count += 1
        self.latency_sum_s += seconds
        self.latency_min_s = (
            seconds if self.latency_min_s is None else min(self.latency_min_s, seconds)
        )
        self.latency_max_s = (
            seconds if self.latency_max_s is None else max(self.latency_max_s, seconds)
        )
        buckets = self.latency_buckets
        if buckets is None:
            buckets = self.latency_buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)
        for index, bound in enumerate(LATENCY_BUCKETS_S):
            if seconds <= bound:
                buckets[index] += 1
                return
        buckets[-1] += 1

    @property
    def missing(self) -> int:
        return self._missing_count

    @property
    def missing_ranges(self) -> int:
        return len(self._starts)

    def total_lost(self, sent: int | None = None) -> int:
        """Gaps never filled, plus the tail the receiver never saw when ``sent`` is known."""
        lost = self.lost + self._missing_count
        if sent is not None and self.uses_sequence and self.highest is not None:
            lost += max(0, sent - 1 - self.highest)
        elif sent is not None and self.highest is None:
            lost = sent
        return lost

    def as_dict(self, sent: int | None = None) -> dict[str, Any]:
        return {
            "src_ip": self.src_ip,
            "dst_ip": self.dst_ip,
            "qpn": self.qpn,
            "dscp": self.dscp,
            "pcp": self.pcp,
            "received": self.received,
            "lost": self.total_lost(sent),
            "reordered": self.reordered,
            "duplicates": self.duplicates,
            "ce_marked": self.ce_marked,
            "cnps": self.cnps,
            "icrc_errors": self.icrc_errors,
            "trimmed": self.trimmed,
            "trimmed_dscp": self.trimmed_dscp,
            "missing_overflow": self.missing_overflow,
            "latency": {
                "count": self.latency_count,
                "min_s": self.latency_min_s,
                "avg_s": self.latency_sum_s / self.latency_count if self.latency_count else None,
                "max_s": self.latency_max_s,
                "buckets_le_s": dict(
                    zip(_BUCKET_NAMES, self.latency_buckets or _NO_BUCKETS, strict=True)
                ),
            },
        }


class RoceAnalyzer:
    """Feeds frames into per-QP statistics, tracking at most ``max_flows`` flows.

    ``sources``, when given, is the set of IPv4 sources expected to send: frames from any other
    source are counted as ``foreign_frames`` and never create state.
    """

    def __init__(
        self,
        max_flows: int = DEFAULT_MAX_FLOWS,
        sources: Iterable[str] | None = None,
        max_missing_ranges: int = DEFAULT_MAX_MISSING_RANGES,
        udp_port: int = ROCE_UDP_PORT,
    ) -> None:
        if max_flows < 1:
            raise ValueError(f"max_flows must be at least 1, got {max_flows}")
        self.flows: dict[tuple[str, str, int], QpStats] = {}
        # The same flows keyed by (source, destination) << 24 | QPN as read from the frame:
        # a lookup needs no address text.
        self._index: dict[int, QpStats] = {}
        self.invalid = 0
        self.frames = 0
        self.max_flows = max_flows
        self.untracked_frames = 0
        self.foreign_frames = 0
        self.sources = frozenset(sources) if sources is not None else None
        self.budget = RangeBudget(max_missing_ranges)
        self.udp_port = udp_port

    def _new_flow(self, key: int, frame: bytes, qpn: int) -> QpStats | None:
        src_ip, dst_ip = address_texts(frame)
        if self.sources is not None and src_ip not in self.sources:
            self.foreign_frames += 1
            return None
        if len(self.flows) >= self.max_flows:
            self.untracked_frames += 1
            return None
        stats = QpStats(src_ip, dst_ip, qpn, budget=self.budget)
        self.flows[(src_ip, dst_ip, qpn)] = self._index[key] = stats
        return stats

    def feed(
        self, frame: bytes, now_ns: int | None = None, pcp: int | None = None
    ) -> RoceView | None:
        """Account one frame; returns its parsed view when it was valid RoCEv2 data of a
        tracked flow (None for untracked or foreign flows: they only count)."""
        fields = self.account(frame, now_ns, pcp)
        return None if fields is None else roce_view(frame, fields, True)

    def account(
        self, frame: bytes, now_ns: int | None = None, pcp: int | None = None
    ) -> RoceFields | None:
        """:meth:`feed` without building a view: the parsed fields, or None when it returns
        None. The offline path calls this once per frame."""
        try:
            fields = parse_roce_fields(frame, self.udp_port)
        except MalformedFrame:
            self._malformed(frame)
            return None
        if fields is None:
            return None
        self.frames += 1
        addresses, tos, _, opcode, qword, pword, _, seq, sent_ns, _, _ = fields
        qpn = qword & 0xFFFFFF
        key = addresses << 24 | qpn
        stats = self._index.get(key)
        if stats is None:
            if self.sources is None and len(self._index) >= self.max_flows:
                self.untracked_frames += 1  # the common case of a flood, without a call
                return None
            stats = self._new_flow(key, frame, qpn)
            if stats is None:
                return None
        # Checked only now: frames of untracked and foreign flows never needed it.
        if not roce_icrc_ok(frame, fields):
            stats.icrc_errors += 1  # counted, never trusted for sequence tracking
            return None
        if opcode == CNP_OPCODE:
            stats.cnps += 1
            return fields
        stats.dscp = tos >> 2
        if pcp is not None:
            stats.pcp = pcp
        stats.ce_marked += tos & 0b11 == ECN_CE  # a bool: no branch on the per-frame path
        if seq is not None:
            stats.uses_sequence = True
            highest = stats.highest
            if highest is not None and seq == highest + 1:  # in order: track()'s first case
                stats.received += 1
                stats.highest = seq
            else:
                stats.track(seq)
            if now_ns is not None and sent_ns:
                stats.observe_latency(max(0, now_ns - sent_ns) / 1e9)
        else:
            stats.track(self._unwrap(stats, pword & 0xFFFFFF))
        return fields

    def _malformed(self, frame: bytes) -> None:
        """A frame on the port that is no whole RoCEv2 packet: trimmed by a switch, or
        invalid."""
        trimmed = parse_trimmed(frame, self.udp_port)
        if trimmed is None:
            self.invalid += 1
        else:
            self._account_trimmed(frame, trimmed)

    def _account_trimmed(self, frame: bytes, fields: TrimmedFields) -> None:
        """A trimmed frame: counted with its DSCP, and its number accounted as seen, so the
        gap it would leave is not counted as a drop (the receiver learnt of the loss)."""
        addresses, tos, qword, pword, seq = fields
        qpn = qword & 0xFFFFFF
        key = addresses << 24 | qpn
        stats = self._index.get(key) or self._new_flow(key, frame, qpn)
        if stats is None:
            return
        stats.trimmed += 1
        stats.trimmed_dscp = tos >> 2
        if seq is not None:
            stats.uses_sequence = True
            stats.track(seq)
        elif not stats.uses_sequence:
            stats.track(self._unwrap(stats, pword & 0xFFFFFF))
        else:
            return
        stats.received -= 1  # track() counts a whole frame: this one arrived cut

    @staticmethod
    def _unwrap(stats: QpStats, psn: int) -> int:
        """Map a 24-bit PSN onto a monotonic number near the highest seen so far."""
        if stats.highest is None:
            return psn
        base = stats.highest
        delta = (psn - base) % PSN_MODULO
        if delta >= PSN_MODULO // 2:
            delta -= PSN_MODULO
        return base + delta

    def result(self, sent: dict[tuple[str, str, int], int] | None = None) -> dict[str, Any]:
        flows = [stats.as_dict((sent or {}).get(key)) for key, stats in sorted(self.flows.items())]
        totals = {
            name: sum(f[name] for f in flows)
            for name in (
                "received",
                "lost",
                "reordered",
                "duplicates",
                "ce_marked",
                "cnps",
                "icrc_errors",
                "trimmed",
                "missing_overflow",
            )
        }
        return {
            "flows": flows,
            "totals": {
                **totals,
                "invalid": self.invalid,
                "untracked_frames": self.untracked_frames,
                "foreign_frames": self.foreign_frames,
            },
            "max_flows": self.max_flows,
            "flows_overflow": self.untracked_frames > 0,
            "warnings": self.warnings(totals["missing_overflow"]),
        }

    def warnings(self, missing_overflow: int | None = None) -> list[str]:
        """One line per bound that was hit; the counts stay exact, the detail is what is lost."""
        if missing_overflow is None:
            missing_overflow = sum(s.missing_overflow for s in self.flows.values())
        out = []
        trimmed = sum(s.trimmed for s in self.flows.values())
        if trimmed:
            out.append(
                f"trimmed {trimmed}: frames cut short by a trimming switch (packet trimming), "
                "counted per flow as trimmed, not as lost or corrupt"
            )
        if self.untracked_frames:
            out.append(
                f"flow cap reached: {self.max_flows} flows tracked, {self.untracked_frames} "
                "frames of further flows counted as untracked_frames (raise --max-flows)"
            )
        if self.foreign_frames:
            out.append(
                f"{self.foreign_frames} frames from unexpected sources ignored (foreign_frames)"
            )
        if missing_overflow:
            out.append(
                f"missing-PSN bookkeeping full: {missing_overflow} gaps counted as lost at once; "
                "packets from them arriving later count as duplicates"
            )
        return out


@dataclass
class PriorityPause:
    """PFC seen for one priority on one interface.

    A pause of q quanta sent at t lasts until t + q × 512 / speed unless a later frame for the
    same priority (refresh or XON) replaces it. Back-to-back pauses form one continuous pause;
    one that lasts ``storm_after_s`` is a storm, detected at the first event past that point.
    """

    frames: int = 0
    xoff: int = 0
    xon: int = 0
    paused_s: float = 0.0
    storms: int = 0
    time_to_detect_s: list[float] = field(default_factory=list)
    _start: float | None = None  # start of the current continuous pause
    _until: float | None = None  # when the current pause expires
    _mark: float = 0.0  # paused time is accounted up to here
    _storm_seen: bool = False

    def _advance(self, at: float, storm_after_s: float) -> None:
        """Account paused time up to ``at``; end the pause if it expired before."""
        if self._until is None or self._start is None:
            return
        stop = min(at, self._until)
        self.paused_s += max(0.0, stop - self._mark)
        self._mark = stop
        if not self._storm_seen and stop - self._start >= storm_after_s:
            self.storms += 1
            self._storm_seen = True
            if len(self.time_to_detect_s) < MAX_STORMS_LISTED:  # a crafted capture has millions
                self.time_to_detect_s.append(round(stop - self._start, 9))
        if self._until <= at:
            self._start = self._until = None
            self._storm_seen = False

    def frame(self, at: float, quanta: int, speed_bps: int, storm_after_s: float) -> None:
        self.frames += 1
        self._advance(at, storm_after_s)
        if quanta == 0:
            self.xon += 1
            self._start = self._until = None
            self._storm_seen = False
            return
        self.xoff += 1
        if self._start is None:
            self._start = at
        self._mark = at
        self._until = at + pause_duration(quanta, speed_bps)

    def finish(self, at: float | None, storm_after_s: float) -> None:
        """Close the books at ``at``; None lets a pending pause run its full quanta."""
        if at is None:
            at = self._until if self._until is not None else self._mark
        self._advance(at, storm_after_s)


class PfcAnalyzer:
    """Per-priority PFC accounting for one interface at a known link speed."""

    def __init__(self, speed_bps: int, storm_after_s: float = 0.2) -> None:
        self.speed_bps = speed_bps
        self.storm_after_s = storm_after_s
        self.priorities = [PriorityPause() for _ in range(8)]
        self.last_at: float | None = None

    def feed(self, frame: bytes, at: float) -> PfcView | None:
        view = parse_pfc(frame)
        if view is None:
            return None
        self.last_at = at
        for priority in range(8):
            if view.enabled >> priority & 1:
                self.priorities[priority].frame(
                    at, view.quanta[priority], self.speed_bps, self.storm_after_s
                )
        return view

    def result(self, end: float | None = None) -> dict[str, Any]:
        """Per-priority totals; ``end`` cuts pending pauses short (None: they run out)."""
        out = {}
        for priority, pause in enumerate(self.priorities):
            pause.finish(end, self.storm_after_s)
            out[str(priority)] = {
                "frames": pause.frames,
                "xoff": pause.xoff,
                "xon": pause.xon,
                "paused_s": round(pause.paused_s, 9),
                "storms": pause.storms,
                "time_to_detect_s": pause.time_to_detect_s,
            }
        return {"speed_bps": self.speed_bps, "storm_after_s": self.storm_after_s, "priorities": out}


def analyze_frames(
    frames: Iterable[tuple[float, bytes]],
    speed_bps: int,
    storm_after_s: float = 0.2,
    max_flows: int = DEFAULT_MAX_FLOWS,
    udp_port: int = ROCE_UDP_PORT,
) -> dict[str, Any]:
    """Offline analysis of (timestamp, frame) pairs: RoCE flows (to ``udp_port``) and PFC per
    priority.

    VLAN tags are stripped first (the PCP of a flow is reported); PFC frames are never tagged.
    Time is linear in the frames given and their size: a capture bounds both with
    :class:`agent.observe.probes.pcap.Capture`'s ``max_frames`` and ``max_bytes``.
    """
    roce = RoceAnalyzer(max_flows=max_flows, udp_port=udp_port)
    pfc = PfcAnalyzer(speed_bps, storm_after_s)
    account = roce.account
    for at, frame in frames:
        ethertype = frame[12:14]
        if ethertype == IPV4_ETHERTYPE:  # most frames: no tag, not PFC
            account(frame, int(at * 1e9), None)
            continue
        pcp = None
        if ethertype in VLAN_ETHERTYPES:
            frame, pcp = untag(frame)
            ethertype = frame[12:14]
        if ethertype == PFC_ETHERTYPE and pfc.feed(frame, at) is not None:
            continue
        account(frame, int(at * 1e9), pcp)
    return {"roce": roce.result(), "pfc": pfc.result()}

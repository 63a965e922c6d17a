"""The analysis engine on crafted traffic: exact loss, reorder, duplicate, CE, CNP, ICRC and
PFC pause counts."""

from __future__ import annotations

import struct
import tracemalloc
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH

from agent.observe.probes.analysis import (
    LATENCY_BUCKETS_S,
    MAX_GAP,
    MAX_RANGES_PER_QP,
    PfcAnalyzer,
    QpStats,
    RoceAnalyzer,
    analyze_frames,
)
from agent.observe.probes.packets import (
    ECN_CE,
    ICRC_LEN,
    PAYLOAD_OFFSET,
    Flow,
    RoceTemplate,
    cnp_packet,
    icrc,
    pack_icrc,
    parse_roce,
    pfc_frame,
    roce_packet,
)

MAC_A, MAC_B = "02:00:00:00:00:01", "02:00:00:00:00:02"
IP_A, IP_B = "198.18.0.1", "198.18.0.3"
FLOW = Flow(MAC_A, MAC_B, IP_A, IP_B, qpn=0x42, size=64)
SPEED = 10_000_000


def frames_for(order: list[int]) -> list[bytes]:
    template = RoceTemplate(FLOW)
    return [template.frame(seq, seq, 1_000) for seq in order]


@pytest.mark.parametrize(
    ("order", "lost", "reordered", "duplicates", "received"),
    [
        (list(range(10)), 0, 0, 0, 10),
        ([0, 1, 2, 5, 6, 7], 2, 0, 0, 6),  # 3 and 4 never arrive
        ([0, 1, 3, 2, 4], 0, 1, 0, 5),  # 2 arrives late
        ([0, 1, 1, 2, 2, 2, 3], 0, 0, 3, 4),
        ([0, 4, 1, 2, 9], 5, 2, 0, 5),  # 1 and 2 arrive late; 3 and 5-8 never
        ([5, 6, 7], 0, 0, 0, 3),  # a stream may start anywhere
    ],
)
def test_sequence_tracking(
    order: list[int], lost: int, reordered: int, duplicates: int, received: int
) -> None:
    analyzer = RoceAnalyzer()
    for frame in frames_for(order):
        analyzer.feed(frame, now_ns=2_000)
    totals = analyzer.result()["totals"]
    assert (totals["lost"], totals["reordered"], totals["duplicates"], totals["received"]) == (
        lost,
        reordered,
        duplicates,
        received,
    )


def test_tail_loss_needs_the_sent_count() -> None:
    analyzer = RoceAnalyzer()
    for frame in frames_for([0, 1, 2]):
        analyzer.feed(frame)
    key = (IP_A, IP_B, 0x42)
    assert analyzer.result({key: 5})["totals"]["lost"] == 2
    assert analyzer.result({key: 3})["totals"]["lost"] == 0


def test_psn_only_traffic_wraps() -> None:
    """Traffic without our payload (any RoCE capture) is tracked on the 24-bit PSN."""
    analyzer = RoceAnalyzer()
    for psn in (0xFFFFFE, 0xFFFFFF, 0, 2):  # 1 is missing across the wrap
        packet = roce_packet(FLOW, psn)
        packet[BTH].remove_payload()
        packet[BTH].add_payload(b"\x00" * 32)
        packet[BTH].icrc = None
        analyzer.feed(bytes(packet))
    assert analyzer.result()["totals"]["lost"] == 1


def test_ce_cnp_icrc_and_invalid_are_counted() -> None:
    analyzer = RoceAnalyzer()
    template = RoceTemplate(FLOW)
    good = bytearray(template.frame(0, 0, 0))
    marked = bytearray(template.frame(1, 1, 0))
    marked[15] = (marked[15] & 0xFC) | ECN_CE
    corrupt = bytearray(template.frame(2, 2, 0))
    corrupt[-8] ^= 0x01
    cnp = bytes(cnp_packet(MAC_B, MAC_A, IP_B, IP_A, 0x42))
    for frame in (bytes(good), bytes(marked), bytes(corrupt), cnp, bytes(good)[:48]):
        analyzer.feed(frame)
    flows = {(f["src_ip"], f["qpn"]): f for f in analyzer.result()["flows"]}
    data = flows[(IP_A, 0x42)]
    assert (data["received"], data["ce_marked"], data["icrc_errors"]) == (2, 1, 1)
    assert flows[(IP_B, 0x42)]["cnps"] == 1
    assert analyzer.result()["totals"]["invalid"] == 1


def test_latency_from_embedded_timestamp() -> None:
    analyzer = RoceAnalyzer()
    template = RoceTemplate(FLOW)
    analyzer.feed(template.frame(0, 0, 1_000_000_000), now_ns=1_000_500_000)
    latency = analyzer.result()["flows"][0]["latency"]
    assert latency["count"] == 1
    assert latency["min_s"] == pytest.approx(0.0005)
    assert latency["buckets_le_s"]["0.0005"] == 1


def pause(quanta: int, priority: int = 3) -> bytes:
    values: list[int | None] = [None] * 8
    values[priority] = quanta
    return pfc_frame(MAC_A, values)


QUANTUM_S = 512 / SPEED  # 51.2 µs at 10 Mb/s


def test_pause_time_from_quanta() -> None:
    pfc = PfcAnalyzer(SPEED, storm_after_s=10)
    pfc.feed(pause(1000), at=0.0)  # 51.2 ms, expires on its own
    result = pfc.result(end=1.0)["priorities"]["3"]
    assert result["xoff"] == 1 and result["xon"] == 0
    assert result["paused_s"] == pytest.approx(1000 * QUANTUM_S)


def test_xon_cuts_a_pause_short_and_refresh_does_not_double_count() -> None:
    pfc = PfcAnalyzer(SPEED, storm_after_s=10)
    pfc.feed(pause(0xFFFF), at=0.0)  # 3.36 s if left alone
    pfc.feed(pause(0xFFFF), at=0.010)  # refresh
    pfc.feed(pause(0), at=0.030)  # XON
    result = pfc.result(end=5.0)["priorities"]["3"]
    assert (result["frames"], result["xoff"], result["xon"]) == (3, 2, 1)
    assert result["paused_s"] == pytest.approx(0.030)
    assert result["storms"] == 0


def test_storm_is_a_continuous_pause_longer_than_the_threshold() -> None:
    pfc = PfcAnalyzer(SPEED, storm_after_s=0.1)
    for i in range(30):  # XOFF every 10 ms, each lasting 51.2 ms: never released
        pfc.feed(pause(1000), at=i * 0.010)
    result = pfc.result(end=0.35)["priorities"]["3"]
    assert result["storms"] == 1
    assert result["time_to_detect_s"] == [pytest.approx(0.1, abs=0.011)]
    assert result["paused_s"] == pytest.approx(0.29 + 1000 * QUANTUM_S)
    assert pfc.result()["priorities"]["4"]["frames"] == 0


def test_gaps_between_pauses_are_not_a_storm() -> None:
    pfc = PfcAnalyzer(SPEED, storm_after_s=0.1)
    for i in range(20):  # 5.12 ms pauses every 20 ms
        pfc.feed(pause(100), at=i * 0.020)
    result = pfc.result(end=1.0)["priorities"]["3"]
    assert result["storms"] == 0
    assert result["paused_s"] == pytest.approx(20 * 100 * QUANTUM_S)


def test_analyze_frames_splits_roce_and_pfc() -> None:
    template = RoceTemplate(FLOW)
    frames = [(0.001 * i, template.frame(i, i, 0)) for i in (0, 1, 3)]
    frames.append((0.004, pause(100)))
    result = analyze_frames(frames, SPEED)
    assert result["roce"]["totals"]["lost"] == 1
    assert result["pfc"]["priorities"]["3"]["xoff"] == 1


# --- Missing-PSN bookkeeping as ranges (issue #11): same counts as the set it replaced ---


def reference_counts(numbers: list[int]) -> tuple[int, int, int, int]:
    """The set-based bookkeeping the ranges replaced: (received, lost, reordered, duplicates)."""
    highest: int | None = None
    missing: set[int] = set()
    received = lost = reordered = duplicates = 0
    for number in numbers:
        received += 1
        if highest is None:
            highest = number
        elif number > highest:
            if number - highest - 1 > MAX_GAP:
                lost += number - highest - 1
            else:
                missing.update(range(highest + 1, number))
            highest = number
        elif number in missing:
            missing.discard(number)
            reordered += 1
        else:
            duplicates += 1
            received -= 1
    return received, lost + len(missing), reordered, duplicates


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 400), max_size=300))
def test_ranges_count_exactly_like_a_set(numbers: list[int]) -> None:
    stats = QpStats(IP_A, IP_B, 1)
    for number in numbers:
        stats.track(number)
    expected = reference_counts(numbers)
    assert (stats.received, stats.total_lost(), stats.reordered, stats.duplicates) == expected
    assert stats.missing_overflow == 0
    # sorted, non-empty, disjoint ranges with a received number between neighbours
    pairs = list(zip(stats._starts, stats._ends, strict=True))
    assert all(s <= e for s, e in pairs)
    assert all(e1 + 1 < s2 for (_, e1), (s2, _) in pairwise(pairs))


@pytest.mark.parametrize(
    ("order", "missing", "ranges"),
    [
        ([0, 10], 9, 1),
        ([0, 10, 5], 8, 2),  # a late packet in the middle splits the range
        ([0, 10, 1], 8, 1),  # at a range's start: shrinks it
        ([0, 10, 9], 8, 1),  # at its end
        ([0, 2, 1], 0, 0),  # fills a one-number range: the range goes
        ([0, 3, 6, 9, 4, 5], 4, 2),
    ],
)
def test_range_shapes(order: list[int], missing: int, ranges: int) -> None:
    stats = QpStats(IP_A, IP_B, 1)
    for number in order:
        stats.track(number)
    assert (stats.missing, stats.missing_ranges) == (missing, ranges)


def psn_frame(template: RoceTemplate, psn: int) -> bytes:
    """A valid RoCEv2 frame without our probe payload: tracked on its 24-bit PSN."""
    frame = bytearray(template.frame(psn, 0, 0))
    frame[PAYLOAD_OFFSET : PAYLOAD_OFFSET + 4] = b"ANY!"
    frame[-ICRC_LEN:] = pack_icrc(icrc(bytes(frame)))
    return bytes(frame)


@pytest.mark.parametrize(
    ("psns", "lost", "reordered", "duplicates"),
    [
        ([0xFFFFFD, 0, 0xFFFFFE, 0xFFFFFF, 2, 1], 0, 3, 0),  # gap across the wrap, filled late
        ([0xFFFFFE, 1, 0xFFFFFF], 1, 1, 0),  # 0 never arrives
        ([0xFFFFFF, 0, 0xFFFFFF], 0, 0, 1),  # the old PSN again is a duplicate, not a jump
        ([5, 5 + (1 << 20), 5 + (2 << 20)], 2 * ((1 << 20) - 1), 0, 0),
    ],
)
def test_psn_ranges_across_the_24_bit_wrap(
    psns: list[int], lost: int, reordered: int, duplicates: int
) -> None:
    template = RoceTemplate(FLOW)
    analyzer = RoceAnalyzer()
    for psn in psns:
        analyzer.feed(psn_frame(template, psn % (1 << 24)))
    totals = analyzer.result()["totals"]
    assert (totals["lost"], totals["reordered"], totals["duplicates"]) == (
        lost,
        reordered,
        duplicates,
    )


def test_psn_jumps_take_memory_per_range_not_per_missing_psn() -> None:
    """The issue's case: 40 frames whose PSNs jump by 2**20 used 4.5 GB as a set."""
    template = RoceTemplate(FLOW)
    frames = [psn_frame(template, (i << 20) % (1 << 24)) for i in range(40)]
    tracemalloc.start()
    try:
        analyzer = RoceAnalyzer()
        for frame in frames:
            analyzer.feed(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak
    assert analyzer.result()["totals"]["lost"] == 39 * ((1 << 20) - 1)


def test_ranges_per_qp_are_capped_and_the_overflow_counted_as_lost() -> None:
    stats = QpStats(IP_A, IP_B, 1)
    numbers = list(range(0, 2 * (MAX_RANGES_PER_QP + 100), 2))  # every other number missing
    for number in numbers:
        stats.track(number)
    assert stats.missing_ranges == MAX_RANGES_PER_QP
    assert stats.missing_overflow == 100 - 1  # n packets leave n - 1 gaps
    assert stats.total_lost() == len(numbers) - 1
    stats.track(1)  # its range was given up (counted lost): a late copy is a duplicate
    assert (stats.duplicates, stats.total_lost()) == (1, len(numbers) - 1)
    stats.track(numbers[-1] - 1)  # a range still held: reordered as usual
    assert (stats.reordered, stats.total_lost()) == (1, len(numbers) - 2)


def test_all_flows_share_one_range_budget() -> None:
    analyzer = RoceAnalyzer(max_missing_ranges=10)
    for qpn in range(4):
        template = RoceTemplate(Flow(MAC_A, MAC_B, IP_A, IP_B, qpn=qpn, size=64))
        for seq in (0, 2, 4, 6, 8):  # 4 gaps each, 16 in all
            analyzer.feed(template.frame(seq, seq, 0))
    result = analyzer.result()
    assert analyzer.budget.used == 10
    assert result["totals"]["lost"] == 16
    assert result["totals"]["missing_overflow"] == 6
    assert any("missing-PSN bookkeeping full" in w for w in result["warnings"])


def test_flow_cap_counts_untracked_frames_and_warns() -> None:
    analyzer = RoceAnalyzer(max_flows=3)
    for qpn in range(10):
        template = RoceTemplate(Flow(MAC_A, MAC_B, IP_A, IP_B, qpn=qpn, size=64))
        for seq in range(2):
            analyzer.feed(template.frame(seq, seq, 0))
    result = analyzer.result()
    assert len(result["flows"]) == 3
    assert result["totals"]["received"] == 6
    assert result["totals"]["untracked_frames"] == 14
    assert result["flows_overflow"] is True and result["max_flows"] == 3
    assert any("flow cap reached" in w for w in result["warnings"])


def test_no_overflow_reported_on_normal_traffic() -> None:
    analyzer = RoceAnalyzer()
    for frame in frames_for([0, 1, 3, 2, 5]):
        analyzer.feed(frame)
    result = analyzer.result()
    assert (result["flows_overflow"], result["warnings"]) == (False, [])
    assert result["totals"]["untracked_frames"] == result["totals"]["missing_overflow"] == 0


def test_foreign_sources_create_no_state() -> None:
    analyzer = RoceAnalyzer(sources={IP_A})
    stranger = RoceTemplate(Flow(MAC_A, MAC_B, "198.18.9.9", IP_B, qpn=7, size=64))
    for seq in range(5):
        analyzer.feed(stranger.frame(seq, seq, 0))
    for frame in frames_for([0, 1]):
        analyzer.feed(frame)
    result = analyzer.result()
    assert [f["src_ip"] for f in result["flows"]] == [IP_A]
    assert result["totals"]["foreign_frames"] == 5


@pytest.mark.parametrize(
    ("tags", "pcp"),
    [
        ([(0x8100, 5)], 5),  # 802.1Q
        ([(0x88A8, 1), (0x8100, 3)], 3),  # QinQ: the inner (customer) tag's priority
        ([(0x9100, 2), (0x8100, 6)], 6),  # pre-standard QinQ ethertype
    ],
)
def test_vlan_tagged_roce_is_analysed(tags: list[tuple[int, int]], pcp: int) -> None:
    def tagged(frame: bytes) -> bytes:
        header = b"".join(struct.pack("!HH", tpid, prio << 13 | 100) for tpid, prio in tags)
        return frame[:12] + header + frame[12:]

    frames = [(0.001 * i, tagged(f)) for i, f in enumerate(frames_for([0, 1, 3, 2, 6]))]
    frames.append((0.01, pause(100)))  # PFC is never tagged
    result = analyze_frames(frames, SPEED)
    (flow,) = result["roce"]["flows"]
    assert (flow["received"], flow["lost"], flow["reordered"], flow["pcp"]) == (5, 2, 1, pcp)
    assert result["pfc"]["priorities"]["3"]["xoff"] == 1


# --- feed's view, and the ICRC checked only for tracked flows ---

STRANGER = Flow(MAC_A, MAC_B, "198.18.9.9", IP_B, qpn=7, size=64)


def corrupted(frame: bytes) -> bytes:
    data = bytearray(frame)
    data[-6] ^= 0x01
    return bytes(data)


@pytest.mark.parametrize(
    ("name", "frame", "sources", "max_flows", "viewed", "counts"),
    [
        ("tracked", RoceTemplate(FLOW).frame(0, 0, 5), None, 4, True, (1, 0, 0, 0)),
        ("bad ICRC", corrupted(RoceTemplate(FLOW).frame(0, 0, 5)), None, 4, False, (0, 1, 0, 0)),
        ("cnp", bytes(cnp_packet(MAC_B, MAC_A, IP_B, IP_A, 0x42)), None, 4, True, (0, 0, 0, 0)),
        ("foreign", RoceTemplate(STRANGER).frame(0, 0, 5), {IP_A}, 4, False, (0, 0, 1, 0)),
        # over the cap even with a bad ICRC: counted untracked, the ICRC never computed
        ("untracked", corrupted(RoceTemplate(STRANGER).frame(0, 0, 5)), None, 1, False,
         (0, 0, 0, 1)),
    ],
)  # fmt: skip
def test_feed_returns_the_view_of_accounted_frames(
    name: str,
    frame: bytes,
    sources: set[str] | None,
    max_flows: int,
    viewed: bool,
    counts: tuple[int, int, int, int],
) -> None:
    analyzer = RoceAnalyzer(max_flows=max_flows, sources=sources)
    if name == "untracked":
        analyzer.feed(RoceTemplate(FLOW).frame(0, 0, 5))  # fills the only slot
    view = analyzer.feed(frame)
    assert (view == parse_roce(frame)) if viewed else view is None, name
    totals = analyzer.result()["totals"]
    received = totals["received"] - (1 if name == "untracked" else 0)
    assert (received, totals["icrc_errors"], totals["foreign_frames"],
            totals["untracked_frames"]) == counts, name  # fmt: skip


def test_flows_without_latency_report_empty_buckets() -> None:
    analyzer = RoceAnalyzer()
    analyzer.feed(RoceTemplate(FLOW).frame(0, 0, 0))  # no send time: no latency sample
    latency = analyzer.result()["flows"][0]["latency"]
    assert latency["count"] == 0
    assert latency["buckets_le_s"] == {str(b): 0 for b in (*LATENCY_BUCKETS_S, "+Inf")}

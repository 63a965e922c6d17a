"""The analysis engine on crafted traffic: exact loss, reorder, duplicate, CE, CNP, ICRC and
PFC pause counts."""

from __future__ import annotations

import pytest
from scapy.contrib.roce import BTH

from agent.probes.analysis import PfcAnalyzer, RoceAnalyzer, analyze_frames
from agent.probes.packets import (
    ECN_CE,
    Flow,
    RoceTemplate,
    cnp_packet,
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

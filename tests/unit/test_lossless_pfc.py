"""lossless.pfc: the pause timer, ingress accounting (XOFF/XON/headroom) and pause honouring.

Every expected value comes from the rule's source, cited per table; the model runs on a
virtual time passed as an argument (no clock is read).
"""

from __future__ import annotations

import pytest

from lossless.config import BufferConfig
from lossless.pfc import (
    PAUSE_QUANTUM_BITS,
    PFC_QUANTA_MAX,
    REFRESH_FRACTION,
    IngressAccounting,
    PauseHonouring,
    ReceivedPause,
    pause_duration,
)
from lossless.queues import XOFF_DUE, EgressQueue, enqueue

LAB = 10e6  # a 10 Mb/s lab port: one quantum = 51.2 µs
QUANTUM_S = 512 / LAB

# IEEE Std 802.1Qbb-2011 clause 36 / IEEE 802.3 Annex 31D: pause_time is counted in
# pause_quanta of 512 bit times at the port's speed.  AMD/Xilinx PG051 "Priority-Based Flow
# Control Frames": "For 10 Gb Ethernet, a single pause_quantum corresponds to 51.2 ns";
# besthub "Understanding Ethernet Flow Control ... (Part 1)": "For a 10 GbE link the maximum
# non-zero pause time is 3.355 ms"; SR Linux QoS guide: "a quanta value of 0 indicates to
# unpause".
PAUSE_TIME = [
    # quanta, speed b/s, seconds
    (1, 10e9, 51.2e-9),
    (0xFFFF, 10e9, 3.355392e-3),  # the article's 3.355 ms
    (1, 25e9, 20.48e-9),
    (1, 100e9, 5.12e-9),
    (0xFFFF, 100e9, 335.5392e-6),
    (1, 400e9, 1.28e-9),
    (0, 100e9, 0.0),
    (0xFFFF, 10e6, 3.355392),
    (100, 10e6, 5.12e-3),
]


@pytest.mark.parametrize(("quanta", "speed", "seconds"), PAUSE_TIME)
def test_pause_time_is_quanta_times_512_bit_times(
    quanta: int, speed: float, seconds: float
) -> None:
    assert pause_duration(quanta, speed) == pytest.approx(seconds, rel=1e-9)


def test_quantum_and_xoff_constants() -> None:
    # 802.1Qbb: 512-bit quanta in a 16-bit field; XOFF carries the largest one.
    assert (PAUSE_QUANTUM_BITS, PFC_QUANTA_MAX) == (512, 65535)


# Reception on a switch port (802.1Qbb per-priority pause; sender side of the module
# docstring: the timer is replaced by a later frame, quanta 0 resumes, only PFC-enabled
# no-drop priorities act, the watchdog's override ignores the pause but still records it).
# Frames: (time, priority, quanta, overridden).  Checks: (time, priority, paused?).
RECEIVED = [
    (
        "XOFF pauses for quanta x 512 bit times, then expires",
        {3},
        [(0.0, 3, 100, False)],
        [(0.0, 3, True), (100 * QUANTUM_S - 1e-9, 3, True), (100 * QUANTUM_S + 1e-9, 3, False)],
    ),
    (
        "a later XOFF replaces the timer (a shorter one shortens it)",
        {3},
        [(0.0, 3, 100, False), (1e-3, 3, 10, False)],
        [(1e-3 + 10 * QUANTUM_S - 1e-9, 3, True), (1e-3 + 10 * QUANTUM_S + 1e-9, 3, False)],
    ),
    (
        "XON (quanta 0) resumes at once",
        {3},
        [(0.0, 3, 0xFFFF, False), (1e-3, 3, 0, False)],
        [(1e-3, 3, False), (2e-3, 3, False)],
    ),
    (
        "pause is per priority",
        {3, 4},
        [(0.0, 3, 0xFFFF, False)],
        [(1e-3, 3, True), (1e-3, 4, False)],
    ),
    (
        "a priority without PFC no-drop ignores pause",
        {3},
        [(0.0, 2, 0xFFFF, False)],
        [(1e-3, 2, False)],
    ),
    (
        "a watchdog-overridden class ignores pause",
        {3},
        [(0.0, 3, 0xFFFF, True)],
        [(1e-3, 3, False)],
    ),
]


@pytest.mark.parametrize(
    ("honour", "frames", "checks"), [row[1:] for row in RECEIVED], ids=[row[0] for row in RECEIVED]
)
def test_received_pause(
    honour: set[int],
    frames: list[tuple[float, int, int, bool]],
    checks: list[tuple[float, int, bool]],
) -> None:
    pause = ReceivedPause(LAB)
    pause.configure([tc in honour for tc in range(8)])
    for at, priority, quanta, overridden in frames:
        pause.receive(priority, quanta, at, overridden)
    for at, priority, paused in checks:
        assert pause.is_paused(priority, at) is paused, (at, priority)


# The watchdog measures a storm from when the pause began *continuously*
# (lossless.watchdog docstring; SONiC pfcwd "in a paused state over T0 time").
PAUSED_SINCE = [
    # frames (time, quanta), poll time, paused_since expected at the poll
    ("refreshed before expiry: one pause", [(0.0, 100), (4e-3, 100)], 6e-3, 0.0),
    ("expired, then paused again: a new pause", [(0.0, 10), (4e-3, 100)], 6e-3, 4e-3),
    ("expired and not renewed: not paused", [(0.0, 10)], 6e-3, None),
    ("XON ends it", [(0.0, 100), (1e-3, 0)], 2e-3, None),
]


@pytest.mark.parametrize(
    ("frames", "poll", "since"),
    [row[1:] for row in PAUSED_SINCE],
    ids=[row[0] for row in PAUSED_SINCE],
)
def test_paused_since_tracks_a_continuous_pause(
    frames: list[tuple[float, int]], poll: float, since: float | None
) -> None:
    pause = ReceivedPause(LAB)
    pause.configure([True] * 8)
    for at, quanta in frames:
        pause.receive(3, quanta, at, False)
    pause.expire(poll)
    assert pause.paused_since[3] == since


def test_override_still_records_the_xoff_for_restoration() -> None:
    pause = ReceivedPause(LAB)
    pause.configure([True] * 8)
    pause.receive(3, 0xFFFF, 0.7, True)
    assert pause.last_xoff_rx[3] == 0.7 and not pause.is_paused(3, 0.7)
    assert pause.blocked(0.7, [False] * 8) == [False] * 8
    pause.receive(3, 0xFFFF, 0.8, False)
    override = [False] * 8
    assert pause.blocked(0.8, override)[3]
    override[3] = True
    assert not pause.blocked(0.8, override)[3]


def test_disabling_pfc_on_a_priority_ends_its_pause() -> None:
    pause = ReceivedPause(LAB)
    pause.configure([True] * 8)
    pause.receive(3, 0xFFFF, 0.0, False)
    pause.configure([tc != 3 for tc in range(8)])
    assert not pause.is_paused(3, 0.001) and pause.paused_since[3] is None


# Ingress accounting: pause threshold (XOFF) above which the port sends XOFF, resume
# threshold (XON) below which it sends XON, headroom above XOFF absorbing what is in flight
# ("pause threshold > resume threshold, leaving sufficient headroom (buffer space above the
# pause threshold) to avoid packet loss", besthub/Cisco "Understanding Ethernet Flow Control
# and Congestion Management (Part 1)"; SONiC buffer model: xoff = headroom, xon offset).
# xoff 3000 B, xon 1500 B, headroom 2000 B (drop above 5000 B), priority 3 lossless.
# Steps: (op, priority, bytes, expected: XOFF/XON due, or for "enqueue" whether admitted);
# the owner sends what is due.
XOFF_XON = [
    (
        "XOFF only above the threshold, once",
        [("charge", 3, 3000, False), ("charge", 3, 1, True), ("charge", 3, 500, False)],
    ),
    (
        "XON once below the XON threshold, not at it",
        [
            ("charge", 3, 3001, True),
            ("release", 3, 1501, False),  # 1500 left: not below 1500
            ("release", 3, 1, True),
            ("release", 3, 500, False),  # already resumed
        ],
    ),
    (
        "headroom: admitted up to xoff + headroom, then dropped",
        [("enqueue", 3, 4000, True), ("enqueue", 3, 1000, True), ("enqueue", 3, 1, False)],
    ),
    (
        "a lossy priority never sends XOFF and is not held to the headroom",
        [("enqueue", 0, 10_000, True), ("charge", 0, 10_000, False), ("release", 0, 20_000, False)],
    ),
]


@pytest.mark.parametrize("steps", [row[1] for row in XOFF_XON], ids=[row[0] for row in XOFF_XON])
def test_xoff_xon_and_headroom(steps: list[tuple[str, int, int, bool]]) -> None:
    acct = IngressAccounting(LAB)
    acct.configure(
        BufferConfig(xoff_bytes=3000, xon_bytes=1500, headroom_bytes=2000, queue_limit_bytes=1),
        [tc == 3 for tc in range(8)],
    )
    queue: EgressQueue[bytearray] = EgressQueue()
    drops = 0
    for at, (op, tc, length, expected) in enumerate(steps):
        if op == "enqueue":
            status = enqueue(queue, acct, None, (bytearray(length), 0, tc), length, False, 10**9)
            assert bool(status) is expected, (op, tc, length)
            drops += not status
            due = bool(status & XOFF_DUE)
        else:
            due = getattr(acct, op)(tc, length)
            assert due is expected, (op, tc, length)
        if op != "release" and due:
            acct.xoff_sent(tc, float(at))
        elif op == "release" and due:
            acct.xon_sent(tc)
    assert acct.headroom_drops[3] == drops


def test_xon_at_zero_threshold_fires_when_empty() -> None:
    # xon 0: "below xon" can never hold, an empty buffer still resumes the upstream.
    acct = IngressAccounting(LAB)
    acct.configure(
        BufferConfig(xoff_bytes=100, xon_bytes=0, headroom_bytes=0, queue_limit_bytes=1),
        [True] * 8,
    )
    assert acct.charge(5, 101)
    acct.xoff_sent(5, 0.0)
    assert not acct.release(5, 100)
    assert acct.release(5, 1)
    assert acct.watermark_bytes[5] == 101 and acct.buffered_bytes[5] == 0


def test_xoff_is_refreshed_at_half_its_pause_time() -> None:
    acct = IngressAccounting(LAB)
    acct.configure(
        BufferConfig(xoff_bytes=1, xon_bytes=0, headroom_bytes=0, queue_limit_bytes=1),
        [True] * 8,
    )
    interval = pause_duration(0xFFFF, LAB) * REFRESH_FRACTION  # 1.678 s at 10 Mb/s
    assert acct.next_refresh() is None
    acct.xoff_sent(3, 10.0)
    acct.xoff_sent(6, 11.0)
    assert acct.next_refresh() == pytest.approx(10.0 + interval)
    assert acct.refresh_due(10.0 + interval - 1e-6) == []
    assert acct.refresh_due(10.0 + interval) == [3]
    assert acct.refresh_due(11.0 + interval) == [3, 6]
    acct.xon_sent(3)
    assert acct.refresh_due(20.0) == [6]


def test_a_priority_no_longer_lossless_must_be_released() -> None:
    acct = IngressAccounting(LAB)
    buffer = BufferConfig(xoff_bytes=10, xon_bytes=5, headroom_bytes=5, queue_limit_bytes=1)
    acct.configure(buffer, [tc in (3, 4) for tc in range(8)])
    acct.xoff_sent(3, 0.0)
    acct.xoff_sent(4, 0.0)
    assert acct.configure(buffer, [tc == 4 for tc in range(8)]) == [3]


# A NIC sender honouring PFC for its priority (a RoCE NIC stops the paused priority; module
# docstring of lossless.pfc): frames (time, quanta), run end, expected paused seconds, and
# (time, paused?) checks.  10 Mb/s: 100 quanta = 5.12 ms.
HONOURING = [
    ("one XOFF", [(0.0, 100)], 1.0, 5.12e-3, [(5e-3, True), (5.2e-3, False)]),
    ("a refresh replaces the running pause", [(0.0, 100), (2e-3, 100)], 1.0, 7.12e-3, []),
    ("a shorter refresh shortens it", [(0.0, 100), (1e-3, 10)], 1.0, 1.512e-3, [(1.6e-3, False)]),
    ("XON ends it", [(0.0, 100), (1e-3, 0)], 1.0, 1e-3, [(1e-3, False)]),
    ("the run ends during a pause", [(0.0, 100)], 3e-3, 3e-3, []),
    ("a lone XON pauses nothing", [(0.5, 0)], 1.0, 0.0, [(0.5, False)]),
]


@pytest.mark.parametrize(
    ("frames", "end", "paused_s", "checks"),
    [row[1:] for row in HONOURING],
    ids=[row[0] for row in HONOURING],
)
def test_sender_pause_honouring(
    frames: list[tuple[float, int]],
    end: float,
    paused_s: float,
    checks: list[tuple[float, bool]],
) -> None:
    pause = PauseHonouring(LAB)
    for at, quanta in frames:
        pause.receive(quanta, at)
    for at, paused in checks:
        assert pause.is_paused(at) is paused, at
    pause.finish(end)
    assert pause.paused_s == pytest.approx(paused_s, abs=1e-12)

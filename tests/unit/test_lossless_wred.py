"""lossless.wred: the WRED-with-ECN marking curve on the instantaneous queue depth.

Vendor semantic: Arista EOS ``random-detect ecn minimum-threshold MIN maximum-threshold MAX
max-mark-probability P`` (weight 0), the same as SONiC/SAI WRED_PROFILE
``green_min_threshold`` / ``green_max_threshold`` / ``green_drop_probability`` with ECN
marking: no marking below MIN, probability rising linearly from 0 at MIN to P at MAX, every
ECN-capable packet marked at and above MAX (Extreme Networks ``random-detect queue-parms``:
"The drop probability increases linearly from 0 just before the minimum threshold, to this
value at the maximum threshold, then goes to 100% for larger queue depths"; the DCQCN
congestion point, Zhu et al. SIGCOMM 2015 section 3.1, Kmin / Kmax / Pmax).
"""

from __future__ import annotations

import math
import random

import pytest

from lossless.config import BufferConfig, EcnConfig
from lossless.pfc import IngressAccounting
from lossless.queues import MARKED, EgressQueue, enqueue, mark_on_dequeue
from lossless.wred import EcnMarker

# (min bytes, max bytes, max-mark-probability %, depth bytes, expected probability)
CURVE = [
    (10_000, 30_000, 40, 0, 0.0),
    (10_000, 30_000, 40, 9_999, 0.0),  # below MIN: never
    (10_000, 30_000, 40, 10_000, 0.0),  # linear from 0 at MIN
    (10_000, 30_000, 40, 15_000, 0.1),
    (10_000, 30_000, 40, 20_000, 0.2),  # halfway: P / 2
    (10_000, 30_000, 40, 29_999, 0.4 * 19_999 / 20_000),
    (10_000, 30_000, 40, 30_000, 1.0),  # at MAX: every ECT packet
    (10_000, 30_000, 40, 1_000_000, 1.0),
    (0, 100, 100, 50, 0.5),
    (150_000, 1_500_000, 0, 1_000_000, 0.0),  # P 0: only the step at MAX marks
    (150_000, 1_500_000, 0, 1_500_000, 1.0),
    (5_000, 5_000, 20, 4_999, 0.0),  # MIN == MAX: a step, no ramp
    (5_000, 5_000, 20, 5_000, 1.0),
]


@pytest.mark.parametrize(("low", "high", "percent", "depth", "probability"), CURVE)
def test_marking_probability_curve(
    low: int, high: int, percent: int, depth: int, probability: float
) -> None:
    marker = EcnMarker(EcnConfig(min_bytes=low, max_bytes=high, max_probability=percent))
    assert marker.probability(depth) == pytest.approx(probability, abs=1e-12)


# The random draw follows the curve: (min, max, %, depth, expected marked fraction).
DRAWS = [
    (0, 100, 50, 50, 0.25),
    (10_000, 30_000, 40, 20_000, 0.2),
    (10_000, 30_000, 100, 25_000, 0.75),
    (10_000, 30_000, 40, 5_000, 0.0),
    (10_000, 30_000, 40, 30_000, 1.0),
]


@pytest.mark.parametrize(("low", "high", "percent", "depth", "fraction"), DRAWS)
def test_marking_draws_follow_the_curve(
    low: int, high: int, percent: int, depth: int, fraction: float
) -> None:
    draws = 20_000
    marker = EcnMarker(
        EcnConfig(min_bytes=low, max_bytes=high, max_probability=percent), random.Random(7)
    )
    marked = sum(marker.should_mark(depth) for _ in range(draws))
    # 4 standard deviations of a binomial, exact at 0 and 1.
    tolerance = 4 * math.sqrt(fraction * (1 - fraction) / draws)
    assert marked / draws == pytest.approx(fraction, abs=tolerance)


# ------------------------------------------------------------------ enqueue or dequeue


def _queue_of(lengths: list[int], at_dequeue: bool) -> tuple[EgressQueue[bytearray], list[int]]:
    """Frames of ``lengths`` through one queue under a step marker at 3 000 bytes: every frame
    queued first, then all sent; the indices of the frames marked, and the queue."""
    marker = EcnMarker(EcnConfig(min_bytes=3000, max_bytes=3000, max_probability=100,
                                 at_dequeue=at_dequeue))  # fmt: skip
    ingress = IngressAccounting(10e9)
    ingress.configure(
        BufferConfig(xoff_bytes=10**9, xon_bytes=10**9, headroom_bytes=0, queue_limit_bytes=1),
        [False] * 8,
    )
    queue: EgressQueue[bytearray] = EgressQueue()
    marked = []
    for index, length in enumerate(lengths):
        frame = bytearray([index]) * length
        if enqueue(queue, ingress, marker, (frame, 0, 3), length, True, 10**9) & MARKED:
            marked.append(index)
    while queue.packets:
        frame, _, _ = queue.pop()
        if marker.at_dequeue and mark_on_dequeue(queue, marker):
            marked.append(frame[0])
    return queue, marked


def test_at_enqueue_a_frame_is_marked_by_the_depth_it_finds() -> None:
    queue, marked = _queue_of([1000] * 6, at_dequeue=False)
    assert marked == [3, 4, 5]  # frames 3-5 arrive to 3 000+ bytes queued
    assert queue.ecn_marked == 3


def test_at_dequeue_a_frame_is_marked_by_the_depth_it_leaves_behind() -> None:
    """HPCC's ns-3 and htsim: the departing frame carries the mark, so the first frames out
    of a long queue carry it -- the receiver hears of the queue one queueing delay sooner."""
    queue, marked = _queue_of([1000] * 6, at_dequeue=True)
    assert marked == [0, 1, 2]  # 5 000, 4 000 and 3 000 bytes behind them
    assert queue.ecn_marked == 3


def test_a_dequeue_marker_never_marks_on_enqueue() -> None:
    marker = EcnMarker(EcnConfig(min_bytes=0, max_bytes=1, max_probability=100, at_dequeue=True))
    ingress = IngressAccounting(10e9)
    queue: EgressQueue[bytearray] = EgressQueue()
    queue.push((bytearray(5000), 0, 3))
    status = enqueue(queue, ingress, marker, (bytearray(100), 0, 3), 100, True, 10**9)
    assert status and not status & MARKED and queue.ecn_marked == 0

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

from lossless.config import EcnConfig
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

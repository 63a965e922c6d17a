"""locate's statistics (issue #30): probes to detect a loss rate, Wald's SPRT, the Wilson
interval. The error rates are checked by simulation: seeded binomial draws, counted."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.observe.locate.stats import Sprt, loss_interval, probes_to_detect

RUNS = 400  # simulated tests per example


def binomial(rng: random.Random, n: int, p: float) -> int:
    """An exact Binomial(n, p) draw from geometric gaps between losses (inverse transform):
    O(losses), so thousands of probes at sub-percent rates cost a few draws."""
    if p <= 0:
        return 0
    log_q = math.log1p(-p)
    count, position = 0, 0
    while True:
        position += int(math.log(1.0 - rng.random()) / log_q) + 1
        if position > n:
            return count
        count += 1


def run_sprt(rng: random.Random, test: Sprt, p: float, batch: int, limit: int = 200_000) -> str:
    """Feed ``test`` batches of ``batch`` probes lost at rate ``p`` until it decides."""
    while test.decision is None and test.sent < limit:
        test.update(batch, binomial(rng, batch, p))
    return test.decision or "none"


def bound(rate: float, runs: int) -> float:
    """Errors allowed in ``runs`` trials whose true error rate is at most ``rate``: the mean
    plus four standard deviations (a correct test exceeds it with probability < 1e-4)."""
    return runs * rate + 4 * math.sqrt(runs * rate * (1 - rate)) + 1


# --------------------------------------------------------------------------- probes_to_detect


@pytest.mark.parametrize(
    ("loss", "confidence", "expected"),
    [
        (0.01, 0.95, 299),  # ln 0.05 / ln 0.99 = 298.07
        (0.005, 0.95, 598),
        (0.02, 0.95, 149),
        (0.05, 0.99, 90),
        (0.5, 0.5, 1),
        (0.5, 0.75, 2),  # exactly 1 - 0.5**2: the boundary itself counts
    ],
)
def test_probes_to_detect_table(loss: float, confidence: float, expected: int) -> None:
    assert probes_to_detect(loss, confidence) == expected


@given(
    loss=st.floats(min_value=1e-4, max_value=0.5),
    confidence=st.floats(min_value=0.5, max_value=0.999),
)
def test_probes_to_detect_is_the_smallest_that_detects(loss: float, confidence: float) -> None:
    n = probes_to_detect(loss, confidence)
    assert 1 - (1 - loss) ** n >= confidence
    assert n == 1 or 1 - (1 - loss) ** (n - 1) < confidence


@pytest.mark.parametrize(
    ("loss", "confidence"), [(0.0, 0.95), (1.0, 0.95), (0.01, 0.0), (0.01, 1.0), (0.01, 1.5)]
)
def test_probes_to_detect_refuses_rates_outside_0_1(loss: float, confidence: float) -> None:
    with pytest.raises(ValueError, match="Expected: 0 <"):
        probes_to_detect(loss, confidence)


@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from([0.005, 0.01, 0.02, 0.05]))
@settings(max_examples=10, deadline=None, derandomize=True)
def test_probes_to_detect_misses_at_most_one_minus_confidence(seed: int, loss: float) -> None:
    rng = random.Random(seed)
    n = probes_to_detect(loss, 0.95)
    misses = sum(binomial(rng, n, loss) == 0 for _ in range(RUNS))
    assert misses <= bound(0.05, RUNS)


# --------------------------------------------------------------------------- SPRT


def test_sprt_boundaries_and_steps_are_walds() -> None:
    test = Sprt(0.00125, 0.005, 0.95)
    assert test.alpha == pytest.approx(0.05) and test.beta == pytest.approx(0.05)
    assert test.upper == pytest.approx(math.log(19)) and test.lower == pytest.approx(-math.log(19))
    # All arriving: ln 19 / ln(0.99875 / 0.995) = 782.7 probes to decide "clean".
    assert test.min_probes() == 783
    assert test.update(782, 0) is None
    assert test.update(1, 0) == "h0" and test.decided_at == 783
    # Decided stays decided; the counts still add up.
    assert test.update(100, 100) == "h0" and (test.sent, test.lost) == (883, 100)


def test_sprt_decides_lossy_quickly_on_heavy_loss() -> None:
    test = Sprt.for_min_loss(0.01, 0.95)
    assert (test.p0, test.p1) == (0.0025, 0.01)
    assert test.update(10, 3) == "h1"  # 3 ln 4 = 4.16 > ln 19 = 2.94


@pytest.mark.parametrize(
    ("p0", "p1", "confidence"), [(0.0, 0.01, 0.95), (0.01, 0.01, 0.95), (0.02, 0.01, 0.95),
                                 (0.001, 0.01, 1.0), (0.001, 1.0, 0.95)],
)  # fmt: skip
def test_sprt_refuses_bad_settings(p0: float, p1: float, confidence: float) -> None:
    with pytest.raises(ValueError, match="Expected"):
        Sprt(p0, p1, confidence)


def test_sprt_refuses_more_lost_than_sent() -> None:
    with pytest.raises(ValueError, match="Expected: 0 <= lost <= sent"):
        Sprt(0.001, 0.01).update(3, 4)


def test_sprt_operating_characteristic_is_one_minus_alpha_at_p0_and_beta_at_p1() -> None:
    test = Sprt(0.0025, 0.01, 0.9)
    assert test.operating_characteristic(0.0025) == pytest.approx(0.9, abs=1e-6)
    assert test.operating_characteristic(0.01) == pytest.approx(0.1, abs=1e-6)
    assert test.operating_characteristic(0.0) == 1.0
    assert test.expected_n(0.0) == pytest.approx(math.log(9) / -math.log(0.99 / 0.9975))


@given(
    seed=st.integers(0, 2**32 - 1),
    min_loss=st.sampled_from([0.005, 0.01, 0.02, 0.05]),
    confidence=st.sampled_from([0.9, 0.95, 0.99]),
    batch=st.sampled_from([1, 25, 200]),
)
@settings(max_examples=12, deadline=None, derandomize=True)
def test_sprt_false_alarms_at_most_alpha_at_p0(
    seed: int, min_loss: float, confidence: float, batch: int
) -> None:
    """A path exactly at the clean bound p0 is called lossy at most alpha of the time, when
    the test looks only after each batch (a round of the mesh) too."""
    rng = random.Random(seed)
    errors = sum(
        run_sprt(rng, Sprt.for_min_loss(min_loss, confidence), min_loss / 4, batch) == "h1"
        for _ in range(RUNS)
    )
    assert errors <= bound(1 - confidence, RUNS), errors


@given(
    seed=st.integers(0, 2**32 - 1),
    min_loss=st.sampled_from([0.005, 0.01, 0.02, 0.05]),
    confidence=st.sampled_from([0.9, 0.95, 0.99]),
    batch=st.sampled_from([1, 25, 200]),
)
@settings(max_examples=12, deadline=None, derandomize=True)
def test_sprt_misses_at_most_beta_at_p1(
    seed: int, min_loss: float, confidence: float, batch: int
) -> None:
    """A path losing exactly min_loss is called clean at most beta of the time."""
    rng = random.Random(seed)
    errors = sum(
        run_sprt(rng, Sprt.for_min_loss(min_loss, confidence), min_loss, batch) == "h0"
        for _ in range(RUNS)
    )
    assert errors <= bound(1 - confidence, RUNS), errors


@given(seed=st.integers(0, 2**32 - 1), p=st.sampled_from([0.0, 0.00125, 0.005, 0.02]))
@settings(max_examples=8, deadline=None, derandomize=True)
def test_sprt_average_sample_number_is_walds(seed: int, p: float) -> None:
    """The probes it takes on average agree with Wald's ASN (within the overshoot a batch
    of 25 adds, and the sampling error of the mean)."""
    rng = random.Random(seed)
    sizes = []
    for _ in range(200):
        test = Sprt.for_min_loss(0.005, 0.95)
        run_sprt(rng, test, p, 25)
        assert test.decided_at is not None
        sizes.append(test.decided_at)
    mean = sum(sizes) / len(sizes)
    expected = Sprt.for_min_loss(0.005, 0.95).expected_n(p)
    assert expected * 0.75 - 25 <= mean <= expected * 1.25 + 50, (mean, expected)


def test_sprt_remaining_counts_down_to_the_clean_boundary() -> None:
    test = Sprt.for_min_loss(0.005, 0.95)
    assert test.remaining(0.0) == pytest.approx(test.lower / test.drift(0.0))
    test.update(400, 0)
    assert test.remaining(0.0) == pytest.approx(test.min_probes() - 400, abs=1)
    assert test.remaining(0.05) > 0  # heading for "lossy" instead
    test.update(400, 0)
    assert test.decision == "h0" and test.remaining(0.0) == 0


# --------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("sent", "lost", "low", "high"),
    # Newcombe, "Two-sided confidence intervals for the single proportion", Stat. Med. 17
    # (1998) 857-872, Table I, method 3 (Wilson score, no continuity correction).
    [(263, 81, 0.2553, 0.3662), (148, 15, 0.0624, 0.1605), (20, 0, 0.0, 0.1611),
     (29, 1, 0.0061, 0.1718)],
)  # fmt: skip
def test_wilson_interval_matches_newcombes_table(
    sent: int, lost: int, low: float, high: float
) -> None:
    got = loss_interval(sent, lost, 0.95)
    assert got == pytest.approx((low, high), abs=1e-4)


@given(sent=st.integers(1, 100_000), share=st.floats(0, 1), confidence=st.floats(0.5, 0.999))
def test_wilson_interval_holds_the_estimate_inside_0_1(
    sent: int, share: float, confidence: float
) -> None:
    lost = round(share * sent)
    low, high = loss_interval(sent, lost, confidence)
    assert 0 <= low <= lost / sent <= high <= 1
    wider = loss_interval(sent, lost, min(0.9999, confidence + (1 - confidence) / 2))
    assert wider[0] <= low and high <= wider[1]


@given(
    seed=st.integers(0, 2**32 - 1),
    p=st.sampled_from([0.005, 0.01, 0.02, 0.05]),
    sent=st.sampled_from([1000, 4000]),
)
@settings(max_examples=10, deadline=None, derandomize=True)
def test_wilson_interval_covers_the_true_rate(seed: int, p: float, sent: int) -> None:
    """Coverage near nominal where n·p >= 5 (Brown, Cai and DasGupta 2001, §4.1: Wilson's
    coverage dips a few points below nominal at worst): misses <= 2 (1 - c) + sampling."""
    rng = random.Random(seed)
    misses = 0
    for _ in range(RUNS):
        low, high = loss_interval(sent, binomial(rng, sent, p), 0.95)
        misses += not low <= p <= high
    assert misses <= bound(0.1, RUNS), misses


def test_the_docs_table_is_the_one_the_code_computes() -> None:
    """docs/locate.md's "Statistics" table, regenerated: the page cannot drift from stats.py."""
    from pathlib import Path

    from agent.observe.locate.stats import probes_table

    page = (Path(__file__).parents[2] / "docs" / "locate.md").read_text()
    assert probes_table() in page

"""DCQCN reaction point stepping with a fake clock (Zhu et al. SIGCOMM'15, section 3.1)."""

from __future__ import annotations

import pytest

from agent.intent import sizing
from lossless.dcqcn import DcqcnReactionPoint

LINE = 100e6


def rp(**overrides: int) -> DcqcnReactionPoint:
    return DcqcnReactionPoint(LINE, {**sizing.dcqcn_nic_defaults(), **overrides})


def test_first_cnp_halves_the_rate() -> None:
    point = rp()
    assert point.on_cnp(0.0)
    # alpha starts at 1023/1024 and rpg_gd 11 divides it by 2048: a cut of ~50 %
    assert point.current_bps == pytest.approx(LINE * (1 - 1023 / 2048))
    assert point.target_bps == LINE


def test_cuts_are_limited_by_monitor_period_and_min_dec_fac() -> None:
    point = rp(rate_reduce_monitor_period=1000, rpg_min_dec_fac=10)
    assert point.on_cnp(0.0)
    assert point.current_bps == pytest.approx(LINE * 0.9)  # at most 10 % per cut
    assert not point.on_cnp(0.0005)  # within 1 ms of the last cut
    assert point.on_cnp(0.0011)


def test_rate_never_drops_below_min_rate() -> None:
    point = rp(rpg_min_rate=20, rate_reduce_monitor_period=1)
    for i in range(50):
        point.on_cnp(i * 1e-5)
    assert point.current_bps == pytest.approx(20e6)


def test_recovery_without_cnps_returns_to_line_rate() -> None:
    point = rp()
    point.on_cnp(0.0)
    cut = point.current_bps
    point.on_sent(0.0003, 100)  # one timer step: fast recovery, halfway back to target
    assert point.current_bps == pytest.approx((LINE + cut) / 2)
    for step in range(2, 200):
        point.on_sent(step * 0.0003, 100)
    assert point.current_bps == pytest.approx(LINE)


def test_alpha_grows_with_repeated_cnps_and_decays_without() -> None:
    point = rp(initial_alpha_value=512, rate_reduce_monitor_period=1)
    point.on_cnp(0.0)
    after_one = point.alpha
    point.on_cnp(0.00001)
    assert point.alpha > after_one
    point.on_sent(0.1, 0)  # 100 ms without CNPs: many alpha periods
    assert point.alpha < after_one

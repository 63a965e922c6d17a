from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.intent.units import (
    SPEED_MAX_BPS,
    SPEED_MIN_BPS,
    UnitError,
    format_rate,
    format_size,
    format_speed,
    parse_size,
    parse_speed,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("10M", 10_000_000),
        ("100M", 100_000_000),
        ("25G", 25_000_000_000),
        ("100G", 100_000_000_000),
        ("400G", 400_000_000_000),
        ("800G", 800_000_000_000),
        ("2.5G", 2_500_000_000),
        ("40Gbps", 40_000_000_000),
        ("1M", 1_000_000),
        (1_000_000, 1_000_000),
        (800_000_000_000, 800_000_000_000),
    ],
)
def test_parse_speed(text: str | int, bps: int) -> None:
    assert parse_speed(text) == bps


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "expected a speed"),
        ("fast", "expected a speed"),
        ("100Q", "expected a speed"),
        ("-1G", "expected a speed"),
        ("0", "from 1M to 800G"),
        (0, "from 1M to 800G"),
        (True, "expected a speed"),
        ("1.5", "whole number"),
        # below 1M: no real RoCE link; above 800G: no known pause reaction delay
        (1, "from 1M to 800G Actual: 1"),
        (1000, "from 1M to 800G"),
        ("999K", "from 1M to 800G"),
        ("1T", "from 1M to 800G Actual: '1T'"),
        ("1.6T", "from 1M to 800G"),
        (10**30, "from 1M to 800G"),
        # ASCII digits only: float() and \\d take these
        ("１００G", "expected a speed"),
        ("\u0661\u0660G", "expected a speed"),
        ("9" * 5000 + "G", "expected a speed"),
    ],
)
def test_parse_speed_rejects(text: str | int, words: str) -> None:
    with pytest.raises(UnitError, match=re.escape(words)):
        parse_speed(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("150KB", 150_000),
        ("1.5MB", 1_500_000),
        ("150000", 150_000),
        (150000, 150_000),
        ("64KiB", 65_536),
        ("1MiB", 1_048_576),
        ("9000B", 9000),
        ("0", 0),
    ],
)
def test_parse_size(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "text",
    ["15 parsecs", "1.5", "KB", "-5KB", -1, False, "1.0000001KB", "１５０KB", "9" * 5000],
)
def test_parse_size_rejects(text: str | int) -> None:
    with pytest.raises(UnitError):
        parse_size(text)


@given(st.integers(min_value=0, max_value=2**40))
@example(16100)  # "16.1KB": 16.1 * 1000 is not 16100 in binary floating point
def test_format_size_round_trips(size: int) -> None:
    assert parse_size(format_size(size)) == size


@given(st.integers(min_value=SPEED_MIN_BPS, max_value=SPEED_MAX_BPS))
def test_format_speed_round_trips(bps: int) -> None:
    assert parse_speed(format_speed(bps)) == bps


@pytest.mark.parametrize(
    ("bps", "places", "trim", "text"),
    [
        (97.73e9, 2, False, "97.73 Gb/s"),
        (9.7e6, 2, False, "9.70 Mb/s"),  # a lab link: not "0.01 Gb/s"
        (100e9, 2, True, "100 Gb/s"),
        (400e9, 2, False, "400.00 Gb/s"),
        (1.6e12, 1, False, "1.6 Tb/s"),
        (999.0, 0, False, "999 b/s"),
        (25_000.0, 2, True, "25 kb/s"),
    ],
)
def test_format_rate(bps: float, places: int, trim: bool, text: str) -> None:
    assert format_rate(bps, places, trim) == text

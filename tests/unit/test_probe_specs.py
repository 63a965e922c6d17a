"""A sender's spec refuses what would make it never stop or never start: table-driven."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from agent.observe.probes.sender import MAX_START_WAIT_S, SendSpec

BASE: dict[str, Any] = {"ifname": "eth1", "dst_ip": "198.18.0.13", "rate_bps": 1000,
                        "link_speed_bps": 10_000, "count": 1}  # fmt: skip

# (extra fields, seconds from now for start_at or None, error expected: a phrase of it)
CASES: list[tuple[dict[str, Any], float | None, str | None]] = [
    ({}, None, None),
    ({}, 2.0, None),  # an incast's agreed start, a little ahead
    ({}, -1.0, None),  # just missed: starts at once and reports how late
    ({}, MAX_START_WAIT_S * 2, "start_at"),  # would sit idle for minutes
    ({}, -MAX_START_WAIT_S * 2, "start_at"),  # a clock far off: the incast is not synchronised
    ({}, math.nan, "start_at"),
    ({"rate_bps": 20_000}, None, "rate_bps"),
    ({"count": None}, None, "count or duration_s"),
    ({"priority": 8}, None, "priority"),
]


@pytest.mark.parametrize(("extra", "start_in", "error"), CASES)
def test_send_spec(extra: dict[str, Any], start_in: float | None, error: str | None) -> None:
    fields = {**BASE, **extra}
    if start_in is not None:
        fields["start_at"] = time.time() + start_in
    if error is None:
        assert SendSpec(**fields).start_at == fields.get("start_at")
        return
    with pytest.raises(ValueError, match=error):
        SendSpec(**fields)

"""Click parameter types shared by the agent's and the lab's command lines."""

from __future__ import annotations

import math
import re
from typing import Any

import click


class FiniteFloat(click.types.FloatParamType):
    """A float option that refuses nan and inf (``float()`` takes both, and an interval of
    nan seconds makes every comparison false) and values outside ``[min, max]``
    (``min_open``: the minimum itself is refused too, e.g. an interval of 0). A
    FloatParamType, so help and shell completion treat it as the float it is."""

    name = "float"

    def __init__(
        self, min: float | None = None, max: float | None = None, *, min_open: bool = False
    ) -> None:
        self.min, self.max, self.min_open = min, max, min_open

    def parse(self, value: str | float) -> float:
        """The number, or ValueError with the house-style message (also for NAME=S values)."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"Expected: a number Actual: {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"Expected: a finite number Actual: {value!r}")
        low_bad = self.min is not None and (
            number <= self.min if self.min_open else number < self.min
        )
        if low_bad or (self.max is not None and number > self.max):
            raise ValueError(f"Expected: {self.describe()} Actual: {number:g}")
        return number

    def describe(self) -> str:
        low = "" if self.min is None else f"{self.min:g} {'<' if self.min_open else '<='} "
        high = "" if self.max is None else f" <= {self.max:g}"
        return f"{low}x{high}" if low or high else "a finite number"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            return self.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def __repr__(self) -> str:
        return f"FiniteFloat({self.describe()})"


_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(s|ms|us|µs|ns)\s*$")
_DURATION_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class Duration(click.ParamType[float]):
    """A time with its unit: ``10ms``, ``250us``, ``2s``; more than 0 and at most ``max_s``.

    A bare number is refused: ``--duration 10`` has meant ten seconds to some users and ten
    milliseconds to others, and the difference is a run a thousand times longer.
    """

    name = "duration"

    def __init__(self, max_s: float) -> None:
        self.max_s = max_s

    def parse(self, value: str) -> float:
        """Seconds, or ValueError with the house-style message."""
        match = _DURATION_RE.match(value)
        if match is None:
            raise ValueError(
                "Expected: a duration with its unit -- s, ms, us or ns, e.g. 10ms or 2s "
                f"Actual: {value!r}"
            )
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        if not (math.isfinite(seconds) and 0 < seconds <= self.max_s):
            raise ValueError(
                f"Expected: more than 0 and at most {_seconds_text(self.max_s)} Actual: {value!r}"
            )
        return seconds

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value  # already converted (a default given in seconds)
        try:
            return self.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _seconds_text(seconds: float) -> str:
    """``0.1`` -> ``100ms``, ``10`` -> ``10s``: a bound in the unit a user would type."""
    if seconds >= 1:
        return f"{seconds:g}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds * 1e6:g}us"

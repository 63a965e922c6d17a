"""Click parameter types shared by the agent's and the lab's command lines."""

from __future__ import annotations

import math
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

"""Where the model gets "now" from: the one place in :mod:`lossless` that may read a real clock.

Every rule of the package takes the time as an argument (seconds, a float that only ever
grows).  Whoever drives the model chooses the clock: the lab switch and the probe sender and
receiver use :class:`WallClock` (``time.monotonic``, immune to NTP steps, the same clock their
``select`` timeouts are measured against); a discrete-event run moves a simulated clock from
event to event: :class:`TickClock` (integer picoseconds, the twin's) or :class:`VirtualClock`
(float seconds).

Why integers for a simulation: an event time is a sum of many frame times, cable delays and
pacing gaps.  Summed as floats, two paths to the same instant round differently, and an effect
computed from one can land a few ulps before the cause computed from the other.  Summed as
integers they are exact.  The model's rules still take seconds: :meth:`TickClock.now` gives
them, and a deadline a rule returns in seconds comes back with :func:`ticks_at_or_after`.
"""

from __future__ import annotations

import math
import time
from typing import Final, Protocol


class Clock(Protocol):
    """Source of the current time in seconds."""

    def now(self) -> float:
        """Seconds on this clock's own scale (only differences mean anything)."""
        ...


class WallClock:
    """Real time: the host's monotonic clock (never stepped by NTP)."""

    __slots__ = ()

    def now(self) -> float:
        """Seconds since an arbitrary point (the host's monotonic clock)."""
        return time.monotonic()


class VirtualClock:
    """Simulated time, moved only by its owner; it never runs backwards."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        """The time last set."""
        return self._now

    def set(self, when: float) -> None:
        """Jump to ``when`` (an event's time); refuses to go back, which would reorder causes."""
        if when < self._now:
            raise ValueError(
                f"virtual clock: time cannot go back. Expected: >= {self._now!r} Actual: {when!r}"
            )
        self._now = when

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds`` (>= 0)."""
        if seconds < 0:
            raise ValueError(
                f"virtual clock: cannot advance by a negative time. Expected: >= 0 "
                f"Actual: {seconds!r}"
            )
        self._now += seconds


TICKS_PER_SECOND: Final = 10**12
"""One tick is a picosecond: a byte at 800 Gb/s is 10 ticks, at 400 Gb/s 20."""


def to_ticks(seconds: float) -> int:
    """A time someone chose (a run length, a start, a sampling interval): the nearest tick."""
    return round(seconds * TICKS_PER_SECOND)


def ticks_at_or_after(seconds: float) -> int:
    """The first tick whose time in seconds is at or after ``seconds``.

    For deadlines a model rule returns in seconds (a pause's end, the next refresh): woken at
    that tick, the rule sees its deadline reached, so a wake is never spent too early (and
    repeated).  ``seconds * TICKS_PER_SECOND`` may round either way, hence the two corrections.
    """
    ticks = math.ceil(seconds * TICKS_PER_SECOND)
    if ticks / TICKS_PER_SECOND < seconds:
        ticks += 1
    elif (ticks - 1) / TICKS_PER_SECOND >= seconds:
        ticks -= 1
    return ticks


def ticks_up(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` ticks rounded up, in exact integer arithmetic (a frame's
    bits times ``TICKS_PER_SECOND`` over the port's speed: never faster than the line)."""
    return -(-numerator // denominator)


class TickClock:
    """Simulated time in integer ticks (picoseconds), moved only by its owner; never backwards.

    ``ticks`` is the time as its owner schedules it; :meth:`now` is the same instant in
    seconds (the :class:`Clock` the model's rules take).
    """

    __slots__ = ("ticks",)

    def __init__(self, start: int = 0) -> None:
        self.ticks = start

    def now(self) -> float:
        """Seconds: the tick count over :data:`TICKS_PER_SECOND` (correctly rounded)."""
        return self.ticks / TICKS_PER_SECOND

    def set(self, ticks: int) -> None:
        """Jump to ``ticks`` (an event's time); refuses to go back, which would reorder causes."""
        if ticks < self.ticks:
            raise ValueError(
                f"tick clock: time cannot go back. Expected: >= {self.ticks} ps Actual: {ticks} ps"
            )
        self.ticks = ticks

"""Where the model gets "now" from: the one place in :mod:`lossless` that may read a real clock.

Every rule of the package takes the time as an argument (seconds, a float that only ever
grows).  Whoever drives the model chooses the clock: the lab switch and the probe sender and
receiver use :class:`WallClock` (``time.monotonic``, immune to NTP steps, the same clock their
``select`` timeouts are measured against); a discrete-event run uses :class:`VirtualClock`
and moves it from event to event.
"""

from __future__ import annotations

import time
from typing import Protocol


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

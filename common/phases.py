"""Timed phases of one run (ANTA's runner times its steps with ``Catchtime`` the same way).

A run that reports where its time went (locate, perftest, the fault drill) opens one
:class:`Phases` and wraps each step: ``with phases("paths"): ...``. The durations land in
``phases.durations`` in the order the phases first ran; a phase entered twice adds up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Phases:
    """Seconds per named phase, measured on ``clock`` (monotonic wall time by default)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.durations: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = self._clock()
        try:
            yield
        finally:
            self.durations[name] = self.durations.get(name, 0.0) + self._clock() - start

    @property
    def total(self) -> float:
        return sum(self.durations.values())

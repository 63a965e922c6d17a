"""Waiting for a condition a test cannot be told about."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.05
) -> bool:
    """Poll ``predicate()`` until it holds or ``timeout`` seconds pass; whether it held (asked
    once more at the deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())

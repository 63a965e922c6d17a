"""Stopping a run that owns a lab: SIGTERM and SIGHUP unwind like ^C.

By default SIGTERM (``timeout(1)``, a cancelled CI job, a killed process group) ends Python at
once: no ``finally`` runs, and a lab started by a test or a bench stays up, its namespaces
and switch processes orphaned. Raised as :class:`KeyboardInterrupt` in the main thread, the
signal unwinds the stack instead, so every ``finally`` and fixture teardown stops what it
started (pytest tears its fixtures down on KeyboardInterrupt). Only SIGKILL can still leave
a lab behind; ``roce-agent lab down --lab NAME --state-dir DIR`` removes it.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def unwind_on_termination() -> list[signal.Signals]:
    """Make SIGTERM and SIGHUP raise KeyboardInterrupt, where nobody else handles them yet.

    Only in the main thread (the only one Python delivers signals to); returns the signals
    it took over."""
    if threading.current_thread() is not threading.main_thread():
        return []
    taken = []
    for signum in TERMINATING:
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _interrupt)
            taken.append(signum)
    return taken

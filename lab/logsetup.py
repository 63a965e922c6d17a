"""Logging of the lab's long-running processes (vswitch, management plane, VM NIC), and how
they stop: SIGTERM or SIGINT, logged, asks the process to stop at its next loop."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from types import FrameType

FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def setup_logging(log_file: str | None, level: str, loggers: dict[str, str]) -> None:
    """Send ``loggers`` (name → level; ``""`` takes ``level``) to ``log_file`` or stderr."""
    handler: logging.Handler = (
        logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter(FORMAT))
    for name, own_level in loggers.items():
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(own_level or level)


def stop_on_signals(request_stop: Callable[[], None], log: logging.Logger) -> None:
    """SIGTERM and SIGINT log their name and call ``request_stop`` (which only sets a flag:
    the process's own loop stops and cleans up)."""

    def _stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        request_stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

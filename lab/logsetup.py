"""Logging of the lab's long-running processes (vswitch, management plane)."""

from __future__ import annotations

import logging
import sys

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

"""The error every NVUE command raises when it refuses: its text is what the terminal prints."""

from __future__ import annotations


class NvueError(Exception):
    """A refused ``nv`` command; ``str(exc)`` is NVUE's message (``Error: …``)."""

"""Reading numbers out of text that other programs (or hostile inputs) wrote."""

from __future__ import annotations


def is_decimal(text: str) -> bool:
    """ASCII digits only. ``str.isdigit`` also accepts ``'²'`` and other Unicode digits that
    ``int()`` refuses, so a parser that checks with it can still raise ValueError."""
    return text.isascii() and text.isdigit()

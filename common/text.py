"""Reading numbers out of text that other programs (or hostile inputs) wrote, and putting
names with numbers in the order people read them (:func:`natural_key`)."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"([0-9]+)")


def is_decimal(text: str) -> bool:
    """ASCII digits only. ``str.isdigit`` also accepts ``'²'`` and other Unicode digits that
    ``int()`` refuses, so a parser that checks with it can still raise ValueError."""
    return text.isascii() and text.isdigit()


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key: ``swp2`` before ``swp10``, ``Ethernet1/2`` before ``Ethernet1/10``,
    ``leaf9:Ethernet1`` before ``leaf10:Ethernet1`` -- each run of ASCII digits compared as a
    number, the text between as text.

    The numbers are compared by their digits (fewer significant digits first, then the
    digits), never converted: a name of 5 000 digits sorts in linear time, where ``int()``
    refuses more than 4 300 digits.  Equal numbers with more leading zeros come after
    (``eth01`` after ``eth1``), so the order is total.  The one key of every port list and table
    the agent and the lab print (the platforms, LLDP discovery, the lab's SONiC commands).
    """
    parts = _DIGITS.split(name)
    return tuple(
        part if index % 2 == 0 else (len(part.lstrip("0")), part.lstrip("0"), len(part))
        for index, part in enumerate(parts)
    )


def natural_item_key(item: tuple[str, object]) -> tuple[object, ...]:
    """:func:`natural_key` of a ``(name, value)`` pair's name: ``sorted(d.items(), key=…)``."""
    return natural_key(item[0])

"""What :func:`dataclasses.asdict` makes of a report, without copying long lists of numbers one
element at a time.

A twin report holds its sampled series (thousands of numbers per run: the queue, every flow's
rate, every port's pause); ``asdict`` recurses into each number and deep-copies it, which cost
a 10 ms run more CPU than its JSON encoding.  :func:`plain` gives the same result: dataclasses
become dicts of their fields, lists and dicts are copied with their contents made plain, and a
list of numbers, strings, booleans or None is copied in one step (those are immutable:
``asdict`` deep-copies them into themselves).  Anything else is deep-copied, as ``asdict``
does.
"""

from __future__ import annotations

import copy
from dataclasses import fields, is_dataclass
from typing import Any

_ATOMS = frozenset({int, float, str, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` as :func:`dataclasses.asdict` gives it (for a dataclass instance), or as it
    gives a field of that value (anything else), containers rebuilt as their own type as
    ``asdict`` rebuilds them."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is list and all(type(item) in _ATOMS for item in value):
        return value.copy()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return kind(*[plain(item) for item in value])
    if isinstance(value, list | tuple):
        return kind(plain(item) for item in value)
    if isinstance(value, dict):
        return kind((plain(key), plain(item)) for key, item in value.items())
    return copy.deepcopy(value)

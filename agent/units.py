"""Parsing of the units people write in fabric files: link speeds and buffer sizes.

Sizes use SI prefixes (``KB`` = 1000 bytes, ``MB`` = 10**6) because vendor QoS documents
(Cumulus ``nv set qos``, SONiC ``WRED_PROFILE``) quote thresholds in bytes written that way;
binary prefixes (``KiB``, ``MiB``) are accepted for those who mean them.
"""

from __future__ import annotations

import re

_SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:b/s|bps)?\s*$", re.IGNORECASE)
_SPEED_FACTOR = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_FACTOR = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}


class UnitError(ValueError):
    """A value that is not a well-formed speed or size."""


def parse_speed(value: str | int) -> int:
    """Return a link speed in bits per second from ``10M``, ``25G``, ``400G`` or an int."""
    if isinstance(value, bool):
        raise UnitError(f"expected a speed such as 100G, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise UnitError(f"speed must be positive, got {value}")
        return value
    match = _SPEED_RE.match(value)
    if not match:
        raise UnitError(f"expected a speed such as 10M, 25G, 100G or 400G, got {value!r}")
    number, prefix = match.groups()
    bps = float(number) * _SPEED_FACTOR[prefix.upper()]
    if bps <= 0 or bps != int(bps):
        raise UnitError(f"speed must be a positive whole number of bit/s, got {value!r}")
    return int(bps)


def parse_size(value: str | int) -> int:
    """Return a size in bytes from ``150KB``, ``1.5MB``, ``64KiB``, ``9000`` or an int."""
    if isinstance(value, bool):
        raise UnitError(f"expected a size such as 150KB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise UnitError(f"size must not be negative, got {value}")
        return value
    match = _SIZE_RE.match(value)
    if not match:
        raise UnitError(
            f"expected a size in bytes such as 150000, 150KB, 1.5MB or 64KiB, got {value!r}"
        )
    number, unit = match.groups()
    size = float(number) * _SIZE_FACTOR[(unit or "").upper()]
    if size != int(size):
        raise UnitError(f"size must be a whole number of bytes, got {value!r}")
    return int(size)


def format_speed(bps: int) -> str:
    """Render bits/s the way people write it: ``400G``, ``10M``."""
    for suffix, factor in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if bps >= factor and bps % factor == 0:
            return f"{bps // factor}{suffix}"
    return str(bps)


def format_size(size: int) -> str:
    """Render a byte count compactly without losing precision (``150KB``, ``1.5MB``, ``50176``)."""
    for suffix, factor in (("MB", 10**6), ("KB", 10**3)):
        if size >= factor and (size * 10) % factor == 0:
            whole, tenths = divmod(size * 10 // factor, 10)
            return f"{whole}.{tenths}{suffix}" if tenths else f"{whole}{suffix}"
    return str(size)

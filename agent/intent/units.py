"""Parsing of the units people write in fabric files: link speeds and buffer sizes.

Sizes use SI prefixes (``KB`` = 1000 bytes, ``MB`` = 10**6) because vendor QoS documents
(Cumulus ``nv set qos``, SONiC ``WRED_PROFILE``) quote thresholds in bytes written that way;
binary prefixes (``KiB``, ``MiB``) are accepted for those who mean them.

Digits are ASCII only (``re.ASCII``): ``float()`` and ``\\d`` also take fullwidth ``１００G``,
which no switch CLI would. Numbers are at most 15 digits, so no input reaches the float
overflow or the interpreter's 4 300-digit ``int()`` limit.
"""

from __future__ import annotations

import re
from decimal import Decimal

from common.errors import excerpt

# Possessive (``*+``): the two runs of spaces around the unit could otherwise split a long
# run of spaces every way before failing, quadratic in its length (issue #42). And no text
# longer than MAX_UNIT_TEXT meets them at all.
_SPEED_RE = re.compile(
    r"\s*+(\d{1,15}+(?:\.\d{1,9}+)?+)\s*+([KMGT]?+)(?:b/s|bps)?+\s*+", re.IGNORECASE | re.ASCII
)
_SPEED_FACTOR = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}

_SIZE_RE = re.compile(
    r"\s*+(\d{1,15}+(?:\.\d{1,9}+)?+)\s*+([KMG]i?B|B)?+\s*+", re.IGNORECASE | re.ASCII
)
# "  400.123456789 Gb/s  " is 22 characters; anything much longer is not a speed or a size.
MAX_UNIT_TEXT = 40
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


# The slowest link the lab runs (veth pairs shaped to 10M) down to 1M; up to 800G, the
# fastest speed with a known PFC pause reaction delay (agent.intent.sizing's table). 1.6T links
# are refused until their delay is known: their headroom cannot be computed.
SPEED_MIN_BPS = 10**6
SPEED_MAX_BPS = 800 * 10**9


class UnitError(ValueError):
    """A value that is not a well-formed speed or size."""


def parse_speed(value: str | int) -> int:
    """Return a link speed in bits per second from ``10M``, ``25G``, ``400G`` or an int."""
    if isinstance(value, bool):
        raise UnitError(f"expected a speed such as 100G, got {value!r}")
    if isinstance(value, int):
        bps = value
    else:
        match = _SPEED_RE.fullmatch(value) if len(value) <= MAX_UNIT_TEXT else None
        if not match:
            raise UnitError(
                f"expected a speed such as 10M, 25G, 100G or 400G, got {excerpt(value)}"
            )
        number, prefix = match.groups()
        exact = float(number) * _SPEED_FACTOR[prefix.upper()]
        if exact != int(exact):
            raise UnitError(f"speed must be a whole number of bit/s, got {value!r}")
        bps = int(exact)
    if not SPEED_MIN_BPS <= bps <= SPEED_MAX_BPS:
        raise UnitError(
            f"Expected: a speed from {format_speed(SPEED_MIN_BPS)} to "
            f"{format_speed(SPEED_MAX_BPS)} Actual: {value!r}"
        )
    return bps


def parse_size(value: str | int) -> int:
    """Return a size in bytes from ``150KB``, ``1.5MB``, ``64KiB``, ``9000`` or an int."""
    if isinstance(value, bool):
        raise UnitError(f"expected a size such as 150KB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise UnitError(f"size must not be negative, got {value}")
        return value
    match = _SIZE_RE.fullmatch(value) if len(value) <= MAX_UNIT_TEXT else None
    if not match:
        raise UnitError(
            f"expected a size in bytes such as 150000, 150KB, 1.5MB or 64KiB, got {excerpt(value)}"
        )
    number, unit = match.groups()
    # Decimal, not float: 16.1 * 1000 is 16100.000000000002 in binary floating point.
    size = Decimal(number) * _SIZE_FACTOR[(unit or "").upper()]
    if size != int(size):
        raise UnitError(f"size must be a whole number of bytes, got {value!r}")
    return int(size)


def format_speed(bps: int) -> str:
    """Render bits/s the way people write it: ``400G``, ``10M``."""
    for suffix, factor in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if bps >= factor and bps % factor == 0:
            return f"{bps // factor}{suffix}"
    return str(bps)


def format_rate(bps: float, places: int = 2, trim: bool = False) -> str:
    """A measured rate in the unit that suits it: ``97.73 Gb/s``, ``9.70 Mb/s`` (a lab link
    would read ``0.01 Gb/s`` in Gb/s). ``trim`` drops trailing zeros (``100 Gb/s``)."""
    scales = (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3))
    unit, factor = next(((u, f) for u, f in scales if abs(bps) >= f), ("b/s", 1.0))
    number = f"{bps / factor:.{places}f}"
    if trim and "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def format_size(size: int) -> str:
    """Render a byte count compactly without losing precision (``150KB``, ``1.5MB``, ``50176``)."""
    for suffix, factor in (("MB", 10**6), ("KB", 10**3)):
        if size >= factor and (size * 10) % factor == 0:
            whole, tenths = divmod(size * 10 // factor, 10)
            return f"{whole}.{tenths}{suffix}" if tenths else f"{whole}{suffix}"
    return str(size)

"""Port speeds, buffer sizes and MTUs as a topology's labels write them (``10M``, ``30KB``,
``9000``), and back: each parser raises ValueError with the message the file's problem gets."""

from __future__ import annotations

import re

from lab.topology.model import shown

# At most 15 digits, as in agent.intent.units: int() of thousands of digits raises deep inside, and
# no port speed or buffer needs more.
_SPEED_RE = re.compile(r"^([0-9]{1,15}(?:\.[0-9]{1,9})?)\s*([kmgt]?)(?:b/s|bps|b)?$", re.IGNORECASE)

_SIZE_RE = re.compile(r"^([0-9]{1,15})\s*(b|kb|kib|mb|mib)?$", re.IGNORECASE)

_SPEED_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}

_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 10**6, "mib": 2**20}


def parse_speed(text: str) -> int:
    """``10M`` / ``100Mbps`` / ``1G`` / ``10000000`` → bits per second."""
    match = _SPEED_RE.match(text.strip())
    if not match:
        raise ValueError(f"{shown(text)} is not a speed (examples: 10M, 100M, 1G)")
    value = float(match.group(1)) * _SPEED_UNITS[match.group(2).lower()]
    if value < 1000 or not value.is_integer():
        raise ValueError(f"{shown(text)} is not a usable port speed (at least 1K, whole bits/s)")
    return int(value)


def format_speed(bps: int) -> str:
    """Bits per second → ``10M`` / ``1G`` style used in the fabric file."""
    for unit, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if bps % scale == 0:
            return f"{bps // scale}{unit}"
    return str(bps)


def parse_size(text: str) -> int:
    """``30000`` / ``30KB`` / ``29KiB`` → bytes."""
    match = _SIZE_RE.match(text.strip())
    if not match:
        raise ValueError(f"{shown(text)} is not a size in bytes (examples: 30000, 30KB, 32KiB)")
    return int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()]


def parse_mtu(text: str) -> int:
    """``9000`` -> 9000: a whole number of bytes between 1280 and 9216."""
    digits = text.strip()
    # isascii: '９０００'.isdigit() is true too, and int('²') raises.
    if not (digits.isascii() and digits.isdigit()) or not 1280 <= int(digits) <= 9216:
        raise ValueError(f"{shown(text)} is not an MTU between 1280 and 9216")
    return int(digits)

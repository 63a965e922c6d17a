"""Unit conversions between EOS CLI values and the data plane's bytes / milliseconds.

ECN threshold units are the ones EOS offers after ``random-detect ecn minimum-threshold <n>``:
``segments | bytes | kbytes | mbytes`` (plus ``milliseconds`` / ``microseconds`` for
latency-based ECN, which a depth-based data plane cannot honour, so they are refused).
Source of the unit keywords: arista AVD ``eos_cli_config_gen`` schema, ``qos_profiles[].
uc_tx_queues[].random_detect.ecn.threshold.units`` ("segments, bytes, kbytes, mbytes,
milliseconds"), docs/tables/qos-profiles.md, and its rendering template
``j2templates/eos/ethernet-interface-uc-tx-queues.j2``.

What one unit is worth in bytes is NOT stated in any public source found (Arista manual pages
were not reachable from here), so these are explicit, documented assumptions:

* ``segment`` = 208 bytes: the buffer cell ("segment") of the Broadcom Trident2/Tomahawk MMU
  that EOS' ECN thresholds count on 7050X/7060X platforms; other ASICs use other cell sizes.
* ``kbytes`` = 1024 bytes and ``mbytes`` = 1024 * 1024 bytes (binary, as buffer sizes are).

Change the constants below if a device's documentation says otherwise.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Final, Literal

ThresholdUnit = Literal["segments", "bytes", "kbytes", "mbytes"]
THRESHOLD_UNITS: Final[tuple[ThresholdUnit, ...]] = ("segments", "bytes", "kbytes", "mbytes")

SEGMENT_BYTES: Final = 208
KBYTE: Final = 1024
MBYTE: Final = 1024 * 1024

_BYTES_PER_UNIT: Final[dict[ThresholdUnit, int]] = {
    "segments": SEGMENT_BYTES,
    "bytes": 1,
    "kbytes": KBYTE,
    "mbytes": MBYTE,
}


def threshold_bytes(value: int, unit: ThresholdUnit) -> int:
    """An ECN threshold in bytes (``15 kbytes`` -> 15360)."""
    return value * _BYTES_PER_UNIT[unit]


def seconds_to_ms(seconds: Decimal) -> int:
    """Watchdog timers are configured in (decimal) seconds; the data plane wants whole ms."""
    return int((seconds * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def format_seconds(seconds: Decimal) -> str:
    """``Decimal('0.050')`` -> ``0.05``; ``Decimal('60')`` -> ``60`` (as EOS prints timers)."""
    text = format(seconds.normalize(), "f")
    return text

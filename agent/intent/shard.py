"""Which devices an agent owns when one fabric is split across N agents (``--shard K/N``).

Devices go to shards by jump consistent hash (Lamping and Veach, "A Fast, Minimal Memory,
Consistent Hash Algorithm", 2014; the ``jump-consistent-hash`` package): every device is in
exactly one of the N shards, and going from N to N + 1 agents moves only the devices the new
shard takes (about 1/(N + 1) of them), going back moves only those. The key is a device's
name (first 8 bytes of its SHA-256: the same on every host and Python run, unlike ``hash()``),
so every agent computes the same split from the same fabric file without talking to the
others.

A wire probe involves several hosts that may sit in different shards; it is owned by exactly
one: the shard of its *target* host (the receiver of an incast, the stormed host of a drill,
the first host of a pairwise mesh), so N agents run each probe once between them.

Shards are written ``K/N`` with K from 1 to N (as people count agents); ``1/1`` is the whole
fabric.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

import jump

from common.errors import excerpt

MAX_SHARDS = 4096
# At most 4 digits a side (MAX_SHARDS): int() of a 5 000-digit number raises ValueError, and
# the possessive runs cannot backtrack.
_SHARD_RE = re.compile(r"\s*+([0-9]{1,4}+)\s*+/\s*+([0-9]{1,4}+)\s*+")


class ShardError(ValueError):
    """A shard spec that does not name one shard of N."""


def _key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def shard_index(name: str, shards: int) -> int:
    """The shard (1..``shards``) that owns the device ``name``."""
    return int(jump.hash(_key(name), shards)) + 1


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SHARDS or not 1 <= self.index <= self.count:
            raise ShardError(
                f"shard: Expected: K/N with 1 <= K <= N <= {MAX_SHARDS} "
                f"Actual: {self.index}/{self.count}"
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def whole(self) -> bool:
        return self.count == 1

    def owns(self, device: str) -> bool:
        return self.whole or shard_index(device, self.count) == self.index

    def owns_probe(self, target_host: str) -> bool:
        """Whether this shard runs a probe whose target host is ``target_host``."""
        return self.owns(target_host)

    def select(self, names: Iterable[str]) -> list[str]:
        """The names this shard owns, in their order."""
        return [n for n in names if self.owns(n)]


WHOLE = Shard(1, 1)


def parse_shard(text: str) -> Shard:
    """``"2/4"`` -> Shard(2, 4); ShardError naming what is wrong otherwise."""
    text = str(text)
    match = _SHARD_RE.fullmatch(text) if len(text) <= 32 else None
    if not match:
        raise ShardError(f"shard: Expected: K/N, e.g. 2/4 Actual: {excerpt(text)}")
    return Shard(int(match.group(1)), int(match.group(2)))

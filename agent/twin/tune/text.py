"""How tune writes its numbers and lists in the explanation, the summary and the table."""

from __future__ import annotations

from collections.abc import Iterable


def and_list(values: Iterable[object]) -> str:
    """``8, 5 and 2``."""
    items = [str(v) for v in values]
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def pct(value: float) -> str:
    """A fraction as a percentage with one decimal (``97.5 %``)."""
    return f"{value * 100:.1f} %"


def mib(value: float) -> str:
    """A collective's size as nccl-tests' -b writes it (MiB)."""
    return f"{value / 2**20:g} MiB"


def gbs(value: float) -> str:
    """Bytes per second in GB/s, as nccl-tests prints busbw."""
    return f"{value / 1e9:.1f} GB/s"

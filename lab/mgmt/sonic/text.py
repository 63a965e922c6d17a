"""Text helpers shared by the SONiC commands: natural sort and tabulate's ``simple`` format.

sonic-utilities prints its counter tables with ``tabulate(rows, header, tablefmt='simple',
stralign='right')`` (scripts/pfcstat, scripts/queuestat, scripts/watermarkstat,
scripts/pg-drop, pfcwd/main.py) and numbers through ``format_number_with_comma``
(utilities_common/netstat.py). tabulate is not a dependency of the lab, so :func:`simple_table`
reproduces that format: each column as wide as its widest cell or its header plus two
(tabulate's ``MIN_PADDING``), cells right-aligned, two spaces between columns, a rule of dashes
under the header.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.text import natural_key as natural_key  # jsonpatch and checkpoints sort with it


def natsorted_dict(value: Any) -> Any:
    """``value`` with every dict's keys in natural order, recursively."""
    if isinstance(value, dict):
        return {k: natsorted_dict(value[k]) for k in sorted(value, key=natural_key)}
    return value


def with_commas(value: int | None) -> str:
    """``format_number_with_comma``: ``1200`` -> ``1,200``; ``None`` (unsupported) -> ``N/A``."""
    return "N/A" if value is None else f"{value:,}"


MIN_PADDING = 2


def simple_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``tabulate(rows, header, tablefmt='simple', stralign='right')``."""
    widths = [
        max([len(h) + MIN_PADDING, *(len(row[i]) for row in rows)]) for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)

"""Parse the text nccl-tests prints: its table (one row per size), the footer, the ranks and
the failure lines.

The format is nccl-tests' own (github.com/NVIDIA/nccl-tests, read at v2.19.6, a0b82b2, and
its history):

- Header (``writeResultHeader``, src/util.cu; src/common.cu before 2.17; each test's
  ``print_header`` before 2.13): a line ``out-of-place ... in-place``, the column names
  ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong`` and a units
  line ``(B) (elements) ... (us) (GB/s) (GB/s)``, each starting with ``#``. Before 2.13 (e.g.
  nccl-tests#82, nccl#258) the prefix columns depended on the test (``size count type`` plus
  ``redop`` and/or ``root``) and the check column was ``error``: the largest difference from
  the expected value (``%5.0le``), not a count. With ``-C 1`` the time column is ``cputime``;
  with ``-I 1`` each side adds ``i_min i_max i_p99 i_cv%``; with ``-S 1`` a ``timestamp``
  (``%Y-%m-%d %H:%M:%S``: two words) ends the row.
- Rows (``writeBenchmarkLinePreamble``/``writeBenchmarkLineBody``): ``%12li %12li %8s %6s
  %6s`` then per side ``%7s %6s %6s %6g``, numbers from ``getFloatStr`` (``%.2f``, then
  ``.1f``, ``.0f``, then ``%.1e``/``%.0e`` as the width demands), ``N/A`` in the check column
  when results were not checked (``-c 0``, alltoall in place: nccl-tests#287). A trace replay
  prints 32 blanks instead of the out-of-place side.
- Footer (``writeResultFooter``): ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus
  bandwidth    : X [OK|FAILED]`` (``%g``; the average over every row of both sides), then
  ``# Collective test concluded: NAME`` (since 2.15).
- Since 2.16: ``# nccl-tests version V nccl-headers=N nccl-library=N`` and ``# Collective test
  starting: NAME``; ranks: ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [...] NAME``
  (``#   Rank %2d Pid %6d on %10s ...`` before 2.13).
- Failures (src/common.h): ``HOST: Test NCCL failure FILE:LINE 'ERR / LAST'``, ``HOST: Test
  CUDA failure FILE:LINE 'ERR'``, `` .. HOST pid N: Test failure FILE:LINE`` and ``# error:
  TEXT`` (``writeErrors``); before 2018 ``NCCL failure FILE:LINE 'ERR'`` without the host.
  The cause of the commonest mis-launch (more ranks per node than GPUs) comes on stderr from
  src/util.cu: ``Invalid number of GPUs: N requested but only M were found.``, often after
  the failure line it causes (stderr is unbuffered); it is kept with the failures.

Around the table come NCCL's own log lines (``NCCL_DEBUG``), MPI's banners and the shell's:
they are kept out of the table, never parsed as rows. Open MPI's ``--tag-output`` prefix
(``[1,0]<stdout>:``) is removed first.

A log cut at its head (no header: a tail pasted in an issue) is read by the number of
columns of its rows; a row that does not fit the table it is in raises
:class:`NcclTestsOutputError` naming its line, as does output with no row and no failure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

MAX_OUTPUT_CHARS = 4 * 1024 * 1024  # 8 GiB in factor-2 steps is 31 rows; this is a log, not a table
MAX_LINE_CHARS = 4096

TAG_OUTPUT = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:")
ROW_START = re.compile(r"^\s*\d+\s+\d+(?:\s|$)")
VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
RANK = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s*(.*)$"
)
FAILURE = re.compile(
    r"^(?:(?P<host>\S+): Test (?:NCCL|CUDA) failure|\s*\.\. (?P<host2>\S+) pid \d+: Test failure"
    r"|NCCL failure \S+:\d+|Invalid number of GPUs: \d+ requested)"
)
ERROR_LINE = re.compile(r"^#\s*error:\s*(.+)$")
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}$")
REPLAY_GAP = re.compile(r"\S {34,}\S")

PREFIX_COLUMNS = ("size", "count", "type", "redop", "root")
TIME_COLUMNS = ("time", "cputime")
CHECK_COLUMNS = ("#wrong", "error")
PER_ITERATION = ("i_min", "i_max", "i_p99", "i_cv%")


class NcclTestsOutputError(ValueError):
    """Output that is not nccl-tests' (garbled, cut inside a row, or without any row)."""


@dataclass(frozen=True)
class Measurement:
    """One side (out-of-place or in-place) of one row.

    ``wrong``: the ``#wrong`` count (elements whose value was wrong, summed over ranks), or
    with the older ``error`` column the largest deviation from the expected value; None when
    nccl-tests printed ``N/A`` (results not checked).
    """

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: float | None

    def as_json(self) -> dict[str, Any]:
        return {
            "time_us": self.time_us,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "wrong": self.wrong,
        }


@dataclass(frozen=True)
class SizeRow:
    line: int  # 1-based line in the output
    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Measurement | None  # None: a trace replay printed the in-place side only
    in_place: Measurement

    @property
    def judged(self) -> Measurement:
        """The side the verdict reads: out-of-place, as nccl-tests' issues quote it (the
        in-place side when a trace replay printed no other)."""
        return self.out_of_place or self.in_place

    def as_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            "out_of_place": self.out_of_place.as_json() if self.out_of_place else None,
            "in_place": self.in_place.as_json(),
        }


@dataclass(frozen=True)
class Rank:
    rank: int
    host: str
    device: int
    gpu: str


@dataclass(frozen=True)
class Layout:
    """The columns of the table: the prefix (``size count type`` and maybe ``redop``,
    ``root``), the words of one side, and whether a timestamp ends a row."""

    prefix: tuple[str, ...]
    side: tuple[str, ...]
    check: Literal["#wrong", "error"]
    timestamp: bool = False

    @property
    def width(self) -> int:
        return len(self.prefix) + 2 * len(self.side) + (2 if self.timestamp else 0)


@dataclass(frozen=True)
class NcclTestsRun:
    """What one nccl-tests run printed, parsed."""

    rows: tuple[SizeRow, ...]
    layout: Layout | None
    test: str | None = None  # all_reduce_perf (from "Collective test starting/concluded")
    version: str | None = None
    ranks: tuple[Rank, ...] = ()
    out_of_bounds: int | None = None
    avg_busbw_GBps: float | None = None
    failures: tuple[str, ...] = ()  # failure and "# error:" lines, as printed
    footer: bool = False  # "Avg bus bandwidth" seen: the run reached its end
    notes: tuple[str, ...] = field(default=())

    @property
    def largest(self) -> SizeRow | None:
        """The row of the largest size (the last of several with that size)."""
        if not self.rows:
            return None
        biggest = max(row.size_bytes for row in self.rows)
        return [row for row in self.rows if row.size_bytes == biggest][-1]

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(rank.host for rank in self.ranks))

    def as_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "version": self.version,
            "check_column": self.layout.check if self.layout else None,
            "ranks": len(self.ranks),
            "hosts": list(self.hosts),
            "rows": [row.as_json() for row in self.rows],
            "out_of_bounds": self.out_of_bounds,
            "avg_busbw_GBps": self.avg_busbw_GBps,
            "failures": list(self.failures),
            "complete": self.footer,
        }


def _number(text: str, what: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise NcclTestsOutputError(
            f"line {line}: {what}: Expected: a number Actual: {text!r:.40}"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise NcclTestsOutputError(
            f"line {line}: {what}: Expected: a finite number >= 0 Actual: {text!r:.40}"
        )
    return value


def _integer(text: str, what: str, line: int) -> int:
    if not re.fullmatch(r"-?\d{1,20}", text):
        raise NcclTestsOutputError(
            f"line {line}: {what}: Expected: an integer Actual: {text!r:.40}"
        )
    return int(text)


def layout_from_header(words: list[str]) -> Layout | None:
    """The layout a column-name line announces (its words after ``#``), or None when the
    line is not one."""
    times = [i for i, word in enumerate(words) if word in TIME_COLUMNS]
    if len(times) != 2 or words[:3] != ["size", "count", "type"]:
        return None
    prefix = tuple(words[: times[0]])
    side = tuple(words[times[0] : times[1]])
    rest = words[times[1] :]
    if (
        not set(prefix) <= set(PREFIX_COLUMNS)
        or len(side) < 4
        or side[1:3] != ("algbw", "busbw")
        or side[3] not in CHECK_COLUMNS
        or tuple(rest[: len(side)]) != side
        or rest[len(side) :] not in ([], ["timestamp"])
    ):
        return None
    check: Literal["#wrong", "error"] = "#wrong" if side[3] == "#wrong" else "error"
    return Layout(prefix, side, check, timestamp=rest[len(side) :] == ["timestamp"])


def layout_from_row(words: list[str]) -> Layout | None:
    """A headerless table (a log cut at its head): the layout from a row's width, for the
    plain table (no per-iteration columns, no timestamp). ``size count type`` then
    ``redop``/``root`` as the width says: 13 words both, 11 neither; 12 one of them (a word
    that is not a number is a reduction)."""
    extra = len(words) - 3 - 8
    if extra not in (0, 1, 2):
        return None
    prefix: tuple[str, ...] = PREFIX_COLUMNS[:3]
    if extra == 2:
        prefix = PREFIX_COLUMNS
    elif extra == 1:
        prefix = (*prefix, "root" if re.fullmatch(r"-?\d+", words[3]) else "redop")
    check = _check_kind(words[len(prefix) + 3])
    return Layout(prefix, ("time", "algbw", "busbw", check), check)


def _check_kind(word: str) -> Literal["#wrong", "error"]:
    # The pre-2.13 "error" column prints %5.0le: "0e+00", "3e-08"; a count never has an e.
    return "error" if "e" in word.lower() and word != "N/A" else "#wrong"


def _side(words: list[str], layout: Layout, line: int, label: str) -> Measurement:
    time_us = _number(words[0], f"{label} {layout.side[0]}", line)
    algbw = _number(words[1], f"{label} algbw", line)
    busbw = _number(words[2], f"{label} busbw", line)
    wrong = None if words[3] == "N/A" else _number(words[3], f"{label} {layout.check}", line)
    for name, word in zip(layout.side[4:], words[4:], strict=True):
        _number(word, f"{label} {name}", line)
    return Measurement(time_us, algbw, busbw, wrong)


def parse_row(text: str, layout: Layout, line: int) -> SizeRow:
    """One row of the table ``layout`` describes."""
    words = text.split()
    side = len(layout.side)
    stamp = 2 if layout.timestamp else 0
    full = layout.width
    in_place_only = len(layout.prefix) + side + stamp
    # A trace replay's row has 32 blanks for its out-of-place side (34 with the separator);
    # a row cut after its in-place-sized words has not.
    replay = len(words) == in_place_only and REPLAY_GAP.search(text) is not None
    if not (len(words) == full or replay) or (stamp and not TIMESTAMP.fullmatch(words[-2])):
        raise NcclTestsOutputError(
            f"line {line}: Expected: a row of {full} columns ({' '.join(layout.prefix)}, "
            f"then {' '.join(layout.side)} out-of-place and in-place) Actual: "
            f"{len(words)} words: {text.strip()!r:.120}"
        )
    values = dict(zip(layout.prefix, words, strict=False))
    body = words[len(layout.prefix) : len(words) - stamp]
    out_of_place = None
    if len(body) == 2 * side:
        out_of_place = _side(body[:side], layout, line, "out-of-place")
        body = body[side:]
    return SizeRow(
        line=line,
        size_bytes=_integer(values["size"], "size", line),
        count=_integer(values["count"], "count", line),
        type=values["type"],
        redop=values.get("redop"),
        root=_integer(values["root"], "root", line) if "root" in values else None,
        out_of_place=out_of_place,
        in_place=_side(body, layout, line, "in-place"),
    )


class _Reader:
    """State while reading the lines of one output."""

    def __init__(self) -> None:
        self.rows: list[SizeRow] = []
        self.layout: Layout | None = None
        self.headerless = False
        self.fields: dict[str, Any] = {}
        self.ranks: list[Rank] = []
        self.failures: list[str] = []
        self.notes: list[str] = []

    def comment(self, text: str, number: int) -> None:
        """A ``#`` line: the header, the footer, the ranks or a run's facts."""
        layout = layout_from_header(text.lstrip("#").split())
        if layout is not None:
            if self.layout is not None and self.rows and layout != self.layout:
                self.notes.append("a second table with other columns: rows read with each")
            self.layout = layout
            self.headerless = False
            return
        for pattern, key in ((VERSION, "version"), (STARTING, "test"), (CONCLUDED, "test")):
            if match := pattern.match(text):
                self.fields[key] = match.group(1)
                return
        if match := OUT_OF_BOUNDS.match(text):
            self.fields["out_of_bounds"] = int(match.group(1))
        elif match := AVG_BUSBW.match(text):
            self.fields["avg_busbw_GBps"] = _number(match.group(1), "Avg bus bandwidth", number)
            self.fields["footer"] = True
        elif match := RANK.match(text):
            rank, _, _, host, device, _, gpu = match.groups()
            self.ranks.append(Rank(int(rank), host, int(device), gpu.strip()))
        elif match := ERROR_LINE.match(text):
            self.failures.append(text.strip())

    def row(self, text: str, number: int) -> None:
        if self.layout is None:
            self.layout = layout_from_row(text.split())
            self.headerless = True
            if self.layout is None:
                raise NcclTestsOutputError(
                    f"line {number}: Expected: a row of nccl-tests' table (11, 12 or 13 "
                    f"columns) Actual: {len(text.split())} words: {text.strip()!r:.120}"
                )
        self.rows.append(parse_row(text, self.layout, number))

    def finish(self) -> NcclTestsRun:
        if not self.rows and not self.failures:
            raise NcclTestsOutputError(
                "Expected: nccl-tests output (a table of sizes, or a failure line) Actual: neither"
            )
        if self.headerless:
            self.notes.append("no table header (the output starts inside the table)")
        return NcclTestsRun(
            rows=tuple(self.rows), layout=self.layout, ranks=tuple(self.ranks),
            failures=tuple(self.failures), notes=tuple(self.notes), **self.fields,
        )  # fmt: skip


def parse_output(text: str) -> NcclTestsRun:
    """Parse what one nccl-tests run printed (stdout, or stdout and stderr together)."""
    if len(text) > MAX_OUTPUT_CHARS:
        raise NcclTestsOutputError(
            f"Expected: at most {MAX_OUTPUT_CHARS} characters Actual: {len(text)}"
        )
    reader = _Reader()
    for number, raw in enumerate(text.splitlines(), 1):
        line = TAG_OUTPUT.sub("", raw)
        if len(line) > MAX_LINE_CHARS:
            raise NcclTestsOutputError(
                f"line {number}: Expected: at most {MAX_LINE_CHARS} characters Actual: {len(line)}"
            )
        if line.lstrip().startswith("#"):
            reader.comment(line, number)
        elif FAILURE.match(line):
            reader.failures.append(line.strip())
        elif ROW_START.match(line):
            reader.row(line, number)
        elif re.fullmatch(r"\s*\d+\s*", line) and reader.layout is not None:
            # A row cut after its first number: the output ends (or was cut) inside the table.
            raise NcclTestsOutputError(
                f"line {number}: Expected: a complete row Actual: {line.strip()!r:.40} "
                "(output cut inside the table)"
            )
    return reader.finish()

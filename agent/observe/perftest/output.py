"""Parse one perftest bandwidth run (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``).

Two sources, both written by perftest itself (github.com/linux-rdma/perftest):

- **stdout**: the test header of ``ctx_print_test_info`` (src/perftest_parameters.c), the QP
  addresses of ``ctx_print_pingpong_data`` (src/perftest_communication.c), a column line
  (``RESULT_FMT``/``RESULT_FMT_G`` in src/perftest_parameters.h) and one row per printed report
  (``REPORT_FMT``, or ``REPORT_FMT_EXT`` with six decimals when a Gb/s average is below 0.1).
  ``-a`` prints one row per message size; ``-b --report-both`` adds "Local results:" and
  "Remote results:" sections after the summed row (src/write_bw.c, read_bw.c, send_bw.c).
- **--out_json**: ``write_test_info_to_file``/``write_bw_report_to_file``. Up to 23.10.0-0.29
  (so in Debian 12's 4.5-0.17) neither keys nor most values are quoted and every line ends in
  a comma (linux-rdma/perftest issue #216); commit f9e82f7, PR #239 "Make output JSON
  standard", first released in 24.01.0-0.38, quotes everything. Even the standard writer emits
  a trailing comma with ``--output=bandwidth`` (``"bw_avg": %lf,\\n`` then ``}``), so the
  line parser below takes over whenever :func:`json.loads` refuses the text. The JSON carries
  no unit: it is Gb/s with ``--report_gbits`` and MiB/s without, so the caller says which.
  ``print_full_bw_report`` opens the file with ``O_TRUNC`` on every report it prints, so the
  file holds only the *last* row of stdout: the largest size of ``-a``, and the *remote* row
  of ``-b --report-both`` (PR #322, still open, adds ``results_local``/``results_remote``;
  they are read when present).

Units, exactly as perftest computes them (``print_report_bw``: ``format_factor`` is
``0x100000`` for MBS and ``125000000`` for GBS): a "Gb/sec" figure is 10^9 bit/s, a "MB/sec"
figure (labelled "MiB/sec" since 24.07.0-0.44, commit c428488) is 2^20 bytes per second.
"MsgRate[Mpps]" is 10^6 completed messages (work requests) per second, not wire packets: a
64 KiB message is 16 packets at MTU 4096.

Which side reports what (src/write_bw.c, read_bw.c, send_bw.c; README "Notes on Testing
Methodology"): for unidirectional write and read the *client* measures and the server prints
the client's numbers received over the TCP side channel (``xchg_bw_reports``); for send both
sides measure (the server counts received messages, ``run_iter_bw_server``). With ``-b`` each
side measures what it initiates and the summed row is printed; ``--report-both`` adds each
side's row, except ``ib_send_bw -b -D``, which never exchanges reports: its "Remote results"
row is an uninitialised ``struct bw_report_data`` (send_bw.c), never a measurement. In
duration mode (``-D``) perftest does not measure the peak (``noPeak``), so "BW peak" is 0.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, NamedTuple

from agent.errors import AgentError, printable

MAX_OUTPUT_BYTES = 1 << 20  # outputs come from remote hosts: bound what is parsed
MAX_JSON_KEYS = 256
MAX_REPORTED_LINES = 5
MAX_LINE_CHARS = 4096  # perftest's lines are < 300 characters; longer ones are not perftest's
MAX_MAGNITUDE = 15  # no bandwidth or rate figure reaches 10^15 in any unit

Unit = Literal["Gb/s", "MiB/s"]
Source = Literal["stdout", "json"]
Scope = Literal["total", "local", "remote"]

# bit/s per unit of the printed figure (perftest's format_factor times 8 bits).
BITS_PER_UNIT: dict[str, int] = {"Gb/s": 10**9, "MiB/s": 8 * 2**20}
MESSAGES_PER_MPPS = 10**6

VERBS = ("RDMA_Write_imm", "RDMA_Write", "RDMA_Read", "Send_imm", "Send", "Atomic")
KINDS = {
    "RDMA_Write": "write",
    "RDMA_Write_imm": "write",
    "RDMA_Read": "read",
    "Send": "send",
    "Send_imm": "send",
    "Atomic": "atomic",
}
# testsStr + modifiers as ctx_print_test_info / write_test_info_to_file compose them; the
# stdout title uses spaces where the JSON uses underscores.
_TITLE_RE = re.compile(
    r"(?P<verb>" + "|".join(VERBS) + r")_(?:(?:CMP_AND_SWAP|FETCH_AND_ADD)_)?"
    r"(?P<bidir>Bidirectional_)?(?:Post_List_)?(?P<kind>BW|Latency)_"
    r"(?:forwarding_)?(?:Multicast_)?Test"
)
_COLUMNS_RE = re.compile(
    r"#bytes\s+#iterations\s+BW peak\[(?P<unit>Gb|MB|MiB)/sec\]\s+"
    r"BW average\[(?P=unit)/sec\]\s+MsgRate\[Mpps\](?P<rest>.*)"
)
_NUMBER = r"[-+]?(?:\d{1,20}(?:\.\d{0,20})?|\.\d{1,20}|nan|inf)"
_ROW_RE = re.compile(
    rf"(?P<size>\d{{1,20}})\s+(?P<iters>\d{{1,20}})\s+(?P<peak>{_NUMBER})\s+(?P<avg>{_NUMBER})\s+"
    rf"(?P<rate>{_NUMBER})(?P<extra>(?:\s+{_NUMBER})*)",
    re.IGNORECASE,
)
_GID_LINE_RE = re.compile(r"GID: (?P<bytes>\d{1,3}(?::\d{1,3}){15})")
_ADDRESS_RE = re.compile(r"(?P<side>local|remote) address: LID ")
# Lines perftest prints when it gives up (stderr, a few on stdout): connection set-up
# (perftest_communication.c), resources (perftest_resources.c), the option parser
# (perftest_parameters.c: CHECK_VALUE "... should be ..."), completions with an error status
# (NOTIFY_COMP_ERROR_SEND/RECV in perftest_resources.h), the main programs' exits.
_ERROR_RE = re.compile(
    r"(?:Couldn't |Could not |Unable to |Failed\b|failed to |Completion with |"
    r"IB device .* not found|No IB devices found|No such device|Error\b|"
    r"Parser function exited|Current implementation is not compatible|Did not get Message|"
    r"Can't produce a report|Did not detect devices|Invalid Command|.*unrecognized option|"
    r"Problem in resolving|Found Incompatibility|Bad wc status|"
    r"Invalid Connection type|Multiple QPs only|Duration mode |Message Size should be|"
    r".*\bfailed\b|.* should be between|.* argument .* should be|"
    r".*(?:doesn't|does not) support|.*not supported\b|.*is not available)"
)
# Said and carried on: the CPU frequency check (get_clock.c, silenced by -F), the MTU
# fallback (perftest_parameters.c set_mtu), "BW peak won't be measured", PCIe RO advice.
_WARNING_RE = re.compile(
    r"(?:WARNING|Warning|Conflicting CPU frequency|Requested mtu is higher|Changing to active"
    r"|Invalid MTU|Please choose mtu|Will run with the port active mtu)"
)


class PerftestOutputError(AgentError):
    """perftest's output cannot be used: names what, where, and what was expected.

    ``cause`` holds perftest's own error lines when it reported any (a failed connection, a
    completion error): they, not "no result row", are why there is no measurement.
    """

    def __init__(
        self,
        where: str,
        what: str,
        expected: str,
        actual: str,
        *,
        cause: tuple[str, ...] = (),
    ) -> None:
        self.where = where
        self.what = what
        self.expected = expected
        self.actual = actual
        self.cause = cause
        super().__init__(f"{where}: {what}: Expected: {expected} Actual: {actual}")


@dataclass(frozen=True)
class BwResult:
    """One bandwidth row as perftest reported it, in base units.

    ``scope``: ``total`` is the main row (one direction for unidirectional tests, the sum of
    both sides for ``-b``); ``local``/``remote`` are the rows of ``--report-both``.
    ``line``: 1-based line of the row in its source. ``reported_average`` is the figure as
    printed, in ``unit``.
    """

    test: str
    bidirectional: bool
    device: str
    qps: int
    mtu: int
    link_type: str
    gid_index: int | None
    message_bytes: int
    iterations: int
    bw_peak_bps: float
    bw_average_bps: float
    msg_rate_per_s: float
    unit: Unit
    scope: Scope
    source: Source
    line: int
    reported_average: str

    @property
    def kind(self) -> str:
        return KINDS[self.test]


@dataclass(frozen=True)
class PerftestRun:
    """One perftest run: its test information and every bandwidth row, in print order.

    ``local_gid``/``remote_gid`` are the GIDs of the first QP as stdout shows them (IPv6
    text; an IPv4-mapped one reads ``::ffff:198.18.99.2``): which addresses the test used.
    """

    test: str
    bidirectional: bool
    device: str
    qps: int
    mtu: int
    link_type: str
    gid_index: int | None
    connection: str | None
    unit: Unit
    source: Source
    results: tuple[BwResult, ...]
    local_gid: str | None = None
    remote_gid: str | None = None
    warnings: tuple[str, ...] = ()
    json_checked: bool = False

    @property
    def kind(self) -> str:
        """write, read, send or atomic."""
        return KINDS[self.test]

    def rows(self, scope: Scope = "total") -> tuple[BwResult, ...]:
        return tuple(row for row in self.results if row.scope == scope)

    def row(self, scope: Scope = "total", message_bytes: int | None = None) -> BwResult | None:
        """The row of ``scope`` for ``message_bytes``; without a size, the largest size (a
        line-rate verdict is about large messages; ``-a`` prints 2 B to 8 MiB)."""
        rows = self.rows(scope)
        if message_bytes is not None:
            rows = tuple(row for row in rows if row.message_bytes == message_bytes)
        return max(rows, key=lambda row: row.message_bytes, default=None)


# --------------------------------------------------------------------------- units


def to_bits_per_second(value: Decimal | str, unit: Unit) -> float:
    """A perftest bandwidth figure in bit/s, computed in exact decimal arithmetic."""
    number = Decimal(value) if isinstance(value, str) else value
    return float(number * BITS_PER_UNIT[unit])


def from_bits_per_second(bps: float, unit: Unit, places: int = 2) -> Decimal:
    """bit/s as perftest would print it in ``unit`` with ``places`` decimals (%.2lf)."""
    quantum = Decimal(1).scaleb(-places)
    return (Decimal(bps) / BITS_PER_UNIT[unit]).quantize(quantum)


def _unit_of(label: str) -> Unit:
    return "Gb/s" if label == "Gb" else "MiB/s"


# --------------------------------------------------------------------------- helpers


def _show(text: str, limit: int = 100) -> str:
    shown = printable(text[:limit])
    return repr(shown + ("…" if len(text) > limit else ""))


def _check_size(text: str, where: str) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_OUTPUT_BYTES:
        raise PerftestOutputError(
            where, "output size", f"at most {MAX_OUTPUT_BYTES} bytes", f"{size} bytes"
        )


def _lines(text: str, where: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_CHARS:
            raise PerftestOutputError(
                f"{where} line {number}",
                "line length",
                f"at most {MAX_LINE_CHARS} characters",
                f"{len(line)} characters",
            )
    return lines


def _scan_messages(text: str, name: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(where, line) of perftest's error lines and the warning lines of one stream."""
    errors: list[tuple[str, str]] = []
    warnings: list[str] = []
    for number, raw in enumerate(_lines(text, name), 1):
        line = raw.strip()
        if not line:
            continue
        if _WARNING_RE.match(line):
            warnings.append(printable(line))
        elif _ERROR_RE.match(line):
            errors.append((f"{name} line {number}", printable(line)))
    return errors, warnings


def _raise_perftest_errors(errors: list[tuple[str, str]]) -> None:
    if not errors:
        return
    cause = tuple(line for _, line in errors[:MAX_REPORTED_LINES])
    raise PerftestOutputError(
        errors[0][0],
        "perftest reported an error",
        "a run without error lines",
        "; ".join(cause),
        cause=cause,
    )


def _parse_title(title: str, where: str) -> tuple[str, bool]:
    match = _TITLE_RE.fullmatch(title)
    if not match:
        raise PerftestOutputError(
            where,
            "test name",
            "a perftest BW test such as RDMA_Write_BW_Test",
            _show(title),
        )
    if match["kind"] != "BW":
        raise PerftestOutputError(where, "test name", "a BW test", _show(title))
    return match["verb"], match["bidir"] is not None


def _decimal(text: str, where: str, field: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise PerftestOutputError(where, field, "a number", _show(text)) from None
    if not value.is_finite():
        # perftest divides by the measured cycles; a run that measured nothing prints inf/nan
        raise PerftestOutputError(where, field, "a finite number", _show(text))
    if value.adjusted() >= MAX_MAGNITUDE:
        raise PerftestOutputError(where, field, f"a number below 10^{MAX_MAGNITUDE}", _show(text))
    if value < 0:
        # Negative averages have been printed (linux-rdma/perftest issue #82: a cycle counter
        # that went backwards); they measure nothing.
        raise PerftestOutputError(where, field, "a non-negative number", _show(text))
    return value


@dataclass(frozen=True)
class _Info:
    test: str
    bidirectional: bool
    device: str
    qps: int
    mtu: int
    link_type: str
    gid_index: int | None
    connection: str | None


@dataclass(frozen=True)
class _Output:
    """One perftest output as a reader found it: the run's header, the unit of its bandwidth
    columns, and whether it is stdout or the JSON file."""

    info: _Info
    unit: Unit
    source: Source


def _row(
    output: _Output, scope: Scope, line: int, values: tuple[int, int, Decimal, Decimal, Decimal]
) -> BwResult:
    size, iterations, peak, average, rate = values
    unit = output.unit
    header = asdict(output.info)
    del header["connection"]  # the run's, not each row's
    return BwResult(
        **header,
        message_bytes=size,
        iterations=iterations,
        bw_peak_bps=to_bits_per_second(peak, unit),
        bw_average_bps=to_bits_per_second(average, unit),
        msg_rate_per_s=float(rate * MESSAGES_PER_MPPS),
        unit=unit,
        scope=scope,
        source=output.source,
        line=line,
        reported_average=str(average),
    )


# --------------------------------------------------------------------------- stdout

_HEADER_FIELDS = {
    "Device": "device",
    "Number of qps": "qps",
    "Connection type": "connection",
    "Mtu": "mtu",
    "Link type": "link_type",
    "GID index": "gid_index",
}
# Two header fields share a line, separated by a tab run before "Key :" (some keys carry a
# tab before their colon: " rdma_cm QPs\t : OFF", "Lock-free\t: OFF").
_FIELD_SPLIT_RE = re.compile(r"\t+(?=[A-Za-z][^:]*:)")


def _run(
    output: _Output,
    results: tuple[BwResult, ...],
    warnings: tuple[str, ...],
    local_gid: str | None = None,
    remote_gid: str | None = None,
) -> PerftestRun:
    """The run of the output's test: one constructor for both readers."""
    return PerftestRun(
        **asdict(output.info),
        unit=output.unit,
        source=output.source,
        results=results,
        warnings=warnings,
        local_gid=local_gid,
        remote_gid=remote_gid,
    )


def _header_fields(line: str) -> Iterator[tuple[str, str]]:
    for part in _FIELD_SPLIT_RE.split(line.strip()):
        key, sep, value = part.partition(":")
        if sep:
            yield key.strip(" \t"), value.strip(" \t")


def _header_int(text: str, where: str, field: str) -> int:
    digits = text.removesuffix("[B]")
    if not digits.isdigit() or len(digits) > 12:
        raise PerftestOutputError(where, field, "an integer", _show(text))
    return int(digits)


def _gid_text(octets: str) -> str | None:
    parts = [int(part) for part in octets.split(":")]
    if any(part > 255 for part in parts):
        return None
    return str(ipaddress.IPv6Address(bytes(parts)))


def parse_stdout(stdout: str, stderr: str = "", *, where: str = "stdout") -> PerftestRun:
    """Parse perftest's printed report (both header styles, both units, ``-a``, ``-b``,
    ``--report-both``). perftest's own error lines, on either stream, are raised as the
    cause even when some rows were printed: a run that failed half-way is no measurement."""
    _check_size(stdout, where)
    _check_size(stderr, "stderr")
    errors, warnings = _scan_messages(stderr, "stderr")
    out_errors, out_warnings = _scan_messages(stdout, where)
    _raise_perftest_errors(errors + out_errors)
    warnings += out_warnings
    report = _StdoutReport(where)
    for number, raw in enumerate(_lines(stdout, where), 1):
        text = raw.strip()
        if text:
            report.read(_Line(number, raw, text, f"{where} line {number}"))
    return report.run(stdout, warnings)


class _Line(NamedTuple):
    number: int
    raw: str  # as printed: two header fields on one line are told apart by their tabs
    text: str  # stripped
    at: str  # where, for errors: "stdout line 12"


RowValues = tuple[int, int, Decimal, Decimal, Decimal]  # size, iterations, peak, average, rate


class _StdoutReport:
    """What perftest's stdout says, gathered line by line: each reader takes the lines it
    knows (in this order) and leaves the others to the next."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.title: tuple[str, bool] | None = None
        self.fields: dict[str, tuple[str, int]] = {}
        self.unit: Unit | None = None
        self.scope: Scope = "total"
        self.gids: dict[str, str | None] = {}
        self.pending_side: str | None = None  # the QP address line whose GID comes next
        self.rows: list[tuple[Scope, int, RowValues]] = []
        self.readers: tuple[Callable[[_Line], bool], ...] = (
            self._title,
            self._address,
            self._gid,
            self._columns,
            self._scope,
            self._row,
            self._header,
        )

    def read(self, line: _Line) -> None:
        for reader in self.readers:
            if reader(line):
                return

    def _title(self, line: _Line) -> bool:
        text = line.text
        if self.title is not None or not text.endswith("Test"):
            return False
        if " BW " not in text and "Latency" not in text:
            return False
        self.title = _parse_title(text.replace(" ", "_"), line.at)
        return True

    def _address(self, line: _Line) -> bool:
        address = _ADDRESS_RE.match(line.text)
        if address is None:
            return False
        self.pending_side = address["side"]
        return True

    def _gid(self, line: _Line) -> bool:
        gid = _GID_LINE_RE.fullmatch(line.text)
        if gid is None:
            return False
        if self.pending_side is not None and self.pending_side not in self.gids:
            self.gids[self.pending_side] = _gid_text(gid["bytes"])
        self.pending_side = None
        return True

    def _columns(self, line: _Line) -> bool:
        if not line.text.startswith("#bytes"):
            return False
        columns = _COLUMNS_RE.fullmatch(line.text)
        if columns is None:
            raise PerftestOutputError(
                line.at,
                "result columns",
                "'#bytes #iterations BW peak[..] BW average[..] MsgRate[Mpps]'",
                _show(line.text),
            )
        found_unit = _unit_of(columns["unit"])
        if self.unit is not None and found_unit != self.unit:
            raise PerftestOutputError(line.at, "result unit", self.unit, found_unit)
        self.unit = found_unit
        return True

    def _scope(self, line: _Line) -> bool:
        if line.text not in ("Local results:", "Remote results:"):
            return False
        self.scope = "local" if line.text.startswith("Local") else "remote"
        return True

    def _row(self, line: _Line) -> bool:
        if not line.text[0].isdigit():
            return False
        if self.title is None:
            raise PerftestOutputError(
                line.at,
                "test header",
                "perftest's header before any result (full verbosity: --output=bandwidth "
                "prints a bare figure)",
                _show(line.text),
            )
        if self.unit is None:
            raise PerftestOutputError(
                line.at, "result row", "the '#bytes #iterations ...' column line first",
                _show(line.text),
            )  # fmt: skip
        self.rows.append((self.scope, line.number, _row_values(line.text, line.at)))
        return True

    def _header(self, line: _Line) -> bool:
        if self.title is None or ":" not in line.text or self.unit is not None:
            return False
        for key, value in _header_fields(line.raw):
            if key in _HEADER_FIELDS and _HEADER_FIELDS[key] not in self.fields:
                self.fields[_HEADER_FIELDS[key]] = (value, line.number)
        return True

    def run(self, stdout: str, warnings: list[str]) -> PerftestRun:
        """The run, once the header, the column line and a row were all found."""
        where = self.where
        if self.title is None:
            raise PerftestOutputError(
                where,
                "test header",
                "perftest's header ('... BW Test', printed at full verbosity)",
                "none" if not stdout.strip() else f"no header in {stdout.count(chr(10)) + 1} lines",
            )
        if self.unit is None:
            raise PerftestOutputError(
                where, "result line", "the '#bytes #iterations ...' column line",
                "none (run cut short)",
            )  # fmt: skip
        if not self.rows:
            raise PerftestOutputError(
                where, "result row", "at least one row", "none (run cut short)"
            )
        output = _Output(_stdout_info(self.title, self.fields, where), self.unit, "stdout")
        results = tuple(_row(output, scope, number, values) for scope, number, values in self.rows)
        return _run(
            output, results, tuple(warnings[:MAX_REPORTED_LINES]),
            local_gid=self.gids.get("local"), remote_gid=self.gids.get("remote"),
        )  # fmt: skip


def _row_values(text: str, at: str) -> RowValues:
    row = _ROW_RE.fullmatch(text)
    if row is None:
        raise PerftestOutputError(
            at, "result row", "#bytes #iterations peak average msgrate (numbers)", _show(text)
        )
    return (
        int(row["size"]),
        int(row["iters"]),
        _decimal(row["peak"], at, "BW peak"),
        _decimal(row["avg"], at, "BW average"),
        _decimal(row["rate"], at, "MsgRate"),
    )


def _stdout_info(title: tuple[str, bool], fields: dict[str, tuple[str, int]], where: str) -> _Info:
    for required in ("device", "qps", "mtu", "link_type"):
        if required not in fields:
            label = next(k for k, v in _HEADER_FIELDS.items() if v == required)
            raise PerftestOutputError(where, f"header field {label!r}", "present", "missing")

    def number(name: str) -> int:
        value, line = fields[name]
        return _header_int(value, f"{where} line {line}", name)

    device, device_line = fields["device"]
    if not device:
        raise PerftestOutputError(f"{where} line {device_line}", "Device", "a name", "empty")
    return _Info(
        test=title[0],
        bidirectional=title[1],
        device=printable(device),
        qps=number("qps"),
        mtu=number("mtu"),
        link_type=printable(fields["link_type"][0]),
        gid_index=number("gid_index") if "gid_index" in fields else None,
        connection=printable(fields["connection"][0]) if "connection" in fields else None,
    )


# --------------------------------------------------------------------------- JSON

_KEY = r"\"?(?P<key>[^\"{}:]*?)\"?"
_OPEN_RE = re.compile(_KEY + r"\s*:\s*\{")
_VALUE_RE = re.compile(_KEY + r"\s*:\s*(?P<value>.*?)\s*,?")
_INT_RE = re.compile(r"[-+]?\d+")
_FLOAT_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)")


def _lenient_value(text: str, where: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        inner = text[1:-1]
        if '"' in inner:
            raise PerftestOutputError(where, "value", "one quoted string", _show(text))
        return inner
    if _INT_RE.fullmatch(text) and len(text) <= 20:
        return int(text)
    if _FLOAT_RE.fullmatch(text):
        return Decimal(text)
    if any(char in text for char in '"{}[]'):
        raise PerftestOutputError(where, "value", "a number or a bare word", _show(text))
    return text


def _parse_lenient(text: str, where: str) -> dict[str, Any]:
    """perftest's pre-24.01 "JSON": one ``key: value,`` per line, ``name: {`` opens an
    object, ``},`` closes it; keys unquoted (or quoted), trailing commas everywhere."""
    root: dict[str, Any] | None = None
    stack: list[dict[str, Any]] = []
    keys = 0
    closed = False
    for number, raw in enumerate(_lines(text, where), 1):
        line = raw.strip()
        at = f"{where} line {number}"
        if not line:
            continue
        if closed:
            raise PerftestOutputError(at, "content after the closing brace", "none", _show(line))
        if root is None:
            if line != "{":
                raise PerftestOutputError(at, "start", "'{'", _show(line))
            root = {}
            stack.append(root)
            continue
        if line in ("}", "},"):
            stack.pop()
            closed = not stack
            continue
        keys += 1
        if keys > MAX_JSON_KEYS:
            raise PerftestOutputError(at, "keys", f"at most {MAX_JSON_KEYS}", "more")
        if (opened := _OPEN_RE.fullmatch(line)) is not None:
            if len(stack) >= 3:
                raise PerftestOutputError(at, "nesting", "at most 2 levels", "deeper")
            child: dict[str, Any] = {}
            stack[-1][opened["key"].strip()] = child
            stack.append(child)
            continue
        pair = _VALUE_RE.fullmatch(line)
        if pair is None or not pair["key"].strip():
            raise PerftestOutputError(at, "line", "'key: value,'", _show(line))
        stack[-1][pair["key"].strip()] = _lenient_value(pair["value"], at)
    if root is None or not closed:
        raise PerftestOutputError(
            where, "structure", "one object closed by '}'", "empty" if root is None else "unclosed"
        )
    return root


def _load_json(text: str, where: str) -> tuple[dict[str, Any], bool]:
    """The object and whether it was standard JSON."""
    try:
        loaded = json.loads(text, parse_float=Decimal, parse_constant=Decimal)
    except (ValueError, RecursionError):  # JSONDecodeError, or an int past Python's limit
        return _parse_lenient(text, where), False
    if not isinstance(loaded, dict):
        raise PerftestOutputError(where, "top level", "an object", type(loaded).__name__)
    return loaded, True


def _section(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise PerftestOutputError(
            where,
            key,
            "an object",
            "missing" if value is None else type(value).__name__,
        )
    return value


def _json_int(section: Mapping[str, Any], key: str, where: str) -> int:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise PerftestOutputError(
            where, key, "a non-negative integer", "missing" if value is None else _show(str(value))
        )
    return value


def _json_number(section: Mapping[str, Any], key: str, where: str) -> Decimal:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PerftestOutputError(
            where, key, "a number", "missing" if value is None else _show(str(value))
        )
    return _decimal(str(value), where, key)


def _json_text(section: Mapping[str, Any], key: str, where: str) -> str:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise PerftestOutputError(
            where, key, "a string", "missing" if value is None else _show(str(value))
        )
    return printable(value)


def _line_of(text: str, key: str) -> int:
    for number, raw in enumerate(text.split("\n"), 1):
        if re.match(rf"\s*\"?{re.escape(key)}\"?\s*:", raw):
            return number
    return 0


def parse_json(text: str, *, unit: Unit, where: str = "JSON") -> PerftestRun:
    """Parse an ``--out_json`` file, legacy or standard. ``unit``: Gb/s when the run had
    ``--report_gbits``, else MiB/s (the file does not say)."""
    _check_size(text, where)
    obj, standard = _load_json(text, where)
    info_section = _section(obj, "test_info", where)
    test, bidirectional = _parse_title(_json_text(info_section, "test", where), where)
    gid = info_section.get("GID_index")
    info = _Info(
        test=test,
        bidirectional=bidirectional,
        device=_json_text(info_section, "Device", where),
        qps=_json_int(info_section, "Number_of_qps", where),
        mtu=_json_int(info_section, "Mtu", where),
        link_type=_json_text(info_section, "Link_type", where),
        gid_index=None if gid is None else _json_int(info_section, "GID_index", where),
        connection=(
            _json_text(info_section, "Connection_type", where)
            if "Connection_type" in info_section
            else None
        ),
    )
    output = _Output(info, unit, "json")
    rows: list[BwResult] = []
    sections: tuple[tuple[str, Scope], ...] = (
        ("results", "total"),
        ("results_local", "local"),
        ("results_remote", "remote"),
    )
    for key, scope in sections:
        if key == "results" or key in obj:
            section = _section(obj, key, where)
            at = f"{where} {key}"
            values = (
                _json_int(section, "MsgSize", at),
                _json_int(section, "n_iterations", at),
                _json_number(section, "BW_peak", at),
                _json_number(section, "BW_average", at),
                _json_number(section, "MsgRate", at),
            )
            rows.append(_row(output, scope, _line_of(text, key), values))
    warnings: tuple[str, ...] = ()
    if bidirectional and len(rows) == 1:
        warnings = (
            "bidirectional JSON holds the last row perftest printed: the remote side's with "
            "--report-both (linux-rdma/perftest PR #322); read the directions from stdout",
        )
    return _run(
        output, tuple(rows), warnings + (() if standard else ("legacy (pre-24.01) perftest JSON",))
    )


def parse_run(stdout: str, stderr: str = "", json_text: str | None = None) -> PerftestRun:
    """stdout is the measurement; the JSON file, when given, must be this run's: its row is
    the last row stdout printed (see the module docstring). A file left from an earlier run
    (perftest writes it only when it reports) is refused rather than trusted."""
    run = parse_stdout(stdout, stderr)
    if json_text is None:
        return run
    from_json = parse_json(json_text, unit=run.unit)
    last = run.results[-1]
    mine = from_json.rows("total")[0]
    if (
        from_json.device != run.device
        or mine.message_bytes != last.message_bytes
        or mine.iterations != last.iterations
        or Decimal(mine.reported_average) != Decimal(last.reported_average)
    ):
        raise PerftestOutputError(
            f"JSON line {mine.line}",
            "JSON report of another run (a file left from an earlier run?)",
            f"{run.device} {last.message_bytes} B, {last.iterations} iterations, "
            f"{last.reported_average} {run.unit} (stdout line {last.line})",
            f"{from_json.device} {mine.message_bytes} B, {mine.iterations} iterations, "
            f"{mine.reported_average} {run.unit}",
        )
    return replace(run, json_checked=True)

"""What the NOS modules share to read and render: one JSON reader (:func:`show_json`), one
range expander (:func:`expand_ranges`), one switch-wide value (:class:`SwitchWide`), one
tally of counters read from text tables (:class:`CounterTally`), shell refusals, text tables
and the DSCP-map helpers.

Each reader has one behaviour on bad input: a :class:`PlatformError` that says what was read
(the device and command, or the key) and what was expected; never an empty stand-in, which
would read as "nothing configured". Kept private (underscore module) so the public platform
surface stays the ``Platform`` ABC.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from agent.device.platforms.base import ConfigRejected, Connection, PlatformError
from agent.device.state import (
    DSCPS,
    Counters,
    InterfaceCounters,
    InterfaceState,
    QosState,
    QueueCounters,
    WatchdogCounters,
    WatchdogState,
)
from common.text import natural_key as natural_key  # the platforms sort ports with it

T = TypeVar("T")
JSON_SHAPES = {dict: "a JSON object", list: "a JSON array", object: "a JSON document"}
RANGE_PART = re.compile(r"(\d+)(?:-(\d+))?")

# What a Linux shell, sudo, click (SONiC ``config``) and NVUE print when a command fails.
SHELL_REFUSALS = re.compile(
    r"^\s*(%|Error\b|ERROR\b|error:|Invalid\b|Usage:|usage:|sudo:|bash:|-bash:"
    r"|Failed\b|Traceback\b|\S+: command not found)",
    re.MULTILINE,
)


def majority(values: Iterable[T]) -> T | None:
    """The most common value (ties: the first seen); None for no values.

    Device-wide settings (the DSCP map, the watchdog) are read per port on some NOSes; the
    normalized model holds one value per device, so the one most ports use stands for it.
    """
    counted = Counter(values)
    if not counted:
        return None
    return counted.most_common(1)[0][0]


def shell_refusal(output: str) -> str | None:
    """The first line of ``output`` that says a shell command failed, if any."""
    match = SHELL_REFUSALS.search(output)
    if match is None:
        return None
    line_start = output.rfind("\n", 0, match.start()) + 1
    line_end = output.find("\n", match.start())
    return output[line_start : line_end if line_end != -1 else None].strip()


def run_checked(conn: Connection, command: str, success: str | None = None) -> str:
    """Run one shell command; raise :class:`ConfigRejected` if it failed.

    ``success`` is a marker the command prints only when it worked (SONiC's ``config``
    commands print e.g. "Patch applied successfully."): its absence is a failure too, because
    a silent error must never look like a change that was made.
    """
    output = conn.show(command)
    refusal = shell_refusal(output)
    if refusal is None and success is not None and success not in output:
        refusal = f"expected {success!r} in the output, got {output.strip()[:200]!r}"
    if refusal is not None:
        raise ConfigRejected(f"{conn.device}: refused {command!r}: {refusal}")
    return output


def parse_int(text: str) -> int:
    """Counter cells as SONiC prints them: ``1,200``; ``N/A`` (not supported) counts as 0."""
    cleaned = text.replace(",", "").strip()
    return int(cleaned) if cleaned.isdigit() else 0


def text_tables(output: str) -> list[tuple[list[str], list[list[str]]]]:
    """Tables as tabulate prints them (SONiC show commands): (header cells, rows).

    A table is a header line, a rule of dashes and rows up to the next blank line; cells are
    split on two or more spaces. Titles and other lines outside tables are skipped.
    """
    tables: list[tuple[list[str], list[list[str]]]] = []
    previous = ""
    rows: list[list[str]] | None = None
    for line in output.splitlines():
        stripped = line.strip()
        if not stripped:
            rows = None
        elif re.fullmatch(r"[-+|\s]+", stripped) and "--" in stripped:
            rows = []
            tables.append((re.split(r"\s{2,}", previous.strip()), rows))
        elif rows is not None:
            rows.append(re.split(r"\s{2,}", stripped))
        previous = line
    return tables


def class_selector(dscp: int) -> int:
    """The priority of a DSCP's class selector bits (``dscp >> 3``, RFC 2474 §4.2.2): the
    default map of EOS, NVUE and mlx5 NICs (which puts DSCP 24-31 in priority 3)."""
    return dscp >> 3


def class_selector_map() -> dict[int, int]:
    """:func:`class_selector` for every DSCP."""
    return {dscp: class_selector(dscp) for dscp in DSCPS}


def dscp_groups(dscp_to_priority: dict[int, int]) -> dict[int, list[int]]:
    """Priority → the DSCPs that map to it (ascending), for every priority that has some."""
    groups: dict[int, list[int]] = {}
    for dscp in DSCPS:
        groups.setdefault(dscp_to_priority[dscp], []).append(dscp)
    return dict(sorted(groups.items()))


def classifier_differs(desired: QosState, actual: QosState | None) -> bool:
    """Whether the trust or the DSCP map must be written (always when nothing is known)."""
    return (
        actual is None
        or actual.trust != desired.trust
        or actual.dscp_to_priority != desired.dscp_to_priority
    )


def changed_dscps(desired: QosState, actual: QosState) -> list[int]:
    return [d for d in DSCPS if desired.dscp_to_priority.get(d) != actual.dscp_to_priority.get(d)]


def watchdog_multiples(watchdog: WatchdogState, platform: str) -> tuple[int, int, int]:
    """(polling ms, detection ÷ polling, restoration ÷ polling) for NOSes that count polls.

    NVUE and NX-OS configure the watchdog as a poll interval and multiples of it; a plan whose
    times are not whole multiples cannot be rendered exactly, so it is refused rather than
    rounded (a silently longer detection time is a longer pause storm).
    """
    polling = watchdog.polling_ms or 100
    multiples = []
    for label, value in (
        ("detection_ms", watchdog.detection_ms),
        ("restoration_ms", watchdog.restoration_ms),
    ):
        if value is None:
            multiples.append(0)
            continue
        if value % polling:
            raise PlatformError(
                f"{platform}: watchdog {label} {value} is not a multiple of polling_ms "
                f"{polling}; this NOS counts the watchdog in polling intervals"
            )
        multiples.append(value // polling)
    return polling, multiples[0], multiples[1]


def unique(values: Sequence[T]) -> list[T]:
    """``values`` without repeats, first occurrence kept."""
    seen: list[T] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


# ---------------------------------------------------------------------- JSON replies


def parse_json(device: str, command: str, output: str, shape: type[T]) -> T:
    """The JSON document ``command`` printed on ``device``, which must be a ``shape``
    (``dict``: an object, ``list``: an array, ``object``: any document).

    Bad input, whatever the NOS: output that is not JSON, or JSON of another shape, raises
    :class:`PlatformError` ``DEVICE: 'COMMAND' …`` saying what came back.
    """
    try:
        document = json.loads(output)
    except json.JSONDecodeError:
        raise PlatformError(
            f"{device}: {command!r} did not return JSON: {output.strip()[:200]}"
        ) from None
    if not isinstance(document, shape):
        raise PlatformError(
            f"{device}: {command!r} returned {type(document).__name__}; "
            f"Expected: {JSON_SHAPES.get(shape, shape.__name__)}"
        )
    return document


@overload
def show_json(conn: Connection, command: str) -> dict[str, Any]: ...
@overload
def show_json(conn: Connection, command: str, shape: type[T]) -> T: ...
def show_json(conn: Connection, command: str, shape: type[Any] = dict) -> Any:
    """Run ``command`` and read its JSON reply (a JSON object unless ``shape`` says otherwise);
    bad input as in :func:`parse_json`."""
    return parse_json(conn.device, command, conn.show(command), shape)


# ---------------------------------------------------------------------- ranges and uniform values


def expand_ranges(text: str, what: str) -> list[int]:
    """``"3-4"`` / ``"3,4"`` / ``"0-2,5"`` / ``"3"`` → the numbers, in the order written;
    ``""`` → ``[]``. The keys and lists of priorities, queues and DSCPs that SONiC (QUEUE and
    BUFFER_PG keys, ``pfc_enable``), NVUE (collection keys) and NX-OS (``match dscp``,
    ``pause pfc-cos``) print. Spaces and empty items are ignored.

    Bad input (a part that is not ``N`` or ``N-M`` with ``N <= M``) raises
    :class:`PlatformError` naming ``what`` was read: a value the agent cannot read must not
    turn into fewer priorities.
    """
    numbers: list[int] = []
    for part in text.replace(" ", "").split(","):
        span = _span(part) if part else range(0)
        if span is None:
            raise PlatformError(
                f"{what}: Expected: numbers or ranges such as 3,4 or 0-2 Actual: {text!r}"
            )
        numbers.extend(span)
    return numbers


def _span(part: str) -> range | None:
    """``"3"`` or ``"0-2"`` as a range; None for anything else (``"x"``, ``"4-3"``, ``"3-"``)."""
    match = RANGE_PART.fullmatch(part)
    if match is None:
        return None
    low = int(match.group(1))
    high = int(match.group(2) or low)
    return range(low, high + 1) if high >= low else None


@dataclass(frozen=True)
class SwitchWide:
    """A NOS whose QoS objects are switch-wide (NVUE's ``default-global`` profiles, NX-OS's
    system MQC policies): one value must serve every port."""

    platform: str
    objects: str  # what the renderer configures, for the refusal

    @staticmethod
    def as_read(actual: QosState | None) -> InterfaceState | None:
        """The switch-wide values as the device reports them: its first port's (None when
        nothing was read)."""
        if actual is None or not actual.interfaces:
            return None
        return next(iter(actual.interfaces.values()))

    def uniform(self, values: Sequence[T], what: str, empty: T) -> T:
        """The value every port has (``empty`` without ports). Ports that differ raise
        :class:`PlatformError`: rendering one port's value would silently change the others."""
        if not values:
            return empty
        if any(value != values[0] for value in values[1:]):
            raise PlatformError(
                f"{self.platform}: ports need different {what}; this renderer configures "
                f"{self.objects} (set explicit thresholds in the profile)"
            )
        return values[0]


# ---------------------------------------------------------------------- counters from text


def _per_priority() -> list[int]:
    return [0] * 8


@dataclass
class PortTally:
    """One port's counters while the show outputs are read (each fills its part, in any
    order); a part no output mentioned stays zero."""

    pfc_rx: list[int] = field(default_factory=_per_priority)
    pfc_tx: list[int] = field(default_factory=_per_priority)
    queues: dict[int, dict[str, int | None]] = field(default_factory=dict)  # QueueCounters fields
    watchdog: dict[int, WatchdogCounters] = field(default_factory=dict)
    headroom_drops: list[int] = field(default_factory=_per_priority)

    def queue(self, queue: int) -> dict[str, int | None]:
        """The queue's fields read so far (the queue counts as reported from now on)."""
        return self.queues.setdefault(queue, {})

    def counters(self) -> InterfaceCounters:
        return InterfaceCounters(
            pfc_rx=tuple(self.pfc_rx),
            pfc_tx=tuple(self.pfc_tx),
            queues={q: QueueCounters.model_validate(c) for q, c in sorted(self.queues.items())},
            watchdog=dict(sorted(self.watchdog.items())),
            headroom_drops=tuple(self.headroom_drops),
        )


@dataclass
class CounterTally:
    """The counters of a NOS that prints them as text (SONiC's tables, NX-OS's blocks), per
    port, gathered from several show outputs into one :class:`Counters`."""

    ports: dict[str, PortTally] = field(default_factory=dict)

    def port(self, name: str) -> PortTally:
        """The port's tally (the port is reported from now on)."""
        return self.ports.setdefault(name, PortTally())

    def counters(self, device: str, collected_at: float) -> Counters:
        interfaces = {
            name: self.ports[name].counters() for name in sorted(self.ports, key=natural_key)
        }
        return Counters(device=device, collected_at=collected_at, interfaces=interfaces)

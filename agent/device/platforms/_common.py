"""Small helpers shared by the SONiC, Cumulus NVUE, NX-OS and Linux-host platforms.

Kept private (underscore module) so the public platform surface stays the ``Platform`` ABC.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TypeVar

from agent.device.platforms.base import ConfigRejected, Connection
from agent.device.state import DSCPS, QosState, WatchdogState

T = TypeVar("T")

# What a Linux shell, sudo, click (SONiC ``config``) and NVUE print when a command fails.
SHELL_REFUSALS = re.compile(
    r"^\s*(%|Error\b|ERROR\b|error:|Invalid\b|Usage:|usage:|sudo:|bash:|-bash:"
    r"|Failed\b|Traceback\b|\S+: command not found)",
    re.MULTILINE,
)


def natural_key(name: str) -> tuple[object, ...]:
    """Sort Ethernet8 before Ethernet12 (interface names as people read them)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


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
    from agent.device.platforms.base import PlatformError

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

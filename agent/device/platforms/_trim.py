"""Packet trimming counters as SONiC and Cumulus Linux print them, into
:class:`agent.device.state.InterfaceTrim` per interface.

The three columns are SAI's (sonic-net/SONiC ``doc/packet_trimming/packet-trimming-design.md``
§2.4) and OpenConfig's (``trim-pkts``, ``out-trim-pkts``, ``dropped-trim-pkts``): trimmed (sent
+ dropped), trimmed and sent, trimmed and dropped at the trim queue. A cell the device prints as
``N/A`` and a column its release does not print are not read (None), never 0; a column no
queue or port reported gets its reason in ``Counters.trim_unread``.

SONiC (sonic-utilities 202511; ``scripts/queuestat``, ``utilities_common/portstat.py`` and the
expected outputs in ``tests/queuestat_input/queuestat_test_vectors.py``,
``tests/portstat_test.py``): ``show queue counters --trim -j`` gives per port and queue
(``UC0``…) ``trimpacket``, ``trimsentpacket``, ``trimdroppacket``; ``show interfaces counters
trim -j`` per port ``TRIM_PKTS``, ``TRIM_TX_PKTS``, ``TRIM_DRP_PKTS`` (numbers with comma
separators). 202505 has only the trimmed column (``trimpacket``, ``TRIM_PKTS``).

Cumulus Linux (CumulusNetworks/docs ``content/cumulus-linux-515`` and ``-519``
``.../Quality-of-Service/Packet-Trimming.md``, "Show Packet Trimming Counters"): text tables
only, no JSON form documented. 5.15 prints a port table ``interface  trimmed-packets`` whose
meaning depends on the ASIC ("On the Spectrum-4 switch, the trimmed-packets field shows the
number of packets dropped due to shared buffer congestion. On the Spectrum-5 switch, … the
number of sent trimmed packets"), so it is not read; per interface ``traffic-class
trimmed-packets-tx``, trimmed packets per class ("NVUE does not show the number of trimmed
packets sent successfully for a queue level"). 5.19 prints ``Interface  Trim Eligible Packets
Trimmed TxPackets`` (TxPackets ``N/A`` on Spectrum-4) and per interface ``Traffic Class  Trim
Eligible Packets``. Header cells are separated by one space in places, so columns are found
by their known names, and rows (one token per cell) are split on white space.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.device.platforms._common import natural_key, shell_refusal
from agent.device.platforms.base import PlatformError
from agent.device.state import (
    PRIORITIES,
    TRIM_COLUMNS,
    Counters,
    InterfaceCounters,
    InterfaceTrim,
    TrimColumn,
    TrimCounters,
)
from agent.intent.rules import NOT_TRIMMING


def not_trimming(platform: str) -> str:
    """Why a platform's trim counters are not read: the intent's reason it cannot trim."""
    return f"the platform does not trim: {NOT_TRIMMING[platform]} (rule IR022)"


TRIM_OFF = "packet trimming is off on this switch"
TRIM_STATE_UNKNOWN = (
    "the switch's configuration was not read with the counters, so whether it trims is unknown"
)
NOT_APPLICABLE = "N/A"

SONIC_QUEUE_KEYS: dict[str, TrimColumn] = {
    "trimpacket": "trimmed",
    "trimsentpacket": "sent",
    "trimdroppacket": "dropped",
}
SONIC_PORT_KEYS: dict[str, TrimColumn] = {
    "TRIM_PKTS": "trimmed",
    "TRIM_TX_PKTS": "sent",
    "TRIM_DRP_PKTS": "dropped",
}
_SONIC_202505 = (
    "not in the output: SONiC 202505 reports trimmed packets only (sent and dropped since 202511)"
)
SONIC_ABSENT: dict[TrimColumn, str] = {
    "trimmed": "not in the output",
    "sent": _SONIC_202505,
    "dropped": _SONIC_202505,
}
NVUE_PORT_COLUMNS: dict[str, TrimColumn] = {
    "trim eligible packets": "trimmed",
    "trimmed txpackets": "sent",
}
NVUE_CLASS_COLUMNS: dict[str, TrimColumn] = {
    "trim eligible packets": "trimmed",  # 5.19
    "trimmed-packets-tx": "trimmed",  # 5.15: trimmed per class, sent is not shown per queue
}
NVUE_PORT_515 = (
    "Cumulus Linux 5.15's port-level trimmed-packets counts dropped packets on Spectrum-4 and "
    "sent trimmed packets on Spectrum-5; the agent does not tell the ASICs apart"
)
NVUE_ABSENT: dict[TrimColumn, str] = {
    "trimmed": "Cumulus Linux printed no trimmed-packets column",
    "sent": "Cumulus Linux reports trimmed packets sent per port since 5.19 only, never per "
    "traffic class",
    "dropped": "Cumulus Linux reports trimmed packets dropped for the whole switch only",
}


def refusal(output: str) -> str | None:
    """Why a show command failed: its ``Error…`` line where it prints one (click prints the
    usage first), else the first line that says it failed; ``printed nothing`` for no output."""
    if not output.strip():
        return "printed nothing"
    match = re.search(r"(?im)^\s*error\b.*$", output)
    return match.group(0).strip() if match else shell_refusal(output)


def with_trim_unread(counters: Counters, why: str) -> Counters:
    """``counters`` with the trim family marked not read, with why."""
    return counters.model_copy(update={"unread": {**counters.unread, "trim": why}})


def with_trim(
    counters: Counters, trim: dict[str, InterfaceTrim], unread: dict[TrimColumn, str]
) -> Counters:
    """``counters`` with the trim family read: ``trim`` on the interfaces the other counters
    reported (all those of ``trim`` when there are none, a read of this family alone), so a
    port no other output named gets no zeros of the other families."""
    interfaces = dict(counters.interfaces)
    for name, found in trim.items():
        have = interfaces.get(name)
        if have is None and counters.interfaces:
            continue
        interfaces[name] = (have or InterfaceCounters()).model_copy(update={"trim": found})
    without = {family: why for family, why in counters.unread.items() if family != "trim"}
    return counters.model_copy(
        update={"interfaces": interfaces, "unread": without, "trim_unread": unread}
    )


def cell(text: Any, where: str) -> int | None:
    """A counter cell: ``20,000`` → 20000; ``N/A`` (not supported) → None; else an error."""
    value = str(text).replace(",", "").strip()
    if value.isdigit():
        return int(value)
    if value.upper() == NOT_APPLICABLE:
        return None
    raise PlatformError(f"{where}: Expected: a packet count or N/A Actual: {text!r}")


@dataclass
class TrimTally:
    """Trim counters while outputs are read: per interface, and per column whether any cell
    was printed (``seen``) and whether any was a number (``read``)."""

    interfaces: dict[str, InterfaceTrim] = field(default_factory=dict)
    seen: set[TrimColumn] = field(default_factory=set)
    read: set[TrimColumn] = field(default_factory=set)

    def counters(self, cells: dict[TrimColumn, int | None]) -> TrimCounters:
        self.seen.update(cells)
        self.read.update(column for column, value in cells.items() if value is not None)
        return TrimCounters.model_validate(cells)

    def port(self, name: str, cells: dict[TrimColumn, int | None]) -> None:
        have = self.interfaces.get(name, InterfaceTrim())
        self.interfaces[name] = have.model_copy(update={"port": self.counters(cells)})

    def queue(self, name: str, queue: int, cells: dict[TrimColumn, int | None]) -> None:
        have = self.interfaces.get(name, InterfaceTrim())
        queues = {**have.queues, queue: self.counters(cells)}
        self.interfaces[name] = have.model_copy(update={"queues": dict(sorted(queues.items()))})

    def unread(self, absent: dict[TrimColumn, str]) -> dict[TrimColumn, str]:
        """Why each column nobody reported a number for is not read."""
        why: dict[TrimColumn, str] = {}
        for column in TRIM_COLUMNS:
            if column in self.read:
                continue
            if column in self.seen:
                why[column] = "N/A on every port and queue (not supported on this ASIC)"
            else:
                why[column] = absent[column]
        return why

    def result(self) -> dict[str, InterfaceTrim]:
        return dict(sorted(self.interfaces.items(), key=lambda item: natural_key(item[0])))


# ---------------------------------------------------------------------- SONiC


def sonic_queue_trim(tally: TrimTally, document: dict[str, Any], command: str) -> None:
    """``show queue counters --trim -j``: unicast queues UC0..UC7 (the traffic classes)."""
    for port, queues in document.items():
        if not isinstance(queues, dict):
            raise PlatformError(f"{command!r}: {port}: Expected: a JSON object of queues")
        for label, fields in queues.items():
            match = re.fullmatch(r"UC(\d+)", label)
            if match is None or int(match.group(1)) not in PRIORITIES:
                continue  # multicast and ALL queues are not per traffic class
            tally.queue(port, int(match.group(1)), _columns(fields, SONIC_QUEUE_KEYS, command))


def sonic_port_trim(tally: TrimTally, document: dict[str, Any], command: str) -> None:
    """``show interfaces counters trim -j``: one object per port."""
    for port, fields in document.items():
        tally.port(port, _columns(fields, SONIC_PORT_KEYS, command))


def _columns(
    fields: Any, keys: dict[str, TrimColumn], command: str
) -> dict[TrimColumn, int | None]:
    if not isinstance(fields, dict):
        raise PlatformError(f"{command!r}: Expected: a JSON object of counters")
    return {
        column: cell(fields[key], f"{command!r} {key}")
        for key, column in keys.items()
        if key in fields
    }


# ---------------------------------------------------------------------- Cumulus Linux


def nvue_table(
    output: str, columns: dict[str, TrimColumn]
) -> list[tuple[str, dict[TrimColumn, int | None]]]:
    """Rows of the table whose header names some of ``columns``: (first cell, cells)."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        found = sorted(
            (position, column)
            for label, column in columns.items()
            if (position := line.lower().find(label)) > 0
        )
        if found and index + 1 < len(lines) and lines[index + 1].strip().startswith("--"):
            return _nvue_rows(lines[index + 2 :], [column for _, column in found])
    return []


def _nvue_rows(
    lines: Iterable[str], order: list[TrimColumn]
) -> list[tuple[str, dict[TrimColumn, int | None]]]:
    rows = []
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue  # 5.15 prints a blank line between the rule and the rows
        if len(tokens) != len(order) + 1:
            raise PlatformError(
                f"packet-trim counters: Expected: {len(order) + 1} cells Actual: {line.strip()!r}"
            )
        where = f"packet-trim counters {tokens[0]}"
        rows.append(
            (tokens[0], {c: cell(v, where) for c, v in zip(order, tokens[1:], strict=True)})
        )
    return rows


def nvue_port_trim(tally: TrimTally, output: str) -> str | None:
    """``nv show system forwarding packet-trim counters``; the reason a 5.15 port table is not
    read (None for 5.19)."""
    if re.search(r"(?im)^\s*interface\s+trimmed-packets\s*$", output):
        return NVUE_PORT_515
    for port, cells in nvue_table(output, NVUE_PORT_COLUMNS):
        tally.port(port, cells)
    return None


def nvue_class_trim(tally: TrimTally, interface: str, output: str) -> None:
    """``nv show interface IF counters packet-trim`` (5.19) or ``… packet-trim counters``
    (5.15): one row per traffic class."""
    for label, cells in nvue_table(output, NVUE_CLASS_COLUMNS):
        if not label.isdigit() or int(label) not in PRIORITIES:
            raise PlatformError(f"{interface}: packet-trim counters: traffic class {label!r}")
        tally.queue(interface, int(label), cells)

"""Transient systemd timers: ``systemd-run --on-active=...``, ``systemctl stop|list-timers``.

Written from the man pages (systemd 252, the Debian bookworm release SONiC 202311+ runs):

* systemd-run(1): ``--on-active=SPEC`` creates a transient ``.timer`` and ``.service``
  (``--unit=NAME`` names both; ``--timer-property=``, ``--description=``, ``-q`` accepted); it
  prints "Running timer as unit: NAME.timer" and "Will run service as unit: NAME.service";
  a name in use fails with "Failed to start transient timer unit: Unit NAME.timer was already
  loaded or has a fragment file.". The timespan syntax is systemd.time(7) (``60``, ``90s``,
  ``5min``, ``1h 30s``).
* systemd.timer(5) ``RemainAfterElapsed=`` (default yes): an elapsed transient timer stays
  loaded (``list-timers --all`` shows it, NEXT/LEFT ``n/a``) until ``systemctl stop`` unloads it.
* systemctl(1) ``list-timers [PATTERN...] [--all] [--plain] [--no-legend]``: columns NEXT, LEFT,
  LAST, PASSED, UNIT, ACTIVATES; LEFT/PASSED as ``format_timestamp_relative`` words them
  (``4min 31s left``, ``5min left``, ``1h 4min left``, ``12s ago``); the legend "N timers
  listed." and "Pass --all to see loaded but inactive timers, too.". ``systemctl stop`` of an
  unknown unit: "Failed to stop NAME.timer: Unit NAME.timer not loaded.".

Timers run on the switch's clock (``SwitchManager.clock``) and outlive SSH connections; the
command runs as root in a shell of its own when the timer elapses.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lab.mgmt.switch import Clock, TimerHandle

log = logging.getLogger("lab.mgmt.sonic")
_SPAN_UNITS = {
    "us": 1e-6,
    "usec": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}


def parse_timespan(text: str) -> float | None:
    """systemd.time(7): ``"60"`` / ``"90s"`` / ``"1h 30s"`` -> seconds; None if malformed."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip())
    joined = "".join(f"{n}{u}" for n, u in parts)
    if not parts or joined != re.sub(r"\s+", "", text):
        return None
    total = 0.0
    for number, unit in parts:
        scale = _SPAN_UNITS.get(unit or "s")
        if scale is None:
            return None
        total += float(number) * scale
    return total


def relative(seconds: float, suffix: str) -> str:
    """systemd ``format_timestamp_relative`` for spans under two days."""
    usec = int(seconds * 1_000_000)
    s, minute, hour, day = 1_000_000, 60_000_000, 3_600_000_000, 86_400_000_000
    if usec >= 2 * day:
        return f"{usec // day} days {suffix}"
    if usec >= 25 * hour:
        return f"1 day {(usec - day) // hour}h {suffix}"
    if usec >= 6 * hour:
        return f"{usec // hour}h {suffix}"
    if usec >= hour:
        return f"{usec // hour}h {(usec % hour) // minute}min {suffix}"
    if usec >= 5 * minute:
        return f"{usec // minute}min {suffix}"
    if usec >= minute:
        return f"{usec // minute}min {(usec % minute) // s}s {suffix}"
    if usec >= s:
        return f"{usec // s}s {suffix}"
    if usec >= 1000:
        return f"{usec // 1000}ms {suffix}"
    return f"{usec}us {suffix}" if usec > 0 else "now"


def wall_clock(when: float) -> str:
    """systemd ``format_timestamp``: ``Sun 2026-11-29 02:00:00 UTC``."""
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(when))


@dataclass
class TransientTimer:
    """One ``systemd-run`` timer and the service it activates."""

    name: str
    command: list[str]
    deadline: float  # on the switch clock
    handle: TimerHandle | None
    last_run: float | None = None  # wall time it elapsed


RunCommand = Callable[[list[str]], Awaitable[str]]


class TimerUnits:
    """The switch's transient timers."""

    def __init__(self, clock: Clock, run: RunCommand) -> None:
        self.clock = clock
        self.run = run
        self.units: dict[str, TransientTimer] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, name: str, delay_s: float, command: list[str]) -> None:
        """Arm a timer that runs ``command`` (as root) after ``delay_s``."""
        handle = self.clock.schedule(delay_s, lambda: self._elapse(name))
        self.units[name] = TransientTimer(name, command, self.clock.now() + delay_s, handle)

    def _elapse(self, name: str) -> None:
        unit = self.units.get(name)
        if unit is None or unit.handle is None:
            return
        unit.handle, unit.last_run = None, time.time()
        task = asyncio.ensure_future(self._run(unit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, unit: TransientTimer) -> None:
        output = await self.run(unit.command)
        log.warning("%s.service ran %s: %s", unit.name, " ".join(unit.command), output[-500:])

    async def drain(self) -> None:
        """Wait for services that elapsed timers started (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks))

    def stop(self, name: str) -> bool:
        """``systemctl stop NAME.timer``: cancel and unload; False if it is not loaded."""
        unit = self.units.pop(name, None)
        if unit is None:
            return False
        if unit.handle is not None:
            unit.handle.cancel()
        return True

    def rows(self, patterns: list[str], include_elapsed: bool) -> list[list[str]]:
        """``list-timers`` rows, soonest first."""
        now_clock, now_wall = self.clock.now(), time.time()
        rows: list[tuple[float, list[str]]] = []
        for unit in self.units.values():
            timer = f"{unit.name}.timer"
            if patterns and not any(fnmatch.fnmatch(timer, p) for p in patterns):
                continue
            if unit.handle is None and not include_elapsed:
                continue
            rows.append((unit.deadline, _row(unit, now_clock, now_wall)))
        return [row for _, row in sorted(rows, key=lambda r: r[0])]

    def cancel_all(self) -> None:
        """Process shutdown: nothing fires any more."""
        for unit in self.units.values():
            if unit.handle is not None:
                unit.handle.cancel()
        for task in self._tasks:
            task.cancel()


def _row(unit: TransientTimer, now_clock: float, now_wall: float) -> list[str]:
    if unit.handle is not None:
        left = max(0.0, unit.deadline - now_clock)
        nxt, left_text = wall_clock(now_wall + left), relative(left, "left")
    else:
        nxt, left_text = "n/a", "n/a"
    if unit.last_run is not None:
        last, passed = wall_clock(unit.last_run), relative(now_wall - unit.last_run, "ago")
    else:
        last, passed = "n/a", "n/a"
    return [nxt, left_text, last, passed, f"{unit.name}.timer", f"{unit.name}.service"]


def format_timers(rows: list[list[str]], legend: bool, all_shown: bool) -> str:
    """systemd's table: left-aligned columns, one space apart, optional header and legend."""
    header = ["NEXT", "LEFT", "LAST", "PASSED", "UNIT", "ACTIVATES"]
    table = [header, *rows] if legend else rows
    if not table:
        lines: list[str] = []
    else:
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        lines = [
            " ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table
        ]
    if legend:
        lines += ["", f"{len(rows)} timers listed."]
        if not all_shown:
            lines.append("Pass --all to see loaded but inactive timers, too.")
    return "\n".join(lines)


def systemd_run_args(args: list[str]) -> tuple[dict[str, Any], list[str]] | str:
    """(options, command) of a ``systemd-run`` command line, or the error it prints."""
    options: dict[str, Any] = {}
    rest = list(args)
    while rest and rest[0].startswith("-"):
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if name in (
            "--on-active",
            "--unit",
            "--timer-property",
            "--description",
            "-p",
            "--property",
            "--on-boot",
            "--on-calendar",
        ):
            if not eq:
                if not rest:
                    return f"systemd-run: option '{name}' requires an argument"
                value = rest.pop(0)
            options.setdefault(name, []).append(value)
        elif name in ("-q", "--quiet", "--no-block", "--collect", "-G", "--system"):
            options[name] = True
        else:
            return f"systemd-run: unrecognized option '{arg}'"
    return options, rest

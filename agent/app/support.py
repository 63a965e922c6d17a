"""What every command shares: the exit-code contract, turning errors into messages, and
progress on stderr."""

from __future__ import annotations

import atexit
import functools
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from agent.errors import AgentError, IntentError, printable
from agent.intent.units import UnitError, parse_size, parse_speed
from common.conventions import console, fabric_argument, output_option, progress_display

if TYPE_CHECKING:
    # rich only when something is printed through it (an error, a bar): a run that prints
    # JSON and ends well never imports it (issue #31, start-up).
    from rich.console import Console
    from rich.progress import Progress

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2

# The exit-code contract of every command that talks to devices (docs/cli-conventions.md,
# "Exit codes"): each device's outcome is one of these, and exit_code() decides from all.
AS_INTENDED = "as intended"
NOT_AS_INTENDED = "not as intended"  # differs, failed, pending, or read but unverified
NOT_REACHED = "not reached"  # nothing was read from it (agent.device.failures.NOT_CONNECTED)
NOT_TRIED = "not tried"  # skipped: a canary or an earlier batch stopped the run


def exit_code(outcomes: Iterable[str]) -> int:
    """0 every device as intended; 2 when no device that was tried could be reached (the
    command could not do its job); 1 otherwise (a device not as intended, unverified,
    unreachable or not tried)."""
    listed = list(outcomes)
    tried = [o for o in listed if o != NOT_TRIED]
    if tried and all(o == NOT_REACHED for o in tried):
        return EXIT_ERROR
    if any(o != AS_INTENDED for o in listed):
        return EXIT_FAILED
    return EXIT_OK


# Shared by every command that reads a fabric file and prints a table or JSON
# (common/conventions.py).
FABRIC = fabric_argument
OUTPUT = output_option("table", "json")

F = TypeVar("F", bound=Callable[..., Any])


def _stderr() -> Console:
    return console(stderr=True)


def handle_errors(command: F) -> F:
    """Turn :class:`AgentError` (and anything unexpected) into a message and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = bool(click.get_current_context().find_root().params.get("debug"))
        try:
            return command(*args, **kwargs)
        except IntentError as exc:
            err = _stderr()
            for problem in exc.problems:
                err.print(f"error: {problem}", markup=False)
            err.print(f"{exc.total} problem(s) found; nothing was changed.", markup=False)
            sys.exit(exc.exit_code)
        except AgentError as exc:
            _stderr().print(f"error: {printable(str(exc), keep_newlines=True)}", markup=False)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:
            if debug:
                raise
            _stderr().print(
                f"internal error: {type(exc).__name__}: {printable(str(exc))} "
                "(re-run with --debug for details)",
                markup=False,
            )
            sys.exit(EXIT_ERROR)

    return cast(F, wrapper)


@functools.cache
def _frozen_at_exit() -> None:
    # The interpreter's exit collects garbage over every object left (~30 ms after the twin's
    # imports); frozen, they are skipped, and the memory goes back to the system all the same.
    atexit.register(gc.freeze)


def imports_frozen(command: F) -> F:
    """Run ``command`` with the objects alive at its start -- nearly all of them made by the
    imports (modules, classes, pydantic's validators), alive until the process ends -- moved
    out of the garbage collector's sight (``gc.freeze``): otherwise the first full collection
    while a large fabric loads walks them all for nothing (12 ms of the twin's start-up on
    pod-400g, issue #31), and so does the one at the interpreter's exit. Given back at the
    end, for a process that goes on (a test run), and frozen again at its exit.
    https://docs.python.org/3/library/gc.html#gc.freeze"""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _frozen_at_exit()
        gc.freeze()
        try:
            return command(*args, **kwargs)
        finally:
            gc.unfreeze()

    return cast(F, wrapper)


PROGRESS_AFTER_S = 2.0
"""A run shorter than this shows no progress bar unless asked (most runs end before it)."""

# --progress/--no-progress for the commands that simulate (default: on a terminal, once the
# work has taken PROGRESS_AFTER_S).
PROGRESS = click.option(
    "--progress/--no-progress", "progress", default=None,
    help="A progress bar on stderr [default: on a terminal, for work longer than 2 s].",
)  # fmt: skip


class ProgressBars:
    """Progress bars on stderr (rich), one per task, for work that may take a while.

    ``mode``: True shows them from the start (also into a file or pipe, where rich writes the
    final state); False never; None only on a terminal and only once the work has run
    :data:`PROGRESS_AFTER_S` -- a short run stays as quiet as before.
    """

    def __init__(self, mode: bool | None, *, after_s: float = PROGRESS_AFTER_S) -> None:
        self.mode = mode
        self.after_s = after_s
        self.started = time.monotonic()
        self.terminal = sys.stderr.isatty()
        self._bars: Progress | None = None
        self._tasks: list[tuple[str, int]] = []  # description, total
        self._done: list[int] = []

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.stop()

    def add(self, description: str, total: int) -> int:
        """A new bar for ``total`` units of work; its index for :meth:`update`."""
        self._tasks.append((description, total))
        self._done.append(0)
        if self._bars is not None:
            self._bars.add_task(description, total=total, detail="")
        return len(self._tasks) - 1

    def update(self, task: int, done: int, detail: str = "") -> None:
        """Task ``task`` has ``done`` of its total (``detail``: the text after the bar)."""
        self._done[task] = done
        if self._bars is None and not self._due():
            return
        bars = self._start()
        bars.update(bars.task_ids[task], completed=done, detail=detail)

    def _due(self) -> bool:
        if self.mode is not None:
            return self.mode
        return self.terminal and time.monotonic() - self.started >= self.after_s

    def _start(self) -> Progress:
        if self._bars is None:
            from rich.progress import (
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bars = progress_display(
                TaskProgressColumn(),
                # details name devices and files: shown, never markup
                TextColumn("{task.fields[detail]}", markup=False),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
            )
            for (description, total), done in zip(self._tasks, self._done, strict=True):
                self._bars.add_task(description, total=total, completed=done, detail="")
            self._bars.start()
        return self._bars


class DeviceProgress:
    """Progress of the devices (or hosts) a command talks to, on stderr: how many are done of
    how many, and the slowest one still pending with its time so far. A fan-out watcher
    (:func:`agent.device.fanout.watching`): every ``run_each`` of the block reports to it.

    Shown only on a terminal and only once more than one device is involved; ``always``
    shows it from the start (a playbook, whose steps take a while between fan-outs).
    """

    def __init__(
        self,
        label: str,
        names: Sequence[str] = (),
        *,
        err: Console | None = None,
        always: bool = False,
    ) -> None:
        self.label = label
        self.err = err
        self.always = always
        self.enabled = sys.stderr.isatty() if err is None else err.is_terminal
        self._lock = threading.Lock()
        self._display_lock = threading.Lock()
        self._known: dict[str, None] = dict.fromkeys(names)
        self._started: dict[str, float] = {}
        self._done: set[str] = set()
        self._display: Progress | None = None
        self._scope: Any = None

    def __enter__(self) -> DeviceProgress:
        from agent.device.fanout import watching  # lazily: the twin's path never loads it

        self._scope = watching(self)
        self._scope.__enter__()
        if self.always:
            self._show()
        return self

    def __exit__(self, *exc: object) -> None:
        self._scope.__exit__(None, None, None)
        with self._display_lock:
            if self._display is not None:
                self._display.stop()
                self._display = None

    def expect(self, names: Sequence[str]) -> None:
        with self._lock:
            self._known.update(dict.fromkeys(names))
        self._show()

    def started(self, name: str) -> None:
        with self._lock:
            self._started[name] = time.monotonic()
        self._show()

    def finished(self, name: str) -> None:
        with self._lock:
            self._done.add(name)
        self._show()

    def slowest(self) -> str:
        """``slowest: NAME 12 s`` for the device pending longest (empty when none is)."""
        with self._lock:
            pending = {n: t for n, t in self._started.items() if n not in self._done}
        if not pending:
            return ""
        name, since = min(pending.items(), key=lambda item: item[1])
        return f"slowest: {printable(name)} {time.monotonic() - since:.0f} s"

    def _show(self) -> None:
        """Start or update the display. rich's refresh thread calls :meth:`slowest` while it
        holds rich's lock, so rich is never called with ``_lock`` held (``_display_lock``
        only guards the start)."""
        with self._lock:
            total, done = len(self._known), len(self._done & self._known.keys())
        if not self.enabled or (total < 2 and not self.always):
            return
        with self._display_lock:
            if self._display is None:
                self._display = self._new_display()
                self._display.start()
            self._display.update(self._display.task_ids[0], total=total or None, completed=done)

    def _new_display(self) -> Progress:
        from rich.progress import MofNCompleteColumn, ProgressColumn, TimeElapsedColumn
        from rich.text import Text

        progress = self

        class Slowest(ProgressColumn):
            def render(self, task: Any) -> Text:
                return Text(progress.slowest())

        display = progress_display(
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            Slowest(),
            err=self.err,
            transient=True,
        )
        display.add_task(self.label, total=None)
        return display


class SizeType(click.ParamType[int]):
    """Bytes above 0, with the fabric file's units (``64MB``, ``1MiB``, ``4000000``)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            size = parse_size(value if isinstance(value, int) else str(value))
        except UnitError as exc:
            self.fail(str(exc), param, ctx)
        if size <= 0:
            self.fail(f"Expected: more than 0 bytes Actual: {value!r}", param, ctx)
        return size


class SpeedType(click.ParamType[int]):
    """A link speed (``400G``, ``10M``)."""

    name = "speed"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_speed(str(value))
        except UnitError as exc:
            self.fail(str(exc), param, ctx)


class HostList(click.ParamType[tuple[str, ...]]):
    """``h1,h2,h3``: host names in order."""

    name = "hosts"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        names = tuple(part.strip() for part in str(value).split(","))
        if not all(names):
            self.fail(f"Expected: host names separated by commas Actual: {value!r}", param, ctx)
        return names

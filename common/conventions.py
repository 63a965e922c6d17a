"""The command line's conventions, in one place (docs/cli-conventions.md says them in words).

- ``FABRIC`` is the first argument of every command that reads a fabric file; the older
  ``--fabric FILE`` stays as a hidden alias so existing scripts keep working.
- ``-o/--output`` picks the format wherever a command prints a result.
- ``--device PATTERN`` takes a name or a shell glob (``'leaf*'``), ``--role`` a role; a
  pattern that selects nothing is an error, not an empty run.
- Durations carry their unit (``common.clicktypes.Duration``).
- Every ``--help`` ends with examples (:func:`examples`).
- Text from users and files is printed literally: no rich markup, no ``:emoji:`` codes, no
  highlighting (:func:`console`); tables fold long cells instead of cutting them
  (:func:`table`), to the terminal's width, ``COLUMNS``, or 100 columns in a pipe or a file.
- Progress goes to stderr in one style (:func:`progress_display`): what is done, a bar, then
  the command's own columns; device and file names in it are literal text.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from common.clicktypes import Duration

if TYPE_CHECKING:
    # rich is imported where a console or a table is made: a command that prints JSON (the
    # twin's runs, issue #31) never pays for it.
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn
    from rich.table import Table

F = TypeVar("F", bound=Callable[..., Any])

ROLES = ("spine", "leaf", "host")
# Width for tables written into a pipe or a file when COLUMNS does not say: what `less`, a CI
# log and a ticket show without wrapping every row (200 did: `| less` on an 80- or
# 100-column terminal wrapped each line in two); tables fold cells to fit it. A terminal uses
# its own width; COLUMNS, when set, wins in both cases.
PIPE_WIDTH = 100
_PIPE_SIZE = os.terminal_size((PIPE_WIDTH, 24))
# No existence or kind check here: the loader reports a missing file or a directory as
# "error: FILE: …" like every other problem of the file (one format for editors and CI).
FABRIC_PATH = click.Path(path_type=Path)


def console(*, stderr: bool = False, width: int | None = None) -> Console:
    """A console that prints every string literally.

    rich would otherwise read ``[bold]`` in a device description as markup and ``:100:`` in
    ``fabric.yml:100:68`` as an emoji code; neither may change text that came from a user
    or a file (a FILE:LINE:COL location must stay parseable by editors and CI).
    """
    width, height = _size(width, stderr)
    return _line_console_class()(
        stderr=stderr,
        markup=False,
        emoji=False,
        highlight=False,
        width=width,
        height=height,
        soft_wrap=stderr,
    )


@functools.cache
def _line_console_class() -> type[Console]:
    from rich.console import Console
    from rich.text import Text

    class LineConsole(Console):
        """A message (strings, Text) is one line, never folded into two: into a pipe a grep
        or a ticket reads it whole, a terminal wraps it by itself. Tables still fold their
        cells to the width."""

        def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:
            if soft_wrap is None and objects and all(isinstance(o, str | Text) for o in objects):
                soft_wrap = True
            super().print(*objects, soft_wrap=soft_wrap, **options)

    return LineConsole


def progress_display(
    *columns: ProgressColumn | str,
    err: Console | None = None,
    transient: bool = False,
    disable: bool = False,
) -> Progress:
    """A progress display on stderr in the commands' one style: the task's description and a
    bar, then ``columns`` (the command's own: counts, the item in progress, times). Text in it
    is printed literally (a device or file name is never markup)."""
    from rich.progress import BarColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        *columns,
        console=err or console(stderr=True),
        transient=transient,
        disable=disable,
    )


def _size(width: int | None, stderr: bool) -> tuple[int | None, int | None]:
    """The console's width and height: ``width`` if given, else a valid COLUMNS, else 100 for
    a pipe or a file (a terminal: its own). rich reads COLUMNS and LINES again unless both
    are given, and crashes on one that is no number (``²``) or pads every line to a huge one,
    so when either is set both are given, sane."""
    if width is None:
        width = env_columns()
    if width is None and not stderr and not sys.stdout.isatty():
        width = PIPE_WIDTH
    height = _valid_env_int("LINES")
    if "COLUMNS" in os.environ or "LINES" in os.environ:
        terminal = _terminal_size()
        width, height = width or terminal.columns, height or terminal.lines
    return width, height


def _valid_env_int(name: str, low: int = 1, high: int = 10_000) -> int | None:
    """An environment variable that is a whole number of ASCII digits within the bounds."""
    text = os.environ.get(name, "")
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    value = int(text)
    return value if low <= value <= high else None


def _terminal_size() -> os.terminal_size:
    """The size of the terminal on stdout or stderr, never from COLUMNS/LINES (which
    ``shutil.get_terminal_size`` trusts); a pipe's width when neither is a terminal."""
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            return os.get_terminal_size(stream.fileno()) if stream else _PIPE_SIZE
        except (AttributeError, ValueError, OSError):
            continue
    return _PIPE_SIZE


def env_columns() -> int | None:
    """``COLUMNS`` from the environment, when it is a width (a whole number from 20 to
    10 000); None otherwise (unset, empty, ``abc``, ``²``, ``0``)."""
    return _valid_env_int("COLUMNS", low=20)


def table(title: str | None = None, *columns: str, **options: Any) -> Table:
    """A table whose cells fold (wrap inside the column) instead of ending in an ellipsis:
    a port name cut to ``Etherne…`` is worse than a taller row."""
    from rich.table import Table
    from rich.text import Text

    result = Table(title=Text(title) if title is not None else None, **options)
    for column in columns:
        add_column(result, column)
    return result


def add_column(target: Table, header: str, **options: Any) -> None:
    """Add a column that folds long cells (see :func:`table`)."""
    from rich.text import Text

    options.setdefault("overflow", "fold")
    target.add_column(Text(header), **options)


def fabric_argument(command: F) -> F:
    """``FABRIC`` as a positional argument, with ``--fabric FILE`` kept as an alias.

    Giving both (with different files) or neither is a usage error (exit 2)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        positional = kwargs.pop("fabric", None)
        alias = kwargs.pop("fabric_alias", None)
        if positional is not None and alias is not None and positional != alias:
            raise click.UsageError(
                f"FABRIC given twice: {positional} as the argument and {alias} as --fabric; "
                "give it once (the argument)"
            )
        chosen = positional if positional is not None else alias
        if chosen is None:
            raise click.MissingParameter(param_type="argument", param_hint="'FABRIC'")
        return command(*args, fabric=chosen, **kwargs)

    decorated = click.option(
        "--fabric",
        "fabric_alias",
        type=FABRIC_PATH,
        hidden=True,
        help="The same as the FABRIC argument (kept for older scripts).",
    )(wrapper)
    decorated = click.argument("fabric", required=False, metavar="FABRIC", type=FABRIC_PATH)(
        decorated
    )
    return decorated  # type: ignore[return-value]


def output_option(*choices: str, default: str = "table") -> Callable[[F], F]:
    """``-o/--output`` with the formats this command writes (``table`` first by default)."""
    formats = choices or ("table", "json")
    known = [f"{name} {_FORMAT_USE[name]}" for name in formats if name in _FORMAT_USE]
    return click.option(
        "-o",
        "--output",
        type=click.Choice(formats),
        default=default,
        show_default=True,
        help=("; ".join(known) + ".") if known else "The output format.",
    )


# What each format is for (the --output help lists only the command's own formats).
_FORMAT_USE = {
    "table": "for people",
    "json": "for tools",
    "yaml": "for files",
    "markdown": "for tickets",
    "junit": "for CI",
    "env": "to source in a job script",
    "text": "for people",
}


def device_options(command: F) -> F:
    """``--device PATTERN`` (names or globs, repeatable) and ``--role`` (repeatable)."""
    command = click.option(
        "--role",
        "roles",
        multiple=True,
        type=click.Choice(ROLES),
        help="Only devices of this role (repeatable).",
    )(command)
    return click.option(
        "--device",
        "devices",
        multiple=True,
        metavar="PATTERN",
        help="Only devices whose name matches: a name or a glob such as 'leaf*' (repeatable).",
    )(command)


def select_devices(
    devices: Iterable[tuple[str, str]], patterns: Sequence[str], roles: Sequence[str] = ()
) -> list[str]:
    """The names, in fabric order, that match any of ``patterns`` (all when none) and any of
    ``roles`` (all when none). ``devices`` are ``(name, role)`` pairs.

    A pattern that matches no device, or a selection that leaves nothing, raises
    :class:`click.BadParameter` naming the option: a typo must not turn into a run that
    quietly does nothing (exit 2)."""
    known = list(devices)
    names = [name for name, _ in known]
    for pattern in patterns:
        if not pattern or not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            raise click.BadParameter(
                f"Expected: a device name or glob that matches a device of the fabric "
                f"Actual: {pattern!r} matches none (devices: {_short_list(names)})",
                param_hint="'--device'",
            )
    chosen = [
        name
        for name, role in known
        if (not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns))
        and (not roles or role in roles)
    ]
    if not chosen:
        raise click.BadParameter(
            f"Expected: at least one device Actual: none of "
            f"{_short_list(_matching(known, patterns))} has role {' or '.join(roles)}",
            param_hint="'--role'",
        )
    return chosen


def _matching(known: list[tuple[str, str]], patterns: Sequence[str]) -> list[str]:
    return [n for n, _ in known if not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _short_list(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


def examples(*lines: str) -> Callable[[F], F]:
    """Append an ``Examples:`` section to a command's help (put it right under the
    ``@….command()`` line, where click reads the docstring)."""

    def decorate(command: F) -> F:
        body = inspect.getdoc(command) or ""
        listed = "\n".join(f"  {line}" for line in lines)
        command.__doc__ = f"{body}\n\n\b\nExamples:\n{listed}"
        return command

    return decorate


class BoundedDuration(Duration):
    """A :class:`~common.clicktypes.Duration` with a lower bound too (``--confirm-timeout``
    under 5 s would roll back before the readback could confirm)."""

    def __init__(self, max_s: float, *, min_s: float = 0.0) -> None:
        super().__init__(max_s)
        self.min_s = min_s

    def parse(self, value: str) -> float:
        seconds = super().parse(value)
        if seconds < self.min_s:
            raise ValueError(
                f"Expected: at least {self.min_s:g}s and at most {self.max_s:g}s Actual: {value!r}"
            )
        return seconds


def duration(max_s: float, *, min_s: float = 0.0) -> Duration:
    """The click type of a time option: a number *with its unit* (``10ms``, ``2s``); a bare
    number exits 2 naming the option (see :class:`~common.clicktypes.Duration`)."""
    return BoundedDuration(max_s, min_s=min_s) if min_s else Duration(max_s)


def named_durations(values: Iterable[str], option: str, kind: Duration) -> dict[str, float]:
    """``NAME=DURATION`` values (``leaf1=5s``) as seconds by name; a malformed one raises
    :class:`click.BadParameter` naming ``option`` (exit 2)."""
    result: dict[str, float] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(
                f"Expected: NAME=DURATION such as leaf1=5s Actual: {value!r}", param_hint=option
            )
        try:
            result[name.strip()] = kind.parse(text)
        except ValueError as exc:
            raise click.BadParameter(f"{name.strip()}: {exc}", param_hint=option) from None
    return result

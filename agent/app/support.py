"""What every command shares: exit codes and turning errors into messages."""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from rich.console import Console

from agent.errors import AgentError, IntentError, printable

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2

# Shared by every command that reads a fabric file and prints a table or JSON.
FABRIC = click.argument("fabric", type=click.Path(path_type=Path, dir_okay=False))
OUTPUT = click.option(
    "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
)

F = TypeVar("F", bound=Callable[..., Any])


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


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
            err.print(f"{len(exc.problems)} problem(s) found; nothing was changed.", markup=False)
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


class FiniteFloat(click.types.FloatParamType):
    """A float option that refuses nan and inf (``float()`` takes both, and an interval of
    nan seconds makes every comparison false) and values outside ``[min, max]``
    (``min_open``: the minimum itself is refused too, e.g. an interval of 0). A
    FloatParamType, so help and shell completion treat it as the float it is."""

    name = "float"

    def __init__(
        self, min: float | None = None, max: float | None = None, *, min_open: bool = False
    ) -> None:
        self.min, self.max, self.min_open = min, max, min_open

    def parse(self, value: str | float) -> float:
        """The number, or ValueError with the house-style message (also for NAME=S values)."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"Expected: a number Actual: {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"Expected: a finite number Actual: {value!r}")
        low_bad = self.min is not None and (
            number <= self.min if self.min_open else number < self.min
        )
        if low_bad or (self.max is not None and number > self.max):
            raise ValueError(f"Expected: {self.describe()} Actual: {number:g}")
        return number

    def describe(self) -> str:
        low = "" if self.min is None else f"{self.min:g} {'<' if self.min_open else '<='} "
        high = "" if self.max is None else f" <= {self.max:g}"
        return f"{low}x{high}" if low or high else "a finite number"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            return self.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def __repr__(self) -> str:
        return f"FiniteFloat({self.describe()})"

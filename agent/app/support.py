"""What every command shares: exit codes and turning errors into messages."""

from __future__ import annotations

import functools
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

"""pydantic's validation errors as problems located in the YAML file the data came from.

Every YAML input is validated by a pydantic model; this is the one place that turns the
model's error locations (``devices.2.ports.0.speed``, with validator steps such as
``function-after[...]`` in between) back into the user's file, line and column.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from common.errors import Problem, excerpt
from common.yamlsource import PathKey, SourceMap, dotted_path

# Steps pydantic inserts into a location: ``function-after[_check(), int]``, ``union-tag``.
_PYDANTIC_STEP = re.compile(r"[a-z][a-z-]*\[.*\]|[a-z]+(?:-[a-z]+)+")


@dataclass(frozen=True)
class FieldError:
    """One validation error: where in the data, what to say, and whether the key is wrong."""

    loc: PathKey
    message: str
    at_key: bool  # an unknown field: point at the key, not at its value


def data_loc(loc: Sequence[str | int], data: Any) -> PathKey:
    """``loc`` without the validator steps pydantic inserts (``function-after[...]``).

    A step is dropped only when the data has no such key: a YAML key spelt ``mtu[0]`` looks
    like a validator step but is the very field the user has to fix.
    """
    kept: list[str | int] = []
    current = data
    for part in loc:
        if isinstance(current, dict) and part in current:
            kept.append(part)
            current = current[part]
        elif (
            isinstance(current, dict)
            and isinstance(part, str)
            and part.isascii()
            and part.isdigit()
            and int(part) in current
        ):
            kept.append(part)
            current = current[int(part)]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            kept.append(part)
            current = current[part]
        elif isinstance(part, str) and _PYDANTIC_STEP.fullmatch(part):
            continue
        else:
            kept.append(part)
            current = None
    return tuple(kept)


def field_errors(exc: ValidationError, data: Any) -> Iterator[FieldError]:
    """The errors of ``exc`` in the data's own terms, in pydantic's order."""
    for error in exc.errors(include_url=False):
        loc = data_loc(error["loc"], data)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden" and loc:
            message = f"unknown field {excerpt(str(loc[-1]))}"
        elif error["type"] == "missing" and loc:
            message = f"field {excerpt(str(loc[-1]))} is required"
        yield FieldError(loc, message, error["type"] == "extra_forbidden")


def validation_problems(
    exc: ValidationError, data: Any, source: SourceMap, prefix: PathKey = ()
) -> list[Problem]:
    """One located problem per error; ``prefix`` places ``data`` inside the file."""
    problems = []
    for error in field_errors(exc, data):
        loc = (*prefix, *error.loc)
        position = (source.keys.get(loc) if error.at_key else None) or source.locate(loc)
        problems.append(Problem(position, dotted_path(loc), error.message))
    return problems

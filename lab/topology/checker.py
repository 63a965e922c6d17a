"""The problems found in a topology file, each located through the loader's source map and
named by its field (``topology.nodes.leaf1.labels.roce.lab/speed``); and a value read from
the file together with where it was (:class:`Setting`)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import ValidationError

from common.errors import Problem, SourcePosition
from common.yamlsource import PathKey, SourceMap
from lab.topology.model import TopologyError
from lab.topology.schema import (
    CONTAINERLAB_NODE_FIELDS,
    LINK_FIELDS,
    TOP_LEVEL_FIELDS,
    TOPOLOGY_FIELDS,
    describe,
)

T = TypeVar("T")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def field_path(loc: Iterable[str | int]) -> str:
    """``topology.links[0].endpoints[1]``, ``topology.nodes.leaf1.labels.roce.lab/speed``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _unknown_field(loc: tuple[str | int, ...]) -> str:
    name = str(loc[-1])
    if len(loc) == 1:
        what, allowed = "top-level", TOP_LEVEL_FIELDS
    elif len(loc) == 2:
        what, allowed = "topology", TOPOLOGY_FIELDS
    elif loc[:2] == ("topology", "links"):
        what, allowed = "link", LINK_FIELDS
    else:
        what, allowed = "node", CONTAINERLAB_NODE_FIELDS
    return f"unknown {what} field{did_you_mean(name, allowed)}"


_REQUIRED: dict[tuple[str | int, ...], str] = {
    ("name",): "the topology must have a name",
    ("topology",): "the topology must have a 'topology' section",
}

_MAPPING_ERRORS = {"model_type", "model_attributes_type", "dict_type"}


@dataclass(frozen=True)
class Setting:
    """One value from one layer, with where it came from."""

    value: str
    path: PathKey  # in the data, for the position
    field: str  # in messages


class Checker:
    """Collects problems, located through the loader's source map."""

    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def position(self, path: PathKey, *, key: bool = False) -> SourcePosition | None:
        if key:
            for spelling in (path, tuple(_as_int(p) for p in path)):
                if spelling in self.source.keys:
                    return self.source.keys[spelling]
        return self.source.locate(path)

    def line(self, path: PathKey, *, key: bool = False) -> int:
        """The line ``path`` is on (0 when the source map does not know it)."""
        position = self.position(path, key=key)
        return position.line if position is not None else 0

    def add(self, path: PathKey, field_name: str, message: str, *, key: bool = False) -> None:
        self.problems.append(Problem(self.position(path, key=key), field_name, message))

    def parsed(self, setting: Setting, parse: Callable[[str], T]) -> T | None:
        """``parse(setting.value)``; None, with the parser's message as the setting's
        problem, when it raises ValueError."""
        try:
            return parse(setting.value)
        except ValueError as exc:
            self.add(setting.path, setting.field, str(exc))
            return None

    def shape(self, exc: ValidationError) -> None:
        """pydantic's errors in the words the lab has always used."""
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            kind, value = error["type"], error.get("input")
            at_key = False
            if kind == "extra_forbidden":
                message, at_key = _unknown_field(loc), True
            elif kind == "missing":
                message = _REQUIRED.get(loc, f"field {str(loc[-1])!r} is required")
            elif kind in _MAPPING_ERRORS:
                message = f"expected a mapping, got {describe(value)}"
            elif kind == "list_type":
                message = f"expected a list, got {describe(value)}"
            elif kind == "string_type":
                message = f"expected a value, got {describe(value)}"
            else:
                message = error["msg"].removeprefix("Value error, ")
            self.add(loc, field_path(loc), message, key=at_key)

    def fail_if_any(self) -> None:
        if self.problems:
            # File order: the first line to fix comes first.
            self.problems.sort(
                key=lambda p: (p.position.line, p.position.column) if p.position else (0, 0)
            )
            raise TopologyError(self.problems)


def _as_int(part: str | int) -> str | int:
    if isinstance(part, str) and part.isascii() and part.isdigit() and len(part) < 20:
        return int(part)
    return part

"""YAML loading that remembers where every value came from.

pydantic reports errors by location (``devices.2.ports.0.speed``); users need ``file:line``.
Composing the YAML node graph first (PyYAML) keeps each node's start mark, so every path in
the loaded data can be mapped back to a line and column. Duplicate keys, which PyYAML
silently accepts (the last one wins), are refused here because a doubled ``speed:`` in a
fabric file is always a mistake.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.errors import IntentError, Problem, SourcePosition

PathKey = tuple[str | int, ...]


@dataclass
class SourceMap:
    """Positions of values (and of their keys) by data path."""

    file: Path
    values: dict[PathKey, SourcePosition] = field(default_factory=dict)
    keys: dict[PathKey, SourcePosition] = field(default_factory=dict)

    def locate(self, path: Iterable[str | int]) -> SourcePosition | None:
        """Best position for ``path``: the value itself, else its closest existing parent."""
        parts = tuple(path)
        while True:
            for candidate in _spellings(parts):
                if candidate in self.values:
                    return self.values[candidate]
            if not parts:
                return None
            parts = parts[:-1]

    def prefixed(self, prefix: PathKey) -> SourceMap:
        """The same map with every path placed under ``prefix``."""
        shifted = SourceMap(self.file)
        shifted.values = {prefix + k: v for k, v in self.values.items()}
        shifted.keys = {prefix + k: v for k, v in self.keys.items()}
        return shifted


def _spellings(parts: PathKey) -> list[PathKey]:
    """A pydantic loc spells dict keys as str even when YAML had an int (``3:``)."""
    alternatives = [parts]
    if any(isinstance(p, str) and p.isdigit() for p in parts):
        alternatives.append(
            tuple(int(p) if isinstance(p, str) and p.isdigit() else p for p in parts)
        )
    return alternatives


def _position(file: Path, mark: yaml.Mark) -> SourcePosition:
    return SourcePosition(file, mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, file: Path, loader: yaml.SafeLoader) -> None:
        self.file = file
        self.loader = loader
        self.map = SourceMap(file)
        self.problems: list[Problem] = []

    def build(self, node: yaml.Node, path: PathKey) -> Any:
        self.map.values[path] = _position(self.file, node.start_mark)
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node, deep=True)
                if not isinstance(key, str | int) or isinstance(key, bool):
                    self.problems.append(
                        Problem(
                            _position(self.file, key_node.start_mark),
                            _dotted(path),
                            f"mapping keys must be names or numbers, got {key!r}",
                        )
                    )
                    continue
                if key in result:
                    self.problems.append(
                        Problem(
                            _position(self.file, key_node.start_mark),
                            _dotted((*path, key)),
                            f"duplicate key {key!r} (first defined on line "
                            f"{self.map.keys[(*path, key)].line})",
                        )
                    )
                    continue
                self.map.keys[(*path, key)] = _position(self.file, key_node.start_mark)
                result[key] = self.build(value_node, (*path, key))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.loader.construct_object(node, deep=True)


def _dotted(path: Iterable[str | int]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


dotted_path = _dotted


def load_yaml(file: Path) -> tuple[Any, SourceMap]:
    """Load one YAML document and a map of where each value sits in ``file``."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise IntentError([Problem(None, "", f"{file}: no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise IntentError([Problem(None, "", f"{file}: cannot read: {exc}")]) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise IntentError([Problem(SourcePosition(file, 1, 1), "", "the file is empty")])
        builder = _Builder(file, loader)
        data = builder.build(node, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = _position(file, mark) if mark else None
        reason = exc.problem or exc.context or "invalid YAML"
        raise IntentError([Problem(position, "", f"YAML syntax error: {reason}")]) from None
    except yaml.YAMLError as exc:
        raise IntentError([Problem(None, "", f"{file}: YAML error: {exc}")]) from None
    finally:
        loader.dispose()
    if builder.problems:
        raise IntentError(builder.problems)
    return data, builder.map

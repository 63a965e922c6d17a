"""YAML loading that remembers where every value came from, with hard limits.

pydantic reports errors by location (``devices.2.ports.0.speed``); users need ``file:line``.
Composing the YAML node graph first (PyYAML) keeps each node's start mark, so every path in
the loaded data can be mapped back to a line and column. Duplicate keys, which PyYAML
silently accepts (the last one wins), are refused here because a doubled ``speed:`` in a
fabric file is always a mistake; ``3:`` and ``'3':`` count as the same key because the
models key queues by number.

Every YAML file the agent reads (fabric, profiles, playbooks, ``agent.yaml``, web configs)
comes through :func:`load_yaml`, so the limits below protect all of them: a 300-byte alias
bomb expands to billions of nodes and a self-referencing alias to an infinite graph, and
both only blow up after composition, when the graph is walked. Counting the expanded size
while composing refuses them at the offending alias, in milliseconds.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML without libyaml: _PyLoader is used instead
    CParser = object  # type: ignore[assignment,misc]

from common.errors import IntentError, Problem, SourcePosition, excerpt, printable
from common.permissions import FileRefused, check_config_file, file_kind

PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlLimits:
    """Bounds for one YAML file. 200 000 values hold some 18 000 ports written one line each
    (11 values a port), ten times a 2 000-GPU pod; parsing that takes a few seconds."""

    max_bytes: int = 4 * 1024 * 1024
    max_depth: int = 64
    # Nodes after alias expansion (every key, value and item counts once per use).
    max_nodes: int = 200_000
    # Digits in one integer; Python refuses int() of more than 4 300 deep inside PyYAML.
    max_int_digits: int = 30


DEFAULT_LIMITS = YamlLimits()

# Control characters that have no business in a config file and that a terminal would act on:
# C0 except tab/newline/CR, DEL, C1 (ESC-free CSI is 0x9b) and the bidi overrides used to
# make text read differently from what it is.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _whole_file(file: Path, message: str) -> IntentError:
    return IntentError([Problem(None, "", f"{printable(str(file))}: {message}")])


def read_bounded(
    file: Path,
    max_bytes: int = DEFAULT_LIMITS.max_bytes,
    check: Callable[[Path, os.stat_result], None] | None = None,
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; anything else is an IntentError.

    ``stat`` first and ``O_NONBLOCK`` on open: a FIFO or a tty given as a config file would
    otherwise block the read forever (and the daemon's reload with it). ``fstat`` after the
    open closes the gap where the path is swapped for a FIFO between the two calls; ``check``
    sees that ``fstat`` (the permissions of the file actually read).
    """
    try:
        info = os.stat(file)
    except FileNotFoundError:
        raise _whole_file(file, "no such file") from None
    except OSError as exc:
        raise _whole_file(file, f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise _whole_file(file, f"Expected: a regular file Actual: a {file_kind(info.st_mode)}")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(file, flags)
    except OSError as exc:
        raise _whole_file(file, f"cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _whole_file(file, f"Expected: a regular file Actual: a {file_kind(info.st_mode)}")
        if check is not None:
            _checked(check, file, info)
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _whole_file(file, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise _whole_file(file, f"file too large: Expected: at most {max_bytes} bytes Actual: more")
    return b"".join(chunks)


def _checked(check: Callable[[Path, os.stat_result], None], file: Path, info: Any) -> None:
    try:
        check(file, info)
    except FileRefused as exc:
        raise _whole_file(file, exc.reason) from None


def _line_column(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _describe_char(char: str) -> str:
    return f"U+{ord(char):04X}" + (" (NUL byte)" if char == "\0" else "")


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
    if any(_is_ascii_int(p) for p in parts):
        alternatives.append(tuple(int(p) if _is_ascii_int(p) else p for p in parts))
    return alternatives


def _is_ascii_int(part: object) -> bool:
    # str.isdigit() is true for '３' and '²' too; only ASCII digits can come from an int key.
    return isinstance(part, str) and part.isascii() and part.isdigit() and len(part) < 20


def _position(file: Path, mark: Any) -> SourcePosition:
    # a yaml.Mark, or libyaml's own Mark type: both have 0-based line and column
    return SourcePosition(file, mark.line + 1, mark.column + 1)


class _LimitExceeded(Exception):
    def __init__(self, mark: Any, path: PathKey, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.path = path
        self.message = message


class _BoundedComposer(Composer):
    """A composer that counts depth and the alias-expanded size of the graph as it goes."""

    limits: YamlLimits
    # supplied by the parser half of the loader (CParser or Parser)
    peek_event: Any

    def start_bounds(self, limits: YamlLimits) -> None:
        self.limits = limits
        self.depth = 0
        self.expanded = 0
        self.sizes: dict[int, int] = {}
        self.open_anchors: set[str] = set()
        # Data path of the node being composed, so limit errors can name the field.
        self.path: list[str | int] = []

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if isinstance(index, int) and not isinstance(index, bool):
            self.path.append(index)
        elif isinstance(index, yaml.ScalarNode):
            self.path.append(str(index.value))
        else:  # the root, or a mapping key (named by its parent's path)
            return self._compose(parent, index)
        try:
            return self._compose(parent, index)
        finally:
            self.path.pop()

    def _fail(self, mark: Any, message: str) -> _LimitExceeded:
        return _LimitExceeded(mark, tuple(self.path), message)

    def _compose(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                raise self._fail(
                    event.start_mark,
                    f"recursive alias *{printable(str(event.anchor))}: the anchor contains itself",
                )
            node: yaml.Node | None = super().compose_node(parent, index)
            self._grow(self.sizes.get(id(node), 1), event.start_mark)
            assert node is not None  # an alias always names a composed node
            return node
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise self._fail(
                event.start_mark,
                f"nesting too deep: Expected: at most {self.limits.max_depth} levels Actual: more",
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self.open_anchors.add(anchor)
        try:
            self._grow(1, event.start_mark)
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
            if anchor is not None:
                self.open_anchors.discard(anchor)
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self.sizes.get(id(item), 1) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(
                self.sizes.get(id(key), 1) + self.sizes.get(id(value), 1)
                for key, value in node.value
            )
        self.sizes[id(node)] = size
        assert node is not None  # compose_node is only called when an event is pending
        return node

    def _grow(self, nodes: int, mark: Any) -> None:
        self.expanded += nodes
        if self.expanded > self.limits.max_nodes:
            raise self._fail(
                mark,
                f"too many values after alias expansion: Expected: at most "
                f"{self.limits.max_nodes} Actual: more (an alias bomb?)",
            )


# A scalar refused (and reported) by the builder; any placeholder will do, loading fails.
_REFUSED: Any = object()


class _CLoader(_BoundedComposer, CParser, SafeConstructor, Resolver):
    """libyaml scans and parses (five times faster on big files); composing stays in Python,
    where the limits are counted."""

    def __init__(self, text: str, limits: YamlLimits) -> None:
        CParser.__init__(self, text)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.start_bounds(limits)


class _PyLoader(_BoundedComposer, Reader, Scanner, Parser, SafeConstructor, Resolver):
    """The pure-Python equivalent, for a PyYAML built without libyaml."""

    def __init__(self, text: str, limits: YamlLimits) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.start_bounds(limits)


_BoundedLoader: type[_CLoader] | type[_PyLoader] = _CLoader if yaml.__with_libyaml__ else _PyLoader

_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Builder:
    def __init__(self, file: Path, loader: _CLoader | _PyLoader) -> None:
        self.file = file
        self.loader = loader
        self.map = SourceMap(file)
        self.problems: list[Problem] = []

    def build(self, node: yaml.Node, path: PathKey) -> Any:
        self.map.values[path] = _position(self.file, node.start_mark)
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.scalar(node, path)

    def refuse(self, mark: yaml.Mark, path: PathKey, message: str) -> None:
        self.problems.append(Problem(_position(self.file, mark), dotted_path(path), message))

    def mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[Any, Any]:
        """A mapping with its merge keys (``<<: *base``) applied: the merged pairs are
        defaults that the mapping's own keys override, so only a key written twice in the
        mapping itself is a duplicate. PyYAML's flatten_mapping puts both in one list, so
        merge here."""
        result: dict[Any, Any] = {}
        spelt: dict[str, Any] = {}  # each key of the result by its spelling
        self.merge_into(node, path, result, spelt)
        self.map.values[path] = _position(self.file, node.start_mark)
        first: dict[str, tuple[str | int, SourcePosition]] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.own_key(key_node, path, first)
            if key is _REFUSED:
                continue
            result.pop(spelt.pop(str(key), key), None)  # overrides a merged key
            result[key] = self.build(value_node, (*path, key))
        return result

    def merge_into(
        self, node: yaml.MappingNode, path: PathKey, result: dict[Any, Any], spelt: dict[str, Any]
    ) -> None:
        """The pairs of the mappings the ``<<`` key names, into ``result``."""
        merges = [(k, v) for k, v in node.value if k.tag == _MERGE_TAG]
        if merges:
            self.merge_sources(merges[0][1], path, result, spelt)
        for key_node, _ in merges[1:]:  # a duplicate key like any other; PyYAML lets the last win
            self.refuse(
                key_node.start_mark,
                path,
                "duplicate key '<<': Expected: one merge key per mapping "
                "(<<: [*a, *b] merges several) Actual: a second '<<'",
            )

    def merge_sources(
        self, value: yaml.Node, path: PathKey, result: dict[Any, Any], spelt: dict[str, Any]
    ) -> None:
        sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for source in reversed(sources):  # the first one listed wins
            if not isinstance(source, yaml.MappingNode):
                message = f"Expected: a mapping to merge (<<) Actual: {_kind(source)}"
                self.refuse(source.start_mark, path, message)
                continue
            for key, merged in self.build(source, path).items():
                result.pop(spelt.pop(str(key), key), None)
                result[key] = merged
                spelt[str(key)] = key

    def own_key(
        self, key_node: yaml.Node, path: PathKey, first: dict[str, tuple[str | int, SourcePosition]]
    ) -> Any:
        """A key written in the mapping itself, recorded in ``first`` and the source map;
        ``_REFUSED`` for one that is not a name or a number, or is written twice."""
        key = self.scalar(key_node, path) if isinstance(key_node, yaml.ScalarNode) else None
        if key is _REFUSED:
            return _REFUSED
        if not isinstance(key, str | int) or isinstance(key, bool):
            message = (
                f"Expected: a mapping key that is a name or a number Actual: {_kind(key_node)}"
            )
            self.refuse(key_node.start_mark, path, message)
            return _REFUSED
        # 3 and '3' are one key to the models (queues are keyed by number).
        spelling = str(key)
        if spelling in first:
            first_key, first_at = first[spelling]
            self.refuse(
                key_node.start_mark,
                (*path, first_key),
                f"duplicate key {_shown(key)} (first defined on line {first_at.line} as "
                f"{_shown(first_key)})",
            )
            return _REFUSED
        first[spelling] = (key, _position(self.file, key_node.start_mark))
        self.map.keys[(*path, key)] = first[spelling][1]
        return key

    def scalar(self, node: yaml.Node, path: PathKey) -> Any:
        """One scalar, refused with its position when it cannot be a sane config value."""
        where = _position(self.file, node.start_mark)
        raw = str(node.value)
        if node.tag == _INT_TAG:
            digits = _int_digits(raw)
            if digits > self.loader.limits.max_int_digits:
                self.problems.append(
                    Problem(
                        where,
                        dotted_path(path),
                        f"number too long: Expected: at most {self.loader.limits.max_int_digits}"
                        f" digits Actual: {digits} digits",
                    )
                )
                return _REFUSED
        try:
            value = self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError, TypeError) as exc:
            # e.g. a date such as 2024-13-45, which the YAML resolver takes for a timestamp
            self.problems.append(
                Problem(where, dotted_path(path), f"cannot read value: {printable(str(exc))}")
            )
            return _REFUSED
        if isinstance(value, float) and not math.isfinite(value):
            self.problems.append(
                Problem(
                    where,
                    dotted_path(path),
                    f"Expected: a finite number Actual: {printable(raw)}",
                )
            )
            return _REFUSED
        if isinstance(value, str):
            bad = _CONTROL.search(value)
            if bad:
                self.problems.append(
                    Problem(
                        where,
                        dotted_path(path),
                        f"control character {_describe_char(bad.group())} is not allowed: "
                        f"Expected: printable text Actual: {excerpt(value)}",
                    )
                )
                return _REFUSED
        return value


def _shown(key: str | int) -> str:
    """A key as an error quotes it: 16 and '16' differ, a long name is cut."""
    return excerpt(key) if isinstance(key, str) else repr(key)


def _int_digits(raw: str) -> int:
    """Digits of a YAML integer in any base it allows: ``0x`` hexadecimal (5 000 of them made
    an int whose decimal form Python refuses to print, an "internal error: ValueError"),
    ``0o``/``0b``, YAML 1.1's base 60 (``1:30:00``, the colons counted too)."""
    text = raw.lstrip("+-").replace("_", "")
    if text[:2].lower() in ("0x", "0o", "0b"):
        text = text[2:]
    return len(text)


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return excerpt(str(node.value))


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _dotted(path: Iterable[str | int]) -> str:
    """``devices[0].ports[1].speed``; keys that are not plain names are quoted and escaped
    (``ports[0]['mtu[0]']``) so a key can never pass for a list index or another field."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{printable(excerpt(part))}]"
    return text


dotted_path = _dotted


def _reader_problem(file: Path, text: str, exc: yaml.reader.ReaderError) -> IntentError:
    line, column = _line_column(text, exc.position)
    char = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
    return IntentError(
        [
            Problem(
                SourcePosition(file, line, column),
                "",
                f"character {_describe_char(char)} is not allowed in a YAML file",
            )
        ]
    )


def _refuse_foreign(file: Path, node: yaml.Node) -> None:
    """A mapping none of whose keys is a plain name is no file of settings: /etc/shadow's
    lines read as keys (``root:$6$...:19000:0:99999:7::``), and every error about them would
    print a line of it. Said about the whole file, showing none of it."""
    if not isinstance(node, yaml.MappingNode) or not node.value:
        return
    keys = [key for key, _ in node.value]
    if not all(isinstance(k, yaml.ScalarNode) for k in keys):
        return  # a list or mapping as a key: the builder says so, showing no content
    if any(_PLAIN_KEY.fullmatch(str(k.value)) for k in keys):
        return
    raise _whole_file(
        file,
        f"Expected: YAML settings (plain keys such as name: or devices:) Actual: a mapping "
        f"whose {len(keys)} key(s) are none of them a plain name; its content is not shown "
        f"(a key, a password or a system file named by mistake?)",
    )


def load_yaml(file: Path, limits: YamlLimits = DEFAULT_LIMITS) -> tuple[Any, SourceMap]:
    """Load one YAML document and a map of where each value sits in ``file``.

    Every failure is an :class:`IntentError` naming ``file:line:column`` (or the file, for
    whole-file problems such as size or type): never a ``MemoryError``, ``RecursionError``
    or a hang, whatever the file holds.
    """
    # Every YAML file the agent reads configures it: none may be writable by anyone on the host.
    raw = read_bounded(file, limits.max_bytes, check_config_file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise IntentError(
            [
                Problem(
                    SourcePosition(file, line, column),
                    "",
                    f"Expected: UTF-8 text Actual: byte 0x{raw[exc.start]:02x}",
                )
            ]
        ) from None
    bad = _CONTROL.search(text)
    if bad:
        line, column = _line_column(text, bad.start())
        raise IntentError(
            [
                Problem(
                    SourcePosition(file, line, column),
                    "",
                    f"control character {_describe_char(bad.group())} is not allowed "
                    "in a YAML file",
                )
            ]
        )
    try:
        # The reader checks the whole text for characters YAML does not allow (U+FFFE) here.
        loader = _BoundedLoader(text, limits)
    except yaml.reader.ReaderError as exc:
        raise _reader_problem(file, text, exc) from None
    builder = _Builder(file, loader)
    try:
        node = loader.get_single_node()
        if node is None:
            raise IntentError([Problem(SourcePosition(file, 1, 1), "", "the file is empty")])
        _refuse_foreign(file, node)
        data = builder.build(node, ())
    except _LimitExceeded as exc:
        raise IntentError(
            [Problem(_position(file, exc.mark), dotted_path(exc.path), exc.message)]
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = _position(file, mark) if mark else SourcePosition(file, 1, 1)
        reason = printable(exc.problem or exc.context or "invalid YAML")
        raise IntentError([Problem(position, "", f"YAML syntax error: {reason}")]) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_problem(file, text, exc) from None
    except yaml.YAMLError as exc:
        raise IntentError(
            [Problem(SourcePosition(file, 1, 1), "", f"YAML error: {printable(str(exc))}")]
        ) from None
    finally:
        loader.dispose()
    if builder.problems:
        raise IntentError(builder.problems)
    return data, builder.map

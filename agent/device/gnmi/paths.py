"""gNMI paths as text and as the protobuf ``Path`` (gNMI path conventions, openconfig/reference
``rpc/gnmi/gnmi-path-conventions.md``): ``/elem[key=value]/elem``, ``*`` as a wildcard key or
element, ``]`` and ``\\`` escaped inside a key value.

Only the message is built from the protobufs here; the matching works on plain tuples, so the
NOS profiles and their tests need no gRPC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# One element: its name and its keys (sorted, so equal paths compare equal).
Elem = tuple[str, tuple[tuple[str, str], ...]]


class PathError(ValueError):
    """A path text that is not a gNMI path."""


@dataclass(frozen=True)
class GnmiPath:
    """A parsed path: its elements, and the origin and target it is under."""

    elems: tuple[Elem, ...]
    origin: str = ""
    target: str = ""

    def text(self) -> str:
        """The path as gnmic and the vendors' documents write it."""
        parts = []
        for name, keys in self.elems:
            parts.append(name + "".join(f"[{k}={_escape(v)}]" for k, v in keys))
        where = f"{self.origin}:" if self.origin else ""
        return where + "/" + "/".join(parts)

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.elems)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("]", "\\]")


def parse_path(text: str, origin: str = "", target: str = "") -> GnmiPath:
    """``/qos/interfaces/interface[interface-id=swp1]/state`` -> :class:`GnmiPath`."""
    elems: list[Elem] = []
    for raw in _split_elems(text.strip().lstrip("/")):
        elems.append(_parse_elem(raw, text))
    return GnmiPath(tuple(elems), origin, target)


def _split_elems(text: str) -> list[str]:
    """Split on ``/`` outside brackets (a key value may hold ``/``: ``name=Ethernet1/1``)."""
    parts: list[str] = []
    current: list[str] = []
    in_key = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and in_key:
            escaped = True
        elif char in "[]":
            in_key = char == "["
        elif char == "/" and not in_key:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p]


def _parse_elem(raw: str, whole: str) -> Elem:
    name, bracket, rest = raw.partition("[")
    if not name:
        raise PathError(f"gNMI path {whole!r}: an element without a name ({raw!r})")
    keys: dict[str, str] = {}
    while bracket:
        key, eq, rest = rest.partition("=")
        value, rest = _key_value(rest, whole)
        if not eq or not key:
            raise PathError(f"gNMI path {whole!r}: key without '=' in {raw!r}")
        keys[key] = value
        if not rest:
            break
        if not rest.startswith("["):
            raise PathError(f"gNMI path {whole!r}: text after a key in {raw!r}")
        rest = rest[1:]
    return name, tuple(sorted(keys.items()))


def _key_value(text: str, whole: str) -> tuple[str, str]:
    """The value up to the unescaped ``]``, and what follows it."""
    value: list[str] = []
    chars = iter(enumerate(text))
    for index, char in chars:
        if char == "\\":
            nxt = next(chars, None)
            if nxt is None:
                break
            value.append(nxt[1])
        elif char == "]":
            return "".join(value), text[index + 1 :]
        else:
            value.append(char)
    raise PathError(f"gNMI path {whole!r}: a key value without its closing ']'")


def from_proto(prefix: Any, path: Any) -> GnmiPath:
    """The notification's ``prefix`` joined with an update's ``path`` (protobuf messages)."""
    elems = [_proto_elem(e) for e in prefix.elem] + [_proto_elem(e) for e in path.elem]
    if not elems:  # gNMI 0.4 ``element`` strings, still sent by some targets
        elems = [(name, ()) for name in [*prefix.element, *path.element]]
    return GnmiPath(tuple(elems), prefix.origin or path.origin, prefix.target or path.target)


def _proto_elem(elem: Any) -> Elem:
    keys: Mapping[str, str] = elem.key
    return str(elem.name), tuple(sorted((str(k), str(v)) for k, v in keys.items()))


def to_proto(path: GnmiPath, gnmi_pb2: Any) -> Any:
    """The protobuf ``Path`` (``gnmi_pb2`` is pygnmi's module, passed in so this module
    imports no protobufs)."""
    message = gnmi_pb2.Path(origin=path.origin, target=path.target)
    for name, keys in path.elems:
        message.elem.add(name=name, key=dict(keys))
    return message

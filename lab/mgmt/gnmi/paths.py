"""gNMI paths as the lab's servers handle them: parsed, printed, joined and matched.

A path is a tuple of elements ``(name, keys)``, ``keys`` a sorted tuple of ``(key, value)``
pairs, so paths compare and hash as values. Wildcards follow the gNMI path conventions
(openconfig/reference ``rpc/gnmi/gnmi-path-conventions.md``): an element named ``*`` matches
any one element, ``...`` any number of them, and a key value ``*`` any value of that key; a
key a request leaves out matches every value (``interface`` alone means every interface).
The deprecated string ``element`` form of a path (gNMI < 0.4) is read too, one element per
string (``interface[name=Ethernet1]``), since old collectors still send it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from pygnmi.spec.v080 import gnmi_pb2

Keys = tuple[tuple[str, str], ...]
Elem = tuple[str, Keys]
GPath = tuple[Elem, ...]

WILDCARD = "*"
ANY_DEPTH = "..."
# One element of the text form: a name (no '/' or '['), then [key=value] groups whose value
# may hold an escaped ']' (gnmi-path-conventions: "\]" inside a key value).
_ELEM_RE = re.compile(r"([^/\[\]]+)((?:\[[^=\]]+=(?:\\.|[^\]\\])*\])*)")
_BARE_KEY_RE = re.compile(r"\[([^=\]]+)\]")
_KEY_RE = re.compile(r"\[([^=\]]+)=((?:\\.|[^\]\\])*)\]")


class PathError(ValueError):
    """A path that cannot be read (names the path)."""


def elem(tag: str, /, **keys: str) -> Elem:
    """One element; ``elem("queue", name="3")``. Key names with dashes go through ``keyed``."""
    return keyed(tag, keys)


def keyed(name: str, keys: dict[str, str] | Iterable[tuple[str, str]]) -> Elem:
    """An element from a key mapping (key names such as ``interface-id``)."""
    pairs = keys.items() if isinstance(keys, dict) else keys
    return (name, tuple(sorted((str(k), str(v)) for k, v in pairs)))


def parse(text: str) -> GPath:
    """``/qos/interfaces/interface[interface-id=swp1]/state`` -> a path (a leading ``/`` and an
    ``origin:`` are optional; the origin is dropped)."""
    body = text.strip()
    if ":" in body.split("/", 1)[0] and not body.startswith("/"):
        body = body.split(":", 1)[1]
    parts = _split(body.strip("/"))
    return tuple(_parse_elem(part, text) for part in parts if part)


def parse_schema(text: str) -> GPath:
    """A schema path as the vendors print it, list keys named without values
    (``interface[name]/state``): each key's value is ``*``."""
    return parse(_BARE_KEY_RE.sub(r"[\1=*]", text))


def _split(text: str) -> list[str]:
    """Split at ``/`` outside brackets (a key value may hold a ``/``: ``Ethernet1/1``)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        if char == "/" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _parse_elem(part: str, whole: str) -> Elem:
    match = _ELEM_RE.fullmatch(part)
    if match is None:
        raise PathError(f"{whole!r}: cannot read the element {part!r}")
    keys = [(k, v.replace("\\]", "]")) for k, v in _KEY_RE.findall(match.group(2))]
    return keyed(match.group(1), keys)


def text(path: GPath) -> str:
    """The path as text, ``/a/b[k=v]`` (keys in name order)."""
    out = []
    for name, keys in path:
        out.append(name + "".join(f"[{k}={v.replace(']', chr(92) + ']')}]" for k, v in keys))
    return "/" + "/".join(out)


def names(path: GPath) -> tuple[str, ...]:
    """The element names, keys left out."""
    return tuple(name for name, _ in path)


def key(element: Elem, name: str) -> str | None:
    """The value of one key of an element (None when it has no such key)."""
    return dict(element[1]).get(name)


def from_proto(path: gnmi_pb2.Path | None) -> GPath:
    """A ``gnmi.Path`` message (its ``elem``, or the deprecated ``element`` strings)."""
    if path is None:
        return ()
    if path.elem:
        return tuple(keyed(e.name, dict(e.key)) for e in path.elem)
    return tuple(_parse_elem(s, "/".join(path.element)) for s in path.element if s)


def to_proto(path: GPath, origin: str = "", target: str = "") -> gnmi_pb2.Path:
    """The ``gnmi.Path`` message of a path."""
    return gnmi_pb2.Path(
        origin=origin,
        target=target,
        elem=[gnmi_pb2.PathElem(name=name, key=dict(keys)) for name, keys in path],
    )


ElemMatch = Callable[[Elem, Elem], bool]


def value_match(pattern: Elem, concrete: Elem) -> bool:
    """A pattern element against a concrete one: same name (or ``*``), each key the pattern
    names present with the same value (or ``*``)."""
    if pattern[0] not in (WILDCARD, concrete[0]):
        return False
    have = dict(concrete[1])
    return all(k in have and v in (WILDCARD, have[k]) for k, v in pattern[1])


def schema_match(pattern: Elem, template: Elem) -> bool:
    """A pattern element against a schema element: same name (or ``*``), and only key names
    the schema's list has (any values: whether such an entry exists is the data's business)."""
    if pattern[0] not in (WILDCARD, template[0]):
        return False
    allowed = {k for k, _ in template[1]}
    return all(k in allowed for k, _ in pattern[1])


def covers(pattern: GPath, path: GPath, match: ElemMatch = value_match) -> bool:
    """Whether ``path`` lies at or under ``pattern`` (``pattern`` as a prefix, wildcards
    honoured)."""
    if not pattern:
        return True
    head, rest = pattern[0], pattern[1:]
    if head[0] == ANY_DEPTH:
        return any(covers(rest, path[i:], match) for i in range(len(path) + 1))
    if not path or not match(head, path[0]):
        return False
    return covers(rest, path[1:], match)


def has_wildcard(path: GPath) -> bool:
    """Whether any element or key value of the path is a wildcard."""
    return any(
        name in (WILDCARD, ANY_DEPTH) or WILDCARD in dict(keys).values() for name, keys in path
    )

"""RFC 6902 JSON Patch on CONFIG_DB documents, with python-jsonpatch's error texts.

The Generic Config Updater simulates a patch with python-jsonpatch (``jsonpatch.JsonPatch(ops)
.apply(config)``, sonic-utilities ``generic_config_updater/main.py`` ``validate_patch`` and
``gu_common.PatchWrapper.simulate_patch``), so a refused operation reads as that library words
it: ``can't remove a non-existent object 'x'`` (RemoveOperation), ``can't replace a
non-existent object 'x'`` (ReplaceOperation), ``member 'x' not found in {...}`` (jsonpointer,
a missing parent), ``Location must start with /``. :func:`make_patch` is the diff ``config
replace`` / ``config rollback`` apply (``jsonpatch.make_patch(current, target)``).
"""

from __future__ import annotations

import copy
from typing import Any

from lab.mgmt.sonic.text import natural_key

OPS = ("add", "remove", "replace", "move", "copy", "test")


class PatchError(ValueError):
    """An operation that cannot be applied (the message is the library's)."""


def parse_pointer(path: str) -> list[str]:
    """``/PORT_QOS_MAP/Ethernet0`` -> ``["PORT_QOS_MAP", "Ethernet0"]`` (RFC 6901 unescaped)."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("Location must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def escape(part: str) -> str:
    """One RFC 6901 reference token."""
    return part.replace("~", "~0").replace("/", "~1")


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            if part not in doc:
                raise PatchError(f"member '{part}' not found in {doc}")
            doc = doc[part]
        elif isinstance(doc, list):
            doc = doc[_index(doc, part, bound=len(doc) - 1)]
        else:
            raise PatchError(
                f"Document '{doc}' does not support indexing, must be mapping/sequence"
            )
    return doc


def _index(doc: list[Any], part: str, bound: int) -> int:
    if not part.isdigit():
        raise PatchError(f"'{part}' is not a valid sequence index")
    index = int(part)
    if index > bound:
        raise PatchError(f"index '{part}' is out of bounds")
    return index


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    parts = parse_pointer(path)
    return _walk(doc, parts[:-1]), parts[-1]


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, part = _parent(doc, path)
    if isinstance(parent, dict):
        parent[part] = value
    elif isinstance(parent, list):
        if part == "-":
            parent.append(value)
        else:
            parent.insert(_index(parent, part, bound=len(parent)), value)
    else:
        raise PatchError(f"invalid document type {type(parent)}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parent, part = _parent(doc, path)
    try:
        if isinstance(parent, list):
            del parent[_index(parent, part, bound=len(parent) - 1)]
        else:
            del parent[part]
    except (KeyError, PatchError):
        raise PatchError(f"can't remove a non-existent object '{part}'") from None
    return doc


def _replace(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, part = _parent(doc, path)
    if isinstance(parent, dict) and part not in parent:
        raise PatchError(f"can't replace a non-existent object '{part}'")
    if isinstance(parent, list):
        parent[_index(parent, part, bound=len(parent) - 1)] = value
    else:
        parent[part] = value
    return doc


def _member(op: dict[str, Any], name: str) -> Any:
    if name not in op:
        raise PatchError(f"The operation does not contain a '{name}' member")
    return op[name]


def apply_op(doc: Any, op: dict[str, Any]) -> Any:
    """Apply one operation in place; returns the (possibly new) document."""
    kind, path = op["op"], op["path"]
    if kind == "add":
        return _add(doc, path, copy.deepcopy(_member(op, "value")))
    if kind == "remove":
        return _remove(doc, path)
    if kind == "replace":
        return _replace(doc, path, copy.deepcopy(_member(op, "value")))
    source = str(_member(op, "from")) if kind in ("move", "copy") else ""
    if kind == "move":
        if path.startswith(source + "/"):
            raise PatchError("Cannot move values into their own children")
        value = _walk(doc, parse_pointer(source))
        return _add(_remove(doc, source), path, value)
    if kind == "copy":
        return _add(doc, path, copy.deepcopy(_walk(doc, parse_pointer(source))))
    if kind == "test":
        actual, wanted = _walk(doc, parse_pointer(path)), _member(op, "value")
        if actual != wanted:
            raise PatchError(
                f"{actual} ({type(actual)}) is not equal to tested value {wanted} ({type(wanted)})"
            )
        return doc
    raise PatchError(f"Unknown operation {kind!r}")


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A patched deep copy of ``doc`` (``doc`` itself is never changed)."""
    result = copy.deepcopy(doc)
    for op in ops:
        result = apply_op(result, op)
    return result


def make_patch(current: dict[str, Any], target: dict[str, Any]) -> list[dict[str, Any]]:
    """Operations that turn ``current`` into ``target`` (tables, entries, then fields)."""
    ops: list[dict[str, Any]] = []
    _diff(ops, "", current, target)
    return ops


def _diff(ops: list[dict[str, Any]], path: str, old: Any, new: Any) -> None:
    if not (isinstance(old, dict) and isinstance(new, dict)):
        if old != new:
            ops.append({"op": "replace", "path": path, "value": copy.deepcopy(new)})
        return
    for key in sorted(old.keys() - new.keys(), key=natural_key):
        ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
    for key in sorted(new, key=natural_key):
        child = f"{path}/{escape(key)}"
        if key not in old:
            ops.append({"op": "add", "path": child, "value": copy.deepcopy(new[key])})
        else:
            _diff(ops, child, old[key], new[key])

"""NVUE configuration trees: nested dicts keyed like the CLI path (``nv config show -o json``).

A revision's tree holds only what was set ("When you run the nv config diff command, NVUE
shows only the new configuration", NVUE CLI page); defaults are not stored. Set members and
empty objects are ``{}``.
"""

from __future__ import annotations

import copy
from typing import Any

from lab.mgmt.nvue.schema import Assignment

Tree = dict[str, Any]


def apply_set(tree: Tree, change: Assignment) -> None:
    """Write one ``nv set`` into ``tree``."""
    for path in change.paths:
        parent = tree
        for key in path[:-1]:
            child = parent.get(key)
            if not isinstance(child, dict):
                child = parent[key] = {}
            parent = child
        if change.leaf:
            parent[path[-1]] = change.value
        else:
            if not isinstance(parent.get(path[-1]), dict):
                parent[path[-1]] = {}
            parent[path[-1]].update(change.fill)


def apply_unset(tree: Tree, change: Assignment) -> None:
    """Remove what one ``nv unset`` names (a leaf's value, if given, must match)."""
    for path in change.paths:
        _remove(tree, path, change.value if change.leaf else None)


def _remove(tree: Tree, path: tuple[str, ...], value: Any) -> None:
    trail = [tree]
    for key in path[:-1]:
        child = trail[-1].get(key)
        if not isinstance(child, dict):
            return
        trail.append(child)
    last = path[-1]
    if last not in trail[-1] or (value is not None and trail[-1][last] != value):
        return
    del trail[-1][last]
    # NVUE prunes the containers an unset leaves empty, except set members ({} by design)
    for depth in range(len(trail) - 1, 0, -1):
        if trail[depth]:
            break
        del trail[depth - 1][path[depth - 1]]


def diff(old: Tree, new: Tree) -> tuple[Tree, Tree]:
    """(what ``new`` sets that ``old`` lacks or differs, what ``old`` has that ``new`` lacks)."""
    sets: Tree = {}
    unsets: Tree = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            inner_set, inner_unset = diff(before, value)
            if inner_set or (not value and not before and key not in old):
                sets[key] = inner_set
            if inner_unset:
                unsets[key] = inner_unset
        elif key not in old or before != value:
            sets[key] = copy.deepcopy(value)
    for key in old:
        if key not in new:
            unsets[key] = {}
    return sets, unsets


def get(tree: Tree, *path: str) -> Any:
    """The value at ``path`` or None."""
    node: Any = tree
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node

"""Which modules are compiled (mypyc), and the switch back to their Python source.

The twin's hot path -- the shared model's per-packet rules and the engine's event loop -- is
compiled from these very files by mypyc (``setup.py``); there is no second copy of any rule.
Where a compiled extension sits next to its ``.py``, Python imports the extension.  Setting
``ROCE_AGENT_PURE_PYTHON=1`` makes every module listed here import from its source instead:
the fallback that runs where no compiler was at hand, and the path the test suite checks
against the compiled one.

This module imports only the standard library: ``setup.py`` reads :data:`COMPILED_MODULES`
before anything is installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, SourceFileLoader
from types import ModuleType

PURE_ENV = "ROCE_AGENT_PURE_PYTHON"
"""Set to 1: import the listed modules from their ``.py`` even where compiled ones exist."""

COMPILED_MODULES: tuple[str, ...] = (
    "lossless.clock",
    "lossless.dcqcn",
    "lossless.pfc",
    "lossless.queues",
    "lossless.watchdog",
    "lossless.wred",
    "agent.twin.engine",
)
"""Compiled together as one mypyc group (they call each other directly in C)."""


def pure_python_requested() -> bool:
    """True when the environment asks for the Python source (:data:`PURE_ENV`)."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


class _SourceFirst:
    """A meta-path finder that resolves the listed modules to their ``.py`` files."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self.names or not path:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, leaf + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(
                    fullname, source, loader=SourceFileLoader(fullname, source)
                )
        return None


def prefer_source(package: str) -> None:
    """Called by each package that holds compiled modules, before it imports any of them: under
    :data:`PURE_ENV`, its listed modules come from source."""
    if not pure_python_requested():
        return
    names = frozenset(n for n in COMPILED_MODULES if n.rpartition(".")[0] == package)
    if not any(isinstance(f, _SourceFirst) and f.names == names for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst(names))


def is_compiled(module: ModuleType) -> bool:
    """True when ``module`` was loaded from a compiled extension, not from its source."""
    return not (module.__file__ or "").endswith(".py")

"""Which modules are compiled (mypyc), and when their Python source runs instead.

The hot paths -- the shared model's per-packet rules, the twin engine's event loop, and the lab
switch's data plane (``lab.vswitch``: frame parsing, forwarding tables, counters and the loop
that drives the model on wall time) -- are compiled from these very files by mypyc
(``setup.py``); there is no second copy of any rule.
Where a compiled extension sits next to its ``.py``, Python imports the extension.  The source
runs instead, for every listed module at once (they call each other directly in C, so a mix
would hold two copies of each class):

* when ``ROCE_AGENT_PURE_PYTHON=1`` is set: the fallback that runs where no compiler was at
  hand, and the path the test suite checks against the compiled one;
* when the listed sources are not the ones the extensions were built from (edited since the
  build, :data:`DIGEST_FILE`): the source is what the developer means; a line on stderr says
  to rebuild (``make venv`` or ``pip install -e .``).

This module imports only the standard library: ``setup.py`` reads :data:`COMPILED_MODULES`
before anything is installed.  Every package that holds a listed module imports it first
(``lossless``, ``agent.twin``, ``lab``), so the decision is taken before any of them loads.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, SourceFileLoader
from pathlib import Path
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
    "agent.twin.events",
    "agent.twin.eventqueue",
    "agent.twin.flows",
    "agent.twin.frames",
    "agent.twin.nic",
    "agent.twin.pause",
    "agent.twin.run_options",
    "agent.twin.samples",
    "agent.twin.switch",
    "agent.twin.wiring",
    "agent.twin.engine",
    "lab.vswitch.packet",
    "lab.vswitch.forwarding",
    "lab.vswitch.counters",
    "lab.vswitch.dataplane",
)
"""Compiled together as one mypyc group.  Of the twin, the engine with its base classes (the
queue of its events, ``eventqueue``; its PFC handlers, ``pause``), its run options, and the
elements it runs (events, flows, frames, NICs, switches, samples, and their wiring, which builds
the compiled classes).  Of ``lab.vswitch``, what runs per frame: the rest (pydantic config,
control socket and its commands, client, socket setup) runs per request or once."""

DIGEST_FILE = "compiled.sha256"
"""Written by the build beside this module: :func:`source_digest` of what it compiled."""

GROUP = "roce_agent_hotpath"
"""The group's name: its code is one shared library, ``<GROUP>__mypyc``, beside the packages;
each listed module's own extension only loads it."""

ROOT = Path(__file__).resolve().parents[1]
"""Where the top-level packages sit side by side (a checkout or site-packages)."""


def pure_python_requested() -> bool:
    """True when the environment asks for the Python source (:data:`PURE_ENV`)."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def extension_of(source: Path) -> Path | None:
    """The compiled extension built from ``source`` (same folder and name), if there is one."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_suffix(suffix)
        if candidate.is_file():
            return candidate
    return None


def source_digest(root: Path = ROOT, modules: Sequence[str] = COMPILED_MODULES) -> str:
    """SHA-256 over the listed sources, as the build records it in :data:`DIGEST_FILE`."""
    digest = hashlib.sha256()
    for name in modules:
        digest.update(name.encode() + b"\0")
        digest.update(root.joinpath(*name.split(".")).with_suffix(".py").read_bytes())
    return digest.hexdigest()


def stale(root: Path = ROOT) -> bool:
    """True when the compiled modules were built from other sources than the ones here (an
    edit since the build).  A build without the record (none, or an outside one) is trusted."""
    record = root / "lossless" / DIGEST_FILE
    if not record.is_file() or extension_of(root / f"{GROUP}__mypyc.py") is None:
        return False
    return record.read_text().strip() != source_digest(root)


class SourceFirst:
    """A meta-path finder that resolves the listed modules to their ``.py`` files."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """The source's spec for a listed module (None: the next finder decides)."""
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


def _decide() -> bool:
    """Source or compiled, once per process (module docstring)."""
    if pure_python_requested():
        return True
    if stale():
        print(
            "roce-fabric-agent: the compiled modules were built from other sources than these: "
            f"running the Python source of {', '.join(COMPILED_MODULES)} (rebuild: make venv, "
            "or pip install -e .)",
            file=sys.stderr,
        )
        return True
    return False


# Decided when the package imports this module, not when setup.py reads the list.
RUN_SOURCE = _decide() if __name__ == "lossless.compiled" else False
"""This process imports the listed modules from source."""

if RUN_SOURCE and not any(isinstance(f, SourceFirst) for f in sys.meta_path):
    sys.meta_path.insert(0, SourceFirst(frozenset(COMPILED_MODULES)))


def is_compiled(module: ModuleType) -> bool:
    """True when ``module`` was loaded from a compiled extension, not from its source."""
    return not (module.__file__ or "").endswith(".py")

"""The ``lossless`` package's own rules: time only through a clock object or an argument, and
no import of ``agent``, ``lab`` or ``exporters`` (so every one of them may import it)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from lossless.clock import Clock, VirtualClock, WallClock

PACKAGE = Path(__file__).resolve().parents[2] / "lossless"
SOURCES = sorted(PACKAGE.glob("*.py"))
# A call on the time module (``time.monotonic()``, ``time.time()``, ``time.sleep(...)``).
TIME_CALL = re.compile(r"\btime\.[A-Za-z_]\w*\s*\(")


def test_the_package_has_its_modules() -> None:
    names = {path.stem for path in SOURCES}
    assert {"clock", "config", "pfc", "queues", "wred", "watchdog", "dcqcn"} <= names


def test_the_grep_finds_a_clock_read() -> None:
    # The check below would see a wall-clock read if one were written.
    assert TIME_CALL.search("    now = time.monotonic()\n")
    assert TIME_CALL.search("x = time.time ()")
    assert not TIME_CALL.search("the pause time. It ends")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_only_the_wall_clock_reads_time(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    calls = TIME_CALL.findall(text)
    if path.name == "clock.py":
        assert calls == ["time.monotonic("]
    else:
        assert calls == [], f"{path.name} reads the clock: {calls}"
    tree = ast.parse(text)
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    clocks = {"time", "datetime"} & imported
    assert clocks == ({"time"} if path.name == "clock.py" else set()), path.name


def _import_roots(nodes: list[ast.stmt]) -> set[str]:
    roots: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_imports_only_stdlib_and_itself(path: Path) -> None:
    """At import, the standard library alone (the twin's start-up: pydantic costs more than its
    budget); pydantic only inside the functions that build a schema for a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    every = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
    nested = [
        inner
        for node in every
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for inner in ast.walk(node)
        if isinstance(inner, ast.stmt)
    ]
    at_import = [node for node in every if node not in nested]
    stdlib = set(sys.stdlib_module_names)
    assert _import_roots(at_import) - stdlib - {"lossless"} == set(), path.name
    assert _import_roots(nested) - stdlib - {"lossless", "pydantic", "pydantic_core"} == set()


def test_virtual_clock_moves_only_forward() -> None:
    clock = VirtualClock(5.0)
    assert clock.now() == 5.0
    clock.advance(0.25)
    clock.set(6.0)
    clock.set(6.0)
    assert clock.now() == 6.0
    with pytest.raises(ValueError, match=r"cannot go back. Expected: >= 6.0 Actual: 5.9"):
        clock.set(5.9)
    with pytest.raises(ValueError, match=r"negative time. Expected: >= 0 Actual: -1"):
        clock.advance(-1)
    assert clock.now() == 6.0


def test_wall_clock_is_monotonic() -> None:
    clock: Clock = WallClock()
    readings = [clock.now() for _ in range(1000)]
    assert readings == sorted(readings) and readings[-1] > 0

"""Hostile ``*.clab.yml`` input (#11, #12): the topology reader goes through the one bounded
YAML loader, so every limit the fabric file has holds for topologies too.

Each case runs ``roce-agent lab up FILE`` in its own forked process under 2 GiB of address
space and 30 s (``tests/unit/bounded_cli.py``): exit 2, one ``error: FILE:LINE:COL: …`` line
(or ``error: FILE: …`` for errors about the whole file), no traceback, nothing created. The
same cases through :func:`lab.topology.load_topology` in this process must fail within a
second, at the same place.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.topology.loader import load_topology
from lab.topology.model import TopologyError
from tests.unit.bounded_cli import MEMORY_LIMIT, TIME_LIMIT_S, BoundedCli
from tests.unit.special_files import directory, fifo, named, unix_socket

REPO = Path(__file__).resolve().parents[2]
CLAB = REPO / "tests" / "data" / "clab"
VALID = (REPO / "containerlab" / "roce-leafspine.clab.yml").read_text(encoding="utf-8")


CORPUS_STEMS: set[str] = set()


def _corpus(stem: str) -> Callable[[Path], Path]:
    CORPUS_STEMS.add(stem)
    return lambda _: CLAB / f"{stem}.clab.yml"


def _sparse_gigabyte(folder: Path) -> Path:
    """A valid topology followed by 1 GiB of holes (no disk space used): never read whole."""
    path = folder / "lab.clab.yml"
    path.write_text(VALID, encoding="utf-8")
    os.truncate(path, 1 << 30)
    return path


def _many_links(folder: Path) -> Path:
    """More links than 198.18.0.0/16 has /31s, in a file well inside the loader's limits."""
    path = folder / "lab.clab.yml"
    links = "".join(f"    - endpoints: [s1:eth{i % 9000 + 1}, s2:eth1]\n" for i in range(32769))
    path.write_text(
        "name: many\ntopology:\n  nodes:\n    s1: {kind: linux, image: roce-vswitch:1}\n"
        "    s2: {kind: linux, image: roce-vswitch:1}\n  links:\n" + links,
        encoding="utf-8",
    )
    return path


# case → (make the input in a fresh folder, file the error must name (relative names are
# inside that folder), line (0: an error about the whole file), field or "", words)
CASES: dict[str, tuple[Callable[[Path], Path], str, int, str, str]] = {
    "alias-bomb": (
        _corpus("alias_bomb"), "alias_bomb.clab.yml", 9, "mgmt.f[1]",
        "too many values after alias expansion",
    ),
    "recursive-alias": (
        _corpus("recursive_alias"), "recursive_alias.clab.yml", 4,
        "topology.nodes.leaf1.labels.loop", "recursive alias *l",
    ),
    "nul-byte": (
        _corpus("nul_byte"), "nul_byte.clab.yml", 4, "", "control character U+0000 (NUL byte)",
    ),
    "ansi-escape-in-key": (
        _corpus("ansi_escape_in_key"), "ansi_escape_in_key.clab.yml", 4,
        "topology.nodes.leaf1.labels", "Actual: '\\x1b[2J\\x1b[31mroce.lab/speed'",
    ),
    "duplicate-int-str-key": (
        _corpus("int_str_duplicate_node"), "int_str_duplicate_node.clab.yml", 5,
        "topology.nodes[1]", "duplicate key '1' (first defined on line 4",
    ),
    "too-deep": (
        _corpus("deep_nesting"), "deep_nesting.clab.yml", 2, "mgmt" + "[0]" * 63,
        "nesting too deep",
    ),
    "5000-digit-int": (
        _corpus("huge_integer_label"), "huge_integer_label.clab.yml", 4,
        "topology.nodes.leaf1.labels['roce.lab/mtu']", "Actual: 5000 digits",
    ),
    "5000-digit-size-string": (
        _corpus("huge_size_label"), "huge_size_label.clab.yml", 4,
        "topology.nodes.leaf1.labels.roce.lab/xoff-bytes", "…' is not a size in bytes",
    ),
    "superscript-digit-mtu": (
        _corpus("superscript_mtu"), "superscript_mtu.clab.yml", 4,
        "topology.nodes.leaf1.labels.roce.lab/mtu", "'²' is not an MTU",
    ),
    "fullwidth-digit-mtu": (
        _corpus("fullwidth_mtu"), "fullwidth_mtu.clab.yml", 4,
        "topology.nodes.leaf1.labels.roce.lab/mtu", "'９０００' is not an MTU",
    ),
    "too-many-links": (
        _many_links, "lab.clab.yml", 7, "topology.links", "at most 32768 links",
    ),
    "fifo": (
        named(fifo, "lab.clab.yml"), "lab.clab.yml", 0, "", "a regular file Actual: a FIFO"
    ),
    "socket": (named(unix_socket, "lab.clab.yml"), "lab.clab.yml", 0, "", "Actual: a socket"),
    "directory": (named(directory, "lab.clab.yml"), "lab.clab.yml", 0, "", "Actual: a directory"),
    "char-device": (lambda _: Path("/dev/zero"), "/dev/zero", 0, "", "a character device"),
    "sparse-1gib": (_sparse_gigabyte, "lab.clab.yml", 0, "", "file too large"),
}  # fmt: skip


# The loader reads some 30 000 values a second; 32 769 links are 131 000 of them.
SECONDS = {"too-many-links": 10.0}


@pytest.mark.parametrize("case", sorted(CASES))
def test_roce_agent_lab_up_refuses_hostile_topology_within_2gb_and_30s(
    case: str, tmp_path: Path, bounded_cli: BoundedCli
) -> None:
    make, name, line, field, words = CASES[case]
    path = make(tmp_path)
    state = tmp_path / "state"
    outcome = bounded_cli.run("lab", "up", str(path), "--state-dir", str(state))
    assert outcome.code is not None, f"{case}: still running after {TIME_LIMIT_S} s"
    assert outcome.code == 2, f"{case}: exit {outcome.code}\n{outcome.stderr}"
    assert "Traceback" not in outcome.stderr
    assert "unexpected" not in outcome.stderr
    assert outcome.max_rss_kb * 1024 < MEMORY_LIMIT
    assert outcome.seconds < TIME_LIMIT_S
    assert not state.exists()
    if case == "directory":  # click refuses it before the loader sees it (dir_okay=False)
        assert f"File '{path}' is a directory" in outcome.stderr
        return
    errors = outcome.stderr.splitlines()
    assert errors and all(row.startswith("error: ") for row in errors), outcome.stderr
    file = re.escape(str(path) if not name.startswith("/") else name)
    if line:
        located = rf"^error: {file}:{line}:\d+: " + (re.escape(f"{field}: ") if field else "")
    else:
        located = rf"^error: {file}: "
    assert any(re.match(located, row) and words in row for row in errors), outcome.stderr
    # Whatever the file held, nothing a terminal would act on reaches it.
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", outcome.stderr)


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_topology_refuses_hostile_input_within_a_second(case: str, tmp_path: Path) -> None:
    make, _, line, field, words = CASES[case]
    path = make(tmp_path)
    started, cpu = time.perf_counter(), time.process_time()
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    # The bound is on the work (this process's CPU time): the wall time of 3 s of parsing was
    # 26 s in a suite run sharing 2 cores with three other processes.
    assert time.process_time() - cpu < SECONDS.get(case, 1.0)
    assert time.perf_counter() - started < TIME_LIMIT_S
    problems = caught.value.problems
    if line:
        assert any(
            p.position is not None
            and p.position.file == path
            and p.position.line == line
            and p.field == field
            and words in str(p)
            for p in problems
        ), str(caught.value)
    else:
        assert any(p.position is None and str(p).startswith(f"{path}: ") for p in problems)
        assert words in str(caught.value)


def test_python_m_lab_cli_exits_2_with_one_located_line() -> None:
    """The standalone entry point (``python -m lab.cli``) behaves like ``roce-agent lab``."""
    path = CLAB / "nul_byte.clab.yml"
    done = subprocess.run(
        [sys.executable, "-m", "lab.cli", "up", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        timeout=TIME_LIMIT_S,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}:4:70: control character U+0000")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# (file text, [(line, field)] of every problem, in file order)
MANY_PROBLEMS = [
    (  # the file's shape (pydantic): every misplaced field at once
        "name: shape\n"
        "topology:\n"
        "  nodes:\n"
        "    s1: {kind: linux, image: roce-vswitch:1, imgae: x}\n"
        "    h1: {kind: [linux], image: alpine:3}\n"
        "  linx: []\n",
        [(4, "topology.nodes.s1.imgae"), (5, "topology.nodes.h1.kind"), (6, "topology.linx")],
    ),
    (  # what the shape allows but the runtime cannot build
        "name: meaning\n"
        "topology:\n"
        "  nodes:\n"
        "    s1: {kind: linux, image: roce-vswitch:1}\n"
        "    h1: {kind: linux, image: alpine:3, labels: {roce.lab/sped: 1G}}\n"
        "  links:\n"
        "    - endpoints: [s1:eth0, h1:eth1]\n"
        "    - endpoints: [s1:eth1, h9:eth1]\n",
        [
            (5, "topology.nodes.h1.labels.roce.lab/sped"),
            (7, "topology.links[0].endpoints[0]"),
            (8, "topology.links[1].endpoints[1]"),
        ],
    ),
]


@pytest.mark.parametrize(("text", "where"), MANY_PROBLEMS)
def test_every_problem_of_a_file_is_reported_at_once(
    text: str, where: list[tuple[int, str]], tmp_path: Path
) -> None:
    path = tmp_path / "lab.clab.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    found = [(p.position.line if p.position else 0, p.field) for p in caught.value.problems]
    assert found == where, str(caught.value)


def test_every_topology_in_the_corpus_has_an_expectation() -> None:
    from tests.unit.test_topology import BAD_TOPOLOGIES

    on_disk = {p.name.removesuffix(".clab.yml") for p in CLAB.glob("*.clab.yml")}
    assert on_disk == {name for name, *_ in BAD_TOPOLOGIES} | CORPUS_STEMS


@pytest.mark.parametrize("command", ["up", "down", "status"])
def test_every_lab_command_that_reads_a_topology_refuses_the_same_way(
    command: str, tmp_path: Path, bounded_cli: BoundedCli
) -> None:
    path = CLAB / "alias_bomb.clab.yml"
    outcome = bounded_cli.run("lab", command, str(path), "--state-dir", str(tmp_path / "s"))
    assert outcome.code == 2, outcome.stderr
    assert outcome.stderr.startswith(f"error: {path}:9:14: mgmt.f[1]: too many values")
    assert "Traceback" not in outcome.stderr
    assert outcome.seconds < TIME_LIMIT_S


# --------------------------------------------------------------------------- properties

_PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_JUNK = ["[]", "{}", "~", "-1", "1.0e+999", ".nan", "9" * 40, "true", "'３'", "&a [*a]",
         "*nowhere", "!!binary AAAA", '"\\0"', "2024-13-45", "{a: 1, a: 2}", "0x10", "'²'",
         "[" * 80 + "]" * 80]  # fmt: skip


def _accepted_or_located(path: Path) -> None:
    """Whatever the mutation, the reader builds a topology or names where it is wrong."""
    try:
        load_topology(path)
    except TopologyError as exc:
        assert exc.problems
        for problem in exc.problems:
            if problem.position is None:
                assert str(path) in problem.message
            else:
                assert problem.position.file == path and problem.position.line >= 1
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", str(exc))


@_PROPERTY
@given(edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_byte_flips(tmp_path: Path, edits: list[tuple[float, int]]) -> None:
    mutated = bytearray(VALID.encode())
    for where, byte in edits:
        mutated[min(int(where * len(mutated)), len(mutated) - 1)] = byte
    path = tmp_path / "lab.clab.yml"
    path.write_bytes(bytes(mutated))
    _accepted_or_located(path)


@_PROPERTY
@given(start=st.floats(0, 1), length=st.integers(1, 400))
def test_deletions(tmp_path: Path, start: float, length: int) -> None:
    data = VALID.encode()
    at = int(start * len(data))
    path = tmp_path / "lab.clab.yml"
    path.write_bytes(data[:at] + data[at + length :])
    _accepted_or_located(path)


@_PROPERTY
@given(picks=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(_JUNK)), min_size=1, max_size=4))
def test_type_changes(tmp_path: Path, picks: list[tuple[float, str]]) -> None:
    """A value replaced by another type, a number out of range, an alias trap, deep nesting."""
    rows = VALID.splitlines()
    candidates = [
        i
        for i, row in enumerate(rows)
        if re.match(r"^\s*-?\s*[A-Za-z_0-9./-]+:\s*\S", row) and not row.lstrip().startswith("#")
    ]
    for where, junk in picks:
        index = candidates[min(int(where * len(candidates)), len(candidates) - 1)]
        key, _, _ = rows[index].partition(":")
        rows[index] = f"{key}: {junk}"
    path = tmp_path / "lab.clab.yml"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    _accepted_or_located(path)

"""Hostile and careless input (#11, "Bounded input everywhere").

Every file in tests/data/bad, and the cases that cannot live in git (a FIFO, a socket, a
device, a 5 MB file, a quarter of a million values), is run through ``roce-agent check`` in
its own process under a 2 GiB address-space limit and a 30 s timeout: each must end with
exit 2 and an error that names the file (and the line, unless the error is about the whole
file), never a traceback, an "internal error", a hang or a MemoryError. Property tests mutate
the valid fabrics and check the loader either accepts them or raises IntentError with a
location, never anything else.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import IntentError, printable
from agent.intent.loader import load_fabric, load_profile_model
from agent.ops.playbooks import load_playbook
from common import yamlsource
from common.yamlsource import YamlLimits, load_yaml
from tests.unit.bounded_cli import MEMORY_LIMIT, TIME_LIMIT_S, BoundedCli
from tests.unit.special_files import directory, fifo, named, unix_socket

REPO = Path(__file__).resolve().parents[2]
BAD = REPO / "tests" / "data" / "bad"
VALID_FABRICS = sorted((REPO / "playbooks" / "fabrics").glob("*.yml"))

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)


# --------------------------------------------------------------------------- harness


def _oversized(folder: Path) -> Path:
    path = folder / "fabric.yml"
    path.write_text("# padding\n" * 500_000)  # 5 MB of comments, above the 4 MiB cap
    return path


def _too_many_values(folder: Path) -> Path:
    path = folder / "fabric.yml"
    path.write_text("name: x\nlist: [" + "0," * 250_000 + "0]\n")
    return path


def _empty(folder: Path) -> Path:
    path = folder / "fabric.yml"
    path.write_text("")
    return path


def _profile_symlink_outside(folder: Path) -> Path:
    """A profile in the search path that is a symlink to a file outside it."""
    (folder / "profiles").mkdir()
    secret = folder.parent / f"secret-{folder.name}.yml"
    secret.write_text("root:x:0:0:SECRET-CONTENT:/root:/bin/bash\n")
    (folder / "profiles" / "evil.yml").symlink_to(secret)
    path = folder / "fabric.yml"
    path.write_text("name: x\nprofile: evil\ndevices: []\n")
    return path


def _profile_fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.yml")
    path = folder / "fabric.yml"
    path.write_text("name: x\nprofile: ./pipe.yml\ndevices: []\n")
    return path


def _bomb_profile(folder: Path) -> Path:
    (folder / "profiles").mkdir()
    (folder / "profiles" / "bomb.yml").write_text(BOMB)
    path = folder / "fabric.yml"
    path.write_text("name: x\nprofile: bomb\ndevices: []\n")
    return path


# name → (make the input in a fresh folder, file the error must name, line or 0, words)
GENERATED: dict[str, tuple[Callable[[Path], Path], str, int, str]] = {
    "fifo": (named(fifo, "fabric.yml"), "fabric.yml", 0, "Expected: a regular file Actual: a FIFO"),
    "socket": (named(unix_socket, "fabric.yml"), "fabric.yml", 0, "Actual: a socket"),
    "directory": (named(directory, "fabric.yml"), "fabric.yml", 0, "Actual: a directory"),
    "char-device": (lambda _: Path("/dev/zero"), "/dev/zero", 0, "Actual: a character device"),
    "oversized": (_oversized, "fabric.yml", 0, "file too large"),
    "too-many-values": (_too_many_values, "fabric.yml", 2, "too many values"),
    "empty": (_empty, "fabric.yml", 1, "the file is empty"),
    "profile-symlink-outside": (_profile_symlink_outside, "fabric.yml", 2, "(outside them)"),
    "profile-fifo": (_profile_fifo, "fabric.yml", 2, "not found"),
    "profile-alias-bomb": (_bomb_profile, "bomb.yml", 6, "too many values"),
}


def _corpus() -> Iterator[str]:
    yield from (p.name for p in sorted(BAD.glob("*.yml")))
    yield from (f"generated:{name}" for name in GENERATED)


@pytest.mark.parametrize("case", list(_corpus()))
def test_every_bad_input_exits_2_with_a_location_within_2gb_and_30s(
    case: str, tmp_path: Path, bounded_cli: BoundedCli
) -> None:
    if case.startswith("generated:"):
        make, names, line, words = GENERATED[case.removeprefix("generated:")]
        path = make(tmp_path)
        named = names
    else:
        path, named, line, words = BAD / case, str(BAD / case), -1, ""
    outcome = bounded_cli.run(
        "check", str(path), env={"ROCE_TEST_PASSWORD": "x", "ROCE_LAB_PASSWORD": "x"}
    )
    assert outcome.code is not None, f"{case}: still running after {TIME_LIMIT_S} s"
    assert outcome.code == 2, f"{case}: exit {outcome.code}\n{outcome.stderr}"
    assert "Traceback" not in outcome.stderr
    assert "internal error" not in outcome.stderr
    assert "MemoryError" not in outcome.stderr
    assert "SECRET-CONTENT" not in outcome.stderr  # a foreign file's content is never shown
    errors = [row for row in outcome.stderr.splitlines() if row.startswith("error: ")]
    assert errors, outcome.stderr
    located = re.compile(rf"^error: \S*{re.escape(named)}(:(?P<line>\d+):\d+)?: ")
    matches = [m for m in map(located.match, errors) if m]
    assert matches, f"{case}: no error names {named}:\n{outcome.stderr}"
    if line > 0:
        assert any(m["line"] == str(line) for m in matches), outcome.stderr
    elif line == 0:
        assert any(m["line"] is None for m in matches), outcome.stderr
    else:
        assert all(m["line"] for m in matches), f"{case}: error without a line"
    assert words in outcome.stderr
    assert outcome.max_rss_kb * 1024 < MEMORY_LIMIT
    assert outcome.seconds < TIME_LIMIT_S


# --------------------------------------------------------------------------- loader limits


def test_alias_bomb_fails_in_milliseconds_at_the_alias(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yml"
    path.write_text(BOMB)
    assert len(BOMB.encode()) < 400
    started = time.perf_counter()
    with pytest.raises(IntentError) as caught:
        load_yaml(path)
    assert time.perf_counter() - started < 0.5
    problem = caught.value.problems[0]
    assert problem.position is not None and problem.position.file == path
    assert problem.position.line == 6  # the first alias that pushes past 200 000 values
    assert "too many values after alias expansion" in problem.message


@pytest.mark.parametrize(
    ("text", "limits", "line", "field", "words"),
    [
        # depth counts every level, the root mapping and the innermost scalar included
        ("a: [[[1]]]\n", YamlLimits(max_depth=3), 1, "a[0][0]", "nesting too deep"),
        ("a: [[[1]]]\n", YamlLimits(max_depth=5), 0, "", ""),
        # nodes: root, a, [1, 2] (3), b, [..], then 3 per *x
        ("a: &x [1, 2]\nb: [*x, *x]\n", YamlLimits(max_nodes=9), 2, "b[0]", "too many values"),
        ("a: &x [1, 2]\nb: [*x, *x]\n", YamlLimits(max_nodes=13), 0, "", ""),
        ("a: 1234\n", YamlLimits(max_int_digits=3), 1, "a", "number too long"),
        ("a: 123\n", YamlLimits(max_int_digits=3), 0, "", ""),
        ("a: &x {b: [*x]}\n", YamlLimits(), 1, "a.b[0]", "recursive alias *x"),
        ("a: !!binary 'A'\n", YamlLimits(), 1, "", "YAML syntax error"),
        ("? [a, b]\n: 1\n", YamlLimits(), 1, "", "a mapping key that is a name or a number"),
        ("a: 2024-02-30\n", YamlLimits(), 1, "a", "cannot read value"),
        ("a: -.inf\n", YamlLimits(), 1, "a", "Expected: a finite number"),
        ("3: x\n'3': y\n", YamlLimits(), 2, "[3]", "duplicate key '3'"),
        ("a: {0x10: x, 16: y}\n", YamlLimits(), 1, "a[16]", "duplicate key 16"),
        ('a: "\\e[31m"\n', YamlLimits(), 1, "a", "U+001B"),
        ('a: "x\\u202Ey"\n', YamlLimits(), 1, "a", "U+202E"),
        ('a: "\\x85"\n', YamlLimits(), 1, "a", "U+0085"),
        ("a: b\n\x7f: c\n", YamlLimits(), 2, "", "U+007F"),
        ("a: \ufffe\n", YamlLimits(), 1, "", "U+FFFE"),
        ("a: x\n" * 3, YamlLimits(max_bytes=8), 0, "", "file too large"),
    ],
)
@pytest.mark.parametrize("parser", ["libyaml", "python"])
def test_loader_limits(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    parser: str,
    text: str,
    limits: YamlLimits,
    line: int,
    field: str,
    words: str,
) -> None:
    """The same limits and locations whether libyaml or PyYAML's own parser reads the text."""
    if parser == "python":
        monkeypatch.setattr(yamlsource, "_BoundedLoader", yamlsource._PyLoader)
    else:
        assert yamlsource._BoundedLoader is yamlsource._CLoader
    path = tmp_path / "in.yml"
    path.write_text(text, encoding="utf-8")
    if not words:
        load_yaml(path, limits)
        return
    with pytest.raises(IntentError) as caught:
        load_yaml(path, limits)
    problem = caught.value.problems[0]
    assert words in str(problem)
    if line:
        assert problem.position is not None and problem.position.line == line
        assert problem.field == field
    else:
        assert problem.position is None and str(problem).startswith(f"{path}: ")


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "f.yml")
    started = time.perf_counter()
    with pytest.raises(IntentError, match="Actual: a FIFO"):
        load_yaml(pipe)
    assert time.perf_counter() - started < 1


@pytest.mark.parametrize(
    "load",
    [load_playbook, load_profile_model, load_fabric],
    ids=["playbook", "profile", "fabric"],
)
def test_every_yaml_reader_shares_the_limits(
    tmp_path: Path, load: Callable[[Path], object]
) -> None:
    path = tmp_path / "bomb.yml"
    path.write_text(BOMB)
    with pytest.raises(IntentError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:6:")


# --------------------------------------------------------------------------- printing


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain", "plain"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("a\x00b", "a\\x00b"),
        ("csi\x9bJ", "csi\\x9bJ"),
        ("two\nlines\ttab\r", "two\\nlines\\ttab\\x0d"),
        ("rtl \u202eevil", "rtl \\u202eevil"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("ok ünïcödé →", "ok ünïcödé →"),
    ],
)
def test_printable_escapes_what_a_terminal_would_obey(raw: str, shown: str) -> None:
    assert printable(raw) == shown


# --------------------------------------------------------------------------- properties

_JUNK_VALUES = [
    "[]",
    "{}",
    "~",
    "-1",
    "1.0e+999",
    ".nan",
    "9" * 40,
    "true",
    "'３'",
    "&a [*a]",
    "*nowhere",
    "!!binary AAAA",
    "!!python/object:os.system x",
    '"\\0"',
    "2024-13-45",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]"
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    "{a: 1, a: 2}",
    "{3: x, '3': y}",
    "1T",
    "0.5M",
    "eth..0",
    "/etc/passwd",
]


def _assert_accepted_or_located(path: Path) -> None:
    try:
        load_fabric(path)
    except IntentError as exc:
        assert exc.problems
        for problem in exc.problems:
            if problem.position is None:
                assert problem.message.startswith(str(path)) or str(path) in problem.message
            else:
                assert problem.position.line >= 1
                assert problem.position.file.name.endswith((".yml", ".yaml"))
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", str(exc))


_PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fabric_text(index: int) -> tuple[Path, bytes]:
    source = VALID_FABRICS[index % len(VALID_FABRICS)]
    return source, source.read_bytes()


@_PROPERTY
@given(
    which=st.integers(0, 10),
    edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_byte_flips(tmp_path: Path, which: int, edits: list[tuple[float, int]]) -> None:
    source, data = _fabric_text(which)
    mutated = bytearray(data)
    for where, byte in edits:
        mutated[min(int(where * len(mutated)), len(mutated) - 1)] = byte
    path = tmp_path / source.name
    path.write_bytes(bytes(mutated))
    _assert_accepted_or_located(path)


@_PROPERTY
@given(
    which=st.integers(0, 10),
    start=st.floats(0, 1),
    length=st.integers(1, 400),
)
def test_deletions(tmp_path: Path, which: int, start: float, length: int) -> None:
    source, data = _fabric_text(which)
    at = int(start * len(data))
    path = tmp_path / source.name
    path.write_bytes(data[:at] + data[at + length :])
    _assert_accepted_or_located(path)


def _pick(lines: list[int], fraction: float) -> int:
    """The line at ``fraction`` (0..1) of ``lines``: hypothesis draws a float, not an index."""
    return lines[min(int(fraction * len(lines)), len(lines) - 1)]


def _value_lines(text: str) -> list[int]:
    return [
        i
        for i, row in enumerate(text.splitlines())
        if re.match(r"^\s*-?\s*[A-Za-z_0-9]+:\s*\S", row) and not row.lstrip().startswith("#")
    ]


@_PROPERTY
@given(
    which=st.integers(0, 10),
    picks=st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(_JUNK_VALUES)), min_size=1, max_size=4
    ),
)
def test_type_changes(tmp_path: Path, which: int, picks: list[tuple[float, str]]) -> None:
    """A value replaced by another type, a number out of range, an alias trap, deep nesting."""
    source, data = _fabric_text(which)
    rows = data.decode().splitlines()
    candidates = _value_lines(data.decode())
    for where, junk in picks:
        index = _pick(candidates, where)
        key, _, _ = rows[index].partition(":")
        rows[index] = f"{key}: {junk}"
    path = tmp_path / source.name
    path.write_text("\n".join(rows) + "\n")
    _assert_accepted_or_located(path)


@_PROPERTY
@given(which=st.integers(0, 10), first=st.floats(0, 1), second=st.floats(0, 1))
def test_key_value_swaps(tmp_path: Path, which: int, first: float, second: float) -> None:
    """Two lines' keys swapped (a value under the wrong field), or a key and its value."""
    source, data = _fabric_text(which)
    rows = data.decode().splitlines()
    candidates = _value_lines(data.decode())
    a = _pick(candidates, first)
    b = _pick(candidates, second)
    key_a, _, value_a = rows[a].partition(":")
    key_b, _, value_b = rows[b].partition(":")
    if a == b:
        indent = key_a[: len(key_a) - len(key_a.lstrip(" -"))]
        rows[a] = f"{indent}{value_a.strip()}: {key_a.strip(' -')}"
    else:
        rows[a], rows[b] = f"{key_a}:{value_b}", f"{key_b}:{value_a}"
    path = tmp_path / source.name
    path.write_text("\n".join(rows) + "\n")
    _assert_accepted_or_located(path)


@_PROPERTY
@given(which=st.integers(0, 10), where=st.floats(0, 1), depth=st.integers(1, 3000))
def test_deep_nesting(tmp_path: Path, which: int, where: float, depth: int) -> None:
    source, data = _fabric_text(which)
    rows = data.decode().splitlines()
    candidates = _value_lines(data.decode())
    index = _pick(candidates, where)
    key, _, _ = rows[index].partition(":")
    rows[index] = f"{key}: {'[' * depth}1{']' * depth}"
    path = tmp_path / source.name
    path.write_text("\n".join(rows) + "\n")
    _assert_accepted_or_located(path)


def test_valid_fabrics_still_load() -> None:
    """The property tests mutate these; they must be valid to begin with."""
    assert VALID_FABRICS
    for path in VALID_FABRICS:
        load_fabric(path)


def test_report_tables_escape_names_and_ignore_markup() -> None:
    """Names are validated on load, but tables never trust that: a plan built any other way
    (JSON, a future field) still prints escapes, and ``[red]`` is text, not markup."""
    import io

    from rich.console import Console

    from agent.intent.plan import build_plan
    from agent.intent.plan_tables import render_plan_tables

    plan = build_plan(load_fabric(REPO / "playbooks" / "fabrics" / "lab-leafspine.yml").intent)
    first = plan.devices[0]
    port = first.ports[0].model_copy(update={"name": "Eth\x1b]0;pwned\x07", "peer": "[red]x"})
    device = first.model_copy(update={"name": "sw\x1b[2J", "ports": [port]})
    hostile = plan.model_copy(update={"fabric": "fab\u202eric", "devices": [device]})
    out = io.StringIO()
    render_plan_tables(hostile, Console(file=out, width=400, force_terminal=False))
    text = out.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", text)
    for shown in ("sw\\x1b[2J", "Eth\\x1b]0;pwned\\x07", "[red]x", "fab\\u202eric"):
        assert shown in text


def test_error_printing_escapes_file_names(tmp_path: Path) -> None:
    """The one place errors are printed (cli_support.handle_errors) escapes what it prints."""
    from click.testing import CliRunner

    from agent.app.cli import main

    missing = tmp_path / "fab\x1b[31mric.yml"
    result = CliRunner().invoke(main, ["check", str(missing)])
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr
    assert f"{tmp_path}/fab\\x1b[31mric.yml: no such file" in result.stderr


@pytest.mark.parametrize(
    ("reference", "layout", "accepted"),
    [
        ("custom.yml", {"custom.yml": "file"}, True),
        ("./sub/custom.yml", {"sub/custom.yml": "file"}, True),
        ("custom", {"profiles/custom.yml": "file"}, True),
        ("custom", {"profiles/custom.yml": "link-inside"}, True),
        ("custom", {"profiles/custom.yml": "link-outside"}, False),
        ("custom.yml", {"custom.yml": "link-outside"}, False),
        ("../custom.yml", {"../custom.yml": "file"}, False),
        ("sub/../../custom.yml", {"../custom.yml": "file", "sub/other.yml": "file"}, False),
        ("custom", {"extra/custom.yml": "file"}, True),  # $ROCE_AGENT_PROFILES
    ],
)
def test_profile_must_be_in_the_search_path_or_next_to_the_fabric(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference: str,
    layout: dict[str, str],
    accepted: bool,
) -> None:
    root = tmp_path / "fabric"
    root.mkdir()
    profile_text = (REPO / "playbooks" / "profiles" / "nvidia-default.yml").read_text()
    outside = tmp_path / "outside.yml"
    outside.write_text(profile_text)
    monkeypatch.setenv("ROCE_AGENT_PROFILES", str(root / "extra"))
    for relative, kind in layout.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            target.write_text(profile_text)
        elif kind == "link-inside":
            (root / "real.yml").write_text(profile_text)
            target.symlink_to(root / "real.yml")
        else:
            target.symlink_to(outside)
    fabric = root / "fabric.yml"
    lab = (REPO / "playbooks" / "fabrics" / "lab-leafspine.yml").read_text()
    fabric.write_text(lab.replace("profile: nvidia-default", f"profile: {reference}"))
    if accepted:
        assert load_fabric(fabric).profile_file.name == "custom.yml"
        return
    with pytest.raises(IntentError) as caught:
        load_fabric(fabric)
    problem = caught.value.problems[0]
    assert problem.field == "profile"
    assert problem.position is not None and problem.position.file == fabric
    assert "outside them" in problem.message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("speed", "１００G"),
        ("speed", "\u0661\u0660\u0660G"),  # Arabic-Indic digits
        ("mtu", "９０００"),
        ("mtu", "\u0969\u0966\u0966\u0966"),  # Devanagari digits
        ("cable_m", "３"),
    ],
)
def test_digits_are_ascii_only(field: str, value: str) -> None:
    """``int('９０００')`` is 9000 in Python; in a fabric file it is a typo, not a number."""
    from pydantic import ValidationError

    from agent.intent.model import Port

    fields: dict[str, object] = {"name": "eth0", "speed": "10M", "cable_m": 3, "mtu": 9000}
    fields[field] = value
    with pytest.raises(ValidationError) as caught:
        Port.model_validate(fields)
    assert caught.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("mtu[0]", "devices[0].ports[0]['mtu[0]']"),
        ("speed.x", "devices[0].ports[0]['speed.x']"),
        ("function-after[x]", "devices[0].ports[0]['function-after[x]']"),  # a pydantic step's name
        ("lax-or-strict", "devices[0].ports[0].lax-or-strict"),
        ("0", "devices[0].ports[0].0"),
    ],
)
def test_odd_keys_are_reported_at_their_own_field(tmp_path: Path, key: str, field: str) -> None:
    """pydantic puts validator steps (``function-after[...]``) in error locations; only those
    that are not keys of the data are dropped, so every key is reported where it is."""
    lab = (REPO / "playbooks" / "fabrics" / "lab-leafspine.yml").read_text()
    first_port = "  ports:\n  - name: Ethernet1\n"
    assert first_port in lab
    path = tmp_path / "fabric.yml"
    path.write_text(lab.replace(first_port, f"{first_port}    '{key}': 1\n", 1))
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    problem = caught.value.problems[0]
    assert (problem.field, problem.message) == (field, f"unknown field {key!r}")
    assert problem.position is not None
    assert problem.position.line == lab.splitlines().index("  - name: Ethernet1") + 2


MERGES = [
    # (YAML, expected data or the expected problem) — YAML 1.1 merge keys, as PyYAML reads them.
    ("base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  b: 3\n", {"a": 1, "b": 3}),
    ("p: &p {a: 1}\nq: &q {a: 2, c: 3}\nx:\n  <<: [*p, *q]\n", {"a": 1, "c": 3}),
    ("base: &b {a: 1}\nx:\n  b: 2\n  <<: *b\n", {"a": 1, "b": 2}),
    ("x:\n  <<: [1]\n", "2:8: x: Expected: a mapping to merge (<<) Actual: '1'"),
    ("base: &b {a: 1}\nx:\n  <<: *b\n  c: 1\n  c: 2\n", "5:3: x.c: duplicate key"),
]


@pytest.mark.parametrize(("text", "expected"), MERGES)
def test_merge_keys_override_but_real_duplicates_are_refused(
    tmp_path: Path, text: str, expected: object
) -> None:
    file = tmp_path / "merge.yaml"
    file.write_text(text)
    if isinstance(expected, dict):
        data, _ = load_yaml(file)
        assert data["x"] == expected
    else:
        with pytest.raises(IntentError) as caught:
            load_yaml(file)
        assert f"{file}:{expected}" in str(caught.value)

"""Hostile input to what the commands print (issue #42's corpus, the output's part): sizes
from the environment that are no sizes, an override file tune could only fail to write after
minutes of search, and a fabric whose bad value would put escape sequences into check's JSON.
Each case runs in its own process under bounds (tests/unit/bounded_cli.py) and must end as
documented within 5 s and under 1.5 GB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.bounded_cli import BoundedCli, Outcome

ROOT = Path(__file__).resolve().parents[2]
POD = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
MIXED = ROOT / "playbooks" / "fabrics" / "pod-mixed.yml"
SECONDS = 5.0
MEMORY = 1.5e9


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoundedCli]:
    runner = BoundedCli(tmp_path_factory.mktemp("hostile-output"))
    yield runner
    runner.close()


def _bounded(run: Outcome) -> None:
    assert run.code is not None, "still running at the time limit"
    assert run.seconds < SECONDS, run.seconds
    assert run.max_rss_kb * 1024 < MEMORY, run.max_rss_kb
    assert "Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize(
    "value", ["²", "0", "-5", "99999999999", "1" * 100_000, "\x1b[31m80", " 80", "8e1"]
)
@pytest.mark.parametrize("name", ["COLUMNS", "LINES"])
def test_a_size_that_is_no_size(cli: BoundedCli, name: str, value: str) -> None:
    """rich crashed on COLUMNS=² (isdigit() yet no int) and would pad lines to 10^11
    columns: the value is ignored, the table is 100 columns wide in a file, exit 0."""
    run = cli.run("plan", str(MIXED), env={name: value})
    _bounded(run)
    assert run.code == 0, run.stderr
    assert max(len(line) for line in run.stdout.splitlines()) <= 100
    error = cli.run("check", str(ROOT / "missing.yml"), env={name: value})
    _bounded(error)
    assert error.code == 2 and f"error: {ROOT / 'missing.yml'}" in error.stderr


@pytest.mark.parametrize(
    ("target", "reason"),
    [("no-such-folder/tuned.yml", "does not exist"), (".", "is a directory")],
)
def test_tune_refuses_an_override_it_could_not_write_before_searching(
    cli: BoundedCli, tmp_path: Path, target: str, reason: str
) -> None:
    """pod-400g's search takes minutes; a --write-override that cannot be written is refused
    before it (it used to fail after the search, the result lost)."""
    path = tmp_path / target
    run = cli.run("tune", str(POD), "--write-override", str(path))
    _bounded(run)
    assert run.code == 2
    assert "'--write-override'" in run.stderr and reason in run.stderr, run.stderr


def test_check_json_carries_a_hostile_value_escaped(cli: BoundedCli, tmp_path: Path) -> None:
    """A device name with a terminal escape and a pipe: check -o json stays one valid JSON
    document on stdout with the problem located, and nothing raw reaches the terminal."""
    fabric = tmp_path / "escape.yml"
    fabric.write_text(
        "name: t\nprofile: nvidia-default\n"
        "defaults: {username: a, credentials: {password_env: X}}\n"
        'devices:\n  - {name: "leaf\\u001b[2J|x", platform: arista_eos, role: leaf, host: h}\n'
    )
    run = cli.run("check", str(fabric), "-o", "json")
    _bounded(run)
    assert run.code == 2
    document = json.loads(run.stdout)
    assert document["valid"] is False and document["problems"]
    assert all(p["line"] for p in document["problems"])
    assert "\x1b" not in run.stdout and "\x1b" not in run.stderr

"""bench/gnmi_fold.py runs, prints both shapes with a ratio, and refuses a size it cannot use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench/gnmi_fold.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_prints_both_shapes_with_a_ratio() -> None:
    done = run("--ports", "2", "--samples", "3", "--repeats", "1")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:4]}
    assert set(rows) == {"sonic", "nvue"}
    assert rows["sonic"][1] == "2"  # two tables a sample
    assert rows["nvue"][1] == str(2 * 8 * 2 + 2 * 8 * 5)  # one leaf an update
    assert all(row[4].endswith("x") and float(row[4][:-1]) > 0 for row in rows.values())


@pytest.mark.parametrize(("option", "value"), [("--samples", "1"), ("--ports", "0")])
def test_refuses_sizes_it_cannot_use(option: str, value: str) -> None:
    done = run(option, value)
    assert done.returncode == 2
    assert f"{option}: at least" in done.stderr

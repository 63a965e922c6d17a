"""bench/trim_modes.py: one real --compare-modes case prints its rows and a summary; an
unknown case is refused; the summary counts the seeds' recommendations and each row's spread."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench/trim_modes.py"
# bench/ is not a package: its functions are taken from the script's own namespace.
summarize = runpy.run_path(str(SCRIPT))["summarize"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


def test_one_case_prints_every_row_and_the_summary() -> None:
    done = run("--seeds", "1", "--cases", "allreduce-8-pod400g")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| allreduce-8")]
    labels = [line.split("|")[3].strip() for line in rows[:3]]
    assert labels == ["lossless/flow", "lossless/spray", "lossy-trim/spray"]
    assert rows[-1].startswith("| allreduce-8-pod400g | lossless 1/1 |")


def test_an_unknown_case_is_refused() -> None:
    done = run("--cases", "nope")
    assert done.returncode == 2
    assert "--cases: unknown ['nope']" in done.stderr


def _row(mode: str, busbw: float) -> dict[str, Any]:
    return {"mode": mode, "paths": "flow", "job": "", "busbw_GBps": busbw, "goodput_Gbps": None}


def test_the_summary_counts_picks_and_spreads() -> None:
    runs = [
        {"recommended": "lossless", "rows": [_row("lossless", 10.0), _row("lossy-trim", 10.0)]},
        {"recommended": "lossy-trim", "rows": [_row("lossless", 12.0), _row("lossy-trim", 15.0)]},
    ]
    (line,) = summarize({"case": runs})[3:]
    assert line == (
        "| case | lossless 1/2, lossy-trim 1/2 | lossless/flow 20.0%, lossy-trim/flow 50.0% |"
    )

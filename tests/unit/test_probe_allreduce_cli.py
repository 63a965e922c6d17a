"""``roce-agent probe allreduce``: bad input exits 2 naming the option or the host, before any
traffic (the runs themselves are lab tests: tests/lab/test_ring_lab.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.cli import main

FABRIC = Path(__file__).resolve().parents[2] / "playbooks" / "fabrics" / "lab-leafspine.yml"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--hosts", "h1,h2", "--size", "0"], "--size"),
        (["--hosts", "h1,h2", "--size", "12XB"], "--size"),
        (["--hosts", "h1,h2", "--payload", "10"], "--payload"),
        (["--hosts", "h1,h9"], "h9"),
        (["--hosts", "h1"], "two or more distinct hosts"),
        (["--hosts", "h1,h1"], "two or more distinct hosts"),
        (["--hosts", "h1,leaf1"], "leaf1"),
    ],
)
def test_bad_input_exits_2_naming_it(args: list[str], named: str) -> None:
    result = CliRunner().invoke(main, ["probe", "allreduce", "--fabric", str(FABRIC), *args])
    assert result.exit_code == 2, result.output
    assert named in result.output

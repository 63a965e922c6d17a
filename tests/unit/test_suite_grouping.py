"""`make test` keeps a lab module's tests on one xdist worker, and the RDMA lab's modules
together (tests/lab/conftest.py marks them with ``xdist_group``): otherwise each worker starts
its own labs and VMs. A pytest upgrade broke this silently once (pytest-dev/pytest-xdist#1386),
so a small suite with the same hook is run here the way `make test` runs the lab tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(getattr(item.module, "XDIST_GROUP", "x")))
"""
MODULE = """
import os
from pathlib import Path

XDIST_GROUP = "together"

def test_a():
    Path(__file__).with_suffix(".a").write_text(os.environ["PYTEST_XDIST_WORKER"])

def test_b():
    Path(__file__).with_suffix(".b").write_text(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_group_from_the_conftest_runs_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    for n in range(4):
        (suite / f"test_m{n}.py").write_text(MODULE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-c", "/dev/null", "--rootdir", str(tmp_path), str(suite)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    workers = {path.read_text() for path in suite.glob("test_m*.[ab]")}
    assert len(list(suite.glob("test_m*.[ab]"))) == 8
    assert len(workers) == 1, f"one group spread over the workers {sorted(workers)}"

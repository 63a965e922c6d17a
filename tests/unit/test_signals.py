"""A run stopped by SIGTERM or SIGHUP tears down what it started (common.signals): a pytest
session, like the lab tests' (tests/lab/conftest.py), stopped in the middle of a test runs
its fixtures' teardown; without the hook the same stop leaves the teardown undone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.signals import unwind_on_termination

REPO = Path(__file__).resolve().parents[2]

TEST_FILE = """
import time
from pathlib import Path

import pytest

OUT = Path(__file__).parent


@pytest.fixture
def lab():
    yield
    (OUT / "torn-down").write_text("yes")


def test_long(lab):
    (OUT / "started").write_text("yes")
    time.sleep(60)
"""

CONFTEST = """
from common.signals import unwind_on_termination


def pytest_configure(config):
    unwind_on_termination()
"""


def _stopped_run(tmp_path: Path, signum: int, hook: bool) -> Path:
    (tmp_path / "test_long.py").write_text(TEST_FILE)
    if hook:
        (tmp_path / "conftest.py").write_text(CONFTEST)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         str(tmp_path / "test_long.py")],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # Generous: the suite runs this beside the wheel's compile on a 2-core machine.
        deadline = time.monotonic() + 90
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline, "the test never started"
            assert run.poll() is None, "pytest ended before the test started"
            time.sleep(0.05)
        run.send_signal(signum)
        run.wait(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    return tmp_path / "torn-down"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_session_tears_its_fixtures_down(tmp_path: Path, signum: int) -> None:
    assert _stopped_run(tmp_path, signum, hook=True).exists()


def test_without_the_hook_the_same_stop_leaves_them_up(tmp_path: Path) -> None:
    assert not _stopped_run(tmp_path, signal.SIGTERM, hook=False).exists()


def test_a_handler_someone_else_set_is_kept() -> None:
    def mine(signum: int, frame: object) -> None: ...

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGTERM, mine)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        assert unwind_on_termination() == [signal.SIGHUP]
        assert signal.getsignal(signal.SIGTERM) is mine
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGHUP)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)

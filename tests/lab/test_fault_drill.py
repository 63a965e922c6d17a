"""The fault-drill matrix (issue #11, item 3) on a lab, one test per row.

Each row resets every switch to the lab's factory QoS, breaks one rollout (SIGKILL at a
kill point, or a lab management-plane fault on the canary), waits out the commit timer,
and requires: every switch entirely old or entirely new, nothing reported or audited as
applied unless it is, every change audited, the right exit code, and a clean re-run that
exits 0 with every switch new (agent/faultdrill.py). The matrix is printed at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LAB_UNAVAILABLE, Lab, running_lab

from agent.faultdrill import Drill, RowResult, default_rows, format_matrix, resolve_rows

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=str(LAB_UNAVAILABLE)),
]
CONFIRM_TIMEOUT_S = 5  # the shortest `apply --confirm-timeout` accepts: keeps the drill short
ROWS = default_rows()
RESULTS: list[RowResult] = []


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    name = f"fd{os.getpid()}"
    state_dir = tmp_path_factory.mktemp("fdlab") / name
    with running_lab(name, state_dir, "admin") as started:
        yield started


@pytest.fixture(scope="module")
def drill(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Drill]:
    audit_dir = tmp_path_factory.mktemp("fdaudit")
    runner = Drill(Path(lab.status["fabric_file"]), audit_dir, CONFIRM_TIMEOUT_S)
    runner.snapshot_old()
    resolve_rows(runner, ROWS)
    yield runner
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and RESULTS:
        with capture.global_and_fixture_disabled():  # past pytest's output capture
            reporter.write_line("")
            reporter.write_line("fault-drill matrix:")
            for line in format_matrix(RESULTS).splitlines():
                reporter.write_line(line)


@pytest.mark.parametrize("row", ROWS, ids=[r.slug for r in ROWS])
def test_drill_row(drill: Drill, row: object) -> None:
    from agent.faultdrill import Row

    assert isinstance(row, Row)
    result = drill.run_row(row)
    RESULTS.append(result)
    assert result.passed, format_matrix([result])

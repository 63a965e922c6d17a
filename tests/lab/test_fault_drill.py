"""The fault-drill matrix (issue #11, item 3) on a lab, one test per row.

Each row resets every switch to the lab's factory QoS, breaks one rollout (SIGKILL at a
kill point, or a lab management-plane fault on the canary), waits out the commit timer,
and requires: every switch entirely old or entirely new, nothing reported or audited as
applied unless it is, every change audited, the right exit code, and a clean re-run that
exits 0 with every switch new (agent/ops/faultdrill.py). The matrix is printed at the end.

The rows spend much of their time waiting (netmiko's read timeout, commit timers), so they
run in six lanes of two rows, each on a lab of its own with its own audit log; the lanes share
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.device.fanout import results_or_raise, run_each
from agent.ops.faultdrill import Drill, Row, RowResult, default_rows, format_matrix, resolve_rows
from tests.lab.support.labs import Lab, LabFactory, requires_lab

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
CONFIRM_TIMEOUT_S = 5  # the shortest `apply --confirm-timeout` accepts: keeps the drill short
ROWS = default_rows()
LANES = 6
# Rows that wait on netmiko's 10 s read timeout or a commit timer go first, one per lane in
# turn, so the lanes end at about the same time.
SLOW_FIRST = ("slow switch", "ssh cut", "mgmt plane restart", "kill after-commit")


def _lanes(rows: list[Row]) -> list[list[Row]]:
    ordered = sorted(rows, key=lambda r: not r.name.startswith(SLOW_FIRST))
    return [ordered[lane::LANES] for lane in range(LANES)]


def _run_lane(drill: Drill, rows: list[Row]) -> dict[str, RowResult]:
    results = {}
    for row in rows:
        try:
            results[row.name] = drill.run_row(row)
        except Exception as exc:  # a drill that cannot run is this row's failure
            results[row.name] = RowResult(row.name, problems=[f"drill error: {exc}"])
    return results


def _drill(lab: Lab, audit_dir: Path) -> Drill:
    drill = Drill(Path(lab.status["fabric_file"]), audit_dir, CONFIRM_TIMEOUT_S)
    drill.snapshot_old()
    resolve_rows(drill, ROWS)
    return drill


@pytest.fixture(scope="module")
def matrix(
    module_labs: LabFactory,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[dict[str, RowResult]]:
    # The lanes are independent: their labs are brought up (and torn down) side by side, each
    # with its own audit log; the agent in this process reads the labs' password as they do.
    lanes = dict(zip("abcdef", _lanes(ROWS), strict=True))  # lane -> its rows
    labs = results_or_raise(
        run_each(
            {lane: lane for lane in lanes},
            lambda lane: module_labs.start("fd", suffix=lane, password="admin"),
        )
    )
    audit_dirs = {lane: tmp_path_factory.mktemp("fdaudit") for lane in lanes}
    drills = results_or_raise(
        run_each({lane: (labs[lane], audit_dirs[lane]) for lane in lanes}, lambda a: _drill(*a))
    )
    results: dict[str, RowResult] = {}
    for lane_results in results_or_raise(
        run_each({lane: (drills[lane], lanes[lane]) for lane in lanes}, lambda a: _run_lane(*a))
    ).values():
        results.update(lane_results)
    yield results
    _print_matrix(request, results)


def _print_matrix(request: pytest.FixtureRequest, results: dict[str, RowResult]) -> None:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # past pytest's output capture
            reporter.write_line("")
            reporter.write_line("fault-drill matrix:")
            ordered = [results[r.name] for r in ROWS if r.name in results]
            for line in format_matrix(ordered).splitlines():
                reporter.write_line(line)


def test_every_row_runs_in_exactly_one_lane() -> None:
    lanes = _lanes(ROWS)
    assert sorted(r.name for lane in lanes for r in lane) == sorted(r.name for r in ROWS)
    assert all(lanes)


@pytest.mark.timeout(900)  # the first row's setup runs the whole matrix
@pytest.mark.parametrize("row", ROWS, ids=[r.slug for r in ROWS])
def test_drill_row(matrix: dict[str, RowResult], row: Row) -> None:
    result = matrix[row.name]
    assert result.passed, format_matrix([result])

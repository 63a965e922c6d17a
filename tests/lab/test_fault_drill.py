"""The fault-drill matrix (issue #11, item 3) on a lab, one test per row.

Each row resets every switch to the lab's factory QoS, breaks one rollout (SIGKILL at a
kill point, or a lab management-plane fault on the canary), waits out the commit timer,
and requires: every switch entirely old or entirely new, nothing reported or audited as
applied unless it is, every change audited, the right exit code, and a clean re-run that
exits 0 with every switch new (agent/ops/faultdrill.py). The matrix is printed at the end.

The rows spend much of their time waiting (netmiko's read timeout, commit timers), so they
run in six lanes of two rows, each on a lab of its own with its own audit log; the lanes share
nothing (measured on 2 cores: 3 lanes 95 s, 4 lanes 80 s, 6 lanes 71 s for the module).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import LAB_UNAVAILABLE, Lab, start_lab, stop_lab

from agent.ops.faultdrill import Drill, Row, RowResult, default_rows, format_matrix, resolve_rows

pytestmark = [
    pytest.mark.lab,
    pytest.mark.lab_parallel,
    pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=str(LAB_UNAVAILABLE)),
]
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


def _start_lab(base: Path, lane: int) -> Lab:
    name = f"fd{os.getpid()}{'abcdef'[lane]}"
    return start_lab(name, base / name)


def _drill(lab: Lab, audit_dir: Path) -> Drill:
    drill = Drill(Path(lab.status["fabric_file"]), audit_dir, CONFIRM_TIMEOUT_S)
    drill.snapshot_old()
    resolve_rows(drill, ROWS)
    return drill


@pytest.fixture(scope="module")
def matrix(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, RowResult]]:
    previous = os.environ.get("ROCE_LAB_PASSWORD")
    os.environ["ROCE_LAB_PASSWORD"] = "admin"  # the labs take it at `up`; the agent reads it
    labs: list[Lab] = []
    try:
        # The labs are independent: brought up (and torn down) side by side, not in turn.
        with ThreadPoolExecutor(max_workers=LANES) as pool:
            starting = [
                pool.submit(_start_lab, tmp_path_factory.mktemp("fdlab"), lane)
                for lane in range(LANES)
            ]
            errors = []
            for future in starting:  # every lab that came up is torn down, even if one failed
                try:
                    labs.append(future.result())
                except BaseException as exc:
                    errors.append(exc)
            if errors:
                raise errors[0]
            audit_dirs = [tmp_path_factory.mktemp("fdaudit") for _ in labs]
            drills = list(pool.map(_drill, labs, audit_dirs))
            results: dict[str, RowResult] = {}
            for lane_results in pool.map(_run_lane, drills, _lanes(ROWS)):
                results.update(lane_results)
        yield results
    finally:
        with ThreadPoolExecutor(max_workers=LANES) as pool:
            stopped = [pool.submit(stop_lab, lab.name, lab.state_dir) for lab in labs]
        if previous is None:
            os.environ.pop("ROCE_LAB_PASSWORD", None)
        else:
            os.environ["ROCE_LAB_PASSWORD"] = previous
        for future in stopped:
            future.result()  # a lab that did not go away fails the run
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


@pytest.mark.timeout(900)  # the first row's setup runs the whole matrix (≈ 70 s)
@pytest.mark.parametrize("row", ROWS, ids=[r.slug for r in ROWS])
def test_drill_row(matrix: dict[str, RowResult], row: Row) -> None:
    result = matrix[row.name]
    assert result.passed, format_matrix([result])

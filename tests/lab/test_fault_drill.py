"""The fault-drill matrix (issue #11, item 3; per platform, issue #32 item 3) on labs.

Each row resets every switch to the lab's factory QoS, breaks one rollout (SIGKILL at a
kill point, or a lab management-plane fault on the canary), waits out the commit timer,
and requires: every switch entirely old or entirely new, nothing reported or audited as
applied unless it is, every change audited, the right exit code, and a clean re-run that
exits 0 with every switch new (agent/ops/faultdrill.py). The matrix is printed at the end,
a row per (platform, fault).

Each platform runs every row on the leaf-spine lab with every switch speaking its NOS (``lab
up --nos``); the SSH faults fire on that platform's own commit and confirm lines
(``faultdrill.CHANGE_LINES``). The platforms run one after another (six labs at a time).

The rows spend much of their time waiting (netmiko's read timeout, commit timers), so they
run in lanes of two or three rows, each on a lab of its own with its own audit log; the lanes
share nothing.

``ROCE_DRILL=rotated`` (what `make test` runs) drills each row once, the platforms in turn
(row *i* on platform *i* mod 4): every row and every platform in a fraction of the time, two
platforms' labs at a time. Without it (`make drill`), every row runs on every platform.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.device.fanout import results_or_raise, run_each
from agent.ops.faultdrill import Drill, Row, RowResult, default_rows, format_matrix, resolve_rows
from tests.lab.support.labs import Lab, LabFactory, requires_lab

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
CONFIRM_TIMEOUT_S = 5  # the shortest `apply --confirm-timeout` accepts: keeps the drill short
# platform -> its switches' NOS (lab up --nos)
PLATFORMS = {"arista_eos": "eos", "sonic": "sonic", "cumulus_nvue": "nvue", "cisco_nxos": "nxos"}
LABS_AT_ONCE = 6
# Rows that wait on netmiko's 10 s read timeout or a commit timer go first, one per lane in
# turn, so the lanes end at about the same time.
SLOW_FIRST = ("slow switch", "ssh cut", "mgmt plane restart", "kill after-commit")


ROTATED = os.environ.get("ROCE_DRILL", "full") == "rotated"


def _cases(rows: dict[str, list[Row]], rotated: bool) -> list[tuple[str, Row]]:
    """Every (platform, row), or each row once on the platforms in turn."""
    if not rotated:
        return [(platform, row) for platform, found in rows.items() for row in found]
    platforms = list(rows)
    first = rows[platforms[0]]
    return [
        (platforms[i % len(platforms)], rows[platforms[i % len(platforms)]][i])
        for i in range(len(first))
    ]


ROWS_OF = {platform: default_rows(platform=platform) for platform in PLATFORMS}
CASES = _cases(ROWS_OF, ROTATED)
ROWS = {p: [row for platform, row in CASES if platform == p] for p in PLATFORMS}
# Platforms drilled side by side: one for the whole matrix, two when each has only a few rows;
# either way six labs at once, what the 2-core machine carries.
SIDE_BY_SIDE = 2 if ROTATED else 1
LANES = LABS_AT_ONCE // SIDE_BY_SIDE  # per platform, at most
# The platforms side by side end with their longest lane: every lane may hold as many rows as
# the longest one must, and a platform starts only the labs that takes (the rotated drill: two
# lanes of two rows each, eight labs in all instead of twelve, the longest lane as long).
ROWS_PER_LANE = -(-max(len(rows) for rows in ROWS.values()) // LANES)


def _lanes(rows: list[Row], lanes: int) -> list[list[Row]]:
    ordered = sorted(rows, key=lambda r: not r.name.startswith(SLOW_FIRST))
    # a lab per lane: none without a row, none the longest lane does not need
    lanes = min(lanes, -(-len(ordered) // ROWS_PER_LANE))
    return [ordered[lane::lanes] for lane in range(lanes)]


def _run_lane(drill: Drill, rows: list[Row]) -> dict[str, RowResult]:
    results = {}
    for row in rows:
        try:
            results[row.name] = drill.run_row(row)
        except Exception as exc:  # a drill that cannot run is this row's failure
            results[row.name] = RowResult(
                row.name, drill.platform, problems=[f"drill error: {exc}"]
            )
    return results


def _start(labs: LabFactory, lane: str, nos: str) -> Lab:
    return labs.start("fd", suffix=lane, password="admin", nos=nos)


def _drill(lab: Lab, audit_dir: Path, rows: list[Row]) -> Drill:
    drill = Drill(Path(lab.status["fabric_file"]), audit_dir, CONFIRM_TIMEOUT_S)
    drill.snapshot_old()
    resolve_rows(drill, rows)
    return drill


@pytest.fixture(scope="module")
def matrix(
    module_labs: LabFactory,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[dict[tuple[str, str], RowResult]]:
    results: dict[tuple[str, str], RowResult] = {}
    # One platform after another (each one's lanes side by side): four platforms' labs at
    # once would starve the 2-core machine's switches of CPU. Only the platforms of the
    # selected rows (`-k sonic`) bring labs up.
    chosen = _selected_platforms(request)
    for start in range(0, len(chosen), SIDE_BY_SIDE):
        together = chosen[start : start + SIDE_BY_SIDE]
        for found in results_or_raise(
            run_each(
                {p: p for p in together},
                lambda p: _run_platform(module_labs, tmp_path_factory, p),
            )
        ).values():
            results.update(found)
    yield results
    _print_matrix(request, results)


def _selected_platforms(request: pytest.FixtureRequest) -> list[str]:
    chosen = {
        item.callspec.params["platform"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and hasattr(item, "callspec")
        and "platform" in item.callspec.params
    }
    return [p for p in PLATFORMS if p in chosen]


def _run_platform(
    module_labs: LabFactory, tmp_path_factory: pytest.TempPathFactory, platform: str
) -> dict[tuple[str, str], RowResult]:
    """Every row of ``platform`` in its lanes; a lab that does not come up fails its rows."""
    nos = PLATFORMS[platform]
    lanes = {f"{nos[:2]}{n}": r for n, r in enumerate(_lanes(ROWS[platform], LANES))}
    outcome: dict[str, RowResult] = {}
    started = run_each({lane: (lane, nos) for lane in lanes}, lambda a: _start(module_labs, *a))
    try:
        labs = results_or_raise(started)
        audit_dirs = {lane: tmp_path_factory.mktemp("fdaudit") for lane in lanes}
        drills = results_or_raise(
            run_each(
                {lane: (labs[lane], audit_dirs[lane], lanes[lane]) for lane in lanes},
                lambda a: _drill(*a),
            )
        )
        for found in results_or_raise(
            run_each({lane: (drills[lane], lanes[lane]) for lane in lanes}, lambda a: _run_lane(*a))
        ).values():
            outcome.update(found)
    except Exception as exc:  # the platform's labs or drills could not start: its rows fail
        for row in ROWS[platform]:
            outcome.setdefault(row.name, RowResult(row.name, platform, problems=[f"{exc}"]))
    finally:
        for lab in started.values():
            if isinstance(lab, Lab):
                module_labs.stop(lab)
    return {(platform, name): result for name, result in outcome.items()}


def _print_matrix(
    request: pytest.FixtureRequest, results: dict[tuple[str, str], RowResult]
) -> None:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # past pytest's output capture
            reporter.write_line("")
            reporter.write_line("fault-drill matrix:")
            ordered = [results[(p, r.name)] for p, r in CASES if (p, r.name) in results]
            for line in format_matrix(ordered).splitlines():
                reporter.write_line(line)


def test_every_row_runs_in_exactly_one_lane() -> None:
    for rows in ROWS.values():
        lanes = _lanes(rows, LANES)
        assert sorted(r.name for lane in lanes for r in lane) == sorted(r.name for r in rows)
        assert all(lanes) and len(lanes) <= LANES
        assert max(map(len, lanes)) <= ROWS_PER_LANE


@pytest.mark.parametrize("rotated", [False, True])
def test_every_row_and_every_platform_is_drilled(rotated: bool) -> None:
    """The full matrix has every pair; the rotated one every row once, every platform."""
    cases = _cases(ROWS_OF, rotated)
    names = [row.name for row in next(iter(ROWS_OF.values()))]
    assert sorted({row.name for _, row in cases}) == sorted(names)
    assert {platform for platform, _ in cases} == set(PLATFORMS)
    assert len(cases) == len(names) * (1 if rotated else len(PLATFORMS))


@pytest.mark.timeout(1800)  # the first row's setup runs the whole matrix
@pytest.mark.parametrize(("platform", "row"), CASES, ids=[f"{p}-{r.slug}" for p, r in CASES])
def test_drill_row(matrix: dict[tuple[str, str], RowResult], platform: str, row: Row) -> None:
    result = matrix[(platform, row.name)]
    assert result.passed, format_matrix([result])

"""The one fan-out helper (agent.device.fanout): sizing, order, failures, streaming."""

from __future__ import annotations

import threading
import time

import pytest

from agent.device.fanout import DEFAULT_PARALLELISM, results_or_raise, run_each, workers_for


@pytest.mark.parametrize(
    ("count", "parallelism", "expected"),
    [
        (0, 8, 1),
        (1, 8, 1),
        (5, 8, 5),
        (50, 8, 8),
        (50, None, 50),
        (3, 0, 1),
        (100, DEFAULT_PARALLELISM, 32),
    ],
)
def test_workers_for(count: int, parallelism: int | None, expected: int) -> None:
    assert workers_for(count, parallelism) == expected


def test_results_in_item_order_with_each_failure_in_place() -> None:
    def work(value: int) -> int:
        if value == 2:
            raise ValueError("two")
        time.sleep(0.01 * (5 - value))  # later items finish first
        return value * 10

    outcomes = run_each({f"d{i}": i for i in range(5)}, work, parallelism=5)
    assert list(outcomes) == ["d0", "d1", "d2", "d3", "d4"]
    assert outcomes["d0"] == 0 and outcomes["d4"] == 40
    assert isinstance(outcomes["d2"], ValueError)
    with pytest.raises(ValueError, match="two"):
        results_or_raise(outcomes)
    assert results_or_raise({"a": 1, "b": 2}) == {"a": 1, "b": 2}


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_never_more_at_once_than_parallelism(parallelism: int) -> None:
    lock = threading.Lock()
    now = peak = 0

    def work(_: int) -> None:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        time.sleep(0.02)
        with lock:
            now -= 1

    run_each({str(i): i for i in range(8)}, work, parallelism=parallelism)
    assert peak == parallelism


def test_on_result_streams_while_the_rest_still_run() -> None:
    release = threading.Event()
    seen: list[tuple[str, object, bool]] = []

    def work(value: int) -> int:
        if value:
            release.wait(5)
        return value

    def record(name: str, outcome: object) -> None:
        seen.append((name, outcome, release.is_set()))
        release.set()  # only the first result lets the others finish

    assert run_each({"first": 0, "second": 1, "third": 2}, work, 3, record) == {
        "first": 0,
        "second": 1,
        "third": 2,
    }
    assert seen[0] == ("first", 0, False)
    assert [name for name, _, _ in seen] == ["first", "second", "third"]


def test_no_items_no_threads() -> None:
    assert run_each({}, lambda item: item) == {}

"""One way to do the same thing on many devices or hosts at once (Nornir's threaded runner).

Every place that talks to several switches or hosts side by side goes through
:func:`run_each`, so the sizing rule lives here alone: at most ``parallelism`` threads (the
operator's session budget, ``--parallelism`` / ``apply: {parallelism}``), never more threads
than items, never fewer than one. The work is I/O bound (an SSH session or a probe process per
item waits on the far end), so threads, not processes.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Sessions at once when nothing says otherwise: what a netmiko/Nornir pool of 32 workers holds.
DEFAULT_PARALLELISM = 32


class Watcher(Protocol):
    """Told what every :func:`run_each` does while it is installed (called from the workers'
    threads: an implementation locks what it shares)."""

    def expect(self, names: Sequence[str]) -> None:
        """A fan-out over ``names`` begins."""

    def started(self, name: str) -> None:
        """Work on ``name`` began."""

    def finished(self, name: str) -> None:
        """Work on ``name`` ended (returned or raised)."""


_watchers: list[Watcher] = []
_watchers_lock = threading.Lock()


@contextlib.contextmanager
def watching(watcher: Watcher) -> Iterator[Watcher]:
    """Report every fan-out of the block to ``watcher`` (nested: the innermost one)."""
    with _watchers_lock:
        _watchers.append(watcher)
    try:
        yield watcher
    finally:
        with _watchers_lock:
            _watchers.remove(watcher)


def _watcher() -> Watcher | None:
    with _watchers_lock:
        return _watchers[-1] if _watchers else None


def _watched(name: str, work: Callable[[], Result], watcher: Watcher) -> Result:
    watcher.started(name)
    try:
        return work()
    finally:
        watcher.finished(name)


def workers_for(count: int, parallelism: int | None = DEFAULT_PARALLELISM) -> int:
    """Threads for ``count`` items: at most ``parallelism`` (``None``: one per item), at most
    one per item, at least one."""
    limit = count if parallelism is None else parallelism
    return max(1, min(limit, count))


def run_each(
    items: Mapping[str, Item],
    work: Callable[[Item], Result],
    parallelism: int | None = DEFAULT_PARALLELISM,
    on_result: Callable[[str, Result | Exception], None] | None = None,
) -> dict[str, Result | Exception]:
    """``work`` on every item, ``workers_for(len(items), parallelism)`` at a time.

    Returns name → what ``work`` returned, or the exception it raised (one item's failure
    never hides the others' results), in the order of ``items``. ``on_result`` sees each
    outcome in that order as soon as it and those before it are done, as ``Executor.map``
    yields them: a caller can record or act on the first result while the rest still run.
    """
    outcomes: dict[str, Result | Exception] = {}
    if not items:
        return outcomes
    watcher = _watcher()
    if watcher is not None:
        watcher.expect(list(items))
    with ThreadPoolExecutor(max_workers=workers_for(len(items), parallelism)) as pool:
        if watcher is None:
            futures = {name: pool.submit(work, item) for name, item in items.items()}
        else:
            futures = {
                name: pool.submit(_watched, name, functools.partial(work, item), watcher)
                for name, item in items.items()
            }
        for name, future in futures.items():
            try:
                outcome: Result | Exception = future.result()
            except Exception as exc:  # the item's failure is its result; see the docstring
                outcome = exc
            outcomes[name] = outcome
            if on_result is not None:
                on_result(name, outcome)
    return outcomes


def results_or_raise(outcomes: Mapping[str, Result | Exception]) -> dict[str, Result]:
    """The results of :func:`run_each`, or the first exception (in item order) raised, for
    callers where one failure fails them all."""
    for outcome in outcomes.values():
        if isinstance(outcome, Exception):
            raise outcome
    return {name: outcome for name, outcome in outcomes.items()}  # type: ignore[misc]

"""Running a batch of the twin's jobs on an existing Dask cluster (``tune --executor``).

:func:`agent.twin.tune.runners.dask_runner` makes a :class:`DaskMap` of ``run_job``; the search
cannot tell it from the local process pool: each batch comes back in job order, as each job is
done. Why Dask (``distributed``) and not Ray, and how to start a cluster: docs/tuning.md,
"Searching on a cluster".

What this module adds to ``Client.map``:

- a connection that fails within a timeout, naming the address, instead of retrying forever;
- the scheduler and every worker checked, at connection and before each batch, to run this
  process's roce-fabric-agent version: a worker imports its own ``agent`` (and the scheduler
  unpacks the jobs), and results are only the same as a local run's for the same code;
- a lost cluster (the scheduler gone, or no worker left for the timeout) as one
  :class:`ClusterError` naming the address, never a hang or a traceback.

A worker that dies while running a job is Dask's to handle: the scheduler reruns the job on
another worker, up to its ``distributed.scheduler.allowed-failures`` (3 by default) deaths per
job. :data:`TASK_RETRIES` is for a job that *raised* on a worker (a worker out of memory raises
MemoryError); a job that fails the same way every time fails after them, as it would locally.

``distributed`` is imported when a :class:`DaskMap` is made, never with this module:
``roce-agent`` starts without paying for it and runs without it (it is the ``cluster`` extra).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from contextlib import suppress
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from agent.errors import AgentError

if TYPE_CHECKING:
    from distributed import Client, Future

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_TIMEOUT_S = 10.0
# A job that raised runs this many more times before its error is the search's: enough for a
# worker that was out of memory for a moment, few enough that a job failing every time (as it
# would locally) costs three runs, not more.
TASK_RETRIES = 2
# How often a wait for a result asks the scheduler whether any worker is left: the scheduler
# keeps a job queued forever when none is, and the user would see a search that never ends.
POLL_S = 1.0


class ClusterError(AgentError):
    """The cluster cannot run the jobs: no scheduler at the address, no worker, a worker with
    another roce-fabric-agent, or the cluster lost during the search."""


def _version_probe() -> Callable[[], str]:
    """What a worker runs to say which roce-fabric-agent it imports.

    Nested, so that cloudpickle sends its code by value (a module-level function is sent by
    name and must be importable there): a worker without the package, or with a version
    that lacks this module, still runs it and answers -- the version, or the ImportError."""

    def agent_version() -> str:
        import agent

        return str(agent.__version__)

    return agent_version


def _quiet_logs() -> dict[str, int]:
    """Dask's and tornado's loggers (distributed configures each with a handler of its own)
    at CRITICAL; their levels before."""
    saved: dict[str, int] = {}
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name.split(".")[0] in ("distributed", "tornado"):
            saved[name] = logger.level
            logger.setLevel(logging.CRITICAL)
    return saved


class DaskMap(Generic[T, R]):
    """``function`` over batches of items on the Dask scheduler at ``address`` (``tcp://HOST:PORT``,
    as ``dask scheduler`` prints it): a runner (``list[T] -> Iterator[R]``, in order) that
    holds one client connection; close it (or use it as a context manager) when done."""

    def __init__(
        self,
        address: str,
        function: Callable[[T], R],
        *,
        expected_version: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        quiet: bool = True,
    ) -> None:
        self.address = address
        self.expected_version = expected_version
        self.timeout_s = timeout_s
        self._function = function
        self._client: Client | None = None
        self._log_levels: dict[str, int] = {}
        try:
            from distributed import Client
        except ImportError:
            raise ClusterError(
                "needs the Dask client, the `cluster` extra: pip install "
                "'roce-fabric-agent[cluster]' (the package distributed)"
            ) from None
        if quiet:
            # The client logs a lost connection as tracebacks on stderr; the ClusterError
            # says it in one line (and the command's --debug shows them).
            self._log_levels = _quiet_logs()
        try:
            self._client = self._connect(Client)
            self.workers = self.check_cluster()
        except BaseException:
            self.close()
            raise

    def _connect(self, client_class: type[Client]) -> Client:
        started = time.monotonic()
        try:
            client = client_class(self.address, timeout=self.timeout_s, set_as_default=False)
        except OSError:
            raise ClusterError(
                f"no Dask scheduler answered at {self.address} within {self.timeout_s:g} s: is "
                "`dask scheduler` running there, and its port reachable from this host?"
            ) from None
        left = max(self.timeout_s - (time.monotonic() - started), 0.1)
        try:
            client.wait_for_workers(1, timeout=left)
        except TimeoutError:
            client.close()
            raise ClusterError(
                f"the Dask scheduler at {self.address} has no worker (waited "
                f"{self.timeout_s:g} s); start them on the cluster's hosts: dask worker "
                f"{self.address}"
            ) from None
        return client

    @property
    def client(self) -> Client:
        if self._client is None:
            raise ClusterError(f"the connection to {self.address} is closed")
        return self._client

    def check_cluster(self) -> dict[str, str]:
        """Every worker's roce-fabric-agent version (by address), after the scheduler's: the
        scheduler unpacks the runs it is sent, so it imports ``agent`` too. ClusterError for
        the first that runs another version, or none."""
        probe = _version_probe()
        try:
            answer: str | BaseException = self.client.run_on_scheduler(probe)
        except (OSError, CancelledError):
            raise self._lost("checking the scheduler") from None
        except Exception as exc:  # the probe's own error, raised there: an ImportError
            answer = exc
        self._refuse(f"the scheduler at {self.address}", answer)
        try:
            answers = self.client.run(probe, on_error="return")
        except (OSError, CancelledError):
            raise self._lost("checking the workers") from None
        if not answers:
            raise ClusterError(f"the Dask scheduler at {self.address} has no worker left")
        for worker, answer in sorted(answers.items()):
            self._refuse(f"worker {worker}", answer)
        return {worker: str(answer) for worker, answer in answers.items()}

    def _refuse(self, who: str, answer: object) -> None:
        """ClusterError unless ``answer`` (what the probe gave on ``who``) is our version."""
        expected = self.expected_version
        install = f"pip install 'roce-fabric-agent=={expected}'"
        if isinstance(answer, BaseException):
            raise ClusterError(
                f"{who} cannot import roce-fabric-agent ({type(answer).__name__}: {answer}). "
                f"Expected: {expected} installed on the scheduler's and every worker's host: "
                f"{install}"
            )
        if answer != expected:
            raise ClusterError(
                f"{who} runs roce-fabric-agent {answer}, Expected: {expected} (the same version "
                f"as here on the scheduler's and every worker's host: {install})"
            )

    def __call__(self, items: list[T]) -> Iterator[R]:
        if not items:
            return
        self.workers = self.check_cluster()  # workers may have joined since the last batch
        try:
            # pure=False: every job runs (its key is not a hash of a fabric intent), and a
            # job of a later batch equal to an earlier one is not taken from the cache.
            futures = self.client.map(self._function, items, pure=False, retries=TASK_RETRIES)
        except (OSError, CancelledError):
            raise self._lost(f"sending {len(items)} runs") from None
        try:
            for index, future in enumerate(futures):
                yield self._result(future, index, len(items))
        finally:
            # A search that stops (an error, ^C) must not leave the cluster computing for it.
            pending = [f for f in futures if not f.done()]
            if pending:
                with suppress(Exception):
                    self.client.cancel(pending)

    def _result(self, future: Future[R], index: int, total: int) -> R:
        from distributed.scheduler import KilledWorker

        idle_since: float | None = None
        try:
            while True:
                try:
                    return future.result(timeout=POLL_S)
                except TimeoutError:
                    if future.done():  # the job's own TimeoutError, or done just now
                        return future.result()
                idle_since = self._watch_workers(idle_since, index, total)
        except KilledWorker as exc:
            raise ClusterError(
                f"run {index + 1} of a batch of {total} killed {exc.allowed_failures + 1} "
                f"workers of {self.address} in turn (the last {exc.last_worker.address}); Dask "
                "gave up on it (distributed.scheduler.allowed-failures): see that worker's log "
                "(out of memory?)"
            ) from None
        except (OSError, CancelledError) as exc:
            if future.status == "error":
                raise  # the job's own error, raised as a local run raises it
            reason = getattr(exc, "reason", None)
            raise self._lost(f"waiting for run {index + 1} of a batch of {total}", reason) from None

    def _watch_workers(self, idle_since: float | None, index: int, total: int) -> float | None:
        """While a result is awaited: None if the scheduler has a worker, else since when it
        has had none; ClusterError once that is longer than the timeout."""
        try:
            alive = self.client.nthreads()
        except (OSError, CancelledError):
            raise self._lost(f"waiting for run {index + 1} of a batch of {total}") from None
        if alive:
            return None
        now = time.monotonic()
        since = now if idle_since is None else idle_since
        if now - since > self.timeout_s:
            raise ClusterError(
                f"the Dask scheduler at {self.address} has had no worker for "
                f"{self.timeout_s:g} s, with run {index + 1} of a batch of {total} still to do: "
                "the cluster's workers are gone"
            )
        return since

    def _lost(self, doing: str, reason: str | None = None) -> ClusterError:
        why = f" ({reason})" if reason else ""
        return ClusterError(
            f"lost the Dask cluster at {self.address} while {doing}{why}; the search stopped"
        )

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with suppress(Exception):
                client.close()
        for name, level in self._log_levels.items():
            logging.getLogger(name).setLevel(level)
        self._log_levels = {}

    def __enter__(self) -> DaskMap[T, R]:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

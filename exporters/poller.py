"""Pollers and their scheduler: per-job interval, bounded concurrency, per-poll timeout.

The scheduler hands due jobs to a fixed set of worker threads. A poll that outlives its timeout
is declared failed (reason ``timeout``) at once, from the scheduler thread, and whatever it
returns later is discarded; a replacement worker is started so one hung device does not eat
into the others' concurrency. Python cannot kill a thread, and netmiko has no cancel, so the
hung call runs on in its (daemon) thread until netmiko gives up by itself.

Switches keep their SSH session between polls: a netmiko login is a CPU-heavy key exchange
that costs more than the counter read it precedes, real switches cap concurrent SSH
sessions and log every login to AAA, and the session is rebuilt after any failure (a late or
failed poll may have left it mid-output). A kept session that died while idle (the device's
idle timeout, a reboot) gets one fresh retry within the same poll.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from agent.device.failures import AUTH_FAILED, TIMED_OUT
from agent.device.platforms import platform_for
from agent.device.platforms.base import Connection, Platform, PlatformError
from agent.device.push import Unreachable, connect
from agent.device.state import Counters, PendingSession, QosState, UnreadFamily, diff
from agent.errors import AgentError, CredentialError
from agent.intent.model import Device
from agent.observe.hostnic import HostNicReader, NicCounters, NicReadError
from exporters.fasttext import device_block
from exporters.probe_deltas import ProbeResultError
from exporters.probe_files import Skipped, candidates, read_result
from exporters.store import Complement, ConfigRead, SnapshotStore

log = logging.getLogger("exporters")

Connector = Callable[[Device, Platform], Connection]


class Pollable(Protocol):
    """A job the scheduler runs: ``poll`` in a worker, then exactly one of the callbacks."""

    name: str
    interval_s: float
    timeout_s: float

    def poll(self) -> Any: ...

    def succeeded(self, result: Any, duration_s: float) -> None: ...

    def failed(self, reason: str, duration_s: float, error: BaseException | None) -> None: ...

    def abandoned(self) -> None:
        """A poll returned after its timeout (or after stop): drop whatever it touched."""


# A connect failure's kind (agent.device.failures) as the bounded reason label; unreachable,
# protocol errors and host-key refusals are all "connect".
_REASON_OF_KIND = {AUTH_FAILED: "auth", TIMED_OUT: "timeout"}


def classify(error: BaseException) -> str:
    """The bounded ``reason`` label of a failed poll."""
    from netmiko.exceptions import (
        NetmikoAuthenticationException,
        NetmikoTimeoutException,
        ReadTimeout,
    )

    if isinstance(error, NetmikoAuthenticationException | CredentialError):
        return "auth"
    if isinstance(error, Unreachable):  # its kind says how the connect failed
        return _REASON_OF_KIND.get(error.kind, "connect")
    if isinstance(error, NetmikoTimeoutException | ReadTimeout | socket.timeout | TimeoutError):
        return "timeout"
    if isinstance(error, PlatformError | ValidationError | ValueError | KeyError | TypeError):
        return "parse"
    if isinstance(error, OSError | EOFError | ConnectionError):
        return "connect"
    try:
        from paramiko.ssh_exception import SSHException  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - paramiko comes with netmiko
        return "other"
    return "connect" if isinstance(error, SSHException) else "other"


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


# --------------------------------------------------------------------------- switches


@dataclass(frozen=True)
class SwitchPoll:
    counters: Counters | None  # None: a configuration-only poll (counters come over gNMI)
    drift: int | None
    sessions: list[PendingSession] | None = None


@dataclass(frozen=True)
class SwitchRead:
    """What a :class:`SwitchPoller` reads from its switch and how: the desired state to
    count drift against (None: counters only), the NOS driver (None: the device's
    platform's) and the function that opens a session (tests pass fakes)."""

    desired: QosState | None = None
    platform: Platform | None = None
    connector: Connector = connect
    # False: the configuration only -- the counters come over gNMI, and a failed read here
    # does not mark the switch down (its telemetry says whether it is up).
    counters: bool = True
    # With counters False: the counter families the switch's stream lacks, read here over
    # SSH all the same (exporters.store.Complement).
    complement: frozenset[UnreadFamily] = frozenset()


class SwitchPoller:
    """Reads one switch's counters (and, with a desired state, its drift) over SSH."""

    def __init__(
        self,
        device: Device,
        store: SnapshotStore,
        interval_s: float,
        timeout_s: float,
        read: SwitchRead | None = None,
    ) -> None:
        read = read or SwitchRead()
        self.device = device
        self.name = device.name
        self.store = store
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.desired = read.desired
        self.connector = read.connector
        self.platform = read.platform or platform_for(device.platform)
        self.counters = read.counters
        self.complement = read.complement if not read.counters else frozenset()
        self._conn: Connection | None = None

    def _read(self, conn: Connection) -> SwitchPoll:
        drift = None
        actual = None
        sessions = None
        if self.desired is not None:
            # Pending sessions first: a drift of 0 means little while one can still roll back.
            sessions = self.platform.read_sessions(conn)
            actual = self.platform.read_state(conn)
            drift = len(diff(self.name, self.desired, actual, self.platform.managed))
        counters = None
        if self.counters:
            counters = self.platform.read_counters(conn, actual)
        elif self.complement:
            counters = self.platform.read_families(conn, self.complement, actual)
        return SwitchPoll(counters, drift, sessions)

    def poll(self) -> SwitchPoll:
        reused = self._conn is not None
        if self._conn is None:
            self._conn = self.connector(self.device, self.platform)
        try:
            return self._read(self._conn)
        except Exception as error:
            self.close()
            if not reused or isinstance(error, PlatformError | AgentError):
                raise
        self._conn = self.connector(self.device, self.platform)
        try:
            return self._read(self._conn)
        except Exception:
            self.close()
            raise

    def succeeded(self, result: SwitchPoll, duration_s: float) -> None:
        read = ConfigRead(result.drift, result.sessions)
        if not self.counters:
            self.store.update_config(self.name, read)
            if self.complement and result.counters is not None:
                self.store.set_complement(self.name, Complement(self.complement, result.counters))
                self._format()
            return
        assert result.counters is not None  # a counters poll always reads them
        self.store.update_counters(self.name, result.counters, duration_s, read)
        self._format()

    def failed(self, reason: str, duration_s: float, error: BaseException | None) -> None:
        detail = _one_line(error) if error is not None else f"no answer within {duration_s:.1f} s"
        if not self.counters:
            log.warning("configuration read of %s failed (%s): %s", self.name, reason, detail)
            if self.complement:
                why = f"its SSH read failed ({reason}): {detail}"
                self.store.set_complement(self.name, Complement(self.complement, None, why))
                self._format()
            return
        log.warning("poll of %s failed (%s): %s", self.name, reason, detail)
        self.store.record_poll_failure(self.name, reason, duration_s, detail)
        self._format()

    def _format(self) -> None:
        """Format the device's exposition lines now, in this worker, so a scrape only joins
        them (exporters.fasttext.device_block)."""
        snapshot = self.store.snapshot()
        view = snapshot.devices.get(self.name)
        if view is not None:
            device_block(snapshot.fabric, view)

    def abandoned(self) -> None:
        self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # the session is being thrown away anyway
                conn.close()


# --------------------------------------------------------------------------- host NIC


class NicPoller:
    """The host's RDMA NIC counters (sysfs + ethtool)."""

    name = "host-nic"

    def __init__(
        self, reader: HostNicReader, store: SnapshotStore, interval_s: float, timeout_s: float
    ) -> None:
        self.reader = reader
        self.store = store
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        store.enable_nic()

    def poll(self) -> NicCounters:
        return self.reader.read()

    def succeeded(self, result: NicCounters, duration_s: float) -> None:
        self.store.update_nic(result)

    def failed(self, reason: str, duration_s: float, error: BaseException | None) -> None:
        source = error.source if isinstance(error, NicReadError) else "sysfs"
        log.warning("host NIC read failed (%s): %s", source, error or reason)
        self.store.record_nic_failure(source)

    def abandoned(self) -> None:
        pass


# --------------------------------------------------------------------------- probe results


class ProbeResultsPoller:
    """Ingests new ``*.json`` probe results from a directory (``probe ... --output json``).

    A file is read again only when its size or mtime changes, so results are counted once;
    a half-written file that does not parse is retried once it changes. Write results to a
    temporary name and rename them into the directory to avoid even that. Files are read
    within bounds (:mod:`exporters.probe_files`): a symlink, a FIFO or device, a file over
    the size cap or too slow to read, or one that is not a result is skipped with one log
    line and counted, and never read again until it changes.
    """

    name = "probe-results"

    def __init__(self, directory: Path, store: SnapshotStore, interval_s: float) -> None:
        self.directory = directory
        self.store = store
        self.interval_s = interval_s
        self.timeout_s = max(10.0, interval_s)
        self._seen: dict[Path, tuple[int, int]] = {}
        store.enable_probe_files()

    def poll(self) -> list[tuple[Path, Any]]:
        fresh = []
        for path, stamp in candidates(self.directory):
            if self._seen.get(path) == stamp:
                continue
            self._seen[path] = stamp
            try:
                fresh.append((path, read_result(path)))
            except Skipped as skipped:
                self._skip(path, skipped)
        return fresh

    def _skip(self, path: Path, skipped: Skipped) -> None:
        log.warning("probe result %s skipped (%s): %s", path, skipped.reason, skipped.detail)
        self.store.record_probe_file_skipped(skipped.reason)

    def succeeded(self, result: list[tuple[Path, Any]], duration_s: float) -> None:
        for path, data in result:
            try:
                self.store.update_probe(data)
            except (ProbeResultError, AgentError) as exc:
                self._skip(path, Skipped("not_a_result", str(exc)[:300]))

    def failed(self, reason: str, duration_s: float, error: BaseException | None) -> None:
        log.warning("reading probe results from %s failed: %s", self.directory, error or reason)

    def abandoned(self) -> None:
        pass


# --------------------------------------------------------------------------- scheduler


@dataclass
class _JobState:
    job: Pollable
    next_due: float
    queued: bool = False
    running: bool = False
    started: float = 0.0
    deadline: float = float("inf")
    timed_out: bool = False


@dataclass
class PollScheduler:
    """Runs every job at its interval on at most ``concurrency`` workers (plus replacements
    for workers stuck in a timed-out poll, at most ``concurrency`` more)."""

    jobs: Sequence[Pollable]
    concurrency: int = 16
    clock: Callable[[], float] = time.monotonic
    _states: list[_JobState] = field(default_factory=list)
    _queue: deque[_JobState] = field(default_factory=deque)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stopping: bool = False
    _workers: int = 0
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        now = self.clock()
        self._states = [_JobState(job, now) for job in self.jobs]
        with self._cond:
            for _ in range(min(self.concurrency, max(1, len(self.jobs)))):
                self._spawn_worker()
        thread = threading.Thread(target=self._schedule, name="roce-poll-scheduler", daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self, join_s: float = 2.0) -> None:
        """Stop scheduling; idle jobs are closed now, busy ones when their poll returns."""
        with self._cond:
            self._stopping = True
            idle = [s.job for s in self._states if not s.running]
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=join_s / max(1, len(self._threads)))
        for job in idle:
            job.abandoned()

    def _spawn_worker(self) -> None:
        """Start one worker; callers hold the condition."""
        self._workers += 1
        thread = threading.Thread(
            target=self._work, name=f"roce-poll-worker-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _schedule(self) -> None:
        while True:
            expired: list[tuple[_JobState, float]] = []
            with self._cond:
                if self._stopping:
                    return
                now = self.clock()
                wake = min(
                    [now + 1.0, *(self._visit(state, now, expired) for state in self._states)]
                )
                if not expired:
                    self._cond.wait(timeout=max(0.0, wake - now))
            for state, duration in expired:
                state.job.failed("timeout", duration, None)

    def _visit(self, state: _JobState, now: float, expired: list[tuple[_JobState, float]]) -> float:
        """One job at ``now`` (the caller holds the condition): a poll past its deadline
        times out (into ``expired``), a due job is queued. Returns when the job needs looking
        at again (its deadline or its next poll; never while it waits in the queue)."""
        if state.running and not state.timed_out and now >= state.deadline:
            state.timed_out = True
            expired.append((state, now - state.started))
            if self._workers < 2 * self.concurrency:
                self._spawn_worker()  # the stuck one retires when it returns
        if not state.queued and not state.running and now >= state.next_due:
            state.queued = True
            state.next_due = max(state.next_due + state.job.interval_s, now)
            self._queue.append(state)
            self._cond.notify_all()
        if state.running and not state.timed_out:
            return state.deadline
        if not state.queued and not state.running:
            return state.next_due
        return math.inf

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    self._workers -= 1
                    return
                state = self._queue.popleft()
                state.queued = False
                state.running = True
                state.timed_out = False
                state.started = self.clock()
                state.deadline = state.started + state.job.timeout_s
                self._cond.notify_all()  # the scheduler must now watch this deadline
            error: BaseException | None = None
            result: Any = None
            try:
                result = state.job.poll()
            except Exception as exc:
                error = exc
            finished = self.clock()
            with self._cond:
                state.running = False
                late = state.timed_out or self._stopping
                retire = late and self._workers > self.concurrency
                if retire:
                    self._workers -= 1
                self._cond.notify_all()
            duration = finished - state.started
            if late:
                state.job.abandoned()
                if retire:
                    return
                continue
            try:
                if error is not None:
                    state.job.failed(classify(error), duration, error)
                else:
                    state.job.succeeded(result, duration)
            except Exception:  # a store refusal must not kill the worker
                log.exception("recording the poll of %s failed", state.job.name)

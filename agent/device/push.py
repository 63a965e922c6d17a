"""Reading, diffing and safely changing devices: the push path behind diff, apply and drift.

Per device: connect (retries with backoff on connect errors only — never after a line was
sent), read the state, diff it against the plan, and when asked to apply: render only the
changes, open the platform's transaction (the device rolls back by itself unless confirmed),
read back, confirm only if the readback equals the plan, otherwise roll back. Devices go
canary first, then in batches; a device that fails stops later batches.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pwd
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.device import hostkeys
from agent.device.failures import NOT_CONNECTED, Unreachable, failure_of, one_line
from agent.device.fanout import DEFAULT_PARALLELISM, results_or_raise, run_each
from agent.device.platforms import platform_for
from agent.device.platforms.base import KILL_POINTS, Connection, Platform, PlatformError, kill_point
from agent.device.ssh import connect
from agent.device.state import Difference, PendingSession, QosState, diff
from agent.errors import AgentError, CredentialError
from agent.intent.model import Device, FabricIntent
from agent.intent.plan import Plan, build_plan

# Fault drills import the kill points from here; connect and Unreachable are the push path's
# (agent.device.ssh, agent.device.failures) and many readers import them from here.
__all__ = ["KILL_POINTS", "Unreachable", "connect", "kill_point"]

log = logging.getLogger("roce_agent")
DEFAULT_STATE_DIR = Path("/var/lib/roce-agent")


class VerifyFailed(PlatformError):
    """After the change the device does not read back as planned."""


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where audit logs and reports live: flag, then $ROCE_AGENT_STATE_DIR, then the default."""
    chosen = override or os.environ.get("ROCE_AGENT_STATE_DIR") or DEFAULT_STATE_DIR
    return Path(chosen)


def operator() -> dict[str, Any]:
    """Who runs the agent: the real uid (what the kernel vouches for), and beside it the
    ``$SUDO_USER`` the environment claims (anyone can set it, so it is only a claim)."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (containers)
        name = str(uid)
    who: dict[str, Any] = {"uid": uid, "user": name}
    claimed = os.environ.get("SUDO_USER")
    if claimed:
        who["claimed_sudo_user"] = claimed
    return who


class StateDirError(AgentError):
    """The state directory cannot hold the write-ahead audit: nothing may be touched."""

    exit_code = 2


class AuditLog:
    """Append-only JSONL write-ahead audit. Holds diffs and results, never a secret.

    Each change is an *attempt* with one ``intent`` record (written and fsync'ed before any
    session opens) and one ``result`` record (after); a later run that finds an intent with
    no result reconciles it from the device and adds a ``reconciled`` record. Writers take an
    exclusive ``flock`` so parallel workers and concurrent runs never interleave lines.
    """

    FILE = "audit.jsonl"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / self.FILE
        # Records already parsed, and where the parse stopped: the log only grows, so a
        # rollout that asks once per switch reads each record once, not the whole log per
        # switch (which would make a rollout quadratic in the log's length).
        self._parsed: list[dict[str, Any]] = []
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        self._read_lock = threading.Lock()

    def check(self) -> None:
        """The directory exists or can be created, and the log is writable and lockable."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StateDirError(
                f"state dir {self.directory}: cannot keep the audit log there "
                f"({exc.strerror or exc}). Expected: a writable, lockable directory "
                "(--state-dir or $ROCE_AGENT_STATE_DIR). Nothing was contacted."
            ) from None

    def write(self, **record: Any) -> None:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "operator": operator(),
            **record,
        }
        data = (json.dumps(entry, sort_keys=True) + "\n").encode()
        created = not self.path.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        if created:  # the new file's directory entry must survive a crash too
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def records(self) -> list[dict[str, Any]]:
        """Every record, oldest first (a torn line from a crash is skipped).

        Reads only what was appended since the last call; a file that was replaced or
        truncated (another inode, or shorter than what was read) is read again from the start.
        A last line without its newline is left for the next call: its writer may still be
        appending it.
        """
        with self._read_lock:
            try:
                handle = self.path.open("rb")
            except FileNotFoundError:
                self._parsed, self._offset, self._identity = [], 0, None
                return []
            with handle:
                fcntl.flock(handle, fcntl.LOCK_SH)
                stat = os.fstat(handle.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if identity != self._identity or stat.st_size < self._offset:
                    self._parsed, self._offset, self._identity = [], 0, identity
                handle.seek(self._offset)
                data = handle.read()
            complete = data.rfind(b"\n") + 1
            for line in data[:complete].splitlines():
                try:
                    entry = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(entry, dict):
                    self._parsed.append(entry)
            self._offset += complete
            return list(self._parsed)

    def attempts(self) -> list[dict[str, Any]]:
        """One entry per attempt: its intent, its result (or None) and reconciliations."""
        by_id: dict[str, dict[str, Any]] = {}
        for entry in self.records():
            attempt = entry.get("attempt")
            kind = entry.get("record")
            if not isinstance(attempt, str):
                continue
            slot = by_id.setdefault(
                attempt, {"attempt": attempt, "intent": None, "result": None, "reconciled": []}
            )
            if kind == "intent":
                slot["intent"] = entry
            elif kind == "result":
                slot["result"] = entry
            elif kind == "reconciled":
                slot["reconciled"].append(entry)
        return [a for a in by_id.values() if a["intent"] is not None]

    def incomplete(
        self, fabric: str | None = None, device: str | None = None
    ) -> list[dict[str, Any]]:
        """Attempts with an intent and neither a result nor a reconciliation."""
        found = []
        for attempt in self.attempts():
            intent = attempt["intent"]
            if attempt["result"] is not None or attempt["reconciled"]:
                continue
            if fabric is not None and intent.get("fabric") != fabric:
                continue
            if device is not None and intent.get("device") != device:
                continue
            found.append(attempt)
        return found


@dataclass
class DeviceResult:
    device: str
    platform: str
    # no-change | changes | applied | failed | skipped | pending | unknown, or the kind of
    # connect failure (agent.device.failures.NOT_CONNECTED: unreachable, timed out, host key
    # changed, authentication failed, …) when nothing was read. pending: a session that can
    # still change the device blocks the read; unknown: the device's outcome could not be
    # established, it may hold the new state; failed: a command or the change failed.
    result: str
    differences: list[Difference] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    session: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    before: QosState | None = None  # the state found before the change (for restores)
    pending: list[PendingSession] = field(default_factory=list)  # found (and left) on read
    notes: list[str] = field(default_factory=list)  # sessions cleaned up, outcomes verified
    attempt: str | None = None  # write-ahead audit attempt id

    @property
    def read(self) -> bool:
        """Whether the device's configuration was read (its differences are real); a device
        not reached, skipped or blocked has no count of differences, not zero."""
        return self.before is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "platform": self.platform,
            "result": self.result,
            "read": self.read,
            "changes": len(self.differences) if self.read else None,
            "differences": [d.as_dict() for d in self.differences] if self.read else None,
            "lines": self.lines,
            "session": self.session,
            "error": self.error,
            "duration_s": round(self.duration_s, 3),
            "pending": [p.as_dict() for p in self.pending],
            "notes": self.notes,
            "attempt": self.attempt,
        }


def check_credentials(devices: Iterable[Device]) -> None:
    """Every secret must be readable before the first connection (nothing half-done)."""
    for device in devices:
        if device.credentials is None:
            raise CredentialError(f"device {device.name}: no credentials")
        device.credentials.resolve_password(device.name)
        device.credentials.check_key(device.name)


def close_quietly(conn: Connection) -> None:
    """Disconnect; a session that already died must not hide the result."""
    try:
        conn.close()
    except Exception as exc:  # any transport error here is moot
        log.debug("closing %s: %s", conn.device, exc)


def _one_line(device: str, exc: BaseException) -> str:
    """A failure as one line: a readback that differs as it is, anything else classified
    (``command failed: …``, agent.device.failures) and folded."""
    if isinstance(exc, VerifyFailed):
        return one_line(str(exc), limit=4000)
    return str(failure_of(device, exc))


PENDING_POLICIES = ("wait", "abort", "confirm-own")
# A canary with any of these stops the rollout; outside the canary an unreachable device is
# reported and the others proceed (nothing was changed there), the rest stop later batches.
STOPPING = ("failed", *NOT_CONNECTED, "pending", "unknown")
STOPPING_BATCH = ("failed", "pending", "unknown")
PENDING_POLL_S = 2.0
LEAK_MIN_AGE_S = 60.0  # an unknown run's uncommitted session younger than this may be in use


@dataclass
class _Change:
    """One :meth:`Pusher.apply_one` run: the open session and what its steps hand on."""

    device: Device
    platform: Platform
    conn: Connection
    result: DeviceResult
    desired: QosState | None = None  # read once the session is open
    committed: bool = False  # the transaction committed (confirm still outstanding)


@dataclass
class Pusher:
    """The push path over one fabric."""

    intent: FabricIntent
    plan: Plan
    audit: AuditLog | None = None
    confirm_timeout_s: int = 300
    include_hosts: bool = False
    hold_before_confirm_s: float = 0.0  # rollback drills: keep the change unconfirmed longer
    pending_policy: str = "wait"  # what apply does about a live pending session (docs/push.md)
    pending_timeout_s: float = 360.0  # how long ``wait`` waits before failing the device

    @classmethod
    def for_intent(
        cls, intent: FabricIntent, audit_dir: Path | None = None, **options: Any
    ) -> Pusher:
        audit = AuditLog(audit_dir) if audit_dir else None
        if audit is not None:
            audit.check()  # before any device is contacted
        if audit_dir is not None:  # trust-on-first-use records keys in the same state dir
            hostkeys.configure(state_dir=audit_dir)
        if options.get("pending_policy", "wait") not in PENDING_POLICIES:
            raise AgentError(
                f"--pending: Expected: one of {', '.join(PENDING_POLICIES)}. "
                f"Actual: {options['pending_policy']!r}"
            )
        return cls(intent, build_plan(intent), audit, **options)

    def select(self, names: Sequence[str]) -> list[Device]:
        """The devices to act on (all switches by default); unknown names are an error."""
        known = {d.name: d for d in self.intent.devices}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise AgentError(
                f"--device: no device named {', '.join(map(repr, unknown))} in fabric "
                f"{self.intent.name}"
            )
        chosen = [known[n] for n in names] if names else list(self.intent.devices)
        if not self.include_hosts:
            chosen = [d for d in chosen if d.role != "host"]
        for device in chosen:
            platform_for(device.platform)  # unsupported platforms fail before any connection
        check_credentials(chosen)
        return chosen

    def _desired(self, device: Device, platform: Platform) -> QosState:
        device_plan = self.plan.device(device.name)
        assert device_plan is not None
        return platform.desired(device_plan)

    def inspect(self, device: Device) -> DeviceResult:
        """Read and diff one device (no change, no session): a dry run of :meth:`apply_one`.

        Pending sessions are reported, never acted on."""
        return self.apply_one(device, dry_run=True)

    # ------------------------------------------------------------------ pending sessions

    def _our_attempt(self, device: Device, session: str) -> dict[str, Any] | None:
        """The write-ahead intent that opened ``session`` on ``device`` for this fabric."""
        if self.audit is None:
            return None
        for attempt in self.audit.attempts():
            intent = attempt["intent"]
            if (
                intent.get("session") == session
                and intent.get("device") == device.name
                and intent.get("fabric") == self.intent.name
            ):
                return attempt
        return None

    def _settle(self, change: _Change, policy: str) -> bool:
        """Make sure no pending session can still change what apply is about to read.

        Leaked ``roce-agent-*`` edit buffers (never committed) are aborted. A live session
        (committed, waiting for confirmation) is handled per ``pending_policy``. Returns False
        (with ``change.result`` set to ``pending``) when the device must not be changed now.
        """
        deadline = time.monotonic() + self.pending_timeout_s
        while True:
            sessions = change.platform.read_sessions(change.conn)
            self._clear_uncommitted(change, sessions)
            live = [s for s in sessions if s.live]
            if not live:
                return True
            if policy == "abort":
                self._abort_live(change, live)
                continue
            if policy == "confirm-own":
                live = self._confirm_own(change, live)
                if not live:
                    continue
            why = self._why_not_wait(live, policy, deadline)
            if why is not None:
                self._mark_pending(change.device, live, why, change.result)
                return False
            time.sleep(PENDING_POLL_S)

    def _clear_uncommitted(self, change: _Change, sessions: list[PendingSession]) -> None:
        """Abort our leaked edit buffers (unless another run still uses one); leave, with a
        note, the uncommitted sessions that are not the agent's."""
        device, notes = change.device, change.result.notes
        for session in [s for s in sessions if not s.live and s.ours]:
            if self._in_use(device, session):
                notes.append(f"left {session.describe()}: another run is using it")
                continue
            change.platform.abort_session(change.conn, session)
            notes.append(f"aborted leaked {session.describe()}")
            self._reconcile(device, session.name, "aborted leaked session (never committed)")
        for session in [s for s in sessions if not s.live and not s.ours]:
            note = f"left {session.describe()}: uncommitted, not the agent's"
            if note not in notes:
                notes.append(note)

    def _abort_live(self, change: _Change, live: list[PendingSession]) -> None:
        """``--pending abort``: roll every live session back."""
        for session in live:
            change.platform.abort_session(change.conn, session)
            change.result.notes.append(f"aborted {session.describe()} (--pending abort)")
            self._reconcile(change.device, session.name, "rolled back (--pending abort)")

    def _confirm_own(self, change: _Change, live: list[PendingSession]) -> list[PendingSession]:
        """``--pending confirm-own``: confirm this fabric's own live sessions whose readback
        equals the plan; the sessions that still block the device."""
        device, platform, conn, notes = (
            change.device,
            change.platform,
            change.conn,
            change.result.notes,
        )
        assert change.desired is not None
        blocking = []
        for session in live:
            if not session.ours or self._our_attempt(device, session.name) is None:
                blocking.append(session)
                continue
            remaining = diff(
                device.name, change.desired, platform.read_state(conn), platform.managed
            )
            if remaining:
                blocking.append(session)
                notes.append(
                    f"not confirming {session.describe()}: readback differs from the "
                    f"plan ({remaining[0]})"
                )
                continue
            platform.confirm_session(conn, session)
            notes.append(f"confirmed own {session.describe()} (readback = plan)")
            self._reconcile(device, session.name, "confirmed (readback equals plan)")
        return blocking

    def _why_not_wait(self, live: list[PendingSession], policy: str, deadline: float) -> str | None:
        """Why waiting for the live sessions to end is over (None: wait on)."""
        if policy != "wait":
            return "not ours, or its readback differs from the plan"
        if all(not s.rolls_back for s in live):  # nothing will end them by itself
            return "it never rolls back by itself, so waiting cannot help"
        if time.monotonic() >= deadline:
            return f"still there after waiting {self.pending_timeout_s:.0f}s"
        return None

    @staticmethod
    def _mark_pending(
        device: Device, live: list[PendingSession], why: str, result: DeviceResult
    ) -> None:
        result.result = "pending"
        result.pending = live
        result.error = (
            f"{device.name}: pending {'; '.join(s.describe() for s in live)} can still "
            f"change the device ({why}); not changed. Use --pending abort to roll it "
            "back, or confirm-own if it is this fabric's own change"
        )

    def _in_use(self, device: Device, session: PendingSession) -> bool:
        """Whether an uncommitted ``roce-agent-*`` session belongs to a run still going (a
        concurrent apply), rather than to one that died: its intent names a live process on
        this host. Without an intent here (another host or state dir), a session younger than
        :data:`LEAK_MIN_AGE_S` is presumed in use."""
        attempt = self._our_attempt(device, session.name)
        if attempt is None:
            return session.age_s is None or session.age_s < LEAK_MIN_AGE_S
        intent = attempt["intent"]
        pid = intent.get("pid")
        if attempt["result"] is not None or intent.get("host") != socket.gethostname():
            return False
        if not isinstance(pid, int) or pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, another user's
            return True
        return True

    def _reconcile(self, device: Device, session: str, outcome: str) -> None:
        if self.audit is None:
            return
        attempt = self._our_attempt(device, session)
        if attempt is None or attempt["result"] is not None:
            return
        self.audit.write(
            record="reconciled",
            attempt=attempt["attempt"],
            fabric=self.intent.name,
            device=device.name,
            session=session,
            outcome=outcome,
        )

    def _reconcile_incomplete(
        self, device: Device, platform: Platform, conn: Connection, desired: QosState
    ) -> list[str]:
        """Attempts of this device whose run died (intent, no result): record what the device
        shows now. Runs after :meth:`_settle`, so no session of theirs is still pending. A
        device that holds the plan is saved: the run may have died between its confirm and
        its save, and a no-change run would never save it."""
        if self.audit is None:
            return []
        notes = []
        stale = self.audit.incomplete(self.intent.name, device.name)
        if not stale:
            return []
        actual = platform.read_state(conn)
        left = diff(device.name, desired, actual, platform.managed)
        if not left:
            platform.save(conn)
        for attempt in stale:
            intent = attempt["intent"]
            observed = (
                "device equals the plan, saved" if not left else f"{len(left)} setting(s) differ"
            )
            self.audit.write(
                record="reconciled",
                attempt=attempt["attempt"],
                fabric=self.intent.name,
                device=device.name,
                session=intent.get("session"),
                outcome=f"run died before its result; found no pending session, {observed}",
            )
            notes.append(f"reconciled interrupted attempt {attempt['attempt']} ({observed})")
        return notes

    # ------------------------------------------------------------------ one device

    def apply_one(
        self,
        device: Device,
        dry_run: bool = False,
        target: QosState | None = None,
        pending_policy: str | None = None,
    ) -> DeviceResult:
        """Bring one device to the plan (or to ``target``, e.g. the state it had before a
        rollout) inside a self-rolling-back transaction."""
        started = time.monotonic()
        platform = platform_for(device.platform)
        result = DeviceResult(device.name, device.platform, "no-change")
        try:
            conn = connect(device, platform)
        except Unreachable as exc:
            result.result, result.error = exc.kind, str(exc)
            result.duration_s = time.monotonic() - started
            if not dry_run:
                self._audit(result)
            return result
        change = _Change(device, platform, conn, result)
        try:
            change.desired = target if target is not None else self._desired(device, platform)
            if self._ready(change, dry_run, pending_policy or self.pending_policy):
                self._bring_to_plan(change, dry_run)
        except Exception as exc:
            result.result, result.error = "failed", _one_line(device.name, exc)
            if result.attempt is not None:
                # The transport may have lied (lost reply, dead session): what counts is what
                # the switch holds, read on a fresh connection.
                assert change.desired is not None  # an attempt is only opened after it is read
                self._verify_outcome(device, platform, change.desired, result, change.committed)
        finally:
            close_quietly(conn)
            result.duration_s = time.monotonic() - started
            self._record_outcome(result, dry_run)
        return result

    def _ready(self, change: _Change, dry_run: bool, policy: str) -> bool:
        """Whether the device may be read and changed now: no pending session left that can
        still change it (a dry run only lists them), interrupted attempts reconciled."""
        conn, device, platform, result = change.conn, change.device, change.platform, change.result
        assert change.desired is not None
        if dry_run:
            result.pending = platform.read_sessions(conn)
            return True
        if not self._settle(change, policy):
            return False
        result.notes += self._reconcile_incomplete(device, platform, conn, change.desired)
        return True

    def _bring_to_plan(self, change: _Change, dry_run: bool) -> None:
        """Read and diff the device; change it when it differs (a dry run stops at the lines)."""
        platform, result = change.platform, change.result
        assert change.desired is not None
        actual = platform.read_state(change.conn)
        result.before = actual
        result.differences = diff(change.device.name, change.desired, actual, platform.managed)
        if not result.differences:
            return  # idempotent: no session opened
        result.lines = platform.render_changes(change.desired, actual)
        if dry_run:
            result.result = "changes"
            return
        self._commit(change)

    def _commit(self, change: _Change) -> None:
        """The change in one self-rolling-back transaction, confirmed only when the readback
        equals the plan."""
        conn, device, platform, result = change.conn, change.device, change.platform, change.result
        name = platform.session_name()
        result.session = name
        self._intent(result)  # write-ahead: on disk before the session opens
        kill_point("after-intent", device.name)
        with platform.transaction(conn, result.lines, self.confirm_timeout_s, name) as txn:
            change.committed = txn.committed
            kill_point("after-commit", device.name)
            if self.hold_before_confirm_s:
                time.sleep(self.hold_before_confirm_s)
            self._check_readback(change)
            platform.confirm(conn, txn)
        result.result = "applied"
        kill_point("after-confirm", device.name)

    @staticmethod
    def _check_readback(change: _Change) -> None:
        assert change.desired is not None
        platform, name = change.platform, change.device.name
        readback = platform.read_state(change.conn)
        remaining = diff(name, change.desired, readback, platform.managed)
        if remaining:
            raise VerifyFailed(
                f"{name}: readback differs from the plan after the change "
                f"({len(remaining)} setting(s), first: {remaining[0]})"
            )

    def _record_outcome(self, result: DeviceResult, dry_run: bool) -> None:
        """The attempt's result record, or one event for a run that never reached a change."""
        if result.attempt is not None:
            try:
                self._result(result)
            except OSError as exc:  # the device outcome must still reach the operator
                log.error("%s: audit result record not written: %s", result.device, exc)
                result.notes.append(f"audit result record not written: {exc}")
        elif not dry_run and result.result not in ("no-change", "pending"):
            self._audit(result)

    def _verify_outcome(
        self,
        device: Device,
        platform: Platform,
        desired: QosState,
        result: DeviceResult,
        committed: bool,
    ) -> None:
        """After an error mid-change: establish applied / rolled back / unknown truthfully."""
        assert result.session is not None and result.before is not None
        try:
            conn = connect(device, platform)
        except Unreachable as exc:
            result.result = "unknown"
            result.notes.append(f"outcome not verified: {exc}")
            return
        try:
            self._abort_own_session(conn, platform, result, committed)
            self._judge_outcome(conn, device, platform, desired, result)
        except Exception as exc:
            result.result = "unknown"
            result.notes.append(f"outcome not verified: {_one_line(device.name, exc)}")
        finally:
            close_quietly(conn)

    @staticmethod
    def _abort_own_session(
        conn: Connection, platform: Platform, result: DeviceResult, committed: bool
    ) -> None:
        """End the failed attempt's session if it is still live, or was never committed."""
        mine = [s for s in platform.read_sessions(conn) if s.name == result.session]
        for session in mine:
            if session.live or not committed:
                platform.abort_session(conn, session)
                result.notes.append(f"aborted {session.describe()} on a fresh connection")

    def _judge_outcome(
        self, conn: Connection, device: Device, platform: Platform, desired: QosState,
        result: DeviceResult,
    ) -> None:  # fmt: skip
        """What the device holds now: the old state, the plan (saved here), or neither."""
        assert result.before is not None
        left = [s for s in platform.read_sessions(conn) if s.name == result.session]
        actual = platform.read_state(conn)
        if left and any(s.live for s in left):
            result.result = "unknown"
            result.notes.append(f"{left[0].describe()} is still pending")
        elif not diff(device.name, result.before, actual, platform.managed):
            result.notes.append("verified on a fresh connection: the old state is in place")
        elif not diff(device.name, desired, actual, platform.managed):
            self._save_confirmed(conn, platform, result)
        else:
            result.result = "unknown"
            result.notes.append("device is neither in the old nor in the planned state")

    @staticmethod
    def _save_confirmed(conn: Connection, platform: Platform, result: DeviceResult) -> None:
        """Confirmed, but the save may never have run (the lost reply was the confirm's)."""
        try:
            platform.save(conn)
        except Exception as exc:  # live but not saved: a reload would undo it
            result.notes.append(
                f"the change is confirmed and in place but not saved: "
                f"{_one_line(result.device, exc)}"
            )
            return
        result.result = "applied"
        result.notes.append(
            "verified on a fresh connection: the change is confirmed and in place, "
            f"saved (the error was: {result.error})"
        )
        result.error = None

    def restore(self, device: Device, before: QosState) -> DeviceResult:
        """Put a device back to the state it had (rollback of a rollout step). A pending
        session there is aborted: going back is the point, waiting would only delay it."""
        return self.apply_one(device, target=before, pending_policy="abort")

    def _record(self, kind: str, about: DeviceResult, **fields: Any) -> None:
        """One audit record about a device (nothing when no audit is kept). ``fields`` may
        hold a ``result`` key, hence the parameter's other name."""
        if self.audit is None:
            return
        self.audit.write(
            record=kind,
            fabric=self.intent.name,
            device=about.device,
            platform=about.platform,
            session=about.session,
            **fields,
        )

    def _intent(self, result: DeviceResult) -> None:
        result.attempt = uuid.uuid4().hex
        self._record(
            "intent",
            result,
            attempt=result.attempt,
            diff=[d.as_dict() for d in result.differences],
            lines=result.lines,
            confirm_timeout_s=self.confirm_timeout_s,
            pid=os.getpid(),  # lets a concurrent run tell a live session from a leaked one
            host=socket.gethostname(),
        )

    def _outcome(self, result: DeviceResult) -> dict[str, Any]:
        return {
            "result": result.result,
            "error": result.error,
            "notes": result.notes,
            "duration_s": round(result.duration_s, 3),
        }

    def _result(self, result: DeviceResult) -> None:
        self._record("result", result, attempt=result.attempt, **self._outcome(result))

    def _audit(self, result: DeviceResult) -> None:
        """A run that never reached a change (unreachable, failed on read): one record."""
        self._record(
            "event",
            result,
            diff=[d.as_dict() for d in result.differences],
            lines=result.lines,
            **self._outcome(result),
        )

    def inspect_all(
        self, devices: Sequence[Device], parallelism: int = DEFAULT_PARALLELISM
    ) -> list[DeviceResult]:
        read = run_each({d.name: d for d in devices}, self.inspect, parallelism)
        return list(results_or_raise(read).values())

    def apply_all(
        self,
        devices: Sequence[Device],
        rollout: Rollout,
        dry_run: bool = False,
        on_result: Callable[[DeviceResult], None] | None = None,
    ) -> list[DeviceResult]:
        """Canary devices first (one by one), then batches in parallel; stop on failure."""
        canary, batch_size = rollout.canary, rollout.batch_size
        if canary < 0 or batch_size < 1 or rollout.parallelism < 1:
            raise AgentError("--canary must be >= 0, --batch-size and parallelism >= 1")
        progress = _RolloutProgress(on_result)
        stop_reason = self._canaries(list(devices[:canary]), dry_run, progress)
        remaining = list(devices[canary:])
        while remaining and stop_reason is None:
            batch, remaining = remaining[:batch_size], remaining[batch_size:]
            stop_reason = self._batch(batch, rollout.parallelism, dry_run, progress)
        done = progress.done
        for device in devices:
            if device.name not in done:
                progress.record(
                    DeviceResult(
                        device.name, device.platform, "skipped", error=f"not started: {stop_reason}"
                    )
                )
        return progress.results

    def _canaries(
        self, canaries: list[Device], dry_run: bool, rollout: _RolloutProgress
    ) -> str | None:
        """One by one; why the rollout stops (None: go on)."""
        for device in canaries:
            # A batch of one through the fan-out, so a progress watcher sees the canary too.
            outcome = run_each({device.name: device}, lambda d: self.apply_one(d, dry_run), 1)
            result = results_or_raise(outcome)[device.name]
            rollout.record(result)
            if result.result in STOPPING:
                return f"canary {device.name} {result.result}"
        return None

    def _batch(
        self, batch: list[Device], parallelism: int, dry_run: bool, rollout: _RolloutProgress
    ) -> str | None:
        """One batch side by side, each result recorded as it comes (in batch order); why the
        rollout stops (None: go on)."""

        def record(_name: str, outcome: DeviceResult | Exception) -> None:
            if isinstance(outcome, Exception):
                raise outcome  # the batch's other devices still finish, as with Executor.map
            rollout.record(outcome)
            if rollout.first_result and not dry_run:
                kill_point("mid-batch")  # the first result of the batch is on disk
                rollout.first_result = False

        run_each(
            {d.name: d for d in batch}, lambda d: self.apply_one(d, dry_run), parallelism, record
        )
        stopped = [r for r in rollout.results[-len(batch) :] if r.result in STOPPING_BATCH]
        return ", ".join(f"{r.device} {r.result}" for r in stopped) or None


@dataclass(frozen=True)
class Rollout:
    """How :meth:`Pusher.apply_all` goes over the devices: the first ``canary`` one by one,
    then batches of ``batch_size`` side by side, ``parallelism`` sessions at a time; it stops
    after the step where a device failed."""

    canary: int = 1
    batch_size: int = 8
    parallelism: int = DEFAULT_PARALLELISM


@dataclass
class _RolloutProgress:
    """The results of one :meth:`Pusher.apply_all` so far, each handed on as it lands."""

    on_result: Callable[[DeviceResult], None] | None
    results: list[DeviceResult] = field(default_factory=list)
    first_result: bool = True  # no batch result recorded yet: the mid-batch kill point is armed

    @property
    def done(self) -> set[str]:
        return {r.device for r in self.results}

    def record(self, result: DeviceResult) -> None:
        self.results.append(result)
        if self.on_result:
            self.on_result(result)

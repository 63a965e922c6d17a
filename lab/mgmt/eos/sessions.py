"""EOS configuration sessions: the switch's table of them, commit timers, diffs.

EOS semantics (Arista "Config sessions" (4.15.0F) and "Config Session Commit Timer" articles,
eos.arista.com; walk-through at null.53bits.co.uk "Configuration Session"):

* ``configure session NAME`` starts from a copy of the running-config (or re-enters NAME);
  lines edit only the session; ``show session-config diffs`` compares it with running-config;
* ``commit`` replaces the running-config with the session's; ``abort`` drops the session;
* ``commit timer HH:MM:SS`` commits now and rolls back automatically at the end of the timer
  unless ``configure session NAME commit`` confirms it first (state ``pendingCommitTimer``);
* sessions belong to the switch, so another SSH connection sees them in
  ``show configuration sessions``. Like EOS, a session outlives the SSH connection that
  opened it: a still-``pending`` one stays (counting against the pending-session cap) until
  someone aborts or commits it, or until it is 24 hours old ("An uncommitted configuration
  session will be discarded if the switch reboots and will time out after 24 hours",
  arista.com/um-eos/eos-configure-session); a committed-with-timer one keeps its timer
  (losing the connection is exactly when the rollback must happen).
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from lab.mgmt.cli_grammar import CliError, refused
from lab.mgmt.eos.render import render_config
from lab.mgmt.model import SwitchConfig
from lab.mgmt.switch import ConfigRefused, SwitchManager, TimerHandle

log = logging.getLogger("lab.mgmt")

SessionState = Literal["pending", "pendingCommitTimer", "completed"]
MAX_PENDING_SESSIONS = 5
MAX_COMPLETED_SESSIONS = 1
UNCOMMITTED_LIFETIME_S = 24 * 3600
_TIMER_RE = re.compile(r"^(\d{1,2}):([0-5]\d):([0-5]\d)$")


@dataclass
class ConfigSession:
    """One named configuration session."""

    name: str
    config: SwitchConfig
    user: str
    owner: str | None
    state: SessionState = "pending"
    commit_deadline: float | None = None
    rollback_to: SwitchConfig | None = None
    completed_at: float | None = None
    created_at: float = field(default_factory=time.time)


def parse_commit_timer(text: str) -> int:
    """``00:05:00`` -> 300 seconds; ValueError if malformed or zero."""
    match = _TIMER_RE.match(text)
    if match is None:
        raise ValueError(text)
    hours, minutes, seconds = (int(g) for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total == 0:
        raise ValueError(text)
    return total


def format_duration(seconds: float) -> str:
    """300 -> ``0:05:00`` (as a remaining commit timer)."""
    whole = max(0, int(seconds + 0.999))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def session_diff(running: SwitchConfig, session: ConfigSession) -> str:
    """``show session-config diffs``: a unified diff, running-config -> session-config."""
    lines = difflib.unified_diff(
        render_config(running),
        render_config(session.config),
        fromfile="system:/running-config",
        tofile=f"session:/{session.name}-session-config",
        lineterm="",
    )
    return "\n".join(lines)


class ConfigSessions(Mapping[str, ConfigSession]):
    """The switch's config sessions by name, and their commit timers.

    Sessions belong to the switch, not to a terminal: every SSH connection sees them, and a
    commit timer runs on after the connection that armed it is gone.
    """

    def __init__(self, manager: SwitchManager) -> None:
        self.manager = manager
        self._sessions: dict[str, ConfigSession] = {}
        self._timers: dict[str, TimerHandle] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._next_session = 1

    def __getitem__(self, name: str) -> ConfigSession:
        return self._sessions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sessions)

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, name: str | None, owner: str, user: str) -> ConfigSession:
        """``configure session [NAME]``: create it from running-config, or re-enter it."""
        if name is None:
            while f"session{self._next_session}" in self._sessions:
                self._next_session += 1
            name = f"session{self._next_session}"
        existing = self._sessions.get(name)
        if existing is not None and existing.state != "completed":
            existing.owner = owner
            return existing
        self.expire_uncommitted()
        pending = [s for s in self._sessions.values() if s.state == "pending"]
        if len(pending) >= MAX_PENDING_SESSIONS:
            raise CliError("% Maximum number of pending sessions has been reached")
        config = self.manager.running.clone()
        session = ConfigSession(name=name, config=config, user=user, owner=owner)
        self._sessions[name] = session
        return session

    def session(self, name: str) -> ConfigSession:
        """A session by name, or the EOS error."""
        found = self._sessions.get(name)
        if found is None or found.state == "completed":
            raise CliError(f"% Session {name} does not exist")
        return found

    def timer_session(self) -> ConfigSession | None:
        """The session whose commit is waiting for confirmation, if any."""
        for session in self._sessions.values():
            if session.state == "pendingCommitTimer":
                return session
        return None

    async def commit(self, name: str, timer_seconds: int | None = None) -> None:
        """``commit`` / ``commit timer`` in a session, or ``configure session NAME commit``."""
        session = self.session(name)
        if session.state == "pendingCommitTimer":
            if timer_seconds is None:
                self._confirm(session)
            else:
                self._arm_timer(session, timer_seconds)
            return
        blocking = self.timer_session()
        if blocking is not None:
            raise CliError(
                f"% Cannot commit session {name}: session {blocking.name} has a pending commit "
                f"timer; confirm it (configure session {blocking.name} commit) or abort it first"
            )
        try:
            before = await self.manager.install(session.config.clone())
        except ConfigRefused as exc:
            raise refused(exc) from None
        if timer_seconds is None:
            self._complete(session)
        else:
            session.rollback_to = before
            session.state = "pendingCommitTimer"
            self._arm_timer(session, timer_seconds)
        log.info(
            "session %s committed%s", name, f" (timer {timer_seconds}s)" if timer_seconds else ""
        )

    def _arm_timer(self, session: ConfigSession, seconds: int) -> None:
        old = self._timers.pop(session.name, None)
        if old is not None:
            old.cancel()
        clock = self.manager.clock
        session.commit_deadline = clock.now() + seconds
        self._timers[session.name] = clock.schedule(seconds, self._timer_fired)

    def _timer_fired(self) -> None:
        task = asyncio.ensure_future(self.run_expired_timers())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _confirm(self, session: ConfigSession) -> None:
        timer = self._timers.pop(session.name, None)
        if timer is not None:
            timer.cancel()
        self._complete(session)
        log.info("session %s: commit confirmed", session.name)

    def _complete(self, session: ConfigSession) -> None:
        session.state = "completed"
        session.owner = None
        session.commit_deadline = None
        session.rollback_to = None
        session.completed_at = time.time()
        completed = [s for s in self._sessions.values() if s.state == "completed"]
        completed.sort(key=lambda s: s.completed_at or 0.0)
        for old in completed[:-MAX_COMPLETED_SESSIONS]:
            del self._sessions[old.name]

    async def abort(self, name: str) -> None:
        """``abort``: drop the session; if its commit is unconfirmed, roll back now."""
        session = self.session(name)
        if session.state == "pendingCommitTimer":
            await self._roll_back(session, "aborted")
        self._sessions.pop(name, None)

    async def run_expired_timers(self) -> None:
        """Roll back every commit whose timer has run out (called by the timer)."""
        now = self.manager.clock.now()
        for session in list(self._sessions.values()):
            deadline = session.commit_deadline
            if session.state == "pendingCommitTimer" and deadline is not None and deadline <= now:
                await self._roll_back(session, "commit timer expired")
                self._sessions.pop(session.name, None)

    async def _roll_back(self, session: ConfigSession, why: str) -> None:
        timer = self._timers.pop(session.name, None)
        if timer is not None:
            timer.cancel()
        target = session.rollback_to
        session.state = "pending"
        session.commit_deadline = None
        if target is None:
            return
        try:
            await self.manager.install(target.clone(), force=True)
        except ConfigRefused as exc:  # the old config was accepted before; should not happen
            log.error("session %s: rollback failed: %s", session.name, exc)
            return
        log.warning("session %s: %s, running-config rolled back", session.name, why)

    def release_owned(self, owner: str) -> list[str]:
        """A connection closed: its sessions stay (as on EOS), without a terminal."""
        kept = [s.name for s in self._sessions.values() if s.owner == owner]
        for name in kept:
            self._sessions[name].owner = None
        if kept:
            log.info("connection %s closed: session(s) %s kept", owner, ", ".join(kept))
        return kept

    def expire_uncommitted(self) -> None:
        """EOS times out an uncommitted session after 24 hours."""
        now = time.time()
        for session in list(self._sessions.values()):
            if session.state == "pending" and now - session.created_at > UNCOMMITTED_LIFETIME_S:
                del self._sessions[session.name]

    def close(self) -> None:
        """Cancel timers and background work (process shutdown)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._background):
            task.cancel()

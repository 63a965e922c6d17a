"""Switch-wide management state shared by every SSH connection of one lab switch.

It owns the running-config and the config sessions and is the only place that pushes to the
data plane: a change is translated, sent with ``set_qos``, and becomes the running-config only
if the data plane accepted it. All changes are serialised by one lock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from lab.mgmt.config_commands import load_config_text
from lab.mgmt.dataplane_handle import Dataplane, DataplaneError
from lab.mgmt.grammar import CliError
from lab.mgmt.lldp import PortLink
from lab.mgmt.model import SwitchConfig
from lab.mgmt.persistence import StartupConfigStore
from lab.mgmt.render import render_text
from lab.mgmt.sessions import (
    MAX_COMPLETED_SESSIONS,
    MAX_PENDING_SESSIONS,
    UNCOMMITTED_LIFETIME_S,
    ConfigSession,
)
from lab.mgmt.translate import TranslationError, to_vswitch_qos

log = logging.getLogger("lab.mgmt")
T = TypeVar("T")


class TimerHandle(Protocol):
    """Something that can be cancelled (``asyncio.TimerHandle``)."""

    def cancel(self) -> None:
        """Do not fire."""


class Clock(Protocol):
    """Time source and timer scheduler (a fake one drives the unit tests)."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def schedule(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Call ``callback`` after ``delay`` seconds."""
        ...


class LoopClock:
    """:class:`Clock` on the running asyncio loop."""

    def now(self) -> float:
        """``loop.time()``."""
        return asyncio.get_running_loop().time()

    def schedule(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """``loop.call_later``."""
        return asyncio.get_running_loop().call_later(delay, callback)


@dataclass(frozen=True)
class PortInfo:
    """A switch port as the CLI shows it."""

    name: str  # EOS name, Ethernet1
    speed_bps: int | None = None
    link: PortLink | None = None  # MTU and LLDP neighbour, from the lab's links.json


class SwitchManager:
    """Running-config, sessions, commit timers and startup-config of one lab switch."""

    def __init__(
        self,
        name: str,
        ports: list[PortInfo],
        dataplane: Dataplane,
        clock: Clock,
        store: StartupConfigStore | None = None,
    ) -> None:
        self.name = name
        self.ports = ports
        self.dataplane = dataplane
        self.clock = clock
        self.store = store
        self.booted_at = time.time()
        self.running = self.factory_config()
        self.sessions: dict[str, ConfigSession] = {}
        self._applied_qos: dict[str, Any] | None = None
        self._lock = asyncio.Lock()
        self._timers: dict[str, TimerHandle] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._next_terminal = 1
        self._next_session = 1

    # ----------------------------------------------------------------- running-config

    def factory_config(self) -> SwitchConfig:
        """Nothing configured: hostname = switch name, every port present."""
        return SwitchConfig.empty(self.name, [p.name for p in self.ports])

    async def start(self) -> None:
        """Load startup-config (if any) and push it; fall back to factory config if refused."""
        text = self.store.load() if self.store is not None else None
        candidate = self.factory_config()
        if text:
            try:
                candidate = load_config_text(candidate, text)
            except CliError as exc:
                log.error("startup-config not loaded: %s", exc)
                candidate = self.factory_config()
        async with self._lock:
            try:
                await self._apply(candidate, force=True)
            except CliError as exc:
                log.error("startup-config refused by the data plane (%s); using defaults", exc)
                await self._apply(self.factory_config(), force=True)
        log.info("%s: running-config applied to the data plane", self.name)

    async def _apply(self, candidate: SwitchConfig, force: bool = False) -> None:
        """Push ``candidate`` to the data plane; it becomes running-config only if accepted."""
        try:
            qos = to_vswitch_qos(candidate)
        except TranslationError as exc:
            raise CliError(f"% {exc}") from None
        if force or qos != self._applied_qos:
            try:
                await self.dataplane.set_qos(qos)
            except DataplaneError as exc:
                raise CliError(f"% Data plane refused the change: {exc}") from None
            self._applied_qos = qos
        self.running = candidate

    async def edit_running(self, edit: Callable[[SwitchConfig], T]) -> T:
        """Apply ``edit`` to a copy of running-config and commit it through the data plane."""
        async with self._lock:
            candidate = self.running.clone()
            result = edit(candidate)
            await self._apply(candidate)
            return result

    async def install(self, candidate: SwitchConfig, force: bool = False) -> None:
        """Make ``candidate`` the running model through the data plane (CliError if refused).

        The path of personalities that keep their own native configuration (SONiC's
        CONFIG_DB, NVUE's revisions): they translate it into the shared model and install it.
        """
        async with self._lock:
            await self._apply(candidate, force=force)

    def applied_qos(self) -> dict[str, Any] | None:
        """The last ``set_qos`` payload the data plane accepted."""
        return self._applied_qos

    async def save_startup(self) -> None:
        """``copy running-config startup-config``."""
        if self.store is None:
            raise CliError("% No startup-config storage configured")
        text = render_text(self.running)
        await asyncio.to_thread(self.store.save, text)

    def startup_text(self) -> str | None:
        """The saved startup-config."""
        return self.store.load() if self.store is not None else None

    def new_terminal(self) -> str:
        """A terminal name for a new SSH connection (``vty1``...)."""
        name = f"vty{self._next_terminal}"
        self._next_terminal += 1
        return name

    # ----------------------------------------------------------------- sessions

    def open_session(self, name: str | None, owner: str, user: str) -> ConfigSession:
        """``configure session [NAME]``: create it from running-config, or re-enter it."""
        if name is None:
            while f"session{self._next_session}" in self.sessions:
                self._next_session += 1
            name = f"session{self._next_session}"
        existing = self.sessions.get(name)
        if existing is not None and existing.state != "completed":
            existing.owner = owner
            return existing
        self.expire_uncommitted()
        pending = [s for s in self.sessions.values() if s.state == "pending"]
        if len(pending) >= MAX_PENDING_SESSIONS:
            raise CliError("% Maximum number of pending sessions has been reached")
        session = ConfigSession(name=name, config=self.running.clone(), user=user, owner=owner)
        self.sessions[name] = session
        return session

    def session(self, name: str) -> ConfigSession:
        """A session by name, or the EOS error."""
        found = self.sessions.get(name)
        if found is None or found.state == "completed":
            raise CliError(f"% Session {name} does not exist")
        return found

    def timer_session(self) -> ConfigSession | None:
        """The session whose commit is waiting for confirmation, if any."""
        for session in self.sessions.values():
            if session.state == "pendingCommitTimer":
                return session
        return None

    async def commit_session(self, name: str, timer_seconds: int | None = None) -> None:
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
        async with self._lock:
            before = self.running.clone()
            await self._apply(session.config.clone())
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
        session.commit_deadline = self.clock.now() + seconds
        self._timers[session.name] = self.clock.schedule(seconds, self._timer_fired)

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
        completed = [s for s in self.sessions.values() if s.state == "completed"]
        completed.sort(key=lambda s: s.completed_at or 0.0)
        for old in completed[:-MAX_COMPLETED_SESSIONS]:
            del self.sessions[old.name]

    async def abort_session(self, name: str) -> None:
        """``abort``: drop the session; if its commit is unconfirmed, roll back now."""
        session = self.session(name)
        if session.state == "pendingCommitTimer":
            await self._roll_back(session, "aborted")
        self.sessions.pop(name, None)

    async def run_expired_timers(self) -> None:
        """Roll back every commit whose timer has run out (called by the timer)."""
        now = self.clock.now()
        for session in list(self.sessions.values()):
            deadline = session.commit_deadline
            if session.state == "pendingCommitTimer" and deadline is not None and deadline <= now:
                await self._roll_back(session, "commit timer expired")
                self.sessions.pop(session.name, None)

    async def _roll_back(self, session: ConfigSession, why: str) -> None:
        timer = self._timers.pop(session.name, None)
        if timer is not None:
            timer.cancel()
        target = session.rollback_to
        session.state = "pending"
        session.commit_deadline = None
        if target is None:
            return
        async with self._lock:
            try:
                await self._apply(target.clone(), force=True)
            except CliError as exc:  # the old config was accepted before; should not happen
                log.error("session %s: rollback failed: %s", session.name, exc)
                return
        log.warning("session %s: %s, running-config rolled back", session.name, why)

    def release_owned(self, owner: str) -> list[str]:
        """A connection closed: its sessions stay (as on EOS), without a terminal."""
        kept = [s.name for s in self.sessions.values() if s.owner == owner]
        for name in kept:
            self.sessions[name].owner = None
        if kept:
            log.info("connection %s closed: session(s) %s kept", owner, ", ".join(kept))
        return kept

    def expire_uncommitted(self) -> None:
        """EOS times out an uncommitted session after 24 hours."""
        now = time.time()
        for session in list(self.sessions.values()):
            if session.state == "pending" and now - session.created_at > UNCOMMITTED_LIFETIME_S:
                del self.sessions[session.name]

    async def close(self) -> None:
        """Cancel timers and background work (process shutdown)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._background):
            task.cancel()

"""NVUE revisions: a pending revision per user, the applied one, startup, history, confirm.

From NVIDIA's "NVUE CLI" page (CumulusNetworks/docs ``content/cumulus-linux-514/
System-Configuration/NVIDIA-User-Experience-NVUE/NVUE-CLI.md`` at 14b5217a):

- ``nv set``/``nv unset`` change the pending configuration; ``nv config apply`` makes it the
  applied one and, with auto save on (the default), saves it to the startup file;
- ``--confirm [<time>]`` "applies the configuration change but you must confirm the applied
  configuration. If you do not confirm within ten minutes, the configuration rolls back
  automatically" (``--confirm 60m``); ``--confirm-status`` "shows the amount of time left
  before the automatic rollback";
- ``nv config detach`` detaches the pending configuration under an integer id;
- ``nv config history`` lists "the configuration revision ID, the date and time of the change,
  the user account that made the change, and the type of change";
- ``nv config save`` "overwrites the startup configuration with the applied configuration"
  (``/etc/nvue.d/startup.yaml``; here ``<state_dir>/startup.yaml``).

The store belongs to the switch (the management process), not to an SSH connection: a
pending revision or an unconfirmed apply outlives the session that made it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.mgmt.nvue.errors import NvueError
from lab.mgmt.nvue.tree import Tree
from lab.mgmt.switch import Clock, TimerHandle

log = logging.getLogger("lab.mgmt.nvue")
STARTUP_FILE = "startup.yaml"
DEFAULT_CONFIRM_S = 600  # "If you do not confirm within ten minutes"
HEADER = {
    "model": "lab",
    "nvue-api-version": "nvue_v1",
    "rev-id": 1.0,
    "version": "Cumulus Linux 5.15.0",
}

Installer = Callable[[Tree], Awaitable[None]]


@dataclass
class Revision:
    """A numbered configuration (pending, detached or applied)."""

    rev_id: int
    tree: Tree
    user: str


@dataclass
class HistoryEntry:
    """One line of ``nv config history``."""

    rev_id: int
    date: float
    user: str
    kind: str  # CLI
    message: str


@dataclass
class PendingConfirm:
    """An applied revision waiting for ``--confirm-yes``."""

    rev_id: int
    deadline: float
    rollback_to: Tree
    rollback_rev: int
    timer: TimerHandle


@dataclass
class RevisionStore:
    """Every revision of one switch."""

    install: Installer
    clock: Clock
    state_dir: Path | None = None
    applied: Revision = field(default_factory=lambda: Revision(0, {}, "system"))
    pending: dict[str, Revision] = field(default_factory=dict)
    detached: dict[int, Revision] = field(default_factory=dict)
    history: list[HistoryEntry] = field(default_factory=list)
    confirm: PendingConfirm | None = None
    next_rev: int = 1
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    # ----------------------------------------------------------------- pending

    def pending_of(self, user: str) -> Revision:
        """The user's pending revision, created from the applied one on first edit."""
        found = self.pending.get(user)
        if found is None:
            found = Revision(self._take_id(), copy.deepcopy(self.applied.tree), user)
            self.pending[user] = found
        return found

    def pending_tree(self, user: str) -> Tree:
        """What the user would apply (the applied tree when nothing is pending)."""
        found = self.pending.get(user)
        return found.tree if found is not None else self.applied.tree

    def detach(self, user: str) -> int | None:
        """``nv config detach``: the pending revision moves aside under its id."""
        found = self.pending.pop(user, None)
        if found is None:
            return None
        self.detached[found.rev_id] = found
        return found.rev_id

    def _take_id(self) -> int:
        rev_id = self.next_rev
        self.next_rev += 1
        return rev_id

    # ----------------------------------------------------------------- apply

    async def apply(self, user: str, confirm_s: int | None, message: str = "") -> int:
        """``nv config apply``: the user's pending revision becomes the applied one."""
        if self.confirm is not None:
            raise NvueError(
                f"Error: revision {self.confirm.rev_id} is applied and waiting for confirmation; "
                "run 'nv config apply --confirm-yes' or 'nv config apply --confirm-no' first"
            )
        candidate = self.pending.get(user) or Revision(
            self._take_id(), copy.deepcopy(self.applied.tree), user
        )
        await self.install(candidate.tree)
        previous = self.applied
        self.applied = Revision(candidate.rev_id, copy.deepcopy(candidate.tree), user)
        self.pending.pop(user, None)
        self._record(candidate.rev_id, user, message or "Config update by " + user)
        if confirm_s is None:
            await self.save()
        else:
            self._arm(previous, confirm_s)
        return candidate.rev_id

    def _arm(self, previous: Revision, seconds: int) -> None:
        deadline = self.clock.now() + seconds
        timer = self.clock.schedule(seconds, self._timer_fired)
        self.confirm = PendingConfirm(
            self.applied.rev_id, deadline, copy.deepcopy(previous.tree), previous.rev_id, timer
        )

    def _timer_fired(self) -> None:
        task = asyncio.ensure_future(self.run_expired_timers())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def run_expired_timers(self) -> None:
        """Roll back an unconfirmed apply whose time has run out (called by the timer)."""
        if self.confirm is not None and self.confirm.deadline <= self.clock.now():
            await self._roll_back("confirm timer expired")

    async def confirm_yes(self) -> int:
        """``--confirm-yes``: keep the applied revision (and save it, auto save)."""
        pending = self._need_confirm()
        pending.timer.cancel()
        self.confirm = None
        await self.save()
        return pending.rev_id

    async def confirm_no(self) -> int:
        """``--confirm-no``: roll back now."""
        self._need_confirm()
        return await self._roll_back("rolled back by --confirm-no")

    def confirm_left(self) -> float | None:
        """Seconds until the automatic rollback (None: nothing waits for confirmation)."""
        if self.confirm is None:
            return None
        return max(0.0, self.confirm.deadline - self.clock.now())

    def _need_confirm(self) -> PendingConfirm:
        if self.confirm is None:
            raise NvueError("Error: there is no applied revision waiting for confirmation")
        return self.confirm

    async def _roll_back(self, why: str) -> int:
        pending = self._need_confirm()
        pending.timer.cancel()
        self.confirm = None
        await self.install(pending.rollback_to)
        rev_id = self._take_id()
        self.applied = Revision(rev_id, copy.deepcopy(pending.rollback_to), "system")
        self._record(rev_id, "system", f"Rollback of revision {pending.rev_id}: {why}")
        log.warning("revision %d: %s", pending.rev_id, why)
        return rev_id

    def _record(self, rev_id: int, user: str, message: str) -> None:
        self.history.append(HistoryEntry(rev_id, time.time(), user, "CLI", message))

    # ----------------------------------------------------------------- startup

    def document(self, tree: Tree) -> list[dict[str, Any]]:
        """``[{"header": …}, {"set": tree}]``, the shape of ``nv config show -o json``."""
        return [{"header": dict(HEADER)}, {"set": copy.deepcopy(tree)}]

    async def save(self) -> None:
        """``nv config save`` (and auto save): the applied tree to ``startup.yaml``."""
        if self.state_dir is None:
            return
        text = yaml.safe_dump(self.document(self.applied.tree), sort_keys=True)
        path = self.state_dir / STARTUP_FILE
        await asyncio.to_thread(_write_atomically, path, text)

    def load_startup(self) -> Tree | None:
        """The saved tree, or None (no file, or one that is not an NVUE document)."""
        if self.state_dir is None:
            return None
        path = self.state_dir / STARTUP_FILE
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, yaml.YAMLError) as exc:
            log.error("%s not loaded: %s", path, exc)
            return None
        for item in document if isinstance(document, list) else []:
            if isinstance(item, dict) and isinstance(item.get("set"), dict):
                tree: Tree = json.loads(json.dumps(item["set"]))
                return tree
        log.error("%s holds no 'set' document; using defaults", path)
        return None

    async def start(self, factory: Tree) -> None:
        """Apply the startup tree (``factory`` when there is none or it is refused)."""
        tree = self.load_startup() or copy.deepcopy(factory)
        try:
            await self.install(tree)
        except NvueError as exc:
            log.error("startup configuration refused (%s); using defaults", exc)
            tree = copy.deepcopy(factory)
            await self.install(tree)
        self.applied = Revision(self._take_id(), tree, "system")
        self._record(self.applied.rev_id, "system", "startup configuration")

    def close(self) -> None:
        """Cancel the confirm timer and background work (process shutdown)."""
        if self.confirm is not None:
            self.confirm.timer.cancel()
        for task in list(self._background):
            task.cancel()


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)

"""NX-OS' ways back: named checkpoints with ``rollback running-config checkpoint``, and
``configure replace FILE commit-timeout N`` whose timer puts the previous configuration back
unless ``configure replace commit`` comes first.

Sources (docs/lab-nxos.md cites each): Cisco Nexus 9000 NX-OS System Management
Configuration Guide, "Configuring the Rollback Feature" (``checkpoint NAME [description
TEXT]``, ``no checkpoint NAME``, ``clear checkpoint database``, ``rollback running-config
checkpoint NAME [atomic|best-effort|stop-at-first-failure]`` -- atomic by default: all or
nothing --, ``show checkpoint summary [user|system]``, ``show checkpoint NAME``) and
"Performing Configuration Replace" (the file must be a whole running configuration; the
replace is all or nothing; with ``commit-timeout`` (30-3600 s) the previous running
configuration comes back when the timer expires; ``configure replace commit`` keeps the new
one).

Where the documents are silent the lab chooses, and docs/lab-nxos.md says so: a second
``configure replace`` while a commit timer runs is refused; ``rollback running-config
checkpoint`` is allowed then, and a ``configure replace commit`` after it keeps what the
rollback left (the timer stops). Checkpoints and a running timer live as long as the
management process (a switch reload is not emulated).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from lab.mgmt.cli_grammar import CliError
from lab.mgmt.nxos.config import NxosConfig
from lab.mgmt.switch import Clock, TimerHandle

log = logging.getLogger("lab.mgmt.nxos")
MAX_CHECKPOINTS = 10  # the lab's bound on user checkpoints
ROLLBACK_DONE = "Rollback completed successfully."
REPLACE_DONE = "Configure replace completed successfully."
Install = Callable[[NxosConfig, bool], Awaitable[None]]


@dataclass
class Checkpoint:
    """A named copy of the running configuration."""

    name: str
    config: NxosConfig
    user: str
    created_at: float
    description: str | None = None


@dataclass
class PendingReplace:
    """A ``configure replace ... commit-timeout`` waiting for ``configure replace commit``."""

    previous: NxosConfig
    timeout_s: int
    started: float
    handle: TimerHandle


@dataclass
class Rollbacks:
    """The switch's checkpoints and its configure-replace commit timer."""

    install: Install  # (config, force) -> installed as running, or CliError
    clock: Clock
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    pending: PendingReplace | None = None
    history: list[str] = field(default_factory=list)
    _background: set[asyncio.Future[None]] = field(default_factory=set)

    # ------------------------------------------------------------------ checkpoints

    def create(self, name: str, running: NxosConfig, user: str, description: str | None) -> str:
        """``checkpoint NAME [description TEXT]``."""
        if name in self.checkpoints:
            raise CliError(f"% Checkpoint {name} already exists")
        if name.startswith("system"):
            raise CliError("% Checkpoint names starting with 'system' are reserved")
        if len(self.checkpoints) >= MAX_CHECKPOINTS:
            raise CliError(f"% At most {MAX_CHECKPOINTS} checkpoints; delete one first")
        self.checkpoints[name] = Checkpoint(name, running.clone(), user, time.time(), description)
        return "Done"

    def delete(self, name: str) -> None:
        """``no checkpoint NAME``."""
        if self.checkpoints.pop(name, None) is None:
            raise CliError(f"% Checkpoint {name} does not exist")

    def checkpoint(self, name: str) -> Checkpoint:
        found = self.checkpoints.get(name)
        if found is None:
            raise CliError(f"% Checkpoint {name} does not exist")
        return found

    async def rollback(self, name: str) -> str:
        """``rollback running-config checkpoint NAME``: the whole checkpoint or nothing."""
        saved = self.checkpoint(name).config.clone()
        await self.install(saved, True)
        self.history.append(f"rollback to checkpoint {name}")
        return "\n".join(
            [
                "Note: Applying config parallelly may fail Rollback verification",
                "Collecting Running-Config",
                "#Generating Rollback Patch",
                "Executing Rollback Patch",
                "#Generating Running-config for verification",
                "#Generating Patch for verification",
                ROLLBACK_DONE,
            ]
        )

    # ------------------------------------------------------------------ configure replace

    async def replace(
        self, candidate: NxosConfig, running: NxosConfig, timeout_s: int | None
    ) -> str:
        """``configure replace FILE [commit-timeout N]`` with the file already read."""
        if self.pending is not None:
            raise CliError(
                "% A configure replace is waiting for 'configure replace commit'; "
                "commit it or let its timer expire first"
            )
        await self.install(candidate, False)
        lines = [
            "Collecting Running-Config",
            "Generating Rollback Patch",
            "Validating Patch",
            "Patch validation completed successful",
            "Executing Rollback Patch",
            "Generating Running-config for verification",
            "Generating Patch for verification",
            "Verification is Successful.",
            "",
            REPLACE_DONE,
        ]
        if timeout_s is not None:
            handle = self.clock.schedule(timeout_s, self._timer_fired)
            self.pending = PendingReplace(running.clone(), timeout_s, self.clock.now(), handle)
            lines.append(
                f"Please run 'configure replace commit' within {timeout_s} seconds to keep it."
            )
        timer = f" commit-timeout {timeout_s}" if timeout_s is not None else ""
        self.history.append("configure replace" + timer)
        return "\n".join(lines)

    def commit(self) -> None:
        """``configure replace commit``: the running configuration stays; the timer stops."""
        if self.pending is None:
            raise CliError("% No configure replace is waiting for commit")
        self.pending.handle.cancel()
        self.pending = None
        self.history.append("configure replace commit")

    def left_s(self) -> float | None:
        """Seconds until the commit timer puts the previous configuration back."""
        if self.pending is None:
            return None
        return max(0.0, self.pending.started + self.pending.timeout_s - self.clock.now())

    def _timer_fired(self) -> None:
        task = asyncio.ensure_future(self.run_expired_timers())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def run_expired_timers(self) -> None:
        """The commit timer ran out: the configuration from before the replace comes back
        (called by the timer; a test's fake clock calls it after advancing)."""
        pending = self.pending
        if pending is None or pending.started + pending.timeout_s > self.clock.now():
            return
        self.pending = None
        try:
            await self.install(pending.previous, True)
        except CliError as exc:  # the old configuration ran before; log what refused it now
            log.error("configure replace commit timer: previous configuration refused: %s", exc)
            return
        self.history.append("configure replace commit timer expired: previous config restored")
        log.warning("configure replace: commit timer expired, previous configuration restored")

    def close(self) -> None:
        """Process shutdown: the timer dies with the process."""
        if self.pending is not None:
            self.pending.handle.cancel()

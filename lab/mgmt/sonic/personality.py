"""The switch-wide state of the SONiC personality: CONFIG_DB, checkpoints, /tmp, timers.

It outlives SSH connections (and SSH restarts): a transaction's checkpoint and its
``systemd-run`` rollback timer stay when the agent's connection drops, as on a real switch.
CONFIG_DB is the source of truth; every change is translated
(:func:`lab.mgmt.sonic.translate.to_switch_config`) and installed into the data plane through
:meth:`SwitchManager.install` before it becomes the running CONFIG_DB, so a change the data
plane refuses changes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path

from lab.mgmt.names import interface_number, nos_port_name
from lab.mgmt.sonic.checkpoints import CheckpointStore
from lab.mgmt.sonic.configdb import ConfigDb, ConfigDbFile, SonicPort, clone, factory_config_db
from lab.mgmt.sonic.gcu import CommitError
from lab.mgmt.sonic.shell import SonicShell
from lab.mgmt.sonic.timers import TimerUnits
from lab.mgmt.sonic.translate import SonicTranslationError, to_switch_config
from lab.mgmt.switch import ConfigRefused, SwitchManager

log = logging.getLogger("lab.mgmt.sonic")


def _system_mac(name: str) -> str:
    """A stable, locally administered MAC for DEVICE_METADATA (from the switch name)."""
    digest = hashlib.sha256(name.encode()).digest()
    return "02:" + ":".join(f"{b:02x}" for b in digest[:5])


class SonicPersonality:
    """SONiC: a Linux shell with CONFIG_DB and the Generic Config Updater."""

    nos = "sonic"

    def __init__(self, manager: SwitchManager, state_dir: Path | None = None) -> None:
        self.manager = manager
        self.state_dir = state_dir
        self.ports = [
            SonicPort(
                name=nos_port_name("sonic", interface_number(p.name)),
                index=interface_number(p.name),
                speed_bps=p.speed_bps,
                mtu=p.link.mtu if p.link is not None else None,
            )
            for p in manager.ports
        ]
        self.hostname = manager.name
        self.checkpoints = CheckpointStore(state_dir)
        self.files: dict[str, str] = {}
        self.config_file = ConfigDbFile(state_dir)
        self.timers = TimerUnits(manager.clock, self._run_as_root)
        self.gcu_lock = asyncio.Lock()
        self._db = self.factory()

    # ------------------------------------------------------------------ Personality

    def port_name(self, dataplane_name: str) -> str:
        """``eth2`` -> ``Ethernet4``."""
        return nos_port_name("sonic", int(dataplane_name.removeprefix("eth")))

    async def start(self) -> None:
        """Load config_db.json (factory CONFIG_DB without one) and push it."""
        saved = self.config_file.load()
        candidate = saved if saved is not None else self.factory()
        try:
            await self.commit(candidate, force=True)
        except CommitError as exc:
            log.error("config_db.json not applied (%s); using the factory CONFIG_DB", exc)
            await self.commit(self.factory(), force=True)
        log.info("%s: CONFIG_DB applied to the data plane", self.hostname)

    def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> SonicShell:
        """A bash login shell for a new SSH connection."""
        return SonicShell(self, user, root=user == "root")

    async def close(self) -> None:
        """Cancel timers (process shutdown)."""
        self.timers.cancel_all()

    # ------------------------------------------------------------------ CONFIG_DB

    def factory(self) -> ConfigDb:
        """CONFIG_DB of a new switch (QoS and PFC watchdog initialised)."""
        return factory_config_db(self.hostname, _system_mac(self.hostname), self.ports)

    @property
    def db(self) -> ConfigDb:
        """The running CONFIG_DB (a copy: callers cannot change it behind the data plane)."""
        return clone(self._db)

    async def commit(self, candidate: ConfigDb, force: bool = False) -> None:
        """Translate ``candidate``, install it in the data plane, then make it running."""
        try:
            model = to_switch_config(candidate, self.manager.factory_config())
            await self.manager.install(model, force=force)
        except (SonicTranslationError, ConfigRefused) as exc:
            raise CommitError(f"lab data plane refused the config: {exc}") from None
        self._db = clone(candidate)

    def saved(self) -> ConfigDb | None:
        """``/etc/sonic/config_db.json`` (None when never saved)."""
        return self.config_file.load()

    async def save(self) -> None:
        """``config save``."""
        await asyncio.to_thread(self.config_file.save, self.db)

    async def _run_as_root(self, argv: list[str]) -> str:
        """What a timer's service runs."""
        shell = SonicShell(self, "root", root=True)
        return await shell.run_argv(argv, root=True)

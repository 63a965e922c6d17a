"""The switch-wide state of the NX-OS personality: the running configuration in NX-OS' own
terms (:mod:`lab.mgmt.nxos.config`), checkpoints and the configure-replace commit timer
(:mod:`lab.mgmt.nxos.rollback`), ``bootflash:``, the startup-config, and new terminals.

Every configuration that becomes running -- a CLI line, a ``rollback``, a ``configure replace``
or its timer expiring, the startup-config at boot -- is translated into the shared model
(:mod:`lab.mgmt.nxos.translate`) and installed through :meth:`SwitchManager.install`, the one
path to the data plane; the data plane's refusal is NX-OS' ``%`` error and changes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from lab.mgmt.cli_grammar import CliError
from lab.mgmt.dataplane_qos import TranslationError
from lab.mgmt.names import interface_number, nos_port_name
from lab.mgmt.nxos.bootflash import Bootflash, sftp_factory
from lab.mgmt.nxos.cli import NxosCli
from lab.mgmt.nxos.commands import load_config_text
from lab.mgmt.nxos.config import NxosConfig
from lab.mgmt.nxos.render import render_text
from lab.mgmt.nxos.rollback import Rollbacks
from lab.mgmt.nxos.translate import to_switch_config
from lab.mgmt.persistence import Boot, StartupConfigStore, boot_from_startup
from lab.mgmt.switch import ConfigRefused, SwitchManager

T = TypeVar("T")


class NxosPersonality:
    """Cisco NX-OS (Nexus 9000): MQC QoS, PFC and its watchdog, checkpoints, configure replace
    with commit-timeout, ``<state_dir>/startup-config`` and ``<state_dir>/bootflash/``."""

    nos = "nxos"

    def __init__(self, manager: SwitchManager, state_dir: Path | None = None) -> None:
        self.manager = manager
        self.state_dir = state_dir
        self.running = self.factory_config()
        self.changed_at = time.time()
        self.store = StartupConfigStore(state_dir) if state_dir is not None else None
        self.rollbacks = Rollbacks(self._install_locked, manager.clock)
        files = state_dir / "bootflash" if state_dir is not None else None
        self.bootflash = Bootflash(files)
        # SCP into bootflash: (NX-OS' scp-server); only with a state directory to hold it.
        self.sftp_factory: Any = sftp_factory(files) if files is not None else None
        self._lock = asyncio.Lock()

    def port_name(self, dataplane_name: str) -> str:
        """``eth3`` -> ``Ethernet1/3``."""
        return nos_port_name("nxos", int(dataplane_name.removeprefix("eth")))

    def factory_config(self) -> NxosConfig:
        """Nothing configured: hostname = switch name, every front-panel port present."""
        ports = [nos_port_name("nxos", interface_number(p.name)) for p in self.manager.ports]
        return NxosConfig.empty(self.manager.name, ports)

    async def start(self) -> None:
        """Load the startup-config (if any) and push it; factory config if it is refused."""

        async def install(candidate: NxosConfig) -> None:
            await self._install(candidate, True)

        boot = Boot(self.manager.name, self.factory_config, load_config_text, install,
                    (CliError,), (CliError,))  # fmt: skip
        await boot_from_startup(self.startup_text(), boot)

    async def edit(self, change: Callable[[NxosConfig], T]) -> T:
        """``change`` on a copy of the running configuration, installed whole."""
        async with self._lock:
            candidate = self.running.clone()
            result = change(candidate)
            await self._install(candidate, False)
            return result

    async def _install_locked(self, candidate: NxosConfig, force: bool) -> None:
        """:meth:`_install` for a whole configuration from elsewhere (a rollback, a replace, the
        commit timer), serialised with the CLI's edits."""
        async with self._lock:
            await self._install(candidate, force)

    async def _install(self, candidate: NxosConfig, force: bool) -> None:
        """Make ``candidate`` running through the data plane (CliError if refused)."""
        try:
            await self.manager.install(to_switch_config(candidate), force=force)
        except (ConfigRefused, TranslationError) as exc:
            raise CliError(f"% {exc}") from None
        self.running = candidate
        self.changed_at = time.time()

    def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> NxosCli:
        """A terminal for a new SSH connection (NX-OS logs an admin in at ``switch#``)."""
        return NxosCli(self, user or "admin", system_mac)

    async def save_startup(self) -> None:
        """``copy running-config startup-config``."""
        if self.store is None:
            raise CliError("% No startup-config storage configured")
        text = render_text(self.running, self.changed_at)
        await asyncio.to_thread(self.store.save, text)

    def startup_text(self) -> str | None:
        """The saved startup-config."""
        return self.store.load() if self.store is not None else None

    async def close(self) -> None:
        """Stop the configure-replace timer (process shutdown)."""
        self.rollbacks.close()

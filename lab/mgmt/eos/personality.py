"""The switch-wide state of the EOS personality: config sessions, startup-config, terminals.

EOS' running-config is the shared model itself (:mod:`lab.mgmt.model` mirrors what the
running-config text says), so EOS has no translation of its own: the CLI edits the model and
:class:`~lab.mgmt.switch.SwitchManager` pushes it. Sessions and their commit timers
(:mod:`lab.mgmt.eos.sessions`) and the startup-config file belong to the switch and outlive
SSH connections, as on EOS.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lab.mgmt.cli_grammar import CliError
from lab.mgmt.eos.cli import CliSession
from lab.mgmt.eos.commands import load_config_text
from lab.mgmt.eos.render import render_text
from lab.mgmt.eos.sessions import ConfigSessions
from lab.mgmt.model import SwitchConfig
from lab.mgmt.names import eos_name
from lab.mgmt.persistence import Boot, StartupConfigStore, boot_from_startup
from lab.mgmt.switch import ConfigRefused, SwitchManager


class EosPersonality:
    """Arista EOS: the CLI of :mod:`lab.mgmt.eos.cli` with the switch's config sessions and
    ``<state_dir>/startup-config``."""

    nos = "eos"

    def __init__(self, manager: SwitchManager, state_dir: Path | None = None) -> None:
        self.manager = manager
        self.state_dir = state_dir
        self.sessions = ConfigSessions(manager)
        self.store = StartupConfigStore(state_dir) if state_dir is not None else None
        self._next_terminal = 1

    def port_name(self, dataplane_name: str) -> str:
        """``eth1`` -> ``Ethernet1``."""
        return eos_name(dataplane_name)

    async def start(self) -> None:
        """Load startup-config (if any) and push it; fall back to factory config if refused."""
        manager = self.manager

        async def install(candidate: SwitchConfig) -> None:
            await manager.install(candidate, force=True)

        boot = Boot(manager.name, manager.factory_config, load_config_text, install,
                    (CliError,), (ConfigRefused,))  # fmt: skip
        await boot_from_startup(self.startup_text(), boot)

    def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> CliSession:
        """A terminal for a new SSH connection, named as EOS names them (``vty1``...)."""
        terminal = f"vty{self._next_terminal}"
        self._next_terminal += 1
        return CliSession(self, user, terminal, privileged_login, system_mac)

    async def save_startup(self) -> None:
        """``copy running-config startup-config``."""
        if self.store is None:
            raise CliError("% No startup-config storage configured")
        text = render_text(self.manager.running)
        await asyncio.to_thread(self.store.save, text)

    def startup_text(self) -> str | None:
        """The saved startup-config."""
        return self.store.load() if self.store is not None else None

    async def close(self) -> None:
        """Cancel commit timers and their background work (process shutdown)."""
        self.sessions.close()

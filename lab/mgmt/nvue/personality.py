"""The switch-wide state of the NVUE personality: revisions, the confirm timer, port names.

Every applied revision is translated into the shared model (:mod:`lab.mgmt.nvue.translate`)
and installed through :meth:`SwitchManager.install`, so it reaches the data plane; the data
plane's refusal is NVUE's ``Error: Invalid config``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lab.mgmt.names import interface_number, nos_port_name
from lab.mgmt.nvue.errors import NvueError
from lab.mgmt.nvue.revisions import RevisionStore
from lab.mgmt.nvue.shell import NvueShell
from lab.mgmt.nvue.translate import to_switch_config
from lab.mgmt.nvue.tree import Tree
from lab.mgmt.switch import ConfigRefused, PortInfo, SwitchManager


class NvuePersonality:
    """The switch-wide NVUE state: revisions, the confirm timer, the port names."""

    nos = "nvue"

    def __init__(self, manager: SwitchManager, state_dir: Path | None = None) -> None:
        self.manager = manager
        self.state_dir = state_dir
        self.ports: dict[str, PortInfo] = {
            nos_port_name("nvue", interface_number(p.name)): p for p in manager.ports
        }
        self.store = RevisionStore(self._install, manager.clock, state_dir)
        self.lock = asyncio.Lock()

    @property
    def hostname(self) -> str:
        """The switch's name (NVUE's ``system hostname`` is not emulated)."""
        return self.manager.name

    def port_name(self, dataplane_name: str) -> str:
        """``eth3`` -> ``swp3``."""
        return nos_port_name("nvue", int(dataplane_name.removeprefix("eth")))

    async def start(self) -> None:
        """Apply ``<state_dir>/startup.yaml`` (or NVUE's defaults) to the data plane."""
        await self.store.start(self.factory_tree())

    def factory_tree(self) -> Tree:
        """Every front-panel port configured as a switch port (``type: swp``), nothing else:
        the lab's ports are routed ports with addresses, which NVUE keeps per interface."""
        return {"interface": {name: {"type": "swp"} for name in self.ports}}

    def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> NvueShell:
        """A shell for a new SSH connection."""
        return NvueShell(self, user)

    async def close(self) -> None:
        """Cancel the confirm timer."""
        self.store.close()

    async def _install(self, tree: Tree) -> None:
        """Translate an NVUE tree and push it; the data plane's refusal is NVUE's error."""
        config = to_switch_config(tree, self.manager.name, [p.name for p in self.manager.ports])
        try:
            await self.manager.install(config, force=True)
        except ConfigRefused as exc:
            raise NvueError(f"Error: Invalid config: {exc}") from None

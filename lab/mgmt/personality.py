"""A lab switch's management-plane personality: which NOS its SSH terminals speak.

Every personality drives the same switch: one :class:`~lab.mgmt.switch.SwitchManager` holds
the shared configuration model (:class:`~lab.mgmt.model.SwitchConfig`) and is the only path to
the data plane. EOS edits that model directly; SONiC (CONFIG_DB) and NVUE (revisions) keep
their own native configuration and install its translation into the model with
:meth:`SwitchManager.install`, so a change made through any NOS reaches the same queues,
PFC and ECN. Chosen per node by the topology label ``roce.lab/nos`` (``python -m lab.mgmt
--nos``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from lab.mgmt.cli_session import CliSession
from lab.mgmt.names import eos_name
from lab.mgmt.switch import SwitchManager

NOS_DEFAULT = "eos"
# nos -> "module:factory"; a factory is ``(manager, state_dir) -> Personality``. Imported when
# chosen, so an EOS switch does not load the others.
_FACTORIES = {
    "eos": "lab.mgmt.personality:EosPersonality",
    "sonic": "lab.mgmt.sonic:SonicPersonality",
    "nvue": "lab.mgmt.nvue:NvuePersonality",
}
NOS_NAMES = tuple(_FACTORIES)


class Terminal(Protocol):
    """One SSH shell (or exec request) on the switch."""

    closed: bool

    def prompt(self) -> str:
        """What the terminal prints before reading the next line."""
        ...

    async def execute(self, line: str) -> str:
        """Run one input line; what it prints (without the next prompt)."""
        ...

    def disconnect(self) -> None:
        """The connection closed; switch-wide state (pending changes, timers) stays."""
        ...


class Personality(Protocol):
    """The switch-wide state of one NOS's management plane."""

    nos: str

    def port_name(self, dataplane_name: str) -> str:
        """The NOS name of a data-plane port: ``eth1`` -> ``Ethernet1``, ``Ethernet0``, ``swp1``."""
        ...

    async def start(self) -> None:
        """Load the saved configuration and push it to the data plane."""
        ...

    def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> Terminal:
        """A terminal for a new SSH connection."""
        ...

    async def close(self) -> None:
        """Cancel timers and background work (process shutdown)."""
        ...


class EosPersonality:
    """Arista EOS: the CLI of :mod:`lab.mgmt.cli_session` on the manager's own sessions."""

    nos = "eos"

    def __init__(self, manager: SwitchManager, state_dir: Path | None = None) -> None:
        self.manager = manager
        self.state_dir = state_dir

    def port_name(self, dataplane_name: str) -> str:
        return eos_name(dataplane_name)

    async def start(self) -> None:
        await self.manager.start()

    def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> Terminal:
        terminal = self.manager.new_terminal()
        return CliSession(self.manager, user, terminal, privileged_login, system_mac)

    async def close(self) -> None:
        await self.manager.close()


def create_personality(nos: str, manager: SwitchManager, state_dir: Path | None) -> Personality:
    """The personality named ``nos`` (ValueError naming the known ones otherwise)."""
    target = _FACTORIES.get(nos)
    if target is None:
        raise ValueError(f"unknown NOS {nos!r}: one of {', '.join(NOS_NAMES)}")
    module_name, _, factory_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    personality: Personality = factory(manager, state_dir)
    return personality

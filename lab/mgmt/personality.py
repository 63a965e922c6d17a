"""A lab switch's management-plane personality: which NOS its SSH terminals speak.

Every personality drives the same switch: one :class:`~lab.mgmt.switch.SwitchManager` holds
the shared configuration model (:class:`~lab.mgmt.model.SwitchConfig`) and is the only path to
the data plane. EOS edits that model directly; SONiC (CONFIG_DB), NVUE (revisions) and NX-OS
(its MQC configuration) keep their own native configuration and install its translation into
the model with :meth:`SwitchManager.install`, so a change made through any NOS reaches the same
queues, PFC and ECN. Chosen per node by the topology label ``roce.lab/nos`` (``python -m lab.mgmt
--nos``); each NOS is a package ``lab/mgmt/<nos>/`` of the same shape, registered in
:data:`PERSONALITIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from common.registry import Entry, Registry
from lab.mgmt.switch import SwitchManager


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
        """The NOS name of a data-plane port: ``eth1`` -> ``Ethernet1``, ``Ethernet0``, ``swp1``,
        ``Ethernet1/1``."""
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


PersonalityFactory = Callable[[SwitchManager, Path | None], Personality]
"""What a registered name stands for: ``(manager, state_dir) -> Personality`` (the class)."""

NOS_DEFAULT = "eos"
# Imported when chosen, so an EOS switch does not load the others.
PERSONALITIES: Registry[PersonalityFactory] = Registry(
    "NOS",
    {
        "eos": Entry(
            "lab.mgmt.eos.personality:EosPersonality",
            "Arista EOS: CLI, config sessions with commit timer, startup-config",
        ),
        "sonic": Entry(
            "lab.mgmt.sonic.personality:SonicPersonality",
            "SONiC: Linux shell, CONFIG_DB, checkpoint / apply-patch / rollback",
        ),
        "nvue": Entry(
            "lab.mgmt.nvue.personality:NvuePersonality",
            "NVIDIA Cumulus Linux: Linux shell, nv set / config apply --confirm",
        ),
        "nxos": Entry(
            "lab.mgmt.nxos.personality:NxosPersonality",
            "Cisco NX-OS: MQC QoS CLI, checkpoints, configure replace with commit-timeout",
        ),
    },
)
NOS_NAMES = PERSONALITIES.names


def create_personality(nos: str, manager: SwitchManager, state_dir: Path | None) -> Personality:
    """The personality named ``nos`` (:class:`common.registry.UnknownName` naming the known
    ones otherwise)."""
    return PERSONALITIES.load(nos)(manager, state_dir)

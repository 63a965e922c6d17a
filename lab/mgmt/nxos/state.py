"""What the NX-OS terminal needs of the switch (the personality provides it); a protocol, so
that the terminal does not import the personality that creates it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from lab.mgmt.nxos.bootflash import Bootflash
from lab.mgmt.nxos.config import NxosConfig
from lab.mgmt.nxos.rollback import Rollbacks
from lab.mgmt.switch import SwitchManager

T = TypeVar("T")


class NxosSwitch(Protocol):
    """Switch-wide NX-OS state: the running configuration, checkpoints and the
    configure-replace timer, bootflash:, the startup-config."""

    manager: SwitchManager
    running: NxosConfig
    changed_at: float
    rollbacks: Rollbacks
    bootflash: Bootflash

    def factory_config(self) -> NxosConfig:
        """Nothing configured: the hostname and every port."""
        ...

    async def edit(self, change: Callable[[NxosConfig], T]) -> T:
        """``change`` applied to a copy of the running configuration, installed whole
        (CliError, nothing changed, when a line or the data plane refuses it)."""
        ...

    async def save_startup(self) -> None:
        """``copy running-config startup-config``."""
        ...

    def startup_text(self) -> str | None:
        """The saved startup-config (None when never saved)."""
        ...

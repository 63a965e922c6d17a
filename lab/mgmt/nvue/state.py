"""What the NVUE shell and the ``nv`` command need of the switch (the personality provides
it); a protocol, so that they do not import the personality that creates them."""

from __future__ import annotations

import asyncio
from typing import Protocol

from lab.mgmt.nvue.revisions import RevisionStore
from lab.mgmt.switch import PortInfo, SwitchManager


class NvueSwitch(Protocol):
    """Switch-wide NVUE state: revisions, their lock, the ports by NVUE name."""

    manager: SwitchManager
    ports: dict[str, PortInfo]
    store: RevisionStore
    lock: asyncio.Lock

    @property
    def hostname(self) -> str:
        """The switch's name."""
        ...

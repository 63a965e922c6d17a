"""An in-process NVUE lab switch for unit tests: FakeDataplane, FakeClock, no root.

:class:`NvueSwitch` builds the personality on a :class:`SwitchManager` the way ``python -m
lab.mgmt --nos nvue`` does; :class:`LoopConnection` lets the agent's synchronous NVUE driver
talk to it (each ``show`` runs one terminal line on a private event loop).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.device.platforms.base import Connection
from lab.mgmt.lldp import LldpPeer, PortLink
from lab.mgmt.nvue.personality import NvuePersonality
from lab.mgmt.nvue.shell import NvueShell
from lab.mgmt.switch import PortInfo
from lab.mgmt.testing import FakeSwitch

PORTS = 2


def ports(count: int = PORTS) -> list[PortInfo]:
    """``Ethernet1..N`` at 10 Mb/s; port 1 cabled to a host ``h1``."""
    peer = LldpPeer("h1", "eth1", "02:00:00:00:10:01", "02:00:00:00:10:00", "host", "")
    return [
        PortInfo(f"Ethernet{i}", 10_000_000, PortLink(9100, peer if i == 1 else None))
        for i in range(1, count + 1)
    ]


class NvueSwitch(FakeSwitch[NvuePersonality]):
    """One NVUE switch: its personality, fake data plane and clock."""

    def __init__(self, state_dir: Path | None = None, count: int = PORTS) -> None:
        super().__init__(NvuePersonality, ports(count), state_dir, lambda p: p.store._background)

    def terminal(self, user: str = "cumulus") -> NvueShell:
        """A new SSH shell."""
        return self.personality.new_terminal(user, True, "02:00:00:00:00:01")


async def run(terminal: NvueShell, *lines: str) -> list[str]:
    """Each line's output."""
    return [await terminal.execute(line) for line in lines]


class LoopConnection(Connection):
    """The agent's :class:`Connection` over an in-process NVUE terminal."""

    def __init__(self, switch: NvueSwitch, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(netmiko=None, device="leaf1")
        self.loop = loop
        self.terminal = switch.terminal()
        self.sent: list[str] = []

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        self.sent.append(command)
        return self.loop.run_until_complete(self.terminal.execute(command))

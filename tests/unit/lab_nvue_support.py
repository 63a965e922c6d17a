"""An in-process NVUE lab switch for unit tests: FakeDataplane, FakeClock, no root.

:class:`NvueSwitch` builds the personality on a :class:`SwitchManager` the way ``python -m
lab.mgmt --nos nvue`` does; :class:`LoopConnection` lets the agent's synchronous NVUE driver
talk to it (each ``show`` runs one terminal line on a private event loop).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.device.platforms.base import Connection
from lab.mgmt.lldp import LldpPeer, PortLink
from lab.mgmt.nvue.personality import NvuePersonality
from lab.mgmt.nvue.shell import NvueShell
from lab.mgmt.switch import PortInfo, SwitchManager
from lab.mgmt.testing import FakeClock, FakeDataplane, fake_switch_config

PORTS = 2


def ports(count: int = PORTS) -> list[PortInfo]:
    """``Ethernet1..N`` at 10 Mb/s; port 1 cabled to a host ``h1``."""
    peer = LldpPeer("h1", "eth1", "02:00:00:00:10:01", "02:00:00:00:10:00", "host", "")
    return [
        PortInfo(f"Ethernet{i}", 10_000_000, PortLink(9100, peer if i == 1 else None))
        for i in range(1, count + 1)
    ]


@dataclass
class NvueSwitch:
    """One NVUE switch: its personality, fake data plane and clock."""

    state_dir: Path | None = None
    count: int = PORTS
    dataplane: FakeDataplane = field(init=False)
    clock: FakeClock = field(init=False)
    personality: NvuePersonality = field(init=False)

    def __post_init__(self) -> None:
        names = [f"eth{i}" for i in range(1, self.count + 1)]
        self.dataplane = FakeDataplane(fake_switch_config("leaf1", names))
        self.clock = FakeClock()
        manager = SwitchManager("leaf1", ports(self.count), self.dataplane, self.clock)
        self.personality = NvuePersonality(manager, self.state_dir)

    def terminal(self, user: str = "cumulus") -> NvueShell:
        """A new SSH shell."""
        return self.personality.new_terminal(user, True, "02:00:00:00:00:01")

    def qos(self) -> dict[str, Any]:
        """The QoS the data plane runs now (validated by the fake)."""
        qos: dict[str, Any] = self.dataplane.config["qos"]
        return qos

    async def expire(self, seconds: float) -> None:
        """Move the clock and fire the timers that ran out, as the event loop would."""
        self.clock.advance(seconds)
        for timer in self.clock.timers:
            if not timer.cancelled and timer.when <= self.clock.time:
                timer.cancelled = True
                timer.callback()
        await asyncio.gather(*self.personality.store._background)


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

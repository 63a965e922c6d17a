"""An NX-OS lab switch for unit tests, two ways, no root:

* :class:`NxosSwitch` -- the personality on a :class:`FakeDataplane` and a :class:`FakeClock`,
  driven a terminal line at a time (timers fire when the test moves the clock);
* :func:`ssh_nxos` -- the same personality served over real SSH on loopback
  (:class:`SshSwitchThread`, the real clock), with a netmiko ``cisco_nxos`` connection of the
  agent that records every command it sends (:class:`RecordingSsh`): the driver's SCP upload
  and its transactions run exactly as against a switch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.device.platforms.base import Connection
from lab.mgmt.lldp import LldpPeer, PortLink
from lab.mgmt.nxos.cli import NxosCli
from lab.mgmt.nxos.personality import NxosPersonality
from lab.mgmt.ssh_server import AuthSettings
from lab.mgmt.switch import PortInfo
from lab.mgmt.testing import FakeSwitch, ServedSwitch, SshSwitchThread

PORTS = 3
PASSWORD = "nxos-test"


def ports(count: int = PORTS, speed_bps: int = 10_000_000) -> list[PortInfo]:
    """``Ethernet1..N``; port 1 cabled to host ``h1``, port 2 to switch ``spine1``."""
    host = LldpPeer("h1", "eth1", "02:00:00:00:10:01", "02:00:00:00:10:00", "host", "198.18.0.9")
    spine = LldpPeer("spine1", "Ethernet1", "02:00:00:00:20:01", "02:00:00:00:20:00", "switch")
    peers = {1: host, 2: spine}
    return [
        PortInfo(f"Ethernet{i}", speed_bps, PortLink(9100, peers.get(i)))
        for i in range(1, count + 1)
    ]


class NxosSwitch(FakeSwitch[NxosPersonality]):
    """One NX-OS switch: its personality, fake data plane and clock."""

    def __init__(self, state_dir: Path | None = None, count: int = PORTS) -> None:
        super().__init__(
            NxosPersonality, ports(count), state_dir, lambda p: p.rollbacks._background
        )

    def terminal(self, user: str = "admin") -> NxosCli:
        """A new SSH shell."""
        return self.personality.new_terminal(user, True, "02:00:00:00:00:01")


async def run(terminal: NxosCli, *lines: str) -> list[str]:
    """Each line's output."""
    return [await terminal.execute(line) for line in lines]


class RecordingSsh(Connection):
    """The agent's netmiko connection, recording each command (and configuration line) sent."""

    def __init__(self, netmiko: Any, device: str) -> None:
        super().__init__(netmiko, device)
        self.sent: list[str] = []

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        self.sent.append(command)
        return super().show(command, read_timeout)

    def send_lines(
        self, lines: list[str], read_timeout: float = 30.0, terminator: str = "#"
    ) -> str:
        self.sent.extend(lines)
        return super().send_lines(lines, read_timeout, terminator)


@dataclass
class SshNxos:
    """A served NX-OS switch and the agent's connection to it."""

    thread: SshSwitchThread
    conn: RecordingSsh

    @property
    def personality(self) -> NxosPersonality:
        found = self.thread.personality
        assert isinstance(found, NxosPersonality)
        return found

    def cli(self, *lines: str) -> list[str]:
        """Lines typed on a terminal of its own (an operator beside the agent)."""
        terminal = self.personality.new_terminal("operator", True, "02:00:00:00:00:01")
        return self.thread.call(run(terminal, *lines))


@contextmanager
def ssh_nxos(state: Path, count: int = PORTS) -> Iterator[SshNxos]:
    """An NX-OS switch on loopback SSH and a netmiko ``cisco_nxos`` connection to it."""
    from netmiko import ConnectHandler

    served = ServedSwitch(NxosPersonality, ports(count), AuthSettings("admin", PASSWORD), "leaf1")
    thread = SshSwitchThread(state, served)
    try:
        handle = ConnectHandler(
            device_type="cisco_nxos",
            host="127.0.0.1",
            port=thread.port,
            username="admin",
            password=PASSWORD,
            fast_cli=True,
            allow_agent=False,
            use_keys=False,
        )
        try:
            yield SshNxos(thread, RecordingSsh(handle, "leaf1"))
        finally:
            handle.disconnect()
    finally:
        thread.stop()

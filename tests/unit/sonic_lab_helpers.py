"""An in-process SONiC lab switch for the unit tests: FakeDataplane, FakeClock, no root."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lab.mgmt.sonic.personality import SonicPersonality
from lab.mgmt.sonic.shell import SonicShell
from lab.mgmt.switch import PortInfo, SwitchManager
from lab.mgmt.testing import FakeClock, FakeDataplane, fake_switch_config

DATAPLANE_PORTS = ["eth1", "eth2"]


class LabSonic:
    """A started SONiC personality and an ``admin`` shell on it."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.dataplane = FakeDataplane(fake_switch_config("leaf1", DATAPLANE_PORTS))
        self.clock = FakeClock()
        self.state_dir = state_dir

    async def start(self) -> LabSonic:
        ports = [PortInfo(f"Ethernet{i}", 10_000_000) for i in range(1, len(DATAPLANE_PORTS) + 1)]
        self.manager = SwitchManager("leaf1", ports, self.dataplane, self.clock)
        self.switch = SonicPersonality(self.manager, self.state_dir)
        await self.switch.start()
        self.shell: SonicShell = self.switch.new_terminal("admin", False, "02:00:00:00:00:01")
        return self

    async def run(self, *lines: str) -> str:
        """Run lines in the admin shell; the last line's output."""
        output = ""
        for line in lines:
            output = await self.shell.execute(line)
        return output

    async def write(self, path: str, text: str) -> None:
        """``cat > path <<'EOF'`` ... ``EOF`` as the agent writes its patch."""
        await self.run(f"cat > {path} <<'EOF'", *text.splitlines(), "EOF")

    async def fire_timers(self, seconds: float) -> None:
        """Move the clock on and run what became due (as the asyncio loop would)."""
        self.clock.advance(seconds)
        for timer in list(self.clock.timers):
            if not timer.cancelled and timer.when <= self.clock.time:
                timer.cancelled = True
                timer.callback()
        await self.switch.timers.drain()

    def qos(self) -> dict[str, Any]:
        """The last payload the data plane accepted."""
        return self.dataplane.set_qos_calls[-1]


def run(coro: Any) -> Any:
    return asyncio.run(coro)

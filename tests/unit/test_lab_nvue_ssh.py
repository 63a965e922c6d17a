"""The NVUE personality over SSH without root: netmiko's ``linux`` driver and the agent's NVUE
driver against the real SSH server (in-process, fake data plane, the real asyncio clock)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from netmiko import ConnectHandler

from agent.device.platforms.base import Connection
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.state import diff
from lab.mgmt.nvue import NvuePersonality
from lab.mgmt.persistence import load_or_create_host_key
from lab.mgmt.ssh_server import AuthSettings, start_ssh_server
from lab.mgmt.switch import LoopClock, SwitchManager
from lab.mgmt.testing import FakeDataplane, fake_switch_config
from tests.unit.lab_nvue_support import ports
from tests.unit.platform_helpers import single_device_plan

USER = "cumulus"
PASSWORD = "CumulusLinux!"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class NvueServer:
    """``python -m lab.mgmt --nos nvue``'s SSH plane on its own event loop thread."""

    def __init__(self, state: Path) -> None:
        self.port = free_port()
        self.state = state
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.dataplane = FakeDataplane(fake_switch_config("leaf1", ["eth1", "eth2"]))
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        manager = SwitchManager("leaf1", ports(2), self.dataplane, LoopClock())
        personality = NvuePersonality(manager, self.state)
        await personality.start()
        key = load_or_create_host_key(self.state)
        auth = AuthSettings(USER, PASSWORD)
        server = await start_ssh_server(
            "127.0.0.1", self.port, key, auth, manager, personality=personality
        )
        self._stop = asyncio.Event()
        self.ready.set()
        await self._stop.wait()
        server.close()
        await personality.close()

    def stop(self) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)

    def no_drop(self) -> Any:
        return self.dataplane.config["qos"]["ports"]["eth1"]["pfc_priorities"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NvueServer]:
    thread = NvueServer(tmp_path)
    try:
        yield thread
    finally:
        thread.stop()


def connect(server: NvueServer) -> Any:
    return ConnectHandler(
        device_type="linux",
        host="127.0.0.1",
        port=server.port,
        username=USER,
        password=PASSWORD,
    )


def test_netmiko_linux_finds_the_cumulus_prompt_and_runs_nv(server: NvueServer) -> None:
    with connect(server) as ssh:
        assert ssh.find_prompt() == "cumulus@leaf1:mgmt:~$"
        assert ssh.send_command("nv set qos roce") == ""
        assert ssh.send_command("nv config apply -y") == "applied [rev_id: 2]"
        assert ssh.send_command("uptime") == "-bash: uptime: command not found"
    assert server.no_drop() == [3]


def test_the_agents_driver_pushes_and_reads_back_over_ssh(server: NvueServer) -> None:
    driver = CumulusNvue()
    device = single_device_plan(
        "cumulus_nvue", [("swp1", "10M", 5), ("swp2", "10M", 30)], "nvidia-default"
    )
    with connect(server) as ssh:
        conn = Connection(ssh, "leaf1")
        with driver.transaction(conn, driver.render(device), 60) as txn:
            driver.confirm(conn, txn)
        found = diff("leaf1", driver.desired(device), driver.read_state(conn), driver.managed)
    assert found == []
    assert (server.state / "startup.yaml").exists()


def test_an_unconfirmed_apply_outlives_its_connection_and_the_timer_rolls_it_back(
    server: NvueServer,
) -> None:
    with connect(server) as ssh:
        ssh.send_command("nv set qos roce")
        assert ssh.send_command("nv config apply --confirm 2s -y").startswith("applied")
    assert server.no_drop() == [3]
    with connect(server) as ssh:
        assert "seconds left" in ssh.send_command("nv config apply --confirm-status")
        deadline = time.monotonic() + 10
        while server.no_drop() == [3] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.no_drop() == []
        assert ssh.send_command("nv config apply --confirm-status") == (
            "No applied revision is waiting for confirmation"
        )

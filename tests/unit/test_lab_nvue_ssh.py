"""The NVUE personality over SSH without root: netmiko's ``linux`` driver and the agent's NVUE
driver against the real SSH server (in-process, fake data plane, the real asyncio clock)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from netmiko import ConnectHandler

from agent.device.platforms.base import Connection
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.state import diff
from lab.mgmt.nvue.personality import NvuePersonality
from lab.mgmt.ssh_server import AuthSettings
from lab.mgmt.testing import ServedSwitch, SshSwitchThread
from tests.unit.lab_nvue_support import ports
from tests.unit.platform_helpers import single_device_plan

USER = "cumulus"
PASSWORD = "CumulusLinux!"


def no_drop(server: SshSwitchThread) -> Any:
    return server.dataplane.config["qos"]["ports"]["eth1"]["pfc_priorities"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SshSwitchThread]:
    """``python -m lab.mgmt --nos nvue``'s SSH plane in this process (fake data plane)."""
    served = ServedSwitch(NvuePersonality, ports(2), AuthSettings(USER, PASSWORD))
    thread = SshSwitchThread(tmp_path, served)
    try:
        yield thread
    finally:
        thread.stop()


def connect(server: SshSwitchThread) -> Any:
    return ConnectHandler(
        device_type="linux",
        host="127.0.0.1",
        port=server.port,
        username=USER,
        password=PASSWORD,
    )


def test_netmiko_linux_finds_the_cumulus_prompt_and_runs_nv(server: SshSwitchThread) -> None:
    with connect(server) as ssh:
        assert ssh.find_prompt() == "cumulus@leaf1:mgmt:~$"
        assert ssh.send_command("nv set qos roce") == ""
        assert ssh.send_command("nv config apply -y") == "applied [rev_id: 2]"
        assert ssh.send_command("uptime") == "-bash: uptime: command not found"
    assert no_drop(server) == [3]


def test_the_agents_driver_pushes_and_reads_back_over_ssh(server: SshSwitchThread) -> None:
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
    server: SshSwitchThread,
) -> None:
    with connect(server) as ssh:
        ssh.send_command("nv set qos roce")
        assert ssh.send_command("nv config apply --confirm 2s -y").startswith("applied")
    assert no_drop(server) == [3]
    with connect(server) as ssh:
        assert "seconds left" in ssh.send_command("nv config apply --confirm-status")
        deadline = time.monotonic() + 10
        while no_drop(server) == [3] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert no_drop(server) == []
        assert ssh.send_command("nv config apply --confirm-status") == (
            "No applied revision is waiting for confirmation"
        )

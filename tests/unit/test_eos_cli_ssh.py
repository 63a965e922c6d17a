"""lab.mgmt over SSH without root: netmiko's ``arista_eos`` driver against the real SSH server
(in-process, fake data plane), the terminal line discipline, authentication, exec requests,
and the ``python -m lab.mgmt`` process behind ``start_management`` with a fake control socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from netmiko import ConnectHandler
from netmiko.exceptions import NetmikoAuthenticationException

from lab.mgmt.__main__ import UsageError, parse_listen
from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.launcher import (
    ManagementOptions,
    ManagementStartError,
    PortTaken,
    start_management,
    stop_management,
)
from lab.mgmt.ssh_server import AuthSettings, LineDiscipline
from lab.mgmt.switch import PortInfo
from lab.mgmt.testing import FakeDataplane, ServedSwitch, SshSwitchThread, fake_switch_config
from tests.unit.control_socket import FakeControlSocket

REPO = Path(__file__).resolve().parents[2]
PORTS = ["eth1", "eth2", "eth3"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ----------------------------------------------------------------------------- line discipline


def test_line_discipline_echoes_once_and_splits_crlf() -> None:
    written: list[str] = []
    discipline = LineDiscipline(written.append, echo=True)
    discipline.feed("sho")
    assert "".join(written) == "sho"
    discipline.feed("w ver\r\nconf t\nend\r")
    assert list(discipline.lines) == [("show ver", 3), ("conf t", 0), ("end", 0)]
    assert "".join(written) == "sho"  # queued lines are echoed when their turn comes
    discipline.lines.clear()
    discipline.feed("\nab")
    assert list(discipline.lines) == []  # the LF after CR is not an empty line
    discipline.feed("\x7f")
    discipline.feed("c")
    assert "".join(written).endswith("ab\b \bc")
    discipline.feed("\x03")
    assert discipline.interrupted and list(discipline.lines) == []


def test_line_discipline_without_pty_does_not_echo() -> None:
    written: list[str] = []
    discipline = LineDiscipline(written.append, echo=False)
    discipline.feed("show version\n")
    assert written == [] and list(discipline.lines) == [("show version", 0)]


# ----------------------------------------------------------------------------- in-process server


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("client-key")
    key = asyncssh.generate_private_key("ssh-ed25519")
    private = directory / "id_ed25519"
    private.write_bytes(key.export_private_key())
    private.chmod(0o600)
    authorized = directory / "authorized_keys"
    authorized.write_bytes(key.export_public_key())
    return private, authorized


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, client_key: tuple[Path, Path]
) -> Iterator[SshSwitchThread]:
    """The EOS switch's SSH plane in this process (fake data plane), as
    ``python -m lab.mgmt`` serves it: startup-config and host key under its state dir."""
    ports = [PortInfo(f"Ethernet{i}", 10_000_000) for i in range(1, 4)]
    auth = AuthSettings("admin", "admin", str(client_key[1]))
    served = ServedSwitch(EosPersonality, ports, auth)
    thread = SshSwitchThread(tmp_path_factory.mktemp("state"), served)
    try:
        yield thread
    finally:
        thread.stop()


def connect(server: SshSwitchThread, **extra: Any) -> Any:
    params: dict[str, Any] = {
        "device_type": "arista_eos",
        "host": "127.0.0.1",
        "port": server.port,
        "username": "admin",
        "password": "admin",
    }
    params.update(extra)
    return ConnectHandler(**params)


LOSSLESS = [
    "qos map dscp 26 to traffic-class 3",
    "qos profile ROCE",
    "priority-flow-control on",
    "priority-flow-control priority 3 no-drop",
    "uc-tx-queue 3",
    "random-detect ecn minimum-threshold 15 kbytes maximum-threshold 45 kbytes",
    "bandwidth percent 50",
    "uc-tx-queue 6",
    "priority strict",
    "interface Ethernet1-3",
    "service-profile ROCE",
]


def test_netmiko_arista_eos_driver_works_unchanged(server: SshSwitchThread) -> None:
    conn = connect(server, fast_cli=True)
    try:
        assert conn.base_prompt == "leaf1"
        assert conn.find_prompt() == "leaf1#"
        assert conn.check_enable_mode()
        assert not conn.check_config_mode()
        output = conn.send_config_set(LOSSLESS)
        assert "% " not in output
        assert "leaf1(config-qos-profile-ROCE-uc-txq-3)#" in output
        assert not conn.check_config_mode()
        conn.config_mode()
        assert conn.check_config_mode()
        conn.exit_config_mode()
        assert not conn.check_config_mode()
        running = conn.send_command("show running-config section ROCE")
        assert "   service-profile ROCE" in running
        counters = json.loads(conn.send_command("show priority-flow-control counters | json"))
        assert set(counters["interfaceCounters"]) == {"Ethernet1", "Ethernet2", "Ethernet3"}
        unsaved = conn.send_command("show running-config diffs").splitlines()
        assert unsaved[:2] == ["--- flash:/startup-config", "+++ system:/running-config"]
        assert "+   service-profile ROCE" in unsaved  # what a reload would lose
        saved = conn.save_config()
        assert "Copy completed successfully." in saved
        assert "qos profile ROCE" in (server.state / "startup-config").read_text()
        assert conn.send_command("show running-config diffs") == ""
        bad = conn.send_config_set(["interface Ethernet7", "qos map dscp 80 to traffic-class 1"])
        assert "% Invalid input (at token 1: 'Ethernet7')" in bad
        assert "% Invalid input (at token 3: '80')" in bad
    finally:
        conn.disconnect()
    assert server.dataplane.config["qos"]["ports"]["eth2"]["pfc_priorities"] == [3]


def test_netmiko_config_session_flow(server: SshSwitchThread) -> None:
    conn = connect(server)
    try:
        out = conn.send_config_set(
            ["interface Ethernet1", "description via session"],
            config_mode_command="configure session netmiko1",
            exit_config_mode=False,
        )
        assert "leaf1(config-s-netmiko1-if-Et1)#" in out
        diff = conn.send_command("show session-config diffs")
        assert "+   description via session" in diff
        assert conn.check_config_mode()
        conn.send_command("commit", expect_string=r"leaf1#")
        assert not conn.check_config_mode()
        assert "description via session" in conn.send_command("show running-config")
    finally:
        conn.disconnect()


def test_user_exec_login_needs_enable(server: SshSwitchThread) -> None:
    conn = connect(server)
    try:
        assert conn.send_command("disable", expect_string=r"leaf1>") == ""
        assert not conn.check_enable_mode()
        conn.enable()
        assert conn.check_enable_mode()
    finally:
        conn.disconnect()


def test_wrong_password_is_refused(server: SshSwitchThread) -> None:
    with pytest.raises(NetmikoAuthenticationException):
        connect(server, password="nope")


def test_public_key_login(server: SshSwitchThread, client_key: tuple[Path, Path]) -> None:
    conn = connect(server, password=None, use_keys=True, key_file=str(client_key[0]))
    try:
        assert conn.find_prompt() == "leaf1#"
    finally:
        conn.disconnect()


def test_exec_request_and_dropped_connection_keeps_session(server: SshSwitchThread) -> None:
    async def scenario() -> None:
        async with asyncssh.connect(
            "127.0.0.1", server.port, username="admin", password="admin", known_hosts=None
        ) as ssh:
            result = await ssh.run("show hostname | json", check=True)
            assert json.loads(str(result.stdout)) == {"hostname": "leaf1", "fqdn": "leaf1"}
            process = await ssh.create_process(term_type="vt100")
            process.stdin.write("configure session dropme\ninterface Ethernet2\nshutdownx\n")
            await asyncio.sleep(0.5)
            process.stdin.write("priority-flow-control on\n")
            await asyncio.sleep(0.3)

    before = server.dataplane.config["qos"]
    asyncio.run(scenario())
    assert isinstance(server.personality, EosPersonality)
    deadline = time.monotonic() + 5
    while server.personality.sessions["dropme"].owner is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    # Kept like on EOS (pending, no terminal), and it never touched the running config.
    assert server.personality.sessions["dropme"].state == "pending"
    assert server.personality.sessions["dropme"].owner is None
    assert server.dataplane.config["qos"] == before


# ----------------------------------------------------------------------------- the real process


def test_listen_address_must_be_loopback() -> None:
    assert parse_listen("127.0.0.1:2201") == ("127.0.0.1", 2201)
    assert parse_listen("127.3.4.5:22") == ("127.3.4.5", 22)
    for bad in (
        "10.0.0.1:22",
        "0.0.0.0:22",
        "198.18.0.1:22",
        "localhost:22",
        "127.0.0.1",
        "::1:22",
    ):
        with pytest.raises(UsageError):
            parse_listen(bad)
    proc = subprocess.run(
        [sys.executable, "-m", "lab.mgmt", "--name", "x", "--listen", "192.0.2.1:22",
         "--control", "/nonexistent", "--state-dir", "/tmp/never-used-lab-mgmt"],
        capture_output=True, text=True, cwd=REPO, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "loopback (127.0.0.0/8) only" in proc.stderr


def test_process_saves_and_restores_startup_config(tmp_path: Path) -> None:
    control = FakeControlSocket(
        tmp_path / "control.sock",
        FakeDataplane(fake_switch_config("leaf9", PORTS), {"ports": {}}),
    )
    port = free_port()
    state = tmp_path / "state"
    try:
        proc = start_management(
            ManagementOptions(
                "leaf9",
                "127.0.0.1",
                port,
                str(control.path),
                state,
                "admin",
                "s3cret",
                ["eth1", "eth2"],
            )
        )
        try:
            assert (state / "login-password").stat().st_mode & 0o777 == 0o600
            assert "s3cret" not in " ".join(map(str, proc.args))  # type: ignore[arg-type]
            conn = connect_process(port)
            conn.send_config_set(["interface Ethernet2", "priority-flow-control on"])
            status = json.loads(conn.send_command("show interfaces status | json"))
            assert set(status["interfaceStatuses"]) == {"Ethernet1", "Ethernet2"}
            assert "Copy completed" in conn.send_command("write memory")
            conn.disconnect()
        finally:
            assert stop_management(proc) == 0
        control.dataplane.config["qos"] = {}  # a fresh data plane after a "reload"
        proc = start_management(
            ManagementOptions(
                "leaf9", "127.0.0.1", port, str(control.path), state, "admin", "s3cret"
            )
        )
        try:
            assert control.dataplane.config["qos"]["ports"]["eth2"]["pfc_enabled"] is True
            conn = connect_process(port)
            assert "priority-flow-control on" in conn.send_command(
                "show running-config section Ethernet2"
            )
            conn.disconnect()
        finally:
            stop_management(proc)
    finally:
        control.close()


def connect_process(port: int) -> Any:
    return ConnectHandler(
        device_type="arista_eos", host="127.0.0.1", port=port, username="admin", password="s3cret"
    )


def test_start_management_reports_a_dead_data_plane(tmp_path: Path) -> None:
    with pytest.raises(ManagementStartError, match="exited with 1"):
        start_management(
            ManagementOptions("leaf8", "127.0.0.1", free_port(), str(tmp_path / "missing.sock"),
                          tmp_path / "s", "admin", "pw", dataplane_wait=0.5),
            timeout=30,
        )  # fmt: skip


def test_another_ssh_server_on_the_port_is_not_taken_for_this_switch(tmp_path: Path) -> None:
    """The port was free when the lab allocated it, then another switch (another lab coming
    up beside this one) bound it first: its banner must not pass for this switch's, and the
    process that cannot bind says its port is taken, so the lab can pick another."""
    control = FakeControlSocket(
        tmp_path / "control.sock",
        FakeDataplane(fake_switch_config("leaf9", PORTS), {"ports": {}}),
    )
    port = free_port()
    squatter = socket.create_server(("127.0.0.1", port))
    stop = threading.Event()

    def banner() -> None:  # what any SSH server sends first (RFC 4253 4.2)
        squatter.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = squatter.accept()
                with conn:
                    conn.sendall(b"SSH-2.0-OtherLabSwitch\r\n")

    thread = threading.Thread(target=banner, daemon=True)
    thread.start()
    try:
        with pytest.raises(PortTaken, match="exited with 3"):
            start_management(
                ManagementOptions("leaf7", "127.0.0.1", port, str(control.path), tmp_path / "s",
                              "admin", "pw"),
                timeout=30,
            )  # fmt: skip
    finally:
        stop.set()
        thread.join()
        squatter.close()
        control.close()

"""Connecting to a device (agent.device.ssh): one budget, one classified line per failure.

Table-driven over local peers on 127.0.0.1 (tests/unit/ssh_peers.py): for each way a device
can fail -- nothing listening, a listener that never speaks, garbage, an endless banner, a
peer that hangs up, a wrong password, an unknown, changed or downgraded host key, a shell
that never prompts -- the failure's kind, its one line, the time it took against the budget,
and that nothing (no paramiko traceback) was printed.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.device import hostkeys, ssh
from agent.device.failures import Unreachable
from agent.device.platforms import platform_for
from agent.intent.model import Device
from tests.unit.ssh_peers import (
    Behaviour,
    FakeSwitch,
    RawPeer,
    banner_of,
    close_at_once,
    closed_port,
    garbage,
    garbage_lines,
    many_lines,
    silent,
)

BUDGET_S = 1.5
SLACK_S = 1.0  # threads, the interpreter, a loaded CI machine
PASSWORD_ENV = "ROCE_TEST_SSH_PASSWORD"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A short budget, no real ~/.ssh, a state dir of the test's own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(hostkeys, "SYSTEM_KNOWN_HOSTS", tmp_path / "etc_ssh_known_hosts")
    monkeypatch.setattr(hostkeys, "_settings", hostkeys.Settings(state_dir=tmp_path / "state"))
    monkeypatch.setenv(PASSWORD_ENV, "right")
    ssh.configure(connect_timeout_s=BUDGET_S)
    yield
    ssh.configure(connect_timeout_s=ssh.CONNECT_TIMEOUT_S)


def device(port: int, **extra: Any) -> Device:
    return Device(
        name="leaf1", platform="arista_eos", role="leaf", host="127.0.0.1", port=port,
        username="admin", credentials={"password_env": PASSWORD_ENV}, **extra,
    )  # fmt: skip


def attempt(dev: Device) -> tuple[Unreachable, float]:
    started = time.monotonic()
    with pytest.raises(Unreachable) as caught:
        conn = ssh.connect(dev, platform_for(dev.platform))
        conn.close()
    return caught.value, time.monotonic() - started


def assert_one_quiet_line(failure: Unreachable, capfd: pytest.CaptureFixture[str]) -> None:
    time.sleep(0.3)  # paramiko's transport thread logs as it dies, after connect returned
    message = str(failure)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(f"leaf1: {failure.kind}: ") and ". Fix: " in message
    printed = capfd.readouterr()
    assert printed.err == "" and printed.out == "", "the libraries printed something"


# ------------------------------------------------------------------ peers that are not SSH


@dataclass(frozen=True)
class RawCase:
    behaviour: Behaviour
    kind: str
    says: str
    at_most_s: float = BUDGET_S


RAW_CASES = {
    "never speaks": RawCase(silent, "timed out", "accepted TCP but sent no SSH banner"),
    "garbage": RawCase(garbage, "protocol error", "a line of more than 8192 bytes", 0.5),
    "1 MB banner line": RawCase(
        banner_of(1 << 20), "protocol error", "a line of more than 8192 bytes", 0.5
    ),
    # paramiko gives up after 100 lines; the 1024-line cap holds for a longer wait per line
    "2000 lines before the version": RawCase(
        many_lines(2000), "protocol error", "is not an SSH server: no SSH version line", 0.5
    ),
    "an HTTP server": RawCase(
        garbage_lines, "protocol error", "no SSH version line (it sent 'HTTP/1.1 400 Bad"
    ),
    "hangs up at once": RawCase(
        close_at_once, "unreachable", "closed the connection before its SSH banner"
    ),
}


@pytest.mark.parametrize("case", list(RAW_CASES.values()), ids=list(RAW_CASES))
def test_a_peer_that_is_not_ssh_is_one_classified_line_within_the_budget(
    case: RawCase, capfd: pytest.CaptureFixture[str]
) -> None:
    peer = RawPeer(case.behaviour)
    try:
        failure, took = attempt(device(peer.port))
    finally:
        peer.close()
    assert failure.kind == case.kind, str(failure)
    assert case.says in str(failure)
    assert f"127.0.0.1:{peer.port}" in str(failure)
    assert took <= case.at_most_s + SLACK_S
    assert_one_quiet_line(failure, capfd)


def test_nothing_listening_is_retried_inside_the_budget(capfd: pytest.CaptureFixture[str]) -> None:
    failure, took = attempt(device(closed_port()))
    assert failure.kind == "unreachable"
    assert "refused or dropped the TCP connection (Connection refused)" in str(failure)
    assert "attempts in" in str(failure)  # retried, and says so
    assert took <= BUDGET_S + SLACK_S
    assert_one_quiet_line(failure, capfd)


def test_a_peer_that_hangs_up_is_retried_until_the_budget_ends() -> None:
    peer = RawPeer(close_at_once)
    try:
        failure, took = attempt(device(peer.port))
    finally:
        peer.close()
    assert peer.accepted >= 2 and f"({peer.accepted} attempts in" in str(failure)
    assert took <= BUDGET_S + SLACK_S


@pytest.mark.parametrize("budget_s", [0.5, 2.5])
def test_the_budget_is_the_bound_whatever_it_is(budget_s: float) -> None:
    ssh.configure(connect_timeout_s=budget_s)
    peer = RawPeer(silent)
    try:
        failure, took = attempt(device(peer.port))
    finally:
        peer.close()
    assert f"within the {budget_s:g} s connect budget" in str(failure)
    assert budget_s - 0.1 <= took <= budget_s + SLACK_S


@pytest.mark.parametrize("value", [0.0, -1.0, 601.0, float("nan")])
def test_a_budget_out_of_bounds_is_refused(value: float) -> None:
    with pytest.raises(Exception, match="connect timeout: Expected: more than 0 s"):
        ssh.configure(connect_timeout_s=value)


# ------------------------------------------------------------------ a real SSH server


@pytest.fixture
def switch() -> Iterator[FakeSwitch]:
    server = FakeSwitch()
    yield server
    server.stop()


def test_a_good_login_gives_a_session(switch: FakeSwitch, tmp_path: Path) -> None:
    switch.replies["show version"] = "Arista vEOS"
    dev = device(switch.port, known_hosts=switch.known_hosts(tmp_path / "kh"))
    conn = ssh.connect(dev, platform_for("arista_eos"))
    try:
        assert conn.show("show version") == "Arista vEOS"
    finally:
        conn.close()


def test_wrong_password_names_user_and_source_never_the_secret(
    switch: FakeSwitch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv(PASSWORD_ENV, "wrong-secret-123")
    dev = device(switch.port, known_hosts=switch.known_hosts(tmp_path / "kh"))
    failure, _ = attempt(dev)
    message = str(failure)
    assert failure.kind == "authentication failed"
    assert f"refused user 'admin' (password from ${PASSWORD_ENV})" in message
    assert "wrong-secret-123" not in message
    assert_one_quiet_line(failure, capfd)


def test_a_password_file_is_named_as_the_source(switch: FakeSwitch, tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("wrong\n")
    secret.chmod(0o600)
    dev = device(switch.port, known_hosts=switch.known_hosts(tmp_path / "kh"))
    dev = dev.model_copy(update={"credentials": dev.credentials.model_copy(  # type: ignore[union-attr]
        update={"password_env": None, "password_file": secret})})  # fmt: skip
    failure, _ = attempt(dev)
    assert f"(password from {secret})" in str(failure)


def test_an_unknown_host_key_is_refused_before_the_password(
    switch: FakeSwitch, capfd: pytest.CaptureFixture[str]
) -> None:
    failure, _ = attempt(device(switch.port))
    assert failure.kind == "host key unknown"
    assert "--trust-on-first-use" in str(failure)
    assert switch.logins == 0
    assert_one_quiet_line(failure, capfd)


def test_a_changed_host_key_is_refused_before_the_password(
    switch: FakeSwitch, capfd: pytest.CaptureFixture[str]
) -> None:
    import asyncssh

    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    failure, _ = attempt(device(switch.port, host_key=" ".join(other.split()[:2])))
    assert failure.kind == "host key changed" and "has changed" in str(failure)
    assert switch.logins == 0
    assert_one_quiet_line(failure, capfd)


def test_a_host_key_type_downgrade_is_refused_as_a_change(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The device's ed25519 key is known; a server that offers only RSA is not taken for an
    unknown host (no trust-on-first-use of the weaker key), and nothing is printed."""
    import asyncssh

    hostkeys.configure(trust_on_first_use=True)
    known = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    server = FakeSwitch(key_type="ssh-rsa")
    try:
        failure, _ = attempt(device(server.port, host_key=" ".join(known.split()[:2])))
    finally:
        server.stop()
        hostkeys.configure(trust_on_first_use=False)
    assert failure.kind == "host key changed"
    assert "Actual: no key of that type offered" in str(failure)
    assert server.logins == 0
    assert not (tmp_path / "state/known_hosts").exists()
    assert_one_quiet_line(failure, capfd)


def test_a_shell_that_never_prompts_times_out_a_budget_after_the_login(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Logged in, no prompt ever: the first prompt gets the budget again (a slow login shell
    is not a dead one), then `timed out`, one line."""
    server = FakeSwitch(mute=True)
    try:
        known = server.known_hosts(tmp_path / "kh")
        failure, took = attempt(device(server.port, known_hosts=known))
    finally:
        server.stop()
    assert failure.kind == "timed out"
    assert "logged in to" in str(failure) and "did not answer in time" in str(failure)
    assert f"no prompt within {BUDGET_S:g} s after the login" in str(failure)
    assert BUDGET_S - 0.1 <= took <= 2 * BUDGET_S + SLACK_S
    assert_one_quiet_line(failure, capfd)


# ------------------------------------------------------------------ replies


def test_an_endless_reply_stops_at_the_cap(tmp_path: Path) -> None:
    from agent.device.failures import CommandFailed

    server = FakeSwitch(endless=True)
    try:
        dev = device(server.port, known_hosts=server.known_hosts(tmp_path / "kh"))
        conn = ssh.cap_replies(ssh.connect(dev, platform_for("arista_eos")), limit=2_000_000)
        try:
            with pytest.raises(CommandFailed) as caught:
                conn.show("show running-config")
        finally:
            conn.close()
    finally:
        server.stop()
    message = str(caught.value)
    assert message.startswith("leaf1: command failed: the reply to 'show running-config'")
    assert "exceeded the 1 MiB reply cap" in message
    assert server.sent < 16 * 2_000_000  # the server was stopped soon after the cap


def test_the_reply_cap_counts_each_command_afresh() -> None:
    """Each buffer is counted as it is read (a reply that never pauses is stopped in the
    middle of netmiko's read), and a new command starts from zero."""
    written: list[str] = []
    buffers = iter(["a" * 300, "a" * 300, "", "b" * 600, "", "c" * 500, "c" * 500, "c" * 500])

    class Channel:
        def read_buffer(self) -> str:
            return next(buffers)

    class Handle:
        channel = Channel()

        def write_channel(self, data: str) -> None:
            written.append(data)

    handle = Handle()
    meter = ssh.ReplyMeter(handle, "leaf1", limit=1000)
    handle.write_channel("show one\n")
    assert handle.channel.read_channel() == "a" * 600  # type: ignore[attr-defined]
    handle.write_channel("show two\n")  # a new command: counted from zero
    assert handle.channel.read_channel() == "b" * 600  # type: ignore[attr-defined]
    handle.write_channel("show three\n")
    with pytest.raises(Exception, match="the reply to 'show three' exceeded"):
        handle.channel.read_channel()  # type: ignore[attr-defined]
    assert meter.size == 1500 and written == ["show one\n", "show two\n", "show three\n"]


LOGS = """
import logging, sys
import agent.device.ssh
if sys.argv[1] == "debug":
    handler = logging.StreamHandler(sys.stderr)
    logging.getLogger("roce_agent").addHandler(handler)
    logging.getLogger("roce_agent").setLevel(logging.DEBUG)
logging.getLogger("paramiko.transport").error("Exception (client): banner")
logging.getLogger("netmiko").warning("something")
"""


@pytest.mark.parametrize(
    ("mode", "printed"),
    [
        ("quiet", ""),
        ("debug", "paramiko.transport: Exception (client): banner\nnetmiko: something\n"),
    ],
)
def test_library_logs_reach_the_agent_log_at_debug_only(mode: str, printed: str) -> None:
    """Python's last-resort handler printed paramiko's ERROR records (tracebacks of failed
    banner reads) on stderr; now they are the agent's debug records, shown with --debug."""
    done = subprocess.run(
        [sys.executable, "-c", LOGS, mode], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.stderr == printed and done.stdout == ""


def test_the_command_line_default_is_the_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.app.cli import main

    option = next(p for p in main.params if p.name == "connect_timeout")
    assert option.type.convert(option.default, option, None) == ssh.CONNECT_TIMEOUT_S


# ------------------------------------------------------------------ the banner guard itself


@pytest.mark.parametrize(
    ("sent", "refused"),
    [
        (b"hello\r\n" * 1100, "more than 1024 lines before any SSH version line"),
        (b"x" * 9000, "a line of more than 8192 bytes"),
        (b"hello\r\n" * 1000 + b"SSH-2.0-OpenSSH_9.6\r\n" + b"y" * 20000, None),
        (b"SSH-2.0-" + b"z" * 8000 + b"\r\n", None),
    ],
    ids=["1100 lines", "9000-byte line", "1000 lines then the version", "8 KB version line"],
)
def test_the_banner_guard_holds_openssh_limits(sent: bytes, refused: str | None) -> None:
    """paramiko's own read stops after 100 lines; the guard's limits are OpenSSH's and hold
    whatever paramiko does. After the version line nothing is counted."""
    import socket as sockets

    left, right = sockets.socketpair()
    guard = ssh._GuardedSocket(left)
    sender = threading.Thread(target=lambda: (right.sendall(sent), right.close()), daemon=True)
    sender.start()
    received = 0
    try:
        while chunk := guard.recv(128):
            received += len(chunk)
    except ConnectionAbortedError as exc:
        assert refused is not None and refused in str(exc) and guard.violation == str(exc)
    else:
        assert refused is None and received == len(sent)
        assert guard.banner is not None and guard.banner.startswith("SSH-2.0-")
    finally:
        sender.join(5)
        left.close()


def test_agent_yaml_sets_the_daemons_budget_and_trust_file(tmp_path: Path) -> None:
    from agent.app.daemon_config import DaemonConfig, configure_connections

    config = DaemonConfig(fabric=tmp_path / "f.yml", connect_timeout_s=3, state_dir=tmp_path)
    configure_connections(config)
    assert ssh.connect_timeout_s() == 3
    assert hostkeys.tofu_file() == tmp_path / "known_hosts"
    assert DaemonConfig(fabric=tmp_path / "f.yml").connect_timeout_s == ssh.CONNECT_TIMEOUT_S


@pytest.mark.parametrize("debug", [False, True])
def test_tracebacks_only_with_debug(
    debug: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A banner that never comes: one line without --debug; with it, paramiko's own account
    (its traceback among it) as the agent's debug records."""
    from click.testing import CliRunner

    from agent.app.cli import main

    # the exporter's tests quiet paramiko in this process (exporter without --verbose);
    # setLevel, not the attribute: it clears the loggers' cached levels
    paramiko_log = logging.getLogger("paramiko")
    monkeypatch.setattr(paramiko_log, "level", paramiko_log.level)  # restored after the test
    paramiko_log.setLevel(logging.NOTSET)

    peer = RawPeer(silent)
    fabric = tmp_path / "f.yml"
    fabric.write_text(
        f"""name: t
profile: nvidia-default
defaults: {{username: admin, credentials: {{password_env: {PASSWORD_ENV}}}}}
devices:
- {{name: leaf1, platform: arista_eos, role: leaf, host: 127.0.0.1, port: {peer.port},
   ports: [{{name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9100}}]}}
"""
    )
    try:
        args = ["--connect-timeout", "1s", *(["--debug"] if debug else []), "diff", str(fabric)]
        result = CliRunner().invoke(main, args)
        time.sleep(0.3)  # the transport thread's last records
    finally:
        peer.close()
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "timed out" in errors[0]
    debug_lines = [line for line in result.stderr.splitlines() if line.startswith("debug: ")]
    if debug:
        assert any("roce_agent.ssh: paramiko.transport:" in line for line in debug_lines)
    else:
        assert debug_lines == [] and "Traceback" not in result.stderr

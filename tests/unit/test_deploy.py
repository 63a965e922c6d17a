"""The shipped systemd unit verifies, the example agent.yaml loads, and the daemon's config
errors name file, line and field."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.app.daemon import notify
from agent.app.daemon_config import DaemonConfig, load_config
from agent.errors import IntentError

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "roce-agent.service"


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze missing: make test installs systemd")
        pytest.skip("systemd-analyze not installed")
    # verify checks that ExecStart exists: point it at this checkout's console script.
    script = Path(sys.executable).with_name("roce-agent")
    unit = tmp_path / "roce-agent.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/roce-agent", str(script)))
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "roce-agent.service" not in done.stderr  # no warnings about our unit


@pytest.mark.parametrize(
    "line",
    [
        "Type=notify",
        "WatchdogSec=120s",
        "User=roce-agent",
        "AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN",
        "CapabilityBoundingSet=CAP_NET_RAW CAP_NET_ADMIN",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "StateDirectory=roce-agent",
    ],
)
def test_unit_hardening(line: str) -> None:
    assert line in UNIT.read_text().splitlines()
    assert "LoadCredential=" in UNIT.read_text()


def test_example_agent_yaml_has_the_documented_defaults(tmp_path: Path) -> None:
    example = (ROOT / "deploy" / "agent.yaml").read_text()
    fabric = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
    config = tmp_path / "agent.yaml"
    config.write_text(example.replace("/etc/roce-agent/fabric.yaml", str(fabric)))
    os.environ.setdefault("ROCE_FABRIC_PASSWORD", "unused")
    loaded = load_config(config)
    assert loaded.intent.name == "pod-400g"
    defaults = DaemonConfig(fabric=fabric)
    assert loaded.config.model_dump() == defaults.model_dump()


def test_example_agent_yaml_sends_no_traffic_unless_asked() -> None:
    """No playbook is scheduled; the commented-out one says it sends traffic."""
    lines = (ROOT / "deploy" / "agent.yaml").read_text().splitlines()
    assert "playbooks: []" in lines
    opt_in = [line for line in lines if "name: validate" in line]
    assert opt_in and all(line.lstrip().startswith("#") for line in opt_in)
    assert all("SENDS TRAFFIC" in line for line in opt_in)


def test_bad_daemon_config_names_file_line_and_field(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("fabric: x.yml\nmode: repair\n")
    with pytest.raises(IntentError) as caught:
        load_config(config)
    assert f"{config}:2:7: mode:" in str(caught.value)


def test_sd_notify_datagram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert notify("READY=1")
        assert server.recv(100) == b"READY=1"
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert not notify("READY=1")


def test_sd_notify_never_blocks_when_nobody_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        sent = [notify("WATCHDOG=1") for _ in range(200)]  # far beyond the socket's queue
        assert sent[0] and not all(sent)


# --------------------------------------------------------------------------- serve --check-config


def _check(config: Path, **env: str) -> tuple[int, str]:
    from click.testing import CliRunner

    from agent.app.cli import main

    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--check-config"], env=env)
    return result.exit_code, result.output


def _installed(tmp_path: Path) -> Path:
    """agent.yaml, fabric, credential and known_hosts laid out as docs/daemon.md installs
    them, in tmp_path."""
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "fabric-password").write_text("secret\n")
    (credentials / "fabric-password").chmod(0o600)  # as installed: its owner's only
    (tmp_path / "known_hosts").write_text("")
    fabric = (ROOT / "playbooks" / "fabrics" / "pod-400g.yml").read_text()
    fabric = fabric.replace(
        "credentials: {password_env: ROCE_FABRIC_PASSWORD}",
        "credentials:\n    password_file: ${CREDENTIALS_DIRECTORY}/fabric-password\n"
        "  known_hosts: known_hosts",
    )
    (tmp_path / "fabric.yaml").write_text(fabric)
    config = tmp_path / "agent.yaml"
    config.write_text((ROOT / "deploy" / "agent.yaml").read_text().replace("/etc/roce-agent/", ""))
    return config


def test_check_config_accepts_the_installed_layout(tmp_path: Path) -> None:
    config = _installed(tmp_path)
    code, output = _check(config, CREDENTIALS_DIRECTORY=str(tmp_path / "credentials"))
    assert code == 0, output
    assert f"{config}: ok: fabric pod-400g" in output
    assert "scheduled playbooks: none" in output


@pytest.mark.parametrize(
    ("case", "edit", "expected"),
    [
        ("bad-mode", ("agent.yaml", "mode: observe", "mode: repair"), "agent.yaml:6:7: mode:"),
        (
            "bad-listen",
            ("agent.yaml", "listen: 127.0.0.1:9810", "listen: nowhere"),
            "agent.yaml:10:11: exporter.listen:",
        ),
        (
            "bad-web-config",
            ("agent.yaml", "web_config: null", "web_config: web.yml"),
            "web.yml:2:15: basic_auth_users.prometheus:",
        ),
        ("fabric-missing", ("agent.yaml", "fabric: fabric.yaml", "fabric: gone.yaml"), "gone.yaml"),
        ("bad-speed", ("fabric.yaml", "speed: 400G", "speed: 1T"), "fabric.yaml:"),
        (
            "password-unreadable",
            ("fabric.yaml", "/fabric-password", "/missing-password"),
            "device spine1 (and 75 more): credentials.password_file: cannot read",
        ),
        (
            "known-hosts-unreadable",
            ("fabric.yaml", "known_hosts: known_hosts", "known_hosts: nowhere"),
            "device spine1 (and 75 more): known_hosts: cannot read",
        ),
        ("no-playbook", ("agent.yaml", "playbooks: []", "playbooks: [{name: nope, every_s: 60}]"),
         "nope"),
        (
            "bad-connect-timeout",
            ("agent.yaml", "connect_timeout_s: 10", "connect_timeout_s: 0"),
            "agent.yaml:{line}:20: connect_timeout_s:",  # {line}: where the edit is
        ),
        # issue #42, item 3: a torn known_hosts line is reported with file, line and device
        (
            "known-hosts-torn-line",
            ("known_hosts", "", "spine1.mgmt.pod400g.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE\n"),
            "known_hosts:1: the key is not valid base64 (a line cut short?) (device spine1 will "
            "be refused)",
        ),
    ],
)  # fmt: skip
def test_check_config_exits_2_naming_file_line_and_field(
    tmp_path: Path, case: str, edit: tuple[str, str, str], expected: str
) -> None:
    config = _installed(tmp_path)
    (tmp_path / "web.yml").write_text("basic_auth_users:\n  prometheus: 'not-a-hash'\n")
    name, old, new = edit
    text = (tmp_path / name).read_text()
    assert old in text, case
    (tmp_path / name).write_text(text.replace(old, new, 1))
    expected = expected.replace("{line}", str(text[: text.index(old)].count("\n") + 1))
    code, output = _check(config, CREDENTIALS_DIRECTORY=str(tmp_path / "credentials"))
    assert code == 2, (case, output)
    assert expected in output, (case, output)
    assert "Traceback" not in output


def test_check_config_without_the_credentials_directory(tmp_path: Path) -> None:
    """Outside systemd, ${CREDENTIALS_DIRECTORY} is unset: exit 2 at the fabric's line,
    saying how to check (docs/daemon.md sets it to /etc/roce-agent/credentials)."""
    config = _installed(tmp_path)
    code, output = _check(config, CREDENTIALS_DIRECTORY="")
    assert code == 2
    assert f"{tmp_path / 'fabric.yaml'}:9:" in output
    assert "${CREDENTIALS_DIRECTORY} is not set" in output


def test_check_config_takes_no_value(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agent.app.cli import main

    config = _installed(tmp_path)
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--check-config=yes"])
    assert result.exit_code == 2
    assert "--check-config" in result.output

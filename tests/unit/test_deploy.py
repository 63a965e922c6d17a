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

from agent.app.daemon import DaemonConfig, load_config, notify
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

"""Bad input to diff/apply/drift: a clear error, exit 2, and not one connection attempted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.device.platforms import platform_for
from agent.errors import AgentError
from tests.unit.ssh_peers import RawPeer, close_at_once

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def listener() -> Iterator[RawPeer]:
    """A TCP port on loopback that counts connection attempts (an SSH server would too)."""
    server = RawPeer(close_at_once)
    yield server
    server.close()


def fabric(
    tmp_path: Path, port: int, credentials: str = "{password_env: ROCE_TEST_UNSET_PW}"
) -> Path:
    path = tmp_path / "fabric.yml"
    path.write_text(
        f"""name: t
profile: nvidia-default
defaults:
  username: admin
  credentials: {credentials}
devices:
  - name: leaf1
    platform: arista_eos
    role: leaf
    host: 127.0.0.1
    port: {port}
    ports: [{{name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9100, peer: "h1:eth0"}}]
  - name: h1
    platform: linux_host
    role: host
    netns: nothing-here
    ports: [{{name: eth0, speed: 100G, cable_m: 3, mtu: 9100, peer: "leaf1:Ethernet1"}}]
"""
    )
    return path


@pytest.mark.parametrize("command", ["diff", "drift", "apply"])
def test_unreadable_credentials_exit_2_before_connecting(
    tmp_path: Path, listener: RawPeer, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROCE_TEST_UNSET_PW", raising=False)
    args = [command, str(fabric(tmp_path, listener.port))] + (
        ["--yes"] if command == "apply" else []
    )
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert (
        "device leaf1: credentials.password_env: environment variable ROCE_TEST_UNSET_PW"
        in result.stderr
    )
    assert listener.accepted == 0


def test_unreadable_password_file_exit_2(tmp_path: Path, listener: RawPeer) -> None:
    path = fabric(tmp_path, listener.port, "{password_file: missing-secret.txt}")
    result = CliRunner().invoke(main, ["apply", str(path), "--yes"])
    assert result.exit_code == 2 and "credentials.password_file: cannot read" in result.stderr
    assert listener.accepted == 0


@pytest.mark.parametrize("command", ["diff", "drift", "apply"])
def test_unknown_device_exit_2(
    tmp_path: Path, listener: RawPeer, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCE_TEST_UNSET_PW", "x")
    args = [command, str(fabric(tmp_path, listener.port)), "--device", "leaf9"]
    result = CliRunner().invoke(main, [*args, "--yes"] if command == "apply" else args)
    assert result.exit_code == 2 and "'leaf9' matches none" in result.stderr
    assert "'--device'" in result.stderr
    assert listener.accepted == 0


def test_invalid_fabric_exit_2(listener: RawPeer) -> None:
    bad = ROOT / "tests" / "data" / "bad" / "11-ecn-above-pause-threshold.yml"
    result = CliRunner().invoke(main, ["apply", str(bad), "--yes"])
    assert result.exit_code == 2 and "IR005" in result.stderr
    assert listener.accepted == 0


def test_apply_without_yes_in_a_pipeline_refuses(
    tmp_path: Path, listener: RawPeer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCE_TEST_UNSET_PW", "x")
    result = CliRunner().invoke(main, ["apply", str(fabric(tmp_path, listener.port))])
    assert result.exit_code == 2 and "--yes" in result.stderr
    assert listener.accepted == 0


def test_unsupported_platform_is_an_error() -> None:
    with pytest.raises(AgentError, match="unsupported platform 'junos'"):
        platform_for("junos")


@pytest.mark.parametrize("command", ["diff", "drift"])
def test_a_device_not_reached_has_no_count_of_changes(
    tmp_path: Path, listener: RawPeer, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing was compared on a switch that hung up: ``changes`` is null, not 0 (issue #41)."""
    import json

    monkeypatch.setenv("ROCE_TEST_UNSET_PW", "pw")
    path = fabric(tmp_path, listener.port)
    run = CliRunner().invoke(main, ["--connect-timeout", "2s", command, str(path), "-o", "json"])
    assert run.exit_code == 2, run.output  # no device reached
    (leaf,) = json.loads(run.stdout)["devices"]
    assert (leaf["read"], leaf["changes"], leaf["differences"]) == (False, None, None), leaf
    assert leaf["result"] in ("unreachable", "protocol error", "timed out"), leaf

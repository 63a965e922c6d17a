"""Host key checking (agent/device/hostkeys.py): pinned keys, known_hosts files, trust-on-first-use.

The decisions are tested here on real keys without a device; tests/lab/test_hostkeys_lab.py
proves the same over SSH against a lab switch.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import paramiko
import pytest

from agent.device import hostkeys
from agent.device.hostkeys import HostKeyError, expectation, fingerprint
from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.intent.model import Device
from agent.intent.tokens import check_host_key_line

LAB_FABRIC = Path(__file__).parents[1] / "data/platforms/arista_eos/lab-leafspine-fabric.yml"


def new_key() -> Any:
    """A fresh ed25519 public key, as paramiko sees a server's."""
    import asyncssh

    line = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    key_type, blob = line.split()[:2]
    return paramiko.PKey.from_type_string(key_type, base64.b64decode(blob))


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the real ~/.ssh or /etc/ssh, or leaks settings to the next one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(hostkeys, "SYSTEM_KNOWN_HOSTS", tmp_path / "etc_ssh_known_hosts")
    monkeypatch.setattr(hostkeys, "_settings", hostkeys.Settings(state_dir=tmp_path / "state"))


def public_line(key: Any) -> str:
    return f"{key.get_name()} {key.get_base64()}"


def device(**extra: Any) -> Device:
    return Device(
        name="leaf1", platform="arista_eos", role="leaf", host="127.0.0.1", port=2201,
        username="admin", credentials={"password_env": "P"}, **extra,
    )  # fmt: skip


def verify(dev: Device, key: Any) -> None:
    """What paramiko does with the server's key during the handshake."""
    policy = hostkeys._policy_class()(expectation(dev))
    policy.missing_host_key(None, hostkeys.known_hosts_name(dev.host or "", dev.port), key)


# ------------------------------------------------------------------ pinned key syntax


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("ssh-ed25519", "expected 'TYPE BASE64'"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2", "TYPE one of"),
        ("ssh-ed25519 not-base64-at-all!!", "expected 'TYPE BASE64'"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI\nshutdown", "expected 'TYPE BASE64'"),
        ("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQC7", "Actual: 'ssh-rsa'"),
        ("ssh-ed25519 AAAAAAAAAAAAAAAAAAAAAAAA", "Actual: ''"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA=", "not an SSH public key"),
    ],
    ids=["no-blob", "dsa", "bad-base64", "newline", "type-mismatch", "empty-type", "padding"],
)
def test_malformed_pinned_keys_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        check_host_key_line(text)


def test_pinned_key_accepts_a_pub_file_line_and_drops_the_comment() -> None:
    key = new_key()
    assert check_host_key_line(f"{public_line(key)} root@leaf1") == public_line(key)


def test_malformed_pinned_key_is_a_load_error_with_file_and_line(tmp_path: Path) -> None:
    text = LAB_FABRIC.read_text().replace(
        "  port: 40575\n", '  port: 40575\n  host_key: "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQAB"\n'
    )
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(text)
    line = text.splitlines().index('  host_key: "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQAB"') + 1
    with pytest.raises(IntentError) as caught:
        load_fabric(fabric)
    message = str(caught.value)
    assert f"{fabric}:{line}:" in message
    assert "devices[0].host_key" in message and "Actual: 'ssh-rsa'" in message


def test_pinned_keys_and_policy_load_from_the_fabric(tmp_path: Path) -> None:
    key = new_key()
    text = LAB_FABRIC.read_text().replace(
        "defaults:\n", "defaults:\n  known_hosts: hosts/known\n  host_key_policy: tofu\n"
    )
    text = text.replace("  port: 40575\n", f"  port: 40575\n  host_key: [{public_line(key)}]\n")
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(text)
    devices = {d.name: d for d in load_fabric(fabric).intent.devices}
    assert devices["spine1"].host_key == [public_line(key)]
    assert devices["leaf1"].host_key is None
    assert devices["leaf1"].known_hosts == tmp_path / "hosts/known"  # relative to the fabric
    assert {d.host_key_policy for d in devices.values() if d.role != "host"} == {"tofu"}


# ------------------------------------------------------------------ fingerprints


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="openssh-client not installed")
def test_fingerprint_is_openssh_sha256(tmp_path: Path) -> None:
    key = new_key()
    pub = tmp_path / "key.pub"
    pub.write_text(public_line(key) + "\n")
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert fingerprint(key) == listed[1]


# ------------------------------------------------------------------ decisions


def _known_hosts(path: Path, name: str, key: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{name} {public_line(key)}\n")
    return path


CASES = ["pinned", "fabric-known-hosts", "user-known-hosts", "system-known-hosts", "tofu-file"]


def _source(case: str, key: Any, tmp_path: Path) -> Device:
    name = "[127.0.0.1]:2201"
    if case == "pinned":
        return device(host_key=public_line(key))
    if case == "fabric-known-hosts":
        return device(known_hosts=_known_hosts(tmp_path / "kh", name, key))
    if case == "user-known-hosts":
        _known_hosts(tmp_path / "home/.ssh/known_hosts", name, key)
    elif case == "system-known-hosts":
        _known_hosts(tmp_path / "etc_ssh_known_hosts", name, key)
    else:
        _known_hosts(tmp_path / "state/known_hosts", name, key)
    return device()


@pytest.mark.parametrize("case", CASES)
def test_known_key_is_accepted_and_a_changed_one_refused(case: str, tmp_path: Path) -> None:
    good, impostor = new_key(), new_key()
    dev = _source(case, good, tmp_path)
    verify(dev, good)
    with pytest.raises(HostKeyError) as caught:
        verify(dev, impostor)
    message = str(caught.value)
    assert message.startswith("leaf1: host key of 127.0.0.1:2201 has changed, refusing")
    assert f"Expected: {fingerprint(good)} (ssh-ed25519)" in message
    assert f"Actual: {fingerprint(impostor)} (ssh-ed25519)" in message
    assert caught.value.exit_code == 1


def test_pinned_key_wins_over_known_hosts(tmp_path: Path) -> None:
    pinned, stale = new_key(), new_key()
    _known_hosts(tmp_path / "home/.ssh/known_hosts", "[127.0.0.1]:2201", stale)
    dev = device(host_key=public_line(pinned))
    verify(dev, pinned)
    with pytest.raises(HostKeyError, match="has changed"):
        verify(dev, stale)


def test_port_22_is_named_without_brackets(tmp_path: Path) -> None:
    key = new_key()
    _known_hosts(tmp_path / "home/.ssh/known_hosts", "switch1.example", key)
    dev = Device(
        name="leaf1", platform="arista_eos", role="leaf", host="switch1.example",
        username="admin", credentials={"password_env": "P"},
    )  # fmt: skip
    verify(dev, key)


def test_unknown_host_is_refused_without_tofu(tmp_path: Path) -> None:
    key = new_key()
    with pytest.raises(HostKeyError) as caught:
        verify(device(), key)
    message = str(caught.value)
    assert "is not known, refusing to connect" in message
    assert f"Actual: {fingerprint(key)}" in message and "--trust-on-first-use" in message
    assert not (tmp_path / "state/known_hosts").exists()


@pytest.mark.parametrize("how", ["flag", "fabric"])
def test_tofu_records_the_first_key_then_refuses_a_change(how: str, tmp_path: Path) -> None:
    first, second = new_key(), new_key()
    if how == "flag":
        hostkeys.configure(trust_on_first_use=True)
        dev = device()
    else:
        dev = device(host_key_policy="tofu")
    verify(dev, first)
    recorded = (tmp_path / "state/known_hosts").read_text()
    assert recorded == f"[127.0.0.1]:2201 {public_line(first)}\n"
    verify(dev, first)  # the same key again: accepted, nothing appended
    assert (tmp_path / "state/known_hosts").read_text() == recorded
    with pytest.raises(HostKeyError, match=re.escape(f"Actual: {fingerprint(second)}")):
        verify(dev, second)


def test_tofu_into_an_unwritable_state_dir_refuses(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the directory should be")
    hostkeys.configure(trust_on_first_use=True)
    with pytest.raises(HostKeyError, match="trust-on-first-use: cannot write"):
        verify(device(), new_key())


def test_missing_configured_known_hosts_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HostKeyError, match="known_hosts: Expected: a readable file"):
        expectation(device(known_hosts=tmp_path / "nope"))


def test_only_the_key_types_we_hold_are_negotiated(tmp_path: Path) -> None:
    dev = device(host_key=public_line(new_key()))
    disabled = expectation(dev).disabled_host_key_algorithms()
    assert "ssh-ed25519" not in disabled
    assert {"rsa-sha2-512", "rsa-sha2-256", "ecdsa-sha2-nistp256"} <= set(disabled)
    assert expectation(device(host_key_policy="tofu")).disabled_host_key_algorithms() == []

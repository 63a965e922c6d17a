"""Host key checking (agent/device/hostkeys.py): pinned keys, known_hosts files, trust-on-first-use.

The decisions are tested here on real keys without a device; tests/lab/test_hostkeys_lab.py
proves the same over SSH against a lab switch.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import paramiko
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.device import hostkeys
from agent.device.hostkeys import HostKeyError, expectation, fingerprint
from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.intent.model import Device
from agent.intent.tokens import check_host_key_line

LAB_FABRIC = Path(__file__).parents[1] / "data/platforms/arista_eos/lab-leafspine-fabric.yml"


def new_key(kind: str = "ssh-ed25519") -> Any:
    """A fresh public key (ed25519 unless asked), as paramiko sees a server's."""
    import asyncssh

    line = asyncssh.generate_private_key(kind).export_public_key().decode()
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
    assert message.startswith(
        "leaf1: host key changed: the host key of 127.0.0.1:2201 has changed, refusing"
    )
    assert caught.value.kind == "host key changed"
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


# ------------------------------------------------------------------ one broken line, one device
# (issue #42, item 3: a malformed known_hosts line used to abort every SSH command with
# `internal error: InvalidHostKey`, for devices the line is not about)


def other_device(name: str = "leaf2", port: int = 2202, **extra: Any) -> Device:
    return Device(
        name=name, platform="arista_eos", role="leaf", host="127.0.0.1", port=port,
        username="admin", credentials={"password_env": "P"}, **extra,
    )  # fmt: skip


BROKEN_LINES = {
    "torn base64": "[127.0.0.1]:2201 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI!",
    "two fields": "[127.0.0.1]:2201 ssh-ed25519",
    "bad key blob": "[127.0.0.1]:2201 ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQAB",
    "revoked marker": "@revoked [127.0.0.1]:2201 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5",
    "padding only": "[127.0.0.1]:2201 ssh-rsa ====",
}


@pytest.mark.parametrize("broken", list(BROKEN_LINES.values()), ids=list(BROKEN_LINES))
def test_a_broken_line_refuses_its_device_and_no_other(broken: str, tmp_path: Path) -> None:
    good = new_key()
    known = tmp_path / "kh"
    known.write_text(f"# fleet keys\n{broken}\n[127.0.0.1]:2202 {public_line(good)}\n")
    # the other device's key is found and checked as before
    verify(other_device(known_hosts=known), good)
    with pytest.raises(HostKeyError) as caught:
        expectation(device(known_hosts=known))
    assert caught.value.kind == "host key unreadable"
    message = str(caught.value)
    assert message.startswith(f"leaf1: host key unreadable: {known}:2: the line about ")
    assert "ssh-keygen -R '[127.0.0.1]:2201'" in message and "\n" not in message


def test_a_torn_line_that_names_no_device_refuses_none(tmp_path: Path) -> None:
    good = new_key()
    known = tmp_path / "kh"
    known.write_text(f"[127.0.0.1]:2201 {public_line(good)}\n[127.0.\n")
    verify(device(known_hosts=known), good)
    assert hostkeys.trust_file_problems([device(known_hosts=known)]) == [
        f"{known}:2: Expected: HOSTS KEYTYPE BASE64 Actual: 1 field(s) (a line cut short?)"
    ]


def test_trust_file_problems_name_file_line_and_device(tmp_path: Path) -> None:
    known = tmp_path / "kh"
    known.write_text(f"{BROKEN_LINES['torn base64']}\n")
    devices = [device(known_hosts=known), other_device(known_hosts=known)]
    problems = hostkeys.trust_file_problems(devices)
    assert problems == [
        f"{known}:1: the key is not valid base64 (a line cut short?) (device leaf1 will be refused)"
    ]
    assert hostkeys.trust_file_problems([device(host_key=public_line(new_key()))]) == []


def test_trust_file_problems_name_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    # a missing file has no lines (a device's missing known_hosts: is its own error)
    assert hostkeys.trust_file_problems([device(known_hosts=tmp_path / "nope")]) == []
    (tmp_path / "home/.ssh").mkdir(parents=True)
    os.mkfifo(tmp_path / "home/.ssh/known_hosts")
    problems = hostkeys.trust_file_problems([device()])  # never blocks on the FIFO
    assert len(problems) == 1 and "Expected: a regular file Actual: a FIFO" in problems[0]
    with pytest.raises(HostKeyError, match=r"host key unreadable: known_hosts .*FIFO"):
        expectation(device())


@given(cut=st.integers(min_value=0, max_value=2000), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_a_file_cut_anywhere_refuses_at_most_the_device_of_the_cut_line(
    cut: int, seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A known_hosts file cut at any byte (a crash, a full disk) and a seeded mix of key
    types: every device whose line is whole is checked as before; the device of the cut line
    is either unreadable (its line names it) or unknown (the cut took its name)."""
    import random

    chooser = random.Random(seed)
    folder = tmp_path_factory.mktemp("cut")
    keys = [new_key(chooser.choice(["ssh-ed25519", "ecdsa-sha2-nistp256"])) for _ in range(6)]
    lines = [f"[127.0.0.1]:{2300 + i} {public_line(k)}\n" for i, k in enumerate(keys)]
    text = "".join(lines)
    cut = min(cut, len(text))
    known = folder / "kh"
    known.write_text(text[:cut])
    offset = 0
    for i, (line, key) in enumerate(zip(lines, keys, strict=True)):
        dev = other_device(f"leaf{i}", 2300 + i, known_hosts=known)
        if offset + len(line) - 1 <= cut:  # the whole line (its newline aside) is there
            verify(dev, key)
        else:
            with pytest.raises(HostKeyError) as caught:
                verify(dev, key)
            assert caught.value.kind in ("host key unreadable", "host key unknown")
        offset += len(line)


# ------------------------------------------------------------------ the TOFU file, atomically


def test_tofu_rewrites_the_file_atomically_and_leaves_no_temporary(tmp_path: Path) -> None:
    hostkeys.configure(trust_on_first_use=True)
    first, second = new_key(), new_key()
    verify(device(), first)
    verify(other_device(), second)
    state = tmp_path / "state"
    assert (state / "known_hosts").read_text() == (
        f"[127.0.0.1]:2201 {public_line(first)}\n[127.0.0.1]:2202 {public_line(second)}\n"
    )
    assert sorted(p.name for p in state.iterdir()) == ["known_hosts", "known_hosts.lock"]


def test_a_write_that_fails_midway_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostkeys.configure(trust_on_first_use=True)
    verify(device(), new_key())
    tofu = tmp_path / "state/known_hosts"
    before = tofu.read_bytes()

    def full_disk(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hostkeys.os, "replace", full_disk)
    with pytest.raises(HostKeyError, match=r"cannot write .*No space left on device"):
        verify(other_device(), new_key())
    assert tofu.read_bytes() == before
    assert sorted(p.name for p in tofu.parent.iterdir()) == ["known_hosts", "known_hosts.lock"]


def test_a_torn_tofu_line_refuses_its_device_and_others_are_still_recorded(
    tmp_path: Path,
) -> None:
    """What an older agent's torn append left: the device of that line is refused (its key
    cannot be checked), every other device is still learnt, on a line of its own."""
    hostkeys.configure(trust_on_first_use=True)
    tofu = tmp_path / "state/known_hosts"
    tofu.parent.mkdir(parents=True)
    torn = f"[127.0.0.1]:2201 {public_line(new_key())}"[:50]
    tofu.write_text(torn)
    with pytest.raises(HostKeyError, match=f"host key unreadable: {tofu}:1"):
        verify(device(), new_key())
    key = new_key()
    verify(other_device(), key)
    assert tofu.read_text() == f"{torn}\n[127.0.0.1]:2202 {public_line(key)}\n"
    verify(other_device(), key)


def test_parallel_first_uses_record_every_device(tmp_path: Path) -> None:
    hostkeys.configure(trust_on_first_use=True)
    keys = {f"leaf{i}": (2400 + i, new_key()) for i in range(12)}

    def learn(name: str) -> None:
        port, key = keys[name]
        verify(other_device(name, port), key)

    threads = [threading.Thread(target=learn, args=(name,)) for name in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recorded = (tmp_path / "state/known_hosts").read_text().splitlines()
    assert sorted(recorded) == sorted(f"[127.0.0.1]:{p} {public_line(k)}" for p, k in keys.values())

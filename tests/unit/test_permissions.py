"""The secrets policy (common/permissions.py, agent/intent/credpaths.py; issue #42 item 6).

A password or key file others can read, owned by someone else, not a regular file, too large
or not shaped like what it holds is refused with its path, mode and the command that fixes it,
never its content; a config file anyone can write is refused the same way;
``--insecure-permissions`` (or ``insecure_permissions: true`` in agent.yaml) turns the owner
and mode refusals into one logged warning per file. A fabric file may name credential files
only in its own folder, ``${CREDENTIALS_DIRECTORY}`` or ``$ROCE_AGENT_CREDENTIALS_DIRS``.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.errors import CredentialError, IntentError
from agent.intent.loader import load_fabric
from agent.intent.model import Credentials
from common import permissions
from common.permissions import PASSWORD, PRIVATE_KEY, FileRefused, read_secret
from common.yamlsource import load_yaml

SECRET = "hunter2-SECRET-CONTENT"
LOGGER = "roce_agent.files"


@pytest.fixture(autouse=True)
def _no_override() -> Iterator[None]:
    """Each test starts and ends with the defaults (the policy is per process)."""
    permissions.allow_insecure_permissions(False)
    permissions.set_config_override(None)
    permissions._WARNED.clear()
    yield
    permissions.allow_insecure_permissions(False)
    permissions.set_config_override(None)
    permissions._WARNED.clear()


def _file(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


# (mode, accepted, words of the refusal)
PASSWORD_MODES = [
    (0o600, True, ""),
    (0o400, True, ""),
    (0o640, False, "Actual: mode 0640, others can read it; fix: chmod 600 "),
    (0o604, False, "Actual: mode 0604"),
    (0o644, False, "Actual: mode 0644"),
    (0o660, False, "Actual: mode 0660"),
    (0o700, True, ""),
]


@pytest.mark.parametrize(("mode", "accepted", "words"), PASSWORD_MODES)
def test_a_password_file_only_its_owner_can_read(
    tmp_path: Path, mode: int, accepted: bool, words: str
) -> None:
    path = _file(tmp_path / "pw", SECRET + "\n", mode)
    if accepted:
        assert read_secret(path, PASSWORD) == (SECRET + "\n").encode()
        return
    with pytest.raises(FileRefused) as caught:
        read_secret(path, PASSWORD)
    message = str(caught.value)
    assert message.startswith(f"{path}: Expected: readable by its owner only"), message
    assert words in message and "--insecure-permissions" in message
    assert SECRET not in message


def test_root_may_share_its_file_with_a_service_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq's sslkey rule: owned by root, 0640 is allowed to an agent that is not root."""
    if os.geteuid() != 0:
        pytest.skip("needs a root-owned file")
    shared = _file(tmp_path / "pw", SECRET, 0o640)
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    assert read_secret(shared, PASSWORD) == SECRET.encode()
    shared.chmod(0o644)
    with pytest.raises(FileRefused, match=r"mode 0640 or stricter\) Actual: mode 0644"):
        read_secret(shared, PASSWORD)


def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file away")
    path = _file(tmp_path / "pw", SECRET, 0o600)
    os.chown(path, 65534, 65534)
    with pytest.raises(FileRefused) as caught:
        read_secret(path, PASSWORD)
    message = str(caught.value)
    assert "Expected: owned by root (the agent's user) Actual: owned by " in message
    assert "fix: chown root " in message and SECRET not in message


def _symlink(folder: Path) -> Path:
    target = _file(folder / "real", SECRET, 0o600)
    (folder / "link").symlink_to(target)
    return folder / "link"


# (make the file in a folder, words of the refusal)
NOT_A_SECRET: list[tuple[Callable[[Path], Path], str]] = [
    (_symlink, "Actual: a symbolic link"),
    (lambda d: (os.mkfifo(d / "f", 0o600), d / "f")[1], "Actual: a FIFO"),
    (lambda d: (os.mkdir(d / "d", 0o700), d / "d")[1], "Actual: a directory"),
    (lambda _: Path("/dev/null"), "Actual: a character device"),
    (lambda d: d / "missing", "no such file"),
    (lambda d: _file(d / "pw", "x" * 5000, 0o600), "of at most 4096 bytes Actual: larger"),
    (lambda d: _file(d / "pw", "", 0o600), "Actual: an empty file"),
    (lambda d: _file(d / "pw", f"{SECRET}\nsecond\n", 0o600), "Actual: 2 lines"),
    (lambda d: _file(d / "pw", f"{SECRET}\x1b[0m", 0o600), "Actual: control characters"),
    (lambda d: _file(d / "pw", "root:$6$s$h:19000::\nbin:*:19000::\n", 0o600), "2 lines"),
]


@pytest.mark.parametrize(("make", "words"), NOT_A_SECRET)
def test_only_a_regular_file_shaped_like_a_password_is_read(
    tmp_path: Path, make: Callable[[Path], Path], words: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(FileRefused) as caught:
        read_secret(path, PASSWORD)
    assert words in str(caught.value) and SECRET not in str(caught.value)


def _key(folder: Path) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "id")], check=True
    )
    return folder / "id"


def test_a_private_key_is_a_key_and_not_a_password(tmp_path: Path) -> None:
    """A private key named as a password file (or a password as a key) is refused by shape:
    the finding's root-only secret sent as a password cannot be a key or a system file."""
    key = _key(tmp_path)
    assert read_secret(key, PRIVATE_KEY).startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    with pytest.raises(FileRefused, match="Expected: a password file: one line of text Actual"):
        read_secret(key, PASSWORD)
    password = _file(tmp_path / "pw", SECRET, 0o600)
    with pytest.raises(FileRefused, match=r"PRIVATE KEY-----( block)? Actual: something else"):
        read_secret(password, PRIVATE_KEY)
    key.chmod(0o644)
    with pytest.raises(FileRefused, match="mode 0644"):
        read_secret(key, PRIVATE_KEY)


def test_the_override_logs_each_file_once_and_keeps_the_other_checks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _file(tmp_path / "pw", SECRET, 0o644)
    permissions.allow_insecure_permissions()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            assert read_secret(path, PASSWORD) == SECRET.encode()
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert f"(--insecure-permissions): {path}: " in record.getMessage()
    assert "mode 0644" in record.getMessage() and SECRET not in record.getMessage()
    two_lines = _file(tmp_path / "two", "a\nb\n", 0o644)
    with pytest.raises(FileRefused, match="2 lines"):  # the shape is never overridden
        read_secret(two_lines, PASSWORD)


@pytest.mark.parametrize(("mode", "refused"), [(0o644, False), (0o664, False), (0o646, True)])
def test_a_config_file_anyone_can_write_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, refused: bool
) -> None:
    path = _file(tmp_path / "agent.yaml", "fabric: fabric.yml\n", mode)
    if not refused:
        assert load_yaml(path)[0] == {"fabric": "fabric.yml"}
        return
    with pytest.raises(IntentError) as caught:
        load_yaml(path)
    [problem] = caught.value.problems
    assert problem.position is None
    assert str(problem) == (
        f"{path}: Expected: a file only its owner (and group) can change Actual: mode 0646, "
        f"anyone on this host can write it; fix: chmod o-w {path} (or run with "
        "--insecure-permissions)"
    )
    permissions.set_config_override(tmp_path / "other-agent.yaml")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert load_yaml(path)[0] == {"fabric": "fabric.yml"}
    assert f"insecure_permissions: true in {tmp_path / 'other-agent.yaml'}" in caplog.text


# --------------------------------------------------------------------------- the commands


def _fabric(folder: Path, password_file: str) -> Path:
    path = folder / "fabric.yml"
    path.write_text(
        "name: t\nprofile: nvidia-default\ndefaults:\n  username: netops\n"
        f"  credentials: {{password_file: '{password_file}'}}\n"
        "  ports: {speed: 400G, mtu: 9214, cable_m: 3}\n"
        "devices:\n  - {name: spine1, role: spine, platform: arista_eos, host: 127.0.0.1,\n"
        "     port: 9, ports: [{name: Ethernet1, peer: 'leaf1:Ethernet1'}]}\n"
        "  - {name: leaf1, role: leaf, platform: arista_eos, host: 127.0.0.2, port: 9}\n"
    )
    return path


@pytest.mark.parametrize(
    "named",
    ["/etc/shadow", "/root/.ssh/id_ed25519", "../outside/pw", "link-out"],
)
def test_a_fabric_names_credential_files_only_within_reach(tmp_path: Path, named: str) -> None:
    """The finding: a fabric whose author pins their own server's host key could name any
    one-line secret of the agent's user as its password. Outside the fabric's folder,
    ${CREDENTIALS_DIRECTORY} and $ROCE_AGENT_CREDENTIALS_DIRS, a credential path is an error
    at its line, before anything is read or connected to."""
    folder = tmp_path / "fabrics"
    folder.mkdir()
    (tmp_path / "outside").mkdir()
    secret = _file(tmp_path / "outside" / "pw", SECRET, 0o600)
    (folder / "link-out").symlink_to(secret)
    path = _fabric(folder, named)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:5:" in result.output
    assert "defaults.credentials.password_file: defaults: Expected: a file in the fabric " in (
        result.output
    )
    assert "(outside them" in result.output and SECRET not in result.output


def test_credential_folders_the_operator_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "fabrics"
    folder.mkdir()
    vault = tmp_path / "vault"
    vault.mkdir()
    _file(vault / "pw", SECRET, 0o600)
    path = _fabric(folder, str(vault / "pw"))
    with pytest.raises(IntentError, match="outside them"):
        load_fabric(path)
    monkeypatch.setenv("ROCE_AGENT_CREDENTIALS_DIRS", f"relative:{vault}")
    credentials = load_fabric(path).intent.devices[0].credentials
    assert credentials is not None
    secret = credentials.resolve_password("spine1")
    assert secret is not None and secret.get_secret_value() == SECRET
    monkeypatch.delenv("ROCE_AGENT_CREDENTIALS_DIRS")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(vault))
    load_fabric(_fabric(folder, "${CREDENTIALS_DIRECTORY}/pw"))


def test_a_command_refuses_a_readable_password_before_connecting(tmp_path: Path) -> None:
    path = _fabric(tmp_path, "pw")
    secret = _file(tmp_path / "pw", SECRET, 0o644)
    result = CliRunner().invoke(main, ["diff", str(path)])
    assert result.exit_code == 2, result.output
    assert (
        f"device spine1: credentials.password_file: cannot read {secret}: Expected: readable "
        f"by its owner only (mode 0600 or stricter) Actual: mode 0644" in result.output
    )
    assert f"fix: chmod 600 {secret}" in result.output and SECRET not in result.output


def test_the_password_is_read_only_through_the_policy(tmp_path: Path) -> None:
    key = _key(tmp_path)
    with pytest.raises(CredentialError, match=r"device s1: credentials\.password_file: .*lines"):
        Credentials(password_file=key).resolve_password("s1")
    with pytest.raises(CredentialError, match=r"device s1: credentials\.ssh_key: .*something"):
        Credentials(ssh_key=_file(tmp_path / "pw", SECRET, 0o600)).check_key("s1")
    Credentials(ssh_key=key).check_key("s1")


def test_insecure_permissions_in_agent_yaml_covers_the_files_it_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fabric = _fabric(tmp_path, "pw")
    secret = _file(tmp_path / "pw", SECRET, 0o644)
    config = tmp_path / "agent.yaml"
    config.write_text(f"fabric: {fabric}\nstate_dir: {tmp_path / 'state'}\nexporter: null\n")
    refused = CliRunner().invoke(main, ["serve", "--config", str(config), "--check-config"])
    assert refused.exit_code == 2 and "mode 0644" in refused.output, refused.output
    config.write_text(config.read_text() + "insecure_permissions: true\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        accepted = CliRunner().invoke(main, ["serve", "--config", str(config), "--check-config"])
    assert accepted.exit_code == 0, accepted.output
    assert f"insecure_permissions: true in {config}): {secret}: " in caplog.text
    config.chmod(0o646)  # agent.yaml's own mode: only the command line overrides it
    again = CliRunner().invoke(main, ["serve", "--config", str(config), "--check-config"])
    assert again.exit_code == 2 and "chmod o-w" in again.output, again.output
    overridden = CliRunner().invoke(
        main, ["--insecure-permissions", "serve", "--config", str(config), "--check-config"]
    )
    assert overridden.exit_code == 0, overridden.output

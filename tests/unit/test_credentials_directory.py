"""``password_file: ${CREDENTIALS_DIRECTORY}/...`` (systemd LoadCredential=): expanded from
the allow-list only, an unset variable is an error at FILE:LINE naming the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import IntentError
from agent.intent.credpaths import ExpansionError, expand
from agent.intent.loader import load_fabric

REPO = Path(__file__).resolve().parents[2]
LAB_FABRIC = REPO / "playbooks" / "fabrics" / "lab-leafspine.yml"


def fabric_with(tmp_path: Path, credentials: str, device_credentials: str = "") -> Path:
    text = LAB_FABRIC.read_text().replace("    password_env: ROCE_LAB_PASSWORD\n", credentials)
    if device_credentials:
        text = text.replace(
            "- name: spine1\n", f"- name: spine1\n  credentials:\n{device_credentials}", 1
        )
    path = tmp_path / "fabric.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("value", "env", "expected"),
    [
        ("${CREDENTIALS_DIRECTORY}/fabric-password", {"CREDENTIALS_DIRECTORY": "/run/c/u"},
         "/run/c/u/fabric-password"),
        ("$CREDENTIALS_DIRECTORY/key", {"CREDENTIALS_DIRECTORY": "/run/c/u/"}, "/run/c/u/key"),
        ("/etc/roce-agent/password", {}, "/etc/roce-agent/password"),
    ],
)  # fmt: skip
def test_expand(value: str, env: dict[str, str], expected: str) -> None:
    assert expand(value, env) == expected


@pytest.mark.parametrize(
    ("value", "env", "message"),
    [
        ("${CREDENTIALS_DIRECTORY}/p", {}, "${CREDENTIALS_DIRECTORY} is not set"),
        ("${CREDENTIALS_DIRECTORY}/p", {"CREDENTIALS_DIRECTORY": ""}, "is not set"),
        ("${CREDENTIALS_DIRECTORY}/p", {"CREDENTIALS_DIRECTORY": "rel"}, "absolute"),
        ("${HOME}/.ssh/id", {"HOME": "/root"}, "Actual: ${HOME}"),
        ("$HOME/.ssh/id", {"HOME": "/root"}, "Actual: $HOME"),
        ("/a$b", {}, "Actual: $b"),
        ("/a/$", {}, "a lone '$'"),
    ],
)
def test_expand_refuses(value: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(ExpansionError, match=None) as caught:
        expand(value, env)
    assert message in str(caught.value)


def test_defaults_credentials_expand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    path = fabric_with(tmp_path, "    password_file: ${CREDENTIALS_DIRECTORY}/fabric-password\n")
    intent = load_fabric(path).intent
    files = {d.credentials.password_file for d in intent.devices if d.credentials}
    assert files == {tmp_path / "creds" / "fabric-password"}


def test_unset_variable_names_file_line_and_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    path = fabric_with(
        tmp_path,
        "    password_env: ROCE_LAB_PASSWORD\n",
        "    password_file: ${CREDENTIALS_DIRECTORY}/spine1-password\n",
    )
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    line = next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if "spine1-password" in text
    )
    [problem] = caught.value.problems
    assert problem.position is not None and problem.position.file == path
    assert problem.position.line == line
    assert "device spine1: ${CREDENTIALS_DIRECTORY} is not set" in str(problem)
    assert problem.field == "devices[0].credentials.password_file"


def test_unset_variable_in_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    path = fabric_with(tmp_path, "    ssh_key: ${CREDENTIALS_DIRECTORY}/id_ed25519\n")
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "${CREDENTIALS_DIRECTORY}" in text)
    assert f"{path}:{line}:14: defaults.credentials.ssh_key: defaults: " in str(caught.value)

"""``${CREDENTIALS_DIRECTORY}`` in credential paths: systemd's ``LoadCredential=`` recipe.

systemd hands a unit its secrets as files in a private directory and names that directory
in ``$CREDENTIALS_DIRECTORY`` (``/run/credentials/<unit>/``, mode 0500, files 0400, readable
by the service's user only). A fabric file cannot know the path in advance, so
``password_file`` and ``ssh_key`` may start with ``${CREDENTIALS_DIRECTORY}``. Only that
variable is expanded (an allow-list, not shell expansion: a fabric file must not read
arbitrary environment into paths), and any other ``$`` is refused rather than taken
literally, because ``$HOME/.ssh/id`` taken literally fails much later and less clearly.

Where a credential file may be: in the fabric file's folder (or below it), in
``${CREDENTIALS_DIRECTORY}``, or in a folder the operator lists in
``$ROCE_AGENT_CREDENTIALS_DIRS`` (absolute paths separated by ':'). After resolving symlinks
the file must still be inside one of them. A fabric file is often written by more people
than may read the agent's secrets (a repository of fabrics), and the agent often runs with
more rights than they have: without this, a fabric that points a device at a server of its
author's, host key pinned, could name ``/root/.git-credentials`` or another one-line secret as
its ``password_file`` and have it sent as the SSH password (issue #42). The shape, owner and
mode checks of common.permissions catch keys and system files; this catches the rest."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent.errors import Problem
from common.errors import excerpt

EXPANDED = ("CREDENTIALS_DIRECTORY",)
# Folders besides the fabric's own and ${CREDENTIALS_DIRECTORY} that may hold credential files.
ROOTS_ENV = "ROCE_AGENT_CREDENTIALS_DIRS"
CREDENTIAL_PATHS = ("password_file", "ssh_key")
# ${NAME}, $NAME or a lone $. A name never holds '$', so a "${" without its "}" stops at the
# next '$' instead of scanning to the end for every one of them (quadratic, issue #42).
_REFERENCE = re.compile(r"\$\{([^}$]*+)\}|\$([A-Za-z_][A-Za-z0-9_]*+)|\$")
# PATH_MAX of Linux (include/uapi/linux/limits.h): no longer path can be opened.
MAX_PATH = 4096

Locate = Callable[[tuple[str | int, ...], str], Problem]


class ExpansionError(ValueError):
    pass


def expand(value: str, environ: dict[str, str] | None = None) -> str:
    """``value`` with ``${CREDENTIALS_DIRECTORY}`` replaced; ExpansionError when a referenced
    variable is not on the allow-list, unset or not an absolute directory path."""
    env = os.environ if environ is None else environ
    if len(value) > MAX_PATH:
        raise ExpansionError(
            f"Expected: a path of at most {MAX_PATH} characters Actual: {len(value)} characters"
        )

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) if match.group(1) is not None else match.group(2)
        if name is None or name not in EXPANDED:
            shown = match.group(0) + ("" if name is not None else " (a lone '$')")
            raise ExpansionError(
                f"only ${{{EXPANDED[0]}}} is expanded in credential paths. "
                f"Expected: ${{{EXPANDED[0]}}}/NAME or a plain path Actual: {shown}"
            )
        directory = env.get(name)
        if not directory:
            raise ExpansionError(
                f"${{{name}}} is not set: systemd sets it for a unit with LoadCredential= "
                f"(see deploy/systemd/roce-agent.service); outside systemd, set it to the "
                f"directory holding the credential or use a plain path"
            )
        if not os.path.isabs(directory):
            raise ExpansionError(
                f"${{{name}}} must be an absolute directory. Actual: {directory!r}"
            )
        return directory.rstrip("/") or "/"

    return _REFERENCE.sub(replace, value)


def credential_roots(fabric_dir: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders a fabric file's credential files must be in (after resolving symlinks)."""
    env = os.environ if environ is None else environ
    roots = [fabric_dir]
    if env.get("CREDENTIALS_DIRECTORY"):
        roots.append(Path(env["CREDENTIALS_DIRECTORY"]))
    roots += [Path(p) for p in env.get(ROOTS_ENV, "").split(os.pathsep) if os.path.isabs(p)]
    return [_real(root) for root in roots]


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop
        return path


def _outside(value: str, fabric_dir: Path, roots: list[Path]) -> str | None:
    """None when the credential file ``value`` (relative to the fabric's folder) is inside
    one of ``roots``; else the message that says where it is and where it may be."""
    real = _real(fabric_dir / value)  # an absolute value replaces fabric_dir
    if any(real.is_relative_to(root) for root in roots):
        return None
    return (
        f"Expected: a file in the fabric file's folder, ${{CREDENTIALS_DIRECTORY}} or a folder "
        f"of ${ROOTS_ENV} Actual: {excerpt(str(real), 200)} (outside them: a fabric file "
        f"names only secrets its operator put within reach)"
    )


def _holders(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str, Any]]:
    """(where, who, credentials) of ``defaults.credentials`` and each device's."""
    holders: list[tuple[tuple[str | int, ...], str, Any]] = []
    defaults = data.get("defaults")
    if isinstance(defaults, dict):
        holders.append((("defaults", "credentials"), "defaults", defaults.get("credentials")))
    devices = data.get("devices")
    if isinstance(devices, list):
        for index, device in enumerate(devices):
            if isinstance(device, dict):
                name = device.get("name")
                who = f"device {name}" if isinstance(name, str) else f"devices[{index}]"
                holders.append((("devices", index, "credentials"), who, device.get("credentials")))
    return holders


def expand_credential_paths(
    data: dict[str, Any], locate: Locate, fabric_dir: Path
) -> list[Problem]:
    """Expand credential paths in a fabric document in place (``defaults.credentials`` and
    every ``devices[i].credentials``) before the relative ones are joined to the fabric's
    directory, and check each is inside :func:`credential_roots`; a problem per path that
    cannot be expanded or is elsewhere, at its line, naming the device."""
    problems: list[Problem] = []
    roots = credential_roots(fabric_dir)
    for loc, who, credentials in _holders(data):
        if not isinstance(credentials, dict):
            continue
        for key in CREDENTIAL_PATHS:
            value = credentials.get(key)
            if not isinstance(value, str):
                continue  # the model says what is wrong with it
            try:
                credentials[key] = value = expand(value)
            except ExpansionError as exc:
                problems.append(locate((*loc, key), f"{who}: {exc}"))
                continue
            outside = _outside(value, fabric_dir, roots) if value else None
            if outside is not None:
                problems.append(locate((*loc, key), f"{who}: {outside}"))
    return problems

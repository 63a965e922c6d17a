"""``${CREDENTIALS_DIRECTORY}`` in credential paths: systemd's ``LoadCredential=`` recipe.

systemd hands a unit its secrets as files in a private directory and names that directory
in ``$CREDENTIALS_DIRECTORY`` (``/run/credentials/<unit>/``, mode 0500, files 0400, readable
by the service's user only). A fabric file cannot know the path in advance, so
``password_file`` and ``ssh_key`` may start with ``${CREDENTIALS_DIRECTORY}``. Only that
variable is expanded (an allow-list, not shell expansion: a fabric file must not read
arbitrary environment into paths), and any other ``$`` is refused rather than taken
literally, because ``$HOME/.ssh/id`` taken literally fails much later and less clearly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from agent.errors import Problem

EXPANDED = ("CREDENTIALS_DIRECTORY",)
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


def expand_credential_paths(data: dict[str, Any], locate: Locate) -> list[Problem]:
    """Expand credential paths in a fabric document in place (``defaults.credentials`` and
    every ``devices[i].credentials``) before the relative ones are joined to the fabric's
    directory; a problem per path that cannot be expanded, at its line, naming the device."""
    problems: list[Problem] = []
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
    for loc, who, credentials in holders:
        if not isinstance(credentials, dict):
            continue
        for key in CREDENTIAL_PATHS:
            value = credentials.get(key)
            if not isinstance(value, str) or "$" not in value:
                continue
            try:
                credentials[key] = expand(value)
            except ExpansionError as exc:
                problems.append(locate((*loc, key), f"{who}: {exc}"))
    return problems

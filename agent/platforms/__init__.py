"""One module per NOS; :func:`platform_for` picks the class for a device's ``platform``."""

from __future__ import annotations

import importlib

from agent.errors import AgentError
from agent.platforms.base import Platform

MODULES = {
    "arista_eos": ("agent.platforms.arista_eos", "AristaEos"),
    "sonic": ("agent.platforms.sonic", "Sonic"),
    "cumulus_nvue": ("agent.platforms.cumulus_nvue", "CumulusNvue"),
    "cisco_nxos": ("agent.platforms.cisco_nxos", "CiscoNxos"),
    "linux_host": ("agent.platforms.linux_host", "LinuxHost"),
}


def platform_for(name: str) -> Platform:
    """The platform object for a device's ``platform`` value."""
    if name not in MODULES:
        raise AgentError(f"unsupported platform {name!r} (supported: {', '.join(MODULES)})")
    module_name, class_name = MODULES[name]
    module = importlib.import_module(module_name)
    platform: Platform = getattr(module, class_name)()
    return platform

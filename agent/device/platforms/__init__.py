"""One module per NOS; :func:`platform_for` picks the class for a device's ``platform``."""

from __future__ import annotations

import importlib

from agent.device.platforms.base import Platform
from agent.errors import AgentError

MODULES = {
    "arista_eos": ("agent.device.platforms.arista_eos", "AristaEos"),
    "sonic": ("agent.device.platforms.sonic", "Sonic"),
    "cumulus_nvue": ("agent.device.platforms.cumulus_nvue", "CumulusNvue"),
    "cisco_nxos": ("agent.device.platforms.cisco_nxos", "CiscoNxos"),
    "linux_host": ("agent.device.platforms.linux_host", "LinuxHost"),
}


def platform_for(name: str) -> Platform:
    """The platform object for a device's ``platform`` value."""
    if name not in MODULES:
        raise AgentError(f"unsupported platform {name!r} (supported: {', '.join(MODULES)})")
    module_name, class_name = MODULES[name]
    module = importlib.import_module(module_name)
    platform: Platform = getattr(module, class_name)()
    return platform

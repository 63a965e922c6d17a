"""One module per NOS; :data:`PLATFORMS` names them and :func:`platform_for` builds the one
for a device's ``platform``."""

from __future__ import annotations

from agent.device.platforms.base import Platform
from agent.errors import AgentError
from common.registry import Entry, Registry, UnknownName

PLATFORMS: Registry[type[Platform]] = Registry(
    "platform",
    {
        "arista_eos": Entry(
            "agent.device.platforms.arista_eos:AristaEos",
            "Arista EOS: configuration sessions with commit timer, reads with | json",
        ),
        "sonic": Entry(
            "agent.device.platforms.sonic:Sonic",
            "SONiC: CONFIG_DB patches through GCU checkpoint / apply-patch / rollback",
        ),
        "cumulus_nvue": Entry(
            "agent.device.platforms.cumulus_nvue:CumulusNvue",
            "Cumulus Linux NVUE: nv set, nv config apply --confirm",
        ),
        "cisco_nxos": Entry(
            "agent.device.platforms.cisco_nxos:CiscoNxos",
            "Cisco NX-OS: MQC policies, checkpoint / rollback",
        ),
        "linux_host": Entry(
            "agent.device.platforms.linux_host:LinuxHost",
            "host NICs (mlx5): mlnx_qos and DCQCN sysfs, changed only with the opt-in",
        ),
    },
)


def platform_for(name: str) -> Platform:
    """The platform object for a device's ``platform`` value (an unknown one is an
    :class:`AgentError` naming the supported ones)."""
    try:
        platform_class = PLATFORMS.load(name)
    except UnknownName:
        raise AgentError(
            f"unsupported platform {name!r} (supported: {', '.join(PLATFORMS.names)})"
        ) from None
    return platform_class()

"""SONiC management-plane personality of the lab switch: a Linux shell (netmiko ``linux``),
CONFIG_DB, the Generic Config Updater (checkpoint / apply-patch / rollback), systemd-run timers
and the sonic-utilities show commands, all driving the shared data plane.

See ``docs/lab-sonic.md`` for what is emulated, from which source, and how it differs.
"""

from lab.mgmt.sonic.personality import SonicPersonality

__all__ = ["SonicPersonality"]

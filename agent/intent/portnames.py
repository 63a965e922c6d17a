"""Which interface names each platform has for its front-panel (data) ports (rule IR021).

A Cumulus name (``swp99``) on an EOS switch passes every field check, then fails on the
device halfway through ``apply`` (or worse, names a port the user did not mean). The
patterns below are the vendors' own naming of data ports; ``discover`` checks the names it
reads over LLDP with the same function, so a skeleton it writes passes ``check``.

- arista_eos: ``Ethernet<port>`` on fixed switches, ``Ethernet<port>/<lane>`` on multi-lane
  ports, ``Ethernet<slot>/<port>[/<lane>]`` on modular ones. EOS User Manual, "Ethernet
  Ports", section "Ethernet Interfaces" / "Port groups and lanes"
  (https://www.arista.com/en/um-eos/eos-ethernet-ports).
- cisco_nxos: ``Ethernet<slot>/<port>``, and ``Ethernet<slot>/<port>/<breakout>`` once a
  port is broken out. Cisco Nexus 9000 Series NX-OS Interfaces Configuration Guide,
  "Configuring Basic Interface Parameters" ("interface ethernet slot/port") and "Configuring
  Breakout" (https://www.cisco.com/c/en/us/td/docs/dcn/nx-os/nexus9000/104x/configuration/
  interfaces/cisco-nexus-9000-nx-os-interfaces-configuration-guide-104x.html).
- sonic: ``Ethernet<n>`` only (n the port's first SerDes lane, e.g. Ethernet0, Ethernet8 on
  8-lane 400G ports): the PORT table's keys, as every platform's port_config.ini in
  sonic-buildimage lists them (device/<vendor>/<platform>/<hwsku>/port_config.ini, columns
  "# name lanes alias index speed"; src/sonic-yang-models/yang-models/sonic-port.yang,
  list PORT_LIST key "name", "Physical port name (e.g., Ethernet0)"). The ``alias`` column
  (``etp1``, ``Eth1/1``) is a display name, not a key the config DB accepts.
- cumulus_nvue: ``swp<n>`` front-panel ports, ``swp<n>s<m>`` once broken out. Cumulus Linux
  user guide, "Switch Port Attributes" ("swp is a switch front panel port") and "Breakout
  Ports" (https://docs.nvidia.com/networking-ethernet-software/cumulus-linux/
  Layer-1-and-Switch-Ports/Interface-Configuration-and-Management/Switch-Port-Attributes/).
- linux_host: any name the kernel accepts (``eth0``, ``ens1f0np0``, ``enp65s0f0``):
  interface names are chosen by udev or the administrator, so only the general
  interface-name check (:data:`agent.intent.model.InterfaceName`) and the kernel's length
  apply.

Lengths, checked before any pattern runs: a Linux interface name is at most 15 characters
(``IFNAMSIZ`` is 16 bytes with the terminating NUL, include/uapi/linux/if.h, and
``dev_valid_name()`` in net/core/dev.c refuses longer ones). That bounds hosts, SONiC (its
front-panel ports are kernel netdevs named after the PORT table) and Cumulus Linux (``swp``
ports are kernel netdevs). EOS and NX-OS names are bounded by their patterns (a prefix and at
most three numbers of at most four digits, separated by ``/``).
"""

from __future__ import annotations

import re
from typing import Final

# Each number: ASCII digits, no leading zero except 0 itself (``Ethernet01`` is not a name
# any of these NOSes prints, and would never match the device's own name).
_N = r"(?:0|[1-9][0-9]{0,3})"

PORT_NAME_PATTERNS: Final[dict[str, re.Pattern[str] | None]] = {
    "arista_eos": re.compile(rf"Ethernet{_N}(?:/{_N}){{0,2}}"),
    "cisco_nxos": re.compile(rf"Ethernet{_N}/{_N}(?:/{_N})?"),
    "sonic": re.compile(rf"Ethernet{_N}"),
    "cumulus_nvue": re.compile(rf"swp{_N}(?:s{_N})?"),
    "linux_host": None,  # any interface name (checked by the model's InterfaceName)
}

LINUX_IFNAME_MAX = 15
PORT_NAME_MAX: Final[dict[str, int]] = {
    "arista_eos": len("Ethernet") + 4 + 2 * 5,
    "cisco_nxos": len("Ethernet") + 4 + 2 * 5,
    "sonic": LINUX_IFNAME_MAX,
    "cumulus_nvue": LINUX_IFNAME_MAX,
    "linux_host": LINUX_IFNAME_MAX,
}

# What an error (and ``discover``'s skeleton comments) show as the expected form.
PORT_NAME_EXAMPLES: Final[dict[str, str]] = {
    "arista_eos": "Ethernet1, Ethernet1/1 or Ethernet3/1/1",
    "cisco_nxos": "Ethernet1/1 or Ethernet1/1/1",
    "sonic": "Ethernet0 or Ethernet8",
    "cumulus_nvue": "swp1 or swp1s0",
    "linux_host": "eth0 or ens1f0np0",
}


def check_port_name(platform: str, name: str) -> str | None:
    """None when ``name`` is a data-port name on ``platform``; else what was expected.

    The text reads after "Expected:", e.g. "an arista_eos interface name such as Ethernet1,
    Ethernet1/1 or Ethernet3/1/1". An unknown platform is expected to be one of the known.
    """
    if platform not in PORT_NAME_PATTERNS:
        return f"a platform among {', '.join(PORT_NAME_PATTERNS)}"
    article = "an" if platform[0] in "aeiou" else "a"
    longest = PORT_NAME_MAX[platform]
    if len(name) > longest:
        return f"{article} {platform} interface name of at most {longest} characters"
    pattern = PORT_NAME_PATTERNS[platform]
    if pattern is None or pattern.fullmatch(name):
        return None
    return f"{article} {platform} interface name such as {PORT_NAME_EXAMPLES[platform]}"

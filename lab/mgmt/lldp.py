"""The lab switch's LLDP neighbours: from the lab's topology, not from the wire.

The lab has no LLDP daemon on the wire: ``lab up`` writes each switch's cabling into
``<node>-mgmt/links.json`` (:data:`LINKS_FILE`) before its management plane starts, and every
personality answers from it what a real switch learns from LLDPDUs, in its NOS's shape
(:mod:`lab.mgmt.eos.lldp`, :mod:`lab.mgmt.sonic.lldp`, :mod:`lab.mgmt.nxos.lldp`, NVUE's ``nv
show interface <if> lldp neighbor`` in :mod:`lab.mgmt.nvue.shows`).

A neighbouring lab switch is advertised as a switch would be (port ID subtype interface
name, bridge and router capabilities). A host is advertised as lldpd on Linux does by
default (lldpd(8)): chassis ID and port ID are MAC addresses, the interface name travels in
the port description, and no bridge or router capability is enabled. The management address
a host's lldpd sends is its first IPv4 address, here its data-plane address.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

LINKS_FILE = "links.json"


@dataclass(frozen=True)
class LldpPeer:
    """The far end of one port, as LLDP would describe it."""

    system_name: str
    port: str  # EthernetN for a switch, the interface name (eth1) for a host
    port_mac: str
    chassis_mac: str
    kind: str  # "switch" or "host"
    management_address: str = ""


@dataclass(frozen=True)
class PortLink:
    """A switch port's MTU and what is cabled to it."""

    mtu: int | None
    peer: LldpPeer | None


def dotted_mac(mac: str) -> str:
    """``02:00:00:00:01:02`` -> ``0200.0000.0102`` (how EOS and NX-OS print MAC addresses)."""
    digits = mac.replace(":", "").replace("-", "").replace(".", "").lower()
    return ".".join(digits[i : i + 4] for i in range(0, 12, 4))


def load_links(state_dir: Path) -> dict[str, PortLink]:
    """``links.json`` of a switch (data-plane port name -> link); empty when there is none
    (a switch started by hand, without ``lab up``: it then has no LLDP neighbours)."""
    try:
        raw = json.loads((state_dir / LINKS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    links = {}
    for ifname, entry in raw.get("ports", {}).items():
        peer = entry.get("peer")
        links[ifname] = PortLink(
            mtu=int(entry["mtu"]) if entry.get("mtu") else None,
            peer=LldpPeer(**peer) if isinstance(peer, dict) else None,
        )
    return links

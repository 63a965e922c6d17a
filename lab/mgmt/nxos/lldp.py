"""LLDP and the interface table as NX-OS answers them, from the lab's links
(:mod:`lab.mgmt.lldp`):

* ``show lldp neighbors detail | json`` -- ``TABLE_nbor_detail.ROW_nbor_detail`` (a dict for
  one row, a list for more: NX-API's table convention) with ``chassis_type``, ``chassis_id``
  (dotted MAC), ``port_type``, ``port_id``, ``l_port_id`` (``Eth1/1``), ``port_desc``,
  ``sys_name``, ``sys_desc``, ``ttl``, ``system_capability`` / ``enabled_capability``
  (``B, R``: bridge, router), ``mgmt_addr_type``, ``mgmt_addr``, ``vlan_id`` -- the NX-API keys
  napalm's nxos driver (``get_lldp_neighbors_detail``) and ONOS' ``LinkDiscoveryCiscoImpl``
  read; the text form is the one those keys name, line by line;
* ``show lldp neighbors | json`` -- ``TABLE_nbor.ROW_nbor`` with ``chassis_id`` (the
  neighbour's system name), ``l_port_id``, ``hold_time``, ``capability``, ``port_id``
  (napalm ``get_lldp_neighbors``);
* ``show interface | json`` -- ``TABLE_interface.ROW_interface[]`` with ``interface``,
  ``state``, ``admin_state``, ``desc``, ``eth_mtu`` (a string), ``eth_bw`` (Kbit/s),
  ``eth_speed`` (``10 Mb/s``; ``auto-speed`` on a port that is down), as in napalm's recorded
  test/nxos/mocked_data/test_get_interfaces/*/show_interface.json, and the error counters
  ``eth_crc``, ``eth_inerr``, ``eth_outerr`` that public Nexus collectors read (the table is
  built in :func:`lab.mgmt.nxos.shows.show_interfaces`).

A neighbouring lab switch is advertised as a switch (port ID = its interface name, bridge and
router); a host as lldpd on Linux does (MACs, the interface name in the port description).
"""

from __future__ import annotations

from typing import Any

from lab.mgmt.lldp import LldpPeer, PortLink, dotted_mac
from lab.mgmt.nxos.render import NXOS_VERSION

TTL_S = 120  # NX-OS' default LLDP hold time
# The legend both LLDP tables start with (genieparser's recordings of NX-OS).
CAPABILITY_CODES = [
    "Capability codes:",
    "  (R) Router, (B) Bridge, (T) Telephone, (C) DOCSIS Cable Device",
    "  (W) WLAN Access Point, (P) Repeater, (S) Station, (O) Other",
]
_HEADER = f"{'Device ID':<21}{'Local Intf':<16}{'Hold-time':<11}{'Capability':<12}Port ID"


def short_port(name: str) -> str:
    """``Ethernet1/3`` -> ``Eth1/3`` (NX-OS' LLDP tables)."""
    return name.replace("Ethernet", "Eth", 1)


def table(key: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """NX-API's ``TABLE_x: {ROW_x: ...}``: one row as a dict, several as a list, none absent."""
    if not rows:
        return {}
    return {f"TABLE_{key}": {f"ROW_{key}": rows[0] if len(rows) == 1 else rows}}


def _description(peer: LldpPeer) -> str:
    if peer.kind == "switch":
        return f"Cisco Nexus Operating System (NX-OS) Software {NXOS_VERSION} (lab switch)"
    return "Linux (lab host)"


def _detail_row(local: str, peer: LldpPeer) -> dict[str, Any]:
    switch = peer.kind == "switch"
    capability = "B, R" if switch else "S"
    return {
        "chassis_type": "Mac Address",
        "chassis_id": dotted_mac(peer.chassis_mac),
        "port_type": "Interface Name" if switch else "Mac Address",
        "port_id": peer.port if switch else dotted_mac(peer.port_mac),
        "l_port_id": short_port(local),
        "port_desc": "" if switch else peer.port,
        "sys_name": peer.system_name,
        "sys_desc": _description(peer),
        "ttl": TTL_S,
        "system_capability": capability,
        "enabled_capability": capability,
        "mgmt_addr_type": "IPV4" if peer.management_address else "",
        "mgmt_addr": peer.management_address or "not advertised",
        "vlan_id": "not advertised",
    }


def neighbors_detail(ports: list[tuple[str, PortLink | None]]) -> dict[str, Any]:
    """``show lldp neighbors detail | json`` for ``(NX-OS port name, link)`` pairs."""
    rows = [_detail_row(n, link.peer) for n, link in ports if link is not None and link.peer]
    return {**table("nbor_detail", rows), "neigh_count": len(rows)}


def detail_text(data: dict[str, Any]) -> str:
    """The text of ``show lldp neighbors detail``."""
    rows = data.get("TABLE_nbor_detail", {}).get("ROW_nbor_detail", [])
    out = [*CAPABILITY_CODES, _HEADER, ""]
    for row in rows if isinstance(rows, list) else [rows]:
        out += [
            f"Chassis id: {row['chassis_id']}",
            f"Port id: {row['port_id']}",
            f"Local Port id: {row['l_port_id']}",
            f"Port Description: {row['port_desc'] or 'not advertised'}",
            f"System Name: {row['sys_name']}",
            f"System Description: {row['sys_desc']}",
            f"Time remaining: {row['ttl']} seconds",
            f"System Capabilities: {row['system_capability']}",
            f"Enabled Capabilities: {row['enabled_capability']}",
            f"Management Address: {row['mgmt_addr']}",
            "Management Address IPV6: not advertised",
            f"Vlan ID: {row['vlan_id']}",
            "",
        ]
    out.append(f"Total entries displayed: {data['neigh_count']}")
    return "\n".join(out)


def neighbors(ports: list[tuple[str, PortLink | None]]) -> dict[str, Any]:
    """``show lldp neighbors | json``."""
    rows = [
        {
            "chassis_id": link.peer.system_name,
            "l_port_id": short_port(name),
            "hold_time": TTL_S,
            "capability": "BR" if link.peer.kind == "switch" else "S",
            "port_id": link.peer.port
            if link.peer.kind == "switch"
            else dotted_mac(link.peer.port_mac),
        }
        for name, link in ports
        if link is not None and link.peer is not None
    ]
    return {**table("nbor", rows), "neigh_count": len(rows)}


def neighbors_text(data: dict[str, Any]) -> str:
    """The text of ``show lldp neighbors``."""
    rows = data.get("TABLE_nbor", {}).get("ROW_nbor", [])
    out = [*CAPABILITY_CODES, _HEADER]
    for row in rows if isinstance(rows, list) else [rows]:
        out.append(
            f"{row['chassis_id']:<21}{row['l_port_id']:<16}{row['hold_time']:<11}"
            f"{row['capability']:<12}{row['port_id']}"
        )
    out.append(f"Total entries displayed: {data['neigh_count']}")
    return "\n".join(out)

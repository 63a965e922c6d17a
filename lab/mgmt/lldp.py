"""LLDP as the lab switch answers it: its neighbours come from the lab's topology.

The lab has no LLDP daemon on the wire: ``lab up`` writes each switch's cabling into
``<node>-mgmt/links.json`` (:data:`LINKS_FILE`) before its management plane starts, and the
EOS personality answers from that file what a real switch learns from LLDPDUs:

* ``show lldp neighbors | json`` — EOS' summary: ``lldpNeighbors`` is a list of ``{port,
  neighborDevice, neighborPort, ttl}`` plus the ``tablesLastChangeTime`` / ``tablesAgeOuts``
  / ``tablesInserts`` / ``tablesDeletes`` / ``tablesDrops`` counters (the keys napalm's
  ``eos.py`` ``get_lldp_neighbors`` reads, its test/eos/mocked_data/test_get_lldp_neighbors);
* ``show lldp neighbors detail | json`` — ``lldpNeighbors.<if>.lldpNeighborInfo[]`` with
  ``chassisIdType``, ``chassisId`` (EOS dotted MAC), ``systemName``, ``systemDescription``,
  ``systemCapabilities``, ``ttl``, ``managementAddresses`` and ``neighborInterfaceInfo``
  (``interfaceIdType``, ``interfaceId`` in quotes as EOS prints it, ``interfaceId_v2``,
  ``interfaceDescription``), as in ANTA's ``VerifyLLDPNeighbors`` test data
  (tests/units/anta_tests/test_connectivity.py) and napalm's recorded
  test/eos/mocked_data/test_get_lldp_neighbors_detail/normal;
* ``show interfaces | json`` — ``interfaces.<if>`` with ``bandwidth`` (bit/s), ``mtu``,
  ``interfaceStatus``, ``lineProtocolStatus`` (napalm ``get_interfaces``'s keys,
  test/eos/mocked_data/test_get_interfaces/normal/show_interfaces.json).

A neighbouring lab switch is advertised as an EOS switch would be (port ID subtype interface
name, bridge and router capabilities). A host is advertised as lldpd on Linux does by
default (lldpd(8)): chassis ID and port ID are MAC addresses, the interface name travels in
the port description, and no bridge or router capability is enabled (the napalm recording
above shows exactly that for Linux servers). The management address a host's lldpd sends is
its first IPv4 address, here its data-plane address.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.mgmt import names
from lab.mgmt.render import EOS_VERSION, MODEL_NAME

LINKS_FILE = "links.json"
TTL_S = 120  # EOS' default LLDP hold time (timer 30 s x 4)


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


def dotted_mac(mac: str) -> str:
    """``02:00:00:00:01:02`` -> ``0200.0000.0102`` (EOS' form)."""
    digits = mac.replace(":", "").replace("-", "").replace(".", "").lower()
    return ".".join(digits[i : i + 4] for i in range(0, 12, 4))


def _capabilities(kind: str) -> dict[str, bool]:
    forwards = kind == "switch"
    return {"bridge": forwards, "router": forwards, "wlanAccessPoint": False}


def _neighbor_info(peer: LldpPeer) -> dict[str, Any]:
    if peer.kind == "switch":
        interface = {
            "interfaceIdType": "interfaceName",
            "interfaceId": f'"{peer.port}"',
            "interfaceId_v2": peer.port,
            "interfaceDescription": "",
        }
        description = f"Arista Networks EOS version {EOS_VERSION} running on {MODEL_NAME}"
    else:
        interface = {
            "interfaceIdType": "macAddress",
            "interfaceId": dotted_mac(peer.port_mac),
            "interfaceId_v2": dotted_mac(peer.port_mac),
            "interfaceDescription": peer.port,
        }
        description = "Linux (lab host)"
    addresses = (
        [
            {
                "addressType": "ipv4",
                "address": peer.management_address,
                "interfaceNumType": "ifIndex",
                "interfaceNum": 0,
                "oidString": "",
            }
        ]
        if peer.management_address
        else []
    )
    return {
        "chassisIdType": "macAddress",
        "chassisId": dotted_mac(peer.chassis_mac),
        "systemName": peer.system_name,
        "systemDescription": description,
        "systemCapabilities": _capabilities(peer.kind),
        "ttl": TTL_S,
        "managementAddresses": addresses,
        "neighborInterfaceInfo": interface,
    }


def lldp_neighbors_detail(ports: list[tuple[str, PortLink | None]]) -> dict[str, Any]:
    """``show lldp neighbors detail | json`` for ``(EOS port name, link)`` pairs."""
    table: dict[str, Any] = {}
    for name, link in ports:
        peer = link.peer if link is not None else None
        table[name] = {"lldpNeighborInfo": [_neighbor_info(peer)] if peer else []}
    return {"lldpNeighbors": table}


def lldp_neighbors(ports: list[tuple[str, PortLink | None]]) -> dict[str, Any]:
    """``show lldp neighbors | json``."""
    rows = []
    for name, link in ports:
        peer = link.peer if link is not None else None
        if peer is None:
            continue
        rows.append(
            {
                "port": name,
                "neighborDevice": peer.system_name,
                # EOS shows a host's port ID, which lldpd sends as a MAC address.
                "neighborPort": peer.port if peer.kind == "switch" else dotted_mac(peer.port_mac),
                "ttl": TTL_S,
            }
        )
    return {
        "tablesLastChangeTime": 0.0,
        "tablesAgeOuts": 0,
        "tablesInserts": len(rows),
        "tablesDeletes": 0,
        "tablesDrops": 0,
        "lldpNeighbors": rows,
    }


def neighbors_text(data: dict[str, Any]) -> str:
    """The text form of ``show lldp neighbors`` (Port, Neighbor Device ID, Port ID, TTL)."""
    lines = [
        f"Last table change time   : {data['tablesLastChangeTime']}",
        f"Number of table inserts  : {data['tablesInserts']}",
        "",
        f"{'Port':<12}{'Neighbor Device ID':<24}{'Neighbor Port ID':<20}TTL",
        f"{'-' * 11} {'-' * 23} {'-' * 19} ---",
    ]
    for row in data["lldpNeighbors"]:
        lines.append(
            f"{names.short_name(row['port']):<12}{row['neighborDevice']:<24}"
            f"{row['neighborPort']:<20}{row['ttl']}"
        )
    return "\n".join(lines)


def detail_text(data: dict[str, Any]) -> str:
    """The text form of ``show lldp neighbors detail`` (one block per port)."""
    out = []
    for port, entry in data["lldpNeighbors"].items():
        infos = entry["lldpNeighborInfo"]
        out.append(f"Interface {port} detected {len(infos)} LLDP neighbors:")
        for info in infos:
            iface = info["neighborInterfaceInfo"]
            out += [
                "",
                f"  Neighbor {info['chassisId']}/{iface['interfaceId_v2']}, age 0 seconds",
                f"    - Chassis ID     : {info['chassisId']}",
                f"    - Port ID     : {iface['interfaceId']}",
                f"    - Time To Live: {info['ttl']} seconds",
                f'    - Port Description: "{iface["interfaceDescription"]}"',
                f'    - System Name: "{info["systemName"]}"',
            ]
        out.append("")
    return "\n".join(out)

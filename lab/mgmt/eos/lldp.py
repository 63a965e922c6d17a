"""LLDP as the EOS personality answers it, from the lab's links (:mod:`lab.mgmt.lldp`):

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
* ``show interfaces | json`` (:mod:`lab.mgmt.eos.shows`) — ``interfaces.<if>`` with
  ``bandwidth`` (bit/s), ``mtu``, ``interfaceStatus``, ``lineProtocolStatus`` (napalm
  ``get_interfaces``'s keys, test/eos/mocked_data/test_get_interfaces/normal/show_interfaces.json).

A neighbouring lab switch is advertised as an EOS switch would be; a host as lldpd does (the
napalm recording above shows exactly that for Linux servers).
"""

from __future__ import annotations

from typing import Any

from lab.mgmt import names
from lab.mgmt.eos.render import EOS_VERSION, MODEL_NAME
from lab.mgmt.lldp import LldpPeer, PortLink, dotted_mac

TTL_S = 120  # EOS' default LLDP hold time (timer 30 s x 4)


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

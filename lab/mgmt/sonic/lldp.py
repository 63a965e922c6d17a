"""``docker exec lldp lldpctl -f json``: the neighbours as lldpd's JSON writer prints them.

SONiC runs lldpd in its ``lldp`` container; lldpd's ``lldpctl -f json`` (lldpd
``src/client/json_writer.c``, ``display.c``) nests ``lldp.interface.<ifname>`` with ``via``,
``rid``, ``age``, ``chassis.<system name>`` (``id`` {type, value}, ``descr``, ``mgmt-ip``,
``capability`` [{type, enabled}]) and ``port`` (``id`` {type, value}, ``descr``, ``ttl``).
Several interfaces make ``interface`` a list of one-key objects, a single one an object (the
JSON writer's repeated-key rule). A switch neighbour advertises its interface name (``ifname``);
a lab host runs lldpd with defaults: its MAC as port ID and the interface name as description.
"""

from __future__ import annotations

import json
from typing import Any

from lab.mgmt.lldp import PortLink

TTL_S = "120"


def _neighbour(link: PortLink) -> dict[str, Any] | None:
    peer = link.peer
    if peer is None:
        return None
    switch = peer.kind == "switch"
    chassis: dict[str, Any] = {
        "id": {"type": "mac", "value": peer.chassis_mac},
        "descr": "SONiC / Arista EOS (lab switch)" if switch else "Linux (lab host)",
        "capability": [
            {"type": "Bridge", "enabled": switch},
            {"type": "Router", "enabled": switch},
        ],
    }
    if peer.management_address:
        chassis["mgmt-ip"] = peer.management_address
    port_id = (
        {"type": "ifname", "value": peer.port}
        if switch
        else {
            "type": "mac",
            "value": peer.port_mac,
        }
    )
    return {
        "via": "LLDP",
        "rid": "1",
        "age": "0 day, 00:01:00",
        "chassis": {peer.system_name: chassis},
        "port": {"id": port_id, "descr": peer.port if not switch else "", "ttl": TTL_S},
    }


def lldpctl_json(ports: list[tuple[str, PortLink | None]]) -> str:
    """The JSON for ``(SONiC port name, link)`` pairs."""
    entries = []
    for name, link in ports:
        found = _neighbour(link) if link is not None else None
        if found is not None:
            entries.append({name: found})
    interface: Any = entries[0] if len(entries) == 1 else entries
    body: dict[str, Any] = {"lldp": {"interface": interface}} if entries else {"lldp": {}}
    return json.dumps(body, indent=2)

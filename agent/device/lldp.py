"""What a switch knows about its cabling: LLDP neighbours, and each port's speed and MTU.

One reader per NOS, each a few show commands and pure parsers (unit-tested on recorded and
vendor-documented outputs, tests/unit/test_lldp_parsers.py). This lives in one module rather
than as methods of ``agent/device/platforms/<nos>.py``: discovery needs no plan, no
transaction and no QoS state, the platforms' surface is about configuring the lossless
profile, and the four readers side by side make their differences easy to compare.

Sources of the formats (each parser repeats the one it follows):

* Arista EOS: ``show lldp neighbors detail | json`` as in ANTA's ``VerifyLLDPNeighbors`` test
  data (tests/units/anta_tests/test_connectivity.py: ``lldpNeighbors.<if>.lldpNeighborInfo[]``
  with ``systemName``, ``chassisId``, ``neighborInterfaceInfo.interfaceId_v2`` /
  ``interfaceId`` / ``interfaceIdType`` / ``interfaceDescription``) and napalm's recorded
  output (test/eos/mocked_data/test_get_lldp_neighbors_detail/normal); ``show interfaces |
  json`` as napalm's ``get_interfaces`` reads it (``interfaces.<if>.bandwidth`` in bit/s,
  ``mtu``; test/eos/mocked_data/test_get_interfaces/normal/show_interfaces.json);
  ``show hostname | json`` (``hostname``) as napalm's ``get_facts``.
* Cisco NX-OS: ``show lldp neighbors detail | json``: ``TABLE_nbor_detail.ROW_nbor_detail``
  (a dict for one row, a list for more) with ``l_port_id`` (``Eth1/1``), ``sys_name``,
  ``port_id``, ``chassis_id``, ``port_desc``, ``mgmt_addr`` (the NX-API keys that napalm's
  nxos driver and ONOS's ``LinkDiscoveryCiscoImpl`` read); ``show interface | json``:
  ``TABLE_interface.ROW_interface[]`` with ``interface``, ``eth_mtu`` (a string),
  ``eth_speed`` (``100 Gb/s``, ``auto-speed`` when down) and ``eth_bw`` (Kbit/s) (napalm
  test/nxos/mocked_data/test_get_interfaces/admin_up_oper_down/show_interface.json).
* SONiC: LLDP runs lldpd in the ``lldp`` container; ``docker exec lldp lldpctl -f json`` is
  what SONiC's own LLDP-to-APPL_DB sync daemon parses (sonic-net/sonic-dbsyncd
  src/lldp_syncd/daemon.py). lldpd's JSON (lldpd src/client/json_writer.c): ``lldp.interface`` is
  one ``{ifname: {...}}`` object, or a list of them when there are several; each has
  ``chassis: {<system name>: {id: {type, value}, descr, capability}}`` and ``port: {id:
  {type, value}, descr}``. Speeds and MTUs come from CONFIG_DB's ``PORT`` table (``speed``
  in Mb/s, ``mtu``; sonic-buildimage src/sonic-yang-models/yang-models/sonic-port.yang), read
  with ``sonic-cfggen -d --var-json PORT``.
* NVIDIA Cumulus Linux (NVUE): ``nv show interface -o json`` (``<if>.link.speed`` such as
  ``100G``, ``<if>.link.mtu``, ``<if>.type`` ``swp``) and, per port, ``nv show interface <if>
  lldp neighbor -o json`` (NVUE reference, Show Commands > LLDP: ``nv show interface
  <interface-id> lldp neighbor``, Cumulus Linux 5.1+): ``{<neighbor-id>: {chassis:
  {system-name, chassis-id}, port: {name, description, type}}}``. The neighbour table's
  "Remote Port" column is that port name.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.errors import AgentError
from agent.intent.units import UnitError, parse_speed
from common.text import natural_key as natural_key  # discover sorts with it too

PLATFORMS = ("arista_eos", "cisco_nxos", "sonic", "cumulus_nvue")


class DiscoveryError(AgentError):
    """A device's answer could not be read; the message names the device and command."""

    exit_code = 1


class Shell(Protocol):
    """What a reader needs of a connection (``agent.device.platforms.base.Connection``)."""

    device: str

    def show(self, command: str, read_timeout: float = 30.0) -> str: ...


@dataclass(frozen=True)
class Neighbor:
    """One LLDP neighbour seen on a local port."""

    local_port: str
    system_name: str
    port: str
    chassis_id: str = ""
    # True/False when the neighbour advertised its capabilities (bridge or router = a
    # switch), None when it did not say.
    forwards: bool | None = None
    management_address: str = ""


@dataclass(frozen=True)
class PortFacts:
    """A port's speed (bit/s; None when the device did not say) and MTU."""

    name: str
    speed_bps: int | None
    mtu: int | None


@dataclass
class Discovered:
    """What one switch told us."""

    name: str
    platform: str
    neighbors: list[Neighbor] = field(default_factory=list)
    ports: dict[str, PortFacts] = field(default_factory=dict)


# ----------------------------------------------------------------------------- helpers


def _loads(device: str, command: str, output: str) -> Any:
    try:
        return json.loads(output)
    except json.JSONDecodeError:
        raise DiscoveryError(
            f"{device}: {command!r} Expected: JSON Actual: {output.strip()[:200]!r}"
        ) from None


def _rows(table: Any, row: str) -> list[dict[str, Any]]:
    """NX-API's ``TABLE_x.ROW_x``: a dict for one row, a list for several, absent for none."""
    if not isinstance(table, dict):
        return []
    found = table.get(row, [])
    if isinstance(found, dict):
        return [found]
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _speed(text: Any) -> int | None:
    """``100G``, ``100 Gb/s``, ``400000`` (Mb/s, SONiC) or None."""
    if text is None:
        return None
    value = str(text).strip().replace(" ", "").replace("b/s", "").replace("bps", "")
    if value.isdigit():
        return int(value) * 1_000_000  # SONiC's CONFIG_DB speed is in Mb/s
    try:
        return parse_speed(value)
    except UnitError:
        return None


_NXOS_SHORT = re.compile(r"^Eth(?=\d)")
_EOS_SHORT = re.compile(r"^Et(?=\d)")


def long_port_name(name: str) -> str:
    """``Eth1/1`` (NX-OS's LLDP table) and ``Et1`` (EOS short form) as ``Ethernet...``."""
    name = name.strip().strip('"')
    name = _NXOS_SHORT.sub("Ethernet", name)
    return _EOS_SHORT.sub("Ethernet", name)


def _mac(value: str) -> bool:
    return bool(re.fullmatch(r"([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}|([0-9a-fA-F]{4}\.){2}"
                             r"[0-9a-fA-F]{4}", value.strip()))  # fmt: skip


def _neighbor_port(port_id: str, id_type: str, description: str) -> str:
    """The neighbour's port name. lldpd on a Linux host sends its MAC as the port ID and the
    interface name as the port description (lldpd(8), ``configure lldp portidsubtype``): the
    name is then in the description."""
    if (id_type.lower() in {"macaddress", "mac", "local"} or _mac(port_id)) and description:
        return description.strip().strip('"')
    return long_port_name(port_id)


# ----------------------------------------------------------------------------- Arista EOS


def eos_neighbors(data: dict[str, Any]) -> list[Neighbor]:
    """``show lldp neighbors detail | json`` (ANTA ``VerifyLLDPNeighbors`` test data; napalm
    test/eos/mocked_data/test_get_lldp_neighbors_detail/normal)."""
    found = []
    for local, entry in sorted(data.get("lldpNeighbors", {}).items()):
        for info in entry.get("lldpNeighborInfo", []) if isinstance(entry, dict) else []:
            port = info.get("neighborInterfaceInfo", {})
            port_id = str(port.get("interfaceId_v2") or port.get("interfaceId") or "")
            capabilities = info.get("systemCapabilities")
            forwards = (
                bool(capabilities.get("bridge") or capabilities.get("router"))
                if isinstance(capabilities, dict)
                else None
            )
            addresses = info.get("managementAddresses") or []
            found.append(
                Neighbor(
                    local_port=local,
                    system_name=str(info.get("systemName") or info.get("chassisId") or ""),
                    port=_neighbor_port(
                        port_id,
                        str(port.get("interfaceIdType", "")),
                        str(port.get("interfaceDescription", "")),
                    ),
                    chassis_id=str(info.get("chassisId", "")),
                    forwards=forwards,
                    management_address=str(addresses[0].get("address", "")) if addresses else "",
                )
            )
    return found


def eos_ports(data: dict[str, Any]) -> dict[str, PortFacts]:
    """``show interfaces | json``: ``interfaces.<if>.bandwidth`` (bit/s) and ``mtu`` (napalm
    ``get_interfaces``; test/eos/mocked_data/test_get_interfaces/normal)."""
    ports = {}
    for name, info in data.get("interfaces", {}).items():
        if not name.startswith("Ethernet") or not isinstance(info, dict):
            continue  # Management1, Loopback0, Port-Channel: not fabric ports
        bandwidth = _int(info.get("bandwidth"))
        ports[name] = PortFacts(name, bandwidth or None, _int(info.get("mtu")))
    return ports


# ----------------------------------------------------------------------------- Cisco NX-OS


def nxos_neighbors(data: dict[str, Any]) -> list[Neighbor]:
    """``show lldp neighbors detail | json`` (``TABLE_nbor_detail.ROW_nbor_detail``)."""
    found = []
    for row in _rows(data.get("TABLE_nbor_detail"), "ROW_nbor_detail"):
        capability = str(row.get("enabled_capability", row.get("system_capability", "")))
        found.append(
            Neighbor(
                local_port=long_port_name(str(row.get("l_port_id", ""))),
                system_name=str(row.get("sys_name") or row.get("chassis_id") or ""),
                port=_neighbor_port(str(row.get("port_id", "")), "", str(row.get("port_desc", ""))),
                chassis_id=str(row.get("chassis_id", "")),
                # NX-OS prints capability letters: B bridge, R router (S station, ...).
                forwards=bool(re.search(r"[BR]", capability)) if capability else None,
                management_address=str(row.get("mgmt_addr", "")),
            )
        )
    return sorted(found, key=lambda n: natural_key(n.local_port))


def nxos_ports(data: dict[str, Any]) -> dict[str, PortFacts]:
    """``show interface | json`` (``TABLE_interface.ROW_interface``: ``eth_speed``
    ``100 Gb/s`` when up, ``eth_bw`` Kbit/s otherwise, ``eth_mtu`` a string)."""
    ports = {}
    for row in _rows(data.get("TABLE_interface"), "ROW_interface"):
        name = str(row.get("interface", ""))
        if not name.startswith("Ethernet"):
            continue
        speed = _speed(row.get("eth_speed"))
        if speed is None and (bw := _int(row.get("eth_bw"))):
            speed = bw * 1000
        ports[name] = PortFacts(name, speed, _int(row.get("eth_mtu")))
    return ports


# ----------------------------------------------------------------------------- SONiC (lldpd)


def _lldpctl_interfaces(data: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    interfaces = data.get("lldp", {}).get("interface", [])
    entries = interfaces if isinstance(interfaces, list) else [interfaces]
    for entry in entries:
        if isinstance(entry, dict):
            yield from ((n, v) for n, v in entry.items() if isinstance(v, dict))


def lldpctl_neighbors(data: dict[str, Any]) -> list[Neighbor]:
    """``lldpctl -f json`` (lldpd's json writer; SONiC runs it in the ``lldp`` container)."""
    found = [_lldpctl_neighbor(local, info) for local, info in _lldpctl_interfaces(data)]
    return sorted(found, key=lambda n: natural_key(n.local_port))


def _lldpctl_neighbor(local: str, info: dict[str, Any]) -> Neighbor:
    chassis = info.get("chassis", {}) if isinstance(info.get("chassis"), dict) else {}
    name, details = next(iter(chassis.items()), ("", {}))
    if name == "id" or not isinstance(details, dict):
        # No system name advertised: the chassis object is not keyed by one.
        details = chassis
        name = (
            str(chassis.get("id", {}).get("value", ""))
            if isinstance(chassis.get("id"), dict)
            else ""
        )
    capabilities = details.get("capability", [])
    capabilities = capabilities if isinstance(capabilities, list) else [capabilities]
    enabled = {
        str(c.get("type", "")).lower()
        for c in capabilities
        if isinstance(c, dict) and c.get("enabled")
    }
    port = info.get("port", {}) if isinstance(info.get("port"), dict) else {}
    ident = port.get("id", {}) if isinstance(port.get("id"), dict) else {}
    chassis_id = details.get("id", {})
    return Neighbor(
        local_port=local,
        system_name=str(name),
        port=_neighbor_port(
            str(ident.get("value", "")), str(ident.get("type", "")), str(port.get("descr", ""))
        ),
        chassis_id=str(chassis_id.get("value", "")) if isinstance(chassis_id, dict) else "",
        forwards=bool(enabled & {"bridge", "router"}) if capabilities else None,
        management_address=_first(details.get("mgmt-ip")),
    )


def _first(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


def sonic_ports(data: dict[str, Any]) -> dict[str, PortFacts]:
    """CONFIG_DB ``PORT`` (``sonic-cfggen -d --var-json PORT``): ``speed`` in Mb/s, ``mtu``."""
    ports = {}
    for name, info in data.items():
        if isinstance(info, dict) and name.startswith("Ethernet"):
            ports[name] = PortFacts(name, _speed(info.get("speed")), _int(info.get("mtu")))
    return ports


# ----------------------------------------------------------------------------- NVUE


def nvue_ports(data: dict[str, Any]) -> dict[str, PortFacts]:
    """``nv show interface -o json``: switch ports (``type: swp``) with ``link.speed`` and
    ``link.mtu``."""
    ports = {}
    for name, info in data.items():
        if not isinstance(info, dict) or info.get("type", "swp") != "swp":
            continue
        if not name.startswith("swp"):
            continue
        link = info.get("link", {}) if isinstance(info.get("link"), dict) else {}
        ports[name] = PortFacts(name, _speed(link.get("speed")), _int(link.get("mtu")))
    return ports


def _nvue_forwards(capabilities: Any) -> bool | None:
    """NVUE lists capabilities as ``{bridge: {enabled: on}, router: ...}``-style objects."""
    if not isinstance(capabilities, dict):
        return None
    for kind in ("bridge", "router"):
        value = capabilities.get(kind)
        if value is True or (
            isinstance(value, dict) and value.get("enabled", True) not in (False, "off")
        ):
            return True
    return False


def nvue_neighbors(local_port: str, data: dict[str, Any]) -> list[Neighbor]:
    """``nv show interface <if> lldp neighbor -o json``: neighbours keyed by their ID."""
    found = []
    for key, info in sorted(data.items()):
        if not isinstance(info, dict):
            continue
        chassis = info.get("chassis", {}) if isinstance(info.get("chassis"), dict) else {}
        port = info.get("port", {}) if isinstance(info.get("port"), dict) else {}
        forwards = _nvue_forwards(chassis.get("capability") or info.get("capability"))
        found.append(
            Neighbor(
                local_port=local_port,
                system_name=str(chassis.get("system-name") or key),
                port=_neighbor_port(
                    str(port.get("name") or port.get("id") or ""),
                    str(port.get("type", "")),
                    str(port.get("description", "")),
                ),
                chassis_id=str(chassis.get("chassis-id", "")),
                forwards=forwards,
                management_address=str(chassis.get("management-address-ipv4", "")),
            )
        )
    return found


# ----------------------------------------------------------------------------- readers


def _show_json(conn: Shell, command: str) -> Any:
    return _loads(conn.device, command, conn.show(command))


def _hostname(conn: Shell, command: str) -> str:
    if command.endswith("| json"):
        data = _show_json(conn, command)
        name = str(data.get("hostname", "")).strip() if isinstance(data, dict) else ""
    else:
        lines = conn.show(command).strip().splitlines()
        name = lines[-1].strip() if lines else ""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name):
        raise DiscoveryError(f"{conn.device}: {command!r} Expected: a hostname Actual: {name!r}")
    return name


@dataclass(frozen=True)
class CommandReads:
    """The three reads of a platform whose answers are whole JSON documents: its hostname,
    its LLDP neighbours and its ports (speed, MTU), each with the parser of that answer."""

    hostname: str
    neighbors: str
    parse_neighbors: Callable[[Any], list[Neighbor]]
    ports: str
    parse_ports: Callable[[Any], dict[str, PortFacts]]

    def __call__(self, conn: Shell, platform: str) -> Discovered:
        found = Discovered(_hostname(conn, self.hostname), platform)
        found.neighbors = self.parse_neighbors(_show_json(conn, self.neighbors))
        found.ports = self.parse_ports(_show_json(conn, self.ports))
        return found


COMMAND_READS = {
    "arista_eos": CommandReads(
        "show hostname | json", "show lldp neighbors detail | json", eos_neighbors,
        "show interfaces | json", eos_ports,
    ),
    "cisco_nxos": CommandReads(
        "show hostname | json", "show lldp neighbors detail | json", nxos_neighbors,
        "show interface | json", nxos_ports,
    ),
    "sonic": CommandReads(
        "hostname", "docker exec lldp lldpctl -f json", lldpctl_neighbors,
        "sonic-cfggen -d --var-json PORT", sonic_ports,
    ),
}  # fmt: skip


def read_nvue(conn: Shell) -> Discovered:
    found = Discovered(_hostname(conn, "hostname"), "cumulus_nvue")
    interfaces = _show_json(conn, "nv show interface -o json")
    found.ports = nvue_ports(interfaces)
    # One command per port: ask only ports whose link is not down (``link.state`` holds
    # ``{"up": {}}`` or ``{"down": {}}``), a 64-port switch has few cabled ones.
    for name in sorted(found.ports, key=natural_key):
        state = interfaces[name].get("link", {}).get("state")
        if isinstance(state, dict) and "down" in state:
            continue
        data = _show_json(conn, f"nv show interface {name} lldp neighbor -o json")
        found.neighbors += nvue_neighbors(name, data if isinstance(data, dict) else {})
    return found


READERS: dict[str, Callable[[Shell], Discovered]] = {
    **{
        platform: functools.partial(reads, platform=platform)
        for platform, reads in COMMAND_READS.items()
    },
    "cumulus_nvue": read_nvue,
}


def read(conn: Shell, platform: str) -> Discovered:
    """Read one switch with its platform's commands."""
    try:
        reader = READERS[platform]
    except KeyError:
        raise DiscoveryError(
            f"{conn.device}: Expected: a platform of {', '.join(PLATFORMS)} Actual: {platform!r}"
        ) from None
    return reader(conn)

"""Address plan of a lab: /31 per link, deterministic MACs, ECMP routes, vswitch configs.

Pure functions of the topology (no root, no side effects), so the plan can be unit-tested
and recomputed identically by ``status``, ``down`` and the container entrypoint.

Plan, in link order of the file (link ``i`` gets ``198.18.0.0 + 2*i``/31):

* switch–host link: the switch end gets the even (lower) address, the host the odd one;
  otherwise the first endpoint gets the even address;
* MAC of an interface = ``02:00`` + the four octets of its address (locally administered,
  unique in the lab, readable: 198.18.0.9 → 02:00:c6:12:00:09);
* switches route every /31 that is not connected along all shortest paths through other
  switches (hosts never transit), one next hop per equal-cost link = ECMP;
* hosts reach everything through their first switch-facing interface (default route).
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.mgmt.names import nos_port_name
from lab.topology.model import DEFAULT_NOS, NOS_PLATFORMS, Link, Node, Topology
from lab.topology.units import format_speed

DATA_PLANE = ipaddress.IPv4Network("198.18.0.0/16")
MGMT_HOST = "127.0.0.1"
PASSWORD_ENV = "ROCE_LAB_PASSWORD"
# The agent's ECN/PFC overrides as fractions of the lab switch's xoff (see fabric_document).
_ECN_MIN_OF_XOFF = 0.2
_ECN_MAX_OF_XOFF = 0.6
ROCE_QUEUE = 3


@dataclass(frozen=True)
class PlannedInterface:
    """One data-plane interface (a veth end) and its peer."""

    node: str
    ifname: str
    index: int
    mac: str
    address: ipaddress.IPv4Interface
    peer_node: str
    peer_ifname: str
    peer_index: int
    peer_address: ipaddress.IPv4Address
    peer_mac: str
    speed_bps: int
    mtu: int
    cable_m: float
    link_index: int

    @property
    def peer(self) -> str:
        return f"{self.peer_node}:{self.peer_ifname}"


@dataclass(frozen=True)
class NextHop:
    ip: ipaddress.IPv4Address
    port: str


@dataclass(frozen=True)
class Route:
    prefix: ipaddress.IPv4Network
    nexthops: tuple[NextHop, ...]


@dataclass(frozen=True)
class NodePlan:
    """Everything the runtime creates for one node."""

    node: Node
    netns: str
    interfaces: tuple[PlannedInterface, ...]
    routes: tuple[Route, ...]
    gateway: PlannedInterface | None  # hosts: the interface their default route uses

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class LabPlan:
    """The whole lab: topology plus the per-node plan, under the (possibly overridden) name."""

    topology: Topology
    name: str
    nodes: Mapping[str, NodePlan]

    def switches(self) -> list[NodePlan]:
        return [plan for plan in self.nodes.values() if plan.node.is_switch]

    def hosts(self) -> list[NodePlan]:
        return [plan for plan in self.nodes.values() if not plan.node.is_switch]


def mac_for(address: ipaddress.IPv4Address) -> str:
    """Locally administered unicast MAC derived from the interface address."""
    return "02:00:" + ":".join(f"{octet:02x}" for octet in address.packed)


def link_addresses(
    topology: Topology, link: Link
) -> tuple[ipaddress.IPv4Interface, ipaddress.IPv4Interface]:
    """(address of endpoint a, address of endpoint b) of ``link``, both /31."""
    base = int(DATA_PLANE.network_address) + 2 * link.index
    low = ipaddress.IPv4Interface((base, 31))
    high = ipaddress.IPv4Interface((base + 1, 31))
    a_switch = topology.nodes[link.a.node].is_switch
    b_switch = topology.nodes[link.b.node].is_switch
    if b_switch and not a_switch:
        return high, low
    return low, high


def build_plan(topology: Topology, lab_name: str | None = None) -> LabPlan:
    """Compute addresses, MACs and routes of every node."""
    name = lab_name or topology.name
    addresses: dict[tuple[str, str], ipaddress.IPv4Interface] = {}
    for link in topology.links:
        a_addr, b_addr = link_addresses(topology, link)
        addresses[(link.a.node, link.a.ifname)] = a_addr
        addresses[(link.b.node, link.b.ifname)] = b_addr

    interfaces: dict[str, list[PlannedInterface]] = {node: [] for node in topology.nodes}
    for link in topology.links:
        for local, remote in ((link.a, link.b), (link.b, link.a)):
            address = addresses[(local.node, local.ifname)]
            peer_address = addresses[(remote.node, remote.ifname)]
            interfaces[local.node].append(
                PlannedInterface(
                    node=local.node,
                    ifname=local.ifname,
                    index=local.index,
                    mac=mac_for(address.ip),
                    address=address,
                    peer_node=remote.node,
                    peer_ifname=remote.ifname,
                    peer_index=remote.index,
                    peer_address=peer_address.ip,
                    peer_mac=mac_for(peer_address.ip),
                    speed_bps=link.speed_bps,
                    mtu=link.mtu,
                    cable_m=topology.nodes[local.node].cable_m,
                    link_index=link.index,
                )
            )
    for entries in interfaces.values():
        entries.sort(key=lambda item: item.index)

    distances = _switch_distances(topology)
    nodes: dict[str, NodePlan] = {}
    for node in topology.nodes.values():
        own = tuple(interfaces[node.name])
        routes: tuple[Route, ...] = ()
        gateway = None
        if node.is_switch:
            routes = _routes(topology, node.name, own, distances, addresses)
        else:
            gateway = next((i for i in own if topology.nodes[i.peer_node].is_switch), None)
        nodes[node.name] = NodePlan(
            node=node,
            netns=topology.container_name(node.name, name),
            interfaces=own,
            routes=routes,
            gateway=gateway,
        )
    return LabPlan(topology=topology, name=name, nodes=nodes)


def _switch_distances(topology: Topology) -> dict[str, dict[str, int]]:
    """Hop counts between switches over switch–switch links (BFS from every switch)."""
    neighbours: dict[str, set[str]] = {
        n: set() for n, node in topology.nodes.items() if node.is_switch
    }
    for link in topology.links:
        if link.a.node in neighbours and link.b.node in neighbours:
            neighbours[link.a.node].add(link.b.node)
            neighbours[link.b.node].add(link.a.node)
    distances: dict[str, dict[str, int]] = {}
    for start in neighbours:
        seen = {start: 0}
        queue = deque([start])
        while queue:
            current = queue.popleft()
            for nxt in neighbours[current]:
                if nxt not in seen:
                    seen[nxt] = seen[current] + 1
                    queue.append(nxt)
        distances[start] = seen
    return distances


def _routes(
    topology: Topology,
    switch: str,
    own: tuple[PlannedInterface, ...],
    distances: dict[str, dict[str, int]],
    addresses: Mapping[tuple[str, str], ipaddress.IPv4Interface],
) -> tuple[Route, ...]:
    uplinks = [i for i in own if i.peer_node in distances]
    routes: list[Route] = []
    for link in topology.links:
        if switch in (link.a.node, link.b.node):
            continue  # connected: the vswitch knows its own /31s
        prefix = addresses[(link.a.node, link.a.ifname)].network
        targets = [ep.node for ep in link.endpoints() if ep.node in distances]

        def distance(start: str, targets: list[str] = targets) -> int | None:
            found = [distances[start][t] for t in targets if t in distances[start]]
            return min(found) if found else None

        mine = distance(switch)
        if mine is None:
            continue  # unreachable (host-only link or a separate island)
        hops = tuple(
            NextHop(ip=i.peer_address, port=i.ifname)
            for i in uplinks
            if distance(i.peer_node) == mine - 1
        )
        if hops:
            routes.append(Route(prefix=prefix, nexthops=hops))
    routes.sort(key=lambda route: int(route.prefix.network_address))
    return tuple(routes)


# --------------------------------------------------------------------------- documents


def vswitch_config(plan: LabPlan, node: str) -> dict[str, Any]:
    """The ``lab.vswitch --config`` document of a switch (the runtime's config contract)."""
    node_plan = plan.nodes[node]
    buffer = node_plan.node.buffer
    assert buffer is not None, f"{node} is not a lab switch"
    return {
        "name": node,
        "ports": [
            {
                "ifname": i.ifname,
                "mac": i.mac,
                "ipv4": str(i.address),
                "speed_bps": i.speed_bps,
            }
            for i in node_plan.interfaces
        ],
        "neighbors": [
            {"ip": str(i.peer_address), "mac": i.peer_mac, "port": i.ifname}
            for i in node_plan.interfaces
        ],
        "routes": [
            {
                "prefix": str(route.prefix),
                "nexthops": [{"ip": str(h.ip), "port": h.port} for h in route.nexthops],
            }
            for route in node_plan.routes
        ],
        "buffer": {
            "xoff_bytes": buffer.xoff_bytes,
            "xon_bytes": buffer.xon_bytes,
            "headroom_bytes": buffer.headroom_bytes,
            "queue_limit_bytes": buffer.queue_limit_bytes,
        },
        # Empty QoS = PFC off, no ECN: the agent pushes the lossless profile later.
        "qos": {
            "trust": "dscp",
            "dscp_to_tc": {},
            "watchdog": {
                "enabled": False,
                "detection_ms": 200,
                "restoration_ms": 400,
                "polling_ms": 100,
                "action": "drop",
            },
            "ports": {},
        },
    }


def fabric_port_name(plan: LabPlan, node: str, index: int) -> str:
    """A switch port as its NOS names it (EOS ``EthernetN``, SONiC ``Ethernet<lane>``, NVUE
    ``swpN`` for containerlab ``ethN``), ``ethN`` for hosts."""
    spec = plan.nodes[node].node
    if not spec.is_switch:
        return f"eth{index}"
    return nos_port_name(spec.nos or DEFAULT_NOS, index)


def _kb(value: float) -> str:
    return f"{max(1, round(value / 1000))}KB"


def fabric_document(
    plan: LabPlan,
    mgmt_ports: Mapping[str, int],
    gnmi: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The agent's fabric file for the lab (like containerlab's generated inventory).

    ``gnmi`` gives a switch its ``gnmi`` block (``{port, tls: {ca, server_name}}``): where its
    gNMI server listens on the management host and how to check its certificate.

    The profile's ECN and buffer values are for real switches (ECN from 150 KB); the lab's
    ports are slow, so the overrides are scaled to the lab switch's XOFF threshold, which is
    the agent's ``buffers.pause_threshold``: ECN marks between 20 % and 60 % of it, so ECN
    acts before PFC (rule IR005). At 10 Mb/s (XOFF at 30000 B) that is 6KB-18KB. The PFC
    headroom (SONiC xoff/xon/size) stays ``auto``: the agent computes it per port.
    """
    switches = plan.switches()
    xoff = min(s.node.buffer.xoff_bytes for s in switches if s.node.buffer) if switches else 30000
    devices: list[dict[str, Any]] = []
    for node_plan in plan.nodes.values():
        node = node_plan.node
        ports = []
        for i in node_plan.interfaces:
            port: dict[str, Any] = {
                "name": fabric_port_name(plan, node.name, i.index),
                "speed": format_speed(i.speed_bps),
                "cable_m": int(i.cable_m) if float(i.cable_m).is_integer() else i.cable_m,
                "mtu": i.mtu,
                "peer": f"{i.peer_node}:{fabric_port_name(plan, i.peer_node, i.peer_index)}",
                "ipv4": str(i.address),
            }
            if not node.is_switch:
                port["mac"] = i.mac
            ports.append(port)
        device: dict[str, Any] = {"name": node.name}
        if node.is_switch:
            device.update(
                platform=NOS_PLATFORMS[node.nos or DEFAULT_NOS],
                role=node.role,
                host=MGMT_HOST,
                port=mgmt_ports[node.name],
            )
            if gnmi and node.name in gnmi:
                device["gnmi"] = {**gnmi[node.name], "tls": dict(gnmi[node.name]["tls"])}
        else:
            device.update(platform="linux_host", role="host", netns=node_plan.netns)
        device["ports"] = ports
        devices.append(device)
    return {
        "name": plan.name,
        "profile": plan.topology.profile,
        "overrides": {
            "ecn": {
                "queues": {
                    ROCE_QUEUE: {
                        "min_threshold": _kb(xoff * _ECN_MIN_OF_XOFF),
                        "max_threshold": _kb(xoff * _ECN_MAX_OF_XOFF),
                        "max_probability": 100,
                    }
                }
            },
            "buffers": {"pause_threshold": xoff},
        },
        "defaults": {
            "username": plan.topology.credentials.username,
            "credentials": {"password_env": PASSWORD_ENV},
        },
        "devices": devices,
        "validation": {},
    }

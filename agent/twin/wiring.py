"""The elements one run of the twin needs, built from the network and wired together.

Only what the run's flows can reach is built -- the switches on the routes between their hosts
(frames one way, CNPs and ACKs the other) and the hosts themselves, plus a stormy host and its
leaf -- so a run on a large fabric pays for the part it uses.  Every switch port and NIC gets
the wire time of each frame length the run sends (a table lookup per frame, not a division),
and every switch its routes to the hosts.  The engine (:mod:`agent.twin.engine`) calls these
steps in order when it is made.  Compiled with the engine (:mod:`lossless.compiled`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from agent.twin.flows import FlowSpec
from agent.twin.frames import ACK_BYTES, CNP_BYTES, wire_table
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.nic import Nic
from agent.twin.switch import SwitchNode, SwitchPort


def check_flows(network: TwinNetwork, specs: list[FlowSpec]) -> None:
    """Every flow runs between two hosts with a path between them."""
    for flow_spec in specs:
        for host in (flow_spec.src, flow_spec.dst):
            if host not in network.hosts:
                raise TwinError(
                    f"twin flow {flow_spec.src}->{flow_spec.dst}: Expected: a host with a "
                    f"NIC port Actual: {host}"
                )
        if flow_spec.src == flow_spec.dst:
            raise TwinError(f"twin flow {flow_spec.src}->{flow_spec.dst}: to itself")
        network.path(flow_spec.src, flow_spec.dst, flow_spec.hash_value())  # raises if none


def reached(
    network: TwinNetwork, specs: list[FlowSpec], storm_host: str | None
) -> tuple[set[str], set[str]]:
    """Switches and hosts the flows (and their CNPs) can reach, and the stormy host with its
    leaf: only they are built."""
    hosts: set[str] = set()
    switches: set[str] = set()
    for spec in specs:
        hosts.update((spec.src, spec.dst))
    for dst in hosts:
        for src in hosts:
            if src != dst:
                for _step in network.ecmp_steps(dst, network.hosts[src].leaf, switches):
                    pass  # the walk adds the switches it passes to ``switches``
    if storm_host is not None:
        hosts.add(storm_host)
        switches.add(network.hosts[storm_host].leaf)
    return switches, hosts


def build_switches(
    network: TwinNetwork, names: Iterable[str], rng: random.Random
) -> dict[str, SwitchNode]:
    """The named switches with their ports, by name in sorted order.  Each port's ECN markers
    draw from the port's own stream, seeded from one draw of ``rng`` and the port's name: a
    run is the same for a seed, and a port's draws depend neither on what other ports marked
    before nor on which other switches the run has (a run of some rails of a job whose rails
    share no link marks as the whole job does)."""
    base = rng.getrandbits(64)
    switches: dict[str, SwitchNode] = {}
    for name in sorted(names):
        spec = network.switches[name]
        node = SwitchNode(name, spec.dscp_to_tc)
        node.ports = [
            SwitchPort(p, node, random.Random(f"{base}/{name}:{p.name}")) for p in spec.ports
        ]
        switches[name] = node
    return switches


def build_nics(
    network: TwinNetwork,
    names: Iterable[str],
    payload_bytes: int | None,
    ignore_pause: frozenset[str],
) -> dict[str, Nic]:
    """The named hosts' NICs by name in sorted order; those in ``ignore_pause`` do not honour
    PFC."""
    nics: dict[str, Nic] = {}
    for name in sorted(names):
        nic = Nic(network.hosts[name], payload_bytes)
        if name in ignore_pause:
            nic.honour_pause = False
        nics[name] = nic
    return nics


def wire(switches: dict[str, SwitchNode], nics: dict[str, Nic]) -> None:
    """The links between built nodes. A port whose peer was not built never carries a
    packet of this run (routing only leads to built switches and hosts)."""
    for node in switches.values():
        for port in node.ports:
            peer_dev, peer_port = port.spec.peer_device, port.spec.peer_port
            if peer_dev in switches:
                port.peer = next(p for p in switches[peer_dev].ports if p.spec.name == peer_port)
            elif peer_dev in nics:
                port.peer = nics[peer_dev]
                nics[peer_dev].peer = port


def wire_times(switches: dict[str, SwitchNode], nics: dict[str, Nic]) -> set[int]:
    """Every port's and NIC's wire time for each frame length of the run: the NICs' data
    frames, CNPs and ACKs.  Returns the lengths in the tables."""
    lengths = {nic.frame_bytes for nic in nics.values()} | {CNP_BYTES, ACK_BYTES}
    for node in switches.values():
        for port in node.ports:
            port.wire = wire_table(lengths, port.spec.speed_bps)
    for nic in nics.values():
        nic.wire = wire_table(lengths, nic.spec.port.speed_bps)
        nic.frame_wire = nic.wire[nic.frame_bytes]
    return lengths


def route(network: TwinNetwork, switches: dict[str, SwitchNode], hosts: Iterable[str]) -> None:
    """Every switch's routes to each of ``hosts``."""
    for dst in hosts:
        routes = network.routes_to(dst)
        for name, node in switches.items():
            node.routes[dst] = routes.get(name, ())

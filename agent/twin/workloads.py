"""Traffic scenarios of the twin, on hosts picked from the intent's topology.

Only the switches and hosts a scenario's flows (and their CNPs) can reach are built
(:func:`agent.twin.wiring.reached`), so a 16:1 incast in a 64-host 400G pod runs on a
leaf or two and the spines its flows hash to.

* ``incast``: N senders -> one receiver host port.  The receiver is the first host at the
  chosen speed (fabric file order); the senders are the next N hosts, same leaf first.
* ``all-to-all``: N hosts (``--senders``, the receiver's leaf first, then the next leaves),
  every one sending to every other one -- N (N - 1) flows.
* ``victim``: an N:1 incast from hosts on other leaves plus one victim flow from a host of a
  sender's leaf to another host behind the receiver's leaf, whose UDP source port is chosen so
  that its path shares the first sender's upstream link: when the receiver's leaf pauses that
  link, the victim stops too (head-of-line blocking from PFC) although its own destination is
  idle.
* ``storm``: one host sends XOFF on the RoCE priority continuously from 1 ms on (a stuck NIC);
  a sender sends to it and, from the same NIC, a victim flow to another host.  With the
  watchdog on, the stormer's leaf port detects the storm after ``detection`` (+ up to one
  polling interval) and acts (drop / forward / alert); until then the pause spreads back to the
  sender and blocks the victim.  The run lasts at least detection + 2 polling intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent.intent.units import format_speed
from agent.twin.flows import FlowSpec
from agent.twin.network import NicSpec, TwinError, TwinNetwork, flow_hash

ScenarioName = Literal["incast", "all-to-all", "victim", "storm"]
SCENARIOS: tuple[ScenarioName, ...] = ("incast", "all-to-all", "victim", "storm")
MAX_SENDERS = 64
BASE_SPORT = 49152  # the first dynamic port (IANA); flows count up from it
STORM_START_S = 1e-3

# The NCCL collectives' names and bounds (agent.twin.collectives runs them) live here, beside
# the scenarios', so that ``roce-agent twin`` offers both without importing the collectives'
# module: a scenario run does not pay for it (issue #31, start-up).
CollectiveName = Literal["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"]
COLLECTIVES: tuple[CollectiveName, ...] = (
    "allreduce", "allgather", "reducescatter", "alltoall", "sendrecv",
)  # fmt: skip
# Point-to-point: connections per peer (no ring channels to duplicate).
P2P_COLLECTIVES: tuple[CollectiveName, ...] = ("alltoall", "sendrecv")
# NCCL_ALGO for an all-reduce as the twin runs it; auto: as NCCL's cost model picks
# (agent.twin.nccl_algo), resolved when the job is placed.
AlgorithmName = Literal["ring", "tree", "auto"]
ALGORITHMS: tuple[AlgorithmName, ...] = ("ring", "tree", "auto")
MAX_RANKS = 1024  # a bound on the run's work: a 128-host x 8-NIC pod
MAX_QPS = 16  # a bound on the run's work; NCCL accepts more
MAX_CHANNELS = 16  # channels per NIC: a bound on the run's work (NCCL's MAXCHANNELS is 32 in all)


@dataclass(frozen=True)
class Scenario:
    name: ScenarioName
    flows: list[FlowSpec]
    receiver: str | None  # the incast receiver / storm host
    victim: int | None = None  # index in flows of the victim flow
    storm: tuple[str, float] | None = None
    min_duration_s: float = 0.0
    speed_bps: int = 0
    notes: list[str] = field(default_factory=list)


def _pick_speed(net: TwinNetwork, speed_bps: int | None) -> tuple[int, list[NicSpec]]:
    hosts = net.hosts_at(speed_bps)
    if not hosts:
        speeds = ", ".join(
            format_speed(s) for s in sorted({h.port.speed_bps for h in net.hosts.values()})
        )
        wanted = format_speed(speed_bps) if speed_bps else "any speed"
        raise TwinError(
            f"twin --speed: no host NIC at {wanted}. Expected: one of {speeds or 'none'} "
            f"Actual: {wanted}"
        )
    return hosts[0].port.speed_bps, hosts


def _by_leaf(hosts: list[NicSpec], first_leaf: str) -> list[NicSpec]:
    """Hosts of ``first_leaf`` first, then the others leaf by leaf (fabric order)."""
    order = {first_leaf: 0}
    for host in hosts:
        order.setdefault(host.leaf, len(order))
    return sorted(hosts, key=lambda h: order[h.leaf])


def _need_hosts(scenario: str, wanted: int, available: int, speed: int) -> None:
    if wanted > available:
        raise TwinError(
            f"twin {scenario}: hosts at {format_speed(speed)}. Expected: >= {wanted} "
            f"Actual: {available}"
        )


def build_scenario(
    net: TwinNetwork, name: ScenarioName, senders: int, speed_bps: int | None = None
) -> Scenario:
    """The flows of scenario ``name`` with ``senders`` senders (hosts, for all-to-all)."""
    if not 1 <= senders <= MAX_SENDERS:
        raise TwinError(f"twin: --senders. Expected: 1-{MAX_SENDERS} Actual: {senders}")
    speed, hosts = _pick_speed(net, speed_bps)
    if name == "incast":
        _need_hosts(name, senders + 1, len(hosts), speed)
        receiver = hosts[0]
        others = _by_leaf([h for h in hosts if h is not receiver], receiver.leaf)
        flows = [
            FlowSpec(h.name, receiver.name, udp_sport=BASE_SPORT + i)
            for i, h in enumerate(others[:senders])
        ]
        return Scenario(name, flows, receiver.name, speed_bps=speed)
    if name == "all-to-all":
        if senders < 2:
            raise TwinError(f"twin all-to-all: --senders. Expected: >= 2 Actual: {senders}")
        _need_hosts(name, senders, len(hosts), speed)
        group = _by_leaf(hosts, hosts[0].leaf)[:senders]
        flows = []
        for src in group:
            for dst in group:
                if src is not dst:
                    flows.append(FlowSpec(src.name, dst.name, udp_sport=BASE_SPORT + len(flows)))
        return Scenario(name, flows, None, speed_bps=speed)
    if name == "victim":
        return _victim(net, hosts, senders, speed)
    return _storm(net, hosts, speed)


def _victim(net: TwinNetwork, hosts: list[NicSpec], senders: int, speed: int) -> Scenario:
    receiver = hosts[0]
    remote = [h for h in hosts if h.leaf != receiver.leaf]
    local = [h for h in hosts if h.leaf == receiver.leaf and h is not receiver]
    if not remote:
        raise TwinError(
            "twin victim: Expected: hosts on another leaf than the receiver's (the victim "
            "shares an upstream link) Actual: every host is on " + receiver.leaf
        )
    _need_hosts("victim (senders on other leaves)", senders, len(remote), speed)
    sending = remote[:senders]
    flows = [
        FlowSpec(h.name, receiver.name, udp_sport=BASE_SPORT + i) for i, h in enumerate(sending)
    ]
    # The victim: from a host of the first sender's leaf (not a sender if one is left) to
    # another host behind the receiver's leaf, else to any other host.
    source = next((h for h in remote if h.leaf == sending[0].leaf and h not in sending), sending[0])
    dest = _victim_target(hosts, receiver, local, sending)
    first_uplink = net.path(sending[0].name, receiver.name, flows[0].hash_value())[0]
    sport = _sport_onto(net, (source.name, dest.name), first_uplink, BASE_SPORT + len(flows))
    flows.append(FlowSpec(source.name, dest.name, udp_sport=sport))
    return Scenario(
        "victim",
        flows,
        receiver.name,
        victim=len(flows) - 1,
        speed_bps=speed,
        notes=[
            f"victim {source.name}->{dest.name} shares {first_uplink[0]} port {first_uplink[1]}"
        ],
    )


def _victim_target(
    hosts: list[NicSpec], receiver: NicSpec, local: list[NicSpec], sending: list[NicSpec]
) -> NicSpec:
    """Where the victim flow goes: another host behind the receiver's leaf (``local``), else
    any host that is neither a sender nor the receiver."""
    targets = local or [h for h in hosts if h not in sending and h is not receiver]
    if not targets:
        raise TwinError("twin victim: Expected: a host for the victim flow to reach Actual: none")
    return targets[0]


def _sport_onto(
    net: TwinNetwork, ends: tuple[str, str], uplink: tuple[str, int], first: int
) -> int:
    """The first UDP source port from ``first`` on that puts a flow between ``ends`` on
    ``uplink`` (its first hop)."""
    src, dst = ends
    for sport in range(first, first + 4096):
        if net.path(src, dst, flow_hash(src, dst, sport))[0] == uplink:
            return sport
    # 4096 source ports always hit one of a few ECMP members.
    raise TwinError(  # pragma: no cover
        "twin victim: no UDP source port puts the victim on the incast's uplink"
    )


def _storm(net: TwinNetwork, hosts: list[NicSpec], speed: int) -> Scenario:
    _need_hosts("storm", 3, len(hosts), speed)
    stormer = hosts[0]
    others = _by_leaf([h for h in hosts if h is not stormer], stormer.leaf)
    sender, bystander = others[0], others[1]
    flows = [
        FlowSpec(sender.name, stormer.name, udp_sport=BASE_SPORT),
        FlowSpec(sender.name, bystander.name, udp_sport=BASE_SPORT + 1),
    ]
    wd = net.switches[stormer.leaf].ports[0].qos
    detection = polling = 0.0
    if wd is not None and wd.watchdog is not None:
        detection = wd.watchdog.detection_ms / 1000
        polling = wd.watchdog.polling_ms / 1000
    return Scenario(
        "storm",
        flows,
        stormer.name,
        victim=1,
        storm=(stormer.name, STORM_START_S),
        min_duration_s=STORM_START_S + detection + 2 * polling,
        speed_bps=speed,
    )

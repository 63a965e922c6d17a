"""The twin's network: switches, hosts and links of the intent, with the plan's QoS on every port.

Everything comes from the fabric file through :func:`agent.intent.plan.build_plan`: port speeds,
MTU,
cable length, PFC priorities, the pause threshold and headroom, ECN per queue, ETS, the PFC
watchdog and the host NICs' DCQCN parameters.  The plan's knobs become the shared model's
parameters (:mod:`lossless.config`), which use the plan's own names: PFC on the port with its
``pfc_priorities``, ECN per queue (``min_bytes``, ``max_bytes``, ``max_probability``), strict
queues and ``bandwidth_percent``, and the watchdog's ``detection_ms`` / ``restoration_ms`` /
``polling_ms`` and action (``drop``, ``forward``, ``alert``).

Buffers (docs/fabric-file.md, "Buffers, headroom and the pause threshold"): the plan's
``pause_threshold`` is the ingress occupancy at which XOFF is sent
(``BufferConfig.xoff_bytes``); the plan's SONiC ``xoff`` is what still arrives after the pause
went out, i.e. the headroom above it (``headroom_bytes``); XON is sent once the occupancy is
``xon`` (SONiC's pipeline-latency reserve) below the pause threshold -- the hysteresis of
SONiC's ``xon_offset``. Lossy queues tail-drop at ``pause_threshold + headroom``, the most a
lossless priority group may hold, so both kinds of class get the same buffer. These three
choices are the twin's, stated here.

Propagation: 5 ns per metre of cable -- signals travel at about 2/3 of c in fibre and in
twinax copper (refractive index ~1.47-1.5), the figure vendors quote for link latency; the
SONiC headroom lua that :mod:`agent.intent.sizing` follows uses 198 000 km/s, i.e. 5.05 ns/m.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from agent.errors import AgentError
from agent.intent import sizing
from agent.intent.units import format_speed
from agent.twin import netcache
from lossless.config import (
    BufferConfig,
    EcnConfig,
    PortQosConfig,
    QueueConfig,
    TrimConfig,
    WatchdogConfig,
)

if TYPE_CHECKING:
    # The loader, the intent's models and the plan: imported where a fabric is loaded, not
    # when its network is read from the cache (agent.twin.netcache; the twin's start-up).
    from agent.intent.model import FabricIntent, Watchdog
    from agent.intent.plan import DevicePlan, Plan, PortPlan

PROPAGATION_S_PER_M = 5e-9
"""Cable propagation delay per metre (module docstring)."""
ROCE_UDP_PORT = 4791  # IANA, RoCEv2 destination port; the source port carries the entropy
# A RoCEv2 data frame around its payload: MAC 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4.
ROCE_FRAME_OVERHEAD = 62


def roce_payload_bytes(mtu: int) -> int:
    """The payload of a full RoCEv2 packet on a port of ``mtu``: the RoCE MTU Linux picks
    (:func:`agent.intent.sizing.roce_mtu`), at least the smallest IB MTU."""
    return sizing.roce_mtu(mtu) or sizing.IB_MTUS[0]


def roce_frame_bytes(mtu: int, payload_bytes: int | None = None) -> int:
    """Bytes of a full RoCEv2 data frame (FCS included, preamble and gap not)."""
    return (payload_bytes or roce_payload_bytes(mtu)) + ROCE_FRAME_OVERHEAD


class TwinError(AgentError):
    """A scenario the network cannot run (too few hosts, no path, inconsistent links)."""


@dataclass(frozen=True)
class PortSpec:
    """One end of a link: a switch port or a host NIC port."""

    device: str
    name: str
    index: int  # position among the device's ports
    speed_bps: int
    cable_m: float
    mtu: int
    peer_device: str
    peer_port: str
    qos: PortQosConfig | None  # switches only
    buffer: BufferConfig | None  # switches only
    min_headroom_bytes: int  # agent.intent.sizing's computed minimum (SONiC xoff) for this port

    @property
    def propagation_s(self) -> float:
        return self.cable_m * PROPAGATION_S_PER_M


@dataclass(frozen=True)
class SwitchSpec:
    name: str
    role: str
    ports: list[PortSpec]
    dscp_to_tc: list[int]  # 64 entries: the plan's DSCP map, default priority 0


@dataclass(frozen=True)
class NicSpec:
    """One NIC port of a host: an endpoint of the twin. A host with one linked port is one
    endpoint named as the host; a host with several (a GPU server's rails) is one endpoint
    per linked port, named ``HOST:PORT``, its ``rail`` the port's position among them."""

    name: str
    port: PortSpec
    leaf: str
    roce_dscp: int
    roce_priority: int
    cnp_dscp: int
    cnp_priority: int
    pfc_priorities: list[int]
    dcqcn: dict[str, int]
    host: str = ""  # the machine (the name itself for a one-NIC host)
    rail: int = 0
    rdma_device: str = ""  # the port's rdma_device as DEVICE/PORT (mlx5_0/1); "" if none declared

    @property
    def names(self) -> tuple[str, ...]:
        """What a job may call this NIC by: its port, its RDMA device and port (mlx5_0/1) and,
        for port 1, the device alone (mlx5_0), as the fabric file's ``rdma_device`` reads."""
        if not self.rdma_device:
            return (self.port.name,)
        device, _, port = self.rdma_device.partition("/")
        return (self.port.name, self.rdma_device, *((device,) if port == "1" else ()))


@dataclass
class TwinNetwork:
    """The fabric as the twin runs it, plus shortest-path ECMP routing."""

    name: str
    profile: str
    switches: dict[str, SwitchSpec]
    hosts: dict[str, NicSpec]
    ecn_enabled: bool
    # A lab fabric (``emulation.time_dilation`` D > 1) is simulated as what it stands for:
    # every port D times faster, times D times shorter (lab wall time = twin time * D).
    time_dilation: int = 1
    # The RoCE class's mode as the network was built (lossless | lossy | lossy-trim): in
    # lossy-trim the plan's switches trim (PortQosConfig.trim) instead of pausing.
    mode: str = "lossless"
    _routes: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)

    def hosts_at(self, speed_bps: int | None) -> list[NicSpec]:
        """Hosts (fabric file order) whose NIC runs at ``speed_bps`` (any speed if None)."""
        return [
            h for h in self.hosts.values() if speed_bps is None or h.port.speed_bps == speed_bps
        ]

    def routes_to(self, host: str) -> dict[str, tuple[int, ...]]:
        """Per switch: the egress port indices on a shortest path to ``host`` (ECMP set)."""
        cached = self._routes.get(host)
        if cached is not None:
            return cached
        nic = self.hosts[host]
        distance: dict[str, int] = {host: 0}
        todo = deque([host])
        while todo:
            node = todo.popleft()
            for peer in self._neighbours(node):
                if peer not in distance:
                    distance[peer] = distance[node] + 1
                    # Hosts do not forward: only switches extend a path.
                    if peer in self.switches:
                        todo.append(peer)
        table: dict[str, tuple[int, ...]] = {}
        for name, switch in self.switches.items():
            if name not in distance:
                continue
            table[name] = tuple(
                p.index
                for p in switch.ports
                if distance.get(p.peer_device, -1) == distance[name] - 1
                and (p.peer_device in self.switches or p.peer_device == nic.name)
            )
        self._routes[host] = table
        return table

    def ecmp_steps(
        self, dst: str, first: str, seen: set[str] | None = None
    ) -> Iterator[tuple[str, str]]:
        """(switch, next device) for every switch on a shortest path from switch ``first`` to
        ``dst``, every ECMP choice, each switch once; ``seen``: switches already walked (not
        walked again, and added to)."""
        routes = self.routes_to(dst)
        walked = set() if seen is None else seen
        stack = [first]
        while stack:
            node = stack.pop()
            if node in walked or node not in self.switches:
                continue
            walked.add(node)
            for index in routes.get(node, ()):
                peer = self.switches[node].ports[index].peer_device
                yield node, peer
                stack.append(peer)

    def _neighbours(self, node: str) -> list[str]:
        if node in self.hosts:
            return [self.hosts[node].port.peer_device]
        return [p.peer_device for p in self.switches[node].ports]

    def path(self, src: str, dst: str, flow_hash: int) -> list[tuple[str, int]]:
        """(switch, egress port index) hops of a flow, as :func:`ecmp_pick` chooses them."""
        routes = self.routes_to(dst)
        hops: list[tuple[str, int]] = []
        node = self.hosts[src].port.peer_device
        while node in self.switches:
            choices = routes.get(node)
            if not choices:
                raise TwinError(f"twin: no path from {src} to {dst} (stuck at {node})")
            index = ecmp_pick(node, choices, flow_hash)
            hops.append((node, index))
            node = self.switches[node].ports[index].peer_device
            if len(hops) > len(self.switches):
                raise TwinError(f"twin: routing loop from {src} to {dst}")
        return hops


def flow_hash(src: str, dst: str, udp_sport: int) -> int:
    """A deterministic hash of a flow's 5-tuple (UDP, source port = RoCEv2 entropy)."""
    key = f"{src}|{dst}|17|{udp_sport}|{ROCE_UDP_PORT}".encode()
    return zlib.crc32(key)


def ecmp_pick(switch: str, choices: tuple[int, ...], hashed: int) -> int:
    """The ECMP member a switch picks: the flow hash salted with the switch name, so that two
    tiers do not make the same choice (hash polarisation)."""
    if len(choices) == 1:
        return choices[0]
    salted = zlib.crc32(switch.encode(), hashed)
    return choices[salted % len(choices)]


def _watchdog(intent_wd: Watchdog) -> WatchdogConfig:
    return WatchdogConfig(
        enabled=intent_wd.enabled,
        detection_ms=intent_wd.detection_ms,
        restoration_ms=intent_wd.restoration_ms,
        polling_ms=intent_wd.polling_ms,
        action=intent_wd.action,
    )


def _port_qos(
    device: DevicePlan, port: PortPlan, at_dequeue: bool
) -> tuple[PortQosConfig, BufferConfig, int]:
    queues: dict[int, QueueConfig] = {}
    ecn = {e.queue: e for e in port.ecn}
    trim = device.trim
    for tc in range(8):
        strict = tc in device.ets.strict
        weight = None if strict else device.ets.weights.get(tc)
        marking = ecn.get(tc)
        ecn_cfg = (
            EcnConfig(
                min_bytes=marking.min_bytes,
                max_bytes=marking.max_bytes,
                max_probability=marking.max_probability,
                at_dequeue=at_dequeue,
            )
            if marking is not None
            else None
        )
        trims = trim is not None and tc in trim.queues
        if strict or weight is not None or ecn_cfg is not None or trims:
            queues[tc] = QueueConfig(
                ecn=ecn_cfg, strict=strict, bandwidth_percent=weight, trim=trims
            )
    qos = PortQosConfig(
        pfc_enabled=bool(port.pfc_priorities),
        pfc_priorities=list(port.pfc_priorities),
        watchdog=_watchdog(device.watchdog),
        queues=queues,
        trim=None
        if trim is None
        else TrimConfig(dscp=trim.dscp, queue=trim.priority, size_bytes=trim.size_bytes),
    )
    if port.headroom:
        head = next(iter(port.headroom.values()))
        pause = head.pause_threshold
        buffer = BufferConfig(
            xoff_bytes=pause,
            xon_bytes=max(0, pause - head.xon),
            headroom_bytes=head.xoff,
            queue_limit_bytes=pause + head.xoff,
        )
        minimum = head.minimum_xoff
    else:
        # Lossy profile: no PG thresholds; the lossy queue limit is what a lossless PG of the
        # same port would get with the computed headroom (see the module docstring).
        computed = sizing.pfc_headroom(port.speed_bps, port.cable_m, port.mtu)
        limit = 2 * computed.size
        buffer = BufferConfig(
            xoff_bytes=limit, xon_bytes=0, headroom_bytes=0, queue_limit_bytes=limit
        )
        minimum = computed.xoff
    return qos, buffer, minimum


def _links(intent: FabricIntent) -> dict[tuple[str, str], tuple[str, str]]:
    """(device, port) -> (peer device, peer port), both directions, checked."""
    declared: dict[tuple[str, str], tuple[str, str]] = {}
    for device in intent.devices:
        for port in device.ports:
            if port.peer:
                peer_dev, _, peer_port = port.peer.partition(":")
                declared[(device.name, port.name)] = (peer_dev, peer_port)
    for (dev, name), (peer_dev, peer_port) in declared.items():
        back = declared.get((peer_dev, peer_port))
        peer_device = intent.device(peer_dev)
        if peer_device is None or peer_device.port_named(peer_port) is None:
            raise TwinError(
                f"twin: {dev}:{name} peer {peer_dev}:{peer_port}: Expected: a port of the "
                "fabric Actual: no such device or port"
            )
        if back is not None and back != (dev, name):
            raise TwinError(
                f"twin: {dev}:{name} -> {peer_dev}:{peer_port}, but {peer_dev}:{peer_port} -> "
                f"{back[0]}:{back[1]}: Expected: both ends name each other"
            )
    # A link declared on one side only is still a link.
    for (dev, name), (peer_dev, peer_port) in list(declared.items()):
        declared.setdefault((peer_dev, peer_port), (dev, name))
    return declared


def _rdma_devices(intent: FabricIntent) -> dict[tuple[str, str], str]:
    """Every host port that declares an ``rdma_device``: (host, port) -> DEVICE/PORT."""
    return {
        (d.name, p.name): f"{ref[0]}/{ref[1]}"
        for d in intent.devices
        for p in d.rdma_ports()
        if (ref := p.rdma_name_and_port) is not None
    }


def build_network(
    intent: FabricIntent, plan: Plan | None = None, mode: str | None = None
) -> TwinNetwork:
    """The twin's network for a validated intent (and its plan, computed if not given).

    ``mode`` (lossless | lossy-trim) other than the profile's rewrites the RoCE class as the
    intent would (:func:`with_mode`) and plans again: ``twin --mode``."""
    from agent.intent.plan import build_plan  # here: see the TYPE_CHECKING imports

    if mode is not None and mode != intent.profile.mode:
        intent, plan = with_mode(intent, mode), None
    plan = plan or build_plan(intent)
    links = _links(intent)
    # The lab runs the hosts' DCQCN in emulated time (agent.observe.probes.dilation); the twin,
    # which
    # has no wall clock, runs the emulated fabric itself: same bytes, D times the speed.
    dilation = intent.emulation.time_dilation
    switches: dict[str, SwitchSpec] = {}
    hosts: dict[str, NicSpec] = {}
    rdma = _rdma_devices(intent)
    profile = intent.profile
    for dev_plan in plan.devices:
        dscp = [0] * 64
        for code, prio in dev_plan.dscp_to_priority.items():
            dscp[code] = prio
        specs: list[PortSpec] = []
        for port_plan in dev_plan.ports:
            link = links.get((dev_plan.name, port_plan.name))
            if link is None:
                continue  # unconnected: carries nothing
            if dev_plan.role == "host":
                qos, buffer, minimum = None, None, 0
            else:
                qos, buffer, minimum = _port_qos(
                    dev_plan, port_plan, profile.ecn.marking == "dequeue"
                )
            specs.append(
                PortSpec(
                    device=dev_plan.name,
                    name=port_plan.name,
                    index=len(specs),
                    speed_bps=port_plan.speed_bps * dilation,
                    cable_m=port_plan.cable_m,
                    mtu=port_plan.mtu,
                    peer_device=link[0],
                    peer_port=link[1],
                    qos=qos,
                    buffer=buffer,
                    min_headroom_bytes=minimum,
                )
            )
        if dev_plan.role != "host":
            switches[dev_plan.name] = SwitchSpec(dev_plan.name, dev_plan.role, specs, dscp)
            continue
        nic = dev_plan.nic
        if not specs or nic is None:
            continue  # a host without a link cannot take part
        for rail, spec in enumerate(specs):
            name = endpoint_name(dev_plan.name, spec.name, len(specs))
            hosts[name] = NicSpec(
                name=name,
                port=spec,
                leaf=spec.peer_device,
                roce_dscp=profile.roce.dscp,
                roce_priority=profile.roce.priority,
                cnp_dscp=nic.dcqcn.get("cnp_dscp", profile.cnp.dscp),
                cnp_priority=nic.dcqcn.get("cnp_802p_prio", profile.cnp.priority),
                pfc_priorities=list(nic.pfc_priorities),
                dcqcn=dict(nic.dcqcn),
                host=dev_plan.name,
                rail=rail,
                rdma_device=rdma.get((dev_plan.name, spec.name), ""),
            )
    switches = {name: _to_endpoints(switch, hosts) for name, switch in switches.items()}
    _check_peers(switches, hosts)
    return TwinNetwork(
        name=intent.name,
        profile=profile.name,
        switches=switches,
        hosts=hosts,
        ecn_enabled=profile.ecn.enabled,
        time_dilation=dilation,
        mode=profile.mode,
    )


MODES: tuple[str, ...] = ("lossless", "lossy-trim")
"""The RoCE class's modes ``twin --mode`` runs."""


def with_mode(intent: FabricIntent, mode: str) -> FabricIntent:
    """The intent with its RoCE class in ``mode``, as a fabric file's ``overrides: {mode:
    ...}`` would put it: in lossy-trim the plan has no PFC, headroom or watchdog for the class
    and trims with the profile's trim settings (their defaults where unset,
    :func:`agent.intent.plan.trim_plan`)."""
    if mode not in MODES:
        raise TwinError(f"twin --mode: Expected: one of {', '.join(MODES)} Actual: {mode!r}")
    profile = intent.profile.model_copy(update={"mode": mode})
    return intent.model_copy(update={"profile": profile})


def endpoint_name(host: str, port: str, linked_ports: int) -> str:
    """The twin's name of a host NIC: the host's own when it has one linked port."""
    return host if linked_ports == 1 else f"{host}:{port}"


def _to_endpoints(switch: SwitchSpec, hosts: dict[str, NicSpec]) -> SwitchSpec:
    """``switch`` with each port to a multi-NIC host pointing at that NIC's endpoint."""
    ports = [
        replace(p, peer_device=f"{p.peer_device}:{p.peer_port}")
        if p.peer_device not in hosts and f"{p.peer_device}:{p.peer_port}" in hosts
        else p
        for p in switch.ports
    ]
    return replace(switch, ports=ports)


def _check_peers(switches: dict[str, SwitchSpec], hosts: dict[str, NicSpec]) -> None:
    for switch in switches.values():
        for spec in switch.ports:
            if spec.peer_device not in switches and spec.peer_device not in hosts:
                raise TwinError(
                    f"twin: {switch.name}:{spec.name} peer {spec.peer_device}: Expected: a "
                    "switch or a host with a NIC port"
                )
    for host in hosts.values():
        if host.leaf not in switches:
            raise TwinError(
                f"twin: host {host.name}: Expected: its NIC linked to a switch Actual: {host.leaf}"
            )
        back = next((p for p in switches[host.leaf].ports if p.peer_device == host.name), None)
        if back is not None and back.speed_bps != host.port.speed_bps:
            raise TwinError(
                f"twin: link {host.name}:{host.port.name} - {host.leaf}:{back.name}: Expected: "
                f"one speed Actual: {format_speed(host.port.speed_bps)} and "
                f"{format_speed(back.speed_bps)}"
            )


def load_network(path: Path, mode: str | None = None) -> TwinNetwork:
    """Load a fabric file (errors located as by every other command) into the twin's network,
    or read the network kept from the last load of the same file (:mod:`agent.twin.netcache`
    says when it is the same).  ``mode`` other than the fabric's: built again in that mode
    (:func:`build_network`; the cache keeps the fabric's own)."""
    found = netcache.lookup(path)
    network = found.network if isinstance(found.network, TwinNetwork) else None
    if network is not None and mode in (None, network.mode):
        return network
    from agent.intent.loader import load_fabric  # here: see the TYPE_CHECKING imports

    loaded = load_fabric(path)
    if network is None:
        network = build_network(loaded.intent, loaded.plan)
        netcache.store(found, loaded.profile_reference, loaded.profile_file, network)
    if mode in (None, network.mode):
        return network
    return build_network(loaded.intent, loaded.plan, mode)


PAPER_DCQCN: dict[str, int] = {
    # Zhu et al. SIGCOMM 2015 / CoNEXT 2016 Table 1 in mlx5 names (agent.twin.fluid's table):
    # T 55 us, B 10 MB, R_AI 40 Mb/s, g 1/256, tau 50 us; no hyper increase in the fluid
    # model, so R_HAI = R_AI here. The paper's RP sets RT <- RC on every CNP: mlx5's
    # clamp_tgt_rate 1 (its default 0 keeps the target through a burst of cuts).
    "clamp_tgt_rate": 1,
    "rpg_time_reset": 55,
    "rpg_byte_reset": 10_000_000,
    "rpg_ai_rate": 40,
    "rpg_hai_rate": 40,
    "rpg_gd": 11,
    "rpg_min_dec_fac": 50,
    "rpg_min_rate": 1,
    "dce_tcp_g": 1020,
    "rate_reduce_monitor_period": 50,
    "initial_alpha_value": 1023,
    "min_time_between_cnps": 50,
}


class StarOptions(TypedDict, total=False):
    """:func:`star_fabric_yaml`'s keywords: the profile (default dcqcn-paper), the MTU (4096)
    and cable length (3 m) of every link, the hosts' DCQCN override and more override lines."""

    profile: str
    mtu: int
    cable_m: float
    dcqcn: dict[str, int] | None
    extra_overrides: str


def star_fabric_yaml(hosts: int, speed: str, **options: Unpack[StarOptions]) -> str:
    """A one-switch fabric file (``hosts`` hosts on ``leaf1``) for benches and tests: the
    smallest network on which an N:1 incast has exactly one bottleneck."""
    profile = options.get("profile", "dcqcn-paper")
    mtu = options.get("mtu", 4096)
    cable_m = options.get("cable_m", 3.0)
    extra_overrides = options.get("extra_overrides", "")
    lines = [
        "name: twin-star",
        f"profile: {profile}",
        "defaults:",
        "  username: netops",
        "  credentials: {password_env: TWIN_UNUSED}",
    ]
    nic = dict(options.get("dcqcn") or {})
    if nic or extra_overrides:
        lines.append("overrides:")
        if nic:
            lines.append("  nic:")
            lines.append("    dcqcn: {" + ", ".join(f"{k}: {v}" for k, v in nic.items()) + "}")
        if extra_overrides:
            lines.extend("  " + row for row in extra_overrides.strip("\n").splitlines())
    lines += ["devices:", "  - {name: leaf1, platform: arista_eos, role: leaf, host: leaf1,"]
    ports = ", ".join(
        f'{{name: Ethernet{i}, speed: {speed}, cable_m: {cable_m}, mtu: {mtu}, peer: "h{i}:eth0"}}'
        for i in range(1, hosts + 1)
    )
    lines.append(f"     ports: [{ports}]}}")
    for i in range(1, hosts + 1):
        lines.append(
            f"  - {{name: h{i}, platform: linux_host, role: host, host: h{i}, ports: "
            f"[{{name: eth0, speed: {speed}, cable_m: {cable_m}, mtu: {mtu}, "
            f'peer: "leaf1:Ethernet{i}"}}]}}'
        )
    return "\n".join(lines) + "\n"


class LeafSpineOptions(TypedDict, total=False):
    """:func:`leaf_spine_fabric_yaml`'s keywords: the number of spines (default 2), the
    uplinks' speed (400G) and cable length (30 m), the hosts' cable length (3 m), the profile
    (nvidia-default) and the MTU (9214)."""

    spines: int
    uplink_speed: str
    uplink_cable_m: float
    host_cable_m: float
    profile: str
    mtu: int


def leaf_spine_fabric_yaml(
    leaf_speeds: Sequence[str], hosts_per_leaf: int, **options: Unpack[LeafSpineOptions]
) -> str:
    """A two-tier fabric for benches and tests: ``spines`` spines, one leaf per entry of
    ``leaf_speeds`` with ``hosts_per_leaf`` hosts at that speed (``h1``, ``h2``, ... leaf by
    leaf) -- host speeds mixed behind one spine layer, as a pod that grew in stages is."""
    spines = options.get("spines", 2)
    uplink_speed = options.get("uplink_speed", "400G")
    uplink_cable_m = options.get("uplink_cable_m", 30.0)
    host_cable_m = options.get("host_cable_m", 3.0)
    profile = options.get("profile", "nvidia-default")
    mtu = options.get("mtu", 9214)
    header = [
        "name: twin-leaf-spine",
        f"profile: {profile}",
        "defaults:",
        "  username: netops",
        "  credentials: {password_env: TWIN_UNUSED}",
        "devices:",
    ]

    def port(name: str, speed: str, cable: float, peer: str) -> str:
        return f'{{name: {name}, speed: {speed}, cable_m: {cable}, mtu: {mtu}, peer: "{peer}"}}'

    def device(name: str, role: str, platform: str, ports: list[str]) -> str:
        return (
            f"  - {{name: {name}, platform: {platform}, role: {role}, host: {name}, "
            f"ports: [{', '.join(ports)}]}}"
        )

    leaves = range(1, len(leaf_speeds) + 1)
    spine_rows = [
        device("spine" + str(s), "spine", "arista_eos",
               [port(f"Ethernet{leaf}", uplink_speed, uplink_cable_m, f"leaf{leaf}:Ethernet{s}")
                for leaf in leaves])
        for s in range(1, spines + 1)
    ]  # fmt: skip
    leaf_rows: list[str] = []
    host_rows: list[str] = []
    for leaf, speed in zip(leaves, leaf_speeds, strict=True):
        ports = [
            port(f"Ethernet{s}", uplink_speed, uplink_cable_m, f"spine{s}:Ethernet{leaf}")
            for s in range(1, spines + 1)
        ]
        for k in range(1, hosts_per_leaf + 1):
            host = f"h{(leaf - 1) * hosts_per_leaf + k}"
            leaf_port = f"Ethernet{spines + k}"
            ports.append(port(leaf_port, speed, host_cable_m, f"{host}:eth0"))
            host_rows.append(
                device(host, "host", "linux_host",
                       [port("eth0", speed, host_cable_m, f"leaf{leaf}:{leaf_port}")])
            )  # fmt: skip
        leaf_rows.append(device(f"leaf{leaf}", "leaf", "arista_eos", ports))
    return "\n".join(header + spine_rows + leaf_rows + host_rows) + "\n"

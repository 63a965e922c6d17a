"""Where a collective's ranks run and the connections between them.

One rank per GPU NIC (an endpoint of :class:`agent.twin.network.TwinNetwork`). On a fabric of
one-NIC hosts the ranks form one ring in the order given (NCCL's order when it has no topology
to reorder by). On hosts with several NICs (a GPU server's rails) the ranks fill whole hosts and
the job runs as NCCL runs it on a rail-optimised fabric: one channel per NIC, channel c's ring
crossing from host to host on NIC c of each (``NCCL_CROSS_NIC=0``, "Always use the same NIC for
the same ring/tree, to avoid crossing network rails",
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-cross-nic), the hops
between the GPUs inside a host over NVLink, not the network; all-to-all through PXN (the data
for a peer's GPU on rail c first moves over NVLink to the local GPU of rail c, then crosses on
rail c: ``NCCL_PXN_DISABLE``, same page), so every network connection stays on its rail.

Without ``ranks`` (0) the job is the fabric's: every GPU NIC at the dominant speed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from agent.intent.units import format_speed
from agent.twin.flows import FlowSpec
from agent.twin.nccl_algo import nccl_choice
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.workloads import ALGORITHMS as ALGORITHMS
from agent.twin.workloads import MAX_QPS, AlgorithmName, CollectiveName, _pick_speed

QPN_BASE = 0x100  # the twin's first QP number (a driver's are as arbitrary)


@dataclass(frozen=True)
class CollectiveSpec:
    workload: CollectiveName
    ranks: int
    size_bytes: int  # nccl-tests' "size" (the buffer size per rank, as nccl-tests prints)
    qps_per_connection: int = 1
    hosts: tuple[str, ...] | None = None  # default: fabric order at the chosen speed
    speed_bps: int | None = None
    split_data_on_qps: bool = False  # NCCL_IB_SPLIT_DATA_ON_QPS (default 0)
    pxn: bool = True  # all-to-all on multi-NIC hosts through PXN (NCCL_PXN_DISABLE=0)
    channels: int = 1  # ring channels per NIC, each its own connections (NCCL_MIN_NCHANNELS)
    # NCCL's algorithm for an all-reduce: its rings, its double binary tree between the hosts
    # (NCCL_ALGO=tree; :func:`double_binary_tree`), or auto, made one of them when placed
    # (:func:`resolve_algorithm`)
    algorithm: AlgorithmName = "ring"
    # tune's screening: only the connections of the first ``sample_rails`` rails post (their
    # rings are whole; the other rails' NICs idle); 0: every rail.  Exact for those rails when
    # no link carries two rails (:func:`rails_share_no_link`).
    sample_rails: int = 0


@dataclass(frozen=True)
class Connection:
    """Rank ``src`` to rank ``dst`` over hosts ``src_host`` -> ``dst_host``, as Q flows."""

    index: int
    src: int
    dst: int
    src_host: str
    dst_host: str
    flows: tuple[int, ...]  # indices into the job's flow list, QP 0 first
    channel: int = 0  # the ring channel on its NIC: the same two NICs' earlier connections

    @property
    def name(self) -> str:
        """``SRC->DST``, and ``#K`` for the ring's channel K > 0 between the same NICs."""
        suffix = f"#{self.channel}" if self.channel else ""
        return f"{self.src_host}->{self.dst_host}{suffix}"


@dataclass(frozen=True)
class Placement:
    """The collective on the fabric: one endpoint per rank, host by host (a host's NICs in
    rail order), and ``rails`` NICs (ranks) per host; 1 for one-NIC hosts."""

    speed_bps: int
    endpoints: list[str]
    rails: int = 1

    @property
    def hosts(self) -> int:
        return len(self.endpoints) // self.rails


def place_ranks(network: TwinNetwork, spec: CollectiveSpec) -> Placement:
    """The ranks' endpoints: ``spec.hosts`` in that order (a multi-NIC host's name stands for
    its NICs), else the first ``spec.ranks`` endpoints at the speed in fabric-file order (all of
    them at the dominant speed when ``spec.ranks`` is 0)."""
    if spec.hosts is not None:
        speed, endpoints = _named_endpoints(network, spec)
    else:
        speed, endpoints = _fabric_endpoints(network, spec)
    return Placement(speed, endpoints, _rails(network, endpoints))


def _fabric_endpoints(network: TwinNetwork, spec: CollectiveSpec) -> tuple[int, list[str]]:
    if spec.ranks or spec.speed_bps is not None:
        speed, nics = _pick_speed(network, spec.speed_bps)
    else:
        speed = dominant_speed(network)
        nics = network.hosts_at(speed)
    ranks = spec.ranks or len(nics)
    if ranks > len(nics):
        raise TwinError(
            f"twin --ranks: one rank per GPU NIC at {format_speed(speed)}. Expected: at most "
            f"{len(nics)} Actual: {ranks}"
        )
    return speed, [n.name for n in nics[:ranks]]


def dominant_speed(network: TwinNetwork) -> int:
    """The speed most host NICs run at (the fastest of equals)."""
    counts = Counter(n.port.speed_bps for n in network.hosts.values())
    if not counts:
        raise TwinError("twin: Expected: hosts with a NIC linked to a switch Actual: none")
    return max(counts, key=lambda speed: (counts[speed], speed))


def _named_endpoints(network: TwinNetwork, spec: CollectiveSpec) -> tuple[int, list[str]]:
    endpoints = _expand_hosts(network, list(spec.hosts or ()))
    ranks = spec.ranks or len(endpoints)
    if ranks > len(endpoints):
        raise TwinError(
            f"twin --ranks: one rank per GPU NIC of --hosts. Expected: at most {len(endpoints)} "
            f"Actual: {ranks}"
        )
    chosen = endpoints[:ranks]
    return _one_speed(network, chosen, spec.speed_bps), chosen


def nics_by_host(network: TwinNetwork) -> dict[str, list[str]]:
    """Each host's endpoints in rail order, hosts in fabric-file order."""
    by_host: dict[str, list[str]] = {}
    for nic in network.hosts.values():
        by_host.setdefault(nic.host or nic.name, []).append(nic.name)
    return by_host


def _expand_hosts(network: TwinNetwork, names: list[str]) -> list[str]:
    """``--hosts`` as endpoints: a multi-NIC host's name stands for its NICs (rail order)."""
    by_host = nics_by_host(network)
    unknown = [h for h in names if h not in network.hosts and h not in by_host]
    if unknown:
        raise TwinError(
            f"twin --hosts: Expected: hosts of the fabric with a NIC port (or HOST:PORT of one) "
            f"Actual: {', '.join(unknown)}"
        )
    endpoints = [e for h in names for e in ([h] if h in network.hosts else by_host[h])]
    if len(set(endpoints)) != len(endpoints):
        raise TwinError(f"twin --hosts: Expected: each host once Actual: {','.join(names)}")
    return endpoints


def _one_speed(network: TwinNetwork, chosen: list[str], speed_bps: int | None) -> int:
    speeds = {network.hosts[e].port.speed_bps for e in chosen}
    if len(speeds) > 1 or (speed_bps is not None and speeds != {speed_bps}):
        raise TwinError(
            "twin --hosts: Expected: NICs of one speed"
            + (f" ({format_speed(speed_bps)}, --speed)" if speed_bps else "")
            + " Actual: "
            + ", ".join(f"{e} {format_speed(network.hosts[e].port.speed_bps)}" for e in chosen)
        )
    return speeds.pop()


def _rails(network: TwinNetwork, endpoints: list[str]) -> int:
    """NICs per host of the placed ranks: 1 when each rank is on its own host; else every host
    must hold the same number, host by host, on two hosts at least (NCCL's rail-aligned
    channels)."""
    runs: list[tuple[str, int]] = []  # (host, ranks in a row on it)
    for endpoint in endpoints:
        nic = network.hosts[endpoint]
        host = nic.host or nic.name
        if runs and runs[-1][0] == host:
            runs[-1] = (host, runs[-1][1] + 1)
        else:
            runs.append((host, 1))
    sizes = {count for _, count in runs}
    if sizes == {1} and len({host for host, _ in runs}) == len(runs):
        return 1
    if len(sizes) == 1 and len(runs) >= 2 and len({host for host, _ in runs}) == len(runs):
        return sizes.pop()
    per_host = ", ".join(f"{host} {count}" for host, count in runs)
    raise TwinError(
        "twin --ranks: on hosts with several NICs the ranks fill hosts one after the other, "
        "the same number on each, on two hosts at least (NCCL's rail-aligned channels). "
        f"Expected: the same count on every host Actual: {per_host}"
    )


def connection_pairs(  # noqa: PLR0913 -- the spec's fields the connections follow from
    workload: CollectiveName,
    ranks: int,
    rails: int = 1,
    pxn: bool = True,
    channels: int = 1,
    algorithm: AlgorithmName = "ring",
) -> list[tuple[int, int]]:
    """The connections as (source rank, destination rank), ranks host by host (module
    docstring): each rail's ring between the hosts, rail by rail (on one-NIC hosts the ring
    (r, r + 1)), ``channels`` times over (channel k x G + c runs on NIC c, as NCCL duplicates
    a ring onto the same NICs; send/recv's peers are the ring's); the all-to-all's pairs
    (:func:`_alltoall_pairs`); or a tree's edges, both ways (:func:`tree_pairs`)."""
    if workload == "alltoall":
        return _alltoall_pairs(ranks, rails, pxn)
    if algorithm == "tree":
        return tree_pairs(ranks // rails, rails, channels)
    hosts = ranks // rails
    ring = [
        (h * rails + c, (h + 1) % hosts * rails + c) for c in range(rails) for h in range(hosts)
    ]
    return ring * channels


def resolve_algorithm(spec: CollectiveSpec, placement: Placement) -> tuple[CollectiveSpec, str]:
    """``spec`` with ``algorithm: auto`` made the one NCCL's cost model picks for it as placed
    (an all-reduce; ring for the others), and the note that says why ("" when not auto)."""
    if spec.algorithm != "auto":
        return spec, ""
    if spec.workload != "allreduce":
        return replace(spec, algorithm="ring"), ""
    ranks = len(placement.endpoints)
    choice = nccl_choice(
        spec.size_bytes, ranks, ranks // placement.rails, placement.rails * spec.channels,
        placement.speed_bps,
    )  # fmt: skip
    return replace(spec, algorithm=choice.algorithm), choice.note()


def btree(nranks: int, rank: int) -> tuple[int, int, int]:
    """NCCL's binary tree (``ncclGetBtree``, src/graph/trees.cc): ``rank``'s parent and two
    children, -1 for none; rank 0 is the root, and its one child is the highest power of two
    below ``nranks``."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1) if nranks > 1 else -1
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = -1 if lowbit == 0 else rank - lowbit
    down1 = -1 if lowbit == 0 else rank + lowbit
    while down1 >= nranks:  # as NCCL steps it: the first pass recomputes the same child
        down1 = -1 if lowbit == 0 else rank + lowbit
        lowbit >>= 1
    return up, down0, down1


def double_binary_tree(nranks: int) -> tuple[list[int], list[int]]:
    """NCCL's two trees over ``nranks`` nodes (``ncclGetDtree``): each node's parent (-1 at
    the root) in the binary tree and in its mirror (an even count) or its shift by one rank
    (an odd count), so a node that is a leaf in one tree is inside the other."""
    first = [btree(nranks, r)[0] for r in range(nranks)]
    second = []
    for rank in range(nranks):
        if nranks % 2:
            up = btree(nranks, (rank - 1 + nranks) % nranks)[0]
            second.append(-1 if up == -1 else (up + 1) % nranks)
        else:
            up = btree(nranks, nranks - 1 - rank)[0]
            second.append(-1 if up == -1 else nranks - 1 - up)
    return first, second


def tree_edges(hosts: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Each tree's edges as (child host, parent host), children in host order."""
    return tuple(  # type: ignore[return-value]
        [(node, parent) for node, parent in enumerate(tree) if parent != -1]
        for tree in double_binary_tree(hosts)
    )


def tree_pairs(hosts: int, rails: int, channels: int = 1) -> list[tuple[int, int]]:
    """A tree all-reduce's connections: for channel k, rail c and each of the two trees
    (NCCL runs tree 0 on its channels and tree 1 on as many more), the edges' up connections
    (child to parent, NIC c of each host), then their down connections (parent to child)."""
    out: list[tuple[int, int]] = []
    first, second = tree_edges(hosts)
    for _ in range(channels):
        for rail in range(rails):
            for edges in (first, second):
                out += [(child * rails + rail, parent * rails + rail) for child, parent in edges]
                out += [(parent * rails + rail, child * rails + rail) for child, parent in edges]
    return out


def connection_rail(pair: tuple[int, int], rails: int) -> int | None:
    """The rail a connection runs on (its two GPUs' rail), None when it crosses rails (an
    all-to-all without PXN)."""
    src, dst = pair
    return src % rails if src % rails == dst % rails else None


def rails_share_no_link(network: TwinNetwork, spec: CollectiveSpec) -> bool:
    """True when no link (cable, either direction) lies on an ECMP path of connections of two
    different rails, and no connection crosses rails: then each rail's connections are a
    closed system (the twin's switches have no buffer shared between ports, and PFC pauses the
    link it arrives on), and a run of one rail's rings is that rail's exact run."""
    placement = place_ranks(network, spec)
    if placement.rails < 2:
        return False
    spec, _ = resolve_algorithm(spec, placement)
    pairs = connection_pairs(
        spec.workload, len(placement.endpoints), placement.rails, spec.pxn,
        algorithm=spec.algorithm,
    )  # fmt: skip
    owner: dict[frozenset[str], int] = {}
    for pair in pairs:
        rail = connection_rail(pair, placement.rails)
        if rail is None:
            return False
        src, dst = (placement.endpoints[r] for r in pair)
        for link in _links_between(network, src, dst):
            if owner.setdefault(link, rail) != rail:
                return False
    return True


def _links_between(network: TwinNetwork, src: str, dst: str) -> set[frozenset[str]]:
    """Every switch-side link on any ECMP path from ``src`` to ``dst`` (as its two devices)."""
    first = network.hosts[src].port.peer_device
    return {frozenset(step) for step in network.ecmp_steps(dst, first)}


def _alltoall_pairs(ranks: int, rails: int, pxn: bool) -> list[tuple[int, int]]:
    """Every ordered pair of ranks on different hosts (one-NIC hosts: every pair; without PXN
    each GPU to every GPU of the other hosts, over its own NIC); with PXN on multi-NIC hosts,
    rail c of each host to rail c of the others, rail by rail."""
    if rails == 1 or not pxn:
        return [(s, d) for s in range(ranks) for d in range(ranks) if s // rails != d // rails]
    hosts = ranks // rails
    return [
        (h * rails + c, k * rails + c)
        for c in range(rails)
        for h in range(hosts)
        for k in range(hosts)
        if h != k
    ]


def roce_udp_sport(lqpn: int, rqpn: int) -> int:
    """The UDP source port a RoCEv2 QP uses when its GRH has no flow label: Linux's
    ``rdma_get_udp_sport`` (include/rdma/ib_verbs.h) -- the flow label
    ``rdma_calc_flow_label(lqpn, rqpn)`` folded into 0xC000-0xFFFF by
    ``rdma_flow_label_to_udp_sport``."""
    v = lqpn * rqpn
    v ^= v >> 20
    v ^= v >> 40
    label = v & 0xFFFFF
    low = (label & 0x3FFF) ^ ((label & 0xFC000) >> 14)
    return low | 0xC000


def qp_sport(connection: int, qp: int) -> int:
    """QP ``qp`` of connection ``connection``'s source port: :func:`roce_udp_sport` of QP
    numbers the twin allocates (:data:`QPN_BASE` + 2 x (connection x MAX_QPS + qp) locally,
    + 1 remotely), so QP 0 keeps its port whatever Q is and adding QPs only adds paths."""
    lqpn = QPN_BASE + 2 * (connection * MAX_QPS + qp)
    return roce_udp_sport(lqpn, lqpn + 1)


def build_flows(  # noqa: PLR0913 -- keyword-only: a job's place among the run's flows
    hosts: list[str],
    workload: CollectiveName,
    qps: int,
    *,
    pairs: list[tuple[int, int]] | None = None,
    first_flow: int = 0,
    numbers: list[int] | None = None,
) -> tuple[list[Connection], list[FlowSpec]]:
    """The connections (``pairs`` of ranks, default :func:`connection_pairs` of one-NIC hosts)
    and their QPs as sized flows (data arrives by :meth:`Engine.post`).  ``first_flow``: the
    flows of the jobs before this one in the same run (its connections' flow indices start
    there).  QP numbers are each NIC's own, so a job's QPs (their UDP source ports) are the
    same alone and beside another job, which runs on other NICs; ``numbers``: each pair's
    connection number in the whole job (its QP numbers), when the pairs are some of its
    connections (a sample of rails); default their positions."""
    if pairs is None:
        pairs = connection_pairs(workload, len(hosts))
    if numbers is None:
        numbers = list(range(len(pairs)))
    connections: list[Connection] = []
    flows: list[FlowSpec] = []
    base = first_flow
    earlier: dict[tuple[int, int], int] = {}  # a pair repeats only as another ring channel
    for index, (src, dst) in enumerate(pairs):
        start = base + len(flows)
        for qp in range(qps):
            sport = qp_sport(numbers[index], qp)
            flows.append(FlowSpec(hosts[src], hosts[dst], udp_sport=sport, size_bytes=0))
        channel = earlier.get((src, dst), 0)
        earlier[(src, dst)] = channel + 1
        indices = tuple(range(start, base + len(flows)))
        connections.append(Connection(index, src, dst, hosts[src], hosts[dst], indices, channel))
    return connections, flows


@dataclass(frozen=True)
class FlowPath:
    """One QP of the placed job and the switch ports it leaves by (``twin --show-placement``):
    which NIC talks to which, and which spine ECMP hashes it to."""

    src: str
    dst: str
    rail: int  # the NIC's rail on a multi-NIC host, 0 on a one-NIC host
    qp: int
    udp_sport: int
    egress: list[str]  # SWITCH:PORT, hop by hop
    channel: int = 0  # the ring's channel on its NIC (0 for all-to-all)

    def to_json(self) -> dict[str, object]:
        return {
            "from": self.src,
            "to": self.dst,
            "rail": self.rail,
            "channel": self.channel,
            "qp": self.qp,
            "udp_sport": self.udp_sport,
            "egress": self.egress,
        }


def flow_paths(network: TwinNetwork, spec: CollectiveSpec) -> list[FlowPath]:
    """Every QP of the job ``spec`` places, with the path the switches' ECMP hash gives it
    (:meth:`TwinNetwork.path`, the engine's own choice)."""
    placement = place_ranks(network, spec)
    spec, _ = resolve_algorithm(spec, placement)
    pairs = connection_pairs(
        spec.workload, len(placement.endpoints), placement.rails, spec.pxn, spec.channels,
        spec.algorithm,
    )  # fmt: skip
    connections, flows = build_flows(
        placement.endpoints, spec.workload, spec.qps_per_connection, pairs=pairs
    )
    paths = []
    for conn in connections:
        for qp, index in enumerate(conn.flows):
            flow = flows[index]
            hops = network.path(flow.src, flow.dst, flow.hash_value())
            egress = [f"{switch}:{network.switches[switch].ports[i].name}" for switch, i in hops]
            rail = network.hosts[flow.src].rail
            paths.append(
                FlowPath(flow.src, flow.dst, rail, qp, flow.udp_sport, egress, conn.channel)
            )
    return paths

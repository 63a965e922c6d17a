"""NCCL collectives in the twin: ring all-reduce, all-gather, reduce-scatter, all-to-all and
send/recv.

What a user judges a fabric by is the time of the job's collectives and nccl-tests' bus
bandwidth; this module runs a collective's data movement through the engine and reports both.

Model (docs/collectives.md says the same, with an example):

* Ranks: one per GPU NIC (``hosts``, else the NICs at the chosen speed in fabric-file order,
  all of them at the dominant speed by default); on one-NIC hosts rank r's ring neighbours are
  r - 1 and r + 1 (mod N), the order NCCL's ring follows when it is given no topology to
  reorder by; on hosts with several NICs, one ring per rail between the hosts
  (:mod:`agent.twin.placement`, :func:`rail_ring_slices`).
* Ring collectives follow NCCL's ring kernels (``src/device/all_reduce.h`` ``runRing``, and the
  all-gather / reduce-scatter ones): the buffer is processed in *loops* of N chunks of
  :data:`CHUNK_BYTES` (NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 x CHUNKSTEPS 4 = 2 MiB); in the last
  loop the chunk is the remainder over N, rounded up to 16 bytes.  Each loop is 2(N - 1) steps
  for all-reduce (N - 1 reduce-scatter steps, then N - 1 all-gather steps), N - 1 for all-gather
  and reduce-scatter; at step k rank r sends chunk (r - o - k) mod N to rank r + 1 (o = 1 for
  all-reduce and reduce-scatter, 0 for all-gather, as the kernels index them).  A chunk travels
  as slices of :data:`SLICE_BYTES` (SLICESTEPS 2 x 512 KiB = 1 MiB): one network message each.
  Rank r may send slice j of step k + 1 once it has received, in order, slice j of step k from
  rank r - 1; it may have at most :data:`WINDOW_SLICES` (NCCL_STEPS / SLICESTEPS = 4) slices
  that the next rank has not yet consumed (forwarded, or kept at the last step) -- NCCL's
  FIFO of NCCL_STEPS buffers per connection.
* All-to-all: every rank sends size / N to every other rank at once (NCCL's grouped
  send/receive), no dependencies between the pairs.
* Send/recv (``sendrecv``, a pipeline's stage boundary): every rank sends its whole buffer to
  the next and receives from the previous, at once (nccl-tests ``src/sendrecv.cu``: one
  ``ncclSend`` and one ``ncclRecv`` in a group, busbw = algbw).  nccl-tests pairs rank r with
  r + 1, which on a multi-NIC host is mostly an NVLink hop; the twin pairs GPU c of host h
  with GPU c of host h + 1 (the ring's connections, rail by rail): the boundary between
  pipeline stages, one host per stage, where the data crosses the network.
* Several jobs side by side (:func:`run_collectives`, ``twin --job``): each on NICs of its own,
  all starting at once, one engine; each job's time is its own last byte.
* QPs per connection (NCCL_IB_QPS_PER_CONNECTION, default 1): each connection is Q flows (QPs),
  each with its own UDP source port -- the ECMP entropy, derived from the QP numbers as Linux
  does (:func:`roce_udp_sport`) -- and its own DCQCN reaction point.
  With NCCL_IB_SPLIT_DATA_ON_QPS=0 (NCCL's default since 2.20) each message goes whole on one
  QP, the QPs taken in turn (``ncclIbCommBaseGetQpForRequest``: ``(id * 1 + 0) % nqps``); with
  1 each message is cut into Q equal parts rounded up to 128 bytes, one per QP
  (``ncclIbMultiSend``).  The receiver takes slices in order, whatever QP brought them.
* Sizes are nccl-tests' (``doc/PERFORMANCE.md``; the ``*GetCollByteCount`` functions, float
  data): all-reduce moves the whole buffer S; all-gather's and reduce-scatter's S is the total
  of all ranks' pieces (S / N per rank, 16-byte aligned), all-to-all's S the per-rank send
  buffer (S / N to each peer).  Time = the tick the last byte is delivered in order on the last
  connection; ``algbw = S / t``; ``busbw = algbw x 2(N - 1)/N`` (all-reduce) or
  ``x (N - 1)/N`` (all-gather, reduce-scatter, all-to-all); in GB/s = 10**9 bytes/s, as
  nccl-tests prints them.

Sources: nccl-tests doc/PERFORMANCE.md and src/{all_reduce,all_gather,reduce_scatter,
alltoall,sendrecv}.cu (https://github.com/NVIDIA/nccl-tests); NCCL src/include/device.h
(NCCL_STEPS 8),
src/init.cc (DEFAULT_BUFFSIZE 4 MiB), src/include/collectives.h (*_SLICESTEPS, *_CHUNKSTEPS),
src/transport/net_ib/{connect.cc,common.cc,common.h,p2p.cc} (IB_QPS_PER_CONNECTION default 1,
IB_SPLIT_DATA_ON_QPS default 0) (https://github.com/NVIDIA/nccl); the variables' meaning:
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-qps-per-connection
and #nccl-ib-split-data-on-qps.

Not modelled (:data:`NOT_MODELLED`, repeated in every report): compute and reduction time and
their overlap with communication, intra-host NVLink transfers (instantaneous), the LL and
LL128 protocols, NVLS / CollNet / PAT algorithms, NCCL's choice of channels,
GPUDirect RDMA details (PCIe, memory registration), NCCL's own latency per step.

An all-reduce may run on NCCL's double binary tree instead of its rings
(``CollectiveSpec.algorithm``, :func:`tree_slices`, docs/collectives.md "NCCL's tree"), or on
the one NCCL's cost model picks (``auto``, :mod:`agent.twin.nccl_algo`).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

from agent.twin.collective_report import LINE_RATE_FLOOR as LINE_RATE_FLOOR
from agent.twin.collective_report import NOT_MODELLED as NOT_MODELLED
from agent.twin.collective_report import CollectiveReport as CollectiveReport
from agent.twin.collective_report import Collision as Collision
from agent.twin.collective_report import LinkLoad as LinkLoad
from agent.twin.collective_report import judge_collective as judge_collective
from agent.twin.collective_report import nic_rate as nic_rate
from agent.twin.engine import Engine
from agent.twin.flows import Flow, FlowSpec
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.placement import ALGORITHMS as ALGORITHMS
from agent.twin.placement import QPN_BASE as QPN_BASE
from agent.twin.placement import CollectiveSpec as CollectiveSpec
from agent.twin.placement import Connection as Connection
from agent.twin.placement import Placement as Placement
from agent.twin.placement import build_flows as build_flows
from agent.twin.placement import connection_pairs as connection_pairs
from agent.twin.placement import connection_rail as connection_rail
from agent.twin.placement import place_ranks as place_ranks
from agent.twin.placement import qp_sport as qp_sport
from agent.twin.placement import resolve_algorithm as resolve_algorithm
from agent.twin.placement import roce_udp_sport as roce_udp_sport
from agent.twin.placement import tree_edges as tree_edges
from agent.twin.placement import tree_pairs as tree_pairs
from agent.twin.results import (
    MAX_DURATION_S,
    PortReport,
    _active_ports,
    _drops,
    _max_paused_fraction,
    _pfc_frames,
    jain,
    pick_bottleneck,
)
from agent.twin.run_options import RunOptions
from agent.twin.trimming import trim_facts
from agent.twin.verdicts import Verdict
from agent.twin.workloads import COLLECTIVES as COLLECTIVES
from agent.twin.workloads import MAX_CHANNELS as MAX_CHANNELS
from agent.twin.workloads import MAX_QPS as MAX_QPS
from agent.twin.workloads import MAX_RANKS as MAX_RANKS
from agent.twin.workloads import P2P_COLLECTIVES as P2P_COLLECTIVES
from agent.twin.workloads import AlgorithmName
from agent.twin.workloads import CollectiveName as CollectiveName
from lossless.clock import TICKS_PER_SECOND

RING_COLLECTIVES: tuple[CollectiveName, ...] = ("allreduce", "allgather", "reducescatter")

NCCL_BUFFSIZE = 4 << 20  # NCCL src/init.cc DEFAULT_BUFFSIZE (NCCL_BUFFSIZE, env docs)
NCCL_STEPS = 8  # NCCL src/include/device.h
STEP_BYTES = NCCL_BUFFSIZE // NCCL_STEPS  # 512 KiB: one FIFO buffer of a connection
SLICE_STEPS = NCCL_STEPS // 4  # ALLREDUCE/ALLGATHER/REDUCESCATTER_SLICESTEPS (collectives.h)
CHUNK_STEPS = NCCL_STEPS // 2  # ..._CHUNKSTEPS
SLICE_BYTES = STEP_BYTES * SLICE_STEPS  # 1 MiB: one network message (net.cc sliceSteps)
CHUNK_BYTES = STEP_BYTES * CHUNK_STEPS  # 2 MiB per rank per step of a loop
WINDOW_SLICES = NCCL_STEPS // SLICE_STEPS  # 4 slices in flight per connection
IB_WRITE_ALIGN = 128  # NCCL p2p.cc IB_WRITE_CHUNK_ALIGNMENT: split-data parts round up to it
ELEMENT_BYTES = 4  # nccl-tests' default datatype, float
ALIGN_BYTES = 16  # nccl-tests and NCCL align per-rank counts and last chunks to 16 bytes


def busbw_factor(workload: CollectiveName, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md, "Summary"; src/sendrecv.cu
    ``SendRecvGetBw``: 1)."""
    if workload == "allreduce":
        return 2 * (ranks - 1) / ranks
    if workload == "sendrecv":
        return 1.0
    return (ranks - 1) / ranks


def nccl_tests_size(workload: CollectiveName, ranks: int, size_bytes: int) -> int:
    """The size nccl-tests prints (and divides by the time) for a requested ``size_bytes``:
    whole floats for all-reduce; N x a 16-byte-aligned per-rank piece otherwise
    (``*GetCollByteCount``: ``(count / nranks) & ~(16 / eltSize - 1)``)."""
    elements = size_bytes // ELEMENT_BYTES
    if workload in ("allreduce", "sendrecv"):
        return elements * ELEMENT_BYTES
    per_rank = (elements // ranks) & ~(ALIGN_BYTES // ELEMENT_BYTES - 1)
    return per_rank * ELEMENT_BYTES * ranks


@dataclass(frozen=True)
class Transfer:
    """What one rank sends its ring neighbour in one step of one loop."""

    loop: int
    step: int
    src: int
    dst: int
    chunk: int
    nbytes: int


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


def loop_chunks(
    workload: CollectiveName, ranks: int, size_bytes: int, chunk_bytes: int = CHUNK_BYTES
) -> list[list[int]]:
    """Bytes of each of the N chunks, loop by loop (module docstring).  ``size_bytes`` is
    nccl-tests' size (:func:`nccl_tests_size`)."""
    loops: list[list[int]] = []
    if workload == "allreduce":
        done = 0
        while done < size_bytes:
            rest = size_bytes - done
            chunk = chunk_bytes if rest >= ranks * chunk_bytes else _align_up(-(-rest // ranks), 16)
            loops.append([max(0, min(chunk, rest - c * chunk)) for c in range(ranks)])
            done += sum(loops[-1])
        return loops
    per_rank = size_bytes // ranks
    done = 0
    while done < per_rank:
        piece = min(chunk_bytes, per_rank - done)
        loops.append([piece] * ranks)
        done += piece
    return loops


def ring_steps(workload: CollectiveName, ranks: int) -> int:
    """Steps of one loop: 2(N - 1) for all-reduce, N - 1 for all-gather and reduce-scatter."""
    return 2 * (ranks - 1) if workload == "allreduce" else ranks - 1


def ring_schedule(
    workload: CollectiveName, ranks: int, size_bytes: int, chunk_bytes: int = CHUNK_BYTES
) -> list[list[list[Transfer]]]:
    """Loops, each a list of steps, each the N transfers of that step (rank r to r + 1)."""
    if workload not in RING_COLLECTIVES:
        raise TwinError(f"twin --workload: Expected: a ring collective Actual: {workload}")
    offset = 0 if workload == "allgather" else 1
    schedule = []
    for index, chunks in enumerate(loop_chunks(workload, ranks, size_bytes, chunk_bytes)):
        steps = []
        for k in range(ring_steps(workload, ranks)):
            steps.append(
                [
                    Transfer(index, k, r, (r + 1) % ranks, c, chunks[c])
                    for r in range(ranks)
                    for c in [(r - offset - k) % ranks]
                ]
            )
        schedule.append(steps)
    return schedule


def ring_sends(
    workload: CollectiveName, ranks: int, size_bytes: int, senders: Sequence[int]
) -> list[list[tuple[int, int, int]]]:
    """What each of ``senders`` sends, (loop, step, bytes) in order: :func:`ring_schedule`'s
    transfers of those ranks only (a rail ring's network hops are one rank in G, and the whole
    schedule of a 256-rank ring is most of its set-up time)."""
    if workload not in RING_COLLECTIVES:
        raise TwinError(f"twin --workload: Expected: a ring collective Actual: {workload}")
    offset = 0 if workload == "allgather" else 1
    steps = range(ring_steps(workload, ranks))
    sends: list[list[tuple[int, int, int]]] = [[] for _ in senders]
    for index, chunks in enumerate(loop_chunks(workload, ranks, size_bytes)):
        for i, rank in enumerate(senders):
            sends[i].extend((index, k, chunks[(rank - offset - k) % ranks]) for k in steps)
    return sends


def slice_sizes(nbytes: int, slice_bytes: int = SLICE_BYTES) -> list[int]:
    """A chunk's slices: full slices, the last one short; none for an empty chunk."""
    full, rest = divmod(nbytes, slice_bytes)
    return [slice_bytes] * full + ([rest] if rest else [])


def qp_parts(nbytes: int, qps: int) -> list[int]:
    """NCCL_IB_SPLIT_DATA_ON_QPS=1: a message cut over the QPs, each part
    ``ceil(ceil(n / Q) / 128) * 128`` bytes, the last the rest, none past the end."""
    part = _align_up(-(-nbytes // qps), IB_WRITE_ALIGN)
    parts: list[int] = []
    left = nbytes
    while left > 0 and len(parts) < qps:
        parts.append(min(part, left))
        left -= parts[-1]
    return parts


# ------------------------------------------------------------------ placement and flows


def check_spec(spec: CollectiveSpec) -> None:
    """Bad input, with the option named (exit 2 in the CLI)."""
    if spec.workload not in COLLECTIVES:
        raise TwinError(
            f"twin --workload: Expected: one of {', '.join(COLLECTIVES)} Actual: {spec.workload}"
        )
    if spec.ranks and not 2 <= spec.ranks <= MAX_RANKS:
        raise TwinError(f"twin --ranks: Expected: 2-{MAX_RANKS} Actual: {spec.ranks}")
    if not 1 <= spec.channels <= MAX_CHANNELS or (
        spec.channels > 1 and spec.workload in P2P_COLLECTIVES
    ):
        raise TwinError(
            f"twin --channels: Expected: 1-{MAX_CHANNELS} ring channels per NIC, 1 for "
            f"alltoall and sendrecv (their connections are per peer) Actual: {spec.channels} "
            f"for {spec.workload}"
        )
    if spec.algorithm not in ALGORITHMS or (
        spec.algorithm == "tree" and spec.workload != "allreduce"
    ):
        raise TwinError(
            f"twin --algorithm: Expected: {', '.join(ALGORITHMS)} for allreduce, ring or auto "
            f"for the others (NCCL's tree runs all-reduce only) Actual: {spec.algorithm} for "
            f"{spec.workload}"
        )
    if not 1 <= spec.qps_per_connection <= MAX_QPS:
        raise TwinError(
            f"twin --qps-per-connection: Expected: 1-{MAX_QPS} (NCCL_IB_QPS_PER_CONNECTION) "
            f"Actual: {spec.qps_per_connection}"
        )
    if spec.ranks and nccl_tests_size(spec.workload, spec.ranks, spec.size_bytes) <= 0:
        whole = spec.workload in ("allreduce", "sendrecv")
        least = ELEMENT_BYTES if whole else spec.ranks * ALIGN_BYTES
        raise TwinError(
            f"twin --size: Expected: at least {least} bytes for {spec.workload} on "
            f"{spec.ranks} ranks (nccl-tests' float elements, 16-byte pieces per rank) "
            f"Actual: {spec.size_bytes}"
        )


# ------------------------------------------------------------------ ECMP collisions


def switch_load(
    network: TwinNetwork, demand: dict[str, tuple[float, int, list[str]]]
) -> dict[str, tuple[float, float]]:
    """Per switch: the job's demand on all its links to switches together / their total
    speed, out of it and into it (above 1: oversubscribed by the job however it hashes)."""
    out: dict[str, float] = {}
    into: dict[str, float] = {}
    for link, (load, _, _) in demand.items():
        switch, _, name = link.partition(":")
        port = next(p for p in network.switches[switch].ports if p.name == name)
        out[switch] = out.get(switch, 0.0) + load * port.speed_bps
        into[port.peer_device] = into.get(port.peer_device, 0.0) + load * port.speed_bps
    result: dict[str, tuple[float, float]] = {}
    for switch in set(out) | set(into):
        fabric = [p.speed_bps for p in network.switches[switch].ports
                  if p.peer_device in network.switches]  # fmt: skip
        capacity = sum(fabric) or 1
        result[switch] = (out.get(switch, 0.0) / capacity, into.get(switch, 0.0) / capacity)
    return result


def _oversubscribed(network: TwinNetwork, link: str, load: dict[str, tuple[float, float]]) -> bool:
    switch, _, name = link.partition(":")
    peer = next(p for p in network.switches[switch].ports if p.name == name).peer_device
    return load[switch][0] > 1 + 1e-9 or load[peer][1] > 1 + 1e-9


def link_demand(
    network: TwinNetwork,
    connections: list[Connection],
    flows: list[FlowSpec],
    at_once: int | dict[str, int] | None = None,
) -> dict[str, tuple[float, int, list[str]]]:
    """Per switch-to-switch link the job's flows cross: (demand / speed, QPs, connections).

    A connection's demand is its sender's line rate shared among the connections that sender
    runs at once (1 in a ring, N - 1 in all-to-all); each QP asks for that over the number of
    QPs a connection keeps busy at once, ``at_once`` (default Q: the split, or many messages
    in flight; NCCL's turn-taking with one message in flight keeps one QP busy at a time, and
    that QP then asks for the whole rate wherever it hashes); per connection name when the
    jobs of a run differ (a connection not named: Q).
    """
    out_degree: dict[str, int] = {}
    for conn in connections:
        out_degree[conn.src_host] = out_degree.get(conn.src_host, 0) + 1
    demand: dict[str, float] = {}
    qps: dict[str, int] = {}
    names: dict[str, list[str]] = {}
    speed: dict[str, int] = {}
    for conn in connections:
        rate = network.hosts[conn.src_host].port.speed_bps / out_degree[conn.src_host]
        limit = at_once.get(conn.name) if isinstance(at_once, dict) else at_once
        busy = min(len(conn.flows), limit or len(conn.flows))
        mine: dict[str, int] = {}  # this connection's QPs per link
        for index in conn.flows:
            spec = flows[index]
            for switch, port_index in network.path(spec.src, spec.dst, spec.hash_value()):
                port = network.switches[switch].ports[port_index]
                if port.peer_device not in network.switches:
                    continue  # a host's port: what the schedule sends there, not ECMP's choice
                link = f"{switch}:{port.name}"
                mine[link] = mine.get(link, 0) + 1
                speed[link] = port.speed_bps
        for link, count in mine.items():
            # At most ``busy`` of its QPs send at once, each at rate / busy.
            demand[link] = demand.get(link, 0.0) + rate * min(count, busy) / busy
            qps[link] = qps.get(link, 0) + count
            names.setdefault(link, []).append(conn.name)
    return {link: (demand[link] / speed[link], qps[link], names[link]) for link in demand}


def find_collisions(
    network: TwinNetwork,
    connections: list[Connection],
    flows: list[FlowSpec],
    at_once: int | dict[str, int] | None = None,
) -> list[Collision]:
    """The job's ECMP collisions (:class:`Collision`), the most loaded first (``at_once``: as
    :func:`link_demand`)."""
    demand = link_demand(network, connections, flows, at_once)
    # Oversubscription is a matter of the bytes over the run: each QP's share, not its burst.
    over = switch_load(network, link_demand(network, connections, flows))
    found = [
        Collision(link, tuple(names), count, load, _oversubscribed(network, link, over))
        for link, (load, count, names) in demand.items()
        if len(names) > 1 and load > 1 + 1e-9
    ]
    return sorted(found, key=lambda c: (-c.load, c.link))


# ------------------------------------------------------------------ the job's messages

P2P_CHUNK_BYTES = 1 << 17  # NCCL src/init.cc NCCL_P2P_NET_CHUNKSIZE: all-to-all's messages


@dataclass(frozen=True)
class Slice:
    """One network message of a connection: ``key`` = (loop, step, slice), ``after`` = the
    upstream connection's slice it needs first (None: the rank's own data), ``last`` = the
    receiver keeps it (its buffer is free on arrival)."""

    key: tuple[int, int, int]
    nbytes: int
    after: tuple[int, int] | None  # (upstream connection, its slice sequence number)
    last: bool
    # More upstream slices it needs (a tree node reduces its children's data before it sends
    # up; the root before it sends down); () in rings and point-to-point.
    also: tuple[tuple[int, int], ...] = ()

    @property
    def needs(self) -> tuple[tuple[int, int], ...]:
        """Every upstream slice it waits for."""
        return self.also if self.after is None else (self.after, *self.also)


def ring_slices(
    workload: CollectiveName, ranks: int, size_bytes: int, channels: int = 1
) -> list[list[Slice]]:
    """Per ring connection (channel k, rank r -> r + 1: index k x N + r), its slices in the
    order it posts them; each of the ``channels`` rings carries its share of the buffer."""
    last_step = ring_steps(workload, ranks) - 1
    out: list[list[Slice]] = []
    for part in channel_parts(workload, ranks, size_bytes, channels):
        sends = ring_sends(workload, ranks, part, range(ranks))
        out += _hop_slices(sends, 1, last_step, len(out))
    return out


def _hop_slices(
    sends: list[list[tuple[int, int, int]]],
    lag: int,
    last_step: int | None,
    first: int,
) -> list[list[Slice]]:
    """The slices of the network hops out of a ring's senders (:func:`ring_sends`, in ring
    order): hop i sends what sender i sends, step k waiting for step k - ``lag`` of hop i - 1
    (connection ``first`` + i - 1); a slice is kept at the last step (or, with ``last_step``
    None, always taken on arrival)."""
    keys = [
        [(lp, k, j, n) for lp, k, nbytes in hop for j, n in enumerate(slice_sizes(nbytes))]
        for hop in sends
    ]
    seq = [{(lp, k, j): n for n, (lp, k, j, _) in enumerate(conn)} for conn in keys]
    out: list[list[Slice]] = []
    for i in range(len(sends)):
        up = (i - 1) % len(sends)
        out.append(
            [
                Slice(
                    (lp, k, j),
                    nbytes,
                    (first + up, seq[up][(lp, k - lag, j)]) if k >= lag else None,
                    last_step is None or k == last_step,
                )
                for lp, k, j, nbytes in keys[i]
            ]
        )
    return out


def channel_parts(
    workload: CollectiveName, ranks: int, size_bytes: int, channels: int
) -> list[int]:
    """The buffer's share of each channel: 16-byte pieces of the whole buffer (all-reduce) or
    of each rank's piece (the others), the first channels taking one more."""
    pieces = size_bytes if workload == "allreduce" else size_bytes // ranks
    units, rest = divmod(pieces // ALIGN_BYTES, channels)
    parts = [(units + (c < rest)) * ALIGN_BYTES for c in range(channels)]
    parts[-1] += pieces - sum(parts)
    return parts if workload == "allreduce" else [part * ranks for part in parts]


def rail_ring_slices(  # noqa: PLR0913 -- the sample is keyword-only, for tune's screening
    workload: CollectiveName,
    hosts: int,
    rails: int,
    size_bytes: int,
    channels: int = 1,
    *,
    sample_rails: int = 0,
) -> list[list[Slice]]:
    """Per network connection of the rail rings (:func:`connection_pairs` order: channel k,
    rail c, host h -> h + 1), its slices.  Channel k x G + c is one ring over all N x G ranks
    with its share of the buffer; only the hop from a host's last GPU of the ring to the next
    host's first leaves the host, on NIC c.  What that hop sends at step k left the previous
    host G steps before (the G - 1 NVLink hops in between are not modelled: instantaneous), so
    it waits for step k - G of the previous host's connection; the NVLink stage takes each
    slice on arrival.  With ``sample_rails`` k, the connections of rails k and above get no
    slices (and cost nothing to build)."""
    ranks = hosts * rails
    out: list[list[Slice]] = []
    exits = [h * rails + rails - 1 for h in range(hosts)]  # each host's last GPU in the ring
    for index, part in enumerate(channel_parts(workload, ranks, size_bytes, rails * channels)):
        if sample_rails and index % rails >= sample_rails:
            out += [[] for _ in exits]
            continue
        out += _hop_slices(ring_sends(workload, ranks, part, exits), rails, None, len(out))
    return out


TREE_WINDOW = NCCL_STEPS  # tree, Simple: one step per message, the connection's 8 buffers


def tree_slices(
    hosts: int,
    rails: int,
    size_bytes: int,
    channels: int = 1,
    *,
    sample_rails: int = 0,
) -> list[list[Slice]]:
    """Per connection of a tree all-reduce (:func:`tree_pairs` order), its slices.  NCCL
    splits the buffer over its channels, tree 0's and as many for tree 1
    (src/graph/connect.cc ``connectTrees``), and moves each channel's part in chunks of one
    step, :data:`STEP_BYTES` (src/enqueue.cc: Simple on a tree has one step per chunk and
    slice), pipelined up and down the tree at once (``runTreeSplit``,
    src/device/all_reduce.h): a node sends chunk j to its parent once it has chunk j from
    each child (their sum with its own data); the root sends chunk j down once it has it from
    each child; a node forwards chunk j down once it has it from its parent; a leaf keeps it.
    A received chunk's buffer is free once the first send that needs it is posted (as in the
    rings), so a node with two children frees it one send early."""
    parts = channel_parts("allreduce", hosts * rails, size_bytes, rails * channels * 2)
    trees = tree_edges(hosts)
    out: list[list[Slice]] = []
    for index, part in enumerate(parts):
        edges = trees[index % 2]
        if sample_rails and index // 2 % rails >= sample_rails:
            out += [[] for _ in range(2 * len(edges))]
            continue
        out += _tree_hop_slices(edges, slice_sizes(part, STEP_BYTES), len(out))
    return out


def _tree_hop_slices(
    edges: list[tuple[int, int]], chunks: list[int], first: int
) -> list[list[Slice]]:
    """One tree's connections (its edges up, then down, from connection ``first``)."""
    up_of = {child: e for e, (child, _) in enumerate(edges)}  # a node's connection to its parent
    from_children: dict[int, list[int]] = {}
    for e, (_, parent) in enumerate(edges):
        from_children.setdefault(parent, []).append(first + e)
    down = len(edges)

    def waiting(needs: list[tuple[int, int]], nbytes: int, j: int, last: bool) -> Slice:
        head = needs[0] if needs else None
        return Slice((0, 0, j), nbytes, head, last, tuple(needs[1:]))

    out = []
    for child, _ in edges:  # up: the sum of the node's subtree
        kids = from_children.get(child, [])
        out.append([waiting([(k, j) for k in kids], n, j, False) for j, n in enumerate(chunks)])
    for child, parent in edges:  # down: the whole sum
        leaf = child not in from_children
        # From the parent's own down connection; the root from its children's sums.
        feed = [first + down + up_of[parent]] if parent in up_of else from_children[parent]
        out.append([waiting([(f, j) for f in feed], n, j, leaf) for j, n in enumerate(chunks)])
    return out


def pxn_alltoall_slices(hosts: int, rails: int, size_bytes: int) -> list[list[Slice]]:
    """Per PXN connection (rail c, host h -> host k): the data of host h's G GPUs for GPU c of
    host k, size / N each, in P2P chunks, no dependencies."""
    per_pair = size_bytes // (hosts * rails)
    pieces = slice_sizes(per_pair * rails, P2P_CHUNK_BYTES)
    conn = [Slice((0, 0, j), n, None, True) for j, n in enumerate(pieces)]
    return [list(conn) for _ in range(rails * hosts * (hosts - 1))]


def sendrecv_slices(pairs: int, size_bytes: int) -> list[list[Slice]]:
    """Per connection (GPU c of host h -> GPU c of the next host): the whole buffer in P2P
    chunks, no dependencies (nccl-tests' sendrecv: ``ncclSend`` to one peer, ``ncclRecv``
    from the other, in one group)."""
    pieces = slice_sizes(size_bytes, P2P_CHUNK_BYTES)
    conn = [Slice((0, 0, j), n, None, True) for j, n in enumerate(pieces)]
    return [list(conn) for _ in range(pairs)]


def alltoall_slices(ranks: int, size_bytes: int, pairs: int | None = None) -> list[list[Slice]]:
    """Per ordered pair over the network (:func:`connection_pairs` order; ``pairs`` of them,
    default every pair of ranks): size / N in P2P chunks, no dependencies."""
    per_pair = size_bytes // ranks
    pieces = slice_sizes(per_pair, P2P_CHUNK_BYTES)
    conn = [Slice((0, 0, j), n, None, True) for j, n in enumerate(pieces)]
    return [list(conn) for _ in range(ranks * (ranks - 1) if pairs is None else pairs)]


class _Connection:
    """The run-time state of one connection's FIFO."""

    __slots__ = (
        "consumed", "done_tick", "flows", "index", "next_post", "next_rx", "parts", "slices",
    )  # fmt: skip

    def __init__(self, index: int, slices: list[Slice], flows: tuple[int, ...]) -> None:
        self.index = index
        self.slices = slices
        self.flows = flows
        self.next_post = 0  # the next slice to post (NCCL posts in order)
        self.next_rx = 0  # slices below it are received in order
        self.parts = [0] * len(slices)  # parts of each slice still in flight
        self.consumed = [False] * len(slices)
        self.done_tick: int | None = None  # the tick its last slice arrived


class CollectiveJob:
    """Posts the job's slices on the engine as their dependencies and windows allow, and
    records when the last byte arrives (the engine's ``on_message`` drives it)."""

    def __init__(
        self,
        slices: list[list[Slice]],
        connections: list[Connection],
        *,
        window: int,
        split_data_on_qps: bool,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        self.on_done = on_done  # default: the run ends with this job
        self.conns = [
            _Connection(c.index, s, c.flows) for c, s in zip(connections, slices, strict=True)
        ]
        self.window = window
        self.split = split_data_on_qps
        self.total_bytes = sum(s.nbytes for conn in slices for s in conn)
        self.received_bytes = 0
        self.pending = sum(1 for c in self.conns if c.slices)
        self.done_tick: int | None = None
        self.messages = 0
        # The connections whose slices wait for this one's (the next rank's in the ring).
        self.downstream: dict[int, set[int]] = {}
        for conn in self.conns:
            for item in conn.slices:
                if item.after is not None:
                    self.downstream.setdefault(item.after[0], set()).add(conn.index)
                for upstream, _ in item.also:
                    self.downstream.setdefault(upstream, set()).add(conn.index)
        self._engine: Any = None

    def start(self, engine: Engine) -> None:
        """Post what needs nothing (before the run)."""
        self._engine = engine
        self._pump(range(len(self.conns)))

    def _ready(self, conn: _Connection, t: int) -> bool:
        item = conn.slices[t]
        after = item.after
        if after is not None and self.conns[after[0]].next_rx <= after[1]:
            return False
        if item.also and any(self.conns[c].next_rx <= n for c, n in item.also):
            return False
        return t < self.window or conn.consumed[t - self.window]

    def _pump(self, todo: Iterable[int]) -> None:
        work = list(todo)
        while work:
            conn = self.conns[work.pop()]
            while conn.next_post < len(conn.slices) and self._ready(conn, conn.next_post):
                t = conn.next_post
                conn.next_post += 1
                self._post(conn, t)
                item = conn.slices[t]
                if item.after is not None:
                    # Forwarding it frees the upstream slice's buffer at this rank.
                    self.conns[item.after[0]].consumed[item.after[1]] = True
                    work.append(item.after[0])
                for upstream, number in item.also:
                    self.conns[upstream].consumed[number] = True
                    work.append(upstream)

    def _post(self, conn: _Connection, t: int) -> None:
        nbytes = conn.slices[t].nbytes
        qps = len(conn.flows)
        if self.split and qps > 1:
            parts = qp_parts(nbytes, qps)
            conn.parts[t] = len(parts)
            for qp, part in enumerate(parts):
                self._engine.post(conn.flows[qp], part, (conn.index, t))
        else:
            # NCCL_IB_SPLIT_DATA_ON_QPS=0: the whole message on the next QP in turn.
            conn.parts[t] = 1
            self._engine.post(conn.flows[t % qps], nbytes, (conn.index, t))
        self.messages += conn.parts[t]

    def on_message(self, engine: Engine, flow: Flow, tag: object, tick: int) -> None:
        """A part arrived in order on its QP: the slice is in when all its parts are, and the
        receiver takes slices in order."""
        assert isinstance(tag, tuple)
        index: int = tag[0]
        t: int = tag[1]
        conn = self.conns[index]
        conn.parts[t] -= 1
        if conn.parts[t]:
            return
        before = conn.next_rx
        while (
            conn.next_rx < len(conn.slices)
            and conn.parts[conn.next_rx] == 0
            and (conn.next_rx < conn.next_post)
        ):
            item = conn.slices[conn.next_rx]
            self.received_bytes += item.nbytes
            if item.last:
                conn.consumed[conn.next_rx] = True
            conn.next_rx += 1
        if conn.next_rx == before:
            return
        if conn.next_rx == len(conn.slices):
            conn.done_tick = tick
            self.pending -= 1
            if not self.pending:
                self.done_tick = tick
                if self.on_done is None:
                    engine.finish()
                else:
                    self.on_done()
                return
        self._pump([index, *self.downstream.get(index, ())])

    @property
    def done_fraction(self) -> float:
        return self.received_bytes / self.total_bytes if self.total_bytes else 1.0


# ------------------------------------------------------------------ the run and its report


def messages_in_flight(slices: list[list[Slice]], window: int) -> int:
    """How many messages a connection has in flight at once, at most: the slices of one step
    of a loop (a ring's step waits for the previous one's), or every message of an all-to-all
    pair; never more than the window.  With each message whole on one QP, that bounds the QPs
    busy at once."""
    per_step: dict[tuple[int, int, int], int] = {}
    for index, conn in enumerate(slices):
        for item in conn:
            key = (index, item.key[0], item.key[1])
            per_step[key] = per_step.get(key, 0) + 1
    return max(1, min(window, max(per_step.values(), default=1)))


def busbw_bound_Bps(
    workload: CollectiveName,
    ranks: int,
    speed_bps: int,
    rails: int = 1,
    algorithm: AlgorithmName = "ring",
) -> float:
    """The busbw the NICs' line rate allows (payload headers aside). A ring's channels run on
    all ``rails`` NICs of a host at once: G x the NIC's rate. All-to-all sends (N - G) / N of
    each rank's buffer over its GPU's own NIC (the rest over NVLink): busbw = algbw (N - 1) / N
    is at most the NIC's rate x (N - 1) / (N - G) -- the NIC's rate on one-NIC hosts.  A tree
    all-reduce: :func:`tree_busbw_bound_Bps`."""
    rate = speed_bps / 8
    if algorithm == "tree":
        return tree_busbw_bound_Bps(ranks, speed_bps, rails)
    if workload == "alltoall":
        return rate * (ranks - 1) / (ranks - rails)
    if workload == "sendrecv":  # each GPU's buffer over its own NIC: busbw = algbw
        return rate
    return rate * rails


def tree_busbw_bound_Bps(ranks: int, speed_bps: int, rails: int = 1) -> float:
    """A tree all-reduce's busbw at the NICs' line rate.  Each tree carries S / 2 (per rail
    S / 2G), up and down each of its edges once, so a host's NIC c sends and receives
    S / 2G x its degree in that tree; the busiest host, degree D over both trees, needs
    S D / (2 G x rate): busbw = algbw x 2(N - 1)/N <= 4 G rate (N - 1) / (D N).  That is the
    ring's G x rate x (N - 1)/N where D = 4 (every host inside one tree, a leaf in the other),
    and above the ring's on few hosts (2 hosts: D = 2), where the hosts' own GPUs reduce over
    NVLink what a ring would send over the network."""
    hosts = ranks // rails
    degree = _busiest_tree_degree(hosts)
    return speed_bps / 8 * 4 * rails * (ranks - 1) / (degree * ranks)


@functools.lru_cache(maxsize=64)
def _busiest_tree_degree(hosts: int) -> int:
    """The most edges one host has in NCCL's two trees together."""
    degree = [0] * hosts
    for edges in tree_edges(hosts):
        for child, parent in edges:
            degree[child] += 1
            degree[parent] += 1
    return max(degree)


def ideal_time_s(  # noqa: PLR0913 -- the spec's fields the bound follows from
    workload: CollectiveName,
    ranks: int,
    size_bytes: int,
    speed_bps: int,
    rails: int = 1,
    algorithm: AlgorithmName = "ring",
) -> float:
    """The bus-bandwidth bound: the time at the NICs' line rate (payload only)."""
    bound = busbw_bound_Bps(workload, ranks, speed_bps, rails, algorithm)
    return size_bytes * busbw_factor(workload, ranks) / bound


class CollectiveOptions(RunOptions, total=False):
    """:func:`run_collective`'s keywords beside the run's own (seed, DCQCN override, loss
    recovery): ``max_duration_s``, the simulated time allowed (default: 20 x the line-rate
    time + 2 ms, at most :data:`agent.twin.results.MAX_DURATION_S`; a collective still running
    then is reported ``completed=False``), and ``on_progress(done_fraction, simulated_s)``,
    called at every sample."""

    max_duration_s: float | None
    on_progress: Callable[[float, float], None] | None


@dataclass(frozen=True)
class _Placed:
    """A collective placed on the fabric: the spec (its ranks counted), its ranks' endpoints,
    their speed, the NICs per host and the size nccl-tests counts."""

    spec: CollectiveSpec
    hosts: list[str]
    speed: int
    size: int
    rails: int = 1
    name: str = ""  # the job's, in a run of several
    chose: str = ""  # why the algorithm, when NCCL's model picked it (--algorithm auto)


def run_collective(
    network: TwinNetwork, spec: CollectiveSpec, **options: Unpack[CollectiveOptions]
) -> CollectiveReport:
    """Run one collective on the network (module docstring) and report it
    (:class:`CollectiveOptions`: what may be asked)."""
    return run_collectives(network, [spec], **options)[0]


def run_collectives(
    network: TwinNetwork,
    specs: list[CollectiveSpec],
    names: list[str] | None = None,
    **options: Unpack[CollectiveOptions],
) -> list[CollectiveReport]:
    """Run several jobs side by side in one run, each on its own GPUs (no NIC in two jobs),
    all starting at once, and report each (``names``: the jobs' names in the reports).  The
    run ends when the last job does; a job's time is its own last byte."""
    labels = names or [""] * len(specs)
    placed = [_place(network, spec, name) for spec, name in zip(specs, labels, strict=True)]
    _check_disjoint(placed)
    limit = _limit(placed, options.pop("max_duration_s", None))
    on_progress = options.pop("on_progress", None)
    run: RunOptions = options  # what is left: the run's own options, passed on
    jobs = _Jobs(placed)
    engine = Engine(
        network,
        jobs.flows,
        on_message=jobs.jobs[0].on_message if len(jobs.jobs) == 1 else jobs.on_message,
        on_sample=None
        if on_progress is None
        else lambda _engine, now: on_progress(jobs.done_fraction, now),
        **run,
    )
    jobs.start(engine)
    started = time.perf_counter()
    engine.run(limit)
    wall = time.perf_counter() - started
    collisions = find_collisions(network, jobs.connections, jobs.flows, jobs.busy)
    if engine.settings.paths != "flow":
        # Sprayed frames do not follow the flow hash: only a link the job oversubscribes
        # whatever the paths is still a finding.
        collisions = [c for c in collisions if c.oversubscribed]
    reports = [
        _report(engine, job, one, _own(collisions, conns), wall)
        for job, one, conns in zip(jobs.jobs, placed, jobs.per_job, strict=True)
    ]
    if len(reports) == 1:
        return reports
    shared = (
        f"{len(reports)} jobs side by side: drops, PFC frames, pauses, the links and the "
        "events are the fabric's over the whole run, shared by every job; time, busbw, CE, "
        "CNPs, retransmissions, Jain and the collisions are this job's"
    )
    return [replace(r, notes=[shared, *r.notes]) for r in reports]


def _limit(placed: list[_Placed], limit: float | None) -> float:
    """The simulated time allowed: given, else 20 x the slowest job's line-rate time + 2 ms."""
    if limit is None:
        ideal = max(
            ideal_time_s(p.spec.workload, p.spec.ranks, p.size, p.speed, p.rails, p.spec.algorithm)
            for p in placed
        )
        limit = min(MAX_DURATION_S, 20 * ideal + 2e-3)
    if not (math.isfinite(limit) and 0 < limit <= MAX_DURATION_S):
        raise TwinError(
            f"twin --duration: Expected: more than 0 and at most {MAX_DURATION_S:g} s "
            f"Actual: {limit!r}"
        )
    return limit


def _check_disjoint(placed: list[_Placed]) -> None:
    """A GPU (its NIC) runs one job: two jobs on one NIC is bad input."""
    owner: dict[str, str] = {}
    for index, one in enumerate(placed):
        job = one.name or f"job {index + 1}"
        shared = [e for e in one.hosts if e in owner]
        if shared:
            raise TwinError(
                f"twin jobs: {job}: Expected: GPU NICs no other job uses Actual: "
                f"{', '.join(shared[:4])}{' ...' if len(shared) > 4 else ''} of {owner[shared[0]]}"
            )
        owner.update(dict.fromkeys(one.hosts, job))


def _own(collisions: list[Collision], connections: list[Connection]) -> list[Collision]:
    """The collisions one of ``connections`` is in (with any job's)."""
    mine = {c.name for c in connections}
    return [c for c in collisions if mine.intersection(c.connections)]


class _Jobs:
    """The jobs of one run: their flows in one list, and the job each flow belongs to, so a
    message reaches its job."""

    def __init__(self, placed: list[_Placed]) -> None:
        self.flows: list[FlowSpec] = []
        self.connections: list[Connection] = []
        self.per_job: list[list[Connection]] = []
        self.jobs: list[CollectiveJob] = []
        self.owner: list[CollectiveJob] = []
        self.busy: dict[str, int] = {}
        self.left = len(placed)
        for one in placed:
            spec = one.spec
            pairs = connection_pairs(
                spec.workload, len(one.hosts), one.rails, spec.pxn, spec.channels,
                spec.algorithm,
            )  # fmt: skip
            slices, window = _slices(one)
            numbers = list(range(len(pairs)))  # each connection's QP numbers (its ports)
            if spec.sample_rails:
                numbers, slices = _sampled(slices, pairs, one.rails, spec.sample_rails)
                pairs = [pairs[n] for n in numbers]
            conns, flows = build_flows(
                one.hosts,
                spec.workload,
                spec.qps_per_connection,
                pairs=pairs,
                first_flow=len(self.flows),
                numbers=numbers,
            )
            job = CollectiveJob(
                slices,
                conns,
                window=window,
                split_data_on_qps=spec.split_data_on_qps,
                on_done=self._done if len(placed) > 1 else None,
            )
            if not spec.split_data_on_qps:
                busy = messages_in_flight(slices, window)
                self.busy.update((c.name, busy) for c in conns)
            self.flows += flows
            self.connections += conns
            self.per_job.append(conns)
            self.jobs.append(job)
            self.owner += [job] * len(flows)
        self._engine: Engine | None = None

    def start(self, engine: Engine) -> None:
        self._engine = engine
        for job in self.jobs:
            job.start(engine)

    def on_message(self, engine: Engine, flow: Flow, tag: object, tick: int) -> None:
        self.owner[flow.index].on_message(engine, flow, tag, tick)

    def _done(self) -> None:
        self.left -= 1
        if not self.left and self._engine is not None:
            self._engine.finish()

    @property
    def done_fraction(self) -> float:
        total = sum(job.total_bytes for job in self.jobs)
        return sum(job.received_bytes for job in self.jobs) / total if total else 1.0


def _sampled(
    slices: list[list[Slice]], pairs: list[tuple[int, int]], rails: int, sample: int
) -> tuple[list[int], list[list[Slice]]]:
    """The connections of rails below ``sample`` (their numbers in the whole job) and their
    slices, renumbered among themselves: a ring depends only on its own rail's connections, so
    theirs are whole; the other rails' connections are left out (no flow, no switch)."""
    numbers = [
        n for n, pair in enumerate(pairs)
        if (rail := connection_rail(pair, rails)) is not None and rail < sample
    ]  # fmt: skip
    position = {n: i for i, n in enumerate(numbers)}

    def moved(s: Slice) -> Slice:
        if s.after is None and not s.also:
            return s
        after = None if s.after is None else (position[s.after[0]], s.after[1])
        return replace(s, after=after, also=tuple((position[c], n) for c, n in s.also))

    return numbers, [[moved(s) for s in slices[n]] for n in numbers]


def check_placement(network: TwinNetwork, spec: CollectiveSpec) -> None:
    """What :func:`run_collective` refuses before it runs ``spec`` (the option named in a
    :class:`TwinError`): its ranks, size, QPs and channels, and where its ranks go."""
    _place(network, spec)


def _place(network: TwinNetwork, spec: CollectiveSpec, name: str = "") -> _Placed:
    """``spec`` checked and placed; without ranks, every GPU NIC of the fabric."""
    check_spec(spec)
    placement = place_ranks(network, spec)
    spec = replace(spec, ranks=len(placement.endpoints))
    check_spec(spec)
    crossing = spec.workload == "alltoall" and not spec.pxn and placement.rails > 1
    if spec.sample_rails and (crossing or not 0 < spec.sample_rails <= placement.rails):
        raise TwinError(
            f"twin: sample_rails: Expected: 1 to the job's {placement.rails} rail(s), on a job "
            f"whose connections stay on their rail Actual: {spec.sample_rails}"
            + (" (an all-to-all without PXN crosses rails)" if crossing else "")
        )
    spec, chose = resolve_algorithm(spec, placement)
    size = nccl_tests_size(spec.workload, spec.ranks, spec.size_bytes)
    return _Placed(
        spec, placement.endpoints, placement.speed_bps, size, placement.rails, name, chose
    )


def _slices(placed: _Placed) -> tuple[list[list[Slice]], int]:
    """The job's slices per connection and the window of slices in flight."""
    workload, ranks, rails = placed.spec.workload, placed.spec.ranks, placed.rails
    hosts = ranks // rails
    if workload == "alltoall":
        if rails > 1 and placed.spec.pxn:
            return pxn_alltoall_slices(hosts, rails, placed.size), NCCL_STEPS
        pairs = ranks * (ranks - 1) if rails == 1 else ranks * (ranks - rails)
        return alltoall_slices(ranks, placed.size, pairs), NCCL_STEPS
    if workload == "sendrecv":
        return sendrecv_slices(ranks, placed.size), NCCL_STEPS
    channels, sample = placed.spec.channels, placed.spec.sample_rails
    if placed.spec.algorithm == "tree":
        slices = tree_slices(hosts, rails, placed.size, channels, sample_rails=sample)
        return slices, TREE_WINDOW
    if rails > 1:
        slices = rail_ring_slices(
            workload, hosts, rails, placed.size, channels, sample_rails=sample
        )
        return slices, WINDOW_SLICES
    return ring_slices(workload, ranks, placed.size, channels), WINDOW_SLICES


def _links(ports: list[PortReport]) -> list[LinkLoad]:
    ordered = sorted(ports, key=lambda p: (-p.utilisation, -p.queue_p99_bytes, p.port))
    return [
        LinkLoad(
            p.port,
            p.speed_bps,
            p.utilisation,
            p.queue_p99_bytes,
            p.queue_peak_bytes,
            p.paused_fraction,
            p.ecn_marked,
        )
        for p in ordered
    ]


def _connection_jain(engine: Engine, job: CollectiveJob, end: int) -> float | None:
    rates = []
    for conn in job.conns:
        delivered = sum(engine.flows[i].delivered_bytes for i in conn.flows)
        tick = conn.done_tick if conn.done_tick is not None else end
        rates.append(delivered / tick if tick else 0.0)
    return jain(rates)


def _report(
    engine: Engine,
    job: CollectiveJob,
    placed: _Placed,
    collisions: list[Collision],
    wall_s: float,
) -> CollectiveReport:
    spec, speed, size = placed.spec, placed.speed, placed.size
    own = [engine.flows[i] for conn in job.conns for i in conn.flows]
    duration = engine.duration_s
    ports = _active_ports(engine, duration)
    drops = _drops(engine)
    busiest = pick_bottleneck(ports)
    completed = job.done_tick is not None
    time_s = job.done_tick / TICKS_PER_SECOND if job.done_tick is not None else duration
    algbw = size / time_s if completed and time_s > 0 else 0.0
    busbw = algbw * busbw_factor(spec.workload, spec.ranks)
    partial = CollectiveReport(
        fabric=engine.network.name,
        profile=engine.network.profile,
        workload=spec.workload,
        ranks=spec.ranks,
        hosts=placed.hosts,
        speed_bps=speed,
        rails=placed.rails,
        size_bytes=size,
        qps=spec.qps_per_connection,
        split_data_on_qps=spec.split_data_on_qps,
        channels=spec.channels,
        seed=engine.settings.seed,
        time_s=time_s,
        algbw_Bps=algbw,
        busbw_Bps=busbw,
        line_rate_fraction=busbw
        / busbw_bound_Bps(spec.workload, spec.ranks, speed, placed.rails, spec.algorithm),
        completed=completed,
        delivered_fraction=job.done_fraction,
        lossless_drops=drops.lossless,
        lossy_drops=drops.lossy,
        pfc_frames=_pfc_frames(engine, ports),
        ce_fraction=_ce_fraction(own),
        cnps=sum(f.cnps_rx for f in own),
        retx_bytes=sum(f.retx_bytes for f in own),
        timeouts=sum(f.timeouts for f in own),
        max_paused_fraction=_max_paused_fraction(engine, ports),
        busiest_port=busiest.port if busiest else None,
        queue_p99_bytes=busiest.queue_p99_bytes if busiest else 0,
        queue_peak_bytes=busiest.queue_peak_bytes if busiest else 0,
        links=_links(ports),
        collisions=collisions,
        jain=_connection_jain(engine, job, engine.end),
        events=engine.events,
        wall_s=wall_s,
        verdict=Verdict("", ""),
        notes=[placed.chose, *_notes(spec, job, placed.rails)]
        if placed.chose
        else _notes(spec, job, placed.rails),
        job=placed.name,
        algorithm=spec.algorithm,
        trim=trim_facts(engine, own),
    )
    return replace(partial, verdict=judge_collective(partial))


def _ce_fraction(flows: list[Flow]) -> float:
    """The share of the flows' received packets that arrived CE-marked."""
    rx_packets = sum(f.rx_packets for f in flows)
    return sum(f.rx_ce for f in flows) / rx_packets if rx_packets else 0.0


def _rail_names(sample: int) -> str:
    return "rail 0" if sample == 1 else f"rails 0-{sample - 1}"


def _notes(spec: CollectiveSpec, job: CollectiveJob, rails: int) -> list[str]:
    notes = [
        f"{len(job.conns)} connections x {spec.qps_per_connection} QP(s), "
        f"{job.messages} messages posted; NCCL_IB_SPLIT_DATA_ON_QPS="
        f"{int(spec.split_data_on_qps)}",
        "not modelled: " + "; ".join(NOT_MODELLED),
    ]
    if rails > 1:
        how = {"alltoall": "PXN all-to-all", "sendrecv": "send/recv ring"}.get(
            spec.workload, "pair of trees" if spec.algorithm == "tree" else "ring"
        )
        notes.insert(
            0,
            f"{spec.ranks // rails} hosts x {rails} NICs: one {how} per rail, NIC c of each host "
            "to NIC c of the others (NCCL_CROSS_NIC=0); the GPUs' NVLink hops inside a host not "
            "modelled (instantaneous)",
        )
    if spec.sample_rails:
        notes.insert(
            0,
            f"a sample: only {_rail_names(spec.sample_rails)} of {rails} ran (whole rings, "
            "the other NICs idle); time and busbw are the sample's",
        )
    if spec.algorithm == "tree":
        notes.insert(
            1,
            f"tree: NCCL's double binary tree between the hosts, {spec.channels * 2} tree "
            f"channel(s) per NIC (half on each tree), chunks of {STEP_BYTES >> 10} KiB, "
            f"{TREE_WINDOW} in flight per connection, reduced up and broadcast down at once "
            "(NCCL Simple protocol); the chain between a host's GPUs not modelled "
            "(instantaneous)",
        )
    elif spec.workload in RING_COLLECTIVES:
        notes.insert(
            1,
            f"ring: chunks of up to {CHUNK_BYTES >> 20} MiB per step, {SLICE_BYTES >> 20} MiB "
            f"slices, {WINDOW_SLICES} slices in flight per connection (NCCL Simple protocol); "
            f"{spec.channels} channel(s) per NIC, each its own ring of connections",
        )
    return notes

"""NCCL's own choice between its ring and its tree for an all-reduce (``--algorithm auto``).

NCCL picks, per call, the algorithm and protocol its cost model predicts fastest:
``time = latency + bytes / (1000 x algbw)`` in microseconds (``ncclTopoGetAlgoTime``,
src/graph/tuning.cc), with each algorithm's bandwidth and latency set once per communicator
(``ncclTopoTuneModel``, same file).  The twin models the Simple protocol only, so ``auto`` is the
algorithm NCCL picks when the protocol is Simple (``NCCL_PROTO=Simple``), between ring and tree
(``NCCL_ALGO=ring,tree``), from that model:

* ring: bus bandwidth ``C x b`` (C channels of b GB/s), algbw ``busbw x N / 2(N - 1)``;
  latency ``8.4 + (2(N - 1) - 2(H - 1)) x max(3.4, 3 x 1.0) + 2(H - 1) x 14`` us (base, the
  NVLink steps at NVLink's latency or three network overheads, the network steps at the
  network's), times 1.4 once every rank's share of a channel is 64 bytes or more (the ring's
  plateau on sm_80 and later);
* tree: bus bandwidth ``min(0.92 x C x b, C x 38.7 | 41.4 | 36.0)`` (the per-channel cap of
  Hopper for 1, 2, more nodes), algbw half of it, times the tree's correction factor for the
  size (``treeCorrectionFactor``, Simple row, sizes below 256 MiB); latency
  ``8.4 + 2((N/H - 1) x 4.0 + log2(H) x 14)`` us.

What the twin cannot know and assumes (a real NCCL detects it, and may pick otherwise): one
channel per NIC at the NIC's line rate for both algorithms (NCCL's topology search may find
other channel counts and speeds; a balanced tree halves its per-channel speed), Hopper's
constants (sm_90), an Intel x86 host (network overhead 1 us), no tuner plugin, no CollNet,
NVLS or PAT, and nodes of more than two hosts' intra-node bandwidth (on 1-2 nodes NCCL uses the
NVLink bandwidth, taken here as the NIC's).  The note in the report gives both times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent.twin.workloads import AlgorithmName

BASE_US = 8.4  # baseLatencies, Simple: tree and ring
NVLINK_RING_US = 3.4  # hwLatencies[NVLINK][RING][SIMPLE]
NVLINK_TREE_US = 4.0  # hwLatencies[NVLINK][TREE][SIMPLE]
NET_US = 14.0  # hwLatencies[NET][RING|TREE][SIMPLE]
NET_OVERHEAD_US = 1.0  # getNetOverhead, Intel x86; x 3 for Simple
RING_PLATEAU = 1.4  # sm_80 and later
TREE_EFFICIENCY = 0.92
TREE_CHANNEL_CAP_GBPS = (38.7, 41.4, 36.0)  # perChMaxTreeBws, Hopper, for 1, 2, more nodes
# treeCorrectionFactor, Simple: by log2(bytes / 64), 64 B to 256 MiB
TREE_CORRECTION = (
    0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
    0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9,
)  # fmt: skip


@dataclass(frozen=True)
class AlgorithmChoice:
    """The algorithm NCCL's model picks and the two times it predicts (us)."""

    algorithm: AlgorithmName
    ring_us: float
    tree_us: float

    def note(self) -> str:
        return (
            f"--algorithm auto: {self.algorithm}, as NCCL's cost model picks with "
            f"NCCL_PROTO=Simple (src/graph/tuning.cc: ring {self.ring_us:,.1f} us, tree "
            f"{self.tree_us:,.1f} us predicted, latency included; the twin does not model "
            "NCCL's latency); assumed: one channel per NIC at its line rate, Hopper's "
            "constants, an Intel host, no CollNet, NVLS or tuner plugin (docs/collectives.md)"
        )


def nccl_choice(
    size_bytes: int, ranks: int, hosts: int, channels: int, speed_bps: int
) -> AlgorithmChoice:
    """NCCL's pick between ring and tree for an all-reduce of ``size_bytes`` on ``ranks``
    ranks over ``hosts`` hosts, ``channels`` channels of one NIC's ``speed_bps`` each."""
    per_channel = speed_bps / 8e9  # GB/s
    ring = _ring_us(size_bytes, ranks, hosts, channels, per_channel)
    tree = _tree_us(size_bytes, ranks, hosts, channels, per_channel)
    return AlgorithmChoice("tree" if tree < ring else "ring", ring, tree)


def _ring_us(size: int, ranks: int, hosts: int, channels: int, per_channel: float) -> float:
    steps = 2 * (ranks - 1)
    inter = 2 * (hosts - 1) if hosts > 1 else 0
    intra_us = max(NVLINK_RING_US, 3 * NET_OVERHEAD_US) if hosts > 1 else NVLINK_RING_US
    latency = BASE_US + (steps - inter) * intra_us + inter * NET_US
    # NCCL doubles its channels after the search (src/graph/connect.cc).
    if hosts > 1 and size // (2 * channels * ranks) >= 64:
        latency *= RING_PLATEAU
    algbw = channels * per_channel * ranks / steps
    return latency + size / (1000 * algbw)


def _tree_us(size: int, ranks: int, hosts: int, channels: int, per_channel: float) -> float:
    cap = TREE_CHANNEL_CAP_GBPS[min(hosts, 3) - 1]
    busbw = min(TREE_EFFICIENCY * channels * per_channel, channels * cap)
    log_size = int(math.log2(size >> 6)) if size >= 64 else -1
    if 0 <= log_size < len(TREE_CORRECTION) - 1:
        busbw *= TREE_CORRECTION[log_size]
    per_host = ranks // hosts
    latency = BASE_US + 2 * ((per_host - 1) * NVLINK_TREE_US + _log2i(hosts) * NET_US)
    return latency + size / (1000 * busbw * 0.5)


def _log2i(n: int) -> int:
    """NCCL's log2i: the floor of log2(n), 0 for n < 2."""
    return max(0, n.bit_length() - 1)

"""WRED with ECN marking, decided from the queue's instantaneous depth: on enqueue (the depth
the arriving frame finds) or, with ``EcnConfig.at_dequeue``, on dequeue (the depth the
departing frame leaves behind).

Where the mark is decided. At enqueue, the mark rides behind everything already queued: the
receiver learns of the queue one queueing delay later. At dequeue, the departing frame carries
it at once. The outside simulators the twin is compared with mark at dequeue: the RDMA ns-3 of
HPCC (alibaba-edu/High-Precision-Congestion-Control,
``simulation/src/point-to-point/model/switch-node.cc``, ``SwitchNode::SwitchNotifyDequeue``:
the egress bytes are released, then ``m_mmu->ShouldSendCN`` decides and the IP header's ECN
field is set to CE) and htsim (Broadcom/csg-htsim ``sim/ecnqueue.h``, ``ECNQueue``: "marks
on dequeue as soon as the packet occupancy exceeds the set threshold").  The shipped profiles
stay at enqueue: the switch vendors' published QoS documents for the NOSes the agent drives
(EOS, SONiC, Cumulus NVUE, NX-OS) do not say where their ASICs decide the mark, and no
command sets it (docs/architecture.md, "Where ECN is marked").

Curve (the vendor semantic of Arista EOS ``random-detect ecn minimum-threshold ..
maximum-threshold .. max-mark-probability ..`` and of SONiC/SAI ``WRED_PROFILE``
``green_min_threshold`` / ``green_max_threshold`` / ``green_drop_probability`` with
``ecn: ecn_all``, SAI ``SAI_WRED_ATTR_GREEN_{MIN,MAX}_THRESHOLD`` /
``..._DROP_PROBABILITY``, with ``weight 0``, i.e. no averaging; the same shape as Extreme
Networks' ``random-detect queue-parms``: "The drop probability increases linearly from 0 just
before the minimum threshold, to this value at the maximum threshold, then goes to 100% for
larger queue depths"; and the DCQCN congestion point, Zhu et al. SIGCOMM 2015 section 3.1 /
NVIDIA "DCQCN CC Algorithm": Kmin, Kmax, Pmax):

* depth <  min_bytes             -> pass unmarked
* min_bytes <= depth < max_bytes -> mark CE with probability
  ``max_probability * (depth - min) / (max - min)``
* depth >= max_bytes             -> mark every ECN-capable packet

Non-ECT packets (ECN field 00) in the marking region: only ECN marking is configured here,
there is no WRED *drop* profile, so they are enqueued normally and are subject only to the
queue's tail-drop limit / PFC like any other packet.  That is what the ASICs do when ECN is
enabled without WRED drop: Mellanox Spectrum's CWTPM has separate "ee" (ECN enable) and "ew"
(WRED enable) bits, and with "ew" off non-ECT traffic "should not be early-dropped, but
enqueued normally instead" (Linux commit 8040c96b4fc6 "mlxsw: spectrum_qdisc: Offload RED ECN
nodrop mode", the ``tc red ... ecn nodrop`` semantics); in SONiC/SAI terms that is a
WRED_PROFILE with ``ecn: ecn_all`` but ``wred_green_enable: false`` -- the early *drop* of
non-ECT packets only happens when ``wred_green_enable`` is true (sonic-mgmt WRED/ECN
statistics test plan, case "WRED=1 ECN=1 CODE POINT=00"; sonic-buildimage#27606).  EOS
likewise configures drop (``random-detect drop ...``) separately from ``random-detect ecn``.
Packets already CE are forwarded unchanged and not counted as marked by this queue (the
caller checks ECT before asking).
"""

from __future__ import annotations

import random

from lossless.config import EcnConfig


class EcnMarker:
    """Marking decision of one egress queue."""

    __slots__ = ("_max_probability", "_min_bytes", "_random", "_span", "at_dequeue", "max_bytes")

    def __init__(self, config: EcnConfig, rng: random.Random | None = None) -> None:
        self._min_bytes = config.min_bytes
        self.max_bytes = config.max_bytes
        self._span = config.max_bytes - config.min_bytes
        self._max_probability = config.max_probability / 100.0
        self._random = (rng or random.Random()).random
        self.at_dequeue = config.at_dequeue

    def probability(self, depth_bytes: int) -> float:
        """Marking probability of an ECN-capable packet arriving at ``depth_bytes``."""
        if depth_bytes < self._min_bytes:
            return 0.0
        if depth_bytes >= self.max_bytes:
            return 1.0
        return self._max_probability * (depth_bytes - self._min_bytes) / self._span

    def should_mark(self, depth_bytes: int) -> bool:
        """Random draw against :meth:`probability` (caller checks the packet is ECT)."""
        if depth_bytes < self._min_bytes:
            return False
        if depth_bytes >= self.max_bytes:
            return True
        return self._random() < self.probability(depth_bytes)

"""Frames in the twin: a RoCE data frame or a control packet in flight, and its time on a wire.

Sizes are Ethernet frames, FCS included; a frame occupies a wire for its bytes plus preamble,
SFD and inter-frame gap (:data:`WIRE_OVERHEAD_BYTES`), rounded up to the next tick
(:func:`wire_ticks`): a port never sends faster than its speed.  Compiled with the engine
(:mod:`lossless.compiled`).
"""

from __future__ import annotations

import math
from typing import Final

from agent.twin.flows import Flow
from agent.twin.network import PortSpec
from lossless.clock import TICKS_PER_SECOND, ticks_up

WIRE_OVERHEAD_BYTES: Final = 20  # preamble 7 + SFD 1 + inter-frame gap 12 (IEEE 802.3 4.4.2)
PFC_FRAME_BYTES: Final = 64  # a PFC frame is a minimum-size MAC control frame (802.1Qbb 36.1.3)
CNP_BYTES: Final = (
    78  # RoCEv2 CNP: Eth 14 + IPv4 20 + UDP 8 + BTH 12 + 16 reserved + ICRC 4 + FCS 4
)
MIN_FRAME_BYTES: Final = 64  # the shortest Ethernet frame, FCS included (IEEE 802.3 clause 4.4.2)
ACK_BYTES: Final = (
    66  # RoCEv2 ACK or NAK: Eth 14 + IPv4 20 + UDP 8 + BTH 12 + AETH 4 + ICRC 4 + FCS 4
)
# Kinds of control packets (Control.kind).
CNP: Final = 0
ACK: Final = 1
NAK: Final = 2
# A selective NAK answering a trimmed frame: also a congestion signal to the sender's rate
# (UEC's NSCC takes a trim as one; the twin's DCQCN reaction point cuts as for a CNP).
NAK_TRIM: Final = 3


def wire_ticks(length: int, speed_bps: int) -> int:
    """Ticks a frame of ``length`` bytes occupies a wire of ``speed_bps``, with preamble and
    gap, rounded up."""
    return ticks_up((length + WIRE_OVERHEAD_BYTES) * 8 * TICKS_PER_SECOND, speed_bps)


def wire_table(lengths: set[int], speed_bps: int) -> dict[int, int]:
    """Frame length -> :func:`wire_ticks`, for every length a run sends (a handful)."""
    return {length: wire_ticks(length, speed_bps) for length in lengths}


def propagation_ticks(spec: PortSpec) -> int:
    """The cable's delay in ticks, rounded up."""
    return math.ceil(spec.propagation_s * TICKS_PER_SECOND)


class Packet:
    """A frame in flight; ``len()`` is its size in bytes (what the queues account)."""

    __slots__ = ("ce", "cnp", "dscp", "dst", "ect", "flow", "length", "psn", "trimmed")

    def __init__(  # noqa: PLR0913 -- once per frame: an argument object would be a second allocation per frame (compiled: +55-65 ns on a ~480 ns frame hop)
        self, flow: Flow, length: int, dscp: int, ect: bool, cnp: bool, psn: int = -1
    ) -> None:
        self.flow = flow
        self.length = length
        self.dscp = dscp
        self.ect = ect
        self.ce = False
        self.cnp = cnp
        self.dst = flow.src if cnp else flow.dst
        self.psn = psn
        # Cut by a trimming switch: its payload is gone, the responder asks for it again.
        self.trimmed = False

    def __len__(self) -> int:
        return self.length


class Control(Packet):
    """A packet back to the flow's sender: a CNP, or the responder's ACK / NAK.  ``psn`` of an
    ACK or NAK is the responder's expected PSN (every PSN before it is acknowledged); a
    selective-repeat NAK asks for the PSNs ``psn`` to ``end`` (exclusive)."""

    __slots__ = ("end", "kind")

    def __init__(self, flow: Flow, length: int, dscp: int, kind: int, psn: int = -1) -> None:
        super().__init__(flow, length, dscp, False, True, psn)
        self.kind = kind
        self.end = psn

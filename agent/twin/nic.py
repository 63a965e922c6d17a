"""A host NIC in the twin: its flows (a heap by next send time), its pause honouring, its
DCQCN notification point and its counters.

What the NIC sends next and when is the engine's (:mod:`agent.twin.engine`); a flow's rate is
its reaction point's (:mod:`lossless.dcqcn`).  Compiled with the engine
(:mod:`lossless.compiled`).
"""

from __future__ import annotations

import math
from typing import Any

from agent.twin.flows import NEVER, Flow
from agent.twin.frames import PFC_FRAME_BYTES, Control, propagation_ticks, wire_ticks
from agent.twin.network import NicSpec, roce_frame_bytes
from lossless.clock import TICKS_PER_SECOND
from lossless.dcqcn import NotificationPoint
from lossless.pfc import PFC_QUANTA_MAX, REFRESH_FRACTION, PauseHonouring, pause_duration
from lossless.queues import Fifo


class Nic:
    """A host NIC: its flows (a heap by next send time), pause honouring, its NP."""

    __slots__ = (
        "busy_until",
        "cnp_dscp",
        "cnp_queue",
        "cnps_tx",
        "flows",
        "frame_bits",
        "frame_bytes",
        "frame_wire",
        "honour_pause",
        "name",
        "np",
        "pause",
        "pause_end",
        "peer",
        "pfc_frame",
        "pfc_tx_xoff",
        "prop",
        "roce_dscp",
        "roce_priority",
        "spec",
        "storm",
        "storm_period",
        "timer",
        "tx_bytes",
        "wake_at",
        "wake_gen",
        "wire",
    )

    def __init__(self, spec: NicSpec, payload_bytes: int | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        speed = spec.port.speed_bps
        self.wire: dict[int, int] = {}  # as a switch port's
        self.prop = propagation_ticks(spec.port)
        self.pfc_frame = wire_ticks(PFC_FRAME_BYTES, speed)
        # A stormy NIC repeats its XOFF at the refresh fraction of the pause it asks for.
        self.storm_period = math.ceil(
            pause_duration(PFC_QUANTA_MAX, speed) * REFRESH_FRACTION * TICKS_PER_SECOND
        )
        self.roce_priority = spec.roce_priority
        self.roce_dscp = spec.roce_dscp
        self.cnp_dscp = spec.cnp_dscp
        # The NIC honours pause for the priorities its PFC vector enables (mlx5 pfc_vector).
        self.honour_pause = spec.roce_priority in spec.pfc_priorities
        self.pause = PauseHonouring(speed)
        # The first tick the model no longer sees the NIC paused at (its pause is in seconds).
        self.pause_end = 0
        self.np = NotificationPoint(spec.dcqcn["min_time_between_cnps"])
        self.flows: list[Flow] = []  # a heap on (next_at, index): flows.flows_push
        self.cnp_queue: Fifo[Control] = Fifo()  # CNPs, ACKs and NAKs: before data
        self.peer: Any = None
        self.busy_until = 0
        self.wake_at = NEVER  # the pending wake's tick, NEVER for none
        self.wake_gen = 0
        self.tx_bytes = 0
        self.cnps_tx = 0
        self.pfc_tx_xoff = 0
        self.storm = False
        self.frame_bytes = roce_frame_bytes(spec.port.mtu, payload_bytes)
        self.frame_wire = 0  # wire[frame_bytes]: the data frame's, read without a lookup
        # A data frame's bits in tick units: the pacing gap is this over the rate.
        self.frame_bits = float(self.frame_bytes * 8 * TICKS_PER_SECOND)
        self.timer = us_ticks(spec.dcqcn["rpg_time_reset"])


def us_ticks(microseconds: int) -> int:
    return microseconds * (TICKS_PER_SECOND // 1_000_000)

"""A switch in the twin: its ports (egress queues and scheduler, ingress accounting, received
pause, watchdog, counters) and its forwarding state.

Every decision to mark, pause, drop or schedule is the shared model's (:mod:`lossless`); a
port holds the model's objects and the counters the report reads.  What happens per frame
and when is the engine's (:mod:`agent.twin.engine`).  Compiled with the engine
(:mod:`lossless.compiled`).
"""

from __future__ import annotations

import random
from typing import Any

from mypy_extensions import i64

from agent.twin.frames import PFC_FRAME_BYTES, Packet, propagation_ticks, wire_ticks
from agent.twin.network import PortSpec
from lossless.config import NUM_CLASSES
from lossless.pfc import IngressAccounting, ReceivedPause
from lossless.queues import EgressQueue, Scheduler, scheduler_weights
from lossless.watchdog import PortWatchdog
from lossless.wred import EcnMarker


class PauseMeter:
    """Ticks a pause timer ran within the run (reporting only; the model decides the pause).

    Same replacement rule as :class:`lossless.pfc.PauseHonouring`: a new deadline replaces the
    running one, and the part of a pause past the end of the run is removed by ``finish``.
    """

    __slots__ = ("paused", "until")

    def __init__(self) -> None:
        self.paused = 0
        self.until = 0

    def update(self, now: int, until: int) -> None:
        if self.until > now:
            self.paused -= self.until - now
        if until > now:
            self.paused += until - now
        self.until = until

    def finish(self, end: int) -> None:
        if self.until > end:
            self.paused -= self.until - end
            self.until = end


class SwitchPort:
    """One switch port: egress queues + scheduler, ingress accounting, pause, watchdog."""

    __slots__ = (
        "backlog",
        "busy_until",
        "depth",
        "depth_bins",
        "depth_peak",
        "depth_t",
        "ecn",
        "eligible",
        "index",
        "ingress",
        "metered_tc",
        "name",
        "pause",
        "pause_meter",
        "peer",
        "pfc_frame",
        "pfc_rx",
        "pfc_tx_xoff",
        "pfc_tx_xon",
        "prop",
        "queue_limit",
        "queues",
        "refresh_at",
        "refresh_gen",
        "scheduler",
        "spec",
        "switch",
        "trim_dscp",
        "trim_tc",
        "tx_bytes",
        "tx_pending",
        "wake_gen",
        "watchdog",
        "watchdog_drops",
        "wire",
        "wire_last",
        "wire_length",
    )

    # Native 64-bit ints when compiled (ticks and bytes; NEVER is 2^61): the per-frame
    # bookkeeping below compares and adds machine ints.
    busy_until: i64
    backlog: i64
    depth: i64
    depth_t: i64
    depth_peak: i64

    def __init__(self, spec: PortSpec, switch: SwitchNode, rng: random.Random) -> None:
        assert spec.qos is not None and spec.buffer is not None
        self.spec = spec
        self.name = f"{spec.device}:{spec.name}"
        self.index = spec.index
        self.switch = switch
        speed = spec.speed_bps
        # Filled by the engine once it knows every NIC's frame length (Engine._wire_times).
        self.wire: dict[int, int] = {}
        self.wire_length = -1  # the frame length last sent, and its wire time
        self.wire_last = 0
        self.prop = propagation_ticks(spec)
        self.pfc_frame = wire_ticks(PFC_FRAME_BYTES, speed)
        qos = spec.qos
        lossless = qos.lossless()
        self.queues: list[EgressQueue[Packet]] = [EgressQueue(size) for size in qos.trim_sizes()]
        # Where a trimming queue's cut frames go, re-marked (-1: the port does not trim).
        self.trim_tc = qos.trim.queue if qos.trim is not None else -1
        self.trim_dscp = qos.trim.dscp if qos.trim is not None else -1
        self.ecn: list[EcnMarker | None] = [None] * NUM_CLASSES
        for tc, cfg in qos.queues.items():
            if cfg.ecn is not None:
                self.ecn[tc] = EcnMarker(cfg.ecn, rng)
        self.scheduler = Scheduler(*scheduler_weights(qos))
        self.eligible = [False] * NUM_CLASSES  # the scheduler's input, refilled per frame
        self.ingress = IngressAccounting(speed)
        self.ingress.configure(spec.buffer, lossless)
        self.queue_limit = spec.buffer.queue_limit_bytes
        self.pause = ReceivedPause(speed)
        self.pause.configure(lossless)
        # The paused fraction is reported for the first lossless priority of the port.
        self.metered_tc = qos.pfc_priorities[0] if qos.pfc_priorities else -1
        assert qos.watchdog is not None
        self.watchdog = PortWatchdog(qos.watchdog, 0.0)
        self.peer: Any = None  # SwitchPort or Nic, wired by the engine
        self.backlog = 0
        self.tx_pending = False  # an end-of-frame event is scheduled
        self.busy_until = 0
        self.wake_gen = 0
        self.refresh_at = -1
        self.refresh_gen = 0
        self.tx_bytes = 0
        self.depth = 0
        self.depth_t = 0
        self.depth_peak = 0
        # Ticks at each depth, in 1 KiB bins (index depth >> 10): the time-weighted
        # distribution for p99 (depth_hist).
        self.depth_bins: list[int] = []
        self.pause_meter = PauseMeter()
        self.pfc_tx_xoff = 0
        self.pfc_tx_xon = 0
        self.pfc_rx = 0
        self.watchdog_drops = 0

    def depth_change(self, now: i64, delta: i64) -> None:
        """The queued bytes change by ``delta`` at ``now``: the time at the old depth goes
        into its 1 KiB bin, and the peak follows."""
        depth = self.depth
        bins = self.depth_bins
        key = depth >> 10
        if key >= len(bins):
            bins.extend([0] * (key + 1 - len(bins)))
        bins[key] += now - self.depth_t
        self.depth_t = now
        depth += delta
        self.depth = depth
        if depth > self.depth_peak:
            self.depth_peak = depth

    @property
    def depth_hist(self) -> dict[int, int]:
        """Ticks spent at each queue depth so far, by 1 KiB bin (``depth >> 10``), bins with
        time only; the time since the last change of depth is not in it yet."""
        return {key: ticks for key, ticks in enumerate(self.depth_bins) if ticks}


class SwitchNode:
    """A switch: its DSCP map, its ports, its routes, and the egress port chosen per flow."""

    __slots__ = ("dscp_to_tc", "flow_port", "name", "ports", "routes")

    def __init__(self, name: str, dscp_to_tc: list[int]) -> None:
        self.name = name
        self.dscp_to_tc = dscp_to_tc
        self.ports: list[SwitchPort] = []
        self.routes: dict[str, tuple[int, ...]] = {}
        # Egress port per flow and direction (flow index * 2 + 1 for what goes back to its
        # sender): the route's ECMP pick, made on the flow's first packet, then one list read.
        self.flow_port: list[SwitchPort | None] = []

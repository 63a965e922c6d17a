"""The twin's discrete-event engine: the shared model of lossless Ethernet on a virtual clock.

Events live in one heap of ``(time, seq, handler, a, b)``; ``seq`` keeps events of the same
instant in the order they were scheduled, so a run is deterministic for a seed.  The clock is
:class:`lossless.clock.VirtualClock`, set to each event's time before its handler runs.

Per packet and hop the path is (every decision is the model's, never a copy):

* ``_switch_rx`` -- the frame is fully received (store and forward): classify by the switch's
  DSCP map, route (shortest-path ECMP on the flow hash), then :func:`lossless.queues.enqueue`
  decides admission (headroom / tail drop), the ECN mark and whether an XOFF is due; a class
  the PFC watchdog put in ``drop`` is discarded first, as the lab switch does;
* ``_port_tx`` -- the port is free: :func:`lossless.queues.eligible_classes` (pause timers of
  :class:`lossless.pfc.ReceivedPause`, watchdog override) and :meth:`Scheduler.pick` (strict,
  then DWRR) choose the queue; the frame leaves, its ingress is released
  (:meth:`IngressAccounting.release` says whether an XON is due); it arrives at the peer after
  its serialisation (``(bytes + 20) * 8 / speed``: preamble, SFD and inter-frame gap, IEEE
  802.3 clause 4.4.2) and the link's propagation delay;
* PFC frames leave after the frame in flight on that port, take one 64-byte frame time plus
  the propagation delay, and are honoured by the switch port (``ReceivedPause.receive``) or
  the NIC (:class:`lossless.pfc.PauseHonouring`); outstanding XOFFs are refreshed when
  :meth:`IngressAccounting.refresh_due` says so; the watchdog is polled at its own period.

Hosts: one NIC per host, one :class:`lossless.dcqcn.DcqcnReactionPoint` per flow (QP) pacing
its packets (gap = bytes * 8 / current rate), a :class:`lossless.dcqcn.NotificationPoint` per
receiving NIC answering CE marks with CNPs that travel back through the fabric on the CNP
DSCP (the plan's strict queue).  A NIC may be told to ignore pause (``honour_pause=False``)
or to storm (send XOFF continuously), for the storm and headroom scenarios.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.twin.network import (
    NicSpec,
    PortSpec,
    TwinError,
    TwinNetwork,
    ecmp_pick,
    flow_hash,
    roce_frame_bytes,
)
from lossless.clock import VirtualClock
from lossless.config import NUM_CLASSES
from lossless.dcqcn import DcqcnReactionPoint, NotificationPoint
from lossless.pfc import (
    PFC_QUANTA_MAX,
    REFRESH_FRACTION,
    IngressAccounting,
    PauseHonouring,
    ReceivedPause,
    pause_duration,
)
from lossless.queues import (
    MARKED,
    XOFF_DUE,
    EgressQueue,
    Scheduler,
    eligible_classes,
    enqueue,
    scheduler_weights,
)
from lossless.watchdog import PortWatchdog
from lossless.wred import EcnMarker

WIRE_OVERHEAD_BYTES = 20  # preamble 7 + SFD 1 + inter-frame gap 12 (IEEE 802.3 4.4.2)
PFC_FRAME_BYTES = 64  # a PFC frame is a minimum-size MAC control frame (802.1Qbb 36.1.3)
CNP_BYTES = 78  # RoCEv2 CNP: Eth 14 + IPv4 20 + UDP 8 + BTH 12 + 16 reserved + ICRC 4 + FCS 4


class Packet:
    """A frame in flight; ``len()`` is its size in bytes (what the queues account)."""

    __slots__ = ("ce", "cnp", "dscp", "dst", "ect", "flow", "length")

    def __init__(self, flow: Flow, length: int, dscp: int, ect: bool, cnp: bool) -> None:
        self.flow = flow
        self.length = length
        self.dscp = dscp
        self.ect = ect
        self.ce = False
        self.cnp = cnp
        self.dst = flow.src if cnp else flow.dst

    def __len__(self) -> int:
        return self.length


class Flow:
    """A RoCE QP from ``src`` to ``dst`` with its DCQCN reaction point and counters."""

    __slots__ = (
        "cnps_rx",
        "dst",
        "hash",
        "index",
        "last_sent",
        "next_at",
        "rp",
        "rx_bytes",
        "rx_ce",
        "rx_packets",
        "src",
        "start_s",
        "stop_s",
        "tx_bytes",
        "tx_packets",
        "udp_sport",
    )

    def __init__(
        self,
        index: int,
        src: str,
        dst: str,
        udp_sport: int,
        rp: DcqcnReactionPoint,
        start_s: float,
        stop_s: float,
    ) -> None:
        self.index = index
        self.src = src
        self.dst = dst
        self.udp_sport = udp_sport
        self.hash = flow_hash(src, dst, udp_sport)
        self.rp = rp
        self.start_s = start_s
        self.stop_s = stop_s
        self.next_at = start_s
        self.last_sent = -1.0
        self.tx_bytes = self.tx_packets = 0
        self.rx_bytes = self.rx_packets = self.rx_ce = 0
        self.cnps_rx = 0

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}:{self.udp_sport}"


class PauseMeter:
    """Time a pause timer ran within the run (reporting only; the model decides the pause).

    Same replacement rule as :class:`lossless.pfc.PauseHonouring`: a new deadline replaces the
    running one, and the part of a pause past the end of the run is removed by ``finish``.
    """

    __slots__ = ("paused_s", "until")

    def __init__(self) -> None:
        self.paused_s = 0.0
        self.until = 0.0

    def update(self, now: float, until: float) -> None:
        if self.until > now:
            self.paused_s -= self.until - now
        if until > now:
            self.paused_s += until - now
        self.until = until

    def finish(self, end: float) -> None:
        if self.until > end:
            self.paused_s -= self.until - end
            self.until = end


class SwitchPort:
    """One switch port: egress queues + scheduler, ingress accounting, pause, watchdog."""

    __slots__ = (
        "backlog",
        "busy_until",
        "byte_time",
        "depth",
        "depth_hist",
        "depth_peak",
        "depth_t",
        "ecn",
        "ingress",
        "name",
        "pause",
        "pause_meter",
        "peer",
        "pfc_frame_s",
        "pfc_rx",
        "pfc_tx_xoff",
        "pfc_tx_xon",
        "prop_s",
        "queue_limit",
        "queues",
        "refresh_at",
        "refresh_gen",
        "scheduler",
        "spec",
        "switch",
        "tx_bytes",
        "tx_pending",
        "wake_gen",
        "watchdog",
        "watchdog_drops",
    )

    def __init__(self, spec: PortSpec, switch: SwitchNode, rng: random.Random) -> None:
        assert spec.qos is not None and spec.buffer is not None
        self.spec = spec
        self.name = f"{spec.device}:{spec.name}"
        self.switch = switch
        speed = spec.speed_bps
        self.byte_time = 8.0 / speed
        self.prop_s = spec.propagation_s
        self.pfc_frame_s = (PFC_FRAME_BYTES + WIRE_OVERHEAD_BYTES) * self.byte_time
        qos = spec.qos
        lossless = qos.lossless()
        self.queues: list[EgressQueue[Packet]] = [EgressQueue() for _ in range(NUM_CLASSES)]
        self.ecn: list[EcnMarker | None] = [None] * NUM_CLASSES
        for tc, cfg in qos.queues.items():
            if cfg.ecn is not None:
                self.ecn[tc] = EcnMarker(cfg.ecn, rng)
        self.scheduler = Scheduler(*scheduler_weights(qos))
        self.ingress = IngressAccounting(speed)
        self.ingress.configure(spec.buffer, lossless)
        self.queue_limit = spec.buffer.queue_limit_bytes
        self.pause = ReceivedPause(speed)
        self.pause.configure(lossless)
        assert qos.watchdog is not None
        self.watchdog = PortWatchdog(qos.watchdog, 0.0)
        self.peer: Any = None  # SwitchPort or Nic, wired by the engine
        self.backlog = 0
        self.tx_pending = False  # an end-of-frame event is scheduled
        self.busy_until = 0.0
        self.wake_gen = 0
        self.refresh_at = -1.0
        self.refresh_gen = 0
        self.tx_bytes = 0
        self.depth = 0
        self.depth_t = 0.0
        self.depth_peak = 0
        # Time at each depth, in 1 KiB bins: the time-weighted distribution for p99.
        self.depth_hist: dict[int, float] = {}
        self.pause_meter = PauseMeter()
        self.pfc_tx_xoff = 0
        self.pfc_tx_xon = 0
        self.pfc_rx = 0
        self.watchdog_drops = 0


class SwitchNode:
    __slots__ = ("dscp_to_tc", "flow_port", "name", "ports", "routes")

    def __init__(self, name: str, dscp_to_tc: list[int]) -> None:
        self.name = name
        self.dscp_to_tc = dscp_to_tc
        self.ports: list[SwitchPort] = []
        self.routes: dict[str, tuple[int, ...]] = {}
        # (destination, flow hash) -> egress port: one dict read per packet after the first.
        self.flow_port: dict[tuple[str, int], SwitchPort] = {}


class Nic:
    """A host NIC: its flows (a heap by next send time), pause honouring, its NP."""

    __slots__ = (
        "busy_until",
        "byte_time",
        "cnp_queue",
        "cnps_tx",
        "flows",
        "frame_bytes",
        "honour_pause",
        "name",
        "np",
        "pause",
        "peer",
        "pfc_frame_s",
        "pfc_tx_xoff",
        "prop_s",
        "roce_priority",
        "spec",
        "storm",
        "timer_s",
        "tx_bytes",
        "wake_at",
        "wake_gen",
    )

    def __init__(self, spec: NicSpec, payload_bytes: int | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        speed = spec.port.speed_bps
        self.byte_time = 8.0 / speed
        self.prop_s = spec.port.propagation_s
        self.pfc_frame_s = (PFC_FRAME_BYTES + WIRE_OVERHEAD_BYTES) * self.byte_time
        self.roce_priority = spec.roce_priority
        # The NIC honours pause for the priorities its PFC vector enables (mlx5 pfc_vector).
        self.honour_pause = spec.roce_priority in spec.pfc_priorities
        self.pause = PauseHonouring(speed)
        self.np = NotificationPoint(spec.dcqcn["min_time_between_cnps"])
        self.flows: list[tuple[float, int, Flow]] = []
        self.cnp_queue: deque[Packet] = deque()
        self.peer: Any = None
        self.busy_until = 0.0
        self.wake_at = -1.0
        self.wake_gen = 0
        self.tx_bytes = 0
        self.cnps_tx = 0
        self.pfc_tx_xoff = 0
        self.storm = False
        self.frame_bytes = roce_frame_bytes(spec.port.mtu, payload_bytes)
        self.timer_s = spec.dcqcn["rpg_time_reset"] * 1e-6


Handler = Callable[[Any, Any], None]


@dataclass(frozen=True)
class FlowSpec:
    src: str
    dst: str
    start_s: float = 0.0
    stop_s: float = float("inf")
    udp_sport: int = 49152

    def hash_value(self) -> int:
        return flow_hash(self.src, self.dst, self.udp_sport)


@dataclass
class Watch:
    """A time series sample (the engine fills it; :mod:`agent.twin.results` shapes it)."""

    t_s: float
    queue_bytes: dict[str, int]
    rate_bps: list[float]
    rx_bytes: list[int]
    paused: dict[str, float]


class Engine:
    """One run of the twin over the network for a set of flows."""

    def __init__(
        self,
        network: TwinNetwork,
        flows: list[FlowSpec],
        *,
        seed: int = 1,
        dcqcn_override: dict[str, int] | None = None,
        ignore_pause: frozenset[str] = frozenset(),
        storm: tuple[str, float] | None = None,
        payload_bytes: int | None = None,
        reaction_point: bool = True,
        sample_every_s: float = 10e-6,
        max_samples: int = 2000,
        on_sample: Callable[[Engine, float], None] | None = None,
    ) -> None:
        self.network = network
        # Called after each sample with the engine and the time: what a caller needs to read
        # the counters at a moment of its choosing (tune's measurement window).
        self.on_sample = on_sample
        self.clock = VirtualClock()
        self.rng = random.Random(seed)
        self._heap: list[tuple[float, int, Handler, Any, Any]] = []
        self._seq = 0
        self.events = 0
        self.switches: dict[str, SwitchNode] = {}
        self.nics: dict[str, Nic] = {}
        self.flows: list[Flow] = []
        self.samples: list[Watch] = []
        self.sample_every_s = sample_every_s
        self.max_samples = max_samples
        self.duration_s = 0.0
        self._storm = storm
        # RoCE payload per data packet (None: the port's RoCE MTU); reaction_point=False is a
        # NIC with DCQCN off (CNPs arrive and are counted, the rate never changes).
        self.payload_bytes = payload_bytes
        self.reaction_point = reaction_point
        self._build(flows, dcqcn_override or {}, ignore_pause)

    # ---------------------------------------------------------------- construction

    def _touched(self, flows: list[FlowSpec]) -> tuple[set[str], set[str]]:
        """Switches and hosts the flows (and their CNPs) can reach: only they are built."""
        hosts: set[str] = set()
        switches: set[str] = set()
        net = self.network
        for spec in flows:
            hosts.update((spec.src, spec.dst))
        for dst in hosts:
            routes = net.routes_to(dst)
            for src in hosts:
                if src == dst:
                    continue
                node = net.hosts[src].leaf
                stack = [node]
                while stack:
                    sw = stack.pop()
                    if sw in switches or sw not in net.switches:
                        continue
                    switches.add(sw)
                    for index in routes.get(sw, ()):
                        peer = net.switches[sw].ports[index].peer_device
                        if peer in net.switches:
                            stack.append(peer)
        return switches, hosts

    def _build(
        self, specs: list[FlowSpec], override: dict[str, int], ignore_pause: frozenset[str]
    ) -> None:
        """The switches and NICs the flows (and the storm) touch, wired and routed, then the
        flows on their sending NICs."""
        self._check_flows(specs)
        switch_names, host_names = self._touched(specs)
        if self._storm is not None:
            host_names.add(self._storm[0])
            switch_names.add(self.network.hosts[self._storm[0]].leaf)
        for name in sorted(switch_names):
            spec = self.network.switches[name]
            node = SwitchNode(name, spec.dscp_to_tc)
            node.ports = [SwitchPort(p, node, self.rng) for p in spec.ports]
            self.switches[name] = node
        for name in sorted(host_names):
            nic = Nic(self.network.hosts[name], self.payload_bytes)
            if name in ignore_pause:
                nic.honour_pause = False
            self.nics[name] = nic
        self._wire()
        for dst in host_names:
            routes = self.network.routes_to(dst)
            for name, node in self.switches.items():
                node.routes[dst] = routes.get(name, ())
        self._add_flows(specs, override)

    def _check_flows(self, specs: list[FlowSpec]) -> None:
        """Every flow runs between two hosts with a path between them."""
        net = self.network
        for flow_spec in specs:
            for host in (flow_spec.src, flow_spec.dst):
                if host not in net.hosts:
                    raise TwinError(
                        f"twin flow {flow_spec.src}->{flow_spec.dst}: Expected: a host with a "
                        f"NIC port Actual: {host}"
                    )
            if flow_spec.src == flow_spec.dst:
                raise TwinError(f"twin flow {flow_spec.src}->{flow_spec.dst}: to itself")
            net.path(flow_spec.src, flow_spec.dst, flow_spec.hash_value())  # raises if none

    def _wire(self) -> None:
        """The links between built nodes. A port whose peer was not built never carries a
        packet of this run (routing only leads to built switches and hosts)."""
        for node in self.switches.values():
            for port in node.ports:
                peer_dev, peer_port = port.spec.peer_device, port.spec.peer_port
                if peer_dev in self.switches:
                    port.peer = next(
                        p for p in self.switches[peer_dev].ports if p.spec.name == peer_port
                    )
                elif peer_dev in self.nics:
                    port.peer = self.nics[peer_dev]
                    self.nics[peer_dev].peer = port

    def _add_flows(self, specs: list[FlowSpec], override: dict[str, int]) -> None:
        """Each flow with its reaction point on its sending NIC; every NIC's notification
        point and timer from its DCQCN parameters (``override`` on top)."""
        for index, flow_spec in enumerate(specs):
            nic = self.nics[flow_spec.src]
            params = {**nic.spec.dcqcn, **override}
            rp = DcqcnReactionPoint(line_rate_bps=float(nic.spec.port.speed_bps), params=params)
            flow = Flow(
                index,
                flow_spec.src,
                flow_spec.dst,
                flow_spec.udp_sport,
                rp,
                flow_spec.start_s,
                flow_spec.stop_s,
            )
            self.flows.append(flow)
            heapq.heappush(nic.flows, (flow_spec.start_s, index, flow))
        for nic in self.nics.values():
            params = {**nic.spec.dcqcn, **override}
            nic.np = NotificationPoint(params["min_time_between_cnps"])
            nic.timer_s = params["rpg_time_reset"] * 1e-6

    # ---------------------------------------------------------------- event plumbing

    def _at(self, when: float, handler: Handler, a: Any, b: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, handler, a, b))

    def run(self, duration_s: float) -> None:
        """Simulate from 0 to ``duration_s`` seconds of virtual time (once per engine)."""
        if self.events or self.samples:
            raise TwinError("twin: an engine runs once; build a new one for another run")
        self.duration_s = duration_s
        interval = max(self.sample_every_s, duration_s / self.max_samples)
        self.sample_every_s = interval
        self._at(0.0, self._sample, interval)
        for nic in self.nics.values():
            if nic.flows:
                self._wake_nic(nic, nic.flows[0][0])
        for node in self.switches.values():
            for port in node.ports:
                if port.watchdog.enabled:
                    self._at(port.watchdog.next_poll, self._poll_watchdog, port)
        if self._storm is not None:
            name, start = self._storm
            self.nics[name].storm = True
            self._at(start, self._storm_tick, self.nics[name])
        heap = self._heap
        pop = heapq.heappop
        clock_set = self.clock.set
        events = 0
        while heap:
            when, _, handler, a, b = heap[0]
            if when > duration_s:
                break
            pop(heap)
            clock_set(when)
            handler(a, b)
            events += 1
        self.events += events
        self.clock.set(max(self.clock.now(), duration_s))
        end = duration_s
        for node in self.switches.values():
            for port in node.ports:
                port.pause_meter.finish(end)
                self._depth_change(port, end, 0)
        for nic in self.nics.values():
            nic.pause.finish(end)

    # ---------------------------------------------------------------- host side

    def _wake_nic(self, nic: Nic, when: float) -> None:
        """Make sure the NIC runs at ``when`` (one pending wake per NIC, the earliest)."""
        if nic.wake_at >= 0 and nic.wake_at <= when:
            return
        nic.wake_gen += 1
        nic.wake_at = when
        self._at(when, self._nic_tx, nic, nic.wake_gen)

    def _nic_tx(self, nic: Nic, gen: int) -> None:
        if gen != nic.wake_gen:
            return  # superseded by an earlier wake
        nic.wake_at = -1.0
        now = self.clock.now()
        if nic.busy_until > now:
            self._wake_nic(nic, nic.busy_until)
            return
        if nic.cnp_queue:
            packet = nic.cnp_queue.popleft()
            nic.cnps_tx += 1
        else:
            flows = nic.flows
            if not flows:
                return
            if nic.honour_pause and nic.pause.is_paused(now):
                # The XON (or the pause running out) wakes the NIC; the timer is the fallback.
                self._wake_nic(nic, nic.pause.paused_until)
                return
            next_at, index, flow = flows[0]
            if next_at > now:
                self._wake_nic(nic, next_at)
                return
            if now >= flow.stop_s:
                heapq.heappop(flows)
                if flows:
                    self._wake_nic(nic, max(now, flows[0][0]))
                return
            rp = flow.rp
            length = nic.frame_bytes
            if flow.last_sent >= 0:
                # Paced by the rate *now* (a CNP may have cut it since the entry was made);
                # the RP's timers run during a long gap, as a NIC's do whether or not it sends.
                rp.advance(now)
                due = flow.last_sent + length * 8.0 / rp.current_bps
                if due > now:
                    heapq.heapreplace(flows, (min(due, now + nic.timer_s), index, flow))
                    self._wake_nic(nic, flows[0][0])
                    return
            packet = Packet(flow, length, nic.spec.roce_dscp, True, False)
            rp.on_sent(now, length)
            flow.tx_bytes += length
            flow.tx_packets += 1
            flow.last_sent = now
            # No credit for time spent paused or idle: the next gap starts now.
            gap = length * 8.0 / rp.current_bps
            heapq.heapreplace(flows, (now + min(gap, nic.timer_s), index, flow))
        length = packet.length
        done = now + (length + WIRE_OVERHEAD_BYTES) * nic.byte_time
        nic.busy_until = done
        nic.tx_bytes += length + WIRE_OVERHEAD_BYTES
        self._at(done + nic.prop_s, self._switch_rx, nic.peer, packet)
        if nic.cnp_queue:
            self._wake_nic(nic, done)
        elif nic.flows:
            self._wake_nic(nic, max(done, nic.flows[0][0]))

    def _host_rx(self, nic: Nic, packet: Packet) -> None:
        now = self.clock.now()
        flow = packet.flow
        if packet.cnp:
            flow.cnps_rx += 1
            if self.reaction_point:
                flow.rp.on_cnp(now)
            return
        flow.rx_bytes += packet.length
        flow.rx_packets += 1
        if packet.ce:
            flow.rx_ce += 1
            if nic.np.on_ce(flow.index, now):
                spec = nic.spec
                cnp = Packet(flow, CNP_BYTES, spec.cnp_dscp, False, True)
                nic.cnp_queue.append(cnp)
                self._wake_nic(nic, now)

    def _nic_pfc_rx(self, nic: Nic, frame: tuple[int, int]) -> None:
        tc, quanta = frame
        if tc != nic.roce_priority or not nic.honour_pause:
            return
        now = self.clock.now()
        nic.pause.receive(quanta, now)
        if not quanta and (nic.flows or nic.cnp_queue):
            self._wake_nic(nic, now)

    def _storm_tick(self, nic: Nic, _: Any) -> None:
        """A stormy NIC: XOFF on the RoCE priority, again at half the pause time, forever."""
        now = self.clock.now()
        nic.pfc_tx_xoff += 1
        self._at(now + nic.pfc_frame_s + nic.prop_s, self._switch_pfc_rx, nic.peer,
                 (nic.roce_priority, PFC_QUANTA_MAX))  # fmt: skip
        period = pause_duration(PFC_QUANTA_MAX, nic.spec.port.speed_bps) * REFRESH_FRACTION
        self._at(now + period, self._storm_tick, nic)

    # ---------------------------------------------------------------- switch side

    def _switch_rx(self, port: SwitchPort, packet: Packet) -> None:
        node = port.switch
        key = (packet.dst, packet.flow.hash)
        out = node.flow_port.get(key)
        if out is None:
            choices = node.routes[packet.dst]
            out = node.ports[ecmp_pick(node.name, choices, packet.flow.hash)]
            node.flow_port[key] = out
        tc = node.dscp_to_tc[packet.dscp]
        if out.watchdog.drop_traffic[tc]:
            out.watchdog.classes[tc].dropped_packets += 1
            out.watchdog_drops += 1
            return
        length = packet.length
        status = enqueue(
            out.queues[tc],
            port.ingress,
            out.ecn[tc],
            (packet, port.spec.index, tc),
            length,
            packet.ect and not packet.ce,
            out.queue_limit,
        )
        if not status:
            return  # headroom (lossless) or tail (lossy) drop, counted by the model
        now = self.clock.now()
        if status & MARKED:
            packet.ce = True
        if status & XOFF_DUE:
            self._send_pfc(port, tc, PFC_QUANTA_MAX, now)
        self._depth_change(out, now, length)
        out.backlog += 1
        if not out.tx_pending:
            self._kick(out, now)

    def _depth_change(self, port: SwitchPort, now: float, delta: int) -> None:
        depth = port.depth
        hist = port.depth_hist
        key = depth >> 10
        hist[key] = hist.get(key, 0.0) + (now - port.depth_t)
        port.depth_t = now
        depth += delta
        port.depth = depth
        if depth > port.depth_peak:
            port.depth_peak = depth

    def _kick(self, port: SwitchPort, now: float) -> None:
        """Something may be sendable: transmit now, or at the end of the frame on the wire.

        At most one end-of-frame event is pending per port (``tx_pending``), and none while
        the port has nothing queued.
        """
        if port.tx_pending or not port.backlog:
            return
        if port.busy_until > now:
            port.tx_pending = True
            self._at(port.busy_until, self._port_tx, port)
        else:
            self._port_tx(port, None)

    def _port_tx(self, port: SwitchPort, _: Any) -> None:
        port.tx_pending = False
        if not port.backlog:
            return
        now = self.clock.now()
        queues = port.queues
        eligible = eligible_classes(queues, port.pause, port.watchdog.override_pause, now)
        tc = port.scheduler.pick(queues, eligible)
        if tc is None:
            # Everything queued is paused: the XON or the end of the pause wakes the port.
            until = port.pause.paused_until
            wake = min(until[c] for c in range(NUM_CLASSES) if queues[c].packets)
            port.wake_gen += 1
            self._at(wake, self._port_wake, port, port.wake_gen)
            return
        queue = queues[tc]
        packet, in_index, in_tc = queue.pop()
        length = packet.length
        queue.tx_packets += 1
        queue.tx_bytes += length
        port.backlog -= 1
        self._depth_change(port, now, -length)
        in_port = port.switch.ports[in_index]
        if in_port.ingress.release(in_tc, length):
            self._send_pfc(in_port, in_tc, 0, now)
        wire = length + WIRE_OVERHEAD_BYTES
        done = now + wire * port.byte_time
        port.busy_until = done
        port.tx_bytes += wire
        peer = port.peer
        if type(peer) is Nic:
            self._at(done + port.prop_s, self._host_rx, peer, packet)
        else:
            self._at(done + port.prop_s, self._switch_rx, peer, packet)
        if port.backlog:
            port.tx_pending = True
            self._at(done, self._port_tx, port)

    def _port_wake(self, port: SwitchPort, gen: int) -> None:
        if gen == port.wake_gen:
            self._kick(port, self.clock.now())

    def _send_pfc(self, port: SwitchPort, tc: int, quanta: int, now: float) -> None:
        """XOFF (quanta > 0) or XON for ``tc`` out of ``port`` to its upstream neighbour."""
        ingress = port.ingress
        if quanta:
            ingress.xoff_sent(tc, now)
            port.pfc_tx_xoff += 1
            self._schedule_refresh(port)
        else:
            ingress.xon_sent(tc)
            port.pfc_tx_xon += 1
        start = port.busy_until if port.busy_until > now else now
        arrive = start + port.pfc_frame_s + port.prop_s
        peer = port.peer
        if type(peer) is Nic:
            self._at(arrive, self._nic_pfc_rx, peer, (tc, quanta))
        else:
            self._at(arrive, self._switch_pfc_rx, peer, (tc, quanta))

    def _schedule_refresh(self, port: SwitchPort) -> None:
        """One pending refresh per port, at the model's next_refresh (earlier ones win)."""
        when = port.ingress.next_refresh()
        if when is None or (port.refresh_at >= 0 and port.refresh_at <= when):
            return
        port.refresh_at = when
        port.refresh_gen += 1
        self._at(when, self._refresh, port, port.refresh_gen)

    def _refresh(self, port: SwitchPort, gen: int) -> None:
        if gen != port.refresh_gen:
            return
        port.refresh_at = -1.0
        now = self.clock.now()
        for tc in port.ingress.refresh_due(now):
            self._send_pfc(port, tc, PFC_QUANTA_MAX, now)
        self._schedule_refresh(port)

    def _switch_pfc_rx(self, port: SwitchPort, frame: tuple[int, int]) -> None:
        tc, quanta = frame
        now = self.clock.now()
        port.pfc_rx += 1
        pause = port.pause
        pause.receive(tc, quanta, now, port.watchdog.override_pause[tc])
        if tc == self._metered_tc(port):
            port.pause_meter.update(now, pause.paused_until[tc])
        if not pause.is_paused(tc, now):
            self._kick(port, now)

    @staticmethod
    def _metered_tc(port: SwitchPort) -> int:
        # The paused fraction is reported for the first lossless priority of the port.
        no_drop = port.spec.qos.no_drop if port.spec.qos else []
        return no_drop[0] if no_drop else -1

    def _poll_watchdog(self, port: SwitchPort, _: Any) -> None:
        now = self.clock.now()
        watchdog = port.watchdog
        queued = [bool(q.packets) for q in port.queues]
        for event in watchdog.poll(now, port.pause, queued):
            if not event.detected:
                continue
            tc = event.priority
            if watchdog.override_pause[tc]:
                port.pause.clear(tc)
                if tc == self._metered_tc(port):
                    port.pause_meter.update(now, now)
            if watchdog.drop_traffic[tc]:
                self._flush(port, tc, now)
        self._kick(port, now)
        self._at(watchdog.next_poll, self._poll_watchdog, port)

    def _flush(self, port: SwitchPort, tc: int, now: float) -> None:
        """Watchdog drop action: discard the class's queue, releasing its ingress charges."""
        queue = port.queues[tc]
        while queue.packets:
            packet, in_index, in_tc = queue.pop()
            port.backlog -= 1
            self._depth_change(port, now, -packet.length)
            port.watchdog.classes[tc].dropped_packets += 1
            port.watchdog_drops += 1
            in_port = port.switch.ports[in_index]
            if in_port.ingress.release(in_tc, packet.length):
                self._send_pfc(in_port, in_tc, 0, now)

    # ---------------------------------------------------------------- sampling

    def _sample(self, interval: float, _: Any) -> None:
        now = self.clock.now()
        queue: dict[str, int] = {}
        paused: dict[str, float] = {}
        for node in self.switches.values():
            for port in node.ports:
                if port.depth_peak:
                    queue[port.name] = port.depth
                if port.pfc_rx:
                    paused[port.name] = 1.0 if port.pause_meter.until > now else 0.0
        for nic in self.nics.values():
            if nic.pause.paused_s:
                paused[nic.name] = 1.0 if nic.pause.is_paused(now) else 0.0
        self.samples.append(
            Watch(
                t_s=now,
                queue_bytes=queue,
                rate_bps=[
                    f.rp.current_bps if f.start_s <= now < f.stop_s else 0.0 for f in self.flows
                ],
                rx_bytes=[f.rx_bytes for f in self.flows],
                paused=paused,
            )
        )
        for flow in self.flows:
            # The RP keeps every rate change for the lab's reports; the twin samples rates
            # itself, and an unbounded list would grow with every rate change of every flow.
            flow.rp.history.clear()
        if self.on_sample is not None:
            self.on_sample(self, now)
        if now + interval <= self.duration_s + 1e-12:
            self._at(now + interval, self._sample, interval)

"""The twin's discrete-event engine: the shared model of lossless Ethernet on a virtual clock.

Events (:class:`Event`: a tick, a sequence number, a kind and its arguments) wait in the
engine's :class:`agent.twin.eventqueue.EventQueue` (two heaps ordered by ``(time, seq)``), and
:meth:`Engine.run` runs the earliest due, one after the other, each kind's handler here;
``seq`` keeps events of the same instant in the order they were scheduled, so a run is
deterministic for a seed.  The clock is
:class:`lossless.clock.TickClock`, set to each event's time before its handler runs.  This
module is compiled by mypyc (:mod:`lossless.compiled`; docs/twin-speed.md says what that asks
of the code here: native ints, ``Final`` constants, no generic calls per frame).

Time is integer picoseconds (ticks), so it cannot drift and no event lands before its cause.
Roundings, each stated once:

* durations the engine derives -- a frame on the wire (per port and frame length, cached), a
  cable's propagation, a PFC frame, a pacing gap, the storm's XOFF period -- are rounded *up*
  to the next tick: a port never sends faster than its speed, a sender never beats its rate;
* times the user chose -- the run length, a flow's start and stop, the sampling interval --
  are the nearest tick;
* the shared model (:mod:`lossless`) takes seconds (``ticks / 10**12``, correctly rounded);
  a deadline it returns in seconds (a pause's end, the next XOFF refresh, the watchdog's next
  poll) is woken at the first tick at or after it (:func:`lossless.clock.ticks_at_or_after`),
  where the model sees the deadline reached.

Per packet and hop the path is (every decision is the model's, never a copy):

* ``_switch_rx`` -- the frame is fully received (store and forward): classify by the switch's
  DSCP map, route (shortest-path ECMP on the flow hash), then :func:`lossless.queues.enqueue`
  decides admission (headroom / tail drop), the ECN mark and whether an XOFF is due; a class
  the PFC watchdog put in ``drop`` is discarded first, as the lab switch does;
* ``_port_tx`` -- the port is free: :func:`lossless.queues.fill_eligible` (pause timers of
  :class:`lossless.pfc.ReceivedPause`, watchdog override) and :meth:`Scheduler.pick` (strict,
  then DWRR) choose the queue; the frame leaves, its ingress is released
  (:meth:`IngressAccounting.release` says whether an XON is due); it arrives at the peer after
  its serialisation (``(bytes + 20) * 8 / speed``: preamble, SFD and inter-frame gap, IEEE
  802.3 clause 4.4.2) and the link's propagation delay;
* PFC frames leave after the frame in flight on that port, take one 64-byte frame time plus
  the propagation delay, and are honoured by the switch port (``ReceivedPause.receive``) or
  the NIC (:class:`lossless.pfc.PauseHonouring`); outstanding XOFFs are refreshed when
  :meth:`IngressAccounting.refresh_due` says so; the watchdog is polled at its own period
  (these handlers are :class:`agent.twin.pause.PauseHandlers`, the engine's base class).

Hosts: one NIC per host, one :class:`lossless.dcqcn.DcqcnReactionPoint` per flow (QP) pacing
its packets (gap = bytes * 8 / current rate), a :class:`lossless.dcqcn.NotificationPoint` per
receiving NIC answering CE marks with CNPs that travel back through the fabric on the CNP
DSCP (the plan's strict queue).  A NIC may be told to ignore pause (``honour_pause=False``)
or to storm (send XOFF continuously), for the storm and headroom scenarios.

Messages: a flow is infinite (``FlowSpec.size_bytes`` None: always a full frame to send, the
scenarios' sources) or carries messages posted with :meth:`Engine.post` (before the run or
from a callback).  A message is cut into frames of the NIC's RoCE payload, the last one
shorter (its own length, added to every wire table when posted); ``on_message(engine, flow,
tag, tick)`` runs at the tick the responder has every frame of it in order.  A flow with
nothing left to send leaves its NIC's heap (no events while idle).  :meth:`Engine.finish`
(or :meth:`Engine.stop_at_tick`) ends the run early: no later event runs, and
:attr:`Engine.end` and :attr:`Engine.duration_s` are the real end.

Loss recovery (RC, per flow; docs/twin-recovery.md): data frames carry PSNs.  Go-back-N (the
default): the responder accepts only the expected PSN; the first frame after a gap draws one
NAK (a 66-byte packet back through the fabric on the CNP priority, like a CNP) and no other
until the gap is filled; the sender rewinds to the NAKed PSN.  Selective repeat
(``recovery="selective-repeat"``): the responder keeps frames after a gap and NAKs each new
hole; the sender resends only those PSNs.  ACKs are coalesced (:data:`ACK_EVERY`); a duplicate
is acknowledged at once.  A retransmission timeout (``rto_s``, default :data:`DEFAULT_RTO_S`:
InfiniBand's 4.096 us x 2^timeout with NCCL's NCCL_IB_TIMEOUT) restarts on every ACK that
moves the acknowledged PSN; on expiry the sender goes back to the first unacknowledged PSN.
Goodput counts what the responder accepted in order (``delivered_bytes``); retransmitted
frames, NAKs and timeouts are counted per flow.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable
from dataclasses import dataclass
from math import ceil
from typing import Final, Unpack

from mypy_extensions import mypyc_attr

from agent.twin.eventqueue import (
    HALT,
    HOST_RX,
    NIC_PFC_RX,
    NIC_TX,
    PORT_TX,
    PORT_WAKE,
    REFRESH,
    RTO,
    SAMPLE,
    STORM,
    SWITCH_PFC_RX,
    SWITCH_RX,
    WATCHDOG,
)
from agent.twin.events import Event
from agent.twin.flows import NEVER, Flow, FlowSpec, flows_pop, flows_push, flows_sift_head
from agent.twin.frames import (
    ACK,
    ACK_BYTES,
    CNP,
    CNP_BYTES,
    MIN_FRAME_BYTES,
    NAK,
    NAK_TRIM,
    WIRE_OVERHEAD_BYTES,
    Control,
    Packet,
    wire_ticks,
)
from agent.twin.network import ROCE_FRAME_OVERHEAD, TwinError, TwinNetwork, ecmp_pick
from agent.twin.nic import Nic, us_ticks
from agent.twin.pause import PauseHandlers
from agent.twin.run_options import (
    DEFAULT_RTO_S,
    Paths,
    Recovery,
    TrafficOptions,
    check_paths,
    check_recovery,
)
from agent.twin.samples import Watch, watch
from agent.twin.switch import SwitchNode, SwitchPort
from agent.twin.wiring import (
    build_nics,
    build_switches,
    check_flows,
    reached,
    route,
    wire,
    wire_times,
)
from lossless.clock import TICKS_PER_SECOND, ticks_at_or_after, to_ticks
from lossless.config import NUM_CLASSES
from lossless.dcqcn import DcqcnReactionPoint, NotificationPoint
from lossless.pfc import PFC_QUANTA_MAX
from lossless.queues import (
    MARKED,
    TRIMMED,
    XOFF_DUE,
    admit_trimmed,
    enqueue,
    fill_eligible,
    mark_on_dequeue,
    trimmed_length,
)

# The responder acknowledges every ACK_EVERY data frames it accepts in order, and at once a
# message's last frame, a frame that fills a selective-repeat hole and every duplicate.  The
# InfiniBand spec lets a responder coalesce ACKs (one ACK covers every PSN before it; see
# "Ack Coalescing Detail", InfiniBand Network Architecture, Shanley, ch. 17,
# https://www.safaribooksonline.com/library/view/infiniband-network-architecture/0321117654/0321117654_ch17lev1sec16.html);
# how many frames a ConnectX NIC coalesces is not published: 16 is this model's choice.
ACK_EVERY: Final = 16
# The first ONSET_INTERVALS sampling intervals are sampled ONSET_SPLIT times as densely: what
# happens in them (the queue's rise, PFC's and DCQCN's first reactions) is what a plot with a
# log time axis shows first.
ONSET_INTERVALS: Final = 5
ONSET_SPLIT: Final = 10
# The switches' path choice (run_options.PATHS) as the engine tests it per frame.
PATHS_FLOW: Final = 0
PATHS_SPRAY: Final = 1
PATHS_ADAPTIVE: Final = 2
# Salt of the path draws' own generator: spraying draws per frame, and sharing the marking
# draws' generator would change every ECN decision of a run when only the paths changed.
PATH_SEED_SALT: Final = 0x5EED_9A75


MessageCallback = Callable[["Engine", Flow, object, int], None]
SampleCallback = Callable[["Engine", float], None]


class EngineOptions(TrafficOptions, total=False):
    """:class:`Engine`'s keywords (:class:`EngineSettings` has their defaults): beside a run's
    options, the NICs that ignore pause, a storm (host, start time), the sampling (interval,
    at most this many samples) and the callbacks (after each sample; at each message's
    delivery, see :meth:`Engine.post`)."""

    ignore_pause: frozenset[str]
    storm: tuple[str, float] | None
    sample_every_s: float
    max_samples: int
    on_sample: SampleCallback | None
    on_message: MessageCallback | None


@dataclass(frozen=True)
class EngineSettings:
    """An :class:`Engine`'s options, with the defaults of those not given."""

    seed: int = 1
    dcqcn_override: dict[str, int] | None = None
    recovery: Recovery = "go-back-n"
    rto_s: float = DEFAULT_RTO_S
    paths: Paths = "flow"
    payload_bytes: int | None = None
    reaction_point: bool = True
    ignore_pause: frozenset[str] = frozenset()
    storm: tuple[str, float] | None = None
    sample_every_s: float = 10e-6
    max_samples: int = 2000
    on_sample: SampleCallback | None = None
    on_message: MessageCallback | None = None


class _Finished(Exception):
    """Raised by the stop sentinel: the run ends before the next event (Engine.finish)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class Engine(PauseHandlers):
    """One run of the twin over the network for a set of flows.

    A subclass may override a handler (a test's engine that drops chosen frames): compiled,
    the engine calls its handlers through the subclass's methods all the same.
    """

    def __init__(
        self, network: TwinNetwork, flows: list[FlowSpec], **options: Unpack[EngineOptions]
    ) -> None:
        super().__init__()
        settings = EngineSettings(**options)
        recovery, rto_s = settings.recovery, settings.rto_s
        check_recovery(recovery, rto_s)
        check_paths(settings.paths, recovery)
        self.settings = settings
        self.recovery = recovery
        self.selective = recovery == "selective-repeat"
        self.rto_s = rto_s
        self.rto = max(1, to_ticks(rto_s))
        self.network = network
        # Called with (engine, flow, tag, tick) at the tick the responder has received every
        # byte of a posted message, in order (see post).
        self.on_message = settings.on_message
        # Called after each sample with the engine and the time: what a caller needs to read
        # the counters at a moment of its choosing (tune's measurement window).
        self.on_sample = settings.on_sample
        self.rng = random.Random(settings.seed)
        self.paths = ("flow", "spray", "adaptive").index(settings.paths)
        self.path_rng = random.Random(settings.seed ^ PATH_SEED_SALT)
        # A sprayed flow's frames arrive out of order by design: the responder does not take a
        # gap for a loss (it NAKs a trimmed frame, and the timeout finds the rest).
        self.nak_holes = self.paths == PATHS_FLOW
        self.events = 0
        self.switches: dict[str, SwitchNode] = {}
        self.ports: list[SwitchPort] = []  # every built switch port, switch by switch
        self.nics: dict[str, Nic] = {}
        self.flows: list[Flow] = []
        self.samples: list[Watch] = []
        self.sample_every_s = settings.sample_every_s
        self.max_samples = settings.max_samples
        self.duration_s = 0.0
        self.end = 0  # the run's last tick
        self._storm = settings.storm
        # RoCE payload per data packet (None: the port's RoCE MTU); reaction_point=False is a
        # NIC with DCQCN off (CNPs arrive and are counted, the rate never changes).
        self.payload_bytes = settings.payload_bytes
        self.reaction_point = settings.reaction_point
        self.dcqcn_override = dict(settings.dcqcn_override or {})
        self._lengths: set[int] = set()  # frame lengths in the wire tables
        self._stop_at = NEVER  # the tick of the pending stop sentinel (stop_at_tick)
        self._build(flows, settings.dcqcn_override or {}, settings.ignore_pause)

    # ---------------------------------------------------------------- construction

    def _build(
        self, specs: list[FlowSpec], override: dict[str, int], ignore_pause: frozenset[str]
    ) -> None:
        """The switches and NICs the flows (and the storm) touch, wired and routed
        (:mod:`agent.twin.wiring`), then the flows on their sending NICs."""
        network = self.network
        check_flows(network, specs)
        storm_host = self._storm[0] if self._storm is not None else None
        switch_names, host_names = reached(network, specs, storm_host)
        self.switches = build_switches(network, switch_names, self.rng)
        self.ports = [port for node in self.switches.values() for port in node.ports]
        self.nics = build_nics(network, host_names, self.payload_bytes, ignore_pause)
        wire(self.switches, self.nics)
        self._lengths = wire_times(self.switches, self.nics)
        for port in self.ports:
            for queue in port.queues:
                # A trimmed frame is cut to the queue's trim size (or goes whole if shorter).
                if queue.trim_bytes:
                    self._add_length(queue.trim_bytes)
        route(network, self.switches, host_names)
        self._add_flows(specs, override)

    def _add_length(self, length: int) -> None:
        """A frame length first seen (a message's short last frame): into every wire table,
        when it is posted, so that sending stays one lookup per frame."""
        if length in self._lengths:
            return
        self._lengths.add(length)
        for port in self.ports:
            port.wire[length] = wire_ticks(length, port.spec.speed_bps)
        for nic in self.nics.values():
            nic.wire[length] = wire_ticks(length, nic.spec.port.speed_bps)

    def _add_flows(self, specs: list[FlowSpec], override: dict[str, int]) -> None:
        """Each flow with its reaction point on its sending NIC; every NIC's notification
        point and timer from its DCQCN parameters (``override`` on top)."""
        for index, flow_spec in enumerate(specs):
            nic = self.nics[flow_spec.src]
            params = {**nic.spec.dcqcn, **override}
            rp = DcqcnReactionPoint(line_rate_bps=float(nic.spec.port.speed_bps), params=params)
            flow = Flow(index, flow_spec, rp)
            self.flows.append(flow)
            if flow_spec.size_bytes:
                self.post(index, flow_spec.size_bytes, None)
            self._schedule_flow(nic, flow)
        for node in self.switches.values():
            node.flow_port = [None] * (2 * len(self.flows))
        for nic in self.nics.values():
            params = {**nic.spec.dcqcn, **override}
            nic.np = NotificationPoint(params["min_time_between_cnps"])
            nic.timer = us_ticks(params["rpg_time_reset"])

    # ---------------------------------------------------------------- messages

    def post(self, flow_index: int, nbytes: int, tag: object) -> None:
        """Queue a message of ``nbytes`` on flow ``flow_index`` (before :meth:`run` or from a
        callback).  Its frames carry the NIC's RoCE payload each, the last one the rest (a
        frame of its own length, at least 64 bytes; a message of 0 bytes is one such frame).
        ``on_message(engine, flow, tag, tick)`` runs when the responder has it all in order.
        """
        if not 0 <= flow_index < len(self.flows):
            raise TwinError(
                f"twin post: flow index. Expected: 0 to {len(self.flows) - 1} Actual: {flow_index}"
            )
        flow = self.flows[flow_index]
        if flow.end_psn == NEVER:
            raise TwinError(
                f"twin post: flow {flow.name}. Expected: a flow of messages (FlowSpec.size_bytes "
                "an int) Actual: an infinite flow (size_bytes None)"
            )
        if nbytes < 0:
            raise TwinError(f"twin post: message size. Expected: >= 0 bytes Actual: {nbytes}")
        nic = self.nics[flow.src]
        payload = nic.frame_bytes - ROCE_FRAME_OVERHEAD
        frames = max(1, -(-nbytes // payload))
        end = flow.end_psn + frames
        last = nbytes - (frames - 1) * payload
        if last != payload:
            length = max(last + ROCE_FRAME_OVERHEAD, MIN_FRAME_BYTES)
            flow.short[end - 1] = length
            self._add_length(length)
        flow.end_psn = end
        flow.msgs.append((end, tag, nbytes))
        flow.posted_at.append(self.clock.ticks)
        self._schedule_flow(nic, flow)

    def _schedule_flow(self, nic: Nic, flow: Flow) -> None:
        """Put a flow with something to send back on its NIC's heap (it left it when it had
        nothing left: an idle flow costs no events)."""
        now = self.clock.ticks
        if flow.in_heap or now >= flow.stop_at or (flow.snd_psn >= flow.end_psn and not flow.retx):
            return
        when = flow.start_at if flow.start_at > now else now
        flow.in_heap = True
        flow.next_at = when
        flows_push(nic.flows, flow)
        self._wake_nic(nic, when)

    def _message_done(self, flow: Flow) -> None:
        """The responder has the head message in full: count it, tell the caller."""
        _, tag, _ = flow.msgs.popleft()
        flow.messages_done += 1
        flow.completions.append(self.clock.ticks - flow.posted_at.popleft())
        if self.on_message is not None:
            self.on_message(self, flow, tag, self.clock.ticks)

    def finish(self) -> None:
        """End the run now (from a callback): no event after the current one runs, and the
        run closes at this tick (:attr:`end`, :attr:`duration_s`)."""
        self.stop_at_tick(self.clock.ticks)

    def stop_at_tick(self, tick: int) -> None:
        """End the run at ``tick`` (>= now), before any event of that tick that has not run;
        the earliest of several requests wins.  A tick past the run's end changes nothing."""
        if tick < self.clock.ticks:
            raise TwinError(
                f"twin stop_at_tick: Expected: >= the current tick {self.clock.ticks} "
                f"Actual: {tick}"
            )
        if tick >= self._stop_at:
            return
        self._stop_at = tick
        # seq -1 sorts before every event of the same tick.
        self._push(Event(tick, -1, HALT, None, None, 0, 0))

    # ---------------------------------------------------------------- events

    def _dispatch(self, event: Event) -> None:
        """Run one event's handler (the common kinds first)."""
        kind = event.kind
        if kind == SWITCH_RX:
            self._switch_rx(event.target, event.packet)  # type: ignore[arg-type]
        elif kind == PORT_TX:
            self._port_tx(event.target)
        elif kind == NIC_TX:
            self._nic_tx(event.target, event.arg)
        elif kind == HOST_RX:
            self._host_rx(event.target, event.packet)  # type: ignore[arg-type]
        elif kind == SWITCH_PFC_RX:
            self._switch_pfc_rx(event.target, event.arg, event.arg2)
        elif kind == NIC_PFC_RX:
            self._nic_pfc_rx(event.target, event.arg, event.arg2)
        elif kind == PORT_WAKE:
            self._port_wake(event.target, event.arg)
        elif kind == REFRESH:
            self._refresh(event.target, event.arg)
        elif kind == RTO:
            self._rto_fire(event.target)
        elif kind == SAMPLE:
            self._sample(event.arg, event.arg2)
        elif kind == WATCHDOG:
            self._poll_watchdog(event.target)
        elif kind == STORM:
            self._storm_tick(event.target)
        else:
            raise _Finished

    def run(self, duration_s: float) -> None:
        """Simulate from 0 to ``duration_s`` seconds of virtual time (once per engine)."""
        if self.events or self.samples:
            raise TwinError("twin: an engine runs once; build a new one for another run")
        self.duration_s = duration_s
        self.end = end = to_ticks(duration_s)
        interval = to_ticks(max(self.sample_every_s, duration_s / self.max_samples))
        self.sample_every_s = interval / TICKS_PER_SECOND
        self._at(0, SAMPLE, None, None, interval, 0)
        self._start_timers()
        clock = self.clock
        now = clock.ticks
        events = 0
        # The loop makes millions of short-lived frames and events and no reference cycles:
        # the cyclic collector would only walk them.  It is back on when the run returns.
        collecting = gc.isenabled()
        gc.disable()
        try:
            while True:
                event = self._take(end)
                if event is None:
                    break
                when = event.when
                if when < now:
                    clock.set(when)  # refuses, naming both times: an event scheduled in the past
                # The clock's own check, inlined: this loop runs once per event.
                clock.ticks = now = when
                self._dispatch(event)
                event.target = event.packet = None
                self._spare.append(event)
                events += 1
        except _Finished:
            self.events += events
            self._finished_at(clock.ticks)
            return
        finally:
            if collecting:
                gc.enable()
        self.events += events
        self.clock.set(max(self.clock.ticks, end))
        self._close(end)

    def _finished_at(self, tick: int) -> None:
        """The run stopped early (finish, stop_at_tick): it closes at ``tick`` (at least one
        tick, so that rates stay defined), with a last sample there."""
        self.end = end = max(tick, 1)
        self.clock.set(end)
        self.duration_s = end / TICKS_PER_SECOND
        if not self.samples or self.samples[-1].t_s < self.duration_s:
            self.samples.append(watch(self.ports, self.nics.values(), self.flows, end))
        self._close(end)

    def _start_timers(self) -> None:
        """The first events: each NIC's first send, each watchdog's first poll, the storm."""
        for nic in self.nics.values():
            if nic.flows:
                self._wake_nic(nic, nic.flows[0].next_at)
        for node in self.switches.values():
            for port in node.ports:
                if port.watchdog.enabled:
                    self._at(ticks_at_or_after(port.watchdog.next_poll), WATCHDOG, port)
        if self._storm is not None:
            name, start = self._storm
            self.nics[name].storm = True
            self._at(to_ticks(start), STORM, self.nics[name])

    def _close(self, end: int) -> None:
        """The run ends at ``end``: pauses still running count only up to it."""
        end_s = end / TICKS_PER_SECOND
        for node in self.switches.values():
            for port in node.ports:
                port.pause_meter.finish(end)
                port.depth_change(end, 0)
        for nic in self.nics.values():
            nic.pause.finish(end_s)

    # ---------------------------------------------------------------- host side

    def _wake_nic(self, nic: Nic, when: int) -> None:
        """Make sure the NIC runs at ``when`` (one pending wake per NIC, the earliest)."""
        if nic.wake_at <= when:
            return
        nic.wake_gen += 1
        nic.wake_at = when
        self._at(when, NIC_TX, nic, None, nic.wake_gen)

    def _nic_tx(self, nic: Nic, gen: int) -> None:
        if gen != nic.wake_gen:
            return  # superseded by an earlier wake
        nic.wake_at = NEVER
        now = self.clock.ticks
        if nic.busy_until > now:
            self._wake_nic(nic, nic.busy_until)
            return
        if nic.cnp_queue.count:
            control = nic.cnp_queue.popleft()
            if control.kind == CNP:
                nic.cnps_tx += 1
            packet: Packet = control
        else:
            data = self._next_data_packet(nic, now)
            if data is None:
                return
            packet = data
        length = packet.length
        done = now + (nic.frame_wire if length == nic.frame_bytes else nic.wire[length])
        nic.busy_until = done
        nic.tx_bytes += length + WIRE_OVERHEAD_BYTES
        self._at(done + nic.prop, SWITCH_RX, nic.peer, packet)
        if nic.cnp_queue.count:
            self._wake_nic(nic, done)
        elif nic.flows:
            first = nic.flows[0].next_at
            self._wake_nic(nic, done if done > first else first)

    def _next_data_packet(self, nic: Nic, now: int) -> Packet | None:
        """The data frame the NIC sends now, or None after arranging its next wake."""
        flows = nic.flows
        if not flows:
            return None
        if nic.honour_pause and nic.pause_end > now:
            # The XON (or the pause running out) wakes the NIC; the timer is the fallback.
            self._wake_nic(nic, nic.pause_end)
            return None
        flow = flows[0]
        next_at = flow.next_at
        if next_at > now:
            self._wake_nic(nic, next_at)
            return None
        psn = flow.snd_psn
        if flow.retx:
            psn = flow.retx_psn(psn)
        if now >= flow.stop_at or psn >= flow.end_psn:
            self._retire_head(nic, now)
            return None
        rp = flow.rp
        now_s = now / TICKS_PER_SECOND
        if flow.last_sent >= 0:
            # Paced by the rate *now* (a CNP may have cut it since the entry was made);
            # the RP's timers run during a long gap, as a NIC's do whether or not it sends.
            rp.advance(now_s)
            due = flow.last_sent + ceil(nic.frame_bits / rp.current_bps)
            if due > now:
                self._pace_head(nic, now, due)
                return None
        # Pacing counts every frame as a full one (a message's short last frame too).
        short = flow.short
        length = short.get(psn, nic.frame_bytes) if short else nic.frame_bytes
        rp.on_sent(now_s, length)
        flow.tx_bytes += length
        flow.tx_packets += 1
        flow.last_sent = now
        if psn == flow.max_psn:  # a first transmission
            flow.max_psn = flow.snd_psn = psn + 1
        else:
            flow.resending(psn, length)
        if not flow.rto_at:
            self._arm_rto(flow, now)
        # No credit for time spent paused or idle: the next gap starts now.
        gap = ceil(nic.frame_bits / rp.current_bps)
        flow.next_at = now + (gap if gap < nic.timer else nic.timer)
        flows_sift_head(flows)
        return Packet(flow, length, nic.roce_dscp, True, False, psn)

    # The two ways a NIC's head flow sends nothing now, out of _next_data_packet's frame path
    # (each runs once per flow stop or per rate cut, not per frame).

    def _retire_head(self, nic: Nic, now: int) -> None:
        """The head flow stopped, or has nothing posted left to send: off the heap (a post, a
        NAK or a timeout puts it back), and the NIC wakes for the next flow."""
        flows = nic.flows
        flows[0].in_heap = False
        flows_pop(flows)
        if flows:
            self._wake_nic(nic, max(now, flows[0].next_at))

    def _pace_head(self, nic: Nic, now: int, due: int) -> None:
        """The head flow's rate puts its next frame at ``due`` (at the latest a timer period
        away): re-timed on the heap, and the NIC wakes for whichever flow is due first."""
        flows = nic.flows
        limit = now + nic.timer
        flows[0].next_at = due if due < limit else limit
        flows_sift_head(flows)
        # Another flow may have been due while the NIC was busy: its entry is in the past, and
        # the NIC serves it now.
        first = flows[0].next_at
        self._wake_nic(nic, now if now > first else first)

    def _host_rx(self, nic: Nic, packet: Packet) -> None:
        flow = packet.flow
        if packet.cnp:
            self._control_rx(flow, packet)  # type: ignore[arg-type]
            return
        if packet.trimmed:
            self._trimmed_rx(nic, flow, packet.psn)
            return
        length = packet.length
        flow.rx_bytes += length
        flow.rx_packets += 1
        psn = packet.psn
        if psn == flow.epsn and not flow.ooo:
            # In order with nothing buffered (every frame of a lossless run comes here).
            flow.epsn = epsn = psn + 1
            flow.delivered_bytes += length
            if flow.nak_out:
                flow.nak_out = False
            msgs = flow.msgs
            if msgs.count and msgs.first()[0] == epsn:
                self._send_ack(nic, flow, ACK)
                self._message_done(flow)
            else:
                unacked = flow.unacked + 1
                flow.unacked = unacked
                if unacked >= ACK_EVERY:
                    self._send_ack(nic, flow, ACK)
        else:
            self._out_of_order(nic, flow, packet)
        if packet.ce:
            flow.rx_ce += 1
            if nic.np.on_ce(flow.index, self.clock.now()):
                spec = nic.spec
                nic.cnp_queue.append(Control(flow, CNP_BYTES, spec.cnp_dscp, CNP))
                self._wake_nic(nic, self.clock.ticks)

    # ---------------------------------------------------------------- loss recovery

    def _out_of_order(self, nic: Nic, flow: Flow, packet: Packet) -> None:
        """The responder's rules for a frame that is not the next one in order (or that
        fills a selective-repeat hole): duplicates are acknowledged again; go-back-N discards
        what follows a gap and NAKs the expected PSN once per gap (the spec allows one NAK
        outstanding); selective repeat keeps it and NAKs each new hole."""
        psn = packet.psn
        epsn = flow.epsn
        if psn < epsn:
            self._send_ack(nic, flow, ACK)  # a duplicate: the ACK it answers may be lost
            return
        if not self.selective:
            if not flow.nak_out:
                flow.nak_out = True
                self._send_ack(nic, flow, NAK)
            return
        if psn > epsn:
            ooo = flow.ooo
            if psn in ooo:
                self._send_ack(nic, flow, ACK)  # a duplicate held out of order
                return
            ooo[psn] = packet.length
            if len(ooo) > flow.ooo_peak:
                flow.ooo_peak = len(ooo)
            start = flow.rcv_high if flow.rcv_high > epsn else epsn
            if psn > start and self.nak_holes:
                self._send_ack(nic, flow, NAK, start, psn)
            if psn >= flow.rcv_high:
                flow.rcv_high = psn + 1
            return
        # psn == epsn with frames buffered: deliver it and every buffered frame after it.
        length = packet.length
        ooo = flow.ooo
        while True:
            epsn += 1
            flow.epsn = epsn
            flow.delivered_bytes += length
            if flow.msgs.count and flow.msgs.first()[0] == epsn:
                self._message_done(flow)
            if epsn not in ooo:
                break
            length = ooo.pop(epsn)
        self._send_ack(nic, flow, ACK)

    def _trimmed_rx(self, nic: Nic, flow: Flow, psn: int) -> None:
        """A trimmed frame (its header only) reached the responder: an explicit loss signal,
        answered at once as UEC's transport answers a trimmed packet -- selective repeat NAKs
        exactly that PSN; go-back-N NAKs the expected PSN once per gap.  Its payload is not
        delivered."""
        flow.trims_rx += 1
        epsn = flow.epsn
        if psn < epsn or psn in flow.ooo:
            return  # a copy of it already arrived whole
        if not self.selective:
            if not flow.nak_out:
                flow.nak_out = True
                self._send_ack(nic, flow, NAK)
            return
        # Not the holes before it: the trimmed header rode a strict queue and overtook the
        # full frames still queued behind it.
        self._send_ack(nic, flow, NAK_TRIM, psn, psn + 1)
        if psn >= flow.rcv_high:
            flow.rcv_high = psn + 1

    def _send_ack(self, nic: Nic, flow: Flow, kind: int, psn: int = -1, end: int = 0) -> None:
        """The responder's ACK or NAK (of the expected PSN; a selective NAK of ``psn`` to
        ``end``), a small packet back through the fabric on the CNP priority."""
        control = Control(flow, ACK_BYTES, nic.cnp_dscp, kind, psn if psn >= 0 else flow.epsn)
        if end:
            control.end = end
        flow.unacked = 0
        nic.cnp_queue.append(control)
        # At the end of the frame on the wire if the NIC is busy (a wake now would only
        # schedule that one).
        now = self.clock.ticks
        self._wake_nic(nic, nic.busy_until if nic.busy_until > now else now)

    def _control_rx(self, flow: Flow, control: Control) -> None:
        """At the sender: a CNP cuts the rate; an ACK moves the acknowledged PSN; a NAK also
        rewinds the sender to it (go-back-N) or queues the PSNs it asks for (selective); a
        trimmed frame's NAK cuts the rate as a CNP does (the twin's assumption: a sender that
        took no signal from trims would keep the bottleneck full of trimmed headers)."""
        kind = control.kind
        if kind == CNP:
            flow.cnps_rx += 1
            if self.reaction_point:
                flow.rp.on_cnp(self.clock.now())
            return
        if kind == ACK:
            flow.acknowledge(control.psn, self.clock.ticks + self.rto)
            return
        flow.naks += 1
        psn = control.psn
        if kind == NAK_TRIM and self.reaction_point:
            flow.rp.on_cnp(self.clock.now())
        if self.selective:
            # It names a hole, not the expected PSN: it acknowledges nothing.
            start = psn if psn > flow.acked else flow.acked
            flow.retx.extend(range(start, control.end))
        else:
            flow.acknowledge(psn, self.clock.ticks + self.rto)
            if psn < flow.snd_psn:
                flow.snd_psn = psn
        self._schedule_flow(self.nics[flow.src], flow)

    def _arm_rto(self, flow: Flow, now: int) -> None:
        flow.rto_at = now + self.rto
        if not flow.rto_pending:
            flow.rto_pending = True
            self._at(flow.rto_at, RTO, flow)

    def _rto_fire(self, flow: Flow) -> None:
        """The timer's event: re-armed at the deadline if ACKs moved it, else a timeout --
        the sender goes back to the first unacknowledged PSN (both recoveries)."""
        flow.rto_pending = False
        at = flow.rto_at
        now = self.clock.ticks
        if not at:
            return
        if at > now:
            flow.rto_pending = True
            self._at(at, RTO, flow)
            return
        if now >= flow.stop_at:
            flow.rto_at = 0  # a stopped QP sends nothing more
            return
        flow.timeouts += 1
        flow.retx.clear()
        flow.snd_psn = flow.acked
        self._arm_rto(flow, now)
        self._schedule_flow(self.nics[flow.src], flow)

    # ---------------------------------------------------------------- switch side

    def _switch_rx(self, port: SwitchPort, packet: Packet) -> None:
        node = port.switch
        key = packet.flow.index * 2 + packet.cnp
        tc = node.dscp_to_tc[packet.dscp]
        out = node.flow_port[key]
        if out is None:
            out = self._route(node, packet, key, tc)
        if out.watchdog.drop_traffic[tc]:
            out.watchdog.classes[tc].dropped_packets += 1
            out.watchdog_drops += 1
            return
        length = packet.length
        status = enqueue(
            out.queues[tc],
            port.ingress,
            out.ecn[tc],
            (packet, port.index, tc),
            length,
            packet.ect and not packet.ce,
            out.queue_limit,
        )
        if status == TRIMMED:
            status = self._trim(port, out, packet, tc)
            tc = out.trim_tc
            length = packet.length
        if not status:
            return  # headroom (lossless) or tail (lossy) drop, counted by the model
        now = self.clock.ticks
        if status & MARKED:
            packet.ce = True
        if status & XOFF_DUE:
            self._send_pfc(port, tc, PFC_QUANTA_MAX, now)
        out.depth_change(now, length)
        out.backlog += 1
        if not out.tx_pending:
            self._kick(out, now)

    def _route(self, node: SwitchNode, packet: Packet, key: int, tc: int) -> SwitchPort:
        """The egress port of a frame whose flow and direction has none kept: the flow's
        ECMP hash (kept for the flow: one list read per frame after the first); sprayed or
        adaptive data frames choose per frame among several next hops (nothing kept)."""
        choices = node.routes[packet.dst]
        mode = self.paths
        if mode == PATHS_FLOW or packet.cnp or len(choices) == 1:
            out = node.ports[ecmp_pick(node.name, choices, packet.flow.hash)]
            node.flow_port[key] = out
            return out
        count = len(choices)
        first = self.path_rng.randrange(count)
        if mode == PATHS_SPRAY:
            return node.ports[choices[first]]
        best = node.ports[choices[first]]
        for step in range(1, count):
            port = node.ports[choices[(first + step) % count]]
            if port.queues[tc].depth_bytes < best.queues[tc].depth_bytes:
                best = port
        return best

    def _trim(self, port: SwitchPort, out: SwitchPort, packet: Packet, tc: int) -> int:
        """A frame ``out``'s queue ``tc`` answered TRIMMED for: cut to its trim size,
        re-marked to the trim DSCP and offered to the trimmed frames' queue (the shared
        model's :func:`lossless.queues.admit_trimmed`); its status there (0: dropped)."""
        trim_tc = out.trim_tc
        cut = trimmed_length(packet.length, out.queues[tc].trim_bytes)
        packet.length = cut
        packet.dscp = out.trim_dscp
        packet.trimmed = True
        flow = packet.flow
        flow.trimmed += 1
        status = admit_trimmed(
            out.queues[tc],
            out.queues[trim_tc],
            port.ingress,
            (packet, port.index, trim_tc),
            cut,
            out.queue_limit,
        )
        if not status:
            flow.trim_dropped += 1
        return status

    def _kick(self, port: SwitchPort, now: int) -> None:
        """Something may be sendable: transmit now, or at the end of the frame on the wire.

        At most one end-of-frame event is pending per port (``tx_pending``), and none while
        the port has nothing queued.
        """
        if port.tx_pending or not port.backlog:
            return
        if port.busy_until > now:
            port.tx_pending = True
            self._at(port.busy_until, PORT_TX, port)
        else:
            self._port_tx(port)

    def _port_tx(self, port: SwitchPort) -> None:
        port.tx_pending = False
        if not port.backlog:
            return
        now = self.clock.ticks
        queues = port.queues
        eligible = port.eligible
        fill_eligible(
            eligible, queues, port.pause, port.watchdog.override_pause, now / TICKS_PER_SECOND
        )
        tc = port.scheduler.pick(queues, eligible)
        if tc is None:
            # Everything queued is paused: the XON or the end of the pause wakes the port.
            until = port.pause.paused_until
            wake = min(until[c] for c in range(NUM_CLASSES) if queues[c].packets.count)
            port.wake_gen += 1
            self._at(ticks_at_or_after(wake), PORT_WAKE, port, None, port.wake_gen)
            return
        queue = queues[tc]
        packet, in_index, in_tc = queue.pop()
        marker = port.ecn[tc]
        if (
            marker is not None
            and marker.at_dequeue
            and packet.ect
            and not packet.ce
            and mark_on_dequeue(queue, marker)
        ):
            packet.ce = True
        length = packet.length
        queue.tx_packets += 1
        queue.tx_bytes += length
        port.backlog -= 1
        port.depth_change(now, -length)
        in_port = port.switch.ports[in_index]
        if in_port.ingress.release(in_tc, length):
            self._send_pfc(in_port, in_tc, 0, now)
        if length != port.wire_length:
            # The frame length last seen: frames of one length follow each other (one lookup
            # per change, not per frame).
            port.wire_length = length
            port.wire_last = port.wire[length]
        done = now + port.wire_last
        port.busy_until = done
        port.tx_bytes += length + WIRE_OVERHEAD_BYTES
        peer = port.peer
        if type(peer) is Nic:
            self._at(done + port.prop, HOST_RX, peer, packet)
        else:
            self._at(done + port.prop, SWITCH_RX, peer, packet)
        if port.backlog:
            port.tx_pending = True
            self._at(done, PORT_TX, port)

    def _port_wake(self, port: SwitchPort, gen: int) -> None:
        if gen == port.wake_gen:
            self._kick(port, self.clock.ticks)

    # ---------------------------------------------------------------- sampling

    def _sample(self, interval: int, index: int) -> None:
        """Sample ``index``: ONSET_SPLIT per interval over the first ONSET_INTERVALS (the
        onset: queues build and the first cuts land within microseconds), then one per
        interval, on the same ticks as without the onset samples."""
        now = self.clock.ticks
        now_s = now / TICKS_PER_SECOND
        self.samples.append(watch(self.ports, self.nics.values(), self.flows, now))
        for flow in self.flows:
            # The RP keeps every rate change for the lab's reports; the twin samples rates
            # itself, and an unbounded list would grow with every rate change of every flow.
            flow.rp.history.clear()
        if self.on_sample is not None:
            self.on_sample(self, now_s)
        index += 1
        onset = ONSET_INTERVALS * ONSET_SPLIT
        if index <= onset:
            when = index * interval // ONSET_SPLIT
        else:
            when = (index - onset + ONSET_INTERVALS) * interval
        if when <= self.end:
            self._at(when, SAMPLE, None, None, interval, index)

"""The twin engine's pending events: the kinds of event, the two heaps they wait in, scheduling
(with reuse of events that already ran), taking the earliest one due, and listing those not run.

Events (:class:`agent.twin.events.Event`: a tick, a sequence number, a kind and its arguments)
wait in two heaps ordered by ``(time, seq)`` -- frames and port/NIC work in one, timers
(samples, watchdog polls, retransmission timeouts: many, far ahead, seldom due) in the other,
so that the busy heap stays shallow -- and :meth:`EventQueue._take` returns the earliest of
both; ``seq`` keeps events of the same instant in the order they were scheduled, so a run is
deterministic for a seed.  What an event's kind runs is the engine's
(:meth:`agent.twin.engine.Engine._dispatch`), which subclasses this class.

Compiled with the engine by mypyc (:mod:`lossless.compiled`): the engine's calls into this
class are the same native method calls as on its own methods, and the kinds are ``Final`` ints
that the compiler inlines (docs/twin-speed.md).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Final

from mypy_extensions import i64, mypyc_attr

from agent.twin.events import Event, event_order, heap_pop, heap_push, runs_before
from agent.twin.flows import NEVER
from agent.twin.frames import Packet
from lossless.clock import TickClock

# Kinds of events (Event.kind), and the handler each runs (Engine._dispatch).
HALT: Final = 0
NIC_TX: Final = 1
SWITCH_RX: Final = 2
HOST_RX: Final = 3
PORT_TX: Final = 4
PORT_WAKE: Final = 5
REFRESH: Final = 6
SWITCH_PFC_RX: Final = 7
NIC_PFC_RX: Final = 8
# Timers: from here on, kinds wait in a heap of their own (EventQueue._push).
SAMPLE: Final = 9
RTO: Final = 10
WATCHDOG: Final = 11
STORM: Final = 12
KIND_NAMES = (
    "_halt", "_nic_tx", "_switch_rx", "_host_rx", "_port_tx", "_port_wake", "_refresh",
    "_switch_pfc_rx", "_nic_pfc_rx", "_sample", "_rto_fire", "_poll_watchdog", "_storm_tick",
)  # fmt: skip


COMPILED: Final = not __file__.endswith(".py")
"""This module runs compiled (mypyc), not from its source (:mod:`lossless.compiled`)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class EventQueue:
    """The virtual clock and the events waiting for it (the engine is one)."""

    def __init__(self) -> None:
        self.clock = TickClock()
        # The event heap: native (compiled) or heapq's tuples (interpreted); see _push.
        self._native = COMPILED
        self._heap: list[Event] = []
        self._timers: list[Event] = []
        self._timer_next: i64 = NEVER  # the tick of the earliest timer (compiled heaps)
        self._queue: list[tuple[int, int, Event]] = []
        self._timer_queue: list[tuple[int, int, Event]] = []
        self._spare: list[Event] = []
        self._seq: i64 = 0

    def _at(  # noqa: PLR0913 -- once per event: an argument object would be an allocation per event (compiled: 7-11 ns by arguments, 65-75 ns through an object)
        self,
        when: i64,
        kind: i64,
        target: Any,
        packet: Packet | None = None,
        arg: i64 = 0,
        arg2: i64 = 0,
    ) -> None:
        seq = self._seq
        self._seq = seq + 1
        spare = self._spare
        if spare:
            # An event object that already ran: reused, not reallocated (millions per run).
            event = spare.pop()
            event.refill(when, seq, kind, target, packet, arg, arg2)
        else:
            event = Event(when, seq, kind, target, packet, arg, arg2)
        self._push(event)

    def _push(self, event: Event) -> None:
        """Into its heap: frames and port/NIC work in one, the timers (samples, watchdog
        polls, retransmission timeouts: many, far ahead, seldom due) in another, so that the
        busy heap stays shallow.  Both are ordered by ``(when, seq)``.

        Compiled, each heap is written out (:func:`agent.twin.events.heap_push`) so that every
        step compares native ints; interpreted, :mod:`heapq` (in C) on ``(when, seq, event)``
        tuples is the faster one.  Both give the same order: ``seq`` is unique.
        """
        if not self._native:
            queue = self._timer_queue if event.kind >= SAMPLE else self._queue
            heappush(queue, (event.when, event.seq, event))
        elif event.kind < SAMPLE:
            heap_push(self._heap, event)
        else:
            heap_push(self._timers, event)
            if event.when < self._timer_next:
                self._timer_next = event.when

    def _take(self, end: i64) -> Event | None:
        """The earliest event of both heaps, out of its heap, if it is due by ``end``."""
        if not self._native:
            return self._take_queued(end)
        heap = self._heap
        # Most events come before the next timer: one comparison of ticks says so.
        due = self._timer_next
        if due <= end and (not heap or due <= heap[0].when):
            timers = self._timers
            if not heap or runs_before(timers[0], heap[0]):
                event = heap_pop(timers)
                self._timer_next = timers[0].when if timers else NEVER
                return event
        if not heap or heap[0].when > end:
            return None
        return heap_pop(heap)

    def _take_queued(self, end: int) -> Event | None:
        queue = self._queue
        timers = self._timer_queue
        if timers and (not queue or timers[0] < queue[0]):
            queue = timers
        elif not queue:
            return None
        if queue[0][0] > end:
            return None
        return heappop(queue)[2]

    def pending_events(self) -> list[tuple[int, str, Packet | None]]:
        """The events not run, earliest first: ``(tick, kind, packet)``, the kind as the
        handler's name (``"_switch_rx"``, ``"_host_rx"``: a frame still on a wire)."""
        queued = [e for _, _, e in (*self._queue, *self._timer_queue)]
        events = sorted([*self._heap, *self._timers, *queued], key=event_order)
        return [(e.when, KIND_NAMES[e.kind], e.packet) for e in events]

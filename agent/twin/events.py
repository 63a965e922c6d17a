"""The twin's scheduled events and the binary heap they wait in, ordered by ``(when, seq)``.

An :class:`Event` is a tick, a sequence number that orders events of the same tick in the
order they were scheduled, a kind (the engine's handler to run, :mod:`agent.twin.engine`) and
its arguments.  Compiled (:mod:`lossless.compiled`), the engine keeps its events in these heaps,
which compare two machine ints per step; interpreted it uses :mod:`heapq` on tuples, the
faster one there (docs/twin-speed.md).
"""

from __future__ import annotations

from typing import Any, final

from mypy_extensions import i64

from agent.twin.frames import Packet


def runs_before(a: Event, b: Event) -> bool:
    """``a`` runs before ``b``: earlier, or as early and scheduled first."""
    return a.when < b.when or (a.when == b.when and a.seq < b.seq)


def heap_push(heap: list[Event], event: Event) -> None:
    """A binary heap on ``(when, seq)``, as :func:`heapq.heappush`."""
    heap.append(event)
    when = event.when
    seq = event.seq
    index: i64 = len(heap) - 1
    while index:
        parent: i64 = (index - 1) >> 1
        above = heap[parent]
        if above.when < when or (above.when == when and above.seq < seq):
            break
        heap[index] = above
        index = parent
    heap[index] = event


def heap_pop(heap: list[Event]) -> Event:
    """The earliest event, out of the heap, as :func:`heapq.heappop`."""
    last = heap.pop()
    size: i64 = len(heap)
    if not size:
        return last
    first = heap[0]
    when = last.when
    seq = last.seq
    index: i64 = 0
    child: i64 = 1
    while child < size:
        below = heap[child]
        right: i64 = child + 1
        if right < size:
            other = heap[right]
            if other.when < below.when or (other.when == below.when and other.seq < below.seq):
                child = right
                below = other
        if when < below.when or (when == below.when and seq < below.seq):
            break
        heap[index] = below
        index = child
        child = 2 * index + 1
    heap[index] = last
    return first


def event_order(event: Event) -> tuple[int, int]:
    return event.when, event.seq


@final
class Event:
    """One scheduled event: at tick ``when`` (``seq`` orders events of the same tick), run the
    handler of ``kind`` on ``target`` (a port, NIC or flow) with a frame or one or two ints."""

    __slots__ = ("arg", "arg2", "kind", "packet", "seq", "target", "when")

    # Native 64-bit ints when compiled: the heaps compare ``when`` and ``seq`` at every step,
    # a machine compare instead of a tagged-int one (ticks fit: NEVER is 2^61).
    when: i64
    seq: i64
    kind: i64
    arg: i64
    arg2: i64

    def __init__(  # noqa: PLR0913 -- the event's seven fields, set once per event (see refill)
        self, when: i64, seq: i64, kind: i64, target: Any, packet: Packet | None, arg: i64,
        arg2: i64,
    ) -> None:  # fmt: skip
        self.refill(when, seq, kind, target, packet, arg, arg2)

    def refill(  # noqa: PLR0913 -- seven fields per event: an argument object would be an allocation per event (compiled: 7-11 ns by arguments, 65-75 ns through an object)
        self, when: i64, seq: i64, kind: i64, target: Any, packet: Packet | None, arg: i64,
        arg2: i64,
    ) -> None:  # fmt: skip
        """Every field anew: an event that already ran is reused for the next one."""
        self.when = when
        self.seq = seq
        self.kind = kind
        self.target = target
        self.packet = packet
        self.arg = arg
        self.arg2 = arg2

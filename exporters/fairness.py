"""What one client address may take from the /metrics server besides connection slots
(those are :class:`exporters.server._Slots`): bcrypt checks, and page bytes in flight.

- **Password checks** (:class:`PasswordChecks`): bcrypt is CPU by design, so checks run a few
  at a time, at most ``per_address`` of them for one client address, and when one ends the
  waiting address served least recently goes next (an address never served first). A flood of
  wrong passwords from a few addresses holds at most their share; another client's login
  waits for at most the checks already running (issue #42: right after a start, with nothing
  remembered yet, a flood starved Prometheus' first login).
- **Responses in flight** (:class:`ResponseBudget`): the page bytes being sent to one address
  are capped; a request beyond it gets ``503`` at once, before anything is written. A client
  that reads slowly holds only its share of the server's threads, whatever it reconnects.

Both count a client by :func:`exporters.server.address_key` (an IPv6 client by its /64).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# bcrypt is CPU by design; more checks at once than a small host has cores only slow each one.
PASSWORD_CHECKS_AT_ONCE = 2
PASSWORD_CHECKS_PER_ADDRESS = 1
# Addresses whose turn order is remembered; past it, the least recently served are forgotten
# (a forgotten one goes first again, as a new one would).
REMEMBERED_ADDRESSES = 4096


@dataclass(eq=False)
class _Ticket:
    address: str
    arrived: float = field(default_factory=time.monotonic)


class PasswordChecks:
    """At most ``at_once`` bcrypt checks, ``per_address`` per client address, turns by the
    address served least recently; :meth:`close` refuses new turns and waits for the running
    ones (a thread left in bcrypt's C code when the interpreter exits aborts the process)."""

    def __init__(
        self, at_once: int = PASSWORD_CHECKS_AT_ONCE, per_address: int = PASSWORD_CHECKS_PER_ADDRESS
    ) -> None:
        self.at_once, self.per_address = at_once, per_address
        self._changed = threading.Condition()
        self._running: Counter[str] = Counter()
        self._waiting: dict[str, deque[_Ticket]] = {}
        self._served: OrderedDict[str, int] = OrderedDict()
        self._grants = itertools.count()
        self._closed = False

    @property
    def running(self) -> int:
        return sum(self._running.values())

    def _next(self) -> _Ticket | None:
        """The ticket whose turn it is, if a check may start now (callers hold the lock)."""
        if self.running >= self.at_once:
            return None
        heads = [
            (self._served.get(address, -1), queue[0].arrived, queue[0])
            for address, queue in self._waiting.items()
            if queue and self._running[address] < self.per_address
        ]
        return min(heads, key=lambda h: h[:2])[2] if heads else None

    def _leave(self, ticket: _Ticket) -> None:
        queue = self._waiting[ticket.address]
        queue.remove(ticket)
        if not queue:
            del self._waiting[ticket.address]

    def _grant(self, ticket: _Ticket) -> None:
        self._leave(ticket)
        self._running[ticket.address] += 1
        self._served[ticket.address] = next(self._grants)
        self._served.move_to_end(ticket.address)
        if len(self._served) > REMEMBERED_ADDRESSES:
            self._served.popitem(last=False)

    def _wait_turn(self, ticket: _Ticket, given_up: Callable[[], bool]) -> bool:
        with self._changed:
            self._waiting.setdefault(ticket.address, deque()).append(ticket)
            while True:
                if self._closed or given_up():
                    self._leave(ticket)
                    self._changed.notify_all()  # the next in line may be another's
                    return False
                if self._next() is ticket:
                    self._grant(ticket)
                    return True
                self._changed.wait(0.1)  # a cut does not notify: a short wait notices it

    @contextlib.contextmanager
    def turn(self, address: str, given_up: Callable[[], bool]) -> Iterator[bool]:
        """Yields True while a check may run, False if ``given_up`` (the connection was cut)
        or the server stops."""
        if not self._wait_turn(_Ticket(address), given_up):
            yield False
            return
        try:
            yield True
        finally:
            with self._changed:
                self._running[address] -= 1
                if not self._running[address]:
                    del self._running[address]
                self._changed.notify_all()

    def close(self, timeout_s: float) -> bool:
        """No new check; wait up to ``timeout_s`` for the running ones. True if none runs."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            while self.running and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            return not self.running


class ResponseBudget:
    """Page bytes being sent, per client address: one response always fits; more only while
    their sizes add up to at most ``per_address_bytes``."""

    def __init__(self, per_address_bytes: int) -> None:
        self.per_address_bytes = per_address_bytes
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, address: str, size: int) -> bool:
        with self._lock:
            held = self._held.get(address, 0)
            if held and held + size > self.per_address_bytes:
                return False
            self._held[address] = held + size
            return True

    def give_back(self, address: str, size: int) -> None:
        with self._lock:
            left = self._held.get(address, 0) - size
            if left > 0:
                self._held[address] = left
            else:
                self._held.pop(address, None)

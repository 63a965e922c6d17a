"""One Subscribe RPC after its request was accepted: ONCE, POLL or STREAM.

gNMI specification 3.5 (openconfig/gnmi ``rpc/gnmi/gnmi-specification.md``):

- ONCE: every subscribed value once, then ``sync_response``, then the RPC ends;
- POLL: the same at the start and again for each ``poll`` message the client sends;
- STREAM: SAMPLE subscriptions send every value each ``sample_interval`` (with
  ``suppress_redundant`` only the changed ones, all again every ``heartbeat_interval``);
  ON_CHANGE subscriptions send a value when it changes -- the lab has no change events, so it
  compares samples every :data:`ON_CHANGE_POLL_S` (sonic-gnmi polls field paths every 200 ms
  too) -- and everything again every ``heartbeat_interval``. A path that disappears (a queue
  no longer watched) is sent as a ``delete``. ``sync_response`` follows the first complete
  set; with ``updates_only`` that first set is left out.

Every subscription sends one notification per sample, its timestamp when the counters were
read (ns since the epoch), and the lab's fault knobs shape it on the way out.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.faults import GnmiFaults
from lab.mgmt.gnmi.nos import SECOND_NS, GnmiError, Mode, NosTree
from lab.mgmt.gnmi.paths import GPath
from lab.mgmt.gnmi.snapshot import Sampler, View

ON_CHANGE_POLL_S = 0.2
SubMode = gnmi_pb2.SubscriptionMode
Write = Callable[[gnmi_pb2.SubscribeResponse], Awaitable[None]]
Read = Callable[[], Awaitable[object]]


@dataclass
class Subscription:
    """One accepted subscription and what was last sent for it."""

    query: GPath
    mode: int  # SubscriptionMode.SAMPLE or ON_CHANGE
    interval_s: float = 1.0
    suppress: bool = False
    heartbeat_s: float = 0.0
    due: float = 0.0
    heartbeat_due: float = math.inf
    last: dict[bytes, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """An accepted SubscriptionList."""

    mode: int  # SubscriptionList.Mode
    encoding: int
    updates_only: bool
    prefix: gnmi_pb2.Path  # of every notification
    subscriptions: list[Subscription]


def shaped(
    notification: gnmi_pb2.Notification, tree: NosTree, faults: GnmiFaults, first: bool
) -> gnmi_pb2.Notification:
    """The notification as the fault knobs make it (a copy; unchanged when none is set)."""
    if not faults.active():
        return notification
    out = gnmi_pb2.Notification()
    out.CopyFrom(notification)
    out.timestamp -= int(faults.stale_s * SECOND_NS)
    if faults.malformed:
        broken = [tree.malformed(u) for u in out.update]
        del out.update[:]
        out.update.extend(broken)
    if faults.oversized_bytes and first and out.update:
        out.update[0].val.CopyFrom(gnmi_pb2.TypedValue(string_val="x" * faults.oversized_bytes))
    if faults.unknown_path:
        stray = gnmi_pb2.Update(path=paths.to_proto(tree.stray_path()))
        stray.val.uint_val = 1
        out.update.append(stray)
    return out


class Session:
    """Sends what one Subscribe RPC's plan asks for."""

    def __init__(
        self,
        plan: Plan,
        tree: NosTree,
        sampler: Sampler,
        faults: GnmiFaults,
        io: tuple[Read, Write],
    ) -> None:
        self.plan = plan
        self.tree = tree
        self.sampler = sampler
        self.faults = faults
        self.read, self.write = io
        self.sent_first = False
        self.on_change_poll_s = ON_CHANGE_POLL_S

    async def run(self) -> None:
        if self.plan.mode == Mode.ONCE:
            await self._everything()
        elif self.plan.mode == Mode.POLL:
            await self._poll()
        else:
            await self._stream()

    # ------------------------------------------------------------------ ONCE and POLL

    async def _everything(self) -> None:
        view = await self.sampler.view()
        for sub in self.plan.subscriptions:
            updates = self.tree.updates(sub.query, view, self.plan.encoding)
            if updates:
                await self._notify(view, updates, [])
        await self._sync()

    async def _poll(self) -> None:
        await self._everything()
        while True:
            request = await self.read()
            if request is grpc.aio.EOF:
                return
            if not isinstance(request, gnmi_pb2.SubscribeRequest) or not request.HasField("poll"):
                raise GnmiError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "a POLL subscription takes only poll messages after its SubscriptionList",
                )
            await self._everything()

    # ------------------------------------------------------------------ STREAM

    async def _stream(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for sub in self.plan.subscriptions:
            sub.due = start
            sub.heartbeat_due = start + sub.heartbeat_s if sub.heartbeat_s else math.inf
        first = True
        while True:
            now = loop.time()
            self._check_reset(now - start)
            view = await self.sampler.view()
            for sub in self.plan.subscriptions:
                await self._emit(sub, view, now, first)
            if first:
                await self._sync()
                first = False
            wake = min(self._next_wake(now), self._reset_at(start))
            await asyncio.sleep(max(0.0, wake - loop.time()))

    def _check_reset(self, elapsed: float) -> None:
        after = self.faults.reset_after_s
        if after and elapsed >= after:
            raise GnmiError(
                grpc.StatusCode.UNAVAILABLE, f"stream reset after {after:g}s (lab fault)"
            )

    def _reset_at(self, start: float) -> float:
        return start + self.faults.reset_after_s if self.faults.reset_after_s else math.inf

    def _next_wake(self, now: float) -> float:
        wake = math.inf
        for sub in self.plan.subscriptions:
            due = sub.due if sub.mode == SubMode.SAMPLE else now + self.on_change_poll_s
            wake = min(wake, due, sub.heartbeat_due)
        return wake

    async def _emit(self, sub: Subscription, view: View, now: float, first: bool) -> None:
        heartbeat = now >= sub.heartbeat_due
        sampling = sub.mode == SubMode.SAMPLE
        if sampling and now < sub.due and not first and not heartbeat:
            return
        current = {
            u.path.SerializeToString(deterministic=True): u
            for u in self.tree.updates(sub.query, view, self.plan.encoding)
        }
        send, deletes = self._to_send(sub, current, first, heartbeat)
        sub.last = {k: u.val.SerializeToString() for k, u in current.items()}
        if sampling and now >= sub.due:
            # Keep the cadence; a sample late by more than an interval starts it afresh.
            following = sub.due + sub.interval_s
            sub.due = following if following > now else now + sub.interval_s
        if heartbeat:
            sub.heartbeat_due = now + sub.heartbeat_s
        if send or deletes:
            await self._notify(view, send, deletes)

    def _to_send(
        self,
        sub: Subscription,
        current: dict[bytes, gnmi_pb2.Update],
        first: bool,
        heartbeat: bool,
    ) -> tuple[list[gnmi_pb2.Update], list[gnmi_pb2.Path]]:
        """What this round sends of the current values, and the paths now gone."""
        if first:
            return ([] if self.plan.updates_only else list(current.values())), []
        gone = [gnmi_pb2.Path.FromString(k) for k in sub.last if k not in current]
        if heartbeat or (sub.mode == SubMode.SAMPLE and not sub.suppress):
            return list(current.values()), gone
        changed = [u for k, u in current.items() if sub.last.get(k) != u.val.SerializeToString()]
        return changed, gone

    # ------------------------------------------------------------------ sending

    async def _notify(
        self, view: View, updates: list[gnmi_pb2.Update], deletes: list[gnmi_pb2.Path]
    ) -> None:
        notification = gnmi_pb2.Notification(
            timestamp=view.taken_ns, prefix=self.plan.prefix, update=updates, delete=deletes
        )
        notification = shaped(notification, self.tree, self.faults, not self.sent_first)
        self.sent_first = True
        await self.write(gnmi_pb2.SubscribeResponse(update=notification))

    async def _sync(self) -> None:
        await self.write(gnmi_pb2.SubscribeResponse(sync_response=True))

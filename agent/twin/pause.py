"""The twin engine's PFC handlers: XOFF and XON out of a switch port (and their refresh while
the ingress stays over its threshold), a pause honoured where it arrives -- by a switch port
(:class:`lossless.pfc.ReceivedPause`) or a NIC (:class:`lossless.pfc.PauseHonouring`) --, the
PFC watchdog's polls and its drop action, and a NIC that storms (XOFF, forever).

Every decision is the shared model's (:mod:`lossless`); this class turns them into events: a
PFC frame leaves after the frame in flight on its port and takes one 64-byte frame time plus
the link's propagation delay; a pause's end, the next refresh and the watchdog's next poll are
woken at the first tick at or after the model's deadline.  What a pause lets go again (a
port's transmission, a NIC's next frame) is the engine's (:class:`agent.twin.engine.Engine`,
the subclass that runs these handlers).  Compiled with the engine (:mod:`lossless.compiled`).
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from agent.twin.eventqueue import NIC_PFC_RX, REFRESH, STORM, SWITCH_PFC_RX, WATCHDOG, EventQueue
from agent.twin.nic import Nic
from agent.twin.switch import SwitchPort
from lossless.clock import TICKS_PER_SECOND, ticks_at_or_after
from lossless.pfc import PFC_QUANTA_MAX


@mypyc_attr(allow_interpreted_subclasses=True)
class PauseHandlers(EventQueue):
    """The PFC handlers of the engine (its subclass), over its queue of events."""

    def _kick(self, port: SwitchPort, now: int) -> None:
        """The port may send again (the engine's transmit path)."""
        raise NotImplementedError

    def _wake_nic(self, nic: Nic, when: int) -> None:
        """The NIC runs at ``when`` (the engine's send path)."""
        raise NotImplementedError

    def _nic_pfc_rx(self, nic: Nic, tc: int, quanta: int) -> None:
        if tc != nic.roce_priority or not nic.honour_pause:
            return
        nic.pause.receive(quanta, self.clock.now())
        nic.pause_end = ticks_at_or_after(nic.pause.paused_until)
        if not quanta and (nic.flows or nic.cnp_queue.count):
            self._wake_nic(nic, self.clock.ticks)

    def _storm_tick(self, nic: Nic) -> None:
        """A stormy NIC: XOFF on the RoCE priority, again at half the pause time, forever."""
        now = self.clock.ticks
        nic.pfc_tx_xoff += 1
        self._at(now + nic.pfc_frame + nic.prop, SWITCH_PFC_RX, nic.peer, None,
                 nic.roce_priority, PFC_QUANTA_MAX)  # fmt: skip
        self._at(now + nic.storm_period, STORM, nic)

    def _send_pfc(self, port: SwitchPort, tc: int, quanta: int, now: int) -> None:
        """XOFF (quanta > 0) or XON for ``tc`` out of ``port`` to its upstream neighbour."""
        ingress = port.ingress
        if quanta:
            ingress.xoff_sent(tc, now / TICKS_PER_SECOND)
            port.pfc_tx_xoff += 1
            self._schedule_refresh(port)
        else:
            ingress.xon_sent(tc)
            port.pfc_tx_xon += 1
        start = port.busy_until if port.busy_until > now else now
        arrive = start + port.pfc_frame + port.prop
        peer = port.peer
        if type(peer) is Nic:
            self._at(arrive, NIC_PFC_RX, peer, None, tc, quanta)
        else:
            self._at(arrive, SWITCH_PFC_RX, peer, None, tc, quanta)

    def _schedule_refresh(self, port: SwitchPort) -> None:
        """One pending refresh per port, at the model's next_refresh (earlier ones win)."""
        due = port.ingress.next_refresh()
        if due is None:
            return
        when = ticks_at_or_after(due)
        if port.refresh_at >= 0 and port.refresh_at <= when:
            return
        port.refresh_at = when
        port.refresh_gen += 1
        self._at(when, REFRESH, port, None, port.refresh_gen)

    def _refresh(self, port: SwitchPort, gen: int) -> None:
        if gen != port.refresh_gen:
            return
        port.refresh_at = -1
        now = self.clock.ticks
        for tc in port.ingress.refresh_due(now / TICKS_PER_SECOND):
            self._send_pfc(port, tc, PFC_QUANTA_MAX, now)
        self._schedule_refresh(port)

    def _switch_pfc_rx(self, port: SwitchPort, tc: int, quanta: int) -> None:
        now = self.clock.ticks
        now_s = now / TICKS_PER_SECOND
        port.pfc_rx += 1
        pause = port.pause
        pause.receive(tc, quanta, now_s, port.watchdog.override_pause[tc])
        if tc == port.metered_tc:
            port.pause_meter.update(now, ticks_at_or_after(pause.paused_until[tc]))
        if not pause.is_paused(tc, now_s):
            self._kick(port, now)

    def _poll_watchdog(self, port: SwitchPort) -> None:
        now = self.clock.ticks
        watchdog = port.watchdog
        queued = [q.packets.count > 0 for q in port.queues]
        for event in watchdog.poll(now / TICKS_PER_SECOND, port.pause, queued):
            if not event.detected:
                continue
            tc = event.priority
            if watchdog.override_pause[tc]:
                port.pause.clear(tc)
                if tc == port.metered_tc:
                    port.pause_meter.update(now, now)
            if watchdog.drop_traffic[tc]:
                self._flush(port, tc, now)
        self._kick(port, now)
        self._at(ticks_at_or_after(watchdog.next_poll), WATCHDOG, port)

    def _flush(self, port: SwitchPort, tc: int, now: int) -> None:
        """Watchdog drop action: discard the class's queue, releasing its ingress charges."""
        queue = port.queues[tc]
        while queue.packets.count:
            packet, in_index, in_tc = queue.pop()
            port.backlog -= 1
            port.depth_change(now, -packet.length)
            port.watchdog.classes[tc].dropped_packets += 1
            port.watchdog_drops += 1
            in_port = port.switch.ports[in_index]
            if in_port.ingress.release(in_tc, packet.length):
                self._send_pfc(in_port, in_tc, 0, now)

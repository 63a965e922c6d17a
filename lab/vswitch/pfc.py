"""PFC state: ingress buffer accounting that generates XOFF/XON, and received-pause timers.

Generation (IEEE 802.1Qbb): the switch counts, per (ingress port, priority), the bytes that
arrived on that port with that priority and are still queued anywhere.  Above ``xoff_bytes``
it sends an XOFF (quanta 0xFFFF) for that priority out of the ingress port and refreshes it
before the pause would expire; below ``xon_bytes`` it sends XON (quanta 0).  Between XOFF and
the upstream actually stopping, frames keep arriving; they are absorbed by ``headroom_bytes``
and only dropped (and counted as headroom drops) beyond ``xoff + headroom``.

Reception: a PFC frame pauses egress class p of the receiving port for quanta x 512 bit
times at that port's speed, for every priority whose class-enable bit is set (quanta 0 =
resume now).  The frame is always counted (rx_xoff / rx_xon per priority), but it is only
acted on for the priorities the port has PFC enabled for -- ``pfc_enabled`` and in
``no_drop``, the data-plane form of EOS ``priority-flow-control on`` +
``priority-flow-control priority N no-drop``.  802.1Qbb enables PFC per priority, and vendor
guides describe the receiving side the same way: the peer "stops sending packets carrying an
802.1p priority within the list specified by" its ``priority-flow-control no-drop dot1p``
configuration, with PFC enabled on both ends (HPE Comware interface configuration guide,
"Configuring PFC on an Ethernet interface"); SR Linux likewise enables PFC "on a
per-interface and per-priority basis".  (No EOS document stating the receive side for a
PFC-disabled port was available; counting and ignoring is the conservative reading.)  A
frame whose class-enable vector is empty changes nothing and counts nothing (sonic-mgmt
issue #6733).
"""

from __future__ import annotations

from lab.vswitch.config import NUM_CLASSES
from lab.vswitch.packet import PFC_QUANTA_MAX, pause_duration

# Refresh an outstanding XOFF when this fraction of its pause time has elapsed, well before
# the upstream's timer runs out (a late refresh would let a burst through into headroom).
REFRESH_FRACTION = 0.5


class IngressAccounting:
    """Per-priority buffer use of one ingress port and its PFC generation state."""

    __slots__ = (
        "buffered_bytes",
        "headroom_drops",
        "last_xoff_sent",
        "refresh_interval",
        "watermark_bytes",
        "xoff_active",
    )

    def __init__(self, speed_bps: float) -> None:
        self.buffered_bytes = [0] * NUM_CLASSES
        self.watermark_bytes = [0] * NUM_CLASSES
        self.headroom_drops = [0] * NUM_CLASSES
        self.xoff_active = [False] * NUM_CLASSES
        self.last_xoff_sent = [0.0] * NUM_CLASSES
        self.refresh_interval = pause_duration(PFC_QUANTA_MAX, speed_bps) * REFRESH_FRACTION

    def next_refresh(self) -> float | None:
        """Monotonic time the earliest outstanding XOFF must be refreshed, if any."""
        times = [
            self.last_xoff_sent[p] + self.refresh_interval
            for p in range(NUM_CLASSES)
            if self.xoff_active[p]
        ]
        return min(times) if times else None


class ReceivedPause:
    """Pause timers of one port's egress classes, set by PFC frames received on that port."""

    __slots__ = ("last_xoff_rx", "paused_since", "paused_until")

    def __init__(self) -> None:
        self.paused_until = [0.0] * NUM_CLASSES
        # When the current uninterrupted pause began (None = not paused); the watchdog
        # measures storms from it.
        self.paused_since: list[float | None] = [None] * NUM_CLASSES
        self.last_xoff_rx = [0.0] * NUM_CLASSES

    def apply(self, priority: int, quanta: int, now: float, speed_bps: float) -> None:
        """Honour a received pause (``quanta`` > 0) or resume (``quanta`` == 0)."""
        if quanta == 0:
            self.paused_until[priority] = 0.0
            self.paused_since[priority] = None
            return
        if self.paused_until[priority] <= now:
            self.paused_since[priority] = now
        self.paused_until[priority] = now + pause_duration(quanta, speed_bps)

    def is_paused(self, priority: int, now: float) -> bool:
        """True while the pause timer of ``priority`` runs."""
        return self.paused_until[priority] > now

    def expire(self, now: float) -> None:
        """Forget pauses whose timer ran out (keeps ``paused_since`` meaning "continuously")."""
        for p in range(NUM_CLASSES):
            if self.paused_since[p] is not None and self.paused_until[p] <= now:
                self.paused_since[p] = None

    def clear(self, priority: int) -> None:
        """Drop any pause of ``priority`` (the watchdog stops honouring it)."""
        self.paused_until[priority] = 0.0
        self.paused_since[priority] = None

"""PFC (IEEE 802.1Qbb): the pause timer, ingress accounting with XOFF/XON and headroom, and
pause honouring on both the switch's egress and a NIC's sender.

Pause time (IEEE Std 802.1Qbb-2011, clause 36 / IEEE 802.3 Annex 31D; the PFC frame carries
one 16-bit ``pause_time`` per priority "in pause_quantum (512-bit times)", AMD/Xilinx PG051
"Priority-Based Flow Control Frames"; SR Linux QoS guide, "Priority-based Flow Control":
"the time to transmit 512 bits (and where a quanta value of 0 indicates to unpause)"):
a frame received at time t with ``quanta`` q > 0 for priority p stops priority p until
``t + q * 512 / speed``; a later frame *replaces* the running timer (it is a new deadline, not
an extension); q = 0 (XON) resumes at once.  Only priorities whose class-enable bit is set
are affected; 0xFFFF is the longest pause (3.355 ms at 10 Gb/s).

Generation and headroom (802.1Qbb's delay budget; SONiC buffer docs; "pause threshold >
resume threshold, leaving headroom above the pause threshold", Cisco/besthub "Understanding
Ethernet Flow Control and Congestion Management"): the switch counts, per (ingress port,
priority), the bytes that arrived on that port with that priority and are still queued
anywhere.  Above ``xoff_bytes`` it sends an XOFF (quanta 0xFFFF) for that priority out of the
ingress port and refreshes it before the pause would expire; once the count is below
``xon_bytes`` (or empty) it sends XON (quanta 0).  Between XOFF and the upstream actually
stopping, frames keep arriving; they are absorbed by ``headroom_bytes`` and only dropped (and
counted as headroom drops) beyond ``xoff + headroom``.  A lossless class never tail-drops.

Reception on a switch port: the frame is always counted by its owner, but only acted on for
priorities the port has PFC enabled for -- ``pfc_enabled`` and in ``pfc_priorities``, the
data-plane form of EOS ``priority-flow-control on`` + ``priority-flow-control priority N no-drop``.
802.1Qbb enables PFC per priority, and vendor guides describe the receiving side the same
way: the peer "stops sending packets carrying an 802.1p priority within the list specified
by" its ``priority-flow-control no-drop dot1p`` configuration, with PFC enabled on both ends
(HPE Comware interface configuration guide, "Configuring PFC on an Ethernet interface");
SR Linux likewise enables PFC "on a per-interface and per-priority basis".  A frame whose
class-enable vector is empty changes nothing (sonic-mgmt issue #6733).  While the PFC
watchdog overrides a class the pause is not honoured, but its arrival still counts for the
watchdog's restoration timer.

Reception on a NIC (:class:`PauseHonouring`): a RoCE NIC stops the paused priority's sender
for the same time; it also accounts the time it was held (``paused_s``), counting a replaced
pause only up to its replacement.
"""

from __future__ import annotations

from typing import Final

from lossless.config import NUM_CLASSES, BufferConfig

PAUSE_QUANTUM_BITS: Final = 512
"""One pause quantum: 512 bit times at the port's speed (802.1Qbb / 802.3 Annex 31B)."""
PFC_QUANTA_MAX: Final = 0xFFFF
"""The largest pause_time field: what an XOFF carries."""

# Refresh an outstanding XOFF when this fraction of its pause time has elapsed, well before
# the upstream's timer runs out (a late refresh would let a burst through into headroom).
REFRESH_FRACTION: Final = 0.5


def pause_duration(quanta: int, speed_bps: float) -> float:
    """Seconds of pause requested by ``quanta`` (each quantum = 512 bit times at the speed)."""
    return quanta * PAUSE_QUANTUM_BITS / speed_bps


class IngressAccounting:
    """Per-priority buffer use of one ingress port and its PFC generation state.

    The owner sends the frames: :meth:`charge` and :meth:`release` say when an XOFF or an XON
    is due, :meth:`xoff_sent` / :meth:`xon_sent` record that it went out.
    """

    __slots__ = (
        "buffered_bytes",
        "headroom_drops",
        "headroom_limit",
        "last_xoff_sent",
        "lossless",
        "refresh_interval",
        "watermark_bytes",
        "xoff_active",
        "xoff_bytes",
        "xon_bytes",
    )

    def __init__(self, speed_bps: float) -> None:
        self.buffered_bytes = [0] * NUM_CLASSES
        self.watermark_bytes = [0] * NUM_CLASSES
        self.headroom_drops = [0] * NUM_CLASSES
        self.xoff_active = [False] * NUM_CLASSES
        self.last_xoff_sent = [0.0] * NUM_CLASSES
        self.refresh_interval = pause_duration(PFC_QUANTA_MAX, speed_bps) * REFRESH_FRACTION
        self.lossless = [False] * NUM_CLASSES
        self.xoff_bytes = self.xon_bytes = self.headroom_limit = 0

    def configure(self, buffer: BufferConfig, lossless: list[bool]) -> list[int]:
        """Take new thresholds and lossless priorities (from the next packet on).

        Returns the priorities with an XOFF outstanding that are no longer lossless: the
        owner must release the upstream with an XON for each, in this order.
        """
        self.lossless = list(lossless)
        self.xoff_bytes = buffer.xoff_bytes
        self.xon_bytes = buffer.xon_bytes
        self.headroom_limit = buffer.xoff_bytes + buffer.headroom_bytes
        return [tc for tc in range(NUM_CLASSES) if self.xoff_active[tc] and not lossless[tc]]

    def charge(self, tc: int, length: int) -> bool:
        """Account an admitted frame (see :func:`lossless.queues.enqueue` for admission);
        True when an XOFF for ``tc`` is due now."""
        total = self.buffered_bytes[tc] + length
        self.buffered_bytes[tc] = total
        if total > self.watermark_bytes[tc]:
            self.watermark_bytes[tc] = total
        return self.lossless[tc] and total > self.xoff_bytes and not self.xoff_active[tc]

    def release(self, tc: int, length: int) -> bool:
        """A charged frame left the switch (sent or dropped); True when an XON is due now."""
        remaining = self.buffered_bytes[tc] - length
        self.buffered_bytes[tc] = remaining
        return self.xoff_active[tc] and (remaining < self.xon_bytes or remaining == 0)

    def xoff_sent(self, tc: int, now: float) -> None:
        """An XOFF for ``tc`` went out at ``now`` (first or refresh)."""
        self.xoff_active[tc] = True
        self.last_xoff_sent[tc] = now

    def xon_sent(self, tc: int) -> None:
        """An XON for ``tc`` went out."""
        self.xoff_active[tc] = False

    def refresh_due(self, now: float) -> list[int]:
        """Priorities whose outstanding XOFF must be sent again at ``now``."""
        return [
            tc
            for tc in range(NUM_CLASSES)
            if self.xoff_active[tc] and now >= self.last_xoff_sent[tc] + self.refresh_interval
        ]

    def next_refresh(self) -> float | None:
        """Time the earliest outstanding XOFF must be refreshed, if any."""
        times = [
            self.last_xoff_sent[p] + self.refresh_interval
            for p in range(NUM_CLASSES)
            if self.xoff_active[p]
        ]
        return min(times) if times else None


class ReceivedPause:
    """Pause timers of one switch port's egress classes, set by PFC frames received on it."""

    __slots__ = ("honour", "last_xoff_rx", "paused_since", "paused_until", "speed_bps")

    def __init__(self, speed_bps: float) -> None:
        self.speed_bps = speed_bps
        # Which priorities this port acts on (PFC enabled and no-drop); see the module doc.
        self.honour = [False] * NUM_CLASSES
        self.paused_until = [0.0] * NUM_CLASSES
        # When the current uninterrupted pause began (None = not paused); the watchdog
        # measures storms from it.
        self.paused_since: list[float | None] = [None] * NUM_CLASSES
        self.last_xoff_rx = [0.0] * NUM_CLASSES

    def configure(self, honour: list[bool]) -> None:
        """Act on pause for these priorities only; a pause of any other one ends now."""
        self.honour = list(honour)
        for tc in range(NUM_CLASSES):
            if not honour[tc]:
                self.clear(tc)

    def receive(self, priority: int, quanta: int, now: float, overridden: bool) -> None:
        """One pause-time field of a received PFC frame whose class-enable bit is set.

        ``overridden``: the watchdog has taken this class out of PFC (the frame then only
        feeds the watchdog's restoration timer).
        """
        if not self.honour[priority]:
            return
        if quanta:
            self.last_xoff_rx[priority] = now
        if overridden:
            return
        self.apply(priority, quanta, now)

    def apply(self, priority: int, quanta: int, now: float) -> None:
        """Honour a pause (``quanta`` > 0, replacing any running one) or resume (``quanta`` 0)."""
        if quanta == 0:
            self.paused_until[priority] = 0.0
            self.paused_since[priority] = None
            return
        if self.paused_until[priority] <= now:
            self.paused_since[priority] = now
        self.paused_until[priority] = now + pause_duration(quanta, self.speed_bps)

    def is_paused(self, priority: int, now: float) -> bool:
        """True while the pause timer of ``priority`` runs."""
        return self.paused_until[priority] > now

    def blocked(self, now: float, override: list[bool]) -> list[bool]:
        """Effective pause per class: paused and not overridden by the watchdog."""
        until = self.paused_until
        return [until[tc] > now and not override[tc] for tc in range(NUM_CLASSES)]

    def expire(self, now: float) -> None:
        """Forget pauses whose timer ran out (keeps ``paused_since`` meaning "continuously")."""
        for p in range(NUM_CLASSES):
            if self.paused_since[p] is not None and self.paused_until[p] <= now:
                self.paused_since[p] = None

    def clear(self, priority: int) -> None:
        """Drop any pause of ``priority`` (the watchdog stops honouring it)."""
        self.paused_until[priority] = 0.0
        self.paused_since[priority] = None


class PauseHonouring:
    """A NIC sender's pause state for the one priority it sends on, and the time it was held.

    ``paused_s`` counts only time paused while the sender ran: a replaced pause counts up to
    its replacement, an XON ends the count, and :meth:`finish` removes what would lie past
    the end of the run.
    """

    __slots__ = ("paused_s", "paused_until", "speed_bps")

    def __init__(self, speed_bps: float) -> None:
        self.speed_bps = speed_bps
        self.paused_until = 0.0
        self.paused_s = 0.0

    def receive(self, quanta: int, now: float) -> None:
        """The pause-time field for this sender's priority of a PFC frame received at ``now``."""
        new_until = now + pause_duration(quanta, self.speed_bps)
        if self.paused_until > now:
            self.paused_s -= self.paused_until - now  # replaced: count only the new one
        self.paused_s += max(0.0, new_until - now)
        self.paused_until = new_until if quanta else now

    def is_paused(self, now: float) -> bool:
        """True while the pause runs."""
        return self.paused_until > now

    def finish(self, end: float) -> None:
        """The sender stopped at ``end``: the rest of a running pause was never waited out."""
        if self.paused_until > end:
            self.paused_s -= self.paused_until - end

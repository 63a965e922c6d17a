"""PFC watchdog: detects a priority paused for too long, mitigates, restores.

Semantics follow EOS (``priority-flow-control pause watchdog`` timeout / polling-interval /
recovery-time / action; Arista TOI "PFC Watchdog", arista.com/en/support/toi/tag/pfc) and the
SONiC PFC watchdog it mirrors (sonic-mgmt docs/pfcwd/PFCWD_MMU_Change.md; SONiC ``config
pfcwd start --action drop|forward|alert DETECTION_TIME --restoration-time``: "detect if a
lossless queue is receiving a PFC storm from its link partner and is in a paused state over
T0 time ... If no PFC frame is received over the T1 period, then the PFC storm restoration
re-enables the PFC on the queue", Netberg SONiC "PFC (Priority Flow Control) Watchdog"):

* detection: checked every ``polling_ms``; a class that has been paused continuously for
  ``detection_ms`` while it has packets queued is in a storm (so it is declared within
  the detection time + one polling interval of the pause starting);
* mitigation, per ``action``:
  ``drop``    -- discard the queue's packets and every new one, ignore pause for the class;
  ``forward`` -- (EOS "no-drop") ignore pause for the class and keep forwarding;
  ``alert``   -- only count and report, the pause is still honoured;
* restoration: once no pause frame has been received for the class for ``restoration_ms``
  (checked at the next poll), the class is operational again and honours pause again.

The watchdog reports what happened (:class:`WatchdogEvent`); logging and acting on the queue
(flush, clearing the pause) are its owner's.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from lossless.config import NUM_CLASSES, WatchdogConfig
from lossless.pfc import ReceivedPause

State = Literal["operational", "stormed"]
OPERATIONAL: State = "operational"
STORMED: State = "stormed"


class WatchdogEvent(NamedTuple):
    """A state change found by a poll."""

    priority: int
    detected: bool  # True: a storm was declared; False: the class was restored
    paused_s: float  # how long the class had been paused when the storm was declared


class ClassWatchdog:
    """Watchdog state and counters of one (port, class)."""

    __slots__ = ("dropped_packets", "state", "storms_detected", "storms_restored")

    def __init__(self) -> None:
        self.state: State = OPERATIONAL
        self.storms_detected = 0
        self.storms_restored = 0
        self.dropped_packets = 0

    def clear_counters(self) -> None:
        """Zero the counters; the state is kept."""
        self.storms_detected = self.storms_restored = self.dropped_packets = 0


class PortWatchdog:
    """The watchdog of one port: effective config, per-class state and the poll timer."""

    __slots__ = ("classes", "config", "drop_traffic", "next_poll", "override_pause")

    def __init__(self, config: WatchdogConfig, now: float) -> None:
        self.classes = [ClassWatchdog() for _ in range(NUM_CLASSES)]
        self.config = config
        self.next_poll = now + config.polling_ms / 1000.0
        # Hot-path flags, kept in sync with the state by _set_state.
        self.override_pause = [False] * NUM_CLASSES
        self.drop_traffic = [False] * NUM_CLASSES

    @property
    def enabled(self) -> bool:
        """Whether the watchdog runs on this port."""
        return self.config.enabled

    def reconfigure(self, config: WatchdogConfig, now: float) -> list[int]:
        """Apply a new effective config; returns classes restored because it was disabled."""
        self.config = config
        self.next_poll = now + config.polling_ms / 1000.0
        restored = []
        for tc, cls in enumerate(self.classes):
            if cls.state == STORMED and not config.enabled:
                self._set_state(tc, OPERATIONAL)
                cls.storms_restored += 1
                restored.append(tc)
            elif cls.state == STORMED:
                self._set_state(tc, STORMED)  # the action may have changed
        return restored

    def poll(self, now: float, pause: ReceivedPause, queued: list[bool]) -> list[WatchdogEvent]:
        """Run detection/restoration; returns the state changes, in priority order."""
        cfg = self.config
        self.next_poll = now + cfg.polling_ms / 1000.0
        if not cfg.enabled:
            return []
        timeout = cfg.detection_ms / 1000.0
        recovery = cfg.restoration_ms / 1000.0
        pause.expire(now)
        events = []
        for tc, cls in enumerate(self.classes):
            if cls.state == OPERATIONAL:
                since = pause.paused_since[tc]
                if since is not None and queued[tc] and now - since >= timeout:
                    cls.storms_detected += 1
                    self._set_state(tc, STORMED)
                    events.append(WatchdogEvent(tc, True, now - since))
            elif now - pause.last_xoff_rx[tc] >= recovery:
                cls.storms_restored += 1
                self._set_state(tc, OPERATIONAL)
                events.append(WatchdogEvent(tc, False, 0.0))
        return events

    def _set_state(self, tc: int, state: State) -> None:
        self.classes[tc].state = state
        stormed = state == STORMED
        self.override_pause[tc] = stormed and self.config.action != "alert"
        self.drop_traffic[tc] = stormed and self.config.action == "drop"

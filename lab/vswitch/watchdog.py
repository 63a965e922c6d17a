"""PFC watchdog: detects a priority paused for too long, mitigates, restores.

Semantics follow EOS (``priority-flow-control pause watchdog`` timeout / polling-interval /
recovery-time / action; Arista TOI "PFC Watchdog", arista.com/en/support/toi/tag/pfc) and the
SONiC PFC watchdog it mirrors (sonic-mgmt docs/pfcwd/PFCWD_MMU_Change.md):

* detection: checked every ``polling_ms``; a class that has been paused continuously for
  ``timeout_ms`` while it has packets queued is in a storm (so it is declared within
  timeout + one polling interval of the pause starting);
* mitigation, per ``action``:
  ``drop``    -- discard the queue's packets and every new one, ignore pause for the class;
  ``no-drop`` -- (SONiC "forward") ignore pause for the class and keep forwarding;
  ``alert``   -- only count and log, the pause is still honoured;
* restoration: once no pause frame has been received for the class for ``recovery_ms``
  (checked at the next poll), the class is operational again and honours pause again.
"""

from __future__ import annotations

import logging
from typing import Literal

from lab.vswitch.config import NUM_CLASSES, WatchdogConfig
from lab.vswitch.pfc import ReceivedPause

log = logging.getLogger("lab.vswitch.watchdog")

State = Literal["operational", "stormed"]
OPERATIONAL: State = "operational"
STORMED: State = "stormed"


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

    __slots__ = ("classes", "config", "drop_traffic", "ifname", "next_poll", "override_pause")

    def __init__(self, ifname: str, config: WatchdogConfig, now: float) -> None:
        self.ifname = ifname
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

    def poll(self, now: float, pause: ReceivedPause, queued: list[bool]) -> list[int]:
        """Run detection/restoration; returns the classes that just entered a storm."""
        cfg = self.config
        self.next_poll = now + cfg.polling_ms / 1000.0
        if not cfg.enabled:
            return []
        timeout = cfg.timeout_ms / 1000.0
        recovery = cfg.recovery_ms / 1000.0
        pause.expire(now)
        stormed_now = []
        for tc, cls in enumerate(self.classes):
            if cls.state == OPERATIONAL:
                since = pause.paused_since[tc]
                if since is not None and queued[tc] and now - since >= timeout:
                    cls.storms_detected += 1
                    self._set_state(tc, STORMED)
                    stormed_now.append(tc)
                    log.warning(
                        "%s priority %d: PFC storm detected (paused %.0f ms), action %s",
                        self.ifname,
                        tc,
                        (now - since) * 1000,
                        cfg.action,
                    )
            elif now - pause.last_xoff_rx[tc] >= recovery:
                cls.storms_restored += 1
                self._set_state(tc, OPERATIONAL)
                log.warning("%s priority %d: PFC storm restored", self.ifname, tc)
        return stormed_now

    def _set_state(self, tc: int, state: State) -> None:
        self.classes[tc].state = state
        stormed = state == STORMED
        self.override_pause[tc] = stormed and self.config.action != "alert"
        self.drop_traffic[tc] = stormed and self.config.action == "drop"

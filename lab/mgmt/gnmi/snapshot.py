"""What a gNMI sample reads: one data-plane counters snapshot (and its config), shared.

Every subscription of every RPC samples through one :class:`Sampler`: a snapshot younger than
``max_age_s`` (100 ms) is handed out again, and concurrent callers wait for the one read in
flight, so three collectors sampling at the same moment cost the control socket one
``counters`` request, not three. The data plane's config (lossless priorities, the watchdog,
buffer thresholds) changes only when a NOS commits, so it is re-read at most once a second.

A :class:`View` answers the questions every NOS tree asks of a snapshot, by data-plane port
name (``eth3``); the NOS modules name the ports as their NOS does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.mgmt import names
from lab.mgmt.dataplane_handle import Dataplane

PRIORITIES = range(8)
SHARE_S = 0.1
CONFIG_S = 1.0


def _ints(values: Any) -> list[int]:
    given = list(values) if isinstance(values, list) else []
    return [int(given[i]) if i < len(given) else 0 for i in PRIORITIES]


@dataclass(frozen=True)
class View:
    """One sample: the ``counters`` object, the data plane's config, when it was read
    (ns since the epoch) and the ports served (data-plane names, in port order)."""

    counters: dict[str, Any]
    config: dict[str, Any]
    taken_ns: int
    ports: tuple[str, ...]

    def port(self, ifname: str) -> dict[str, Any]:
        found: dict[str, Any] = self.counters.get("ports", {}).get(ifname, {})
        return found

    def queue(self, ifname: str, queue: int) -> dict[str, Any]:
        found: dict[str, Any] = self.port(ifname).get("queues", {}).get(str(queue), {})
        return found

    def watchdog_counters(self, ifname: str, queue: int) -> dict[str, Any]:
        found: dict[str, Any] = self.queue(ifname, queue).get("watchdog", {})
        return found

    def pfc(self, ifname: str, key: str) -> list[int]:
        """Per priority: ``rx_xoff``, ``rx_xon``, ``tx_xoff`` or ``tx_xon`` frames."""
        return _ints(self.port(ifname).get("pfc", {}).get(key))

    def pfc_frames(self, ifname: str, direction: str) -> list[int]:
        """PFC frames per priority, XOFF and XON together (``rx`` or ``tx``), as the SAI
        per-priority PFC packet counters count them."""
        xoff, xon = self.pfc(ifname, f"{direction}_xoff"), self.pfc(ifname, f"{direction}_xon")
        return [a + b for a, b in zip(xoff, xon, strict=True)]

    def ingress(self, ifname: str, key: str) -> list[int]:
        """Per priority: ``buffered_bytes``, ``watermark_bytes`` or ``headroom_drops``."""
        return _ints(self.port(ifname).get("ingress", {}).get(key))

    def paused(self, ifname: str) -> list[bool]:
        given = self.port(ifname).get("paused", [])
        return [bool(given[i]) if i < len(given) else False for i in PRIORITIES]

    def queue_drops(self, ifname: str, queue: int) -> int:
        """Packets the queue lost: tail drops and the watchdog's drops."""
        q = self.queue(ifname, queue)
        return int(q.get("tail_drops", 0)) + int(q.get("watchdog", {}).get("dropped_packets", 0))

    def _port_qos(self, ifname: str) -> dict[str, Any]:
        found: dict[str, Any] = self.config.get("qos", {}).get("ports", {}).get(ifname) or {}
        return found

    def lossless(self, ifname: str) -> list[int]:
        """The port's lossless (PFC) priorities."""
        qos = self._port_qos(ifname)
        return sorted(qos.get("pfc_priorities", [])) if qos.get("pfc_enabled") else []

    def watchdog(self, ifname: str) -> dict[str, Any] | None:
        """The port's effective PFC watchdog when it is on (its own, else the switch's)."""
        own = self._port_qos(ifname).get("watchdog")
        effective = own if own is not None else self.config.get("qos", {}).get("watchdog", {})
        return effective if effective and effective.get("enabled") else None

    def watched(self, ifname: str) -> list[int]:
        """The queues the watchdog watches: the lossless ones, when the watchdog is on."""
        return self.lossless(ifname) if self.watchdog(ifname) else []

    def xoff_bytes(self, ifname: str) -> int:
        """The port's ingress XOFF threshold (its own buffer, else the switch's)."""
        for entry in self.config.get("ports", []):
            if entry.get("ifname") == ifname and entry.get("buffer"):
                return int(entry["buffer"].get("xoff_bytes", 0))
        return int(self.config.get("buffer", {}).get("xoff_bytes", 0))


def port_index(ifname: str) -> int:
    """``eth3`` -> 3."""
    return names.interface_number(names.eos_name(ifname))


@dataclass
class Sampler:
    """Counters (and config) read once for everyone who samples at about the same time."""

    dataplane: Dataplane
    ports: Sequence[str]
    share_s: float = SHARE_S
    config_s: float = CONFIG_S
    clock: Callable[[], float] = time.monotonic
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _view: View | None = None
    _read_at: float = float("-inf")
    _config: dict[str, Any] = field(default_factory=dict)
    _config_at: float = float("-inf")

    async def view(self) -> View:
        """A snapshot at most ``share_s`` old (:class:`DataplaneError` when unreachable)."""
        async with self._lock:
            now = self.clock()
            if self._view is not None and now - self._read_at < self.share_s:
                return self._view
            if now - self._config_at >= self.config_s:
                self._config = await self.dataplane.get_config()
                self._config_at = now
            counters = await self.dataplane.counters()
            self._view = View(counters, self._config, time.time_ns(), tuple(self.ports))
            self._read_at = self.clock()
            return self._view

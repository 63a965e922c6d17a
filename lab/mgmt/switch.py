"""What every NOS personality of one lab switch shares: its ports, clock, and the one path to
the data plane.

The manager holds the running configuration in the shared model (:mod:`lab.mgmt.model`) and
is the only place that pushes to the data plane: a candidate is translated
(:mod:`lab.mgmt.dataplane_qos`), sent with ``set_qos``, and becomes the running configuration
only if the data plane accepted it. All changes are serialised by one lock. What a NOS keeps
of its own -- EOS' config sessions and startup-config, SONiC's CONFIG_DB, NVUE's revisions --
lives in its package (``lab/mgmt/<nos>/``) and reaches the data plane through
:meth:`SwitchManager.install`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from lab.mgmt.dataplane_handle import Dataplane, DataplaneError
from lab.mgmt.dataplane_qos import TranslationError, to_vswitch_qos
from lab.mgmt.lldp import PortLink
from lab.mgmt.model import SwitchConfig

T = TypeVar("T")


class ConfigRefused(Exception):
    """The data plane cannot run a configuration (it, or its translation, refused it).

    The message says why in plain words; each NOS's terminal words it as that NOS does (EOS
    ``% ...``, NVUE ``Error: Invalid config: ...``, SONiC's GCU failure)."""


class TimerHandle(Protocol):
    """Something that can be cancelled (``asyncio.TimerHandle``)."""

    def cancel(self) -> None:
        """Do not fire."""


class Clock(Protocol):
    """Time source and timer scheduler (a fake one drives the unit tests)."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def schedule(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Call ``callback`` after ``delay`` seconds."""
        ...


class LoopClock:
    """:class:`Clock` on the running asyncio loop."""

    def now(self) -> float:
        """``loop.time()``."""
        return asyncio.get_running_loop().time()

    def schedule(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """``loop.call_later``."""
        return asyncio.get_running_loop().call_later(delay, callback)


@dataclass(frozen=True)
class PortInfo:
    """A switch port as the CLI shows it."""

    name: str  # EOS name, Ethernet1
    speed_bps: int | None = None
    link: PortLink | None = None  # MTU and LLDP neighbour, from the lab's links.json


class SwitchManager:
    """The running configuration of one lab switch and the one path to its data plane."""

    def __init__(
        self, name: str, ports: list[PortInfo], dataplane: Dataplane, clock: Clock
    ) -> None:
        self.name = name
        self.ports = ports
        self.dataplane = dataplane
        self.clock = clock
        self.booted_at = time.time()
        self.running = self.factory_config()
        self._applied_qos: dict[str, Any] | None = None
        self._lock = asyncio.Lock()

    def factory_config(self) -> SwitchConfig:
        """Nothing configured: hostname = switch name, every port present."""
        return SwitchConfig.empty(self.name, [p.name for p in self.ports])

    async def _apply(self, candidate: SwitchConfig, force: bool = False) -> None:
        """Push ``candidate`` to the data plane; it becomes running-config only if accepted."""
        try:
            qos = to_vswitch_qos(candidate)
        except TranslationError as exc:
            raise ConfigRefused(str(exc)) from None
        if force or qos != self._applied_qos:
            try:
                await self.dataplane.set_qos(qos)
            except DataplaneError as exc:
                raise ConfigRefused(f"Data plane refused the change: {exc}") from None
            self._applied_qos = qos
        self.running = candidate

    async def edit_running(self, edit: Callable[[SwitchConfig], T]) -> T:
        """Apply ``edit`` to a copy of running-config and commit it through the data plane
        (:class:`ConfigRefused` if refused; an exception of ``edit`` changes nothing)."""
        async with self._lock:
            candidate = self.running.clone()
            result = edit(candidate)
            await self._apply(candidate)
            return result

    async def install(self, candidate: SwitchConfig, force: bool = False) -> SwitchConfig:
        """Make ``candidate`` the running model through the data plane (:class:`ConfigRefused`
        if refused); returns the configuration it replaced. ``force`` pushes even an unchanged
        payload (a start, a rollback)."""
        async with self._lock:
            before = self.running
            await self._apply(candidate, force=force)
            return before

    def applied_qos(self) -> dict[str, Any] | None:
        """The last ``set_qos`` payload the data plane accepted."""
        return self._applied_qos

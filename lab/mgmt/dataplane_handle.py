"""Async access to the data plane, only through the vswitch control socket.

The control protocol (newline-delimited JSON over a unix stream socket) is the data-plane
engineer's ``lab.vswitch.client.VswitchClient``; its calls block, so they run in a worker
thread, one at a time (the client keeps a single connection).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from lab.vswitch.client import VswitchClient, VswitchError


class DataplaneError(RuntimeError):
    """The data plane refused a request or cannot be reached."""


class Dataplane(Protocol):
    """What the management plane needs from a data plane (a fake one in unit tests)."""

    async def ping(self) -> bool:
        """True if the data plane answers."""
        ...

    async def get_config(self) -> dict[str, Any]:
        """The data plane's config (ports, speeds, qos...)."""
        ...

    async def set_qos(self, qos: dict[str, Any]) -> None:
        """Replace the QoS config; :class:`DataplaneError` if refused (then nothing changed)."""
        ...

    async def counters(self) -> dict[str, Any]:
        """The ``counters`` object."""
        ...

    async def clear_counters(self) -> None:
        """Zero the cumulative counters."""
        ...


class VswitchDataplane:
    """:class:`Dataplane` over a ``lab.vswitch`` control socket."""

    def __init__(self, control_path: str, timeout: float = 5.0) -> None:
        self._client = VswitchClient(control_path, timeout=timeout)
        self._lock = asyncio.Lock()

    async def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            try:
                response = await asyncio.to_thread(self._client.request, message)
            except (VswitchError, OSError, ValueError) as exc:
                raise DataplaneError(f"data plane unreachable: {exc}") from None
        if not response.get("ok"):
            raise DataplaneError(str(response.get("error", "refused without a reason")))
        return response

    async def ping(self) -> bool:
        """True if the switch answers ``ping``."""
        try:
            await self._call({"cmd": "ping"})
        except DataplaneError:
            return False
        return True

    async def get_config(self) -> dict[str, Any]:
        """``get_config``."""
        config: dict[str, Any] = (await self._call({"cmd": "get_config"}))["config"]
        return config

    async def set_qos(self, qos: dict[str, Any]) -> None:
        """``set_qos``."""
        await self._call({"cmd": "set_qos", "qos": qos})

    async def counters(self) -> dict[str, Any]:
        """``counters``."""
        counters: dict[str, Any] = (await self._call({"cmd": "counters"}))["counters"]
        return counters

    async def clear_counters(self) -> None:
        """``clear_counters``."""
        await self._call({"cmd": "clear_counters"})

    def close(self) -> None:
        """Close the control connection."""
        self._client.close()

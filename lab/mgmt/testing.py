"""Test doubles: a data plane that validates like the real one, and a manual clock.

:class:`FakeDataplane` checks every ``set_qos`` payload with the data plane's own pydantic
contract (``lab.vswitch.config.with_qos``), so unit tests catch translation mistakes without
root, namespaces or a running switch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.mgmt.dataplane_handle import DataplaneError
from lab.vswitch.config import ConfigError, parse_config, with_qos


def fake_switch_config(name: str, ports: list[str], speed_bps: int = 10_000_000) -> dict[str, Any]:
    """A minimal valid ``lab.vswitch`` config with ``ports`` (data-plane names)."""
    return {
        "name": name,
        "ports": [
            {
                "ifname": port,
                "mac": f"02:00:00:00:00:{i:02x}",
                "ipv4": f"198.18.{i}.1/24",
                "speed_bps": speed_bps,
            }
            for i, port in enumerate(ports, start=1)
        ],
        "buffer": {
            "xoff_bytes": 30000,
            "xon_bytes": 15000,
            "headroom_bytes": 20000,
            "queue_limit_bytes": 60000,
        },
    }


@dataclass
class FakeDataplane:
    """An in-memory :class:`lab.mgmt.dataplane_handle.Dataplane`."""

    config: dict[str, Any]
    counters_snapshot: dict[str, Any] = field(default_factory=dict)
    fail_next_set_qos: str | None = None
    set_qos_calls: list[dict[str, Any]] = field(default_factory=list)

    async def ping(self) -> bool:
        """Always up."""
        return True

    async def get_config(self) -> dict[str, Any]:
        """The (validated) switch config."""
        return self.config

    async def set_qos(self, qos: dict[str, Any]) -> None:
        """Validate like the real switch; keep it if valid."""
        if self.fail_next_set_qos is not None:
            message, self.fail_next_set_qos = self.fail_next_set_qos, None
            raise DataplaneError(message)
        try:
            validated = with_qos(parse_config(self.config), qos)
        except ConfigError as exc:
            raise DataplaneError(str(exc)) from None
        self.config = validated.to_json_dict()
        self.set_qos_calls.append(qos)

    async def counters(self) -> dict[str, Any]:
        """Whatever the test put in :attr:`counters_snapshot`."""
        return self.counters_snapshot

    async def clear_counters(self) -> None:
        """Forget the counters."""
        self.counters_snapshot = {}


@dataclass
class _Timer:
    when: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeClock:
    """A clock that moves only when told; timers are recorded, not run."""

    time: float = 1000.0
    timers: list[_Timer] = field(default_factory=list)

    def now(self) -> float:
        """Current fake time."""
        return self.time

    def schedule(self, delay: float, callback: Callable[[], None]) -> _Timer:
        """Record a timer."""
        timer = _Timer(self.time + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward (the test then calls ``SwitchManager.run_expired_timers``)."""
        self.time += seconds

    def armed(self) -> list[_Timer]:
        """Timers neither cancelled nor past."""
        return [t for t in self.timers if not t.cancelled and t.when > self.time]

"""Test doubles: a data plane that validates like the real one, a manual clock, and a lab
switch's SSH plane running in the test's own process.

:class:`FakeDataplane` checks every ``set_qos`` payload with the data plane's own pydantic
contract (``lab.vswitch.config.with_qos``), so unit tests catch translation mistakes without
root, namespaces or a running switch. :class:`FakeSwitch` is a personality on them (its timers
on the fake clock); :class:`SshSwitchThread` serves any personality over real SSH (netmiko, the
agent's drivers) on a fake data plane.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from lab.mgmt import names
from lab.mgmt.dataplane_handle import DataplaneError
from lab.mgmt.persistence import load_or_create_host_key
from lab.mgmt.personality import Personality, PersonalityFactory
from lab.mgmt.ssh_server import AuthSettings, SshSettings, start_ssh_server
from lab.mgmt.switch import LoopClock, PortInfo, SwitchManager
from lab.vswitch.config import ConfigError, parse_config, with_qos

T = TypeVar("T")
P = TypeVar("P")


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


class FakeSwitch(Generic[P]):
    """A personality (``create``) of switch ``leaf1`` on a :class:`FakeDataplane` and a
    :class:`FakeClock`, its ports ``ports``: driven a terminal line at a time, its timers fired
    when the test moves the clock (:meth:`expire`)."""

    def __init__(
        self,
        create: Callable[[SwitchManager, Path | None], P],
        ports: list[PortInfo],
        state_dir: Path | None = None,
        background: Callable[[P], set[asyncio.Future[None]]] = lambda _: set(),
    ) -> None:
        self.state_dir = state_dir
        self.background = background
        name = "leaf1"
        dataplane_ports = [names.dataplane_name(p.name) for p in ports]
        self.dataplane = FakeDataplane(fake_switch_config(name, dataplane_ports))
        self.clock = FakeClock()
        self.manager = SwitchManager(name, ports, self.dataplane, self.clock)
        self.personality = create(self.manager, state_dir)

    def qos(self) -> dict[str, Any]:
        """The QoS the data plane runs now (validated by the fake)."""
        qos: dict[str, Any] = self.dataplane.config["qos"]
        return qos

    async def expire(self, seconds: float) -> None:
        """Move the clock, fire the timers that ran out (as the event loop would) and wait for
        the work they started (the personality's tasks ``background`` names)."""
        self.clock.advance(seconds)
        for timer in self.clock.timers:
            if not timer.cancelled and timer.when <= self.clock.time:
                timer.cancelled = True
                timer.callback()
        await asyncio.gather(*self.background(self.personality))


@dataclass(frozen=True)
class ServedSwitch:
    """The switch an in-process SSH plane serves: the NOS it speaks (a personality factory,
    e.g. :class:`lab.mgmt.eos.personality.EosPersonality`), its ports and who may log in."""

    create_personality: PersonalityFactory
    ports: list[PortInfo]
    auth: AuthSettings
    name: str = "leaf1"


class SshSwitchThread:
    """``python -m lab.mgmt``'s SSH plane on its own event-loop thread in this process: the
    personality on a :class:`FakeDataplane` and the real asyncio clock, its files (host key,
    saved configuration) under ``state``, listening on a free loopback port (:attr:`port`).
    :meth:`stop` ends it; :meth:`call` runs a coroutine on its loop."""

    def __init__(self, state: Path, served: ServedSwitch) -> None:
        self.state = state
        self.served = served
        self.port = 0
        ports = [names.dataplane_name(p.name) for p in served.ports]
        self.dataplane = FakeDataplane(fake_switch_config(served.name, ports))
        self.manager = SwitchManager(served.name, served.ports, self.dataplane, LoopClock())
        self.personality: Personality = served.create_personality(self.manager, state)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError(f"{served.name}: the SSH plane did not start within 10 s")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        await self.personality.start()
        settings = SshSettings(
            "127.0.0.1", 0, load_or_create_host_key(self.state), self.served.auth
        )
        server = await start_ssh_server(settings, self.personality)
        self.port = server.get_port()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        server.close()
        await self.personality.close()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def stop(self) -> None:
        """Stop listening, close the personality and end the thread."""
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

"""gNMI telemetry for the exporter: which switches stream, their subscriptions on one asyncio
thread, and what each delivers into the :class:`~exporters.store.SnapshotStore`.

``--telemetry`` chooses per switch: ``ssh`` polls every switch (the platform's ``show``
commands), ``gnmi`` subscribes every switch whose NOS the agent reads over gNMI (one that it
cannot -- NX-OS, a switch with only an SSH key -- reads down with reason ``unsupported``), and
``auto`` asks each such switch for gNMI's Capabilities at start and subscribes where it answers,
polling the others over SSH. Never both for one counter: a switch is read by one transport.

A stream that fails marks its switch down with the reason (the counters it read stay, as they
are monotonic), then subscribes again after a backoff with jitter; nothing a switch sends can
block another switch or a scrape (the store is swapped under a lock, scrapes read a snapshot).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.device.gnmi import profile_for
from agent.device.gnmi.base import GnmiProfile
from agent.device.gnmi.stream import (
    BACKOFF_RESET_AFTER_S,
    Backoff,
    Endpoint,
    StreamFailure,
    Subscriber,
    probe,
    subscribe_once,
)
from agent.device.state import Counters
from agent.errors import AgentError
from agent.intent.model import Device
from common.yamlsource import read_bounded
from exporters.fasttext import device_block
from exporters.store import SnapshotStore

log = logging.getLogger("exporters")

TELEMETRY_MODES = ("ssh", "gnmi", "auto")
# A CA bundle larger than this is not a CA bundle.
MAX_CA_BYTES = 1 << 20
# How long --telemetry auto waits for a switch's Capabilities answer at start.
PROBE_TIMEOUT_S = 5.0
# The first subscriptions are spread over this long (or one interval, if shorter), so that a
# thousand switches are not all asked for their first, full sample in the same instant.
START_SPREAD_S = 2.0
# At most this many subscriptions wait for their first sample at once. A first sample is a
# switch's whole tree (a 64-port SONiC switch: ~0.5 MB, tens of ms to fold on the one
# thread); a fleet asked all at once has its later first samples wait on the thread past the
# first-sample deadline, retry, and never settle (docs/measurements/2026-12-03-gnmi-fleet.md).
START_CONCURRENCY = 32


@dataclass(frozen=True)
class GnmiTarget:
    """One switch to subscribe to: where, how to read its NOS's paths, and how often."""

    endpoint: Endpoint
    profile: GnmiProfile
    interval_s: float


@dataclass(frozen=True)
class Unsupported:
    """A switch the gNMI transport cannot read, and why."""

    device: str
    why: str


def gnmi_target(device: Device, interval_s: float, plaintext: bool) -> GnmiTarget | Unsupported:
    """The switch's :class:`GnmiTarget`; :class:`Unsupported` where gNMI cannot read it. A CA
    file that cannot be read is an :class:`AgentError` naming the device and field."""
    profile = profile_for(device.platform)
    if profile is None:
        return Unsupported(device.name, f"the agent reads {device.platform} over SSH only")
    password = device.credentials.resolve_password(device.name) if device.credentials else None
    if password is None or device.username is None or device.host is None:
        return Unsupported(device.name, "gNMI needs a host, a username and a password")
    settings = device.gnmi
    port = settings.port if settings and settings.port else profile.default_port
    ca = settings.tls.ca if settings else None
    endpoint = Endpoint(
        device=device.name,
        address=f"[{device.host}]:{port}" if ":" in device.host else f"{device.host}:{port}",
        username=device.username,
        password=password.get_secret_value(),
        server_name=(settings.tls.server_name if settings else None) or None,
        ca_pem=_read_ca(device.name, ca) if ca is not None else None,
        plaintext=plaintext,
    )
    return GnmiTarget(endpoint, profile, interval_s)


def _read_ca(device: str, path: Path) -> bytes:
    try:
        data = read_bounded(path, MAX_CA_BYTES)
    except AgentError as exc:
        raise AgentError(f"device {device}: gnmi.tls.ca: {exc}") from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise AgentError(f"device {device}: gnmi.tls.ca: {path} holds no PEM certificate")
    return data


def choose_transports(
    targets: dict[str, GnmiTarget | Unsupported], mode: str, timeout_s: float = PROBE_TIMEOUT_S
) -> dict[str, str]:
    """Per switch, ``gnmi`` or ``ssh``. ``auto`` asks every gNMI-capable switch at once."""
    if mode == "ssh":
        return dict.fromkeys(targets, "ssh")
    if mode == "gnmi":
        return dict.fromkeys(targets, "gnmi")
    streaming = {name: t for name, t in targets.items() if isinstance(t, GnmiTarget)}
    answers: dict[str, str | None] = {
        name: t.why for name, t in targets.items() if isinstance(t, Unsupported)
    }
    if streaming:
        answers.update(asyncio.run(_probe_all(streaming, timeout_s)))
    chosen = {}
    for name in targets:
        why_not = answers[name]
        chosen[name] = "gnmi" if why_not is None else "ssh"
        if why_not is not None:
            log.info("telemetry auto: %s read over SSH (gNMI: %s)", name, why_not)
    return chosen


async def _probe_all(targets: dict[str, GnmiTarget], timeout_s: float) -> dict[str, str | None]:
    names = list(targets)
    answers = await asyncio.gather(
        *(probe(targets[name].endpoint, timeout_s) for name in names), return_exceptions=True
    )
    return {
        name: (f"{type(a).__name__}: {a}" if isinstance(a, BaseException) else a)
        for name, a in zip(names, answers, strict=True)
    }


class GnmiTelemetry:
    """The exporter's gNMI subscriptions, one task per switch on one asyncio thread."""

    def __init__(self, store: SnapshotStore, targets: Iterable[GnmiTarget | Unsupported]) -> None:
        self.store = store
        self.targets = [t for t in targets if isinstance(t, GnmiTarget)]
        self.unsupported = [t for t in targets if isinstance(t, Unsupported)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._up: set[str] = set()
        self._starting: asyncio.Semaphore | None = None

    def start(self) -> None:
        for item in self.unsupported:
            log.warning("telemetry gnmi: %s not read: %s", item.device, item.why)
            self.store.record_poll_failure(item.device, "unsupported", None, item.why)
        self._thread = threading.Thread(target=self._run, name="gnmi-telemetry", daemon=True)
        self._thread.start()
        self._started.wait(5.0)

    def stop(self, join_s: float = 5.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(join_s)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._starting = asyncio.Semaphore(START_CONCURRENCY)
        tasks = [asyncio.create_task(self._follow(target)) for target in self.targets]
        self._started.set()
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, target: GnmiTarget) -> None:
        """Subscribe, and after every failure subscribe again, until cancelled."""
        name = target.endpoint.device
        rng = random.Random(zlib.crc32(name.encode()))
        backoff = Backoff()
        await asyncio.sleep(rng.uniform(0, min(START_SPREAD_S, target.interval_s)))
        while True:
            started = time.monotonic()
            try:
                await self._subscribe(target)
            except StreamFailure as failure:
                self._down(name, failure.reason, failure.detail)
            except Exception as error:  # a bug must not end this switch's subscriptions
                log.exception("telemetry gnmi: %s: unexpected error", name)
                self._down(name, "other", f"{type(error).__name__}: {error}")
            if time.monotonic() - started > BACKOFF_RESET_AFTER_S:
                backoff.reset()
            await asyncio.sleep(backoff.next_delay(rng))

    async def _subscribe(self, target: GnmiTarget) -> None:
        """One subscription, holding a start slot until its first sample is in."""
        starting = self._starting
        assert starting is not None
        await starting.acquire()
        held = True

        def started() -> None:
            nonlocal held
            if held:
                held = False
                starting.release()

        name = target.endpoint.device
        subscriber = Subscriber(
            target.endpoint, target.profile, target.interval_s,
            lambda counters, new: self._publish(name, counters, new),
        )  # fmt: skip
        subscriber.on_sync = started
        try:
            await subscribe_once(subscriber)
        finally:
            started()

    def _publish(self, name: str, counters: Counters, new_sample: bool) -> None:
        if name not in self._up:
            self._up.add(name)
            log.info("telemetry gnmi: %s streaming", name)
        if new_sample:
            self.store.update_counters(name, counters, None, at=counters.collected_at)
        else:
            self.store.complete_sample(name, counters, counters.collected_at)
        snapshot = self.store.snapshot()
        view = snapshot.devices.get(name)
        if view is not None:  # format its lines here, so a scrape only joins them
            device_block(snapshot.fabric, view)

    def _down(self, name: str, reason: str, detail: str) -> None:
        self._up.discard(name)
        log.warning("telemetry gnmi: %s down (%s): %s", name, reason, detail)
        self.store.record_poll_failure(name, reason, None, detail)

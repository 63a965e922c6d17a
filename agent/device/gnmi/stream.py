"""One switch's gNMI subscription: connect, subscribe, fold the updates, hand over snapshots;
on any failure say why (a bounded reason), wait with backoff and jitter, and subscribe again.

Runs on an asyncio loop (grpc.aio): a thousand switches are a thousand tasks on one thread, not
a thousand threads. Every wait is bounded -- the connection, the first response, the gap
between two samples -- so a switch that stops talking is marked down, never waited on.

The gNMI specification (openconfig/reference ``rpc/gnmi/gnmi-specification.md``): a STREAM
subscription sends every subscribed leaf at each ``sample_interval`` (ns), then
``sync_response`` once the first complete set was sent; ON_CHANGE sends a leaf when it changes.
Credentials travel as the ``username`` and ``password`` metadata, as sonic-gnmi and gnmic send
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.device.gnmi.base import CounterBuilder, Folder, GnmiProfile, UpdateError, under
from agent.device.gnmi.paths import from_proto, to_proto
from agent.device.state import Counters

# A message larger than this ends the stream (reason oversized): a 64-port SONiC switch's
# largest sample, the queue table, is ~200 KiB.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# Before the first response: the connection, TLS and the server's first sample.
CONNECT_TIMEOUT_S = 10.0
# Snapshots are handed over at most this often: a NOS sends one notification per leaf or per
# table, and a sample is complete a few ms after its first notification.
COALESCE_S = 0.05
# Closing a channel waits for its calls to end; never longer than this.
CLOSE_TIMEOUT_S = 2.0
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
# A stream that stayed up this long starts its next backoff from the first step again.
BACKOFF_RESET_AFTER_S = 30.0


def silence_limit(interval_s: float) -> float:
    """How long a sampled stream may stay silent, and how old a sample may be, before the
    switch reads down (reason stale): three samples, at least 10 s for clock jitter."""
    return max(3 * interval_s, 10.0)


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to subscribe. ``ca_pem`` None: the system's CAs; ``plaintext``: no
    TLS at all (``--insecure``)."""

    device: str
    address: str
    username: str
    password: str
    server_name: str | None = None
    ca_pem: bytes | None = None
    plaintext: bool = False


class StreamFailure(Exception):
    """Why a subscription ended: ``reason`` is the exporter's bounded label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# gRPC status -> reason label, before and after the stream delivered its first sample.
_REASONS = {
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
    "DEADLINE_EXCEEDED": "timeout",
    "RESOURCE_EXHAUSTED": "oversized",
    "UNIMPLEMENTED": "unsupported",
    "NOT_FOUND": "unsupported",
    "INVALID_ARGUMENT": "unsupported",
}


def reason_of(code_name: str, synced: bool) -> str:
    if code_name in ("UNAVAILABLE", "CANCELLED", "INTERNAL", "UNKNOWN"):
        return "reset" if synced else "connect"
    return _REASONS.get(code_name, "other")


def _grpc() -> tuple[Any, Any, Any]:
    """grpc and the gNMI protobufs, imported when a stream starts (pygnmi pulls in its client)."""
    # gRPC's core logs every GOAWAY at INFO on stderr; the exporter logs what matters itself.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    import grpc
    from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

    return grpc, gnmi_pb2, gnmi_pb2_grpc


def open_channel(endpoint: Endpoint) -> Any:
    grpc, _, _ = _grpc()
    options: list[tuple[str, int | str]] = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        # Reconnects are this module's (backoff with jitter), not the channel's.
        ("grpc.enable_retries", 0),
        # A channel of its own per subscription: a new one never inherits the connection of
        # one that just failed (gRPC shares subchannels between channels by default).
        ("grpc.use_local_subchannel_pool", 1),
    ]
    if endpoint.plaintext:
        return grpc.aio.insecure_channel(endpoint.address, options=options)
    if endpoint.server_name:
        options.append(("grpc.ssl_target_name_override", endpoint.server_name))
    credentials = grpc.ssl_channel_credentials(root_certificates=endpoint.ca_pem)
    return grpc.aio.secure_channel(endpoint.address, credentials, options=options)


def metadata(endpoint: Endpoint) -> tuple[tuple[str, str], ...]:
    return (("username", endpoint.username), ("password", endpoint.password))


def subscribe_request(profile: GnmiProfile, interval_s: float) -> Any:
    _, gnmi_pb2, _ = _grpc()
    request = gnmi_pb2.SubscribeRequest()
    subscriptions = request.subscribe
    subscriptions.mode = gnmi_pb2.SubscriptionList.STREAM
    subscriptions.encoding = gnmi_pb2.Encoding.Value(profile.encoding)
    for wanted in profile.subscriptions():
        item = subscriptions.subscription.add(path=to_proto(wanted.path, gnmi_pb2))
        if wanted.mode == "on_change":
            item.mode = gnmi_pb2.SubscriptionMode.ON_CHANGE
        else:
            item.mode = gnmi_pb2.SubscriptionMode.SAMPLE
            item.sample_interval = round(interval_s * 1e9)
    return request


async def probe(endpoint: Endpoint, timeout_s: float) -> str | None:
    """None if the switch answers gNMI's Capabilities (or refuses our credentials: it does
    speak gNMI); else why not, in words (``--telemetry auto`` then reads it over SSH)."""
    grpc, gnmi_pb2, gnmi_pb2_grpc = _grpc()
    channel = open_channel(endpoint)
    try:
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        await stub.Capabilities(
            gnmi_pb2.CapabilityRequest(), metadata=metadata(endpoint), timeout=timeout_s
        )
    except grpc.aio.AioRpcError as error:
        if error.code().name in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return None
        return f"{error.code().name}: {error.details()}"
    finally:
        await close_quietly(channel)
    return None


# Folders a subscriber keeps, one per distinct path: a switch has a few thousand leaves; a
# stream naming more paths than this is refused by the interface bound first or re-derived.
MAX_FOLDERS = 65536


class Subscriber:
    """Folds one subscription's responses into snapshots; ``publish`` gets each snapshot and
    whether it starts a new sample (``roce_polls_total`` counts samples, not snapshots).

    A sample is published once it is complete: when the next sample's first notification
    arrives (its timestamp half an interval or more after this one's), when every sampled
    path delivered (a profile whose notification carries a whole table, SONiC), or
    :data:`COALESCE_S` after its last notification, whichever comes first. ``on_sync``, if
    set, is called when the first complete sample (``sync_response``) was published."""

    def __init__(
        self,
        endpoint: Endpoint,
        profile: GnmiProfile,
        interval_s: float,
        publish: Callable[[Counters, bool], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.profile = profile
        self.interval_s = interval_s
        self.publish = publish
        self.clock = clock
        self.on_sync: Callable[[], None] | None = None
        wanted = profile.subscriptions()
        self.subscriptions = [s.path for s in wanted]
        self._sampled = frozenset(i for i, s in enumerate(wanted) if s.mode == "sample")
        self.builder = CounterBuilder()
        self.synced = False
        self.latest_ns = 0
        self._folders: dict[tuple[bytes, bytes], tuple[int, Folder]] = {}
        self._round_ns = 0  # the first timestamp of the sample being received
        self._published_round_ns = -1
        self._seen: set[int] = set()  # subscriptions that delivered in this sample
        self._dirty = False
        self._pending: asyncio.TimerHandle | None = None

    def apply(self, response: Any) -> None:
        """One SubscribeResponse; :class:`StreamFailure` if it cannot be used."""
        kind = response.WhichOneof("response")
        if kind == "sync_response":
            self.synced = True
            self._flush()
            if self.on_sync is not None:
                self.on_sync()
        elif kind == "update":
            self._notification(response.update)
        elif kind == "error":
            raise StreamFailure("other", f"the switch sent an error: {response.error.message}")

    def _notification(self, notification: Any) -> None:
        timestamp = notification.timestamp
        self._check_age(timestamp)
        if timestamp - self._round_ns >= self.interval_s * 5e8:  # half an interval, in ns
            if self.synced and self._dirty:
                self._flush()
            self._round_ns = timestamp
            self._seen.clear()
        prefix = notification.prefix
        prefix_key = prefix.SerializeToString()
        for update in notification.update:
            index, fold = self._folder(prefix, prefix_key, update.path)
            try:
                fold(update.val, self.builder)
            except UpdateError as error:
                raise StreamFailure(error.reason, str(error)) from None
            self._seen.add(index)
        self._dirty = True
        self.latest_ns = max(self.latest_ns, timestamp)
        if not self.synced:
            return
        if self.profile.table_per_notification and self._seen >= self._sampled:
            self._flush()
        elif self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(COALESCE_S, self._flush)

    def _folder(self, prefix: Any, prefix_key: bytes, proto_path: Any) -> tuple[int, Folder]:
        key = (prefix_key, proto_path.SerializeToString())
        found = self._folders.get(key)
        if found is None:
            path = from_proto(prefix, proto_path)
            # The deepest subscription that holds it: SONiC's COUNTERS/Ethernet*/Queues lies
            # under COUNTERS/Ethernet* too.
            holding = [
                (len(w.elems), i) for i, w in enumerate(self.subscriptions) if under(w, path)
            ]
            if not holding:
                raise StreamFailure("parse", f"an update under {path.text()}, not subscribed")
            index = max(holding)[1]
            try:
                found = (index, self.profile.folder(path))
            except UpdateError as error:
                raise StreamFailure(error.reason, str(error)) from None
            if len(self._folders) < MAX_FOLDERS:
                self._folders[key] = found
        return found

    def _check_age(self, timestamp_ns: int) -> None:
        age_s = self.clock() - timestamp_ns / 1e9
        if abs(age_s) > silence_limit(self.interval_s):
            when = "old" if age_s > 0 else "in the future"
            raise StreamFailure("stale", f"a sample {abs(age_s):.1f} s {when}")

    def _flush(self) -> None:
        self.cancel()
        self._dirty = False
        at = self.latest_ns / 1e9 if self.latest_ns else self.clock()
        new_sample = self._round_ns != self._published_round_ns
        self._published_round_ns = self._round_ns
        counters = self.builder.counters(self.endpoint.device, at, dict(self.profile.unread))
        self.publish(counters, new_sample)

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


async def subscribe_once(subscriber: Subscriber) -> None:
    """One subscription until it fails: raises :class:`StreamFailure` with the reason.

    The request is written on the call and the request side is left open (closing it would
    end the RPC on some servers); no request generator is left waiting after a cancel, and
    closing the channel is bounded, so a failed stream always lets the next one start."""
    grpc, gnmi_pb2, gnmi_pb2_grpc = _grpc()
    endpoint = subscriber.endpoint
    channel = open_channel(endpoint)
    stub = gnmi_pb2_grpc.gNMIStub(channel)
    call: Any = None
    try:
        await _capabilities(stub, gnmi_pb2, endpoint)
        call = stub.Subscribe(metadata=metadata(endpoint))
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            await call.write(subscribe_request(subscriber.profile, subscriber.interval_s))
        await _read(call, subscriber)
    except TimeoutError:
        raise StreamFailure("timeout", f"no answer for {CONNECT_TIMEOUT_S:g} s") from None
    except grpc.aio.AioRpcError as error:
        code, details = await _final_status(call, error)
        raise StreamFailure(reason_of(code, subscriber.synced), f"{code}: {details}") from None
    finally:
        subscriber.cancel()
        if call is not None:
            call.cancel()
        await close_quietly(channel)


async def _capabilities(stub: Any, gnmi_pb2: Any, endpoint: Endpoint) -> None:
    """Ask Capabilities first: a refusal (credentials, TLS) then reads as what it is. A
    Subscribe refused at once can race the client's first write, and gRPC's client then
    reports its own INTERNAL instead of the server's status. UNIMPLEMENTED is no refusal."""
    grpc, _, _ = _grpc()
    try:
        await stub.Capabilities(
            gnmi_pb2.CapabilityRequest(), metadata=metadata(endpoint), timeout=CONNECT_TIMEOUT_S
        )
    except grpc.aio.AioRpcError as error:
        if error.code().name != "UNIMPLEMENTED":
            raise


async def _final_status(call: Any, error: Any) -> tuple[str, str]:
    """The RPC's own status: a write that races the server's refusal fails with gRPC core's
    ``INTERNAL`` while the call ends with the server's status (``UNAUTHENTICATED``)."""
    code, details = error.code().name, str(error.details())
    if code != "INTERNAL" or call is None:
        return code, details
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1.0):
            final = await call.code()
            if final.name not in ("OK", "INTERNAL"):
                return final.name, str(await call.details())
    return code, details


async def close_quietly(channel: Any) -> None:
    """Close a channel, waiting :data:`CLOSE_TIMEOUT_S` at most (a close that hangs must
    not hold the switch's task)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await channel.close()


async def _read(call: Any, subscriber: Subscriber) -> None:
    grpc, _, _ = _grpc()
    first = True
    while True:
        limit = CONNECT_TIMEOUT_S if first else silence_limit(subscriber.interval_s)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancel that lands as
            # the read completes, and the cancelled subscription then reads on.
            async with asyncio.timeout(limit):
                response = await call.read()
        except TimeoutError:
            what = "no answer" if first else "no sample"
            raise StreamFailure(
                "timeout" if first else "stale", f"{what} for {limit:g} s"
            ) from None
        if response is grpc.aio.EOF:
            raise StreamFailure("reset", "the switch ended the subscription")
        first = False
        subscriber.apply(response)


@dataclass
class Backoff:
    """Exponential backoff with full jitter between ``first`` and ``most`` seconds."""

    first_s: float = BACKOFF_FIRST_S
    most_s: float = BACKOFF_MAX_S
    step: int = 0

    def next_delay(self, rng: random.Random) -> float:
        ceiling = min(self.most_s, self.first_s * 2**self.step)
        self.step = min(self.step + 1, 16)
        return rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.step = 0

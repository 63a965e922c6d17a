"""The lab switch's gNMI server: a grpc.aio servicer in the management process's own loop.

Every RPC is first checked for the ``refuse`` fault (UNAVAILABLE), then for credentials:
gRPC metadata ``username`` and ``password``, as sonic-gnmi's ``gnmi_server/basicAuth.go``
reads them and gnmic sends them, checked against the switch's SSH login (missing or wrong:
UNAUTHENTICATED), then against the limits (RESOURCE_EXHAUSTED): at most
:attr:`Limits.max_rpcs` RPCs at once, :attr:`Limits.max_subscriptions` subscriptions in one
SubscriptionList and :attr:`Limits.max_get_paths` paths in one Get. A ``sample_interval``
or ``heartbeat_interval`` under :attr:`Limits.min_interval_ns` (100 ms) is refused with
INVALID_ARGUMENT naming the path; 0 means the NOS's default. A path the NOS does not serve is
NOT_FOUND with the path in the message.

TLS only, with the certificate ``lab up`` issued from the lab's CA (:mod:`lab.mgmt.gnmi.tls`);
no client certificate is asked for. The listener never shares its port (``SO_REUSEPORT``
off, which gRPC turns on by default), so a port another process holds is an error, not a
silent second listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from lab.mgmt.dataplane_handle import DataplaneError
from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.faults import GnmiFaults
from lab.mgmt.gnmi.nos import SECOND_NS, GnmiError, Mode, NosTree
from lab.mgmt.gnmi.snapshot import Sampler
from lab.mgmt.gnmi.stream import Plan, Session, SubMode, Subscription, shaped

log = logging.getLogger("lab.mgmt.gnmi")
MAX_REQUEST_BYTES = 1 << 20  # a SubscribeRequest of the allowed size is a few KiB


@dataclass(frozen=True)
class Limits:
    """What one server takes on."""

    max_rpcs: int = 16
    max_subscriptions: int = 32
    max_get_paths: int = 32
    min_interval_ns: int = 100_000_000
    first_request_s: float = 10.0


@dataclass(frozen=True)
class Login:
    """Who may call: the switch's SSH user and password (None: password logins are off)."""

    username: str
    password: str | None


class GnmiService(gnmi_pb2_grpc.gNMIServicer):  # type: ignore[misc]
    """gNMI for one NOS over one data plane."""

    def __init__(
        self,
        tree: NosTree,
        sampler: Sampler,
        login: Login,
        faults: GnmiFaults | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.tree = tree
        self.sampler = sampler
        self.login = login
        self.faults = faults if faults is not None else GnmiFaults()
        self.limits = limits or Limits()
        self.active = 0

    # ------------------------------------------------------------------ admission

    @contextlib.asynccontextmanager
    async def _rpc(self, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        """Refusal, credentials and limits first; a GnmiError or an unreachable data plane
        inside ends the RPC with its status."""
        if self.faults.refuse:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "gNMI server refuses (lab fault)")
        problem = self._unauthenticated(context.invocation_metadata() or ())
        if problem:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, problem)
        if self.active >= self.limits.max_rpcs:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"at most {self.limits.max_rpcs} gNMI RPCs at once",
            )
        self.active += 1
        try:
            yield
        except GnmiError as exc:
            await context.abort(exc.code, exc.message)
        except DataplaneError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"counters not read: {exc}")
        finally:
            self.active -= 1

    def _unauthenticated(self, metadata: Any) -> str | None:
        """Why the call's credentials are refused (None: accepted)."""
        given = {str(k).lower(): v for k, v in metadata}
        user, password = given.get("username"), given.get("password")
        if user is None or password is None:
            return "no username/password in the request metadata"
        expected = self.login.password
        same_user = hmac.compare_digest(_bytes(user), self.login.username.encode())
        if expected is None or not same_user:
            return "authentication failed"
        if not hmac.compare_digest(_bytes(password), expected.encode()):
            return "authentication failed"
        return None

    # ------------------------------------------------------------------ RPCs

    async def Capabilities(
        self, request: gnmi_pb2.CapabilityRequest, context: grpc.aio.ServicerContext
    ) -> gnmi_pb2.CapabilityResponse:
        async with self._rpc(context):
            return self.tree.capabilities()
        raise AssertionError("unreachable")  # pragma: no cover -- abort raised

    async def Set(
        self, request: gnmi_pb2.SetRequest, context: grpc.aio.ServicerContext
    ) -> gnmi_pb2.SetResponse:
        async with self._rpc(context):
            why = self.tree.get_refusal or "the lab's gNMI serves telemetry; configure over SSH"
            raise GnmiError(grpc.StatusCode.UNIMPLEMENTED, f"Set: {why}")
        raise AssertionError("unreachable")  # pragma: no cover -- abort raised

    async def Get(
        self, request: gnmi_pb2.GetRequest, context: grpc.aio.ServicerContext
    ) -> gnmi_pb2.GetResponse:
        async with self._rpc(context):
            return await self._get(request)
        raise AssertionError("unreachable")  # pragma: no cover -- abort raised

    async def _get(self, request: gnmi_pb2.GetRequest) -> gnmi_pb2.GetResponse:
        if self.tree.get_refusal:
            raise GnmiError(grpc.StatusCode.UNIMPLEMENTED, f"Get: {self.tree.get_refusal}")
        self.tree.check_encoding(request.encoding)
        if not request.path:
            raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT, "Get names no path")
        if len(request.path) > self.limits.max_get_paths:
            raise GnmiError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{len(request.path)} paths in one Get (at most {self.limits.max_get_paths})",
            )
        queries = [self.tree.resolve(request.prefix, p) for p in request.path]
        view = await self.sampler.view()
        prefix = self.tree.notification_prefix(request.prefix)
        notifications: list[gnmi_pb2.Notification] = []
        for query in queries:
            updates = self.tree.updates(query, view, request.encoding)
            if not updates:
                raise GnmiError(grpc.StatusCode.NOT_FOUND, f"{paths.text(query)}: no data")
            notification = gnmi_pb2.Notification(
                timestamp=view.taken_ns, prefix=prefix, update=updates
            )
            notifications.append(shaped(notification, self.tree, self.faults, not notifications))
        return gnmi_pb2.GetResponse(notification=notifications)

    async def Subscribe(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        del request_iterator  # read through context.read(): POLL reads after writing
        async with self._rpc(context):
            first = await self._first_request(context)
            plan = self._plan(first)
            io = (context.read, context.write)
            session = Session(plan, self.tree, self.sampler, self.faults, io)
            await session.run()

    async def _first_request(self, context: grpc.aio.ServicerContext) -> gnmi_pb2.SubscriptionList:
        try:
            request = await asyncio.wait_for(context.read(), self.limits.first_request_s)
        except TimeoutError:
            raise GnmiError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"no SubscriptionList within {self.limits.first_request_s:g}s",
            ) from None
        if request is grpc.aio.EOF or not request.HasField("subscribe"):
            raise GnmiError(
                grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a SubscriptionList"
            )
        return request.subscribe

    # ------------------------------------------------------------------ validation

    def _plan(self, request: gnmi_pb2.SubscriptionList) -> Plan:
        self.tree.check_mode(request.mode)
        self.tree.check_encoding(request.encoding)
        count = len(request.subscription)
        if not count:
            raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT, "the SubscriptionList is empty")
        if count > self.limits.max_subscriptions:
            raise GnmiError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{count} subscriptions in one request (at most {self.limits.max_subscriptions})",
            )
        subs = [self._subscription(request, s) for s in request.subscription]
        return Plan(
            mode=request.mode,
            encoding=request.encoding,
            updates_only=request.updates_only,
            prefix=self.tree.notification_prefix(request.prefix),
            subscriptions=subs,
        )

    def _subscription(
        self, request: gnmi_pb2.SubscriptionList, sub: gnmi_pb2.Subscription
    ) -> Subscription:
        query = self.tree.resolve(request.prefix, sub.path)
        mode = SubMode.ON_CHANGE if sub.mode == SubMode.ON_CHANGE else SubMode.SAMPLE
        if request.mode != Mode.STREAM:
            return Subscription(query, mode)
        interval = self._interval(query, "sample_interval", sub.sample_interval)
        heartbeat = self._interval(query, "heartbeat_interval", sub.heartbeat_interval)
        return Subscription(
            query,
            mode,
            interval_s=(interval or self.tree.default_interval_ns) / SECOND_NS,
            suppress=sub.suppress_redundant,
            heartbeat_s=heartbeat / SECOND_NS,
        )

    def _interval(self, query: paths.GPath, what: str, value_ns: int) -> int:
        floor = self.limits.min_interval_ns
        if value_ns and value_ns < floor:
            raise GnmiError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{paths.text(query)}: {what} {value_ns} ns is below the minimum {floor} ns",
            )
        return value_ns


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


# ---------------------------------------------------------------------- the listener


@dataclass(frozen=True)
class Listener:
    """Where the server listens and with which certificate."""

    host: str
    port: int
    cert: Path
    key: Path


def _check_free(host: str, port: int) -> None:
    """OSError(EADDRINUSE) when another process holds the port: gRPC's own bind failure
    does not say why."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


async def start_server(listener: Listener, service: GnmiService) -> tuple[grpc.aio.Server, int]:
    """Bind and start; returns the server and its port (OSError when the port is taken or
    the certificate cannot be read)."""
    credentials = grpc.ssl_server_credentials(
        [(listener.key.read_bytes(), listener.cert.read_bytes())]
    )
    _check_free(listener.host, listener.port)
    server = grpc.aio.server(
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
        ]
    )
    gnmi_pb2_grpc.add_gNMIServicer_to_server(service, server)
    try:
        port = server.add_secure_port(f"{listener.host}:{listener.port}", credentials)
    except RuntimeError as exc:
        raise OSError(errno.EADDRINUSE, f"gNMI cannot bind: {exc}") from None
    if not port:
        raise OSError(errno.EADDRINUSE, f"gNMI cannot bind {listener.host}:{listener.port}")
    await server.start()
    return server, port

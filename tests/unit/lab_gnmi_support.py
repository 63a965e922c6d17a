"""Helpers of the lab gNMI tests (tests/unit/test_lab_gnmi_*.py): a counters snapshot in the
data plane's own shape, a fake data plane that counts its reads, the lab's TLS material made
in a test's folder, a real grpc.aio server on 127.0.0.1 port 0 in the test's event loop and a
real TLS client for it.

The SONiC field names below are sonic-net/sonic-gnmi's test data (5ec1c20):
``testdata/COUNTERS:Ethernet68.txt`` (a port's COUNTERS fields),
``COUNTERS:Ethernet68:Queues_expected.txt`` (a queue's and a watched queue's fields; the
watermark next to the watchdog's fields is in ``doc/grpc_telemetry.md``'s Queues example) and
``PERIODIC_WATERMARKS:Ethernet16:PriorityGroups_expected.txt``.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from lab.mgmt.gnmi import paths, tree_for
from lab.mgmt.gnmi.faults import GnmiFaults
from lab.mgmt.gnmi.server import GnmiService, Limits, Listener, Login, start_server
from lab.mgmt.gnmi.snapshot import Sampler, View
from lab.mgmt.gnmi.tls import CertFiles, create_ca, issue_server_cert
from lab.mgmt.testing import FakeDataplane, fake_switch_config
from lab.vswitch.counters import PortCounters, port_snapshot, queues_snapshot
from lossless.config import WatchdogConfig
from lossless.pfc import IngressAccounting
from lossless.queues import EgressQueue
from lossless.watchdog import PortWatchdog

PORTS = ["eth1", "eth2", "eth3", "eth4"]
USER, PASSWORD = "admin", "s3cret"
METADATA = (("username", USER), ("password", PASSWORD))
SERVER_NAME = "leaf1"

SONIC_PORT_FIELDS = set(
    [
        "SAI_PORT_STAT_ETHER_IN_PKTS_1024_TO_1518_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_128_TO_255_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_1519_TO_2047_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_2048_TO_4095_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_256_TO_511_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_4096_TO_9216_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_512_TO_1023_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_64_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_65_TO_127_OCTETS",
        "SAI_PORT_STAT_ETHER_IN_PKTS_9217_TO_16383_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_1024_TO_1518_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_128_TO_255_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_1519_TO_2047_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_2048_TO_4095_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_256_TO_511_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_4096_TO_9216_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_512_TO_1023_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_64_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_65_TO_127_OCTETS",
        "SAI_PORT_STAT_ETHER_OUT_PKTS_9217_TO_16383_OCTETS",
        "SAI_PORT_STAT_ETHER_RX_OVERSIZE_PKTS",
        "SAI_PORT_STAT_ETHER_STATS_BROADCAST_PKTS",
        "SAI_PORT_STAT_ETHER_STATS_COLLISIONS",
        "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS",
        "SAI_PORT_STAT_ETHER_STATS_DROP_EVENTS",
        "SAI_PORT_STAT_ETHER_STATS_FRAGMENTS",
        "SAI_PORT_STAT_ETHER_STATS_JABBERS",
        "SAI_PORT_STAT_ETHER_STATS_MULTICAST_PKTS",
        "SAI_PORT_STAT_ETHER_STATS_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_OVERSIZE_PKTS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_1024_TO_1518_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_128_TO_255_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_1519_TO_2047_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_2048_TO_4095_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_256_TO_511_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_4096_TO_9216_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_512_TO_1023_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_64_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_65_TO_127_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_PKTS_9217_TO_16383_OCTETS",
        "SAI_PORT_STAT_ETHER_STATS_RX_NO_ERRORS",
        "SAI_PORT_STAT_ETHER_STATS_TX_NO_ERRORS",
        "SAI_PORT_STAT_ETHER_STATS_UNDERSIZE_PKTS",
        "SAI_PORT_STAT_ETHER_TX_OVERSIZE_PKTS",
        "SAI_PORT_STAT_IF_IN_BROADCAST_PKTS",
        "SAI_PORT_STAT_IF_IN_DISCARDS",
        "SAI_PORT_STAT_IF_IN_ERRORS",
        "SAI_PORT_STAT_IF_IN_MULTICAST_PKTS",
        "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS",
        "SAI_PORT_STAT_IF_IN_OCTETS",
        "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
        "SAI_PORT_STAT_IF_IN_UNKNOWN_PROTOS",
        "SAI_PORT_STAT_IF_IN_VLAN_DISCARDS",
        "SAI_PORT_STAT_IF_OUT_BROADCAST_PKTS",
        "SAI_PORT_STAT_IF_OUT_DISCARDS",
        "SAI_PORT_STAT_IF_OUT_ERRORS",
        "SAI_PORT_STAT_IF_OUT_MULTICAST_PKTS",
        "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS",
        "SAI_PORT_STAT_IF_OUT_OCTETS",
        "SAI_PORT_STAT_IF_OUT_QLEN",
        "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
        "SAI_PORT_STAT_IPV6_IN_DISCARDS",
        "SAI_PORT_STAT_IPV6_IN_MCAST_PKTS",
        "SAI_PORT_STAT_IPV6_IN_NON_UCAST_PKTS",
        "SAI_PORT_STAT_IPV6_IN_OCTETS",
        "SAI_PORT_STAT_IPV6_IN_RECEIVES",
        "SAI_PORT_STAT_IPV6_IN_UCAST_PKTS",
        "SAI_PORT_STAT_IPV6_OUT_DISCARDS",
        "SAI_PORT_STAT_IPV6_OUT_MCAST_PKTS",
        "SAI_PORT_STAT_IPV6_OUT_NON_UCAST_PKTS",
        "SAI_PORT_STAT_IPV6_OUT_OCTETS",
        "SAI_PORT_STAT_IPV6_OUT_UCAST_PKTS",
        "SAI_PORT_STAT_IP_IN_DISCARDS",
        "SAI_PORT_STAT_IP_IN_NON_UCAST_PKTS",
        "SAI_PORT_STAT_IP_IN_OCTETS",
        "SAI_PORT_STAT_IP_IN_RECEIVES",
        "SAI_PORT_STAT_IP_IN_UCAST_PKTS",
        "SAI_PORT_STAT_IP_OUT_DISCARDS",
        "SAI_PORT_STAT_IP_OUT_NON_UCAST_PKTS",
        "SAI_PORT_STAT_IP_OUT_OCTETS",
        "SAI_PORT_STAT_IP_OUT_UCAST_PKTS",
    ]
) | {f"SAI_PORT_STAT_PFC_{p}_{k}_PKTS" for p in range(8) for k in ("ON2OFF_RX", "RX", "TX")}
SONIC_QUEUE_FIELDS = {
    "SAI_QUEUE_STAT_BYTES",
    "SAI_QUEUE_STAT_DROPPED_BYTES",
    "SAI_QUEUE_STAT_DROPPED_PACKETS",
    "SAI_QUEUE_STAT_PACKETS",
    "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES",
}
SONIC_WATCHED_QUEUE_FIELDS = {
    "PFC_WD_ACTION",
    "PFC_WD_DETECTION_TIME",
    "PFC_WD_DETECTION_TIME_LEFT",
    "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED",
    "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED",
    "PFC_WD_RESTORATION_TIME",
    "PFC_WD_STATUS",
    "SAI_QUEUE_ATTR_PAUSE_STATUS",
    "SAI_QUEUE_ATTR_PAUSE_STATUS_last",
    "SAI_QUEUE_STAT_BYTES",
    "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES",
    "SAI_QUEUE_STAT_DROPPED_BYTES",
    "SAI_QUEUE_STAT_DROPPED_PACKETS",
    "SAI_QUEUE_STAT_PACKETS",
    "SAI_QUEUE_STAT_PACKETS_last",
    "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES",
}
SONIC_PG_FIELDS = {
    "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES",
    "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES",
}
# Not in sonic-gnmi's test data: the queue's ECN counter of the WRED/ECN statistics HLD.
SONIC_ECN_FIELD = "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"


def counters_snapshot(ports: Sequence[str] = PORTS) -> dict[str, Any]:
    """A ``counters`` answer built by the data plane's own snapshot functions from fresh
    objects, so its keys are the real ones; tests then set the numbers they need."""
    watchdog = PortWatchdog(WatchdogConfig(), 0.0)
    return {
        "name": SERVER_NAME,
        "uptime_s": 1.0,
        "ports": {
            port: port_snapshot(
                PortCounters(),
                True,
                [False] * 8,
                IngressAccounting(10_000_000),
                queues_snapshot([EgressQueue() for _ in range(8)], watchdog),
            )
            for port in ports
        },
    }


def lossless_config(ports: Sequence[str] = PORTS, watchdog: bool = True) -> dict[str, Any]:
    """A switch config with PFC on priority 3 of every port and the watchdog on or off."""
    config = fake_switch_config(SERVER_NAME, list(ports))
    config["qos"] = {
        "watchdog": {
            "enabled": watchdog,
            "detection_ms": 200,
            "restoration_ms": 400,
            "polling_ms": 100,
            "action": "drop",
        },
        "ports": {p: {"pfc_enabled": True, "pfc_priorities": [3]} for p in ports},
    }
    return config


@dataclass
class CountingDataplane(FakeDataplane):
    """A fake data plane whose ``counters`` reads are counted (each a copy, as the control
    socket's answer would be)."""

    reads: int = 0
    fail: bool = False

    async def counters(self) -> dict[str, Any]:
        self.reads += 1
        if self.fail:
            from lab.mgmt.dataplane_handle import DataplaneError

            raise DataplaneError("control socket gone")
        return copy.deepcopy(self.counters_snapshot)


def dataplane(ports: Sequence[str] = PORTS, watchdog: bool = True) -> CountingDataplane:
    return CountingDataplane(lossless_config(ports, watchdog), counters_snapshot(ports))


def view(dp: CountingDataplane, ports: Sequence[str] = PORTS) -> View:
    return View(copy.deepcopy(dp.counters_snapshot), dp.config, 1, tuple(ports))


@dataclass(frozen=True)
class Pki:
    ca: CertFiles
    server: CertFiles


def make_pki(folder: Path, server_name: str = SERVER_NAME, lab: str = "t") -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertFiles(folder / "ca.pem", folder / "ca.key")
    server = CertFiles(folder / "server.pem", folder / "server.key")
    create_ca(ca, lab)
    issue_server_cert(ca, server, server_name)
    return Pki(ca, server)


@dataclass
class Served:
    """A running server and what a test needs to talk to it."""

    port: int
    pki: Pki
    service: GnmiService
    dataplane: CountingDataplane
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    def stub(
        self, ca_pem: bytes | None = None, server_name: str = SERVER_NAME
    ) -> gnmi_pb2_grpc.gNMIStub:
        channel = secure_channel(self.port, ca_pem or self.pki.ca.cert.read_bytes(), server_name)
        self.channels.append(channel)
        return gnmi_pb2_grpc.gNMIStub(channel)


def secure_channel(port: int, ca_pem: bytes, server_name: str) -> grpc.aio.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    options = [("grpc.ssl_target_name_override", server_name)]
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)


@asynccontextmanager
async def serving(
    pki: Pki,
    nos: str,
    dp: CountingDataplane | None = None,
    faults: GnmiFaults | None = None,
    limits: Limits | None = None,
) -> AsyncIterator[Served]:
    """A gNMI server for ``nos`` on 127.0.0.1 (a free port) over ``dp``."""
    dp = dp or dataplane()
    tree = tree_for(nos, PORTS)
    assert tree is not None
    service = GnmiService(tree, Sampler(dp, PORTS), Login(USER, PASSWORD), faults, limits)
    listener = Listener("127.0.0.1", 0, pki.server.cert, pki.server.key)
    server, port = await start_server(listener, service)
    served = Served(port, pki, service, dp)
    try:
        yield served
    finally:
        for channel in served.channels:
            await channel.close()
        await server.stop(0)


def run(coro_fn: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Run one async scenario in its own event loop, bounded."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(bounded())


def subscribe_request(
    xpaths: Sequence[str],
    *,
    mode: int = gnmi_pb2.SubscriptionList.STREAM,
    sub_mode: int = gnmi_pb2.SubscriptionMode.SAMPLE,
    interval_ms: int = 200,
    encoding: int = gnmi_pb2.Encoding.PROTO,
    target: str = "",
    origin: str = "",
    **options: Any,
) -> gnmi_pb2.SubscribeRequest:
    """A SubscriptionList of ``xpaths`` (``options``: suppress_redundant, heartbeat_interval
    and the list's updates_only)."""
    updates_only = bool(options.pop("updates_only", False))
    subs = [
        gnmi_pb2.Subscription(
            path=paths.to_proto(paths.parse(x)),
            mode=sub_mode,
            sample_interval=interval_ms * 1_000_000,
            **options,
        )
        for x in xpaths
    ]
    return gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            prefix=gnmi_pb2.Path(target=target, origin=origin),
            mode=mode,
            encoding=encoding,
            subscription=subs,
            updates_only=updates_only,
        )
    )


class Stream:
    """A Subscribe call whose requests the test sends when it wants; its responses are read
    into a queue as they come (a timed-out wait must not cancel the call, as a cancelled
    ``read()`` of grpc.aio would)."""

    def __init__(self, stub: gnmi_pb2_grpc.gNMIStub, first: gnmi_pb2.SubscribeRequest) -> None:
        self.requests: asyncio.Queue[gnmi_pb2.SubscribeRequest | None] = asyncio.Queue()
        self.requests.put_nowait(first)
        self.call = stub.Subscribe(self._requests(), metadata=METADATA)
        self.responses: asyncio.Queue[Any] = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _requests(self) -> AsyncIterator[gnmi_pb2.SubscribeRequest]:
        while (request := await self.requests.get()) is not None:
            yield request

    async def _read(self) -> None:
        try:
            while (response := await self.call.read()) is not grpc.aio.EOF:
                self.responses.put_nowait(response)
            self.responses.put_nowait(grpc.aio.EOF)
        except grpc.aio.AioRpcError as exc:
            self.responses.put_nowait(exc)
        except asyncio.CancelledError:
            self.responses.put_nowait(grpc.aio.EOF)

    async def next(self, timeout: float = 5.0) -> gnmi_pb2.SubscribeResponse:
        """The next response; the call's error is raised, TimeoutError when none comes."""
        response = await self.end_or_next(timeout)
        assert response is not grpc.aio.EOF, "the stream ended"
        return response

    async def end_or_next(self, timeout: float = 5.0) -> Any:
        """The next response or ``grpc.aio.EOF``."""
        response = await asyncio.wait_for(self.responses.get(), timeout)
        if isinstance(response, grpc.aio.AioRpcError):
            raise response
        return response

    async def until_sync(self, timeout: float = 5.0) -> list[gnmi_pb2.Notification]:
        """The notifications before the next sync_response."""
        found = []
        while True:
            response = await self.next(timeout)
            if response.sync_response:
                return found
            found.append(response.update)

    def poll(self) -> None:
        self.requests.put_nowait(gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()))

    def close(self) -> None:
        self.requests.put_nowait(None)
        self.call.cancel()
        self.reader.cancel()


def leaves(notifications: Sequence[gnmi_pb2.Notification]) -> dict[str, Any]:
    """``{path text: value}`` of every update (typed values unwrapped)."""
    found: dict[str, Any] = {}
    for notification in notifications:
        for update in notification.update:
            full = paths.from_proto(notification.prefix) + paths.from_proto(update.path)
            found[paths.text(full)] = value_of(update.val)
    return found


def value_of(value: gnmi_pb2.TypedValue) -> Any:
    kind = value.WhichOneof("value")
    if kind in ("json_val", "json_ietf_val"):
        return json.loads(getattr(value, kind))
    return getattr(value, kind) if kind else None

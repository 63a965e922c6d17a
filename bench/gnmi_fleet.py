"""gNMI telemetry at fleet scale: the exporter streaming N emulated switches, against polling the
same fleet over SSH, measured in one run (issue #45, item 4).

Goal: what a switch's counters cost the exporter when they arrive over a gNMI STREAM
subscription (``--telemetry gnmi``) rather than an SSH poll (``--telemetry ssh``), at fleet size
(default 1 000 switches x 64 ports, one lossless class on priority 3):

- CPU seconds of the exporter process per 1 000 updates applied (an update: one switch's
  complete counters replaced in the store), gNMI at 15 s against SSH at 15 s; and CPU per
  second, gNMI at 1 s against SSH at 15 s -- ratios of numbers measured in the same run, on the
  same machine;
- its peak and steady memory (``VmHWM``/``VmRSS``), the time of a ``/metrics`` scrape, and the
  time from the exporter's start until every switch reads ``roce_device_up 1``;
- ``--shard 1/2`` and ``2/2``: two exporters split the fleet (each about half, together all,
  none twice), the same split with gNMI as with SSH.

The switches:

- gNMI: ``--workers`` processes, each one ``grpc.aio`` server listening on one 127.0.0.1 port per
  switch, answering Subscribe (STREAM, SAMPLE) with the paths and value shapes of the NOS
  (``--shape``): SONiC's ``COUNTERS_DB`` (``COUNTERS/Ethernet*`` -> one JSON_IETF map keyed by
  port with every SAI port field sonic-gnmi's ``testdata/COUNTERS:Ethernet68.txt`` carries;
  ``COUNTERS/Ethernet*/Queues`` -> ``<port>:<q>`` maps, the PFC watchdog's fields on queue 3,
  the ``:periodic`` watermark keys), or Cumulus Linux's NVUE ``/qos`` tree (one ``uint_val`` leaf
  per update). The first set, ``sync_response``, then a set every ``sample_interval``. Plain
  text gRPC (the exporter runs with ``--insecure``): TLS would add the same handshake per switch
  and a cipher cost per byte, which this bench does not measure.
- SSH (``--shape sonic`` only): ``--workers`` processes of the lab's SSH server
  (``lab.mgmt.ssh_server``: asyncssh, the terminal netmiko expects) with a shell that answers
  the SONiC commands the agent polls (``Sonic.COUNTER_COMMANDS``), formatted by the lab's own
  SONiC show tables (``lab.mgmt.sonic.shows``). The exporter polls them with its normal code
  (netmiko, the SONiC driver's parser), the host key pinned.

Counters move every sample. A sample's values depend on the port and on the time (a quarter of
the sample interval for gNMI, 1 s for SSH), not on the switch: every switch of a worker sends
the bytes built once for that time, so the generator spends its CPU on the transport, not on
making up numbers. The exporter cannot tell: it parses every switch's sample in full.

The exporter is a real subprocess (``python -m agent exporter FABRIC --telemetry ...
--no-drift --no-host-nic``, and ``--insecure --no-ssh-complement`` for gNMI: the stream alone,
without the SSH read of what the stream lacks) on a generated fabric file; its CPU is read from
``/proc/<pid>/stat`` over a steady window that starts one interval (at most 15 s) after every
switch read up (or the wait for that gave up), its snapshots from ``roce_polls_total`` on
``/metrics`` (scraped uncompressed, ``--scrapes`` times spread over the window: they are part of
what the exporter pays). An update applied is counted as the lesser of those snapshots and the
sample sets (or polls) the switches sent: an exporter that falls behind publishes one SONiC
sample in two snapshots (its two notifications), or reads less than was sent. The generator's
CPU and the machine's busy share over the same window are printed next to it: a saturated
generator or machine makes the exporter's numbers a bound, not a measurement, and the table's
flags say so. Every wait is bounded; an exporter over ``--max-rss`` or whose scrapes keep
failing has its configuration given up, and the run goes on. Only processes the bench started
are stopped, by PID (and they die with it: ``PR_SET_PDEATHSIG``).

    python bench/gnmi_fleet.py [--targets 1000] [--ports 64] [--shape sonic|nvue]
        [--duration 60] [--configs gnmi1,gnmi15,ssh15,shard] [--workers N] [--concurrency 16]
        [--scrapes 4] [--up-timeout 300] [--max-rss 8] [--keep]

Measured on 2026-12-03 and 2026-12-04: docs/measurements/2026-12-03-gnmi-fleet.md,
docs/measurements/2026-12-04-gnmi-fleet.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import http.client
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

USERNAME = "admin"
PASSWORD = "bench-secret"
PASSWORD_ENV = "ROCE_BENCH_PASSWORD"
FABRIC_NAME = "gnmi-fleet"
LOSSLESS = 3
PRIORITIES = range(8)
SHAPES = ("sonic", "nvue")
PLATFORM = {"sonic": "sonic", "nvue": "cumulus_nvue"}
SHARD_INTERVAL_S = 15.0
SSH_CELL_S = 1.0  # the SSH fleet's counters move every second
CACHE_CELLS = 8  # sample sets a worker keeps (one per time cell)
SENT_EVERY_S = 0.5  # a worker writes what it sent this often
WORKER_START_S = 60.0  # per worker process, plus WORKER_START_PER_TARGET_S for each switch
WORKER_START_PER_TARGET_S = 0.05
EXPORTER_START_S = 180.0  # until the exporter serves /metrics (a 1 000-switch fabric loads)
SCRAPE_TIMEOUT_S = 120.0
SCRAPE_ATTEMPTS = 3  # in the window, one second apart; then the configuration is given up
STOP_WAIT_S = 15.0
CONFIG = re.compile(r"(gnmi|ssh)(\d+(?:\.\d+)?)")
_TICK = os.sysconf("SC_CLK_TCK")
# Counters count from here (2026-01-01 UTC), so that they stay far below 2^64 at any cell size.
EPOCH_NS = 1_767_225_600 * 10**9


class BenchError(Exception):
    """Bad options, or a process of the bench did not come up or died."""


class OverLimit(BenchError):
    """The exporter grew past ``--max-rss``: its configuration is given up, the run goes on."""


class ScrapeFailed(BenchError):
    """A scrape got no page (the exporter cut it, or did not answer in time)."""


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class RunConfig:
    """One measured exporter: its transport and interval."""

    telemetry: str  # gnmi | ssh
    interval_s: float

    @property
    def name(self) -> str:
        return f"{self.telemetry} {self.interval_s:g} s"


@dataclass(frozen=True)
class Plan:
    """What to run: the measured configurations, and the shard check."""

    runs: tuple[RunConfig, ...]
    shard: bool

    @property
    def transports(self) -> set[str]:
        found = {run.telemetry for run in self.runs}
        return found | {"gnmi", "ssh"} if self.shard else found


def parse_configs(text: str) -> Plan:
    """``gnmi1,gnmi15,ssh15,shard`` -> :class:`Plan`; :class:`BenchError` naming the bad one."""
    runs: list[RunConfig] = []
    shard = False
    for token in (t.strip() for t in text.split(",")):
        match = CONFIG.fullmatch(token)
        if token == "shard" and not shard:
            shard = True
        elif match and 0 < float(match.group(2)) <= 3600:
            run = RunConfig(match.group(1), float(match.group(2)))
            if run in runs:
                raise BenchError(f"--configs: {token!r} given twice")
            runs.append(run)
        else:
            raise BenchError(
                "--configs: Expected: a comma-separated list of gnmi<SECONDS>, ssh<SECONDS> "
                f"(0 < SECONDS <= 3600) and shard, each once. Actual: {token!r}"
            )
    return Plan(tuple(runs), shard)


@dataclass(frozen=True)
class Options:
    """The bench's options, checked."""

    targets: int
    ports: int
    shape: str
    duration_s: float
    plan: Plan
    workers: int
    concurrency: int
    scrapes: int
    up_timeout_s: float
    max_rss_gib: float
    keep: bool

    @property
    def max_rss_kib(self) -> int:
        return int(self.max_rss_gib * 2**20)


def check_options(args: argparse.Namespace) -> Options:
    """The parsed arguments as :class:`Options`; :class:`BenchError` for the first bad one."""
    plan = parse_configs(args.configs)
    bounds = (
        ("--targets", args.targets, 1, 5000),
        ("--ports", args.ports, 1, 512),
        ("--workers", args.workers, 1, 64),
        ("--concurrency", args.concurrency, 1, 1024),
        ("--scrapes", args.scrapes, 2, 100),
    )
    for option, value, low, high in bounds:
        if not low <= value <= high:
            raise BenchError(f"{option}: Expected: {low} to {high}. Actual: {value}")
    for option, seconds in (("--duration", args.duration), ("--up-timeout", args.up_timeout)):
        if not (math.isfinite(seconds) and 0 < seconds <= 86400):
            raise BenchError(f"{option}: Expected: seconds, > 0. Actual: {seconds}")
    if not (math.isfinite(args.max_rss) and 0 < args.max_rss <= 1024):
        raise BenchError(f"--max-rss: Expected: GiB, > 0. Actual: {args.max_rss}")
    if args.shape != "sonic" and "ssh" in plan.transports:
        raise BenchError(
            f"--configs: the SSH fleet emulates SONiC's show commands only; with --shape "
            f"{args.shape} give gnmi configurations only (no ssh..., no shard)"
        )
    if not plan.runs and not plan.shard:
        raise BenchError("--configs: nothing to run")
    return Options(
        args.targets, args.ports, args.shape, args.duration, plan, args.workers,
        args.concurrency, args.scrapes, args.up_timeout, args.max_rss, args.keep,
    )  # fmt: skip


# --------------------------------------------------------------------------- counters


def port_name(shape: str, index: int) -> str:
    """SONiC names a port after its first lane (4 lanes a port), Cumulus ``swp1``..."""
    return f"Ethernet{4 * index}" if shape == "sonic" else f"swp{index + 1}"


def pfc_frames(port: int, cell: int, direction: str) -> int:
    """Pause frames on the lossless priority (the lossy ones send none)."""
    return (7 if direction == "rx" else 3) * cell + 11 * port


def queue_counters(port: int, queue: int, cell: int) -> dict[str, int]:
    """One egress queue, in the agent's field names (``QueueCounters``). Packet and byte
    counters are large (past 10^9), as a switch's are after a while; only lossy queues drop,
    only the lossless one marks ECN; the watermark is a gauge."""
    packets = 10**9 * (queue + 1) + 1000 * (queue + 1) * cell + port
    return {
        "tx_packets": packets,
        "tx_bytes": packets * 1024,
        "dropped_packets": 0 if queue == LOSSLESS else (queue + 1) * cell + port,
        "ecn_marked_packets": 50 * cell + port if queue == LOSSLESS else 0,
        "watermark_bytes": 1024 * ((cell + port + queue) % 64),
    }


def storms(cell: int) -> int:
    """PFC watchdog storms detected (and as many restored) on the lossless queue."""
    return 1 + cell // 10**6


# --------------------------------------------------------------------------- SONiC over gNMI

_BUCKETS = ("64", "65_TO_127", "128_TO_255", "256_TO_511", "512_TO_1023", "1024_TO_1518",
            "1519_TO_2047", "2048_TO_4095", "4096_TO_9216", "9217_TO_16383")  # fmt: skip
_NAMED = {
    "ETHER_STATS": ("BROADCAST_PKTS", "COLLISIONS", "CRC_ALIGN_ERRORS", "DROP_EVENTS",
                    "FRAGMENTS", "JABBERS", "MULTICAST_PKTS", "OCTETS", "OVERSIZE_PKTS", "PKTS",
                    "RX_NO_ERRORS", "TX_NO_ERRORS", "UNDERSIZE_PKTS"),
    "IF_IN": ("BROADCAST_PKTS", "DISCARDS", "ERRORS", "MULTICAST_PKTS", "NON_UCAST_PKTS",
              "OCTETS", "UCAST_PKTS", "UNKNOWN_PROTOS", "VLAN_DISCARDS"),
    "IF_OUT": ("BROADCAST_PKTS", "DISCARDS", "ERRORS", "MULTICAST_PKTS", "NON_UCAST_PKTS",
               "OCTETS", "QLEN", "UCAST_PKTS"),
    "IPV6_IN": ("DISCARDS", "MCAST_PKTS", "NON_UCAST_PKTS", "OCTETS", "RECEIVES", "UCAST_PKTS"),
    "IPV6_OUT": ("DISCARDS", "MCAST_PKTS", "NON_UCAST_PKTS", "OCTETS", "UCAST_PKTS"),
    "IP_IN": ("DISCARDS", "NON_UCAST_PKTS", "OCTETS", "RECEIVES", "UCAST_PKTS"),
    "IP_OUT": ("DISCARDS", "NON_UCAST_PKTS", "OCTETS", "UCAST_PKTS"),
}  # fmt: skip
# Every field of a port's COUNTERS entry in sonic-gnmi's testdata/COUNTERS:Ethernet68.txt.
SAI_PORT_FIELDS = tuple(
    sorted(
        [f"SAI_PORT_STAT_ETHER_{d}_PKTS_{b}_OCTETS" for d in ("IN", "OUT") for b in _BUCKETS]
        + [f"SAI_PORT_STAT_ETHER_STATS_PKTS_{b}_OCTETS" for b in _BUCKETS]
        + ["SAI_PORT_STAT_ETHER_RX_OVERSIZE_PKTS", "SAI_PORT_STAT_ETHER_TX_OVERSIZE_PKTS"]
        + [f"SAI_PORT_STAT_{group}_{n}" for group, names in _NAMED.items() for n in names]
        + [
            f"SAI_PORT_STAT_PFC_{p}_{kind}_PKTS"
            for p in PRIORITIES
            for kind in ("ON2OFF_RX", "RX", "TX")
        ]
    )
)
_SAI_QUEUE = {
    "tx_packets": "SAI_QUEUE_STAT_PACKETS",
    "tx_bytes": "SAI_QUEUE_STAT_BYTES",
    "dropped_packets": "SAI_QUEUE_STAT_DROPPED_PACKETS",
    "ecn_marked_packets": "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS",
    "watermark_bytes": "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES",
}
# nvidia-default's watchdog (detection 300 ms, restoration 600 ms), in µs as pfcwdorch writes.
_WATCHDOG_STATIC = {
    "PFC_WD_ACTION": "drop",
    "PFC_WD_DETECTION_TIME": "300000",
    "PFC_WD_DETECTION_TIME_LEFT": "300000",
    "PFC_WD_RESTORATION_TIME": "600000",
    "PFC_WD_STATUS": "operational",
    "SAI_QUEUE_ATTR_PAUSE_STATUS": "false",
    "SAI_QUEUE_ATTR_PAUSE_STATUS_last": "false",
    "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": "0",
}


def sonic_port_fields(port: int, cell: int) -> dict[str, str]:
    """One port's ``COUNTERS`` map: every SAI field, a decimal string each (Redis strings)."""
    octets_in = 10**12 + 4096 * 1000 * cell + port
    moving = {
        "SAI_PORT_STAT_IF_IN_OCTETS": octets_in,
        "SAI_PORT_STAT_IF_OUT_OCTETS": octets_in + 17,
        "SAI_PORT_STAT_IF_IN_UCAST_PKTS": octets_in // 1024,
        "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": octets_in // 1024 + 1,
        "SAI_PORT_STAT_ETHER_STATS_OCTETS": 2 * octets_in,
        f"SAI_PORT_STAT_PFC_{LOSSLESS}_RX_PKTS": pfc_frames(port, cell, "rx"),
        f"SAI_PORT_STAT_PFC_{LOSSLESS}_TX_PKTS": pfc_frames(port, cell, "tx"),
    }
    return {name: str(moving.get(name, 0)) for name in SAI_PORT_FIELDS}


def sonic_queue_fields(port: int, queue: int, cell: int) -> dict[str, str]:
    """One ``<port>:<queue>`` entry of the ``Queues`` virtual path."""
    values = queue_counters(port, queue, cell)
    fields = {_SAI_QUEUE[name]: str(value) for name, value in values.items()}
    fields["SAI_QUEUE_STAT_DROPPED_BYTES"] = str(values["dropped_packets"] * 1024)
    if queue == LOSSLESS:
        fields.update(_WATCHDOG_STATIC)
        fields["PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED"] = str(storms(cell))
        fields["PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED"] = str(storms(cell))
        fields["SAI_QUEUE_STAT_PACKETS_last"] = fields["SAI_QUEUE_STAT_PACKETS"]
    return dict(sorted(fields.items()))


def sonic_queues(ports: int, cell: int) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for port in range(ports):
        name = port_name("sonic", port)
        for queue in PRIORITIES:
            found[f"{name}:{queue}"] = sonic_queue_fields(port, queue, cell)
            watermark = queue_counters(port, queue, cell)["watermark_bytes"]
            found[f"{name}:{queue}:periodic"] = {
                "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(watermark)
            }
    return found


def _pb() -> Any:
    from pygnmi.spec.v080 import gnmi_pb2

    return gnmi_pb2


def _proto_path(elems: Sequence[tuple[str, dict[str, str]]], target: str = "") -> Any:
    gnmi_pb2 = _pb()
    path = gnmi_pb2.Path(target=target)
    for name, keys in elems:
        path.elem.add(name=name, key=keys)
    return path


def sonic_samples(ports: int, cell: int, timestamp_ns: int) -> list[bytes]:
    """One sample set: the ports update and the queues update, serialized SubscribeResponses
    (prefix target ``COUNTERS_DB``, each value JSON_IETF), in :data:`SERVED` order."""
    gnmi_pb2 = _pb()
    ports_map = {port_name("sonic", p): sonic_port_fields(p, cell) for p in range(ports)}
    messages = []
    for key, data in (("", ports_map), ("Queues", sonic_queues(ports, cell))):
        elems: list[tuple[str, dict[str, str]]] = [("COUNTERS", {}), ("Ethernet*", {})]
        elems += [(key, {})] if key else []
        note = gnmi_pb2.Notification(timestamp=timestamp_ns, prefix=_proto_path((), "COUNTERS_DB"))
        value = gnmi_pb2.TypedValue(json_ietf_val=json.dumps(data).encode())
        note.update.add(path=_proto_path(elems), val=value)
        messages.append(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    return messages


# --------------------------------------------------------------------------- NVUE over gNMI

_NVUE_PAUSE = (("in-pause-pkts", "rx"), ("out-pause-pkts", "tx"))
_NVUE_QUEUE = (
    ("transmit-pkts", "tx_packets"),
    ("transmit-octets", "tx_bytes"),
    ("wred-dropped-pkts", "dropped_packets"),
    ("ecn-marked-pkts", "ecn_marked_packets"),
    ("max-queue-len", "watermark_bytes"),
)


def _interface(name: str) -> list[tuple[str, dict[str, str]]]:
    return [("qos", {}), ("interfaces", {}), ("interface", {"interface-id": name})]


class NvueSamples:
    """Cumulus Linux's ``/qos`` leaves, one ``uint_val`` update per leaf with its full path:
    the two responses are built once, and each sample only sets the values."""

    def __init__(self, ports: int) -> None:
        gnmi_pb2 = _pb()
        self.pause = gnmi_pb2.SubscribeResponse()
        self.queues = gnmi_pb2.SubscribeResponse()
        self.pause_slots: list[tuple[int, str]] = []
        self.queue_slots: list[tuple[int, int, str]] = []
        for port in range(ports):
            where = _interface(port_name("nvue", port))
            for p in PRIORITIES:
                for leaf, direction in _NVUE_PAUSE:
                    tail = [("switch-priority", {"priority": str(p)}), ("state", {}),
                            ("counters", {}), (leaf, {})]  # fmt: skip
                    self.pause.update.update.add(path=_proto_path(where + tail))
                    self.pause_slots.append((port, direction if p == LOSSLESS else ""))
            for q in PRIORITIES:
                for leaf, name in _NVUE_QUEUE:
                    tail = [("output", {}), ("queues", {}), ("queue", {"name": str(q)}),
                            ("state", {}), (leaf, {})]  # fmt: skip
                    self.queues.update.update.add(path=_proto_path(where + tail))
                    self.queue_slots.append((port, q, name))

    def samples(self, cell: int, timestamp_ns: int) -> list[bytes]:
        """The pause counters, then the queue counters (:data:`SERVED` order)."""
        self.pause.update.timestamp = timestamp_ns
        for update, (port, direction) in zip(
            self.pause.update.update, self.pause_slots, strict=True
        ):
            update.val.uint_val = pfc_frames(port, cell, direction) if direction else 0
        self.queues.update.timestamp = timestamp_ns
        values: dict[tuple[int, int], dict[str, int]] = {}
        for update, (port, q, name) in zip(
            self.queues.update.update, self.queue_slots, strict=True
        ):
            if (port, q) not in values:
                values[port, q] = queue_counters(port, q, cell)
            update.val.uint_val = values[port, q][name]
        return [self.pause.SerializeToString(), self.queues.SerializeToString()]


# --------------------------------------------------------------------------- gNMI server

# What each shape serves: (target, path text) per subscription, in the order of the samples.
SERVED = {
    "sonic": (("COUNTERS_DB", "COUNTERS/Ethernet*"), ("COUNTERS_DB", "COUNTERS/Ethernet*/Queues")),
    "nvue": (
        ("", "qos/interfaces/interface[interface-id=*]/switch-priority[priority=*]/state/counters"),
        ("", "qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"),
    ),
}
ENCODINGS = {"sonic": ("JSON_IETF", "JSON"), "nvue": ("PROTO", "JSON")}


def path_text(path: Any) -> str:
    """A protobuf Path's elements as ``a/b[k=v]/c`` (keys sorted)."""
    return "/".join(
        elem.name + "".join(f"[{k}={v}]" for k, v in sorted(elem.key.items())) for elem in path.elem
    )


def requested(request: Any, shape: str) -> tuple[list[int], float] | str:
    """Which of :data:`SERVED`'s subscriptions a SubscribeRequest asks for (their indexes) and
    its sample interval in seconds; or why it is refused."""
    gnmi_pb2 = _pb()
    wanted = request.subscribe
    if not request.HasField("subscribe") or wanted.mode != gnmi_pb2.SubscriptionList.STREAM:
        return "only STREAM subscriptions are served"
    encoding = gnmi_pb2.Encoding.Name(wanted.encoding)
    if encoding not in ENCODINGS[shape]:
        return f"unsupported encoding: {encoding}"
    served = [(target, text) for target, text in SERVED[shape]]
    kinds, intervals = [], []
    for item in wanted.subscription:
        target = wanted.prefix.target or item.path.target
        joined = "/".join(t for t in (path_text(wanted.prefix), path_text(item.path)) if t)
        if (target, joined) not in served:
            return f"Invalid subscription path: {target}:{joined}"
        if item.mode not in (gnmi_pb2.SubscriptionMode.SAMPLE, gnmi_pb2.TARGET_DEFINED):
            return "only SAMPLE subscriptions are served"
        kinds.append(served.index((target, joined)))
        intervals.append(item.sample_interval / 1e9 if item.sample_interval else 1.0)
    if not kinds:
        return "no subscription in the request"
    return kinds, min(intervals)


@dataclass
class Tally:
    """What a worker sent: complete sample sets (gNMI) or complete polls (SSH: the last of
    the agent's commands answered), over all its switches."""

    count: int = 0


class SampleCache:
    """Each time cell's sample set, built once for every switch of this worker."""

    def __init__(self, shape: str, ports: int) -> None:
        self.shape = shape
        self.ports = ports
        self.nvue = NvueSamples(ports) if shape == "nvue" else None
        self.sets: dict[tuple[int, int], list[bytes]] = {}

    def get(self, cell: int, cell_ns: int) -> list[bytes]:
        key = (cell, cell_ns)
        found = self.sets.get(key)
        if found is None:
            stamp = EPOCH_NS + cell * cell_ns
            if self.nvue is not None:
                found = self.nvue.samples(cell, stamp)
            else:
                found = sonic_samples(self.ports, cell, stamp)
            self.sets[key] = found
            while len(self.sets) > CACHE_CELLS:
                del self.sets[min(self.sets)]
        return found


class FleetServicer:
    """gNMI Subscribe and Capabilities for every switch of one worker (one shape)."""

    def __init__(self, shape: str, ports: int, tally: Tally) -> None:
        self.shape = shape
        self.cache = SampleCache(shape, ports)
        self.tally = tally
        self.sync = _pb().SubscribeResponse(sync_response=True).SerializeToString()

    async def _check(self, context: Any) -> None:
        import grpc

        metadata = dict(context.invocation_metadata())
        if metadata.get("username") != USERNAME or metadata.get("password") != PASSWORD:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad username or password")

    async def capabilities(self, request: Any, context: Any) -> bytes:
        gnmi_pb2 = _pb()
        await self._check(context)
        encodings = [gnmi_pb2.Encoding.Value(name) for name in ENCODINGS[self.shape]]
        answer = gnmi_pb2.CapabilityResponse(supported_encodings=encodings, gNMI_version="0.7.0")
        data: bytes = answer.SerializeToString()
        return data

    async def subscribe(self, requests: Any, context: Any) -> AsyncIterator[bytes]:
        """The first set, ``sync_response``, then a set every interval: the time cell is a
        quarter of the interval, so two samples of one stream always differ. A stream that fell
        behind (the client reads slowly) skips the samples it missed, as a switch does."""
        import grpc

        await self._check(context)
        request = await anext(requests)
        plan = requested(request, self.shape)
        if isinstance(plan, str):
            await context.abort(grpc.StatusCode.NOT_FOUND, plan)
            return
        kinds, interval_s = plan
        cell_ns = max(1, int(interval_s * 1e9 / 4))
        due = time.time()
        first = True
        while True:
            messages = self.cache.get((time.time_ns() - EPOCH_NS) // cell_ns, cell_ns)
            for kind in kinds:
                yield messages[kind]
            if first:
                yield self.sync
                first = False
            self.tally.count += 1
            due = max(due + interval_s, time.time())
            await asyncio.sleep(due - time.time())


async def serve_gnmi(
    shape: str, ports: int, count: int, tally: Tally | None = None
) -> tuple[Any, list[int]]:
    """A started grpc.aio server listening on ``count`` 127.0.0.1 ports, one switch each; the
    server and its ports."""
    import grpc

    gnmi_pb2 = _pb()
    servicer = FleetServicer(shape, ports, tally or Tally())
    handlers = {
        "Subscribe": grpc.stream_stream_rpc_method_handler(
            servicer.subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString
        ),
        "Capabilities": grpc.unary_unary_rpc_method_handler(
            servicer.capabilities, request_deserializer=gnmi_pb2.CapabilityRequest.FromString
        ),
    }
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", handlers),))
    numbers = [server.add_insecure_port("127.0.0.1:0") for _ in range(count)]
    await server.start()
    return server, numbers


# --------------------------------------------------------------------------- SSH fleet

# The SONiC show commands, as sonic-utilities spells them (the agent's Sonic.COUNTER_COMMANDS).
SHOW_COMMANDS = (
    "show pfc counters",
    "show queue counters",
    "show queue wredcounters",
    "show queue watermark unicast",
    "show priority-group drop counters",
    "pfcwd show stats",
)


def lab_counters(ports: int, cell: int) -> dict[str, Any]:
    """The counters in the shape the lab's data plane reports them (``lab.mgmt.sonic.shows``
    reads this shape): the same numbers as the gNMI samples of the same cell."""
    found: dict[str, Any] = {}
    for port in range(ports):
        pfc = {
            f"{direction}_xoff": [pfc_frames(port, cell, direction) if p == LOSSLESS else 0
                                  for p in PRIORITIES]
            for direction in ("rx", "tx")
        }  # fmt: skip
        queues = {}
        for q in PRIORITIES:
            values = queue_counters(port, q, cell)
            queues[str(q)] = {
                "tx_packets": values["tx_packets"],
                "tx_bytes": values["tx_bytes"],
                "tail_drops": values["dropped_packets"],
                "ecn_marked": values["ecn_marked_packets"],
                "watermark_bytes": values["watermark_bytes"],
                "watchdog": {"storms_detected": storms(cell), "storms_restored": storms(cell)},
            }
        ingress = {"headroom_drops": [0] * 8, "watermark_bytes": [0] * 8}
        found[f"eth{port + 1}"] = {"pfc": pfc, "queues": queues, "ingress": ingress}
    return {"ports": found}


def show_outputs(ports: int, cell: int) -> dict[str, str]:
    """Every command of :data:`SHOW_COMMANDS`, as the lab's SONiC formats it."""
    from lab.mgmt.sonic import shows

    views = [shows.PortView(port_name("sonic", p), f"eth{p + 1}", 30000) for p in range(ports)]
    counters = lab_counters(ports, cell)
    watched = {view.name: [LOSSLESS] for view in views}
    tables: dict[str, Callable[[], str]] = {
        "show pfc counters": lambda: shows.pfc_counters(views, counters),
        "show queue counters": lambda: shows.queue_counters(views, counters),
        "show queue wredcounters": lambda: shows.wred_counters(views, counters),
        "show queue watermark unicast": lambda: shows.queue_watermark(views, counters),
        "show priority-group drop counters": lambda: shows.pg_drops(views, counters),
        "pfcwd show stats": lambda: shows.pfcwd_stats(views, counters, watched, False),
    }
    return {command: make() for command, make in tables.items()}


@dataclass
class ShowCache:
    """The show outputs of each second, built once for every switch of this worker."""

    ports: int
    tally: Tally = field(default_factory=Tally)
    sets: dict[int, dict[str, str]] = field(default_factory=dict)

    def output(self, command: str, now: float) -> str | None:
        if command == SHOW_COMMANDS[-1]:
            self.tally.count += 1
        cell = int((now - EPOCH_NS / 1e9) / SSH_CELL_S)
        found = self.sets.get(cell)
        if found is None:
            found = self.sets[cell] = show_outputs(self.ports, cell)
            while len(self.sets) > CACHE_CELLS:
                del self.sets[min(self.sets)]
        return found.get(command)


def ssh_switch(name: str, cache: ShowCache) -> Any:
    """A lab personality (``lab.mgmt.personality.Personality``) whose bash answers the SONiC
    show commands from ``cache`` and nothing else (``command not found``)."""
    from lab.mgmt.linux_shell import LinuxShell, failed

    class CounterShell(LinuxShell):
        @property
        def hostname(self) -> str:
            return name

        async def run_program(self, argv: list[str], root: bool) -> str:
            text = cache.output(" ".join(argv), time.time())
            return text if text is not None else failed(f"-bash: {argv[0]}: command not found", 127)

    class CounterSwitch:
        nos = "sonic"

        def port_name(self, dataplane_name: str) -> str:
            return dataplane_name

        async def start(self) -> None:
            return None

        def new_terminal(self, user: str, privileged_login: bool, system_mac: str) -> Any:
            return CounterShell(user)

        async def close(self) -> None:
            return None

    return CounterSwitch()


async def serve_ssh(
    ports: int, share: range, state: Path, tally: Tally
) -> tuple[list[Any], list[int]]:
    """A lab SSH server on 127.0.0.1 for each switch of ``share``, the host key in ``state``;
    their acceptors and ports."""
    import asyncssh

    from lab.mgmt.persistence import HOST_KEY
    from lab.mgmt.ssh_server import AuthSettings, SshSettings, start_ssh_server

    key = asyncssh.read_private_key(str(state / HOST_KEY))  # made by the parent
    settings = SshSettings("127.0.0.1", 0, key, AuthSettings(USERNAME, PASSWORD, None))
    cache = ShowCache(ports, tally)
    acceptors, numbers = [], []
    for index in share:
        acceptor = await start_ssh_server(settings, ssh_switch(switch_name(index), cache))
        acceptors.append(acceptor)
        numbers.append(int(acceptor.sockets[0].getsockname()[1]))
    return acceptors, numbers


# --------------------------------------------------------------------------- worker processes


def switch_name(index: int) -> str:
    return f"sw{index:04d}"


def _die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the bench dies (Linux ``PR_SET_PDEATHSIG``), so
    no switch or exporter outlives a bench killed without its clean-up."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)


@dataclass(frozen=True)
class Worker:
    """One switch process: ``--serve KIND SHAPE PORTS FIRST COUNT STATE OUT``."""

    kind: str  # gnmi | ssh
    shape: str
    ports: int
    share: range  # its switches' numbers
    state: Path  # the bench's folder (the SSH host key)
    out: Path  # where it writes its switches' ports, once listening

    @classmethod
    def parse(cls, argv: Sequence[str]) -> Worker:
        kind, shape, ports, first, count, state, out = argv
        share = range(int(first), int(first) + int(count))
        return cls(kind, shape, int(ports), share, Path(state), Path(out))

    @property
    def sent_file(self) -> Path:
        """Where it keeps its :class:`Tally` (every :data:`SENT_EVERY_S`)."""
        return self.out.with_suffix(".sent")

    def argv(self) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), "--serve", self.kind, self.shape,
                str(self.ports), str(self.share.start), str(len(self.share)), str(self.state),
                str(self.out)]  # fmt: skip


def write_whole(path: Path, text: str) -> None:
    """Whole or absent: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def _serve(worker: Worker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    share, tally = worker.share, Tally()
    if worker.kind == "gnmi":
        server, numbers = await serve_gnmi(worker.shape, worker.ports, len(share), tally)
    else:
        acceptors, numbers = await serve_ssh(worker.ports, share, worker.state, tally)
    write_whole(worker.out, json.dumps(dict(zip(map(switch_name, share), numbers, strict=True))))
    while not stop.is_set():
        write_whole(worker.sent_file, str(tally.count))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SENT_EVERY_S)
    if worker.kind == "gnmi":
        await server.stop(0)
    else:
        for acceptor in acceptors:
            acceptor.close()


def serve_main(argv: Sequence[str]) -> None:
    """One switch process, until SIGTERM."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    asyncio.run(_serve(Worker.parse(argv)))


@dataclass
class Fleet:
    """One fleet's worker processes and the switches' ports."""

    kind: str
    processes: list[subprocess.Popen[bytes]]
    ports: dict[str, int]
    sent_files: list[Path] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def sent(self) -> int:
        """Sample sets (gNMI) or polls (SSH) the workers sent so far, all together."""
        total = 0
        for path in self.sent_files:
            with contextlib.suppress(FileNotFoundError, ValueError):
                total += int(path.read_text())
        return total


def shares(targets: int, workers: int) -> list[range]:
    """Consecutive switches per worker, as even as can be."""
    count = min(workers, targets)
    size, extra = divmod(targets, count)
    found, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        found.append(range(start, end))
        start = end
    return found


def start_fleet(kind: str, options: Options, state: Path) -> Fleet:
    """The ``kind`` (gnmi | ssh) switches in ``options.workers`` processes; every wait bounded,
    and a worker that dies stops the others."""
    fleet = Fleet(kind, [], {})
    log_path = state / f"{kind}-workers.log"
    work = shares(options.targets, options.workers)
    files = [state / f"{kind}-ports-{number}.json" for number in range(len(work))]
    limit = WORKER_START_S + WORKER_START_PER_TARGET_S * options.targets / len(work)
    try:
        with log_path.open("ab") as log:
            for share, out in zip(work, files, strict=True):
                worker = Worker(kind, options.shape, options.ports, share, state, out)
                fleet.sent_files.append(worker.sent_file)
                process = subprocess.Popen(
                    worker.argv(), stdout=subprocess.DEVNULL, stderr=log,
                    preexec_fn=_die_with_parent,
                )  # fmt: skip
                fleet.processes.append(process)
        for out in files:
            _wait_for_file(out, fleet.processes, limit, log_path)
            fleet.ports.update(json.loads(out.read_text()))
    except BaseException:
        stop_processes(fleet.processes)
        raise
    return fleet


def _wait_for_file(
    path: Path, processes: Sequence[subprocess.Popen[bytes]], limit_s: float, log: Path
) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        dead = [p for p in processes if p.poll() is not None]
        if dead:
            raise BenchError(f"a switch worker exited with {dead[0].returncode} (log: {log})")
        if time.monotonic() > deadline:
            raise BenchError(f"switch workers not up after {limit_s:.0f} s (log: {log})")
        time.sleep(0.1)


def stop_processes(processes: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each of ours still running, then SIGKILL to those that did not go."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        process.terminate()
    for process in running:
        try:
            process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_WAIT_S)


# --------------------------------------------------------------------------- fabric


def write_fabric(
    path: Path, shape: str, ports: int, fleets: dict[str, Fleet], host_key: str | None
) -> list[str]:
    """The fabric file of the switches: ``platform`` of the shape, 127.0.0.1, each its SSH and
    gNMI ports, the SSH host key pinned, credentials from :data:`PASSWORD_ENV`. Returns the
    switch names."""
    gnmi = fleets.get("gnmi")
    ssh = fleets.get("ssh")
    names = sorted(set(gnmi.ports if gnmi else ()) | set(ssh.ports if ssh else ()))
    # One range a switch (agent/intent/expand.py): 1 000 x 64 ports written one by one would
    # pass the YAML loader's bound of 200 000 values (common/yamlsource.py YamlLimits).
    last = port_name(shape, ports - 1)
    if ports == 1:
        port_lines = [f"      - {{name: {last}}}"]
    elif shape == "sonic":
        port_lines = [f"      - {{name: Ethernet0-{last.removeprefix('Ethernet')}, step: 4}}"]
    else:
        port_lines = [f"      - {{name: swp1-{ports}}}"]
    lines = [
        f"name: {FABRIC_NAME}",
        "profile: nvidia-default",
        "defaults:",
        f"  username: {USERNAME}",
        f"  credentials: {{password_env: {PASSWORD_ENV}}}",
        "  ports: {speed: 100G, cable_m: 1, mtu: 9000}",
        "devices:",
    ]
    for name in names:
        lines += [f"  - name: {name}", f"    platform: {PLATFORM[shape]}", "    role: leaf",
                  "    host: 127.0.0.1"]  # fmt: skip
        if ssh is not None:
            lines += [f"    port: {ssh.ports[name]}", f"    host_key: {host_key}"]
        elif gnmi is not None:
            # No SSH fleet: a port of its own all the same (one device per address and port,
            # rule IR012); --telemetry gnmi --no-drift --no-ssh-complement never opens SSH.
            lines.append(f"    port: {gnmi.ports[name]}")
        if gnmi is not None:
            lines.append(f"    gnmi: {{port: {gnmi.ports[name]}}}")
        lines += ["    ports:", *port_lines]
    path.write_text("\n".join(lines) + "\n")
    return names


# --------------------------------------------------------------------------- /proc and /metrics


def cpu_seconds(stat_text: str) -> float:
    """User + system CPU seconds from a ``/proc/<pid>/stat`` line (the command name, in
    parentheses, may hold spaces and parentheses itself)."""
    fields = stat_text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15


def memory_kib(status_text: str) -> dict[str, int]:
    """``VmHWM`` and ``VmRSS`` (KiB) from ``/proc/<pid>/status``."""
    found = {}
    for line in status_text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(rest.split()[0])
    return found


def machine_ticks(stat_text: str) -> tuple[int, int]:
    """(busy, all) jiffies of every CPU together, from ``/proc/stat``'s first line."""
    values = [int(v) for v in stat_text.splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is counted in user already
    return total - idle, total


def process_cpu(pids: Iterable[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += cpu_seconds(Path(f"/proc/{pid}/stat").read_text())
    return total


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def family(text: bytes, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric family in an exposition: its lines follow its ``# TYPE``
    line (the text format keeps a family together), so only they are read -- a fleet's page
    is hundreds of megabytes."""
    start = text.find(f"# TYPE {name} ".encode())
    if start < 0:
        return []
    heads = (f"{name}{{".encode(), f"{name} ".encode())
    found = []
    position = text.find(b"\n", start) + 1
    while position:
        end = text.find(b"\n", position)
        line = text[position : end if end >= 0 else len(text)]
        if not line.startswith(heads):
            break
        labels, _, value = line.decode().rpartition(" ")
        found.append((dict(_LABEL.findall(labels)), float(value)))
        position = end + 1
    return found


def by_device(text: bytes, name: str) -> dict[str, float]:
    return {labels["device"]: value for labels, value in family(text, name) if "device" in labels}


def down_states(text: bytes) -> Counter[str]:
    """How many switches are in each state other than up (``roce_device_state``)."""
    return Counter(
        labels.get("state", "?")
        for labels, value in family(text, "roce_device_state")
        if value == 1 and labels.get("state") != "up"
    )


# --------------------------------------------------------------------------- the exporter


@dataclass
class Exporter:
    """A running ``roce-agent exporter`` subprocess."""

    process: subprocess.Popen[bytes]
    log: Path
    started: float
    max_rss_kib: int
    url: str = ""

    def alive(self) -> None:
        """Raise if it exited, or (:class:`OverLimit`) if it holds more than its limit."""
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise BenchError(f"the exporter exited with {self.process.returncode}:\n{tail}")
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            status = Path(f"/proc/{self.process.pid}/status").read_text()
            rss = memory_kib(status).get("VmRSS", 0)
            if rss > self.max_rss_kib:
                raise OverLimit(
                    f"the exporter held {rss / 2**20:.1f} GiB, over --max-rss "
                    f"{self.max_rss_kib / 2**20:g} GiB, {time.monotonic() - self.started:.0f} s "
                    "after its start: given up"
                )

    def wait(self, seconds: float) -> None:
        """Sleep, looking at it every second."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            self.alive()


def exporter_argv(
    fabric: Path, run: RunConfig, concurrency: int, shard: str | None = None
) -> list[str]:
    argv = [sys.executable, "-m", "agent", "exporter", str(fabric),
            "--telemetry", run.telemetry, "--interval", f"{run.interval_s:g}s",
            "--listen", "127.0.0.1:0", "--no-drift", "--no-host-nic",
            "--concurrency", str(concurrency)]  # fmt: skip
    if run.telemetry == "gnmi":
        # The stream alone: the SSH read of what SONiC does not stream (its headroom drops,
        # one command every 15 s at most) is a cost of SSH, not of gNMI.
        argv += ["--insecure", "--no-ssh-complement"]
    if shard is not None:
        argv += ["--shard", shard]
    return argv


def start_exporter(argv: list[str], log: Path, max_rss_kib: int) -> Exporter:
    env = {**os.environ, PASSWORD_ENV: PASSWORD}
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=out,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
    exporter = Exporter(process, log, time.monotonic(), max_rss_kib)
    try:
        exporter.url = _served_url(exporter)
    except BaseException:
        stop_processes([process])
        raise
    return exporter


_SERVING = re.compile(r"serving (http://\S+/metrics)")


def _served_url(exporter: Exporter) -> str:
    deadline = time.monotonic() + EXPORTER_START_S
    while True:
        exporter.alive()
        found = _SERVING.search(exporter.log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if time.monotonic() > deadline:
            raise BenchError(f"the exporter served nothing after {EXPORTER_START_S:g} s")
        time.sleep(0.1)


def scrape(url: str) -> tuple[float, bytes]:
    """One uncompressed scrape: its wall time and the page."""
    begun = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            body: bytes = response.read()
    except (OSError, http.client.HTTPException) as error:
        raise ScrapeFailed(
            f"a scrape got no page after {time.perf_counter() - begun:.1f} s "
            f"({type(error).__name__}: {error})"
        ) from None
    return time.perf_counter() - begun, body


@dataclass(frozen=True)
class UpResult:
    seconds: float | None  # from the exporter's start; None: not every switch within the limit
    up: int
    served: frozenset[str]


def wait_all_up(
    exporter: Exporter, expected: set[str], timeout_s: float, stall_s: float
) -> UpResult:
    """Scrape until every switch the exporter serves reads ``roce_device_up 1`` and it serves
    exactly ``expected``, scraping no more often than one takes. Gives up at ``timeout_s`` from
    the exporter's start, or when the count of switches up has not reached a new high for
    ``stall_s`` (an exporter that cannot keep every switch up never will)."""
    deadline = exporter.started + timeout_s
    best, best_at = -1, time.monotonic()
    up: dict[str, float] = {}
    ups = 0
    while True:
        exporter.alive()
        if time.monotonic() > min(deadline, best_at + stall_s):
            return UpResult(None, ups, frozenset(up))
        try:
            wall, text = scrape(exporter.url)
        except ScrapeFailed:  # a busy exporter cuts a slow scrape: the next one may pass
            exporter.wait(1.0)
            continue
        up = by_device(text, "roce_device_up")
        ups = sum(1 for v in up.values() if v == 1)
        if set(up) == expected and ups == len(expected):
            return UpResult(time.monotonic() - exporter.started, ups, frozenset(up))
        if ups > best:
            best, best_at = ups, time.monotonic()
        exporter.wait(min(5.0, max(0.5, wall)))


def stall_limit(interval_s: float) -> float:
    """How long the up count may stay below its best before the wait gives up."""
    return max(60.0, 3 * interval_s)


@dataclass(frozen=True)
class Sample:
    """What the bench reads at one moment."""

    at: float
    exporter_cpu: float
    generator_cpu: float
    sent: int
    client_cpu: float
    machine: tuple[int, int]


def sample(exporter: Exporter, fleet: Fleet) -> Sample:
    return Sample(
        time.monotonic(),
        process_cpu([exporter.process.pid]),
        process_cpu(fleet.pids),
        fleet.sent(),
        time.process_time(),
        machine_ticks(Path("/proc/stat").read_text()),
    )


@dataclass(frozen=True)
class Scrape:
    """One scrape, read and let go (a fleet's page is hundreds of megabytes)."""

    wall_s: float
    size: int
    polls: float
    states: dict[str, int]


def scrape_summary(url: str) -> Scrape:
    wall, text = scrape(url)
    return Scrape(wall, len(text), polls(text), dict(down_states(text)))


def scrape_retrying(exporter: Exporter, failures: list[str]) -> Scrape:
    """A scrape, tried :data:`SCRAPE_ATTEMPTS` times; each failure noted in ``failures``."""
    for attempt in range(1, SCRAPE_ATTEMPTS + 1):
        try:
            return scrape_summary(exporter.url)
        except ScrapeFailed as error:
            failures.append(str(error))
            if attempt == SCRAPE_ATTEMPTS:
                raise
        exporter.wait(1.0)
    raise AssertionError("unreachable")


def polls(text: bytes) -> float:
    return sum(by_device(text, "roce_polls_total").values())


@dataclass(frozen=True)
class Window:
    """The steady window: the samples at its ends and the scrapes in it."""

    first: Sample
    last: Sample
    scrapes: list[Scrape]
    rss: dict[str, int]  # the exporter's VmHWM and VmRSS at its end
    failures: list[str]  # scrapes that got no page (each tried again)

    def delta(self, name: str) -> float:
        return float(getattr(self.last, name) - getattr(self.first, name))

    @property
    def machine_busy(self) -> float:
        busy, total = (b - a for a, b in zip(self.first.machine, self.last.machine, strict=True))
        return busy / max(1, total)


def measure_window(exporter: Exporter, fleet: Fleet, duration_s: float, scrapes: int) -> Window:
    """``scrapes`` scrapes spread over ``duration_s``; the window runs from the end of the
    first to the end of the last, the updates from the first one's snapshot to the last's."""
    failures: list[str] = []
    pages = [scrape_retrying(exporter, failures)]
    first = sample(exporter, fleet)
    for index in range(1, scrapes):
        exporter.wait(first.at + duration_s * index / (scrapes - 1) - time.monotonic())
        pages.append(scrape_retrying(exporter, failures))
    last = sample(exporter, fleet)
    rss = memory_kib(Path(f"/proc/{exporter.process.pid}/status").read_text())
    return Window(first, last, pages, rss, failures)


@dataclass(frozen=True)
class Row:
    """One configuration's measurement."""

    name: str
    interval_s: float
    switches: int
    up: UpResult
    window_s: float
    updates: float  # roce_polls_total, all switches
    sent: float  # sample sets (gNMI) or polls (SSH) the generator sent
    cpu_s: float
    rss_peak_kib: int
    rss_kib: int
    scrapes_s: tuple[float, ...]
    scrape_bytes: int
    generator_cpu_s: float
    client_cpu_s: float
    machine_busy: float
    states: dict[str, int]
    workers: int
    scrape_failures: int = 0

    @classmethod
    def of(cls, run: RunConfig, switches: int, up: UpResult, window: Window, workers: int) -> Row:
        pages, rss = window.scrapes, window.rss
        return cls(
            run.name, run.interval_s, switches, up, window.delta("at"),
            pages[-1].polls - pages[0].polls, window.delta("sent"), window.delta("exporter_cpu"),
            rss.get("VmHWM", 0), rss.get("VmRSS", 0), tuple(p.wall_s for p in pages),
            pages[-1].size, window.delta("generator_cpu"), window.delta("client_cpu"),
            window.machine_busy, pages[-1].states, workers, len(window.failures),
        )  # fmt: skip

    @property
    def expected(self) -> float:
        return self.switches * self.window_s / self.interval_s

    @property
    def applied(self) -> float:
        """Complete counter sets the exporter can have applied: at most one per snapshot it
        published (``roce_polls_total``) and at most one per set the switches sent. The two
        differ when the exporter publishes a sample in parts (its two SONiC notifications
        more than 50 ms apart: the loop was behind) or does not read all that was sent."""
        return min(self.updates, self.sent)

    @property
    def cpu_per_k(self) -> float:
        """Exporter CPU seconds per 1 000 complete sets applied."""
        return 1000 * self.cpu_s / self.applied if self.applied else math.inf

    @property
    def cores(self) -> float:
        return self.cpu_s / self.window_s

    @property
    def generator_cores(self) -> float:
        return self.generator_cpu_s / self.window_s

    def flags(self) -> str:
        """R: under 95 % of the sets the interval asks for were applied; P: 5 % more
        snapshots published than sets sent (samples published in parts: the exporter's loop
        was behind); G: the generator busy (80 % of a core per worker); M: the machine 90 %
        busy; D: switches down at the end; S: a scrape got no page (and was tried again)."""
        marks = ""
        marks += "R" if self.applied < 0.95 * self.expected else ""
        marks += "P" if self.updates > 1.05 * self.sent else ""
        marks += "G" if self.generator_cores >= 0.8 * self.workers else ""
        marks += "M" if self.machine_busy >= 0.9 else ""
        marks += "D" if self.states else ""
        marks += "S" if self.scrape_failures else ""
        return marks or "-"


def run_config(run: RunConfig, fabric: Path, names: list[str], fleet: Fleet, opts: Options) -> Row:
    """Start the exporter, wait for every switch, settle, measure the window, stop it."""
    log = fabric.with_name(f"exporter-{run.telemetry}-{run.interval_s:g}.log")
    exporter = start_exporter(exporter_argv(fabric, run, opts.concurrency), log, opts.max_rss_kib)
    try:
        up = wait_all_up(exporter, set(names), opts.up_timeout_s, stall_limit(run.interval_s))
        exporter.wait(min(run.interval_s, 15.0))
        window = measure_window(exporter, fleet, opts.duration_s, opts.scrapes)
    finally:
        stop_processes([exporter.process])
    return Row.of(run, len(names), up, window, len(fleet.processes))


# --------------------------------------------------------------------------- shards


@dataclass(frozen=True)
class ShardRun:
    telemetry: str
    shards: tuple[UpResult, ...]


def run_shards(telemetry: str, fabric: Path, names: list[str], opts: Options) -> ShardRun:
    """Two exporters at once, ``--shard 1/2`` and ``2/2``, until each has its switches up."""
    from agent.intent.shard import Shard

    run = RunConfig(telemetry, SHARD_INTERVAL_S)
    exporters: list[Exporter] = []
    try:
        for index in (1, 2):
            log = fabric.with_name(f"exporter-shard-{telemetry}-{index}.log")
            argv = exporter_argv(fabric, run, opts.concurrency, f"{index}/2")
            exporters.append(start_exporter(argv, log, opts.max_rss_kib))
        stall = stall_limit(SHARD_INTERVAL_S)
        results = tuple(
            wait_all_up(exporter, set(Shard(k, 2).select(names)), opts.up_timeout_s, stall)
            for k, exporter in enumerate(exporters, start=1)
        )
    finally:
        stop_processes([e.process for e in exporters])
    return ShardRun(telemetry, results)


def shard_lines(runs: Sequence[ShardRun], names: list[str]) -> list[str]:
    """Each shard's switches per transport, and whether the split is whole and the same."""
    lines = []
    for run in runs:
        for index, result in enumerate(run.shards, start=1):
            up = f"all up in {result.seconds:.1f} s" if result.seconds else "NOT all up"
            lines.append(
                f"  {run.telemetry:<4} shard {index}/2: serves {len(result.served):5d} switches,"
                f" {result.up:5d} up ({up})"
            )
    verdicts = []
    for run in runs:
        one, two = (set(r.served) for r in run.shards)
        whole = one | two == set(names) and not one & two
        verdicts.append(f"{run.telemetry}: {'whole, disjoint' if whole else 'NOT A SPLIT'}")
    if len(runs) == 2:
        same = all(
            a.served == b.served for a, b in zip(runs[0].shards, runs[1].shards, strict=True)
        )
        verdicts.append("the same split with gNMI as with SSH" if same else "SPLITS DIFFER")
    return [*lines, "  " + "; ".join(verdicts)]


# --------------------------------------------------------------------------- report

HEADER = (
    f"{'config':<10} {'switches':>8} {'all up s':>8} {'window s':>8} {'polls':>8} "
    f"{'sent':>8} {'of asked':>8} {'cpu s':>7} {'cores':>6} {'cpu s/1k':>8} "
    f"{'rss peak/now MB':>15} {'scrape med/max s':>16} {'MB':>6} {'gen cores':>9} "
    f"{'client':>6} {'machine':>7} flags"
)


def row_line(row: Row) -> str:
    up = f"{row.up.seconds:.1f}" if row.up.seconds is not None else f"{row.up.up} up"
    rss = f"{row.rss_peak_kib / 1024:.0f}/{row.rss_kib / 1024:.0f}"
    scrape_times = f"{statistics.median(row.scrapes_s):.2f}/{max(row.scrapes_s):.2f}"
    return (
        f"{row.name:<10} {row.switches:>8} {up:>8} {row.window_s:>8.1f} {row.updates:>8.0f} "
        f"{row.sent:>8.0f} {row.applied / row.expected:>8.0%} {row.cpu_s:>7.2f} "
        f"{row.cores:>6.2f} {row.cpu_per_k:>8.2f} {rss:>15} {scrape_times:>16} "
        f"{row.scrape_bytes / 1e6:>6.1f} {row.generator_cores:>9.2f} "
        f"{row.client_cpu_s / row.window_s:>6.2f} {row.machine_busy:>7.0%} {row.flags()}"
        + (f"  down: {dict(sorted(row.states.items()))}" if row.states else "")
    )


def _find(rows: Sequence[Row], telemetry: str, interval_s: float) -> Row | None:
    name = RunConfig(telemetry, interval_s).name
    return next((row for row in rows if row.name == name), None)


def ratio_lines(rows: Sequence[Row]) -> list[str]:
    """The two ratios the issue asks for, where this run measured both sides."""
    lines = []
    gnmi15, gnmi1, ssh15 = _find(rows, "gnmi", 15), _find(rows, "gnmi", 1), _find(rows, "ssh", 15)
    if gnmi15 and ssh15 and gnmi15.applied and ssh15.applied:
        lines.append(
            f"CPU per update, gNMI 15 s / SSH 15 s: {gnmi15.cpu_per_k / ssh15.cpu_per_k:.2f}x "
            f"({gnmi15.cpu_per_k:.2f} vs {ssh15.cpu_per_k:.2f} CPU s per 1 000 updates)"
        )
    if gnmi1 and ssh15 and ssh15.cpu_s:
        lines.append(
            f"CPU per second, gNMI 1 s / SSH 15 s: {gnmi1.cores / ssh15.cores:.2f}x "
            f"({gnmi1.cores:.2f} vs {ssh15.cores:.2f} cores)"
        )
    return lines or ["(no ratio: it needs gnmi15 and ssh15, or gnmi1 and ssh15, in one run)"]


def caveat_lines(rows: Sequence[Row]) -> list[str]:
    lines = []
    for row in rows:
        if "G" in row.flags() or "M" in row.flags():
            lines.append(
                f"{row.name}: the generator or the machine was saturated: its numbers bound what "
                "the exporter could do here, they do not measure it"
            )
        if "R" in row.flags():
            lines.append(
                f"{row.name}: {row.applied:.0f} sets applied where the interval asks for "
                f"{row.expected:.0f}: the exporter (or the machine) did not keep up"
            )
        if "P" in row.flags():
            lines.append(
                f"{row.name}: {row.updates:.0f} snapshots for {row.sent:.0f} sets sent: samples "
                "published in parts (the exporter's loop behind by more than 50 ms)"
            )
    return lines


def machine_line() -> str:
    load = os.getloadavg()
    return (
        f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, Python {sys.version.split()[0]}"
    )


# --------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    found.add_argument("--targets", type=int, default=1000, help="switches (default 1000)")
    found.add_argument("--ports", type=int, default=64, help="ports per switch (default 64)")
    found.add_argument("--shape", choices=SHAPES, default="sonic", help="the NOS the switches play")
    found.add_argument("--duration", type=float, default=60.0, help="steady window, seconds")
    found.add_argument("--configs", default="gnmi1,gnmi15,ssh15,shard",
                       help="gnmi<S>, ssh<S> (exporter at interval S seconds), shard")  # fmt: skip
    found.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1,
        help="switch processes per fleet (default: one per CPU)",
    )  # fmt: skip
    found.add_argument(
        "--concurrency", type=int, default=16,
        help="the exporter's --concurrency, SSH polls at once (default 16)",
    )  # fmt: skip
    found.add_argument("--scrapes", type=int, default=4, help="scrapes over the window")
    found.add_argument(
        "--up-timeout", type=float, default=300.0,
        help="seconds for every switch to read up (then measured anyway)",
    )  # fmt: skip
    found.add_argument(
        "--max-rss", type=float, default=8.0,
        help="GiB: an exporter holding more is stopped and its configuration given up (8)",
    )  # fmt: skip
    found.add_argument("--keep", action="store_true", help="keep the fabric and the logs")
    found.add_argument("--serve", nargs=7, help=argparse.SUPPRESS)
    return found


def bench(opts: Options, state: Path) -> None:
    """Start the fleets, write the fabric, run every configuration, print the results."""
    from lab.mgmt.launcher import host_public_key

    print(machine_line(), flush=True)
    print(
        f"{opts.targets} switches x {opts.ports} ports, shape {opts.shape}, "
        f"{opts.workers} generator processes per fleet, window {opts.duration_s:g} s"
    )
    fleets: dict[str, Fleet] = {}
    try:
        for kind in sorted(opts.plan.transports):
            fleets[kind] = start_fleet(kind, opts, state)
        host_key = host_public_key(state) if "ssh" in fleets else None
        fabric = state / "fabric.yml"
        names = write_fabric(fabric, opts.shape, opts.ports, fleets, host_key)
        rows: list[Row] = []
        print(HEADER if opts.plan.runs else "", end="\n" if opts.plan.runs else "")
        for run in opts.plan.runs:
            try:
                rows.append(run_config(run, fabric, names, fleets[run.telemetry], opts))
            except (OverLimit, ScrapeFailed) as error:
                print(f"{run.name:<10} given up: {error}", flush=True)
                continue
            print(row_line(rows[-1]), flush=True)
        for line in (ratio_lines(rows) if opts.plan.runs else []) + caveat_lines(rows):
            print(line)
        if opts.plan.shard:
            runs = [run_shards(t, fabric, names, opts) for t in ("gnmi", "ssh")]
            print(f"--shard 1/2 and 2/2 at {SHARD_INTERVAL_S:g} s:")
            print("\n".join(shard_lines(runs, names)))
    finally:
        for fleet in fleets.values():
            stop_processes(fleet.processes)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the clean-up in bench() runs


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.serve:
        serve_main(args.serve)
        return 0
    try:
        opts = check_options(args)
    except BenchError as error:
        parser().error(str(error))
    signal.signal(signal.SIGTERM, _terminated)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket per switch, twice
    state = Path(tempfile.mkdtemp(prefix="gnmi-fleet-"))
    from lab.mgmt.persistence import load_or_create_host_key

    load_or_create_host_key(state)  # once, here: the SSH workers only read it
    try:
        bench(opts, state)
    except BenchError as error:
        print(f"gnmi_fleet: {error}", file=sys.stderr)
        return 1
    finally:
        if opts.keep:
            print(f"fabric and logs kept in {state}", file=sys.stderr)
        else:
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The path-aware probe mesh (issue #15): many low-rate flows, each pinned to one ECMP path
by its UDP source port, from every host at once — Pingmesh's scheduling on RoCEv2 probes.

One sender process per source host sends all of that host's flows round-robin (a process per
flow would cost more CPU to start than the mesh spends sending), paced to a per-host rate cap
so probing never congests what it measures, honouring PFC for the RoCE priority like a NIC.
One receiver per destination host tracks every flow (per-QP PSN, ICRC, one-way latency).
Each row says where its receive times came from (``timestamp_source``: the kernel's stamp,
hardware or software, or user space; :mod:`agent.observe.probes.timestamps`), its latency
from the kernel's stamps when there are any, and how long the receiving host held the
frames before its probe process read them (``host_delay_ms``): a slow host, not the network.
"""

from __future__ import annotations

import ipaddress
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from agent.intent.model import FabricIntent
from agent.observe.probes.packets import ROCE_UDP_PORT, Flow, RoceTemplate, parse_pfc
from agent.observe.probes.rawsock import interface_mac, open_port, roce_or_pfc_filter
from agent.observe.probes.runner import ProbeHandle
from agent.observe.probes.scenarios import (
    BASE_QPN,
    RESULT_GRACE_S,
    Endpoint,
    ScenarioError,
    endpoint,
    flow_of,
    start_receivers,
    transport_for,
)
from agent.observe.probes.sender import (
    ETHERNET_OVERHEAD,
    MAX_DURATION_S,
    MAX_START_WAIT_S,
    resolve_path,
    wait_for_start,
)
from agent.observe.probes.transport import Transport
from lossless.pfc import PauseHonouring

MESH_PAYLOAD_BYTES = 256
# Apart from the scenarios' QPs (BASE_QPN + i): an incast that loads the fabric while the
# mesh runs must not be counted as mesh flows, nor the mesh as the incast's.
MESH_BASE_QPN = BASE_QPN + 0x10000
MAX_FLOWS_PER_HOST = 4096


@dataclass(frozen=True)
class MeshFlow:
    dst_ip: str
    sport: int
    qpn: int
    flow_id: int


@dataclass(frozen=True)
class MeshSendSpec:
    """All flows of one source host; ``rate_bps`` is the host's total, shared equally."""

    ifname: str
    flows: tuple[MeshFlow, ...]
    rate_bps: int
    link_speed_bps: int
    duration_s: float
    size: int = MESH_PAYLOAD_BYTES
    dscp: int = 26
    priority: int = 3
    start_at: float | None = None
    udp_port: int = ROCE_UDP_PORT

    def __post_init__(self) -> None:
        if not 0 < len(self.flows) <= MAX_FLOWS_PER_HOST:
            raise ValueError(f"flows: Expected: 1..{MAX_FLOWS_PER_HOST}. Actual: {len(self.flows)}")
        if not 0 < self.rate_bps <= self.link_speed_bps:
            raise ValueError(
                f"rate_bps: Expected: 1..link speed ({self.link_speed_bps}). "
                f"Actual: {self.rate_bps}"
            )
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(
                f"duration_s: Expected: (0, {MAX_DURATION_S:g}]. Actual: {self.duration_s}"
            )
        if self.start_at is not None and abs(self.start_at - time.time()) > MAX_START_WAIT_S:
            raise ValueError(
                f"start_at: Expected: within {MAX_START_WAIT_S:g} s of this host's clock"
            )
        for flow in self.flows:
            ipaddress.IPv4Address(flow.dst_ip)

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> MeshSendSpec:
        flows = tuple(MeshFlow(**f) for f in spec.pop("flows"))
        return cls(flows=flows, **spec)


def run_mesh_sender(spec: MeshSendSpec, ready: Callable[[], None] | None = None) -> dict[str, Any]:
    """Send every flow round-robin at ``rate_bps`` in total until ``duration_s``; per flow,
    how many were sent."""
    mac = interface_mac(spec.ifname)
    # One route lookup per destination, not per flow (a host has several paths to each).
    routes = {dst: resolve_path(dst) for dst in {flow.dst_ip for flow in spec.flows}}
    templates = []
    for flow in spec.flows:
        _, src_ip, next_hop = routes[flow.dst_ip]
        templates.append(
            RoceTemplate(
                Flow(mac, next_hop, src_ip, flow.dst_ip, dscp=spec.dscp, sport=flow.sport,
                     qpn=flow.qpn, flow_id=flow.flow_id, size=spec.size, udp_port=spec.udp_port)
            )
        )  # fmt: skip
    sent = [0] * len(templates)
    pause = PauseHonouring(spec.link_speed_bps)
    sock = open_port(spec.ifname, bpf=roce_or_pfc_filter(spec.udp_port))
    try:
        if ready:
            ready()
        wait_for_start(spec.start_at)
        start = time.monotonic()
        deadline = start + spec.duration_s
        due = start
        index = 0
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wake = pause.paused_until if pause.is_paused(now) else due
            readable, _, _ = select.select([sock], [], [], max(0.0, min(wake, deadline) - now))
            now = time.monotonic()
            if readable:
                _drain_pauses(sock, spec.priority, pause, now)
            if pause.is_paused(now) or now < due:
                continue
            template = templates[index]
            sock.send(template.frame(sent[index], sent[index], time.time_ns()))
            sent[index] += 1
            index = (index + 1) % len(templates)
            # Paced from the schedule, never bursting to catch up after a pause.
            due = max(due, now - 0.01) + (template.length + ETHERNET_OVERHEAD) * 8 / spec.rate_bps
        pause.finish(time.monotonic())
    finally:
        sock.close()
    return {
        "role": "mesh-send",
        "flows": [
            {"dst_ip": f.dst_ip, "sport": f.sport, "qpn": f.qpn, "sent": n}
            for f, n in zip(spec.flows, sent, strict=True)
        ],
        "paused_s": round(pause.paused_s, 6),
    }


def _drain_pauses(sock: Any, priority: int, pause: PauseHonouring, now: float) -> None:
    while True:
        try:
            frame = sock.recv(65536)
        except BlockingIOError:
            return
        pfc = parse_pfc(frame)
        if pfc is not None and pfc.enabled >> priority & 1:
            pause.receive(pfc.quanta[priority], now)


# --------------------------------------------------------------------------- orchestration


@dataclass(frozen=True)
class MeshProbe:
    """One flow to run: from ``src`` to ``dst`` on the path its ``sport`` selects."""

    src: str
    dst: str
    sport: int


@dataclass(frozen=True)
class MeshResult:
    src: str
    dst: str
    sport: int
    sent: int
    received: int
    icrc_errors: int
    latency_min_ms: float | None  # user space: when the probe process read the frame
    kernel_latency_min_ms: float | None = None  # the kernel's receive stamp (None: none)
    timestamp_source: str = "user"  # "hardware" | "software" | "user": the weakest frame's
    host_delay_ms: float | None = None  # 90th percentile of user-space read - kernel stamp


class MeshOptions(TypedDict, total=False):
    """:func:`run_mesh`'s payload per packet (:data:`MESH_PAYLOAD_BYTES`) and transport
    (default: chosen for the hosts)."""

    size: int
    transport: Transport | None


def run_mesh(
    intent: FabricIntent,
    probes: list[MeshProbe],
    duration_s: float = 5.0,
    rate_per_host_bps: int = 1_000_000,
    **options: Unpack[MeshOptions],
) -> list[MeshResult]:
    """Every probe flow at once, each source host capped at ``rate_per_host_bps`` in total
    (and at a tenth of its link, so the mesh never congests what it measures)."""
    if not probes:
        raise ScenarioError("the mesh has no flows (no host pair with a path)")
    ends, targets, sources = _endpoints(intent, probes)
    transport = options.get("transport") or transport_for(intent, list(ends.values()))
    receivers = start_receivers(intent, targets, duration_s, sources, transport)
    every_sender = {
        "duration_s": duration_s,
        "size": options.get("size", MESH_PAYLOAD_BYTES),
        "dscp": intent.profile.roce.dscp,
        "priority": intent.profile.roce.priority,
        "start_at": _start_at(sources),
        "udp_port": transport.udp_port,
    }
    qpn = {probe: MESH_BASE_QPN + i for i, probe in enumerate(probes)}
    senders: list[tuple[Endpoint, ProbeHandle]] = []
    try:
        for source in sources:
            spec = {
                "ifname": source.ifname,
                "flows": _flows_from(source, probes, ends, qpn),
                "rate_bps": min(rate_per_host_bps, source.speed_bps // 10),
                "link_speed_bps": source.speed_bps,
                **every_sender,
            }
            senders.append((source, source.runner.start("mesh-send", spec)))
        sent, received = _collect(senders, receivers, duration_s)
    except Exception:
        for process in [s for _, s in senders] + list(receivers.values()):
            process.kill()
        raise
    return [_result(probe, sent, received, ends, qpn[probe]) for probe in probes]


def _endpoints(
    intent: FabricIntent, probes: list[MeshProbe]
) -> tuple[dict[str, Endpoint], list[Endpoint], list[Endpoint]]:
    """Every host of the mesh by name, then its destinations and its sources, by name."""
    names = sorted({p.src for p in probes} | {p.dst for p in probes})
    ends: dict[str, Endpoint] = {name: endpoint(intent, name) for name in names}
    targets = [ends[n] for n in sorted({p.dst for p in probes})]
    sources = [ends[n] for n in sorted({p.src for p in probes})]
    return ends, targets, sources


def _start_at(sources: list[Endpoint]) -> float:
    """When the senders send their first frame: once the slowest of them can have started
    (its runner's margin for this many at once)."""
    margins = (s.runner.start_margin_s for s in sources)
    return time.time() + max(first + each * len(sources) for first, each in margins)


def _flows_from(
    source: Endpoint, probes: list[MeshProbe], ends: dict[str, Endpoint], qpn: dict[MeshProbe, int]
) -> list[dict[str, Any]]:
    """The flows of the probes that start at ``source``, as its mesh-send spec lists them."""
    return [
        {"dst_ip": ends[p.dst].ip, "sport": p.sport, "qpn": qpn[p], "flow_id": qpn[p]}
        for p in probes
        if p.src == source.device.name
    ]


def _collect(
    senders: list[tuple[Endpoint, ProbeHandle]],
    receivers: dict[str, ProbeHandle],
    duration_s: float,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Once every sender is ready (they start together at ``start_at``): what each sender
    sent and each receiver saw, by host."""
    for _, sender in senders:
        sender.wait_ready()
    sent = {
        source.device.name: sender.result(timeout=duration_s + 2 * RESULT_GRACE_S)
        for source, sender in senders
    }
    received = {
        name: process.result(timeout=duration_s + 3 * RESULT_GRACE_S)
        for name, process in receivers.items()
    }
    return sent, received


def _result(
    probe: MeshProbe,
    sent: dict[str, dict[str, Any]],
    received: dict[str, dict[str, Any]],
    ends: dict[str, Endpoint],
    qpn: int,
) -> MeshResult:
    """One flow as its sender counted it and its receiver saw it (nothing: all lost)."""
    row = next(f for f in sent[probe.src]["flows"] if f["qpn"] == qpn)
    seen = flow_of(received[probe.dst], ends[probe.src].ip, qpn)
    seen = seen or {}
    return MeshResult(
        probe.src,
        probe.dst,
        probe.sport,
        row["sent"],
        seen.get("received", 0),
        seen.get("icrc_errors", 0),
        _ms(seen.get("latency", {}).get("min_s")),
        _ms(seen.get("kernel_latency", {}).get("min_s")),
        seen.get("timestamp_source", "user"),
        _ms(seen.get("host_delay", {}).get("p90_s")),
    )


def _ms(seconds: float | None) -> float | None:
    return seconds * 1000 if seconds is not None else None

"""The live receiver: counts what arrived and answers CE marks with CNPs like a NIC.

One AF_PACKET socket with the RoCE-or-PFC kernel filter and a 4 MiB buffer feeds the shared
:mod:`agent.observe.probes.analysis` engine. As a notification point it sends a CNP back to the
sender
of a CE-marked packet, at most one per QP per ``min_time_between_cnps`` (mlx5 semantics; the
rule is :class:`lossless.dcqcn.NotificationPoint`, driven here on wall time, or on emulated
time -- wall time / ``time_dilation`` -- on a lab link that stands for a faster one, so the
pacing interval is the emulated NIC's: see :mod:`agent.observe.probes.dilation`).

Anyone who can reach UDP 4791 can send to it, so its state is bounded: the analyser tracks at
most ``max_flows`` QPs, CNP pacing is kept only for tracked QPs, and when the senders are known
(``senders``, or the sources named in ``expected``) frames from any other source are only
counted as ``foreign_frames``: they create no state, get no CNP and do not hold the idle
timeout open.

Receive times come from the kernel where it stamps frames (``SO_TIMESTAMPING``, hardware then
software: :mod:`agent.observe.probes.timestamps`), else from user space; each flow says which
(``timestamp_source``), its kernel-stamped latency and how long this host held its frames
before the receiver read them (``host_delay``). The ``latency`` block stays user-space.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.observe.probes.analysis import DEFAULT_MAX_FLOWS, PfcAnalyzer, RoceAnalyzer
from agent.observe.probes.dilation import Dilation
from agent.observe.probes.packets import ECN_CE, ROCE_UDP_PORT, RoceView, cnp_packet
from agent.observe.probes.rawsock import interface_mac, mac_text, open_port, roce_or_pfc_filter
from agent.observe.probes.timestamps import (
    HostDelay,
    TimestampSource,
    enable_rx_timestamps,
    receive,
    weakest,
)
from lossless.dcqcn import NotificationPoint

MAX_DURATION_S = 3600.0


@dataclass(frozen=True)
class ReceiveSpec:
    ifname: str
    duration_s: float
    link_speed_bps: int
    idle_timeout_s: float | None = None  # stop this long after the last data frame
    notification_point: bool = True
    min_time_between_cnps_us: int = 4
    cnp_dscp: int = 48
    storm_after_s: float = 0.2
    expected: dict[str, int] | None = None  # "src_ip/qpn" → frames sent (for tail loss)
    senders: tuple[str, ...] | None = None  # IPv4 sources to track; None: any (or expected's)
    max_flows: int = DEFAULT_MAX_FLOWS
    time_dilation: float = 1.0  # emulated fabrics only: see agent.observe.probes.dilation
    udp_port: int = ROCE_UDP_PORT  # where the probes arrive (agent.observe.probes.transport)

    def __post_init__(self) -> None:
        Dilation(self.time_dilation)  # refuses a factor out of range
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(f"duration_s must be in (0, {MAX_DURATION_S}], got {self.duration_s}")
        if self.max_flows < 1:
            raise ValueError(f"max_flows must be at least 1, got {self.max_flows}")
        for address in self.senders or ():
            try:
                ipaddress.IPv4Address(address)
            except ValueError:
                raise ValueError(f"senders: {address!r} is not an IPv4 address") from None

    def sources(self) -> set[str] | None:
        """The IPv4 sources to track, None when any source is accepted."""
        if self.senders is not None:
            return set(self.senders)
        if self.expected:
            return {name.partition("/")[0] for name in self.expected}
        return None


def run_receiver(spec: ReceiveSpec, ready: Callable[[], None] | None = None) -> dict[str, Any]:
    """Receive until the duration ends (or the idle timeout); JSON-ready result."""
    roce = RoceAnalyzer(max_flows=spec.max_flows, sources=spec.sources(), udp_port=spec.udp_port)
    pfc = PfcAnalyzer(spec.link_speed_bps, spec.storm_after_s)
    my_mac = interface_mac(spec.ifname)
    sock = open_port(spec.ifname, bpf=roce_or_pfc_filter(spec.udp_port))
    stamps = _Stamps(enable_rx_timestamps(sock))
    responder = _CnpResponder(spec, my_mac, sock)
    start = time.monotonic()
    last_data = start
    try:
        if ready:
            ready()
        deadline = start + spec.duration_s
        while (now := time.monotonic()) < deadline:
            # Only tracked data counts: foreign frames must not end the run before the senders.
            if (
                spec.idle_timeout_s is not None
                and last_data > start
                and now - last_data > spec.idle_timeout_s
            ):
                break
            readable, _, _ = select.select([sock], [], [], min(0.05, deadline - now))
            if readable:
                last_data = _drain(sock, _Feeds(roce, pfc, responder, stamps), last_data)
        elapsed = time.monotonic() - start
    finally:
        sock.close()
    result = roce.result(_expected_sent(spec, roce))
    for flow in result["flows"]:
        flow.update(stamps.flow(flow["src_ip"], flow["qpn"]))
    return {
        "role": "receive",
        "interface": spec.ifname,
        "udp_port": spec.udp_port,
        "duration_s": round(elapsed, 6),
        **result,
        "timestamp_source": stamps.source(),
        "timestamps_granted": stamps.granted,
        "cnps_sent": responder.sent,
        "time_dilation": spec.time_dilation,
        "senders": sorted(roce.sources) if roce.sources is not None else None,
        "pfc": pfc.result(time.monotonic()),
    }


@dataclass(frozen=True)
class _Feeds:
    """What a receiver feeds each frame to: the RoCE and PFC analysers, the notification
    point that answers CE marks, and the receive timestamps."""

    roce: RoceAnalyzer
    pfc: PfcAnalyzer
    responder: _CnpResponder
    stamps: _Stamps


def _drain(sock: socket.socket, feeds: _Feeds, last_data: float) -> float:
    """Take every queued frame; returns when the last tracked data frame arrived."""
    roce, pfc, responder, stamps = feeds.roce, feeds.pfc, feeds.responder, feeds.stamps
    while True:
        try:
            frame, user_ns, kernel_ns, source = receive(sock)
        except BlockingIOError:
            return last_data
        now = time.monotonic()
        if pfc.feed(frame, now) is not None:
            continue
        view = roce.feed(frame, user_ns)
        if view is None:
            continue
        last_data = now
        stamps.observe(view, user_ns, kernel_ns, source)
        responder.on_data(view, now)


class _Stamps:
    """Per tracked flow: which receive timestamps its frames carried, its kernel-stamped
    latency and this host's delay (bounded: only flows the analyser tracks get here)."""

    def __init__(self, granted: TimestampSource) -> None:
        self.granted = granted
        self.flows: dict[tuple[str, int], HostDelay] = {}

    def observe(
        self, view: RoceView, user_ns: int, kernel_ns: int | None, source: TimestampSource
    ) -> None:
        key = (view.src_ip, view.qpn)
        delay = self.flows.get(key)
        if delay is None:
            delay = self.flows[key] = HostDelay()
        delay.observe(user_ns, kernel_ns, source, view.sent_ns or 0)

    def flow(self, src_ip: str, qpn: int) -> dict[str, Any]:
        return (self.flows.get((src_ip, qpn)) or HostDelay()).as_dict()

    def source(self) -> TimestampSource:
        """What this receiver used: the weakest source of any frame (before any frame:
        what the socket was granted)."""
        used = {s for d in self.flows.values() for s in d.sources}
        return weakest(used) if used else self.granted


class _CnpResponder:
    """The notification point: a CNP back to the sender of a CE-marked packet, paced per QP."""

    def __init__(self, spec: ReceiveSpec, my_mac: str, sock: socket.socket) -> None:
        self.spec = spec
        self.my_mac = my_mac
        self.sock = sock
        self.notification = NotificationPoint(spec.min_time_between_cnps_us)
        self.dilation = Dilation(spec.time_dilation)
        self.sent = 0
        # A CNP's bytes depend only on the flow: built once (scapy builds a frame far more
        # slowly than a NIC answers: every CNP would be late, even in a dilated link's time).
        self.cnps: dict[tuple[str, int], tuple[tuple[Any, str], bytes]] = {}

    def on_data(self, view: RoceView, now: float) -> None:
        spec = self.spec
        if not (
            spec.notification_point
            and view.ecn == ECN_CE
            and view.opcode != 0x81
            and self.notification.on_ce((view.src_ip, view.qpn), self.dilation.model_time(now))
        ):
            return
        self.sock.send(self._cnp(view))
        self.sent += 1

    def _cnp(self, view: RoceView) -> bytes:
        # Keyed like the notification point (one entry per tracked QP); the addresses are
        # checked so that a QP seen with another MAC or destination gets a CNP for what it
        # sent, without growing the cache.
        key = (view.src_ip, view.qpn)
        addresses = (view.src_mac, view.dst_ip)
        cached = self.cnps.get(key)
        if cached is None or cached[0] != addresses:
            spec = self.spec
            cached = self.cnps[key] = (addresses, bytes(cnp_packet(
                self.my_mac, mac_text(view.src_mac), view.dst_ip, view.src_ip,
                view.qpn, dscp=spec.cnp_dscp, udp_port=spec.udp_port,
            )))  # fmt: skip
        return cached[1]


def _expected_sent(spec: ReceiveSpec, roce: RoceAnalyzer) -> dict[Any, int] | None:
    """What the senders said they sent, per tracked flow (for tail loss); None unknown."""
    if not spec.expected:
        return None
    sent = {}
    for flow_name, count in spec.expected.items():
        src, _, qpn = flow_name.partition("/")
        for flow_key in roce.flows:
            if flow_key[0] == src and flow_key[2] == int(qpn, 0):
                sent[flow_key] = count
    return sent

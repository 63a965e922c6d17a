"""A paced RoCEv2 sender that behaves like a NIC: honours PFC, optionally runs DCQCN.

Frames come from a :class:`RoceTemplate` (no scapy object per packet). The sender never sends
above its configured rate nor more than its count, and stops by itself at its deadline. A
plain Linux host ignores PFC frames, but a RoCE NIC stops the paused priority; the sender does
that itself, so a lab host behaves like a NIC on the wire. With DCQCN on, CNPs for its QP cut
its rate (reaction point). Both rules are the shared model's (:mod:`lossless.pfc`
``PauseHonouring``, :mod:`lossless.dcqcn`), driven here on wall time; on a lab link that stands
for a faster one (``time_dilation``) the reaction point runs in emulated time and rates
(:mod:`agent.observe.probes.dilation`), while pacing and PFC stay on the lab's own clock and speed.
"""

from __future__ import annotations

import ipaddress
import json
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scapy.contrib.roce import CNP_OPCODE

from agent.observe.probes.dilation import Dilation
from agent.observe.probes.packets import (
    ECN_ECT0,
    ROCE_UDP_PORT,
    Flow,
    RoceTemplate,
    parse_pfc,
    parse_roce,
)
from agent.observe.probes.rawsock import interface_mac, open_port, roce_or_pfc_filter
from lossless.clock import Clock, WallClock
from lossless.dcqcn import DcqcnReactionPoint
from lossless.pfc import PauseHonouring

ETHERNET_OVERHEAD = 24  # FCS 4 + preamble/SFD 8 + inter-frame gap 12: what a link really carries
MAX_DURATION_S = 3600.0
MIN_TICK_S = 0.005
MAX_START_WAIT_S = 60.0


@dataclass(frozen=True)
class SendSpec:
    """What to send; every field has a bound so a probe always stops by itself."""

    ifname: str
    dst_ip: str
    rate_bps: int
    link_speed_bps: int
    count: int | None = None
    duration_s: float | None = None
    size: int = 1000
    dscp: int = 26
    priority: int = 3  # the priority PFC pauses for this traffic (DSCP→priority of the fabric)
    qpn: int = 0x100
    sport: int = 49152
    udp_port: int = ROCE_UDP_PORT  # destination port; CNPs come back to it too
    flow_id: int = 0
    ecn: int = ECN_ECT0
    honour_pfc: bool = True
    dcqcn: dict[str, int] | None = None
    src_ip: str | None = None
    dst_mac: str | None = None
    time_dilation: float = 1.0  # emulated fabrics only: see agent.observe.probes.dilation
    # Wall-clock time (``time.time()``) of the first frame: the senders of an incast start
    # together, as a collective's do, whatever each one's start-up took.
    start_at: float | None = None

    def __post_init__(self) -> None:
        Dilation(self.time_dilation)  # refuses a factor out of range
        if self.start_at is not None and not (
            time.time() - MAX_START_WAIT_S <= self.start_at <= time.time() + MAX_START_WAIT_S
        ):
            raise ValueError(
                f"start_at: Expected: within {MAX_START_WAIT_S:g} s of this host's clock "
                f"Actual: {self.start_at!r} (now {time.time():.3f})"
            )
        if self.count is None and self.duration_s is None:
            raise ValueError("give count or duration_s")
        if self.rate_bps <= 0 or self.rate_bps > self.link_speed_bps:
            raise ValueError(
                f"rate_bps must be 1..link speed ({self.link_speed_bps}), got {self.rate_bps}"
            )
        if self.duration_s is not None and not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(f"duration_s must be in (0, {MAX_DURATION_S}], got {self.duration_s}")
        if self.count is not None and self.count < 0:
            raise ValueError(f"count must be >= 0, got {self.count}")
        if not 0 <= self.priority <= 7:
            raise ValueError(f"priority must be 0..7, got {self.priority}")


@dataclass
class SendResult:
    sent: int = 0
    sent_bytes: int = 0
    duration_s: float = 0.0
    paused_s: float = 0.0
    pfc_frames: int = 0
    cnps: int = 0
    rate_cuts: int = 0
    final_rate_bps: float = 0.0
    min_rate_bps: float = 0.0
    paced_s_per_bit: float = 0.0
    start_late_s: float | None = None
    rate_history: list[tuple[float, float]] = field(default_factory=list)

    def as_dict(self, spec: SendSpec) -> dict[str, Any]:
        achieved = self.sent_bytes * 8 / self.duration_s if self.duration_s else 0.0
        return {
            "role": "send",
            "flow": {
                "src_ip": spec.src_ip,
                "dst_ip": spec.dst_ip,
                "qpn": spec.qpn,
                "sport": spec.sport,
                "udp_port": spec.udp_port,
                "dscp": spec.dscp,
                "flow_id": spec.flow_id,
            },
            "sent": self.sent,
            "sent_bytes": self.sent_bytes,
            "duration_s": round(self.duration_s, 6),
            "send_rate_bps": round(achieved),
            "configured_rate_bps": spec.rate_bps,
            "paused_s": round(self.paused_s, 6),
            "pfc_frames_received": self.pfc_frames,
            "cnps_received": self.cnps,
            "rate_cuts": self.rate_cuts,
            "final_rate_bps": round(self.final_rate_bps),
            "min_rate_bps": round(self.min_rate_bps),
            # The rate the frames were paced at, weighted by the time each frame's slot lasts
            # (the harmonic mean): what DCQCN allowed, whatever the host's CPU achieved.
            "paced_rate_bps": round(self.sent / self.paced_s_per_bit) if self.sent else None,
            "time_dilation": spec.time_dilation,
            **(
                {"start_late_s": round(self.start_late_s, 6)}
                if self.start_late_s is not None
                else {}
            ),
            **(
                {"dcqcn_lab": Dilation(spec.time_dilation).lab_parameters(spec.dcqcn)}
                if spec.dcqcn and spec.time_dilation != 1
                else {}
            ),
        }


def _ip_json(args: list[str]) -> Any:
    done = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout or "[]")


def resolve_path(dst_ip: str) -> tuple[str, str, str]:
    """(interface, source IP, next-hop MAC) for ``dst_ip`` from the kernel's route and
    neighbour tables — the same lookup a RoCE NIC's driver does for an RC connection."""
    route = _ip_json(["route", "get", dst_ip])[0]
    ifname, src = route["dev"], route["prefsrc"]
    hop = route.get("gateway", dst_ip)
    for neighbour in _ip_json(["neigh", "show", "dev", ifname]):
        if neighbour.get("dst") == hop and "lladdr" in neighbour:
            return ifname, src, str(neighbour["lladdr"])
    raise RuntimeError(f"no neighbour entry for next hop {hop} on {ifname} (ARP not resolved)")


def wait_for_start(start_at: float | None) -> float | None:
    """Sleep until the agreed wall-clock moment (senders that start together); how late this
    host woke up, or None without one."""
    if start_at is None:
        return None
    time.sleep(max(0.0, start_at - time.time()))
    return max(0.0, time.time() - start_at)


def run_sender(
    spec: SendSpec, clock: Clock | None = None, ready: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Send the flow; returns a JSON-ready result. ``ready`` is called once the socket is
    open, before waiting for ``start_at``."""
    ipaddress.IPv4Address(spec.dst_ip)
    spec = _routed(spec)
    template = RoceTemplate(_flow(spec))
    dilation = Dilation(spec.time_dilation)
    reaction = (
        DcqcnReactionPoint(dilation.model_rate(spec.rate_bps), spec.dcqcn) if spec.dcqcn else None
    )
    result = SendResult(final_rate_bps=spec.rate_bps, min_rate_bps=spec.rate_bps)
    sending = _Sending(spec, template, dilation, reaction, result)
    sock = open_port(spec.ifname, bpf=roce_or_pfc_filter(spec.udp_port))
    try:
        if ready:
            ready()
        result.start_late_s = wait_for_start(spec.start_at)
        sending.run(sock, clock if clock is not None else WallClock())
    finally:
        sock.close()
    if reaction:
        result.final_rate_bps = dilation.lab_rate(reaction.current_bps)
        result.rate_cuts = reaction.cuts
    return result.as_dict(spec)


def _routed(spec: SendSpec) -> SendSpec:
    """``spec`` with its source IP and next-hop MAC, from the kernel where it gives none."""
    src_ip, dst_mac = spec.src_ip, spec.dst_mac
    if src_ip is None or dst_mac is None:
        _, resolved_src, resolved_mac = resolve_path(spec.dst_ip)
        src_ip, dst_mac = src_ip or resolved_src, dst_mac or resolved_mac
    return SendSpec(**{**spec.__dict__, "src_ip": src_ip, "dst_mac": dst_mac})


def _flow(spec: SendSpec) -> Flow:
    assert spec.src_ip is not None and spec.dst_mac is not None  # see _routed
    return Flow(
        src_mac=interface_mac(spec.ifname),
        dst_mac=spec.dst_mac,
        src_ip=spec.src_ip,
        dst_ip=spec.dst_ip,
        dscp=spec.dscp,
        ecn=spec.ecn,
        sport=spec.sport,
        qpn=spec.qpn,
        flow_id=spec.flow_id,
        size=spec.size,
        udp_port=spec.udp_port,
    )


class _Sending:
    """One flow on the wire: paced to its rate (DCQCN's, with a reaction point), held while
    PFC pauses its priority, until its count or its deadline."""

    def __init__(
        self,
        spec: SendSpec,
        template: RoceTemplate,
        dilation: Dilation,
        reaction: DcqcnReactionPoint | None,
        result: SendResult,
    ) -> None:
        self.spec = spec
        self.template = template
        self.wire_bits = (template.length + ETHERNET_OVERHEAD) * 8
        self.dilation = dilation
        self.reaction = reaction
        self.result = result
        self.pause = PauseHonouring(spec.link_speed_bps)

    def tick(self) -> float:
        """How long the loop may sleep at most. A NIC's rate timer runs while the QP waits;
        so must the model's, or a rate cut to the floor would hold the next frame for seconds
        whatever the timer says. Wake at least once per (dilated) recovery period to let it
        step -- but not more often than MIN_TICK_S: at real time that period (300 µs) is
        shorter than one lab frame."""
        if self.reaction is None or not self.spec.dcqcn:
            return MAX_DURATION_S
        reset = {"rpg_time_reset": self.spec.dcqcn["rpg_time_reset"]}
        return max(MIN_TICK_S, self.dilation.lab_parameters(reset)["rpg_time_reset"] * 1e-6)

    def rate(self) -> float:
        if self.reaction:
            return self.dilation.lab_rate(self.reaction.current_bps)
        return self.spec.rate_bps

    def run(self, sock: Any, clock: Clock) -> None:
        """Send until the count or the deadline, on ``clock``'s time."""
        spec, result, pause, reaction = self.spec, self.result, self.pause, self.reaction
        start = clock.now()
        deadline = start + (spec.duration_s if spec.duration_s is not None else MAX_DURATION_S)
        slot = start  # when the last frame was due; the next is due one frame time later
        tick = self.tick()
        limit = spec.count if spec.count is not None else 1 << 62
        while result.sent < limit:
            now = clock.now()
            if now >= deadline:
                break
            next_send = slot + self.wire_bits / self.rate() if result.sent else start
            wake = pause.paused_until if pause.is_paused(now) else next_send
            timeout = max(0.0, min(wake, deadline, now + tick) - now)
            readable, _, _ = select.select([sock], [], [], timeout)
            now = clock.now()
            if readable:
                self.drain(sock, now)
            if reaction:
                reaction.advance(self.dilation.model_time(now))
            rate = self.rate()
            next_send = slot + self.wire_bits / rate if result.sent else start
            if pause.is_paused(now) or now < next_send:
                continue
            self.send(sock, now, rate)
            # Pace from the schedule, but never burst to catch up after a pause.
            slot = max(next_send, now - self.wire_bits / rate)
        end = clock.now()
        result.duration_s = end - start
        pause.finish(end)  # only the time paused while sending
        result.paused_s = pause.paused_s

    def send(self, sock: Any, now: float, rate: float) -> None:
        result = self.result
        sock.send(self.template.frame(result.sent, result.sent, time.time_ns()))
        result.sent += 1
        result.sent_bytes += self.template.length
        result.paced_s_per_bit += 1 / rate
        if self.reaction:
            self.reaction.on_sent(self.dilation.model_time(now), self.template.length)
            result.min_rate_bps = min(result.min_rate_bps, rate)

    def drain(self, sock: Any, now: float) -> None:
        """Handle every queued PFC frame and CNP."""
        spec, result, pause = self.spec, self.result, self.pause
        reaction, dilation = self.reaction, self.dilation
        while True:
            try:
                frame = sock.recv(65536)
            except BlockingIOError:
                return
            pfc = parse_pfc(frame)
            if pfc is not None:
                result.pfc_frames += 1
                if spec.honour_pfc and pfc.enabled >> spec.priority & 1:
                    pause.receive(pfc.quanta[spec.priority], now)
                continue
            try:
                view = parse_roce(frame, udp_port=spec.udp_port)
            except ValueError:
                continue
            if view is not None and view.opcode == CNP_OPCODE and view.qpn == spec.qpn:
                result.cnps += 1
                if reaction is not None and reaction.on_cnp(dilation.model_time(now)):
                    lab_rate = dilation.lab_rate(reaction.current_bps)
                    result.min_rate_bps = min(result.min_rate_bps, lab_rate)

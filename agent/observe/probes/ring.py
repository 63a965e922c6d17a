"""One rank of a lab ring all-reduce: a NIC that sends its chunk to the next rank once it has
the previous step's chunk from the one before.

NCCL's ring all-reduce over N ranks is 2(N-1) steps (N-1 reduce-scatter, N-1 all-gather); in
step s every rank sends one chunk (size / N bytes) to its successor, and the chunk it sends in
step s is the one it received in step s-1 (reduced or copied). So a rank may start step s only
when all of step s-1 has arrived from its predecessor -- the dependency that makes a ring as
slow as its slowest link (NCCL's ring algorithm, nccl-tests ``doc/PERFORMANCE.md`` for the
bandwidth definitions the scenario reports).

On the wire it is the probe sender and receiver in one loop on one socket: RoCEv2 frames to the
successor paced at the link rate (or DCQCN's), PFC honoured, CNPs cutting the rate (reaction
point); the predecessor's frames counted per step (PSN = step x chunk frames + index) and
CE marks answered with CNPs (notification point), all with the shared model
(:mod:`lossless.dcqcn`, :mod:`lossless.pfc`) in emulated time as the probes are
(:mod:`agent.observe.probes.dilation`). There is no retransmission: on the lossless class a
lost frame is a failure, and the rank stops at its deadline with the steps it missed.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from typing import Any

from scapy.contrib.roce import CNP_OPCODE

from agent.observe.probes.dilation import Dilation
from agent.observe.probes.packets import ECN_CE, RoceTemplate, cnp_packet, parse_pfc, parse_roce
from agent.observe.probes.rawsock import interface_mac, mac_text, open_port, roce_or_pfc_filter
from agent.observe.probes.sender import ETHERNET_OVERHEAD, SendSpec, _flow, _routed, wait_for_start
from lossless.dcqcn import DcqcnReactionPoint, NotificationPoint
from lossless.pfc import PauseHonouring

MAX_STEP_FRAMES = 1_000_000


@dataclass(frozen=True)
class RingSpec:
    """One rank: whom it sends to, whose frames it waits for, how much, and until when."""

    send: dict[str, Any]  # a SendSpec's fields for the flow to the successor (count unused)
    prev_qpn: int  # the predecessor's QP: its frames are this rank's input
    steps: int
    chunk_frames: int
    deadline_s: float
    min_time_between_cnps_us: int = 4
    cnp_dscp: int = 48
    notification_point: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.steps <= 1024:
            raise ValueError(f"steps: Expected: 1-1024 Actual: {self.steps}")
        if not 1 <= self.chunk_frames <= MAX_STEP_FRAMES:
            raise ValueError(
                f"chunk_frames: Expected: 1-{MAX_STEP_FRAMES} Actual: {self.chunk_frames}"
            )
        if not 0 < self.deadline_s <= 3600:
            raise ValueError(f"deadline_s: Expected: (0, 3600] Actual: {self.deadline_s}")


def run_ring(spec: RingSpec, ready: Any = None) -> dict[str, Any]:
    """Run this rank's steps; JSON-ready result with when each step's input had arrived."""
    send = _routed(SendSpec(**{**spec.send, "duration_s": spec.deadline_s}))
    rank = _Rank(spec, send)
    sock = open_port(send.ifname, bpf=roce_or_pfc_filter(send.udp_port))
    try:
        if ready:
            ready()
        late = wait_for_start(send.start_at)
        rank.run(sock)
    finally:
        sock.close()
    return rank.result(late)


class _Rank:
    def __init__(self, spec: RingSpec, send: SendSpec) -> None:
        self.spec, self.send = spec, send
        self.template = RoceTemplate(_flow(send))
        self.wire_bits = (self.template.length + ETHERNET_OVERHEAD) * 8
        self.my_mac = interface_mac(send.ifname)
        self.dilation = Dilation(send.time_dilation)
        self.reaction = (
            DcqcnReactionPoint(self.dilation.model_rate(send.rate_bps), send.dcqcn)
            if send.dcqcn
            else None
        )
        self.notification = NotificationPoint(spec.min_time_between_cnps_us)
        self.pause = PauseHonouring(send.link_speed_bps)
        self.sent = 0  # frames sent, all steps (the next PSN)
        self.received = [0] * spec.steps  # frames of each step from the predecessor
        self.arrived: list[float | None] = [None] * spec.steps  # when each step was complete
        self.cnps_in = self.cnps_out = self.pfc_frames = self.ce = self.foreign = 0
        self.start = 0.0
        self.cnp: bytes | None = None

    def rate(self) -> float:
        if self.reaction is not None:
            return self.dilation.lab_rate(self.reaction.current_bps)
        return self.send.rate_bps

    def may_send(self) -> bool:
        step = self.sent // self.spec.chunk_frames
        return step < self.spec.steps and (step == 0 or self.arrived[step - 1] is not None)

    def done(self) -> bool:
        return self.sent >= self.spec.steps * self.spec.chunk_frames and all(
            t is not None for t in self.arrived
        )

    def run(self, sock: Any) -> None:
        now = time.time()
        # Every rank counts from the agreed start, so their times share one zero.
        self.start = self.send.start_at if self.send.start_at is not None else now
        deadline = self.start + self.spec.deadline_s
        slot = now  # when the last frame was due
        while not self.done() and (now := time.time()) < deadline:
            due = slot + self.wire_bits / self.rate() if self.sent else now
            wake = self.pause.paused_until if self.pause.is_paused(now) else due
            wait = min(wake, deadline) - now if self.may_send() else 0.05
            readable, _, _ = select.select([sock], [], [], max(0.0, min(wait, 0.05)))
            now = time.time()
            if readable:
                self.drain(sock, now)
            if self.reaction is not None:
                self.reaction.advance(self.dilation.model_time(now))
            if not self.may_send() or self.pause.is_paused(now):
                continue
            due = slot + self.wire_bits / self.rate() if self.sent else now
            if now < due:
                continue
            sock.send(self.template.frame(self.sent, self.sent, time.time_ns()))
            self.sent += 1
            if self.reaction is not None:
                self.reaction.on_sent(self.dilation.model_time(now), self.template.length)
            slot = max(due, now - self.wire_bits / self.rate())  # no catch-up burst
        self.pause.finish(time.time())

    def drain(self, sock: Any, now: float) -> None:
        while True:
            try:
                frame = sock.recv(65536)
            except BlockingIOError:
                return
            pfc = parse_pfc(frame)
            if pfc is not None:
                self.pfc_frames += 1
                if pfc.enabled >> self.send.priority & 1:
                    self.pause.receive(pfc.quanta[self.send.priority], now)
                continue
            try:
                view = parse_roce(frame, udp_port=self.send.udp_port)
            except ValueError:
                continue
            if view is None:
                continue
            if view.opcode == CNP_OPCODE:
                self.on_cnp(view.qpn, now)
            elif view.qpn == self.spec.prev_qpn:
                self.on_data(sock, view, now)
            else:
                self.foreign += 1

    def on_cnp(self, qpn: int, now: float) -> None:
        if qpn != self.send.qpn:
            return
        self.cnps_in += 1
        if self.reaction is not None:
            self.reaction.on_cnp(self.dilation.model_time(now))

    def on_data(self, sock: Any, view: Any, now: float) -> None:
        step = view.psn // self.spec.chunk_frames
        if step >= self.spec.steps:
            self.foreign += 1
            return
        self.received[step] += 1
        if self.received[step] == self.spec.chunk_frames:
            self.arrived[step] = now - self.start
        if view.ecn != ECN_CE:
            return
        self.ce += 1
        key = (view.src_ip, view.qpn)
        if self.spec.notification_point and self.notification.on_ce(
            key, self.dilation.model_time(now)
        ):
            if self.cnp is None:  # built once: the predecessor never changes
                self.cnp = bytes(cnp_packet(
                    self.my_mac, mac_text(view.src_mac), view.dst_ip, view.src_ip, view.qpn,
                    dscp=self.spec.cnp_dscp, udp_port=self.send.udp_port,
                ))  # fmt: skip
            sock.send(self.cnp)
            self.cnps_out += 1

    def result(self, late: float | None) -> dict[str, Any]:
        complete = all(t is not None for t in self.arrived)
        return {
            "role": "ring",
            "qpn": self.send.qpn,
            "dst_ip": self.send.dst_ip,
            "complete": complete,
            # seconds from the agreed start until this rank had the last step's input
            "time_s": round(self.arrived[-1], 6) if complete and self.arrived[-1] else None,
            "steps_arrived_s": [None if t is None else round(t, 6) for t in self.arrived],
            "frames_received": self.received,
            "frames_sent": self.sent,
            "cnps_received": self.cnps_in,
            "cnps_sent": self.cnps_out,
            "ce_marked": self.ce,
            "pfc_frames_received": self.pfc_frames,
            "paused_s": round(self.pause.paused_s, 6),
            "foreign_frames": self.foreign,
            "start_late_s": None if late is None else round(late, 6),
        }

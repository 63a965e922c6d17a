"""PFC sniffer (per interface and priority) and a bounded PFC storm injector."""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from typing import Any

from agent.observe.probes.analysis import PfcAnalyzer
from agent.observe.probes.packets import pfc_frame
from agent.observe.probes.rawsock import REJECT_ALL_FILTER, interface_mac, open_port

MAX_DURATION_S = 3600.0
MAX_STORM_RATE_PPS = 20_000


@dataclass(frozen=True)
class SniffSpec:
    interfaces: tuple[str, ...]
    duration_s: float
    link_speed_bps: int
    storm_after_s: float = 0.2
    outgoing: bool = False  # also count frames this host sends (watching its own injector)

    def __post_init__(self) -> None:
        if not self.interfaces:
            raise ValueError("name at least one interface")
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(f"duration_s must be in (0, {MAX_DURATION_S}], got {self.duration_s}")


def run_sniffer(spec: SniffSpec) -> dict[str, Any]:
    """Count PFC frames, XOFF/XON, paused time and storms on each interface."""
    sockets = {name: open_port(name, ignore_outgoing=not spec.outgoing) for name in spec.interfaces}
    analyzers = {name: PfcAnalyzer(spec.link_speed_bps, spec.storm_after_s) for name in sockets}
    by_fd = {sock.fileno(): name for name, sock in sockets.items()}
    start = time.monotonic()
    deadline = start + spec.duration_s
    try:
        while (now := time.monotonic()) < deadline:
            readable, _, _ = select.select(list(sockets.values()), [], [], deadline - now)
            for sock in readable:
                name = by_fd[sock.fileno()]
                while True:
                    try:
                        frame = sock.recv(65536)
                    except BlockingIOError:
                        break
                    analyzers[name].feed(frame, time.monotonic())
    finally:
        for sock in sockets.values():
            sock.close()
    end = time.monotonic()
    return {
        "role": "sniff-pfc",
        "duration_s": round(end - start, 6),
        "interfaces": {name: analyzer.result(end) for name, analyzer in analyzers.items()},
    }


@dataclass(frozen=True)
class StormSpec:
    ifname: str
    priorities: tuple[int, ...]
    duration_s: float
    rate_pps: float = 1000.0
    quanta: int = 0xFFFF

    def __post_init__(self) -> None:
        if not self.priorities or any(not 0 <= p <= 7 for p in self.priorities):
            raise ValueError(f"priorities must be 0..7, got {self.priorities}")
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(f"duration_s must be in (0, {MAX_DURATION_S}], got {self.duration_s}")
        if not 0 < self.rate_pps <= MAX_STORM_RATE_PPS:
            raise ValueError(f"rate_pps must be in (0, {MAX_STORM_RATE_PPS}], got {self.rate_pps}")
        if not 0 < self.quanta <= 0xFFFF:
            raise ValueError(f"quanta must be 1..65535, got {self.quanta}")


def run_storm(spec: StormSpec) -> dict[str, Any]:
    """Send XOFF frames at ``rate_pps`` for ``duration_s`` — a pause storm, as a stuck NIC
    would; stops by itself and never exceeds its rate."""
    quanta: list[int | None] = [None] * 8
    for priority in spec.priorities:
        quanta[priority] = spec.quanta
    frame = pfc_frame(interface_mac(spec.ifname), quanta)
    sock = open_port(spec.ifname, bpf=REJECT_ALL_FILTER)
    sent = 0
    interval = 1.0 / spec.rate_pps
    start = time.monotonic()
    deadline = start + spec.duration_s
    next_send = start
    try:
        while (now := time.monotonic()) < deadline:
            if now < next_send:
                time.sleep(min(next_send - now, deadline - now))
                continue
            sock.send(frame)
            sent += 1
            next_send += interval
    finally:
        sock.close()
    return {
        "role": "storm",
        "interface": spec.ifname,
        "priorities": list(spec.priorities),
        "frames_sent": sent,
        "duration_s": round(time.monotonic() - start, 6),
    }

"""The trace on the source host: which address answered each TTL of each probe.

Runs on the source host (lab: in its namespace, real hosts: over SSH, via
``python -m agent.observe.probes.worker trace``; raw sockets, so as root). Probes of one
source host go out together, one TTL at a time, each TTL tried up to ``tries`` times, so a
discovery round costs one worker start per source host, whatever the number of ports. A
probe's trace ends when the destination (a Linux host: port unreachable) or one of its
``stop_at`` addresses (the switch before a RoCE NIC, which never answers) answers.
:mod:`agent.observe.probes.paths` maps the answers onto the fabric.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.observe.probes.packets import ROCE_UDP_PORT
from agent.observe.probes.ttl_probes import (
    ICMP_UNREACHABLE,
    MAX_PROBES,
    IcmpAnswer,
    ProbeTargets,
    TtlProbe,
    build_probes,
    check_ipv4,
    check_ranges,
    parse_icmp,
    probe_id,
    probe_sockets,
    read_answers,
    trace_frame,
    worker_json,
)

MAX_TTL = 64
MAX_TRIES = 5
DEFAULT_WAIT_S = 0.5
DEFAULT_RATE_PPS = 500


@dataclass(frozen=True)
class TraceSpec:
    """What one source host traces: (destination IPv4, UDP source port) probes, TTL 1..n."""

    probes: tuple[tuple[str, int], ...]
    dscp: int = 26
    max_ttl: int = 8
    tries: int = 2
    wait_s: float = DEFAULT_WAIT_S
    rate_pps: int = DEFAULT_RATE_PPS
    # Per destination: addresses whose answer ends its trace (the ports of the switches the
    # destination hangs off: the last hop before it; a RoCE NIC never answers itself).
    stop_at: dict[str, tuple[str, ...]] = field(default_factory=dict)
    udp_port: int = ROCE_UDP_PORT  # the run's (agent.observe.probes.transport): ECMP hashes it too

    def __post_init__(self) -> None:
        if not 1 <= len(self.probes) <= MAX_PROBES:
            raise ValueError(f"probes: Expected: 1..{MAX_PROBES} Actual: {len(self.probes)}")
        for index, probe in enumerate(self.probes):
            if not (isinstance(probe, Sequence) and len(probe) == 2):
                raise ValueError(f"probes[{index}]: Expected: [dst_ip, sport] Actual: {probe!r}")
            check_ipv4(probe[0], f"probes[{index}].dst_ip")
            check_ranges([("sport", probe[1], 1, 0xFFFF)], f"probes[{index}].")
        check_ranges(
            [
                ("dscp", self.dscp, 0, 63),
                ("udp_port", self.udp_port, 1, 0xFFFF),
                ("max_ttl", self.max_ttl, 1, MAX_TTL),
                ("tries", self.tries, 1, MAX_TRIES),
                ("rate_pps", self.rate_pps, 1, 100_000),
            ]
        )
        if not 0.001 <= self.wait_s <= 10:
            raise ValueError(f"wait_s: Expected: 0.001..10 s Actual: {self.wait_s!r}")
        for dst, addresses in self.stop_at.items():
            check_ipv4(dst, "stop_at")
            for address in addresses:
                check_ipv4(address, f"stop_at[{dst}]")

    @classmethod
    def from_json(cls, data: Any) -> TraceSpec:
        """The spec from the worker's JSON argument (lists for tuples); ValueError naming the
        field for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
            raise ValueError(f"probes: Expected: a list of [dst_ip, sport] Actual: {data!r:.100}")
        stop_at = data.get("stop_at") or {}
        if not isinstance(stop_at, dict) or not all(isinstance(v, list) for v in stop_at.values()):
            raise ValueError(
                f"stop_at: Expected: {{dst_ip: [address, ...]}} Actual: {stop_at!r:.100}"
            )
        data = dict(data)
        data["probes"] = tuple(tuple(p) if isinstance(p, list) else p for p in data["probes"])
        data["stop_at"] = {k: tuple(v) for k, v in stop_at.items()}
        return cls(**data)

    def as_json(self) -> dict[str, Any]:
        """The worker's JSON argument (:meth:`from_json` reads it back)."""
        return worker_json(self)

    def budget_s(self) -> float:
        """Longest the trace can take: every TTL and try waits in full, sends paced."""
        sends = len(self.probes) * self.max_ttl * self.tries
        return self.max_ttl * self.tries * self.wait_s + sends / self.rate_pps


def run_trace(spec: TraceSpec) -> dict[str, Any]:
    """Trace every probe of ``spec`` from this host; JSON-ready result (hops per TTL)."""
    probes = build_probes(ProbeTargets(spec.probes, spec.dscp, spec.udp_port, spec.stop_at))
    with probe_sockets(probes) as (icmp, senders):
        trace = _Trace(spec, probes, icmp, senders)
        start = time.monotonic()
        for ttl in range(1, spec.max_ttl + 1):
            if not trace.expire_at(ttl):
                break
        trace.collect(0.0)
        elapsed = time.monotonic() - start
    return {
        "role": "trace",
        "src_ips": sorted(trace.sources),
        "duration_s": round(elapsed, 6),
        "icmp_ignored": trace.ignored,
        "probes": [p.as_dict() for p in probes],
    }


class _Trace:
    """One trace run: the probes, the sockets, and the answers that were not ours."""

    def __init__(
        self,
        spec: TraceSpec,
        probes: list[TtlProbe],
        icmp: socket.socket,
        senders: dict[str, socket.socket],
    ) -> None:
        self.spec = spec
        self.probes = probes
        self.icmp = icmp
        self.senders = senders
        self.by_key = {(p.dst_ip, p.sport): p for p in probes}
        self.sources = {p.src_ip for p in probes}
        self.ignored = 0

    def expire_at(self, ttl: int) -> bool:
        """Send every unfinished probe with this TTL, each try to those still unanswered,
        and wait for the answers; False when every probe had already finished."""
        active = [p for p in self.probes if not p.done]
        if not active:
            return False
        for p in active:
            p.hops.append(None)
        for attempt in range(self.spec.tries):
            waiting = [p for p in active if p.hops[ttl - 1] is None and not p.done]
            if not waiting:
                break
            self._send(waiting, ttl, attempt)
            self._await(waiting, ttl)
        return True

    def _send(self, waiting: list[TtlProbe], ttl: int, attempt: int) -> None:
        """One try of ``waiting``, paced at the spec's rate, reading answers between sends."""
        gap = 1.0 / self.spec.rate_pps
        next_send = time.monotonic()
        for p in waiting:
            while (left := next_send - time.monotonic()) > 0:
                self.collect(left)
            self.senders[p.ifname].send(trace_frame(p.template, ttl, attempt))
            p.sent_at[probe_id(ttl, attempt)] = time.monotonic()
            next_send += gap

    def _await(self, waiting: list[TtlProbe], ttl: int) -> None:
        """Read answers until each of ``waiting`` has one for ``ttl`` or finished, or the
        spec's wait is over."""
        deadline = time.monotonic() + self.spec.wait_s
        while any(p.hops[ttl - 1] is None and not p.done for p in waiting):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.collect(left)

    def collect(self, timeout: float) -> None:
        """Read ICMP answers for up to ``timeout`` s; count those that are not ours."""
        for packet in read_answers(self.icmp, timeout):
            now = time.monotonic()
            if not self._take(parse_icmp(packet), now):
                self.ignored += 1

    def _probe_of(self, answer: IcmpAnswer | None) -> TtlProbe | None:
        """The probe ``answer`` quotes, if it quotes one of ours."""
        if answer is None or answer.dport != self.spec.udp_port:
            return None
        if answer.src_ip not in self.sources:
            return None
        return self.by_key.get((answer.dst_ip, answer.sport))

    def _take(self, answer: IcmpAnswer | None, now: float) -> bool:
        """Record an answer as its probe's hop; False when it is not one of ours, or a
        second answer to the same TTL."""
        probe = self._probe_of(answer)
        if answer is None or probe is None:
            return False
        ttl = answer.ident >> 8
        if not 1 <= ttl <= len(probe.hops):
            return False
        if answer.ident not in probe.sent_at or probe.hops[ttl - 1] is not None:
            return False  # not a packet we sent, or a second answer (both tries answered)
        probe.hops[ttl - 1] = {
            "ttl": ttl,
            "ip": answer.from_ip,
            "icmp_type": answer.icmp_type,
            "icmp_code": answer.icmp_code,
            "rtt_s": round(now - probe.sent_at[answer.ident], 6),
        }
        if answer.icmp_type == ICMP_UNREACHABLE or answer.from_ip in probe.stop_at:
            # The destination said port unreachable (a Linux host, not a NIC), a router
            # could not forward it, or the last switch before the destination answered.
            probe.done = True
            probe.reached = answer.from_ip == probe.dst_ip or answer.from_ip in probe.stop_at
            del probe.hops[ttl:]
        return True

"""Per-hop probes with a path's own 5-tuple (mtr's method): many packets to each switch hop
of a traced path, each expiring there, counted as sent, answered and corrupted on the way.

Two halves: :func:`run_hops` runs on the source host (``python -m
agent.observe.probes.worker hops``; raw sockets, so as root) and counts the answers per
hop, round by round; :func:`probe_hops` runs on the agent, one worker per source host, all
at once. An answer quotes the probe, so a quote that differs from what was sent says the
probe was changed before that switch (corruption); the fastest answer's round trip says
how slow the way there is.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from agent.device.fanout import results_or_raise, run_each
from agent.observe.probes.packets import ICRC_LEN, IP_OFFSET, ROCE_UDP_PORT
from agent.observe.probes.paths import Path, PathError, host_ip, run_worker
from agent.observe.probes.ttl_probes import (
    ICMP_TIME_EXCEEDED,
    MAX_PROBES,
    UDP_HEADER,
    IcmpAnswer,
    ProbeTargets,
    TtlProbe,
    build_probes,
    check_ipv4,
    check_ranges,
    parse_icmp,
    probe_frame,
    probe_sockets,
    read_answers,
    worker_json,
)

if TYPE_CHECKING:
    from agent.intent.model import FabricIntent
    from agent.observe.probes.runner import Runner

HOP_ROUND_BITS = 10  # IP identification = TTL << 10 | round: 63 hops, 1024 rounds
MAX_HOP_ROUNDS = 1 << HOP_ROUND_BITS
_BTH_RESV8A = UDP_HEADER + 4  # in the bytes after the IP header: a switch may rewrite it

HopKey = tuple[str, str, int]  # (src, dst, sport) of a path


# --------------------------------------------------------------------------- on the host


@dataclass(frozen=True)
class HopSpec:
    """Per-hop probing from one host: ``count`` packets to each of a path's ``hops`` switch
    hops (TTL 1..hops), per (destination IPv4, UDP source port, hops)."""

    probes: tuple[tuple[str, int, int], ...]
    count: int = 20
    dscp: int = 26
    rate_pps: int = 200
    wait_s: float = 1.0
    udp_port: int = ROCE_UDP_PORT

    def __post_init__(self) -> None:
        if not 1 <= len(self.probes) <= MAX_PROBES:
            raise ValueError(f"probes: Expected: 1..{MAX_PROBES} Actual: {len(self.probes)}")
        for index, probe in enumerate(self.probes):
            if not (isinstance(probe, Sequence) and len(probe) == 3):
                raise ValueError(
                    f"probes[{index}]: Expected: [dst_ip, sport, hops] Actual: {probe!r}"
                )
            check_ipv4(probe[0], f"probes[{index}].dst_ip")
            check_ranges(
                [
                    ("sport", probe[1], 1, 0xFFFF),
                    ("hops", probe[2], 1, (1 << (16 - HOP_ROUND_BITS)) - 1),
                ],
                f"probes[{index}].",
            )
        check_ranges(
            [
                ("count", self.count, 1, MAX_HOP_ROUNDS),
                ("dscp", self.dscp, 0, 63),
                ("udp_port", self.udp_port, 1, 0xFFFF),
                ("rate_pps", self.rate_pps, 1, 100_000),
            ]
        )
        if not 0.001 <= self.wait_s <= 10:
            raise ValueError(f"wait_s: Expected: 0.001..10 s Actual: {self.wait_s!r}")

    @classmethod
    def from_json(cls, data: Any) -> HopSpec:
        if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
            raise ValueError(
                f"probes: Expected: a list of [dst_ip, sport, hops] Actual: {data!r:.100}"
            )
        data = dict(data)
        data["probes"] = tuple(tuple(p) if isinstance(p, list) else p for p in data["probes"])
        return cls(**data)

    def as_json(self) -> dict[str, Any]:
        """The worker's JSON argument (:meth:`from_json` reads it back)."""
        return worker_json(self)

    def budget_s(self) -> float:
        return sum(p[2] for p in self.probes) * self.count / self.rate_pps + self.wait_s


def changed_on_the_way(sent_l4: bytes, quoted_l4: bytes) -> bool:
    """Whether the quoted UDP/BTH/payload bytes differ from what was sent, over what the
    router quoted, up to the ICRC (which differs per packet: it covers the identification);
    the BTH reserved byte is left out, as the ICRC leaves it out."""
    end = min(len(quoted_l4), len(sent_l4) - ICRC_LEN)
    return any(quoted_l4[i] != sent_l4[i] for i in range(end) if i != _BTH_RESV8A)


def run_hops(spec: HopSpec) -> dict[str, Any]:
    """Send every probe's packets hop by hop, round by round; count the answers per hop."""
    targets = [(d, s) for d, s, _ in spec.probes]
    probes = build_probes(ProbeTargets(targets, spec.dscp, spec.udp_port))
    tally = _HopTally(spec, probes)
    with probe_sockets(probes) as (icmp, senders):
        gap = 1.0 / spec.rate_pps
        start = next_send = time.monotonic()
        for round_index in range(spec.count):
            for probe in probes:
                key = (probe.dst_ip, probe.sport)
                for ttl in range(1, tally.hops[key] + 1):
                    while (left := next_send - time.monotonic()) > 0:
                        tally.collect(icmp, left)
                    ident = ttl << HOP_ROUND_BITS | round_index
                    senders[probe.ifname].send(probe_frame(probe.template, ttl, ident))
                    tally.sent(key, ttl, ident, time.monotonic())
                    next_send = max(next_send + gap, time.monotonic() - gap)
        deadline = time.monotonic() + spec.wait_s
        while (left := deadline - time.monotonic()) > 0 and tally.waiting():
            tally.collect(icmp, left)
        elapsed = time.monotonic() - start
    return {
        "role": "hops",
        "src_ips": sorted(tally.sources),
        "duration_s": round(elapsed, 6),
        "icmp_ignored": tally.ignored,
        "probes": [
            {"dst_ip": d, "sport": s, "hops": tally.stats[(d, s)]} for d, s, _ in spec.probes
        ],
    }


class _HopTally:
    """What :func:`run_hops` sent to each hop of each probe, and the answers that came back."""

    def __init__(self, spec: HopSpec, probes: Sequence[TtlProbe]) -> None:
        self.udp_port = spec.udp_port
        self.hops = {
            (p.dst_ip, p.sport): n for (_, _, n), p in zip(spec.probes, probes, strict=True)
        }
        self.stats: dict[tuple[str, int], list[dict[str, Any]]] = {
            key: [{"sent": 0, "answered": 0, "corrupted": 0, "rtt_min_s": None} for _ in range(n)]
            for key, n in self.hops.items()
        }
        self.sent_at: dict[tuple[str, int, int], float] = {}
        self.sent_l4 = {
            key: p.template[IP_OFFSET + 20 :] for key, p in zip(self.hops, probes, strict=True)
        }
        self.sources = {p.src_ip for p in probes}
        self.seen: set[tuple[str, int, int]] = set()
        self.ignored = 0

    def sent(self, key: tuple[str, int], ttl: int, ident: int, at: float) -> None:
        self.sent_at[(key[0], key[1], ident)] = at
        self.stats[key][ttl - 1]["sent"] += 1

    def waiting(self) -> bool:
        return any(row["answered"] < row["sent"] for rows in self.stats.values() for row in rows)

    def collect(self, icmp: socket.socket, timeout: float) -> None:
        """Read ICMP answers for up to ``timeout`` s (a bounded number of them)."""
        for packet in read_answers(icmp, timeout):
            if not self._take(parse_icmp(packet)):
                self.ignored += 1

    def _rows(self, answer: IcmpAnswer | None) -> list[dict[str, Any]] | None:
        """The hop rows of the probe ``answer`` quotes, if it answers one of ours."""
        if answer is None or answer.src_ip not in self.sources:
            return None
        if answer.dport != self.udp_port or answer.icmp_type != ICMP_TIME_EXCEEDED:
            return None
        return self.stats.get((answer.dst_ip, answer.sport))

    def _take(self, answer: IcmpAnswer | None) -> bool:
        """Count an answer; False when it is not one of ours, or a duplicate."""
        rows = self._rows(answer)
        if answer is None or rows is None:
            return False
        ttl, index = answer.ident >> HOP_ROUND_BITS, answer.ident & (MAX_HOP_ROUNDS - 1)
        if not 1 <= ttl <= len(rows) or index >= rows[ttl - 1]["sent"]:
            return False
        sent_key = (answer.dst_ip, answer.sport, answer.ident)
        if sent_key in self.seen:
            return False  # a duplicate answer
        self.seen.add(sent_key)
        row = rows[ttl - 1]
        row["answered"] += 1
        # The fastest answer: a delay on the way there (or back) shows in every one.
        rtt = time.monotonic() - self.sent_at.get(sent_key, time.monotonic())
        row["rtt_min_s"] = rtt if row["rtt_min_s"] is None else min(row["rtt_min_s"], rtt)
        if changed_on_the_way(self.sent_l4[(answer.dst_ip, answer.sport)], answer.quoted_l4):
            row["corrupted"] += 1
        return True


# --------------------------------------------------------------------------- on the agent


@dataclass(frozen=True)
class HopCount:
    """Per-hop probes of one path that expire at one switch (mtr's method): sent, answered
    with ICMP time exceeded, and answered with a quote that differs from what was sent (the
    probe was changed before that switch)."""

    sent: int
    answered: int
    corrupted: int = 0
    rtt_min_ms: float | None = None  # the fastest answer's round trip


class HopOptions(TypedDict, total=False):
    """:func:`probe_hops`' settings: packets per hop (``tries``, 20), the pace per source
    host (``rate_pps``, 200), the runner of each host (default: its namespace or SSH) and
    the run's UDP port."""

    tries: int
    rate_pps: int
    runner: Callable[[str], Runner] | None
    udp_port: int


def probe_hops(
    intent: FabricIntent, paths: Iterable[Path], **options: Unpack[HopOptions]
) -> dict[HopKey, tuple[HopCount | None, ...]]:
    """Send ``tries`` packets with each path's 5-tuple to each of its switch hops (TTL 1..n),
    all source hosts at once, each paced at ``rate_pps`` (keep the answers a switch must
    send under its ICMP policer: a policed answer counts as unanswered); per (src, dst,
    sport), one HopCount per hop of the path, in order."""
    by_src: dict[str, list[Path]] = {}
    for path in paths:
        if path.hops:
            by_src.setdefault(path.src, []).append(path)
    if not by_src:
        return {}
    merged: dict[HopKey, tuple[HopCount | None, ...]] = {}
    jobs = {src: (src, mine) for src, mine in by_src.items()}
    outcomes = run_each(jobs, lambda job: _one_host(intent, *job, options), parallelism=None)
    for part in results_or_raise(outcomes).values():
        merged.update(part)
    return merged


def _one_host(
    intent: FabricIntent, src: str, mine: list[Path], options: HopOptions
) -> dict[HopKey, tuple[HopCount | None, ...]]:
    """The hop probes of ``mine`` from ``src``, in one worker run there."""
    from agent.observe.probes.scenarios import ScenarioError, endpoint

    dst_ips = {p.dst: host_ip(intent, p.dst) for p in mine}
    try:
        spec = HopSpec(
            probes=tuple((dst_ips[p.dst], p.sport, len(p.hops)) for p in mine),
            count=options.get("tries", 20),
            dscp=intent.profile.roce.dscp,
            rate_pps=options.get("rate_pps", 200),
            udp_port=options.get("udp_port", ROCE_UDP_PORT),
        )
    except ValueError as exc:
        raise PathError(f"hop probes from {src}: {exc}") from None
    runner = options.get("runner")
    try:
        chosen = runner(src) if runner else endpoint(intent, src).runner
    except ScenarioError as exc:
        raise PathError(str(exc)) from None
    rows = run_worker(chosen, "hops", spec).get("probes")
    if not isinstance(rows, list) or len(rows) != len(mine):
        raise PathError(
            f"hop probes from {src}: Expected: {len(mine)} results Actual: {rows!r:.200}"
        )
    return {(p.src, p.dst, p.sport): _hop_counts(p, row) for p, row in zip(mine, rows, strict=True)}


def _hop_counts(path: Path, row: Any) -> tuple[HopCount | None, ...]:
    """One path's row of the worker's result; PathError if it is not one."""
    try:
        return tuple(
            HopCount(
                int(h["sent"]),
                int(h["answered"]),
                int(h["corrupted"]),
                float(h["rtt_min_s"]) * 1000 if h.get("rtt_min_s") is not None else None,
            )
            for h in row["hops"]
        )
    except (KeyError, TypeError, ValueError):
        raise PathError(
            f"hop probes {path.src} -> {path.dst}: Expected: hops with sent, answered, "
            f"corrupted Actual: {row!r:.200}"
        ) from None

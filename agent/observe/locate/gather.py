"""Run ``locate`` on a fabric (issue #15): trace the paths, read the switches, probe every
path and every hop, read the switches again, and join it all (:mod:`agent.observe.locate.rank`).

The CLI (``roce-agent locate``), the playbook step and the daemon all call :func:`run_locate`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.device.fanout import DEFAULT_PARALLELISM, results_or_raise, run_each
from agent.device.platforms import platform_for
from agent.device.push import Pusher
from agent.device.state import Difference, diff
from agent.intent.model import Device, FabricIntent
from agent.observe.checks.base import DeviceData
from agent.observe.collect import collect_device
from agent.observe.locate.rank import (
    HopProbe,
    PathResult,
    PortSymptoms,
    Topology,
    Verdict,
    locate,
    port_symptoms,
)
from agent.observe.probes import paths as probe_paths
from agent.observe.probes import scenarios
from agent.observe.probes.mesh import MeshProbe, MeshResult, run_mesh
from agent.observe.probes.paths import HopCount, Path
from agent.observe.probes.transport import ROCE, Transport
from common.phases import Phases

KEYS = ("device", "port")
ALL_PAIRS_MAX_HOSTS = 16  # above this, Pingmesh's pairs (ToR-local + one pair per leaf pair)

Incast = tuple[str, list[str], list[int]]  # (to, senders, their source ports)
PathKey = tuple[str, str, int]  # (src, dst, sport)


def read_switches(pusher: Pusher, devices: list[Device], parallelism: int) -> dict[str, DeviceData]:
    """State, counters and link health of each switch, one SSH session each, side by side."""
    read = run_each(
        {d.name: d for d in devices},
        lambda d: collect_device(pusher, d, True, 0.0, links=True),
        parallelism,
    )
    return {data.device.name: data for data in results_or_raise(read).values()}


@dataclass
class LocateRun:
    verdict: Verdict
    paths: list[PathResult]
    duration_s: float
    phases: dict[str, float]
    ports: list[PortSymptoms] = field(default_factory=list)
    transport: Transport = ROCE


def run_locate(
    intent: FabricIntent,
    *,
    duration_s: float = 5.0,
    rate_per_host_bps: int = 400_000,
    hop_tries: int = 40,
    max_sports: int = 16,
    parallelism: int = DEFAULT_PARALLELISM,
    load: bool = False,
    load_s: float = 2.0,
) -> LocateRun:
    """``load``: while the mesh runs, a line-rate N:1 incast onto one host of each leaf from
    the hosts of the other leaves, DCQCN off, so that PFC must hold. Faults of the lossless
    machinery — RoCE in a lossy class, pause not honoured — only show under congestion. It
    loads the fabric for ``load_s``: off unless asked."""
    started = time.monotonic()
    run = _Locating(intent, duration_s, rate_per_host_bps, hop_tries, parallelism, load_s)
    with run.phases("paths"):
        run.trace(max_sports)
    incasts = load_plan(run.topology, run.discovered) if load else []
    run.probe(incasts)
    with run.phases("read after"):
        run.after = run.read_switches()
    results = run.path_results() + run.load_results(incasts)
    symptoms, differences, notes = run.compare()
    with run.phases("join"):
        verdict = run.join(results, symptoms, differences)
    verdict.notes = notes + run.untraced() + verdict.notes
    return LocateRun(
        verdict, results, time.monotonic() - started, run.phases.durations, symptoms, run.transport
    )


class _Locating:
    """One locate run: its settings, what each phase found, and where its time went."""

    def __init__(
        self,
        intent: FabricIntent,
        duration_s: float,
        rate_per_host_bps: int,
        hop_tries: int,
        parallelism: int,
        load_s: float,
    ) -> None:
        self.intent = intent
        self.duration_s = duration_s
        self.rate_per_host_bps = rate_per_host_bps
        self.hop_tries = hop_tries
        self.parallelism = parallelism
        self.load_s = load_s
        self.phases = Phases()
        self.topology = Topology.from_intent(intent)
        self.pusher = Pusher.for_intent(intent)
        self.switches = [d for d in intent.devices if d.role != "host"]
        self.hosts = [d.name for d in intent.devices if d.role == "host"]
        self.transport = ROCE
        self.discovered: dict[tuple[str, str], list[Path]] = {}
        self.before: dict[str, DeviceData] = {}
        self.after: dict[str, DeviceData] = {}
        self.mesh: list[MeshResult] = []
        self.hops: dict[PathKey, tuple[HopCount | None, ...]] = {}
        self.loads: list[dict[str, Any]] = []

    def read_switches(self) -> dict[str, DeviceData]:
        return read_switches(self.pusher, self.switches, self.parallelism)

    def pairs(self) -> list[tuple[str, str]]:
        hosts = self.hosts
        if len(hosts) <= ALL_PAIRS_MAX_HOSTS:
            return [(a, b) for a in hosts for b in hosts if a != b]
        return probe_paths.pingmesh_pairs(self.intent)

    def trace(self, max_sports: int) -> None:
        pairs = self.pairs()
        # One port for every probe of the run: the traces must find the paths the flows take.
        endpoints = [scenarios.endpoint(self.intent, h) for h in self.hosts]
        self.transport = scenarios.transport_for(self.intent, endpoints)
        self.discovered = probe_paths.discover(
            self.intent, pairs, max_sports=max_sports, udp_port=self.transport.udp_port
        )

    def traced(self) -> list[Path]:
        return [p for found in self.discovered.values() for p in found if p.full]

    def probe(self, incasts: list[Incast]) -> None:
        """The switches read, the hop probes, the mesh and the incast loads."""
        traced = self.traced()
        probes = [MeshProbe(p.src, p.dst, p.sport) for p in traced]
        # Not a device fan-out: different phases side by side (the hop probes beside the
        # switch reads and the mesh, the incast loads beside the mesh).
        with ThreadPoolExecutor(max_workers=2 + len(incasts)) as pool:
            hop_results = pool.submit(
                probe_paths.probe_hops,
                self.intent,
                traced,
                tries=self.hop_tries,
                udp_port=self.transport.udp_port,
            )
            if incasts:
                # The switches answer hop probes with ICMP on a lossy class; under the load
                # those answers would be dropped and look like RoCE in a lossy queue. Not at
                # once, then.
                with self.phases("hop probes"):
                    hop_results.result()
            with self.phases("read before"):
                self.before = self.read_switches()
            with self.phases("probes"):
                loading = [pool.submit(self.incast, *plan) for plan in incasts]
                self.mesh = run_mesh(
                    self.intent,
                    probes,
                    self.duration_s,
                    self.rate_per_host_bps,
                    transport=self.transport,
                )
                self.hops = hop_results.result()
                self.loads = [future.result() for future in loading]

    def incast(self, to: str, senders: list[str], sports: list[int]) -> dict[str, Any]:
        return scenarios.incast(
            self.intent,
            to,
            senders,
            self.load_s,
            dcqcn=False,
            sports=sports,
            transport=self.transport,
        )

    def by_path(self) -> dict[PathKey, Path]:
        return {(p.src, p.dst, p.sport): p for found in self.discovered.values() for p in found}

    def path_results(self) -> list[PathResult]:
        """The mesh's flows, each on its traced path, with that path's hop probes."""
        by_path = self.by_path()
        return [
            PathResult(
                row.src,
                row.dst,
                row.sport,
                by_path[(row.src, row.dst, row.sport)].links(),
                row.sent,
                row.received,
                row.icrc_errors,
                row.latency_min_ms,
                _hop_probes(self.hops.get((row.src, row.dst, row.sport), ())),
                kernel_latency_ms=row.kernel_latency_min_ms,
                host_delay_ms=row.host_delay_ms,
                timestamp_source=row.timestamp_source,
            )
            for row in self.mesh
        ]

    def load_results(self, incasts: Sequence[Incast]) -> list[PathResult]:
        """The load's own flows are RoCE on known paths too, at line rate: a lossless fabric
        must not lose them either, and which of them lost says which way the fault lies."""
        by_path = self.by_path()
        results = []
        for (to, _, sports), load_result in zip(incasts, self.loads, strict=True):
            for row, sport in zip(load_result["flows"], sports, strict=True):
                load_path = by_path.get((row["from"], to, sport))
                if load_path is not None and load_path.full:
                    results.append(
                        PathResult(row["from"], to, sport, load_path.links(), row["sent"],
                                   row["received"], load=True)
                    )  # fmt: skip
        return results

    def compare(self) -> tuple[list[PortSymptoms], list[Difference], list[str]]:
        """Per switch read twice: what moved on its ports, and how its configuration differs
        from the plan; a note for each switch that could not be read."""
        symptoms: list[PortSymptoms] = []
        differences: list[Difference] = []
        notes = []
        profile = self.intent.profile
        for device in self.switches:
            first, last = self.before[device.name], self.after[device.name]
            if last.error or last.counters is None:
                notes.append(f"{device.name} not read: {last.error or first.error}")
                continue
            symptoms += port_symptoms(
                first.counters, last.counters, first.links or {}, last.links or {},
                profile.pfc.priorities, [profile.cnp.priority],
            )  # fmt: skip
            if last.state is not None:
                differences += self.drift(device, last)
        return symptoms, differences, notes

    def drift(self, device: Device, read: DeviceData) -> list[Difference]:
        device_plan = self.pusher.plan.device(device.name)
        assert device_plan is not None and read.state is not None
        platform = platform_for(device.platform)
        return diff(device.name, platform.desired(device_plan), read.state, platform.managed)

    def untraced(self) -> list[str]:
        return [
            f"{pair[0]}→{pair[1]}: no complete path traced, not probed"
            for pair, found in self.discovered.items()
            if not any(p.full for p in found)
        ]

    def join(
        self,
        results: list[PathResult],
        symptoms: list[PortSymptoms],
        differences: list[Difference],
    ) -> Verdict:
        # Rates (pause frames per second) over the time the counters span, not the mesh's.
        spans = [
            last.collected_at - first.collected_at
            for first, last in (
                (self.before[d.name].counters, self.after[d.name].counters) for d in self.switches
            )
            if first is not None and last is not None
        ]
        window = max(spans, default=self.duration_s)
        loaded = [p.links for p in results if p.load]
        return locate(
            self.topology, results, symptoms, differences, duration_s=window, loaded=loaded
        )


def _hop_probes(hops: Sequence[HopCount | None]) -> tuple[HopProbe | None, ...]:
    return tuple(
        HopProbe(h.sent, h.answered, h.corrupted, h.rtt_min_ms) if h is not None else None
        for h in hops
    )


def load_plan(
    topology: Topology, discovered: dict[tuple[str, str], list[Path]], max_senders: int = 4
) -> list[Incast]:
    """One incast per leaf: onto its first host, from up to ``max_senders`` hosts of the
    other leaves, each on a different path where the traces found several (its source port
    chosen so), so the load crosses every uplink and spine into that leaf."""
    by_leaf: dict[str, list[str]] = {}
    for link in topology.links.values():
        if link.tx_host:
            by_leaf.setdefault(link.rx[0], []).append(link.tx[0])
    plan = []
    for leaf, hosts in sorted(by_leaf.items()):
        target = sorted(hosts)[0]
        senders = sorted(h for other, group in by_leaf.items() if other != leaf for h in group)
        senders = senders[:max_senders]
        if not senders:
            continue
        sports = []
        for index, sender in enumerate(senders):
            # Sorted by hops, so the i-th sender takes the i-th spine (paths differ there).
            paths = sorted(
                (p for p in discovered.get((sender, target), []) if p.full),
                key=lambda p: str(p.hop_key()),
            )
            sports.append(paths[index % len(paths)].sport if paths else scenarios.BASE_SPORT)
        plan.append((target, senders, sports))
    return plan


def as_json(run: LocateRun) -> dict[str, Any]:
    return {
        **run.verdict.as_dict(),
        "time_to_verdict_s": round(run.duration_s, 2),
        # What moved on each switch port during the run (zeros left out), for the ticket.
        "counters_moved": [
            {k: v for k, v in asdict(p).items() if v not in (0, None, True) or k in KEYS}
            for p in run.ports
            if any(v for k, v in asdict(p).items() if k not in KEYS and k != "up") or p.up is False
        ],
        "phases_s": {k: round(v, 2) for k, v in run.phases.items()},
        "transport": run.transport.as_json(),
        "probed_paths": [
            {
                "from": p.src,
                "to": p.dst,
                "sport": p.sport,
                "links": list(p.links),
                "sent": p.sent,
                "received": p.received,
                "icrc_errors": p.icrc_errors,
                "latency_min_ms": p.latency_ms,
                "kernel_latency_min_ms": p.kernel_latency_ms,
                "timestamp_source": p.timestamp_source,
                "host_delay_p90_ms": p.host_delay_ms,
                "load": p.load,
            }
            for p in run.paths
        ],
    }

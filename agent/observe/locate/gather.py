"""Run ``locate`` on a fabric (issue #15): trace the paths, read the switches, probe every
path and every hop, read the switches again, and join it all (:mod:`agent.observe.locate.rank`).

The CLI (``roce-agent locate``), the playbook step and the daemon all call :func:`run_locate`.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.device.platforms import platform_for
from agent.device.push import DEFAULT_PARALLELISM, Pusher
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
from agent.observe.probes.mesh import MeshProbe, run_mesh
from agent.observe.probes.paths import Path
from agent.observe.probes.transport import ROCE, Transport

KEYS = ("device", "port")
ALL_PAIRS_MAX_HOSTS = 16  # above this, Pingmesh's pairs (ToR-local + one pair per leaf pair)


def read_switches(pusher: Pusher, devices: list[Device], parallelism: int) -> dict[str, DeviceData]:
    """State, counters and link health of each switch, one SSH session each, side by side."""
    with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(devices) or 1))) as pool:
        read = pool.map(lambda d: collect_device(pusher, d, True, 0.0, links=True), devices)
        return {data.device.name: data for data in read}


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
    phases: dict[str, float] = {}
    topology = Topology.from_intent(intent)
    pusher = Pusher.for_intent(intent)
    switches = [d for d in intent.devices if d.role != "host"]
    hosts = [d.name for d in intent.devices if d.role == "host"]
    pairs = (
        [(a, b) for a in hosts for b in hosts if a != b]
        if len(hosts) <= ALL_PAIRS_MAX_HOSTS
        else probe_paths.pingmesh_pairs(intent)
    )

    mark = time.monotonic()
    # One port for every probe of the run: the traces must find the paths the flows take.
    transport = scenarios.transport_for(intent, [scenarios.endpoint(intent, h) for h in hosts])
    port = transport.udp_port
    discovered = probe_paths.discover(intent, pairs, max_sports=max_sports, udp_port=port)
    phases["paths"] = time.monotonic() - mark

    traced = [p for f in discovered.values() for p in f if p.full]
    probes = [MeshProbe(p.src, p.dst, p.sport) for p in traced]
    incasts = load_plan(topology, discovered) if load else []
    mark = time.monotonic()
    with ThreadPoolExecutor(max_workers=2 + len(incasts)) as pool:
        hop_results = pool.submit(
            probe_paths.probe_hops, intent, traced, tries=hop_tries, udp_port=port
        )
        if incasts:
            # The switches answer hop probes with ICMP on a lossy class; under the load those
            # answers would be dropped and look like RoCE in a lossy queue. Not at once, then.
            hops = hop_results.result()
            phases["hop probes"] = time.monotonic() - mark
        before = read_switches(pusher, switches, parallelism)
        phases["read before"] = time.monotonic() - mark - phases.get("hop probes", 0.0)
        mark = time.monotonic()
        loading = [
            pool.submit(
                scenarios.incast,
                intent,
                to,
                senders,
                load_s,
                dcqcn=False,
                sports=sports,
                transport=transport,
            )
            for to, senders, sports in incasts
        ]
        mesh = run_mesh(intent, probes, duration_s, rate_per_host_bps, transport=transport)
        hops = hop_results.result()
        loads = [future.result() for future in loading]
    phases["probes"] = time.monotonic() - mark

    mark = time.monotonic()
    after = read_switches(pusher, switches, parallelism)
    phases["read after"] = time.monotonic() - mark

    by_path = {(p.src, p.dst, p.sport): p for f in discovered.values() for p in f}
    results = []
    for row in mesh:
        path = by_path[(row.src, row.dst, row.sport)]
        results.append(
            PathResult(
                row.src,
                row.dst,
                row.sport,
                path.links(),
                row.sent,
                row.received,
                row.icrc_errors,
                row.latency_min_ms,
                tuple(
                    HopProbe(h.sent, h.answered, h.corrupted, h.rtt_min_ms)
                    if h is not None
                    else None
                    for h in hops.get((row.src, row.dst, row.sport), ())
                ),
            )
        )
    # The load's own flows are RoCE on known paths too, at line rate: a lossless fabric must
    # not lose them either, and which of them lost says which way the fault lies.
    for (to, _, sports), load_result in zip(incasts, loads, strict=True):
        for row, sport in zip(load_result["flows"], sports, strict=True):
            load_path = by_path.get((row["from"], to, sport))
            if load_path is not None and load_path.full:
                results.append(
                    PathResult(row["from"], to, sport, load_path.links(), row["sent"],
                               row["received"], load=True)
                )  # fmt: skip
    symptoms: list[PortSymptoms] = []
    differences: list[Difference] = []
    notes = []
    lossless = intent.profile.pfc.priorities
    for device in switches:
        first, last = before[device.name], after[device.name]
        if last.error or last.counters is None:
            notes.append(f"{device.name} not read: {last.error or first.error}")
            continue
        symptoms += port_symptoms(
            first.counters, last.counters, first.links or {}, last.links or {}, lossless,
            [intent.profile.cnp.priority],
        )  # fmt: skip
        if last.state is not None:
            device_plan = pusher.plan.device(device.name)
            assert device_plan is not None
            platform = platform_for(device.platform)
            differences += diff(
                device.name, platform.desired(device_plan), last.state, platform.managed
            )
    for pair, found in discovered.items():
        if not any(p.full for p in found):
            notes.append(f"{pair[0]}→{pair[1]}: no complete path traced, not probed")
    mark = time.monotonic()
    # Rates (pause frames per second) over the time the counters span, not the mesh's.
    spans = [
        last.collected_at - first.collected_at
        for first, last in ((before[d.name].counters, after[d.name].counters) for d in switches)
        if first is not None and last is not None
    ]
    window = max(spans, default=duration_s)
    loaded = [p.links for p in results if p.load]
    verdict = locate(topology, results, symptoms, differences, duration_s=window, loaded=loaded)
    phases["join"] = time.monotonic() - mark
    verdict.notes = notes + verdict.notes
    return LocateRun(verdict, results, time.monotonic() - started, phases, symptoms, transport)


def load_plan(
    topology: Topology, discovered: dict[tuple[str, str], list[Path]], max_senders: int = 4
) -> list[tuple[str, list[str], list[int]]]:
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
                "load": p.load,
            }
            for p in run.paths
        ],
    }

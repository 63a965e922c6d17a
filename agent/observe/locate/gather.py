"""Run ``locate`` on a fabric (issue #15): trace the paths, read the switches, probe every
path and every hop, read the switches again, and join it all (:mod:`agent.observe.locate.rank`).

By default the mesh runs in rounds (issue #30) and stops as soon as Wald's SPRT
(:mod:`agent.observe.locate.stats`) has decided every path clean or lossy at the run's
confidence, or when ``max_duration_s`` runs out; ``duration_s`` keeps one fixed mesh run.
When the verdict holds tied suspects, targeted follow-up probes split them in the time left
(:func:`split_ties`).

The CLI (``roce-agent locate``), the playbook step and the daemon all call :func:`run_locate`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict, Unpack

from agent.device.fanout import DEFAULT_PARALLELISM, results_or_raise, run_each
from agent.device.platforms import platform_for
from agent.device.push import Pusher
from agent.device.state import Difference, diff
from agent.intent.model import ROCE_UDP_PORT, Device, FabricIntent
from agent.observe.checks.base import DeviceData
from agent.observe.collect import collect_device
from agent.observe.locate import followup
from agent.observe.locate.counters import PortSymptoms, switch_symptoms
from agent.observe.locate.evidence import HopProbe, PathResult
from agent.observe.locate.rank import locate, resolve_ties
from agent.observe.locate.stats import Sprt, loss_interval
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import Verdict
from agent.observe.probes import paths as probe_paths
from agent.observe.probes import scenarios
from agent.observe.probes.hops import HopCount, probe_hops
from agent.observe.probes.mesh import MESH_PAYLOAD_BYTES, MeshProbe, MeshResult, run_mesh
from agent.observe.probes.paths import Path
from agent.observe.probes.sender import ETHERNET_OVERHEAD
from agent.observe.probes.timestamps import weakest
from agent.observe.probes.transport import ROCE, Transport
from common.phases import Phases

KEYS = ("device", "port")
ALL_PAIRS_MAX_HOSTS = 16  # above this, Pingmesh's pairs (ToR-local + one pair per leaf pair)

Incast = tuple[str, list[str], list[int]]  # (to, senders, their source ports)
PathKey = tuple[str, str, int]  # (src, dst, sport)
Stopped = Literal["confident", "max-duration", "fixed"]

ROUND_S = 1.0  # the first round of an adaptive mesh, and the shortest one
# Of --max-duration, the share the mesh leaves for the follow-up probes that split tied
# suspects (and for the second switch read): a verdict that stops the mesh at the deadline
# would otherwise leave a tie no time to be split.
FOLLOW_UP_SHARE = 0.2
# A round sized to what the slowest path still needs, plus this share: the probes go out a
# little slower than their schedule (start-up, pauses), and a round that ends a few probes
# short costs a whole round's set-up again.
ROUND_MARGIN = 1.1
# A mesh probe on the wire: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + payload + ICRC 4 bytes,
# plus the preamble, FCS and gap a link carries too.
PROBE_WIRE_BITS = (14 + 20 + 8 + 12 + MESH_PAYLOAD_BYTES + 4 + ETHERNET_OVERHEAD) * 8
# What a round costs beyond its probing time before one has been measured (processes
# started on each host, receivers ready, results collected; about 5 s on the lab).
FIRST_OVERHEAD_S = 5.0


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
    # How the mesh stopped: every path decided ("confident"), out of time before that
    # ("max-duration"), or a fixed --duration run ("fixed").
    stopped: Stopped = "fixed"
    rounds: int = 1
    confidence: float = 0.95
    min_loss: float = 0.005
    # Per probed path (src, dst, sport): the SPRT's decision, None while undecided.
    decisions: dict[PathKey, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """How long and how hard one locate run probes (see :func:`run_locate`)."""

    confidence: float = 0.95
    max_duration_s: float = 60.0
    min_loss: float = 0.005
    duration_s: float | None = None
    rate_per_host_bps: int = 400_000
    hop_tries: int = 40
    parallelism: int = DEFAULT_PARALLELISM
    load_s: float = 2.0
    max_sports: int = 16  # source ports traced per host pair at the most
    load: bool = False  # load the fabric while the mesh runs (see run_locate)

    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence: Expected: 0 < c < 1 Actual: {self.confidence!r}")
        if not 0 < self.min_loss < 1:
            raise ValueError(f"min_loss: Expected: 0 < x < 1 Actual: {self.min_loss!r}")
        if not (math.isfinite(self.max_duration_s) and self.max_duration_s > 0):
            raise ValueError(f"max_duration_s: Expected: > 0 Actual: {self.max_duration_s!r}")

    def sprt(self) -> Sprt:
        return Sprt.for_min_loss(self.min_loss, self.confidence)


class LocateRunOptions(TypedDict, total=False):
    """:func:`run_locate`'s settings, by keyword: the fields of :class:`Settings`."""

    confidence: float
    max_duration_s: float
    min_loss: float
    duration_s: float | None
    rate_per_host_bps: int
    hop_tries: int
    max_sports: int
    parallelism: int
    load: bool
    load_s: float


def run_locate(intent: FabricIntent, **options: Unpack[LocateRunOptions]) -> LocateRun:
    """``duration_s=None`` (the default): the mesh runs in rounds until Wald's SPRT has
    decided every path — lossy at ``min_loss`` or more, clean at a quarter of it, each with
    error rates ``1 - confidence`` — or until ``max_duration_s`` (the whole run's, traces and
    switch reads included) would be passed. A ``duration_s`` runs the mesh once, that long.

    ``load``: while the mesh runs, a line-rate N:1 incast onto one host of each leaf from
    the hosts of the other leaves, DCQCN off, so that PFC must hold. Faults of the lossless
    machinery — RoCE in a lossy class, pause not honoured — only show under congestion. It
    loads the fabric for ``load_s``: off unless asked."""
    started = time.monotonic()
    settings = Settings(**options)
    run = _Locating(intent, settings, started)
    with run.phases("paths"):
        run.trace(settings.max_sports)
    incasts = load_plan(run.topology, run.discovered) if settings.load else []
    run.probe(incasts)
    with run.phases("read after"):
        run.after = run.read_switches()
    results = run.path_results() + run.load_results(incasts)
    symptoms, differences, notes = run.compare()
    with run.phases("join"):
        verdict = run.join(results, symptoms, differences)
    if _tied(verdict):
        with run.phases("follow-ups"):
            verdict = split_ties(
                intent, followup.Findings(run.topology, results, verdict), settings.confidence,
                max(0.0, started + settings.max_duration_s - time.monotonic()),
                run.transport.udp_port,
            )  # fmt: skip
    verdict.notes = notes + run.untraced() + verdict.notes
    return LocateRun(
        verdict, results, time.monotonic() - started, run.phases.durations, symptoms,
        run.transport, run.stopped, run.rounds, settings.confidence, settings.min_loss,
        run.decisions,
    )  # fmt: skip


# A path's sequential-test decision as PathResult.lossy (the loss symptom, locate.evidence).
SPRT_LOSSY: dict[str | None, bool | None] = {"h1": True, "h0": False, None: None}


def _tied(verdict: Verdict) -> bool:
    """Whether the verdict ranks some suspects as one tied group (``"tied"`` in its JSON:
    agent.observe.locate.ties, issue #30)."""
    return bool(verdict.as_dict().get("tied"))


def split_ties(
    intent: FabricIntent,
    found: followup.Findings,
    confidence: float,
    deadline_s: float,
    udp_port: int = ROCE_UDP_PORT,
) -> Verdict:
    """Targeted follow-up probes for each tied group, then the verdict re-ranked by what they
    found (:mod:`agent.observe.locate.followup`: which hop of which path, from which source,
    splits the group; probes until the SPRT decides or ``deadline_s`` seconds pass)."""
    plans = followup.plan_follow_ups(found.topology, found.paths, found.verdict)
    results = followup.run_follow_ups(intent, plans, confidence, deadline_s, udp_port=udp_port)
    return resolve_ties(found.verdict, results)


@dataclass
class MeshRounds:
    """An adaptive mesh: each round's rows added up per path and fed to that path's SPRT;
    the next round lasts as long as the slowest undecided path still needs (at the rate its
    probes went out), at least ``ROUND_S``, and never past ``deadline`` (a monotonic time)
    counting the set-up a round took before."""

    settings: Settings
    deadline: float
    clock: Callable[[], float] = time.monotonic
    rows: dict[PathKey, MeshResult] = field(default_factory=dict)
    tests: dict[PathKey, Sprt] = field(default_factory=dict)
    rounds: int = 0
    overhead_s: float = 0.0  # the most a round took beyond its probing time
    probed_s: float = 0.0  # probing time, all rounds
    stopped: Stopped = "max-duration"

    def run(self, run_round: Callable[[float], list[MeshResult]], first_s: float) -> None:
        length = first_s
        while True:
            began = self.clock()
            self.add(run_round(length))
            self.overhead_s = max(self.overhead_s, self.clock() - began - length)
            self.probed_s += length
            self.rounds += 1
            if self.decided():
                self.stopped = "confident"
                return
            left = self.deadline - self.clock() - self.overhead_s
            if left < ROUND_S:
                self.stopped = "max-duration"
                return
            length = min(left, max(ROUND_S, ROUND_MARGIN * self.needed_s()))

    def add(self, rows: list[MeshResult]) -> None:
        for row in rows:
            key = (row.src, row.dst, row.sport)
            lost = max(0, row.sent - row.received)
            self.tests.setdefault(key, self.settings.sprt()).update(row.sent, min(lost, row.sent))
            was = self.rows.get(key)
            self.rows[key] = row if was is None else _added(was, row)

    def decided(self) -> bool:
        """Every path that sends decided: a path that sent nothing (its host could not) stays
        out — more rounds would not change it, and the verdict notes it as not used."""
        return all(t.decision is not None for t in self.tests.values() if t.sent > 0)

    def needed_s(self) -> float:
        """Seconds of probing the slowest undecided path still needs, were it to go on
        losing what it has lost so far, at the rate its probes went out."""
        needed = 0.0
        for key, test in self.tests.items():
            if test.decision is not None or test.sent == 0:
                continue
            rate = self.rows[key].sent / max(self.probed_s, 1e-9)
            needed = max(needed, test.remaining(test.lost / test.sent) / max(rate, 1e-9))
        return needed

    def results(self) -> list[MeshResult]:
        return list(self.rows.values())

    def decisions(self) -> dict[PathKey, str | None]:
        return {key: test.decision for key, test in self.tests.items()}


def first_round_s(probes: Sequence[MeshProbe], settings: Settings) -> float:
    """The first round of an adaptive mesh: long enough for the busiest host's flows to
    send the probes that can decide "clean" (each round costs seconds of set-up, so a round
    that can decide nothing is time lost). Each host shares ``rate_per_host_bps`` between
    its flows; the mesh may send slower (its cap of a tenth of the link), never faster."""
    flows: dict[str, int] = {}
    for probe in probes:
        flows[probe.src] = flows.get(probe.src, 0) + 1
    if not flows:
        return ROUND_S
    per_flow_pps = settings.rate_per_host_bps / PROBE_WIRE_BITS / max(flows.values())
    return max(ROUND_S, ROUND_MARGIN * settings.sprt().min_probes() / per_flow_pps)


def _added(was: MeshResult, row: MeshResult) -> MeshResult:
    """Two rounds of one path as one row: counts added, the lowest latencies, the weakest
    timestamp source, and the larger host delay (each round's is a 90th percentile: the
    larger bounds the whole run's from above, as a stalled host's must not average away)."""
    return MeshResult(
        was.src, was.dst, was.sport, was.sent + row.sent, was.received + row.received,
        was.icrc_errors + row.icrc_errors,
        _lowest(was.latency_min_ms, row.latency_min_ms),
        _lowest(was.kernel_latency_min_ms, row.kernel_latency_min_ms),
        weakest((was.timestamp_source, row.timestamp_source)),
        _highest(was.host_delay_ms, row.host_delay_ms),
    )  # fmt: skip


def _lowest(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _highest(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


class _Locating:
    """One locate run: its settings, what each phase found, and where its time went."""

    def __init__(self, intent: FabricIntent, settings: Settings, started: float) -> None:
        self.intent = intent
        self.settings = settings
        self.started = started
        self.hop_tries = settings.hop_tries
        self.parallelism = settings.parallelism
        self.load_s = settings.load_s
        self.stopped: Stopped = "fixed"
        self.rounds = 1
        self.decisions: dict[PathKey, str | None] = {}
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
                probe_hops,
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
                self.mesh = self.run_mesh(probes, loaded=bool(incasts))
                self.hops = hop_results.result()
                self.loads = [future.result() for future in loading]

    def run_mesh(self, probes: list[MeshProbe], *, loaded: bool) -> list[MeshResult]:
        """The mesh once for a fixed duration, else in rounds until every path is decided
        or the deadline: ``max_duration_s`` after the start, less the time the switch read
        took (the read after is still to come) and the share kept for follow-up probes."""
        settings = self.settings

        def one_round(seconds: float) -> list[MeshResult]:
            return run_mesh(
                self.intent, probes, seconds, settings.rate_per_host_bps, transport=self.transport
            )

        reserve = FOLLOW_UP_SHARE * settings.max_duration_s
        reserve += self.phases.durations.get("read before", 0.0)
        rounds = MeshRounds(settings, self.started + settings.max_duration_s - reserve)
        if settings.duration_s is not None:
            rounds.add(one_round(settings.duration_s))
            rounds.rounds, rounds.stopped = 1, "fixed"
        else:
            # A load runs beside the first round: that round lasts as long as the load.
            first = first_round_s(probes, settings)
            left = rounds.deadline - time.monotonic() - FIRST_OVERHEAD_S
            first = max(ROUND_S, settings.load_s if loaded else 0.0, min(first, left))
            rounds.run(one_round, first)
        self.stopped, self.rounds = rounds.stopped, rounds.rounds
        self.decisions = rounds.decisions()
        return rounds.results()

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
                lossy=SPRT_LOSSY.get(self.decisions.get((row.src, row.dst, row.sport))),
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
            symptoms += switch_symptoms(first, last, profile)
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
        window = max(spans, default=self.settings.duration_s or 1.0)
        loaded = [p.links for p in results if p.load]
        return locate(
            self.topology, results, symptoms, differences, duration_s=window, loaded=loaded,
            confidence=self.settings.confidence, min_loss=self.settings.min_loss,
        )  # fmt: skip


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
        # How sure the mesh was when it stopped (issue #30): "confident" (every path decided
        # by the SPRT), "max-duration" (ran out of time before that) or "fixed" (--duration).
        "stopped": run.stopped,
        "rounds": run.rounds,
        "confidence": run.confidence,
        "min_loss": run.min_loss,
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
                **_sureness(run, p),
            }
            for p in run.paths
        ],
    }


def _sureness(run: LocateRun, path: PathResult) -> dict[str, Any]:
    """A probe path's SPRT decision ("lossy", "clean" or "undecided") and the Wilson
    interval of its loss rate at the run's confidence; nothing for the load's flows."""
    if path.load or (path.src, path.dst, path.sport) not in run.decisions:
        return {}
    decision = run.decisions[(path.src, path.dst, path.sport)]
    named = {"h1": "lossy", "h0": "clean", None: "undecided"}[decision]
    if path.sent == 0:
        return {"sprt": named}
    low, high = loss_interval(path.sent, min(path.lost, path.sent), run.confidence)
    return {"sprt": named, "loss_interval": [round(low, 6), round(high, 6)]}

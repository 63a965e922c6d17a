"""One run of a candidate: a seed at a load point, in the twin, measured as tune judges it.

A :class:`Job` is everything one run needs (it travels to a process pool or a cluster's
worker): :func:`run_job` plans and builds the candidate's network and runs the scenario
(:func:`run_candidate`) or the collective (:func:`run_collective_job`).

Measurement window: the second half of the run.  Every flow of an incast starts at line rate,
so the first microseconds fill the queue to about N x the pause threshold whatever the setting
(no shared buffer is modelled); the onset still counts for lossless drops and is shown as the
queue peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agent.intent.model import FabricIntent
from agent.intent.plan import build_plan
from agent.twin.collective_report import CollectiveReport
from agent.twin.collectives import CollectiveSpec, run_collective, run_collectives
from agent.twin.compare import ModeRow, collective_row, scenario_row
from agent.twin.engine import Engine
from agent.twin.network import ROCE_FRAME_OVERHEAD, TwinError, TwinNetwork, build_network
from agent.twin.results import jain, simulate, time_weighted_p99
from agent.twin.run_options import RunOptions
from agent.twin.step import StepReport, run_step
from agent.twin.switch import SwitchPort
from agent.twin.tune.fabric import current_ecn
from agent.twin.tune.objectives import ObjectiveSpec
from agent.twin.tune.results import RunMetrics
from agent.twin.workloads import Scenario, ScenarioName, build_scenario


class _Mark:
    """Cumulative counters at the start of the measurement window (the switch ports' in the
    engine's ticks, the NICs' in the model's seconds)."""

    def __init__(self, engine: Engine, now: float) -> None:
        self.t_s = now
        self.ticks = ticks = engine.clock.ticks
        self.ports: dict[str, tuple[int, int, dict[int, int]]] = {}
        for node in engine.switches.values():
            for port in node.ports:
                hist = dict(port.depth_hist)
                key = port.depth >> 10
                hist[key] = hist.get(key, 0) + (ticks - port.depth_t)
                paused = port.pause_meter.paused - max(0, port.pause_meter.until - ticks)
                self.ports[port.name] = (port.tx_bytes, paused, hist)
        self.nics = {
            name: nic.pause.paused_s - max(0.0, nic.pause.paused_until - now)
            for name, nic in engine.nics.items()
        }
        self.flows = [(f.rx_packets, f.rx_ce, f.delivered_bytes) for f in engine.flows]


class _WindowStart:
    """Takes a :class:`_Mark` at the first sample at or after ``start_s``."""

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.mark: _Mark | None = None

    def __call__(self, engine: Engine, now: float) -> None:
        if self.mark is None and now >= self.start_s - 1e-12:
            self.mark = _Mark(engine, now)


def _bottleneck(engine: Engine, scenario: Scenario) -> SwitchPort | None:
    if scenario.receiver is not None:
        for node in engine.switches.values():
            for port in node.ports:
                if port.spec.peer_device == scenario.receiver:
                    return port
    ports = [p for n in engine.switches.values() for p in n.ports if p.depth_peak]
    return max(ports, key=lambda p: (p.depth_peak, p.tx_bytes), default=None)


def run_candidate(job: Job, network: TwinNetwork, pause_threshold: int) -> RunMetrics:
    """One seed of the job's scenario on its candidate's network: whole-run drops and onset
    peak, window metrics."""
    senders, duration_s = job.senders, job.duration_s
    scenario = build_scenario(network, job.scenario, senders, job.speed_bps)
    window_start = _WindowStart(duration_s / 2)
    engine, whole = simulate(
        network,
        scenario,
        senders=senders,
        duration_s=duration_s,
        on_sample=window_start,
        payload_bytes=job.payload_bytes,
        **run_options(job),
    )
    mark = window_start.mark
    if mark is None:  # pragma: no cover - the engine samples up to the end of the run
        raise TwinError("tune: the twin took no sample in the measurement window")
    window = duration_s - mark.t_s
    window_ticks = engine.end - mark.ticks
    bottleneck = _bottleneck(engine, scenario)
    utilisation = 0.0
    p99 = 0
    paused = 0.0
    whole_utilisation = (
        bottleneck.tx_bytes * 8 / (bottleneck.spec.speed_bps * engine.duration_s)
        if bottleneck is not None and engine.duration_s > 0
        else None
    )
    for node in engine.switches.values():
        for port in node.ports:
            tx0, paused0, hist0 = mark.ports[port.name]
            paused = max(paused, (port.pause_meter.paused - paused0) / window_ticks)
            if port is bottleneck:
                utilisation = (port.tx_bytes - tx0) * 8 / (port.spec.speed_bps * window)
                hist = {k: v - hist0.get(k, 0) for k, v in port.depth_hist.items()}
                p99 = min(time_weighted_p99(hist, window_ticks), port.depth_peak)
    for name, nic in engine.nics.items():
        paused = max(paused, (nic.pause.paused_s - mark.nics[name]) / window)
    packets = sum(f.rx_packets - m[0] for f, m in zip(engine.flows, mark.flows, strict=True))
    marked = sum(f.rx_ce - m[1] for f, m in zip(engine.flows, mark.flows, strict=True))
    return RunMetrics(
        senders=senders,
        duration_s=duration_s,
        jain=_bottleneck_jain(network, engine, mark, bottleneck),
        seed=job.seed,
        utilisation=utilisation,
        paused_fraction=paused,
        queue_p99_bytes=p99,
        queue_peak_bytes=bottleneck.depth_peak if bottleneck else 0,
        ce_fraction=marked / packets if packets else 0.0,
        lossless_drops=whole.lossless_drops,
        pause_threshold_bytes=pause_threshold,
        bottleneck=bottleneck.name if bottleneck else None,
        events=engine.events,
        wall_s=whole.wall_s,
        paused_fraction_whole=whole.max_paused_fraction,
        utilisation_whole=whole_utilisation,
        goodput_fraction=_receiver_goodput(engine, scenario, network),
        mode_rows=(scenario_row(network.mode, whole),),
    )


def _receiver_goodput(engine: Engine, scenario: Scenario, network: TwinNetwork) -> float | None:
    """The lab check's goodput fraction (:func:`agent.ops.twin_vs_lab.from_twin`) of the
    scenario's receiver over the whole run: whole frames delivered in order to it, their
    payload bits, over its line rate x run time. None without one receiver."""
    receiver = scenario.receiver
    host = network.hosts.get(receiver) if receiver is not None else None
    if host is None or engine.duration_s <= 0:
        return None
    bits = 0
    for flow in engine.flows:
        if flow.dst == receiver:
            frame = engine.nics[flow.src].frame_bytes
            bits += flow.delivered_bytes // frame * (frame - ROCE_FRAME_OVERHEAD) * 8
    return bits / (host.port.speed_bps * engine.duration_s)


def _bottleneck_jain(
    network: TwinNetwork, engine: Engine, mark: _Mark, bottleneck: SwitchPort | None
) -> float | None:
    """Jain over the window goodput (in-order received bytes) of the flows whose path crosses
    the bottleneck port: flows elsewhere (a victim flow) do not compete there."""
    if bottleneck is None:
        return None
    hop = (bottleneck.spec.device, bottleneck.spec.index)
    shares = [
        float(f.delivered_bytes - m[2])
        for f, m in zip(engine.flows, mark.flows, strict=True)
        if hop in network.path(f.src, f.dst, f.hash)
    ]
    return jain(shares)


@dataclass(frozen=True)
class Job:
    intent: FabricIntent
    scenario: ScenarioName
    senders: int
    speed_bps: int
    duration_s: float
    seed: int
    roce: int
    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)
    qps: int = 1
    label: str = ""  # the progress bar's
    payload_bytes: int | None = None  # RoCE payload per frame (None: the ports' RoCE MTU)
    sample_rails: int = 0  # a job's screening run: its first rails only (0: every rail)


def run_options(job: Job) -> RunOptions:
    """The job's seed, and how a run in its intent's mode recovers: lossy-trim with selective
    repeat (a trim NAKs one PSN), on the per-flow ECMP paths lossless runs on, so that
    ``tune --modes`` compares the modes and not the path choices (``twin --compare-modes``
    shows what spraying adds); lossless with the engine's defaults, as tune always ran it."""
    if job.intent.profile.mode != "lossy-trim":
        return {"seed": job.seed}
    return {"seed": job.seed, "recovery": "selective-repeat", "paths": "flow"}


def _rows(job: Job, reports: list[CollectiveReport]) -> tuple[ModeRow, ...]:
    recovery = run_options(job).get("recovery", "go-back-n")
    return tuple(collective_row(job.intent.profile.mode, r, recovery) for r in reports)


def run_job(job: Job) -> RunMetrics:
    """A job of the process pool: plan and build the candidate's network, run one seed."""
    plan = build_plan(job.intent)
    dilation = job.intent.emulation.time_dilation
    _, pause, _, _ = current_ecn(plan, job.roce, job.speed_bps, dilation)
    if job.objective.name == "collective":
        return run_collective_job(job, build_network(job.intent, plan), pause)
    return run_candidate(job, build_network(job.intent, plan), pause)


def collective_hosts(network: TwinNetwork, speed_bps: int, ranks: int) -> tuple[str, ...]:
    """The collective's ranks: alternating over the first two leaves with hosts at the speed
    (every ring hop crosses the spines, where ECMP collisions and DCQCN decide busbw; on one
    leaf every setting measured the same 49.0 GB/s at 400G), over as many more leaves, in
    fabric order, as the ranks need when two do not hold them; fabric order on one leaf.
    One rank per host: a host with several NICs takes part on its first (GPU 0's NIC, as a
    job of one GPU per host runs); the rail-aligned job of every GPU is twin's for now
    (``twin --workload``, docs/collectives.md)."""
    by_leaf: dict[str, list[str]] = {}
    for host in network.hosts.values():
        if host.port.speed_bps == speed_bps and not host.rail:
            by_leaf.setdefault(host.leaf, []).append(host.name)
    groups = list(by_leaf.values())
    if len(groups) < 2:
        return tuple(groups[0][:ranks]) if groups else ()
    used = 2
    while used < len(groups) and sum(map(len, groups[:used])) < ranks:
        used += 1
    out: list[str] = []
    for i in range(max(len(g) for g in groups[:used])):
        out.extend(g[i] for g in groups[:used] if i < len(g))
    return tuple(out[:ranks])


def collective_spec(job: Job, network: TwinNetwork) -> CollectiveSpec:
    """The collective a job runs: a job file's on its first ``job.senders`` NICs, else
    ``job.senders`` ranks placed by :func:`collective_hosts`."""
    tuned = job.objective.job
    if tuned is not None:
        spec = tuned.collective(job.senders, job.qps, job.objective.size_bytes)
        return replace(spec, sample_rails=job.sample_rails)
    return CollectiveSpec(
        workload=job.objective.workload,  # type: ignore[arg-type]
        ranks=job.senders,
        size_bytes=job.objective.size_bytes,
        qps_per_connection=job.qps,
        # Q QPs spread a connection over Q paths only when each message is split across them
        # (NCCL_IB_SPLIT_DATA_ON_QPS=1); with NCCL's default 0 a connection with one slice in
        # flight uses one QP (agent.twin.collectives, docs/collectives.md).
        split_data_on_qps=job.qps > 1,
        hosts=collective_hosts(network, job.speed_bps, job.senders),
        speed_bps=job.speed_bps,
        algorithm=job.objective.algorithm,
    )


def run_collective_job(job: Job, network: TwinNetwork, pause: int) -> RunMetrics:
    """One seed of a collective (``job.senders`` ranks) on the candidate's network; a job
    file's jobs side by side, when it has several."""
    tuned = job.objective.job
    options = run_options(job)
    if job.objective.beside:
        names = [j.name for j in job.objective.jobs]
        reports = run_collectives(network, _side_by_side(job), names, **options)
    elif tuned is not None and tuned.step:
        fraction = job.objective.size_bytes / tuned.spec.size_bytes
        step = run_step(network, collective_spec(job, network), tuned.step, fraction=fraction,
                        **options)  # fmt: skip
        return _step_metrics(job, step, pause)
    else:
        spec = collective_spec(job, network)
        reports = [run_collective(network, spec, **options)]
    return _collective_metrics(job, reports, pause)


def _side_by_side(job: Job) -> list[CollectiveSpec]:
    """Every job of the job file, each whole, at the searched QPs and at the rung's share of
    its own size (the share the first job's size gives)."""
    objective = job.objective
    share = objective.size_bytes / objective.jobs[0].spec.size_bytes
    return [
        j.collective(j.ranks, job.qps, max(1, round(j.spec.size_bytes * share)))
        for j in objective.jobs
    ]


def _step_metrics(job: Job, step: StepReport, pause: int) -> RunMetrics:
    """A step's metrics: the objective's numbers the step's (its busbw over its collective
    time), the fabric's the worst of its collectives' runs (a constraint holds for the step
    when it holds in every collective of it)."""
    reports = step.reports
    busiest = max(reports, key=lambda r: r.links[0].utilisation if r.links else 0.0)
    worst_queue = max(reports, key=lambda r: r.queue_p99_bytes)
    jains = [r.jain for r in reports if r.jain is not None]
    return RunMetrics(
        seed=job.seed,
        utilisation=busiest.links[0].utilisation if busiest.links else 0.0,
        paused_fraction=max(r.max_paused_fraction for r in reports),
        queue_p99_bytes=worst_queue.queue_p99_bytes,
        queue_peak_bytes=max(r.queue_peak_bytes for r in reports),
        ce_fraction=max(r.ce_fraction for r in reports),
        lossless_drops=sum(r.lossless_drops for r in reports),
        pause_threshold_bytes=pause,
        bottleneck=worst_queue.busiest_port,
        events=sum(r.events for r in reports),
        wall_s=sum(r.wall_s for r in reports),
        senders=job.senders,
        jain=min(jains) if jains else None,
        busbw_Bps=step.busbw_Bps,
        duration_s=step.time_s,
        completed=step.completed,
        ranks=True,
        bound_fraction=step.line_rate_fraction,
        mode_rows=_rows(job, list(reports)),
    )


def _collective_metrics(job: Job, reports: list[CollectiveReport], pause: int) -> RunMetrics:
    """A run's metrics from its reports (one per job): the fabric's numbers are the run's, the
    same in every job's report; the objective's are the slowest job's."""
    slowest = min(reports, key=lambda r: r.line_rate_fraction)
    fabric = reports[0]
    busiest = fabric.links[0] if fabric.links else None
    jains = [r.jain for r in reports if r.jain is not None]
    return RunMetrics(
        seed=job.seed,
        utilisation=busiest.utilisation if busiest is not None else 0.0,
        paused_fraction=fabric.max_paused_fraction,
        queue_p99_bytes=fabric.queue_p99_bytes,
        queue_peak_bytes=fabric.queue_peak_bytes,
        ce_fraction=max(r.ce_fraction for r in reports),
        lossless_drops=fabric.lossless_drops,
        pause_threshold_bytes=pause,
        bottleneck=fabric.busiest_port,
        events=fabric.events,
        wall_s=fabric.wall_s,
        senders=job.senders,
        jain=min(jains) if jains else None,
        busbw_Bps=slowest.busbw_Bps,
        duration_s=max(r.time_s for r in reports),
        completed=all(r.completed for r in reports),
        ranks=True,
        bound_fraction=slowest.line_rate_fraction,
        job_busbw=tuple(r.busbw_Bps for r in reports) if len(reports) > 1 else (),
        mode_rows=_rows(job, reports),
    )

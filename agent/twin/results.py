"""What a twin run reports, as JSON-ready dataclasses (``asdict`` gives the ``--output json``).

Definitions (all over the whole run unless a window is named):

* drops per class: lossless = the model's headroom drops (ingress beyond xoff + headroom) and
  watchdog drops of lossless classes; lossy = tail drops (egress beyond the queue limit);
* PFC frames per port: XOFF / XON sent by a switch port (refreshes included) and PFC frames
  received; NIC XOFFs for a storming host;
* paused fraction per port: time the port's first lossless priority was held by a received
  pause (switch egress: :class:`lossless.pfc.ReceivedPause`'s timer, the watchdog's override
  ends it; NIC: :class:`lossless.pfc.PauseHonouring.paused_s`) / run time;
* queue depth peak and p99: per switch egress port, bytes over all classes; p99 is
  time-weighted -- the depth the port stayed at or below for 99 % of the run (1 KiB bins);
* CE fraction: CE-marked data frames received / data frames received;
* CNPs: sent by notification points, received by reaction points, rate cuts they caused;
* goodput: data frame bytes the responder accepted *in order* (Ethernet frames, the MTU plus
  header/FCS; a frame that arrives after a gap and is discarded by go-back-N, or a duplicate,
  counts nothing) * 8 / run time, per flow and per receiver; utilisation: wire bits a port
  sent (with preamble and inter-frame gap) / (speed * run time);
* retransmissions: data frames (and their bytes) a sender sent again after a NAK or a
  timeout (:mod:`agent.twin.engine`'s loss recovery), NAKs the senders received and
  retransmission timeouts, per flow and in total;
* Jain fairness: (sum x)^2 / (n * sum x^2) over the per-flow goodput in the second half of
  the run (the flows of the incast only: the victim is excluded);
* time to converge: the first sample time after which every active flow's DCQCN rate stays
  within +-10 % of its own mean over the last 20 % of the run; ``None`` when that does not
  hold over at least that last 20 %;
* the bottleneck: the busiest port -- the highest utilisation; among the ports within 1 % of
  it (a tie: all-to-all fills many ports), the deepest p99 queue (then the higher peak).  In
  the storm scenario, the port facing the storming host (where the pause holds traffic back);
* the verdict: :mod:`agent.twin.verdicts`' table, first match.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

from agent.twin.engine import Engine, SampleCallback
from agent.twin.flows import Flow
from agent.twin.frames import WIRE_OVERHEAD_BYTES
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.run_options import DEFAULT_RTO_S, TrafficOptions
from agent.twin.samples import Watch
from agent.twin.switch import SwitchPort
from agent.twin.trimming import TrimFacts, trim_facts
from agent.twin.verdicts import RunFacts, Verdict, judge
from agent.twin.workloads import Scenario, ScenarioName, build_scenario
from common.plain import plain
from common.text import natural_key
from lossless.config import NUM_CLASSES

CONVERGE_BAND = 0.10
CONVERGE_WINDOW = 0.20
MAX_DURATION_S = 10.0  # a bound on one command's work, not a physical limit
RATE_WINDOW_FRAMES = 16  # the bottleneck's sending rate is averaged over this many frame times
BOTTLENECK_TIE = 0.01  # utilisations within 1 % of the busiest are a tie, broken by the queue


@dataclass(frozen=True)
class PortReport:
    port: str
    speed_bps: int
    utilisation: float
    queue_peak_bytes: int
    queue_p99_bytes: int
    pfc_xoff_tx: int
    pfc_xon_tx: int
    pfc_rx: int
    paused_fraction: float
    headroom_drops: int
    tail_drops: int
    watchdog_drops: int
    ecn_marked: int
    storms_detected: int
    tx_bytes: int
    trimmed: int = 0  # frames its queues cut (lossy-trim), sent or dropped at the trim queue
    trim_dropped: int = 0  # of those, dropped at the trim queue


@dataclass(frozen=True)
class FlowReport:
    flow: str
    goodput_bps: float
    goodput_second_half_bps: float
    final_rate_bps: float
    tx_bytes: int
    rx_bytes: int
    ce_fraction: float
    cnps_received: int
    rate_cuts: int
    paused_fraction: float  # of the sending NIC
    delivered_bytes: int = 0  # frame bytes accepted in order (goodput's numerator)
    retx_bytes: int = 0
    retx_packets: int = 0
    timeouts: int = 0
    naks: int = 0
    reorder_depth: int = 0  # the most frames its responder held out of order at once
    trims_received: int = 0  # trimmed frames its responder received (each NAKed)


@dataclass(frozen=True)
class Series:
    """Sampled every ``every_s`` (bounded number of samples; the first five intervals ten
    times as often, :data:`agent.twin.engine.ONSET_SPLIT`) for the plot."""

    every_s: float
    t_s: list[float]
    queue_port: str | None
    queue_bytes: list[int]
    flows: list[str]
    rate_bps: list[list[float]]  # per flow, per sample
    paused_ports: list[str]
    paused: list[list[float]]  # per port, per sample (1 = paused at the sample)
    # What the bottleneck port sent (wire bits, as its utilisation counts them) per second,
    # over the RATE_WINDOW_FRAMES frame times (or the sampling interval, if longer) before
    # each sample (0 at t = 0).
    queue_port_bps: list[float] = field(default_factory=list)
    queue_port_flows: int = 0  # data flows whose path crosses the bottleneck port
    # The bottleneck's thresholds for the RoCE priority: ECN marking between min and max
    # (None: no ECN on that queue) and XOFF per ingress port (None: not a no-drop priority).
    ecn_min_bytes: int | None = None
    ecn_max_bytes: int | None = None
    pause_threshold_bytes: int | None = None


@dataclass(frozen=True)
class TwinReport:
    fabric: str
    profile: str
    scenario: str
    speed_bps: int
    senders: int
    duration_s: float
    seed: int
    events: int
    wall_s: float
    lossless_drops: int
    lossy_drops: int
    drops_by_class: dict[int, int]
    pfc_frames: int
    ce_fraction: float
    cnps_sent: int
    cnps_received: int
    goodput_bps: float
    bottleneck: str | None
    bottleneck_utilisation: float
    queue_peak_bytes: int
    queue_p99_bytes: int
    max_paused_fraction: float
    jain: float | None
    converge_s: float | None
    victim_goodput_bps: float | None
    storms_detected: int
    ports: list[PortReport]
    flows: list[FlowReport]
    series: Series
    verdict: Verdict
    # The senders' DCQCN parameters as run (profile, overrides, --dcqcn-override); None when
    # the NICs ran without DCQCN.
    dcqcn: dict[str, int] | None = None
    victim: int | None = None  # the victim flow's index in ``flows`` (victim, storm)
    notes: list[str] = field(default_factory=list)
    # Loss recovery (module docstring): totals over the flows, and the NICs' settings.
    retx_bytes: int = 0
    retx_packets: int = 0
    timeouts: int = 0
    naks: int = 0
    recovery: str = "go-back-n"
    rto_s: float = DEFAULT_RTO_S
    # The RoCE class's mode, the path choice, trims, retransmissions, reordering and message
    # completion times (agent.twin.trimming); flat in the JSON.
    trim: TrimFacts | None = None

    @property
    def passed(self) -> bool:
        """The lossless promise held: no lossless class lost a frame."""
        return self.lossless_drops == 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain(self)
        data.update(data.pop("trim") or {})
        data["passed"] = self.passed
        return data


def jain(values: list[float]) -> float | None:
    """Jain's fairness index; None for no flows, 1.0 when nothing moved (all equal)."""
    if not values:
        return None
    square = sum(v * v for v in values)
    if square == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square)


def time_weighted_p99(hist: Mapping[int, float], total: float) -> int:
    """Smallest depth (bin top, bytes) with at least 99 % of the time at or below it."""
    if total <= 0 or not hist:
        return 0
    acc = 0.0
    for key in sorted(hist):
        acc += hist[key]
        if acc >= 0.99 * total:
            return (key + 1) << 10
    return (max(hist) + 1) << 10


def _port_report(port: SwitchPort, duration: float, ticks: int) -> PortReport:
    """``duration`` of the run in seconds, ``ticks`` the same in the engine's ticks."""
    lossless = port.spec.qos.lossless() if port.spec.qos else [False] * NUM_CLASSES
    return PortReport(
        port=port.name,
        speed_bps=port.spec.speed_bps,
        utilisation=port.tx_bytes * 8 / (port.spec.speed_bps * duration),
        queue_peak_bytes=port.depth_peak,
        queue_p99_bytes=min(time_weighted_p99(port.depth_hist, ticks), port.depth_peak),
        pfc_xoff_tx=port.pfc_tx_xoff,
        pfc_xon_tx=port.pfc_tx_xon,
        pfc_rx=port.pfc_rx,
        paused_fraction=port.pause_meter.paused / ticks,
        headroom_drops=sum(d for tc, d in enumerate(port.ingress.headroom_drops) if lossless[tc]),
        tail_drops=sum(q.tail_drops for q in port.queues),
        watchdog_drops=port.watchdog_drops,
        ecn_marked=sum(q.ecn_marked for q in port.queues),
        storms_detected=sum(c.storms_detected for c in port.watchdog.classes),
        tx_bytes=port.tx_bytes,
        trimmed=sum(q.trimmed for q in port.queues),
        trim_dropped=sum(q.trim_dropped for q in port.queues),
    )


def converge_time(t_s: list[float], rates: list[list[float]]) -> float | None:
    """Definition in the module docstring; ``rates`` per flow, per sample."""
    if not t_s or not rates:
        return None
    end = t_s[-1]
    window_start = end - CONVERGE_WINDOW * end
    first = next(i for i, t in enumerate(t_s) if t >= window_start)
    last_bad = -1
    for series in rates:
        tail = series[first:]
        mean = sum(tail) / len(tail) if tail else 0.0
        if mean <= 0:
            continue
        for i in range(len(series) - 1, -1, -1):
            if abs(series[i] - mean) > CONVERGE_BAND * mean:
                last_bad = max(last_bad, i)
                break
    if last_bad >= first:
        return None
    return t_s[last_bad + 1] if last_bad + 1 < len(t_s) else None


@dataclass
class _Drops:
    """Frames lost over the run: per class, and split by the promise each one broke."""

    by_class: list[int] = field(default_factory=lambda: [0] * NUM_CLASSES)
    lossless: int = 0
    lossy: int = 0

    def add_port(self, port: SwitchPort) -> None:
        lossless = port.spec.qos.lossless() if port.spec.qos else [False] * NUM_CLASSES
        for tc in range(NUM_CLASSES):
            # A watchdog drop is the chosen mitigation, not a broken promise: counted per
            # class, and as lossless only for headroom overruns and tail drops.
            broken = port.ingress.headroom_drops[tc] + port.queues[tc].tail_drops
            dropped = broken + port.watchdog.classes[tc].dropped_packets
            self.by_class[tc] += dropped
            if lossless[tc]:
                self.lossless += broken
            else:
                self.lossy += dropped


def _drops(engine: Engine) -> _Drops:
    drops = _Drops()
    for node in engine.switches.values():
        for port in node.ports:
            drops.add_port(port)
    return drops


def _active_ports(engine: Engine, duration: float) -> list[PortReport]:
    """The switch ports that sent, paused or dropped anything."""
    return [
        _port_report(p, duration, engine.end)
        for node in engine.switches.values()
        for p in node.ports
        if p.tx_bytes or p.pfc_rx or p.pfc_tx_xoff or p.watchdog_drops
    ]


def _second_half_bps(samples: list[Watch], index: int) -> float:
    """Goodput of flow ``index`` between the first sample of the run's second half and the
    last sample."""
    if len(samples) < 2:
        return 0.0
    last = samples[-1]
    middle = next(s for s in samples if s.t_s >= last.t_s / 2)
    dt = last.t_s - middle.t_s
    if dt <= 0:
        return 0.0
    return (last.rx_bytes[index] - middle.rx_bytes[index]) * 8 / dt


def _flow_report(engine: Engine, flow: Flow, duration: float) -> FlowReport:
    return FlowReport(
        flow=flow.name,
        goodput_bps=flow.delivered_bytes * 8 / duration,
        goodput_second_half_bps=_second_half_bps(engine.samples, flow.index),
        final_rate_bps=flow.rp.current_bps,
        tx_bytes=flow.tx_bytes,
        rx_bytes=flow.rx_bytes,
        ce_fraction=flow.rx_ce / flow.rx_packets if flow.rx_packets else 0.0,
        cnps_received=flow.cnps_rx,
        rate_cuts=flow.rp.cuts,
        paused_fraction=engine.nics[flow.src].pause.paused_s / duration,
        delivered_bytes=flow.delivered_bytes,
        retx_bytes=flow.retx_bytes,
        retx_packets=flow.retx_packets,
        timeouts=flow.timeouts,
        naks=flow.naks,
        reorder_depth=flow.ooo_peak,
        trims_received=flow.trims_rx,
    )


def _port_bps(samples: list[Watch], index: int | None, window_s: float) -> list[float]:
    """What port ``index`` (of :attr:`Engine.ports`) sent in bit/s over at least ``window_s``
    before each sample (a frame is counted when it starts: over less than a few frame times
    the rate would alias between 0 and a multiple of the line rate); 0 for the first sample."""
    out = [0.0] * len(samples)
    if index is None:
        return out
    start = 0
    for i, after in enumerate(samples):
        while start + 1 < i and after.t_s - samples[start + 1].t_s >= window_s:
            start += 1
        before = samples[start]
        dt = after.t_s - before.t_s
        if dt > 0:
            out[i] = (after.tx_bytes[index] - before.tx_bytes[index]) * 8 / dt
    return out


def _rate_window_s(engine: Engine, port: str | None) -> float:
    """RATE_WINDOW_FRAMES of the run's largest frames on ``port``'s wire."""
    speed = next((p.spec.speed_bps for p in engine.ports if p.name == port), 0)
    frame = max((n.frame_bytes for n in engine.nics.values()), default=0)
    return RATE_WINDOW_FRAMES * (frame + WIRE_OVERHEAD_BYTES) * 8 / speed if speed else 0.0


def _flows_through(engine: Engine, port: str | None) -> int:
    """How many flows' paths (as ECMP routes them) leave through ``port``."""
    net = engine.network

    def names(flow: Flow) -> set[str]:
        hops = net.path(flow.src, flow.dst, flow.hash)
        return {f"{sw}:{net.switches[sw].ports[index].name}" for sw, index in hops}

    return sum(1 for flow in engine.flows if port in names(flow))


def _thresholds(engine: Engine, name: str | None) -> tuple[int | None, int | None, int | None]:
    """ECN min, max and the pause threshold of port ``name``'s RoCE priority."""
    port = next((p for p in engine.ports if p.name == name), None)
    nic = next(iter(engine.nics.values()), None)
    if port is None or nic is None or port.spec.qos is None or port.spec.buffer is None:
        return None, None, None
    tc = port.switch.dscp_to_tc[nic.spec.roce_dscp]
    queue = port.spec.qos.queues.get(tc)
    ecn = queue.ecn if queue is not None else None
    pause = port.spec.buffer.xoff_bytes if tc in port.spec.qos.pfc_priorities else None
    if ecn is None:
        return None, None, pause
    return ecn.min_bytes, ecn.max_bytes, pause


def _series(engine: Engine, queue_port: str | None) -> Series:
    """The sampled time series of the bottleneck queue, every flow's rate and paused ports."""
    samples = engine.samples
    paused_ports = sorted({k for s in samples for k in s.paused}, key=natural_key)[:16]
    ecn_min, ecn_max, pause = _thresholds(engine, queue_port)
    return Series(
        every_s=engine.sample_every_s,
        t_s=[s.t_s for s in samples],
        queue_port=queue_port,
        queue_bytes=[s.queue_bytes.get(queue_port, 0) if queue_port else 0 for s in samples],
        flows=[f.name for f in engine.flows],
        rate_bps=[[s.rate_bps[i] for s in samples] for i in range(len(engine.flows))],
        paused_ports=paused_ports,
        paused=[[s.paused.get(name, 0.0) for s in samples] for name in paused_ports],
        queue_port_bps=_port_bps(
            samples,
            next((i for i, p in enumerate(engine.ports) if p.name == queue_port), None),
            _rate_window_s(engine, queue_port),
        ),
        queue_port_flows=_flows_through(engine, queue_port),
        ecn_min_bytes=ecn_min,
        ecn_max_bytes=ecn_max,
        pause_threshold_bytes=pause,
    )


def _converge_s(engine: Engine, series: Series, victim: int | None) -> float | None:
    """Time to converge over the incast flows that ran to the end of the run."""
    active = [
        series.rate_bps[i]
        for i, f in enumerate(engine.flows)
        if i != victim and f.stop_s > engine.duration_s
    ]
    return converge_time(series.t_s, active)


def _pfc_frames(engine: Engine, ports: list[PortReport]) -> int:
    """PFC frames sent by switch ports (XOFF and XON) and by the NICs (XOFF)."""
    return sum(p.pfc_xoff_tx + p.pfc_xon_tx for p in ports) + sum(
        n.pfc_tx_xoff for n in engine.nics.values()
    )


def _ce_fraction(engine: Engine) -> float:
    rx_packets = sum(f.rx_packets for f in engine.flows)
    rx_ce = sum(f.rx_ce for f in engine.flows)
    return rx_ce / rx_packets if rx_packets else 0.0


def _max_paused_fraction(engine: Engine, ports: list[PortReport]) -> float:
    nic_paused = [n.pause.paused_s / engine.duration_s for n in engine.nics.values()]
    return max([p.paused_fraction for p in ports] + nic_paused + [0.0])


def _fairness(flows: list[FlowReport], victim: int | None) -> float | None:
    """Jain over the incast flows' second-half goodput (the victim is excluded)."""
    return jain([fl.goodput_second_half_bps for i, fl in enumerate(flows) if i != victim])


def _storm_port(engine: Engine, scenario: Scenario) -> str | None:
    """The switch port facing the storming host, if the scenario has one."""
    if scenario.storm is None:
        return None
    host = scenario.storm[0]
    return next((p.name for p in engine.ports if p.spec.peer_device == host), None)


def pick_bottleneck(ports: list[PortReport], storm_port: str | None = None) -> PortReport | None:
    """The busiest port (module docstring: the bottleneck)."""
    if storm_port is not None:
        facing = next((p for p in ports if p.port == storm_port), None)
        if facing is not None:
            return facing
    if not ports:
        return None
    busiest = max(p.utilisation for p in ports)
    close = [p for p in ports if p.utilisation >= busiest * (1 - BOTTLENECK_TIE)]
    return max(close, key=lambda p: (p.queue_p99_bytes, p.queue_peak_bytes, p.utilisation))


def _most_paused(engine: Engine, ports: list[PortReport]) -> tuple[str, float]:
    """The port or NIC paused the largest fraction of the run."""
    candidates = [(p.port, p.paused_fraction) for p in ports] + [
        (n.name, n.pause.paused_s / engine.duration_s) for n in engine.nics.values()
    ]
    return max(candidates, key=lambda c: c[1], default=("-", 0.0))


def _dcqcn_as_run(engine: Engine, scenario: Scenario) -> dict[str, int] | None:
    """The first sender's DCQCN parameters with the run's override; None: DCQCN off."""
    if not engine.reaction_point or not scenario.flows:
        return None
    nic = engine.nics[scenario.flows[0].src]
    return {**nic.spec.dcqcn, **engine.dcqcn_override}


def _victim_facts(
    flows: list[FlowReport], victim: int | None
) -> tuple[str, float, float, float] | None:
    if victim is None:
        return None
    flow = flows[victim]
    return flow.flow, flow.goodput_bps, flow.paused_fraction, flow.ce_fraction


def _facts(engine: Engine, scenario: Scenario, partial: TwinReport) -> RunFacts:
    """What the verdict reads, from the report being built and the engine behind it."""
    ports = partial.ports
    worst = max(ports, key=lambda p: p.headroom_drops + p.tail_drops, default=None)
    bottleneck = next((p for p in ports if p.port == partial.bottleneck), None)
    incast = [
        f.goodput_second_half_bps for i, f in enumerate(partial.flows) if i != scenario.victim
    ]
    return RunFacts(
        scenario=scenario.name,
        speed_bps=scenario.speed_bps,
        lossless_drops=partial.lossless_drops,
        worst_drop_port=worst.port if worst is not None else None,
        storms_detected=partial.storms_detected,
        storm_port=_storm_port(engine, scenario),
        bottleneck=partial.bottleneck,
        bottleneck_speed_bps=bottleneck.speed_bps if bottleneck else scenario.speed_bps,
        utilisation=partial.bottleneck_utilisation,
        queue_p99_bytes=partial.queue_p99_bytes,
        ecn_max_bytes=partial.series.ecn_max_bytes,
        most_paused=_most_paused(engine, ports),
        cnps_received=partial.cnps_received,
        rate_cuts=sum(f.rate_cuts for f in partial.flows),
        jain=partial.jain,
        incast_goodput_bps=(min(incast, default=0.0), max(incast, default=0.0)),
        victim=_victim_facts(partial.flows, scenario.victim),
        ecn_enabled=engine.network.ecn_enabled,
        dcqcn=partial.dcqcn,
        lossy_drops=partial.lossy_drops,
        retx_bytes=partial.retx_bytes,
        timeouts=partial.timeouts,
        goodput_bps=partial.goodput_bps,
        recovery=partial.recovery,
        rto_s=partial.rto_s,
        mode=engine.network.mode,
        trimmed=partial.trim.trimmed if partial.trim is not None else 0,
        trim_dropped=partial.trim.trim_dropped if partial.trim is not None else 0,
    )


class RunLabel(TypedDict):
    """What a report says of a run that its engine does not hold: the fabric's and the
    profile's names, the senders asked for, the seed and the wall time it took."""

    fabric: str
    profile: str
    senders: int
    seed: int
    wall_s: float


def report(engine: Engine, scenario: Scenario, **label: Unpack[RunLabel]) -> TwinReport:
    """Summarise a finished run."""
    duration = engine.duration_s
    ports = _active_ports(engine, duration)
    drops = _drops(engine)
    flows = [_flow_report(engine, f, duration) for f in engine.flows]
    victim = scenario.victim
    bottleneck = pick_bottleneck(ports, _storm_port(engine, scenario))
    series = _series(engine, bottleneck.port if bottleneck else None)
    utilisation, peak, p99 = _queue_at(bottleneck)
    partial = TwinReport(
        fabric=label["fabric"],
        profile=label["profile"],
        scenario=scenario.name,
        speed_bps=scenario.speed_bps,
        senders=label["senders"],
        duration_s=duration,
        seed=label["seed"],
        events=engine.events,
        wall_s=label["wall_s"],
        lossless_drops=drops.lossless,
        lossy_drops=drops.lossy,
        drops_by_class={tc: d for tc, d in enumerate(drops.by_class) if d},
        pfc_frames=_pfc_frames(engine, ports),
        ce_fraction=_ce_fraction(engine),
        cnps_sent=sum(n.cnps_tx for n in engine.nics.values()),
        cnps_received=sum(f.cnps_rx for f in engine.flows),
        goodput_bps=sum(f.delivered_bytes for f in engine.flows) * 8 / duration,
        bottleneck=series.queue_port,
        bottleneck_utilisation=utilisation,
        queue_peak_bytes=peak,
        queue_p99_bytes=p99,
        max_paused_fraction=_max_paused_fraction(engine, ports),
        jain=_fairness(flows, victim),
        converge_s=_converge_s(engine, series, victim),
        victim_goodput_bps=flows[victim].goodput_bps if victim is not None else None,
        storms_detected=sum(p.storms_detected for p in ports),
        ports=sorted(ports, key=lambda p: natural_key(p.port)),
        flows=flows,
        series=series,
        verdict=Verdict("", ""),
        dcqcn=_dcqcn_as_run(engine, scenario),
        victim=victim,
        notes=list(scenario.notes),
        retx_bytes=sum(f.retx_bytes for f in flows),
        retx_packets=sum(f.retx_packets for f in flows),
        timeouts=sum(f.timeouts for f in flows),
        naks=sum(f.naks for f in flows),
        recovery=engine.recovery,
        rto_s=engine.rto_s,
        trim=trim_facts(engine),
    )
    return replace(partial, verdict=judge(_facts(engine, scenario, partial)))


def _queue_at(bottleneck: PortReport | None) -> tuple[float, int, int]:
    """The bottleneck's utilisation, queue peak and p99 queue (zeros without one)."""
    if bottleneck is None:
        return 0.0, 0, 0
    return bottleneck.utilisation, bottleneck.queue_peak_bytes, bottleneck.queue_p99_bytes


class TwinOptions(TrafficOptions, total=False):
    """:func:`run_twin`'s keywords beside the run's own: the scenario's ``speed_bps`` (None:
    the fastest host speed), ``ignore_pause`` (the senders' NICs do not honour PFC) and
    ``on_progress(simulated_s, duration_s)``, called at every sample."""

    speed_bps: int | None
    ignore_pause: bool
    on_progress: Callable[[float, float], None] | None


class SimulateOptions(TrafficOptions, total=False):
    """:func:`simulate`'s keywords beside the run's own: ``on_sample(engine, simulated_s)``,
    called at every sample."""

    on_sample: SampleCallback | None


def run_twin(
    network: TwinNetwork,
    scenario_name: ScenarioName,
    *,
    senders: int,
    duration_s: float,
    **options: Unpack[TwinOptions],
) -> TwinReport:
    """Build the scenario on the network, run it and summarise it.

    ``ignore_pause``: the senders' NICs do not honour PFC (a misconfigured host), to show what
    headroom cannot absorb. ``payload_bytes``: RoCE payload per packet (default: the ports'
    RoCE MTU); ``reaction_point=False``: the NICs run with DCQCN off.  The storm scenario
    runs at least its ``min_duration_s``.  ``on_progress(simulated_s, duration_s)`` is called
    at every sample.  ``recovery`` and ``rto_s``: the NICs' loss recovery
    (:class:`agent.twin.engine.Engine`).
    """
    if not (math.isfinite(duration_s) and 0 < duration_s <= MAX_DURATION_S):
        raise TwinError(
            f"twin: --duration. Expected: more than 0 and at most {MAX_DURATION_S:g} s "
            f"Actual: {duration_s!r}"
        )
    speed_bps = options.pop("speed_bps", None)
    ignore_pause = options.pop("ignore_pause", False)
    on_progress = options.pop("on_progress", None)
    run: TrafficOptions = options  # what is left: the run's own options, passed on
    scenario = build_scenario(network, scenario_name, senders, speed_bps)
    if network.time_dilation > 1:
        scenario.notes.append(
            f"a lab fabric (time_dilation {network.time_dilation}): simulated as the fabric it "
            f"stands for, every port {network.time_dilation}x faster; "
            f"{duration_s * 1e3:g} ms here are {duration_s * network.time_dilation:g} s of lab time"
        )
    duration = max(duration_s, scenario.min_duration_s)
    if duration > duration_s:
        scenario.notes.append(
            f"duration raised to {duration * 1e3:g} ms to see the watchdog detect the storm"
        )
    return simulate(
        network,
        scenario,
        senders=senders,
        duration_s=duration,
        ignore_pause=ignore_pause,
        on_sample=None if on_progress is None else lambda e, now: on_progress(now, e.duration_s),
        **run,
    )[1]


def simulate(
    network: TwinNetwork,
    scenario: Scenario,
    *,
    senders: int,
    duration_s: float,
    ignore_pause: bool = False,
    **options: Unpack[SimulateOptions],
) -> tuple[Engine, TwinReport]:
    """Run a built scenario for ``duration_s``; the engine (for callers that read more of
    it, such as tune's measurement window via ``on_sample``) and its report."""
    engine = Engine(
        network,
        scenario.flows,
        ignore_pause=frozenset(f.src for f in scenario.flows) if ignore_pause else frozenset(),
        storm=scenario.storm,
        **options,
    )
    started = time.perf_counter()
    engine.run(duration_s)
    wall = time.perf_counter() - started
    summary = report(
        engine,
        scenario,
        fabric=network.name,
        profile=network.profile,
        senders=senders,
        seed=engine.settings.seed,
        wall_s=wall,
    )
    return engine, summary

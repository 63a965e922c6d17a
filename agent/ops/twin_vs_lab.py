"""The twin against the lab: what the twin predicts for a lab incast, and how the two compare.

The lab measures an incast with its probes (:func:`agent.observe.probes.scenarios.incast`): Python
senders that honour PFC and run DCQCN in emulated time, the lab switch's user-space data
plane on wall time. The twin runs the same incast on the fabric the lab stands for
(:func:`agent.twin.network.build_network`: every port ``time_dilation`` times faster) for the
run time divided by the factor, with the probes' packets (their payload, not the RoCE MTU) and
the same DCQCN, or none. Both share the model of :mod:`lossless`; what differs is everything
around it -- real pacing jitter, process scheduling on two cores, the kernel, PFC and CNP
frames on real sockets -- which is what the comparison is for.

Three dimensionless measures, computed the same way on both sides:

* paused fraction: time the senders' NICs were held by PFC / (senders x run time);
* CE fraction: CE-marked data packets received / data packets received;
* goodput fraction: payload bits delivered / (receiver's line rate x sending time). A packet
  of ``payload`` bytes occupies ``payload + 82`` bytes of wire (RoCEv2 headers, FCS, preamble
  and gap), so 1000-byte probes fill the wire at 0.924; what the fabric still holds when the
  senders stop is delivered after and counted on both sides, so a short run under PFC (full
  queues) comes out a few percent above that.

Agreement (the issue's ±15 %): within 15 % of the lab's value, or both under 0.02 -- a
fraction under 2 % is one or two PFC pauses in a 2 s lab run, noise rather than behaviour.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agent.intent.model import FabricIntent
from agent.twin.flows import FlowSpec
from agent.twin.network import ROCE_FRAME_OVERHEAD, TwinError, TwinNetwork, build_network
from agent.twin.results import TwinReport, simulate
from agent.twin.workloads import BASE_SPORT, Scenario

TOLERANCE = 0.15
NOISE_FLOOR = 0.02
DRAIN_FACTOR = 1.25
MEASURES = ("paused_fraction", "ce_fraction", "goodput_fraction")


@dataclass(frozen=True)
class IncastMeasures:
    paused_fraction: float
    ce_fraction: float
    goodput_fraction: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Agreement:
    measure: str
    lab: float
    twin: float

    @property
    def agrees(self) -> bool:
        return agree(self.lab, self.twin)

    def as_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "lab": round(self.lab, 4),
            "twin": round(self.twin, 4),
            "agrees": self.agrees,
        }


def agree(lab: float, twin: float) -> bool:
    """The twin's value is within ``TOLERANCE`` of the lab's, or both are noise."""
    return abs(twin - lab) <= TOLERANCE * lab or max(lab, twin) < NOISE_FLOOR


def median(runs: Sequence[IncastMeasures]) -> IncastMeasures:
    """Each measure's median over several runs (lab repeats, or twin seeds)."""
    return IncastMeasures(*(statistics.median(getattr(r, m) for r in runs) for m in MEASURES))


def compare(lab: IncastMeasures, twin: IncastMeasures) -> list[Agreement]:
    return [Agreement(m, getattr(lab, m), getattr(twin, m)) for m in MEASURES]


def from_lab(
    result: dict[str, Any], duration_s: float, line_bps: float, payload: int
) -> IncastMeasures:
    """The measures of a lab incast (:func:`agent.observe.probes.scenarios.incast`'s result)."""
    rows = result["flows"]
    received = sum(r["received"] for r in rows)
    return IncastMeasures(
        paused_fraction=sum(r["paused_s"] for r in rows) / (len(rows) * duration_s),
        ce_fraction=sum(r["ce_marked"] for r in rows) / received if received else 0.0,
        goodput_fraction=received * payload * 8 / (line_bps * duration_s),
    )


def from_twin(report: TwinReport, payload: int, sending_s: float) -> IncastMeasures:
    """The same measures of a twin run whose packets carry ``payload`` bytes and whose
    senders sent for ``sending_s`` (the run may go on to drain the queues)."""
    frame = payload + ROCE_FRAME_OVERHEAD
    received = sum(f.rx_bytes for f in report.flows) // frame
    flows = report.flows
    paused_s = sum(f.paused_fraction for f in flows) * report.duration_s
    return IncastMeasures(
        paused_fraction=paused_s / (len(flows) * sending_s),
        ce_fraction=report.ce_fraction,
        goodput_fraction=received * payload * 8 / (report.speed_bps * sending_s),
    )


@dataclass(frozen=True)
class LabIncast:
    """The incast both sides run: ``senders`` -> ``to`` for ``duration_s`` of lab time, the
    senders' DCQCN on or off."""

    to: str
    senders: Sequence[str]
    duration_s: float
    dcqcn: bool = True


def predict_incast(
    intent: FabricIntent,
    incast: LabIncast,
    *,
    payload: int,
    seed: int = 1,
    network: TwinNetwork | None = None,
) -> TwinReport:
    """The twin's run of the lab incast, lasting ``incast.duration_s / time_dilation`` of
    twin time. As in the lab, the senders stop then and what is queued is still delivered:
    the run goes on for a quarter more (the deepest queue, every ingress at XOFF plus
    headroom, drains in far less)."""
    net = network or build_network(intent)
    to, senders = incast.to, incast.senders
    for host in (to, *senders):
        if host not in net.hosts:
            raise TwinError(f"twin: {host}: Expected: a host of fabric {intent.name} with a link")
    sending = incast.duration_s / net.time_dilation
    flows = [
        FlowSpec(src, to, stop_s=sending, udp_sport=BASE_SPORT + i) for i, src in enumerate(senders)
    ]
    scenario = Scenario("incast", flows, to, speed_bps=net.hosts[to].port.speed_bps)
    _, report = simulate(
        net,
        scenario,
        senders=len(senders),
        duration_s=sending * DRAIN_FACTOR,
        seed=seed,
        payload_bytes=payload,
        reaction_point=incast.dcqcn,
    )
    return report


def measure_lab(intent: FabricIntent, incast: LabIncast) -> tuple[IncastMeasures, dict[str, Any]]:
    """Run the incast on the lab's hosts (the switches must already carry the intent) and
    return its measures and the probes' whole result."""
    from agent.observe.probes import scenarios

    result = scenarios.incast(
        intent, incast.to, list(incast.senders), incast.duration_s, dcqcn=incast.dcqcn
    )
    line = min(p.speed for d in intent.devices if d.name == incast.to for p in d.ports)
    return from_lab(result, incast.duration_s, line, scenarios.INCAST_PAYLOAD_BYTES), result


def predict_lab(
    intent: FabricIntent, incast: LabIncast, *, seed: int = 1, network: TwinNetwork | None = None
) -> tuple[IncastMeasures, TwinReport]:
    """The twin's prediction of :func:`measure_lab` of the same incast."""
    from agent.observe.probes import scenarios

    payload = scenarios.INCAST_PAYLOAD_BYTES
    report = predict_incast(intent, incast, payload=payload, seed=seed, network=network)
    return from_twin(report, payload, incast.duration_s / intent.emulation.time_dilation), report

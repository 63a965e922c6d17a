"""Probe scenarios over a fabric: pairwise reachability, incast, PFC storm drill.

Each scenario starts receivers first (they report READY), then senders, waits for all, and
returns one JSON-ready result with an overall verdict and the reasons for it, so validation
and playbooks can use it directly.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from agent.errors import AgentError
from agent.intent.model import Device, FabricIntent
from agent.intent.plan import nic_plan
from agent.observe.probes.runner import NetnsRunner, ProbeHandle, Runner, SshRunner
from agent.observe.probes.transport import Transport, choose_transport

RESULT_GRACE_S = 15.0
BASE_QPN = 0x100
BASE_SPORT = 49152
INCAST_PAYLOAD_BYTES = 1000  # BTH payload of an incast probe packet (frame: 1058 B + FCS)


class ScenarioError(AgentError):
    """A scenario that cannot run on this fabric (unknown host, no address, no runner)."""


@dataclass(frozen=True)
class Endpoint:
    device: Device
    ifname: str
    ip: str
    speed_bps: int
    runner: Runner


def endpoint(intent: FabricIntent, name: str) -> Endpoint:
    """The probe endpoint of host ``name``: its first port with an IPv4 address."""
    device = intent.device(name)
    if device is None:
        hosts = ", ".join(d.name for d in intent.devices if d.role == "host")
        raise ScenarioError(f"no host named {name!r} in fabric {intent.name} (hosts: {hosts})")
    if device.role != "host":
        raise ScenarioError(f"{name} is a {device.role}; probes run on hosts")
    port = next((p for p in device.ports if p.ipv4 is not None), None)
    if port is None or port.ipv4 is None:
        raise ScenarioError(f"host {name} has no port with an ipv4 address in the fabric file")
    runner: Runner = (
        NetnsRunner(name, device.netns) if device.netns is not None else SshRunner(device)
    )
    return Endpoint(device, port.name, str(port.ipv4.ip), port.speed, runner)


def transport_for(intent: FabricIntent, ends: list[Endpoint]) -> Transport:
    """The UDP port of a run over ``ends`` (:mod:`agent.observe.probes.transport`)."""
    return choose_transport(
        intent.validation.probe, [(e.device.name, e.ifname, e.runner) for e in ends]
    )


def _receive_spec(
    intent: FabricIntent,
    end: Endpoint,
    duration_s: float,
    senders: list[str],
    transport: Transport,
) -> dict[str, Any]:
    nic = nic_plan(intent.profile)
    return {
        "ifname": end.ifname,
        "udp_port": transport.udp_port,
        # Only the scenario's own senders are tracked: a stranger on the probes' port is counted as
        # foreign and cannot grow the receiver's state.
        "senders": sorted(set(senders)),
        "duration_s": duration_s + RESULT_GRACE_S,
        "idle_timeout_s": 1.0,
        "link_speed_bps": end.speed_bps,
        "notification_point": intent.profile.ecn.enabled,
        "min_time_between_cnps_us": nic.dcqcn["min_time_between_cnps"],
        "cnp_dscp": nic.dcqcn["cnp_dscp"],
        "storm_after_s": intent.profile.pfc.watchdog.detection_ms / 1000,
        # A lab link standing for a faster one: the NIC's CNP pacing runs in emulated time.
        "time_dilation": intent.emulation.time_dilation,
    }


@dataclass(frozen=True)
class Sending:
    """What one sender of a scenario sends: its index among the senders (its QP, UDP source
    port and flow id follow from it), its rate, for how long, the payload size, whether it
    runs DCQCN, and the run's transport."""

    index: int
    rate_bps: int
    duration_s: float
    size: int
    dcqcn: bool
    transport: Transport


def _send_spec(
    intent: FabricIntent, source: Endpoint, target: Endpoint, sending: Sending
) -> dict[str, Any]:
    profile = intent.profile
    index = sending.index
    spec: dict[str, Any] = {
        "ifname": source.ifname,
        "udp_port": sending.transport.udp_port,
        "dst_ip": target.ip,
        "rate_bps": min(sending.rate_bps, source.speed_bps),
        "link_speed_bps": source.speed_bps,
        "duration_s": sending.duration_s,
        "size": sending.size,
        "dscp": profile.roce.dscp,
        "priority": profile.roce.priority,
        "qpn": BASE_QPN + index,
        "sport": BASE_SPORT + index,
        "flow_id": index,
        # The reaction point runs in emulated time and rates (agent.observe.probes.dilation);
        # pacing,
        # PFC and the reported rates stay the lab's.
        "time_dilation": intent.emulation.time_dilation,
    }
    if sending.dcqcn and profile.ecn.enabled:
        spec["dcqcn"] = nic_plan(profile).dcqcn
    return spec


def _run(
    receivers: dict[str, ProbeHandle], senders: list[ProbeHandle], duration_s: float
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    sent = [s.result(timeout=duration_s + RESULT_GRACE_S) for s in senders]
    received = {
        name: r.result(timeout=duration_s + 2 * RESULT_GRACE_S) for name, r in receivers.items()
    }
    return received, sent


def start_receivers(
    intent: FabricIntent,
    targets: list[Endpoint],
    duration_s: float,
    senders: list[Endpoint],
    transport: Transport,
) -> dict[str, ProbeHandle]:
    receivers = {}
    sources = [s.ip for s in senders]
    try:
        # Started side by side, then waited for: each takes a Python start-up to get ready.
        for target in targets:
            spec = _receive_spec(intent, target, duration_s, sources, transport)
            receivers[target.device.name] = target.runner.start("receive", spec)
        for process in receivers.values():
            process.wait_ready()
    except Exception:
        for process in receivers.values():
            process.kill()
        raise
    return receivers


def flow_of(received: dict[str, Any], src_ip: str, qpn: int) -> dict[str, Any] | None:
    return next((f for f in received["flows"] if f["src_ip"] == src_ip and f["qpn"] == qpn), None)


def _pair_rows(
    received: dict[str, dict[str, Any]], sent: list[dict[str, Any]], targets: dict[str, str]
) -> list[dict[str, Any]]:
    rows = []
    for result in sent:
        flow = result["flow"]
        target = targets[flow["dst_ip"]]
        seen = flow_of(received[target], flow["src_ip"], flow["qpn"])
        got = seen["received"] if seen else 0
        # A trimmed frame arrived cut, re-marked (packet trimming): the receiver learnt of it,
        # so it is neither received whole nor lost.
        trimmed = seen.get("trimmed", 0) if seen else 0
        rows.append(
            {
                "from": result["host"],
                "to": target,
                "qpn": flow["qpn"],
                "sent": result["sent"],
                "received": got,
                "lost": result["sent"] - got - trimmed,
                "trimmed": trimmed,
                "trimmed_dscp": seen.get("trimmed_dscp") if seen else None,
                "reordered": seen["reordered"] if seen else 0,
                "ce_marked": seen["ce_marked"] if seen else 0,
                "cnps_received": result["cnps_received"],
                "pfc_frames_received": result["pfc_frames_received"],
                "paused_s": result["paused_s"],
                "send_rate_bps": result["send_rate_bps"],
                "rate_cuts": result["rate_cuts"],
                "min_rate_bps": result["min_rate_bps"],
                "paced_rate_bps": result["paced_rate_bps"],
            }
        )
    return rows


class PairwiseOptions(TypedDict, total=False):
    """:func:`pairwise`'s payload size per packet (512) and transport (default: chosen)."""

    size: int
    transport: Transport | None


def pairwise(
    intent: FabricIntent,
    hosts: list[str] | None = None,
    rate_bps: int = 1_000_000,
    duration_s: float = 3.0,
    **options: Unpack[PairwiseOptions],
) -> dict[str, Any]:
    """Every ordered host pair at a low rate; expected: zero loss everywhere."""
    names = hosts or [d.name for d in intent.devices if d.role == "host"]
    ends = [endpoint(intent, n) for n in names]
    if len(ends) < 2:
        raise ScenarioError("pairwise needs at least two hosts")
    transport = options.get("transport") or transport_for(intent, ends)
    receivers = start_receivers(intent, ends, duration_s, ends, transport)
    size = options.get("size", 512)
    senders = [
        source.runner.start(
            "send",
            _send_spec(
                intent, source, target, Sending(i, rate_bps, duration_s, size, False, transport)
            ),
        )
        for i, (source, target) in enumerate(itertools.permutations(ends, 2))
    ]
    received, sent = _run(receivers, senders, duration_s)
    rows = _pair_rows(received, sent, {e.ip: e.device.name for e in ends})
    failures = [
        f"{r['from']}→{r['to']}: {r['lost']} lost of {r['sent']}" for r in rows if r["lost"]
    ]
    failures += [f"{r['from']}→{r['to']}: nothing sent" for r in rows if not r["sent"]]
    return {
        "scenario": "pairwise",
        "passed": not failures,
        "failures": failures,
        "transport": transport.as_json(),
        "flows": rows,
        "totals": _totals(rows),
    }


class IncastOptions(TypedDict, total=False):
    """:func:`incast`'s payload size per packet (:data:`INCAST_PAYLOAD_BYTES`), whether the
    senders run DCQCN (yes), each sender's UDP source port (the ECMP entropy, to put the
    senders on chosen paths) and the transport (default: chosen)."""

    size: int
    dcqcn: bool
    sports: list[int] | None
    transport: Transport | None


def incast(
    intent: FabricIntent,
    to: str,
    senders_from: list[str],
    duration_s: float = 3.0,
    rate_bps: int | None = None,
    **options: Unpack[IncastOptions],
) -> dict[str, Any]:
    """N senders at line rate into one receiver. Expected: no loss on the lossless class;
    with ECN on, CE marks and CNPs; with DCQCN, senders slow down. ``sports``: each sender's
    UDP source port (the ECMP entropy), to put the senders on chosen paths."""
    target = endpoint(intent, to)
    sources = [endpoint(intent, name) for name in senders_from]
    sports = options.get("sports")
    _check_incast(to, senders_from, len(sources), sports)
    transport = options.get("transport") or transport_for(intent, [target, *sources])
    size, dcqcn = options.get("size", INCAST_PAYLOAD_BYTES), options.get("dcqcn", True)
    specs = [
        _send_spec(
            intent, source, target, Sending(i, rate_bps or source.speed_bps, duration_s, size,
                                            dcqcn, transport)
        )
        for i, source in enumerate(sources)
    ]  # fmt: skip
    if sports is not None:
        for spec, sport in zip(specs, sports, strict=True):
            spec["sport"] = sport
    receivers = start_receivers(intent, [target], duration_s, sources, transport)
    senders = _start_together(sources, specs, receivers)
    received, sent = _run(receivers, senders, duration_s)
    rows = _pair_rows(received, sent, {target.ip: to})
    totals = _totals(rows)
    failures = _incast_failures(intent, totals)
    return {
        "scenario": "incast",
        "notes": trimmed_notes(totals),
        "to": to,
        "from": senders_from,
        "passed": not failures,
        "failures": failures,
        "transport": transport.as_json(),
        "time_dilation": intent.emulation.time_dilation,
        # How much later than agreed the last sender started: the senders overlapped for
        # duration_s minus this.
        "start_late_s": max(row.get("start_late_s", 0.0) for row in sent),
        "flows": rows,
        "totals": totals,
        "receiver": {
            "received": totals["received"],
            "goodput_bps": round(sum(r["received"] for r in rows) * size * 8 / duration_s),
            "cnps_sent": received[to]["cnps_sent"],
        },
    }


def _check_incast(to: str, senders_from: list[str], sources: int, sports: list[int] | None) -> None:
    if not sources:
        raise ScenarioError("incast needs at least one sender (--from)")
    if to in senders_from:
        raise ScenarioError(f"{to} cannot send to itself")
    if sports is not None and len(sports) != sources:
        raise ScenarioError(f"sports: Expected: one per sender ({sources}) Actual: {len(sports)}")


def _start_together(
    sources: list[Endpoint], specs: list[dict[str, Any]], receivers: dict[str, ProbeHandle]
) -> list[ProbeHandle]:
    """The senders started, each waiting for one wall-clock moment: an incast is
    synchronised (a collective's senders start together), and the moment is far enough
    ahead for all of them to start. On a failure every sender and receiver is stopped."""
    start_at = time.time() + max(
        first + each * len(sources) for first, each in (s.runner.start_margin_s for s in sources)
    )
    senders = []
    try:
        for source, spec in zip(sources, specs, strict=True):
            senders.append(source.runner.start("send", {**spec, "start_at": start_at}))
        for sender in senders:
            sender.wait_ready()
    except Exception:
        for process in [*senders, *receivers.values()]:
            process.kill()
        raise
    return senders


def _incast_failures(intent: FabricIntent, totals: dict[str, Any]) -> list[str]:
    """What an incast must not show: loss on the lossless class; with ECN on, no CE mark or
    no CNP."""
    profile = intent.profile
    failures = []
    if profile.mode == "lossless" and totals["lost"]:
        failures.append(f"{totals['lost']} packets lost on the lossless class")
    if profile.ecn.enabled and totals["sent"] and not totals["ce_marked"]:
        failures.append("ECN is on but no packet arrived CE-marked")
    if profile.ecn.enabled and totals["sent"] and not totals["cnps_received"]:
        failures.append("ECN is on but no sender received a CNP")
    return failures


def trimmed_notes(totals: dict[str, Any]) -> list[str]:
    """The report's line on packet trimming: ``trimmed N`` when a switch trimmed frames."""
    trimmed = totals.get("trimmed", 0)
    if not trimmed:
        return []
    return [f"trimmed {trimmed}: frames a switch cut and re-marked (packet trimming), not lost"]


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("sent", "received", "lost", "trimmed", "reordered", "ce_marked", "cnps_received",
            "pfc_frames_received", "rate_cuts")  # fmt: skip
    totals: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    totals["paused_s"] = round(sum(r["paused_s"] for r in rows), 6)
    return totals


class StormOptions(TypedDict, total=False):
    """:func:`storm`'s priorities (default: the RoCE priority), the host that sends RoCE
    traffic meanwhile (none), and the transport of that traffic (default: chosen)."""

    priorities: tuple[int, ...] | None
    traffic_from: str | None
    transport: Transport | None


def storm(
    intent: FabricIntent,
    host: str,
    duration_s: float = 2.0,
    rate_pps: float = 200.0,
    **options: Unpack[StormOptions],
) -> dict[str, Any]:
    """Inject a PFC storm from ``host`` into its switch port and sniff it on the wire.

    Expected: the sniffer declares a storm (a continuous pause longer than the watchdog's
    detection time) within that time plus one polling interval. With ``traffic_from``, that
    host sends RoCE traffic to ``host`` meanwhile, so the switch has packets queued behind
    the pause — what its PFC watchdog needs to declare a storm.
    """
    source = endpoint(intent, host)
    background = None
    traffic_from, transport = options.get("traffic_from"), options.get("transport")
    if traffic_from is not None:
        sender = endpoint(intent, traffic_from)
        transport = transport or transport_for(intent, [sender, source])
        sending = Sending(0, sender.speed_bps // 2, duration_s + 1.0, 500, False, transport)
        background = sender.runner.start("send", _send_spec(intent, sender, source, sending))
    watchdog = intent.profile.pfc.watchdog
    storm_after_s = watchdog.detection_ms / 1000
    chosen = options.get("priorities") or (intent.profile.roce.priority,)
    sniffer = source.runner.start(
        "sniff-pfc",
        {
            "interfaces": [source.ifname],
            "duration_s": duration_s + 0.5,
            "link_speed_bps": source.speed_bps,
            "storm_after_s": storm_after_s,
            "outgoing": True,
        },
    )
    injected = source.runner.start(
        "storm",
        {"ifname": source.ifname, "priorities": list(chosen), "duration_s": duration_s,
         "rate_pps": rate_pps},
    ).result(timeout=duration_s + RESULT_GRACE_S)  # fmt: skip
    seen = sniffer.result(timeout=duration_s + RESULT_GRACE_S)["interfaces"][source.ifname]
    traffic = background.result(timeout=duration_s + RESULT_GRACE_S) if background else None
    failures = []
    bound = storm_after_s + watchdog.polling_ms / 1000
    for priority in chosen:
        stats = seen["priorities"][str(priority)]
        if not stats["storms"]:
            failures.append(f"priority {priority}: storm not detected on the wire")
        elif stats["time_to_detect_s"][0] > bound:
            failures.append(
                f"priority {priority}: detected after {stats['time_to_detect_s'][0]:.3f} s, "
                f"expected within {bound:.3f} s"
            )
    return {
        "scenario": "storm",
        "host": host,
        "passed": not failures,
        "failures": failures,
        **({"transport": transport.as_json()} if transport is not None else {}),
        "injected": injected,
        "sniffed": seen,
        "traffic": traffic,
        "detection_bound_s": bound,
    }


class RingOptions(TypedDict, total=False):
    """:func:`ring_allreduce`'s payload per packet (:data:`INCAST_PAYLOAD_BYTES`), whether
    the ranks run DCQCN (yes), how long the ranks wait for their steps (60 s) and the
    transport (default: chosen)."""

    payload: int
    dcqcn: bool
    deadline_s: float
    transport: Transport | None


def ring_allreduce(
    intent: FabricIntent,
    hosts: list[str],
    size_bytes: int,
    **options: Unpack[RingOptions],
) -> dict[str, Any]:
    """A ring all-reduce of ``size_bytes`` (nccl-tests' per-rank buffer) among ``hosts`` in
    that order (:mod:`agent.observe.probes.ring`): 2(N-1) steps of size/N bytes, each rank
    sending to the next once it has the previous step from the one before. Reports the
    completion time (the last rank's last step) and nccl-tests' algbw = size / time and busbw =
    algbw x 2(N-1)/N (nccl-tests doc/PERFORMANCE.md), in lab time and, on a dilated lab, in
    the time of the fabric it stands for (time / D, bandwidth x D)."""
    ends = [endpoint(intent, name) for name in hosts]
    if len(ends) < 2 or len(set(hosts)) != len(hosts):
        raise ScenarioError(f"ring: Expected: two or more distinct hosts Actual: {hosts}")
    payload = options.get("payload", INCAST_PAYLOAD_BYTES)
    dcqcn, deadline_s = options.get("dcqcn", True), options.get("deadline_s", 60.0)
    ranks = len(ends)
    steps = 2 * (ranks - 1)
    chunk_frames = max(1, math.ceil(size_bytes / ranks / payload))
    transport = options.get("transport") or transport_for(intent, ends)
    margins = (e.runner.start_margin_s for e in ends)
    start_at = time.time() + max(first + each * ranks for first, each in margins)
    nic = nic_plan(intent.profile)
    handles = []
    try:
        for rank, end in enumerate(ends):
            successor = ends[(rank + 1) % ranks]
            sending = Sending(rank, end.speed_bps, deadline_s, payload, dcqcn, transport)
            spec = {
                "send": {**_send_spec(intent, end, successor, sending), "start_at": start_at},
                "prev_qpn": BASE_QPN + (rank - 1) % ranks,
                "steps": steps,
                "chunk_frames": chunk_frames,
                "deadline_s": deadline_s,
                "min_time_between_cnps_us": nic.dcqcn["min_time_between_cnps"],
                "cnp_dscp": nic.dcqcn["cnp_dscp"],
                "notification_point": intent.profile.ecn.enabled,
            }
            handles.append(end.runner.start("ring", spec))
        for handle in handles:
            handle.wait_ready()
    except Exception:
        for handle in handles:
            handle.kill()
        raise
    results = [h.result(timeout=deadline_s + RESULT_GRACE_S) for h in handles]
    ring = RingShape(hosts, size_bytes, chunk_frames * payload, steps)
    return _ring_report(intent, ring, results)


@dataclass(frozen=True)
class RingShape:
    """What a ring all-reduce ran: its ranks in ring order, the per-rank buffer, the bytes of
    one step's chunk and the number of steps (2(N-1))."""

    hosts: list[str]
    size_bytes: int
    chunk_bytes: int
    steps: int


def _ring_report(
    intent: FabricIntent, ring: RingShape, results: list[dict[str, Any]]
) -> dict[str, Any]:
    hosts, size_bytes, chunk_bytes, steps = (
        ring.hosts,
        ring.size_bytes,
        ring.chunk_bytes,
        ring.steps,
    )
    ranks = len(hosts)
    complete = all(r["complete"] for r in results)
    time_s = max(r["time_s"] for r in results) if complete else None
    dilation = intent.emulation.time_dilation
    algbw = size_bytes / time_s if time_s else None
    failures = [f"{h}: missing steps {[i for i, t in enumerate(r['steps_arrived_s']) if t is None]}"
                for h, r in zip(hosts, results, strict=True) if not r["complete"]]  # fmt: skip
    lost = sum(r["frames_sent"] for r in results) - sum(sum(r["frames_received"]) for r in results)
    return {
        "scenario": "ring-allreduce",
        "passed": complete,
        "failures": failures,
        "hosts": hosts,
        "ranks": ranks,
        "size_bytes": size_bytes,
        "chunk_bytes": chunk_bytes,
        "steps": steps,
        "time_s": time_s,
        "algbw_Bps": algbw,
        "busbw_Bps": algbw * 2 * (ranks - 1) / ranks if algbw else None,
        "time_dilation": dilation,
        "emulated_time_s": time_s / dilation if time_s else None,
        "lost": lost,
        "ranks_detail": results,
    }

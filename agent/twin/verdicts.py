"""What a twin run says to do: one verdict per run, the first row of this table that matches.

Verdicts, in order (the bottleneck is :func:`agent.twin.results.pick_bottleneck`'s):

1. ``lossless-loss`` -- a no-drop priority lost frames (headroom overrun, tail drop): the
   headroom does not hold what arrives after XOFF, or the senders ignore pause; with what the
   loss cost (retransmitted bytes, timeouts, in-order goodput) when the NICs had to recover.
2. ``storm-contained`` / ``storm-uncontained`` -- the storm scenario, with or without the PFC
   watchdog detecting it (enable the watchdog).
3. ``trimming`` -- lossy-trim (issue #47): the switches trimmed frames instead of pausing
   and the NICs resent them, as the mode intends; with what it cost, the assumption of NICs
   that react to trims, and ``--compare-modes`` to weigh it against lossless.  Otherwise
   ``retransmitting`` -- frames were lost where loss is allowed (a lossy class, a watchdog
   drop) and the NICs' loss recovery (go-back-N or selective repeat) sent data again: RoCE
   is built for a fabric that does not drop (make the RoCE priority no-drop).
4. ``victim-starved`` -- the victim flow got less than :data:`VICTIM_FLOOR` of its line rate:
   paused by PFC it did not cause (head-of-line), or cut by ECN marks in a queue it shares
   (run ``tune``).
5. ``under-utilised`` -- the bottleneck carries less than :data:`UTILISATION_FLOOR` of its
   speed while CNPs cut the senders' rates: the hosts' DCQCN recovers too slowly for the
   speed (run ``tune --dcqcn``).
6. ``pfc-bound`` -- a port or NIC was paused more than :data:`PAUSED_CEILING` of the run:
   ECN/DCQCN do not keep the queues below the pause threshold, or ECN is off (run ``tune``).
7. ``under-loaded`` -- the bottleneck carries less than :data:`UTILISATION_FLOOR` and nothing
   held the senders back: the offered load is the limit, not the fabric.
8. ``unfair`` -- Jain's index among the incast flows over the second half is below
   :data:`JAIN_FLOOR` (run ``tune --dcqcn``, or a longer run to see it converge).
9. ``queue-above-ecn`` -- the bottleneck's p99 queue is above the ECN maximum: every packet
   is marked and the delay is the queue's (run ``tune`` for lower thresholds).
10. ``healthy`` -- none of the above.

The thresholds are ``tune``'s hard objectives by default (:data:`PAUSED_CEILING`,
:data:`UTILISATION_FLOOR`) and the fairness floor a recommendation must meet
(:data:`JAIN_FLOOR`).  The order puts the broken promise first, then what starves a flow,
then what wastes the link, then what only costs queueing: a run that is under-utilised *and*
paused is told about the rate recovery, because after the first pauses that is what keeps the
link empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agent.intent.units import format_speed

PAUSED_CEILING = 0.05
"""Largest paused fraction of any port or NIC that is not a verdict (tune's --max-paused)."""
UTILISATION_FLOOR = 0.90
"""Least bottleneck utilisation that is not a verdict (tune's --min-utilisation)."""
JAIN_FLOOR = 0.90
"""Least Jain index among the incast flows that is not a verdict."""
VICTIM_FLOOR = 0.50
"""Least share of its line rate the victim flow may get before it is the verdict."""


@dataclass(frozen=True)
class Verdict:
    """One line: what happened, why, and what to run (``kind`` is the table's first column)."""

    kind: str
    says: str


@dataclass(frozen=True)
class RunFacts:
    """What the verdict reads: the run's measures (from its report) and its setting."""

    scenario: str
    speed_bps: int
    lossless_drops: int
    worst_drop_port: str | None
    storms_detected: int
    storm_port: str | None
    bottleneck: str | None
    bottleneck_speed_bps: int
    utilisation: float
    queue_p99_bytes: int
    ecn_max_bytes: int | None
    most_paused: tuple[str, float]  # port or NIC, fraction
    cnps_received: int
    rate_cuts: int
    jain: float | None
    incast_goodput_bps: tuple[float, float]  # min, max of the incast flows' second half
    victim: tuple[str, float, float, float] | None  # flow, goodput, NIC paused, CE fraction
    ecn_enabled: bool
    dcqcn: Mapping[str, int] | None  # the senders' DCQCN parameters; None: DCQCN off
    lossy_drops: int = 0
    retx_bytes: int = 0  # data the senders sent again (NAK or timeout)
    timeouts: int = 0
    goodput_bps: float = 0.0  # in order, all flows
    recovery: str = "go-back-n"
    rto_s: float = 0.0
    mode: str = "lossless"  # the RoCE class's: lossless or lossy-trim
    trimmed: int = 0  # frames the switches trimmed (lossy-trim)
    trim_dropped: int = 0  # of those, dropped at the trim queue


def _pct(value: float) -> str:
    return f"{value:.1%}"


def kb(value: float) -> str:
    """A measured depth in kB (1000 B, as :mod:`agent.intent.units` reads KB)."""
    return f"{value / 1000:.0f} KB" if value < 10e6 else f"{value / 1e6:.1f} MB"


def _gbps(value: float) -> str:
    return f"{value / 1e9:.3g} Gb/s"


def _recovery_cost(f: RunFacts) -> str:
    """What loss recovery cost the run: resent bytes, timeouts, the in-order goodput."""
    if not f.retx_bytes and not f.timeouts:
        return ""
    timeouts = (
        f", {f.timeouts} retransmission timeouts of {f.rto_s * 1e3:.3g} ms" if f.timeouts else ""
    )
    return (
        f"; {f.recovery} resent {kb(f.retx_bytes)}{timeouts}, in-order goodput "
        f"{_gbps(f.goodput_bps)} with the bottleneck at {_pct(f.utilisation)}"
    )


def _lossless_loss(f: RunFacts) -> Verdict | None:
    if not f.lossless_drops:
        return None
    return Verdict(
        "lossless-loss",
        f"lossless loss: {f.lossless_drops} frames of a no-drop priority lost (most at "
        f"{f.worst_drop_port}'s ingress){_recovery_cost(f)} -- the headroom above the pause "
        "threshold does not hold what arrives after XOFF, or the senders ignore pause; compare "
        "`roce-agent plan`'s headroom with the cables and speeds",
    )


def _trimming(f: RunFacts) -> Verdict | None:
    """Lossy-trim resends what the switches trimmed by design: not the loss a lossless
    fabric's recovery is for."""
    if f.mode != "lossy-trim" or not (f.trimmed or f.retx_bytes or f.timeouts):
        return None
    dropped = f", {f.trim_dropped} of them dropped at the trim queue" if f.trim_dropped else ""
    return Verdict(
        "trimming",
        f"trimming: {f.trimmed} frames trimmed instead of paused{dropped}"
        f"{_recovery_cost(f)} -- the run assumes NICs that resend a trimmed frame at once "
        "(UEC); no RoCE NIC of today does: compare both modes with `roce-agent twin "
        "--compare-modes`",
    )


def _retransmitting(f: RunFacts) -> Verdict | None:
    if not f.retx_bytes and not f.timeouts:
        return None
    return Verdict(
        "retransmitting",
        f"retransmitting: {f.lossy_drops} frames lost where the class may drop"
        f"{_recovery_cost(f)} -- RoCE's loss recovery is built for a fabric that does not drop; "
        "make the RoCE priority no-drop (PFC) with ECN below the pause threshold (`roce-agent "
        "plan`), or run `roce-agent tune`",
    )


def _storm(f: RunFacts) -> Verdict | None:
    if f.scenario != "storm":
        return None
    if f.storms_detected:
        return Verdict(
            "storm-contained",
            f"pause storm contained: the PFC watchdog at {f.storm_port} detected it "
            f"({f.storms_detected}x) and the rest of the fabric moves again",
        )
    return Verdict(
        "storm-uncontained",
        f"pause storm not contained: {f.most_paused[0]} paused {_pct(f.most_paused[1])} of the "
        "run and no watchdog detected it -- enable the PFC watchdog (pfc.watchdog in the "
        "profile) or shorten its detection time",
    )


def _victim_starved(f: RunFacts) -> Verdict | None:
    if f.victim is None:
        return None
    flow, goodput, paused, ce = f.victim
    if goodput >= VICTIM_FLOOR * f.speed_bps:
        return None
    if paused > PAUSED_CEILING:
        why = f"its NIC was paused {_pct(paused)} by PFC it did not cause (head-of-line)"
        fix = "lower the ECN thresholds so DCQCN acts before PFC"
    else:
        why = f"ECN marks in the queue it shares with the incast ({_pct(ce)} CE) cut its rate"
        fix = "a shorter shared queue (lower ECN thresholds)"
    return Verdict(
        "victim-starved",
        f"victim starved: {flow} got {_gbps(goodput)} of {format_speed(f.speed_bps)} -- {why}; "
        f"{fix}: run `roce-agent tune`",
    )


def _under_utilised(f: RunFacts) -> Verdict | None:
    if f.utilisation >= UTILISATION_FLOOR or not f.cnps_received or f.dcqcn is None:
        return None
    speed = format_speed(f.bottleneck_speed_bps)
    step = (
        f"rpg_ai_rate {f.dcqcn.get('rpg_ai_rate', '?')} Mb/s per "
        f"{f.dcqcn.get('rpg_time_reset', '?')} us"
    )
    paused = (
        f"; PFC also paused {f.most_paused[0]} {_pct(f.most_paused[1])}"
        if f.most_paused[1] > PAUSED_CEILING
        else ""
    )
    return Verdict(
        "under-utilised",
        f"under-utilised: {f.bottleneck} carries {_pct(f.utilisation)} of {speed} -- CNPs "
        f"cut the senders' rates {f.rate_cuts} times and the hosts' DCQCN recovers too slowly "
        f"for {speed} ({step}){paused}; run `roce-agent tune --dcqcn`",
    )


def _pfc_bound(f: RunFacts) -> Verdict | None:
    where, paused = f.most_paused
    if paused <= PAUSED_CEILING:
        return None
    why = (
        "ECN is off in this profile, so PFC alone holds the senders back"
        if not f.ecn_enabled
        else "ECN and DCQCN do not keep the queues below the pause threshold"
    )
    return Verdict(
        "pfc-bound",
        f"PFC-bound: {where} paused {_pct(paused)} of the run (more than "
        f"{_pct(PAUSED_CEILING)}) -- {why}; run `roce-agent tune`",
    )


def _under_loaded(f: RunFacts) -> Verdict | None:
    if f.utilisation >= UTILISATION_FLOOR:
        return None
    return Verdict(
        "under-loaded",
        f"under-loaded: {f.bottleneck} carries {_pct(f.utilisation)} and nothing held the "
        "senders (no CNP cut a rate, no port paused long) -- the flows offered less than the "
        "link carries; more --senders or a longer --duration",
    )


def _unfair(f: RunFacts) -> Verdict | None:
    if f.jain is None or f.jain >= JAIN_FLOOR:
        return None
    low, high = f.incast_goodput_bps
    return Verdict(
        "unfair",
        f"unfair: Jain {f.jain:.2f} among the incast flows over the second half "
        f"({_gbps(low)} to {_gbps(high)}) -- DCQCN has not shared the link yet; run "
        "`roce-agent tune --dcqcn`, or a longer --duration to see whether it converges",
    )


def _queue_above_ecn(f: RunFacts) -> Verdict | None:
    if f.ecn_max_bytes is None or f.queue_p99_bytes <= f.ecn_max_bytes:
        return None
    return Verdict(
        "queue-above-ecn",
        f"queue above ECN: {f.bottleneck}'s p99 queue {kb(f.queue_p99_bytes)} is above the ECN "
        f"maximum {kb(f.ecn_max_bytes)}, so every packet is marked and the delay is the "
        "queue's; run `roce-agent tune` for lower thresholds",
    )


def _healthy(f: RunFacts) -> Verdict:
    jain = "" if f.jain is None else f", Jain {f.jain:.2f}"
    return Verdict(
        "healthy",
        f"healthy: {f.bottleneck or 'no port'} at {_pct(f.utilisation)} with a p99 queue of "
        f"{kb(f.queue_p99_bytes)}, paused at most {_pct(f.most_paused[1])}, no loss{jain}",
    )


RULES: tuple[Callable[[RunFacts], Verdict | None], ...] = (
    _lossless_loss,
    _storm,
    _trimming,
    _retransmitting,
    _victim_starved,
    _under_utilised,
    _pfc_bound,
    _under_loaded,
    _unfair,
    _queue_above_ecn,
)


def judge(facts: RunFacts) -> Verdict:
    """The first verdict of the table (module docstring) that matches the run."""
    for rule in RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return _healthy(facts)

"""Fluid model of DCQCN: N flows, one ECN-marking bottleneck, delayed feedback.

Source: Y. Zhu, M. Ghobadi, V. Misra, J. Padhye, "ECN or Delay: Lessons Learnt from Analysis
of DCQCN and TIMELY", CoNEXT 2016 (doi:10.1145/2999572.2999593), section 3 "DCQCN":
subsection "Model" (Figure 1, equations (3)-(7), Table 1) and subsection "Stability"
(Theorem 1, equations (8)-(14)). The paper's LaTeX source and the authors' MATLAB models are
public (github.com/jitupadhye-zz/rdma, ``conext2016/dcqcn-model.tex``,
``conext2016/dcqcn-stability.tex``, ``fluidmodel/dcqcn/dcqcn2.m``); they were read, not
copied. Equation numbers below are those of the published paper (labels in the LaTeX source
in brackets). The model extends the fluid model of the DCQCN paper itself (Zhu et al., "Congestion
Control for Large-Scale RDMA Deployments", SIGCOMM 2015) to per-flow state.

Equations, for flow i (all delayed terms at t - tau*)::

    (3) [eq:mark]  p(t) = 0                                  q <= Kmin
                        = (q - Kmin) / (Kmax - Kmin) * Pmax  Kmin < q <= Kmax
                        = 1                                  q > Kmax
    (4) [eq:q]     dq/dt = sum_i RC_i(t) - C                 (q >= 0)
    (5) [eq:alpha] dalpha_i/dt = g/tau' * ((1 - (1-p)^(tau' RC_i)) - alpha_i(t))
    (6) [eq:rt]    dRT_i/dt = -(RT_i - RC_i)/tau * a_i
                              + R_AI RC_i (c + e_i)
    (7) [eq:rc]    dRC_i/dt = -RC_i alpha_i/(2 tau) * a_i
                              + (RT_i - RC_i)/2 * RC_i (b + d_i)
    with a_i = 1 - (1-p)^(tau RC_i),  b = p / ((1-p)^-B - 1),  c = b (1-p)^(F B),
         d_i = p / ((1-p)^(-T RC_i) - 1),  e_i = d_i (1-p)^(F T RC_i)

Fixed point (Theorem 1): sum RC* = C (8); RC* = C/N; q* = p*/Pmax (Kmax - Kmin) + Kmin (9);
alpha* = 1 - (1-p*)^(tau' RC*) (10); p* solves a^2 alpha / ((b+d)(c+e)) = tau^2 R_AI RC* (11),
approximately p* ~ cbrt(R_AI N^2 / (tau' C^2) * (1/B + N/(T C))^2) for small p* (14).

Units. The exponents count *packets* (p is a per-packet marking probability, tau RC the
packets a flow sends in tau), so the equations run in packets and packets/s with
``packet_bytes`` per packet, as the authors' later MATLAB model does ("All quantities ... are
specified in units of packet size ... because the probability calculations are per packet",
dcqcn2.m). The result depends on that size; pass the fabric's MTU when comparing with a
packet-level model. Inputs and outputs are in bytes, seconds and bit/s.

Two generalisations, both reducing to the paper at mlx5 defaults: the cut ``alpha/2`` of (7) is
``min(alpha * 1024 / 2^rpg_gd, rpg_min_dec_fac / 100)`` (mlx5 ``rpg_gd`` 11 gives alpha/2; the
50 % cap never binds since alpha <= 1), carried into the fixed point (11) as a factor
2 * cut_factor on the left; and the rates are clipped to [rpg_min_rate, line rate] (the authors'
MATLAB also stops increases at C).

Parameter mapping (mlx5 name as in :data:`agent.intent.model.DCQCN_PARAMETERS` and
:func:`agent.intent.sizing.dcqcn_nic_defaults`; paper Table 1 symbol; the paper's value, from the
SIGCOMM 2015 DCQCN deployment and dcqcn2.m):

============================== ======== ================================== ================
mlx5 name (unit)               symbol   conversion                         paper default
============================== ======== ================================== ================
rpg_time_reset (us)            T        T = value * 1e-6 s                 55 us
rpg_byte_reset (B)             B        B = value / packet_bytes packets   10 MB
rpg_ai_rate (Mb/s)             R_AI     R_AI = value * 1e6 bit/s           40 Mb/s
dce_tcp_g (1/1024)             g        g = (1024 - value) / 1024          1/256 (1020)
dce_tcp_rtt (us)               tau'     alpha update period                55 us
rate_reduce_monitor_period,    tau      max of the two * 1e-6 s: a flow's  50 us
min_time_between_cnps (us)              rate is cut at most once per tau
initial_alpha_value (1/1024)   alpha(0) value / 1024                       1
rpg_gd (log2)                  the 1/2  cut = alpha * 1024 / 2^value       11 (alpha/2)
rpg_min_dec_fac (%)            --       cut <= value / 100                 (none)
rpg_min_rate (Mb/s)            --       RC >= value * 1e6 bit/s            (none)
rpg_hai_rate (Mb/s)            --       not modelled: the fluid model has  --
                                        no hyper increase
cnp_dscp, cnp_802p_prio        --       not modelled (no CNP path)         --
(constant)                     F        fast-recovery steps                5
(ECN/WRED profile)             Kmin,    queue bytes, Pmax a fraction       5 KB, 200 KB,
                               Kmax,                                       1 %
                               Pmax
(fabric)                       C, tau*  bottleneck capacity, feedback      40 Gb/s,
                                        delay                              4-100 us
============================== ======== ================================== ================

``dce_tcp_rtt`` is not in the project's intent; without it tau' is 55 us, the paper's value
and mlx5's fixed alpha timer (``lossless.dcqcn.ALPHA_UPDATE_PERIOD_S``).

Integration: explicit Euler with a fixed step (<= 1 us) by the method of steps. With tau* a
whole number of steps the delayed values q(t - tau*), RC(t - tau*) are exact reads from a ring
buffer, so nothing is interpolated; before t = 0 the history is the initial state. Why not a
library DDE solver: ``ddeint`` (scipy odeint with interpolated history, no state clipping)
cannot express the projection q >= 0 nor the rate clipping the model needs, and ``jitcdde``
needs a C compiler at run time; the fixed-step scheme is a few lines, checked by step halving
in the tests, and its cost is predictable. The step loop is plain Python floats: with one
to a few flow states, numpy's per-call overhead on tiny arrays would dominate. Flows with the
same start rate obey the same equations with the same inputs, so they share one state (exact,
not an approximation): N:1 incast from line rate costs one flow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, NotRequired, TypedDict, Unpack

import numpy as np

FAST_RECOVERY_STEPS: Final = 5  # F, fixed at 5 (paper Table 1)
MAX_STEP_S: Final = 1e-6
DEFAULT_PACKET_BYTES: Final = 1000
# tau' when the intent carries no dce_tcp_rtt: the paper's 55 us alpha update interval.
DEFAULT_ALPHA_PERIOD_US: Final = 55

# mlx5 parameters the fluid model reads, and those it accepts but cannot represent.
MLX5_MODELLED: Final = (
    "rpg_time_reset",
    "rpg_byte_reset",
    "rpg_ai_rate",
    "dce_tcp_g",
    "dce_tcp_rtt",
    "rate_reduce_monitor_period",
    "min_time_between_cnps",
    "initial_alpha_value",
    "rpg_gd",
    "rpg_min_dec_fac",
    "rpg_min_rate",
)
# The clamp flags: the fluid model's target rate follows every cut (the paper's RP, mlx5
# clamp_tgt_rate 1), whatever they say.
MLX5_NOT_MODELLED: Final = (
    "rpg_hai_rate", "cnp_dscp", "cnp_802p_prio", "clamp_tgt_rate", "clamp_tgt_rate_after_time_inc",
)  # fmt: skip


def _need(ok: bool, what: str, expected: str, actual: object) -> None:
    if not ok:
        raise ValueError(f"{what}: Expected: {expected}. Actual: {actual!r}")


@dataclass(frozen=True)
class FluidParams:
    """Model parameters in the paper's symbols (Table 1), in bytes, seconds and bit/s."""

    capacity_bps: float  # C
    kmin_bytes: float  # Kmin
    kmax_bytes: float  # Kmax
    pmax: float  # Pmax, a fraction in (0, 1]
    g: float
    tau_s: float  # CNP generation timer / least time between cuts
    tau_prime_s: float  # alpha update interval
    timer_s: float  # T
    byte_counter_bytes: float  # B
    rai_bps: float  # R_AI
    feedback_delay_s: float  # tau*
    line_rate_bps: float  # the senders' NIC rate: RC never exceeds it
    min_rate_bps: float = 0.0
    initial_alpha: float = 1.0
    cut_factor: float = 0.5  # the 1/2 of alpha/2 in (7); mlx5 1024 / 2^rpg_gd
    max_cut: float = 1.0  # mlx5 rpg_min_dec_fac / 100
    fast_recovery_steps: int = FAST_RECOVERY_STEPS
    packet_bytes: int = DEFAULT_PACKET_BYTES

    def __post_init__(self) -> None:
        positive = {
            "capacity_bps": self.capacity_bps,
            "line_rate_bps": self.line_rate_bps,
            "tau_s": self.tau_s,
            "tau_prime_s": self.tau_prime_s,
            "timer_s": self.timer_s,
            "byte_counter_bytes": self.byte_counter_bytes,
            "rai_bps": self.rai_bps,
            "cut_factor": self.cut_factor,
            "max_cut": self.max_cut,
            "packet_bytes": self.packet_bytes,
        }
        for name, value in positive.items():
            _need(math.isfinite(value) and value > 0, f"fluid model {name}", "> 0", value)
        _need(
            0 <= self.kmin_bytes < self.kmax_bytes,
            "fluid model ECN curve",
            "0 <= kmin_bytes < kmax_bytes",
            (self.kmin_bytes, self.kmax_bytes),
        )
        _need(0 < self.pmax <= 1, "fluid model pmax", "a fraction in (0, 1]", self.pmax)
        _need(0 < self.g <= 1, "fluid model g", "a gain in (0, 1]", self.g)
        _need(self.max_cut <= 1, "fluid model max_cut", "a fraction in (0, 1]", self.max_cut)
        _need(
            0 <= self.initial_alpha <= 1,
            "fluid model initial_alpha",
            "in [0, 1]",
            self.initial_alpha,
        )
        _need(
            self.feedback_delay_s >= 0,
            "fluid model feedback_delay_s",
            ">= 0",
            self.feedback_delay_s,
        )
        _need(
            0 <= self.min_rate_bps < self.line_rate_bps,
            "fluid model min_rate_bps",
            "0 <= min_rate_bps < line_rate_bps",
            self.min_rate_bps,
        )
        _need(
            self.fast_recovery_steps >= 0,
            "fluid model fast_recovery_steps",
            ">= 0",
            self.fast_recovery_steps,
        )


class PaperChanges(TypedDict, total=False):
    """What :func:`paper_params` may change of the paper's values (fields of
    :class:`FluidParams`)."""

    feedback_delay_s: float
    packet_bytes: int
    kmin_bytes: float
    kmax_bytes: float
    pmax: float
    rai_bps: float


def paper_params(capacity_bps: float, **changes: Unpack[PaperChanges]) -> FluidParams:
    """The paper's defaults (Table 1 and section 3 "Model Validation", which takes them from
    the SIGCOMM 2015 deployment; the same values are in the authors' dcqcn2.m): Kmin 5 KB,
    Kmax 200 KB, Pmax 1 %, g 1/256, tau 50 us, tau' 55 us, T 55 us, B 10 MB, R_AI 40 Mb/s,
    F 5, flows at line rate (= C) at start, alpha(0) = 1; a feedback delay of 4 us and
    packets of :data:`DEFAULT_PACKET_BYTES`.  ``changes`` replace any of these."""
    paper = FluidParams(
        capacity_bps=capacity_bps,
        kmin_bytes=5_000,
        kmax_bytes=200_000,
        pmax=0.01,
        g=1 / 256,
        tau_s=50e-6,
        tau_prime_s=55e-6,
        timer_s=55e-6,
        byte_counter_bytes=10e6,
        rai_bps=40e6,
        feedback_delay_s=4e-6,
        line_rate_bps=capacity_bps,
        packet_bytes=DEFAULT_PACKET_BYTES,
    )
    return replace(paper, **changes)


class FluidLink(TypedDict):
    """What :func:`from_mlx5` runs the NIC parameters against: the bottleneck's capacity, its
    ECN curve (min and max in bytes, probability at max in %), the feedback delay, and
    optionally the packet size and the senders' line rate (default: the capacity)."""

    capacity_bps: float
    kmin_bytes: float
    kmax_bytes: float
    pmax_pct: float
    feedback_delay_s: float
    packet_bytes: NotRequired[int]
    line_rate_bps: NotRequired[float | None]


def from_mlx5(nic: Mapping[str, int], **link: Unpack[FluidLink]) -> FluidParams:
    """Parameters from mlx5 DCQCN settings (names and units of
    :func:`agent.intent.sizing.dcqcn_nic_defaults`) and an ECN curve (the module table)."""
    known = set(MLX5_MODELLED) | set(MLX5_NOT_MODELLED)
    unknown = sorted(set(nic) - known)
    _need(not unknown, "mlx5 DCQCN parameters", f"names among {sorted(known)}", unknown)
    needed = [n for n in MLX5_MODELLED if n != "dce_tcp_rtt"]
    missing = [n for n in needed if n not in nic]
    _need(not missing, "mlx5 DCQCN parameters", "every modelled parameter set", missing)
    pmax_pct, capacity_bps = link["pmax_pct"], link["capacity_bps"]
    line_rate_bps = link.get("line_rate_bps")
    _need(0 < pmax_pct <= 100, "ECN max probability", "a percentage in (0, 100]", pmax_pct)
    tau_us = max(nic["rate_reduce_monitor_period"], nic["min_time_between_cnps"])
    _need(
        tau_us > 0,
        "rate_reduce_monitor_period / min_time_between_cnps",
        "at least one > 0 us (the fluid model needs a cut interval)",
        tau_us,
    )
    return FluidParams(
        capacity_bps=capacity_bps,
        kmin_bytes=link["kmin_bytes"],
        kmax_bytes=link["kmax_bytes"],
        pmax=pmax_pct / 100,
        g=(1024 - nic["dce_tcp_g"]) / 1024,
        tau_s=tau_us * 1e-6,
        tau_prime_s=nic.get("dce_tcp_rtt", DEFAULT_ALPHA_PERIOD_US) * 1e-6,
        timer_s=nic["rpg_time_reset"] * 1e-6,
        byte_counter_bytes=nic["rpg_byte_reset"],
        rai_bps=nic["rpg_ai_rate"] * 1e6,
        feedback_delay_s=link["feedback_delay_s"],
        line_rate_bps=capacity_bps if line_rate_bps is None else line_rate_bps,
        min_rate_bps=nic["rpg_min_rate"] * 1e6,
        initial_alpha=nic["initial_alpha_value"] / 1024,
        cut_factor=1024 / 2 ** nic["rpg_gd"],
        max_cut=nic["rpg_min_dec_fac"] / 100,
        packet_bytes=link.get("packet_bytes", DEFAULT_PACKET_BYTES),
    )


def marking_probability(params: FluidParams, queue_bytes: float) -> float:
    """Equation (3): the RED/WRED ECN curve on the instantaneous queue."""
    if queue_bytes <= params.kmin_bytes:
        return 0.0
    if queue_bytes <= params.kmax_bytes:
        span = params.kmax_bytes - params.kmin_bytes
        return (queue_bytes - params.kmin_bytes) / span * params.pmax
    return 1.0


@dataclass(frozen=True)
class FluidSeries:
    """Sampled trajectory: time (s), queue (bytes), marking probability at q(t), and per flow
    (outer index = sample) current rate RC, target rate RT (bit/s) and alpha."""

    t_s: list[float]
    queue_bytes: list[float]
    p: list[float]
    rate_bps: list[list[float]]
    target_bps: list[list[float]]
    alpha: list[list[float]]


@dataclass(frozen=True)
class FluidRun:
    params: FluidParams
    start_rates_bps: list[float]
    horizon_s: float
    step_s: float
    series: FluidSeries
    sent_bytes: float  # integral of sum RC: what the senders put on the wire
    served_bytes: float  # what left the bottleneck: sent - (q_end - q_0)
    min_queue_bytes: float  # over every step, not only the samples

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SteadyState:
    """Summary of the last ``window_s`` of a run."""

    window_s: float
    mean_queue_bytes: float
    queue_amplitude_bytes: float  # (max - min) / 2 over the window
    mean_rate_bps: list[float]  # per flow
    rate_amplitude_bps: list[float]  # per flow, (max - min) / 2
    total_rate_bps: float
    jain: float
    mean_p: float
    mean_alpha: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _delay_steps(params: FluidParams, step_s: float) -> int:
    steps = params.feedback_delay_s / step_s
    nearest = round(steps)
    # The delayed reads are exact only when tau* is a whole number of steps.
    _need(
        abs(steps - nearest) <= 1e-6 * max(1.0, steps),
        "fluid model feedback_delay_s",
        f"a whole multiple of the step {step_s:g} s",
        params.feedback_delay_s,
    )
    return int(nearest)


class FluidRunOptions(TypedDict, total=False):
    """:func:`simulate`'s keywords (:class:`FluidRunSettings` has their defaults): the Euler
    step, the sampling interval and the queue at t = 0."""

    step_s: float
    sample_every_s: float
    initial_queue_bytes: float


@dataclass(frozen=True)
class FluidRunSettings:
    """A fluid run's options, with the defaults of those not given."""

    step_s: float = MAX_STEP_S
    sample_every_s: float = 10e-6
    initial_queue_bytes: float = 0.0


@dataclass(frozen=True)
class _Grid:
    """The integration's time grid: the step, how many, and a sample every ``every``."""

    dt: float
    steps: int
    every: int


def simulate(
    params: FluidParams,
    start_rates_bps: Sequence[float],
    horizon_s: float,
    **options: Unpack[FluidRunOptions],
) -> FluidRun:
    """Integrate equations (3)-(7) from t = 0 to ``horizon_s``; one flow per start rate.

    Flows start with RT = RC = their start rate and alpha = ``params.initial_alpha`` (DCQCN
    flows start at line rate, section 3 "Model Validation"; pass lower rates to test
    convergence). Before t = 0 the delayed terms see the initial state.
    """
    run = FluidRunSettings(**options)
    _check_run(params, start_rates_bps, horizon_s, run)
    step_s = run.step_s
    # Flows that start alike stay alike (same equations, same inputs): one state per group.
    group_of: dict[float, int] = {}
    flow_group = [group_of.setdefault(float(r), len(group_of)) for r in start_rates_bps]
    weight = [0] * len(group_of)
    for grp in flow_group:
        weight[grp] += 1
    bits_per_packet = 8.0 * params.packet_bytes
    q0 = run.initial_queue_bytes / params.packet_bytes
    steps = round(horizon_s / step_s)
    grid = _Grid(step_s, steps, max(1, round(run.sample_every_s / step_s)))
    trace = _integrate(params, [r / bits_per_packet for r in group_of], weight, q0, grid)
    expand = np.asarray(flow_group)
    series = FluidSeries(
        t_s=trace.t_s,
        queue_bytes=(np.asarray(trace.q) * params.packet_bytes).tolist(),
        p=trace.p,
        rate_bps=(np.asarray(trace.rc)[:, expand] * bits_per_packet).tolist(),
        target_bps=(np.asarray(trace.rt)[:, expand] * bits_per_packet).tolist(),
        alpha=np.asarray(trace.alpha)[:, expand].tolist(),
    )
    sent_bytes = trace.sent * params.packet_bytes
    return FluidRun(
        params=params,
        start_rates_bps=[float(r) for r in start_rates_bps],
        horizon_s=steps * step_s,
        step_s=step_s,
        series=series,
        sent_bytes=sent_bytes,
        served_bytes=sent_bytes - (trace.q_end - q0) * params.packet_bytes,
        min_queue_bytes=trace.q_low * params.packet_bytes,
    )


def _check_run(
    params: FluidParams, start_rates_bps: Sequence[float], horizon_s: float, run: FluidRunSettings
) -> None:
    step_s, sample_every_s = run.step_s, run.sample_every_s
    _need(
        len(start_rates_bps) >= 1,
        "fluid model flows",
        "at least one start rate",
        list(start_rates_bps),
    )
    for rate in start_rates_bps:
        _need(
            params.min_rate_bps <= rate <= params.line_rate_bps,
            "fluid model start rate",
            f"in [{params.min_rate_bps:g}, {params.line_rate_bps:g}] bit/s",
            rate,
        )
    _need(0 < step_s <= MAX_STEP_S, "fluid model step_s", f"in (0, {MAX_STEP_S:g}] s", step_s)
    _need(
        math.isfinite(horizon_s) and horizon_s >= step_s,
        "fluid model horizon_s",
        f">= the step {step_s:g} s",
        horizon_s,
    )
    _need(
        sample_every_s >= step_s,
        "fluid model sample_every_s",
        f">= the step {step_s:g} s",
        sample_every_s,
    )
    queue = run.initial_queue_bytes
    _need(queue >= 0, "fluid model initial_queue_bytes", ">= 0", queue)


@dataclass
class _Trace:
    """What :func:`_integrate` hands back, in packets and packets/s: the samples (per group
    for rc, rt and alpha), the packets sent, the queue at the end and its minimum.  ``curve``
    is the ECN curve in packets (kmin, kmax, pmax) that a sample's p is read from."""

    curve: tuple[float, float, float]
    t_s: list[float] = field(default_factory=list)
    q: list[float] = field(default_factory=list)
    p: list[float] = field(default_factory=list)
    rc: list[list[float]] = field(default_factory=list)
    rt: list[list[float]] = field(default_factory=list)
    alpha: list[list[float]] = field(default_factory=list)
    sent: float = 0.0
    q_end: float = 0.0
    q_low: float = 0.0

    def record(
        self, t: float, q: float, rc: list[float], rt: list[float], alpha: list[float]
    ) -> None:
        """A sample at ``t``: the queue, (3) on it, and copies of the groups' state."""
        kmin, kmax, pmax = self.curve
        self.t_s.append(t)
        self.q.append(q)
        self.p.append(0.0 if q <= kmin else (q - kmin) / (kmax - kmin) * pmax if q <= kmax else 1.0)
        self.rc.append(rc[:])
        self.rt.append(rt[:])
        self.alpha.append(alpha[:])


def _integrate(  # noqa: PLR0915 -- the hot Euler loop of (3)-(7): locals, no call per step
    params: FluidParams, rc: list[float], weight: list[int], q: float, grid: _Grid
) -> _Trace:
    """The Euler steps of (3)-(7) for the flow groups (start rates ``rc`` in packets/s, flows
    per group ``weight``) from queue ``q`` (packets), on ``grid``.

    One function on purpose: the loop runs once per step (10^5 steps for 100 ms) and once
    per group inside that, so every constant is a local and no step calls a helper of ours
    but the one that records a sample (every ``grid.every`` steps); a call per step or per
    group would add to every run's time. It also keeps the code next to the equations it
    transcribes, in the docstring's notation.
    """
    dt, steps, every = grid.dt, grid.steps, grid.every
    # Everything below in packets and packets/s (module docstring, "Units").
    bits_per_packet = 8.0 * params.packet_bytes
    cap = params.capacity_bps / bits_per_packet
    line = params.line_rate_bps / bits_per_packet
    floor = params.min_rate_bps / bits_per_packet
    rai = params.rai_bps / bits_per_packet
    byte_counter = params.byte_counter_bytes / params.packet_bytes
    kmin = params.kmin_bytes / params.packet_bytes
    kmax = params.kmax_bytes / params.packet_bytes
    tau, tau_p, timer = params.tau_s, params.tau_prime_s, params.timer_s
    big_f = params.fast_recovery_steps
    gain = params.g / tau_p
    pmax, cut_factor, max_cut = params.pmax, params.cut_factor, params.max_cut
    n_groups = len(weight)
    rt = rc[:]
    alpha = [params.initial_alpha] * n_groups

    lag = _delay_steps(params, dt)
    q_hist = [q] * max(lag, 1)
    rc_hist = [rc[:] for _ in range(max(lag, 1))]

    out = _Trace((kmin, kmax, pmax), q_low=q)
    sent = 0.0
    q_low = q
    span = kmax - kmin
    expm1, exp = math.expm1, math.exp

    for k in range(steps):
        if k % every == 0:
            out.record(k * dt, q, rc, rt, alpha)
        if lag:
            slot = k % lag
            q_d, rc_d = q_hist[slot], rc_hist[slot]
            q_hist[slot], rc_hist[slot] = q, rc[:]
        else:
            q_d, rc_d = q, rc[:]  # a copy: rc is updated in place below
        # (3), on the delayed queue
        p = 0.0 if q_d <= kmin else (q_d - kmin) / span * pmax if q_d <= kmax else 1.0
        if 0.0 < p < 1.0:
            ln = math.log1p(-p)  # (1-p)^x = exp(x ln)
            # An overflowing (1-p)^-B means no increase event completes: b -> 0.
            b = p / expm1(-byte_counter * ln) if -byte_counter * ln < 700 else 0.0
            c = b * exp(big_f * byte_counter * ln)
        elif p == 0.0:
            ln, b, c = 0.0, 1.0 / byte_counter, 1.0 / byte_counter  # limits as p -> 0
        else:
            ln, b, c = 0.0, 0.0, 0.0  # p = 1: every packet marked, no increase completes
        total = 0.0
        for i in range(n_groups):
            r, r_d, target, al = rc[i], rc_d[i], rt[i], alpha[i]
            total += weight[i] * r
            if 0.0 < p < 1.0:
                a = -expm1(tau * r_d * ln)
                alpha_target = -expm1(tau_p * r_d * ln)
                x = -timer * r_d * ln
                d = p / expm1(x) if x < 700 else 0.0
                e = d * exp(big_f * timer * r_d * ln)
            elif p == 0.0:
                # Limits as p -> 0: no cuts, an increase every B and every T RC packets.
                a = alpha_target = 0.0
                d = e = 1.0 / (timer * r_d)
            else:
                a = alpha_target = 1.0
                d = e = 0.0
            cut = min(cut_factor * al, max_cut)
            gap = target - r
            d_rc = -r * cut * a / tau + gap / 2 * r_d * (b + d)  # (7)
            d_rt = -gap * a / tau + rai * r_d * (c + e)  # (6)
            d_alpha = gain * (alpha_target - al)  # (5)
            rc[i] = min(max(r + d_rc * dt, floor), line)
            rt[i] = min(max(target + d_rt * dt, floor), line)
            alpha[i] = min(max(al + d_alpha * dt, 0.0), 1.0)
        sent += total * dt
        q = max(q + (total - cap) * dt, 0.0)  # (4), the queue cannot go below empty
        q_low = min(q_low, q)

    if steps % every == 0:
        out.record(steps * dt, q, rc, rt, alpha)
    out.sent, out.q_end, out.q_low = sent, q, q_low
    return out


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index, (sum x)^2 / (n sum x^2): 1 when all equal, 1/n at worst."""
    arr = np.asarray(values, dtype=np.float64)
    square_sum = float((arr**2).sum())
    return float(arr.sum() ** 2 / (len(arr) * square_sum)) if square_sum > 0 else 1.0


def steady_state(run: FluidRun, window_s: float) -> SteadyState:
    """Means and oscillation amplitudes over the last ``window_s`` of ``run``."""
    _need(
        0 < window_s <= run.horizon_s,
        "steady-state window",
        f"in (0, {run.horizon_s:g}] s",
        window_s,
    )
    t = np.asarray(run.series.t_s)
    keep = t >= t[-1] - window_s - 1e-12
    q = np.asarray(run.series.queue_bytes)[keep]
    rates = np.asarray(run.series.rate_bps)[keep]
    per_flow = rates.mean(axis=0)
    return SteadyState(
        window_s=window_s,
        mean_queue_bytes=float(q.mean()),
        queue_amplitude_bytes=float(q.max() - q.min()) / 2,
        mean_rate_bps=per_flow.tolist(),
        rate_amplitude_bps=((rates.max(axis=0) - rates.min(axis=0)) / 2).tolist(),
        total_rate_bps=float(rates.sum(axis=1).mean()),
        jain=jain(per_flow.tolist()),
        mean_p=float(np.asarray(run.series.p)[keep].mean()),
        mean_alpha=float(np.asarray(run.series.alpha)[keep].mean()),
    )


@dataclass(frozen=True)
class FixedPoint:
    """Theorem 1: the unique fixed point for N identical-parameter flows."""

    n_flows: int
    p: float  # p*, the marking probability that balances cuts and increases
    queue_bytes: float  # q* from (9); Kmax when p* > Pmax (see ``beyond_kmax``)
    rate_bps: float  # RC* = C / N
    target_bps: float  # RT*
    alpha: float  # alpha* (10)
    beyond_kmax: bool  # p* > Pmax: the curve cannot supply p* below Kmax

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _terms(params: FluidParams, p: float, rate: float) -> tuple[float, ...]:
    """a, b, c, d, e of equation (12) in packet units, at marking probability 0 < p < 1."""
    ln = math.log1p(-p)
    byte_counter = params.byte_counter_bytes / params.packet_bytes
    big_f = params.fast_recovery_steps
    a = -math.expm1(params.tau_s * rate * ln)
    b = p / math.expm1(-byte_counter * ln) if -byte_counter * ln < 700 else 0.0
    c = b * math.exp(big_f * byte_counter * ln)
    tr = params.timer_s * rate
    d = p / math.expm1(-tr * ln) if -tr * ln < 700 else 0.0
    e = d * math.exp(big_f * tr * ln)
    return a, b, c, d, e


def fixed_point(params: FluidParams, n_flows: int) -> FixedPoint:
    """Solve equation (11) for p* by bisection on log p (its left side is monotonic in p,
    proof of Theorem 1), with the cut factor generalised as in the module docstring."""
    _need(n_flows >= 1, "fixed point n_flows", ">= 1", n_flows)
    bits_per_packet = 8.0 * params.packet_bytes
    rate = params.capacity_bps / n_flows / bits_per_packet
    rai = params.rai_bps / bits_per_packet

    def alpha_of(p: float) -> float:
        return -math.expm1(params.tau_prime_s * rate * math.log1p(-p))  # (10)

    def excess(p: float) -> float:
        a, b, c, d, e = _terms(params, p, rate)
        cut = min(params.cut_factor * alpha_of(p), params.max_cut)
        increases = (b + d) * (c + e)
        if increases == 0.0:  # near p = 1 no increase event completes: cuts win
            return math.inf
        return a * a * 2 * cut / increases - params.tau_s**2 * rai * rate  # (11)

    lo, hi = math.log(1e-15), math.log1p(-1e-12)
    _need(
        excess(math.exp(lo)) < 0 < excess(math.exp(hi)),
        "fixed point",
        "a sign change of equation (11) on (0, 1)",
        (excess(math.exp(lo)), excess(math.exp(hi))),
    )
    for _ in range(200):
        mid = (lo + hi) / 2
        if excess(math.exp(mid)) < 0:
            lo = mid
        else:
            hi = mid
    p = math.exp((lo + hi) / 2)
    a, b, _c, d, _e = _terms(params, p, rate)
    alpha = alpha_of(p)
    cut = min(params.cut_factor * alpha, params.max_cut)
    target = rate + 2 * cut * a / (params.tau_s * (b + d))  # dRC/dt = 0 in (7)
    beyond = p > params.pmax
    span = params.kmax_bytes - params.kmin_bytes
    queue = params.kmax_bytes if beyond else p / params.pmax * span + params.kmin_bytes  # (9)
    return FixedPoint(
        n_flows=n_flows,
        p=p,
        queue_bytes=queue,
        rate_bps=rate * bits_per_packet,
        target_bps=target * bits_per_packet,
        alpha=alpha,
        beyond_kmax=beyond,
    )


def fixed_point_p_approx(params: FluidParams, n_flows: int) -> float:
    """Equation (14), the small-p Taylor approximation of p* (paper's cut factor 1/2)."""
    bits_per_packet = 8.0 * params.packet_bytes
    cap = params.capacity_bps / bits_per_packet
    rai = params.rai_bps / bits_per_packet
    byte_counter = params.byte_counter_bytes / params.packet_bytes
    inner = 1 / byte_counter + n_flows / (params.timer_s * cap)
    return float(np.cbrt(rai * n_flows**2 / (params.tau_prime_s * cap**2) * inner**2))

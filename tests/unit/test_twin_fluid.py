"""agent.twin.fluid: the DCQCN fluid model the fabric twin is cross-checked against.

Source: Zhu, Ghobadi, Misra, Padhye, "ECN or Delay: Lessons Learnt from Analysis of DCQCN and
TIMELY", CoNEXT 2016, section 3: Figure 1 / equations (3)-(7) (the model), Theorem 1 /
equations (8)-(14) (the fixed point), Theorem 2 (convergence to the fair share), Figure 3
(phase margin vs. feedback delay and flows; 3(b) R_AI = 10 Mb/s), Figure 4 (fluid runs at
tau* = 4 and 85 us with 2 and 10 flows). Parameters: the paper's defaults (Table 1 and
"Model Validation": Kmin 5 KB, Kmax 200 KB, Pmax 1 %, g 1/256, tau 50 us, tau' 55 us,
T 55 us, B 10 MB, R_AI 40 Mb/s, F 5, flows start at line rate), 1000-byte packets, tau* 4 us.

Reference table for the twin (N:1 incast from line rate, paper defaults, tau* 4 us, step
1 us, 100 ms simulated, means over the last 20 ms; fixed point = Theorem 1 solved exactly):

========  ==  =======  ===========  ========  ===========  ========  ========  =======
C (Gb/s)  N   q* (KB)  mean q (KB)  q ampl.   rate/flow    Jain      p mean    alpha
========  ==  =======  ===========  ========  ===========  ========  ========  =======
40        2   20.15    20.13        0.02 KB   20.000 Gb/s  1.000000  0.00078   0.102
40        8   93.77    93.70        0.06 KB   5.000 Gb/s   1.000000  0.00455   0.146
40        16  200 (*)  186.49       11.37 KB  2.500 Gb/s   1.000000  0.037 (*) 0.173
100       2   9.65     9.65         0.01 KB   50.000 Gb/s  1.000000  0.00024   0.079
100       8   32.68    32.66        0.02 KB   12.500 Gb/s  1.000000  0.00142   0.115
100       16  71.92    71.87        0.05 KB   6.250 Gb/s   1.000000  0.00343   0.138
========  ==  =======  ===========  ========  ===========  ========  ========  =======

Cost (1 us step, 100 ms simulated, this 2-core machine, shared): 0.35-0.7 s per row.

(*) 40 Gb/s 16:1: p* = 1.09 % > Pmax = 1 %, so the curve cannot supply p* below Kmax; the queue
cycles around Kmax (where p jumps to 1), the mean p is the time average of that jump. This is
the paper's "q* depends on N" (after equation (14)) reaching the end of the ramp.

Transients are not references: the fluid model has no PFC and no buffer limit (the paper
assumes DCQCN acts before PFC), so the start of an incast queues megabytes here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import cache

import pytest

from agent.intent.sizing import dcqcn_nic_defaults
from agent.twin.fluid import (
    FluidParams,
    FluidRun,
    fixed_point,
    fixed_point_p_approx,
    from_mlx5,
    jain,
    marking_probability,
    paper_params,
    simulate,
    steady_state,
)

G40, G100 = 40e9, 100e9
HORIZON_S = 0.1  # alpha relaxes with time constant tau'/g = 14 ms: 100 ms is ~7 of them
WINDOW_S = 0.02


@cache
def _incast(
    capacity: float, flows: int, delay_us: int = 4, rai: float = 40e6, horizon: float = HORIZON_S
) -> FluidRun:
    params = paper_params(capacity, feedback_delay_s=delay_us * 1e-6, rai_bps=rai)
    return simulate(params, [capacity] * flows, horizon)


# Equation (3): (queue bytes, p) on the paper's curve Kmin 5 KB, Kmax 200 KB, Pmax 1 %.
MARKS = [
    (0, 0.0),
    (5_000, 0.0),  # "q <= Kmin": 0
    (102_500, 0.005),  # halfway up the ramp
    (200_000, 0.01),  # "Kmin < q <= Kmax": Pmax at Kmax
    (200_001, 1.0),  # "q > Kmax": 1
]


@pytest.mark.parametrize(("queue", "expected"), MARKS)
def test_marking_curve_is_equation_3(queue: float, expected: float) -> None:
    assert marking_probability(paper_params(G40), queue) == pytest.approx(expected)


def _abcde(p: float, rate: float, params: FluidParams) -> tuple[float, float, float, float, float]:
    """Equation (12) written out with plain powers, independently of the module's expm1 form."""
    byte_counter = params.byte_counter_bytes / params.packet_bytes
    tr = params.timer_s * rate
    f = params.fast_recovery_steps
    a = 1 - (1 - p) ** (params.tau_s * rate)
    b = p / ((1 - p) ** -byte_counter - 1)
    c = (1 - p) ** (f * byte_counter) * p / ((1 - p) ** -byte_counter - 1)
    d = p / ((1 - p) ** -tr - 1)
    e = (1 - p) ** (f * tr) * p / ((1 - p) ** -tr - 1)
    return a, b, c, d, e


FIXED_POINTS = [(G40, 2), (G40, 8), (G100, 2), (G100, 8), (G100, 16)]


@pytest.mark.parametrize(("capacity", "flows"), FIXED_POINTS)
def test_fixed_point_satisfies_theorem_1(capacity: float, flows: int) -> None:
    """Theorem 1: (8) RC* = C/N, (9) q* on the ramp, (10) alpha*, (11) balance of cuts and
    increases; RT* from dRT/dt = 0 (6) equals RT* from dRC/dt = 0 (7)."""
    params = paper_params(capacity)
    point = fixed_point(params, flows)
    pkt_bits = 8 * params.packet_bytes
    rate = capacity / flows / pkt_bits
    rai = params.rai_bps / pkt_bits
    a, b, c, d, e = _abcde(point.p, rate, params)
    alpha = 1 - (1 - point.p) ** (params.tau_prime_s * rate)
    assert point.rate_bps == pytest.approx(capacity / flows)
    assert point.alpha == pytest.approx(alpha, rel=1e-9)
    assert a * a * alpha / ((b + d) * (c + e)) == pytest.approx(
        params.tau_s**2 * rai * rate, rel=1e-6
    )
    target_from_6 = rate * (1 + (c + e) * params.tau_s * rai / a)
    target_from_7 = rate + a * alpha / ((b + d) * params.tau_s)
    assert point.target_bps / pkt_bits == pytest.approx(target_from_6, rel=1e-6)
    assert point.target_bps / pkt_bits == pytest.approx(target_from_7, rel=1e-6)
    span = params.kmax_bytes - params.kmin_bytes
    assert point.queue_bytes == pytest.approx(point.p / params.pmax * span + params.kmin_bytes)
    assert not point.beyond_kmax


# Equation (14) is the small-p Taylor form of (11): its ratio to the exact p* tends to 1 as
# p* -> 0 (here by lowering R_AI; p* ~ R_AI^(1/3)). Measured ratios (40G 2:1 / 100G 16:1):
# R_AI 40 Mb/s 1.19 / 1.26, 400 kb/s 1.05 / 1.06, 4 kb/s 1.014 / 1.016.
APPROX = [(40e6, 0.30), (4e6, 0.15), (400e3, 0.07), (40e3, 0.035), (4e3, 0.02)]


@pytest.mark.parametrize(("capacity", "flows"), [(G40, 2), (G100, 16)])
def test_fixed_point_tends_to_equation_14_as_p_vanishes(capacity: float, flows: int) -> None:
    errors = []
    for rai, tolerance in APPROX:
        params = paper_params(capacity, rai_bps=rai)
        ratio = fixed_point_p_approx(params, flows) / fixed_point(params, flows).p
        assert 1 <= ratio <= 1 + tolerance, (rai, ratio)
        errors.append(ratio - 1)
    assert errors == sorted(errors, reverse=True)


# (b) N:1 incast, paper defaults: (C, N, reference mean queue KB, Kmin < q < Kmax expected).
INCAST = [
    (G40, 2, 20.13, True),
    (G40, 8, 93.70, True),
    (G40, 16, 186.49, False),  # p* > Pmax: cycles around Kmax (module docstring)
    (G100, 2, 9.65, True),
    (G100, 8, 32.66, True),
    (G100, 16, 71.87, True),
]


@pytest.mark.parametrize(("capacity", "flows", "reference_kb", "on_ramp"), INCAST)
def test_incast_steady_state(
    capacity: float, flows: int, reference_kb: float, on_ramp: bool
) -> None:
    params = paper_params(capacity)
    summary = steady_state(_incast(capacity, flows), WINDOW_S)
    point = fixed_point(params, flows)
    assert summary.total_rate_bps == pytest.approx(capacity, rel=1e-3)
    for rate in summary.mean_rate_bps:
        assert rate == pytest.approx(capacity / flows, rel=1e-3)
    assert summary.jain > 0.9999
    assert summary.mean_queue_bytes / 1e3 == pytest.approx(reference_kb, rel=0.01)
    assert point.beyond_kmax is not on_ramp
    if on_ramp:
        assert params.kmin_bytes < summary.mean_queue_bytes < params.kmax_bytes
        # The integrated DDE sits on the independently solved fixed point.
        assert summary.mean_queue_bytes == pytest.approx(point.queue_bytes, rel=0.01)
        assert summary.mean_p == pytest.approx(point.p, rel=0.01)
        assert summary.mean_alpha == pytest.approx(point.alpha, rel=0.02)
        assert summary.queue_amplitude_bytes < 0.01 * params.kmax_bytes
    else:
        assert 0.85 * params.kmax_bytes < summary.mean_queue_bytes < 1.05 * params.kmax_bytes
        assert summary.queue_amplitude_bytes > 0.02 * params.kmax_bytes


@pytest.mark.parametrize("capacity", [G40, G100])
def test_queue_grows_with_flows(capacity: float) -> None:
    """Section 3 "Stability", after equation (14): q* "depends on the number of flows N"."""
    queues = [steady_state(_incast(capacity, n), WINDOW_S).mean_queue_bytes for n in (2, 8, 16)]
    assert queues == sorted(queues)
    assert queues[0] < queues[-1] / 3


# (c) Stability, Figure 4: with tau* = 4 us "DCQCN is stable ... regardless of the number of
# flows"; with tau* = 85 us "the protocol is unstable for 10 flows. It is, however, stable for
# 2"; Figure 3(b): R_AI = 10 Mb/s stabilises it. Measured queue amplitude over the last 20 ms:
# 4 us: 2 flows 0.0 KB, 10 flows 0.1 KB; 85 us: 2 flows 1.5 KB, 10 flows 117 KB (utilisation
# 95 %); 85 us with R_AI 10 Mb/s: 1.0 KB. (The paper's "stable for 64 flows" is not
# reproduced with per-packet marking: for 64 flows p* > Pmax, so the queue cycles at Kmax.)
STABILITY = [
    ("Figure 4, 4 us, 2 flows", 2, 4, 40e6, True),
    ("Figure 4, 4 us, 10 flows", 10, 4, 40e6, True),
    ("Figure 4, 85 us, 2 flows", 2, 85, 40e6, True),
    ("Figure 4, 85 us, 10 flows", 10, 85, 40e6, False),
    ("Figure 3(b), 85 us, 10 flows, R_AI 10 Mb/s", 10, 85, 10e6, True),
]


@pytest.mark.parametrize(("case", "flows", "delay_us", "rai", "stable"), STABILITY)
def test_stability_against_feedback_delay(
    case: str, flows: int, delay_us: int, rai: float, stable: bool
) -> None:
    summary = steady_state(_incast(G40, flows, delay_us, rai), WINDOW_S)
    swing = summary.queue_amplitude_bytes
    if stable:
        assert swing < 5_000, case
        assert summary.total_rate_bps == pytest.approx(G40, rel=2e-3), case
    else:
        assert swing > 50_000, case
        assert summary.total_rate_bps < 0.99 * G40, case


# Theorem 2 (section 3 "Convergence"): rates of any two flows converge exponentially, to the
# fair share C/N of Theorem 1. Measured Jain over the last 20 ms: 0.999998 and 0.9999994.
HETEROGENEOUS = [
    (G40, [40e9, 4e9]),
    (G100, [100e9, 50e9, 20e9, 5e9]),
]


@pytest.mark.parametrize(("capacity", "starts"), HETEROGENEOUS)
def test_unequal_starts_converge_to_fair_share(capacity: float, starts: list[float]) -> None:
    run = simulate(paper_params(capacity), starts, HORIZON_S)
    summary = steady_state(run, WINDOW_S)
    assert jain(starts) < 0.9
    assert summary.jain > 0.99999
    for rate in summary.mean_rate_bps:
        assert rate == pytest.approx(capacity / len(starts), rel=0.005)
    point = fixed_point(paper_params(capacity), len(starts))
    assert summary.mean_queue_bytes == pytest.approx(point.queue_bytes, rel=0.01)


def _all_runs() -> list[FluidRun]:
    runs = [_incast(c, n) for c, n, _, _ in INCAST]
    runs += [_incast(G40, n, d, r) for _, n, d, r, _ in STABILITY]
    return runs


@pytest.mark.parametrize("index", range(len(INCAST) + len(STABILITY)))
def test_conservation(index: int) -> None:
    """(d) No negative queue at any step; what leaves the bottleneck never exceeds C x t;
    rates stay within [min rate, line rate], alpha and p within [0, 1]."""
    run = _all_runs()[index]
    params = run.params
    assert run.min_queue_bytes >= 0
    assert 0 <= run.served_bytes <= params.capacity_bps / 8 * run.horizon_s * (1 + 1e-12)
    assert run.sent_bytes >= run.served_bytes
    series = run.series
    assert min(series.queue_bytes) >= 0
    flat = [r for sample in series.rate_bps for r in sample]
    assert params.min_rate_bps <= min(flat) and max(flat) <= params.line_rate_bps
    flat_t = [r for sample in series.target_bps for r in sample]
    assert params.min_rate_bps <= min(flat_t) and max(flat_t) <= params.line_rate_bps
    flat_a = [a for sample in series.alpha for a in sample]
    assert min(flat_a) >= 0 and max(flat_a) <= 1
    assert min(series.p) >= 0 and max(series.p) <= 1


def test_step_halving_converges() -> None:
    """The Euler scheme converges: against a 1/8 us reference, the queue and rate errors
    shrink as the step halves and are under 5 % of the peak queue / 1 % of C at 1 us.
    Measured (40G 2:1, 10 ms): max queue error 9.4 / 4.8 / 1.7 KB at 1 / 0.5 / 0.25 us."""
    params = paper_params(G40)
    runs = {
        dt: simulate(params, [G40] * 2, 0.01, step_s=dt) for dt in (1e-6, 5e-7, 2.5e-7, 1.25e-7)
    }
    reference = runs.pop(1.25e-7).series
    peak = max(reference.queue_bytes)
    q_errors, r_errors = [], []
    for run in runs.values():
        q_errors.append(
            max(
                abs(x - y)
                for x, y in zip(run.series.queue_bytes, reference.queue_bytes, strict=True)
            )
        )
        r_errors.append(
            max(
                abs(x - y)
                for a, b in zip(run.series.rate_bps, reference.rate_bps, strict=True)
                for x, y in zip(a, b, strict=True)
            )
        )
    assert q_errors == sorted(q_errors, reverse=True)
    assert r_errors == sorted(r_errors, reverse=True)
    assert q_errors[0] < 0.05 * peak
    assert r_errors[0] < 0.01 * G40


def test_mlx5_names_map_to_paper_symbols() -> None:
    """Module table: mlx5 defaults (agent.intent.sizing) in the paper's symbols."""
    params = from_mlx5(
        dcqcn_nic_defaults(),
        capacity_bps=G100,
        kmin_bytes=150_000,
        kmax_bytes=1_500_000,
        pmax_pct=100,
        feedback_delay_s=4e-6,
    )
    assert params.timer_s == pytest.approx(300e-6)  # rpg_time_reset 300 us -> T
    assert params.byte_counter_bytes == 32767  # rpg_byte_reset -> B
    assert params.rai_bps == 5e6  # rpg_ai_rate 5 Mb/s -> R_AI
    assert params.g == pytest.approx(5 / 1024)  # dce_tcp_g 1019 -> g = (1024 - 1019) / 1024
    assert params.tau_s == pytest.approx(4e-6)  # max(rate_reduce_monitor_period, CNP gap)
    assert params.tau_prime_s == pytest.approx(55e-6)  # no dce_tcp_rtt: the paper's tau'
    assert params.cut_factor == 0.5  # rpg_gd 11: alpha / 2
    assert params.max_cut == 0.5  # rpg_min_dec_fac 50 %
    assert params.min_rate_bps == 1e6  # rpg_min_rate 1 Mb/s
    assert params.initial_alpha == pytest.approx(1023 / 1024)
    assert params.pmax == 1.0
    assert params.line_rate_bps == G100
    with_rtt = from_mlx5(
        {**dcqcn_nic_defaults(), "dce_tcp_rtt": 10, "rpg_gd": 10},
        capacity_bps=G100,
        kmin_bytes=150_000,
        kmax_bytes=1_500_000,
        pmax_pct=100,
        feedback_delay_s=0,
    )
    assert with_rtt.tau_prime_s == pytest.approx(10e-6)
    assert with_rtt.cut_factor == 1.0  # rpg_gd 10: the cut is alpha, capped at 50 %


def _mlx5(**changes: int) -> dict[str, int]:
    return {**dcqcn_nic_defaults(), **changes}


BAD = [
    (
        "unknown mlx5 name",
        lambda: from_mlx5(
            _mlx5(rpg_bogus=1),
            capacity_bps=G40,
            kmin_bytes=1,
            kmax_bytes=2,
            pmax_pct=1,
            feedback_delay_s=0,
        ),
        "rpg_bogus",
    ),
    (
        "missing mlx5 name",
        lambda: from_mlx5(
            {"rpg_ai_rate": 5},
            capacity_bps=G40,
            kmin_bytes=1,
            kmax_bytes=2,
            pmax_pct=1,
            feedback_delay_s=0,
        ),
        "rpg_time_reset",
    ),
    (
        "pmax percent over 100",
        lambda: from_mlx5(
            _mlx5(), capacity_bps=G40, kmin_bytes=1, kmax_bytes=2, pmax_pct=150, feedback_delay_s=0
        ),
        "ECN max probability",
    ),
    ("kmax below kmin", lambda: paper_params(G40, kmin_bytes=10, kmax_bytes=5), "ECN curve"),
    ("pmax zero", lambda: paper_params(G40, pmax=0), "pmax"),
    ("capacity zero", lambda: paper_params(0), "capacity_bps"),
    ("negative delay", lambda: paper_params(G40, feedback_delay_s=-1e-6), "feedback_delay_s"),
    ("no flows", lambda: simulate(paper_params(G40), [], 0.001), "flows"),
    ("start above line rate", lambda: simulate(paper_params(G40), [50e9], 0.001), "start rate"),
    ("step over 1 us", lambda: simulate(paper_params(G40), [G40], 0.001, step_s=2e-6), "step_s"),
    (
        "delay not a whole number of steps",
        lambda: simulate(paper_params(G40, feedback_delay_s=2.5e-6), [G40], 0.001),
        "feedback_delay_s",
    ),
    ("horizon shorter than a step", lambda: simulate(paper_params(G40), [G40], 0.0), "horizon"),
    (
        "window longer than the run",
        lambda: steady_state(simulate(paper_params(G40), [G40], 1e-4), 1.0),
        "window",
    ),
    ("no flows at the fixed point", lambda: fixed_point(paper_params(G40), 0), "n_flows"),
]


@pytest.mark.parametrize(("case", "call", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_field(case: str, call: Callable[[], object], field: str) -> None:
    with pytest.raises(ValueError, match=r"Expected: .*Actual: ") as caught:
        call()
    assert field in str(caught.value), case


def test_results_are_json_ready() -> None:
    run = simulate(paper_params(G40), [G40, 20e9], 2e-4, sample_every_s=5e-5)
    document = json.loads(json.dumps(run.to_json()))
    assert document["series"]["t_s"] == pytest.approx([0, 5e-5, 1e-4, 1.5e-4, 2e-4])
    assert len(document["series"]["rate_bps"][0]) == 2
    summary = json.loads(json.dumps(steady_state(run, 1e-4).to_json()))
    assert len(summary["mean_rate_bps"]) == 2
    point = json.loads(json.dumps(fixed_point(paper_params(G40), 2).to_json()))
    assert math.isclose(point["rate_bps"], 20e9)

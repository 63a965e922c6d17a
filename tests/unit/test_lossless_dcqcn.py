"""lossless.dcqcn: the DCQCN reaction point (rate) and notification point (CNP pacing).

Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015,
section 3.1 (RP: on a CNP ``RT <- RC``, ``RC <- RC (1 - alpha/2)``, ``alpha <- (1 - g) alpha + g``;
without CNPs alpha decays by ``(1 - g)`` every K = 55 us; the rate recovers on timer and byte
counter events: fast recovery ``RC <- (RT + RC) / 2`` for the first F = 5 steps, then
additive increase ``RT <- RT + R_AI``, hyper increase ``RT <- RT + R_HAI`` once both counters
are past F; NP: a CNP for a marked packet if none was sent for the flow in the last N us).
Parameter names, units and defaults are mlx5's (NVIDIA "DCQCN CC Parameters",
https://networking-docs.nvidia.com/doca/archive/3-4-0/dcqcn-cc-parameters): ``dce_tcp_g`` =
1024 - 1024 g, ``initial_alpha_value`` in 1/1024, ``rpg_gd`` the alpha-to-cut shift (11: cut =
alpha/2), ``rpg_min_dec_fac`` the largest cut in %, ``rpg_min_rate`` the floor in Mb/s,
``rate_reduce_monitor_period`` the least time between cuts in us, ``rpg_time_reset`` /
``rpg_byte_reset`` the recovery timer (us) and byte counter, ``rpg_ai_rate`` /
``rpg_hai_rate`` in Mb/s, ``min_time_between_cnps`` in us.  The target clamp: the paper sets
``RT <- RC`` on every CNP, which mlx5 does with ``clamp_tgt_rate`` 1; its default (0, with
``clamp_tgt_rate_after_time_inc`` 1) sets it only when the rate rose since the last cut (byte
counter, or timer with the second flag), so a burst of cuts keeps the target of before it.
"""

from __future__ import annotations

import pytest

from lossless.dcqcn import DcqcnReactionPoint, NotificationPoint

# mlx5 defaults (NVIDIA "DCQCN CC Parameters", Default column).
MLX5 = {
    "clamp_tgt_rate": 0,
    "clamp_tgt_rate_after_time_inc": 1,
    "rpg_time_reset": 300,
    "rpg_byte_reset": 32767,
    "rpg_ai_rate": 5,
    "rpg_hai_rate": 50,
    "rpg_gd": 11,
    "rpg_min_dec_fac": 50,
    "rpg_min_rate": 1,
    "dce_tcp_g": 1019,
    "rate_reduce_monitor_period": 4,
    "initial_alpha_value": 1023,
}
G = (1024 - 1019) / 1024  # the paper's g from dce_tcp_g
ALPHA0 = 1023 / 1024
ALPHA1 = (1 - G) * ALPHA0 + G  # alpha after the first CNP
K = 55e-6  # the paper's alpha timer

Event = tuple[str, float, int]  # ("cnp" | "sent" | "idle", time s, bytes)


def _point(line_bps: float, overrides: dict[str, int], events: list[Event]) -> DcqcnReactionPoint:
    point = DcqcnReactionPoint(line_bps, {**MLX5, **overrides})
    for kind, at, nbytes in events:
        if kind == "cnp":
            point.on_cnp(at)
        elif kind == "idle":  # time passes, nothing sent: only the timers run
            point.advance(at)
        else:
            point.on_sent(at, nbytes)
    return point


# Rate cuts at 100 Mb/s: (overrides, CNP times, cuts, current / line, target / line).
C1 = 1 - ALPHA0 / 2
CUTS = [
    ("first CNP: RT <- RC, RC <- RC (1 - alpha/2)", {}, [0.0], 1, C1, 1.0),
    ("rpg_gd 10 doubles the cut, rpg_min_dec_fac 50 bounds it", {"rpg_gd": 10}, [0.0], 1, 0.5, 1.0),
    ("rpg_min_dec_fac 10: at most 10 % per cut", {"rpg_min_dec_fac": 10}, [0.0], 1, 0.9, 1.0),
    ("CNPs within rate_reduce_monitor_period: one cut", {}, [0.0, 2e-6, 3.9e-6], 1, C1, 1.0),
    (
        "after the period: a second cut with the raised alpha; the paper's clamp: RT <- RC",
        {"clamp_tgt_rate": 1},
        [0.0, 10e-6],
        2,
        C1 * (1 - ALPHA1 / 2),
        C1,
    ),
    (
        "mlx5 default: no increase between the cuts, the target stays",
        {},
        [0.0, 10e-6],
        2,
        C1 * (1 - ALPHA1 / 2),
        1.0,
    ),
    ("rpg_min_rate is the floor", {"rpg_min_rate": 60}, [0.0], 1, 0.6, 1.0),
]


@pytest.mark.parametrize(
    ("overrides", "cnps", "cuts", "current", "target"),
    [row[1:] for row in CUTS],
    ids=[row[0] for row in CUTS],
)
def test_rate_cuts(
    overrides: dict[str, int], cnps: list[float], cuts: int, current: float, target: float
) -> None:
    line = 100e6
    point = _point(line, overrides, [("cnp", t, 0) for t in cnps])
    assert point.cuts == cuts
    assert point.current_bps == pytest.approx(line * current, rel=1e-12)
    assert point.target_bps == pytest.approx(line * target, rel=1e-12)


# Alpha: (overrides, events, expected alpha).
HALF = 512 / 1024
A_HALF = (1 - G) * HALF + G
ALPHA = [
    (
        "first CNP: initial_alpha_value, raised by g",
        {"initial_alpha_value": 512},
        [("cnp", 0.0, 0)],
        A_HALF,
    ),
    (
        "time before the first CNP does not decay alpha",
        {"initial_alpha_value": 512},
        [("sent", 0.0, 0), ("sent", 1.0, 0), ("cnp", 1.0, 0)],
        A_HALF,
    ),
    (
        "without CNPs alpha decays by (1 - g) every 55 us",
        {"initial_alpha_value": 512},
        [("cnp", 0.0, 0), ("sent", 10 * K + 1e-6, 0)],
        A_HALF * (1 - G) ** 10,
    ),
    (
        "a later CNP: decay for the time passed, then raise",
        {"initial_alpha_value": 512},
        [("cnp", 0.0, 0), ("cnp", 2 * K + 1e-6, 0)],
        (1 - G) * A_HALF * (1 - G) ** 2 + G,
    ),
]


@pytest.mark.parametrize(
    ("overrides", "events", "alpha"), [row[1:] for row in ALPHA], ids=[row[0] for row in ALPHA]
)
def test_alpha(overrides: dict[str, int], events: list[Event], alpha: float) -> None:
    assert _point(100e6, overrides, events).alpha == pytest.approx(alpha, rel=1e-12)


# Recovery at 10 Gb/s after one cut at t = 0: (overrides, events after it, current, target).
LINE = 10e9
CUT = LINE * C1
RECOVERY = [
    (
        "one timer step: fast recovery halfway back",
        {},
        [("sent", 301e-6, 0)],
        (LINE + CUT) / 2,
        LINE,
    ),
    (
        "one byte-counter step: the same",
        {"rpg_byte_reset": 1000},
        [("sent", 1e-6, 1000)],
        (LINE + CUT) / 2,
        LINE,
    ),
    ("F = 5 fast steps", {}, [("sent", 5 * 300e-6 + 1e-6, 0)], LINE - (LINE - CUT) / 32, LINE),
    # A NIC's timer runs while the QP sends nothing (paused, or paced far apart).
    ("one timer step while idle", {}, [("idle", 301e-6, 0)], (LINE + CUT) / 2, LINE),
    (
        "idle time never counts as bytes",
        {"rpg_byte_reset": 1000},
        [("idle", 1e-6, 0)],
        CUT,
        LINE,
    ),
    ("never above line rate", {}, [("sent", 1.0, 0)], LINE, LINE),
]


@pytest.mark.parametrize(
    ("overrides", "events", "current", "target"),
    [row[1:] for row in RECOVERY],
    ids=[row[0] for row in RECOVERY],
)
def test_fast_recovery(
    overrides: dict[str, int], events: list[Event], current: float, target: float
) -> None:
    point = _point(LINE, overrides, [("cnp", 0.0, 0), *events])
    assert point.current_bps == pytest.approx(current, rel=1e-12)
    assert point.target_bps == pytest.approx(target, rel=1e-12)


# Target increase of one more recovery step, after two cuts (t = 0 and 10 us; the paper's
# clamp, so the target is below line rate); byte counter 1000 B.
# (prep events, last event, target increase b/s).
T0 = 10e-6
INCREASE = [
    ("both counters below F: fast recovery, target kept", [], ("sent", T0 + 301e-6, 0), 0.0),
    (
        "one counter past F: additive increase by rpg_ai_rate",
        [("sent", T0 + 1e-6, 10_000)],
        ("sent", T0 + 301e-6, 0),
        5e6,
    ),
    (
        "both counters past F: hyper increase by rpg_hai_rate",
        [("sent", T0 + 1e-6, 10_000), ("sent", T0 + 9 * 300e-6 + 1e-6, 0)],
        ("sent", T0 + 10 * 300e-6 + 1e-6, 0),
        50e6,
    ),
]


@pytest.mark.parametrize(
    ("prep", "last", "increase"), [row[1:] for row in INCREASE], ids=[row[0] for row in INCREASE]
)
def test_increase_phases(prep: list[Event], last: Event, increase: float) -> None:
    cuts: list[Event] = [("cnp", 0.0, 0), ("cnp", T0, 0)]
    point = _point(LINE, {"rpg_byte_reset": 1000, "clamp_tgt_rate": 1}, [*cuts, *prep])
    before_target, before_current = point.target_bps, point.current_bps
    point.on_sent(last[1], last[2])
    assert point.target_bps - before_target == pytest.approx(increase, abs=1e-3)
    assert point.current_bps == pytest.approx((point.target_bps + before_current) / 2, rel=1e-12)


# Notification point: (min_time_between_cnps us, CE arrivals (time s, flow), CNP sent?).
PACING = [
    ("the first mark of a flow is answered at once", 4, [(0.0, "a")], [True]),
    ("a mark within N us of the last CNP is not", 4, [(0.0, "a"), (3e-6, "a")], [True, False]),
    ("N us after the last CNP: answered", 4, [(0.0, "a"), (4e-6, "a")], [True, True]),
    ("per flow", 4, [(0.0, "a"), (1e-6, "b"), (2e-6, "a")], [True, True, False]),
    (
        "the window counts from the last CNP, not the last mark",
        4,
        [(0.0, "a"), (3e-6, "a"), (5e-6, "a")],
        [True, False, True],
    ),
    ("the paper's N = 50 us", 50, [(0.0, "a"), (49e-6, "a"), (51e-6, "a")], [True, False, True]),
    (
        "a gap longer than the clock's start: first mark still answered",
        2_000_000,
        [(0.5, "a")],
        [True],
    ),
]


@pytest.mark.parametrize(
    ("gap_us", "marks", "sent"), [row[1:] for row in PACING], ids=[row[0] for row in PACING]
)
def test_cnp_pacing(gap_us: int, marks: list[tuple[float, str]], sent: list[bool]) -> None:
    notification = NotificationPoint(gap_us)
    assert [notification.on_ce(flow, at) for at, flow in marks] == sent


# The target on a CNP after one recovery step of each kind, at 100 Mb/s, cuts at 0 and 10 us
# (after the monitor period): (clamp_tgt_rate, clamp_tgt_rate_after_time_inc, step between the
# cuts, does the second cut set RT <- RC).
CLAMP = [
    ("paper / clamp_tgt_rate 1: always", 1, 0, None, True),
    ("mlx5 default, no step between the cuts: kept", 0, 1, None, False),
    ("mlx5 default, a byte-counter step: clamped", 0, 1, "byte", True),
    ("mlx5 default, a timer step: clamped (after_time_inc 1)", 0, 1, "timer", True),
    ("after_time_inc 0, a timer step: kept", 0, 0, "timer", False),
    ("after_time_inc 0, a byte-counter step: clamped", 0, 0, "byte", True),
]


@pytest.mark.parametrize(
    ("clamp", "after_time", "step", "clamped"),
    [row[1:] for row in CLAMP],
    ids=[row[0] for row in CLAMP],
)
def test_target_clamp(clamp: int, after_time: int, step: str | None, clamped: bool) -> None:
    flags = {"clamp_tgt_rate": clamp, "clamp_tgt_rate_after_time_inc": after_time}
    # rpg_time_reset 5 us: one timer step falls between the cuts; a byte step needs 1000 B.
    point = _point(LINE, {**flags, "rpg_byte_reset": 1000, "rpg_time_reset": 5}, [("cnp", 0.0, 0)])
    if step == "byte":
        point.on_sent(1e-6, 1000)
    elif step == "timer":
        point.advance(6e-6)
    before_cut = point.current_bps
    target_before = point.target_bps
    point.on_cnp(10e-6 if step != "timer" else 9e-6)
    assert point.target_bps == pytest.approx(before_cut if clamped else target_before)


@pytest.mark.parametrize("driver", ["timer", "byte counter"])
def test_fast_recovery_is_f_steps_then_additive_increase(driver: str) -> None:
    """The first F = 5 steps after a cut keep the target (fast recovery); the sixth raises it
    by R_AI. Each step is judged on the steps before it, as the ns-3 DCQCN of HPCC does
    (``RateIncEventMlx`` tests ``m_rpTimeStage < m_rpgThreshold`` before the stage is raised)."""
    point = DcqcnReactionPoint(100e9, {**MLX5, "rpg_byte_reset": 1000})
    point.current_bps = point.target_bps = 50e9  # below line rate: room for the target to rise
    point.on_cnp(0.0)
    target = point.target_bps
    targets = []
    for step in range(1, 7):
        if driver == "timer":
            point.advance(step * 300e-6 * 1.0001)  # nothing sent: only the timer runs
        else:
            point.on_sent(step * 1e-6, 1000)  # well inside one timer period
        targets.append(point.target_bps - target)
    assert targets == [0.0] * 5 + [pytest.approx(5e6)], targets

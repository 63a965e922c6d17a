"""DCQCN on the NIC: the reaction point (how a QP's rate changes on CNPs) and the notification
point (when a receiver answers a CE mark with a CNP).

Reaction point: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM
2015, section 3.1, RP algorithm): on a CNP the target rate takes the current rate and the
current rate is cut by alpha/2; alpha tracks how often CNPs arrive (EWMA with gain g); without
CNPs the rate recovers in steps driven by a timer and a byte counter -- fast recovery (halfway
back to the target) for the first F steps, then additive increase, then hyper increase.

Parameters use the mlx5 names and units (NVIDIA "DCQCN CC Parameters",
https://networking-docs.nvidia.com/doca/archive/3-4-0/dcqcn-cc-parameters; mlx5 sysfs
``/sys/class/net/<if>/ecn/roce_rp/`` and ``roce_np/``): ``rpg_gd`` is log2 of the divisor
applied to alpha in 1/1024 units (1023 / 2^11 ≈ alpha/2, the paper's cut), ``dce_tcp_g`` the
alpha gain in 1/1024, ``rpg_min_dec_fac`` the largest single cut in %, ``rpg_min_rate`` the
floor, ``rpg_time_reset`` / ``rpg_byte_reset`` the recovery timer and byte counter,
``rpg_ai_rate`` / ``rpg_hai_rate`` the additive / hyper increase steps,
``rate_reduce_monitor_period`` the least time between two cuts, ``initial_alpha_value`` alpha
on the first CNP; rates in Mb/s, times in µs.  The target clamp follows mlx5's
``clamp_tgt_rate`` (1: every cut sets the target to the current rate, the paper's RP) and
``clamp_tgt_rate_after_time_inc`` (with the first at 0, mlx5's default: a cut sets the target
only after a byte-counter increase, or after a timer increase when this is 1, its default; see
:meth:`DcqcnReactionPoint._clamps_target`).

Notification point: the paper's NP (section 3.1) sends a CNP at once for a CE-marked packet
of a flow that had no CNP in the last N µs, and after that at most one per N µs per flow
(N = 50 µs in the paper's deployment); mlx5 calls N ``min_time_between_cnps`` (µs,
``roce_np``).  Here a CNP goes out on the arrival of a CE-marked packet once N has passed
since the flow's last one; a mark that falls inside the window sends nothing (no CNP is
scheduled for the window's end).

Time is always an argument (seconds); nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Final

FAST_RECOVERY_STEPS: Final = 5  # F in the paper
ALPHA_UPDATE_PERIOD_S: Final = 55e-6  # the paper's alpha timer (K = 55 µs)


@dataclass
class DcqcnReactionPoint:
    """Rate state of one QP; feed it CNPs, elapsed time and sent bytes."""

    line_rate_bps: float
    params: Mapping[str, int]
    current_bps: float = 0.0
    target_bps: float = 0.0
    alpha: float = 1.0
    cuts: int = 0
    _last_cut: float | None = None
    _last_alpha_update: float | None = None  # None until the first event sets the clock
    _timer_start: float = 0.0
    _bytes_since_step: int = 0
    _timer_steps: int = 0
    _byte_steps: int = 0
    # What drove the last rate increase since the last cut: "byte", "timer" or None (none yet).
    _last_increase: str | None = None
    history: list[tuple[float, float]] = field(default_factory=list)
    # The parameters in the units the rules use, read once: every sent frame runs these rules.
    _gain: float = field(init=False, repr=False, compare=False, default=0.0)
    _reduce_period_s: float = field(init=False, repr=False, compare=False, default=0.0)
    _max_cut: float = field(init=False, repr=False, compare=False, default=0.0)
    _cut_scale: float = field(init=False, repr=False, compare=False, default=0.0)
    _min_rate_bps: float = field(init=False, repr=False, compare=False, default=0.0)
    _byte_reset: int = field(init=False, repr=False, compare=False, default=0)
    _time_reset_s: float = field(init=False, repr=False, compare=False, default=0.0)
    _ai_bps: float = field(init=False, repr=False, compare=False, default=0.0)
    _hai_bps: float = field(init=False, repr=False, compare=False, default=0.0)
    _clamp_always: bool = field(init=False, repr=False, compare=False, default=False)
    _clamp_after_time: bool = field(init=False, repr=False, compare=False, default=True)

    def __post_init__(self) -> None:
        params = self.params
        self.current_bps = self.target_bps = self.line_rate_bps
        self.alpha = params["initial_alpha_value"] / 1024
        self._gain = (1024 - params["dce_tcp_g"]) / 1024
        self._reduce_period_s = params["rate_reduce_monitor_period"] * 1e-6
        self._cut_scale = 1024 / (1 << params["rpg_gd"])
        self._max_cut = params["rpg_min_dec_fac"] / 100
        self._min_rate_bps = params["rpg_min_rate"] * 1e6
        self._byte_reset = params["rpg_byte_reset"]
        self._time_reset_s = params["rpg_time_reset"] * 1e-6
        self._ai_bps = params["rpg_ai_rate"] * 1e6
        self._hai_bps = params["rpg_hai_rate"] * 1e6
        self._clamp_always = bool(params.get("clamp_tgt_rate", 0))
        self._clamp_after_time = bool(params.get("clamp_tgt_rate_after_time_inc", 1))

    def on_cnp(self, now: float) -> bool:
        """Cut the rate unless a cut happened within rate_reduce_monitor_period."""
        if self._last_cut is not None and now - self._last_cut < self._reduce_period_s:
            return False
        self._decay_alpha(now)
        cut = min(self.alpha * self._cut_scale, self._max_cut)
        if self._clamps_target():
            self.target_bps = self.current_bps
        self.current_bps = max(self.current_bps * (1 - cut), self._min_rate_bps)
        self.alpha = (1 - self._gain) * self.alpha + self._gain
        self._last_cut = self._last_alpha_update = now
        self._timer_start = now
        self._bytes_since_step = self._timer_steps = self._byte_steps = 0
        self._last_increase = None
        self.cuts += 1
        self.history.append((now, self.current_bps))
        return True

    def _clamps_target(self) -> bool:
        """Whether this cut sets the target rate to the current rate (mlx5 ``clamp_tgt_rate``
        and ``clamp_tgt_rate_after_time_inc``): always with clamp_tgt_rate, as the paper's RP
        does; otherwise only when the rate rose since the last cut -- by the byte counter, or
        by the timer with clamp_tgt_rate_after_time_inc.  A burst of cuts with no increase
        between them keeps the target of before the burst, so recovery aims there."""
        if self._clamp_always or self._last_increase == "byte":
            return True
        return self._last_increase == "timer" and self._clamp_after_time

    def _start_clock(self, now: float) -> None:
        if self._last_alpha_update is None:
            self._last_alpha_update = self._timer_start = now

    def _decay_alpha(self, now: float) -> None:
        self._start_clock(now)
        assert self._last_alpha_update is not None
        if self._last_cut is None:
            # mlx5: alpha is initial_alpha_value when the first CNP arrives.
            self._last_alpha_update = now
            return
        periods = int((now - self._last_alpha_update) / ALPHA_UPDATE_PERIOD_S)
        if periods > 0:
            self.alpha *= (1 - self._gain) ** periods
            self._last_alpha_update += periods * ALPHA_UPDATE_PERIOD_S

    def on_sent(self, now: float, nbytes: int) -> None:
        """Advance the byte counter and the timer; recover the rate on each step."""
        self._decay_alpha(now)
        self._bytes_since_step += nbytes
        while self._bytes_since_step >= self._byte_reset:
            self._bytes_since_step -= self._byte_reset
            self._last_increase = "byte"
            self._increase(now)
            self._byte_steps += 1
        self._run_timer(now)

    def advance(self, now: float) -> None:
        """Let time pass without sending: a NIC's alpha and rate-increase timers run while
        the QP waits (paced far apart, or paused), so its rate recovers all the same."""
        self._decay_alpha(now)
        self._run_timer(now)

    def _run_timer(self, now: float) -> None:
        timer = self._time_reset_s
        while now - self._timer_start >= timer:
            self._timer_start += timer
            self._last_increase = "timer"
            self._increase(now)
            self._timer_steps += 1

    def _increase(self, now: float) -> None:
        """One recovery step, judged on the steps taken before it: the first F after a cut
        are fast recovery (a counter is raised after its step, as the stage is in the ns-3
        DCQCN of HPCC, ``RdmaHw::RateIncEventTimerMlx``: ``RateIncEventMlx`` tests
        ``m_rpTimeStage < m_rpgThreshold``, then the stage is raised)."""
        if self.current_bps >= self.line_rate_bps:
            return
        fast = max(self._timer_steps, self._byte_steps) < FAST_RECOVERY_STEPS
        hyper = min(self._timer_steps, self._byte_steps) >= FAST_RECOVERY_STEPS
        if not fast:
            step = self._hai_bps if hyper else self._ai_bps
            self.target_bps = min(self.target_bps + step, self.line_rate_bps)
        self.current_bps = min((self.target_bps + self.current_bps) / 2, self.line_rate_bps)
        self.history.append((now, self.current_bps))


class NotificationPoint:
    """CNP pacing of a receiver: at most one CNP per flow per ``min_time_between_cnps`` µs.

    A flow is whatever key the owner passes (the probe receiver uses ``(source IP, QPN)``);
    the owner bounds how many flows it asks about, so the state stays bounded too.
    """

    __slots__ = ("_last_cnp", "_min_gap_s")

    def __init__(self, min_time_between_cnps_us: float) -> None:
        self._min_gap_s = min_time_between_cnps_us * 1e-6
        self._last_cnp: dict[Hashable, float] = {}

    def on_ce(self, flow: Hashable, now: float) -> bool:
        """A CE-marked packet of ``flow`` arrived at ``now``: True when a CNP goes out for it."""
        last = self._last_cnp.get(flow)
        if last is not None and now - last < self._min_gap_s:
            return False
        self._last_cnp[flow] = now
        return True

"""Time dilation: a slow lab link that stands for a fast real one, and what that does to a NIC.

A lab port shaped to 10 Mb/s that stands for a 10 Gb/s link is a 10 Gb/s link watched in slow
motion: every frame takes ``factor`` (here 1000) times longer on the wire, so every interval
that the real link's behaviour depends on must take ``factor`` times longer too, and every
rate must be ``factor`` times smaller. Leave the NIC's DCQCN timers at their real values
(rate increase every 300 µs, alpha every 55 µs, one CNP per 4 µs) and the reaction point runs
1000 rate-increase steps while the lab sends one 1 KB frame (0.8 ms): the rate is back at line
rate before the next packet, ECN cannot act and PFC does all the work (measured: docs/lab.md, "A
time-faithful lab").

How it is done: the lab hosts' reaction and notification points (:mod:`lossless.dcqcn`, the
shared model) run in *emulated* time and at *emulated* rates -- ``now / factor`` seconds and
``lab_bps * factor`` bits per second -- with the fabric's DCQCN parameters untouched, exactly as
a NIC on the emulated link is configured. The rate the model asks for is divided by the factor
again before the lab sender paces with it. That is one conversion at the model's boundary
instead of rescaling parameters: the model has time constants that are not parameters (the
alpha timer, :data:`lossless.dcqcn.ALPHA_UPDATE_PERIOD_S`), and a scaled clock dilates those
too without a second copy of the algorithm.

:func:`dilate` states the same thing parameter by parameter, as what the NIC *looks like* on
the lab's wall clock and lab rates (time × factor, rate ÷ factor, bytes and ratios unchanged);
the probes report it, and ``tests/unit/test_dilation.py`` checks row by row that the scaled
clock produces exactly those wall-clock timers and lab-rate steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from lossless.dcqcn import ALPHA_UPDATE_PERIOD_S

Scaling = Literal["time", "rate", "bytes", "ratio"]

# The model's alpha timer has no mlx5 knob here (it is a constant of :mod:`lossless.dcqcn`);
# it is listed so the report shows it dilated along with the others.
ALPHA_UPDATE_PERIOD: Final = "alpha_update_period"
ALPHA_UPDATE_PERIOD_US: Final = ALPHA_UPDATE_PERIOD_S * 1e6

# How each DCQCN parameter (mlx5 name, unit in agent.intent.sizing.DCQCN_NIC_UNITS) scales. The why
# of each row is in the test table (tests/unit/test_dilation.py).
SCALING: Final[Mapping[str, Scaling]] = {
    # intervals (µs): a factor× slower link needs factor× longer intervals
    "rpg_time_reset": "time",
    "rate_reduce_monitor_period": "time",
    "min_time_between_cnps": "time",
    ALPHA_UPDATE_PERIOD: "time",
    # rates (Mb/s): steps and floor are fractions of the line rate, which is factor× smaller
    "rpg_ai_rate": "rate",
    "rpg_hai_rate": "rate",
    "rpg_min_rate": "rate",
    # bytes: a byte is a byte; it takes factor× longer to send on a factor× slower link, so a
    # byte counter already fires factor× less often in wall time -- scaling it too would count
    # the dilation twice
    "rpg_byte_reset": "bytes",
    # dimensionless: flags, gains, shifts, percentages, code points
    "clamp_tgt_rate": "ratio",
    "clamp_tgt_rate_after_time_inc": "ratio",
    "rpg_gd": "ratio",
    "rpg_min_dec_fac": "ratio",
    "dce_tcp_g": "ratio",
    "initial_alpha_value": "ratio",
    "cnp_dscp": "ratio",
    "cnp_802p_prio": "ratio",
}
MAX_FACTOR: Final = 1_000_000


def check_factor(factor: float) -> float:
    """``factor`` if it is a usable dilation factor (1 = real time), else ValueError."""
    if not 1 <= factor <= MAX_FACTOR:  # also refuses NaN
        raise ValueError(f"time_dilation: Expected: 1-{MAX_FACTOR} Actual: {factor!r}")
    return factor


def dilate(params: Mapping[str, float], factor: float) -> dict[str, float]:
    """The DCQCN parameters as the lab's wall clock and lab rates see them under ``factor``.

    Intervals are multiplied by ``factor``, rate steps and the rate floor divided by it, byte
    counters and dimensionless values kept. Units stay those of the input (µs, Mb/s, bytes).
    An unknown name is an error: guessing how it scales would silently mis-dilate it.
    """
    check_factor(factor)
    dilated: dict[str, float] = {}
    for name, value in params.items():
        scaling = SCALING.get(name)
        if scaling is None:
            raise ValueError(
                f"dilate: unknown DCQCN parameter {name!r}. Expected one of: "
                f"{', '.join(sorted(SCALING))}"
            )
        if scaling == "time":
            dilated[name] = value * factor
        elif scaling == "rate":
            dilated[name] = value / factor
        else:
            dilated[name] = value
    return dilated


@dataclass(frozen=True)
class Dilation:
    """The conversion at the model's boundary: lab wall time and lab rates ↔ emulated ones."""

    factor: float = 1.0

    def __post_init__(self) -> None:
        check_factor(self.factor)

    def model_time(self, wall_s: float) -> float:
        """Emulated seconds for a wall-clock reading (only differences mean anything)."""
        return wall_s / self.factor

    def model_rate(self, lab_bps: float) -> float:
        """The emulated link's rate for a lab rate."""
        return lab_bps * self.factor

    def lab_rate(self, model_bps: float) -> float:
        """The lab rate that stands for an emulated rate."""
        return model_bps / self.factor

    def lab_parameters(self, params: Mapping[str, float]) -> dict[str, float]:
        """What the report shows: ``params`` plus the model's alpha timer, dilated."""
        return dilate({**params, ALPHA_UPDATE_PERIOD: ALPHA_UPDATE_PERIOD_US}, self.factor)

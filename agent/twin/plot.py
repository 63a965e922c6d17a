"""One figure of a twin run, made to be read: what the bottleneck queue, the delivered rate,
the flows' DCQCN rates and the pauses did, from the first microseconds to the end.

* Time is on a log axis: the onset (the queue's rise, the first XOFF and rate cuts, within
  microseconds; the engine samples it ten times as densely) and the steady state (the last
  milliseconds) both get room; a linear axis put everything in its first tenth.
* The queue panel draws the bottleneck's ECN minimum and maximum and its pause threshold (the
  XOFF level of one ingress port: the egress queue may hold that much per ingress port).
* What the bottleneck port sends against its line rate: utilisation over time.
* Per-flow DCQCN rates: one line each with a legend up to :data:`MAX_FLOW_LINES` flows; more
  are drawn as their median and their min-max band (the victim flow, if any, on its own), with
  the fair share at the bottleneck (its line rate / the flows crossing it).  The rate axis is
  logarithmic when the rates span more than :data:`LOG_SPAN` (cut rates near the floor and
  line rate in one view).
* Pauses: which ports and NICs were held by PFC at each sample.

matplotlib with the Agg backend (no display needed); PNG or SVG by the file's suffix.
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path
from typing import Any

from agent.errors import AgentError
from agent.intent.units import format_speed
from agent.twin.results import RATE_WINDOW_FRAMES, Series, TwinReport

MAX_FLOW_LINES = 8  # more lines than this is a texture, not a plot: median and band instead
LOG_SPAN = 50.0  # a rate or queue range wider than this factor gets a log axis


def _seconds_label(seconds: float, _: Any = None) -> str:
    if seconds >= 1:
        return f"{seconds:g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:g} µs"
    return f"{seconds * 1e9:g} ns"


def _bytes_label(value: float, _: Any = None) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.3g} MB"
    if value >= 1e3:
        return f"{value / 1e3:.3g} KB"
    return f"{value:.3g} B"


def _short(flow: str) -> str:
    """``gpu09->gpu01:49152`` -> ``gpu09→gpu01`` (the source port only tells flows apart)."""
    return flow.rsplit(":", 1)[0].replace("->", "→")


def _positive(series: Series) -> list[int]:
    """Indices of the samples after t = 0 (a log axis has no zero)."""
    return [i for i, t in enumerate(series.t_s) if t > 0]


def _queue_panel(ax: Any, result: TwinReport, keep: list[int]) -> None:
    series = result.series
    t = [series.t_s[i] for i in keep]
    queue = [series.queue_bytes[i] for i in keep]
    ax.plot(t, queue, color="tab:blue", linewidth=1.2, label="queue depth")
    # Dashes differ as well as colours: the ECN maximum and the pause threshold are often
    # close (both near the buffer's share), and one must not hide the other.
    marks = [
        (series.ecn_min_bytes, "ECN min", "tab:green", "--"),
        (series.ecn_max_bytes, "ECN max", "tab:orange", "--"),
        (series.pause_threshold_bytes, "pause threshold (per ingress port)", "tab:red", "-."),
    ]
    for value, name, colour, dashes in marks:
        if value is not None:
            ax.axhline(value, color=colour, linestyle=dashes, linewidth=1.2,
                       label=f"{name} {_bytes_label(value)}")  # fmt: skip
    levels = [v for v, _, _, _ in marks if v] + [max(queue, default=0)]
    if max(levels) > LOG_SPAN * max(min(levels), 1):
        ax.set_yscale("symlog", linthresh=max(min(levels) / 10, 1000))
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(_bytes_label)
    ax.set_ylabel("egress queue")
    ax.set_title(f"queue at the bottleneck {series.queue_port or '-'} (all classes)",
                 fontsize=9, loc="left")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left")


def _utilisation_panel(ax: Any, result: TwinReport, keep: list[int]) -> None:
    series = result.series
    t = [series.t_s[i] for i in keep]
    line = next((p.speed_bps for p in result.ports if p.port == series.queue_port), 0)
    sent = series.queue_port_bps or [0.0] * len(series.t_s)
    ax.plot(t, [sent[i] / 1e9 for i in keep], color="tab:purple", linewidth=1.2,
            label=f"sent (wire bits, over {RATE_WINDOW_FRAMES} frame times)")  # fmt: skip
    if line:
        ax.axhline(line / 1e9, color="black", linestyle=":", linewidth=1,
                   label=f"line rate {format_speed(line)}")  # fmt: skip
    ax.set_ylim(bottom=0)
    ax.set_ylabel("Gb/s")
    ax.set_title(f"what the bottleneck sends (utilisation {result.bottleneck_utilisation:.1%} "
                 "over the run)", fontsize=9, loc="left")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left")


def _flow_lines(
    ax: Any, series: Series, keep: list[int], t: list[float], victim: int | None
) -> list[float]:
    """One line per flow with its name in the legend; the values drawn."""
    drawn: list[float] = []
    for index, (name, rates) in enumerate(zip(series.flows, series.rate_bps, strict=True)):
        values = [rates[i] / 1e9 for i in keep]
        label = _short(name) + (" (victim)" if index == victim else "")
        ax.plot(t, values, linewidth=1.4 if index == victim else 1, label=label)
        drawn += values
    return drawn


def _flow_band(
    ax: Any, series: Series, keep: list[int], t: list[float], victim: int | None
) -> list[float]:
    """Many flows: their median and min-max band (the victim on its own); the values drawn."""
    others = [r for i, r in enumerate(series.rate_bps) if i != victim]
    columns = [[r[i] / 1e9 for r in others] for i in keep]
    low, high = [min(c) for c in columns], [max(c) for c in columns]
    median = [statistics.median(c) for c in columns]
    ax.fill_between(t, low, high, color="tab:blue", alpha=0.2, linewidth=0,
                    label=f"min-max of {len(others)} flows")  # fmt: skip
    ax.plot(t, median, color="tab:blue", linewidth=1.2, label=f"median of {len(others)} flows")
    drawn = low + high
    if victim is not None:
        values = [series.rate_bps[victim][i] / 1e9 for i in keep]
        ax.plot(t, values, color="tab:red", linewidth=1.2,
                label=f"victim {_short(series.flows[victim])}")  # fmt: skip
        drawn += values
    return drawn


def _rates_panel(ax: Any, result: TwinReport, keep: list[int]) -> None:
    series = result.series
    t = [series.t_s[i] for i in keep]
    victim = result.victim
    many = len(series.flows) > MAX_FLOW_LINES
    drawn = (
        _flow_band(ax, series, keep, t, victim)
        if many
        else _flow_lines(ax, series, keep, t, victim)
    )
    line = next((p.speed_bps for p in result.ports if p.port == series.queue_port), 0)
    if line and series.queue_port_flows:
        share = line / series.queue_port_flows / 1e9
        ax.axhline(share, color="grey", linestyle="--", linewidth=1,
                   label=f"fair share at the bottleneck {share:.3g} Gb/s "
                   f"({series.queue_port_flows} flows)")  # fmt: skip
        drawn.append(share)
    positive = [v for v in drawn if v > 0]
    if positive and max(positive) > LOG_SPAN * min(positive):
        ax.set_yscale("log")
    ax.set_ylabel("DCQCN rate (Gb/s)")
    ax.set_title("per-flow rate DCQCN allows (reaction point; a NIC shared by several flows, "
                 "or paused, sends less)", fontsize=9, loc="left")  # fmt: skip
    ax.legend(fontsize=7, loc="lower left", ncol=2 if not many else 1)


def _pause_panel(ax: Any, result: TwinReport, keep: list[int]) -> None:
    series = result.series
    t = [series.t_s[i] for i in keep]
    for index, paused in enumerate(series.paused):
        ax.fill_between(t, [index + 0.8 * paused[i] for i in keep], index, step="post",
                        linewidth=0, alpha=0.7)  # fmt: skip
    ax.set_yticks([i + 0.4 for i in range(len(series.paused_ports))])
    ax.set_yticklabels(series.paused_ports, fontsize=6)
    if not series.paused_ports:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no port or NIC received PFC", transform=ax.transAxes,
                ha="center", va="center", fontsize=8)  # fmt: skip
    ax.set_title("paused by received PFC (at each sample)", fontsize=9, loc="left")
    ax.set_xlabel("time since the flows started (log scale)")


def build_figure(result: TwinReport) -> Any:
    """The figure (a matplotlib ``Figure`` on the Agg backend); the caller closes it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    keep = _positive(result.series)
    fig, axes = plt.subplots(
        4, 1, figsize=(11, 12), sharex=True, gridspec_kw={"height_ratios": [3, 2, 3, 1.3]}
    )
    fig.suptitle(
        f"twin {result.scenario} on {result.fabric} ({result.profile}), "
        f"{format_speed(result.speed_bps)}, {result.senders} sender(s), "
        f"{_seconds_label(result.duration_s)}\n"
        + textwrap.fill(f"verdict: {result.verdict.says}", 140),
        fontsize=9,
    )
    _queue_panel(axes[0], result, keep)
    _utilisation_panel(axes[1], result, keep)
    _rates_panel(axes[2], result, keep)
    _pause_panel(axes[3], result, keep)
    for ax in axes:
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.25)
    axes[-1].xaxis.set_major_formatter(_seconds_label)
    fig.tight_layout()
    return fig


def write_plot(result: TwinReport, path: Path) -> None:
    """Write the figure to ``path`` (.png or .svg); errors name the file."""
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise AgentError(
            f"--plot {path}: Expected: a .png or .svg file Actual: {suffix or 'no suffix'}"
        )
    fig = build_figure(result)  # first: it selects the Agg backend before pyplot loads
    from matplotlib import pyplot as plt

    try:
        fig.savefig(path, format=suffix[1:], dpi=110)
    except OSError as exc:
        raise AgentError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)

"""One figure of a twin run: queue depth, per-flow DCQCN rates and pauses over time.

matplotlib with the Agg backend (no display needed); PNG or SVG by the file's suffix.
"""

from __future__ import annotations

from pathlib import Path

from agent.errors import AgentError
from agent.twin.results import TwinReport

MAX_FLOW_LINES = 16  # more lines than this is a texture, not a plot; the rest are summarised


def write_plot(result: TwinReport, path: Path) -> None:
    """Write the figure to ``path`` (.png or .svg); errors name the file."""
    suffix = path.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise AgentError(
            f"--plot {path}: Expected: a .png or .svg file Actual: {suffix or 'no suffix'}"
        )
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    series = result.series
    t_ms = [t * 1e3 for t in series.t_s]
    fig, (ax_q, ax_r, ax_p) = plt.subplots(
        3, 1, figsize=(10, 8), sharex=True, gridspec_kw={"height_ratios": [2, 2, 1]}
    )
    fig.suptitle(
        f"twin {result.scenario} on {result.fabric} ({result.profile}), "
        f"{result.speed_bps / 1e9:g} Gb/s, {result.senders} sender(s)"
    )
    ax_q.plot(t_ms, [q / 1e3 for q in series.queue_bytes], color="tab:blue", linewidth=1)
    ax_q.set_ylabel("queue (KB)")
    ax_q.set_title(f"egress queue depth at {series.queue_port or '-'}", fontsize=9, loc="left")
    ax_q.grid(True, alpha=0.3)
    for name, rates in list(zip(series.flows, series.rate_bps, strict=True))[:MAX_FLOW_LINES]:
        ax_r.plot(t_ms, [r / 1e9 for r in rates], linewidth=0.8, label=name)
    ax_r.set_ylabel("DCQCN rate (Gb/s)")
    extra = len(series.flows) - MAX_FLOW_LINES
    ax_r.set_title(
        "per-flow rate (reaction point)" + (f", first {MAX_FLOW_LINES} of {len(series.flows)}"
                                             if extra > 0 else ""),
        fontsize=9,
        loc="left",
    )  # fmt: skip
    ax_r.grid(True, alpha=0.3)
    if len(series.flows) <= 8:
        ax_r.legend(fontsize=7, loc="upper right")
    for index, paused in enumerate(series.paused):
        ax_p.fill_between(
            t_ms, [index + 0.8 * p for p in paused], index, step="post", linewidth=0, alpha=0.7
        )
    ax_p.set_yticks([i + 0.4 for i in range(len(series.paused_ports))])
    ax_p.set_yticklabels(series.paused_ports, fontsize=6)
    ax_p.set_title("paused (by received PFC) at each sample", fontsize=9, loc="left")
    ax_p.set_xlabel("time (ms)")
    fig.tight_layout()
    try:
        fig.savefig(path, format=suffix[1:])
    except OSError as exc:
        raise AgentError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)

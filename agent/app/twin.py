"""``roce-agent twin FABRIC``: run a traffic scenario in the fabric twin and report it.

Exit codes: 0 the simulation ran and no lossless class lost a frame; 1 it ran and a lossless
class dropped frames (headroom overrun or tail drop on a no-drop priority -- the promise the
configuration makes is broken); 2 bad input (fabric file, options), with one located line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from agent.app.output import echo_json
from agent.app.support import (
    EXIT_FAILED,
    EXIT_OK,
    FABRIC,
    OUTPUT,
    PROGRESS,
    HostList,
    ProgressBars,
    SizeType,
    SpeedType,
    handle_errors,
    imports_frozen,
)
from agent.errors import AgentError
from agent.intent.units import format_size, format_speed
from agent.twin.network import MODES, TwinError, TwinNetwork, load_network
from agent.twin.results import MAX_DURATION_S, TwinReport, run_twin
from agent.twin.run_options import DEFAULT_RTO_S, PATHS, RECOVERIES, Paths, Recovery, RunOptions
from agent.twin.workloads import (
    ALGORITHMS,
    COLLECTIVES,
    MAX_CHANNELS,
    MAX_QPS,
    MAX_RANKS,
    MAX_SENDERS,
    SCENARIOS,
    AlgorithmName,
    CollectiveName,
    ScenarioName,
)
from common.clicktypes import Duration
from common.conventions import add_column, console, examples, table

if TYPE_CHECKING:
    # agent.twin.collectives only for --workload, rich only for a table (issue #31: a
    # scenario run that prints JSON imports neither).
    from rich.console import Console
    from rich.table import Table

    from agent.twin.collectives import CollectiveReport, CollectiveSpec
    from agent.twin.compare import Comparison, ModeRow
    from agent.twin.jobfile import NamedSpec
    from agent.twin.placement import FlowPath
    from agent.twin.step import StepReport
    from agent.twin.trimming import TrimFacts


def _console() -> Console:
    return console()


def _gbps(bps: float) -> str:
    if bps >= 1e9:
        return f"{bps / 1e9:.2f} Gb/s"
    if bps >= 1e6:
        return f"{bps / 1e6:.2f} Mb/s"
    return f"{bps / 1e3:.2f} kb/s"


def _bytes(value: int) -> str:
    return f"{value / 1000:.1f} KB"


def _summary_rows(result: TwinReport) -> list[tuple[str, str]]:
    rows = [
        ("lossless drops", str(result.lossless_drops)),
        ("lossy drops", str(result.lossy_drops)),
        (
            "drops by priority",
            ", ".join(f"{k}: {v}" for k, v in result.drops_by_class.items()) or "-",
        ),
        ("PFC frames sent", str(result.pfc_frames)),
        ("max paused fraction", f"{result.max_paused_fraction:.1%}"),
        ("bottleneck (busiest port)", result.bottleneck or "-"),
        ("bottleneck utilisation", f"{result.bottleneck_utilisation:.1%}"),
        (
            "queue peak / p99",
            f"{_bytes(result.queue_peak_bytes)} / {_bytes(result.queue_p99_bytes)}",
        ),
        ("CE fraction", f"{result.ce_fraction:.2%}"),
        ("CNPs sent / received", f"{result.cnps_sent} / {result.cnps_received}"),
        ("goodput (in order)", _gbps(result.goodput_bps)),
        (
            f"retransmitted / timeouts ({result.recovery})",
            f"{_bytes(result.retx_bytes)} / {result.timeouts}",
        ),
        ("Jain fairness (2nd half)", "-" if result.jain is None else f"{result.jain:.4f}"),
        (
            "time to converge",
            "-" if result.converge_s is None else f"{result.converge_s * 1e3:.3f} ms",
        ),
    ]
    rows += _trim_rows(result.trim)
    if result.victim_goodput_bps is not None:
        rows.append(("victim goodput", _gbps(result.victim_goodput_bps)))
    if result.scenario == "storm":
        rows.append(("storms detected", str(result.storms_detected)))
    rows.append(("events / wall time", f"{result.events} / {result.wall_s:.2f} s"))
    return rows


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.1f} us"


def _trim_rows(trim: TrimFacts | None) -> list[tuple[str, str]]:
    """The mode, the path choice, trims, retransmitted frames, reordering and the messages'
    completion times."""
    if trim is None:
        return []
    rows = [
        ("mode / paths", f"{trim.mode} / {trim.paths}"),
        ("trimmed / dropped at the trim queue", f"{trim.trimmed} / {trim.trim_dropped}"),
        ("retransmitted frames", str(trim.retransmitted)),
        ("reorder depth (max frames held)", str(trim.reorder_depth)),
    ]
    if trim.completion_p50_s is not None:
        rows.append(
            (
                "message completion p50 / p99 / max",
                f"{_us(trim.completion_p50_s)} / {_us(trim.completion_p99_s)} / "
                f"{_us(trim.completion_max_s)}",
            )
        )
    return rows


def summary_table(result: TwinReport) -> Table:
    summary = table(
        f"twin {result.scenario} on {result.fabric} ({result.profile}), "
        f"{format_speed(result.speed_bps)}, {result.duration_s * 1e3:g} ms",
        "metric",
    )
    add_column(summary, "value", justify="right")
    for name, value in _summary_rows(result):
        summary.add_row(name, value)
    return summary


def ports_table(result: TwinReport) -> Table:
    """The ports that did something, the bottleneck first, then by name."""
    ports = table("ports (the bottleneck first)")
    trims = any(p.trimmed for p in result.ports)
    for column in ("port", "util", "queue peak", "queue p99", "XOFF/XON tx", "PFC rx", "paused",
                   "drops (hdrm/tail/wd)", "ECN marked",
                   *(("trimmed/dropped",) if trims else ())):  # fmt: skip
        add_column(ports, column, justify="left" if column == "port" else "right")
    for p in sorted(result.ports, key=lambda p: p.port != result.bottleneck):
        ports.add_row(
            p.port,
            f"{p.utilisation:.1%}",
            _bytes(p.queue_peak_bytes),
            _bytes(p.queue_p99_bytes),
            f"{p.pfc_xoff_tx}/{p.pfc_xon_tx}",
            str(p.pfc_rx),
            f"{p.paused_fraction:.1%}",
            f"{p.headroom_drops}/{p.tail_drops}/{p.watchdog_drops}",
            str(p.ecn_marked),
            *((f"{p.trimmed}/{p.trim_dropped}",) if trims else ()),
        )
    return ports


def flows_table(result: TwinReport) -> Table:
    """The flows (the first 32; the rest are in --output json)."""
    flows = table("flows")
    for column in ("flow", "goodput", "2nd half", "DCQCN rate", "CE", "CNPs", "NIC paused",
                   "retx"):  # fmt: skip
        add_column(flows, column, justify="left" if column == "flow" else "right")
    for f in result.flows[:32]:
        flows.add_row(
            f.flow,
            _gbps(f.goodput_bps),
            _gbps(f.goodput_second_half_bps),
            _gbps(f.final_rate_bps),
            f"{f.ce_fraction:.1%}",
            str(f.cnps_received),
            f"{f.paused_fraction:.1%}",
            _bytes(f.retx_bytes),
        )
    if len(result.flows) > 32:
        flows.caption = f"{len(result.flows) - 32} more flows in --output json"
    return flows


def render_table(result: TwinReport, console: Console) -> None:
    """The summary, the ports, the flows, the notes, and the verdict last (what to do)."""
    console.print(summary_table(result))
    console.print(ports_table(result))
    console.print(flows_table(result))
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    _print_trim_receiver(result.trim, console)
    console.print(f"verdict: {result.verdict.says}", markup=False, soft_wrap=True)


def _print_trim_receiver(trim: TrimFacts | None, console: Console) -> None:
    if trim is not None and trim.trim_receiver is not None:
        console.print(f"assumed: {trim.trim_receiver}", markup=False, soft_wrap=True)


PROGRESS_STEPS = 1000  # a bar's resolution: simulated time in thousandths of the run


def _simulating(bars: ProgressBars, title: str) -> Callable[[float, float], None]:
    """A progress callback for run_twin: simulated time of the run's duration."""
    task = bars.add(title, PROGRESS_STEPS)

    def update(now_s: float, duration_s: float) -> None:
        done = round(PROGRESS_STEPS * now_s / duration_s)
        bars.update(task, done, f"{now_s * 1e3:.3g} of {duration_s * 1e3:g} ms simulated")

    return update


@click.command("twin")
@examples(
    "roce-agent twin fabric.yml --senders 4 --duration 300us --plot queues.png",
    "roce-agent twin fabric.yml --scenario storm --duration 20ms -o json",
    "roce-agent twin fabric.yml --workload allreduce --ranks 8 --size 64MB",
    "roce-agent twin pod-32-leaf.yml --job playbooks/jobs/pod-32-leaf-train-and-moe.yml",
)
@FABRIC
@click.option(
    "--scenario", type=click.Choice(SCENARIOS), default="incast", show_default=True,
    help="incast: N:1 onto one host; all-to-all: N hosts; victim: incast + a flow sharing an "
    "upstream link; storm: one host sends XOFF continuously.",
)  # fmt: skip
@click.option(
    "--senders", type=click.IntRange(1, MAX_SENDERS), default=2, show_default=True,
    help="Incast senders (hosts, for all-to-all).",
)  # fmt: skip
@click.option("--speed", type=SpeedType(), help="Pick hosts whose NIC runs at this speed.")
@click.option(
    "--duration", type=Duration(MAX_DURATION_S), default="10ms", show_default=True,
    help="Simulated time, with its unit: 10ms, 250us, 2s (storm: at least detection + 2 "
    "polling intervals).",
)  # fmt: skip
@click.option(
    "--seed", type=click.IntRange(0, 2**32 - 1), default=1, show_default=True,
    help="Seed of the WRED/ECN marking draws (same seed, same result).",
)  # fmt: skip
@click.option(
    "--senders-ignore-pause", is_flag=True,
    help="What if the senders' NICs did not honour PFC (no pfc_vector on the host)?",
)  # fmt: skip
@click.option(
    "--payload", "payload_bytes", type=click.IntRange(64, 4096),
    help="RoCE payload bytes per packet [default: the ports' RoCE MTU, 4096 at MTU 9000].",
)  # fmt: skip
@click.option(
    "--no-dcqcn", "no_dcqcn", is_flag=True,
    help="The hosts' NICs run with DCQCN off: CNPs arrive, rates never change (PFC alone).",
)  # fmt: skip
@click.option(
    "--workload", type=click.Choice(COLLECTIVES),
    help="Run an NCCL collective instead of a scenario (ring all-reduce, all-gather, "
    "reduce-scatter; all-to-all as pairwise flows): time, algbw and busbw as nccl-tests.",
)  # fmt: skip
@click.option(
    "--ranks", type=click.IntRange(2, MAX_RANKS),
    help="Ranks of the collective, one per GPU NIC [default: every NIC of --hosts, else every "
    "GPU NIC of the fabric at the speed most of them run at].",
)  # fmt: skip
@click.option(
    "--size", "size_bytes", type=SizeType(), default="64MB", show_default=True,
    help="The collective's size as nccl-tests prints it (all-gather: the total output).",
)  # fmt: skip
@click.option(
    "--qps-per-connection", type=click.IntRange(1, MAX_QPS), default=1, show_default=True,
    help="QPs per ring/pair connection, each with its own UDP source port "
    "(NCCL_IB_QPS_PER_CONNECTION).",
)  # fmt: skip
@click.option(
    "--channels", type=click.IntRange(1, MAX_CHANNELS), default=1, show_default=True,
    help="Ring channels per NIC, each its own ring of connections and QPs, the buffer split "
    "among them (NCCL_MIN_NCHANNELS; rings duplicated onto the same NICs as NCCL does).",
)  # fmt: skip
@click.option(
    "--algorithm", type=click.Choice(ALGORITHMS), default="ring", show_default=True,
    help="NCCL's algorithm for an all-reduce (NCCL_ALGO): its rings; its double binary tree "
    "between the hosts (reduced up and broadcast down at once); or auto, the one NCCL's cost "
    "model picks for the size and ranks with NCCL_PROTO=Simple (the report says why).",
)  # fmt: skip
@click.option(
    "--split-data-on-qps", is_flag=True,
    help="Cut every message over all QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1) instead of one QP "
    "per message in turn.",
)  # fmt: skip
@click.option(
    "--hosts", type=HostList(),
    help="The ranks' hosts in ring order, comma-separated; a host with several NICs stands for "
    "all of them, HOST:PORT for one [default: fabric order at --speed].",
)  # fmt: skip
@click.option(
    "--job", "job_file", type=click.Path(path_type=Path, dir_okay=False),
    help="Run the jobs of a job file side by side instead (YAML: each job's hosts or "
    "hostfile, NICs, collective, size, QPs, PXN; docs: collectives, Job file), each reported "
    "on its own.",
)  # fmt: skip
@click.option(
    "--show-placement", is_flag=True,
    help="Also list every QP of the collective: which NIC sends to which, on which rail, and "
    "the switch ports its ECMP hash takes (which spine).",
)  # fmt: skip
@click.option(
    "--recovery", type=click.Choice(RECOVERIES), default="go-back-n", show_default=True,
    help="The NICs' loss recovery: RC go-back-N, or selective repeat.",
)  # fmt: skip
@click.option(
    "--rto", "rto_s", type=Duration(3600.0), default=DEFAULT_RTO_S,
    show_default="4.29s: 4.096 us x 2^20, NCCL_IB_TIMEOUT's default",
    help="Retransmission timeout, with its unit (1ms, 50us); shorter to see tail loss "
    "recovered within a short run.",
)  # fmt: skip
@click.option(
    "--mode", type=click.Choice(MODES),
    help="The RoCE class's mode [default: the fabric profile's]: lossless (PFC) or lossy-trim "
    "(no PFC; a full queue trims frames; NICs that NAK a trimmed frame at once, UEC-style; "
    "selective repeat).",
)  # fmt: skip
@click.option(
    "--paths", type=click.Choice(PATHS),
    help="The switches' choice among equal-cost next hops: flow (per-flow ECMP hash), spray "
    "(per packet, at random), adaptive (per packet, the shortest queue) [default: flow; spray "
    "in lossy-trim].",
)  # fmt: skip
@click.option(
    "--compare-modes", is_flag=True,
    help="Run the same scenario, --workload or --job once per mode (lossless, lossy-trim; "
    "without --paths lossless also on lossy-trim's sprayed paths) and report them side by "
    "side, with a recommendation on the same paths and what the fabric needs to switch.",
)  # fmt: skip
@OUTPUT
@click.option(
    "--plot", "plot_file", type=click.Path(path_type=Path, dir_okay=False),
    help="Write queue depth, rates and pauses over time (FILE.png or FILE.svg); a scenario's "
    "run only, not with --workload.",
)  # fmt: skip
@PROGRESS
@handle_errors
@imports_frozen
def twin_command(fabric: Path, **options: Any) -> None:
    """Simulate a scenario on the fabric's own speeds, cables, thresholds and DCQCN settings.

    A lab fabric (emulation.time_dilation D) is simulated as the fabric it stands for: ports
    D times faster (--speed in those speeds), D times less time.

    The last line is the verdict: what the run shows and what to run next.

    With --workload, an NCCL collective on --ranks hosts instead; with --job, the jobs of a
    job file side by side:

    \b
    https://roce-fabric-agent.readthedocs.io/en/latest/collectives/

    Exit 0: no lossless drop; 1: a lossless class dropped frames; 2: bad input.
    """
    run = TwinFlags(**options)
    if run.compare_modes:
        _compare_command(fabric, run)
    if run.job_file is not None:
        _jobs_command(fabric, run, run.job_file)
    if _collective_mode(run.workload):
        _collective_command(fabric, run)
    plot_file = run.plot_file
    if plot_file is not None and plot_file.suffix.lower() not in (".png", ".svg"):
        suffix = plot_file.suffix or "no suffix"
        raise AgentError(f"--plot {plot_file}: Expected: a .png or .svg file Actual: {suffix}")
    network = load_network(fabric, run.mode)
    with ProgressBars(run.progress) as bars:
        result = run.simulate(network, _simulating(bars, f"twin {run.scenario}"))
    if plot_file is not None:
        from agent.twin.plot import write_plot

        write_plot(result, plot_file)
    if run.output == "json":
        echo_json(result.to_json())
    else:
        render_table(result, _console())
    sys.exit(EXIT_OK if result.passed else EXIT_FAILED)


@dataclass(frozen=True)
class TwinFlags:
    """``roce-agent twin``'s options as the command line gives them: a scenario's (senders,
    speed, payload, DCQCN, pause honouring, --plot) or, with --workload, a collective's
    (ranks, size, QPs, hosts); the run's (duration, seed, loss recovery) and the output's."""

    scenario: ScenarioName
    senders: int
    speed: int | None
    duration: float
    seed: int
    senders_ignore_pause: bool
    payload_bytes: int | None
    no_dcqcn: bool
    recovery: Recovery
    rto_s: float
    output: str
    plot_file: Path | None
    progress: bool | None
    workload: CollectiveName | None
    ranks: int | None
    size_bytes: int
    qps_per_connection: int
    channels: int
    algorithm: AlgorithmName
    split_data_on_qps: bool
    hosts: tuple[str, ...] | None
    job_file: Path | None
    show_placement: bool
    mode: str | None = None
    paths: Paths | None = None
    compare_modes: bool = False

    def run_options(self, mode: str, paths: Paths | None = None) -> RunOptions:
        """The run's seed, loss recovery and path choice in ``mode``: lossy-trim sprays by
        default (UEC pairs trimming with spraying: a trim says which packet to resend, and
        spreading a flow keeps queues short); it and spraying need selective repeat (a trim
        NAKs one PSN; a sprayed flow arrives out of order), so an explicit --recovery
        go-back-n with them is bad input.  ``paths``: this run's, over --paths and the
        mode's default (--compare-modes' lossless run on lossy-trim's paths)."""
        trim = mode == "lossy-trim"
        paths = paths or self.paths or ("spray" if trim else "flow")
        recovery = self.recovery
        if trim or paths != "flow":
            if recovery == "go-back-n" and _given(click.get_current_context(), "recovery"):
                why = "--mode lossy-trim" if trim else f"--paths {paths}"
                raise TwinError(
                    f"twin --recovery go-back-n: Expected: selective-repeat with {why} (a "
                    "trimmed frame is NAKed alone; sprayed frames arrive out of order) "
                    f"Actual: --recovery go-back-n {why}"
                )
            recovery = "selective-repeat"
        return {"seed": self.seed, "recovery": recovery, "rto_s": self.rto_s, "paths": paths}

    def simulate(
        self,
        network: TwinNetwork,
        on_progress: Callable[[float, float], None],
        paths: Paths | None = None,
    ) -> TwinReport:
        """The scenario run (``paths``: as :meth:`run_options`)."""
        return run_twin(
            network,
            self.scenario,
            senders=self.senders,
            duration_s=self.duration,
            speed_bps=self.speed,
            ignore_pause=self.senders_ignore_pause,
            payload_bytes=self.payload_bytes,
            reaction_point=not self.no_dcqcn,
            on_progress=on_progress,
            **self.run_options(network.mode, paths),
        )

    def collective(self) -> CollectiveSpec:
        """The collective --workload names (all-reduce when only its options are given)."""
        from agent.twin.collectives import CollectiveSpec

        return CollectiveSpec(
            self.workload or "allreduce", self.ranks or 0, self.size_bytes,
            self.qps_per_connection, self.hosts, self.speed, self.split_data_on_qps,
            channels=self.channels, algorithm=self.algorithm,
        )  # fmt: skip


# ---------------------------------------------------------------- collectives (--workload)

COLLECTIVE_ONLY = ("ranks", "size_bytes", "qps_per_connection", "channels", "algorithm",
                   "split_data_on_qps", "hosts", "show_placement")  # fmt: skip
SCENARIO_ONLY = ("scenario", "senders", "senders_ignore_pause", "payload_bytes", "no_dcqcn",
                 "plot_file")  # fmt: skip


def _given(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source not in (
        click.core.ParameterSource.DEFAULT,
        click.core.ParameterSource.DEFAULT_MAP,
    )


def _option(ctx: click.Context, name: str) -> str:
    param = next(p for p in ctx.command.params if p.name == name)
    return "--" + (param.opts[0].lstrip("-") if param.opts else name)


def _collective_mode(workload: str | None) -> bool:
    """True for a collective run; a scenario's option with --workload, or a collective's
    without it, is bad input naming the option."""
    ctx = click.get_current_context()
    if workload is None:
        extra = next((n for n in COLLECTIVE_ONLY if _given(ctx, n)), None)
        if extra is not None:
            raise TwinError(
                f"twin {_option(ctx, extra)}: Expected: with --workload (a collective) "
                "Actual: a scenario run"
            )
        return False
    clash = next((n for n in SCENARIO_ONLY if _given(ctx, n)), None)
    if clash is not None:
        raise TwinError(
            f"twin {_option(ctx, clash)}: Expected: --workload or {_option(ctx, clash)}, not "
            f"both Actual: --workload {workload} {_option(ctx, clash)}"
        )
    return True


def _collective_command(fabric: Path, run: TwinFlags) -> None:
    """Run the collective (``--duration``, when given, is the simulated time allowed) and
    exit."""
    from agent.twin.collectives import run_collective
    from agent.twin.placement import flow_paths

    spec = run.collective()
    ctx = click.get_current_context()
    network = load_network(fabric, run.mode)
    limit = run.duration if _given(ctx, "duration") else None
    with ProgressBars(run.progress) as bars:
        result = run_collective(
            network,
            spec,
            max_duration_s=limit,
            on_progress=_collecting(bars, f"twin {spec.workload}"),
            **run.run_options(network.mode),
        )
    paths = flow_paths(network, spec) if run.show_placement else None
    if run.output == "json":
        data = result.to_json()
        if paths is not None:
            data["placement"] = [path.to_json() for path in paths]
        echo_json(data)
    else:
        render_collective(result, _console(), paths)
    sys.exit(EXIT_OK if result.passed else EXIT_FAILED)


def _jobs_command(fabric: Path, run: TwinFlags, job_file: Path) -> None:
    """Run a job file's jobs side by side and exit: 0 when no lossless class lost a frame."""
    from agent.twin.collectives import run_collectives
    from agent.twin.jobfile import load_jobs, resolve_jobs
    from agent.twin.placement import flow_paths

    ctx = click.get_current_context()
    _check_job_clash(ctx, job_file)
    network = load_network(fabric, run.mode)
    named = resolve_jobs(load_jobs(job_file), network)
    limit = run.duration if _given(ctx, "duration") else None
    if named[0].step:  # a step runs alone (resolve_jobs)
        _step_command(network, run, named[0], limit)
    with ProgressBars(run.progress) as bars:
        results = run_collectives(
            network,
            [job.spec for job in named],
            [job.name for job in named],
            max_duration_s=limit,
            on_progress=_collecting(bars, f"twin --job {job_file.name}"),
            **run.run_options(network.mode),
        )
    paths = [flow_paths(network, job.spec) if run.show_placement else None for job in named]
    if run.output == "json":
        echo_json(_jobs_json(results, paths))
    else:
        for result, mine in zip(results, paths, strict=True):
            render_collective(result, _console(), mine)
    sys.exit(EXIT_OK if all(r.passed for r in results) else EXIT_FAILED)


def _check_job_clash(ctx: click.Context, job_file: Path) -> None:
    """A scenario's or a collective's option beside --job is bad input naming it."""
    clash = next((n for n in ("workload", "speed", *COLLECTIVE_ONLY, *SCENARIO_ONLY)
                  if n != "show_placement" and _given(ctx, n)), None)  # fmt: skip
    if clash is not None:
        raise TwinError(
            f"twin {_option(ctx, clash)}: Expected: --job or {_option(ctx, clash)}, not both "
            f"(the job file says what each job runs) Actual: --job {job_file} "
            f"{_option(ctx, clash)}"
        )


def _step_command(
    network: TwinNetwork, run: TwinFlags, job: NamedSpec, limit: float | None
) -> NoReturn:
    """Run a job's step, its collectives one after the other, and exit: 0 when no lossless
    class lost a frame in any of them."""
    from agent.twin.placement import flow_paths
    from agent.twin.step import run_step

    with ProgressBars(run.progress) as bars:
        result = run_step(
            network,
            job.spec,
            job.step,
            job.name,
            max_duration_s=limit,
            on_progress=_collecting(bars, f"twin job {job.name}"),
            **run.run_options(network.mode),
        )
    specs = [part.of(job.spec) for part in job.step]
    paths = [flow_paths(network, spec) if run.show_placement else None for spec in specs]
    if run.output == "json":
        step = result.to_json()
        for collective, mine in zip(step["collectives"], paths, strict=True):
            if mine is not None:
                collective["placement"] = [path.to_json() for path in mine]
        first = result.reports[0]
        echo_json({"fabric": first.fabric, "profile": first.profile, "passed": result.passed,
                   "jobs": [step]})  # fmt: skip
    else:
        for report, mine in zip(result.reports, paths, strict=True):
            render_collective(report, _console(), mine)
        _console().print(step_table(result))
    sys.exit(EXIT_OK if result.passed else EXIT_FAILED)


def step_table(result: StepReport) -> Table:
    """Each collective's calls, time and share of the step, and the step's busbw."""
    from agent.twin.step import describe_step

    title = (
        f"job {result.job}: its step, {describe_step(result.parts)}: "
        f"{result.time_s * 1e3:,.2f} ms of collectives, step busbw {_gbs(result.busbw_Bps)}"
        f" ({result.line_rate_fraction:.1%} of its collectives' bounds)"
    )
    out = table(title, "collective")
    for column in ("size", "per step", "time each", "time per step", "share", "busbw"):
        add_column(out, column, justify="right")
    for part, report, share in zip(result.parts, result.reports, result.shares, strict=True):
        done = "" if report.completed else " (not completed)"
        per_step_ms = part.per_step * report.time_s * 1e3
        out.add_row(
            part.workload, f"{part.size_bytes / 2**20:g} MiB", str(part.per_step),
            f"{report.time_s * 1e6:,.1f} us{done}", f"{per_step_ms:,.2f} ms",
            f"{share:.1%}", _gbs(report.busbw_Bps),
        )  # fmt: skip
    return out


def _jobs_json(
    results: list[CollectiveReport], paths: list[list[FlowPath] | None]
) -> dict[str, Any]:
    """``--job -o json``: the fabric, whether every job kept the lossless promise, each job's
    report (with its placement when asked)."""
    jobs = []
    for result, mine in zip(results, paths, strict=True):
        data = result.to_json()
        if mine is not None:
            data["placement"] = [path.to_json() for path in mine]
        jobs.append(data)
    return {
        "fabric": results[0].fabric,
        "profile": results[0].profile,
        "passed": all(r.passed for r in results),
        "jobs": jobs,
    }


def _collecting(bars: ProgressBars, title: str) -> Callable[[float, float], None]:
    task = bars.add(title, PROGRESS_STEPS)

    def update(done: float, now_s: float) -> None:
        bars.update(
            task, round(PROGRESS_STEPS * done), f"{done:.0%} delivered, {now_s * 1e3:.3g} ms"
        )

    return update


def _gbs(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.2f} GB/s"


def _collective_rows(r: CollectiveReport) -> list[tuple[str, str]]:
    from agent.twin.collectives import nic_rate

    done = "yes" if r.completed else f"no ({r.delivered_fraction:.0%} delivered)"
    return [
        ("completed", done),
        ("time", f"{r.time_s * 1e6:,.1f} us"),
        ("algbw", _gbs(r.algbw_Bps)),
        ("busbw", _gbs(r.busbw_Bps)),
        ("busbw / line rate", f"{r.line_rate_fraction:.1%} of {nic_rate(r)}"),
        ("ECMP collisions", str(len(r.collisions))),
        ("lossless / lossy drops", f"{r.lossless_drops} / {r.lossy_drops}"),
        ("retransmitted bytes / timeouts", f"{r.retx_bytes} / {r.timeouts}"),
        ("PFC frames sent", str(r.pfc_frames)),
        ("max paused fraction", f"{r.max_paused_fraction:.1%}"),
        ("CE fraction", f"{r.ce_fraction:.2%}"),
        ("CNPs received", str(r.cnps)),
        ("busiest port", r.busiest_port or "-"),
        ("its queue peak / p99", f"{_bytes(r.queue_peak_bytes)} / {_bytes(r.queue_p99_bytes)}"),
        ("Jain (connections)", "-" if r.jain is None else f"{r.jain:.4f}"),
        *_trim_rows(r.trim),
        ("events / wall time", f"{r.events} / {r.wall_s:.2f} s"),
    ]


def _placement_table(paths: list[FlowPath]) -> Table:
    placed = table("placement (every QP; its egress ports as the ECMP hash picks them)")
    for column in ("from", "to", "rail", "channel", "QP", "UDP sport", "egress"):
        numeric = column in ("rail", "channel", "QP")
        add_column(placed, column, justify="right" if numeric else "left")
    for path in paths:
        placed.add_row(
            path.src, path.dst, str(path.rail), str(path.channel), str(path.qp),
            str(path.udp_sport), " > ".join(path.egress),
        )  # fmt: skip
    return placed


def _collective_title(r: CollectiveReport) -> str:
    """``job J: twin allreduce on FABRIC (PROFILE): N ranks x 400G (...), size ..., ...``."""
    return (
        (f"job {r.job}: " if r.job else "")
        + f"twin {r.workload} on {r.fabric} ({r.profile}): {r.ranks} ranks x "
        f"{format_speed(r.speed_bps)}"
        + (f" ({r.ranks // r.rails} hosts x {r.rails} NICs)" if r.rails > 1 else "")
        + f", size {format_size(r.size_bytes)}, "
        f"{r.qps} QP(s) per connection"
        + (f", {r.channels} channels per NIC" if r.channels > 1 else "")
        + (f", NCCL_ALGO={r.algorithm}" if r.algorithm != "ring" else "")
    )


def render_collective(
    r: CollectiveReport, console: Console, paths: list[FlowPath] | None = None
) -> None:
    """Summary, the busiest links, the collisions, the placement when asked, the notes, the
    verdict last."""
    summary = table(_collective_title(r), "metric")
    add_column(summary, "value", justify="right")
    for name, value in _collective_rows(r):
        summary.add_row(name, value)
    console.print(summary)
    links = table("busiest links (first 10; all in --output json)")
    for column in ("port", "util", "queue p99", "queue peak", "paused", "ECN marked"):
        add_column(links, column, justify="left" if column == "port" else "right")
    for link in r.links[:10]:
        links.add_row(
            link.port,
            f"{link.utilisation:.1%}",
            _bytes(link.queue_p99_bytes),
            _bytes(link.queue_peak_bytes),
            f"{link.paused_fraction:.1%}",
            str(link.ecn_marked),
        )
    console.print(links)
    if r.collisions:
        whose = "any job's" if r.job else "the job's own"
        hits = table(f"ECMP collisions ({whose} flows over one fabric link)")
        for column in ("link", "demand / speed", "QPs", "connections"):
            add_column(hits, column, justify="right" if column[0] in "dQ" else "left")
        for hit in r.collisions:
            hits.add_row(hit.link, f"{hit.load:.0%}", str(hit.qps), ", ".join(hit.connections))
        console.print(hits)
    if paths is not None:
        console.print(_placement_table(paths))
    console.print(f"ranks: {', '.join(r.hosts)}", markup=False, soft_wrap=True)
    for note in r.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    _print_trim_receiver(r.trim, console)
    console.print(f"verdict: {r.verdict.says}", markup=False, soft_wrap=True)


# ---------------------------------------------------------------- --compare-modes

# Options that make no sense with --compare-modes: it chooses the mode itself, and draws or
# lists nothing per run.
NOT_WITH_COMPARE = ("mode", "plot_file", "show_placement")


def _compare_command(fabric: Path, run: TwinFlags) -> NoReturn:
    """Run the scenario, --workload or --job once per mode, report them side by side and
    exit: 0 when no lossless class lost a frame in either run, 1 otherwise."""
    from agent.intent.loader import load_fabric
    from agent.twin.compare import Comparison, comparison_notes, recommend, support

    ctx = click.get_current_context()
    clash = next((n for n in NOT_WITH_COMPARE if _given(ctx, n)), None)
    if clash is not None:
        raise TwinError(
            f"twin {_option(ctx, clash)}: Expected: --compare-modes or {_option(ctx, clash)}, "
            f"not both (--compare-modes runs every mode and reports them side by side) "
            f"Actual: --compare-modes {_option(ctx, clash)}"
        )
    if run.job_file is not None:
        _check_job_clash(ctx, run.job_file)
        workload = f"--job {run.job_file.name}"
    elif _collective_mode(run.workload):
        workload = run.workload or "allreduce"
    else:
        workload = run.scenario
    rows: list[ModeRow] = []
    with ProgressBars(run.progress) as bars:
        for mode, paths in _compared_runs(run):
            network = load_network(fabric, mode)
            rows += _mode_rows(network, run, bars, paths)
    lossless_drops = sum(r.lossless_drops for r in rows)
    recommended, reason = recommend(rows)
    comparison = Comparison(
        notes=comparison_notes(rows),
        fabric=network.name,
        workload=workload,
        rows=rows,
        recommended=recommended,
        reason=reason,
        support=support(load_fabric(fabric).intent),
    )
    if run.output == "json":
        echo_json(comparison.to_json())
    else:
        render_comparison(comparison, _console())
    sys.exit(EXIT_OK if not lossless_drops else EXIT_FAILED)


def _compared_runs(run: TwinFlags) -> list[tuple[str, Paths | None]]:
    """Each mode on its default paths; without --paths, lossless also on lossy-trim's
    (spraying): the control that tells the paths' part of a difference from trimming's."""
    if run.paths is not None:
        return [(mode, None) for mode in MODES]
    return [("lossless", None), ("lossless", "spray"), ("lossy-trim", None)]


def _mode_rows(
    network: TwinNetwork, run: TwinFlags, bars: ProgressBars, paths: Paths | None
) -> list[ModeRow]:
    """One mode's run of the job file's jobs, the collective or the scenario, as rows."""
    from agent.twin.compare import collective_row, scenario_row

    mode = network.mode
    options = run.run_options(mode, paths)
    title = f"twin {mode} ({options['paths']} paths)"
    limit = run.duration if _given(click.get_current_context(), "duration") else None
    if run.job_file is not None or run.workload is not None:
        from agent.twin.collectives import run_collectives

        specs, names = _compared_jobs(network, run)
        reports = run_collectives(
            network,
            specs,
            names,
            max_duration_s=limit,
            on_progress=_collecting(bars, title),
            **options,
        )
        return [collective_row(mode, r, options.get("recovery", "go-back-n")) for r in reports]
    result = run.simulate(network, _simulating(bars, title), paths)
    return [scenario_row(mode, result)]


def _compared_jobs(
    network: TwinNetwork, run: TwinFlags
) -> tuple[list[CollectiveSpec], list[str] | None]:
    """The collectives to compare: the job file's jobs (not a step) or --workload's."""
    if run.job_file is None:
        return [run.collective()], None
    from agent.twin.jobfile import load_jobs, resolve_jobs

    named = resolve_jobs(load_jobs(run.job_file), network)
    if named[0].step:
        raise TwinError(
            f"twin --compare-modes: Expected: a job file of collectives side by side Actual: "
            f"{run.job_file} runs job {named[0].name}'s step (compare its collectives one by "
            "one with --workload)"
        )
    return [job.spec for job in named], [job.name for job in named]


def render_comparison(comparison: Comparison, console: Console) -> None:
    """Each mode's run in a column, then the recommendation and what switching needs."""
    out = table(f"twin --compare-modes on {comparison.fabric}: {comparison.workload}", "metric")
    rows = comparison.rows
    # A mode run on two path choices (the lossless control) names its paths in the header.
    paths_of: dict[str, set[str]] = {}
    for row in rows:
        paths_of.setdefault(row.mode, set()).add(row.paths)
    for row in rows:
        label = f"{row.mode} {row.paths}" if len(paths_of[row.mode]) > 1 else row.mode
        add_column(out, f"{label}{f' ({row.job})' if row.job else ''}", justify="right")
    for name, cell in _COMPARED:
        out.add_row(name, *(cell(row) for row in rows))
    console.print(out)
    for note in comparison.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    console.print(
        f"recommended: {comparison.recommended} -- {comparison.reason}",
        markup=False,
        soft_wrap=True,
    )
    needs = comparison.support
    for platform, (names, why) in _by_platform(needs.switches_cannot).items():
        console.print(
            f"cannot trim: {_few(names)} ({platform}): {why} (the lossy-trim run assumed "
            f"{'it does' if len(names) == 1 else 'they do'})",
            markup=False,
            soft_wrap=True,
        )
    for name, platform in needs.switches_unknown:
        console.print(
            f"trimming unknown: {name} ({platform}): not a platform the intent rule IR022 knows",
            markup=False,
            soft_wrap=True,
        )
    console.print(f"NICs: {needs.nics}", markup=False, soft_wrap=True)


def _by_platform(switches: list[tuple[str, str, str]]) -> dict[str, tuple[list[str], str]]:
    """Switches that cannot trim, by platform (one line each on a 32-leaf pod)."""
    out: dict[str, tuple[list[str], str]] = {}
    for name, platform, why in switches:
        out.setdefault(platform, ([], why))[0].append(name)
    return out


def _few(names: list[str], shown: int = 4) -> str:
    """``a, b, c, d and 30 more`` (the JSON lists every one)."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def _opt(value: float | None, unit: str, scale: float) -> str:
    return "-" if value is None else f"{value * scale:,.2f} {unit}"


_COMPARED: list[tuple[str, Callable[[ModeRow], str]]] = [
    ("paths / recovery", lambda r: f"{r.paths} / {r.recovery}"),
    ("completed", lambda r: "yes" if r.completed else "no"),
    ("time", lambda r: _opt(r.time_s, "us", 1e6)),
    ("busbw", lambda r: _opt(r.busbw_GBps, "GB/s", 1)),
    ("goodput", lambda r: _opt(r.goodput_Gbps, "Gb/s", 1)),
    ("message completion p50", lambda r: _opt(r.completion_p50_s, "us", 1e6)),
    ("message completion p99", lambda r: _opt(r.completion_p99_s, "us", 1e6)),
    ("message completion max", lambda r: _opt(r.completion_max_s, "us", 1e6)),
    ("queue peak / p99", lambda r: f"{_bytes(r.queue_peak_bytes)} / {_bytes(r.queue_p99_bytes)}"),
    ("PFC frames", lambda r: str(r.pfc_frames)),
    ("max paused fraction", lambda r: f"{r.max_paused_fraction:.1%}"),
    ("trimmed / trim-dropped", lambda r: f"{r.trimmed} / {r.trim_dropped}"),
    ("retransmitted frames", lambda r: str(r.retransmitted)),
    ("timeouts", lambda r: str(r.timeouts)),
    ("reorder depth", lambda r: str(r.reorder_depth)),
    ("lossless / lossy drops", lambda r: f"{r.lossless_drops} / {r.lossy_drops}"),
]

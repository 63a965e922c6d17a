"""``roce-agent tune FABRIC``: search ECN x DCQCN (x QPs) jointly per link speed in the twin.

The search, its constraints, its method and its ranking are :mod:`agent.twin.tune`'s; this
module reads the fabric, prints the method and run counts, the trade-off table, the one-line
summary in the user's terms (current -> recommended) and the explanation per speed, and writes
the profile override with the files and commands that carry it to the fabric.  Every one of
them is rendered from the speed's decision (:class:`agent.twin.tune.results.Decision`: a
change, no change, or none), so they name the same setting.

Exit codes: 0 a recommendation (a change or no change) for every speed; 1 some speed has no
candidate meeting the hard constraints (named on stderr; no override is written if that is the
dominant speed), or nothing to tune (no speed with two hosts, no room for an ECN ramp); 2 bad
input, one line naming the option; also a --executor cluster that cannot
run the search (unreachable, no worker, a scheduler or worker with another roce-fabric-agent,
lost during the search).

``--modes lossless,lossy-trim`` runs the same tune once per RoCE mode and compares their
decided settings (:mod:`agent.twin.tune.modes`; docs/tuning.md, "Lossless or trimming?");
without it, or with the fabric's own mode alone, the tune and its output are as they were.

``--executor dask://HOST:PORT`` runs the same jobs on an existing Dask cluster instead of local
processes (:func:`agent.twin.tune.runners.dask_runner`; docs/tuning.md, "Searching on a cluster"):
the same runs, the same results, the same output but the wall times.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from agent.app.output import echo_json
from agent.app.support import (
    EXIT_FAILED,
    EXIT_OK,
    FABRIC,
    OUTPUT,
    PROGRESS,
    ProgressBars,
    SizeType,
    SpeedType,
    handle_errors,
)
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.intent.units import format_speed
from agent.twin.cluster import DEFAULT_TIMEOUT_S as CLUSTER_TIMEOUT_S
from agent.twin.cluster import ClusterError
from agent.twin.network import TwinError
from agent.twin.tune.calibration import FINALISTS, Calibration, finalists, read_calibration
from agent.twin.tune.judge import mean_at, ranked
from agent.twin.tune.modes import (
    ModesResult,
    check_modes_options,
    parse_modes,
    support_lines,
    table_rows,
    tune_modes,
)
from agent.twin.tune.objectives import (
    COLLECTIVE_WORKLOADS,
    DEFAULT_OBJECTIVE,
    MAX_TUNE_RANKS,
    OBJECTIVES,
    Objectives,
    ObjectiveSpec,
    TunedJob,
)
from agent.twin.tune.options import (
    COLLECTIVE_CANDIDATES,
    DEFAULT_SENDERS,
    MAX_CANDIDATES,
    MAX_DURATION_S,
    MIN_CANDIDATES,
    TUNE_SCENARIOS,
)
from agent.twin.tune.results import Decision, RunMetrics, SpeedResult, Stage, Trial, TuneResult
from agent.twin.tune.runners import Runner, dask_runner, pool_runner, serial_runner
from agent.twin.tune.runs import Job
from agent.twin.tune.search import FULL_GRID_MAX_RUNS, tune
from agent.twin.tune.space import DEFAULT_CANDIDATES, QPS_LEVELS
from agent.twin.tune.text import and_list, mib
from agent.twin.verdicts import kb
from agent.twin.workloads import ALGORITHMS
from common.clicktypes import Duration, FiniteFloat
from common.conventions import add_column, examples
from common.conventions import console as literal_console
from common.conventions import table as folding_table
from common.yamlsource import load_yaml

DEFAULT_DURATION = "5ms"
EXECUTOR_SCHEME = "dask"
MAX_EXECUTOR_TIMEOUT_S = 600.0
PERCENT = FiniteFloat(0, 100)
TABLE_ROWS = 15  # the table shows the best this many (and the current); the JSON has all


def _qps(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(
            f"Expected: whole numbers such as 1,2,4 Actual: {value!r}"
        ) from None
    if not levels or any(q < 1 for q in levels):
        raise click.BadParameter(f"Expected: QPs per connection of at least 1 Actual: {value!r}")
    return levels


def _modes(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    try:
        return parse_modes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


class ExecutorType(click.ParamType[str]):
    """``dask://HOST:PORT``, the scheduler of a running Dask cluster, as the address Dask itself
    prints and takes (``tcp://HOST:PORT``). One scheme, so that another engine can be another
    scheme later without a guess about what a bare ``HOST:PORT`` means."""

    name = "dask://HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:  # a port that is not a number, or above 65535
            port = None
        if (
            parts.scheme != EXECUTOR_SCHEME
            or not parts.hostname
            or not port  # None (missing) or 0
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            self.fail(
                "Expected: dask://HOST:PORT, the scheduler of a running Dask cluster (e.g. "
                f"dask://10.0.0.5:8786, the port `dask scheduler` prints) Actual: {value!r}",
                param,
                ctx,
            )
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return f"tcp://{host}:{port}"


@contextmanager
def search_runner(jobs: int, executor: str | None, timeout_s: float) -> Iterator[Runner]:
    """The runner of the command's jobs: local (``--jobs``) or on the ``--executor`` cluster,
    connected before the first run and closed after the last; a cluster's failure, at any
    point, as one error naming the option (exit 2, nothing written)."""
    if executor is None:
        yield pool_runner(jobs) if jobs > 1 else serial_runner
        return
    if jobs > 1:
        # The cluster's workers are the parallelism; local processes on top would only
        # compete with this process for the results.
        raise click.BadParameter(
            f"Expected: --jobs 1 (the default) with --executor: the cluster's workers run the "
            f"jobs Actual: --jobs {jobs}",
            param_hint="'--executor'",
        )
    debug = bool(click.get_current_context().find_root().params.get("debug"))
    try:
        with dask_runner(executor, timeout_s=timeout_s, quiet=not debug) as runner:
            literal_console(stderr=True).print(
                f"tune --executor: {executor}, {len(runner.workers)} workers, roce-fabric-agent "
                f"{runner.expected_version}",
                markup=False,
            )
            yield runner
    except ClusterError as exc:
        raise AgentError(f"tune --executor: {exc}") from None


def _verdict(trial: Trial, decision: Decision) -> str:
    decided = decision.verdict(trial)
    if decided is not None:
        return decided
    if trial.invalid is not None:
        return f"invalid: {trial.invalid}"
    if trial.pruned is not None:
        return trial.pruned
    if trial.reasons:
        return "rejected: " + "; ".join(trial.reasons)
    return "ok"


# The table's columns: (header, justify). Every column has one unit, named in its header
# (KB = 1000 B, as the fabric file reads it; % of the run), so the cells are bare numbers
# that never wrap; the ECN column is never wrapped (a threshold pair cut in two reads as
# two settings) and the DCQCN and verdict columns wrap at their spaces.
_ECN = "ECN KB @P%"


# Headers on two lines where a phrase and its unit would make a column wider than its numbers.
_HEADERS = {
    "busbw GB/s": "busbw\nGB/s",
    "slowest % bound": "slowest\n% bound",
    "pause thr KB": "pause\nthr KB",
    "paused %": "paused\n%",
    "util %": "util\n%",
    "util (run) %": "util\n(run) %",
    "queue p99 KB": "queue\np99 KB",
    "onset peak KB": "onset\npeak KB",
}


def _column_options(column: str) -> dict[str, Any]:
    """Numbers at their width, right-aligned; the ECN pair whole; the verdict takes the
    width left over (at least a whole "recommended") and wraps at its spaces."""
    if column == "verdict":
        return {"justify": "left", "ratio": 1, "min_width": len("recommended:")}
    if column == _ECN:
        return {"justify": "left", "no_wrap": True}
    if column == "DCQCN":
        return {"justify": "left"}
    # numbers never wrap: rich narrows the widest wrapping columns first (DCQCN, verdict)
    return {"justify": "right", "no_wrap": True}


def _ecn_cell(trial: Trial) -> str:
    """``150-1500 @100``: both thresholds in KB, then the marking probability in %."""
    ecn = trial.candidate.ecn
    low, high = (f"{v / 1000:.1f}".removesuffix(".0") for v in (ecn.min_bytes, ecn.max_bytes))
    return f"{low}-{high} @{ecn.max_probability}"


def _kb(value: float) -> str:
    return f"{value / 1000:.0f}"


def _columns(stage: Stage, objective: ObjectiveSpec) -> list[str]:
    columns = ["#", _ECN]
    if any(t.candidate.dcqcn for t in stage.trials):
        columns.append("DCQCN")
    if objective.beside:
        columns += ["QPs", "slowest % bound"]  # the slowest job's share of its NICs' bound
    elif objective.name == "collective":
        columns += ["QPs", "busbw GB/s"]
    columns += ["pause thr KB", "paused %", "util %"]
    if objective.name != "collective":
        columns.append("util (run) %")  # the whole run, onset included: a constraint too
    columns += ["Jain", "queue p99 KB", "onset peak KB", "CE %", "drops", "verdict"]
    return columns


def stage_table(speed: SpeedResult, stage: Stage, objective: ObjectiveSpec | None = None) -> Table:
    """The trade-off table of one speed: the decision's trial first (the recommendation, or
    the current setting for no change), then the ranking's order, the best :data:`TABLE_ROWS`
    and the current setting. It fits 100 columns without cutting a cell."""
    objective = objective or ObjectiveSpec()
    load = and_list(speed.load_points) or str(speed.senders)
    what = ("ECN x DCQCN" if stage.kind == "joint" else "ECN on the RoCE queue") + _ran(objective)
    decided = speed.decision.trial
    order = [t for t in ranked(stage.trials, objective) if t is not decided]
    order = [decided, *order] if decided is not None else order
    shown = [t for i, t in enumerate(order) if i < TABLE_ROWS or t.candidate.current]
    columns = _columns(stage, objective)
    table = folding_table(
        f"{format_speed(speed.speed_bps)}: {what}, {load} "
        f"{'ranks' if objective.name == 'collective' else 'senders'} (pause threshold today "
        f"{kb(speed.pause_threshold_bytes)}; {len(shown)} of {len(stage.trials)} candidates shown)",
        # One bar between columns and no padding: 13 columns of bars and padding would take
        # 40 of a 100-column terminal, and the verdict would be left 2 characters.
        box=box.MINIMAL,
        padding=(0, 0),
        show_edge=False,
    )
    for column in columns:
        add_column(table, _HEADERS.get(column, column), **_column_options(column))
    for trial in shown:
        table.add_row(*_row(trial, speed.decision, columns))
    return table


def _ran(objective: ObjectiveSpec) -> str:
    """What each candidate ran, for the table's title ("" for a scenario)."""
    if objective.beside:
        return " x QPs, " + " beside ".join(f"{j.name} ({j.what()})" for j in objective.jobs)
    if objective.job is not None and (objective.job.step or objective.job.spec.algorithm == "tree"):
        return f" x QPs, {objective.job.what()}"
    if objective.name == "collective":
        tree = ", all-reduce by tree" if objective.algorithm == "tree" else ""
        return f" x QPs, {objective.workload} of {mib(objective.size_bytes)}{tree}"
    return ""


def _row(trial: Trial, decision: Decision, columns: list[str]) -> list[str]:
    c = trial.candidate
    row = [str(c.index), _ecn_cell(trial)]
    if "DCQCN" in columns:
        row.append(c.dcqcn_label())
    if "busbw GB/s" in columns:
        row += [str(c.qps), f"{_at_heaviest(trial) / 1e9:.1f}" if trial.runs else "-"]
    if "slowest % bound" in columns:
        share = _at_heaviest(trial, "bound_fraction") if trial.runs else None
        row += [str(c.qps), "-" if share is None else f"{share:.1%}".removesuffix("%")]
    if trial.runs:
        fairness = trial.worst_jain()
        row += [
            _kb(trial.runs[0].pause_threshold_bytes),
            f"{trial.worst_paused():.1%}".removesuffix("%"),
            f"{trial.worst_utilisation():.1%}".removesuffix("%"),
            *(
                [f"{trial.worst_whole_utilisation():.1%}".removesuffix("%")]
                if "util (run) %" in columns
                else []
            ),
            "-" if fairness is None else f"{fairness:.2f}",
            _kb(_at_heaviest(trial, "queue_p99_bytes")),
            _kb(trial.mean("queue_peak_bytes")),
            f"{trial.mean('ce_fraction'):.1%}".removesuffix("%"),
            str(trial.drops()),
        ]
    else:
        row += ["-"] * (len(columns) - len(row) - 1)
    verdict = _verdict(trial, decision)
    row.append(f"current; {verdict}" if c.current else verdict)
    return row


def _at_heaviest(trial: Trial, name: str = "busbw_Bps") -> float:
    """``name`` as the ranking and the explanation read the objective: the mean of the seeds
    at the heaviest load point (the stated job), so the table's numbers are theirs."""
    return mean_at(trial, max(r.senders for r in trial.runs), name)


def method_line(speed: SpeedResult) -> str:
    """How the speed was searched and how many runs it took."""
    if speed.method == "grid":
        how = f"full grid (at most {FULL_GRID_MAX_RUNS} runs)"
    else:
        how = (
            "successive halving ("
            + " -> ".join(
                f"{r.candidates} x {len(r.points)} at {r.fidelity} = {r.runs}" for r in speed.rungs
            )
            + ")"
        )
    if speed.held_out is not None:
        how += f" + {2 * len(speed.held_out.runs)} held out"
    return (
        f"{format_speed(speed.speed_bps)}: {how}; {speed.runs} runs, "
        f"{len(speed.ecn.trials)} candidates"
    )


def _collective_of(result: TuneResult) -> str:
    """Whose collective the table's busbw is: the job file's, ``--ranks``' or every NIC's."""
    objective = result.objective
    if objective.job is not None:
        job = objective.job
        return f" of job {job.name} ({job.ranks} GPUs on {job.hosts} hosts)"
    if objective.ranks:
        return f" on {objective.ranks} ranks, one per host"
    return " of every GPU NIC at the speed"


def render(result: TuneResult, console: Console) -> None:
    obj = result.objectives
    if result.objective.beside:
        target = f"{result.objective.describe()} (highest)"
        runs = f"{result.scenario} side by side, each run until the last job completes"
    elif result.objective.name == "collective":
        of = _collective_of(result)
        target = f"{result.objective.busbw_of} busbw{of} (highest)"
        step = result.objective.busbw_of == "step"
        until = "each collective of the step" if step else "the collective"
        runs = f"{result.scenario}, each run until {until} completes"
    else:
        target = "p99 queue (lowest)"
        runs = (
            f"{result.scenario}, {result.duration_s * 1e3:g} ms per run (measured over the "
            "second half)"
        )
    console.print(
        f"tune {result.fabric} ({result.profile}): objective {result.objective.name} -- "
        f"{target}; {runs}, seeds {', '.join(map(str, result.seeds))}; constraints at every load "
        f"point and seed: {obj.describe()}",
        markup=False,
    )
    for speed in result.speeds:
        console.print(method_line(speed), markup=False)
        for stage in speed.stages:
            console.print(stage_table(speed, stage, result.objective))
    for speed in result.speeds:
        if speed.summary:
            console.print(speed.summary, markup=False, soft_wrap=True)
        console.print(speed.explanation, markup=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print(
        f"{result.runs} runs, {', '.join(s.method for s in result.speeds)}; wall time "
        f"{result.wall_s:.1f} s",
        markup=False,
    )


def job_override(result: TuneResult) -> dict[str, Any] | None:
    """The profile's ``job:`` values for the collective objective's QPs per connection, so the
    fabric carries them and ``roce-agent nccl`` prints them (NCCL_IB_QPS_PER_CONNECTION); none
    for no change (the fabric's own stay as they are). Split
    mode goes with more than one QP because the twin measured it that way
    (agent.twin.search: a connection spreads over its QPs only when each message is split);
    with one QP it is cleared (null: NCCL's default), so no stale ``true`` stays behind."""
    qps = result.qps_per_connection()
    if qps is None or not result.decision().changes:
        return None
    return {"job": {"qps_per_connection": qps, "split_data_on_qps": True if qps > 1 else None}}


def override_document(result: TuneResult, existing: dict[str, Any]) -> dict[str, Any] | None:
    """The fabric's ``overrides:`` with the recommendation merged in (a drop-in replacement
    for the fabric file's block; for no change, the block as it is), or None without a
    recommendation for the dominant speed."""
    tuned = result.override()
    if tuned is None:
        return None
    tuned = {**tuned, **(job_override(result) or {})}

    def merge(base: dict[Any, Any], extra: dict[Any, Any]) -> dict[Any, Any]:
        out = dict(base)
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = value
        return out

    return {"overrides": merge(existing, tuned)}


def apply_steps(result: TuneResult, fabric: Path, override_file: Path | None) -> list[str]:
    """What must change and the exact commands: the fabric file's overrides (switch ECN and,
    with auto, the pause threshold; host NICs' DCQCN), then check, diff, apply.  Nothing for
    no change (the decision keeps the fabric as it is) or without a recommendation."""
    tuned = result.override()
    if not tuned:
        return []
    source = override_file or Path("tuned.yml")
    steps = [
        f"file to change: {fabric} -- replace its `overrides:` block with {source}'s "
        "(written with --write-override; the fabric's other overrides are kept)",
        f"roce-agent check {fabric}",
        f"roce-agent plan {fabric}",
        f"roce-agent diff {fabric}",
    ]
    switches = _switch_changes(tuned)
    if "nic" in tuned:
        steps.append(
            f"roce-agent apply {fabric} --include-hosts   # switches ({switches}) and "
            "the hosts' NIC DCQCN"
        )
    else:
        steps.append(f"roce-agent apply {fabric}   # switches ({switches})")
    qps = result.qps_per_connection()
    if qps is not None:
        steps.append(
            f"jobs: the override's job.qps_per_connection={qps} makes it the fabric's; "
            f"`roce-agent nccl {fabric}` then prints NCCL_IB_QPS_PER_CONNECTION={qps}"
            + (" NCCL_IB_SPLIT_DATA_ON_QPS=1" if qps > 1 else "")
            + " for the job's environment"
        )
    steps.append(f"roce-agent validate {fabric}   # then the lab check (docs/tuning.md)")
    return steps


def _switch_changes(tuned: dict[str, Any]) -> str:
    """What apply changes on the switches: the RoCE class's mode when the override moves it
    (``tune --modes``), and its ECN."""
    if tuned.get("mode") == "lossy-trim":
        return (
            "RoCE class lossy-trim: trimming, no PFC; ECN"
            if "ecn" in tuned
            else ("RoCE class lossy-trim: trimming, no PFC")
        )
    if "mode" in tuned:
        return f"RoCE class {tuned['mode']}: PFC, headroom" + (", ECN" if "ecn" in tuned else "")
    return "ECN, pause threshold"


def counted(runner: Runner, bars: ProgressBars) -> Runner:
    """The runner, with a progress bar per batch of runs (a rung of one speed)."""

    def run(jobs: list[Job]) -> Iterator[RunMetrics]:
        first = jobs[0] if jobs else None
        what = (first.label or f"tune {format_speed(first.speed_bps)}") if first else "tune"
        task = bars.add(what, len(jobs))
        for done, metrics in enumerate(runner(jobs), start=1):
            bars.update(task, done, f"{done} of {len(jobs)} runs")
            yield metrics

    return run


def check_writable(path: Path, option: str = "--write-override") -> None:
    """Refuse an override file that cannot be written before the search, not after minutes
    of it: its folder must exist and be writable, and the path no folder (exit 2, the
    option named)."""
    folder = path.parent if str(path.parent) else Path(".")
    reason = None
    if not folder.is_dir():
        reason = f"its folder {folder} does not exist"
    elif path.is_dir():
        reason = "it is a folder"
    elif not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        reason = "it cannot be written (permissions)"
    if reason is not None:
        raise click.BadParameter(
            f"Expected: a file tune can write Actual: {path}: {reason}",
            param_hint=f"'{option}'",
        )


def write_override(path: Path, result: TuneResult, fabric: Path, why: str = "") -> bool:
    data, _ = load_yaml(fabric)
    existing = data.get("overrides") if isinstance(data, dict) else None
    document = override_document(result, existing if isinstance(existing, dict) else {})
    if document is None:
        return False
    speed = format_speed(result.dominant_speed_bps)
    decision = result.decision()
    steps = "".join(f"#   {s}\n" for s in apply_steps(result, fabric, path))
    then = (
        f"# Then:\n{steps}"
        if steps
        else "# The fabric's overrides: block as it is: nothing to apply.\n"
    )
    mode = result.mode_override.get("mode")
    header = (
        f"# roce-agent tune {fabric.name}: the decision for {speed} (the fabric's "
        "dominant host speed),\n"
        f"# {decision.headline()}\n"
        + (f"# RoCE mode {mode} (tune --modes: {why}).\n" if mode else "")
        + f"# objective {result.objective.name} ({result.objective.describe()}), {result.scenario} "
        "in the twin, "
        f"{_run_length(result)}, seeds {', '.join(map(str, result.seeds))}.\n"
        f"{then}"
    )
    try:
        path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    except OSError as exc:
        raise AgentError(f"--write-override {path}: {exc.strerror or exc}") from None
    return True


def fabric_dcqcn(intent: FabricIntent) -> tuple[tuple[str, int], ...]:
    """The DCQCN values the fabric's hosts get (the NIC plan's, by their fabric-file names)."""
    from agent.intent.model import Dcqcn
    from agent.intent.plan import nic_plan

    planned = nic_plan(intent.profile).dcqcn
    return tuple(sorted((k, v) for k, v in planned.items() if k in Dcqcn.model_fields))


def write_finalists(path: Path, result: TuneResult, fabric: Path) -> None:
    """The dominant speed's best candidates as a lab check's ``candidates:`` (nothing written
    without one meeting the constraints: said on stderr)."""
    speed = result.dominant()
    listed = finalists(speed, result.objective) if speed is not None else []
    err = literal_console(stderr=True)
    if not listed:
        err.print(f"--write-finalists {path}: nothing written: no candidate meets the "
                  "constraints", markup=False)  # fmt: skip
        return
    header = (
        f"# roce-agent tune {fabric.name}: the {len(listed)} best candidates at "
        f"{format_speed(result.dominant_speed_bps)} ({result.objective.describe()}), for a lab "
        "check (ecn_sweep candidates:) whose report tune --calibration reads.\n"
    )
    try:
        path.write_text(header + yaml.safe_dump({"candidates": listed}, sort_keys=False))
    except OSError as exc:
        raise AgentError(f"--write-finalists {path}: {exc.strerror or exc}") from None
    err.print(f"finalists written to {path}", markup=False)


@click.command("tune")
@examples(
    "roce-agent tune fabric.yml",
    "roce-agent tune fabric.yml --objective queue --scenario incast --duration 5ms",
    "roce-agent tune fabric.yml --speed 400G --write-override tuned.yml -o json",
    "roce-agent tune fabric.yml --executor dask://10.0.0.5:8786",
    "roce-agent tune fabric.yml --modes lossless,lossy-trim --write-override tuned.yml",
)
@FABRIC
@click.option(
    "--objective", type=click.Choice(OBJECTIVES), default=DEFAULT_OBJECTIVE, show_default=True,
    help="collective: maximise a collective's busbw (--workload/--ranks/--size); queue: "
    "minimise the bottleneck's p99 queue on --scenario.",
)  # fmt: skip
@click.option(
    "--job", "job_file", type=click.Path(path_type=Path, dir_okay=False),
    help="Tune for the job of a job file (twin --job's YAML: its hosts or hostfile, NICs, "
    "collective, size; several jobs: side by side, for the slowest job's share of its bound); "
    "instead of --workload, --ranks, --size and --speed.",
)  # fmt: skip
@click.option(
    "--workload", type=click.Choice(COLLECTIVE_WORKLOADS), default="allreduce",
    show_default=True, help="Collective (objective collective).",
)  # fmt: skip
@click.option(
    "--ranks", type=click.IntRange(2, MAX_TUNE_RANKS), default=None,
    help="Collective ranks, one per host, over two leaves (default: every GPU NIC at the "
    "speed, one rank each, rail-aligned rings on multi-NIC hosts).",
)  # fmt: skip
@click.option(
    "--size", type=SizeType(), default="64MiB", show_default=True,
    help="Collective size per rank, nccl-tests' -b (e.g. 64MiB).",
)  # fmt: skip
@click.option(
    "--algorithm", type=click.Choice(ALGORITHMS), default="ring", show_default=True,
    help="NCCL's algorithm for the all-reduce (NCCL_ALGO): ring, tree, or auto (as NCCL's "
    "cost model picks it for --size and the ranks, resolved once at that size).",
)  # fmt: skip
@click.option(
    "--qps", "qps", default=",".join(map(str, QPS_LEVELS)), show_default=True, callback=_qps,
    help="QPs per connection searched (objective collective; comma-separated, each >= 1).",
)  # fmt: skip
@click.option(
    "--speed", "speeds", type=SpeedType(), multiple=True,
    help="Tune this host link speed (repeat; default: every speed of the fabric's hosts).",
)  # fmt: skip
@click.option(
    "--scenario", type=click.Choice(TUNE_SCENARIOS), default="incast", show_default=True,
    help="Traffic each candidate runs (objective queue).",
)  # fmt: skip
@click.option(
    "--senders", type=click.IntRange(1, 64), default=DEFAULT_SENDERS, show_default=True,
    help="Incast senders N (hosts, for all-to-all); also judged at max(2, N/4).",
)  # fmt: skip
@click.option(
    "--duration", type=Duration(MAX_DURATION_S), default=DEFAULT_DURATION, show_default=True,
    help="Simulated time per full run, with its unit (at most 100ms); measured over its "
    "second half.",
)  # fmt: skip
@click.option(
    "--payload", "payload_bytes", type=click.IntRange(64, 4096),
    help="RoCE payload bytes per packet the hosts send (objective queue) [default: the ports' "
    "RoCE MTU, 4096 at MTU 9000]; the grid's frame bounds use it (the lab's probes send 1000).",
)  # fmt: skip
@click.option(
    "--candidates", type=click.IntRange(MIN_CANDIDATES, MAX_CANDIDATES), default=None,
    help=f"ECN settings per speed, times the DCQCN and QP levels (default: "
    f"{COLLECTIVE_CANDIDATES} for the collective, {DEFAULT_CANDIDATES} for the queue objective).",
)  # fmt: skip
@click.option(
    "--seeds", type=click.IntRange(1, 8), default=2, show_default=True,
    help="Seeds per candidate (1..N); the constraints must hold in every one.",
)  # fmt: skip
@click.option(
    "--dcqcn/--no-dcqcn", default=True, show_default=True,
    help="Search the NICs' DCQCN rate increase jointly with ECN (--no-dcqcn: keep the NICs').",
)  # fmt: skip
@click.option(
    "--method", type=click.Choice(("auto", "grid", "halving")), default="auto",
    show_default=True,
    help=f"auto: the full grid up to {FULL_GRID_MAX_RUNS} runs, successive halving above.",
)  # fmt: skip
@click.option(
    "--max-paused", type=PERCENT, default=5.0, show_default=True,
    help="Hard limit: paused fraction of any port or NIC, %.",
)  # fmt: skip
@click.option(
    "--min-utilisation", type=PERCENT, default=90.0, show_default=True,
    help="Hard floor: bottleneck utilisation, %.",
)  # fmt: skip
@click.option(
    "--min-jain", type=FiniteFloat(0, 1), default=0.9, show_default=True,
    help="Hard floor: Jain's index over the flows sharing the bottleneck.",
)  # fmt: skip
@click.option(
    "--jobs", type=click.IntRange(1, 16), default=1, show_default=True,
    help="Processes running candidates in parallel.",
)  # fmt: skip
@click.option(
    "--executor", type=ExecutorType(), default=None, metavar="dask://HOST:PORT",
    help="Run the candidates on the workers of this running Dask cluster, not in local "
    "processes: the same results (the workers need this version of the package; --jobs 1).",
)  # fmt: skip
@click.option(
    "--executor-timeout", type=Duration(MAX_EXECUTOR_TIMEOUT_S), default=f"{CLUSTER_TIMEOUT_S:g}s",
    show_default=True,
    help="--executor: how long to wait for its scheduler to answer, and for a worker when it "
    "has none.",
)  # fmt: skip
@click.option(
    "--min-goodput", type=PERCENT, default=None,
    help="Hard floor (objective queue): the receiver's goodput over the whole run as the lab "
    "check measures it (payload bits / line rate; 1000-byte packets fill a wire at 92.4 %), %.",
)  # fmt: skip
@click.option(
    "--calibration", type=click.Path(path_type=Path, dir_okay=False), multiple=True,
    help="A lab check's report (run --report-file, an ecn_sweep step; repeat): --min-goodput "
    "is raised by the twin's goodput error above the lab's, a checked setting's own, the "
    "median elsewhere.",
)  # fmt: skip
@click.option(
    "--modes", callback=_modes, metavar="MODE[,MODE]",
    help="Tune the fabric in each RoCE mode listed (lossless, lossy-trim: trimming, no PFC) "
    "and compare their best settings, with a recommendation and what switching needs "
    "[default: the fabric's own mode].",
)  # fmt: skip
@OUTPUT
@click.option(
    "--write-override", "override_file", type=click.Path(path_type=Path, dir_okay=False),
    help="Write the fabric's overrides: block with the recommendation (YAML).",
)  # fmt: skip
@click.option(
    "--write-finalists", "finalists_file", type=click.Path(path_type=Path, dir_okay=False),
    help=f"Write the {FINALISTS} best candidates of the dominant speed as an ecn_sweep's "
    "candidates: (YAML), for the lab check that measures the twin's error (objective queue).",
)  # fmt: skip
@PROGRESS
@handle_errors
def tune_command(fabric: Path, **options: Any) -> None:
    """Search ECN x DCQCN (x QPs per connection) jointly per link speed in the twin.

    Exit 0: a recommendation for every speed ("no change" is one); 1: some speed has none,
    or nothing to tune (no speed with two hosts; no room for an ECN ramp); 2: bad input.
    """
    flags = TuneFlags(**options)
    intent = load_fabric(fabric).intent
    jobs = () if flags.job_file is None else _tuned_jobs(intent, flags.job_file)
    modes = _compared_modes(flags, intent)
    flags = flags.calibrated(intent)
    for option, path in (("--write-override", flags.override_file),
                         ("--write-finalists", flags.finalists_file)):  # fmt: skip
        if path is not None:
            check_writable(path, option)
    compared: ModesResult | None = None
    with (
        search_runner(flags.jobs, flags.executor, flags.executor_timeout) as runner,
        ProgressBars(flags.progress) as bars,
    ):
        run = counted(runner, bars)
        if modes is None:
            result = flags.search(intent, run, jobs)
        else:
            compared = tune_modes(intent, modes, lambda moved: flags.search(moved, run, jobs))
            result = compared.chosen()
    override_file = flags.override_file
    written = False
    if override_file is not None:
        why = compared.reason if compared is not None else ""
        written = write_override(override_file, result, fabric, why)
    if flags.finalists_file is not None:
        write_finalists(flags.finalists_file, result, fabric)
    steps = apply_steps(result, fabric, override_file)
    if flags.output == "json":
        data = result.to_json() if compared is None else _modes_json(compared, result)
        data["override_file"] = str(override_file) if written else None
        data["apply"] = steps
        echo_json(data)
    else:
        console = literal_console()
        if compared is None:
            render(result, console)
        else:
            render_modes(compared, console)
        for step in steps:
            console.print(f"next: {step}", markup=False, soft_wrap=True)
    _report(result, override_file, written)


def _compared_modes(flags: TuneFlags, intent: FabricIntent) -> tuple[str, ...] | None:
    """--modes' modes, None for the fabric's own alone (today's tune, its output as it was);
    the lab check's options refused beside another mode (exit 2, the option named)."""
    if flags.modes is None or flags.modes == (intent.profile.mode,):
        return None
    ctx = click.get_current_context()
    lab = [n for n in ("calibration", "finalists_file")
           if ctx.get_parameter_source(n) != click.core.ParameterSource.DEFAULT]  # fmt: skip
    check_modes_options(flags.modes, intent.profile.mode, [_option_name(ctx, n) for n in lab])
    return flags.modes


def _modes_json(compared: ModesResult, chosen: TuneResult) -> dict[str, Any]:
    """``-o json`` of ``tune --modes``: every mode's tune and row, the recommended mode, why,
    what switching needs, and the override written (the recommended mode's)."""
    data = compared.to_json()
    data["override"] = chosen.override()
    return data


def render_modes(compared: ModesResult, console: Console) -> None:
    """Every mode's tune as ``tune`` shows it, then the modes side by side, the recommended
    mode and why, and what the fabric must support to switch."""
    for mode_tune in compared.tunes:
        own = " (the fabric's)" if mode_tune.mode == compared.fabric_mode else ""
        console.print(f"== mode {mode_tune.mode}{own} ==", markup=False)
        render(mode_tune.result, console)
    side = folding_table(f"tune --modes on {compared.tunes[0].result.fabric}: each mode's "
                         "decided setting at the stated job")  # fmt: skip
    add_column(side, "metric", justify="left")
    for mode_tune in compared.tunes:
        add_column(side, mode_tune.mode, justify="right")
    for name, cells in table_rows(compared):
        side.add_row(name, *cells)
    console.print(side)
    for note in compared.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    console.print(f"recommended mode: {compared.recommended} -- {compared.reason}",
                  markup=False, soft_wrap=True)  # fmt: skip
    for line in support_lines(compared.support):
        console.print(f"to switch to lossy-trim: {line}", markup=False, soft_wrap=True)


@dataclass(frozen=True)
class TuneFlags:
    """``roce-agent tune``'s options as the command line gives them: what to search
    (objective, workload, speeds, scenario, grid), its hard constraints, where it runs
    (``--jobs``, ``--executor``) and where the result goes."""

    objective: Any
    job_file: Path | None
    workload: str
    ranks: int | None
    size: int
    algorithm: Any
    qps: tuple[int, ...]
    speeds: tuple[int, ...]
    scenario: Any
    senders: int
    duration: float
    payload_bytes: int | None
    candidates: int | None
    seeds: int
    dcqcn: bool
    method: str
    max_paused: float
    min_utilisation: float
    min_jain: float
    jobs: int
    executor: str | None
    executor_timeout: float
    min_goodput: float | None
    calibration: tuple[Path, ...]
    output: str
    override_file: Path | None
    finalists_file: Path | None
    progress: bool | None
    modes: tuple[str, ...] | None = None  # --modes (None: the fabric's own)
    margin: Calibration | None = None  # --calibration's, read (calibrated)
    dcqcn_base: tuple[tuple[str, int], ...] = ()  # the fabric's DCQCN (calibrated)

    def calibrated(self, intent: FabricIntent) -> TuneFlags:
        """These flags with --calibration's reports read; the goodput options refused where
        they do not apply (exit 2, the option named)."""
        lab = [("--min-goodput", self.min_goodput is not None),
               ("--calibration", bool(self.calibration)),
               ("--write-finalists", self.finalists_file is not None)]  # fmt: skip
        for option, given in lab:
            if given and (self.objective != "queue" or self.scenario == "all-to-all"):
                raise TwinError(
                    f"tune {option}: Expected: --objective queue on the incast or victim "
                    f"scenario (the lab check's incast, one receiver) Actual: --objective "
                    f"{self.objective} --scenario {self.scenario}"
                )
        if self.calibration and self.min_goodput is None:
            raise TwinError(
                "tune --calibration: Expected: --min-goodput (the margin is the twin's error "
                "above that floor) Actual: no --min-goodput"
            )
        if not self.calibration:
            return self
        base = fabric_dcqcn(intent)
        margin = read_calibration(self.calibration, intent.name, base)
        return replace(self, margin=margin, dcqcn_base=base)

    def objectives(self) -> Objectives:
        """The hard constraints these options set."""
        margin = self.margin
        return Objectives(
            self.max_paused / 100,
            self.min_utilisation / 100,
            self.min_jain,
            None if self.min_goodput is None else self.min_goodput / 100,
            margin.margin if margin is not None else 0.0,
            margin.describe() if margin is not None else "",
            margin.by_setting() if margin is not None else (),
            dcqcn_base=self.dcqcn_base,
        )

    def search(
        self, intent: FabricIntent, runner: Runner, jobs: tuple[TunedJob, ...]
    ) -> TuneResult:
        """The search these options ask for (for ``jobs``, a job file's), on ``runner``."""
        objective = ObjectiveSpec(
            self.objective, self.workload, self.ranks, self.size, algorithm=self.algorithm
        )
        if jobs:
            first, *beside = jobs
            objective = ObjectiveSpec(
                "collective", first.spec.workload, first.ranks, first.spec.size_bytes, first,
                tuple(beside),
            )  # fmt: skip
        return tune(
            intent,
            speeds=self.speeds,
            scenario=self.scenario,
            senders=self.senders,
            duration_s=self.duration,
            candidates=self.candidates,
            seeds=tuple(range(1, self.seeds + 1)),
            dcqcn=self.dcqcn,
            objectives=self.objectives(),
            objective=objective,
            qps_levels=self.qps,
            method=self.method,
            runner=runner,
            payload_bytes=self.payload_bytes,
        )


def _run_length(result: TuneResult) -> str:
    if result.objective.name == "collective":
        return "each run until the collective completes"
    return f"{result.duration_s * 1e3:g} ms per run"


# What a job file says instead (tune --job): the collective's options and the speed.
JOB_FILE_SAYS = (
    "workload", "ranks", "size", "algorithm", "speeds", "scenario", "senders", "payload_bytes",
)  # fmt: skip


def _tuned_jobs(intent: FabricIntent, job_file: Path) -> tuple[TunedJob, ...]:
    """The jobs of ``job_file`` placed on the fabric as twin --job places them; an error
    naming the option that clashes, or the job file's line, or jobs at two speeds."""
    from agent.twin.jobfile import load_jobs, resolve_jobs
    from agent.twin.network import build_network
    from agent.twin.placement import place_ranks, resolve_algorithm

    _check_job_options(job_file)
    network = build_network(intent)
    jobs = []
    for named in resolve_jobs(load_jobs(job_file), network):
        placement = place_ranks(network, named.spec)
        spec = replace(
            named.spec,
            ranks=len(placement.endpoints),
            hosts=tuple(placement.endpoints),
            speed_bps=placement.speed_bps,
        )
        # auto, as NCCL picks it for each collective at its stated size: a rung's smaller
        # size runs the same algorithm as the job it screens for.
        step = tuple(
            replace(part, algorithm=resolve_algorithm(part.of(spec), placement)[0].algorithm)
            for part in named.step
        )
        spec = resolve_algorithm(spec, placement)[0]
        jobs.append(TunedJob(named.name, spec, placement.rails, step))
    _check_one_setting(jobs)
    return tuple(jobs)


def _check_one_setting(jobs: list[TunedJob]) -> None:
    """Jobs side by side share what tune searches: one speed's ECN and DCQCN, and the QPs the
    override makes the fabric's (every job's NCCL environment): refused when they differ."""
    if len({job.speed_bps for job in jobs}) > 1:
        speeds = ", ".join(f"{j.name} {format_speed(j.speed_bps)}" for j in jobs)
        raise TwinError(
            f"tune --job: Expected: jobs whose NICs run at one speed (tune searches one "
            f"speed's setting) Actual: {speeds}"
        )
    qps = {(j.spec.qps_per_connection, j.spec.split_data_on_qps) for j in jobs}
    if len(qps) > 1:
        each = ", ".join(
            f"{j.name} {j.spec.qps_per_connection}{' split' if j.spec.split_data_on_qps else ''}"
            for j in jobs
        )
        raise TwinError(
            "tune --job: Expected: the same qps_per_connection and split_data_on_qps in every "
            "job (today's setting; the override's QPs become every job's) Actual: " + each
        )


def _check_job_options(job_file: Path) -> None:
    """--job beside an option the job file answers, or beside the queue objective: refused."""
    ctx = click.get_current_context()
    source = ctx.get_parameter_source
    given = [n for n in JOB_FILE_SAYS if source(n) != click.core.ParameterSource.DEFAULT]
    if ctx.params["objective"] != "collective":
        raise TwinError(
            f"tune --objective: Expected: collective with --job (the job's busbw) Actual: "
            f"{ctx.params['objective']}"
        )
    if given:
        option = _option_name(ctx, given[0])
        raise TwinError(
            f"tune {option}: Expected: --job or {option}, not both (the job file says what the "
            f"job runs, at its NICs' speed; the objective is its busbw) Actual: --job {job_file} "
            f"{option}"
        )


def _option_name(ctx: click.Context, name: str) -> str:
    """The option as the user types it (``speeds`` is ``--speed``)."""
    param = next(p for p in ctx.command.params if p.name == name)
    return max(param.opts, key=len)


def _report(result: TuneResult, override_file: Path | None, written: bool) -> None:
    err = literal_console(stderr=True)
    if written:
        unchanged = "" if result.override() else " (no change: the overrides as they are)"
        err.print(f"override written to {override_file}{unchanged}", markup=False)
    elif override_file is not None:
        err.print(
            f"--write-override {override_file}: nothing written: no recommendation for "
            f"{format_speed(result.dominant_speed_bps)}, the fabric's dominant speed",
            markup=False,
        )
    missing = [format_speed(s.speed_bps) for s in result.speeds if s.recommended is None]
    if missing:
        err.print(
            f"no candidate meets the constraints at {', '.join(missing)} (see the explanation)",
            markup=False,
        )
    sys.exit(EXIT_FAILED if missing else EXIT_OK)

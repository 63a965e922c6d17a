"""``roce-agent tune FABRIC``: search ECN (and DCQCN) settings per link speed in the twin.

The search, its objectives and its ranking are :mod:`agent.twin.search`'s; this module reads the
fabric, prints the trade-off table and the one-line explanation per speed, and writes the
profile override.

Exit codes: 0 a recommendation for every speed; 1 some speed has no candidate meeting the
hard objectives (named on stderr; no override is written if that is the dominant speed);
2 bad input, one located line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from agent.app.support import (
    EXIT_FAILED,
    EXIT_OK,
    FABRIC,
    OUTPUT,
    PROGRESS,
    ProgressBars,
    handle_errors,
)
from agent.app.twin import SpeedType
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.intent.units import format_speed
from agent.twin.search import (
    DEFAULT_CANDIDATES,
    DEFAULT_SENDERS,
    MAX_CANDIDATES,
    MAX_DURATION_S,
    MIN_CANDIDATES,
    TUNE_SCENARIOS,
    Job,
    Objectives,
    RunMetrics,
    Runner,
    SpeedResult,
    Stage,
    Trial,
    TuneResult,
    kb,
    pool_runner,
    ranked,
    serial_runner,
    tune,
)
from common.clicktypes import Duration, FiniteFloat
from common.yamlsource import load_yaml

DEFAULT_DURATION = "5ms"
PERCENT = FiniteFloat(0, 100)


def _console() -> Console:
    return Console(highlight=False, width=None if sys.stdout.isatty() else 180)


def _verdict(trial: Trial, best: Trial | None) -> str:
    if trial is best:
        return "recommended"
    if trial.invalid is not None:
        return f"invalid: {trial.invalid}"
    if trial.reasons:
        return "rejected: " + "; ".join(trial.reasons)
    return "ok"


def stage_table(speed: SpeedResult, stage: Stage) -> Table:
    """The trade-off table of one stage, best first (the ranking's order)."""
    what = "ECN on the RoCE queue" if stage.kind == "ecn" else "DCQCN (with the current ECN)"
    table = Table(
        title=f"{format_speed(speed.speed_bps)}: {what}, {speed.senders}:1 "
        f"(pause threshold today {kb(speed.pause_threshold_bytes)})"
    )
    columns = ["#", "ECN min-max @P"]
    if stage.kind == "dcqcn" or any(t.candidate.dcqcn for t in stage.trials):
        columns.append("DCQCN")
    columns += ["pause thr", "paused", "paused (run)", "util", "queue p99", "onset peak", "CE",
                "lossless drops", "verdict"]  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in ("ECN min-max @P", "DCQCN",
                                                             "verdict") else "right")  # fmt: skip
    for trial in ranked(stage.trials):
        c = trial.candidate
        row = [f"{c.index}{' (current)' if c.current else ''}", c.ecn.label()]
        if "DCQCN" in columns:
            row.append(c.dcqcn_label())
        if trial.runs:
            row += [
                kb(trial.runs[0].pause_threshold_bytes),
                f"{trial.worst_paused():.1%}",
                f"{trial.mean('paused_fraction_whole'):.1%}",
                f"{trial.worst_utilisation():.1%}",
                kb(trial.mean("queue_p99_bytes")),
                kb(trial.mean("queue_peak_bytes")),
                f"{trial.mean('ce_fraction'):.1%}",
                str(trial.drops()),
            ]
        else:
            row += ["-"] * 8
        row.append(_verdict(trial, stage.best))
        table.add_row(*row)
    return table


def render(result: TuneResult, console: Console) -> None:
    obj = result.objectives
    console.print(
        f"tune {result.fabric} ({result.profile}): {result.scenario}, "
        f"{result.duration_s * 1e3:g} ms per run (measured over the second half; 'paused "
        "(run)' and 'onset peak' over the whole run), seeds "
        f"{', '.join(map(str, result.seeds))}; objectives: no lossless drop, paused <= "
        f"{obj.max_paused_fraction:.1%}, utilisation >= {obj.min_utilisation:.1%} (worst "
        "seed), then the lowest p99 queue",
        markup=False,
    )
    for speed in result.speeds:
        for stage in speed.stages:
            console.print(stage_table(speed, stage))
    for speed in result.speeds:
        console.print(speed.explanation, markup=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"wall time {result.wall_s:.1f} s", markup=False)


def override_document(result: TuneResult, existing: dict[str, Any]) -> dict[str, Any] | None:
    """The fabric's ``overrides:`` with the recommendation merged in (a drop-in replacement
    for the fabric file's block), or None without a recommendation for the dominant speed."""
    tuned = result.override()
    if tuned is None:
        return None

    def merge(base: dict[Any, Any], extra: dict[Any, Any]) -> dict[Any, Any]:
        out = dict(base)
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = value
        return out

    return {"overrides": merge(existing, tuned)}


def counted(runner: Runner, bars: ProgressBars) -> Runner:
    """The runner, with a progress bar per batch of runs (a stage of one speed)."""

    def run(jobs: list[Job]) -> Iterator[RunMetrics]:
        first = jobs[0] if jobs else None
        what = f"tune {format_speed(first.speed_bps)}" if first is not None else "tune"
        task = bars.add(what, len(jobs))
        for done, metrics in enumerate(runner(jobs), start=1):
            bars.update(task, done, f"{done} of {len(jobs)} runs")
            yield metrics

    return run


def write_override(path: Path, result: TuneResult, fabric: Path) -> bool:
    data, _ = load_yaml(fabric)
    existing = data.get("overrides") if isinstance(data, dict) else None
    document = override_document(result, existing if isinstance(existing, dict) else {})
    if document is None:
        return False
    speed = format_speed(result.dominant_speed_bps)
    header = (
        f"# roce-agent tune {fabric.name}: the recommendation for {speed} (the fabric's "
        "dominant host speed),\n"
        f"# {result.scenario} in the twin, {result.duration_s * 1e3:g} ms, seeds "
        f"{', '.join(map(str, result.seeds))}. Replace the fabric file's `overrides:` block "
        "with this one\n# (it keeps the fabric's other overrides), then `roce-agent check`, "
        "`plan`, `diff`, `apply`.\n"
    )
    try:
        path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    except OSError as exc:
        raise AgentError(f"--write-override {path}: {exc.strerror or exc}") from None
    return True


@click.command("tune")
@FABRIC
@click.option(
    "--speed", "speeds", type=SpeedType(), multiple=True,
    help="Tune this host link speed (repeat; default: every speed of the fabric's hosts).",
)  # fmt: skip
@click.option(
    "--scenario", type=click.Choice(TUNE_SCENARIOS), default="incast", show_default=True,
    help="Traffic each candidate runs (per speed).",
)  # fmt: skip
@click.option(
    "--senders", type=click.IntRange(1, 64), default=DEFAULT_SENDERS, show_default=True,
    help="Incast senders (hosts, for all-to-all); fewer if the speed has fewer hosts.",
)  # fmt: skip
@click.option(
    "--duration", type=Duration(MAX_DURATION_S), default=DEFAULT_DURATION, show_default=True,
    help="Simulated time per run, with its unit (at most 100ms); measured over its second half.",
)  # fmt: skip
@click.option(
    "--candidates", type=click.IntRange(MIN_CANDIDATES, MAX_CANDIDATES),
    default=DEFAULT_CANDIDATES, show_default=True,
    help="ECN grid size per speed (plus the fabric's current setting).",
)  # fmt: skip
@click.option(
    "--seeds", type=click.IntRange(1, 8), default=2, show_default=True,
    help="Seeds per candidate (1..N); the objectives must hold in every one.",
)  # fmt: skip
@click.option(
    "--dcqcn", is_flag=True,
    help="Also search the NICs' DCQCN rate increase (rpg_time_reset, rpg_ai_rate, rpg_hai_rate).",
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
    "--jobs", type=click.IntRange(1, 16), default=1, show_default=True,
    help="Processes running candidates in parallel.",
)  # fmt: skip
@OUTPUT
@click.option(
    "--write-override", "override_file", type=click.Path(path_type=Path, dir_okay=False),
    help="Write the fabric's overrides: block with the recommendation (YAML).",
)  # fmt: skip
@PROGRESS
@handle_errors
def tune_command(
    fabric: Path,
    speeds: tuple[int, ...],
    scenario: Any,
    senders: int,
    duration: float,
    candidates: int,
    seeds: int,
    dcqcn: bool,
    max_paused: float,
    min_utilisation: float,
    jobs: int,
    output: str,
    override_file: Path | None,
    progress: bool | None,
) -> None:
    """Search ECN thresholds (and with --dcqcn the NICs' DCQCN) per link speed in the twin.

    Exit 0: a recommendation for every speed; 1: some speed has none; 2: bad input.
    """
    intent = load_fabric(fabric).intent
    with ProgressBars(progress) as bars:
        result = tune(
            intent,
            speeds=speeds,
            scenario=scenario,
            senders=senders,
            duration_s=duration,
            candidates=candidates,
            seeds=tuple(range(1, seeds + 1)),
            dcqcn=dcqcn,
            objectives=Objectives(max_paused / 100, min_utilisation / 100),
            runner=counted(pool_runner(jobs) if jobs > 1 else serial_runner, bars),
        )
    written = False
    if override_file is not None:
        written = write_override(override_file, result, fabric)
    if output == "json":
        data = result.to_json()
        data["override_file"] = str(override_file) if written else None
        click.echo(json.dumps(data, indent=2))
    else:
        render(result, _console())
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if written:
        err.print(f"override written to {override_file}", markup=False)
    elif override_file is not None:
        err.print(
            f"--write-override {override_file}: nothing written: no recommendation for "
            f"{format_speed(result.dominant_speed_bps)}, the fabric's dominant speed",
            markup=False,
        )
    missing = [format_speed(s.speed_bps) for s in result.speeds if s.recommended is None]
    if missing:
        err.print(
            f"no candidate meets the objectives at {', '.join(missing)} (see the explanation)",
            markup=False,
        )
    sys.exit(EXIT_FAILED if missing else EXIT_OK)

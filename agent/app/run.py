"""``roce-agent run PLAYBOOK FABRIC``: a playbook run on a fabric, its report printed and
filed, and its exit code. ``validate`` runs its playbooks through :func:`run_playbook` too."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from agent.app.output import write_report_file
from agent.app.playbook_report import render_json, render_junit, render_markdown, render_table
from agent.app.support import EXIT_ERROR, EXIT_FAILED, FABRIC, DeviceProgress, handle_errors
from agent.device.push import state_dir as resolve_state_dir
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.ops.playbooks import (
    PlaybookRunner,
    Report,
    StepReport,
    load_playbook,
    playbook_path,
    select_steps,
)
from common.conventions import console, examples, output_option

FORMATS = ("table", "json", "junit", "markdown")
REPORT_FILE = click.option(
    "--report-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the report here: .xml JUnit, .md Markdown, else JSON.",
)
STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where audit logs and transaction records go [default: the agent's state dir].",
)


@dataclass(frozen=True)
class PlaybookRun:
    """A playbook to run on a fabric and where its report goes. ``only`` and ``no_traffic``
    are validate's ``--checks`` and ``--no-traffic``
    (:func:`agent.ops.playbooks.select_steps`)."""

    fabric: Path
    playbook_name: str
    output: str
    report_file: Path | None
    state_dir: Path | None
    only: tuple[str, ...] = ()
    no_traffic: bool = False


def run_playbook(run: PlaybookRun) -> None:
    """Run the playbook, print its report and exit 1 if it failed (2 if it could not run)."""
    intent = load_fabric(run.fabric).intent
    playbook = load_playbook(playbook_path(run.playbook_name))
    try:
        playbook, skip = select_steps(playbook, run.only, no_traffic=run.no_traffic)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--checks'") from None
    err = console(stderr=True)

    def progress(step: StepReport) -> None:
        if run.output == "table" or run.report_file is not None:
            err.print(f"[{step.status}] {step.name} ({step.duration_s:.1f} s)")

    runner = PlaybookRunner(
        intent, resolve_state_dir(run.state_dir), on_step=progress, fabric_file=run.fabric
    )
    # The devices each step reads, done/total and the slowest (nothing off a terminal).
    with DeviceProgress(f"{playbook.name} on {intent.name}", err=err, always=True):
        report = runner.run(playbook, skip)
    if run.only or run.no_traffic:
        report.selection = {"checks": list(run.only), "no_traffic": run.no_traffic}
    _emit(report, run.output, run.report_file)
    if any(s.status == "error" for s in report.steps) and not report.checks and not report.probes:
        sys.exit(EXIT_ERROR)
    if not report.passed:
        sys.exit(EXIT_FAILED)


def _emit(report: Report, output: str, report_file: Path | None) -> None:
    texts = {
        "json": lambda: render_json(report),
        "junit": lambda: render_junit(report),
        "markdown": lambda: render_markdown(report),
    }
    if output == "table":
        render_table(report, console())
    else:
        click.echo(texts[output](), nl=False)
    if report_file is not None:
        write_report_file(report_file, texts, fallback=output if output != "table" else "json")


@click.command("run")
@examples(
    "roce-agent run lossless-rollout fabric.yml",
    "roce-agent run storm-drill fabric.yml -o markdown",
    "roce-agent run my-playbook.yml fabric.yml --report-file report.xml",
)
@click.argument("playbook_name", metavar="PLAYBOOK")
@FABRIC
@output_option(*FORMATS)
@REPORT_FILE
@STATE_DIR
@handle_errors
def run_command(
    playbook_name: str, fabric: Path, output: str, report_file: Path | None, state_dir: Path | None
) -> None:
    """Run PLAYBOOK (a file or lossless-rollout, storm-drill, ecn-sweep, validate) on FABRIC."""
    if not playbook_name:
        raise AgentError("name a playbook")
    run_playbook(PlaybookRun(fabric, playbook_name, output, report_file, state_dir))

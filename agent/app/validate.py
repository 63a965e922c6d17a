"""``roce-agent validate FABRIC``: the validate playbook (or another) with a choice of checks,
read-only when asked, its report for people, tools and CI."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from agent.app.run import FORMATS, REPORT_FILE, STATE_DIR, PlaybookRun, run_playbook
from agent.app.support import FABRIC, handle_errors
from agent.observe.checks import CATALOG
from common.conventions import examples, output_option

HOST_PREFLIGHT = "host-preflight"  # playbooks/host-preflight.yml: `validate --hosts-only`


def _check_ids(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """``--checks RC001,RC101 --checks RC202``: known IDs, in the order given, once each."""
    ids = [part.strip().upper() for value in values for part in value.split(",")]
    unknown = [i for i in ids if i not in CATALOG]
    if unknown or "" in ids:
        raise click.BadParameter(
            f"Expected: check IDs from `roce-agent checks` ({', '.join(CATALOG)}) "
            f"Actual: {', '.join(repr(i) for i in unknown) or repr(values)}",
            param_hint="'--checks'",
        )
    return tuple(dict.fromkeys(ids))


@click.command("validate")
@examples(
    "roce-agent validate fabric.yml",
    "roce-agent validate fabric.yml --no-traffic -o junit > validate.xml",
    "roce-agent validate fabric.yml --checks RC003,RC101",
    "roce-agent validate fabric.yml --hosts-only -o json",
    "roce-agent validate fabric.yml --playbook storm-drill --report-file drill.md",
)
@FABRIC
@click.option(
    "--playbook",
    "playbook_name",
    default="validate",
    show_default=True,
    help="A playbook file, or a shipped one (validate, lossless-rollout, storm-drill, ecn-sweep).",
)
@output_option(*FORMATS)
@REPORT_FILE
@STATE_DIR
@click.option(
    "--hosts-only",
    is_flag=True,
    help="Only the host pre-flight checks (RC202-RC207, playbooks/host-preflight.yml): read "
    "the RDMA hosts, no switch, no traffic.",
)
@click.option(
    "--checks",
    "only",
    multiple=True,
    metavar="ID[,ID…]",
    callback=_check_ids,
    help="Run only these checks (repeatable or comma-separated; `roce-agent checks` lists "
    "them). Traffic steps run only if a chosen check needs traffic.",
)
@click.option(
    "--no-traffic",
    is_flag=True,
    help="Read-only: collect state and counters and run the config, counter and host checks; "
    "no probe, perftest, nccl, locate, storm or apply step (the report says which were "
    "skipped).",
)
@click.pass_context
@handle_errors
def validate_command(ctx: click.Context, /, fabric: Path, hosts_only: bool, **options: Any) -> None:
    """Validate FABRIC: read the switches, drive traffic, run every check.

    --checks runs only some checks and --no-traffic none of the steps that send traffic
    (read-only); the report lists every skipped step with the reason.

    Exit 0 when every check passes, 1 when any fails or is unverified (a host check that
    could not read its source), 2 when validation cannot run (bad input, nothing reachable).
    """
    run = PlaybookRun(fabric=fabric, **options)
    if hosts_only:
        source = ctx.get_parameter_source("playbook_name")
        if source is not None and source != click.core.ParameterSource.DEFAULT:
            raise click.UsageError("--hosts-only runs its own playbook: leave out --playbook")
        run = replace(run, playbook_name=HOST_PREFLIGHT)
    run_playbook(run)

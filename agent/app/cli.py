"""``roce-agent``: the command line.

Exit codes a CI job can rely on, the same for every command (docs/cli-conventions.md): 0 all
as intended, 1 a device not as intended (or unverified, or not reached while others were), 2
the command could not do its job (bad input, nothing reachable, internal error). Errors are
one line each on stderr — never a traceback unless ``--debug`` asks for it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent import __version__
from agent.app.output import echo_json, markdown_table, md_cell
from agent.app.support import EXIT_ERROR, EXIT_FAILED, EXIT_OK, FABRIC, handle_errors
from agent.errors import IntentError
from common.conventions import (
    console,
    device_options,
    duration,
    examples,
    output_option,
    select_devices,
)
from common.registry import Entry, Registry

if TYPE_CHECKING:
    from agent.intent.loader import LoadedFabric
    from agent.intent.plan import Plan
    from common.errors import Problem

__all__ = ["EXIT_ERROR", "EXIT_FAILED", "EXIT_OK", "main"]


# Every command but ``check`` and ``plan``, imported on first use: keeps ``lab`` out of the
# agent's import graph, and a run of one command (``twin`` above all, issue #31) from paying
# for the imports of all the others (netmiko, scapy, prometheus_client, the planner's device
# state...). The summary is the command's line in ``roce-agent --help``, so listing the
# commands imports none of them; tests/unit/test_cli.py holds each summary to its command's
# own help.
COMMANDS: Registry[click.Command] = Registry(
    "command",
    {
        "apply": Entry(
            "agent.app.change:apply_command",
            "Bring switches to the intent: canary first, then batches, each change in a "
            "transaction the switch rolls back by itself unless the readback matches and the "
            "agent confirms.",
        ),
        "audit": Entry(
            "agent.app.change:audit_command",
            "Show change attempts from the write-ahead audit log (intent, result, reconciled).",
        ),
        "checks": Entry("agent.app.catalog:checks_command", "List the checks validate runs (RC…)."),
        "diff": Entry(
            "agent.app.change:diff_command",
            "Show what would change on each switch (and the lines that would be sent).",
        ),
        "discover": Entry("agent.app.discover:discover_command", "A fabric file from LLDP."),
        "drift": Entry(
            "agent.app.change:drift_command",
            "Compare every switch with the intent: exit 1 listing every difference (or a switch "
            "that could not be read), 0 if none, 2 if no switch could be reached.",
        ),
        "exporter": Entry(
            "agent.app.exporter:exporter_command",
            "Serve PFC, ECN, drop, watchdog, drift, probe and NIC metrics for Prometheus.",
        ),
        "lab": Entry("lab.cli:group", "Build and run the virtual lossless lab fabric."),
        "locate": Entry(
            "agent.app.locate:locate_command",
            "Find the link, port, switch or host NIC behind a symptom.",
        ),
        "nccl": Entry(
            "agent.app.nccl:nccl_command",
            "The NCCL/UCX environment a job needs on each RDMA host.",
        ),
        "probe": Entry("agent.app.probe:group", "Inject and sniff RoCEv2: drops, ECN, CNPs, PFC."),
        "render": Entry(
            "agent.app.render:render_command",
            "Print the lines or patch each device would get, offline.",
        ),
        "rules": Entry("agent.app.catalog:rules_command", "List the fabric file rules (IR…)."),
        "run": Entry(
            "agent.app.run:run_command",
            "Run PLAYBOOK (a file or lossless-rollout, storm-drill, ecn-sweep, validate) on "
            "FABRIC.",
        ),
        "serve": Entry(
            "agent.app.serve:serve_command",
            "Run the daemon: reconcile loop (observe reports drift, enforce repairs it through "
            "the push path), scheduled playbooks, the Prometheus exporter, sd_notify for "
            "systemd.",
        ),
        "tune": Entry(
            "agent.app.tune:tune_command",
            "Search ECN x DCQCN (x QPs per connection) jointly per link speed in the twin.",
        ),
        "twin": Entry(
            "agent.app.twin:twin_command",
            "Simulate a scenario on the fabric's own speeds, cables, thresholds and DCQCN "
            "settings.",
        ),
        "validate": Entry(
            "agent.app.validate:validate_command",
            "Validate FABRIC: read the switches, drive traffic, run every check.",
        ),
    },
)
# Commands whose failed import is reported as "the NAME commands are unavailable: ..." (exit
# 1): the ones loaded lazily from the start, the lab's group among them (a part of the
# install the agent itself never needs). A failed import of any other command is a bug in an
# install that has the whole core, and is raised as it is.
UNAVAILABLE_AS_MESSAGE = frozenset(
    {"checks", "discover", "lab", "locate", "nccl", "probe", "render", "rules"}
)
# Width of a command's line in the listing, as click shortens a command's own help.
SUMMARY_LIMIT = 70


def summary_line(summary: str) -> str:
    """``summary`` shortened for the command listing exactly as click shortens a loaded
    command's help (its first sentence, cut at :data:`SUMMARY_LIMIT` with "...")."""
    return click.Command(None, help=summary).get_short_help_str(limit=SUMMARY_LIMIT)


class LazyGroup(click.Group):
    """The commands of :data:`COMMANDS` listed from their summaries and imported only when
    one is run. Click's own pattern for it: "Lazily Loading Subcommands" in
    https://click.palletsprojects.com/en/stable/complex/#lazily-loading-subcommands
    (``list_commands`` names them, ``get_command`` imports one when it is asked for).
    ``tests/unit/test_startup_imports.py`` keeps the heavy modules off the ``twin`` path."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        try:
            return COMMANDS.load(cmd_name)
        except ImportError as exc:
            if cmd_name not in UNAVAILABLE_AS_MESSAGE:
                raise
            raise click.ClickException(f"the {cmd_name} commands are unavailable: {exc}") from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in COMMANDS:
                rows.append((name, summary_line(COMMANDS[name].summary)))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=SUMMARY_LIMIT)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@examples(
    "roce-agent check fabric.yml",
    "roce-agent plan fabric.yml --role leaf",
    "roce-agent apply fabric.yml --dry-run",
    "roce-agent drift fabric.yml -o junit > drift.xml",
)
@click.version_option(__version__, "--version", prog_name="roce-agent")
@click.option(
    "--debug",
    is_flag=True,
    help="Show tracebacks for internal errors, and the SSH libraries' log on stderr.",
)
@click.option(
    "--trust-on-first-use",
    is_flag=True,
    help="Accept the SSH host key of a device never seen before and record it in "
    "<state dir>/known_hosts; a changed key is refused all the same.",
)
@click.option(
    "--insecure-permissions",
    is_flag=True,
    help="Read config files anyone can write and secret files others can read or own "
    "(refused by default, as OpenSSH and libpq refuse them); each one is logged.",
)
@click.option(
    "--connect-timeout",
    type=duration(600),
    default="10s",
    show_default=True,
    help="The SSH connect per device: TCP, banner, key exchange and login, retries "
    "included; the CLI's first prompt gets the same time again (at most 600s).",
)
def main(
    debug: bool, trust_on_first_use: bool, insecure_permissions: bool, connect_timeout: float
) -> None:
    """Make RoCEv2 fabrics lossless and prove it.

    Configures PFC, ECN/WRED, DCQCN and the PFC watchdog on switches and host NICs from one
    intent file (fabric.yaml + a lossless profile), validates the result on the wire and
    exports fabric health to Prometheus.

    Exit codes, the same for every command: 0 all as intended, 1 a device not as intended
    (or unverified, or not reached while others were), 2 the command could not do its job
    (bad input, nothing reachable, internal error).
    """
    if insecure_permissions:
        from common.permissions import allow_insecure_permissions

        allow_insecure_permissions()
    _debug_log(debug)
    _configure_connections(trust_on_first_use, connect_timeout)


# The name of the ``--debug`` handler: the agent's log (the SSH libraries' records among it)
# on stderr.
_DEBUG_HANDLER = "roce-agent --debug"


def _debug_log(debug: bool) -> None:
    """One stderr handler on ``roce_agent`` with ``--debug``, none without (a process that
    runs several commands, a test run, gets exactly what each asked for)."""
    if not debug and "logging" not in sys.modules:
        return  # no handler to remove; a command that logs nothing need not import logging
    import logging  # here: see above

    logger = logging.getLogger("roce_agent")
    for handler in [h for h in logger.handlers if h.get_name() == _DEBUG_HANDLER]:
        logger.removeHandler(handler)
    if debug:
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(_DEBUG_HANDLER)
        handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    elif logger.level == logging.DEBUG:
        logger.setLevel(logging.NOTSET)


def _configure_connections(trust_on_first_use: bool, connect_timeout: float) -> None:
    """Hand the SSH options to the device modules. They are imported only when an option
    differs from its default or they are loaded already (an earlier run in this process, whose
    choice must not linger): a command that never connects (twin, issue #31) loads none."""
    given = click.get_current_context().get_parameter_source("connect_timeout")
    if given != click.core.ParameterSource.DEFAULT or "agent.device.ssh" in sys.modules:
        from agent.device import ssh

        ssh.configure(connect_timeout_s=connect_timeout)
    if trust_on_first_use or "agent.device.hostkeys" in sys.modules:
        from agent.device import hostkeys

        hostkeys.configure(trust_on_first_use=trust_on_first_use)


def _plan_markdown(plan: Plan) -> str:
    """The plan's tables (the same sections as the rich tables) as Markdown, for a ticket."""
    from agent.intent.plan_tables import plan_sections

    lines: list[str] = []
    for section in plan_sections(plan):
        right = {i for i, (_, justify) in enumerate(section.columns) if justify == "right"}
        lines += [f"### {md_cell(section.title)}", ""]
        lines += markdown_table([h for h, _ in section.columns], section.rows, right=right)
        lines += ["", md_cell(section.caption), ""] if section.caption else [""]
    return "\n".join(lines).rstrip("\n")


def _select(plan: Plan, patterns: tuple[str, ...], roles: tuple[str, ...] = ()) -> Plan:
    """The plan of the devices ``--device`` (names or globs) and ``--role`` select."""
    if not patterns and not roles:
        return plan
    chosen = set(select_devices(((d.name, d.role) for d in plan.devices), patterns, roles))
    return plan.model_copy(update={"devices": [d for d in plan.devices if d.name in chosen]})


def _load(fabric: Path) -> LoadedFabric:
    from agent.intent.loader import load_fabric

    return load_fabric(fabric)


@main.command()
@examples(
    "roce-agent check fabric.yml",
    "roce-agent check pod-400g.yml && roce-agent plan pod-400g.yml",
    "roce-agent check fabric.yml -o json | jq '.problems[].message'",
)
@FABRIC
@output_option("text", "json", default="text")
@handle_errors
def check(fabric: Path, output: str) -> None:
    """Validate FABRIC and its profile without touching any device.

    Reports every problem as FILE:LINE:COL: field: message (with the rule ID for
    cross-field rules) and exits 2; exits 0 when the intent is valid. With -o json the
    verdict and the problems (file, line, column, field, rule, message) are also a JSON
    document on stdout.
    """
    try:
        loaded = _load(fabric)
    except IntentError as exc:
        if output == "json":
            echo_json({"file": str(fabric), "valid": False,
                       "problems": [_problem(p) for p in exc.problems]})  # fmt: skip
        raise
    intent = loaded.intent
    ports = sum(len(d.ports) for d in intent.devices)
    if output == "json":
        echo_json({"file": str(fabric), "valid": True, "fabric": intent.name,
                   "profile": intent.profile.name, "profile_file": str(loaded.profile_file),
                   "devices": len(intent.devices), "ports": ports, "problems": []})  # fmt: skip
        return
    click.echo(
        f"{fabric}: valid — fabric {intent.name}, profile {intent.profile.name} "
        f"({loaded.profile_file}), {len(intent.devices)} devices, {ports} ports"
    )


def _problem(problem: Problem) -> dict[str, object]:
    """One problem of ``check -o json``: where (null when the input has no position), the
    field, the rule ID of a cross-field rule and the message."""
    where = problem.position
    return {
        "file": str(where.file) if where else None,
        "line": where.line if where else None,
        "column": where.column if where else None,
        "field": problem.field,
        "rule": problem.rule,
        "message": problem.message,
    }


@main.command()
@examples(
    "roce-agent plan fabric.yml",
    "roce-agent plan fabric.yml --device 'leaf*' --device spine1",
    "roce-agent plan fabric.yml --role host -o json | jq '.devices[].name'",
    "roce-agent plan fabric.yml --device leaf1 -o markdown > leaf1-plan.md",
)
@FABRIC
@device_options
@output_option("table", "json", "markdown")
@handle_errors
def plan(fabric: Path, devices: tuple[str, ...], roles: tuple[str, ...], output: str) -> None:
    """Show the desired state computed from FABRIC, per device and port.

    DSCP→priority map, PFC priorities, PFC headroom (xoff/xon/size from speed, cable and
    MTU), pause threshold, ECN thresholds, watchdog, ETS and host NIC (DCQCN) settings.
    Nothing is connected to.
    """
    from agent.intent.plan import build_plan
    from agent.intent.plan_tables import render_plan_tables

    desired = _select(build_plan(_load(fabric).intent), devices, roles)
    if output == "json":
        echo_json(desired.model_dump(mode="json"))
    elif output == "markdown":
        click.echo(_plan_markdown(desired))
    else:
        # Literal text (a description is never markup); pipes and CI logs get wide tables.
        render_plan_tables(desired, console())

"""``roce-agent``: the command line.

Exit codes a CI job can rely on: 0 success, 1 the fabric is not as intended (later
commands), 2 the command could not do its job (bad input, unreadable file). Errors are one
line each on stderr — never a traceback unless ``--debug`` asks for it.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, cast

import click

from agent import __version__
from agent.app.support import EXIT_ERROR, EXIT_FAILED, EXIT_OK, FABRIC, OUTPUT, handle_errors
from common.conventions import console, device_options, examples, select_devices

if TYPE_CHECKING:
    from agent.intent.loader import LoadedFabric
    from agent.intent.plan import Plan

__all__ = ["EXIT_ERROR", "EXIT_FAILED", "EXIT_OK", "main"]


class LazyGroup(click.Group):
    """Every command but ``check`` and ``plan`` imported on first use: keeps ``lab`` out of
    the agent's import graph, and a run of one command (``twin`` above all, issue #31) from
    paying for the imports of all the others (netmiko, scapy, prometheus_client, the planner's
    device state...). Click's own pattern for it: "Lazily Loading Subcommands" in
    https://click.palletsprojects.com/en/stable/complex/#lazily-loading-subcommands
    (``list_commands`` names them, ``get_command`` imports one when it is asked for).
    ``tests/unit/test_startup_imports.py`` keeps the heavy modules off the ``twin`` path."""

    lazy: ClassVar[dict[str, tuple[str, str, str]]] = {
        # traces, mesh and probes: imports every other command need not pay for
        "locate": (
            "agent.app.locate",
            "locate_command",
            "Find the link, port, switch or host NIC behind a symptom.",
        ),
        "probe": ("agent.app.probe", "group", "Inject and sniff RoCEv2: drops, ECN, CNPs, PFC."),
        "lab": ("lab.cli", "group", "Build and run the virtual lossless lab fabric."),
        "discover": ("agent.app.discover", "discover_command", "A fabric file from LLDP."),
        "nccl": (
            "agent.app.nccl",
            "nccl_command",
            "The NCCL/UCX environment a job needs on each RDMA host.",
        ),
        "rules": ("agent.app.catalog", "rules_command", "List the fabric file rules (IR…)."),
        "checks": ("agent.app.catalog", "checks_command", "List the checks validate runs (RC…)."),
        "render": (
            "agent.app.render",
            "render_command",
            "Print the lines or patch each device would get, offline.",
        ),
    }
    # The core's commands, by module and attribute: part of every install (an import error
    # here is a bug, raised as it is), and listed with their own one-line help, so --help
    # (never a hot path) imports them to read it.
    deferred: ClassVar[dict[str, tuple[str, str]]] = {
        "diff": ("agent.app.change", "diff_command"),
        "apply": ("agent.app.change", "apply_command"),
        "drift": ("agent.app.change", "drift_command"),
        "audit": ("agent.app.change", "audit_command"),
        "validate": ("agent.app.validate", "validate_command"),
        "run": ("agent.app.validate", "run_command"),
        "serve": ("agent.app.validate", "serve_command"),
        "exporter": ("agent.app.exporter", "exporter_command"),
        "twin": ("agent.app.twin", "twin_command"),
        "tune": ("agent.app.tune", "tune_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy, *self.deferred])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.deferred:
            module_name, attribute = self.deferred[cmd_name]
            return cast(click.Command, getattr(importlib.import_module(module_name), attribute))
        if cmd_name in self.lazy:
            module_name, attribute, _ = self.lazy[cmd_name]
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise click.ClickException(
                    f"the {cmd_name} commands are unavailable: {exc}"
                ) from None
            return cast(click.Command, getattr(module, attribute))
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy:
                rows.append((name, self.lazy[name][2]))
            else:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit=70)))
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
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.option(
    "--trust-on-first-use",
    is_flag=True,
    help="Accept the SSH host key of a device never seen before and record it in "
    "<state dir>/known_hosts; a changed key is refused all the same.",
)
def main(debug: bool, trust_on_first_use: bool) -> None:
    """Make RoCEv2 fabrics lossless and prove it.

    Configures PFC, ECN/WRED, DCQCN and the PFC watchdog on switches and host NICs from one
    intent file (fabric.yaml + a lossless profile), validates the result on the wire and
    exports fabric health to Prometheus.

    Exit codes: 0 ok, 1 the fabric differs from intent or a check failed, 2 the command
    could not run (bad input, unreachable, internal error).
    """
    if trust_on_first_use:
        from agent.device import hostkeys

        hostkeys.configure(trust_on_first_use=True)


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
    "roce-agent check playbooks/fabrics/pod-400g.yml && roce-agent plan pod-400g.yml",
)
@FABRIC
@handle_errors
def check(fabric: Path) -> None:
    """Validate FABRIC and its profile without touching any device.

    Reports every problem as FILE:LINE:COL: field: message (with the rule ID for
    cross-field rules) and exits 2; exits 0 when the intent is valid.
    """
    loaded = _load(fabric)
    intent = loaded.intent
    ports = sum(len(d.ports) for d in intent.devices)
    click.echo(
        f"{fabric}: valid — fabric {intent.name}, profile {intent.profile.name} "
        f"({loaded.profile_file}), {len(intent.devices)} devices, {ports} ports"
    )


@main.command()
@examples(
    "roce-agent plan fabric.yml",
    "roce-agent plan fabric.yml --device 'leaf*' --device spine1",
    "roce-agent plan fabric.yml --role host -o json | jq '.devices[].name'",
)
@FABRIC
@device_options
@OUTPUT
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
        click.echo(json.dumps(desired.model_dump(mode="json"), indent=2))
    else:
        # Literal text (a description is never markup); pipes and CI logs get wide tables.
        render_plan_tables(desired, console())

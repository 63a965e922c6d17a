"""``roce-agent lab up|down|status|counters`` — the netns lab runtime's command group.

The agent's CLI mounts :data:`group` lazily as ``roce-agent lab``; standalone use:
``python -m lab.cli up containerlab/roce-leafspine.clab.yml``. Every error is one message on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from rich.console import Console
from rich.table import Table

from lab import runtime
from lab.netns import CommandError
from lab.topology import TopologyError, load_topology

F = TypeVar("F", bound=Callable[..., Any])
DEBUG_ENV = "ROCE_LAB_DEBUG"

group = click.Group(
    "lab",
    help=(
        "Virtual lossless fabric: build a containerlab topology (*.clab.yml) out of network "
        "namespaces, veth pairs and lab.vswitch software switches — no container engine needed."
    ),
)


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _debug() -> bool:
    """Tracebacks wanted: ``roce-agent --debug`` (when mounted there) or $ROCE_LAB_DEBUG."""
    if os.environ.get(DEBUG_ENV):
        return True
    context = click.get_current_context(silent=True)
    return bool(context and context.find_root().params.get("debug"))


def _errors_exit_2(func: F) -> F:
    """Turn every expected failure into ``Error: …`` on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TopologyError as exc:
            for problem in exc.problems:  # one located line each, like `roce-agent check`
                click.echo(f"error: {problem}", err=True)
            sys.exit(2)
        except (runtime.LabError, CommandError) as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted")
        except Exception as exc:  # an unexpected bug: still no traceback unless asked for
            if _debug():
                traceback.print_exc()
            _fail(f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)")
        return None

    return cast(F, wrapper)


_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=runtime.STATE_DIR_ENV,
    help=(
        "The lab's state directory itself [default: /run/roce-agent/lab/<lab>; "
        f"env {runtime.STATE_DIR_ENV}]."
    ),
)
_output_option = click.option(
    "--output",
    "-o",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Table for people, JSON for scripts.",
)
_lab_option = click.option(
    "--lab",
    "--name",
    "lab_name",
    metavar="NAME",
    help="Lab name (default: the topology's name; --name as in containerlab).",
)


def _resolve_lab(topology: Path | None, lab_name: str | None, state_dir: Path | None) -> str:
    """Which lab a status/down/counters command means."""
    if lab_name:
        return lab_name
    if topology is not None:
        return load_topology(topology).name
    if state_dir is not None:
        state = runtime.LabState.load(state_dir.absolute())
        if state is None:
            raise runtime.LabError(f"no lab state in {state_dir}")
        return state.name
    labs = runtime.running_labs()
    if len(labs) == 1:
        return labs[0]
    if not labs:
        raise runtime.LabError("no lab is up (give TOPOLOGY or --lab NAME)")
    raise runtime.LabError(f"several labs are up ({', '.join(labs)}): give --lab NAME")


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def _console() -> Console:
    return Console(soft_wrap=True)


def _print_status(data: dict[str, Any]) -> None:
    console = _console()
    health = "[green]healthy[/]" if data["healthy"] else "[red]NOT healthy[/]"
    console.print(f"[bold]lab {data['name']}[/] — phase {data['phase']}, {health}")
    nodes = Table(title="nodes", title_justify="left")
    for column in ("node", "role", "netns", "management", "vswitch"):
        nodes.add_column(column)
    links = Table(title="data plane", title_justify="left")
    for column in ("node", "if", "port", "ipv4", "mac", "peer"):
        links.add_column(column)
    for name, node in data["nodes"].items():
        netns_cell = node["netns"] + ("" if node["netns_present"] else " [red](missing)[/]")
        if node["kind"] == "lab-switch":
            mgmt = f"{node['mgmt_host']}:{node['mgmt_port']} (ssh {node['mgmt_state']})"
            alive = "[green]alive[/]" if node["alive"] else "[red]dead[/]"
            vswitch = f"pid {node['pid']} {alive}, ping {node['vswitch']}"
        else:
            mgmt = f"netns; gateway {node.get('gateway', '-')}"
            vswitch = "-"
        nodes.add_row(name, node["role"], netns_cell, mgmt, vswitch)
        for i in node["interfaces"]:
            links.add_row(name, i["ifname"], i["fabric_port"], i["ipv4"], i["mac"], i["peer"])
    console.print(nodes)
    console.print(links)
    creds = data["credentials"]
    console.print(
        f"credentials: {creds['username']} / {creds['password']} "
        f"(the agent reads the password from ${data['password_env']})"
    )
    console.print(f"state dir:   {data['state_dir']}")
    console.print(f"fabric file: {data['fabric_file']}")


def _sum(values: Any) -> int:
    return sum(int(v) for v in values) if isinstance(values, list) else int(values or 0)


def _print_counters(node: str, data: dict[str, Any]) -> None:
    console = _console()
    ports = data.get("ports")
    if not isinstance(ports, dict):
        _print_json(data)
        return
    console.print(f"[bold]{node}[/] counters (uptime {data.get('uptime_s', '?')} s)")
    table = Table()
    # packets; drops = forwarding drops (ttl, no route, arp); tail = queue tail drops
    for column in ("port", "rx", "tx", "drops", "tail", "ecn", "xoff tx", "xoff rx", "max q B"):
        table.add_column(column, justify="right" if column != "port" else "left")
    for ifname, port in ports.items():
        queues = port.get("queues", {}) if isinstance(port, dict) else {}
        q = list(queues.values()) if isinstance(queues, dict) else []
        table.add_row(
            ifname,
            str(port.get("rx_packets", "")),
            str(port.get("tx_packets", "")),
            str(_sum(list(port.get("drops", {}).values()))),
            str(sum(int(x.get("tail_drops", 0)) for x in q)),
            str(sum(int(x.get("ecn_marked", 0)) for x in q)),
            str(_sum(port.get("pfc", {}).get("tx_xoff", 0))),
            str(_sum(port.get("pfc", {}).get("rx_xoff", 0))),
            str(max((int(x.get("watermark_bytes", 0)) for x in q), default=0)),
        )
    console.print(table)


@group.command("up")
@click.argument("topology", type=click.Path(dir_okay=False, path_type=Path))
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def up_command(topology: Path, lab_name: str | None, state_dir: Path | None, output: str) -> None:
    """Build the lab of TOPOLOGY (a containerlab *.clab.yml) from network namespaces.

    Refuses (exit 2) if the lab is already up: run `down` first. Prints the generated
    fabric file's path (or the full status with -o json).
    """
    data = runtime.up(topology, lab_name=lab_name, state_dir=state_dir)
    if output == "json":
        _print_json(data)
    else:
        _print_status(data)


@group.command("down")
@click.argument("topology", required=False, type=click.Path(dir_okay=False, path_type=Path))
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def down_command(
    topology: Path | None, lab_name: str | None, state_dir: Path | None, output: str
) -> None:
    """Remove exactly what `up` created (processes, namespaces, state); also after a crash."""
    name = _resolve_lab(topology, lab_name, state_dir)
    data = runtime.down(name, state_dir)
    if output == "json":
        _print_json(data)
    else:
        if data["result"] == "not-up":
            click.echo(data.get("message", f"lab {name} is not up"))
            return
        click.echo(
            f"lab {name}: stopped {len(data['stopped'])} process(es), deleted "
            f"{len(data['deleted_netns'])} namespace(s) and {len(data['removed_files'])} "
            f"file(s) in {data['state_dir']}"
        )
        for note in data["notes"]:
            click.echo(f"note: {note}")
        for warning in data["warnings"]:
            click.echo(f"error: {warning}", err=True)
        if data["warnings"]:
            click.echo("error: something was left behind; run `down` again", err=True)
    if data.get("warnings"):
        sys.exit(2)


@group.command("status")
@click.argument("topology", required=False, type=click.Path(dir_okay=False, path_type=Path))
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def status_command(
    topology: Path | None, lab_name: str | None, state_dir: Path | None, output: str
) -> None:
    """Show the lab: nodes, namespaces, vswitch processes, management ports, addresses."""
    name = _resolve_lab(topology, lab_name, state_dir)
    data = runtime.status(name, state_dir)
    if output == "json":
        _print_json(data)
    else:
        _print_status(data)


@group.command("counters")
@click.argument("node")
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def counters_command(node: str, lab_name: str | None, state_dir: Path | None, output: str) -> None:
    """Show a lab switch's counters (from its vswitch control socket)."""
    name = _resolve_lab(None, lab_name, state_dir)
    data = runtime.counters(node, name, state_dir)
    if output == "json":
        _print_json(data)
    else:
        _print_counters(node, data)


if __name__ == "__main__":
    group()

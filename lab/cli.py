"""``roce-agent lab up|down|status|counters|fault`` — the netns lab runtime's command group.

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

from common.clicktypes import FiniteFloat
from lab import runtime
from lab.netns import CommandError
from lab.state import STATE_DIR_ENV, LabError, LabState, state_dir_for
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
        except (LabError, CommandError) as exc:
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
    envvar=STATE_DIR_ENV,
    help=(
        "The lab's state directory itself [default: /run/roce-agent/lab/<lab>; "
        f"env {STATE_DIR_ENV}]."
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
        state = LabState.load(state_dir.absolute())
        if state is None:
            raise LabError(f"no lab state in {state_dir}")
        return state.name
    labs = runtime.running_labs()
    if len(labs) == 1:
        return labs[0]
    if not labs:
        raise LabError("no lab is up (give TOPOLOGY or --lab NAME)")
    raise LabError(f"several labs are up ({', '.join(labs)}): give --lab NAME")


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
        elif "vm_state" in node:  # a VM host (roce.lab/rdma): SSH to the VM, its NIC process
            mgmt = f"{node['mgmt_host']}:{node['mgmt_port']} (ssh to the {node['rdma']} VM)"
            vswitch = f"VM {node['vm_state']}, NIC {node['nic_state']}"
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


# --------------------------------------------------------------------------- faults

fault_group = click.Group(
    "fault",
    help=(
        "Break the running lab on purpose, by fabric element, and undo it: loss, corruption, "
        "a link down, misclassification (config-visible or not), PFC ignored, a PFC storm, "
        "latency. Lab only: nothing the agent sends to a switch can reach these."
    ),
)
group.add_command(fault_group)


def _fault_lab(topology: Path | None, lab_name: str | None, state_dir: Path | None) -> Any:
    from lab.faults import LabFaults

    name = _resolve_lab(topology, lab_name, state_dir)
    return LabFaults(state_dir_for(name, state_dir))


def _fault_kinds_help() -> str:
    from lab.faults import KINDS

    forms = {"direction": "A:IF>B | A>B", "link": "A:IF", "port": "SWITCH:IF", "host": "HOST"}
    return "\n".join(
        f"  {kind:<17} {forms[spec.target]:<13} {spec.summary}" for kind, spec in KINDS.items()
    )


_topology_argument = click.argument(
    "topology", required=False, type=click.Path(dir_okay=False, path_type=Path)
)


@fault_group.command(
    "add",
    epilog="\b\nKinds:\n" + _fault_kinds_help(),
)
@click.argument("kind")
@click.argument("target")
@_topology_argument
@click.option(
    "--percent",
    type=FiniteFloat(0, 100, min_open=True),
    help="Share of frames hit (0 < P <= 100): loss, corrupt, icrc.",
)
@click.option(
    "--ms",
    type=FiniteFloat(0, 1000, min_open=True),
    help="Added delay in ms (0 < M <= 1000): latency.",
)
@click.option(
    "--seed", type=int, help="Seed of the fault's random draws (default 1): reproducible runs."
)
@click.option(
    "--dscp", type=int, help="asic-misclassify: the DSCP (default: the fabric's RoCE DSCP)."
)
@click.option("--tc", type=int, help="asic-misclassify: the traffic class it goes to (default 0).")
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def fault_add_command(
    kind: str,
    target: str,
    topology: Path | None,
    percent: float | None,
    ms: float | None,
    seed: int | None,
    dscp: int | None,
    tc: int | None,
    lab_name: str | None,
    state_dir: Path | None,
    output: str,
) -> None:
    """Inject fault KIND at TARGET (a link direction leaf1:eth3>spine1 or h1>leaf1, a link or
    port leaf1:eth3, a host h1); prints its ID. Bad input: exit 2, nothing applied."""
    from lab.faults import describe

    faults = _fault_lab(topology, lab_name, state_dir)
    fault = faults.add(kind, target, percent=percent, ms=ms, seed=seed, dscp=dscp, tc=tc)
    if output == "json":
        _print_json(fault.to_json())
    else:
        click.echo(f"{fault.id}: {fault.kind} {fault.target} — {describe(fault)}")


@fault_group.command("remove")
@click.argument("fault_id", metavar="ID|all")
@_topology_argument
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def fault_remove_command(
    fault_id: str,
    topology: Path | None,
    lab_name: str | None,
    state_dir: Path | None,
    output: str,
) -> None:
    """Undo fault ID (or every fault: `all`) exactly as it was done."""
    faults = _fault_lab(topology, lab_name, state_dir)
    removed = faults.clear() if fault_id == "all" else [faults.remove(fault_id)]
    if output == "json":
        _print_json([f.to_json() for f in removed])
    elif not removed:
        click.echo("no faults to remove")
    else:
        for fault in removed:
            click.echo(f"{fault.id}: removed ({fault.kind} {fault.target})")


@fault_group.command("list")
@_topology_argument
@_lab_option
@_state_dir_option
@_output_option
@_errors_exit_2
def fault_list_command(
    topology: Path | None, lab_name: str | None, state_dir: Path | None, output: str
) -> None:
    """Show the active faults: ID, kind, target, parameters, and what was done where."""
    from lab.faults import describe

    faults = _fault_lab(topology, lab_name, state_dir).list()
    if output == "json":
        _print_json([f.to_json() for f in faults])
        return
    if not faults:
        click.echo("no faults")
        return
    table = Table()
    for column in ("id", "kind", "target", "parameters", "done"):
        table.add_column(column)
    for fault in faults:
        params = " ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in fault.params.items()
        )
        table.add_row(fault.id, fault.kind, fault.target, params, describe(fault))
    _console().print(table)


if __name__ == "__main__":
    group()

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from rich.console import Console
from rich.text import Text

from common.clicktypes import FiniteFloat
from common.conventions import add_column, console, duration, examples, output_option, table
from lab import runtime
from lab.netns import CommandError
from lab.state import STATE_DIR_ENV, LabError, LabState, state_dir_for
from lab.topology.loader import load_topology
from lab.topology.model import NOS_PLATFORMS, TopologyError

F = TypeVar("F", bound=Callable[..., Any])
DEBUG_ENV = "ROCE_LAB_DEBUG"


@click.group("lab")
@examples(
    "roce-agent lab up containerlab/roce-leafspine.clab.yml",
    "roce-agent lab status -o json",
    "roce-agent lab fault add latency 'leaf1:eth1>spine1' --delay 5ms",
    "roce-agent lab down",
)
def group() -> None:
    """Virtual lossless fabric: build a containerlab topology (*.clab.yml) out of network
    namespaces, veth pairs and lab.vswitch software switches — no container engine needed."""


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


# `fault add --delay`: the vswitch's added delay, at most a second (lab/faults.py).
DELAY = duration(1.0)

_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=STATE_DIR_ENV,
    help=(
        "The lab's state directory itself [default: /run/roce-agent/lab/<lab>; "
        f"env {STATE_DIR_ENV}]."
    ),
)
_output_option = output_option("table", "json")
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
    # Names come from the topology file: printed literally (common/conventions.py).
    return console()


def _flagged(text: str, good: bool, bad_text: str = "") -> Text:
    """``text`` in green when ``good``, else ``bad_text or text`` in red (styles, not
    markup: nothing in a topology name can turn into markup)."""
    return Text(text, style="green") if good else Text(bad_text or text, style="red")


def _print_status(data: dict[str, Any]) -> None:
    out = _console()
    out.print(
        Text.assemble(
            (f"lab {data['name']}", "bold"),
            f" — phase {data['phase']}, ",
            _flagged("healthy", data["healthy"], "NOT healthy"),
        )
    )
    nodes = table("nodes", "node", "role", "netns", "management", "vswitch", title_justify="left")
    links = table("data plane", "node", "if", "port", "ipv4", "mac", "peer", title_justify="left")
    for name, node in data["nodes"].items():
        netns_cell = Text(node["netns"])
        if not node["netns_present"]:
            netns_cell.append(" (missing)", style="red")
        vswitch: str | Text
        if node["kind"] == "lab-switch":
            nos = node.get("nos", "eos")
            mgmt = f"{node['mgmt_host']}:{node['mgmt_port']} ({nos} ssh {node['mgmt_state']})"
            if node.get("gnmi"):
                mgmt += f", gnmi {node['gnmi']}"
            vswitch = Text.assemble(
                f"pid {node['pid']} ",
                _flagged("alive", node["alive"], "dead"),
                f", ping {node['vswitch']}",
            )
        elif "vm_state" in node:  # a VM host (roce.lab/rdma): SSH to the VM, its NIC process
            mgmt = f"{node['mgmt_host']}:{node['mgmt_port']} (ssh to the {node['rdma']} VM)"
            vswitch = f"VM {node['vm_state']}, NIC {node['nic_state']}"
        else:
            mgmt = f"netns; gateway {node.get('gateway', '-')}"
            vswitch = "-"
        nodes.add_row(name, node["role"], netns_cell, mgmt, vswitch)
        for i in node["interfaces"]:
            links.add_row(name, i["ifname"], i["fabric_port"], i["ipv4"], i["mac"], i["peer"])
    out.print(nodes)
    out.print(links)
    creds = data["credentials"]
    out.print(
        f"credentials: {creds['username']} / {creds['password']} "
        f"(the agent reads the password from ${data['password_env']})"
    )
    out.print(f"state dir:   {data['state_dir']}")
    out.print(f"fabric file: {data['fabric_file']}")


def _sum(values: Any) -> int:
    return sum(int(v) for v in values) if isinstance(values, list) else int(values or 0)


def _print_counters(node: str, data: dict[str, Any]) -> None:
    out = _console()
    ports = data.get("ports")
    if not isinstance(ports, dict):
        _print_json(data)
        return
    out.print(Text.assemble((node, "bold"), f" counters (uptime {data.get('uptime_s', '?')} s)"))
    counters = table()
    # packets; drops = forwarding drops (ttl, no route, arp); tail = queue tail drops
    for column in ("port", "rx", "tx", "drops", "tail", "ecn", "xoff tx", "xoff rx", "max q B"):
        add_column(counters, column, justify="right" if column != "port" else "left")
    for ifname, port in ports.items():
        queues = port.get("queues", {}) if isinstance(port, dict) else {}
        q = list(queues.values()) if isinstance(queues, dict) else []
        counters.add_row(
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
    out.print(counters)


@group.command("up")
@examples(
    "roce-agent lab up containerlab/roce-leafspine.clab.yml",
    "roce-agent lab up containerlab/roce-leafspine.clab.yml --lab pod1 -o json",
    "roce-agent lab up containerlab/roce-leafspine.clab.yml --nos sonic",
)
@click.argument("topology", type=click.Path(dir_okay=False, path_type=Path))
@_lab_option
@_state_dir_option
@click.option(
    "--nos",
    type=click.Choice(list(NOS_PLATFORMS)),
    help="Every switch speaks this NOS over SSH (default: each one's roce.lab/nos label, eos).",
)
@_output_option
@_errors_exit_2
def up_command(
    topology: Path, lab_name: str | None, state_dir: Path | None, nos: str | None, output: str
) -> None:
    """Build the lab of TOPOLOGY (a containerlab *.clab.yml) from network namespaces.

    Refuses (exit 2) if the lab is already up: run `down` first. Prints the generated
    fabric file's path (or the full status with -o json).
    """
    data = runtime.up(topology, lab_name=lab_name, state_dir=state_dir, nos=nos)
    if output == "json":
        _print_json(data)
    else:
        _print_status(data)


@group.command("down")
@examples(
    "roce-agent lab down",
    "roce-agent lab down containerlab/roce-leafspine.clab.yml",
    "roce-agent lab down --lab pod1",
)
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
@examples(
    "roce-agent lab status",
    "roce-agent lab status --lab pod1 -o json",
)
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
@examples(
    "roce-agent lab counters leaf1",
    "roce-agent lab counters spine1 -o json",
)
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


@group.command("exec")
@examples(
    "roce-agent lab exec spine1 'show running-config'",
    "roce-agent lab exec leaf1 'sudo sonic-cfggen -d --print-data'",
    "roce-agent lab exec leaf2 'nv set qos roce mode lossy' 'nv config apply -y'",
    "roce-agent lab exec spine2 'show interface priority-flow-control'",
)
@click.argument("node")
@click.argument("lines", nargs=-1, required=True)
@_lab_option
@_state_dir_option
@_errors_exit_2
def exec_command(
    node: str, lines: tuple[str, ...], lab_name: str | None, state_dir: Path | None
) -> None:
    """Run LINES on a lab switch's CLI over SSH, one command each, as an operator would: in
    the NOS its roce.lab/nos label names (EOS or NX-OS CLI, a SONiC shell, NVUE). Prints what
    it printed."""
    name = _resolve_lab(None, lab_name, state_dir)
    click.echo(runtime.exec_on_switch(node, list(lines), name, state_dir), nl=False)


# --------------------------------------------------------------------------- faults


@group.group("fault")
@examples(
    "roce-agent lab fault add loss 'leaf1:eth1>spine1' --percent 5",
    "roce-agent lab fault list",
    "roce-agent lab fault remove all",
)
def fault_group() -> None:
    """Break the running lab on purpose, by fabric element, and undo it: loss, corruption,
    a link down, misclassification (config-visible or not), PFC ignored, a PFC storm,
    latency, a stalling host. Lab only: nothing the agent sends to a switch can reach these."""


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


@dataclass(frozen=True)
class FaultAddOptions:
    """What ``lab fault add`` was given besides KIND and TARGET (click passes each option as a
    keyword argument; their checks are the options' types)."""

    topology: Path | None
    percent: float | None
    delay: float | None
    delay_alias: float | None  # --ms, the old name of --delay
    seed: int | None
    dscp: int | None
    tc: int | None
    lab_name: str | None
    state_dir: Path | None
    output: str

    def delay_ms(self) -> float | None:
        """The delay in milliseconds, as the fault records it (either spelling)."""
        seconds = self.delay if self.delay is not None else self.delay_alias
        return None if seconds is None else seconds * 1e3


@fault_group.command(
    "add",
    epilog="\b\nKinds:\n" + _fault_kinds_help(),
)
@examples(
    "roce-agent lab fault add loss 'leaf1:eth1>spine1' --percent 5",
    "roce-agent lab fault add latency 'leaf1:eth3>h1' --delay 5ms",
    "roce-agent lab fault add down leaf1:eth1",
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
    "--delay",
    type=DELAY,
    help="Added delay, with its unit, at most 1s (5ms, 250us): latency; how long each stall "
    "lasts (under 100ms): host-stall.",
)
@click.option(
    "--ms", "delay_alias", type=DELAY, hidden=True,
    help="The old name of --delay (it now takes a unit too: --delay 5ms).",
)  # fmt: skip
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
def fault_add_command(kind: str, target: str, **options: Any) -> None:
    """Inject fault KIND at TARGET (a link direction leaf1:eth3>spine1 or h1>leaf1, a link or
    port leaf1:eth3, a host h1); prints its ID. Bad input: exit 2, nothing applied."""
    from lab.faults import describe

    given = FaultAddOptions(**options)
    faults = _fault_lab(given.topology, given.lab_name, given.state_dir)
    fault = faults.add(
        kind,
        target,
        percent=given.percent,
        ms=given.delay_ms(),
        seed=given.seed,
        dscp=given.dscp,
        tc=given.tc,
    )
    if given.output == "json":
        _print_json(fault.to_json())
    else:
        click.echo(f"{fault.id}: {fault.kind} {fault.target} — {describe(fault)}")


@fault_group.command("remove")
@examples(
    "roce-agent lab fault remove f1",
    "roce-agent lab fault remove all",
)
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
@examples(
    "roce-agent lab fault list",
    "roce-agent lab fault list -o json",
)
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
    listing = table(None, "id", "kind", "target", "parameters", "done")
    for fault in faults:
        params = " ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in fault.params.items()
        )
        listing.add_row(fault.id, fault.kind, fault.target, params, describe(fault))
    _console().print(listing)


if __name__ == "__main__":
    group()

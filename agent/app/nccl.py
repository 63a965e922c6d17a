"""``roce-agent nccl FABRIC``: the NCCL and UCX environment a job needs on each RDMA host,
derived from the intent and read from the host itself (issue #27, item 1).

Every host with an ``rdma_device`` (or each ``--host``) is asked for its GID table over the
agent's own SSH session (namespace hosts: ``ip netns exec``), all at once through the fan-out
runner; :func:`agent.observe.jobenv.job_environment` turns intent and table into variables.
What each variable is and where its value comes from: docs/job-environment.md.

Output:

- ``env`` (default): ``export NAME=VALUE`` lines a job script can source. One host: its
  exports. Several hosts with the same variables: one block, a comment naming them. Hosts that
  differ (a different GID index on one host): one block per host, each after a ``# host NAME``
  comment, never merged or averaged; a note on stderr says which variables differ, and
  ``--host NAME`` gives one host's exports alone. A host that could not be read still gets
  what the intent alone decides (NCCL_IB_HCA, NCCL_IB_TC, the QP settings, …) and a comment
  line per variable it could not be given (``# host h1: NCCL_IB_GID_INDEX not set: not read:
  …``): the file is never empty for want of a host.
- ``json``: per host its variables (``null`` for one not set, its reason under ``not_set``),
  problems, notes and the evidence (GID chosen, its type and netdev, per fabric port).
- ``table``: one table per host: variable, value and where the value came from.

Exit codes, by the contract of every command (docs/cli-conventions.md): 0 every host's
environment was derived; 1 a host had a problem (unreachable while others were read, no RoCE
v2 IPv4 GID, no rdma_device): its problems go to stderr, every host's environment is still
printed; 2 no host could be read, or bad input (fabric file, ``--host``).
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console

from agent.app.support import (
    AS_INTENDED,
    FABRIC,
    NOT_AS_INTENDED,
    NOT_REACHED,
    DeviceProgress,
    exit_code,
    handle_errors,
)
from agent.errors import printable
from agent.intent.loader import load_fabric
from agent.intent.model import Device, FabricIntent
from agent.observe.hostfacts import HostFacts, collect_many
from agent.observe.jobenv import NCCL_ENV_DOC, HostEnvironment, job_environment
from common.conventions import console, examples, output_option, table

# Where each variable's value comes from (the table's third column); docs/job-environment.md.
ORIGIN = {
    "NCCL_IB_HCA": "fabric: ports' rdma_device",
    "NCCL_IB_GID_INDEX": "host: RoCE v2 GID of the port's IPv4 (sysfs)",
    "NCCL_IB_TC": "profile: roce.dscp << 2 | ECT(0) where ECN marks",
    "NCCL_IB_SL": "profile: roce.priority (PCP trust)",
    "NCCL_IB_FIFO_TC": "profile: job.control",
    "NCCL_IB_QPS_PER_CONNECTION": "profile: job.qps_per_connection (tune)",
    "NCCL_IB_SPLIT_DATA_ON_QPS": "profile: job.split_data_on_qps (tune)",
    "UCX_NET_DEVICES": "fabric: ports' rdma_device",
    "UCX_IB_GID_INDEX": "host: as NCCL_IB_GID_INDEX",
    "UCX_IB_TRAFFIC_CLASS": "profile: as NCCL_IB_TC",
    "UCX_IB_SL": "profile: as NCCL_IB_SL",
}


def _stderr() -> Console:
    return console(stderr=True)


# --------------------------------------------------------------------------- selection


def rdma_hosts(intent: FabricIntent) -> list[Device]:
    """Every host of the fabric with at least one ``rdma_device`` port, in file order."""
    return [d for d in intent.devices if d.role == "host" and d.rdma_ports()]


def select_hosts(intent: FabricIntent, names: Sequence[str]) -> list[Device]:
    """The ``--host`` devices: each a name or a glob (``'gpu*'``), in the order given, each
    host once; or every RDMA host. A pattern that matches no host is bad input (exit 2,
    naming the option), and so is a switch named outright."""
    if not names:
        return rdma_hosts(intent)
    hosts = [d for d in intent.devices if d.role == "host"]
    chosen: dict[str, Device] = {}
    for pattern in names:
        matched = [d for d in hosts if fnmatch.fnmatchcase(d.name, pattern)]
        if not matched:
            device = intent.device(pattern)
            if device is not None:
                raise click.BadParameter(
                    f"{pattern} is a {device.role} ({device.platform}), not a host",
                    param_hint="'--host'",
                )
            raise click.BadParameter(
                f"Expected: a host name or glob of fabric {intent.name} Actual: "
                f"{printable(pattern)!r} matches none (hosts: {', '.join(d.name for d in hosts)})",
                param_hint="'--host'",
            )
        chosen.update((d.name, d) for d in matched if d.name not in chosen)
    return list(chosen.values())


def collect(devices: Sequence[Device], intent: FabricIntent) -> dict[str, HostFacts]:
    """Each host's facts (kept apart so tests can hand in recorded hosts)."""
    return collect_many(devices, intent)


# --------------------------------------------------------------------------- output


def _exports(variables: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in variables.items()]


def differing(envs: Sequence[HostEnvironment]) -> list[str]:
    """The variables whose value (or presence) is not the same on every host."""
    names = dict.fromkeys(name for env in envs for name in env.variables)
    return [n for n in names if len({env.variables.get(n) for env in envs}) > 1]


def _unset_lines(env: HostEnvironment) -> list[str]:
    """Comment lines for the variables ``env`` could not be given (the reason on one line)."""
    return [
        f"# host {env.host}: {name} not set: {printable(why)}" for name, why in env.not_set.items()
    ]


def render_env(envs: Sequence[HostEnvironment]) -> str:
    """``export`` lines for every host with variables, and comments for what is missing
    (module docstring)."""
    shown = [env for env in envs if env.variables]
    if not shown:
        return "".join(f"# host {env.host}: nothing to export (see the errors)\n" for env in envs)
    if len(shown) == 1:
        return "\n".join([*_unset_lines(shown[0]), *_exports(shown[0].variables)]) + "\n"
    if not differing(shown):
        names = ", ".join(env.host for env in shown)
        header = f"# hosts {names}: the same environment"
        unset = [line for env in shown for line in _unset_lines(env)]
        return "\n".join([header, *unset, *_exports(shown[0].variables)]) + "\n"
    blocks = [
        "\n".join([f"# host {env.host}", *_unset_lines(env), *_exports(env.variables)])
        for env in shown
    ]
    return "\n\n".join(blocks) + "\n"


def render_json(intent: FabricIntent, envs: Sequence[HostEnvironment]) -> str:
    ready = [env for env in envs if env.ok]
    document = {
        "fabric": intent.name,
        "profile": intent.profile.name,
        "reference": NCCL_ENV_DOC,
        "ok": all(env.ok for env in envs),
        "differing": differing(ready),
        "hosts": [env.as_json() for env in envs],
    }
    return json.dumps(document, indent=2)


def render_table(envs: Sequence[HostEnvironment], out: Console) -> None:
    for env in envs:
        variables = table(
            f"{env.host}: {'ready' if env.ok else 'NOT READY'}",
            "variable",
            "value",
            "from",
            title_justify="left",
        )
        for name, value in env.variables.items():
            variables.add_row(name, value, ORIGIN.get(name, ""))
        for name, why in env.not_set.items():
            variables.add_row(name, "(not set)", why)
        out.print(variables)
        for port in env.ports:
            if port.gid is not None:
                out.print(
                    f"  {port.port.device}:{port.port.ib_port} ({port.port.netdev}): GID "
                    f"{port.gid.describe()}"
                )
        for problem in env.problems:
            out.print(f"  problem: {problem}")
        for note in env.notes:
            out.print(f"  note: {note}")


def report_problems(envs: Sequence[HostEnvironment]) -> None:
    err = _stderr()
    for env in envs:
        for problem in env.problems:
            err.print(f"error: {printable(problem)}", markup=False)
    shown = [env for env in envs if env.variables]
    if len(shown) > 1 and (names := differing(shown)):
        err.print(
            f"note: the hosts differ in {', '.join(names)}: one block per host (use --host NAME "
            "for one host's exports)",
            markup=False,
        )


# --------------------------------------------------------------------------- command


@click.command("nccl")
@examples(
    "roce-agent nccl fabric.yml > job-env.sh",
    "roce-agent nccl fabric.yml --host gpu1 -o table",
    "roce-agent nccl fabric.yml -o json | jq .differing",
)
@FABRIC
@click.option(
    "--host", "hosts", multiple=True, metavar="PATTERN",
    help="Only hosts whose name matches: a name or a glob such as 'gpu*' (repeatable) "
    "[default: every host with an rdma_device].",
)  # fmt: skip
@output_option("env", "json", "table", default="env")
@handle_errors
def nccl_command(fabric: Path, hosts: tuple[str, ...], output: str) -> None:
    """The NCCL and UCX environment a job needs on each RDMA host of FABRIC.

    NCCL_IB_HCA from the fabric's rdma_device ports, NCCL_IB_GID_INDEX read from each host
    (the RoCE v2 GID of the port's IPv4 address), NCCL_IB_TC from the profile's RoCE DSCP,
    NCCL_IB_SL where PCP trust makes it matter, NCCL_IB_FIFO_TC and the QPs per connection from
    the profile's job section, and UCX_NET_DEVICES, UCX_IB_GID_INDEX, UCX_IB_TRAFFIC_CLASS for
    MPI jobs. See docs/job-environment.md.

    A host that cannot be read still gets what the intent decides, with a comment line per
    variable it could not be given.

    Exit codes: 0 every host derived, 1 a host had a problem (on stderr; every host is still
    printed), 2 no host could be read, or bad input.
    """
    intent = load_fabric(fabric).intent
    devices = select_hosts(intent, hosts)
    if not devices:
        raise click.UsageError(f"fabric {intent.name} has no host with an rdma_device port")
    with DeviceProgress("nccl: hosts", [d.name for d in devices]):
        facts = collect(devices, intent)
    envs = [job_environment(intent, facts[d.name]) for d in devices]
    if output == "json":
        click.echo(render_json(intent, envs))
    elif output == "table":
        render_table(envs, console())
    else:
        click.echo(render_env(envs), nl=False)
    report_problems(envs)
    outcomes = [host_outcome(facts[d.name], env) for d, env in zip(devices, envs, strict=True)]
    sys.exit(exit_code(outcomes))


def host_outcome(facts: HostFacts, env: HostEnvironment) -> str:
    """The host's outcome for the exit-code contract: not reached when nothing was read from
    it, not as intended with a problem, else as intended."""
    if facts.error is not None:
        return NOT_REACHED
    return AS_INTENDED if env.ok else NOT_AS_INTENDED

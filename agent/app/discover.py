"""``roce-agent discover``: a fabric file skeleton from what the switches already know.

Each switch is read over SSH with its platform's commands (:mod:`agent.device.lldp`): its
LLDP neighbours and each port's speed and MTU. The skeleton is written in the fabric file's
compact form: every link once (the other end is derived when the file is loaded), the most
common speed and MTU in ``defaults.ports``, hosts seen as LLDP neighbours as ``linux_host``
devices, roles inferred (a switch with host neighbours is a leaf, one whose neighbours are
all switches a spine). ``cable_m`` is never guessed: PFC headroom depends on it, so it is
left for the operator unless ``--cable-m`` says it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import yaml

from agent.app.support import DeviceProgress, handle_errors
from agent.device import lldp
from agent.device.fanout import results_or_raise, run_each
from agent.device.lldp import Discovered, Neighbor, PortFacts, natural_key
from agent.errors import AgentError
from agent.intent.units import format_speed
from common.clicktypes import FiniteFloat
from common.conventions import console, examples, output_option
from common.errors import excerpt
from common.yamlsource import load_yaml

FABRIC_SUFFIXES = (".yml", ".yaml")
# Switches read at once (agent.device.fanout.run_each's parallelism); a run reads them all.
PARALLELISM = 16
_TARGET = re.compile(
    r"^(?:(?P<user>[A-Za-z_][A-Za-z0-9_.-]*)@)?"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*)"
    r"(?::(?P<port>[0-9]{1,5}))?$"
)
# Switch-to-switch links are written on the leaf's side (then by name), so a skeleton of a
# leaf-spine fabric reads leaf by leaf: uplinks and host ports together.
_ROLE_ORDER = {"leaf": 0, "spine": 1}


@dataclass(frozen=True)
class Target:
    """A switch to read: where it listens and how to log in."""

    label: str  # how the user named it (a TARGET or a fabric device)
    platform: str
    device: Any  # agent.intent.model.Device


@dataclass
class Skeleton:
    """The fabric document and what the operator should look at."""

    document: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- targets


def parse_target(text: str) -> tuple[str | None, str, int]:
    """``[USER@]HOST[:PORT]`` (an IPv6 HOST in brackets); a bad one exits 2 naming it."""
    match = _TARGET.match(text)
    port = int(match["port"]) if match and match["port"] else 22
    if match is None or not 1 <= port <= 65535:
        raise click.BadParameter(
            f"Expected: [USER@]HOST[:PORT] with PORT 1-65535 (e.g. admin@10.0.0.1:22) "
            f"Actual: {text!r}",
            param_hint="'TARGET'",
        )
    return match["user"], match["host"].strip("[]"), port


def _device(name: str, platform: str, fields: dict[str, Any], label: str | None = None) -> Any:
    from pydantic import ValidationError

    from agent.intent.model import Device

    try:
        return Device.model_validate({"name": name, "platform": platform, "role": "leaf", **fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "device"
        raise AgentError(f"{label or name}: {where}: {first['msg']}") from None


@dataclass(frozen=True)
class Login:
    """How to log in to targets given on the command line: ``--username`` (for a target
    without ``USER@``), ``--password-env`` and ``--ssh-key``."""

    username: str | None = None
    password_env: str | None = None
    ssh_key: Path | None = None

    def credentials(self) -> dict[str, Any]:
        """The fabric file's ``credentials:`` for this login."""
        credentials: dict[str, Any] = {}
        if self.password_env:
            credentials["password_env"] = self.password_env
        if self.ssh_key is not None:
            credentials["ssh_key"] = str(self.ssh_key)
        return credentials


def targets_from_cli(texts: Sequence[str], platform: str | None, login: Login) -> list[Target]:
    """Targets given as ``[USER@]HOST[:PORT]``: they all share ``--platform`` and login."""
    if platform is None:
        raise click.BadParameter(
            f"Expected: the switches' platform ({', '.join(lldp.PLATFORMS)}) Actual: not given",
            param_hint="'--platform'",
        )
    _check_secret(login)
    return [_cli_target(text, index, platform, login) for index, text in enumerate(texts, 1)]


def _check_secret(login: Login) -> None:
    """A password in the environment or a key, else a usage error."""
    if login.password_env is None and login.ssh_key is None:
        raise click.BadParameter(
            "Expected: --password-env VAR or --ssh-key FILE Actual: neither",
            param_hint="'--password-env'",
        )
    if login.password_env is not None and login.password_env not in os.environ:
        raise click.BadParameter(
            f"Expected: an environment variable holding the password Actual: "
            f"${login.password_env} is not set",
            param_hint="'--password-env'",
        )


def _cli_target(text: str, index: int, platform: str, login: Login) -> Target:
    user, host, port = parse_target(text)
    username = user or login.username
    if username is None:
        raise click.BadParameter(
            f"Expected: USER@ in {text!r} or --username Actual: neither",
            param_hint="'--username'",
        )
    fields = {"host": host, "port": port, "username": username,
              "credentials": login.credentials()}  # fmt: skip
    # The device's name until its hostname is read: the host when it is a valid name
    # (errors then read "10.0.0.1: cannot connect ..."), else a placeholder.
    name = host if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", host) else f"target{index}"
    return Target(text, platform, _device(name, platform, fields, text))


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_LOGIN_FIELDS = ("host", "port", "username", "credentials", "host_key", "known_hosts",
                 "host_key_policy")  # fmt: skip


def _fabric_document(path: Path) -> Any:
    """The fabric file's data, read by the one bounded loader every command uses (an alias
    bomb, deep nesting, a FIFO or a huge file end in a located error, exit 2)."""
    return load_yaml(path)[0]


def targets_from_fabric(path: Path) -> list[Target]:
    """The switches of a fabric file (only their names, platforms and management access are
    read: ports, if any, are ignored — they are what discovery finds out)."""
    data = _fabric_document(path)
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        raise AgentError(f"{path}: Expected: a fabric file with devices: Actual: none")
    defaults = _mapping(data.get("defaults"))
    result = []
    for entry in data["devices"]:
        if not isinstance(entry, dict) or entry.get("platform") in (None, "linux_host"):
            continue
        fields = {k: defaults[k] for k in _LOGIN_FIELDS if k in defaults}
        fields.update({k: entry[k] for k in _LOGIN_FIELDS if k in entry})
        name = str(entry.get("name"))
        platform = str(entry["platform"])
        if platform not in lldp.PLATFORMS:
            raise AgentError(
                f"{path}: device {excerpt(name)}: platform Expected: one of "
                f"{', '.join(lldp.PLATFORMS)} Actual: {excerpt(platform)}"
            )
        result.append(Target(name, platform, _device(name, platform, fields)))
    if not result:
        raise AgentError(f"{path}: Expected: at least one switch with a host Actual: none")
    return result


# ----------------------------------------------------------------------------- reading


def read_target(target: Target) -> tuple[Target, Discovered]:
    """Connect, read, disconnect. A switch that cannot be reached is an error naming it and
    why (exit 2: a partial fabric file would be wrong)."""
    from agent.device.platforms import platform_for
    from agent.device.push import Unreachable, close_quietly, connect

    try:
        conn = connect(target.device, platform_for(target.platform))
    except Unreachable as exc:
        # "KIND: what happened. Fix: …", named as the user named the target
        raise AgentError(f"{target.label}: {str(exc).removeprefix(f'{exc.device}: ')}") from None
    try:
        found = lldp.read(conn, target.platform)
    finally:
        close_quietly(conn)
    return target, found


# ----------------------------------------------------------------------------- skeleton


def _is_host(neighbor: Neighbor, switches: set[str]) -> bool:
    return neighbor.system_name not in switches and neighbor.forwards is not True


def _roles(found: Sequence[Discovered]) -> dict[str, str]:
    switches = {d.name for d in found}
    return {
        d.name: "leaf" if any(_is_host(n, switches) for n in d.neighbors) else "spine"
        for d in found
    }


def _port_entry(name: str, peer: str, facts: PortFacts | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "peer": peer}
    if facts is not None and facts.speed_bps:
        entry["speed"] = format_speed(facts.speed_bps)
    if facts is not None and facts.mtu:
        entry["mtu"] = facts.mtu
    return entry


def _same_link(facts: PortFacts | None, other: PortFacts | None) -> bool:
    return (
        facts is not None
        and other is not None
        and (facts.speed_bps, facts.mtu) == (other.speed_bps, other.mtu)
    )


def _check_names(found: Sequence[Discovered]) -> list[str]:
    # Imported here, not at the top: only a real discovery run needs the naming rules, and
    # the skeleton builder stays importable on its own.
    from agent.intent.portnames import check_port_name

    problems = []
    for device in found:
        for port in sorted({n.local_port for n in device.neighbors}, key=natural_key):
            expected = check_port_name(device.platform, port)
            if expected is not None:
                problems.append(
                    f"{device.name} ({device.platform}) port {port!r}: Expected: {expected} "
                    f"Actual: {port!r}"
                )
    return problems


class _Builder:
    """Turns what each switch saw into device entries, each link written once."""

    def __init__(self, found: Sequence[Discovered]) -> None:
        self.found = {d.name: d for d in found}
        self.roles = _roles(found)
        self.ports: dict[str, list[dict[str, Any]]] = {d.name: [] for d in found}
        self.hosts: dict[str, dict[str, Any]] = {}
        self.seen: dict[tuple[str, str], str] = {}
        self.warnings: list[str] = []

    def _writer(self, a: str, b: str) -> str:
        """Which end of a switch-to-switch link declares it."""
        return min(a, b, key=lambda n: (_ROLE_ORDER.get(self.roles[n], 2), natural_key(n)))

    def add(self, device: Discovered, neighbor: Neighbor) -> None:
        from agent.intent.model import check_name

        if (device.name, neighbor.local_port) in self.seen:
            # Two LLDP neighbours on one port: something between the two (a hub, a media
            # converter that forwards LLDP, a NIC with its own agent beside the host's).
            self.warnings.append(
                f"{device.name} {neighbor.local_port}: more than one LLDP neighbour; only "
                f"{self.seen[device.name, neighbor.local_port]} is written"
            )
            return
        self.seen[device.name, neighbor.local_port] = f"{neighbor.system_name}:{neighbor.port}"
        facts = device.ports.get(neighbor.local_port)
        try:
            check_name(neighbor.system_name)
        except ValueError as exc:
            self.warnings.append(
                f"{device.name} {neighbor.local_port}: neighbour name {neighbor.system_name!r} "
                f"is not a device name the fabric file takes ({exc}); rename it"
            )
        peer = f"{neighbor.system_name}:{neighbor.port}"
        if facts is None or not facts.speed_bps:
            self.warnings.append(
                f"{device.name} {neighbor.local_port}: the switch did not report the port's "
                "speed; set it (or defaults.ports.speed)"
            )
        if neighbor.system_name in self.found:
            self._switch_link(device, neighbor, facts, peer)
        elif neighbor.forwards:
            self.warnings.append(
                f"{device.name} {neighbor.local_port}: neighbour {peer} is a switch that was "
                "not discovered; add it to the targets (the port is left out)"
            )
        else:
            self.hosts.setdefault(neighbor.system_name, _host_entry(neighbor))
            self.ports[device.name].append(_port_entry(neighbor.local_port, peer, facts))

    def _switch_link(
        self, device: Discovered, neighbor: Neighbor, facts: PortFacts | None, peer: str
    ) -> None:
        other = self.found[neighbor.system_name]
        back = next((n for n in other.neighbors if n.local_port == neighbor.port), None)
        if back is None or (back.system_name, back.port) != (device.name, neighbor.local_port):
            seen = f"{back.system_name}:{back.port}" if back else "no neighbour"
            self.warnings.append(
                f"{device.name} {neighbor.local_port} sees {peer}, but {peer} sees {seen}: "
                "check the cabling (LLDP tables disagree)"
            )
        writer = self._writer(device.name, other.name)
        if device.name == writer or not _same_link(facts, other.ports.get(neighbor.port)):
            # Both ends are written when they disagree, so loading the file reports the
            # speed/MTU mismatch at both ports instead of copying one end's values.
            self.ports[device.name].append(_port_entry(neighbor.local_port, peer, facts))

    def devices(self, access: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        ordered = sorted(
            self.found.values(),
            key=lambda d: (_ROLE_ORDER.get(self.roles[d.name], 2), natural_key(d.name)),
        )
        result = []
        for device in ordered:
            entry = {"name": device.name, "platform": device.platform,
                     "role": self.roles[device.name], **access.get(device.name, {})}  # fmt: skip
            ports = sorted(self.ports[device.name], key=lambda p: natural_key(p["name"]))
            if ports:
                entry["ports"] = ports
            result.append(entry)
        result += [self.hosts[name] for name in sorted(self.hosts, key=natural_key)]
        return result


def _host_entry(neighbor: Neighbor) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": neighbor.system_name, "platform": "linux_host",
                             "role": "host"}  # fmt: skip
    if neighbor.management_address:
        entry["host"] = neighbor.management_address
    return entry


def _hoist_defaults(devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Move the most common speed and MTU to ``defaults.ports``; ports keep only theirs when
    it differs (an explicit value on a port still wins when the file is loaded)."""
    ports = [p for d in devices for p in d.get("ports", [])]
    hoisted: dict[str, Any] = {}
    for key in ("speed", "mtu"):
        values = Counter(p[key] for p in ports if key in p)
        if not values:
            continue
        common, _ = values.most_common(1)[0]
        hoisted[key] = common
        for port in ports:
            if port.get(key) == common:
                del port[key]
    return hoisted


def build_skeleton(
    found: Sequence[Discovered],
    *,
    name: str,
    access: dict[str, dict[str, Any]] | None = None,
    login: dict[str, Any] | None = None,
    cable_m: float | None = None,
) -> Skeleton:
    """The fabric document for what ``found`` saw. ``access`` maps a switch's name to its
    management fields (host, port, host_key); ``login`` becomes ``defaults`` (username,
    credentials)."""
    duplicates = [n for n, c in Counter(d.name for d in found).items() if c > 1]
    if duplicates:
        raise AgentError(
            f"Expected: one switch per hostname Actual: {', '.join(duplicates)} answered more "
            "than once (the same switch given twice?)"
        )
    builder = _Builder(found)
    for device in found:
        for neighbor in device.neighbors:
            builder.add(device, neighbor)
    devices = builder.devices(access or {})
    document: dict[str, Any] = {"name": name, "profile": "nvidia-default"}
    defaults = _defaults(login or {}, _hoist_defaults(devices), cable_m)
    if defaults:
        document["defaults"] = defaults
    document["devices"] = devices
    hosts = [d["name"] for d in devices if d["role"] == "host" and "host" not in d]
    if hosts:
        builder.warnings.append(
            f"hosts without a management address in LLDP: {', '.join(hosts)}; set host "
            "(or netns in a lab) on each"
        )
    return Skeleton(document, builder.warnings)


def _defaults(
    login: dict[str, Any], port_defaults: dict[str, Any], cable_m: float | None
) -> dict[str, Any]:
    """The skeleton's ``defaults:``: the login, then the ports' common values."""
    if cable_m is not None:
        port_defaults["cable_m"] = int(cable_m) if float(cable_m).is_integer() else cable_m
    defaults = dict(login)
    if port_defaults:
        defaults["ports"] = port_defaults
    return defaults


class _Flow(dict[str, Any]):
    """A mapping written on one line (``{name: Ethernet1, peer: 'spine1:Ethernet1'}``)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)


def _flowing(document: dict[str, Any]) -> dict[str, Any]:
    """Devices as blocks, each port (and the small defaults) on one line: a port per line
    reads like a patch list."""
    devices: list[dict[str, Any]] = []
    for device in document["devices"]:
        if device["role"] == "host":
            devices.append(_Flow(device))
            continue
        entry = {k: v for k, v in device.items() if k != "ports"}
        if "ports" in device:
            entry["ports"] = [_Flow(p) for p in device["ports"]]
        devices.append(entry)
    defaults = {k: _Flow(v) if isinstance(v, dict) else v
                for k, v in document.get("defaults", {}).items()}  # fmt: skip
    result = {**document, "devices": devices}
    if defaults:
        result["defaults"] = defaults
    return result


def render(skeleton: Skeleton, output: str, cable_m: float | None) -> str:
    """YAML with a header that says what is left to do, or JSON for tools."""
    if output == "json":
        return json.dumps(skeleton.document, indent=2) + "\n"
    lines = ["# Fabric file skeleton written by `roce-agent discover` from LLDP."]
    if cable_m is None:
        lines += [
            "# cable_m is not set: PFC headroom depends on the cable length, so it is never",
            "# guessed. Set defaults.ports.cable_m, port_defaults.cable_m per device, or",
            "# cable_m per port before loading this file.",
        ]
    if any(d["role"] == "host" and "host" in d for d in skeleton.document["devices"]):
        lines += [
            "# A host's host: is the address its LLDP agent advertised (lldpd sends its first",
            "# IPv4 address): check that it is the host's management address.",
        ]
    lines += [f"# check: {w}" for w in skeleton.warnings]
    body = yaml.dump(
        _flowing(skeleton.document), Dumper=_Dumper, sort_keys=False, default_flow_style=False,
        width=100,
    )  # fmt: skip
    return "\n".join(lines) + "\n" + body


# ----------------------------------------------------------------------------- command


def _split(arguments: Sequence[str]) -> Path | None:
    """A single ``*.yml``/``*.yaml`` argument is a fabric file; otherwise all are targets."""
    fabrics = [a for a in arguments if a.lower().endswith(FABRIC_SUFFIXES)]
    if not fabrics:
        return None
    if len(arguments) > 1:
        raise click.BadParameter(
            f"Expected: one FABRIC file or [USER@]HOST[:PORT] targets Actual: {len(arguments)} "
            f"arguments including {fabrics[0]!r}",
            param_hint="'TARGET'",
        )
    path = Path(fabrics[0])
    if not path.is_file():
        raise click.BadParameter(
            f"Expected: an existing fabric file Actual: {path} does not exist",
            param_hint="'FABRIC'",
        )
    return path


def _valid_name(value: str) -> str:
    from agent.intent.model import check_name

    try:
        check_name(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--name'") from None
    return value


def _check_write(write: Path | None, force: bool) -> None:
    if write is not None and write.exists() and not force:
        raise click.BadParameter(
            f"Expected: a new file (or --force to replace it) Actual: {write} exists",
            param_hint="'--write'",
        )


def _defaults_login(path: Path | None, login: Login) -> dict[str, Any]:
    """The skeleton's ``defaults:`` login: the fabric file's, or the command line's."""
    if path is not None:
        data = _fabric_document(path)
        defaults = _mapping(data.get("defaults") if isinstance(data, dict) else None)
        return {k: defaults[k] for k in ("username", "credentials") if k in defaults}
    written: dict[str, Any] = {"username": login.username} if login.username else {}
    credentials = login.credentials()
    if credentials:
        written["credentials"] = credentials
    return written


def _access(target: Target, login: dict[str, Any]) -> dict[str, Any]:
    device = target.device
    fields: dict[str, Any] = {"host": device.host}
    if device.port != 22:
        fields["port"] = device.port
    if device.username != login.get("username"):
        fields["username"] = device.username
    if device.host_key:
        fields["host_key"] = device.host_key[0] if len(device.host_key) == 1 else device.host_key
    return fields


@click.command("discover")
@examples(
    "roce-agent --trust-on-first-use discover admin@10.0.0.11 admin@10.0.0.12 "
    "--platform arista_eos --password-env FABRIC_PW",
    "roce-agent discover mgmt-only.yml --cable-m 3 --write fabric.yml",
    "roce-agent discover 'netops@leaf1:2222' --platform sonic --password-env SONIC_PW -o json",
)
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("--platform", type=click.Choice(lldp.PLATFORMS), help="The targets' NOS.")
@click.option("--username", help="Login for targets without USER@.")
@click.option("--password-env", metavar="VAR", help="Environment variable with the password.")
@click.option(
    "--ssh-key", type=click.Path(path_type=Path, dir_okay=False, exists=True), help="SSH key."
)
@click.option(
    "--cable-m",
    type=FiniteFloat(0, 10_000, min_open=True),
    help="Cable length for every port (defaults.ports.cable_m); never guessed otherwise.",
)
@click.option("--name", "fabric_name", default="discovered", show_default=True,
              callback=lambda _c, _p, v: _valid_name(v), help="The fabric's name.")  # fmt: skip
@click.option(
    "--write",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the skeleton to this file (stdout otherwise).",
)
@click.option("--force", is_flag=True, help="With --write: replace an existing file.")
@output_option("yaml", "json", default="yaml")
@handle_errors
def discover_command(targets: tuple[str, ...], **options: Any) -> None:
    """Write a fabric file skeleton from the switches' LLDP neighbours, speeds and MTUs.

    TARGET is [USER@]HOST[:PORT] of a switch (all of one --platform), or a single fabric
    file (*.yml) whose switches have management addresses only: their ports are discovered.
    Links are written once, hosts seen by LLDP become linux_host devices, a switch with host
    neighbours is a leaf and one with only switch neighbours a spine. cable_m is left out
    unless --cable-m gives it.
    """
    run = Discovery(targets, **options)
    _check_write(run.write, run.force)
    found, access = run.read()
    skeleton = build_skeleton(found, name=run.fabric_name, access=access,
                              login=run.defaults_login(), cable_m=run.cable_m)  # fmt: skip
    text = render(skeleton, run.output, run.cable_m)
    if run.write is None:
        sys.stdout.write(text)
    else:
        run.write.write_text(text, encoding="utf-8")
    err = console(stderr=True)
    for warning in skeleton.warnings:
        err.print(f"warning: {warning}")
    if run.write is not None:
        links = sum(len(d.get("ports", [])) for d in skeleton.document["devices"])
        err.print(f"wrote {run.write}: {len(found)} switches, {links} ports declared")


@dataclass(frozen=True)
class Discovery:
    """One ``discover`` run: its TARGETs (switches, or one fabric file) and its options."""

    targets: tuple[str, ...]
    platform: str | None
    username: str | None
    password_env: str | None
    ssh_key: Path | None
    cable_m: float | None
    fabric_name: str
    write: Path | None
    force: bool
    output: str

    @functools.cached_property
    def fabric(self) -> Path | None:
        return _split(self.targets)

    @property
    def login(self) -> Login:
        return Login(self.username, self.password_env, self.ssh_key)

    def defaults_login(self) -> dict[str, Any]:
        return _defaults_login(self.fabric, self.login)

    def chosen(self) -> list[Target]:
        if self.fabric is not None:
            return targets_from_fabric(self.fabric)
        return targets_from_cli(self.targets, self.platform, self.login)

    def read(self) -> tuple[list[Discovered], dict[str, dict[str, Any]]]:
        """Every switch read (at most :data:`PARALLELISM` at once), named as the fabric file
        names them, and each one's management fields for the skeleton."""
        chosen = self.chosen()
        labels = [t.label for t in chosen]
        # keyed by how the user named each switch (the progress line shows the slowest one)
        keys = (
            labels
            if len(set(labels)) == len(labels)
            else [f"{n} #{i}" for i, n in enumerate(labels)]
        )
        with DeviceProgress("discover", keys):
            outcomes = run_each(dict(zip(keys, chosen, strict=True)), read_target, PARALLELISM)
        results = list(results_or_raise(outcomes).values())
        found = [f for _, f in results]
        if self.fabric is not None:  # the fabric's names win over the hostnames they report
            found = renamed(found, {f.name: t.label for t, f in results})
        problems = _check_names(found)
        if problems:
            raise click.BadParameter(
                "; ".join(problems) + " (is the platform right?)",
                param_hint="'FABRIC'" if self.fabric is not None else "'--platform'",
            )
        login = self.defaults_login()
        access = {f.name: _access(t, login) for (t, _), f in zip(results, found, strict=True)}
        return found, access


def renamed(found: Sequence[Discovered], names: dict[str, str]) -> list[Discovered]:
    """Rename switches (reported hostname -> fabric name), in their neighbours' tables too."""
    return [
        Discovered(
            names.get(d.name, d.name),
            d.platform,
            [replace(n, system_name=names.get(n.system_name, n.system_name)) for n in d.neighbors],
            d.ports,
        )
        for d in found
    ]

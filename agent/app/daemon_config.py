"""``agent.yaml``, the daemon's configuration: its schema (pydantic models, every key but
``fabric`` with a default), loading it with every file it names (the fabric, the scheduled
playbooks, the exporter's web config), ``serve --check-config``, the SSH settings it sets, and
the log fields of a configuration refused (:func:`error_fields`: reason, FILE:LINE:COL, the
problems, each cut short for one log line).

Loading is the same for the daemon's start and for a reload; a reload runs it in a child
process (:mod:`agent.app.reload_worker`).  What runs with a loaded configuration is
:mod:`agent.app.daemon`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.device.fanout import DEFAULT_PARALLELISM
from agent.errors import AgentError, IntentError, Problem
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.intent.shard import WHOLE, Shard, ShardError, parse_shard
from agent.ops.playbooks import load_playbook, playbook_path
from common.errors import MAX_SHOWN
from common.permissions import set_config_override
from common.validation import validation_problems
from common.yamlsource import load_yaml

DEFAULT_CONFIG = Path("/etc/roce-agent/agent.yaml")

# A reload that takes longer (a file that never ends, a loader stuck on hostile input) is
# refused and its worker killed; agent.yaml's reload_timeout_s changes it.
RELOAD_TIMEOUT_S = 30.0
T = TypeVar("T")


class DaemonModel(BaseModel):
    # nan and inf pass neither the bounds below nor this: no interval of nan seconds.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ExporterConfig(DaemonModel):
    listen: str = "127.0.0.1:9810"
    web_config: Path | None = None
    poll_interval_s: float = Field(default=30.0, gt=0, le=3600)
    # How switch counters are read (``exporter --telemetry``): gNMI subscriptions sampled every
    # poll_interval_s, SSH polls, or auto (gNMI where a switch answers it at start).
    telemetry: Literal["auto", "gnmi", "ssh"] = "auto"
    # Under gNMI, the counter families a switch's stream lacks are read over SSH all the same
    # (``exporter --no-ssh-complement`` is false here).
    ssh_complement: bool = True
    # Fair between client addresses (docs/exporter.md, "Connection limits"): one address never
    # takes more.
    max_connections: int = Field(default=32, ge=1, le=4096)
    max_connections_per_address: int = Field(default=8, ge=1, le=4096)

    @model_validator(mode="after")
    def _per_address_within_total(self) -> ExporterConfig:
        if self.max_connections_per_address > self.max_connections:
            raise ValueError(
                f"max_connections_per_address: Expected: at most max_connections "
                f"({self.max_connections}) Actual: {self.max_connections_per_address}"
            )
        return self

    def server_limits(self) -> Any:
        """The exporter server's limits (exporters.server.ServerLimits, imported lazily)."""
        from exporters.server import ServerLimits

        return ServerLimits(self.max_connections, self.max_connections_per_address)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        from exporters.server import parse_listen

        try:
            parse_listen(value)
        except AgentError:
            raise ValueError(f"expected HOST:PORT, [IPv6]:PORT or :PORT, got {value!r}") from None
        return value


class Intervals(DaemonModel):
    reconcile_s: float = Field(default=300.0, gt=0, le=86400)


class ScheduledPlaybook(DaemonModel):
    name: str
    every_s: float = Field(gt=0, le=7 * 86400)


class ApplySettings(DaemonModel):
    canary: int = Field(default=1, ge=0)
    batch_size: int = Field(default=8, ge=1)
    # SSH sessions at once. Each agent session lasts longer than a plain push (commit timer,
    # readback), so matching a netmiko pool of P workers takes more than P (docs/push.md).
    parallelism: int = Field(default=DEFAULT_PARALLELISM, ge=1)
    confirm_timeout_s: int = Field(default=300, ge=5, le=3600)


def _shard(value: Any) -> Shard:
    if isinstance(value, Shard):
        return value
    if not isinstance(value, str):
        # `shard: 2` is an int to YAML: say what is expected rather than "not a string".
        raise ValueError(f"Expected: K/N, e.g. 2/4 Actual: {value!r}")
    try:
        return parse_shard(value)
    except ShardError as exc:
        raise ValueError(str(exc).removeprefix("shard: ")) from None


ShardField = Annotated[Shard, PlainValidator(_shard), PlainSerializer(str)]


class DaemonConfig(DaemonModel):
    """``agent.yaml``: every key but ``fabric`` has a default."""

    fabric: Path
    # Which part of the fabric this agent owns (agent/intent/shard.py); `serve --shard` overrides
    # it.
    shard: ShardField = WHOLE
    mode: Literal["observe", "enforce"] = "observe"
    state_dir: Path = Path("/var/lib/roce-agent")
    # The whole SSH connect per device (TCP, banner, key exchange, login, first prompt),
    # retries included: `roce-agent --connect-timeout` for the daemon (agent/device/ssh.py).
    connect_timeout_s: float = Field(default=10.0, gt=0, le=600)
    exporter: ExporterConfig | None = ExporterConfig()
    intervals: Intervals = Intervals()
    playbooks: list[ScheduledPlaybook] = Field(default_factory=list)
    apply: ApplySettings = ApplySettings()
    # Read the fabric, credential and web config files this file names even when others can
    # write or read them, logging each (common.permissions); agent.yaml's own mode is checked
    # before this is read, so only `roce-agent --insecure-permissions` overrides that.
    insecure_permissions: bool = False
    # How long a SIGHUP reload may parse and validate before it is refused (the running
    # configuration's value applies to the next reload).
    reload_timeout_s: float = Field(default=RELOAD_TIMEOUT_S, gt=0, le=600)


@dataclass
class Loaded:
    config: DaemonConfig
    intent: FabricIntent
    path: Path
    web: Any = None  # exporters.webconfig.WebConfig, loaded and checked with the rest

    @property
    def shard(self) -> Shard:
        return self.config.shard

    def with_shard(self, shard: Shard | None) -> Loaded:
        """This configuration with ``serve --shard`` applied (the flag wins over the file)."""
        if shard is None:
            return self
        return replace(self, config=self.config.model_copy(update={"shard": shard}))

    def owned_switches(self) -> list[str]:
        """The switches of this agent's shard, in fabric order."""
        return self.shard.select(d.name for d in self.intent.devices if d.role != "host")


def _guard(file: Path, step: Callable[[], T]) -> T:
    """Run one loading step; anything but an :class:`AgentError` (a loader bug, RecursionError,
    MemoryError on hostile input) becomes an error naming the file being read."""
    try:
        return step()
    except AgentError:
        raise
    except Exception as exc:
        raise IntentError(
            [Problem(None, "", f"{file}: cannot load: {type(exc).__name__}: {exc}"[:500])]
        ) from None


def load_config(path: Path) -> Loaded:
    """Parse and validate agent.yaml, its fabric, its playbooks and the exporter's web config;
    an :class:`AgentError` on anything, located as precisely as the input allows."""
    # agent.yaml's own mode answers to `roce-agent --insecure-permissions` only, never to
    # the insecure_permissions of the file it replaces; a refused reload restores that one.
    previous = set_config_override(None)
    try:
        data, source = _guard(path, lambda: load_yaml(path))
        try:
            config = DaemonConfig.model_validate(data)
        except ValidationError as exc:
            raise IntentError(validation_problems(exc, data, source)) from None
        set_config_override(path if config.insecure_permissions else None)
        return _load_named_files(path, config)
    except BaseException:
        set_config_override(previous)
        raise


def _load_named_files(path: Path, config: DaemonConfig) -> Loaded:
    """The fabric, web config and playbooks agent.yaml names, loaded and checked."""
    fabric = config.fabric if config.fabric.is_absolute() else path.parent / config.fabric
    update: dict[str, Any] = {"fabric": fabric}
    web = None
    if config.exporter is not None and config.exporter.web_config is not None:
        from exporters.webconfig import load_web_config

        web_file = config.exporter.web_config
        web_file = web_file if web_file.is_absolute() else path.parent / web_file
        update["exporter"] = config.exporter.model_copy(update={"web_config": web_file})
        web = _guard(web_file, lambda: load_web_config(web_file))
    config = config.model_copy(update=update)
    intent = _guard(fabric, lambda: load_fabric(fabric).intent)
    for scheduled in config.playbooks:
        playbook = playbook_path(scheduled.name)
        _guard(playbook, functools.partial(load_playbook, playbook))
    return Loaded(config, intent, path, web)


def check_config(path: Path, shard: Shard | None = None) -> str:
    """``serve --check-config``: everything ``serve`` would load (agent.yaml, the fabric, the
    scheduled playbooks, the exporter's web config), plus what the first poll would read —
    each device's credential files and known_hosts. An :class:`AgentError` naming file:line
    and field on the first kind of failure, every problem of that kind at once; on success,
    one line saying what was checked. Nothing is bound, started or connected to."""
    loaded = load_config(path).with_shard(shard)
    fabric = loaded.config.fabric
    # One fabric usually gives every device the same credentials: one problem per distinct
    # failure, naming the first device and how many share it, not one per switch.
    seen: dict[str, list[str]] = {}
    for device in loaded.intent.devices:
        if device.host is None:
            continue
        for problem in _device_file_problems(device):
            generic = problem.removeprefix(f"device {device.name}: ")
            seen.setdefault(generic, []).append(device.name)
    trust = _trust_file_problems(loaded)
    if seen or trust:
        raise IntentError(
            [
                Problem(None, "", f"{fabric}: device {names[0]}{_more(names)}: {generic}")
                for generic, names in seen.items()
            ]
            + [Problem(None, "", problem) for problem in trust]
        )
    exporter = loaded.config.exporter
    web = exporter.web_config if exporter is not None else None
    playbooks = ", ".join(p.name for p in loaded.config.playbooks) or "none"
    return (
        f"{path}: ok: fabric {loaded.intent.name} ({fabric}, "
        f"{len(loaded.owned_switches())} switches in shard {loaded.shard}), mode "
        f"{loaded.config.mode}, exporter {exporter.listen if exporter else 'off'}"
        f"{f' with web config {web}' if web else ''}, scheduled playbooks: {playbooks}"
    )


def configure_connections(config: DaemonConfig) -> None:
    """The SSH settings every connection of this configuration uses: the connect budget and
    the trust-on-first-use file in the state dir (agent/device/ssh.py, hostkeys.py)."""
    from agent.device import hostkeys, ssh

    ssh.configure(connect_timeout_s=config.connect_timeout_s)
    hostkeys.configure(state_dir=config.state_dir)


def _trust_file_problems(loaded: Loaded) -> list[str]:
    """Broken lines of the known_hosts files the devices are checked against (a run refuses
    only the device a line names; the check says every one)."""
    from agent.device import hostkeys

    hostkeys.configure(state_dir=loaded.config.state_dir)
    return hostkeys.trust_file_problems(d for d in loaded.intent.devices if d.host is not None)


def _more(names: list[str]) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def _device_file_problems(device: Any) -> list[str]:
    problems: list[str] = []
    if device.credentials is not None:
        try:
            device.credentials.resolve_password(device.name)
            device.credentials.check_key(device.name)
        except AgentError as exc:
            problems.append(str(exc))
    known_hosts = device.known_hosts
    if known_hosts is not None and not os.access(known_hosts, os.R_OK):
        problems.append(f"device {device.name}: known_hosts: cannot read {known_hosts}")
    return problems


def listen_position(path: Path) -> str:
    """``FILE:LINE:COL`` of ``exporter.listen`` in agent.yaml (for a bind that fails)."""
    try:
        _, source = load_yaml(path)
    except AgentError:
        return str(path)
    position = source.locate(("exporter", "listen"))
    return str(position) if position else str(path)


_LOCATED = re.compile(r"^(?P<file>/[^:\n]+?)(?::(?P<line>\d+)(?::(?P<column>\d+))?)?: ")


# A refused reload is one log line: a value from the file (a 200 000-digit port name) is cut
# short there, and so is the list of problems (an IntentError's own list is already cut to
# MAX_SHOWN and its line saying how many more; other errors are cut here the same way).
FIELD_CHARS = 1000
MAX_PROBLEMS = MAX_SHOWN + 1


def _cut(text: str) -> str:
    return (
        text if len(text) <= FIELD_CHARS else f"{text[: FIELD_CHARS - 30]}... ({len(text)} chars)"
    )


def error_fields(exc: BaseException) -> dict[str, Any]:
    """The log fields of a refused reload: reason, file, line, column, the problems (the
    first :data:`MAX_PROBLEMS`, each at most :data:`FIELD_CHARS` long)."""
    fields = _error_fields(exc)
    problems = fields["problems"]
    fields["reason"] = _cut(fields["reason"])
    fields["problems"] = [_cut(p) for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        fields["problems"].append(f"... and {len(problems) - MAX_PROBLEMS} more")
    return fields


def _error_fields(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, IntentError) and exc.problems:
        problems = [str(p) for p in exc.problems]
        located = next((p for p in exc.problems if p.position is not None), None)
        if located is not None and located.position is not None:
            where = {
                "file": str(located.position.file),
                "line": located.position.line,
                "column": located.position.column,
            }
            return {"reason": str(located), **where, "problems": problems}
        reason = problems[0]
    elif isinstance(exc, AgentError):
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems = str(exc).splitlines()
    else:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        problems = [reason]
    fields: dict[str, Any] = {"reason": reason, "problems": problems}
    match = _LOCATED.match(reason)
    if match:
        fields["file"] = match["file"]
        for key in ("line", "column"):
            if match[key]:
                fields[key] = int(match[key])
    return fields

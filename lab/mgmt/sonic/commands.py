"""SONiC commands behind the shell: ``config`` (GCU), ``sonic-cfggen``, ``show``, ``pfcwd``,
``systemd-run``, ``systemctl``, ``docker exec lldp lldpctl``.

``config``'s command line follows click as sonic-utilities ``config/main.py`` declares it
(the group refuses non-root users: "Root privileges are required for this operation"; unknown
options and missing arguments are click's usage errors). See :mod:`lab.mgmt.sonic.gcu` for the
GCU commands, :mod:`lab.mgmt.sonic.timers` for systemd, :mod:`lab.mgmt.sonic.shows` for the
show commands.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lab.mgmt.linux_shell import STATUS, failed
from lab.mgmt.sonic import gcu, lldp, shows
from lab.mgmt.sonic.configdb import SHOWN_CONFIG_DB_PATH, print_data
from lab.mgmt.sonic.state import SonicSwitch
from lab.mgmt.sonic.text import natsorted_dict
from lab.mgmt.sonic.timers import format_timers, parse_timespan, systemd_run_args

ROOT_REQUIRED = "Root privileges are required for this operation"
AUTH_REQUIRED = "Interactive authentication required."

Command = Callable[[SonicSwitch, list[str], bool], Awaitable[str]]


async def run(switch: SonicSwitch, argv: list[str], root: bool) -> str:
    """Run a command that is not a shell builtin."""
    STATUS.set(0)
    name = os.path.basename(argv[0])
    handler = COMMANDS.get(name)
    if handler is None:
        return failed(f"-bash: {argv[0]}: command not found", 127)
    return await handler(switch, argv[1:], root)


# ------------------------------------------------------------------------------- click parsing


@dataclass
class Spec:
    """One ``config`` subcommand: its flags, valued options and argument."""

    metavar: str | None  # the one positional argument (None: takes none)
    flags: dict[str, str] = field(default_factory=dict)  # "-d" / "--dry-run" -> "dry_run"
    values: dict[str, str] = field(default_factory=dict)  # "-f" / "--format" -> "format"
    required: bool = True


_VERBOSE = {"-v": "verbose", "--verbose": "verbose"}
_DRY = {"-d": "dry_run", "--dry-run": "dry_run"}
_IGNORE = {"-n": "ignore", "--ignore-non-yang-tables": "ignore"}
SPECS = {
    "apply-patch": Spec(
        "PATCH_FILE_PATH",
        {**_DRY, **_VERBOSE, **_IGNORE, "-p": "parallel", "--parallel": "parallel"},
        {"-f": "format", "--format": "format", "-i": "ignore_path", "--ignore-path": "ignore_path"},
    ),
    "replace": Spec(
        "TARGET_FILE_PATH", {**_DRY, **_VERBOSE, **_IGNORE}, {"-f": "format", "--format": "format"}
    ),
    "rollback": Spec("CHECKPOINT_NAME", {**_DRY, **_VERBOSE, **_IGNORE}),
    "checkpoint": Spec("CHECKPOINT_NAME", dict(_VERBOSE)),
    "delete-checkpoint": Spec("CHECKPOINT_NAME", dict(_VERBOSE)),
    "list-checkpoints": Spec(None, {"-t": "time", "--time": "time", **_VERBOSE}),
    "save": Spec("FILENAME", {"-y": "yes", "--yes": "yes"}, required=False),
}


@dataclass
class Parsed:
    """A parsed ``config`` subcommand line."""

    options: dict[str, Any] = field(default_factory=dict)
    argument: str | None = None


def _parse(command: str, spec: Spec, args: list[str]) -> Parsed | str:
    """click's parse, or its usage error text."""
    parsed = Parsed()
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and name in spec.flags:
            parsed.options[spec.flags[name]] = True
        elif arg.startswith("-") and name in spec.values:
            if not eq:
                if not rest:
                    return _usage(command, spec, f"Option '{name}' requires an argument.")
                value = rest.pop(0)
            parsed.options[spec.values[name]] = value
        elif arg.startswith("-") and arg != "-":
            return _usage(command, spec, f"No such option: {name}")
        elif parsed.argument is None and spec.metavar is not None:
            parsed.argument = arg
        else:
            return _usage(command, spec, f"Got unexpected extra argument ({arg})")
    if parsed.argument is None and spec.metavar is not None and spec.required:
        return _usage(command, spec, f"Missing argument '{spec.metavar}'.")
    return parsed


def _usage(command: str, spec: Spec, message: str) -> str:
    console = gcu.Console([])
    metavar = spec.metavar if spec.required else f"[{spec.metavar}]"
    gcu.click_failure(console, command, metavar or "", message)
    return console.text().replace(" [OPTIONS] \n", " [OPTIONS]\n")


# ------------------------------------------------------------------------------- config


async def config(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """``config <subcommand>``."""
    if not root:
        return failed(ROOT_REQUIRED)
    if not args:
        return (
            "Usage: config [OPTIONS] COMMAND [ARGS]...\n\n  SONiC command line - 'config' command"
        )
    spec = SPECS.get(args[0])
    if spec is None:
        return failed(
            "Usage: config [OPTIONS] COMMAND [ARGS]...\nTry 'config -h' for help.\n\n"
            f"Error: No such command '{args[0]}'.",
            2,
        )
    parsed = _parse(args[0], spec, args[1:])
    if isinstance(parsed, str):
        return failed(parsed, 2)
    console = gcu.Console([])
    async with switch.gcu_lock:
        ok = await _config_subcommand(switch, console, args[0], parsed)
    return console.text() if ok else failed(console.text(), 2)


async def _config_subcommand(
    switch: SonicSwitch, console: gcu.Console, name: str, parsed: Parsed
) -> bool:
    options, argument = parsed.options, parsed.argument or ""
    dry_run = bool(options.get("dry_run"))
    if name == "apply-patch":
        fmt = str(options.get("format", "CONFIGDB"))
        if fmt.upper() not in ("CONFIGDB", "SONICYANG"):
            console.lines.append(
                _usage(
                    name,
                    SPECS[name],
                    f"Invalid value for '-f' / '--format': '{fmt}' is not one of "
                    "'CONFIGDB', 'SONICYANG'.",
                )
            )
            return False
        return await gcu.apply_patch(
            console, switch, gcu.PatchRequest(argument, dry_run, fmt.upper())
        )
    if name == "replace":
        return await gcu.replace(console, switch, argument, dry_run)
    if name == "rollback":
        return await gcu.rollback(console, switch, argument, dry_run)
    if name == "checkpoint":
        return gcu.checkpoint(console, switch, argument)
    if name == "delete-checkpoint":
        return gcu.delete_checkpoint(console, switch, argument)
    if name == "list-checkpoints":
        return gcu.list_checkpoints(console, switch, bool(options.get("time")))
    return await _save(switch, console, options, parsed.argument)


async def _save(
    switch: SonicSwitch, console: gcu.Console, options: dict[str, Any], filename: str | None
) -> bool:
    if not options.get("yes"):
        # click's confirmation prompt; the lab's shell has no interactive input: abort.
        console.lines += ["Existing files will be overwritten, continue? [y/N]: ", "Aborted!"]
        return False
    if filename is not None:
        console.lines.append(f"lab: config save writes only {SHOWN_CONFIG_DB_PATH}")
        return False
    return await gcu.save(console, switch)


# ------------------------------------------------------------------------------- sonic-cfggen


async def sonic_cfggen(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """``sonic-cfggen -d --print-data`` / ``-d --var-json TABLE`` (read-only here)."""
    if "-d" not in args:
        return "sonic-cfggen: lab: only reads of the running CONFIG_DB (-d) are emulated"
    db = switch.db
    if "--print-data" in args:
        return print_data(db)
    if "--var-json" in args:
        index = args.index("--var-json") + 1
        table = args[index] if index < len(args) else ""
        return json.dumps(natsorted_dict(db.get(table, {})), indent=4)
    return "usage: sonic-cfggen [-h] ... (lab: -d --print-data | -d --var-json TABLE)"


# ------------------------------------------------------------------------------- show


async def _views(switch: SonicSwitch) -> list[shows.PortView]:
    config = await switch.manager.dataplane.get_config()
    default_xoff = int(config.get("buffer", {}).get("xoff_bytes", 0))
    by_port = {p.get("ifname"): p for p in config.get("ports", [])}
    views = []
    for port in switch.ports:
        dataplane = f"eth{port.index}"
        own = (by_port.get(dataplane) or {}).get("buffer") or {}
        views.append(shows.PortView(port.name, dataplane, int(own.get("xoff_bytes", default_xoff))))
    return views


def _watched_queues(switch: SonicSwitch) -> dict[str, list[int]]:
    db = switch.db
    watched: dict[str, list[int]] = {}
    for name in db.get("PFC_WD", {}):
        entry = db.get("PORT_QOS_MAP", {}).get(name, {})
        text = entry.get("pfcwd_sw_enable", entry.get("pfc_enable", ""))
        watched[name] = [int(p) for p in str(text).split(",") if p.strip()]
    return watched


async def show(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """The ``show`` commands the agent reads."""
    words = " ".join(args)
    if words == "runningconfiguration all":
        return print_data(switch.db)
    if words in ("pfcwd stats", "pfcwd stats -e"):
        return await pfcwd(switch, ["show", *args[1:]], root)
    trim = await _trim_show(switch, args)
    if trim is not None:
        return trim
    table = SHOWS.get(words)
    if table is None:
        first = args[0] if args else ""
        return (
            "Usage: show [OPTIONS] COMMAND [ARGS]...\nTry 'show -h' for help.\n\n"
            f"Error: No such command '{first}'."
        )
    counters = await switch.manager.dataplane.counters()
    return table(await _views(switch), counters)


_JSON_FLAGS = ("-j", "--json")
_QUEUE_TRIM_FLAGS = ("-T", "--trim")


async def _trim_show(switch: SonicSwitch, args: list[str]) -> str | None:
    """``show queue counters [IFACE] --trim [-j]`` and ``show interfaces counters trim [IFACE]
    [-j]`` (None: another command)."""
    as_json = any(a in _JSON_FLAGS for a in args)
    words = [a for a in args if a not in _JSON_FLAGS]
    if words[:2] == ["queue", "counters"] and any(a in _QUEUE_TRIM_FLAGS for a in words):
        names = [a for a in words[2:] if a not in _QUEUE_TRIM_FLAGS]
        render = shows.queue_trim_counters
    elif words[:3] == ["interfaces", "counters", "trim"]:
        names = words[3:]
        render = shows.interface_trim_counters
    else:
        return None
    views = await _views(switch)
    if names:
        views = [v for v in views if v.name in names]
        if not views or len(names) > 1:
            return f"Interface {' '.join(names)} doesn't exist"  # lab: one IFACE at most
    counters = await switch.manager.dataplane.counters()
    return render(views, counters, as_json)


SHOWS: dict[str, Callable[[list[shows.PortView], dict[str, Any]], str]] = {
    "pfc counters": shows.pfc_counters,
    "queue counters": shows.queue_counters,
    "queue wredcounters": shows.wred_counters,
    "queue watermark unicast": shows.queue_watermark,
    "priority-group watermark headroom": lambda v, c: shows.pg_watermark(v, c, "headroom"),
    "priority-group watermark shared": lambda v, c: shows.pg_watermark(v, c, "shared"),
    "priority-group drop counters": shows.pg_drops,
}


async def pfcwd(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """``pfcwd show stats [-e]``."""
    if args[:2] != ["show", "stats"]:
        return "lab: only 'pfcwd show stats [-e]' is emulated"
    counters = await switch.manager.dataplane.counters()
    empty = "-e" in args or "--empty" in args
    return shows.pfcwd_stats(await _views(switch), counters, _watched_queues(switch), empty)


async def docker(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """``docker exec [-i] lldp lldpctl -f json``."""
    words = [a for a in args if a not in ("-i", "-t", "-it")]
    if words[:2] == ["exec", "lldp"] and words[2:] == ["lldpctl", "-f", "json"]:
        names = {p.index: p.name for p in switch.ports}
        pairs = [
            (names[int(p.name.removeprefix("Ethernet"))], p.link) for p in switch.manager.ports
        ]
        return lldp.lldpctl_json(pairs)
    return "lab: only 'docker exec lldp lldpctl -f json' is emulated"


# ------------------------------------------------------------------------------- systemd


async def systemd_run(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """``systemd-run --on-active=SPEC --unit=NAME [--timer-property=...] COMMAND...``."""
    parsed = systemd_run_args(args)
    if isinstance(parsed, str):
        return failed(parsed)
    options, command = parsed
    if not root:
        return failed(f"Failed to start transient timer unit: {AUTH_REQUIRED}")
    if "--on-active" not in options:
        return "lab: only timers (--on-active=) are emulated"
    delay = parse_timespan(options["--on-active"][-1])
    if delay is None:
        return failed(f"Failed to parse timer value: {options['--on-active'][-1]}")
    if not command:
        return failed("Command line to execute required.")
    unit = options.get("--unit", [f"run-u{len(switch.timers.units) + 1}"])[-1]
    unit = unit.removesuffix(".timer").removesuffix(".service")
    if unit in switch.timers.units:
        return failed(
            f"Failed to start transient timer unit: Unit {unit}.timer was already loaded or "
            "has a fragment file."
        )
    switch.timers.start(unit, delay, command)
    if options.get("-q") or options.get("--quiet"):
        return ""
    return f"Running timer as unit: {unit}.timer\nWill run service as unit: {unit}.service"


async def systemctl(switch: SonicSwitch, args: list[str], root: bool) -> str:
    """``systemctl stop UNIT.timer`` and ``systemctl list-timers [PATTERN...]``."""
    words = [a for a in args if not a.startswith("-")]
    flags = {a for a in args if a.startswith("-")}
    if words[:1] == ["list-timers"]:
        rows = switch.timers.rows(words[1:], "--all" in flags or "-a" in flags)
        return format_timers(rows, "--no-legend" not in flags, "--all" in flags or "-a" in flags)
    if words[:1] == ["stop"] and len(words) > 1:
        return "\n".join(_stop(switch, unit, root) for unit in words[1:]).strip("\n")
    return "lab: only 'systemctl stop UNIT' and 'systemctl list-timers' are emulated"


def _stop(switch: SonicSwitch, unit: str, root: bool) -> str:
    if not root:
        return failed(f"Failed to stop {unit}: {AUTH_REQUIRED}", 4)
    name = unit.removesuffix(".timer")
    if unit.endswith(".timer") and switch.timers.stop(name):
        return ""
    if unit.endswith(".service") and unit.removesuffix(".service") in switch.timers.units:
        return ""  # the service of a pending timer is not running: nothing to stop
    return failed(
        f"Failed to stop {unit}: Unit {unit if '.' in unit else unit + '.service'} not loaded.", 5
    )


COMMANDS: dict[str, Command] = {
    "config": config,
    "sonic-cfggen": sonic_cfggen,
    "show": show,
    "pfcwd": pfcwd,
    "docker": docker,
    "systemd-run": systemd_run,
    "systemctl": systemctl,
}

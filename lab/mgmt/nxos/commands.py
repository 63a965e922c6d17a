"""NX-OS configuration modes and their commands: each matched line edits an
:class:`~lab.mgmt.nxos.config.NxosConfig`.

Syntax and modes from Cisco's Nexus 9000 Series NX-OS Quality of Service Configuration Guide
(chapters "Using Modular QoS CLI", "Configuring Classification", "Configuring Queuing and
Scheduling", "Configuring Network QoS", "Configuring Priority Flow Control" with its PFC
watchdog section) and the NX-OS command reference; docs/lab-nxos.md cites each line:

* ``class-map type qos [match-any|match-all] NAME`` -> ``(config-cmap-qos)``: ``match dscp
  LIST``, ``match cos LIST`` (and their ``no`` forms);
* ``policy-map type qos NAME`` -> ``(config-pmap-qos)``: ``class NAME`` ->
  ``(config-pmap-c-qos)``: ``set qos-group N``;
* ``policy-map type network-qos NAME`` -> ``(config-pmap-nqos)``: ``class type network-qos
  c-8q-nqN`` -> ``(config-pmap-nqos-c)``: ``mtu N``, ``pause pfc-cos LIST``;
* ``policy-map type queuing NAME`` -> ``(config-pmap-que)``: ``class type queuing
  c-out-8q-qN`` -> ``(config-pmap-c-que)``: ``priority [level N]``, ``bandwidth [remaining]
  percent N``, ``random-detect minimum-threshold N UNIT maximum-threshold N UNIT
  [drop-probability P] [weight W] [ecn]``;
* ``system qos`` -> ``(config-sys-qos)``: ``service-policy type network-qos NAME``,
  ``service-policy type queuing output NAME``, ``service-policy type qos input NAME``;
* global ``priority-flow-control watch-dog-interval on|off``, ``priority-flow-control watch-dog
  interval MS`` (100-1000), ``... watch-dog shutdown-multiplier N`` (1-10),
  ``priority-flow-control auto-restore multiplier N`` (0-100);
* ``interface ethernet 1/N[-M]`` -> ``(config-if)`` / ``(config-if-range)``: ``description``,
  ``mtu``, ``priority-flow-control mode on|off|auto [send-tlv]``, ``priority-flow-control
  watch-dog-interval on|off``, ``service-policy type qos input NAME``, ``service-policy type
  queuing output NAME``;
* ``hostname``, ``feature lldp``, and the ``version`` line a saved configuration starts with.

A line a sub-mode does not know goes to the enclosing modes (``interface ...`` inside a
policy-map leaves it), as NX-OS does (:func:`lab.mgmt.cli_grammar.apply_in_modes`). Errors are
``%`` lines; what a line refers to must exist (a policy that is attached cannot be deleted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from lab.mgmt.cli_grammar import (
    CliError,
    Command,
    Converter,
    apply_in_modes,
    load_lines,
    register_value_type,
    tokenize,
)
from lab.mgmt.names import parse_number_list
from lab.mgmt.nxos.config import (
    CLASS_DEFAULT,
    NETWORK_QOS_CLASSES,
    QUEUING_CLASSES,
    ClassMap,
    NxosConfig,
    PolicyClass,
    PolicyMap,
    PolicyType,
    Wred,
)

HOSTNAME_RE = r"[A-Za-z0-9][A-Za-z0-9._\-]{0,62}"
_NAME = "<name:word:[A-Za-z0-9_.\\-]{1,40}>"
# ethernet1/1, Eth1/1-4, e1/1,1/3 (any abbreviation of "ethernet"; "interface ethernet 1/1"
# gives the bare form)
_IF_RE = re.compile(r"(?:e|et|eth|ethe|ether|ethern|etherne|ethernet)?(\d+)/([\d,\-]+)", re.I)


@dataclass(frozen=True)
class Ports:
    """The value of ``interface ethernet 1/1-3``: the NX-OS names."""

    names: tuple[str, ...]


def _ports(_arg: str) -> Converter:
    def convert(token: str) -> Ports:
        match = _IF_RE.fullmatch(token)
        if match is None or match.group(1) != "1":
            raise ValueError(token)
        try:
            numbers = parse_number_list(match.group(2))
        except ValueError:
            raise ValueError(token) from None
        return Ports(tuple(f"Ethernet1/{n}" for n in numbers))

    return convert


def _values(arg: str) -> Converter:
    """``26``, ``24-31``, ``26,48``: a list of numbers in ``arg``'s range (``0-63``)."""
    low, high = (int(x) for x in arg.split("-"))

    def convert(token: str) -> list[int]:
        try:
            numbers = parse_number_list(token)
        except ValueError:
            raise ValueError(token) from None
        if not all(low <= n <= high for n in numbers):
            raise ValueError(token)
        return numbers

    return convert


register_value_type("nxports", _ports)
register_value_type("values", _values)


# ----------------------------------------------------------------------------- modes


@dataclass(frozen=True)
class GlobalMode:
    """``(config)#``."""

    def label(self) -> str:
        return "config"


@dataclass(frozen=True)
class ClassMapMode:
    """``(config-cmap-qos)#``."""

    name: str

    def label(self) -> str:
        return "config-cmap-qos"


_POLICY_LABELS = {"qos": "qos", "queuing": "que", "network-qos": "nqos"}


@dataclass(frozen=True)
class PolicyMode:
    """``(config-pmap-qos|que|nqos)#``."""

    kind: PolicyType
    name: str

    def label(self) -> str:
        return f"config-pmap-{_POLICY_LABELS[self.kind]}"


@dataclass(frozen=True)
class PolicyClassMode:
    """``(config-pmap-c-qos)#``, ``(config-pmap-c-que)#``, ``(config-pmap-nqos-c)#``."""

    kind: PolicyType
    policy: str
    name: str

    def label(self) -> str:
        if self.kind == "network-qos":
            return "config-pmap-nqos-c"
        return f"config-pmap-c-{_POLICY_LABELS[self.kind]}"


@dataclass(frozen=True)
class SystemQosMode:
    """``(config-sys-qos)#``."""

    def label(self) -> str:
        return "config-sys-qos"


@dataclass(frozen=True)
class InterfaceMode:
    """``(config-if)#`` (one port) or ``(config-if-range)#``."""

    names: tuple[str, ...]

    def label(self) -> str:
        return "config-if" if len(self.names) == 1 else "config-if-range"


ConfigMode = (
    GlobalMode | ClassMapMode | PolicyMode | PolicyClassMode | SystemQosMode | InterfaceMode
)
Handler = Callable[[NxosConfig, Any, dict[str, Any]], ConfigMode | None]


# ----------------------------------------------------------------------------- global


def _hostname(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
    config.hostname = args["name"]


def _nothing(_config: NxosConfig, _mode: Any, _args: dict[str, Any]) -> None:
    """A line that changes nothing the lab models (the ``version`` line of a saved file)."""


def _feature_lldp(enabled: bool) -> Handler:
    def handler(config: NxosConfig, _mode: Any, _args: dict[str, Any]) -> None:
        config.lldp = enabled

    return handler


def _class_map(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> ClassMapMode:
    name = args["name"]
    existing = config.class_maps.get(name)
    match_all = args.get("match", "match-all") == "match-all"
    if existing is None:
        config.class_maps[name] = ClassMap(match_all=match_all)
    elif "match" in args and existing.match_all != match_all:
        raise CliError(f"% class-map {name} exists with another match type")
    return ClassMapMode(name)


def _no_class_map(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
    name = args["name"]
    if name not in config.class_maps:
        raise CliError(f"% class-map {name} does not exist")
    users = [
        f"policy-map {policy}"
        for (kind, policy), pmap in config.policies.items()
        if kind == "qos" and name in pmap.classes
    ]
    if users:
        raise CliError(f"% class-map {name} is used by {', '.join(users)}")
    del config.class_maps[name]


def _policy_map(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> PolicyMode:
    kind = cast(PolicyType, args["type"])
    config.policies.setdefault((kind, args["name"]), PolicyMap())
    return PolicyMode(kind, args["name"])


def _no_policy_map(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
    kind = cast(PolicyType, args["type"])
    if (kind, args["name"]) not in config.policies:
        raise CliError(f"% policy-map {args['name']} does not exist")
    users = config.policy_users(kind, args["name"])
    if users:
        raise CliError(f"% policy-map {args['name']} is in use ({', '.join(users)})")
    del config.policies[(kind, args["name"])]


def _system_qos(_config: NxosConfig, _mode: Any, _args: dict[str, Any]) -> SystemQosMode:
    return SystemQosMode()


def _interfaces(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> InterfaceMode:
    found: list[str] = []
    for ports in args["ports"]:
        found += ports.names
    missing = [n for n in found if n not in config.interfaces]
    if missing:
        raise CliError(f"% Invalid interface {missing[0]}: no such port on this switch")
    return InterfaceMode(tuple(dict.fromkeys(found)))


def _watchdog(attribute: str, value: Any = None) -> Handler:
    """A global watchdog line: ``value`` fixed (on/off/unset) or the parsed ``n``."""

    def handler(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
        setattr(config.watchdog, attribute, args.get("n", value))

    return handler


def _watchdog_switch(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
    config.watchdog.enabled = args["state"] == "on"


_PFC = "priority-flow-control"
_SHUTDOWN, _RESTORE = "shutdown_multiplier", "auto_restore_multiplier"
GLOBAL_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"hostname <name:word:{HOSTNAME_RE}>", _hostname),
    Command("version <x:rest>", _nothing),
    Command("feature lldp", _feature_lldp(True)),
    Command("no feature lldp", _feature_lldp(False)),
    Command(f"class-map type qos [<match:choice:match-any,match-all>] {_NAME}", _class_map),
    Command(f"no class-map type qos {_NAME}", _no_class_map),
    Command(f"policy-map type <type:choice:qos,queuing,network-qos> {_NAME}", _policy_map),
    Command(f"no policy-map type <type:choice:qos,queuing,network-qos> {_NAME}", _no_policy_map),
    Command("system qos", _system_qos),
    Command("interface <ports:nxportss>", _interfaces),
    Command("interface ethernet <ports:nxportss>", _interfaces),
    Command(f"{_PFC} watch-dog-interval <state:choice:on,off>", _watchdog_switch),
    Command(f"no {_PFC} watch-dog-interval [<state:choice:on,off>]", _watchdog("enabled")),
    Command(f"{_PFC} watch-dog interval <n:int:100-1000>", _watchdog("interval_ms")),
    Command(f"no {_PFC} watch-dog interval [<x:rest>]", _watchdog("interval_ms")),
    Command(f"{_PFC} watch-dog shutdown-multiplier <n:int:1-10>", _watchdog(_SHUTDOWN)),
    Command(f"no {_PFC} watch-dog shutdown-multiplier [<x:rest>]", _watchdog(_SHUTDOWN)),
    Command(f"{_PFC} auto-restore multiplier <n:int:0-100>", _watchdog(_RESTORE)),
    Command(f"no {_PFC} auto-restore multiplier [<x:rest>]", _watchdog(_RESTORE)),
)


# ----------------------------------------------------------------------------- class-map


def _match(kind: str, add: bool) -> Handler:
    def handler(config: NxosConfig, mode: ClassMapMode, args: dict[str, Any]) -> None:
        values: list[int] = getattr(config.class_maps[mode.name], kind)
        for value in args["values"]:
            if add and value not in values:
                values.append(value)
            elif not add and value in values:
                values.remove(value)

    return handler


CLASS_MAP_COMMANDS: tuple[Command[Handler], ...] = (
    Command("match dscp <values:values:0-63>", _match("dscp", True)),
    Command("no match dscp <values:values:0-63>", _match("dscp", False)),
    Command("match cos <values:values:0-7>", _match("cos", True)),
    Command("no match cos <values:values:0-7>", _match("cos", False)),
)


# ----------------------------------------------------------------------------- policy-map


def _policy(config: NxosConfig, mode: PolicyMode | PolicyClassMode) -> PolicyMap:
    name = mode.name if isinstance(mode, PolicyMode) else mode.policy
    return config.policies[(mode.kind, name)]


def _policy_class(config: NxosConfig, mode: PolicyMode, args: dict[str, Any]) -> PolicyClassMode:
    name = args["name"]
    known = {"queuing": QUEUING_CLASSES, "network-qos": NETWORK_QOS_CLASSES}.get(mode.kind)
    if known is not None and name not in known:
        raise CliError(f"% class-map {name} is not a system-defined {mode.kind} class")
    if known is None and name != CLASS_DEFAULT and name not in config.class_maps:
        raise CliError(f"% class-map {name} does not exist")
    if "type" in args and args["type"] != mode.kind:
        raise CliError(f"% class type {args['type']} in a {mode.kind} policy-map")
    _policy(config, mode).classes.setdefault(name, PolicyClass())
    return PolicyClassMode(mode.kind, mode.name, name)


def _no_policy_class(config: NxosConfig, mode: PolicyMode, args: dict[str, Any]) -> None:
    _policy(config, mode).classes.pop(args["name"], None)


_CLASS_TYPES = "<type:choice:qos,queuing,network-qos>"
POLICY_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"class {_NAME}", _policy_class),
    Command(f"class type {_CLASS_TYPES} {_NAME}", _policy_class),
    Command(f"no class {_NAME}", _no_policy_class),
    Command(f"no class type {_CLASS_TYPES} {_NAME}", _no_policy_class),
)


def _class_setting(attribute: str, value: Any = None) -> Handler:
    """Set (``args[attribute]``, else ``value``) one line of a policy class."""

    def handler(config: NxosConfig, mode: PolicyClassMode, args: dict[str, Any]) -> None:
        entry = _policy(config, mode).classes[mode.name]
        setattr(entry, attribute, args.get(attribute, value))

    return handler


def _pause(config: NxosConfig, mode: PolicyClassMode, args: dict[str, Any]) -> None:
    _policy(config, mode).classes[mode.name].pause_cos = sorted(set(args["values"]))


def _no_pause(config: NxosConfig, mode: PolicyClassMode, _args: dict[str, Any]) -> None:
    _policy(config, mode).classes[mode.name].pause_cos = []


def _priority(config: NxosConfig, mode: PolicyClassMode, args: dict[str, Any]) -> None:
    entry = _policy(config, mode).classes[mode.name]
    entry.priority_level = args.get("level", 1)
    entry.bandwidth_remaining = entry.bandwidth = None  # a priority class has no share


def _random_detect(config: NxosConfig, mode: PolicyClassMode, args: dict[str, Any]) -> None:
    low = args["low"] * _UNIT_BYTES[args["low_unit"]]
    high = args["high"] * _UNIT_BYTES[args["high_unit"]]
    if low > high:
        raise CliError("% minimum-threshold is above maximum-threshold")
    _policy(config, mode).classes[mode.name].wred = Wred(
        args["low"],
        args["low_unit"],
        args["high"],
        args["high_unit"],
        args.get("probability"),
        args.get("weight"),
        "ecn" in args,
    )


_UNIT_BYTES = {"bytes": 1, "kbytes": 1024, "mbytes": 1024 * 1024}
_UNITS = "<{}:choice:bytes,kbytes,mbytes>"
_RED = (
    f"random-detect minimum-threshold <low:int:1-268435456> {_UNITS.format('low_unit')} "
    f"maximum-threshold <high:int:1-268435456> {_UNITS.format('high_unit')} "
    "[drop-probability <probability:int:0-100>] [weight <weight:int:0-15>] [<ecn:choice:ecn>]"
)
QOS_CLASS_COMMANDS: tuple[Command[Handler], ...] = (
    Command("set qos-group <qos_group:int:0-7>", _class_setting("qos_group")),
    Command("no set qos-group [<x:rest>]", _class_setting("qos_group")),
)
NETWORK_QOS_CLASS_COMMANDS: tuple[Command[Handler], ...] = (
    Command("mtu <mtu:int:1500-9216>", _class_setting("mtu")),
    Command("no mtu [<x:rest>]", _class_setting("mtu")),
    Command("pause pfc-cos <values:values:0-7>", _pause),
    Command("no pause pfc-cos [<x:rest>]", _no_pause),
)
QUEUING_CLASS_COMMANDS: tuple[Command[Handler], ...] = (
    Command("priority [level <level:int:1-7>]", _priority),
    Command("no priority [<x:rest>]", _class_setting("priority_level")),
    Command(
        "bandwidth remaining percent <bandwidth_remaining:int:0-100>",
        _class_setting("bandwidth_remaining"),
    ),
    Command("no bandwidth remaining percent [<x:rest>]", _class_setting("bandwidth_remaining")),
    Command("bandwidth percent <bandwidth:int:0-100>", _class_setting("bandwidth")),
    Command("no bandwidth percent [<x:rest>]", _class_setting("bandwidth")),
    Command(_RED, _random_detect),
    Command("no random-detect [<x:rest>]", _class_setting("wred")),
)


# ----------------------------------------------------------------------------- system qos


_DIRECTIONS = {"network-qos": "network-qos", "queuing": "queuing output", "qos": "qos input"}


def _attach_system(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
    kind = cast(PolicyType, args["type"])
    _require_policy(config, kind, args["name"])
    config.system[_DIRECTIONS[kind]] = args["name"]


def _detach_system(config: NxosConfig, _mode: Any, args: dict[str, Any]) -> None:
    config.system.pop(_DIRECTIONS[args["type"]], None)


def _require_policy(config: NxosConfig, kind: PolicyType, name: str) -> None:
    if (kind, name) not in config.policies:
        raise CliError(f"% policy-map {name} of type {kind} does not exist")


SYSTEM_QOS_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"service-policy type <type:choice:network-qos> {_NAME}", _attach_system),
    Command(f"service-policy type <type:choice:queuing> output {_NAME}", _attach_system),
    Command(f"service-policy type <type:choice:qos> input {_NAME}", _attach_system),
    Command("no service-policy type <type:choice:network-qos> [<x:rest>]", _detach_system),
    Command("no service-policy type <type:choice:queuing> output [<x:rest>]", _detach_system),
    Command("no service-policy type <type:choice:qos> input [<x:rest>]", _detach_system),
)


# ----------------------------------------------------------------------------- interface


def _each_port(edit: Callable[[Any, dict[str, Any]], None]) -> Handler:
    def handler(config: NxosConfig, mode: InterfaceMode, args: dict[str, Any]) -> None:
        for name in mode.names:
            edit(config.interfaces[name], args)

    return handler


def _port_setting(attribute: str, value: Any = None) -> Handler:
    return _each_port(lambda port, args: setattr(port, attribute, args.get(attribute, value)))


def _pfc_mode(port: Any, args: dict[str, Any]) -> None:
    port.pfc_mode = args["pfc_mode"]
    port.pfc_send_tlv = "send_tlv" in args


def _no_pfc_mode(port: Any, args: dict[str, Any]) -> None:
    """``no priority-flow-control mode [on|off|auto]``: back to the default (auto)."""
    given = args.get("given")
    if given is not None and given != (port.pfc_mode or "auto"):
        raise CliError(f"% priority-flow-control mode {given} is not configured")
    port.pfc_mode, port.pfc_send_tlv = None, False


def _port_watchdog(port: Any, args: dict[str, Any]) -> None:
    port.watchdog = None if "no" in args else args["state"] == "on"


def _port_policy(attribute: str, kind: PolicyType) -> Handler:
    def handler(config: NxosConfig, mode: InterfaceMode, args: dict[str, Any]) -> None:
        if "name" in args:
            _require_policy(config, kind, args["name"])
        for name in mode.names:
            setattr(config.interfaces[name], attribute, args.get("name"))

    return handler


INTERFACE_COMMANDS: tuple[Command[Handler], ...] = (
    Command("description <description:rest>", _port_setting("description")),
    Command("no description [<x:rest>]", _port_setting("description")),
    Command("mtu <mtu:int:576-9216>", _port_setting("mtu")),
    Command("no mtu [<x:rest>]", _port_setting("mtu")),
    Command(
        f"{_PFC} mode <pfc_mode:choice:on,off,auto> [<send_tlv:choice:send-tlv>]",
        _each_port(_pfc_mode),
    ),
    Command(f"no {_PFC} mode [<given:choice:on,off,auto>] [<x:rest>]", _each_port(_no_pfc_mode)),
    Command(f"{_PFC} watch-dog-interval <state:choice:on,off>", _each_port(_port_watchdog)),
    Command(f"<no:choice:no> {_PFC} watch-dog-interval [<x:rest>]", _each_port(_port_watchdog)),
    Command(f"service-policy type qos input {_NAME}", _port_policy("qos_input", "qos")),
    Command("no service-policy type qos input [<x:rest>]", _port_policy("qos_input", "qos")),
    Command(
        f"service-policy type queuing output {_NAME}", _port_policy("queuing_output", "queuing")
    ),
    Command(
        "no service-policy type queuing output [<x:rest>]",
        _port_policy("queuing_output", "queuing"),
    ),
)


def commands_for(mode: ConfigMode) -> Sequence[Command[Handler]]:
    """The command table of a configuration mode."""
    if isinstance(mode, PolicyClassMode):
        return {
            "qos": QOS_CLASS_COMMANDS,
            "network-qos": NETWORK_QOS_CLASS_COMMANDS,
            "queuing": QUEUING_CLASS_COMMANDS,
        }[mode.kind]
    tables: dict[type, Sequence[Command[Handler]]] = {
        GlobalMode: GLOBAL_COMMANDS,
        ClassMapMode: CLASS_MAP_COMMANDS,
        PolicyMode: POLICY_COMMANDS,
        SystemQosMode: SYSTEM_QOS_COMMANDS,
        InterfaceMode: INTERFACE_COMMANDS,
    }
    return tables[type(mode)]


# ----------------------------------------------------------------------------- applying lines


def apply_line(config: NxosConfig, stack: Sequence[ConfigMode], line: str) -> list[ConfigMode]:
    """Apply one configuration line to ``config`` (in place); the new mode stack. On
    :class:`CliError` nothing was changed."""
    return apply_in_modes(config, stack, tokenize(line), commands_for)


def load_config_text(base: NxosConfig, text: str) -> NxosConfig:
    """A whole configuration file (running-config syntax, as ``copy running-config`` writes it)
    applied to a copy of ``base``. :class:`CliError` names the line number of the first bad
    line; its indentation decides nothing (the modes do), as when NX-OS reads a file."""
    result = base.clone()
    root: ConfigMode = GlobalMode()
    load_lines(result, text, root, apply_line)
    return result

"""EOS configuration modes and their commands: each matched line edits a :class:`SwitchConfig`.

Syntax follows Arista EOS as rendered by Arista's own config generator (AVD
``eos_cli_config_gen``), which emits exactly what EOS accepts and shows in running-config:

* [AVD-QOS]   ``python-avd/pyavd/_eos_cli_config_gen/j2templates/eos/qos.j2`` and the molecule
  device config ``.../molecule/eos_cli_config_gen/intended/configs/qos.cfg`` (``qos map dscp
  8 9 10 to traffic-class 1``, ``qos map traffic-class 1 to dscp 56``);
* [AVD-PROF]  ``j2templates/eos/qos-profiles.j2`` (``qos profile NAME``, ``qos trust``, ``no qos
  trust``, ``priority-flow-control on``, ``no priority-flow-control``, ``priority-flow-control
  priority <p> no-drop|drop``, ``priority-flow-control pause watchdog``, ``... pause watchdog port
  action drop|notify-only``, ``... pause watchdog port timer timeout <s> polling-interval <s|auto>
  recovery-time <s> [forced]``);
* [AVD-UCTXQ] ``j2templates/eos/ethernet-interface-uc-tx-queues.j2`` (``uc-tx-queue <q>``,
  ``bandwidth percent <n>``, ``priority strict`` / ``no priority``, ``random-detect ecn count``,
  ``random-detect ecn minimum-threshold <n> <unit> maximum-threshold <n> <unit>
  [max-mark-probability <p>] [weight <w>]``); value ranges from the AVD schema
  ``docs/tables/qos-profiles.md`` (probability 1-100, weight 0-15) and AVD PR #2770
  (thresholds up to 256000000);
* [AVD-PFC]   ``j2templates/eos/priority-flow-control.j2`` (global ``priority-flow-control all
  off``, ``... pause watchdog default timeout|recovery-time|polling-interval <s>``, ``... pause
  watchdog action drop|no-drop``) and its schema (timeout/recovery two decimals, polling three);
* [AVD-ACL]   ``j2templates/eos/ip-access-lists.j2`` (``ip access-list NAME``, entries ``[seq]
  permit|deny udp any any eq <port>``: the lab takes only this form);
* [AVD-CMAP]  ``j2templates/eos/class-maps.j2`` (``class-map type qos match-any NAME``, ``match
  ip access-group NAME``);
* [AVD-PMAP]  ``j2templates/eos/policy-maps-qos.j2`` (``policy-map type quality-of-service
  NAME``, ``class NAME``, ``set traffic-class <tc>``), applied with ``service-policy type qos
  input NAME`` on an interface or qos profile;
* [AVD-ETH]   the ethernet-interface templates (``service-profile NAME``, ``qos trust``,
  ``description``).

A sub-mode line that the mode does not know is tried in the parent modes, as EOS does: after
``uc-tx-queue 3`` a ``priority-flow-control on`` line applies to the enclosing profile or
interface, and ``interface Ethernet2`` goes back to global configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lab.mgmt import names
from lab.mgmt.cli_grammar import (
    VALUE_TYPES,
    CliError,
    Command,
    Converter,
    apply_in_modes,
    load_lines,
    register_value_type,
    tokenize,
)
from lab.mgmt.model import (
    AclEntry,
    EcnThreshold,
    QosSettings,
    SwitchConfig,
    TxQueue,
    WatchdogPortTimer,
)

HOSTNAME_RE = r"[A-Za-z0-9][A-Za-z0-9._\-]{0,62}"
PROFILE_NAME_RE = r"[A-Za-z0-9_.\-]{1,64}"
_UNITS = "segments,bytes,kbytes,mbytes"
_MAX_THRESHOLD = 256_000_000


@dataclass(frozen=True)
class InterfaceRange:
    """The value of ``interface Ethernet1-3``: EOS names plus the token as typed."""

    names: tuple[str, ...]
    text: str


def _interface_range(_arg: str) -> Converter:
    def convert(token: str) -> InterfaceRange:
        try:
            return InterfaceRange(tuple(names.parse_interface_range(token)), token)
        except names.InterfaceNameError:
            raise ValueError(token) from None

    return convert


def _number_range(_arg: str) -> Converter:
    def convert(token: str) -> InterfaceRange:
        try:
            numbers = names.parse_number_list(token)
        except names.InterfaceNameError:
            raise ValueError(token) from None
        return InterfaceRange(tuple(f"Ethernet{n}" for n in numbers), token)

    return convert


def _polling_interval(_arg: str) -> Converter:
    """``auto`` (-> None) or seconds with up to three decimals, 0.001-60 [AVD-PFC]."""
    seconds = VALUE_TYPES["decimal"]("0.001~60")

    def convert(token: str) -> Decimal | None:
        if token.lower() == "auto":
            return None
        value: Decimal = seconds(token)
        return value

    return convert


register_value_type("ifrange", _interface_range)
register_value_type("numrange", _number_range)
register_value_type("pollinterval", _polling_interval)


# ----------------------------------------------------------------------------- modes


@dataclass(frozen=True)
class GlobalMode:
    """``(config)#``."""

    def label(self) -> str:
        """Prompt label after ``config`` (empty at the top level)."""
        return ""


@dataclass(frozen=True)
class InterfaceMode:
    """``(config-if-Et1)#`` -- one interface or a range."""

    interfaces: tuple[str, ...]

    def label(self) -> str:
        """``if-Et1-4``."""
        return f"if-{names.range_label(self.interfaces)}"


@dataclass(frozen=True)
class ProfileMode:
    """``(config-qos-profile-NAME)#``."""

    profile: str

    def label(self) -> str:
        """``qos-profile-NAME``."""
        return f"qos-profile-{self.profile}"


@dataclass(frozen=True)
class QueueMode:
    """``(config-if-Et1-uc-txq-3)#`` / ``(config-qos-profile-NAME-uc-txq-3)#``."""

    parent: InterfaceMode | ProfileMode
    queue: int

    def label(self) -> str:
        """Parent label plus ``-uc-txq-<q>``."""
        return f"{self.parent.label()}-uc-txq-{self.queue}"


@dataclass(frozen=True)
class AclMode:
    """``(config-acl-NAME)#``."""

    name: str

    def label(self) -> str:
        return f"acl-{self.name}"


@dataclass(frozen=True)
class ClassMapMode:
    """``(config-cmap-qos-NAME)#``."""

    name: str

    def label(self) -> str:
        return f"cmap-qos-{self.name}"


@dataclass(frozen=True)
class PolicyMapMode:
    """``(config-pmap-qos-NAME)#``."""

    name: str

    def label(self) -> str:
        return f"pmap-qos-{self.name}"


@dataclass(frozen=True)
class PolicyClassMode:
    """``(config-pmap-c-qos-POLICY-CLASS)#``."""

    policy: str
    name: str

    def label(self) -> str:
        return f"pmap-c-qos-{self.policy}-{self.name}"


ConfigMode = (
    GlobalMode
    | InterfaceMode
    | ProfileMode
    | QueueMode
    | AclMode
    | ClassMapMode
    | PolicyMapMode
    | PolicyClassMode
)
Handler = Callable[[SwitchConfig, ConfigMode, dict[str, Any]], ConfigMode | None]


def _qos_targets(config: SwitchConfig, mode: ConfigMode) -> list[QosSettings]:
    if isinstance(mode, InterfaceMode):
        return [config.interfaces[name].qos for name in mode.interfaces]
    if isinstance(mode, ProfileMode):
        return [config.profiles.setdefault(mode.profile, QosSettings())]
    raise AssertionError(f"no QoS settings in mode {mode!r}")


def _queue_targets(config: SwitchConfig, mode: ConfigMode) -> list[TxQueue]:
    assert isinstance(mode, QueueMode)
    return [settings.queue(mode.queue) for settings in _qos_targets(config, mode.parent)]


def _each_qos(edit: Callable[[QosSettings, dict[str, Any]], None]) -> Handler:
    def handler(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
        for settings in _qos_targets(config, mode):
            edit(settings, args)

    return handler


def _each_queue(edit: Callable[[TxQueue, dict[str, Any]], None]) -> Handler:
    def handler(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
        for queue in _queue_targets(config, mode):
            edit(queue, args)

    return handler


# ----------------------------------------------------------------------------- global


def _hostname(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
    config.hostname = args["name"]


def _enter_interfaces(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    wanted: InterfaceRange = args["ifs"]
    missing = [n for n in wanted.names if n not in config.interfaces]
    if missing:
        # EOS blames the interface token (token 1) for an interface that does not exist.
        raise CliError(f"% Invalid input (at token 1: '{wanted.text}')")
    return InterfaceMode(wanted.names)


def _map_dscp(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
    for dscp in args["dscps"]:
        config.dscp_to_tc[dscp] = args["tc"]


def _unmap_dscp(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
    for dscp in args["dscps"]:
        if args.get("tc") is None or config.dscp_to_tc.get(dscp) == args["tc"]:
            config.dscp_to_tc.pop(dscp, None)


def _map_tc(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
    for tc in args["tcs"]:
        config.tc_to_dscp[tc] = args["dscp"]


def _unmap_tc(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
    for tc in args["tcs"]:
        if args.get("dscp") is None or config.tc_to_dscp.get(tc) == args["dscp"]:
            config.tc_to_dscp.pop(tc, None)


def _enter_profile(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    config.profiles.setdefault(args["name"], QosSettings())
    return ProfileMode(args["name"])


def _delete_profile(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
    config.profiles.pop(args["name"], None)


def _set_global(attribute: str, value: Any = None, arg: str | None = None) -> Handler:
    def handler(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
        setattr(config, attribute, args[arg] if arg else value)

    return handler


def _set_watchdog_default(attribute: str, arg: str | None) -> Handler:
    def handler(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
        setattr(config.watchdog, attribute, args[arg] if arg else None)

    return handler


def _enter_acl(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    config.access_lists.setdefault(args["name"], {})
    return AclMode(args["name"])


def _enter_class_map(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    config.class_maps.setdefault(args["name"], [])
    return ClassMapMode(args["name"])


def _enter_policy_map(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    config.policy_maps.setdefault(args["name"], {})
    return PolicyMapMode(args["name"])


def _delete(attribute: str) -> Handler:
    def handler(config: SwitchConfig, _mode: ConfigMode, args: dict[str, Any]) -> None:
        getattr(config, attribute).pop(args["name"], None)

    return handler


_WD = "priority-flow-control pause watchdog"
_QOS_NAME = f"<name:word:{PROFILE_NAME_RE}>"

GLOBAL_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"hostname <name:word:{HOSTNAME_RE}>", _hostname),
    Command("interface <ifs:ifrange>", _enter_interfaces),
    Command("interface ethernet <ifs:numrange>", _enter_interfaces),
    # [AVD-QOS] qos map dscp <list> to traffic-class <tc>; traffic-class <list> to dscp <d>
    Command("qos map dscp <dscps:ints:0-63> to traffic-class <tc:int:0-7>", _map_dscp),
    Command("no qos map dscp <dscps:ints:0-63> [to traffic-class <tc:int:0-7>]", _unmap_dscp),
    Command("qos map traffic-class <tcs:ints:0-7> to dscp <dscp:int:0-63>", _map_tc),
    Command("no qos map traffic-class <tcs:ints:0-7> [to dscp <dscp:int:0-63>]", _unmap_tc),
    # Switch-wide trust is a lab extension asked for by the design (EOS sets trust per
    # interface or profile); same words as the interface command.
    Command("qos trust <mode:choice:dscp,cos>", _set_global("qos_trust", arg="mode")),
    Command("no qos trust", _set_global("qos_trust", "disabled")),
    Command("default qos trust", _set_global("qos_trust", None)),
    # [AVD-PROF] qos profile NAME
    Command(f"qos profile <name:word:{PROFILE_NAME_RE}>", _enter_profile),
    Command(f"no qos profile <name:word:{PROFILE_NAME_RE}>", _delete_profile),
    # [AVD-PFC] global PFC and watchdog defaults
    Command("priority-flow-control all off", _set_global("pfc_all_off", True)),
    Command("no priority-flow-control all off", _set_global("pfc_all_off", False)),
    Command(f"{_WD} default timeout <s:decimal:0.01~60>", _set_watchdog_default("timeout", "s")),
    Command(f"no {_WD} default timeout [<x:rest>]", _set_watchdog_default("timeout", None)),
    Command(
        f"{_WD} default recovery-time <s:decimal:0.01~600>",
        _set_watchdog_default("recovery_time", "s"),
    ),
    Command(
        f"no {_WD} default recovery-time [<x:rest>]", _set_watchdog_default("recovery_time", None)
    ),
    Command(
        f"{_WD} default polling-interval <s:decimal:0.001~60>",
        _set_watchdog_default("polling_interval", "s"),
    ),
    Command(
        f"no {_WD} default polling-interval [<x:rest>]",
        _set_watchdog_default("polling_interval", None),
    ),
    Command(f"{_WD} action <a:choice:drop,no-drop>", _set_watchdog_default("action", "a")),
    Command(f"no {_WD} action [<x:rest>]", _set_watchdog_default("action", None)),
    # QoS classification by ACL [AVD-ACL] [AVD-CMAP] [AVD-PMAP]: what RoCE must NOT be
    # classified by (check RC010), so the lab can be set up wrong on purpose.
    Command(f"ip access-list {_QOS_NAME}", _enter_acl),
    Command(f"no ip access-list {_QOS_NAME}", _delete("access_lists")),
    Command(f"class-map type qos match-any {_QOS_NAME}", _enter_class_map),
    Command(f"no class-map type qos match-any {_QOS_NAME}", _delete("class_maps")),
    Command(f"policy-map type quality-of-service {_QOS_NAME}", _enter_policy_map),
    Command(f"no policy-map type quality-of-service {_QOS_NAME}", _delete("policy_maps")),
)


# ----------------------------------------------------------------------------- interface / profile


def _set_trust(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.trust = args["mode"]


def _untrust(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.trust = "disabled"


def _default_trust(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.trust = None


def _pfc_on(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.pfc_enabled = True


def _pfc_off(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.pfc_enabled = False


def _pfc_default(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.pfc_enabled = None


def _pfc_priority(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.pfc_priorities[args["p"]] = args["action"]


def _pfc_priority_remove(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.pfc_priorities.pop(args["p"], None)


def _watchdog_on(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.pfc_watchdog = True


def _watchdog_off(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.pfc_watchdog = False


def _watchdog_action(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.pfc_watchdog_action = args.get("a")


def _watchdog_timer(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.pfc_watchdog_timer = WatchdogPortTimer(
        timeout=args["timeout"],
        polling_interval=args["polling"],
        recovery_time=args["recovery"],
        forced="forced" in args,
    )


def _watchdog_timer_remove(settings: QosSettings, _args: dict[str, Any]) -> None:
    settings.pfc_watchdog_timer = None


def _enter_queue(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    assert isinstance(mode, InterfaceMode | ProfileMode)
    return QueueMode(mode, args["q"])


def _service_policy(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.service_policy = args.get("name")


def _delete_queue(settings: QosSettings, args: dict[str, Any]) -> None:
    settings.tx_queues.pop(args["q"], None)


def _description(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, InterfaceMode)
    for name in mode.interfaces:
        config.interfaces[name].description = args.get("text")


def _service_profile(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, InterfaceMode)
    for name in mode.interfaces:
        config.interfaces[name].service_profile = args.get("name")


_TIMER = (
    f"{_WD} port timer timeout <timeout:decimal:0.01~60> polling-interval "
    "<polling:pollinterval> recovery-time <recovery:decimal:0.01~600> [<forced:choice:forced>]"
)

QOS_SETTING_COMMANDS: tuple[Command[Handler], ...] = (
    # [AVD-PROF] / [AVD-ETH]
    Command("qos trust <mode:choice:dscp,cos>", _each_qos(_set_trust)),
    Command("no qos trust", _each_qos(_untrust)),
    Command("default qos trust", _each_qos(_default_trust)),
    Command("priority-flow-control on", _each_qos(_pfc_on)),
    Command("priority-flow-control mode on", _each_qos(_pfc_on)),  # pre-4.2x spelling
    Command("no priority-flow-control", _each_qos(_pfc_off)),
    Command("default priority-flow-control", _each_qos(_pfc_default)),
    Command(
        "priority-flow-control priority <p:int:0-7> <action:choice:no-drop,drop>",
        _each_qos(_pfc_priority),
    ),
    Command(
        "no priority-flow-control priority <p:int:0-7> [<x:rest>]", _each_qos(_pfc_priority_remove)
    ),
    Command(_WD, _each_qos(_watchdog_on)),
    Command(f"no {_WD}", _each_qos(_watchdog_off)),
    Command(f"{_WD} port action <a:choice:drop,notify-only>", _each_qos(_watchdog_action)),
    Command(f"no {_WD} port action [<x:rest>]", _each_qos(_watchdog_action)),
    Command(_TIMER, _each_qos(_watchdog_timer)),
    Command(f"no {_WD} port timer [<x:rest>]", _each_qos(_watchdog_timer_remove)),
    # [AVD-UCTXQ] uc-tx-queue; tx-queue is accepted as its alias (one queue kind per class here)
    Command("uc-tx-queue <q:int:0-7>", _enter_queue),
    Command("tx-queue <q:int:0-7>", _enter_queue),
    Command("no uc-tx-queue <q:int:0-7>", _each_qos(_delete_queue)),
    Command("no tx-queue <q:int:0-7>", _each_qos(_delete_queue)),
    Command(f"service-policy type qos input {_QOS_NAME}", _each_qos(_service_policy)),
    Command("no service-policy type qos input [<x:rest>]", _each_qos(_service_policy)),
)

INTERFACE_ONLY_COMMANDS: tuple[Command[Handler], ...] = (
    Command("description <text:rest>", _description),
    Command("no description [<x:rest>]", _description),
    Command(f"service-profile <name:word:{PROFILE_NAME_RE}>", _service_profile),
    Command("no service-profile [<x:rest>]", _service_profile),
)


# ----------------------------------------------------------------------------- tx queue


def _bandwidth(queue: TxQueue, args: dict[str, Any]) -> None:
    queue.bandwidth_percent = args.get("n")


def _strict(queue: TxQueue, _args: dict[str, Any]) -> None:
    queue.strict_priority = True


def _round_robin(queue: TxQueue, _args: dict[str, Any]) -> None:
    queue.strict_priority = False


def _ecn(queue: TxQueue, args: dict[str, Any]) -> None:
    queue.ecn = EcnThreshold(
        minimum=args["min"],
        minimum_unit=args["min_unit"],
        maximum=args["max"],
        maximum_unit=args["max_unit"],
        max_mark_probability=args.get("prob"),
        weight=args.get("weight"),
    )


def _no_ecn(queue: TxQueue, _args: dict[str, Any]) -> None:
    queue.ecn = None


def _ecn_count(queue: TxQueue, args: dict[str, Any]) -> None:
    queue.ecn_count = bool(args.get("on", True))


_ECN = (
    f"random-detect ecn minimum-threshold <min:int:1-{_MAX_THRESHOLD}> <min_unit:choice:{_UNITS}> "
    f"maximum-threshold <max:int:1-{_MAX_THRESHOLD}> <max_unit:choice:{_UNITS}> "
    "[max-mark-probability <prob:int:1-100>] [weight <weight:int:0-15>]"
)

QUEUE_COMMANDS: tuple[Command[Handler], ...] = (
    # [AVD-UCTXQ]
    Command("bandwidth percent <n:int:1-100>", _each_queue(_bandwidth)),
    Command("no bandwidth [<x:rest>]", _each_queue(_bandwidth)),
    Command("priority strict", _each_queue(_strict)),
    Command("no priority [<x:rest>]", _each_queue(_round_robin)),
    Command(_ECN, _each_queue(_ecn)),
    Command("no random-detect ecn", _each_queue(_no_ecn)),
    Command("no random-detect ecn minimum-threshold [<x:rest>]", _each_queue(_no_ecn)),
    Command("random-detect ecn count", _each_queue(_ecn_count)),
    Command("no random-detect ecn count", _each_queue(lambda q, a: _ecn_count(q, {"on": False}))),
)


# ----------------------------------------------------------------------------- ACL, class, policy


def _acl_entry(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, AclMode)
    entries = config.access_lists[mode.name]
    seq = args.get("seq") or (max(entries, default=0) + 10)  # EOS numbers by 10
    entries[seq] = AclEntry(args["action"], args["port"])


def _acl_remove(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, AclMode)
    config.access_lists[mode.name].pop(args["seq"], None)


def _match_acl(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, ClassMapMode)
    matches = config.class_maps[mode.name]
    if args["name"] not in matches:
        matches.append(args["name"])


def _unmatch_acl(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, ClassMapMode)
    matches = config.class_maps[mode.name]
    if args["name"] in matches:
        matches.remove(args["name"])


def _enter_policy_class(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> ConfigMode:
    assert isinstance(mode, PolicyMapMode)
    config.policy_maps[mode.name].setdefault(args["name"], None)
    return PolicyClassMode(mode.name, args["name"])


def _remove_policy_class(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, PolicyMapMode)
    config.policy_maps[mode.name].pop(args["name"], None)


def _set_class_tc(config: SwitchConfig, mode: ConfigMode, args: dict[str, Any]) -> None:
    assert isinstance(mode, PolicyClassMode)
    config.policy_maps[mode.policy][mode.name] = args.get("tc")


_ACE = "<action:choice:permit,deny> udp any any eq <port:int:1-65535>"
ACL_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"<seq:int:1-4294967295> {_ACE}", _acl_entry),
    Command(_ACE, _acl_entry),
    Command("no <seq:int:1-4294967295>", _acl_remove),
)
CLASS_MAP_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"match ip access-group {_QOS_NAME}", _match_acl),
    Command(f"no match ip access-group {_QOS_NAME}", _unmatch_acl),
)
POLICY_MAP_COMMANDS: tuple[Command[Handler], ...] = (
    Command(f"class {_QOS_NAME}", _enter_policy_class),
    Command(f"no class {_QOS_NAME}", _remove_policy_class),
)
POLICY_CLASS_COMMANDS: tuple[Command[Handler], ...] = (
    Command("set traffic-class <tc:int:0-7>", _set_class_tc),
    Command("no set traffic-class [<x:rest>]", _set_class_tc),
)


def commands_for(mode: ConfigMode) -> Sequence[Command[Handler]]:
    """The command table of a configuration mode."""
    if isinstance(mode, GlobalMode):
        return GLOBAL_COMMANDS
    if isinstance(mode, AclMode):
        return ACL_COMMANDS
    if isinstance(mode, ClassMapMode):
        return CLASS_MAP_COMMANDS
    if isinstance(mode, PolicyMapMode):
        return POLICY_MAP_COMMANDS
    if isinstance(mode, PolicyClassMode):
        return POLICY_CLASS_COMMANDS
    if isinstance(mode, InterfaceMode):
        return QOS_SETTING_COMMANDS + INTERFACE_ONLY_COMMANDS
    if isinstance(mode, ProfileMode):
        return QOS_SETTING_COMMANDS
    return QUEUE_COMMANDS


# ----------------------------------------------------------------------------- applying lines


def apply_line(config: SwitchConfig, stack: Sequence[ConfigMode], line: str) -> list[ConfigMode]:
    """Apply one configuration line to ``config`` (in place); return the new mode stack.

    ``stack[0]`` is :class:`GlobalMode`; the innermost mode is tried first, then its parents
    (EOS' fall-through). On :class:`CliError` nothing has been changed.
    """
    new_stack = apply_in_modes(config, stack, tokenize(line), commands_for)
    _prune(config)
    return new_stack


def _prune(config: SwitchConfig) -> None:
    for interface in config.interfaces.values():
        interface.qos.prune()
    for profile in config.profiles.values():
        profile.prune()


def load_config_text(config: SwitchConfig, text: str) -> SwitchConfig:
    """Apply a whole configuration file (running-config syntax) to a copy of ``config``.

    Raises :class:`CliError` naming the line number of the first bad line.
    """
    result = config.clone()
    root: ConfigMode = GlobalMode()
    load_lines(result, text, root, apply_line)
    return result

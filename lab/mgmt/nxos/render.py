"""An :class:`~lab.mgmt.nxos.config.NxosConfig` as NX-OS prints it: ``show running-config``
(and the ``ipqos`` part of it), two-space indents, blocks in NX-OS' order -- ``version``,
``hostname``, features, class-maps, policy-maps, ``system qos``, the global PFC watchdog
lines, then every interface.

Reading the text back (:func:`lab.mgmt.nxos.commands.load_config_text`) gives an equal
configuration; the unit tests check it on random configurations. The comment header
(``!Command:``, ``!Running configuration last done at:``, ``!Time:``) is the one NX-OS prints
(recorded NX-OS 10.x running-configs show it); a configuration file read back ignores it.
"""

from __future__ import annotations

import time

from common.text import natural_key
from lab.mgmt import names
from lab.mgmt.nxos.config import (
    ClassMap,
    Interface,
    NxosConfig,
    PolicyClass,
    PolicyType,
    Watchdog,
)

NXOS_VERSION = "10.4(3)"
INDENT = "  "
# NX-OS prints policy-maps by type in this order (recorded Nexus 9000 running-configs).
POLICY_ORDER: tuple[PolicyType, ...] = ("qos", "queuing", "network-qos")
_CLASS_KEYWORD = {
    "qos": "class",
    "queuing": "class type queuing",
    "network-qos": "class type network-qos",
}


def timestamp(seconds: float | None = None) -> str:
    """``Mon Nov  3 10:12:44 2025`` (the running-config header's time)."""
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(seconds))


def header_lines(command: str, changed_at: float | None) -> list[str]:
    """The comment lines NX-OS prints before a configuration."""
    return [
        f"!Command: {command}",
        f"!Running configuration last done at: {timestamp(changed_at)}",
        f"!Time: {timestamp()}",
        "",
    ]


def render_lines(config: NxosConfig) -> list[str]:
    """The configuration body: every line ``show running-config`` prints after its header."""
    lines = [f"version {NXOS_VERSION} Bios:version N/A", f"hostname {config.hostname}"]
    if config.lldp:
        lines.append("feature lldp")
    lines.append("")
    lines += qos_lines(config)
    for name in sorted(config.interfaces, key=natural_key):
        lines += ["", f"interface {name}", *_indent(_interface_lines(config.interfaces[name]))]
    return lines


def render_text(config: NxosConfig, changed_at: float | None = None) -> str:
    """``show running-config``."""
    return "\n".join(header_lines("show running-config", changed_at) + render_lines(config))


def qos_lines(config: NxosConfig) -> list[str]:
    """Class-maps, policy-maps, ``system qos`` and the global watchdog lines."""
    lines: list[str] = []
    for name in sorted(config.class_maps):
        lines += _class_map_lines(name, config.class_maps[name])
    for kind in POLICY_ORDER:
        for (policy_kind, name), policy in sorted(config.policies.items()):
            if policy_kind != kind:
                continue
            lines.append(f"policy-map type {kind} {name}")
            for class_name, entry in policy.classes.items():
                lines.append(f"{INDENT}{_CLASS_KEYWORD[kind]} {class_name}")
                lines += _indent(_indent(class_lines(kind, entry)))
    if config.system:
        lines.append("system qos")
        for direction in ("qos input", "queuing output", "network-qos"):
            if direction in config.system:
                lines.append(f"{INDENT}service-policy type {direction} {config.system[direction]}")
    return lines + watchdog_lines(config.watchdog)


def ipqos_lines(config: NxosConfig) -> list[str]:
    """``show running-config ipqos``: the QoS lines and each interface's QoS lines."""
    lines = qos_lines(config)
    for name in sorted(config.interfaces, key=natural_key):
        own = [line for line in _interface_lines(config.interfaces[name]) if _is_qos(line)]
        if own:
            lines += ["", f"interface {name}", *_indent(own)]
    return lines


def _is_qos(line: str) -> bool:
    return line.startswith(("service-policy", "priority-flow-control"))


def _indent(lines: list[str]) -> list[str]:
    return [INDENT + line for line in lines]


def _class_map_lines(name: str, class_map: ClassMap) -> list[str]:
    match = "match-all" if class_map.match_all else "match-any"
    lines = [f"class-map type qos {match} {name}"]
    if class_map.dscp:
        lines.append(f"{INDENT}match dscp {compact(class_map.dscp)}")
    if class_map.cos:
        lines.append(f"{INDENT}match cos {compact(class_map.cos)}")
    return lines


def compact(values: list[int]) -> str:
    """``[24, 25, 26, 48]`` -> ``24-26,48`` (NX-OS prints number lists as ranges)."""
    return names.compact_ranges(values)


def class_lines(kind: PolicyType, entry: PolicyClass) -> list[str]:
    """The lines of one policy class, in the order NX-OS prints them."""
    if kind == "qos":
        return [] if entry.qos_group is None else [f"set qos-group {entry.qos_group}"]
    if kind == "network-qos":
        lines = [] if entry.mtu is None else [f"mtu {entry.mtu}"]
        return lines + ([f"pause pfc-cos {compact(entry.pause_cos)}"] if entry.pause_cos else [])
    lines = [] if entry.priority_level is None else [f"priority level {entry.priority_level}"]
    if entry.bandwidth_remaining is not None:
        lines.append(f"bandwidth remaining percent {entry.bandwidth_remaining}")
    if entry.bandwidth is not None:
        lines.append(f"bandwidth percent {entry.bandwidth}")
    red = entry.wred
    if red is not None:
        line = (
            f"random-detect minimum-threshold {red.minimum} {red.minimum_unit} "
            f"maximum-threshold {red.maximum} {red.maximum_unit}"
        )
        line += "" if red.drop_probability is None else f" drop-probability {red.drop_probability}"
        line += "" if red.weight is None else f" weight {red.weight}"
        lines.append(line + (" ecn" if red.ecn else ""))
    return lines


def watchdog_lines(watchdog: Watchdog) -> list[str]:
    """The global PFC watchdog lines that are set."""
    pfc = "priority-flow-control"
    lines = []
    if watchdog.enabled is not None:
        lines.append(f"{pfc} watch-dog-interval {'on' if watchdog.enabled else 'off'}")
    if watchdog.interval_ms is not None:
        lines.append(f"{pfc} watch-dog interval {watchdog.interval_ms}")
    if watchdog.shutdown_multiplier is not None:
        lines.append(f"{pfc} watch-dog shutdown-multiplier {watchdog.shutdown_multiplier}")
    if watchdog.auto_restore_multiplier is not None:
        lines.append(f"{pfc} auto-restore multiplier {watchdog.auto_restore_multiplier}")
    return lines


def _interface_lines(port: Interface) -> list[str]:
    lines = [] if port.description is None else [f"description {port.description}"]
    if port.mtu is not None:
        lines.append(f"mtu {port.mtu}")
    if port.pfc_mode is not None:
        tlv = " send-tlv" if port.pfc_send_tlv else ""
        lines.append(f"priority-flow-control mode {port.pfc_mode}{tlv}")
    if port.watchdog is not None:
        lines.append(f"priority-flow-control watch-dog-interval {'on' if port.watchdog else 'off'}")
    if port.qos_input is not None:
        lines.append(f"service-policy type qos input {port.qos_input}")
    if port.queuing_output is not None:
        lines.append(f"service-policy type queuing output {port.queuing_output}")
    return lines

"""Model -> running-config text, in EOS' layout (3-space indents, ``!`` between blocks).

Line spellings and order within a block follow Arista AVD's EOS templates (see the
:mod:`lab.mgmt.eos.commands` docstring for the exact files): profile/interface QoS first, then
PFC, then one ``uc-tx-queue`` block per queue with ``priority``, ``bandwidth``,
``random-detect`` lines; the global watchdog lines in the order AVD's intended configs show
(``action``, ``default timeout``, ``default polling-interval``, ``default recovery-time``).
Rendering then re-reading the text gives an equal model (the unit tests check it).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from lab.mgmt import names
from lab.mgmt.cli_units import format_seconds
from lab.mgmt.model import QosSettings, SwitchConfig, TxQueue

INDENT = "   "
EOS_VERSION = "4.32.0F-lab"
MODEL_NAME = "LabVSwitch"


def header_lines(config: SwitchConfig) -> list[str]:
    """The comment header EOS prints before the running-config."""
    return [
        "! Command: show running-config",
        f"! device: {config.hostname} ({MODEL_NAME}, EOS-{EOS_VERSION})",
        "!",
    ]


def render_config(config: SwitchConfig) -> list[str]:
    """The running-config body (no header), ending with ``end``."""
    blocks: list[list[str]] = [[f"hostname {config.hostname}"]]
    maps = _qos_map_lines(config)
    if maps:
        blocks.append(maps)
    if config.qos_trust is not None:
        blocks.append([_trust_line(config.qos_trust)])
    blocks += _classification_blocks(config)
    for profile in sorted(config.profiles):
        blocks.append([f"qos profile {profile}", *_indent(_qos_lines(config.profiles[profile]))])
    for name in sorted(config.interfaces, key=names.sort_key):
        interface = config.interfaces[name]
        body: list[str] = []
        if interface.description is not None:
            body.append(f"description {interface.description}")
        if interface.service_profile is not None:
            body.append(f"service-profile {interface.service_profile}")
        body += _qos_lines(interface.qos)
        blocks.append([f"interface {name}", *_indent(body)])
    pfc = _global_pfc_lines(config)
    if pfc:
        blocks.append(pfc)
    lines: list[str] = []
    for block in blocks:
        lines += [*block, "!"]
    lines.append("end")
    return lines


def render_text(config: SwitchConfig, with_header: bool = True) -> str:
    """The full ``show running-config`` text."""
    lines = (header_lines(config) if with_header else []) + render_config(config)
    return "\n".join(lines) + "\n"


def _indent(lines: list[str]) -> list[str]:
    return [INDENT + line for line in lines]


def _trust_line(trust: str) -> str:
    return "no qos trust" if trust == "disabled" else f"qos trust {trust}"


def _qos_map_lines(config: SwitchConfig) -> list[str]:
    lines: list[str] = []
    by_tc: dict[int, list[int]] = defaultdict(list)
    for dscp, tc in config.dscp_to_tc.items():
        by_tc[tc].append(dscp)
    for tc in sorted(by_tc):
        dscps = " ".join(str(d) for d in sorted(by_tc[tc]))
        lines.append(f"qos map dscp {dscps} to traffic-class {tc}")
    by_dscp: dict[int, list[int]] = defaultdict(list)
    for tc, dscp in config.tc_to_dscp.items():
        by_dscp[dscp].append(tc)
    for dscp in sorted(by_dscp, key=lambda d: min(by_dscp[d])):
        tcs = " ".join(str(t) for t in sorted(by_dscp[dscp]))
        lines.append(f"qos map traffic-class {tcs} to dscp {dscp}")
    return lines


def _classification_blocks(config: SwitchConfig) -> list[list[str]]:
    """ACLs, class-maps and QoS policy-maps, in AVD's spellings, before what refers to them."""
    blocks = []
    for name in sorted(config.access_lists):
        entries = config.access_lists[name]
        body = [f"{seq} {e.action} udp any any eq {e.port}" for seq, e in sorted(entries.items())]
        blocks.append([f"ip access-list {name}", *_indent(body)])
    for name in sorted(config.class_maps):
        body = [f"match ip access-group {acl}" for acl in config.class_maps[name]]
        blocks.append([f"class-map type qos match-any {name}", *_indent(body)])
    for name in sorted(config.policy_maps):
        body = []
        for class_name, tc in config.policy_maps[name].items():
            body += [f"class {class_name}"]
            body += _indent([f"set traffic-class {tc}"] if tc is not None else [])
        blocks.append([f"policy-map type quality-of-service {name}", *_indent(body)])
    return blocks


def _qos_lines(settings: QosSettings) -> list[str]:
    lines: list[str] = []
    if settings.service_policy is not None:
        lines.append(f"service-policy type qos input {settings.service_policy}")
    if settings.trust is not None:
        lines.append(_trust_line(settings.trust))
    if settings.pfc_enabled is True:
        lines.append("priority-flow-control on")
    elif settings.pfc_enabled is False:
        lines.append("no priority-flow-control")
    for priority in sorted(settings.pfc_priorities):
        lines.append(
            f"priority-flow-control priority {priority} {settings.pfc_priorities[priority]}"
        )
    wd = "priority-flow-control pause watchdog"
    if settings.pfc_watchdog is True:
        lines.append(wd)
    elif settings.pfc_watchdog is False:
        lines.append(f"no {wd}")
    if settings.pfc_watchdog_action is not None:
        lines.append(f"{wd} port action {settings.pfc_watchdog_action}")
    timer = settings.pfc_watchdog_timer
    if timer is not None:
        polling = (
            "auto" if timer.polling_interval is None else format_seconds(timer.polling_interval)
        )
        line = (
            f"{wd} port timer timeout {format_seconds(timer.timeout)} "
            f"polling-interval {polling} recovery-time {format_seconds(timer.recovery_time)}"
        )
        lines.append(line + (" forced" if timer.forced else ""))
    for queue_id in sorted(settings.tx_queues):
        queue = settings.tx_queues[queue_id]
        if queue.is_default():
            continue
        lines += ["!", f"uc-tx-queue {queue_id}", *_indent(_queue_lines(queue))]
    return lines


def _queue_lines(queue: TxQueue) -> list[str]:
    lines: list[str] = []
    if queue.strict_priority:
        lines.append("priority strict")
    if queue.bandwidth_percent is not None:
        lines.append(f"bandwidth percent {queue.bandwidth_percent}")
    if queue.ecn_count:
        lines.append("random-detect ecn count")
    ecn = queue.ecn
    if ecn is not None:
        line = (
            f"random-detect ecn minimum-threshold {ecn.minimum} {ecn.minimum_unit} "
            f"maximum-threshold {ecn.maximum} {ecn.maximum_unit}"
        )
        if ecn.max_mark_probability is not None:
            line += f" max-mark-probability {ecn.max_mark_probability}"
        if ecn.weight is not None:
            line += f" weight {ecn.weight}"
        lines.append(line)
    return lines


def _global_pfc_lines(config: SwitchConfig) -> list[str]:
    lines: list[str] = []
    if config.pfc_all_off:
        lines.append("priority-flow-control all off")
    wd = config.watchdog
    prefix = "priority-flow-control pause watchdog"
    if wd.action is not None:
        lines.append(f"{prefix} action {wd.action}")
    if wd.timeout is not None:
        lines.append(f"{prefix} default timeout {format_seconds(wd.timeout)}")
    if wd.polling_interval is not None:
        lines.append(f"{prefix} default polling-interval {format_seconds(wd.polling_interval)}")
    if wd.recovery_time is not None:
        lines.append(f"{prefix} default recovery-time {format_seconds(wd.recovery_time)}")
    return lines


def config_tree(config: SwitchConfig) -> dict[str, Any]:
    """``show running-config | json``: EOS' nested ``{"cmds": {line: null | {...}}}`` form."""
    root: dict[str, Any] = {"cmds": {}}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for line in render_config(config):
        stripped = line.strip()
        if stripped in ("!", "end") or not stripped:
            continue
        depth = (len(line) - len(line.lstrip(" "))) // len(INDENT)
        while stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1]
        parent_cmds: dict[str, Any] = parent.setdefault("cmds", {})
        node: dict[str, Any] = {"cmds": {}, "comments": []}
        parent_cmds[stripped] = node
        stack.append((depth, node))
    _drop_empty(root)  # lines without children are leaves: ``null``
    root["header"] = header_lines(config)[:2]
    return root


def _drop_empty(node: dict[str, Any]) -> None:
    cmds: dict[str, Any] = node.get("cmds", {})
    for key, child in cmds.items():
        if isinstance(child, dict):
            if child["cmds"]:
                _drop_empty(child)
            else:
                cmds[key] = None

"""Arista EOS: CLI configuration in a config session with ``commit timer``, reads with ``| json``.

Configuration forms follow Arista's documented syntax as rendered by Arista AVD's
``eos_cli_config_gen`` (``qos map dscp … to traffic-class …``, ``qos trust dscp``,
``priority-flow-control on``, ``priority-flow-control priority P no-drop``,
``priority-flow-control pause watchdog default timeout|recovery-time|polling-interval S``,
``priority-flow-control pause watchdog action drop|no-drop``, ``uc-tx-queue Q`` with
``random-detect ecn minimum-threshold N bytes maximum-threshold N bytes max-mark-probability P``,
``bandwidth percent N``, ``priority strict``). Changes go through a configuration session
(EOS "Configuration sessions": ``configure session NAME`` … ``commit timer HH:MM:SS``, then
``configure session NAME commit`` to confirm): if the agent dies before confirming, the
switch rolls itself back when the timer ends.

Reads parse ``show running-config | json`` (eAPI's nested ``cmds`` tree of config lines) for
the state, and for counters the JSON of ``show priority-flow-control counters``, ``show qos
interfaces ecn counters queue``, ``show interfaces counters queue [drops]`` and ``show
priority-flow-control counters watchdog`` (shapes as in ANTA's test data for the same
commands).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from agent.device.platforms._common import class_selector, class_selector_map, show_json
from agent.device.platforms._trim import not_trimming, with_trim_unread
from agent.device.platforms.base import Connection, Platform, PlatformError, Transaction
from agent.device.state import (
    DSCPS,
    PRIORITIES,
    Counters,
    EcnState,
    InterfaceCounters,
    InterfaceState,
    LinkHealth,
    PendingSession,
    QosState,
    QueueCounters,
    QueueState,
    WatchdogCounters,
    WatchdogState,
)
from agent.intent.plan import DevicePlan

# EOS threshold units. kbytes/mbytes as binary multiples and a 208-byte segment (the buffer
# cell of Broadcom Trident/Tomahawk ASICs) are assumptions: Arista does not define them
# publicly. The agent itself always renders ``bytes``.
UNITS = {"bytes": 1, "kbytes": 1024, "mbytes": 1024 * 1024, "segments": 208}
DSCPS_PER_LINE = 8
ACTION_TO_EOS = {"drop": "drop", "forward": "no-drop"}
EOS_TO_ACTION = {"drop": "drop", "no-drop": "forward"}
ECN_RE = re.compile(
    r"random-detect ecn minimum-threshold (\d+) (\w+) maximum-threshold (\d+) (\w+)"
    r"(?: max-mark-probability (\d+))?(?: weight (\d+))?"
)
DSCP_MAP_RE = re.compile(r"qos map dscp ([\d ]+) to traffic-class (\d)")
WATCHDOG_DEFAULT_RE = re.compile(
    r"priority-flow-control pause watchdog default (timeout|recovery-time|polling-interval) "
    r"([\d.]+)"
)


T = TypeVar("T")


# EOS's default DSCP → traffic-class map.
eos_default_priority = class_selector


@dataclass
class _InterfaceConfig:
    trust: str | None = None
    pfc_on: bool = False
    no_drop: set[int] = field(default_factory=set)
    watchdog_action: str | None = None
    queues: dict[int, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    service_profile: str | None = None
    service_policy: str | None = None  # service-policy type qos input NAME


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}".rstrip("0").rstrip(".")


# ---------------------------------------------------------------------- running-config readers


def _children(sub: dict[str, Any] | None) -> dict[str, Any]:
    """A config line's sub-lines in eAPI's tree (``{"cmds": {…}, "comments": […]}``)."""
    children: dict[str, Any] = (sub or {}).get("cmds", {})
    return children


Reader = Callable[[T, re.Match[str], Any], None]


def _read_line(
    readers: tuple[tuple[re.Pattern[str], Reader[T]], ...], into: T, line: str, sub: Any
) -> None:
    """Hand ``line`` to the first reader whose pattern it matches (none: not a QoS line)."""
    for pattern, read in readers:
        if m := pattern.fullmatch(line):
            read(into, m, sub)
            return


EOS_TRUST = {"qos trust dscp": "dscp", "qos trust cos": "pcp", "no qos trust": "none"}


def _read_trust(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    config.trust = EOS_TRUST[m.group(0)]


def _read_pfc_on(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    config.pfc_on = True


def _read_no_drop(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    config.no_drop.add(int(m.group(1)))


def _read_port_watchdog(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    config.watchdog_action = m.group(1)


def _read_service_profile(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    config.service_profile = m.group(1)


def _read_service_policy(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    config.service_policy = m.group(1)


def _read_tx_queue(config: _InterfaceConfig, m: re.Match[str], sub: Any) -> None:
    queue = config.queues[int(m.group(1))]
    for queue_line in _children(sub):
        _parse_queue_line(queue, queue_line)


# The lines of an interface or a qos profile that this parser reads.
INTERFACE_READERS: tuple[tuple[re.Pattern[str], Reader[_InterfaceConfig]], ...] = (
    (re.compile("|".join(map(re.escape, EOS_TRUST))), _read_trust),
    (re.compile(r"priority-flow-control on"), _read_pfc_on),
    (re.compile(r"priority-flow-control priority (\d) no-drop"), _read_no_drop),
    (
        re.compile(r"priority-flow-control pause watchdog port action (drop|notify-only)"),
        _read_port_watchdog,
    ),
    (re.compile(r"service-profile (\S+)"), _read_service_profile),
    (re.compile(r"service-policy type qos input (\S+)"), _read_service_policy),
    (re.compile(r"(?:uc-)?tx-queue (\d)"), _read_tx_queue),
)


def _parse_interface_lines(config: _InterfaceConfig, cmds: dict[str, Any]) -> None:
    for line, sub in cmds.items():
        _read_line(INTERFACE_READERS, config, line, sub)


def _parse_queue_line(queue: dict[str, Any], line: str) -> None:
    if line == "priority strict":
        queue["strict"] = True
    elif m := re.fullmatch(r"bandwidth percent (\d+)", line):
        queue["bandwidth_percent"] = int(m.group(1))
    elif m := ECN_RE.fullmatch(line):
        low, low_unit, high, high_unit, probability, _weight = m.groups()
        if low_unit not in UNITS or high_unit not in UNITS:
            raise PlatformError(f"unknown ECN threshold unit in {line!r}")
        queue["ecn"] = EcnState(
            min_bytes=int(low) * UNITS[low_unit],
            max_bytes=int(high) * UNITS[high_unit],
            max_probability=int(probability) if probability else 100,
        )


# An ACL entry that matches UDP by port ("10 permit udp any any eq 4791", "... range 4791
# 4792", a source port as well): what a QoS class-map must not classify RoCE on.
UDP_PORT_ENTRY_RE = re.compile(r"(?:\d+ )?permit udp\b.*\b(?:eq|range|gt|lt|neq) \d+.*")


def udp_port_classifiers(cmds: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Per ``policy-map type quality-of-service``: its classes whose class-map matches an IP
    access list with UDP port entries, described for a report (AVD's ``class-maps.j2``,
    ``policy-maps-qos.j2`` and ``ip-access-lists.j2`` give the syntax)."""
    acls = {
        m.group(1): [e for e in _sub_lines(cmds, line) if UDP_PORT_ENTRY_RE.fullmatch(e)]
        for line in cmds
        if (m := re.fullmatch(r"ip access-list (\S+)", line))
    }
    class_maps = {
        m.group(1): _matched_acls(_sub_lines(cmds, line))
        for line in cmds
        if (m := re.fullmatch(r"class-map type qos (?:match-any |match-all )?(\S+)", line))
    }
    policies = {
        m.group(1): _policy_classes(_sub_lines(cmds, line))
        for line in cmds
        if (m := re.fullmatch(r"policy-map type quality-of-service (\S+)", line))
    }
    found: dict[str, tuple[str, ...]] = {}
    for policy, classes in policies.items():
        rules = _udp_port_rules(policy, classes, class_maps, acls)
        if rules:
            found[policy] = tuple(rules)
    return found


def _udp_port_rules(
    policy: str,
    classes: dict[str, list[str]],
    class_maps: dict[str, list[str]],
    acls: dict[str, list[str]],
) -> list[str]:
    """Each UDP port entry a policy's classes match, as a report line."""
    return [
        f"policy-map {policy} class {class_name} ({_set_actions(actions)}): "
        f"ip access-list {acl} '{entry}'"
        for class_name, actions in classes.items()
        for acl in class_maps.get(class_name, [])
        for entry in acls.get(acl, [])
    ]


def _sub_lines(cmds: dict[str, Any], line: str) -> dict[str, Any]:
    return dict((cmds.get(line) or {}).get("cmds") or {})


def _matched_acls(class_map: dict[str, Any]) -> list[str]:
    """The access lists a class-map matches (``match ip access-group NAME``)."""
    return [g.group(1) for e in class_map if (g := re.fullmatch(r"match ip access-group (\S+)", e))]


def _policy_classes(policy: dict[str, Any]) -> dict[str, list[str]]:
    """A policy-map's classes: name → the class's action lines."""
    return {
        c.group(1): list((body or {}).get("cmds") or {})
        for entry, body in policy.items()
        if (c := re.fullmatch(r"class (\S+)", entry))
    }


def _set_actions(actions: list[str]) -> str:
    return ", ".join(a for a in actions if a.startswith("set ")) or "no set"


def _merge(profile: _InterfaceConfig | None, own: _InterfaceConfig) -> _InterfaceConfig:
    """An interface's effective QoS: its service-profile, overridden by its own lines."""
    if profile is None:
        return own
    merged = _InterfaceConfig(
        trust=own.trust or profile.trust,
        pfc_on=own.pfc_on or profile.pfc_on,
        no_drop=own.no_drop | profile.no_drop,
        watchdog_action=own.watchdog_action or profile.watchdog_action,
        service_policy=own.service_policy or profile.service_policy,
    )
    for queue in set(profile.queues) | set(own.queues):
        merged.queues[queue] = {**profile.queues.get(queue, {}), **own.queues.get(queue, {})}
    return merged


@dataclass
class _RunningConfig:
    """What the QoS state is read from in ``show running-config | json``."""

    dscp_map: dict[int, int] = field(default_factory=class_selector_map)  # EOS's default
    watchdog: dict[str, Any] = field(default_factory=dict)  # timeout, recovery-time, …, action
    global_trust: str | None = None
    profiles: dict[str, _InterfaceConfig] = field(default_factory=dict)
    interfaces: dict[str, _InterfaceConfig] = field(default_factory=dict)

    @classmethod
    def parse(cls, cmds: dict[str, Any]) -> _RunningConfig:
        config = cls()
        for line, sub in cmds.items():
            _read_line(GLOBAL_READERS, config, line, _children(sub))
        return config

    def effective(self) -> dict[str, _InterfaceConfig]:
        """Each Ethernet interface's own lines over its service-profile's."""
        return {
            name: _merge(self.profiles.get(config.service_profile or ""), config)
            for name, config in self.interfaces.items()
        }

    def trust_of(self, config: _InterfaceConfig) -> str:
        return config.trust or self.global_trust or "dscp"

    def watchdog_state(self, effective: dict[str, _InterfaceConfig]) -> WatchdogState:
        """The pause watchdog: on when a default timeout is set; ``alert`` when every port
        only notifies."""
        settings = self.watchdog
        if "timeout" not in settings:
            return WatchdogState()
        notify_only = {config.watchdog_action for config in effective.values()} == {"notify-only"}
        configured = settings.get("action")
        action = "alert" if notify_only else EOS_TO_ACTION.get(configured or "drop", configured)
        return WatchdogState(
            enabled=True,
            detection_ms=settings.get("timeout"),
            restoration_ms=settings.get("recovery-time"),
            polling_ms=settings.get("polling-interval"),
            action=action,
        )


def _read_dscp_map(config: _RunningConfig, m: re.Match[str], sub: Any) -> None:
    for dscp in m.group(1).split():
        config.dscp_map[int(dscp)] = int(m.group(2))


def _read_watchdog_default(config: _RunningConfig, m: re.Match[str], sub: Any) -> None:
    config.watchdog[m.group(1)] = round(float(m.group(2)) * 1000)


def _read_watchdog_action(config: _RunningConfig, m: re.Match[str], sub: Any) -> None:
    config.watchdog["action"] = m.group(1)


def _read_global_trust(config: _RunningConfig, m: re.Match[str], sub: Any) -> None:
    config.global_trust = "dscp"


def _read_qos_profile(config: _RunningConfig, m: re.Match[str], sub: Any) -> None:
    config.profiles[m.group(1)] = _InterfaceConfig()
    _parse_interface_lines(config.profiles[m.group(1)], sub)


def _read_interface(config: _RunningConfig, m: re.Match[str], sub: Any) -> None:
    config.interfaces[m.group(1)] = _InterfaceConfig()
    _parse_interface_lines(config.interfaces[m.group(1)], sub)


# The top-level lines this parser reads (each reader gets the line's sub-lines).
GLOBAL_READERS: tuple[tuple[re.Pattern[str], Reader[_RunningConfig]], ...] = (
    (DSCP_MAP_RE, _read_dscp_map),
    (WATCHDOG_DEFAULT_RE, _read_watchdog_default),
    (re.compile(r"priority-flow-control pause watchdog action (\S+)"), _read_watchdog_action),
    (re.compile(r"qos trust dscp"), _read_global_trust),
    (re.compile(r"qos profile (\S+)"), _read_qos_profile),
    (re.compile(r"interface (Ethernet\S+)"), _read_interface),
)


# ---------------------------------------------------------------------- render sections


def _interface_trust_lines(desired: QosState, actual: QosState | None) -> list[str]:
    if actual is not None and actual.trust == desired.trust:
        return []
    return ["qos trust dscp" if desired.trust == "dscp" else "no qos trust"]


def _interface_pfc_lines(want: InterfaceState, have: InterfaceState | None) -> list[str]:
    lines = []
    if have is None or have.pfc_enabled != want.pfc_enabled:
        lines.append("priority-flow-control on" if want.pfc_enabled else "no priority-flow-control")
    had = set(have.pfc_priorities) if have else set()
    lines += [
        f"priority-flow-control priority {priority} no-drop"
        for priority in sorted(set(want.pfc_priorities) - had)
    ]
    lines += [
        f"no priority-flow-control priority {priority} no-drop"
        for priority in sorted(had - set(want.pfc_priorities))
    ]
    return lines


def _port_watchdog_lines(desired: QosState, actual: QosState | None) -> list[str]:
    """``alert`` is a per-port notify-only action on EOS."""
    watchdog = desired.watchdog
    if not (watchdog.enabled and watchdog.action == "alert"):
        return []
    if actual is not None and actual.watchdog.action == "alert":
        return []
    return ["priority-flow-control pause watchdog port action notify-only"]


def _tx_queue_blocks(want: InterfaceState, have: InterfaceState | None) -> list[str]:
    """A ``uc-tx-queue Q`` block for each queue whose settings differ."""
    lines: list[str] = []
    for queue in PRIORITIES:
        mine = want.queues.get(queue) or QueueState()
        theirs = (have.queues.get(queue) if have else None) or QueueState()
        body = _tx_queue_lines(mine, theirs, fresh=have is None)
        if body:
            lines += [f"uc-tx-queue {queue}", *(f"   {line}" for line in body), "exit"]
    return lines


def _tx_queue_lines(mine: QueueState, theirs: QueueState, fresh: bool) -> list[str]:
    """The queue's lines that differ (a fresh render writes every configured setting)."""
    lines = []
    if mine.strict != theirs.strict or (fresh and mine.strict):
        lines.append("priority strict" if mine.strict else "no priority strict")
    bandwidth = mine.bandwidth_percent
    if bandwidth != theirs.bandwidth_percent or (fresh and bandwidth is not None):
        lines.append(
            f"bandwidth percent {bandwidth}" if bandwidth is not None else "no bandwidth percent"
        )
    ecn = mine.ecn
    if ecn != theirs.ecn or (fresh and ecn is not None):
        lines.append(
            f"random-detect ecn minimum-threshold {ecn.min_bytes} bytes "
            f"maximum-threshold {ecn.max_bytes} bytes "
            f"max-mark-probability {ecn.max_probability}"
            if ecn is not None
            else "no random-detect ecn"
        )
    return lines


def _dscp_map_lines(desired: QosState, actual: QosState | None) -> list[str]:
    """``qos map dscp`` lines for the DSCPs that differ; a DSCP going back to EOS's default
    loses its explicit entry (``no qos map …``) instead."""
    remap: dict[int, list[int]] = defaultdict(list)
    unmap: dict[int, list[int]] = defaultdict(list)
    for dscp in DSCPS:
        want = desired.dscp_to_priority[dscp]
        default = eos_default_priority(dscp)
        have = actual.dscp_to_priority.get(dscp) if actual is not None else default
        if want == have:
            continue
        if actual is not None and want == default and have is not None:
            unmap[have].append(dscp)
        else:
            remap[want].append(dscp)
    return _qos_map_lines("no qos map dscp", unmap) + _qos_map_lines("qos map dscp", remap)


def _qos_map_lines(command: str, groups: dict[int, list[int]]) -> list[str]:
    # Eight values per line, the most EOS takes in one `qos map dscp` command.
    return [
        f"{command} {' '.join(map(str, values[start : start + DSCPS_PER_LINE]))} "
        f"to traffic-class {priority}"
        for priority, values in sorted(groups.items())
        for start in range(0, len(values), DSCPS_PER_LINE)
    ]


# ---------------------------------------------------------------------- counter readers


@dataclass(frozen=True)
class CounterReplies:
    """The JSON documents EOS's counters are read from (shapes as in ANTA's test data)."""

    pfc: dict[str, Any]  # show priority-flow-control counters
    ecn: dict[str, Any]  # show qos interfaces ecn counters queue
    queues: dict[str, Any]  # show interfaces counters queue
    drops: dict[str, Any]  # show interfaces counters queue drops
    watchdog: dict[str, Any]  # show priority-flow-control counters watchdog

    @classmethod
    def read(cls, conn: Connection) -> CounterReplies:
        return cls(
            pfc=show_json(conn, "show priority-flow-control counters | json"),
            ecn=show_json(conn, "show qos interfaces ecn counters queue | json"),
            queues=show_json(conn, "show interfaces counters queue | json"),
            drops=show_json(conn, "show interfaces counters queue drops | json"),
            watchdog=show_json(conn, "show priority-flow-control counters watchdog | json"),
        )

    def interface(self, name: str, configured: InterfaceState | None) -> InterfaceCounters:
        # EOS counts PFC frames per interface, not per priority: attribute them to the
        # interface's lossless priority (the lowest, if several are configured).
        lossless = configured.pfc_priorities[0] if configured and configured.pfc_priorities else 3
        totals = self.pfc.get("interfaceCounters", {}).get(name, {})
        rx = [0] * 8
        tx = [0] * 8
        rx[lossless] = int(totals.get("rxFrames", 0))
        tx[lossless] = int(totals.get("txFrames", 0))
        return InterfaceCounters(
            pfc_rx=tuple(rx),
            pfc_tx=tuple(tx),
            queues=self.queue_counters(name),
            watchdog=self.watchdog_counters(name),
            headroom_drops=self.headroom_drops(name),
        )

    def queue_counters(self, name: str) -> dict[int, QueueCounters]:
        classes = (
            self.queues.get("egressQueueCounters", {})
            .get("interfaces", {})
            .get(name, {})
            .get("ucastQueues", {})
            .get("trafficClasses", {})
        )
        marked = self.ecn.get("intfQueueCounters", {}).get(name, {}).get("queueCounters", {})
        per_queue: dict[int, QueueCounters] = {}
        for queue in PRIORITIES:
            dp0 = classes.get(f"TC{queue}", {}).get("dropPrecedences", {}).get("DP0", {})
            mark = marked.get(str(queue), "-")
            per_queue[queue] = QueueCounters(
                tx_packets=int(dp0.get("enqueuedPackets", 0)),
                tx_bytes=int(dp0.get("enqueuedBytes", 0)),
                dropped_packets=int(dp0.get("droppedPackets", 0)),
                ecn_marked_packets=int(mark) if str(mark).isdigit() else 0,
            )
        return per_queue

    def headroom_drops(self, name: str) -> tuple[int, ...]:
        voq = self.drops.get("interfaces", {}).get(name, {}).get("trafficClasses", {})
        return tuple(
            int(
                voq.get(f"TC{p}", {})
                .get("ingressVoqCounters", {})
                .get("countersSum", {})
                .get("droppedPackets", 0)
            )
            for p in PRIORITIES
        )

    def watchdog_counters(self, name: str) -> dict[int, WatchdogCounters]:
        stuck = self.watchdog.get("interfaces", {}).get(name, {}).get("txQueues", {})
        per_queue = {}
        for queue, entry in stuck.items():
            detected = int(entry.get("stuckCount", 0))
            restored = int(entry.get("recoveryCount", 0))
            per_queue[int(queue)] = WatchdogCounters(
                storms_detected=detected, storms_restored=restored, stormed=detected > restored
            )
        return per_queue


class AristaEos(Platform):
    name: ClassVar[str] = "arista_eos"
    netmiko_device_type: ClassVar[str] = "arista_eos"

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        desired = self.desired(device)
        return self.render_changes(desired, None)

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """Lines for every setting where ``actual`` differs (all of them when it is None)."""
        lines = _dscp_map_lines(desired, actual)
        lines += self._watchdog_lines(desired.watchdog, actual.watchdog if actual else None)
        for name, wanted in desired.interfaces.items():
            present = actual.interfaces.get(name) if actual else None
            body = self._interface_lines(desired, wanted, actual, present)
            if body:
                lines += [f"interface {name}", *body]
        return lines

    @staticmethod
    def _watchdog_lines(want: WatchdogState, have: WatchdogState | None) -> list[str]:
        prefix = "priority-flow-control pause watchdog"
        if not want.enabled:
            if have is None or not have.enabled:
                return []
            return [
                f"no {prefix} default timeout",
                f"no {prefix} default recovery-time",
                f"no {prefix} default polling-interval",
                f"no {prefix} action",
            ]
        lines = []
        for attribute, keyword in (
            ("detection_ms", "timeout"),
            ("restoration_ms", "recovery-time"),
            ("polling_ms", "polling-interval"),
        ):
            value = getattr(want, attribute)
            if value is not None and (have is None or getattr(have, attribute) != value):
                lines.append(f"{prefix} default {keyword} {_seconds(value)}")
        action = want.action if want.action in ACTION_TO_EOS else "drop"
        if have is None or have.action != want.action:
            lines.append(f"{prefix} action {ACTION_TO_EOS[action]}")
        return lines

    @staticmethod
    def _interface_lines(
        desired: QosState,
        want: InterfaceState,
        actual: QosState | None,
        have: InterfaceState | None,
    ) -> list[str]:
        body = [
            *_interface_trust_lines(desired, actual),
            *_interface_pfc_lines(want, have),
            *_port_watchdog_lines(desired, actual),
            *_tx_queue_blocks(want, have),
        ]
        return [f"   {line}" for line in body]

    # ------------------------------------------------------------------ read

    def read_state(self, conn: Connection) -> QosState:
        return self.state_from_running_config(show_json(conn, "show running-config | json"))

    @classmethod
    def state_from_running_config(cls, tree: dict[str, Any]) -> QosState:
        """Normalize ``show running-config | json`` (separate so recorded replies parse)."""
        cmds: dict[str, Any] = tree.get("cmds", {})
        config = _RunningConfig.parse(cmds)
        effective = config.effective()
        by_policy = udp_port_classifiers(cmds)
        trusts = {config.trust_of(interface) for interface in effective.values()}
        return QosState(
            trust=trusts.pop() if len(trusts) == 1 else "mixed",
            dscp_to_priority=config.dscp_map,
            watchdog=config.watchdog_state(effective),
            interfaces={
                name: cls._interface_state(c).model_copy(
                    update={
                        "trust": config.trust_of(c),
                        "udp_port_classifiers": by_policy.get(c.service_policy or "", ()),
                    }
                )
                for name, c in effective.items()
            },
        )

    @staticmethod
    def _interface_state(config: _InterfaceConfig) -> InterfaceState:
        queues = {}
        for queue, settings in config.queues.items():
            state = QueueState(
                ecn=settings.get("ecn"),
                strict=settings.get("strict", False),
                bandwidth_percent=None
                if settings.get("strict")
                else settings.get("bandwidth_percent"),
            )
            if state != QueueState():
                queues[queue] = state
        return InterfaceState(
            pfc_enabled=config.pfc_on,
            pfc_priorities=tuple(sorted(config.no_drop)),
            queues=queues,
        )

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        collected_at = time.time()
        if state is None:
            state = self.read_state(conn)
        replies = CounterReplies.read(conn)
        counters = self.counters_from_json(conn.device, collected_at, state, replies)
        return with_trim_unread(counters, not_trimming(self.name))

    def read_link_health(self, conn: Connection) -> dict[str, LinkHealth]:
        return self.link_health_from_json(
            show_json(conn, "show interfaces status | json"),
            show_json(conn, "show interfaces counters errors | json"),
        )

    @staticmethod
    def link_health_from_json(
        status: dict[str, Any], errors: dict[str, Any]
    ) -> dict[str, LinkHealth]:
        """``show interfaces status | json`` (``interfaceStatuses.<if>.linkStatus``:
        ``connected`` / ``notconnect`` / ``disabled`` / ``errdisabled``) and ``show interfaces
        counters errors | json`` (``interfaceErrorCounters.<if>.fcsErrors`` / ``inErrors`` /
        ``outErrors``; the shape of ANTA's ``VerifyInterfaceErrors`` test data)."""
        statuses = status.get("interfaceStatuses", {})
        counters = errors.get("interfaceErrorCounters", {})
        health = {}
        for name in sorted(set(statuses) | set(counters)):
            link = statuses.get(name, {}).get("linkStatus")
            values = counters.get(name, {})
            health[name] = LinkHealth(
                up=None if link is None else link == "connected",
                fcs_errors=int(values.get("fcsErrors", 0)),
                in_errors=int(values.get("inErrors", 0)),
                out_errors=int(values.get("outErrors", 0)),
            )
        return health

    @staticmethod
    def counters_from_json(
        device: str, collected_at: float, state: QosState, replies: CounterReplies
    ) -> Counters:
        """Normalize the counter documents (separate so recorded outputs can be parsed)."""
        names = set(replies.pfc.get("interfaceCounters", {})) | set(
            replies.queues.get("egressQueueCounters", {}).get("interfaces", {})
        )
        interfaces = {
            name: replies.interface(name, state.interfaces.get(name)) for name in sorted(names)
        }
        return Counters(device=device, collected_at=collected_at, interfaces=interfaces)

    # ------------------------------------------------------------------ change (the base's flow)

    def begin(self, conn: Connection, txn: Transaction) -> None:
        _at_prompt(conn, f"configure session {txn.name}")

    def stage(self, conn: Connection, txn: Transaction) -> None:
        conn.send_lines([line.strip() for line in txn.lines], read_timeout=30)

    def commit(self, conn: Connection, txn: Transaction, confirm_timeout_s: int) -> None:
        timer = time.strftime("%H:%M:%S", time.gmtime(confirm_timeout_s))
        _at_prompt(conn, f"commit timer {timer}", failure="commit refused")

    def abort(self, conn: Connection, txn: Transaction) -> None:
        # Not committed as far as we know: dropping the session leaves the running config
        # untouched. The answer is not trusted (the reply to ``commit timer`` may be what
        # got lost): the caller re-reads the switch on a fresh connection.
        try:
            _at_prompt(conn, "abort")
        except Exception as exc:
            txn.notes.append(f"abort got no good answer: {exc.__class__.__name__}")

    def rollback(self, conn: Connection, txn: Transaction) -> None:
        # Roll back now rather than wait for the timer.
        _at_prompt(conn, f"configure session {txn.name} abort")
        txn.rolled_back = True

    def confirm_change(self, conn: Connection, txn: Transaction) -> None:
        # A session commit changes the running config only: without the save that follows,
        # a reload brings back the old QoS and the fabric is silently lossy again.
        command = f"configure session {txn.name} commit"
        _at_prompt(conn, command, failure=f"confirming session {txn.name} failed")

    # ------------------------------------------------------------------ sessions

    # ``show configuration sessions detail | json``: {"sessions": {NAME: {"state":
    # "pending" | "pendingCommitTimer" | "completed", "user", "terminal",
    # "commitTimerRemaining" (s), "createdTime" (epoch)}}, "maxSavedSessions",
    # "maxOpenSessions"}. EOS documents the states, the 24-hour life of an uncommitted session
    # and the open-session cap (arista.com/um-eos/eos-configure-session, "Configure Session";
    # ``service configuration session max pending``); the JSON key names for user, terminal
    # and the timer could not be checked against a recorded EOS reply here, so the parser
    # also takes them under ``instances`` and treats any missing field as unknown.
    SESSIONS_COMMAND: ClassVar[str] = "show configuration sessions detail | json"

    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        return self.sessions_from_json(conn.device, show_json(conn, self.SESSIONS_COMMAND))

    @staticmethod
    def sessions_from_json(
        device: str, data: dict[str, Any], now: float | None = None
    ) -> list[PendingSession]:
        """Pending sessions from the show's JSON (separate so recorded replies parse)."""
        now = time.time() if now is None else now
        found = []
        for name, entry in sorted((data.get("sessions") or {}).items()):
            if not isinstance(entry, dict):
                continue
            state = str(entry.get("state", ""))
            if state not in ("pending", "pendingCommitTimer"):
                continue  # completed sessions are history, not state
            instance: dict[str, Any] = {}
            for value in (entry.get("instances") or {}).values():
                if isinstance(value, dict):
                    instance = value
                    break
            user = entry.get("user") or instance.get("user") or None
            created = entry.get("createdTime")
            remaining = entry.get("commitTimerRemaining")
            found.append(
                PendingSession(
                    device=device,
                    name=str(name),
                    kind="EOS session",
                    state=state,
                    user=str(user) if user else None,
                    age_s=max(0.0, now - float(created)) if created else None,
                    rollback_in_s=float(remaining) if remaining is not None else None,
                    live=state == "pendingCommitTimer",
                )
            )
        return found

    def abort_session(self, conn: Connection, session: PendingSession) -> None:
        command = f"configure session {session.name} abort"
        _at_prompt(conn, command, failure=f"{command!r} failed")

    def confirm_session(self, conn: Connection, session: PendingSession) -> None:
        command = f"configure session {session.name} commit"
        _at_prompt(conn, command, failure=f"{command!r} failed")
        self.save(conn)

    def unsaved(self, conn: Connection) -> list[str] | None:
        """``show running-config diffs``: EOS prints a unified diff from the startup to the
        running config, nothing when they agree."""
        return self.unsaved_from_diffs(conn.show("show running-config diffs"))

    @staticmethod
    def unsaved_from_diffs(text: str) -> list[str]:
        return [
            line
            for line in text.splitlines()
            if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
        ]

    def save(self, conn: Connection) -> None:
        """``copy running-config startup-config``."""
        _at_prompt(
            conn, "copy running-config startup-config", failure="saving the configuration failed"
        )


def _at_prompt(conn: Connection, command: str, failure: str | None = None) -> str:
    """Send ``command`` and wait for any prompt of the switch (in a session the prompt is not
    the exec one). With ``failure``, a refusal raises ``DEVICE: FAILURE: % …``."""
    output: str = conn.netmiko.send_command(command, expect_string=conn.prompt_pattern)
    refusal = conn.refusal(output) if failure else None
    if refusal:
        raise PlatformError(f"{conn.device}: {failure}: {refusal}")
    return output

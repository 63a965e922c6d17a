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

import json
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent.device.platforms.base import Connection, Platform, PlatformError, Transaction, kill_point
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


def eos_default_priority(dscp: int) -> int:
    """EOS's default DSCP → traffic-class map: the class selector bits (dscp >> 3)."""
    return dscp >> 3


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


def _parse_interface_lines(config: _InterfaceConfig, cmds: dict[str, Any]) -> None:
    for line, sub in cmds.items():
        if line == "qos trust dscp":
            config.trust = "dscp"
        elif line == "qos trust cos":
            config.trust = "pcp"
        elif line == "no qos trust":
            config.trust = "none"
        elif line == "priority-flow-control on":
            config.pfc_on = True
        elif m := re.fullmatch(r"priority-flow-control priority (\d) no-drop", line):
            config.no_drop.add(int(m.group(1)))
        elif m := re.fullmatch(
            r"priority-flow-control pause watchdog port action (drop|notify-only)", line
        ):
            config.watchdog_action = m.group(1)
        elif m := re.fullmatch(r"service-profile (\S+)", line):
            config.service_profile = m.group(1)
        elif m := re.fullmatch(r"service-policy type qos input (\S+)", line):
            config.service_policy = m.group(1)
        elif m := re.fullmatch(r"(?:uc-)?tx-queue (\d)", line):
            queue = config.queues[int(m.group(1))]
            for queue_line in (sub or {}).get("cmds", {}):
                _parse_queue_line(queue, queue_line)


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

    def sub(line: str) -> dict[str, Any]:
        return dict((cmds.get(line) or {}).get("cmds") or {})

    acls: dict[str, list[str]] = {}
    class_maps: dict[str, list[str]] = {}
    policies: dict[str, dict[str, list[str]]] = {}
    for line in cmds:
        if m := re.fullmatch(r"ip access-list (\S+)", line):
            acls[m.group(1)] = [e for e in sub(line) if UDP_PORT_ENTRY_RE.fullmatch(e)]
        elif m := re.fullmatch(r"class-map type qos (?:match-any |match-all )?(\S+)", line):
            class_maps[m.group(1)] = [
                g.group(1)
                for e in sub(line)
                if (g := re.fullmatch(r"match ip access-group (\S+)", e))
            ]
        elif m := re.fullmatch(r"policy-map type quality-of-service (\S+)", line):
            policies[m.group(1)] = {
                c.group(1): list((body or {}).get("cmds") or {})
                for entry, body in sub(line).items()
                if (c := re.fullmatch(r"class (\S+)", entry))
            }
    found: dict[str, tuple[str, ...]] = {}
    for policy, classes in policies.items():
        rules = []
        for class_name, actions in classes.items():
            for acl in class_maps.get(class_name, []):
                for entry in acls.get(acl, []):
                    action = ", ".join(a for a in actions if a.startswith("set ")) or "no set"
                    rules.append(
                        f"policy-map {policy} class {class_name} ({action}): "
                        f"ip access-list {acl} '{entry}'"
                    )
        if rules:
            found[policy] = tuple(rules)
    return found


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


class AristaEos(Platform):
    name: ClassVar[str] = "arista_eos"
    netmiko_device_type: ClassVar[str] = "arista_eos"

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        desired = self.desired(device)
        return self.render_changes(desired, None)

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """Lines for every setting where ``actual`` differs (all of them when it is None)."""
        lines: list[str] = []
        remap: dict[int, list[int]] = defaultdict(list)
        unmap: dict[int, list[int]] = defaultdict(list)
        for dscp in DSCPS:
            want = desired.dscp_to_priority[dscp]
            have = (
                actual.dscp_to_priority.get(dscp)
                if actual is not None
                else eos_default_priority(dscp)
            )
            if want == have:
                continue
            if actual is not None and want == eos_default_priority(dscp) and have is not None:
                unmap[have].append(dscp)  # back to EOS's default: remove the explicit entry
            else:
                remap[want].append(dscp)
        for priority in sorted(unmap):
            values = unmap[priority]
            for start in range(0, len(values), DSCPS_PER_LINE):
                dscps = " ".join(map(str, values[start : start + DSCPS_PER_LINE]))
                lines.append(f"no qos map dscp {dscps} to traffic-class {priority}")
        for priority in sorted(remap):
            # Eight values per line, the most EOS takes in one `qos map dscp` command.
            values = remap[priority]
            for start in range(0, len(values), DSCPS_PER_LINE):
                dscps = " ".join(map(str, values[start : start + DSCPS_PER_LINE]))
                lines.append(f"qos map dscp {dscps} to traffic-class {priority}")
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
        body: list[str] = []
        if actual is None or actual.trust != desired.trust:
            body.append("qos trust dscp" if desired.trust == "dscp" else "no qos trust")
        if have is None or have.pfc_enabled != want.pfc_enabled:
            body.append(
                "priority-flow-control on" if want.pfc_enabled else "no priority-flow-control"
            )
        had = set(have.pfc_priorities) if have else set()
        for priority in sorted(set(want.pfc_priorities) - had):
            body.append(f"priority-flow-control priority {priority} no-drop")
        for priority in sorted(had - set(want.pfc_priorities)):
            body.append(f"no priority-flow-control priority {priority} no-drop")
        if desired.watchdog.enabled and desired.watchdog.action == "alert":
            alert = actual is not None and actual.watchdog.action == "alert"
            if not alert:
                body.append("priority-flow-control pause watchdog port action notify-only")
        for queue in PRIORITIES:
            mine = want.queues.get(queue) or QueueState()
            theirs = (have.queues.get(queue) if have else None) or QueueState()
            queue_body = []
            if mine.strict != theirs.strict or (have is None and mine.strict):
                queue_body.append("priority strict" if mine.strict else "no priority strict")
            if mine.bandwidth_percent != theirs.bandwidth_percent or (
                have is None and mine.bandwidth_percent is not None
            ):
                queue_body.append(
                    f"bandwidth percent {mine.bandwidth_percent}"
                    if mine.bandwidth_percent is not None
                    else "no bandwidth percent"
                )
            if mine.ecn != theirs.ecn or (have is None and mine.ecn is not None):
                ecn = mine.ecn
                queue_body.append(
                    f"random-detect ecn minimum-threshold {ecn.min_bytes} bytes "
                    f"maximum-threshold {ecn.max_bytes} bytes "
                    f"max-mark-probability {ecn.max_probability}"
                    if ecn is not None
                    else "no random-detect ecn"
                )
            if queue_body:
                body += [f"uc-tx-queue {queue}", *(f"   {line}" for line in queue_body), "exit"]
        return [f"   {line}" for line in body]

    # ------------------------------------------------------------------ read

    def read_state(self, conn: Connection) -> QosState:
        tree = self._json(conn, "show running-config | json")
        cmds: dict[str, Any] = tree.get("cmds", {})
        dscp_map = {dscp: eos_default_priority(dscp) for dscp in DSCPS}
        watchdog: dict[str, Any] = {}
        global_trust: str | None = None
        profiles: dict[str, _InterfaceConfig] = {}
        interfaces: dict[str, _InterfaceConfig] = {}
        for line, sub in cmds.items():
            sub_cmds = (sub or {}).get("cmds", {})
            if m := DSCP_MAP_RE.fullmatch(line):
                for dscp in m.group(1).split():
                    dscp_map[int(dscp)] = int(m.group(2))
            elif m := WATCHDOG_DEFAULT_RE.fullmatch(line):
                watchdog[m.group(1)] = round(float(m.group(2)) * 1000)
            elif m := re.fullmatch(r"priority-flow-control pause watchdog action (\S+)", line):
                watchdog["action"] = m.group(1)
            elif line == "qos trust dscp":
                global_trust = "dscp"
            elif m := re.fullmatch(r"qos profile (\S+)", line):
                profiles[m.group(1)] = _InterfaceConfig()
                _parse_interface_lines(profiles[m.group(1)], sub_cmds)
            elif m := re.fullmatch(r"interface (Ethernet\S+)", line):
                interfaces[m.group(1)] = _InterfaceConfig()
                _parse_interface_lines(interfaces[m.group(1)], sub_cmds)
        effective = {
            name: _merge(profiles.get(config.service_profile or ""), config)
            for name, config in interfaces.items()
        }
        by_port = udp_port_classifiers(cmds)
        trusts = {config.trust or global_trust or "dscp" for config in effective.values()}
        enabled = "timeout" in watchdog
        actions = {config.watchdog_action for config in effective.values()}
        action = (
            "alert"
            if actions == {"notify-only"}
            else EOS_TO_ACTION.get(watchdog.get("action", "drop"), watchdog.get("action"))
        )
        return QosState(
            trust=trusts.pop() if len(trusts) == 1 else "mixed",
            dscp_to_priority=dscp_map,
            watchdog=WatchdogState(
                enabled=enabled,
                detection_ms=watchdog.get("timeout") if enabled else None,
                restoration_ms=watchdog.get("recovery-time") if enabled else None,
                polling_ms=watchdog.get("polling-interval") if enabled else None,
                action=action if enabled else None,
            ),
            interfaces={
                name: self._interface_state(c).model_copy(
                    update={
                        "trust": c.trust or global_trust or "dscp",
                        "udp_port_classifiers": by_port.get(c.service_policy or "", ()),
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

    @staticmethod
    def _json(conn: Connection, command: str) -> dict[str, Any]:
        output = conn.show(command)
        try:
            data = json.loads(output)
        except json.JSONDecodeError:
            raise PlatformError(
                f"{conn.device}: {command!r} did not return JSON: {output.strip()[:200]}"
            ) from None
        if not isinstance(data, dict):
            raise PlatformError(f"{conn.device}: {command!r} returned {type(data).__name__}")
        return data

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        collected_at = time.time()
        if state is None:
            state = self.read_state(conn)
        pfc = self._json(conn, "show priority-flow-control counters | json")
        ecn = self._json(conn, "show qos interfaces ecn counters queue | json")
        queues = self._json(conn, "show interfaces counters queue | json")
        drops = self._json(conn, "show interfaces counters queue drops | json")
        watchdog = self._json(conn, "show priority-flow-control counters watchdog | json")
        return self.counters_from_json(conn.device, collected_at, state, pfc, ecn, queues, drops,
                                       watchdog)  # fmt: skip

    def read_link_health(self, conn: Connection) -> dict[str, LinkHealth]:
        return self.link_health_from_json(
            self._json(conn, "show interfaces status | json"),
            self._json(conn, "show interfaces counters errors | json"),
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
        device: str,
        collected_at: float,
        state: QosState,
        pfc: dict[str, Any],
        ecn: dict[str, Any],
        queues: dict[str, Any],
        drops: dict[str, Any],
        watchdog: dict[str, Any],
    ) -> Counters:
        """Normalize the five JSON documents (separate so recorded outputs can be parsed)."""
        names = set(pfc.get("interfaceCounters", {})) | set(
            queues.get("egressQueueCounters", {}).get("interfaces", {})
        )
        interfaces: dict[str, InterfaceCounters] = {}
        for name in sorted(names):
            # EOS counts PFC frames per interface, not per priority: attribute them to the
            # interface's lossless priority (the lowest, if several are configured).
            configured = state.interfaces.get(name)
            lossless = (
                configured.pfc_priorities[0] if configured and configured.pfc_priorities else 3
            )
            totals = pfc.get("interfaceCounters", {}).get(name, {})
            rx = [0] * 8
            tx = [0] * 8
            rx[lossless] = int(totals.get("rxFrames", 0))
            tx[lossless] = int(totals.get("txFrames", 0))
            classes = (
                queues.get("egressQueueCounters", {})
                .get("interfaces", {})
                .get(name, {})
                .get("ucastQueues", {})
                .get("trafficClasses", {})
            )
            marked = ecn.get("intfQueueCounters", {}).get(name, {}).get("queueCounters", {})
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
            voq = drops.get("interfaces", {}).get(name, {}).get("trafficClasses", {})
            headroom = tuple(
                int(
                    voq.get(f"TC{p}", {})
                    .get("ingressVoqCounters", {})
                    .get("countersSum", {})
                    .get("droppedPackets", 0)
                )
                for p in PRIORITIES
            )
            stuck = watchdog.get("interfaces", {}).get(name, {}).get("txQueues", {})
            per_watchdog = {}
            for queue, entry in stuck.items():
                detected = int(entry.get("stuckCount", 0))
                restored = int(entry.get("recoveryCount", 0))
                per_watchdog[int(queue)] = WatchdogCounters(
                    storms_detected=detected,
                    storms_restored=restored,
                    stormed=detected > restored,
                )
            interfaces[name] = InterfaceCounters(
                pfc_rx=tuple(rx),
                pfc_tx=tuple(tx),
                queues=per_queue,
                watchdog=per_watchdog,
                headroom_drops=headroom,
            )
        return Counters(device=device, collected_at=collected_at, interfaces=interfaces)

    # ------------------------------------------------------------------ change

    @contextmanager
    def transaction(
        self,
        conn: Connection,
        lines: list[str],
        confirm_timeout_s: int,
        name: str | None = None,
    ) -> Iterator[Transaction]:
        txn = Transaction(name=name or self.session_name(), lines=lines)
        netmiko = conn.netmiko
        pattern = conn.prompt_pattern
        netmiko.send_command(f"configure session {txn.name}", expect_string=pattern)
        try:
            conn.send_lines([line.strip() for line in lines], read_timeout=30)
            kill_point("in-session", conn.device)
            timer = time.strftime("%H:%M:%S", time.gmtime(confirm_timeout_s))
            output = netmiko.send_command(f"commit timer {timer}", expect_string=pattern)
            refusal = conn.refusal(output)
            if refusal:
                raise PlatformError(f"{conn.device}: commit refused: {refusal}")
            txn.committed = True
        except BaseException:
            # Not committed as far as we know: dropping the session leaves the running config
            # untouched. The answer is not trusted (the reply to ``commit timer`` may be what
            # got lost): the caller re-reads the switch on a fresh connection.
            try:
                netmiko.send_command("abort", expect_string=pattern)
            except Exception as exc:
                txn.notes.append(f"abort got no good answer: {exc.__class__.__name__}")
            raise
        try:
            yield txn
        finally:
            if not txn.confirmed:
                # Roll back now rather than wait for the timer.
                netmiko.send_command(f"configure session {txn.name} abort", expect_string=pattern)
                txn.rolled_back = True

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
        return self.sessions_from_json(conn.device, self._json(conn, self.SESSIONS_COMMAND))

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
        self._session_command(conn, f"configure session {session.name} abort", session)

    def confirm_session(self, conn: Connection, session: PendingSession) -> None:
        self._session_command(conn, f"configure session {session.name} commit", session)
        self.save(conn)

    @staticmethod
    def _session_command(conn: Connection, command: str, session: PendingSession) -> None:
        output = conn.netmiko.send_command(command, expect_string=conn.prompt_pattern)
        refusal = conn.refusal(output)
        if refusal:
            raise PlatformError(f"{conn.device}: {command!r} failed: {refusal}")

    def confirm(self, conn: Connection, txn: Transaction) -> None:
        netmiko = conn.netmiko
        output = netmiko.send_command(
            f"configure session {txn.name} commit", expect_string=conn.prompt_pattern
        )
        refusal = conn.refusal(output)
        if refusal:
            raise PlatformError(f"{conn.device}: confirming session {txn.name} failed: {refusal}")
        txn.confirmed = True
        # A session commit changes the running config only: without the save, a reload brings
        # back the old QoS and the fabric is silently lossy again.
        kill_point("before-save", conn.device)
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
        output = conn.netmiko.send_command(
            "copy running-config startup-config", expect_string=conn.prompt_pattern
        )
        refusal = conn.refusal(output)
        if refusal:
            raise PlatformError(f"{conn.device}: saving the configuration failed: {refusal}")

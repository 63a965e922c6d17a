"""Cisco NX-OS (Nexus 9000): MQC policies as in Cisco's RoCEv2 designs, checkpoint/rollback.

netmiko ``cisco_nxos``. Render (Cisco "Nexus 9000 Series NX-OS Quality of Service
Configuration Guide" — "Configuring Classification", "Configuring Queuing and Scheduling",
"Configuring Network QoS", "Configuring Priority Flow Control" — and the "Cisco Data Center
Networking Blueprint for AI/ML Applications"):

- ``class-map type qos match-any ROCE_PRIO<P>`` with ``match dscp D,…`` per non-default
  priority and ``policy-map type qos ROCE_CLASSIFY`` with ``set qos-group P`` per class and
  ``class class-default`` → ``set qos-group 0`` (every other DSCP to priority 0);
- ``policy-map type network-qos ROCE_NETWORK_QOS``: ``class type network-qos c-8q-nq<P>`` with
  ``pause pfc-cos P`` for each lossless priority and ``mtu 9216`` on every class (system
  classes carry jumbo frames; the port MTU is set elsewhere);
- ``policy-map type queuing ROCE_QUEUING_OUT``: ``class type queuing c-out-8q-q<Q>`` (queue 0 is
  ``c-out-8q-q-default``) with ``priority level 1`` (strict), ``bandwidth remaining percent W``
  (0 for queues the plan gives no share) and ``random-detect minimum-threshold N bytes
  maximum-threshold N bytes drop-probability P weight 0 ecn`` (thresholds in bytes, so no
  kbytes ambiguity);
- ``system qos`` → ``service-policy type network-qos ROCE_NETWORK_QOS`` and
  ``service-policy type queuing output ROCE_QUEUING_OUT``;
- global ``priority-flow-control watch-dog-interval on``, ``priority-flow-control watch-dog
  interval MS``, ``… watch-dog shutdown-multiplier N`` (detection = interval × N) and
  ``priority-flow-control auto-restore multiplier N`` (restoration = interval × N); the watchdog
  always drops, so ``forward``/``alert`` are refused;
- per interface ``service-policy type qos input ROCE_CLASSIFY``, ``priority-flow-control mode
  on``, ``priority-flow-control watch-dog-interval on``.

Policies are switch-wide, so a plan whose ports need different ECN or scheduling is refused.

Transaction (NX-OS "Configuring Rollback"): ``checkpoint NAME`` → ``configure terminal`` +
lines + ``end`` → the caller verifies → confirm = ``copy running-config startup-config`` and
``no checkpoint NAME``; rollback = ``rollback running-config checkpoint NAME`` (then the
checkpoint is deleted). NX-OS has no commit timer in this flow: if the agent dies between
apply and confirm the change stays live (not saved to startup) until someone rolls it back.

read_state parses ``show running-config`` text (class-maps, policy-maps, ``system qos``,
watchdog lines and interface sections; defaults where a line is absent: watch-dog interval
100 ms, shutdown-multiplier 1, auto-restore multiplier 10). read_counters parses
``show interface priority-flow-control``, ``show queuing interface`` and ``show queuing
pfc-queue detail`` text, in the formats recorded in open-telemetry/opentelemetry-collector-
contrib ``receiver/ciscoosreceiver/internal/scraper/interfacesscraper/parser_test.go``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent.device.platforms._common import majority, natural_key, watchdog_multiples
from agent.device.platforms.base import (
    CheckpointPlatform,
    ConfigRejected,
    Connection,
    PlatformError,
    Transaction,
    kill_point,
)
from agent.device.state import (
    DSCPS,
    PRIORITIES,
    Counters,
    EcnState,
    InterfaceCounters,
    InterfaceState,
    PendingSession,
    QosState,
    QueueCounters,
    QueueState,
    WatchdogCounters,
    WatchdogState,
)
from agent.intent.plan import DevicePlan

CLASSIFY = "ROCE_CLASSIFY"
NETWORK_QOS = "ROCE_NETWORK_QOS"
QUEUING = "ROCE_QUEUING_OUT"
SYSTEM_CLASS_MTU = 9216
# NX-OS defaults when the running config omits the line (show queuing pfc-queue detail).
DEFAULT_WD_INTERVAL_MS = 100
DEFAULT_WD_SHUTDOWN_MULTIPLIER = 1
DEFAULT_WD_RESTORE_MULTIPLIER = 10
UNITS = {"bytes": 1, "kbytes": 1024, "mbytes": 1024 * 1024}
RED_RE = re.compile(
    r"random-detect minimum-threshold (\d+) (\w+) maximum-threshold (\d+) (\w+)"
    r"(?: drop-probability (\d+))?(?: weight (\d+))?(?P<ecn> ecn)?"
)


def queuing_class(queue: int) -> str:
    return "c-out-8q-q-default" if queue == 0 else f"c-out-8q-q{queue}"


def network_class(priority: int) -> str:
    return "c-8q-nq-default" if priority == 0 else f"c-8q-nq{priority}"


@dataclass
class _Section:
    """One top-level block of the running config: its line and its indented children."""

    line: str
    children: list[str] = field(default_factory=list)


def sections(config: str) -> list[_Section]:
    result: list[_Section] = []
    for raw in config.splitlines():
        if not raw.strip() or raw.lstrip().startswith("!"):
            continue
        if raw[0] != " ":
            result.append(_Section(raw.strip()))
        elif result:
            result[-1].children.append(raw.rstrip())
    return result


def class_blocks(children: list[str]) -> dict[str, list[str]]:
    """``class [type …] NAME`` blocks of a policy-map: name → its (stripped) lines."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for child in children:
        text = child.strip()
        if m := re.fullmatch(r"class (?:type \S+ )?(\S+)", text):
            current = blocks.setdefault(m.group(1), [])
        elif current is not None:
            current.append(text)
    return blocks


class CiscoNxos(CheckpointPlatform):
    name: ClassVar[str] = "cisco_nxos"
    netmiko_device_type: ClassVar[str] = "cisco_nxos"
    managed: ClassVar[frozenset[str]] = frozenset(
        {"trust", "dscp_to_priority", "watchdog", "pfc_enabled", "pfc_priorities", "queue"}
    )

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        return self.render_changes(self.desired(device), None)

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """Configuration lines for the sections that differ (all of them when ``actual`` is
        None). MQC policies are replaced as a whole: a partial edit of a policy-map in use is
        harder to review than its full text."""
        interfaces = list(desired.interfaces.values())
        queues = _uniform([i.queues for i in interfaces], "queue settings", {})
        lossless = _uniform([i.pfc_priorities for i in interfaces], "PFC priorities", ())
        lines: list[str] = []
        classifier = actual is None or (
            actual.trust != desired.trust or actual.dscp_to_priority != desired.dscp_to_priority
        )
        if classifier:
            lines += self._classification(desired)
        have_pfc = (
            {(i.pfc_enabled, i.pfc_priorities) for i in actual.interfaces.values()}
            if actual
            else set()
        )
        pfc_changed = actual is None or have_pfc != {(bool(lossless), tuple(lossless))}
        if pfc_changed:
            lines += self._network_qos(list(lossless))
        have_queues = None
        if actual is not None and actual.interfaces:
            have_queues = next(iter(actual.interfaces.values())).queues
        if have_queues != queues:
            lines += self._queuing(queues)
        if classifier or pfc_changed or have_queues != queues:
            lines += [
                "system qos",
                f"  service-policy type network-qos {NETWORK_QOS}",
                f"  service-policy type queuing output {QUEUING}",
            ]
        watchdog_changed = actual is None or actual.watchdog != desired.watchdog
        if watchdog_changed:
            lines += self._watchdog(desired.watchdog)
        for name, want in desired.interfaces.items():
            have = actual.interfaces.get(name) if actual else None
            if (
                classifier
                or have is None
                or have.pfc_enabled != want.pfc_enabled
                or (watchdog_changed)
            ):
                lines.append(f"interface {name}")
                lines.append(f"  service-policy type qos input {CLASSIFY}")
                lines.append(
                    "  priority-flow-control mode on"
                    if want.pfc_enabled
                    else "  priority-flow-control mode off"
                )
                if desired.watchdog.enabled:
                    lines.append("  priority-flow-control watch-dog-interval on")
        return lines

    @staticmethod
    def _classification(desired: QosState) -> list[str]:
        if desired.trust not in ("dscp", "pcp"):
            raise PlatformError(f"cisco_nxos: cannot render trust {desired.trust!r}")
        lines: list[str] = []
        groups: dict[int, list[int]] = {}
        if desired.trust == "dscp":
            for dscp in DSCPS:
                priority = desired.dscp_to_priority[dscp]
                if priority != 0:
                    groups.setdefault(priority, []).append(dscp)
        else:
            groups = {p: [p] for p in PRIORITIES if p}
        keyword = "dscp" if desired.trust == "dscp" else "cos"
        for priority, values in sorted(groups.items()):
            lines += [
                f"class-map type qos match-any ROCE_PRIO{priority}",
                f"  match {keyword} {','.join(map(str, values))}",
            ]
        lines.append(f"policy-map type qos {CLASSIFY}")
        for priority in sorted(groups):
            lines += [f"  class ROCE_PRIO{priority}", f"    set qos-group {priority}"]
        lines += ["  class class-default", "    set qos-group 0"]
        return lines

    @staticmethod
    def _network_qos(lossless: list[int]) -> list[str]:
        lines = [f"policy-map type network-qos {NETWORK_QOS}"]
        for priority in PRIORITIES:
            lines.append(f"  class type network-qos {network_class(priority)}")
            if priority in lossless:
                lines.append(f"    pause pfc-cos {priority}")
            lines.append(f"    mtu {SYSTEM_CLASS_MTU}")
        return lines

    @staticmethod
    def _queuing(queues: dict[int, QueueState]) -> list[str]:
        lines = [f"policy-map type queuing {QUEUING}"]
        for queue in PRIORITIES:
            state = queues.get(queue) or QueueState()
            lines.append(f"  class type queuing {queuing_class(queue)}")
            if state.strict:
                lines.append("    priority level 1")
            else:
                lines.append(f"    bandwidth remaining percent {state.bandwidth_percent or 0}")
            if state.ecn is not None:
                lines.append(
                    f"    random-detect minimum-threshold {state.ecn.min_bytes} bytes "
                    f"maximum-threshold {state.ecn.max_bytes} bytes "
                    f"drop-probability {state.ecn.max_probability} weight 0 ecn"
                )
        return lines

    @staticmethod
    def _watchdog(watchdog: WatchdogState) -> list[str]:
        if not watchdog.enabled:
            return ["no priority-flow-control watch-dog-interval on"]
        if watchdog.action not in (None, "drop"):
            raise PlatformError(
                f"cisco_nxos: PFC watchdog action {watchdog.action!r} is not available; "
                "the NX-OS watchdog drops the stuck queue"
            )
        interval, shutdown, restore = watchdog_multiples(watchdog, "cisco_nxos")
        if not 100 <= interval <= 1000:
            raise PlatformError(
                f"cisco_nxos: watchdog polling_ms {interval} outside NX-OS's 100-1000 ms"
            )
        return [
            "priority-flow-control watch-dog-interval on",
            f"priority-flow-control watch-dog interval {interval}",
            f"priority-flow-control watch-dog shutdown-multiplier {shutdown}",
            f"priority-flow-control auto-restore multiplier {restore}",
        ]

    # ------------------------------------------------------------------ read state

    def read_state(self, conn: Connection) -> QosState:
        return self.state_from_running_config(conn.show("show running-config"))

    @staticmethod
    def state_from_running_config(config: str) -> QosState:
        blocks = sections(config)
        class_maps: dict[str, tuple[str, list[int]]] = {}
        policies: dict[tuple[str, str], dict[str, list[str]]] = {}
        system: dict[str, str] = {}
        interfaces: dict[str, list[str]] = {}
        globals_: list[str] = []
        for block in blocks:
            if m := re.fullmatch(r"class-map type qos (?:match-any |match-all )?(\S+)", block.line):
                kind, values = "dscp", []
                for child in block.children:
                    if mm := re.fullmatch(r"match (dscp|cos) ([\d,\- ]+)", child.strip()):
                        kind = mm.group(1)
                        values += _expand(mm.group(2))
                class_maps[m.group(1)] = (kind, values)
            elif m := re.fullmatch(r"policy-map type (qos|network-qos|queuing) (\S+)", block.line):
                policies[(m.group(1), m.group(2))] = class_blocks(block.children)
            elif block.line == "system qos":
                for child in block.children:
                    if mm := re.fullmatch(
                        r"service-policy type (network-qos|queuing output|qos input) (\S+)",
                        child.strip(),
                    ):
                        system[mm.group(1)] = mm.group(2)
            elif m := re.fullmatch(r"interface (\S+)", block.line):
                interfaces[m.group(1)] = [c.strip() for c in block.children]
            else:
                globals_.append(block.line)

        def policy_for(lines: list[str], kind: str) -> str | None:
            for line in lines:
                if m := re.fullmatch(rf"service-policy type {kind} (\S+)", line):
                    return m.group(1)
            return None

        # The classifier most fabric ports use stands for the device (the model is device-wide).
        classifier = majority(
            p for lines in interfaces.values() if (p := policy_for(lines, "qos input"))
        ) or system.get("qos input")
        dscp_map = dict.fromkeys(DSCPS, 0)
        trust = "none"
        if classifier and ("qos", classifier) in policies:
            trust = "dscp"
            default_group = 0
            assigned: set[int] = set()
            for class_name, lines in policies[("qos", classifier)].items():
                group = next(
                    (
                        int(m.group(1))
                        for x in lines
                        if (m := re.fullmatch(r"set qos-group (\d)", x))
                    ),
                    None,
                )
                if class_name == "class-default":
                    default_group = group or 0
                    continue
                kind, values = class_maps.get(class_name, ("dscp", []))
                if kind == "cos":
                    trust = "pcp"
                    continue
                for dscp in values:
                    if dscp not in assigned and group is not None:
                        dscp_map[dscp] = group  # first matching class wins, as in hardware
                        assigned.add(dscp)
            for dscp in DSCPS:
                if dscp not in assigned:
                    dscp_map[dscp] = default_group

        no_drop: list[int] = []
        for lines in policies.get(("network-qos", system.get("network-qos", "")), {}).values():
            for line in lines:
                if m := re.fullmatch(r"pause (?:buffer-size \d+ .*)?pfc-cos ([\d,]+)", line):
                    no_drop += _expand(m.group(1))
        lossless = tuple(sorted(set(no_drop)))

        def queue_states(policy: str | None) -> dict[int, QueueState]:
            states: dict[int, QueueState] = {}
            for class_name, lines in policies.get(("queuing", policy or ""), {}).items():
                m = re.fullmatch(r"c-out-8q-q(\d|-default)", class_name)
                if m is None:
                    continue
                queue = 0 if m.group(1) == "-default" else int(m.group(1))
                strict = any(re.fullmatch(r"priority(?: level \d)?", x) for x in lines)
                weight = next(
                    (
                        int(mm.group(1))
                        for x in lines
                        if (mm := re.fullmatch(r"bandwidth remaining percent (\d+)", x))
                    ),
                    None,
                )
                ecn = None
                for x in lines:
                    if (red := RED_RE.fullmatch(x)) and red.group("ecn"):
                        low, low_unit, high, high_unit, probability, _ = red.groups()[:6]
                        ecn = EcnState(
                            min_bytes=int(low) * UNITS.get(low_unit, 1),
                            max_bytes=int(high) * UNITS.get(high_unit, 1),
                            max_probability=int(probability or 100),
                        )
                state = QueueState(
                    ecn=ecn, strict=strict, bandwidth_percent=None if strict else (weight or None)
                )
                if state != QueueState():
                    states[queue] = state
            return states

        system_queues = queue_states(system.get("queuing output"))
        result: dict[str, InterfaceState] = {}
        for name, lines in sorted(interfaces.items(), key=lambda item: natural_key(item[0])):
            if not name.lower().startswith("ethernet"):
                continue
            pfc_on = "priority-flow-control mode on" in lines
            own_queuing = policy_for(lines, "queuing output")
            result[name] = InterfaceState(
                pfc_enabled=pfc_on,
                pfc_priorities=lossless if pfc_on else (),
                queues=queue_states(own_queuing) if own_queuing else system_queues,
            )

        watchdog = WatchdogState()
        if "priority-flow-control watch-dog-interval on" in globals_:
            timers = {
                "interval": DEFAULT_WD_INTERVAL_MS,
                "shutdown": DEFAULT_WD_SHUTDOWN_MULTIPLIER,
                "restore": DEFAULT_WD_RESTORE_MULTIPLIER,
            }
            for line in globals_:
                if m := re.fullmatch(r"priority-flow-control watch-dog interval (\d+)", line):
                    timers["interval"] = int(m.group(1))
                elif m := re.fullmatch(
                    r"priority-flow-control watch-dog shutdown-multiplier (\d+)", line
                ):
                    timers["shutdown"] = int(m.group(1))
                elif m := re.fullmatch(
                    r"priority-flow-control auto-restore multiplier (\d+)", line
                ):
                    timers["restore"] = int(m.group(1))
            watchdog = WatchdogState(
                enabled=True,
                detection_ms=timers["interval"] * timers["shutdown"],
                restoration_ms=timers["interval"] * timers["restore"],
                polling_ms=timers["interval"],
                action="drop",
            )
        return QosState(
            trust=trust, dscp_to_priority=dscp_map, watchdog=watchdog, interfaces=result
        )

    # ------------------------------------------------------------------ counters

    COUNTER_COMMANDS: ClassVar[dict[str, str]] = {
        "pfc": "show interface priority-flow-control",
        "queuing": "show queuing interface",
        "watchdog": "show queuing pfc-queue detail",
    }

    @staticmethod
    def counters_from_text(device: str, collected_at: float, outputs: dict[str, str]) -> Counters:
        """Normalize the recorded outputs of :attr:`COUNTER_COMMANDS` (keyed alike).

        Per-priority pause counts come from the ``PFC Statistics`` table of ``show queuing
        interface`` (COS = priority); ``show interface priority-flow-control`` only has totals
        and names the interfaces.
        """
        data: dict[str, dict[str, Any]] = {}

        def entry(name: str) -> dict[str, Any]:
            return data.setdefault(
                name, {"rx": [0] * 8, "tx": [0] * 8, "queues": {}, "watchdog": {}}
            )

        for line in outputs.get("pfc", "").splitlines():
            if m := re.match(r"(Ethernet\S+)\s+", line):
                entry(m.group(1))
        current: str | None = None
        group: int | None = None
        for line in outputs.get("queuing", "").splitlines():
            if m := re.match(r"(?:Egress|Ingress) Queuing for (\S+)", line):
                current, group = m.group(1), None
                entry(current)
                continue
            if current is None:
                continue
            if m := re.search(r"QOS GROUP (\d)\b", line):
                group = int(m.group(1))
                continue
            if m := re.match(r"\s*(\d)\s+(\S+)\s+(\S+)\s+\S+\s+(\d+)\s+\S+\s+(\d+)\s*$", line):
                cos = int(m.group(1))
                entry(current)["tx"][cos] = int(m.group(4))
                entry(current)["rx"][cos] = int(m.group(5))
                continue
            if group is None:
                continue
            queue = entry(current)["queues"].setdefault(group, {})
            # Rows are "| <stat> | <unicast> | [<oobfc unicast> | <multicast> |]", and on
            # some platforms two stats share a row; sum unicast + oobfc + multicast per stat.
            for stat, values in re.findall(
                r"\|\s*([A-Za-z][\w /&]*?)\s*((?:\|\s*\d+\s*)+)(?=\|)", line
            ):
                total = sum(int(v) for v in re.findall(r"\d+", values))
                key = {
                    "Tx Pkts": "tx_packets",
                    "Tx Byts": "tx_bytes",
                    "Dropped Pkts": "dropped_packets",
                    "WRED/AFD & Tail Drop Pkts": "dropped_packets",
                    "ECN Marked Pkts": "ecn_marked_packets",
                }.get(stat.strip())
                if key:
                    queue[key] = total
        current = None
        group = None
        for line in outputs.get("watchdog", "").splitlines():
            if m := re.match(r"(\S+) Interface PFC watchdog", line):
                current = m.group(1)
                entry(current)
                continue
            if current is None:
                continue
            if m := re.search(r"QOS GROUP (\d) \[(\w+)\]", line):
                group = int(m.group(1))
                entry(current)["watchdog"][group] = {"state": m.group(2)}
            elif group is not None and (
                m := re.match(r"\|\s*(Shutdown|Restored)\|\s*(\d+)\|", line)
            ):
                entry(current)["watchdog"][group][m.group(1)] = int(m.group(2))
        interfaces = {}
        for name in sorted(data, key=natural_key):
            values = data[name]
            interfaces[name] = InterfaceCounters(
                pfc_rx=tuple(values["rx"]),
                pfc_tx=tuple(values["tx"]),
                queues={q: QueueCounters(**c) for q, c in sorted(values["queues"].items())},
                watchdog={
                    q: WatchdogCounters(
                        storms_detected=w.get("Shutdown", 0),
                        storms_restored=w.get("Restored", 0),
                        stormed=w.get("state") == "Shutdown",
                    )
                    for q, w in sorted(values["watchdog"].items())
                },
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
        # confirm_timeout_s is not enforced by the switch: the checkpoint flow has no timer.
        txn = Transaction(name=name or self.session_name(), lines=lines)
        output = conn.show(f"checkpoint {txn.name}")
        if conn.refusal(output) or "error" in output.lower():
            raise ConfigRejected(f"{conn.device}: checkpoint {txn.name} failed: {output.strip()}")
        try:
            conn.send_lines(["configure terminal"])
            try:
                conn.send_lines(lines)
                kill_point("in-session", conn.device)
            finally:
                conn.send_lines(["end"])
            txn.committed = True
        except BaseException:
            self.rollback_to(conn, txn)
            raise
        try:
            yield txn
        finally:
            if not txn.confirmed:
                self.rollback_to(conn, txn)

    def rollback_to(self, conn: Connection, txn: Transaction) -> None:
        output = conn.show(f"rollback running-config checkpoint {txn.name}")
        if "completed successfully" in output.lower() or not (
            conn.refusal(output) or "error" in output.lower()
        ):
            txn.rolled_back = True
        else:
            txn.notes.append(f"rollback to checkpoint {txn.name} failed: {output.strip()[:200]}")
        conn.send_lines(["configure terminal", f"no checkpoint {txn.name}", "end"])

    # ------------------------------------------------------------------ pending checkpoints

    # NX-OS has no commit timer: a ``roce-agent-*`` checkpoint that still exists is a run that
    # never reached its confirm or rollback (both delete it), so its change may be live and
    # nothing will undo it by itself. ``show checkpoint summary`` lists user checkpoints as
    # ``N) NAME:`` / ``Created by USER`` / ``Created at Mon, 10:15:00 23 Nov 2026`` (Cisco
    # Nexus 9000 "Configuration Rollback" guide, show checkpoint summary).
    CHECKPOINTS_COMMAND: ClassVar[str] = "show checkpoint summary user"

    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        return self.sessions_from_text(conn.device, conn.show(self.CHECKPOINTS_COMMAND))

    @classmethod
    def sessions_from_text(
        cls, device: str, text: str, now: float | None = None
    ) -> list[PendingSession]:
        found = []
        for match in re.finditer(
            r"^\s*\d+\)\s+(\S+?):\s*$(?P<body>(?:\n(?!\s*\d+\)).*)*)", text, re.M
        ):
            name, body = match.group(1), match.group("body")
            if not name.startswith("roce-agent-"):
                continue  # other checkpoints are snapshots, not unfinished changes
            user = re.search(r"Created by (\S+)", body)
            found.append(
                PendingSession(
                    device=device,
                    name=name,
                    kind="NX-OS checkpoint",
                    state="checkpoint",
                    user=user.group(1) if user else None,
                    age_s=cls.age_from_name(name, now),
                    rollback_in_s=None,
                    live=True,
                    rolls_back=False,  # NX-OS has no commit timer
                )
            )
        return found

    def confirm(self, conn: Connection, txn: Transaction) -> None:
        self.save(conn)  # NX-OS has no commit timer: confirming is saving
        txn.confirmed = True
        conn.send_lines(["configure terminal", f"no checkpoint {txn.name}", "end"])

    def save(self, conn: Connection) -> None:
        output = conn.show("copy running-config startup-config")
        if conn.refusal(output):
            raise PlatformError(f"{conn.device}: saving the configuration failed: {output}")


def _uniform(values: list[Any], what: str, empty: Any) -> Any:
    if not values:
        return empty
    if any(value != values[0] for value in values[1:]):
        raise PlatformError(
            f"cisco_nxos: ports need different {what}; this renderer configures switch-wide "
            "MQC policies (set explicit thresholds in the profile)"
        )
    return values[0]


def _expand(text: str) -> list[int]:
    values: list[int] = []
    for part in text.replace(" ", "").split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            values.extend(range(int(low), int(high or low) + 1))
    return values

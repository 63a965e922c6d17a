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

Transaction (Cisco Nexus 9000 NX-OS System Management Configuration Guide, "Configuring the
Rollback Feature" and "Performing Configuration Replace"): ``checkpoint NAME`` -> the running
configuration (``show running-config``) with the lines put in it (:mod:`._nxos_candidate`),
copied to ``bootflash:NAME.cfg`` over SCP and checked by MD5 -> ``configure replace
bootflash:NAME.cfg commit-timeout T`` (all or nothing; T = the confirm timeout, 30-3600 s) ->
the caller verifies -> confirm = ``configure replace commit ; no checkpoint NAME`` -> save
(``copy running-config startup-config``) -> the file deleted. Without the confirm NX-OS puts
the previous configuration back when T runs out; the agent's own rollback does not wait:
``rollback running-config checkpoint NAME`` then ``configure replace commit`` (the timer
stopped on what the rollback left). Until issue #46 the driver sent the lines with
``configure terminal`` after a checkpoint: live line by line (a lost connection left half a
change) and nothing on the switch undid a change whose agent died; the documents' configure
replace with commit-timeout does both.

read_state parses ``show running-config`` text (class-maps, policy-maps, ``system qos``,
watchdog lines and interface sections; defaults where a line is absent: watch-dog interval
100 ms, shutdown-multiplier 1, auto-restore multiplier 10). read_counters parses
``show interface priority-flow-control``, ``show queuing interface`` and ``show queuing
pfc-queue detail`` text, in the formats recorded in open-telemetry/opentelemetry-collector-
contrib ``receiver/ciscoosreceiver/internal/scraper/interfacesscraper/parser_test.go``.
NX-OS counts a port's ingress drops (``Ingress MMU Drop Pkts``) per port, not per priority:
they are booked as headroom drops of the port's lowest no-drop COS (see
:func:`_book_ingress_drops`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent.device.platforms._common import (
    CounterTally,
    SwitchWide,
    classifier_differs,
    expand_ranges,
    majority,
    natural_key,
    show_json,
    watchdog_multiples,
)
from agent.device.platforms._nxos_candidate import candidate_config
from agent.device.platforms._trim import not_trimming, with_trim_unread
from agent.device.platforms.base import (
    CheckpointPlatform,
    ConfigRejected,
    Connection,
    PlatformError,
    Transaction,
)
from agent.device.state import (
    DSCPS,
    PRIORITIES,
    Counters,
    EcnState,
    InterfaceState,
    LinkHealth,
    PendingSession,
    QosState,
    QueueState,
    WatchdogCounters,
    WatchdogState,
    diff,
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
# configure replace's commit-timeout range ("Performing Configuration Replace"); the agent's
# --confirm-timeout below 30 s becomes 30 s on NX-OS.
COMMIT_TIMEOUT_S = (30, 3600)
REPLACE_DONE = "Configure replace completed successfully"
ROLLBACK_DONE = "Rollback completed successfully"
REPLACE_READ_TIMEOUT_S = 60.0  # a replace or rollback computes and applies a whole patch
SAVE_READ_TIMEOUT_S = 100.0  # netmiko's own NX-OS save_config waits this long
SCP_TIMEOUT_S = 30.0
SYSTEM_QOS = [
    "system qos",
    f"  service-policy type network-qos {NETWORK_QOS}",
    f"  service-policy type queuing output {QUEUING}",
]
POLICIES = SwitchWide("cisco_nxos", "switch-wide MQC policies")
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

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        return self.render_changes(self.desired(device), None)

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """Configuration lines for the sections that differ (all of them when ``actual`` is
        None). MQC policies are replaced as a whole: a partial edit of a policy-map in use is
        harder to review than its full text."""
        interfaces = list(desired.interfaces.values())
        queues = POLICIES.uniform([i.queues for i in interfaces], "queue settings", {})
        lossless = POLICIES.uniform([i.pfc_priorities for i in interfaces], "PFC priorities", ())
        classifier = classifier_differs(desired, actual)
        pfc_changed = _pfc_differs(desired, lossless, actual)
        present = POLICIES.as_read(actual)
        queues_changed = (None if present is None else present.queues) != queues
        watchdog_changed = actual is None or actual.watchdog != desired.watchdog
        lines: list[str] = []
        if classifier:
            lines += self._classification(desired)
        if pfc_changed:
            lines += self._network_qos(list(lossless))
        if queues_changed:
            lines += self._queuing(queues)
        if classifier or pfc_changed or queues_changed:
            lines += SYSTEM_QOS
        if watchdog_changed:
            lines += self._watchdog(desired.watchdog)
        return lines + _interface_lines(desired, actual, every_port=classifier or watchdog_changed)

    @staticmethod
    def _classification(desired: QosState) -> list[str]:
        if desired.trust == "none":
            return []  # no classification policy: everything in qos-group 0 (the ports say so)
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
        running = _RunningConfig.parse(config)
        trust, dscp_map = running.classification()
        lossless = running.lossless()
        system_queues = running.queue_states(running.system.get("queuing output"))
        interfaces: dict[str, InterfaceState] = {}
        for name, lines in sorted(running.interfaces.items(), key=lambda i: natural_key(i[0])):
            if not name.lower().startswith("ethernet"):
                continue
            # "priority-flow-control mode on send-tlv" is on too (it also advertises PFC in LLDP)
            pfc_on = any(re.fullmatch(r"priority-flow-control mode on(?: \S+)*", x) for x in lines)
            own_queuing = _policy_for(lines, "queuing output")
            interfaces[name] = InterfaceState(
                pfc_enabled=pfc_on,
                pfc_priorities=lossless if pfc_on else (),
                queues=running.queue_states(own_queuing) if own_queuing else system_queues,
            )
        return QosState(
            trust=trust,
            dscp_to_priority=dscp_map,
            watchdog=_watchdog_from(running.global_lines),
            interfaces=interfaces,
        )

    # ------------------------------------------------------------------ counters

    COUNTER_COMMANDS: ClassVar[dict[str, str]] = {
        "pfc": "show interface priority-flow-control",
        "queuing": "show queuing interface",
        "watchdog": "show queuing pfc-queue detail",
    }

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        return with_trim_unread(super().read_counters(conn, state), not_trimming(self.name))

    @staticmethod
    def counters_from_text(device: str, collected_at: float, outputs: dict[str, str]) -> Counters:
        """Normalize the recorded outputs of :attr:`COUNTER_COMMANDS` (keyed alike).

        Per-priority pause counts come from the ``PFC Statistics`` table of ``show queuing
        interface`` (COS = priority); ``show interface priority-flow-control`` only has totals
        and names the interfaces.
        """
        found = CounterTally()
        for key, read in COUNTER_READERS.items():
            read(found, outputs.get(key, ""))
        return found.counters(device, collected_at)

    # ------------------------------------------------------------------ link health

    def read_link_health(self, conn: Connection) -> dict[str, LinkHealth]:
        return self.link_health_from_json(show_json(conn, "show interface | json"))

    @staticmethod
    def link_health_from_json(data: dict[str, Any]) -> dict[str, LinkHealth]:
        """``show interface | json``: ``TABLE_interface.ROW_interface[]`` with ``state``
        (``up`` / ``down``), ``eth_crc`` (FCS errors), ``eth_inerr``, ``eth_outerr`` -- the
        NX-API keys napalm's nxos driver and public Nexus collectors read (numbers or strings)."""
        table = data.get("TABLE_interface", {}) if isinstance(data, dict) else {}
        rows = table.get("ROW_interface", []) if isinstance(table, dict) else []
        health = {}
        for row in rows if isinstance(rows, list) else [rows]:
            name = str(row.get("interface", ""))
            if not name.startswith("Ethernet"):
                continue
            state = row.get("state")
            health[name] = LinkHealth(
                up=None if state is None else str(state) in ("up", "eth-up"),
                fcs_errors=_count(row, "eth_crc"),
                in_errors=_count(row, "eth_inerr"),
                out_errors=_count(row, "eth_outerr"),
            )
        return health

    # ------------------------------------------------------------------ change (the base's flow)

    # NX-OS' commit timer is configure replace's (Cisco Nexus 9000 NX-OS System Management
    # Configuration Guide, "Performing Configuration Replace"): the whole running configuration
    # with the change in it goes to bootflash: over SCP and replaces the running one at once
    # (all or nothing); unless ``configure replace commit`` comes within the commit-timeout,
    # NX-OS puts the previous configuration back by itself. A checkpoint taken first is the way
    # back before that ("Configuring the Rollback Feature"): the agent's rollback does not wait
    # for the timer.

    def begin(self, conn: Connection, txn: Transaction) -> None:
        output = conn.show(f"checkpoint {txn.name}")
        if conn.refusal(output) or "error" in output.lower():
            raise ConfigRejected(f"{conn.device}: checkpoint {txn.name} failed: {output.strip()}")

    def stage(self, conn: Connection, txn: Transaction) -> None:
        """The running configuration with ``txn.lines`` in it, on bootflash: (checked by MD5)."""
        candidate = candidate_config(conn.show("show running-config"), txn.lines)
        upload(conn, candidate_file(txn.name), candidate)

    def commit(self, conn: Connection, txn: Transaction, confirm_timeout_s: int) -> None:
        seconds = min(max(confirm_timeout_s, COMMIT_TIMEOUT_S[0]), COMMIT_TIMEOUT_S[1])
        command = f"configure replace bootflash:{candidate_file(txn.name)} commit-timeout {seconds}"
        output = conn.show(command, read_timeout=REPLACE_READ_TIMEOUT_S)
        if REPLACE_DONE not in output:
            why = conn.refusal(output) or output.strip()[-300:]
            raise ConfigRejected(f"{conn.device}: {command!r} failed: {why}")

    def abort(self, conn: Connection, txn: Transaction) -> None:
        """A failed step: roll back when the replace may have run (the running configuration is
        no longer the checkpoint's), else only remove the checkpoint and the file."""
        session = self._session(conn, txn.name)
        if session is not None and session.live:
            self.rollback(conn, txn)
        else:
            txn.rolled_back = True  # nothing was replaced
            self.clean_up(conn, txn)

    def rollback(self, conn: Connection, txn: Transaction) -> None:
        output = conn.show(
            f"rollback running-config checkpoint {txn.name}", read_timeout=REPLACE_READ_TIMEOUT_S
        )
        if ROLLBACK_DONE in output:
            txn.rolled_back = True
            # Stops the commit timer: what runs now is the checkpoint's configuration, and the
            # timer must not put anything back later.
            conn.show("configure replace commit")
        else:
            txn.notes.append(f"rollback to checkpoint {txn.name} failed: {output.strip()[:200]}")
        self.clean_up(conn, txn)

    def confirm_change(self, conn: Connection, txn: Transaction) -> None:
        # One line, so that the switch runs both even when the reply is lost: once the timer
        # is stopped no checkpoint of the change is left to roll back to.
        output = conn.show(f"configure replace commit ; no checkpoint {txn.name}")
        refusal = conn.refusal(output)
        if refusal:
            raise PlatformError(f"{conn.device}: configure replace commit failed: {refusal}")

    def clean_up(self, conn: Connection, txn: Transaction) -> None:
        conn.show(f"delete bootflash:{candidate_file(txn.name)} no-prompt")
        if not txn.confirmed:
            conn.show(f"no checkpoint {txn.name}")

    # ------------------------------------------------------------------ pending changes

    # A ``roce-agent-*`` checkpoint is a change not final yet (confirming deletes it). Its
    # change is live when the running configuration's QoS is no longer the checkpoint's: then
    # configure replace's commit timer runs (NX-OS rolls it back by itself, time not shown
    # here). Otherwise nothing of it runs -- the replace never came, or its timer already put
    # the old configuration back -- and only the checkpoint and the file are left.
    # ``show checkpoint summary`` lists user checkpoints as ``N) NAME:`` / ``Created by USER``
    # / ``Created at ...`` (Cisco's "Configuring the Rollback Feature" example).
    CHECKPOINTS_COMMAND: ClassVar[str] = "show checkpoint summary user"

    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        found = self.sessions_from_text(conn.device, conn.show(self.CHECKPOINTS_COMMAND))
        if not found:
            return []
        running = self.state_from_running_config(conn.show("show running-config"))
        return [self._with_liveness(conn, session, running) for session in found]

    def _with_liveness(
        self, conn: Connection, session: PendingSession, running: QosState
    ) -> PendingSession:
        saved = self.state_from_running_config(conn.show(f"show checkpoint {session.name}"))
        live = bool(diff(conn.device, saved, running, self.managed))
        state = "configure replace commit timer running" if live else "nothing of it runs"
        return dataclasses.replace(session, live=live, state=state)

    def _session(self, conn: Connection, name: str) -> PendingSession | None:
        return next((s for s in self.read_sessions(conn) if s.name == name), None)

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
                    live=True,  # until the running configuration says otherwise
                    rolls_back=True,  # configure replace's commit timer
                )
            )
        return found

    def abort_session(self, conn: Connection, session: PendingSession) -> None:
        txn = Transaction(name=session.name, lines=[])
        if not session.live:
            self.clean_up(conn, txn)
            return
        self.rollback(conn, txn)
        if not txn.rolled_back:
            raise PlatformError(f"{conn.device}: {'; '.join(txn.notes)}")

    def save(self, conn: Connection) -> None:
        output = conn.show("copy running-config startup-config", read_timeout=SAVE_READ_TIMEOUT_S)
        if conn.refusal(output) or "Copy complete" not in output:
            raise PlatformError(f"{conn.device}: saving the configuration failed: {output}")

    def unsaved(self, conn: Connection) -> list[str] | None:
        """``show running-config diff`` (running against startup): its changed lines."""
        output = conn.show("show running-config diff")
        return [
            line
            for line in output.splitlines()
            if line[:2] in ("+ ", "- ", "! ") and not line.startswith(("***", "---"))
        ]


def _count(row: dict[str, Any], key: str) -> int:
    """An error counter of ``show interface | json`` (NX-API prints some as strings)."""
    value = row.get(key, 0)
    try:
        return int(str(value))
    except ValueError:
        raise PlatformError(
            f"show interface | json: {row.get('interface')} {key} Expected: a count "
            f"Actual: {value!r}"
        ) from None


def candidate_file(name: str) -> str:
    """The bootflash: file of a transaction's whole configuration."""
    return f"{name}.cfg"


def upload(conn: Connection, name: str, text: str) -> None:
    """``text`` to ``bootflash:NAME`` over SCP on the session's own SSH connection (NX-OS'
    ``feature scp-server``; netmiko's NX-OS file transfer does the same), then checked with
    ``show file bootflash:NAME md5sum``."""
    import scp  # type: ignore[import-untyped]

    data = text.encode()
    try:
        transport = conn.netmiko.remote_conn.get_transport()
        with scp.SCPClient(transport, socket_timeout=SCP_TIMEOUT_S) as client:
            client.putfo(io.BytesIO(data), f"bootflash:{name}")
    except (scp.SCPException, OSError, EOFError) as exc:
        raise PlatformError(
            f"{conn.device}: copying bootflash:{name} over SCP failed ({exc}); the switch "
            "needs 'feature scp-server'"
        ) from None
    got = conn.show(f"show file bootflash:{name} md5sum").strip()
    if got != hashlib.md5(data, usedforsecurity=False).hexdigest():
        raise PlatformError(f"{conn.device}: bootflash:{name} arrived damaged (md5 {got!r})")


# ---------------------------------------------------------------------- render sections


def _pfc_differs(desired: QosState, lossless: tuple[int, ...], actual: QosState | None) -> bool:
    """Whether a planned port's PFC differs from the switch-wide lossless priorities (ports the
    plan does not name are not the agent's to judge)."""
    if actual is None:
        return True
    present = {
        (port.pfc_enabled, port.pfc_priorities) if port is not None else None
        for port in (actual.interfaces.get(name) for name in desired.interfaces)
    }
    return present != {(bool(lossless), tuple(lossless))}


def _interface_lines(desired: QosState, actual: QosState | None, every_port: bool) -> list[str]:
    """Per port: the classifier, PFC on/off and the watchdog, where any of them changed."""
    lines: list[str] = []
    for name, want in desired.interfaces.items():
        have = actual.interfaces.get(name) if actual else None
        if not (every_port or have is None or have.pfc_enabled != want.pfc_enabled):
            continue
        lines.append(f"interface {name}")
        # Untrusted (trust none) is no classification policy on the port: NX-OS then puts all
        # its traffic in qos-group 0 ("Configuring Classification").
        untrusted = "no " if desired.trust == "none" else ""
        lines.append(f"  {untrusted}service-policy type qos input {CLASSIFY}")
        lines.append(f"  priority-flow-control mode {'on' if want.pfc_enabled else 'off'}")
        # A port's own watchdog line wins over the global one: a port left "on" would keep
        # its watchdog when the plan turns it off.
        off = "" if desired.watchdog.enabled else "no "
        lines.append(f"  {off}priority-flow-control watch-dog-interval on")
    return lines


# ---------------------------------------------------------------------- running-config readers


@dataclass
class _RunningConfig:
    """The QoS parts of ``show running-config``, block by block."""

    class_maps: dict[str, tuple[str, list[int]]] = field(default_factory=dict)  # (dscp|cos, values)
    policies: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)  # system qos: kind → policy
    interfaces: dict[str, list[str]] = field(default_factory=dict)
    global_lines: list[str] = field(default_factory=list)  # every other top-level line

    @classmethod
    def parse(cls, config: str) -> _RunningConfig:
        running = cls()
        for block in sections(config):
            for pattern, read in SECTION_READERS:
                if m := pattern.fullmatch(block.line):
                    read(running, m, block.children)
                    break
            else:
                running.global_lines.append(block.line)
        return running

    def classifier(self) -> str | None:
        """The qos input policy most fabric ports use (the model is device-wide), else the
        system one."""
        return majority(
            p for lines in self.interfaces.values() if (p := _policy_for(lines, "qos input"))
        ) or self.system.get("qos input")

    def classification(self) -> tuple[str, dict[int, int]]:
        """(trust, DSCP map) from the classifier's classes, in order: the first class that
        matches a DSCP wins, as in hardware; class-default takes the rest."""
        dscp_map = dict.fromkeys(DSCPS, 0)
        classifier = self.classifier()
        if not classifier or ("qos", classifier) not in self.policies:
            return "none", dscp_map
        trust = "dscp"
        default_group = 0
        assigned: set[int] = set()
        for class_name, lines in self.policies[("qos", classifier)].items():
            group = _qos_group(lines)
            if class_name == "class-default":
                default_group = group or 0
                continue
            kind, values = self.class_maps.get(class_name, ("dscp", []))
            if kind == "cos":
                trust = "pcp"
            elif group is not None:
                for dscp in values:
                    if dscp not in assigned:
                        dscp_map[dscp] = group
                        assigned.add(dscp)
        for dscp in DSCPS:
            if dscp not in assigned:
                dscp_map[dscp] = default_group
        return trust, dscp_map

    def lossless(self) -> tuple[int, ...]:
        """The priorities the system network-qos policy pauses (``pause pfc-cos``)."""
        network_qos = self.policies.get(("network-qos", self.system.get("network-qos", "")), {})
        no_drop: list[int] = []
        for lines in network_qos.values():
            for line in lines:
                if m := re.fullmatch(r"pause (?:buffer-size \d+ .*)?pfc-cos ([\d,]+)", line):
                    no_drop += expand_ranges(m.group(1), f"{line!r}")
        return tuple(sorted(set(no_drop)))

    def queue_states(self, policy: str | None) -> dict[int, QueueState]:
        """A queuing policy's classes as queue states (queues with nothing set left out)."""
        states: dict[int, QueueState] = {}
        for class_name, lines in self.policies.get(("queuing", policy or ""), {}).items():
            m = re.fullmatch(r"c-out-8q-q(\d|-default)", class_name)
            if m is None:
                continue
            state = _queue_state(lines)
            if state != QueueState():
                states[0 if m.group(1) == "-default" else int(m.group(1))] = state
        return states


def _read_class_map(running: _RunningConfig, m: re.Match[str], children: list[str]) -> None:
    kind, values = "dscp", []
    for child in children:
        if mm := re.fullmatch(r"match (dscp|cos) ([\d,\- ]+)", child.strip()):
            kind = mm.group(1)
            values += expand_ranges(mm.group(2), f"class-map {m.group(1)} {child.strip()!r}")
    running.class_maps[m.group(1)] = (kind, values)


def _read_policy_map(running: _RunningConfig, m: re.Match[str], children: list[str]) -> None:
    running.policies[(m.group(1), m.group(2))] = class_blocks(children)


def _read_system_qos(running: _RunningConfig, m: re.Match[str], children: list[str]) -> None:
    for child in children:
        if mm := re.fullmatch(
            r"service-policy type (network-qos|queuing output|qos input) (\S+)", child.strip()
        ):
            running.system[mm.group(1)] = mm.group(2)


def _read_interface(running: _RunningConfig, m: re.Match[str], children: list[str]) -> None:
    running.interfaces[m.group(1)] = [c.strip() for c in children]


SectionReader = Callable[[_RunningConfig, re.Match[str], list[str]], None]
# Top-level lines that open a block this parser reads; any other line is kept as a global.
SECTION_READERS: tuple[tuple[re.Pattern[str], SectionReader], ...] = (
    (re.compile(r"class-map type qos (?:match-any |match-all )?(\S+)"), _read_class_map),
    (re.compile(r"policy-map type (qos|network-qos|queuing) (\S+)"), _read_policy_map),
    (re.compile(r"system qos"), _read_system_qos),
    (re.compile(r"interface (\S+)"), _read_interface),
)


def _policy_for(lines: list[str], kind: str) -> str | None:
    for line in lines:
        if m := re.fullmatch(rf"service-policy type {kind} (\S+)", line):
            return m.group(1)
    return None


def _qos_group(lines: list[str]) -> int | None:
    """A qos class's ``set qos-group N`` (the first one), if any."""
    for line in lines:
        if m := re.fullmatch(r"set qos-group (\d)", line):
            return int(m.group(1))
    return None


def _queue_state(lines: list[str]) -> QueueState:
    """One queuing class: strict priority, remaining-bandwidth share and ECN thresholds."""
    strict = any(re.fullmatch(r"priority(?: level \d)?", x) for x in lines)
    weight = next(
        (
            int(m.group(1))
            for x in lines
            if (m := re.fullmatch(r"bandwidth remaining percent (\d+)", x))
        ),
        None,
    )
    return QueueState(
        ecn=_ecn(lines), strict=strict, bandwidth_percent=None if strict else (weight or None)
    )


def _ecn(lines: list[str]) -> EcnState | None:
    """The last ``random-detect … ecn`` line's thresholds (in bytes), if any."""
    ecn = None
    for line in lines:
        if (red := RED_RE.fullmatch(line)) and red.group("ecn"):
            low, low_unit, high, high_unit, probability, _ = red.groups()[:6]
            ecn = EcnState(
                min_bytes=int(low) * UNITS.get(low_unit, 1),
                max_bytes=int(high) * UNITS.get(high_unit, 1),
                max_probability=int(probability or 100),
            )
    return ecn


# Global watchdog lines, and which timer each sets (multipliers count watchdog intervals).
WATCHDOG_TIMERS = {
    "interval": re.compile(r"priority-flow-control watch-dog interval (\d+)"),
    "shutdown": re.compile(r"priority-flow-control watch-dog shutdown-multiplier (\d+)"),
    "restore": re.compile(r"priority-flow-control auto-restore multiplier (\d+)"),
}


def _watchdog_from(global_lines: list[str]) -> WatchdogState:
    if "priority-flow-control watch-dog-interval on" not in global_lines:
        return WatchdogState()
    timers = {
        "interval": DEFAULT_WD_INTERVAL_MS,
        "shutdown": DEFAULT_WD_SHUTDOWN_MULTIPLIER,
        "restore": DEFAULT_WD_RESTORE_MULTIPLIER,
    }
    for line in global_lines:
        for timer, pattern in WATCHDOG_TIMERS.items():
            if m := pattern.fullmatch(line):
                timers[timer] = int(m.group(1))
    return WatchdogState(
        enabled=True,
        detection_ms=timers["interval"] * timers["shutdown"],
        restoration_ms=timers["interval"] * timers["restore"],
        polling_ms=timers["interval"],
        action="drop",
    )


# ---------------------------------------------------------------------- counter readers

# ``show queuing interface`` stat names → QueueCounters fields.
QUEUE_STATS = {
    "Tx Pkts": "tx_packets",
    "Tx Byts": "tx_bytes",
    "Dropped Pkts": "dropped_packets",
    "WRED/AFD & Tail Drop Pkts": "dropped_packets",
    "ECN Marked Pkts": "ecn_marked_packets",
}
QUEUING_HEADER = re.compile(r"(?:Egress|Ingress) Queuing for (\S+)")
QOS_GROUP = re.compile(r"QOS GROUP (\d)\b")
PFC_STATS_ROW = re.compile(r"\s*(\d)\s+(\S+)\s+(\S+)\s+\S+\s+(\d+)\s+\S+\s+(\d+)\s*$")
INGRESS_DROPS = re.compile(r"Ingress MMU Drop Pkts\s+(\d+)\s*$")
# Rows are "| <stat> | <unicast> | [<oobfc unicast> | <multicast> |]", and on some platforms
# two stats share a row.
STAT_CELLS = re.compile(r"\|\s*([A-Za-z][\w /&]*?)\s*((?:\|\s*\d+\s*)+)(?=\|)")
WATCHDOG_HEADER = re.compile(r"(\S+) Interface PFC watchdog")
WATCHDOG_GROUP = re.compile(r"QOS GROUP (\d) \[(\w+)\]")
WATCHDOG_COUNT = re.compile(r"\|\s*(Shutdown|Restored)\|\s*(\d+)\|")
WATCHDOG_COUNTS = {"Shutdown": "storms_detected", "Restored": "storms_restored"}


def _read_pfc_interfaces(found: CounterTally, text: str) -> None:
    """``show interface priority-flow-control``: only names the interfaces."""
    for line in text.splitlines():
        if m := re.match(r"(Ethernet\S+)\s+", line):
            found.port(m.group(1))


def _read_queuing(found: CounterTally, text: str) -> None:
    """``show queuing interface``: per interface, a block per QOS GROUP (= queue) of stat
    rows, the port's ingress drops, and the PFC Statistics table (per COS: Tx and Rx pause
    frames)."""
    current: str | None = None
    group: int | None = None
    ingress_drops: dict[str, int] = {}
    lossless: dict[str, list[int]] = {}
    for line in text.splitlines():
        if m := QUEUING_HEADER.match(line):
            current, group = m.group(1), None
            found.port(current)
        elif current is None:
            continue
        elif m := QOS_GROUP.search(line):
            group = int(m.group(1))
        elif m := INGRESS_DROPS.match(line):
            ingress_drops[current] = int(m.group(1))
        elif m := PFC_STATS_ROW.match(line):
            cos = int(m.group(1))
            found.port(current).pfc_tx[cos] = int(m.group(4))
            found.port(current).pfc_rx[cos] = int(m.group(5))
            if m.group(3) != "-":  # a priority group: the COS is no-drop on this port
                lossless.setdefault(current, []).append(cos)
        elif group is not None:
            _add_queue_stats(found.port(current).queue(group), line)
    _book_ingress_drops(found, ingress_drops, lossless)


def _book_ingress_drops(
    found: CounterTally, ingress_drops: dict[str, int], lossless: dict[str, list[int]]
) -> None:
    """NX-OS counts ingress (MMU) drops per port, not per priority: on a port with a no-drop
    COS they are the frames beyond its headroom, booked on its lowest no-drop COS (with one
    lossless priority, as the profiles plan, that is the one; with more, which of them
    dropped is not known). A port without a no-drop COS has no headroom to overrun."""
    for port, dropped in ingress_drops.items():
        if lossless.get(port):
            found.port(port).headroom_drops[min(lossless[port])] += dropped


def _add_queue_stats(queue: dict[str, int | None], line: str) -> None:
    """A stat row's counts: unicast + oobfc + multicast, summed per stat."""
    for stat, values in STAT_CELLS.findall(line):
        key = QUEUE_STATS.get(stat.strip())
        if key:
            queue[key] = sum(int(v) for v in re.findall(r"\d+", values))


def _read_watchdog(found: CounterTally, text: str) -> None:
    """``show queuing pfc-queue detail``: per interface and QOS GROUP, the watchdog state and
    its Shutdown (storms detected) and Restored counts."""
    current: str | None = None
    group: int | None = None
    for line in text.splitlines():
        if m := WATCHDOG_HEADER.match(line):
            current = m.group(1)
            found.port(current)
        elif current is None:
            continue
        elif m := WATCHDOG_GROUP.search(line):
            group = int(m.group(1))
            stormed = m.group(2) == "Shutdown"
            found.port(current).watchdog[group] = WatchdogCounters(stormed=stormed)
        elif group is not None and (m := WATCHDOG_COUNT.match(line)):
            watchdog = found.port(current).watchdog
            count = {WATCHDOG_COUNTS[m.group(1)]: int(m.group(2))}
            watchdog[group] = watchdog[group].model_copy(update=count)


# One reader per show command (keys of CiscoNxos.COUNTER_COMMANDS).
COUNTER_READERS: dict[str, Callable[[CounterTally, str], None]] = {
    "pfc": _read_pfc_interfaces,
    "queuing": _read_queuing,
    "watchdog": _read_watchdog,
}

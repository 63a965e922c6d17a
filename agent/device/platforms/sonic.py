"""Community SONiC: CONFIG_DB changes as an RFC 6902 JSON patch through the Generic Config
Updater, reads from CONFIG_DB and the sonic-utilities show commands.

netmiko has no community-SONiC driver, so the session is netmiko ``linux`` and every
privileged command runs with ``sudo`` (assumed password-less for the automation user).

Render format: ``render`` returns the JSON patch document (a JSON array of ``add`` operations,
``config apply-patch``'s input: "A patch is a JsonPatch which follows rfc6902", sonic-utilities
``config/main.py`` ``apply_patch``) as one string per line of the pretty-printed document, so
golden files and the audit log diff line by line; ``"\\n".join(lines)`` is the document.

Tables written (names and fields as sonic-buildimage ``files/build_templates/qos_config.j2``
and ``buffers_config.j2`` generate them): ``DSCP_TO_TC_MAP`` (all 64 DSCPs explicitly — the
stock ``AZURE`` map sends DSCP 26 to TC 1, which is not lossless), ``TC_TO_PRIORITY_GROUP_MAP``,
``TC_TO_QUEUE_MAP``, ``WRED_PROFILE``, ``SCHEDULER``, ``QUEUE``, ``BUFFER_PROFILE`` (lossless
headroom xon/xoff/size from the plan), ``BUFFER_PG``, ``PORT_QOS_MAP`` and ``PFC_WD``. Maps,
profiles and schedulers get names of their own (``ROCE…``) rather than editing ``AZURE``;
``PORT_QOS_MAP`` is patched field by field so ASIC-specific fields this agent does not own
(``pfc_to_queue_map``, ``pfc_to_pg_map``) stay as they are. JSON-patch ``add`` replaces an
existing member (RFC 6902 §4.1), so the patch is idempotent; it does need the parent tables and
the ``PORT_QOS_MAP|<port>`` / ``PFC_WD|GLOBAL`` entries to exist, as they do on a SONiC whose
QoS and PFC watchdog were initialised (``config qos reload``, ``pfcwd start_default``).

Transaction (Generic Config Updater commands, sonic-utilities ``config/main.py``):
``sudo config checkpoint NAME`` → the patch written to ``/tmp/NAME.json`` with a quoted heredoc
→ ``sudo config apply-patch /tmp/NAME.json`` → a ``systemd-run`` timer that runs ``config
rollback NAME && config delete-checkpoint NAME`` (through ``/bin/sh -c``) after the confirm
timeout (GCU itself has no commit timer; the timer makes the switch undo the change by itself
if the agent dies) → the caller verifies → confirm = ``sudo config delete-checkpoint NAME``
(from then on the timer's rollback has nothing to roll back to), stop the timer, ``sudo config
save -y``; rollback = ``sudo config rollback NAME`` (then the checkpoint is deleted).

A ``roce-agent-*`` checkpoint therefore means a change not final yet: with its timer running
it rolls back by itself; with its timer elapsed its rollback failed; without a timer the agent
died between the checkpoint and the timer, and the checkpoint's content tells whether the
patch went in (it differs from the running CONFIG_DB: live, only a rollback settles it) or not
(nothing to undo: only the checkpoint file is left).

read_state parses ``sudo sonic-cfggen -d --print-data`` (the whole CONFIG_DB as JSON, the
same document ``config_db.json`` holds). read_counters parses ``show pfc counters``, ``show
queue counters``, ``show queue wredcounters``, ``show queue watermark unicast``, ``show
priority-group drop counters`` and ``pfcwd show stats`` — tabulate tables whose formats are
the expected outputs in sonic-utilities' tests (``tests/pfcstat_test.py``,
``tests/queue_counter_test.py``, ``tests/wred_queue_counter_test.py``,
``tests/wm_input/wm_test_vectors.py``, ``tests/pgdrop_test.py``,
``tests/pfcwd_input/pfcwd_test_vectors.py``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from agent.device.platforms._common import (
    CounterTally,
    classifier_differs,
    expand_ranges,
    majority,
    natural_key,
    parse_int,
    parse_json,
    run_checked,
    show_json,
    text_tables,
)
from agent.device.platforms._trim import (
    SONIC_ABSENT,
    TRIM_OFF,
    TRIM_STATE_UNKNOWN,
    TrimTally,
    refusal,
    sonic_port_trim,
    sonic_queue_trim,
    with_trim,
    with_trim_unread,
)
from agent.device.platforms.base import CheckpointPlatform, Connection, PlatformError, Transaction
from agent.device.state import (
    DSCPS,
    PRIORITIES,
    Counters,
    EcnState,
    InterfaceState,
    PendingSession,
    QosState,
    QueueState,
    TrimState,
    UnreadFamily,
    WatchdogCounters,
    WatchdogState,
    diff,
)
from agent.intent.plan import DevicePlan, HeadroomPlan, PortPlan

MAP_NAME = "ROCE"
TABLE_ORDER = (
    "DSCP_TO_TC_MAP",
    "DOT1P_TO_TC_MAP",
    "TC_TO_PRIORITY_GROUP_MAP",
    "TC_TO_QUEUE_MAP",
    "WRED_PROFILE",
    "SCHEDULER",
    "BUFFER_PROFILE",
    "PORT_QOS_MAP",
    "QUEUE",
    "BUFFER_PG",
    "BUFFER_QUEUE",
    "PFC_WD",
    "SWITCH_TRIMMING",
)
# The egress profile whose discard action trims (packet trimming), on the lossy pool, as the
# HLD's example "q_lossy_trim_profile" (sonic-net/SONiC
# doc/packet_trimming/packet-trimming-design.md, 2.6.4, commit 0031145).
TRIM_PROFILE = "roce_lossy_trim_profile"
TRIM_PROFILE_FIELDS = {"pool": "egress_lossy_pool", "size": "0", "dynamic_th": "3"}
STRICT_SCHEDULER = "ROCE_STRICT"
HEREDOC_END = "ROCE_AGENT_PATCH_EOF"
# bash's continuation prompt (PS2, default "> "; bash(1) PROMPTING) answers each heredoc line:
# without it as netmiko's terminator, send_config_set waits for the shell prompt and times out.
BASH_PS2 = r"^> "
CONFIG_DB_COMMAND = "sudo sonic-cfggen -d --print-data"
# sonic-utilities installs the ``config`` console script here; the rollback timer needs a path.
CONFIG_BIN = "/usr/local/bin/config"


def pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901): ``~`` and ``/`` in keys escaped (``Ethernet1/1`` → ``~1``)."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def ranges(values: list[int]) -> list[str]:
    """``[3, 4, 6]`` → ``["3-4", "6"]``: the key form SONiC uses for BUFFER_PG entries."""
    spans: list[list[int]] = []
    for value in sorted(values):
        if spans and value == spans[-1][-1] + 1:
            spans[-1].append(value)
        else:
            spans.append([value])
    return [f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0]) for s in spans]


def wred_profile_name(ecn: EcnState) -> str:
    return f"ROCE_ECN_{ecn.min_bytes}_{ecn.max_bytes}_P{ecn.max_probability}"


def dwrr_scheduler_name(weight: int) -> str:
    return f"ROCE_DWRR_{weight}"


def buffer_profile_name(port: PortPlan) -> str:
    cable = f"{port.cable_m:g}"
    return f"roce_lossless_{port.speed_bps // 1_000_000}_{cable}m_{port.mtu}_profile"


class _Patch:
    """Ordered JSON-patch operations, one per path (a later add to a path replaces it)."""

    def __init__(self) -> None:
        self.ops: dict[str, dict[str, Any]] = {}

    def add(self, value: Any, *parts: str) -> None:
        path = pointer(*parts)
        self.ops[path] = {"op": "add", "path": path, "value": value}

    def remove(self, *parts: str) -> None:
        path = pointer(*parts)
        self.ops[path] = {"op": "remove", "path": path}

    def lines(self) -> list[str]:
        if not self.ops:
            return []
        # Referenced objects before the entries that use them; a stable sort keeps port order.
        ordered = sorted(
            self.ops.values(), key=lambda op: TABLE_ORDER.index(op["path"].split("/")[1])
        )
        return json.dumps(ordered, indent=2).splitlines()


# ---------------------------------------------------------------------- one renderer per table


@dataclass(frozen=True)
class _Change:
    """What differs between the desired and the actual state, as the tables need it."""

    desired: QosState
    fresh: bool  # no actual state: every table is written
    classifier: bool  # trust or the DSCP map
    pfc: dict[str, bool]  # per port: PFC priorities or PFC on/off
    watchdog: bool
    queues: list[tuple[str, int, QueueState | None]]  # (port, queue, wanted) that differ
    actual: QosState | None = None


def _change(desired: QosState, actual: QosState | None) -> _Change:
    def present(name: str) -> InterfaceState | None:
        return actual.interfaces.get(name) if actual else None

    return _Change(
        desired=desired,
        fresh=actual is None,
        classifier=classifier_differs(desired, actual),
        pfc={name: _pfc_differs(want, present(name)) for name, want in desired.interfaces.items()},
        watchdog=actual is None or actual.watchdog != desired.watchdog,
        queues=[
            (name, queue, mine)
            for name, want in desired.interfaces.items()
            for queue, mine in _queues_that_differ(want, present(name), fresh=actual is None)
        ],
        actual=actual,
    )


def _pfc_differs(want: InterfaceState, have: InterfaceState | None) -> bool:
    return (
        have is None
        or have.pfc_priorities != want.pfc_priorities
        or have.pfc_enabled != want.pfc_enabled
    )


def _queues_that_differ(
    want: InterfaceState, have: InterfaceState | None, fresh: bool
) -> Iterator[tuple[int, QueueState | None]]:
    """(queue, wanted) for each queue to write; a fresh render writes every configured one."""
    for queue in PRIORITIES:
        mine = want.queues.get(queue)
        theirs = have.queues.get(queue) if have else None
        if (mine or QueueState()) != (theirs or QueueState()) or (fresh and mine is not None):
            yield queue, mine


def _classifier_map(patch: _Patch, change: _Change) -> None:
    """DSCP_TO_TC_MAP (or DOT1P_TO_TC_MAP when trusting PCP)."""
    if not change.classifier:
        return
    desired = change.desired
    if desired.trust == "pcp":
        patch.add({str(p): str(p) for p in PRIORITIES}, "DOT1P_TO_TC_MAP", MAP_NAME)
    else:
        dscp_map = {str(d): str(desired.dscp_to_priority[d]) for d in DSCPS}
        patch.add(dscp_map, "DSCP_TO_TC_MAP", MAP_NAME)


def _priority_group_maps(patch: _Patch, change: _Change) -> None:
    """TC_TO_PRIORITY_GROUP_MAP and TC_TO_QUEUE_MAP."""
    if not (any(change.pfc.values()) or change.fresh):
        return
    interfaces = change.desired.interfaces.values()
    lossless = sorted({p for i in interfaces for p in i.pfc_priorities})
    # Lossless TCs get a priority group each; lossy ones share PG 0, as stock SONiC.
    patch.add(
        {str(tc): str(tc if tc in lossless else 0) for tc in PRIORITIES},
        "TC_TO_PRIORITY_GROUP_MAP",
        MAP_NAME,
    )
    patch.add({str(tc): str(tc) for tc in PRIORITIES}, "TC_TO_QUEUE_MAP", MAP_NAME)


def _queue_profiles(patch: _Patch, change: _Change) -> None:
    """WRED_PROFILE and SCHEDULER: the objects the QUEUE entries refer to."""
    for _, _, mine in change.queues:
        if mine is None:
            continue
        if mine.ecn is not None:
            patch.add(_wred_profile(mine.ecn), "WRED_PROFILE", wred_profile_name(mine.ecn))
        scheduler = _scheduler_name(mine)
        if scheduler is not None:
            patch.add(_scheduler(mine), "SCHEDULER", scheduler)


def _port_qos_maps(patch: _Patch, change: _Change) -> None:
    """PORT_QOS_MAP, field by field (fields this agent does not own stay as they are); a
    field set to None is removed."""
    for name, want in change.desired.interfaces.items():
        for key, value in _port_qos_fields(change, name, want):
            if value is None:
                patch.remove("PORT_QOS_MAP", name, key)
            else:
                patch.add(value, "PORT_QOS_MAP", name, key)


def _port_qos_fields(
    change: _Change, name: str, want: InterfaceState
) -> list[tuple[str, str | None]]:
    desired = change.desired
    priorities = ",".join(map(str, want.pfc_priorities))
    fields: list[tuple[str, str | None]] = []
    if change.classifier:
        fields.append(("dot1p_to_tc_map" if desired.trust == "pcp" else "dscp_to_tc_map", MAP_NAME))
    if change.pfc[name]:
        fields += [("tc_to_pg_map", MAP_NAME), ("tc_to_queue_map", MAP_NAME)]
        fields += _pfc_enable(change, name, priorities)
    if (change.watchdog or change.pfc[name]) and desired.watchdog.enabled and priorities:
        fields.append(("pfcwd_sw_enable", priorities))
    return fields


def _pfc_enable(change: _Change, name: str, priorities: str) -> list[tuple[str, str | None]]:
    """``pfc_enable``: the priorities, or, with none, no field at all (sonic-port-qos-map.yang
    takes no empty list): removed where the switch has one, left absent where it has none."""
    if priorities:
        return [("pfc_enable", priorities)]
    have = change.actual.interfaces.get(name) if change.actual else None
    return [("pfc_enable", None)] if have is not None and have.pfc_priorities else []


def _queue_entries(patch: _Patch, change: _Change) -> None:
    """QUEUE: a queue with nothing configured any more loses its entry."""
    for name, queue, mine in change.queues:
        key = f"{name}|{queue}"
        if mine is None or mine == QueueState():
            patch.remove("QUEUE", key)
        else:
            patch.add(_queue_entry(mine), "QUEUE", key)


def _queue_entry(queue: QueueState) -> dict[str, str]:
    entry: dict[str, str] = {}
    scheduler = _scheduler_name(queue)
    if scheduler is not None:
        entry["scheduler"] = scheduler
    if queue.ecn is not None:
        entry["wred_profile"] = wred_profile_name(queue.ecn)
    return entry


def _pfc_watchdog(patch: _Patch, change: _Change) -> None:
    """PFC_WD: per port, and the poll interval under GLOBAL."""
    watchdog = change.desired.watchdog
    if not (change.watchdog and watchdog.enabled):
        return
    for name in change.desired.interfaces:
        patch.add(
            {
                "action": watchdog.action or "drop",
                "detection_time": str(watchdog.detection_ms),
                "restoration_time": str(watchdog.restoration_ms),
            },
            "PFC_WD",
            name,
        )
    patch.add(str(watchdog.polling_ms), "PFC_WD", "GLOBAL", "POLL_INTERVAL")


def _switch_trimming(patch: _Patch, change: _Change) -> None:
    """SWITCH_TRIMMING|GLOBAL. The HLD supports no removal of this entry or of a field, so
    trimming ends at the buffer profile (:func:`_trim_queues`), never here."""
    trim, actual = change.desired.trim, change.actual
    if trim is not None and (actual is None or actual.trim != trim):
        fields = {"size": str(trim.size_bytes), "dscp_value": str(trim.dscp),
                  "queue_index": str(trim.priority)}  # fmt: skip
        patch.add(fields, "SWITCH_TRIMMING", "GLOBAL")


def _trim_queues(patch: _Patch, change: _Change) -> None:
    """The queues that trim: BUFFER_QUEUE entries on the profile whose
    ``packet_discard_action`` is ``trim``, back to ``drop`` when trimming ends."""
    desired, actual = change.desired, change.actual
    trims = any(i.trim_queues for i in desired.interfaces.values())
    trimmed = actual is not None and any(i.trim_queues for i in actual.interfaces.values())
    if trims or trimmed:
        action = "trim" if trims else "drop"
        patch.add({**TRIM_PROFILE_FIELDS, "packet_discard_action": action},
                  "BUFFER_PROFILE", TRIM_PROFILE)  # fmt: skip
    for name, want in desired.interfaces.items():
        have = actual.interfaces.get(name) if actual else None
        if want.trim_queues and (have is None or have.trim_queues != want.trim_queues):
            for queue in want.trim_queues:
                patch.add({"profile": TRIM_PROFILE}, "BUFFER_QUEUE", f"{name}|{queue}")


# One renderer per CONFIG_DB table (the patch orders the tables itself, see TABLE_ORDER).
STATE_TABLES: tuple[Callable[[_Patch, _Change], None], ...] = (
    _classifier_map,
    _priority_group_maps,
    _queue_profiles,
    _port_qos_maps,
    _queue_entries,
    _pfc_watchdog,
    _switch_trimming,
    _trim_queues,
)


def _scheduler_name(queue: QueueState) -> str | None:
    if queue.strict:
        return STRICT_SCHEDULER
    if queue.bandwidth_percent is not None:
        return dwrr_scheduler_name(queue.bandwidth_percent)
    return None


def _scheduler(queue: QueueState) -> dict[str, str]:
    if queue.strict:
        return {"type": "STRICT"}
    return {"type": "DWRR", "weight": str(queue.bandwidth_percent)}


def _wred_profile(ecn: EcnState) -> dict[str, str]:
    # One threshold set for all three colours: RoCE traffic is not coloured, and
    # ``ecn_all`` marks ECT packets instead of dropping them (as AZURE_LOSSLESS does).
    profile = {
        "wred_green_enable": "true",
        "wred_yellow_enable": "true",
        "wred_red_enable": "true",
        "ecn": "ecn_all",
    }
    for colour in ("green", "yellow", "red"):
        profile[f"{colour}_min_threshold"] = str(ecn.min_bytes)
        profile[f"{colour}_max_threshold"] = str(ecn.max_bytes)
        profile[f"{colour}_drop_probability"] = str(ecn.max_probability)
    return profile


class Sonic(CheckpointPlatform):
    """Everything in the normalized model is configured and read back from CONFIG_DB."""

    name: ClassVar[str] = "sonic"
    netmiko_device_type: ClassVar[str] = "linux"
    managed: ClassVar[frozenset[str]] = CheckpointPlatform.managed | {"trim", "trim_queues"}

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        patch = _Patch()
        self._buffer_ops(patch, device)
        self._state_ops(patch, self.desired(device), None)
        return patch.lines()

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """The patch for every normalized setting that differs (headroom is not in the model,
        so buffer profiles come only from :meth:`render`)."""
        patch = _Patch()
        self._state_ops(patch, desired, actual)
        return patch.lines()

    @staticmethod
    def _buffer_ops(patch: _Patch, device: DevicePlan) -> None:
        for port in device.ports:
            if not port.headroom:
                continue
            headroom: HeadroomPlan = next(iter(port.headroom.values()))
            profile = buffer_profile_name(port)
            patch.add(
                {
                    "pool": "ingress_lossless_pool",
                    "xon": str(headroom.xon),
                    "xoff": str(headroom.xoff),
                    "size": str(headroom.size),
                    # SONiC's lossless PG profiles use the pool's dynamic threshold, alpha 1.
                    "dynamic_th": "0",
                },
                "BUFFER_PROFILE",
                profile,
            )
        for port in device.ports:
            if port.headroom:
                for pgs in ranges(sorted(port.headroom)):
                    patch.add(
                        {"profile": buffer_profile_name(port)}, "BUFFER_PG", f"{port.name}|{pgs}"
                    )

    @staticmethod
    def _state_ops(patch: _Patch, desired: QosState, actual: QosState | None) -> None:
        change = _change(desired, actual)
        for table in STATE_TABLES:
            table(patch, change)

    # ------------------------------------------------------------------ read state

    def read_state(self, conn: Connection) -> QosState:
        return self.state_from_config_db(show_json(conn, CONFIG_DB_COMMAND))

    # ``config save`` writes CONFIG_DB to /etc/sonic/config_db.json, which a reload or reboot
    # loads (sonic-utilities doc/Command-Reference.md, "config save"): QoS that differs there
    # is lost by a reload.
    SAVED_CONFIG_COMMAND: ClassVar[str] = "sudo cat /etc/sonic/config_db.json"

    def unsaved(self, conn: Connection) -> list[str] | None:
        """The QoS settings whose running value differs from the saved config_db.json."""
        running = self.read_state(conn)
        try:
            saved = show_json(conn, self.SAVED_CONFIG_COMMAND)
        except PlatformError:
            return ["/etc/sonic/config_db.json: missing or not JSON"]
        return self.unsaved_from(running, self.state_from_config_db(saved))

    def unsaved_from(self, running: QosState, saved: QosState) -> list[str]:
        return [
            f"{d.interface or 'switch'} {d.setting}: running {d.expected}, saved {d.actual}"
            for d in diff("", running, saved, self.managed)
        ]

    @staticmethod
    def state_from_config_db(config_db: dict[str, Any]) -> QosState:
        """Normalize a CONFIG_DB document (``sonic-cfggen -d --print-data`` / config_db.json)."""
        port_qos: dict[str, dict[str, str]] = {
            name: entry
            for name, entry in config_db.get("PORT_QOS_MAP", {}).items()
            if name != "global"
        }
        trust, dscp_to_priority = _classifier_from(config_db, port_qos)
        queues = _queues_from(config_db)
        trim_queues = _trim_queues_from(config_db)
        interfaces = {
            name: _interface_from(port_qos.get(name, {}), queues.get(name, {})).model_copy(
                update={"trim_queues": trim_queues.get(name, ())}
            )
            for name in sorted(set(port_qos) | set(queues) | set(trim_queues), key=natural_key)
        }
        return QosState(
            trust=trust,
            dscp_to_priority=dscp_to_priority,
            watchdog=_watchdog_from(config_db.get("PFC_WD", {})),
            interfaces=interfaces,
            trim=_trim_from(config_db) if trim_queues else None,
        )

    # ------------------------------------------------------------------ counters

    COUNTER_COMMANDS: ClassVar[dict[str, str]] = {
        "pfc": "show pfc counters",
        "queue": "show queue counters",
        "wred": "show queue wredcounters",
        "watermark": "show queue watermark unicast",
        "pg_drop": "show priority-group drop counters",
        "pfcwd": "pfcwd show stats",
    }
    FAMILY_COMMANDS: ClassVar[dict[UnreadFamily, tuple[str, ...]]] = {
        "headroom_drops": ("pg_drop",),
        "watchdog": ("pfcwd",),
    }
    # Read only from a switch whose CONFIG_DB sets trimming up (``state``): a release
    # without the feature refuses ``--trim``, and that must not fail the other counters.
    TRIM_COMMANDS: ClassVar[dict[str, str]] = {
        "queue": "show queue counters --trim -j",
        "port": "show interfaces counters trim -j",
    }

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        return self._with_trim(conn, super().read_counters(conn, state), state)

    def read_families(
        self, conn: Connection, families: frozenset[UnreadFamily], state: QosState | None = None
    ) -> Counters:
        rest = families - {"trim"}
        if rest and not rest <= self.FAMILY_COMMANDS.keys():
            return self.read_counters(conn, state)  # every command, the trim ones included
        if rest:
            counters = super().read_families(conn, rest, state)
        else:
            counters = Counters(device=conn.device, collected_at=time.time())
        return self._with_trim(conn, counters, state) if "trim" in families else counters

    def _with_trim(self, conn: Connection, counters: Counters, state: QosState | None) -> Counters:
        if state is None:
            return with_trim_unread(counters, TRIM_STATE_UNKNOWN)
        if state.trim is None:
            return with_trim_unread(counters, TRIM_OFF)
        outputs = {key: conn.show(command) for key, command in self.TRIM_COMMANDS.items()}
        return self.trim_from_text(counters, outputs)

    @classmethod
    def trim_from_text(cls, counters: Counters, outputs: dict[str, str]) -> Counters:
        """``counters`` with the trim family of the outputs of :attr:`TRIM_COMMANDS` (keyed
        alike; recorded outputs in tests): per queue and per port, or why not read."""
        tally = TrimTally()
        refused = []
        for key, read in (("queue", sonic_queue_trim), ("port", sonic_port_trim)):
            command, output = cls.TRIM_COMMANDS[key], outputs.get(key, "")
            why = refusal(output)
            if why is not None:
                refused.append(f"{command!r}: {why}")
                continue
            read(tally, parse_json(counters.device, command, output, dict), command)
        if len(refused) == len(cls.TRIM_COMMANDS):
            return with_trim_unread(counters, "; ".join(refused))
        return with_trim(counters, tally.result(), tally.unread(SONIC_ABSENT))

    @staticmethod
    def counters_from_text(device: str, collected_at: float, outputs: dict[str, str]) -> Counters:
        """Normalize the recorded outputs of :attr:`COUNTER_COMMANDS` (keyed alike)."""
        found = CounterTally()
        for key, read in COUNTER_READERS.items():
            for header, rows in text_tables(outputs.get(key, "")):
                read(found, header, rows)
        return found.counters(device, collected_at)

    def read_pg_watermarks(self, conn: Connection) -> dict[str, dict[str, tuple[int, ...]]]:
        """Ingress PG headroom and shared-pool watermarks (bytes) per port, PG 0-7.

        The normalized ``Counters`` model has no ingress-PG watermark field, so these are
        offered separately (``show priority-group watermark headroom|shared``).
        """
        return self.pg_watermarks_from_text(
            conn.show("show priority-group watermark headroom"),
            conn.show("show priority-group watermark shared"),
        )

    @staticmethod
    def pg_watermarks_from_text(
        headroom: str, shared: str
    ) -> dict[str, dict[str, tuple[int, ...]]]:
        result: dict[str, dict[str, tuple[int, ...]]] = {}
        for kind, output in (("headroom", headroom), ("shared", shared)):
            for header, rows in text_tables(output):
                for row in rows:
                    result.setdefault(row[0], {})[kind] = tuple(_per_priority_group(header, row))
        return result

    # ------------------------------------------------------------------ change (the base's flow)

    def begin(self, conn: Connection, txn: Transaction) -> None:
        run_checked(conn, f"sudo config checkpoint {txn.name}", "Checkpoint created successfully")

    def stage(self, conn: Connection, txn: Transaction) -> None:
        # A quoted heredoc: the shell expands nothing inside the JSON.
        conn.send_lines(
            [f"cat > {_patch_file(txn.name)} <<'{HEREDOC_END}'", *txn.lines, HEREDOC_END],
            terminator=BASH_PS2,
        )

    def commit(self, conn: Connection, txn: Transaction, confirm_timeout_s: int) -> None:
        # A refused patch is rolled back to the checkpoint too (``abort`` is ``rollback``):
        # GCU leaves a half-applied patch in place when it fails, it does no recovery of its own.
        patch_file = _patch_file(txn.name)
        run_checked(conn, f"sudo config apply-patch {patch_file}", "Patch applied successfully")

    def arm_rollback_timer(self, conn: Connection, txn: Transaction, timeout_s: int) -> None:
        run_checked(conn, self._rollback_timer(txn.name, timeout_s))

    @staticmethod
    def _rollback_timer(name: str, timeout_s: int) -> str:
        """systemd-run(1): a transient timer whose service rolls back and then drops the
        checkpoint (``&&``: a failed rollback leaves it for a person or the next run)."""
        undo = f"{CONFIG_BIN} rollback {name} && {CONFIG_BIN} delete-checkpoint {name}"
        return (
            f"sudo systemd-run --on-active={timeout_s} --unit={name}-rollback /bin/sh -c '{undo}'"
        )

    def rollback(self, conn: Connection, txn: Transaction) -> None:
        # Every step is attempted: a failed rollback is recorded in the transaction's notes
        # rather than hiding the error that caused it.
        self.disarm_rollback_timer(conn, txn)
        output = conn.show(f"sudo config rollback {txn.name}")
        if "Config rolled back successfully" in output:
            txn.rolled_back = True
        else:
            txn.notes.append(f"rollback to checkpoint {txn.name} failed: {output.strip()[:200]}")
        conn.show(f"sudo config delete-checkpoint {txn.name}")
        self.clean_up(conn, txn)

    def confirm_change(self, conn: Connection, txn: Transaction) -> None:
        # Deleting the checkpoint is the point of no return: the timer's rollback has nothing
        # to go back to from then on (it fails, changing nothing), and nothing is pending.
        self._delete_checkpoint(conn, txn.name)

    def disarm_rollback_timer(self, conn: Connection, txn: Transaction) -> None:
        conn.show(f"sudo systemctl stop {txn.name}-rollback.timer")

    def clean_up(self, conn: Connection, txn: Transaction) -> None:
        conn.show(f"rm -f {_patch_file(txn.name)}")

    @staticmethod
    def _delete_checkpoint(conn: Connection, name: str) -> None:
        run_checked(
            conn, f"sudo config delete-checkpoint {name}", "Checkpoint deleted successfully"
        )

    # ------------------------------------------------------------------ pending checkpoints

    # A ``roce-agent-*`` GCU checkpoint exists from before the patch until the confirm or the
    # rollback deletes it; its ``NAME-rollback.timer`` (systemd-run) is the commit timer (see
    # the module docstring for what a checkpoint without one means).
    # ``config list-checkpoints`` prints the names as a JSON list (sonic-utilities GCU);
    # ``systemctl list-timers --all --plain --no-legend`` prints one line per timer with its
    # time left (``… 4min 31s left …``), or ``n/a`` once it has fired (systemd list-timers).
    CHECKPOINTS_COMMAND: ClassVar[str] = "sudo config list-checkpoints"
    TIMERS_COMMAND: ClassVar[str] = (
        "systemctl list-timers --all --plain --no-legend 'roce-agent-*-rollback.timer'"
    )

    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        checkpoints, timers = conn.show(self.CHECKPOINTS_COMMAND), conn.show(self.TIMERS_COMMAND)
        found = self.sessions_from_text(conn.device, checkpoints, timers)
        orphans = [s.name for s in found if s.state == ORPHAN_STATE]
        if not orphans:
            return found
        running = show_json(conn, CONFIG_DB_COMMAND)
        unchanged = {name for name in orphans if self._checkpoint(conn, name) == running}
        return self.sessions_from_text(conn.device, checkpoints, timers, unchanged=unchanged)

    @staticmethod
    def _checkpoint(conn: Connection, name: str) -> dict[str, Any] | None:
        """A checkpoint's CONFIG_DB (``Util.save_json_file``: one JSON document); None when it
        cannot be read, which counts as differing from the running CONFIG_DB (live)."""
        try:
            return show_json(conn, f"sudo cat /etc/sonic/checkpoints/{name}.cp.json")
        except PlatformError:
            return None

    @classmethod
    def sessions_from_text(
        cls,
        device: str,
        checkpoints: str,
        timers: str,
        now: float | None = None,
        unchanged: set[str] | None = None,
    ) -> list[PendingSession]:
        """``unchanged``: checkpoints without a timer known to equal the running CONFIG_DB."""
        names = parse_json(device, cls.CHECKPOINTS_COMMAND, checkpoints or "[]", list)
        left: dict[str, float | None] = {}  # name -> seconds left, None once elapsed
        for line in timers.splitlines():
            unit = re.search(r"(roce-agent-\S+)-rollback\.timer", line)
            remaining = re.search(r"((?:\d+(?:\.\d+)?\s*(?:h|min|s|ms|us)\s*)+)left", line)
            if unit:
                left[unit.group(1)] = timespan_s(remaining.group(1)) if remaining else None
        found = []
        for name in names:
            if not isinstance(name, str) or not name.startswith("roce-agent-"):
                continue
            state = _checkpoint_state(name in left, left.get(name), name in (unchanged or set()))
            found.append(
                PendingSession(
                    device=device,
                    name=name,
                    kind="SONiC checkpoint",
                    state=state,
                    age_s=cls.age_from_name(name, now),
                    rollback_in_s=left.get(name),
                    live=state != UNCHANGED_STATE,
                    rolls_back=state == RUNNING_STATE,
                )
            )
        return found

    def abort_session(self, conn: Connection, session: PendingSession) -> None:
        """A live change is rolled back to its checkpoint; a checkpoint that equals the running
        CONFIG_DB (the patch never went in) is only deleted."""
        if session.live:
            super().abort_session(conn, session)
            return
        txn = Transaction(name=session.name, lines=[])
        self.disarm_rollback_timer(conn, txn)
        self._delete_checkpoint(conn, txn.name)
        self.clean_up(conn, txn)

    def save(self, conn: Connection) -> None:
        run_checked(conn, "sudo config save -y")


RUNNING_STATE = "rollback timer running"
ELAPSED_STATE = "rollback timer elapsed, rollback failed"
ORPHAN_STATE = "checkpoint without rollback timer"
UNCHANGED_STATE = "checkpoint without rollback timer, nothing applied"


def _checkpoint_state(has_timer: bool, left: float | None, unchanged: bool) -> str:
    if left is not None:
        return RUNNING_STATE
    if has_timer:
        return ELAPSED_STATE  # the timer ran and the checkpoint is still there
    return UNCHANGED_STATE if unchanged else ORPHAN_STATE


def timespan_s(text: str) -> float:
    """systemd's ``1h 4min 31.5s`` -> seconds."""
    scale = {"h": 3600.0, "min": 60.0, "s": 1.0, "ms": 0.001, "us": 0.000001}
    return sum(
        float(value) * scale[unit]
        for value, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(h|min|ms|us|s)\b", text)
    )


def _patch_file(name: str) -> str:
    """Where the patch of transaction ``name`` is written for ``config apply-patch``."""
    return f"/tmp/{name}.json"


def _strip_reference(name: str) -> str:
    """Old releases store references as ``[DSCP_TO_TC_MAP|AZURE]``; newer ones plain names."""
    if name.startswith("[") and name.endswith("]"):
        return name[1:-1].split("|", 1)[-1]
    return name


def _queue_state(
    entry: dict[str, str], schedulers: dict[str, Any], wred_profiles: dict[str, Any]
) -> QueueState:
    scheduler = schedulers.get(_strip_reference(entry.get("scheduler", "")), {})
    kind = scheduler.get("type", "").upper()
    strict = kind == "STRICT"
    weight = scheduler.get("weight") if kind in ("DWRR", "WRR") else None
    ecn = None
    profile = wred_profiles.get(_strip_reference(entry.get("wred_profile", "")))
    if profile and profile.get("ecn", "ecn_none") != "ecn_none":
        ecn = EcnState(
            min_bytes=int(profile.get("green_min_threshold", 0)),
            max_bytes=int(profile.get("green_max_threshold", 0)),
            max_probability=int(profile.get("green_drop_probability", 100)),
        )
    return QueueState(
        ecn=ecn, strict=strict, bandwidth_percent=int(weight) if weight is not None else None
    )


# ---------------------------------------------------------------------- CONFIG_DB readers


def _classifier_from(
    config_db: dict[str, Any], port_qos: dict[str, dict[str, str]]
) -> tuple[str, dict[int, int]]:
    """(trust, DSCP map): the DSCP map most ports are bound to, else the global binding."""
    bound = majority(e["dscp_to_tc_map"] for e in port_qos.values() if "dscp_to_tc_map" in e)
    if bound is None:
        bound = config_db.get("PORT_QOS_MAP", {}).get("global", {}).get("dscp_to_tc_map")
    if bound is None:
        trust = "pcp" if any("dot1p_to_tc_map" in e for e in port_qos.values()) else "none"
        return trust, {d: 0 for d in DSCPS}
    table = config_db.get("DSCP_TO_TC_MAP", {}).get(_strip_reference(bound), {})
    # A DSCP missing from the map is classified to TC 0 (SAI's default).
    return "dscp", {d: int(table.get(str(d), 0)) for d in DSCPS}


def _queues_from(config_db: dict[str, Any]) -> dict[str, dict[int, QueueState]]:
    """Per port, the configured queues (``QUEUE|<port>|<queue range>`` entries)."""
    schedulers = config_db.get("SCHEDULER", {})
    wred_profiles = config_db.get("WRED_PROFILE", {})
    queues: dict[str, dict[int, QueueState]] = {}
    for key, entry in config_db.get("QUEUE", {}).items():
        name, _, queue_range = key.rpartition("|")
        state = _queue_state(entry, schedulers, wred_profiles)
        for queue in expand_ranges(queue_range, f"CONFIG_DB QUEUE key {key!r}"):
            if state != QueueState():
                queues.setdefault(name, {})[queue] = state
    return queues


def _interface_from(port_qos: dict[str, str], queues: dict[int, QueueState]) -> InterfaceState:
    priorities = tuple(expand_ranges(port_qos.get("pfc_enable", ""), "PORT_QOS_MAP pfc_enable"))
    return InterfaceState(pfc_enabled=bool(priorities), pfc_priorities=priorities, queues=queues)


def _watchdog_from(pfc_wd: dict[str, Any]) -> WatchdogState:
    """The PFC watchdog most ports have (PFC_WD|<port>), with GLOBAL's poll interval."""
    per_port = [
        (e.get("action"), e.get("detection_time"), e.get("restoration_time"))
        for name, e in pfc_wd.items()
        if name != "GLOBAL"
    ]
    common = majority(per_port)
    if common is None:
        return WatchdogState()
    action, detection, restoration = common
    poll = pfc_wd.get("GLOBAL", {}).get("POLL_INTERVAL")
    return WatchdogState(
        enabled=True,
        detection_ms=int(detection) if detection else None,
        restoration_ms=int(restoration) if restoration else None,
        polling_ms=int(poll) if poll else None,
        action=action,
    )


# ---------------------------------------------------------------------- counter readers

Rows = list[list[str]]


def _queue_slot(found: CounterTally, name: str, label: str) -> dict[str, int | None] | None:
    """The unicast queue ``label`` of port ``name`` (None for other rows and columns)."""
    # Unicast queues only (UC0..UC7 = traffic classes); MC/ALL rows are not per class.
    if not label.startswith("UC") or int(label[2:]) not in PRIORITIES:
        return None
    return found.port(name).queue(int(label[2:]))


def _read_pfc(found: CounterTally, header: list[str], rows: Rows) -> None:
    """``show pfc counters``: a ``Port Rx`` and a ``Port Tx`` table, PFC0..PFC7 per port."""
    received = bool(header) and header[0] == "Port Rx"
    for row in rows:
        counts = [parse_int(cell) for cell in row[1:9]]
        port = found.port(row[0])
        if received:
            port.pfc_rx = counts
        else:
            port.pfc_tx = counts


def _read_queue(found: CounterTally, header: list[str], rows: Rows) -> None:
    """``show queue counters``: Port, TxQ, Counter/pkts, Counter/bytes, Drop/pkts, …"""
    for row in rows:
        slot = _queue_slot(found, row[0], row[1])
        if slot is not None:
            slot["tx_packets"] = parse_int(row[2])
            slot["tx_bytes"] = parse_int(row[3])
            slot["dropped_packets"] = parse_int(row[4])


def _read_wred(found: CounterTally, header: list[str], rows: Rows) -> None:
    """``show queue wredcounters``: EcnMarked/pkts, the fifth column."""
    for row in rows:
        slot = _queue_slot(found, row[0], row[1])
        if slot is not None:
            slot["ecn_marked_packets"] = parse_int(row[4])


def _read_watermark(found: CounterTally, header: list[str], rows: Rows) -> None:
    """``show queue watermark unicast``: one column per unicast queue (UC0..UC7)."""
    for row in rows:
        for label, cell in zip(header[1:], row[1:], strict=False):
            slot = _queue_slot(found, row[0], label)
            if slot is not None and cell.strip() != "N/A":
                slot["watermark_bytes"] = parse_int(cell)


def _read_pg_drop(found: CounterTally, header: list[str], rows: Rows) -> None:
    """``show priority-group drop counters``: one column per priority group (PG0..PG7)."""
    for row in rows:
        found.port(row[0]).headroom_drops = _per_priority_group(header, row)


def _read_pfcwd(found: CounterTally, header: list[str], rows: Rows) -> None:
    """``pfcwd show stats``: QUEUE (``<port>:<queue>``), STATUS, STORM DETECTED/RESTORED."""
    for row in rows:
        name, _, queue = row[0].rpartition(":")
        detected, _, restored = row[2].partition("/")
        found.port(name).watchdog[int(queue)] = WatchdogCounters(
            storms_detected=parse_int(detected),
            storms_restored=parse_int(restored),
            stormed=row[1].strip() == "stormed",
        )


def _profile_name(reference: str) -> str:
    """``roce_lossy_trim_profile`` or the older ``[BUFFER_PROFILE|roce_lossy_trim_profile]``."""
    return reference.strip("[]").removeprefix("BUFFER_PROFILE|")


def _trim_queues_from(config_db: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Per port, the queues on a buffer profile whose ``packet_discard_action`` is ``trim``
    (BUFFER_QUEUE keys are ``<port>|<queue>`` or ``<port>|<first>-<last>``)."""
    trimming = {
        name
        for name, fields in config_db.get("BUFFER_PROFILE", {}).items()
        if isinstance(fields, dict) and fields.get("packet_discard_action") == "trim"
    }
    found: dict[str, set[int]] = {}
    for key, fields in config_db.get("BUFFER_QUEUE", {}).items():
        port, _, span = key.partition("|")
        if not isinstance(fields, dict) or _profile_name(fields.get("profile", "")) not in trimming:
            continue
        first, _, last = span.partition("-")
        if first.isdigit() and (last or first).isdigit():
            found.setdefault(port, set()).update(range(int(first), int(last or first) + 1))
    return {port: tuple(sorted(queues)) for port, queues in found.items()}


def _trim_from(config_db: dict[str, Any]) -> TrimState | None:
    """SWITCH_TRIMMING|GLOBAL: ``dscp_value`` may be ``from-tc``, ``queue_index``
    ``dynamic`` (the HLD, 2.6.1.1); no ``size`` means trimming is not set up."""
    fields = config_db.get("SWITCH_TRIMMING", {}).get("GLOBAL")
    if not isinstance(fields, dict) or not str(fields.get("size", "")).isdigit():
        return None
    dscp, queue = str(fields.get("dscp_value", "")), str(fields.get("queue_index", ""))
    return TrimState(
        size_bytes=int(fields["size"]),
        dscp=int(dscp) if dscp.isdigit() else None,
        priority=int(queue) if queue.isdigit() else None,
    )


# One reader per show command (keys of Sonic.COUNTER_COMMANDS), each given its tables.
COUNTER_READERS: dict[str, Callable[[CounterTally, list[str], Rows], None]] = {
    "pfc": _read_pfc,
    "queue": _read_queue,
    "wred": _read_wred,
    "watermark": _read_watermark,
    "pg_drop": _read_pg_drop,
    "pfcwd": _read_pfcwd,
}


def _per_priority_group(header: list[str], row: list[str]) -> list[int]:
    """A row's PG0..PG7 cells as numbers (0 where the table has no such column)."""
    values = [0] * 8
    for label, cell in zip(header[1:], row[1:], strict=False):
        if label.startswith("PG") and int(label[2:]) in PRIORITIES:
            values[int(label[2:])] = parse_int(cell)
    return values

"""NVIDIA Cumulus Linux 5.x: ``nv set qos …`` lines, ``nv config apply --confirm``, JSON reads.

netmiko ``linux``: NVUE is a shell command (``nv``) on Cumulus Linux 5.x.

Render: ``nv set qos roce mode lossless`` (``lossy`` without PFC priorities) and then every
managed value explicitly, not only the ones that differ from the RoCE defaults: the defaults
moved between releases (the 5.8 user guide prints the ECN min threshold both as 146.48 KB and
as 153.00 KB), and an explicit value is what read-back can check. Syntax, per the Cumulus
Linux 5.8 user guide ("Quality of Service", "RDMA over Converged Ethernet - RoCE",
CumulusNetworks/docs ``content/cumulus-linux-58/Layer-1-and-Switch-Ports/Quality-of-Service``):

- ``nv set qos mapping default-global trust l3`` and ``… dscp D,D,… switch-priority P`` for
  every DSCP (RoCE mode trusts pcp and dscp with ``dscp >> 3``, which puts DSCP 24-31 in the
  lossless priority);
- ``nv set qos egress-queue-mapping default-global switch-priority P traffic-class P`` for all
  eight (RoCE mode sends every priority but 3 and 6 to TC 0; the model is priority = TC);
- ``nv set qos pfc default-global switch-priority P,…`` / ``tx enable`` / ``rx enable`` /
  ``cable-length M`` (the longest cable of the device: one global profile, so the headroom is
  sized for the worst port — NVUE derives the headroom from the cable length itself);
- ``nv set qos congestion-control default-global traffic-class T ecn enable`` /
  ``min-threshold`` / ``max-threshold`` / ``probability`` / ``red disable``; ``ecn disable`` on
  TC 0 when the plan has no ECN there (the default profile marks TC 0);
- ``nv set qos egress-scheduler default-global traffic-class T mode strict|dwrr`` /
  ``bw-percent W``;
- ``nv set qos pfc-watchdog polling-interval MS`` / ``robustness N`` and ``nv set interface
  swpN qos pfc-watchdog`` (detection = polling × robustness; on a storm the watchdog drops and
  restores after a polling interval without pause frames — neither action nor restoration
  time is configurable, so :meth:`CumulusNvue.desired` drops ``restoration_ms``).

A change (``render_changes``) repeats ``roce mode`` and the egress-queue mapping, unsets a
collection (PFC and pool ``switch-priority``) before setting its new members, and unsets the
scheduler entry of a class the plan leaves unscheduled: on a switch that is not yet in RoCE
mode, or that another plan left with more lossless priorities or weights, the changed values
alone are refused (weights above 100 %, Cumulus Linux 5.14 guide, "Egress Scheduler") or keep
stale members (``nv set`` adds to a collection). Checked live against the lab's NVUE switch
(tests/unit/test_lab_nvue_driver.py, docs/lab-nvue.md).

Transaction ("Config and Action Commands", Cumulus Linux 5.x command reference): the ``nv
set`` lines stage a pending revision (``nv config detach`` discards it if a line is refused),
``nv config apply --confirm <N>s -y`` applies it and rolls back by itself unless confirmed in
time; confirm = ``nv config apply --confirm-yes`` then ``nv config save``; rollback = ``nv
config apply --confirm-no`` (the timer would do the same).

read_state parses ``nv config show -o json`` (``[{"header": …}, {"set": <tree>}]``, the tree
keyed like the CLI path, as the NVUE REST API's ``/nvue_v1/?rev=applied`` returns it); values
that are not set take the documented defaults (RoCE-mode defaults when RoCE is on).
read_counters parses ``nv show interface <if> counters qos -o json`` and ``nv show interface
<if> qos pfc-watchdog -o json`` (tables documented as ``egress-queue-stats``,
``ingress-buffer-stats``, ``pfc-stats``, ``port-stats``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from math import ceil
from typing import Any, ClassVar

from agent.device.platforms._common import (
    SwitchWide,
    class_selector_map,
    dscp_groups,
    expand_ranges,
    majority,
    natural_key,
    run_checked,
    show_json,
    watchdog_multiples,
)
from agent.device.platforms._trim import (
    NVUE_ABSENT,
    TRIM_OFF,
    TrimTally,
    nvue_class_trim,
    nvue_port_trim,
    refusal,
    with_trim,
    with_trim_unread,
)
from agent.device.platforms.base import Connection, Platform, PlatformError, Transaction
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
    TrimState,
    WatchdogCounters,
    WatchdogState,
)
from agent.intent.plan import DevicePlan

QOS = "nv set qos"
TRUST_TO_NVUE = {"dscp": "l3", "pcp": "l2"}
NVUE_TO_TRUST = {"l3": "dscp", "l2": "pcp", "port": "none", "both": "both"}
# Defaults from the 5.8 user guide: the default ECN profile marks TC 0 at 150000-1500000 B,
# 100 %; RoCE mode adds TC 3 and schedules TC 0 and 3 at DWRR 50 % with TC 6 strict.
DEFAULT_ECN = EcnState(min_bytes=150000, max_bytes=1500000, max_probability=100)
DEFAULT_WATCHDOG_POLL_MS = 100
DEFAULT_WATCHDOG_ROBUSTNESS = 3
PROFILES = SwitchWide("cumulus_nvue", "NVUE's switch-wide default-global profiles")
CONFIG_COMMAND = "nv config show -o json"
CONFIRM_YES = "nv config apply --confirm-yes"


def _int(value: Any, default: int = 0) -> int:
    """NVUE JSON numbers may come as numbers or strings (``"200"``); units are never kept."""
    try:
        return int(str(value).split()[0])
    except (ValueError, IndexError):
        return default


def _csv(values: list[int]) -> str:
    return ",".join(map(str, values))


# ---------------------------------------------------------------------- one renderer per section


def _roce_mode_lines(pfc: tuple[int, ...], trim: bool = False) -> list[str]:
    """``roce mode``: in every render that changes something. The rest of the render assumes
    RoCE's defaults (only TC 0, 3 and 6 scheduled); on a switch without RoCE the default
    scheduler gives every queue 12 or 13 % (QoS guide, "Egress Scheduler") and the plan's
    weights would add up past the documented limit of 100. Setting the mode a switch already
    has changes nothing in NVUE's object model. A trimming class is ``lossy-multi-tc``
    ("Packet Trimming", "Packet Trimming with RoCE")."""
    mode = "lossy-multi-tc" if trim else ("lossless" if pfc else "lossy")
    return [f"{QOS} roce mode {mode}"]


TRIM = "nv set system forwarding packet-trim"
# What ``lossy-multi-tc`` implies when nothing else is set: "the default packet trimming
# profile": trimming on, DSCP 11, size 256, switch priority 4, eligibility TC 1, 2 and 3 on
# every port (Cumulus Linux, "Packet Trimming with Default Profile").
TRIM_DEFAULTS = {"size": 256, "dscp": 11, "switch-priority": 4}
TRIM_DEFAULT_CLASSES = (1, 2, 3)


def _trim_lines(desired: QosState, actual: QosState | None) -> list[str]:
    """``nv set system forwarding packet-trim ...`` and each port's egress eligibility: every
    value explicit, as the rest of the render ("Packet Trimming", "Configure Packet
    Trimming"); ``state disabled`` when trimming ends."""
    trim = desired.trim
    if trim is None:
        had = actual is not None and actual.trim is not None
        return [f"{TRIM} state disabled"] if had else []
    lines = []
    if actual is None or actual.trim != trim:
        lines += [f"{TRIM} state enabled", f"{TRIM} size {trim.size_bytes}",
                  f"{TRIM} remark dscp {trim.dscp}",
                  f"{TRIM} switch-priority {trim.priority}"]  # fmt: skip
    for name, want in desired.interfaces.items():
        have = actual.interfaces.get(name) if actual else None
        if want.trim_queues and (have is None or have.trim_queues != want.trim_queues):
            classes = _csv(list(want.trim_queues))
            lines.append(f"nv set interface {name} packet-trim egress-eligibility "
                         f"traffic-class {classes}")  # fmt: skip
    return lines


DEFAULT_TRIM = "packet-trim-default"


def _trim_settings(tree: dict[str, Any]) -> dict[str, Any]:
    settings = tree.get("system", {}).get("forwarding", {}).get("packet-trim", {})
    return settings if isinstance(settings, dict) else {}


def _trim_from(tree: dict[str, Any], roce: _Roce) -> TrimState | None:
    """``system forwarding packet-trim``, or the default profile's values (lossy-multi-tc,
    or ``profile packet-trim-default``: "Enables packet trimming")."""
    settings = _trim_settings(tree)
    default_profile = roce.trims or settings.get("profile") == DEFAULT_TRIM
    state = settings.get("state", "enabled" if default_profile else "disabled")
    if state != "enabled":
        return None
    remark = settings.get("remark", {})
    dscp = remark.get("dscp", TRIM_DEFAULTS["dscp"]) if isinstance(remark, dict) else remark
    return TrimState(
        size_bytes=_int(settings.get("size"), TRIM_DEFAULTS["size"]),
        dscp=None if str(dscp) == "port-level" else _int(dscp),
        priority=_int(settings.get("switch-priority"), TRIM_DEFAULTS["switch-priority"]),
    )


def _trim_classes_from(
    entry: dict[str, Any], trim: TrimState | None, default_profile: bool
) -> tuple[int, ...]:
    """A port's ``packet-trim egress-eligibility traffic-class`` keys. Where none is set: the
    default profile's TC 1-3 (lossy-multi-tc, or ``profile packet-trim-default``), else none
    ("By default, port eligibility is disabled for all ports and traffic classes")."""
    if trim is None:
        return ()
    eligibility = entry.get("packet-trim", {}).get("egress-eligibility", {})
    keys = eligibility.get("traffic-class", {}) if isinstance(eligibility, dict) else {}
    if not keys:
        return TRIM_DEFAULT_CLASSES if default_profile else ()
    where = "interface packet-trim egress-eligibility traffic-class key"
    return tuple(sorted({tc for key in keys for tc in expand_ranges(str(key), where)}))


def _trust_lines(desired: QosState, actual: QosState | None) -> list[str]:
    if actual is not None and actual.trust == desired.trust:
        return []
    if desired.trust not in TRUST_TO_NVUE:
        raise PlatformError(f"cumulus_nvue: cannot render trust {desired.trust!r}")
    return [f"{QOS} mapping default-global trust {TRUST_TO_NVUE[desired.trust]}"]


def _dscp_lines(desired: QosState, actual: QosState | None) -> list[str]:
    """One ``dscp D,D,… switch-priority P`` line per priority, for the DSCPs that differ."""
    wanted = {
        d: desired.dscp_to_priority[d]
        for d in DSCPS
        if actual is None or actual.dscp_to_priority.get(d) != desired.dscp_to_priority[d]
    }
    if not wanted:
        return []
    return [
        f"{QOS} mapping default-global dscp {_csv(dscps)} switch-priority {priority}"
        for priority, dscps in dscp_groups({**dict.fromkeys(DSCPS, -1), **wanted}).items()
        if priority >= 0
    ]


def _egress_queue_mapping_lines() -> list[str]:
    """Priority P to traffic class P (the model's premise), in every render that changes
    something: RoCE mode maps every priority but 3 and 6 to TC 0 (RoCE guide, "Default RoCE
    Configuration"), and read-back does not read this map, so it is always set."""
    return [
        f"{QOS} egress-queue-mapping default-global switch-priority {priority} "
        f"traffic-class {priority}"
        for priority in PRIORITIES
    ]


def _pfc_lines(pfc: tuple[int, ...], have: tuple[bool, tuple[int, ...]] | None) -> list[str]:
    """``switch-priority`` is a collection (``[switch-priority]`` in ``nv show qos pfc
    default-global``, QoS guide, "Priority Flow Control"): ``nv set`` adds members, so a
    change first unsets the members the switch has (and the pools' members with them)."""
    if have == (bool(pfc), tuple(pfc)):
        return []
    lines = []
    if have is not None:
        lines.append("nv unset qos pfc default-global switch-priority")
        if list(have[1]) not in ([], [3]):
            lines.append("nv unset qos traffic-pool roce-lossless switch-priority")
            lines.append("nv unset qos traffic-pool default-lossy switch-priority")
    if pfc:
        lines.append(f"{QOS} pfc default-global switch-priority {_csv(list(pfc))}")
        lines.append(f"{QOS} pfc default-global tx enable")
        lines.append(f"{QOS} pfc default-global rx enable")
    if list(pfc) not in ([], [3]):
        # RoCE mode reserves only priority 3 for the lossless pool.
        others = [p for p in PRIORITIES if p not in pfc]
        lines.append(f"{QOS} traffic-pool roce-lossless switch-priority {_csv(list(pfc))}")
        lines.append(f"{QOS} traffic-pool default-lossy switch-priority {_csv(others)}")
    return lines


QueueChange = tuple[int, QueueState, QueueState | None]  # (traffic class, wanted, present)


def _queues_that_differ(
    queues: dict[int, QueueState], have: dict[int, QueueState] | None
) -> list[QueueChange]:
    """Every traffic class whose settings differ (all of them when nothing is known)."""
    changed = []
    for tc in PRIORITIES:
        mine = queues.get(tc) or QueueState()
        theirs = have.get(tc) if have is not None else None
        if theirs is None or theirs != mine:
            changed.append((tc, mine, theirs))
    return changed


def _pfc_as_read(present: InterfaceState | None) -> tuple[bool, tuple[int, ...]] | None:
    return None if present is None else (present.pfc_enabled, present.pfc_priorities)


def _queues_as_read(present: InterfaceState | None) -> dict[int, QueueState] | None:
    if present is None:
        return None
    return {tc: present.queues.get(tc) or QueueState() for tc in PRIORITIES}


def _congestion_control_lines(changed: list[QueueChange]) -> list[str]:
    """ECN per traffic class; ``ecn disable`` where the defaults (TC 0 and 3) would mark."""
    lines = []
    for tc, mine, theirs in changed:
        base = f"{QOS} congestion-control default-global traffic-class {tc}"
        if mine.ecn is not None and (theirs is None or theirs.ecn != mine.ecn):
            lines += [
                f"{base} ecn enable",
                f"{base} min-threshold {mine.ecn.min_bytes}",
                f"{base} max-threshold {mine.ecn.max_bytes}",
                f"{base} probability {mine.ecn.max_probability}",
                f"{base} red disable",
            ]
        elif mine.ecn is None and (
            (theirs is None and tc in (0, 3)) or (theirs is not None and theirs.ecn)
        ):
            lines.append(f"{base} ecn disable")
    return lines


def _egress_scheduler_lines(changed: list[QueueChange]) -> list[str]:
    """A class the plan leaves unscheduled loses the weight the switch gives it (``nv unset``
    back to RoCE's default, none for classes other than 0, 3 and 6): a weight left behind
    counts against the documented limit ("The combined total of values you assign to
    bw_percent must be less than or equal to 100", QoS guide, "Egress Scheduler")."""
    lines = []
    for tc, mine, theirs in changed:
        sched = f"{QOS} egress-scheduler default-global traffic-class {tc}"
        if mine.strict and (theirs is None or not theirs.strict):
            lines.append(f"{sched} mode strict")
        elif mine.bandwidth_percent is not None and (
            theirs is None or theirs.bandwidth_percent != mine.bandwidth_percent
        ):
            lines += [f"{sched} mode dwrr", f"{sched} bw-percent {mine.bandwidth_percent}"]
        elif (
            not mine.strict
            and mine.bandwidth_percent is None
            and theirs is not None
            and (theirs.strict or theirs.bandwidth_percent is not None)
        ):
            lines.append(f"nv unset qos egress-scheduler default-global traffic-class {tc}")
    return lines


# ---------------------------------------------------------------------- configuration readers


@dataclass(frozen=True)
class _Roce:
    """``qos roce``: whether RoCE mode is on (its defaults apply) and whether it is lossless."""

    on: bool
    lossless: bool
    trims: bool = False  # mode lossy-multi-tc: the default trimming profile applies

    @classmethod
    def of(cls, qos: dict[str, Any]) -> _Roce:
        roce = qos.get("roce", {})
        on = roce.get("enable", "off") == "on" or "mode" in roce
        mode = roce.get("mode", "lossless")
        return cls(on=on, lossless=on and mode == "lossless", trims=on and mode == "lossy-multi-tc")


def _dscp_map_from(mapping: dict[str, Any]) -> dict[int, int]:
    dscp_map = class_selector_map()  # NVUE's documented default map
    for dscp, entry in mapping.get("dscp", {}).items():
        for d in expand_ranges(dscp, f"qos mapping default-global dscp key {dscp!r}"):
            dscp_map[d] = _int(entry.get("switch-priority"))
    return dscp_map


def _pfc_from(qos: dict[str, Any], roce: _Roce) -> tuple[bool, tuple[int, ...]]:
    """(PFC on, lossless priorities): the default-global profile, else RoCE mode's."""
    profile = qos.get("pfc", {}).get("default-global")
    if profile is None:
        return roce.lossless, (3,) if roce.lossless else ()
    keys = profile.get("switch-priority", {})
    priorities = tuple(
        sorted(p for key in keys for p in expand_ranges(key, "qos pfc switch-priority key"))
    )
    enabled = all(profile.get(direction, "enable") == "enable" for direction in ("tx", "rx"))
    return bool(priorities) and enabled, priorities


def _traffic_classes(qos: dict[str, Any], table: str) -> dict[int, dict[str, Any]]:
    """``qos <table> default-global traffic-class``, keyed by single traffic class."""
    entries = qos.get(table, {}).get("default-global", {}).get("traffic-class", {})
    what = f"qos {table} default-global traffic-class key"
    return {tc: entry for key, entry in entries.items() for tc in expand_ranges(key, what)}


def _queue_from(qos: dict[str, Any], roce: _Roce, tc: int) -> QueueState | None:
    """A traffic class's ECN and scheduling: set values over the (RoCE-mode) defaults."""
    state = QueueState(ecn=_ecn_from(qos, roce, tc), **_scheduling_from(qos, roce, tc))
    return None if state == QueueState() else state


def _ecn_from(qos: dict[str, Any], roce: _Roce, tc: int) -> EcnState | None:
    default = DEFAULT_ECN if tc == 0 or (roce.on and tc == 3) else None
    entry = _traffic_classes(qos, "congestion-control").get(tc)
    if entry is None:
        return default
    if entry.get("ecn", "enable") != "enable":
        return None
    base = default or DEFAULT_ECN
    return EcnState(
        min_bytes=_int(entry.get("min-threshold"), base.min_bytes),
        max_bytes=_int(entry.get("max-threshold"), base.max_bytes),
        max_probability=_int(entry.get("probability"), base.max_probability),
    )


def _scheduling_from(qos: dict[str, Any], roce: _Roce, tc: int) -> dict[str, Any]:
    entry = _traffic_classes(qos, "egress-scheduler").get(tc)
    if entry is None:
        strict, weight = _default_scheduling(roce, tc)
    else:
        strict = entry.get("mode") == "strict"
        weight = None if strict else _int(entry.get("bw-percent"), 0) or None
    return {"strict": strict, "bandwidth_percent": weight}


def _default_scheduling(roce: _Roce, tc: int) -> tuple[bool, int | None]:
    """(strict, DWRR weight) by default: RoCE mode's 50/50 with TC 6 strict, else 12/13 %."""
    if not roce.on:
        return False, 12 + tc % 2
    return {0: (False, 50), 3: (False, 50), 6: (True, None)}.get(tc, (False, None))


def _port_watchdog_on(entry: dict[str, Any] | None) -> bool:
    port_wd = (entry or {}).get("qos", {}).get("pfc-watchdog")
    return port_wd is not None and (port_wd or {}).get("state", "enable") != "disable"


def _watchdog_from(qos: dict[str, Any], enabled: bool) -> WatchdogState:
    """Detection = polling × robustness; the watchdog always drops."""
    if not enabled:
        return WatchdogState()
    settings = qos.get("pfc-watchdog", {})
    poll = _int(settings.get("polling-interval"), DEFAULT_WATCHDOG_POLL_MS)
    robustness = _int(settings.get("robustness"), DEFAULT_WATCHDOG_ROBUSTNESS)
    return WatchdogState(
        enabled=True, detection_ms=poll * robustness, polling_ms=poll, action="drop"
    )


class CumulusNvue(Platform):
    name: ClassVar[str] = "cumulus_nvue"
    netmiko_device_type: ClassVar[str] = "linux"
    managed: ClassVar[frozenset[str]] = Platform.managed | {"trim", "trim_queues"}

    def desired(self, device: DevicePlan) -> QosState:
        state = super().desired(device)
        if not state.watchdog.enabled:
            return state
        # Restoration is not configurable on Cumulus (the watchdog restores after a quiet
        # polling interval): neither rendered nor read back, so not expected.
        return state.model_copy(
            update={"watchdog": state.watchdog.model_copy(update={"restoration_ms": None})}
        )

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        lines = self.render_changes(self.desired(device), None)
        cable = max((port.cable_m for port in device.ports if port.pfc_priorities), default=0)
        if cable:
            lines.insert(
                self._pfc_position(lines),
                f"{QOS} pfc default-global cable-length {ceil(cable)}",
            )
        return lines

    @staticmethod
    def _pfc_position(lines: list[str]) -> int:
        last = [i for i, line in enumerate(lines) if line.startswith(f"{QOS} pfc default-global")]
        return last[-1] + 1 if last else len(lines)

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """``nv set`` lines for every setting that differs (all of them when ``actual`` is None).

        NVUE's profiles are switch-wide, so per-port differences in PFC, ECN or scheduling
        cannot be expressed here and are refused.
        """
        interfaces = list(desired.interfaces.values())
        pfc = PROFILES.uniform([i.pfc_priorities for i in interfaces], "PFC priorities", ())
        queues = PROFILES.uniform([i.queues for i in interfaces], "queue settings", {})
        present = PROFILES.as_read(actual)
        changed = _queues_that_differ(queues, _queues_as_read(present))
        mapping = [*_trust_lines(desired, actual), *_dscp_lines(desired, actual)]
        rest = [
            *_pfc_lines(pfc, _pfc_as_read(present)),
            *_congestion_control_lines(changed),
            *_egress_scheduler_lines(changed),
            *self._watchdog_lines(desired, actual),
        ]
        rest += _trim_lines(desired, actual)
        if actual is not None and not mapping and not rest:
            return []
        trims = desired.trim is not None
        return [*_roce_mode_lines(pfc, trims), *mapping, *_egress_queue_mapping_lines(), *rest]

    @staticmethod
    def _watchdog_lines(desired: QosState, actual: QosState | None) -> list[str]:
        """Off is rendered too: "To disable PFC watchdog, run the ``nv unset interface
        <interface> qos pfc-watchdog`` command" (QoS guide, "PFC Watchdog")."""
        watchdog = desired.watchdog
        if not watchdog.enabled:
            if actual is not None and not actual.watchdog.enabled:
                return []
            return [f"nv unset interface {name} qos pfc-watchdog" for name in desired.interfaces]
        if watchdog.action not in (None, "drop"):
            raise PlatformError(
                f"cumulus_nvue: PFC watchdog action {watchdog.action!r} is not configurable; "
                "Cumulus Linux always drops on a pause storm"
            )
        polling, robustness, _ = watchdog_multiples(watchdog, "cumulus_nvue")
        lines = []
        have = actual.watchdog if actual else None
        if have is None or have.polling_ms != polling or have.detection_ms != watchdog.detection_ms:
            lines.append(f"{QOS} pfc-watchdog polling-interval {polling}")
            lines.append(f"{QOS} pfc-watchdog robustness {robustness}")
        if have is None or not have.enabled:
            lines += [f"nv set interface {name} qos pfc-watchdog" for name in desired.interfaces]
        return lines

    # ------------------------------------------------------------------ read state

    def read_state(self, conn: Connection) -> QosState:
        return self.state_from_config(self._config(conn))

    @staticmethod
    def _config(conn: Connection) -> dict[str, Any]:
        return CumulusNvue.config_tree(show_json(conn, CONFIG_COMMAND, object))

    @staticmethod
    def config_tree(document: Any) -> dict[str, Any]:
        """The configuration tree, from ``[{"header": …}, {"set": tree}]`` or a bare tree."""
        if isinstance(document, list):
            for item in document:
                if isinstance(item, dict) and "set" in item:
                    tree: dict[str, Any] = item["set"]
                    return tree
            return {}
        if isinstance(document, dict):
            return document
        raise PlatformError("cumulus_nvue: configuration is neither a list nor an object")

    @staticmethod
    def state_from_config(tree: dict[str, Any]) -> QosState:
        qos = tree.get("qos", {})
        roce = _Roce.of(qos)
        mapping = qos.get("mapping", {}).get("default-global", {})
        trust = NVUE_TO_TRUST.get(mapping.get("trust", "both" if roce.on else "l2"), "none")
        dscp_map = _dscp_map_from(mapping)
        pfc_on, priorities = _pfc_from(qos, roce)
        queues = {
            tc: state for tc in PRIORITIES if (state := _queue_from(qos, roce, tc)) is not None
        }
        trim = _trim_from(tree, roce)
        default_profile = roce.trims or _trim_settings(tree).get("profile") == DEFAULT_TRIM
        interfaces: dict[str, InterfaceState] = {}
        watchdog_ports: list[bool] = []
        for name, entry in tree.get("interface", {}).items():
            if not name.startswith("swp"):
                continue
            interfaces[name] = InterfaceState(
                pfc_enabled=pfc_on, pfc_priorities=priorities, queues=queues,
                trim_queues=_trim_classes_from(entry, trim, default_profile),
            )  # fmt: skip
            watchdog_ports.append(_port_watchdog_on(entry))
        return QosState(
            trust=trust,
            dscp_to_priority=dscp_map,
            watchdog=_watchdog_from(qos, bool(majority(watchdog_ports))),
            interfaces=dict(sorted(interfaces.items(), key=lambda item: natural_key(item[0]))),
            trim=trim,
        )

    # ------------------------------------------------------------------ counters

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        collected_at = time.time()
        tree = self._config(conn)
        names = sorted(
            (n for n in tree.get("interface", {}) if n.startswith("swp")), key=natural_key
        )
        qos_counters = {}
        watchdogs = {}
        for name in names:
            qos_counters[name] = show_json(conn, f"nv show interface {name} counters qos -o json")
            watchdogs[name] = show_json(conn, f"nv show interface {name} qos pfc-watchdog -o json")
        state = self.state_from_config(tree)
        counters = self.counters_from_json(
            conn.device, collected_at, state, qos_counters, watchdogs
        )
        if state.trim is None:
            return with_trim_unread(counters, TRIM_OFF)
        trimming = [n for n in names if state.interfaces[n].trim_queues]
        return self.trim_from_text(counters, *self._trim_outputs(conn, trimming))

    # Per interface, 5.19's form first (the NVUE reference's), then 5.15's.
    TRIM_PORTS_COMMAND: ClassVar[str] = "nv show system forwarding packet-trim counters"
    TRIM_CLASS_COMMANDS: ClassVar[tuple[str, ...]] = (
        "nv show interface {} counters packet-trim",
        "nv show interface {} packet-trim counters",
    )

    def _trim_outputs(self, conn: Connection, names: list[str]) -> tuple[str, dict[str, str]]:
        ports = conn.show(self.TRIM_PORTS_COMMAND)
        classes: dict[str, str] = {}
        forms = list(self.TRIM_CLASS_COMMANDS)
        for name in names:
            while forms:
                output = conn.show(forms[0].format(name))
                if refusal(output) is None:
                    classes[name] = output
                    break
                forms.pop(0)  # this release has the other form (or neither)
        return ports, classes

    @classmethod
    def trim_from_text(cls, counters: Counters, ports: str, classes: dict[str, str]) -> Counters:
        """``counters`` with the trim family of ``nv show system forwarding packet-trim
        counters`` (``ports``) and each trimming interface's per-class table (``classes``;
        recorded outputs in tests), or why not read."""
        why = refusal(ports)
        if why is not None:
            return with_trim_unread(
                counters,
                f"{cls.TRIM_PORTS_COMMAND!r}: {why} (trim counters since Cumulus Linux 5.15)",
            )
        tally = TrimTally()
        port_why = nvue_port_trim(tally, ports)
        for name, output in classes.items():
            nvue_class_trim(tally, name, output)
        unread = tally.unread(NVUE_ABSENT)
        if port_why is not None and "sent" in unread:
            unread["sent"] = port_why
        return with_trim(counters, tally.result(), unread)

    @staticmethod
    def counters_from_json(
        device: str,
        collected_at: float,
        state: QosState,
        qos_counters: dict[str, dict[str, Any]],
        watchdogs: dict[str, dict[str, Any]],
    ) -> Counters:
        """Normalize per-interface ``counters qos`` and ``qos pfc-watchdog`` JSON documents.

        NVUE counts ECN marks per port, not per queue: they are attributed to the queue with
        ECN enabled when exactly one has it, and to none when several do (the split is unknown).
        """
        interfaces: dict[str, InterfaceCounters] = {}
        for name, data in sorted(qos_counters.items(), key=lambda item: natural_key(item[0])):
            configured = state.interfaces.get(name)
            ecn_queues = [q for q, s in (configured.queues if configured else {}).items() if s.ecn]
            marked = _int(data.get("port-stats", {}).get("tx-stats", {}).get("ecn-marked-packets"))
            pfc = data.get("pfc-stats", {})
            egress = data.get("egress-queue-stats", {})
            ingress = data.get("ingress-buffer-stats", {})
            queues = {
                tc: QueueCounters(
                    tx_packets=_int(egress.get(str(tc), {}).get("tx-frames")),
                    tx_bytes=_int(egress.get(str(tc), {}).get("tx-bytes")),
                    dropped_packets=_int(egress.get(str(tc), {}).get("wred-discards")),
                    ecn_marked_packets=marked if ecn_queues == [tc] else 0,
                )
                for tc in PRIORITIES
            }
            status = watchdogs.get(name, {}).get("status", {})
            watchdog = {}
            for tc, entry in status.items():
                deadlocks = _int(entry.get("deadlock-count"))
                stormed = str(entry.get("status", "OK")).upper() == "DEADLOCK"
                # NVUE reports detections only; every storm but an ongoing one was restored.
                watchdog[int(tc)] = WatchdogCounters(
                    storms_detected=deadlocks,
                    storms_restored=max(deadlocks - int(stormed), 0),
                    stormed=stormed,
                )
            interfaces[name] = InterfaceCounters(
                pfc_rx=tuple(_int(pfc.get(str(p), {}).get("rx-pause-frames")) for p in PRIORITIES),
                pfc_tx=tuple(_int(pfc.get(str(p), {}).get("tx-pause-frames")) for p in PRIORITIES),
                queues=queues,
                watchdog=watchdog,
                headroom_drops=tuple(
                    _int(ingress.get(str(p), {}).get("rx-buffer-discards")) for p in PRIORITIES
                ),
            )
        return Counters(device=device, collected_at=collected_at, interfaces=interfaces)

    # ------------------------------------------------------------------ change (the base's flow)

    # The ``nv set`` lines stage a pending revision; nothing needs opening first.

    def stage(self, conn: Connection, txn: Transaction) -> None:
        for line in txn.lines:
            run_checked(conn, line)

    def commit(self, conn: Connection, txn: Transaction, confirm_timeout_s: int) -> None:
        run_checked(conn, f"nv config apply --confirm {confirm_timeout_s}s -y")

    def abort(self, conn: Connection, txn: Transaction) -> None:
        # Nothing applied yet (or the apply failed): drop the staged revision.
        conn.show("nv config detach")

    def rollback(self, conn: Connection, txn: Transaction) -> None:
        output = conn.show("nv config apply --confirm-no")
        txn.rolled_back = True
        if "error" in output.lower():
            txn.notes.append(f"explicit rollback failed, timer will: {output.strip()}")

    def confirm_change(self, conn: Connection, txn: Transaction) -> None:
        run_checked(conn, CONFIRM_YES)

    # ------------------------------------------------------------------ pending revisions

    # Two kinds: an applied revision waiting for ``--confirm-yes`` (``nv config apply
    # --confirm-status`` "shows the amount of time left before the automatic rollback",
    # NVUE reference, Config Commands), and set/unset edits not applied yet (``nv config
    # diff`` non-empty: "configuration that is set and unset but not yet applied", NVUE
    # Common Options, --pending). The exact wording of --confirm-status was not available;
    # any time span in it is read as the time left, and no time span as nothing pending.
    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        return self.sessions_from_text(
            conn.device, conn.show("nv config apply --confirm-status"), conn.show("nv config diff")
        )

    @staticmethod
    def sessions_from_text(device: str, status: str, staged: str) -> list[PendingSession]:
        found = []
        spans = re.findall(
            r"(\d+)\s*(h|hours?|m|min|minutes?|s|sec|seconds?)\b", status, flags=re.I
        )
        if spans:
            scale = {"h": 3600, "m": 60, "s": 1}
            left = sum(int(value) * scale[unit[0].lower()] for value, unit in spans)
            found.append(
                PendingSession(device, "applied revision", "NVUE revision",
                               "waiting for --confirm-yes", rollback_in_s=float(left), live=True)
            )  # fmt: skip
        if staged.strip() and staged.strip() not in ("{}", "[]"):
            found.append(
                PendingSession(device, "pending revision", "NVUE revision",
                               "set, not applied", live=False)
            )  # fmt: skip
        return found

    def abort_session(self, conn: Connection, session: PendingSession) -> None:
        conn.show("nv config apply --confirm-no" if session.live else "nv config detach")

    def confirm_session(self, conn: Connection, session: PendingSession) -> None:
        run_checked(conn, CONFIRM_YES)
        self.save(conn)

    def save(self, conn: Connection) -> None:
        run_checked(conn, "nv config save")

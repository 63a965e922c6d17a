"""An applied NVUE tree -> what the switch does (:class:`Effective`) -> the shared model.

Defaults, from NVIDIA's Cumulus Linux 5.14 user guide (CumulusNetworks/docs at the commits
named in :mod:`lab.mgmt.nvue.schema`):

- without RoCE: trust ``l2`` (PCP) with switch priority = PCP; DSCP map ``dscp >> 3`` when
  ``l3`` is trusted ("Trust DSCP" table); switch priority P -> traffic class P ("Egress
  Queues"); ECN on traffic class 0 at 150000-1500000 bytes, probability 100, RED off
  ("Congestion Control (ECN)"); DWRR 12 % on queues 0,2,4,6 and 13 % on 1,3,5,7 ("Egress
  Scheduler"); no PFC; watchdog polling 100 ms, robustness 3 ("PFC Watchdog").
- ``qos roce`` (RoCE page, "Default RoCE Configuration" and the ``nv show qos roce`` sample):
  trust ``pcp,dscp``; switch priority 3 -> TC 3 (RoCE), 6 -> TC 6 (CNP), every other -> TC 0;
  TC 6 strict, TC 0 and 3 DWRR 50 %; ECN on TC 0 and 3, min 146.48 KB (150000 B), max 1.43 MB
  (1500000 B), probability 100; in ``lossless`` mode PFC on switch priority 3, rx and tx
  enabled. So DSCP 26 -> switch priority 3 -> TC 3, and DSCP 48 (CNP) -> 6 -> TC 6.

Explicit settings in the tree override those defaults field by field.

Packet trimming (Cumulus Linux 5.15 "Packet Trimming", CumulusNetworks/docs commit 504c13c2;
RoCE page 5.18, commit 364b02c0): ``qos roce mode lossy-multi-tc`` or ``system forwarding
packet-trim profile packet-trim-default`` apply the default profile -- state enabled, size 256,
remark DSCP 11, switch priority 4, egress eligibility TC 1, 2 and 3 on every port -- and
explicit ``packet-trim`` settings override it field by field; trimming enabled by hand trims
only the traffic classes a port lists ("By default, port eligibility is disabled for all ports
and traffic classes").  Trimmed frames leave from the traffic class of their switch priority.
A lossless class never trims (it pauses), nor the class trimmed frames go to.  ``remark dscp
port-level`` is refused: the lab data plane remarks with one DSCP.

The lab's data plane has one traffic class per queue and trusts DSCP or nothing: ``both``
(``pcp,dscp``) is DSCP for IP traffic (the "Classification" table: "PCP and DSCP, IP ->
Accept incoming DSCP"), ``l2`` is CoS, ``port`` is untrusted. The PFC watchdog detects after
``polling-interval × robustness`` and restores after one quiet polling interval, always
dropping ("PFC Watchdog"), which is ``timeout = poll × robustness``, ``recovery = poll``,
``action drop`` in the shared model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lab.mgmt.model import (
    EcnThreshold,
    SwitchConfig,
    TrimSettings,
    TrustMode,
    TxQueue,
    WatchdogDefaults,
)
from lab.mgmt.names import nos_port_index
from lab.mgmt.nvue.errors import NvueError
from lab.mgmt.nvue.tree import Tree, get

PRIORITIES = range(8)
DEFAULT_ECN_MIN = 150000
DEFAULT_ECN_MAX = 1500000
DEFAULT_ECN_PROBABILITY = 100
DEFAULT_POLL_MS = 100
DEFAULT_ROBUSTNESS = 3
DEFAULT_CABLE_M = 10  # "All PFC commands": "The default is 10 meters"
ROCE_CABLE_M = 100  # the ``nv show qos roce`` sample's cable-length
ROCE_LOSSLESS_MODES = ("lossless", "lossless-single-ipool")
TRIM_DEFAULT_PROFILE = "packet-trim-default"
TRIM_DEFAULTS = {"size": 256, "dscp": 11, "switch-priority": 4}
TRIM_DEFAULT_CLASSES = (1, 2, 3)
_TRUST: dict[str, TrustMode] = {"l3": "dscp", "both": "dscp", "l2": "cos", "port": "disabled"}


@dataclass(frozen=True)
class Ecn:
    """ECN on one traffic class."""

    min_bytes: int
    max_bytes: int
    probability: int
    red: bool = False


@dataclass(frozen=True)
class Scheduling:
    """A traffic class's egress scheduling: strict, or DWRR with a weight (None: 0 %)."""

    strict: bool
    weight: int | None


@dataclass
class Effective:
    """What an NVUE tree configures, defaults included."""

    roce: bool
    mode: str | None
    trust: str
    dscp_to_sp: dict[int, int]
    sp_to_tc: dict[int, int]
    pfc_priorities: list[int]
    pfc_tx: bool
    pfc_rx: bool
    cable_length: int
    ecn: dict[int, Ecn]
    scheduling: dict[int, Scheduling]
    watchdog_poll_ms: int
    watchdog_robustness: int
    watchdog_ports: list[str] = field(default_factory=list)
    # Packet trimming: (size, DSCP, switch priority), None when off; per port its eligible TCs.
    trim: tuple[int, int, int] | None = None
    trim_classes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def pfc_on(self) -> bool:
        """PFC runs when some priority is lossless and pause frames go both ways."""
        return bool(self.pfc_priorities) and self.pfc_tx and self.pfc_rx

    def dscp_to_tc(self) -> dict[int, int]:
        """DSCP -> switch priority -> traffic class."""
        return {d: self.sp_to_tc[sp] for d, sp in self.dscp_to_sp.items()}


def effective(tree: Tree) -> Effective:
    """Defaults overlaid with the tree's settings."""
    qos = tree.get("qos", {})
    roce_node = qos.get("roce")
    roce = isinstance(roce_node, dict) and roce_node.get("enable", "on") == "on"
    mode = str(roce_node.get("mode", "lossless")) if roce and isinstance(roce_node, dict) else None
    lossless = mode in ROCE_LOSSLESS_MODES
    trim, trim_classes = _trimming(tree, mode == "lossy-multi-tc")
    return Effective(
        roce=roce,
        mode=mode,
        trust=str(get(qos, "mapping", "default-global", "trust") or ("both" if roce else "l2")),
        dscp_to_sp=_dscp_map(qos),
        sp_to_tc=_sp_to_tc(qos, roce),
        pfc_priorities=_pfc_priorities(qos, lossless),
        pfc_tx=get(qos, "pfc", "default-global", "tx") != "disable",
        pfc_rx=get(qos, "pfc", "default-global", "rx") != "disable",
        cable_length=int(
            get(qos, "pfc", "default-global", "cable-length")
            or (ROCE_CABLE_M if roce else DEFAULT_CABLE_M)
        ),
        ecn=_ecn(qos, roce),
        scheduling=_scheduling(qos, roce),
        watchdog_poll_ms=int(get(qos, "pfc-watchdog", "polling-interval") or DEFAULT_POLL_MS),
        watchdog_robustness=int(get(qos, "pfc-watchdog", "robustness") or DEFAULT_ROBUSTNESS),
        watchdog_ports=_watchdog_ports(tree),
        trim=trim,
        trim_classes=trim_classes,
    )


def _trimming(
    tree: Tree, multi_tc: bool
) -> tuple[tuple[int, int, int] | None, dict[str, tuple[int, ...]]]:
    """``system forwarding packet-trim`` with the default profile's values where it applies,
    and each port's eligible traffic classes (see the module's docstring)."""
    settings = get(tree, "system", "forwarding", "packet-trim")
    settings = settings if isinstance(settings, dict) else {}
    default_profile = multi_tc or settings.get("profile") == TRIM_DEFAULT_PROFILE
    if settings.get("state", "enabled" if default_profile else "disabled") != "enabled":
        return None, {}
    dscp = get(settings, "remark", "dscp")
    if dscp == "port-level":
        raise NvueError(
            "Error: packet-trim remark dscp port-level: the lab data plane remarks trimmed "
            "packets with one DSCP"
        )
    trim = (
        int(settings.get("size", TRIM_DEFAULTS["size"])),
        int(dscp if dscp is not None else TRIM_DEFAULTS["dscp"]),
        int(settings.get("switch-priority", TRIM_DEFAULTS["switch-priority"])),
    )
    classes: dict[str, tuple[int, ...]] = {}
    for name, entry in (tree.get("interface") or {}).items():
        keys = get(entry, "packet-trim", "egress-eligibility", "traffic-class")
        if isinstance(keys, dict) and keys:
            classes[name] = tuple(sorted(int(tc) for tc in keys))
    if default_profile:
        classes["*"] = TRIM_DEFAULT_CLASSES  # every port without its own list
    return trim, classes


def _dscp_map(qos: dict[str, Any]) -> dict[int, int]:
    found = {d: d >> 3 for d in range(64)}
    for dscp, entry in (get(qos, "mapping", "default-global", "dscp") or {}).items():
        if isinstance(entry, dict) and "switch-priority" in entry:
            found[int(dscp)] = int(entry["switch-priority"])
    return found


def _sp_to_tc(qos: dict[str, Any], roce: bool) -> dict[int, int]:
    found = {sp: (sp if sp in (3, 6) else 0) if roce else sp for sp in PRIORITIES}
    entries = get(qos, "egress-queue-mapping", "default-global", "switch-priority") or {}
    for sp, entry in entries.items():
        if isinstance(entry, dict) and "traffic-class" in entry:
            found[int(sp)] = int(entry["traffic-class"])
    return found


def _pfc_priorities(qos: dict[str, Any], lossless: bool) -> list[int]:
    explicit = get(qos, "pfc", "default-global", "switch-priority")
    if isinstance(explicit, dict) and explicit:
        return sorted(int(p) for p in explicit)
    return [3] if lossless else []


def _traffic_classes(qos: dict[str, Any], table: str) -> dict[int, dict[str, Any]]:
    entries = get(qos, table, "default-global", "traffic-class") or {}
    return {int(tc): entry for tc, entry in entries.items() if isinstance(entry, dict)}


def _ecn(qos: dict[str, Any], roce: bool) -> dict[int, Ecn]:
    marking = {0, 3} if roce else {0}
    found: dict[int, Ecn] = {}
    explicit = _traffic_classes(qos, "congestion-control")
    for tc in PRIORITIES:
        entry = explicit.get(tc, {})
        on = entry.get("ecn", "enable" if (tc in marking or entry) else "disable") == "enable"
        if not on:
            continue
        found[tc] = Ecn(
            min_bytes=int(entry.get("min-threshold", DEFAULT_ECN_MIN)),
            max_bytes=int(entry.get("max-threshold", DEFAULT_ECN_MAX)),
            probability=int(entry.get("probability", DEFAULT_ECN_PROBABILITY)),
            red=entry.get("red") == "enable",
        )
    return found


def _scheduling(qos: dict[str, Any], roce: bool) -> dict[int, Scheduling]:
    found: dict[int, Scheduling] = {}
    explicit = _traffic_classes(qos, "egress-scheduler")
    for tc in PRIORITIES:
        if roce:
            default = {
                0: Scheduling(False, 50),
                3: Scheduling(False, 50),
                6: Scheduling(True, None),
            }
            base = default.get(tc, Scheduling(False, None))
        else:
            base = Scheduling(False, 12 + tc % 2)
        entry = explicit.get(tc, {})
        strict = entry.get("mode", "strict" if base.strict else "dwrr") == "strict"
        weight = None if strict else int(entry.get("bw-percent", base.weight or 0)) or None
        found[tc] = Scheduling(strict, weight)
    return found


def _watchdog_ports(tree: Tree) -> list[str]:
    ports = []
    for name, entry in (tree.get("interface") or {}).items():
        watchdog = get(entry, "qos", "pfc-watchdog")
        if isinstance(watchdog, dict) and watchdog.get("state", "enable") == "enable":
            ports.append(name)
    return sorted(ports, key=lambda n: int(n[3:]))


# ----------------------------------------------------------------------------- shared model


def validate(state: Effective) -> None:
    """What NVUE checks before it applies ("Egress Scheduler": "The combined total of values
    you assign to bw_percent must be less than or equal to 100"; ECN: the minimum threshold
    is where marking starts, the maximum where it is total, so min <= max)."""
    total = sum(s.weight or 0 for s in state.scheduling.values() if not s.strict)
    if total > 100:
        raise NvueError(
            "Error: Invalid config: qos egress-scheduler default-global: the bw-percent of the "
            f"dwrr traffic classes adds up to {total}, more than 100"
        )
    for tc, ecn in sorted(state.ecn.items()):
        if ecn.min_bytes > ecn.max_bytes:
            raise NvueError(
                "Error: Invalid config: qos congestion-control default-global traffic-class "
                f"{tc}: min-threshold {ecn.min_bytes} is above max-threshold {ecn.max_bytes}"
            )


def to_switch_config(tree: Tree, hostname: str, eos_ports: list[str]) -> SwitchConfig:
    """The shared (EOS-shaped) model of an applied tree: switch-wide NVUE profiles on every
    port, the watchdog on the ports that enable it (:class:`NvueError` if NVUE refuses it)."""
    state = effective(tree)
    validate(state)
    config = SwitchConfig.empty(hostname, eos_ports)
    config.qos_trust = _TRUST.get(state.trust, "dscp")
    config.dscp_to_tc = state.dscp_to_tc()
    lossless_tcs = sorted({state.sp_to_tc[p] for p in state.pfc_priorities})
    queues = {tc: _queue(state, tc) for tc in PRIORITIES}
    watchdog_eos = {f"Ethernet{nos_port_index('nvue', n)}" for n in state.watchdog_ports}
    for name, interface in config.interfaces.items():
        qos = interface.qos
        qos.pfc_enabled = state.pfc_on
        qos.pfc_priorities = {tc: "no-drop" for tc in lossless_tcs} if state.pfc_on else {}
        qos.pfc_watchdog = name in watchdog_eos and state.pfc_on
        qos.tx_queues = {tc: queue for tc, queue in queues.items() if not queue.is_default()}
    if state.trim is not None:
        _trim_queues(config, state, set(lossless_tcs) if state.pfc_on else set())
    if state.watchdog_ports:
        poll = Decimal(state.watchdog_poll_ms) / 1000
        config.watchdog = WatchdogDefaults(
            timeout=poll * state.watchdog_robustness,
            recovery_time=poll,
            polling_interval=poll,
            action="drop",
        )
    return config


def _trim_queues(config: SwitchConfig, state: Effective, lossless: set[int]) -> None:
    """The shared model's trimming: the settings, and each port's trimming queues."""
    assert state.trim is not None
    size, dscp, priority = state.trim
    trim_queue = state.sp_to_tc[priority]
    config.trim = TrimSettings(size_bytes=size, dscp=dscp, queue=trim_queue)
    by_eos = {f"Ethernet{nos_port_index('nvue', n)}": c for n, c in state.trim_classes.items()}
    for name, interface in config.interfaces.items():
        classes = by_eos.get(name, state.trim_classes.get("*", ()))
        for tc in classes:
            if tc != trim_queue and tc not in lossless:
                # Ports share their queue objects (one NVUE profile): a copy per port.
                queue = interface.qos.tx_queues.get(tc) or TxQueue()
                interface.qos.tx_queues[tc] = dataclasses.replace(queue, trim=True)


def _queue(state: Effective, tc: int) -> TxQueue:
    ecn = state.ecn.get(tc)
    sched = state.scheduling[tc]
    return TxQueue(
        bandwidth_percent=sched.weight,
        strict_priority=sched.strict,
        ecn=EcnThreshold(ecn.min_bytes, "bytes", ecn.max_bytes, "bytes", ecn.probability)
        if ecn is not None
        else None,
    )

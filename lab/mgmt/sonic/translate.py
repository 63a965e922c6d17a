"""CONFIG_DB -> the lab's shared configuration model (:class:`lab.mgmt.model.SwitchConfig`).

What each table means for the data plane, as SONiC's orchagent programs it (sonic-swss
``orchagent/qosorch.cpp``, ``pfcwdorch.cpp``; field names from the YANG models):

* ``PORT_QOS_MAP|<port>.dscp_to_tc_map`` -> DSCP trust with that ``DSCP_TO_TC_MAP`` (a DSCP the
  map does not list is TC 0, SAI's default); ``dot1p_to_tc_map`` alone -> PCP trust; neither ->
  every frame in TC 0. The lab data plane has one DSCP map for the switch: ports binding
  different maps are refused.
* ``pfc_enable`` "3,4" -> PFC on, priorities 3 and 4 no-drop.
* ``QUEUE|<port>|<q>``: ``wred_profile`` with ``ecn`` other than ``ecn_none`` -> ECN marking
  with the green thresholds (bytes) and ``green_drop_probability`` as the marking probability at
  the max threshold; ``scheduler`` ``STRICT`` -> strict priority, ``DWRR``/``WRR`` ``weight`` ->
  the queue's share (the lab's ``bandwidth percent``; a port whose weights add up to more than
  100 gets them scaled to percentages, as DWRR weights are relative).
* ``PFC_WD|<port>`` -> the watchdog on that port: ``detection_time`` / ``restoration_time``
  (ms), ``GLOBAL.POLL_INTERVAL`` (ms); ``action`` drop -> drop, alert -> notify only, forward ->
  no-drop (switch-wide only). A port without an entry has no watchdog.

* Packet trimming (sonic-net/SONiC ``doc/packet_trimming/packet-trimming-design.md`` §2.6.1):
  ``BUFFER_QUEUE|<port>|<q>`` whose ``BUFFER_PROFILE`` has ``packet_discard_action`` ``trim``
  -> that queue trims, with ``SWITCH_TRIMMING|GLOBAL`` {``size``, ``dscp_value``,
  ``queue_index``}; a field left out takes the SAI proposal's default (size 128, DSCP 0, queue
  0). ``queue_index`` ``dynamic`` is the queue of the DSCP through the DSCP map; ``dscp_value``
  ``from-tc`` (asymmetric DSCP) is refused: the lab data plane has one trim DSCP. Without the
  GLOBAL entry no queue trims (the HLD: trimming is disabled by default).

Other buffer settings (BUFFER_POOL/PROFILE sizes, BUFFER_PG, CABLE_LENGTH) are kept and shown but
do not change the lab data plane, whose buffer thresholds are set by the lab (see
docs/lab-sonic.md).
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from lab.mgmt.model import (
    EcnThreshold,
    InterfaceConfig,
    QosSettings,
    SwitchConfig,
    TrimSettings,
    TxQueue,
    WatchdogDefaults,
    WatchdogPortTimer,
)
from lab.mgmt.names import nos_port_index
from lab.mgmt.sonic.configdb import ConfigDb

NUM_QUEUES = 8
# SAI-Proposal-Packet-Trimming.md's defaults (PACKET_TRIM_SIZE 128, DSCP_VALUE 0, QUEUE_INDEX 0).
TRIM_DEFAULTS = {"size": "128", "dscp_value": "0", "queue_index": "0"}


class SonicTranslationError(ValueError):
    """CONFIG_DB that is valid SONiC but that the lab data plane cannot run."""


def eos_key(sonic_name: str) -> str | None:
    """``Ethernet4`` (SONiC) -> ``Ethernet2`` (the model's key for data-plane ``eth2``)."""
    index = nos_port_index("sonic", sonic_name)
    return None if index is None else f"Ethernet{index}"


def to_switch_config(db: ConfigDb, factory: SwitchConfig) -> SwitchConfig:
    """The model the data plane should run for ``db`` (``factory`` gives hostname and ports)."""
    config = SwitchConfig.empty(factory.hostname, list(factory.interfaces))
    port_qos = {k: v for k, v in db.get("PORT_QOS_MAP", {}).items() if k != "global"}
    _classifier(config, db, port_qos)
    _watchdog_defaults(config, db.get("PFC_WD", {}))
    for sonic_name, entry in port_qos.items():
        _pfc(_interface(config, sonic_name).qos, entry)
    for key, entry in db.get("QUEUE", {}).items():
        sonic_name, _, queues = key.rpartition("|")
        settings = _interface(config, sonic_name).qos
        for queue in _expand(queues):
            settings.tx_queues[queue] = _queue(db, entry)
    for settings in (i.qos for i in config.interfaces.values()):
        _scale_weights(settings.tx_queues)
    _trimming(config, db)
    for sonic_name, entry in db.get("PFC_WD", {}).items():
        if sonic_name != "GLOBAL":
            _port_watchdog(config, _interface(config, sonic_name).qos, entry, db)
    for name in config.interfaces:
        if not any(eos_key(p) == name for p in db.get("PFC_WD", {})):
            config.interfaces[name].qos.pfc_watchdog = False
    return config


def _interface(config: SwitchConfig, sonic_name: str) -> InterfaceConfig:
    key = eos_key(sonic_name)
    if key is None or key not in config.interfaces:
        raise SonicTranslationError(f"{sonic_name} is not a port of this switch")
    return config.interfaces[key]


def _expand(text: str) -> list[int]:
    low, _, high = text.partition("-")
    queues = list(range(int(low), int(high or low) + 1))
    if any(q >= NUM_QUEUES for q in queues):
        raise SonicTranslationError(f"queue {text}: the lab switch has queues 0-7")
    return queues


def _classifier(config: SwitchConfig, db: ConfigDb, port_qos: dict[str, Any]) -> None:
    bound = {e["dscp_to_tc_map"] for e in port_qos.values() if "dscp_to_tc_map" in e}
    if len(bound) > 1:
        raise SonicTranslationError(
            f"ports bind different DSCP_TO_TC_MAPs ({', '.join(sorted(bound))}); the lab data "
            "plane has one DSCP map per switch"
        )
    if bound:
        table = db.get("DSCP_TO_TC_MAP", {}).get(next(iter(bound)), {})
        config.qos_trust = "dscp"
        config.dscp_to_tc = {d: int(table.get(str(d), 0)) for d in range(64)}
        if any(tc >= NUM_QUEUES for tc in config.dscp_to_tc.values()):
            raise SonicTranslationError("DSCP_TO_TC_MAP: the lab switch has traffic classes 0-7")
    for sonic_name, entry in port_qos.items():
        if "dscp_to_tc_map" not in entry:
            settings = _interface(config, sonic_name).qos
            settings.trust = "cos" if "dot1p_to_tc_map" in entry else "disabled"
    if not bound:
        config.qos_trust = "disabled"


def _pfc(settings: QosSettings, entry: dict[str, Any]) -> None:
    priorities = [int(p) for p in str(entry.get("pfc_enable", "")).split(",") if p.strip()]
    settings.pfc_enabled = bool(priorities)
    settings.pfc_priorities = {p: "no-drop" for p in priorities}


def _queue(db: ConfigDb, entry: dict[str, Any]) -> TxQueue:
    queue = TxQueue()
    profile = db.get("WRED_PROFILE", {}).get(entry.get("wred_profile", ""), {})
    if profile and profile.get("ecn", "ecn_none") != "ecn_none":
        queue.ecn = EcnThreshold(
            minimum=int(profile.get("green_min_threshold", 0)),
            minimum_unit="bytes",
            maximum=int(profile.get("green_max_threshold", 0)),
            maximum_unit="bytes",
            max_mark_probability=int(profile.get("green_drop_probability", 100)),
        )
    scheduler = db.get("SCHEDULER", {}).get(entry.get("scheduler", ""), {})
    kind = scheduler.get("type", "")
    if kind == "STRICT":
        queue.strict_priority = True
    elif kind in ("DWRR", "WRR") and "weight" in scheduler:
        weight = int(scheduler["weight"])
        queue.bandwidth_percent = weight
    return queue


def _trimming(config: SwitchConfig, db: ConfigDb) -> None:
    """Packet trimming: the global settings, and the queues whose buffer profile trims."""
    entry = db.get("SWITCH_TRIMMING", {}).get("GLOBAL")
    if entry is None:
        return
    fields = {**TRIM_DEFAULTS, **entry}
    if fields["dscp_value"] == "from-tc":
        raise SonicTranslationError(
            "SWITCH_TRIMMING|GLOBAL dscp_value from-tc: the lab data plane remarks trimmed "
            "packets with one DSCP"
        )
    dscp = int(fields["dscp_value"])
    queue = (
        config.dscp_to_tc.get(dscp, 0)
        if fields["queue_index"] == "dynamic"
        else int(fields["queue_index"])
    )
    if queue >= NUM_QUEUES:
        raise SonicTranslationError(f"SWITCH_TRIMMING|GLOBAL queue_index {queue}: queues 0-7")
    config.trim = TrimSettings(size_bytes=int(fields["size"]), dscp=dscp, queue=queue)
    profiles = db.get("BUFFER_PROFILE", {})
    for key, value in db.get("BUFFER_QUEUE", {}).items():
        profile = profiles.get(str(value.get("profile", "")), {})
        if profile.get("packet_discard_action") != "trim":
            continue
        sonic_name, _, queues = key.rpartition("|")
        settings = _interface(config, sonic_name).qos
        for q in _expand(queues):
            settings.tx_queues.setdefault(q, TxQueue()).trim = True


def _scale_weights(queues: dict[int, TxQueue]) -> None:
    """DWRR weights are relative shares (SAI_SCHEDULER_ATTR_SCHEDULING_WEIGHT); the lab data
    plane takes percentages adding up to at most 100, so larger sums are scaled down."""
    total = sum(q.bandwidth_percent or 0 for q in queues.values())
    if total <= 100:
        return
    for queue in queues.values():
        if queue.bandwidth_percent is not None:
            queue.bandwidth_percent = max(1, queue.bandwidth_percent * 100 // total)


def _ms(value: Any) -> Decimal:
    return Decimal(int(value)) / 1000


def _watchdog_defaults(config: SwitchConfig, pfc_wd: dict[str, Any]) -> None:
    ports = [e for name, e in pfc_wd.items() if name != "GLOBAL"]
    if not ports:
        return
    common = Counter(
        (e.get("action", "drop"), e.get("detection_time"), e.get("restoration_time")) for e in ports
    ).most_common(1)[0][0]
    action, detection, restoration = common
    poll = pfc_wd.get("GLOBAL", {}).get("POLL_INTERVAL")
    config.watchdog = WatchdogDefaults(
        timeout=_ms(detection or 200),
        recovery_time=_ms(restoration) if restoration else None,
        polling_interval=_ms(poll) if poll else None,
        action="no-drop" if action == "forward" else "drop",
    )


def _port_watchdog(
    config: SwitchConfig, settings: QosSettings, entry: dict[str, Any], db: ConfigDb
) -> None:
    action = entry.get("action", "drop")
    settings.pfc_watchdog = True
    if action == "alert":
        settings.pfc_watchdog_action = "notify-only"
    elif action == "drop":
        settings.pfc_watchdog_action = "drop"
    elif config.watchdog.action != "no-drop":
        raise SonicTranslationError(
            "PFC_WD action forward on some ports only: the lab data plane forwards on a storm "
            "only switch-wide"
        )
    poll = db.get("PFC_WD", {}).get("GLOBAL", {}).get("POLL_INTERVAL")
    settings.pfc_watchdog_timer = WatchdogPortTimer(
        timeout=_ms(entry.get("detection_time", 200)),
        polling_interval=_ms(poll) if poll else None,
        recovery_time=_ms(entry.get("restoration_time", 200)),
    )

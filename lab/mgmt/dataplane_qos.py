"""The shared model -> the data plane's ``set_qos`` payload (``lab.vswitch.config.QosConfig``).

Every personality's configuration reaches the data plane through this one translation (SONiC
and NVUE translate theirs into the model first). The model is written in EOS' terms, so this
says what each EOS line means, in data-plane terms:

* interface QoS = its ``service-profile``'s lines, overridden field by field by the
  interface's own lines (an interface line wins; queue settings merge per queue);
* ``priority-flow-control on`` + ``priority-flow-control priority <p> no-drop`` ->
  ``pfc_enabled`` / ``pfc_priorities``; global ``priority-flow-control all off`` turns PFC off
  everywhere;
* ``random-detect ecn`` thresholds -> ``ecn.min_bytes`` / ``max_bytes`` (see :mod:`units`);
  ``max-mark-probability`` defaults to 100; ``weight`` is kept in the config but the data plane
  marks on the instantaneous depth (EWMA weight 0);
* ``priority strict`` -> ``strict`` (its ``bandwidth percent``, legal on EOS, is then unused);
* the PFC watchdog runs once ``priority-flow-control pause watchdog default timeout`` is set
  (switch-wide) or an interface says ``priority-flow-control pause watchdog``; ``polling-interval
  auto`` (and an unset interval) is half the timeout, so a storm is seen within two polls;
  timeout -> ``detection_ms``, recovery-time -> ``restoration_ms`` (unset: the data plane's
  default, 400 ms); the global action defaults to ``drop`` (EOS' default, errdisable, is not
  modelled), ``no-drop`` -> ``forward``; port action ``notify-only`` -> ``alert``;
* trust: the switch-wide ``qos trust`` (a lab extension; unset = ``dscp``, ``no qos trust`` =
  untrusted) -> ``qos.trust`` (``dscp`` | ``none``; switch-wide ``cos`` -> ``dscp`` there and
  ``cos`` on every port); an interface's own effective trust, where it differs, ->
  ``qos.ports.P.trust`` (``dscp`` | ``cos`` | ``none``).  The lab carries no VLAN tags, so a
  ``cos`` port puts every frame in EOS' class for CoS 0 (TC 1) -- RoCE on a lossy class.
* packet trimming (SONiC and NVUE only, :attr:`SwitchConfig.trim`): a queue that trims ->
  ``queues.Q.trim``, and its port gets ``trim`` {``size_bytes``, ``dscp``, ``queue``}; a size
  beyond the data plane's largest frame (9216 B) trims nothing, so it is 9216 there.

Anything the data plane cannot do raises :class:`TranslationError`, so the change is refused.
"""

from __future__ import annotations

import copy
from typing import Any

from lab.mgmt import names
from lab.mgmt.cli_units import seconds_to_ms, threshold_bytes
from lab.mgmt.model import QosSettings, SwitchConfig, TrimSettings, TxQueue, WatchdogPortTimer

DEFAULT_DETECTION_MS = 200
DEFAULT_RESTORATION_MS = 400
DEFAULT_ECN_PROBABILITY = 100
# lossless.config.TrimConfig's size range.
TRIM_SIZE_MIN = 64
TRIM_SIZE_MAX = 9216
# EOS' watchdog actions in the data plane's (and the device state's) words.
_GLOBAL_ACTION = {"drop": "drop", "no-drop": "forward"}
_PORT_ACTION = {"drop": "drop", "notify-only": "alert"}


class TranslationError(ValueError):
    """The configuration is valid CLI but the lab data plane cannot implement it."""


def effective_qos(config: SwitchConfig, interface: str) -> QosSettings:
    """The QoS an interface runs with: its profile overlaid with its own lines."""
    own = config.interfaces[interface]
    profile = config.profiles.get(own.service_profile or "", QosSettings())
    merged = copy.deepcopy(profile)
    mine = own.qos
    for attribute in (
        "service_policy",
        "trust",
        "pfc_enabled",
        "pfc_watchdog",
        "pfc_watchdog_action",
        "pfc_watchdog_timer",
    ):
        value = getattr(mine, attribute)
        if value is not None:
            setattr(merged, attribute, copy.deepcopy(value))
    merged.pfc_priorities.update(mine.pfc_priorities)
    for queue_id, queue in mine.tx_queues.items():
        merged.tx_queues[queue_id] = _merge_queue(merged.tx_queues.get(queue_id), queue)
    return merged


def _merge_queue(base: TxQueue | None, own: TxQueue) -> TxQueue:
    if base is None:
        return copy.deepcopy(own)
    return TxQueue(
        bandwidth_percent=own.bandwidth_percent
        if own.bandwidth_percent is not None
        else base.bandwidth_percent,
        strict_priority=own.strict_priority or base.strict_priority,
        ecn=copy.deepcopy(own.ecn if own.ecn is not None else base.ecn),
        ecn_count=own.ecn_count or base.ecn_count,
        trim=own.trim or base.trim,
    )


def to_vswitch_qos(config: SwitchConfig) -> dict[str, Any]:
    """The ``qos`` object for ``{"cmd": "set_qos", "qos": ...}``."""
    interfaces = sorted(config.interfaces, key=names.sort_key)
    effective = {name: effective_qos(config, name) for name in interfaces}
    watchdog = _global_watchdog(config)
    ports: dict[str, Any] = {}
    switch_trust = _switch_trust(config)
    for name in interfaces:
        port = _port_qos(config, name, effective[name], watchdog, switch_trust)
        if port is not None:
            ports[names.dataplane_name(name)] = port
    return {
        "trust": switch_trust,
        "dscp_to_tc": {str(dscp): tc for dscp, tc in sorted(config.dscp_to_tc.items())},
        "watchdog": watchdog,
        "ports": ports,
    }


_TRUST = {"dscp": "dscp", "cos": "cos", "disabled": "none"}


def _switch_trust(config: SwitchConfig) -> str:
    """The data plane's switch-wide trust (``dscp`` | ``none``)."""
    return "none" if config.qos_trust == "disabled" else "dscp"


def _port_trust(config: SwitchConfig, settings: QosSettings, switch_trust: str) -> str | None:
    """The port's trust for the data plane, or None when the switch-wide one applies."""
    trust = _TRUST[settings.trust or config.qos_trust or "dscp"]
    return None if trust == switch_trust else trust


def _polling_ms(polling: Any, detection_ms: int) -> int:
    if polling is None:  # "auto"
        return max(1, detection_ms // 2)
    return max(1, seconds_to_ms(polling))


def _global_watchdog(config: SwitchConfig) -> dict[str, Any]:
    wd = config.watchdog
    detection_ms = seconds_to_ms(wd.timeout) if wd.timeout is not None else DEFAULT_DETECTION_MS
    return {
        "enabled": wd.timeout is not None,
        "detection_ms": max(1, detection_ms),
        "restoration_ms": max(1, seconds_to_ms(wd.recovery_time))
        if wd.recovery_time is not None
        else DEFAULT_RESTORATION_MS,
        "polling_ms": _polling_ms(wd.polling_interval, detection_ms),
        "action": _GLOBAL_ACTION[wd.action or "drop"],
    }


def _port_watchdog(settings: QosSettings, switch_wide: dict[str, Any]) -> dict[str, Any] | None:
    if (
        settings.pfc_watchdog is None
        and settings.pfc_watchdog_action is None
        and settings.pfc_watchdog_timer is None
    ):
        return None
    port = dict(switch_wide)
    if settings.pfc_watchdog is not None:
        port["enabled"] = settings.pfc_watchdog
    if settings.pfc_watchdog_action is not None:
        port["action"] = _PORT_ACTION[settings.pfc_watchdog_action]
    timer: WatchdogPortTimer | None = settings.pfc_watchdog_timer
    if timer is not None:
        detection_ms = max(1, seconds_to_ms(timer.timeout))
        port["detection_ms"] = detection_ms
        port["restoration_ms"] = max(1, seconds_to_ms(timer.recovery_time))
        port["polling_ms"] = _polling_ms(timer.polling_interval, detection_ms)
    return port


def _queue(interface: str, queue_id: int, queue: TxQueue) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if queue.ecn is not None:
        low = threshold_bytes(queue.ecn.minimum, queue.ecn.minimum_unit)
        high = threshold_bytes(queue.ecn.maximum, queue.ecn.maximum_unit)
        if low > high:
            raise TranslationError(
                f"{interface} uc-tx-queue {queue_id}: random-detect ecn minimum-threshold "
                f"({low} bytes) is above maximum-threshold ({high} bytes)"
            )
        result["ecn"] = {
            "min_bytes": low,
            "max_bytes": high,
            "max_probability": queue.ecn.max_mark_probability or DEFAULT_ECN_PROBABILITY,
        }
    if queue.strict_priority:
        result["strict"] = True
    elif queue.bandwidth_percent is not None:
        result["bandwidth_percent"] = queue.bandwidth_percent
    if queue.trim:
        result["trim"] = True
    return result


def _trim(
    interface: str, trim: TrimSettings | None, queues: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """``{"trim": ...}`` for a port with a trimming queue, else nothing."""
    if not any(q.get("trim") for q in queues.values()):
        return {}
    if trim is None:
        raise TranslationError(f"{interface}: a queue trims, but packet trimming is not set")
    if trim.size_bytes < TRIM_SIZE_MIN:
        raise TranslationError(
            f"packet trimming size {trim.size_bytes}: the lab data plane trims to at least "
            f"{TRIM_SIZE_MIN} bytes"
        )
    return {
        "trim": {
            "size_bytes": min(trim.size_bytes, TRIM_SIZE_MAX),
            "dscp": trim.dscp,
            "queue": trim.queue,
        }
    }


def _port_qos(
    config: SwitchConfig,
    interface: str,
    settings: QosSettings,
    switch_wide: dict[str, Any],
    switch_trust: str,
) -> dict[str, Any] | None:
    pfc_enabled = settings.pfc_enabled is True and not config.pfc_all_off
    lossless = sorted(p for p, action in settings.pfc_priorities.items() if action == "no-drop")
    watchdog = _port_watchdog(settings, switch_wide)
    queues = {
        str(q): entry
        for q, queue in sorted(settings.tx_queues.items())
        if (entry := _queue(interface, q, queue))
    }
    trust = _port_trust(config, settings, switch_trust)
    by_udp_port = _udp_port_classes(config, settings.service_policy)
    if (
        not pfc_enabled
        and not lossless
        and watchdog is None
        and not queues
        and trust is None
        and not by_udp_port
    ):
        return None
    port: dict[str, Any] = {
        "pfc_enabled": pfc_enabled,
        "pfc_priorities": lossless,
        "watchdog": watchdog,
        "queues": queues,
    }
    if trust is not None:
        port["trust"] = trust
    if by_udp_port:
        port["udp_dst_port_tc"] = by_udp_port
    port.update(_trim(interface, config.trim, queues))
    return port


def _udp_port_classes(config: SwitchConfig, policy: str | None) -> dict[str, int]:
    """UDP destination port -> traffic class from a ``service-policy type qos input``: its
    classes in order, each class-map's ACLs in sequence order, the first match wins (as in a
    TCAM); a ``deny`` entry takes its port out of that class. An undefined policy, class-map
    or ACL matches nothing."""
    found: dict[str, int] = {}
    for class_name, tc in config.policy_maps.get(policy or "", {}).items():
        if tc is None:
            continue
        for acl in config.class_maps.get(class_name, []):
            decided: set[int] = set()
            for _, entry in sorted(config.access_lists.get(acl, {}).items()):
                if entry.port in decided:
                    continue
                decided.add(entry.port)
                if entry.action == "permit":
                    found.setdefault(str(entry.port), tc)
    return found

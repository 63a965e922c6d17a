"""NX-OS' configuration -> the shared model (:class:`lab.mgmt.model.SwitchConfig`), which
:meth:`SwitchManager.install` pushes to the data plane.

What each part means, from Cisco's Nexus 9000 NX-OS QoS Configuration Guide:

- classification: a port's ``service-policy type qos input`` (its own, else the one of ``system
  qos``) sets the traffic's qos-group from its classes in order (the first class whose
  ``match dscp`` holds the DSCP wins; ``class-default`` takes the rest, qos-group 0 when it sets
  none). A port without one puts everything in qos-group 0 ("Configuring Classification":
  traffic that matches no class goes to the default class). qos-group N is queue N and
  traffic class N (the 8-queue system classes ``c-out-8q-qN``, ``c-8q-nqN``);
- PFC: the priorities the system ``network-qos`` policy pauses (``pause pfc-cos``) are
  lossless on a port whose ``priority-flow-control mode`` is ``on``. ``auto`` (the default)
  negotiates PFC with DCBX, which the lab's hosts do not speak: it is off here, as on a real
  switch whose peer sends no DCBX;
- queues: the port's ``service-policy type queuing output`` (its own, else the system one):
  ``priority level N`` is strict priority, ``bandwidth remaining percent`` (or ``bandwidth
  percent``) the DWRR share (0 = no share), ``random-detect ... ecn`` marks ECN between the
  thresholds with at most ``drop-probability`` percent (default 100, what the agent's driver
  reads) -- on the instantaneous depth, ``weight`` is kept but not modelled;
- PFC watchdog: detection after ``interval x shutdown-multiplier`` ms, restoration after
  ``interval x auto-restore multiplier`` ms, polling every ``interval`` (defaults 100 ms, 1,
  10); the stuck queue is dropped ("Configuring a Priority Flow Control Watchdog Interval").
  The global ``watch-dog-interval on`` runs it on every port; a port's own ``on|off`` wins.

What the lab's data plane cannot do is refused (:class:`TranslationError`), so the change is
refused: WRED without ``ecn`` (early drops), two classification policies with different DSCP
maps, a class matching CoS and DSCP at once.
"""

from __future__ import annotations

from decimal import Decimal

from lab.mgmt.dataplane_qos import TranslationError
from lab.mgmt.model import (
    EcnThreshold,
    QosSettings,
    SwitchConfig,
    TxQueue,
    WatchdogDefaults,
    WatchdogPortTimer,
)
from lab.mgmt.names import nos_port_index
from lab.mgmt.nxos.config import (
    CLASS_DEFAULT,
    QUEUING_CLASSES,
    Interface,
    NxosConfig,
    PolicyMap,
    Watchdog,
)

DEFAULT_INTERVAL_MS = 100
DEFAULT_SHUTDOWN_MULTIPLIER = 1
DEFAULT_RESTORE_MULTIPLIER = 10
DEFAULT_ECN_PROBABILITY = 100


def shared_name(nxos_name: str) -> str:
    """``Ethernet1/3`` -> ``Ethernet3`` (the shared model's name of data-plane port eth3)."""
    index = nos_port_index("nxos", nxos_name)
    if index is None:
        raise TranslationError(f"{nxos_name}: not a front-panel port of this switch")
    return f"Ethernet{index}"


def to_switch_config(config: NxosConfig) -> SwitchConfig:
    """The shared model of ``config`` (:class:`TranslationError` for what the lab cannot do)."""
    shared = SwitchConfig.empty(config.hostname, [shared_name(n) for n in config.interfaces])
    classifiers = {_classifier(config, port) for port in config.interfaces.values()}
    dscp_maps = {name: dscp_map(config, name) for name in classifiers if name}
    if len({tuple(sorted(m.items())) for m in dscp_maps.values()}) > 1:
        raise TranslationError(
            "the lab switch classifies with one DSCP map; the ports use the policies "
            + ", ".join(sorted(dscp_maps))
        )
    shared.dscp_to_tc = next(iter(dscp_maps.values()), {})
    lossless = lossless_priorities(config)
    shared.watchdog = _watchdog_defaults(config.watchdog)
    for name, port in config.interfaces.items():
        settings = shared.interfaces[shared_name(name)].qos
        classifier = _classifier(config, port)
        settings.trust = "dscp" if classifier else "disabled"
        if port.pfc_mode == "on" and lossless:
            settings.pfc_enabled = True
            settings.pfc_priorities = dict.fromkeys(lossless, "no-drop")
        settings.tx_queues = _queues(config.policy("queuing", _queuing(config, port)))
        _port_watchdog(settings, config.watchdog, port)
    return shared


def _classifier(config: NxosConfig, port: Interface) -> str | None:
    return port.qos_input or config.system.get("qos input")


def _queuing(config: NxosConfig, port: Interface) -> str | None:
    return port.queuing_output or config.system.get("queuing output")


def dscp_map(config: NxosConfig, policy_name: str) -> dict[int, int]:
    """DSCP -> qos-group of a type-qos policy (all 64 DSCPs)."""
    policy = config.policy("qos", policy_name) or PolicyMap()
    found: dict[int, int] = {}
    default_group = 0
    for class_name, entry in policy.classes.items():
        if class_name == CLASS_DEFAULT:
            default_group = entry.qos_group or 0
            continue
        class_map = config.class_maps[class_name]
        if entry.qos_group is None:
            continue  # a class that sets nothing changes nothing
        if class_map.cos:
            raise TranslationError(
                f"class-map {class_name}: the lab switch classifies on DSCP only (match cos)"
            )
        for dscp in class_map.dscp:
            found.setdefault(dscp, entry.qos_group)
    return {dscp: found.get(dscp, default_group) for dscp in range(64)}


def lossless_priorities(config: NxosConfig) -> list[int]:
    """The priorities the system network-qos policy pauses."""
    policy = config.policy("network-qos", config.system.get("network-qos"))
    if policy is None:
        return []
    return sorted({cos for entry in policy.classes.values() for cos in entry.pause_cos})


def _queues(policy: PolicyMap | None) -> dict[int, TxQueue]:
    queues: dict[int, TxQueue] = {}
    for class_name, entry in (policy or PolicyMap()).classes.items():
        queue = TxQueue(strict_priority=entry.priority_level is not None)
        share = entry.bandwidth_remaining or entry.bandwidth
        if not queue.strict_priority and share:
            queue.bandwidth_percent = share
        red = entry.wred
        if red is not None and not red.ecn:
            raise TranslationError(
                f"class {class_name}: random-detect without ecn (WRED drops) is not modelled "
                "by the lab switch"
            )
        if red is not None:
            queue.ecn = EcnThreshold(
                red.minimum,
                red.minimum_unit,
                red.maximum,
                red.maximum_unit,
                red.drop_probability or DEFAULT_ECN_PROBABILITY,
                red.weight,
            )
        if not queue.is_default():
            queues[QUEUING_CLASSES[class_name]] = queue
    return queues


def watchdog_timers(watchdog: Watchdog) -> tuple[int, int, int]:
    """(polling, detection, restoration) in ms, NX-OS' defaults where a line is unset."""
    interval = watchdog.interval_ms or DEFAULT_INTERVAL_MS
    shutdown = watchdog.shutdown_multiplier or DEFAULT_SHUTDOWN_MULTIPLIER
    restore = watchdog.auto_restore_multiplier
    restore = DEFAULT_RESTORE_MULTIPLIER if restore is None else restore
    return interval, interval * shutdown, max(1, interval * restore)


def _seconds(ms: int) -> Decimal:
    return Decimal(ms) / 1000


def _watchdog_defaults(watchdog: Watchdog) -> WatchdogDefaults:
    if not watchdog.enabled:
        return WatchdogDefaults()
    polling, detection, restoration = watchdog_timers(watchdog)
    return WatchdogDefaults(
        timeout=_seconds(detection),
        recovery_time=_seconds(restoration),
        polling_interval=_seconds(polling),
        action="drop",
    )


def _port_watchdog(settings: QosSettings, watchdog: Watchdog, port: Interface) -> None:
    """A port's own ``watch-dog-interval on|off`` over the global one."""
    if port.watchdog is None:
        return
    settings.pfc_watchdog = port.watchdog
    if port.watchdog and not watchdog.enabled:
        polling, detection, restoration = watchdog_timers(watchdog)
        settings.pfc_watchdog_action = "drop"
        settings.pfc_watchdog_timer = WatchdogPortTimer(
            _seconds(detection), _seconds(polling), _seconds(restoration)
        )

"""Checks of the fabric, by stable ID. :data:`CATALOG` lists them all."""

from __future__ import annotations

from agent.observe.checks.base import Check, CheckResult, Collected, DeviceData
from agent.observe.checks.config import (
    ClassifiedByDscpNotUdpPort,
    ConfigDrift,
    DscpClassification,
    EcnThresholds,
    EtsScheduling,
    Headroom,
    NoPendingSessions,
    PfcPriorities,
    PfcWatchdog,
    RoceModeConsistent,
)
from agent.observe.checks.health import (
    HostNicConsistency,
    NoLosslessDrops,
    NoPfcStorms,
    PauseRate,
    WatchdogActed,
    WireProbes,
)
from agent.observe.checks.hosts import HOST_CHECKS

_CHECKS: tuple[type[Check], ...] = (
    RoceModeConsistent,
    DscpClassification,
    PfcPriorities,
    EcnThresholds,
    EtsScheduling,
    PfcWatchdog,
    Headroom,
    ConfigDrift,
    NoPendingSessions,
    ClassifiedByDscpNotUdpPort,
    NoLosslessDrops,
    PauseRate,
    NoPfcStorms,
    WatchdogActed,
    HostNicConsistency,
    *HOST_CHECKS,
    WireProbes,
)
CATALOG: dict[str, type[Check]] = {cls.check_id: cls for cls in _CHECKS}

# What a check needs collected before it can judge (`roce-agent checks` lists it;
# `validate --no-traffic` leaves out the checks that need traffic): "config" the switches'
# QoS configuration, "counters" their counters, "hosts" the RDMA hosts' NIC state or
# pre-flight facts, "traffic" a probe scenario (or, for the drill checks, a PFC storm).
NEEDS_BY_CATEGORY: dict[str, str] = {
    "config": "config",
    "counters": "counters",
    "hosts": "hosts",
    "wire": "traffic",
    "drill": "traffic",
}
NEEDS_ORDER = ("config", "counters", "hosts", "traffic")


def needs(check_id: str) -> tuple[str, ...]:
    """What check ``check_id`` needs collected (a subset of :data:`NEEDS_ORDER`)."""
    wanted = {NEEDS_BY_CATEGORY[c] for c in CATALOG[check_id].categories if c in NEEDS_BY_CATEGORY}
    return tuple(n for n in NEEDS_ORDER if n in wanted)


def default_ids() -> list[str]:
    """What a playbook's ``checks: {ids: all}`` runs: every check but the drill ones, which
    expect a storm to have happened."""
    return sorted(k for k, c in CATALOG.items() if "drill" not in c.categories)


# The host pre-flight checks, as `validate --hosts-only` runs them (playbooks/host-preflight.yml).
HOST_CHECK_IDS: tuple[str, ...] = tuple(cls.check_id for cls in HOST_CHECKS)

__all__ = [
    "CATALOG",
    "HOST_CHECK_IDS",
    "NEEDS_ORDER",
    "Check",
    "CheckResult",
    "Collected",
    "DeviceData",
    "default_ids",
    "needs",
]

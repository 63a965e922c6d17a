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
# The host pre-flight checks, as `validate --hosts-only` runs them (playbooks/host-preflight.yml).
HOST_CHECK_IDS: tuple[str, ...] = tuple(cls.check_id for cls in HOST_CHECKS)

__all__ = ["CATALOG", "HOST_CHECK_IDS", "Check", "CheckResult", "Collected", "DeviceData"]

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

CATALOG: dict[str, type[Check]] = {
    cls.check_id: cls
    for cls in (
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
        WireProbes,
    )
}

__all__ = ["CATALOG", "Check", "CheckResult", "Collected", "DeviceData"]

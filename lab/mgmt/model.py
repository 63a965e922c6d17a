"""The configuration model of a lab switch: plain mutable dataclasses, copied per edit.

It mirrors what the running-config text says (not what the data plane does): a value of
``None`` means "not configured, use the default", so rendering and re-parsing round-trips.
Interface-level QoS lines live in :class:`QosSettings`, shared by ``interface EthernetN`` and
``qos profile NAME`` (EOS: a profile holds the interface-level QoS commands and is applied with
``service-profile NAME``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from lab.mgmt.cli_units import ThresholdUnit

NUM_TRAFFIC_CLASSES = 8

TrustMode = Literal["dscp", "cos", "disabled"]
PfcPriorityAction = Literal["no-drop", "drop"]
WatchdogGlobalAction = Literal["drop", "no-drop"]
WatchdogPortAction = Literal["drop", "notify-only"]


@dataclass
class EcnThreshold:
    """``random-detect ecn minimum-threshold <n> <unit> maximum-threshold <n> <unit> ...``."""

    minimum: int
    minimum_unit: ThresholdUnit
    maximum: int
    maximum_unit: ThresholdUnit
    max_mark_probability: int | None = None
    weight: int | None = None


@dataclass
class TxQueue:
    """The lines under ``uc-tx-queue <q>``."""

    bandwidth_percent: int | None = None
    strict_priority: bool = False
    ecn: EcnThreshold | None = None
    ecn_count: bool = False
    # Over its limit the queue trims instead of dropping (SONiC: its BUFFER_QUEUE profile's
    # packet_discard_action trim; NVUE: packet-trim egress-eligibility).  EOS has no such
    # line: only SONiC and NVUE set it.
    trim: bool = False

    def is_default(self) -> bool:
        """True if the queue block would render empty."""
        return self == TxQueue()


@dataclass(frozen=True)
class TrimSettings:
    """Switch-wide packet trimming (SONiC ``SWITCH_TRIMMING|GLOBAL``, Cumulus ``system
    forwarding packet-trim``): the size trimmed frames are cut to, their new DSCP and the
    egress queue they leave from."""

    size_bytes: int
    dscp: int
    queue: int


@dataclass
class WatchdogPortTimer:
    """``priority-flow-control pause watchdog port timer timeout .. polling-interval ..``."""

    timeout: Decimal
    polling_interval: Decimal | None  # None = "auto"
    recovery_time: Decimal
    forced: bool = False


@dataclass
class QosSettings:
    """Interface-level QoS lines (an interface's own, or a qos profile's)."""

    trust: TrustMode | None = None
    pfc_enabled: bool | None = None
    pfc_priorities: dict[int, PfcPriorityAction] = field(default_factory=dict)
    pfc_watchdog: bool | None = None
    pfc_watchdog_action: WatchdogPortAction | None = None
    pfc_watchdog_timer: WatchdogPortTimer | None = None
    tx_queues: dict[int, TxQueue] = field(default_factory=dict)
    service_policy: str | None = None  # service-policy type qos input NAME

    def queue(self, queue_id: int) -> TxQueue:
        """The queue's settings, created empty on first use."""
        return self.tx_queues.setdefault(queue_id, TxQueue())

    def prune(self) -> None:
        """Forget queue blocks that hold nothing (EOS does not render them)."""
        for queue_id in [q for q, settings in self.tx_queues.items() if settings.is_default()]:
            del self.tx_queues[queue_id]


@dataclass
class InterfaceConfig:
    """``interface EthernetN``."""

    description: str | None = None
    service_profile: str | None = None
    qos: QosSettings = field(default_factory=QosSettings)


@dataclass
class WatchdogDefaults:
    """Global ``priority-flow-control pause watchdog ...`` lines."""

    timeout: Decimal | None = None
    recovery_time: Decimal | None = None
    polling_interval: Decimal | None = None
    action: WatchdogGlobalAction | None = None


@dataclass
class AclEntry:
    """``<seq> permit|deny udp any any eq <port>``: the access-list entries the lab's data
    plane can match (a QoS class on UDP destination port, as switch ASICs can)."""

    action: Literal["permit", "deny"]
    port: int


@dataclass
class SwitchConfig:
    """The whole running (or session, or startup) configuration."""

    hostname: str
    interfaces: dict[str, InterfaceConfig]
    qos_trust: TrustMode | None = None
    dscp_to_tc: dict[int, int] = field(default_factory=dict)
    tc_to_dscp: dict[int, int] = field(default_factory=dict)
    profiles: dict[str, QosSettings] = field(default_factory=dict)
    pfc_all_off: bool = False
    watchdog: WatchdogDefaults = field(default_factory=WatchdogDefaults)
    access_lists: dict[str, dict[int, AclEntry]] = field(default_factory=dict)
    # class-map type qos match-any NAME -> the access lists it matches
    class_maps: dict[str, list[str]] = field(default_factory=dict)
    # policy-map type quality-of-service NAME -> class -> its set traffic-class (None: unset)
    policy_maps: dict[str, dict[str, int | None]] = field(default_factory=dict)
    # Packet trimming of the queues whose ``trim`` is set (None: no trimming).
    trim: TrimSettings | None = None

    @classmethod
    def empty(cls, hostname: str, interfaces: list[str]) -> SwitchConfig:
        """Factory default: every port present and unconfigured."""
        return cls(hostname=hostname, interfaces={name: InterfaceConfig() for name in interfaces})

    def clone(self) -> SwitchConfig:
        """A deep copy to edit (sessions and candidate configs)."""
        return copy.deepcopy(self)

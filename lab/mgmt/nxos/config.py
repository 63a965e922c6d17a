"""NX-OS's configuration as the switch holds it: MQC objects, ``system qos``, the PFC watchdog
and the interfaces -- what ``show running-config`` prints, before any translation.

Plain mutable dataclasses, copied per edit (a candidate is edited and installed whole, so a
refused line changes nothing). ``None`` means "not configured: NX-OS' default", so rendering
and re-reading round-trips (:mod:`lab.mgmt.nxos.render`, :mod:`lab.mgmt.nxos.commands`).

The system-defined classes (Cisco Nexus 9000 NX-OS QoS Configuration Guide, "Using Modular
QoS CLI", system-defined class maps of the 8-queue template) exist without being configured:
queuing ``c-out-8q-q-default`` and ``c-out-8q-q1``..``q7`` (queue = qos-group),
network-qos ``c-8q-nq-default`` and ``c-8q-nq1``..``nq7`` (class = qos-group); a type-qos
policy also has ``class-default``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Literal

PolicyType = Literal["qos", "queuing", "network-qos"]
ThresholdUnit = Literal["bytes", "kbytes", "mbytes"]
PfcMode = Literal["on", "off", "auto"]
QOS_GROUPS = range(8)
QUEUING_CLASSES = {"c-out-8q-q-default": 0, **{f"c-out-8q-q{g}": g for g in range(1, 8)}}
NETWORK_QOS_CLASSES = {"c-8q-nq-default": 0, **{f"c-8q-nq{g}": g for g in range(1, 8)}}
CLASS_DEFAULT = "class-default"


@dataclass
class ClassMap:
    """``class-map type qos match-any|match-all NAME`` with its ``match dscp`` / ``match cos``
    values (one line each, a list of values; without a keyword NX-OS makes it match-all)."""

    match_all: bool = True
    dscp: list[int] = field(default_factory=list)
    cos: list[int] = field(default_factory=list)


@dataclass
class Wred:
    """``random-detect minimum-threshold N UNIT maximum-threshold N UNIT [drop-probability P]
    [weight W] [ecn]``."""

    minimum: int
    minimum_unit: ThresholdUnit
    maximum: int
    maximum_unit: ThresholdUnit
    drop_probability: int | None = None
    weight: int | None = None
    ecn: bool = False


@dataclass
class PolicyClass:
    """The lines under one ``class`` of a policy-map (which ones a class may hold depends on the
    policy's type: the configuration modes enforce it)."""

    qos_group: int | None = None  # qos: set qos-group N
    mtu: int | None = None  # network-qos
    pause_cos: list[int] = field(default_factory=list)  # network-qos: pause pfc-cos N
    priority_level: int | None = None  # queuing: priority level N
    bandwidth_remaining: int | None = None  # queuing: bandwidth remaining percent N
    bandwidth: int | None = None  # queuing: bandwidth percent N
    wred: Wred | None = None  # queuing: random-detect


@dataclass
class PolicyMap:
    """``policy-map type qos|queuing|network-qos NAME``: its classes in the order entered."""

    classes: dict[str, PolicyClass] = field(default_factory=dict)


@dataclass
class Watchdog:
    """Global PFC watchdog lines (QoS Configuration Guide, "Configuring a Priority Flow Control
    Watchdog Interval")."""

    enabled: bool | None = None  # priority-flow-control watch-dog-interval on|off
    interval_ms: int | None = None  # priority-flow-control watch-dog interval N
    shutdown_multiplier: int | None = None  # ... watch-dog shutdown-multiplier N
    auto_restore_multiplier: int | None = None  # priority-flow-control auto-restore multiplier N


@dataclass
class Interface:
    """``interface Ethernet1/N``."""

    description: str | None = None
    mtu: int | None = None
    pfc_mode: PfcMode | None = None  # None: the default, auto
    pfc_send_tlv: bool = False
    watchdog: bool | None = None  # priority-flow-control watch-dog-interval on|off
    qos_input: str | None = None  # service-policy type qos input NAME
    queuing_output: str | None = None  # service-policy type queuing output NAME


@dataclass
class NxosConfig:
    """The whole running (startup, checkpoint, candidate) configuration."""

    hostname: str
    interfaces: dict[str, Interface]
    class_maps: dict[str, ClassMap] = field(default_factory=dict)
    policies: dict[tuple[PolicyType, str], PolicyMap] = field(default_factory=dict)
    # system qos: "network-qos" | "queuing output" | "qos input" -> policy name
    system: dict[str, str] = field(default_factory=dict)
    watchdog: Watchdog = field(default_factory=Watchdog)
    lldp: bool = True  # feature lldp

    @classmethod
    def empty(cls, hostname: str, interfaces: list[str]) -> NxosConfig:
        """Factory default: every front-panel port present and unconfigured."""
        return cls(hostname=hostname, interfaces={name: Interface() for name in interfaces})

    def clone(self) -> NxosConfig:
        """A deep copy to edit."""
        return copy.deepcopy(self)

    def policy(self, kind: PolicyType, name: str | None) -> PolicyMap | None:
        """The policy-map of that type and name (None when unset or not defined)."""
        return self.policies.get((kind, name)) if name else None

    def policy_users(self, kind: PolicyType, name: str) -> list[str]:
        """Where a policy-map is attached (``system qos`` or interface names)."""
        direction = {"qos": "qos input", "queuing": "queuing output", "network-qos": "network-qos"}
        users = ["system qos"] if self.system.get(direction[kind]) == name else []
        attribute = {"qos": "qos_input", "queuing": "queuing_output"}.get(kind)
        if attribute:
            users += [n for n, i in self.interfaces.items() if getattr(i, attribute) == name]
        return users

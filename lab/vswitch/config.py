"""Configuration contract between the lab runtime and ``lab.vswitch`` (pydantic v2 models).

The JSON file passed with ``--config`` is validated by :class:`SwitchConfig`; the QoS part is
also replaceable at run time (``set_qos`` on the control socket) and is validated by the same
models, in the context of the running switch's ports, before anything changes.  The parameters
of the lossless rules (buffer, ECN, queue, watchdog and per-port QoS) live in
:mod:`lossless.config` beside the rules that read them, as dataclasses whose limits pydantic
reads; this module composes them.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from lossless.config import BufferConfig, PortQosConfig, Priority, WatchdogConfig

MAX_SPEED_BPS = 400_000_000_000

Dscp = Annotated[int, Field(ge=0, le=63)]

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
# Linux IFNAMSIZ is 16 including the NUL byte.
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,15}$")


class StrictModel(BaseModel):
    """Base of every model of the file: frozen, and an unknown key is an error, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigError(ValueError):
    """A configuration (file or control-socket payload) that cannot be used; says what and where."""


def _normalise_mac(value: str) -> str:
    mac = value.strip().lower().replace("-", ":")
    if not _MAC_RE.match(mac):
        raise ValueError(f"not a MAC address (expected aa:bb:cc:dd:ee:ff): {value!r}")
    if int(mac[0:2], 16) & 1:
        raise ValueError(f"multicast MAC address not allowed here: {value!r}")
    return mac


class PortConfig(StrictModel):
    """One switch port: an interface in the switch namespace (containerlab-style ethN)."""

    ifname: str
    mac: str
    ipv4: ipaddress.IPv4Interface
    speed_bps: int = Field(gt=0, le=MAX_SPEED_BPS)
    buffer: BufferConfig | None = None

    @field_validator("ifname")
    @classmethod
    def _check_ifname(cls, value: str) -> str:
        if not _IFNAME_RE.match(value):
            raise ValueError(f"not a Linux interface name (1-15 chars [A-Za-z0-9_.-]): {value!r}")
        return value

    @field_validator("mac")
    @classmethod
    def _check_mac(cls, value: str) -> str:
        return _normalise_mac(value)


class NeighborConfig(StrictModel):
    """A static ARP entry."""

    ip: ipaddress.IPv4Address
    mac: str
    port: str

    @field_validator("mac")
    @classmethod
    def _check_mac(cls, value: str) -> str:
        return _normalise_mac(value)


class NexthopConfig(StrictModel):
    """A next hop; ``port`` may be omitted when ``ip`` is inside a port's connected subnet."""

    ip: ipaddress.IPv4Address
    port: str | None = None


class RouteConfig(StrictModel):
    """A static route; several next hops make an ECMP group (5-tuple hash)."""

    prefix: ipaddress.IPv4Network
    nexthops: list[NexthopConfig] = Field(min_length=1)


# EOS' default CoS-to-traffic-class map sends CoS 0 to TC 1 and CoS 1 to TC 0 (802.1Q puts
# background below best effort), so on a port trusting CoS an untagged frame -- every frame in
# this lab, which carries no VLAN tags -- lands in TC 1.  Source: Arista EOS User Manual,
# chapter "Quality of Service", 27.1.1 "QoS Data Fields and Traffic Classes", table "Default
# CoS to Traffic Class Map" (copy: fdocuments.us/document/quality-of-service-arista-networks-
# 2020-02-10-a-section-2715-quality-of.html).
COS0_TRAFFIC_CLASS = 1

Trust = Literal["dscp", "cos", "none"]


@dataclass(frozen=True)
class LabPortQosConfig(PortQosConfig):
    """A port's QoS plus its own trust (unset: the switch-wide ``qos.trust``) and ingress
    classification by UDP destination port (a QoS policy matching an ACL, which ASICs can
    apply before the DSCP map: what RoCE must not depend on, see the agent's check RC010)."""

    trust: Trust | None = None
    udp_dst_port_tc: dict[Annotated[int, Field(ge=1, le=65535)], Priority] = field(
        default_factory=dict
    )


class QosConfig(StrictModel):
    """Switch QoS: classification, watchdog default, per-port PFC/ETS/ECN/trust."""

    trust: Literal["dscp", "none"] = "dscp"
    dscp_to_tc: dict[Dscp, Priority] = Field(default_factory=dict)
    watchdog: WatchdogConfig = Field(default_factory=WatchdogConfig)
    ports: dict[str, LabPortQosConfig] = Field(default_factory=dict)

    def tc_for_dscp(self, dscp: int) -> int:
        """Traffic class of a DSCP; unmapped DSCPs use the EOS default ``dscp >> 3``."""
        if self.trust == "none":
            return 0
        return self.dscp_to_tc.get(dscp, dscp >> 3)

    def trust_of(self, ifname: str) -> Trust:
        """Effective trust of a port: its own, else the switch-wide one."""
        own = self.port(ifname).trust
        return own if own is not None else self.trust

    def port_classes(self, ifname: str) -> list[int]:
        """Traffic class per DSCP (64 entries) for frames received on ``ifname``."""
        trust = self.trust_of(ifname)
        if trust == "cos":
            return [COS0_TRAFFIC_CLASS] * 64
        if trust == "none":
            return [0] * 64
        return [self.dscp_to_tc.get(d, d >> 3) for d in range(64)]

    def port(self, ifname: str) -> LabPortQosConfig:
        """The port's QoS, or the defaults (PFC off, no ECN, equal DWRR) if it has none."""
        return self.ports.get(ifname) or LabPortQosConfig()

    def watchdog_for(self, ifname: str) -> WatchdogConfig:
        """Effective watchdog of a port: its override if set, else the switch-wide one."""
        override = self.port(ifname).watchdog
        return override if override is not None else self.watchdog


class SwitchConfig(StrictModel):
    """The whole ``--config`` file."""

    name: str = Field(min_length=1, max_length=64)
    ports: list[PortConfig] = Field(min_length=1)
    neighbors: list[NeighborConfig] = Field(default_factory=list)
    routes: list[RouteConfig] = Field(default_factory=list)
    buffer: BufferConfig
    qos: QosConfig = Field(default_factory=QosConfig)

    @model_validator(mode="after")
    def _cross_references(self) -> SwitchConfig:
        names = [p.ifname for p in self.ports]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"ports: duplicate ifname {dupes}")
        known = set(names)
        for i, nb in enumerate(self.neighbors):
            if nb.port not in known:
                raise ValueError(f"neighbors[{i}].port: unknown port {nb.port!r} (have {names})")
        for i, route in enumerate(self.routes):
            for j, nh in enumerate(route.nexthops):
                where = f"routes[{i}].nexthops[{j}]"
                if nh.port is not None and nh.port not in known:
                    raise ValueError(f"{where}.port: unknown port {nh.port!r} (have {names})")
                if nh.port is None and self.connected_port(nh.ip) is None:
                    raise ValueError(
                        f"{where}: no port given and {nh.ip} is not in any connected subnet"
                    )
        for ifname in self.qos.ports:
            if ifname not in known:
                raise ValueError(f"qos.ports.{ifname}: unknown port (have {names})")
        return self

    def connected_port(self, ip: ipaddress.IPv4Address) -> str | None:
        """Name of the port whose connected subnet holds ``ip`` (longest prefix), if any."""
        best: tuple[int, str] | None = None
        for port in self.ports:
            if ip in port.ipv4.network and (best is None or port.ipv4.network.prefixlen > best[0]):
                best = (port.ipv4.network.prefixlen, port.ifname)
        return best[1] if best else None

    def buffer_for(self, ifname: str) -> BufferConfig:
        """Effective buffer thresholds of a port: its override if set, else the default."""
        for port in self.ports:
            if port.ifname == ifname and port.buffer is not None:
                return port.buffer
        return self.buffer

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-ready dict, same shape as the input file (used by ``get_config``)."""
        return self.model_dump(mode="json")


def format_validation_error(exc: ValidationError, root: str = "") -> str:
    """One line per problem, each naming the field path (``qos.ports.eth1.pfc_priorities.0``)."""
    lines = []
    for err in exc.errors(include_url=False):
        parts = [str(p) for p in err["loc"]]
        path = ".".join(([root] if root else []) + parts) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {msg}")
    return "; ".join(lines)


def parse_config(data: Any) -> SwitchConfig:
    """Validate a decoded JSON document; raise :class:`ConfigError` naming the bad fields."""
    try:
        return SwitchConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid config: {format_validation_error(exc)}") from None


def load_config(path: str | Path) -> SwitchConfig:
    """Read and validate the ``--config`` JSON file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    try:
        return SwitchConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid config: {format_validation_error(exc)}") from None


def with_qos(config: SwitchConfig, qos: Any) -> SwitchConfig:
    """A copy of ``config`` with ``qos`` replaced, validated against the switch's ports."""
    data = config.to_json_dict()
    data["qos"] = qos
    try:
        return SwitchConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid qos: {format_validation_error(exc)}") from None


def with_buffer(config: SwitchConfig, buffer: Any, port: str | None = None) -> SwitchConfig:
    """A copy of ``config`` with the default (or one port's) buffer thresholds replaced."""
    data = config.to_json_dict()
    if port is None:
        data["buffer"] = buffer
    else:
        for entry in data["ports"]:
            if entry["ifname"] == port:
                entry["buffer"] = buffer
                break
        else:
            raise ConfigError(f"set_buffer: unknown port {port!r}")
    try:
        return SwitchConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid buffer: {format_validation_error(exc)}") from None


# ----------------------------------------------------------------------------- faults (lab only)

# Strict: a JSON ``true`` or ``"5"`` is a mistake in a fault request, not 1 % or 5 %.
Percent = Annotated[float, Field(gt=0, le=100, strict=True)]
Seed = Annotated[int, Field(strict=True)]


class _FaultBase(StrictModel):
    port: str

    def key(self) -> tuple[object, ...]:
        """What two faults may not share (one fault of a kind per port and direction/DSCP)."""
        return (self.kind_name(), self.port)

    def kind_name(self) -> str:
        return str(getattr(self, "kind"))  # noqa: B009 -- every subclass declares it


class DropFault(_FaultBase):
    """Silent loss on one direction of a port (a gray failure: no switch counter moves)."""

    kind: Literal["drop"]
    direction: Literal["rx", "tx"]
    percent: Percent
    seed: Seed = 1

    def key(self) -> tuple[object, ...]:
        return ("drop", self.port, self.direction)


class FcsErrorFault(_FaultBase):
    """Frames received on the port fail their FCS: counted as errors and dropped."""

    kind: Literal["fcs_error"]
    percent: Percent
    seed: Seed = 1


class IcrcErrorFault(_FaultBase):
    """RoCEv2 frames leaving the port get one payload byte flipped (bad ICRC)."""

    kind: Literal["icrc_error"]
    percent: Percent
    seed: Seed = 1


class ClassifyFault(_FaultBase):
    """Ingress frames with ``dscp`` go to ``tc`` whatever the QoS config says."""

    kind: Literal["classify"]
    dscp: int = Field(ge=0, le=63, strict=True)
    tc: int = Field(ge=0, le=7, strict=True)

    def key(self) -> tuple[object, ...]:
        return ("classify", self.port, self.dscp)


class IgnorePfcFault(_FaultBase):
    """PFC frames received on the port are counted but not honoured."""

    kind: Literal["ignore_pfc"]


class DelayFault(_FaultBase):
    """Every frame leaving the port leaves ``ms`` later (order kept)."""

    kind: Literal["delay"]
    ms: float = Field(gt=0, le=1000, strict=True)


FaultConfig = Annotated[
    DropFault | FcsErrorFault | IcrcErrorFault | ClassifyFault | IgnorePfcFault | DelayFault,
    Field(discriminator="kind"),
]
FAULT_KINDS = ("drop", "fcs_error", "icrc_error", "classify", "ignore_pfc", "delay")
_FAULT_LIST: TypeAdapter[list[FaultConfig]] = TypeAdapter(list[FaultConfig])


def _fault_error_path(loc: tuple[int | str, ...]) -> str:
    """``(1, 'drop', 'percent')`` -> ``faults[1].percent`` (the union tag is not a field)."""
    if not loc:
        return "faults"
    head, *rest = loc
    path = f"faults[{head}]" if isinstance(head, int) else f"faults.{head}"
    if rest and rest[0] in FAULT_KINDS:
        rest = rest[1:]
    return ".".join([path, *(str(p) for p in rest)])


def parse_faults(data: Any, ports: Iterable[str]) -> list[FaultConfig]:
    """Validate a ``set_faults`` list against the switch's ports; :class:`ConfigError` names
    the first bad field of each bad fault (``faults[1].percent: ...``)."""
    try:
        faults = _FAULT_LIST.validate_python(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            path = _fault_error_path(tuple(err["loc"]))
            if err["type"] == "union_tag_invalid":
                got = err.get("input", {})
                kind = got.get("kind") if isinstance(got, dict) else got
                problems.append(
                    f"{path}.kind: unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})"
                )
            elif err["type"] == "union_tag_not_found":
                problems.append(f"{path}.kind: missing (known: {', '.join(FAULT_KINDS)})")
            else:
                problems.append(f"{path}: {err['msg'].removeprefix('Value error, ')}")
        raise ConfigError("; ".join(problems)) from None
    known = list(ports)
    seen: dict[tuple[object, ...], int] = {}
    for i, fault in enumerate(faults):
        if fault.port not in known:
            raise ConfigError(f"faults[{i}].port: unknown port {fault.port!r} (have {known})")
        key = fault.key()
        if key in seen:
            raise ConfigError(
                f"faults[{i}]: same {fault.kind} fault as faults[{seen[key]}] on {fault.port}; "
                "one per port (and direction or DSCP)"
            )
        seen[key] = i
    return faults


def faults_to_json(faults: Iterable[FaultConfig]) -> list[dict[str, Any]]:
    """Normalised JSON form (what ``get_faults`` answers)."""
    return [fault.model_dump(mode="json") for fault in faults]

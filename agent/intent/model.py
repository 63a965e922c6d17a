"""The fabric intent: inventory, lossless profile, host NIC settings and validation policy.

These pydantic models describe what a user writes in ``fabric.yaml`` and in the profiles
under ``playbooks/profiles/``. Every field that can reach a device CLI (names, interfaces,
descriptions) is constrained at load time so that a value such as ``"Ethernet1\\nshutdown"``
can never be typed into a switch. Loading (with file:line error reporting) lives in
:mod:`agent.intent.loader`; cross-field rules in :mod:`agent.intent.rules`.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from agent.errors import CredentialError
from agent.intent.tokens import check_host_key_line, check_rdma_port_ref
from agent.intent.tokens import token_check as _token_check
from agent.intent.units import SPEED_MAX_BPS, SPEED_MIN_BPS, UnitError, parse_size, parse_speed
from common.errors import excerpt, printable
from common.permissions import PASSWORD, PRIVATE_KEY, FileRefused, SecretKind, read_secret

PLATFORMS = ("arista_eos", "cisco_nxos", "sonic", "cumulus_nvue", "linux_host")
Platform = Literal["arista_eos", "cisco_nxos", "sonic", "cumulus_nvue", "linux_host"]
Role = Literal["spine", "leaf", "host"]
DCQCN_PARAMETERS = (
    "clamp_tgt_rate",
    "clamp_tgt_rate_after_time_inc",
    "rpg_time_reset",
    "rpg_byte_reset",
    "rpg_ai_rate",
    "rpg_hai_rate",
    "rpg_gd",
    "rpg_min_dec_fac",
    "rpg_min_rate",
    "dce_tcp_g",
    "rate_reduce_monitor_period",
    "initial_alpha_value",
    "min_time_between_cnps",
    "cnp_dscp",
    "cnp_802p_prio",
)


# Longest names and texts the file may hold; each is checked before any pattern runs on it
# (agent.intent.tokens.token_check). Per platform, port names are bounded further
# (agent.intent.portnames); descriptions never reach a device.
MAX_NAME = 64
MAX_INTERFACE = 48
MAX_DESCRIPTION = 200

check_name = _token_check(
    "name",
    r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    "starting with a letter or digit, then letters, digits, '.', '_' or '-'",
    MAX_NAME,
)
check_interface = _token_check(
    "interface name",
    # No '..' and no '//': names end up in sysfs paths and file names on hosts.
    r"[A-Za-z](?:[A-Za-z0-9_-]|[/.](?![/.]))*",
    "starting with a letter, then letters, digits, '/', '.', '_' or '-', with no '..' "
    "or '//' (e.g. Ethernet1/1)",
    MAX_INTERFACE,
)


def _pattern_schema(pattern: str, max_length: int) -> WithJsonSchema:
    """The same rule for editors (docs/reference/fabric.schema.json)."""
    return WithJsonSchema({"type": "string", "pattern": f"^{pattern}$", "maxLength": max_length})


Name = Annotated[
    str, AfterValidator(check_name), _pattern_schema(r"[A-Za-z0-9][A-Za-z0-9_.-]*", MAX_NAME)
]
InterfaceName = Annotated[
    str,
    AfterValidator(check_interface),
    # check_interface's rule without look-ahead: a '/' or '.' is followed by another character
    _pattern_schema(r"[A-Za-z](?:[A-Za-z0-9_-]|[/.][A-Za-z0-9_-])*[/.]?", MAX_INTERFACE),
]
Username = Annotated[
    str,
    AfterValidator(
        _token_check(
            "username", r"[A-Za-z_][A-Za-z0-9_.-]*", "letters, digits, '.', '_' or '-'", 32
        )
    ),
    _pattern_schema(r"[A-Za-z_][A-Za-z0-9_.-]*", 32),
]
Hostname = Annotated[
    str,
    AfterValidator(
        _token_check(
            "host", r"[A-Za-z0-9][A-Za-z0-9.:-]*", "a DNS name or an IPv4/IPv6 address", 253
        )
    ),
    _pattern_schema(r"[A-Za-z0-9][A-Za-z0-9.:-]*", 253),
]
EnvVarName = Annotated[
    str,
    AfterValidator(
        _token_check(
            "environment variable name", r"[A-Za-z_][A-Za-z0-9_]*", "letters, digits and '_'", 128
        )
    ),
    _pattern_schema(r"[A-Za-z_][A-Za-z0-9_]*", 128),
]
Description = Annotated[
    str,
    AfterValidator(
        _token_check(
            "description",
            r"[^\x00-\x1f\x7f]*",
            "printable text without newlines or control characters",
            MAX_DESCRIPTION,
        )
    ),
]
ProbePython = Annotated[
    str,
    AfterValidator(
        _token_check("interpreter path", r"[A-Za-z0-9_./+-]+", "a path without spaces", 255)
    ),
]
HostKeyLine = Annotated[str, AfterValidator(check_host_key_line)]
# An RDMA device as the kernel names it, optionally with its port (agent/intent/tokens.py).
RdmaPortRef = Annotated[str, AfterValidator(check_rdma_port_ref)]
HostKeyPolicyName = Literal["strict", "tofu"]


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


PinnedHostKeys = Annotated[list[HostKeyLine], BeforeValidator(_one_or_many), Field(max_length=8)]
Priority = Annotated[int, Field(ge=0, le=7)]
Dscp = Annotated[int, Field(ge=0, le=63)]


def _speed(value: Any) -> Any:
    try:
        return parse_speed(value) if isinstance(value, str | int) else value
    except UnitError as exc:
        raise ValueError(str(exc)) from None


def _size(value: Any) -> Any:
    if value == "auto":
        return value
    try:
        return parse_size(value) if isinstance(value, str | int) else value
    except UnitError as exc:
        raise ValueError(str(exc)) from None


# How the file writes them (JSON Schema for editors, docs/reference/fabric.schema.json): the
# model holds bits/s and bytes, the file says 400G and 150KB (agent.intent.units' grammar).
_SPEED_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": SPEED_MIN_BPS, "maximum": SPEED_MAX_BPS},
        {
            "type": "string",
            "pattern": r"^\s*[0-9]{1,15}(\.[0-9]{1,9})?\s*[KMGTkmgt]?(b/s|bps)?\s*$",
        },
    ],
    "description": "bits/s, or 10M, 25G, 100G, 400G (1M to 800G)",
}
_SIZE_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {
            "type": "string",
            "pattern": r"^\s*[0-9]{1,15}(\.[0-9]{1,9})?\s*([KMGkmg][iI]?[Bb]|[Bb])?\s*$",
        },
    ],
    "description": "bytes, or 150KB (10^3), 1.5MB, 64KiB (2^10)",
}
SpeedBps = Annotated[
    int,
    BeforeValidator(_speed),
    Field(strict=True, ge=SPEED_MIN_BPS, le=SPEED_MAX_BPS),
    WithJsonSchema(_SPEED_SCHEMA),
]
Bytes = Annotated[int, BeforeValidator(_size), Field(ge=0, le=2**40), WithJsonSchema(_SIZE_SCHEMA)]
BytesOrAuto = Annotated[
    Annotated[int, Field(ge=0, le=2**40)] | Literal["auto"],
    BeforeValidator(_size),
    WithJsonSchema({"anyOf": [*_SIZE_SCHEMA["anyOf"], {"const": "auto"}]}),
]


def _peer(value: str) -> str:
    device, sep, port = value.partition(":")
    if not sep or not device or not port:
        raise ValueError(f"expected 'device:port' (e.g. spine1:Ethernet1), got {excerpt(value)}")
    check_name(device)
    check_interface(port)
    return value


PeerRef = Annotated[str, AfterValidator(_peer)]


def _mac(value: str) -> str:
    if len(value) != 17 or not re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}", value):
        raise ValueError(f"expected a MAC address such as 02:00:00:00:00:01, got {excerpt(value)}")
    return value.lower()


MacAddress = Annotated[str, AfterValidator(_mac)]


class StrictModel(BaseModel):
    """Unknown keys are errors: a misspelt ``pfc_priorites`` must not pass silently. Numbers
    are finite: ``max_pause_frames_per_s: "inf"`` would switch its check off (issue #42), and
    every numeric field has an upper bound besides."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- inventory


class Credentials(StrictModel):
    """Where the password or key lives; the secret itself is never in the fabric file."""

    password_env: EnvVarName | None = None
    password_file: Path | None = None
    ssh_key: Path | None = None

    @model_validator(mode="after")
    def _one_password_source(self) -> Credentials:
        if self.password_env and self.password_file:
            raise ValueError("set password_env or password_file, not both")
        if not (self.password_env or self.password_file or self.ssh_key):
            raise ValueError("set one of password_env, password_file or ssh_key")
        return self

    def resolve_password(self, device: str) -> SecretStr | None:
        """Read the password now; raise :class:`CredentialError` naming device and field.

        A password file is read only as common.permissions allows a secret to be read: a
        regular file of one line, owned by the agent's user or root, readable by no one else
        (``--insecure-permissions`` to override the last two)."""
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise CredentialError(
                    f"device {device}: credentials.password_env: "
                    f"environment variable {self.password_env} is not set"
                )
            return SecretStr(value)
        if self.password_file:
            raw = _secret(device, "password_file", self.password_file, PASSWORD)
            return SecretStr(raw.decode("utf-8").rstrip("\r\n"))
        return None

    def check_key(self, device: str) -> None:
        """The key file must pass the same checks (a private key, the agent's or root's, no
        one else can read it) before any connection is attempted."""
        if self.ssh_key:
            _secret(device, "ssh_key", self.ssh_key, PRIVATE_KEY)


def _secret(device: str, field: str, path: Path, kind: SecretKind) -> bytes:
    try:
        return read_secret(path, kind)
    except FileRefused as exc:
        raise CredentialError(
            f"device {device}: credentials.{field}: cannot read {printable(str(path))}: "
            f"{exc.reason}"
        ) from None


class Port(StrictModel):
    """One switch or NIC port and the link it terminates."""

    name: InterfaceName
    speed: SpeedBps
    # No defaults: PFC headroom grows with the cable and the MTU (agent.intent.sizing), so a
    # silent 3 m or 9100 would size a 30 m link's headroom too small (issue #29). The loader
    # fills a missing value from the peer end, port_defaults or defaults.ports, or refuses.
    cable_m: float = Field(
        ge=0, le=10_000, description="cable length in metres (PFC headroom depends on it)"
    )
    mtu: int = Field(ge=1280, le=9216, description="L2 MTU in bytes, equal on both ends")
    peer: PeerRef | None = None
    description: Description | None = None
    ipv4: ipaddress.IPv4Interface | None = None
    mac: MacAddress | None = None
    rdma_device: RdmaPortRef | None = Field(
        default=None,
        description="hosts: the RDMA device (and port, default 1) behind this netdev, e.g. "
        "mlx5_0 or mlx5_0/1; perftest acceptance runs on the ports that declare one",
    )

    @property
    def rdma_name_and_port(self) -> tuple[str, int] | None:
        """``("mlx5_0", 1)`` for ``rdma_device: mlx5_0`` or ``mlx5_0/1``; None without one."""
        if self.rdma_device is None:
            return None
        name, _, port = self.rdma_device.partition("/")
        return name, int(port or 1)


class PortDefaults(StrictModel):
    """Port values for every port that does not set its own (``defaults.ports`` for the
    fabric, a device's ``port_defaults`` for its ports). The loader resolves speed, mtu and
    cable_m per link: what each end states (its port, else its port_defaults), else what the
    other end states, else defaults.ports; none is an error at the port, two ends that state
    different values are refused (IR009)."""

    speed: SpeedBps | None = None
    mtu: int | None = Field(default=None, ge=1280, le=9216)
    cable_m: float | None = Field(default=None, ge=0, le=10_000)
    description: Description | None = None


class GnmiTls(StrictModel):
    """How the agent checks a switch's gNMI certificate: TLS is always on (``exporter
    --insecure`` is the one way around it, and it is logged)."""

    ca: Path | None = Field(
        default=None, description="PEM CA bundle to verify the switch with (default: system CAs)"
    )
    server_name: Hostname | None = Field(
        default=None, description="name the certificate must carry (default: the device's host)"
    )


class GnmiSettings(StrictModel):
    """Where a switch serves gNMI (``exporter --telemetry gnmi|auto``)."""

    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="gNMI port (default: the NOS's: EOS 6030, SONiC 8080, NVUE 9339)",
    )
    tls: GnmiTls = GnmiTls()


class DeviceDefaults(StrictModel):
    """Values every device gets unless it sets its own."""

    username: Username | None = None
    credentials: Credentials | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    known_hosts: Path | None = None
    host_key_policy: HostKeyPolicyName | None = None
    gnmi: GnmiSettings | None = None
    ports: PortDefaults | None = Field(
        default=None, description="defaults for every port (speed, mtu, cable_m, description)"
    )


class Device(StrictModel):
    """A switch or a host of the fabric and how to reach its management plane."""

    name: Name
    platform: Platform
    role: Role
    host: Hostname | None = None
    port: int = Field(default=22, ge=1, le=65535)
    username: Username | None = None
    credentials: Credentials | None = None
    netns: Name | None = Field(
        default=None, description="lab hosts: run probes in this network namespace, not over SSH"
    )
    description: Description | None = None
    probe_python: ProbePython = Field(
        default="python3",
        description="hosts reached over SSH: interpreter that has roce-fabric-agent installed",
    )
    ports: list[Port] = Field(default_factory=list)
    host_key: PinnedHostKeys | None = Field(
        default=None, description="pinned SSH host key(s), 'TYPE BASE64' as in a .pub file"
    )
    known_hosts: Path | None = Field(default=None, description="known_hosts file to check with")
    host_key_policy: HostKeyPolicyName = Field(
        default="strict", description="tofu: record an unknown host's key on first contact"
    )
    gnmi: GnmiSettings | None = Field(
        default=None, description="switches: gNMI telemetry endpoint (default: the NOS's port)"
    )

    @model_validator(mode="after")
    def _reachable(self) -> Device:
        if self.host is None and self.netns is None:
            raise ValueError("set host (management address) or netns (lab hosts)")
        if self.host is not None and (self.username is None or self.credentials is None):
            missing = "username" if self.username is None else "credentials"
            raise ValueError(f"{missing} is required to reach {self.host} (set it or defaults)")
        if (self.platform == "linux_host") != (self.role == "host"):
            raise ValueError(
                f"IR020 Expected: platform linux_host exactly for role host "
                f"Actual: platform {self.platform}, role {self.role}"
            )
        if self.role != "host" and (named := [p.name for p in self.ports if p.rdma_device]):
            raise ValueError(
                f"ports.rdma_device: Expected: only on host ports Actual: set on "
                f"{self.role} {self.name} port(s) {', '.join(named)}"
            )
        return self

    def rdma_ports(self) -> list[Port]:
        """The ports that declare an RDMA device (perftest runs on these)."""
        return [p for p in self.ports if p.rdma_device is not None]

    def port_named(self, name: str) -> Port | None:
        return next((p for p in self.ports if p.name == name), None)


# --------------------------------------------------------------------------- profile


class TrafficClass(StrictModel):
    dscp: Dscp
    priority: Priority


class Watchdog(StrictModel):
    """PFC watchdog: a class paused for ``detection_ms`` with traffic queued is a storm."""

    enabled: bool = True
    detection_ms: int = Field(default=200, ge=10, le=60_000)
    restoration_ms: int = Field(default=400, ge=10, le=600_000)
    polling_ms: int = Field(default=100, ge=10, le=10_000)
    action: Literal["drop", "forward", "alert"] = "drop"


class Pfc(StrictModel):
    priorities: list[Priority] = Field(default_factory=lambda: [3])
    watchdog: Watchdog = Field(default_factory=Watchdog)

    @field_validator("priorities")
    @classmethod
    def _unique(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"priorities must be unique, got {value}")
        return sorted(value)


class EcnQueue(StrictModel):
    """WRED/ECN on one egress queue: mark between min and max with up to max_probability %."""

    min_threshold: BytesOrAuto = "auto"
    max_threshold: BytesOrAuto = "auto"
    max_probability: int = Field(default=100, description="marking probability at max, %")

    @field_validator("max_probability")
    @classmethod
    def _probability_range(cls, value: int) -> int:
        if not 1 <= value <= 100:
            raise ValueError(f"IR007 Expected: max_probability 1-100 (%) Actual: {value}")
        return value


class Ecn(StrictModel):
    enabled: bool = True
    queues: dict[Priority, EcnQueue] = Field(default_factory=lambda: {3: EcnQueue()})
    marking: Literal["enqueue", "dequeue"] = Field(
        default="enqueue",
        description="where the switch ASIC decides the mark, for the twin: enqueue (the depth "
        "a frame finds) or dequeue (the depth it leaves behind, as the RDMA ns-3 of HPCC and "
        "htsim do); no NOS command sets it, nothing is pushed",
    )


class Buffers(StrictModel):
    """Ingress buffer for each lossless priority of each port.

    ``xoff``, ``xon`` and ``size`` are the PFC headroom in SONiC's BUFFER_PROFILE sense
    (xoff = bytes still arriving after a pause is sent, size = xon + xoff); ``auto`` computes
    them per port from speed, cable length and MTU (:func:`agent.intent.sizing.pfc_headroom`).
    ``pause_threshold`` is the ingress occupancy at which the switch sends XOFF; ECN must
    mark before it is reached (rule IR005).
    """

    xoff: BytesOrAuto = "auto"
    xon: BytesOrAuto = "auto"
    size: BytesOrAuto = "auto"
    pause_threshold: BytesOrAuto = "auto"


class Ets(StrictModel):
    """Egress scheduling: strict queues first, then weighted shares (percent) of the rest."""

    strict: list[Priority] = Field(default_factory=lambda: [6])
    weights: dict[Priority, Annotated[int, Field(ge=1, le=100)]] = Field(
        default_factory=lambda: {0: 50, 3: 50}
    )


# What the mlx5 driver takes for one congestion parameter: set_param() in
# drivers/infiniband/hw/mlx5/cong.c parses an unsigned 32-bit value (at most 10 characters)
# and hands it to the firmware as a u32.
U32_MAX = 2**32 - 1


class Dcqcn(StrictModel):
    """DCQCN reaction/notification point parameters, named as in mlx5 sysfs.

    Unset values take :func:`agent.intent.sizing.dcqcn_nic_defaults`.
    """

    clamp_tgt_rate: int | None = Field(default=None, ge=0, le=1)
    clamp_tgt_rate_after_time_inc: int | None = Field(default=None, ge=0, le=1)
    rpg_time_reset: int | None = Field(default=None, ge=1, le=U32_MAX)
    rpg_byte_reset: int | None = Field(default=None, ge=1, le=U32_MAX)
    rpg_ai_rate: int | None = Field(default=None, ge=1, le=U32_MAX)
    rpg_hai_rate: int | None = Field(default=None, ge=1, le=U32_MAX)
    rpg_gd: int | None = Field(default=None, ge=0, le=15)
    rpg_min_dec_fac: int | None = Field(default=None, ge=1, le=100)
    rpg_min_rate: int | None = Field(default=None, ge=1, le=U32_MAX)
    dce_tcp_g: int | None = Field(default=None, ge=0, le=1023)
    rate_reduce_monitor_period: int | None = Field(default=None, ge=1, le=U32_MAX)
    initial_alpha_value: int | None = Field(default=None, ge=0, le=1023)
    min_time_between_cnps: int | None = Field(default=None, ge=0, le=U32_MAX)
    cnp_dscp: Dscp | None = None
    cnp_802p_prio: Priority | None = None


class Nic(StrictModel):
    """Host NIC side of the profile (mlx5 naming)."""

    trust: Literal["dscp", "pcp"] = "dscp"
    pfc_priorities: list[Priority] | None = Field(
        default=None, description="defaults to the switch PFC priorities"
    )
    dcqcn: Dcqcn = Field(default_factory=Dcqcn)


class JobSettings(StrictModel):
    """What a job on the fabric is told beyond the fabric itself: ``roce-agent nccl`` turns it
    into NCCL's environment (docs/job-environment.md). Nothing here reaches a device.

    ``qps_per_connection`` is tune's recommendation (``roce-agent tune --write-override``
    writes it here): NCCL_IB_QPS_PER_CONNECTION, "Number between 1 and 128, default is 1"
    (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, section
    NCCL_IB_QPS_PER_CONNECTION). ``control`` is a class for NCCL's control (FIFO / credit
    return) messages, NCCL_IB_FIFO_TC (same page, since NCCL 2.22.3; NVIDIA/nccl PR #1194).
    """

    qps_per_connection: int | None = Field(
        default=None, ge=1, le=128,
        description="NCCL_IB_QPS_PER_CONNECTION for jobs (tune's recommendation); unset: "
        "NCCL's default (1)",
    )  # fmt: skip
    split_data_on_qps: bool | None = Field(
        default=None,
        description="NCCL_IB_SPLIT_DATA_ON_QPS: true splits each message over the QPs; unset: "
        "NCCL's default (round-robin since 2.20)",
    )
    control: TrafficClass | None = Field(
        default=None,
        description="class for NCCL's control messages (NCCL_IB_FIFO_TC); unset: the RoCE class",
    )


class Trim(StrictModel):
    """Packet trimming, for a RoCE class in ``mode: lossy-trim``: a frame the class's full
    queue cannot take is cut to ``size_bytes`` and forwarded, re-marked ``dscp``, in the queue
    of ``priority`` (usually a strict one) instead of being dropped, so the receiver learns of
    the loss at once. SONiC: ``SWITCH_TRIMMING|GLOBAL`` (``size``, ``dscp_value``,
    ``queue_index``) and ``BUFFER_PROFILE|...|packet_discard_action: trim``
    (sonic-net/SONiC doc/packet_trimming/packet-trimming-design.md, 0031145); Cumulus Linux
    5.14+: ``nv set system forwarding packet-trim`` (size 256-1024, a multiple of 4) and ``nv
    set qos roce mode lossy-multi-tc`` (CumulusNetworks/docs, "Packet Trimming"). Unset
    ``dscp`` and ``priority`` take the CNP class's, as the SONiC design's example does (DSCP
    48, queue 6)."""

    size_bytes: int = Field(
        default=256, ge=64, le=9216,
        description="bytes a trimmed frame keeps (SONiC's default is 128, Cumulus takes "
        "256-1024 in steps of 4; 256 is valid on both)",
    )  # fmt: skip
    dscp: Dscp | None = Field(default=None, description="DSCP of trimmed frames; unset: CNP's")
    priority: Priority | None = Field(
        default=None, description="switch priority (and queue) of trimmed frames; unset: CNP's"
    )


class Profile(StrictModel):
    """A lossless profile: the QoS intent applied to every fabric port."""

    name: Name
    description: Description | None = None
    source: Description | None = Field(default=None, description="where the values come from")
    mode: Literal["lossless", "lossy", "lossy-trim"] = Field(
        default="lossless",
        description="lossless: PFC on the RoCE class; lossy: ECN only; lossy-trim: no PFC, "
        "the switches trim what the RoCE queue cannot take (trim)",
    )
    trim: Trim = Field(default_factory=Trim, description="packet trimming, in mode lossy-trim")
    trust: Literal["dscp", "pcp"] = "dscp"
    roce: TrafficClass = TrafficClass(dscp=26, priority=3)
    cnp: TrafficClass = TrafficClass(dscp=48, priority=6)
    dscp_map: dict[Priority, list[Dscp]] = Field(
        default_factory=dict,
        description="extra DSCP values per priority; unlisted DSCPs go to priority 0",
    )
    pfc: Pfc = Field(default_factory=Pfc)
    ecn: Ecn = Field(default_factory=Ecn)
    buffers: Buffers = Field(default_factory=Buffers)
    ets: Ets = Field(default_factory=Ets)
    nic: Nic = Field(default_factory=Nic)
    job: JobSettings = Field(default_factory=JobSettings)

    @model_validator(mode="after")
    def _control_class_is_mapped(self) -> Profile:
        """The control class must be one the switches classify as it says: a DSCP that the
        profile sends to its priority (roce, cnp or dscp_map; every other DSCP goes to
        priority 0, agent.intent.plan.dscp_map), or NCCL's control messages would ride a
        queue other than the one named."""
        control = self.job.control
        if control is None:
            return self
        mapped = {d: p for p, dscps in self.dscp_map.items() for d in dscps}
        mapped[self.roce.dscp] = self.roce.priority
        mapped[self.cnp.dscp] = self.cnp.priority
        actual = mapped.get(control.dscp, 0)
        if actual != control.priority:
            raise ValueError(
                f"job.control: Expected: DSCP {control.dscp} sent to priority "
                f"{control.priority} by this profile (roce, cnp or dscp_map) Actual: the "
                f"profile sends DSCP {control.dscp} to priority {actual}"
            )
        return self


# --------------------------------------------------------------------------- policy


UdpPort = Annotated[int, Field(ge=1, le=65535)]
# The switch and NIC counters a threshold is compared with are 64-bit.
COUNTER_MAX = 2**64 - 1
ROCE_UDP_PORT = 4791


class ProbePolicy(StrictModel):
    rate: SpeedBps = Field(default=1_000_000, description="per-flow probe rate")
    duration_s: float = Field(default=5.0, gt=0, le=3600)
    max_loss: int = Field(default=0, ge=0, le=COUNTER_MAX)
    udp_port: UdpPort | Literal["auto"] = Field(
        default="auto",
        description="probes' UDP destination port; auto: 4791, or rdma_udp_port when a probed "
        "host's interface carries an RDMA device (its NIC would take UDP 4791)",
    )
    rdma_udp_port: UdpPort = Field(
        default=54791,
        description="the port auto picks on RDMA hosts (dynamic range: IANA assigns none)",
    )

    @model_validator(mode="after")
    def _alternate_port(self) -> ProbePolicy:
        if self.rdma_udp_port == ROCE_UDP_PORT:
            raise ValueError(
                f"rdma_udp_port: Expected: a port other than {ROCE_UDP_PORT} (a RoCE NIC takes "
                f"that one) Actual: {self.rdma_udp_port}"
            )
        return self


class PerftestPolicy(StrictModel):
    """Line-rate acceptance with perftest (``roce-agent probe perftest``) on hosts whose ports
    declare an ``rdma_device``. NVIDIA's multinode acceptance (ngc_multinode_perf) passes a
    link at 90 % of its port speed."""

    test: Literal["write", "read", "send"] = Field(
        default="write", description="ib_write_bw, ib_read_bw or ib_send_bw"
    )
    qps: int = Field(default=4, ge=1, le=64, description="queue pairs per client (-q)")
    duration_s: float = Field(default=10.0, gt=0, le=3600, description="per test (-D)")
    message_bytes: Bytes = Field(default=65536, description="message size (-s)")
    min_line_rate_fraction: float = Field(
        default=0.9, gt=0, le=1, description="pairs: average bandwidth over port speed"
    )
    min_fairness: float = Field(
        default=0.9, gt=0, le=1,
        description="incast: Jain's fairness index of the senders' bandwidths",
    )  # fmt: skip
    base_tcp_port: int = Field(
        default=18515, ge=1024, le=65000, description="perftest's exchange port (-p), +1 each"
    )

    @field_validator("message_bytes")
    @classmethod
    def _message_size(cls, value: int) -> int:
        if not 2 <= value <= 2**30:
            raise ValueError(f"Expected: 2 B to 1 GiB Actual: {value} B")
        return value


# The nccl-tests binaries whose bus bandwidth doc/PERFORMANCE.md defines (NVIDIA/nccl-tests).
NcclTestName = Literal[
    "all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
    "broadcast_perf", "reduce_perf", "sendrecv_perf",
]  # fmt: skip


def _all_reduce_only() -> list[NcclTestName]:
    return ["all_reduce_perf"]


class NcclTestPolicy(StrictModel):
    """NCCL acceptance with nccl-tests (``roce-agent probe nccl``) on the RDMA hosts that have
    GPUs. Sizes, iterations and checks are nccl-tests' own options (its README, "Arguments");
    the defaults scan as the README's multi-node example does (``-b 8 -e 8G -f 2 -g 1``).

    ``min_busbw_fraction``: the bus bandwidth at the largest size, per NIC, over the NIC's line
    rate. 0.9 is the mark of NVIDIA's multinode acceptance (Mellanox/ngc_multinode_perf passes
    a link at 90 % of its port speed); NVIDIA's guideline for all_reduce is about 96 % (24 GB/s
    per 200G NIC, sjeaugey in NVIDIA/nccl-tests#119), so 0.9 leaves room for the other tests.
    """

    tests: list[NcclTestName] = Field(default_factory=_all_reduce_only, min_length=1)
    min_bytes: Bytes = Field(default=8, description="-b, the first size")
    max_bytes: Bytes = Field(default=8 * 2**30, description="-e, the last size")
    step_factor: int = Field(default=2, ge=2, le=1024, description="-f, sizes multiply by it")
    iters: int = Field(default=20, ge=1, le=100_000, description="-n, timed iterations")
    warmup_iters: int = Field(default=5, ge=0, le=100_000, description="-w")
    check_iters: int = Field(
        default=1, ge=1, le=1000, description="-c, iterations whose results are checked"
    )
    min_busbw_fraction: float = Field(default=0.9, gt=0, le=1)
    binary_dir: str | None = Field(
        default=None, description="where the hosts keep nccl-tests' binaries (default: PATH)"
    )
    mpirun: str = Field(default="mpirun", description="Open MPI's launcher on the first host")
    timeout_s: float = Field(default=1800.0, gt=0, le=86400, description="per test")

    @model_validator(mode="after")
    def _sizes(self) -> NcclTestPolicy:
        if not 1 <= self.min_bytes <= self.max_bytes:
            raise ValueError(
                f"sizes: Expected: 1 <= min_bytes <= max_bytes Actual: {self.min_bytes} and "
                f"{self.max_bytes}"
            )
        return self


# More pause frames per second than the fastest link can carry: at 800G a pause frame takes
# 672 bit times on the wire (64 bytes, preamble and inter-frame gap), 1.19e9 a second.
MAX_PAUSE_RATE = 2e9


class ValidationPolicy(StrictModel):
    """Thresholds the counter and wire checks apply; each is finite and bounded by what the
    counter it is compared with can hold (64 bits) or a link can carry."""

    max_lossless_drops: int = Field(default=0, ge=0, le=COUNTER_MAX)
    max_pause_frames_per_s: float = Field(default=1000.0, ge=0, le=MAX_PAUSE_RATE)
    max_storms: int = Field(default=0, ge=0, le=COUNTER_MAX)
    probe: ProbePolicy = Field(default_factory=ProbePolicy)
    perftest: PerftestPolicy = Field(default_factory=PerftestPolicy)
    nccl: NcclTestPolicy = Field(default_factory=NcclTestPolicy)


class Emulation(StrictModel):
    """Only for emulated fabrics (the lab): what the fabric's links stand for.

    ``time_dilation`` D says a lab link stands for one D times faster (a 10 Mb/s lab port
    standing for 10 Gb/s: 1000). The lab hosts' DCQCN reaction and notification points then
    run D times slower with D times smaller rates (:mod:`agent.observe.probes.dilation`), so ECN,
    DCQCN and PFC interact as on the emulated link. It changes no device configuration:
    ``check``, ``plan``, ``diff`` and ``apply`` never read it. 1 = real time (real fabrics).
    """

    time_dilation: int = Field(default=1, ge=1, le=1_000_000)


class FabricIntent(StrictModel):
    """Everything the agent needs to configure and validate one fabric."""

    name: Name
    profile: Profile
    devices: list[Device] = Field(min_length=1)
    validation: ValidationPolicy = Field(default_factory=ValidationPolicy)
    emulation: Emulation = Field(
        default_factory=Emulation, description="emulated fabrics (the lab) only"
    )

    def device(self, name: str) -> Device | None:
        return next((d for d in self.devices if d.name == name), None)

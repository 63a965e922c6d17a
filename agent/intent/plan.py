"""The plan: what each device and port should look like, computed from the intent.

``auto`` values are resolved here with :mod:`agent.intent.sizing`, so the plan is the single,
fully explicit desired state that rendering (per platform) and validation work from.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from agent.intent import sizing
from agent.intent.expand import recorded_sources
from agent.intent.model import DCQCN_PARAMETERS, Device, FabricIntent, Port, Profile, Watchdog
from agent.intent.units import format_speed

DEFAULT_PRIORITY = 0


class PlanModel(BaseModel):
    model_config = ConfigDict(frozen=True)


class HeadroomPlan(PlanModel):
    """PFC headroom of one lossless priority on one port (SONiC BUFFER_PROFILE terms)."""

    xoff: int
    xon: int
    size: int
    pause_threshold: int
    minimum_xoff: int
    source: str  # "auto" or "explicit"


class EcnPlan(PlanModel):
    queue: int
    min_bytes: int
    max_bytes: int
    max_probability: int


class PortPlan(PlanModel):
    name: str
    speed_bps: int
    speed: str
    cable_m: float
    mtu: int
    peer: str | None
    pfc_priorities: list[int]
    headroom: dict[int, HeadroomPlan]
    ecn: list[EcnPlan]
    # speed/mtu/cable_m -> where the value came from ("fabric.yml:12:9", "defaults.ports
    # (fabric.yml:8:3)", "peer spine1:Ethernet1 (…)"): headroom follows from these.
    sources: dict[str, str] = Field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        # Where a value came from is not desired state: two fabrics asking for the same
        # configuration plan equal, whichever file, line or default says it.
        if not isinstance(other, PortPlan):
            return NotImplemented
        mine = {k: v for k, v in self.__dict__.items() if k != "sources"}
        return mine == {k: v for k, v in other.__dict__.items() if k != "sources"}


class NicPlan(PlanModel):
    trust: str
    pfc_priorities: list[int]
    pfc_vector: str
    dscp_to_priority: dict[int, int]
    dcqcn: dict[str, int]


class EtsPlan(PlanModel):
    strict: list[int]
    weights: dict[int, int]


class TrimPlan(PlanModel):
    """Packet trimming on a switch (mode lossy-trim): frames of ``queues`` that their queue
    cannot take are cut to ``size_bytes`` and sent re-marked ``dscp`` in queue ``priority``."""

    size_bytes: int
    dscp: int
    priority: int
    queues: list[int]


class DevicePlan(PlanModel):
    name: str
    platform: str
    role: str
    trust: str
    dscp_to_priority: dict[int, int]
    default_priority: int
    pfc_priorities: list[int]
    watchdog: Watchdog
    ets: EtsPlan
    ports: list[PortPlan]
    nic: NicPlan | None
    trim: TrimPlan | None = None


class Plan(PlanModel):
    fabric: str
    profile: str
    mode: str
    devices: list[DevicePlan]

    def device(self, name: str) -> DevicePlan | None:
        return next((d for d in self.devices if d.name == name), None)


def dscp_map(profile: Profile) -> dict[int, int]:
    """DSCP → priority for every DSCP that does not go to the default priority 0.

    Only RoCE, CNP and explicitly listed DSCPs leave priority 0, so no other traffic can
    land in the lossless class (a stock ``tc = dscp >> 3`` map would put DSCP 24-31 there).
    """
    mapping: dict[int, int] = {}
    for priority, dscps in sorted(profile.dscp_map.items()):
        for dscp in dscps:
            mapping[dscp] = priority
    mapping[profile.roce.dscp] = profile.roce.priority
    mapping[profile.cnp.dscp] = profile.cnp.priority
    return dict(sorted((d, p) for d, p in mapping.items() if p != DEFAULT_PRIORITY))


def pfc_priorities(profile: Profile) -> list[int]:
    return list(profile.pfc.priorities) if profile.mode == "lossless" else []


def trim_plan(profile: Profile) -> TrimPlan | None:
    """The RoCE class's trimming in mode lossy-trim (None otherwise); unset DSCP and
    priority are the CNP class's."""
    if profile.mode != "lossy-trim":
        return None
    trim = profile.trim
    return TrimPlan(
        size_bytes=trim.size_bytes,
        dscp=profile.cnp.dscp if trim.dscp is None else trim.dscp,
        priority=profile.cnp.priority if trim.priority is None else trim.priority,
        queues=[profile.roce.priority],
    )


def watchdog_for(profile: Profile) -> Watchdog:
    """A lossy-trim class sends no PFC, so there is no pause storm to watch for."""
    return Watchdog(enabled=False) if profile.mode == "lossy-trim" else profile.pfc.watchdog


def ecn_for_port(profile: Profile, port: Port) -> list[EcnPlan]:
    if not profile.ecn.enabled:
        return []
    recommended = sizing.ecn_thresholds(port.speed, mtu=port.mtu)
    plans = []
    for queue, settings in sorted(profile.ecn.queues.items()):
        low = recommended.min_bytes if settings.min_threshold == "auto" else settings.min_threshold
        high = recommended.max_bytes if settings.max_threshold == "auto" else settings.max_threshold
        plans.append(
            EcnPlan(
                queue=queue, min_bytes=low, max_bytes=high, max_probability=settings.max_probability
            )
        )
    return plans


def headroom_for_port(profile: Profile, port: Port, ecn: list[EcnPlan]) -> HeadroomPlan:
    """Headroom from tuning unless the profile pins it; pause threshold above ECN max."""
    computed = sizing.pfc_headroom(port.speed, port.cable_m, port.mtu)
    buffers = profile.buffers
    explicit = any(v != "auto" for v in (buffers.xoff, buffers.xon, buffers.size))
    xoff = computed.xoff if buffers.xoff == "auto" else buffers.xoff
    xon = computed.xon if buffers.xon == "auto" else buffers.xon
    size = xon + xoff if buffers.size == "auto" else buffers.size
    if buffers.pause_threshold != "auto":
        pause = buffers.pause_threshold
    else:
        roce_ecn = next((e for e in ecn if e.queue == profile.roce.priority), None)
        # With ECN, pause only once marking has reached 100 % so DCQCN acts first; without
        # it nothing else slows senders, so pause as soon as xon plus two frames are queued.
        pause = (roce_ecn.max_bytes if roce_ecn else xon) + 2 * port.mtu
    return HeadroomPlan(
        xoff=xoff,
        xon=xon,
        size=size,
        pause_threshold=pause,
        minimum_xoff=computed.xoff,
        source="explicit" if explicit else "auto",
    )


def _port_plan(
    profile: Profile, device: Device, port: Port, sources: Mapping[str, str] | None = None
) -> PortPlan:
    lossless = pfc_priorities(profile) if device.role != "host" else []
    ecn = ecn_for_port(profile, port) if device.role != "host" else []
    headroom = {p: headroom_for_port(profile, port, ecn) for p in lossless}
    return PortPlan(
        name=port.name,
        speed_bps=port.speed,
        speed=format_speed(port.speed),
        cable_m=port.cable_m,
        mtu=port.mtu,
        peer=port.peer,
        pfc_priorities=lossless,
        headroom=headroom,
        ecn=ecn,
        sources=dict(sources or {}),
    )


def nic_plan(profile: Profile) -> NicPlan:
    priorities = (
        profile.nic.pfc_priorities
        if profile.nic.pfc_priorities is not None
        else pfc_priorities(profile)
    )
    dcqcn = dict(sizing.dcqcn_nic_defaults())
    dcqcn["cnp_dscp"] = profile.cnp.dscp
    dcqcn["cnp_802p_prio"] = profile.cnp.priority
    for name in DCQCN_PARAMETERS:
        value = getattr(profile.nic.dcqcn, name)
        if value is not None:
            dcqcn[name] = value
    return NicPlan(
        trust=profile.nic.trust,
        pfc_priorities=sorted(priorities),
        # mlx5 / mlnx_qos order: priority 0 first.
        pfc_vector="".join("1" if p in priorities else "0" for p in range(8)),
        dscp_to_priority=dscp_map(profile),
        dcqcn=dcqcn,
    )


def build_plan(
    intent: FabricIntent, sources: Mapping[tuple[str, str], Mapping[str, str]] | None = None
) -> Plan:
    """Resolve the intent into the desired state of every device and port.

    ``sources``: where each port's speed/mtu/cable_m came from, by (device, port); by default
    what the loader recorded for this intent (nothing for an intent built in code).
    """
    if sources is None:
        sources = recorded_sources(intent)
    profile = intent.profile
    devices = []
    for device in intent.devices:
        devices.append(
            DevicePlan(
                name=device.name,
                platform=device.platform,
                role=device.role,
                trust=profile.trust,
                dscp_to_priority=dscp_map(profile),
                default_priority=DEFAULT_PRIORITY,
                pfc_priorities=pfc_priorities(profile),
                watchdog=watchdog_for(profile),
                ets=EtsPlan(strict=sorted(profile.ets.strict), weights=dict(profile.ets.weights)),
                ports=[
                    _port_plan(profile, device, port, sources.get((device.name, port.name)))
                    for port in device.ports
                ],
                nic=nic_plan(profile) if device.role == "host" else None,
                trim=trim_plan(profile) if device.role != "host" else None,
            )
        )
    return Plan(fabric=intent.name, profile=profile.name, mode=profile.mode, devices=devices)

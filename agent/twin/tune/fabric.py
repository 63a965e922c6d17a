"""The fabric a tune starts from, and a candidate put into it.

:func:`current_ecn` reads what the plan has today at a speed (the RoCE queue's ECN, the pause
threshold, the MTU, the host-facing ports); :func:`candidate_intent` puts a candidate where a
profile override puts it (``profile.ecn.queues.<RoCE queue>``, ``profile.nic.dcqcn``) and runs
the rule checks on it as ``check`` does -- so a candidate's row is what ``roce-agent twin``
shows for the fabric with that override.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agent.intent import sizing
from agent.intent.model import FabricIntent, Profile
from agent.intent.plan import DevicePlan, HeadroomPlan, Plan, PortPlan, build_plan
from agent.intent.rules import RULES
from agent.intent.units import format_speed
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.tune.space import EcnSetting

# Rules a candidate (ECN, DCQCN) cannot break or mend: whether the switches' platforms trim
# (IR022) is the fabric's, not the setting's; ``tune --modes`` reports it beside the
# comparison (what switching needs) rather than refusing every lossy-trim candidate.
NOT_THE_CANDIDATES = frozenset({"IR022"})


def candidate_intent(
    intent: FabricIntent, ecn: EcnSetting | None, dcqcn: Iterable[tuple[str, int]] = ()
) -> tuple[FabricIntent | None, str | None]:
    """The intent with the candidate where a profile override puts it, and the first rule
    (as ``check`` runs them) it breaks, if any."""
    data = intent.profile.model_dump()
    if ecn is not None:
        data["ecn"]["queues"][intent.profile.roce.priority] = {
            "min_threshold": ecn.min_bytes,
            "max_threshold": ecn.max_bytes,
            "max_probability": ecn.max_probability,
        }
    for name, value in dcqcn:
        data["nic"]["dcqcn"][name] = value
    try:
        profile = Profile.model_validate(data)
    except ValueError as exc:
        return None, str(exc).splitlines()[0]
    variant = intent.model_copy(update={"profile": profile})
    plan = build_plan(variant)
    for registered in RULES:
        if registered.rule_id in NOT_THE_CANDIDATES:
            continue
        for violation in registered.check(variant, plan):
            return None, f"{registered.rule_id} {violation.message()}"
    return variant, None


def current_ecn(
    plan: Plan, roce: int, speed_bps: int, dilation: int = 1
) -> tuple[EcnSetting, int, int, int]:
    """(ECN of the RoCE queue, pause threshold, MTU, host-facing ports) at a speed, from the
    switch ports facing hosts at that speed; the lowest pause threshold and the largest MTU
    when they differ between ports (the tightest cap, the largest frame).  ``speed_bps`` is
    the twin's: on a time-dilated lab (``emulation.time_dilation`` D) a port of the plan runs
    at 1/D of the speed it stands for."""
    trims = plan.mode == "lossy-trim"
    found = [
        _port_setting(device, port, roce, speed_bps, trims)
        for device, port in host_facing_ports(plan, speed_bps, dilation)
    ]
    if not found:
        raise TwinError(f"tune: no switch port faces a host at {format_speed(speed_bps)}")
    return (
        found[0][0],
        min(p for _, p, _ in found),
        max(m for _, _, m in found),
        len(found),
    )


def host_facing_ports(
    plan: Plan, speed_bps: int, dilation: int = 1
) -> Iterator[tuple[DevicePlan, PortPlan]]:
    """The switch ports whose peer is a host, at the twin's ``speed_bps`` (``current_ecn``)."""
    hosts = {d.name for d in plan.devices if d.role == "host"}
    for device in plan.devices:
        if device.role == "host":
            continue
        for port in device.ports:
            peer = (port.peer or "").partition(":")[0]
            if peer in hosts and port.speed_bps * dilation == speed_bps:
                yield device, port


def _port_setting(
    device: DevicePlan, port: PortPlan, roce: int, speed_bps: int, trims: bool = False
) -> tuple[EcnSetting, int, int]:
    """(ECN of the RoCE queue, pause threshold, MTU) of a host-facing port; in lossy-trim
    (``trims``) the queue's limit, where trimming starts, stands for the pause threshold."""
    ecn = next((e for e in port.ecn if e.queue == roce), None)
    head = port.headroom.get(roce)
    if ecn is not None and head is None and trims:
        setting = EcnSetting(ecn.min_bytes, ecn.max_bytes, ecn.max_probability)
        return setting, trim_limit(port), port.mtu
    if ecn is None or head is None:
        raise TwinError(
            f"tune {format_speed(speed_bps)}: {device.name}:{port.name}. Expected: ECN "
            f"and PFC on the RoCE queue {roce} (a lossless profile with ECN) "
            "Actual: " + ("no ECN" if ecn is None else "no PFC")
        )
    setting = EcnSetting(ecn.min_bytes, ecn.max_bytes, ecn.max_probability)
    return setting, head.pause_threshold, port.mtu


def trim_limit(port: PortPlan) -> int:
    """The RoCE queue's limit on a lossy port, where a lossy-trim switch starts trimming:
    the twin's lossy queue limit (:func:`agent.twin.network._port_qos`, twice the headroom a
    lossless class would get), so ECN's ramp ends below the trims as it ends below XOFF."""
    return 2 * sizing.pfc_headroom(port.speed_bps, port.cable_m, port.mtu).size


def host_speeds(network: TwinNetwork) -> dict[int, int]:
    """Host NIC speed -> number of hosts (a host with several NICs counted once, at its first
    NIC's speed)."""
    speeds: dict[int, int] = {}
    for host in network.hosts.values():
        if host.rail:
            continue
        speeds[host.port.speed_bps] = speeds.get(host.port.speed_bps, 0) + 1
    return speeds


def host_headroom(plan: Plan, roce: int, speed_bps: int, dilation: int = 1) -> HeadroomPlan | None:
    """The RoCE queue's headroom of the first switch port facing a host at the speed (None:
    no such port, or no PFC on it)."""
    first = next(iter(host_facing_ports(plan, speed_bps, dilation)), None)
    return None if first is None else first[1].headroom.get(roce)

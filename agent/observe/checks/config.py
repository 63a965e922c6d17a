"""Configuration checks: is every switch set up as the lossless profile requires?

The set follows NVIDIA NetQ's RoCE validation (RoCE mode consistent across the fabric, DSCP
classification, PFC, ECN, ETS/CNP on every switch) and adds drift, the watchdog and headroom.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from agent.device.platforms import platform_for
from agent.device.state import QosState, diff
from agent.intent import sizing
from agent.intent.units import format_size
from agent.observe.checks.base import (
    Check,
    CheckInput,
    CheckResult,
    Collected,
    DeviceData,
    Status,
    SwitchCheck,
    SwitchStateCheck,
    expected_actual,
)
from common.text import natural_item_key


def roce_mode(state: QosState, roce_priority: int, ecn_queue: int) -> str:
    """lossless (PFC on the RoCE priority everywhere), lossy-trim (no PFC there, the RoCE
    queue trims everywhere), lossy (ECN only) or disabled."""
    interfaces = list(state.interfaces.values())
    if interfaces and all(roce_priority in i.pfc_priorities for i in interfaces):
        return "lossless"
    if (
        interfaces
        and state.trim is not None
        and all(roce_priority in i.trim_queues for i in interfaces)
    ):
        return "lossy-trim"
    if interfaces and all(
        (q := i.queues.get(ecn_queue)) is not None and q.ecn is not None for i in interfaces
    ):
        return "lossy"
    return "disabled"


class RoceModeConsistent(Check):
    """Every switch runs the fabric's RoCE mode (lossless, lossy or lossy-trim), the same
    everywhere."""

    check_id = "RC001"
    categories = ("config",)

    def run(self, data: Collected) -> list[CheckResult]:
        profile = data.intent.profile
        modes: dict[str, str] = {}
        for device in data.switches():
            if device.state is not None:
                modes[device.device.name] = roce_mode(
                    device.state, profile.roce.priority, profile.roce.priority
                )
        unread = [d.error for d in data.switches() if d.state is None and d.error]
        if not modes:
            status: Status = "unverified" if unread else "skipped"
            return [self.result("fabric", status, unread or ["no switch state collected"])]
        wrong = {name: mode for name, mode in modes.items() if mode != profile.mode}
        problems = [
            expected_actual(f"{name} RoCE mode", profile.mode, mode)
            for name, mode in sorted(wrong.items(), key=natural_item_key)
        ]
        if unread and not problems:
            # The switches read agree; the others were not read, so the fabric is not known to.
            return [self.result("fabric", "unverified", unread)]
        return [self.judge("fabric", problems + unread)]


class DscpClassification(SwitchStateCheck):
    """RoCE DSCP maps to the lossless priority and CNP DSCP to the CNP priority, with DSCP
    trust, on every switch."""

    check_id = "RC002"
    categories = ("config",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        profile = data.intent.profile
        for what, klass in (("RoCE", profile.roce), ("CNP", profile.cnp)):
            got = device.state.dscp_to_priority.get(klass.dscp)
            if got != klass.priority:
                yield expected_actual(f"{what} DSCP {klass.dscp} → priority", klass.priority, got)
        if device.state.trust != profile.trust:
            yield expected_actual("trust", profile.trust, device.state.trust)
        strays = sorted(
            dscp
            for dscp, priority in device.state.dscp_to_priority.items()
            if priority in device.plan.pfc_priorities
            and device.plan.dscp_to_priority.get(dscp) is None
        )
        if strays:
            yield expected_actual(
                "other DSCPs in the lossless class", "none", ", ".join(map(str, strays))
            )


class PfcPriorities(SwitchStateCheck):
    """PFC is on, for exactly the lossless priorities, on every fabric port."""

    check_id = "RC003"
    categories = ("config",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        for port in device.plan.ports:
            have = device.state.interfaces.get(port.name)
            if have is None:
                yield expected_actual(f"{port.name}", "configured", "missing")
                continue
            if have.pfc_enabled != bool(port.pfc_priorities):
                yield expected_actual(
                    f"{port.name} PFC", bool(port.pfc_priorities), have.pfc_enabled
                )
            if list(have.pfc_priorities) != port.pfc_priorities:
                yield expected_actual(
                    f"{port.name} PFC priorities", port.pfc_priorities, list(have.pfc_priorities)
                )


def _ecn_text(low: int, high: int, probability: int) -> str:
    return f"{format_size(low)}-{format_size(high)} @{probability}%"


class EcnThresholds(SwitchStateCheck):
    """ECN is on for the lossless queue with the profile's thresholds, and its max threshold
    is below the PFC pause threshold (ECN marks before PFC pauses)."""

    check_id = "RC004"
    categories = ("config",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        for port in device.plan.ports:
            have = device.state.interfaces.get(port.name)
            for ecn in port.ecn:
                queue = have.queues.get(ecn.queue) if have else None
                got = queue.ecn if queue else None
                want = _ecn_text(ecn.min_bytes, ecn.max_bytes, ecn.max_probability)
                if got is None:
                    yield expected_actual(f"{port.name} queue {ecn.queue} ECN", want, "off")
                    continue
                actual = _ecn_text(got.min_bytes, got.max_bytes, got.max_probability)
                if actual != want:
                    yield expected_actual(f"{port.name} queue {ecn.queue} ECN", want, actual)
                headroom = port.headroom.get(ecn.queue)
                if headroom and got.max_bytes >= headroom.pause_threshold:
                    yield expected_actual(
                        f"{port.name} queue {ecn.queue} ECN max below pause threshold",
                        f"< {format_size(headroom.pause_threshold)}",
                        format_size(got.max_bytes),
                    )


class EtsScheduling(SwitchStateCheck):
    """The CNP queue is strict priority and the RoCE queue has its bandwidth share."""

    check_id = "RC005"
    categories = ("config",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        profile = data.intent.profile
        for port in device.plan.ports:
            have = device.state.interfaces.get(port.name)
            queues = have.queues if have else {}
            cnp = queues.get(profile.cnp.priority)
            if cnp is None or not cnp.strict:
                yield expected_actual(f"{port.name} CNP queue {profile.cnp.priority}", "strict",
                                      "not strict")  # fmt: skip
            share = profile.ets.weights.get(profile.roce.priority)
            roce = queues.get(profile.roce.priority)
            got = roce.bandwidth_percent if roce else None
            if share is not None and got != share:
                yield expected_actual(
                    f"{port.name} RoCE queue {profile.roce.priority} bandwidth", f"{share}%",
                    f"{got}%" if got is not None else "none",
                )  # fmt: skip


class PfcWatchdog(SwitchStateCheck):
    """The PFC watchdog is on with a detection time within bounds and a restoration time no
    shorter than detection."""

    check_id = "RC006"
    categories = ("config",)

    class Input(CheckInput):
        min_detection_ms: int = Field(default=100, ge=1)
        max_detection_ms: int = Field(default=1000, ge=1)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        inputs = self.inputs
        assert isinstance(inputs, PfcWatchdog.Input)
        watchdog = device.state.watchdog
        if not watchdog.enabled:
            yield expected_actual("PFC watchdog", "enabled", "disabled")
            return
        detection = watchdog.detection_ms or 0
        if not inputs.min_detection_ms <= detection <= inputs.max_detection_ms:
            yield expected_actual(
                "watchdog detection",
                f"{inputs.min_detection_ms}-{inputs.max_detection_ms} ms",
                f"{detection} ms",
            )
        if watchdog.restoration_ms is not None and watchdog.restoration_ms < detection:
            yield expected_actual(
                "watchdog restoration", f">= {detection} ms", f"{watchdog.restoration_ms} ms"
            )


class Headroom(Check):
    """Every lossless port's PFC headroom is at least the minimum computed for its speed,
    cable length and MTU (SONiC's buffer_headroom_mellanox.lua arithmetic)."""

    check_id = "RC007"
    categories = ("config", "buffers")
    reads_devices = False  # the plan's headroom; the device's own is compared by RC008

    def run(self, data: Collected) -> list[CheckResult]:
        results = []
        for device in data.switches():
            problems = []
            for port in device.plan.ports:
                minimum = sizing.pfc_headroom(port.speed_bps, port.cable_m, port.mtu).xoff
                for priority, headroom in port.headroom.items():
                    if headroom.xoff < minimum:
                        problems.append(
                            expected_actual(
                                f"{port.name} priority {priority} headroom xoff",
                                f">= {minimum} B",
                                f"{headroom.xoff} B",
                            )
                        )
            results.append(self.judge(device.device.name, problems))
        return results


class ConfigDrift(SwitchStateCheck):
    """The switch's QoS configuration equals the intent, setting by setting."""

    check_id = "RC008"
    categories = ("config", "drift")

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        # The platform's desired state, as drift and apply compare: Cumulus Linux has no
        # watchdog restoration time to configure, so its plan expects none.
        desired = platform_for(device.plan.platform).desired(device.plan)
        for item in diff(device.device.name, desired, device.state):
            where = f"{item.interface} {item.setting}".strip()
            yield expected_actual(where, item.expected, item.actual)


class NoPendingSessions(SwitchCheck):
    """No switch holds a pending change: no unconfirmed commit under a rollback timer, no
    uncommitted session, checkpoint or write-ahead record left by a run. Expected: none;
    each one found is a failure naming it, its user, age and when it rolls back (its state
    is not final, so every other config check read a state that can still change)."""

    check_id = "RC009"
    categories = ("config", "drift", "sessions")

    def skip_reason(self, device: DeviceData) -> str | None:
        if device.sessions is None:
            return device.error or "sessions not collected"
        return None

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.sessions is not None
        for session in device.sessions:
            yield expected_actual("pending change", "none", session.describe())


class ClassifiedByDscpNotUdpPort(SwitchStateCheck):
    """No fabric port classifies traffic by UDP port: RoCE must reach its lossless class by
    DSCP alone. Expected: no QoS policy on a fabric port matches UDP ports. A switch that puts
    UDP 4791 in the lossless class by an ACL gives every other port a different class: the
    probes, which use another UDP port on RDMA hosts, would then measure a class the RoCE
    traffic does not use, and RoCE with another DSCP would still ride the lossless queue."""

    check_id = "RC010"
    categories = ("config",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.state is not None
        for port in device.plan.ports:
            have = device.state.interfaces.get(port.name)
            for rule in have.udp_port_classifiers if have else ():
                yield expected_actual(f"{port.name} classification", "by DSCP only", rule)

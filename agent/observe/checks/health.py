"""Counter, host and wire checks: is the fabric behaving as a lossless fabric should?"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from agent.observe.checks.base import (
    Check,
    CheckInput,
    CheckResult,
    Collected,
    DeviceData,
    SwitchCounterCheck,
    expected_actual,
)
from common.text import natural_item_key


class NoLosslessDrops(SwitchCounterCheck):
    """No packet of a lossless priority is dropped: egress queue drops and headroom drops of
    the lossless priorities stay at the policy's maximum (0 by default)."""

    check_id = "RC101"
    categories = ("counters",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.counters is not None
        allowed = data.intent.validation.max_lossless_drops
        lossless = set(device.plan.pfc_priorities)
        for name, interface in sorted(device.counters.interfaces.items(), key=natural_item_key):
            before = device.previous.interfaces.get(name) if device.previous else None
            for priority in sorted(lossless):
                queue = interface.queues.get(priority)
                dropped = (queue.dropped_packets if queue else 0) + interface.headroom_drops[
                    priority
                ]
                if before is not None:
                    old = before.queues.get(priority)
                    dropped -= (old.dropped_packets if old else 0) + before.headroom_drops[priority]
                if dropped > allowed:
                    yield expected_actual(
                        f"{name} priority {priority} drops", f"<= {allowed}", dropped
                    )


class PauseRate(SwitchCounterCheck):
    """PFC pause frames per second on each port stay within the policy's threshold (a high
    rate means ECN thresholds sit too close to the pause threshold, or a slow receiver)."""

    check_id = "RC102"
    categories = ("counters",)
    needs_previous = True

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.counters is not None and device.previous is not None
        seconds = device.counters.collected_at - device.previous.collected_at
        if seconds <= 0:
            yield expected_actual("counter window", "> 0 s", f"{seconds:.3f} s")
            return
        limit = data.intent.validation.max_pause_frames_per_s
        for name, interface in sorted(device.counters.interfaces.items(), key=natural_item_key):
            before = device.previous.interfaces.get(name)
            if before is None:
                continue
            for priority in range(8):
                for direction, now, then in (
                    ("rx", interface.pfc_rx[priority], before.pfc_rx[priority]),
                    ("tx", interface.pfc_tx[priority], before.pfc_tx[priority]),
                ):
                    rate = (now - then) / seconds
                    if rate > limit:
                        yield expected_actual(
                            f"{name} priority {priority} PFC {direction}",
                            f"<= {limit:g}/s",
                            f"{rate:.1f}/s",
                        )


class NoPfcStorms(SwitchCounterCheck):
    """No PFC storm: the watchdog detected at most the policy's number of storms and no
    queue is stormed now."""

    check_id = "RC103"
    categories = ("counters",)

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.counters is not None
        allowed = data.intent.validation.max_storms
        for name, interface in sorted(device.counters.interfaces.items(), key=natural_item_key):
            before = device.previous.interfaces.get(name) if device.previous else None
            for queue, watchdog in sorted(interface.watchdog.items()):
                storms = watchdog.storms_detected
                if before is not None and queue in before.watchdog:
                    storms -= before.watchdog[queue].storms_detected
                if storms > allowed:
                    yield expected_actual(f"{name} queue {queue} storms", f"<= {allowed}", storms)
                if watchdog.stormed:
                    yield expected_actual(
                        f"{name} queue {queue} watchdog", "operational", "stormed"
                    )


NO_STORM = "storms detected during the drill"


class WatchdogActed(SwitchCounterCheck):
    """During a storm drill the PFC watchdog of the stormed port declared the storm and
    restored it afterwards (storms detected and restored both rose, nothing stormed now)."""

    check_id = "RC104"
    categories = ("counters", "drill")
    needs_previous = True

    class Input(CheckInput):
        device: str | None = None  # the switch the storm was injected into (None: any)

    def run(self, data: Collected) -> list[CheckResult]:
        inputs = self.inputs
        assert isinstance(inputs, WatchdogActed.Input)
        results = super().run(data)
        if inputs.device is not None:
            return [r for r in results if r.device == inputs.device]
        return self._any_switch(results)

    def _any_switch(self, results: list[CheckResult]) -> list[CheckResult]:
        """The drill passes where a watchdog acted; elsewhere no storm is expected, so a
        switch that saw none is no failure unless none acted anywhere."""
        acted = [r for r in results if r.status == "success"]
        if acted or all(r.status in ("skipped", "unverified") for r in results):
            return acted or results
        stormy = [
            r
            for r in results
            if r.status == "failure" and not all(m.startswith(NO_STORM) for m in r.messages)
        ]
        # No storm where the switches were read: it may have been on one that was not.
        unverified = [r for r in results if r.status == "unverified"]
        return (
            stormy
            or unverified
            or [self.result("fabric", "failure", [expected_actual(NO_STORM, ">= 1", 0)])]
        )

    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]:
        assert device.counters is not None and device.previous is not None
        detected = restored = 0
        for name, interface in device.counters.interfaces.items():
            before = device.previous.interfaces.get(name)
            for queue, watchdog in interface.watchdog.items():
                old = before.watchdog.get(queue) if before else None
                detected += watchdog.storms_detected - (old.storms_detected if old else 0)
                restored += watchdog.storms_restored - (old.storms_restored if old else 0)
                if watchdog.stormed:
                    yield expected_actual(f"{name} queue {queue} watchdog", "restored", "stormed")
        if detected < 1:
            yield expected_actual(NO_STORM, ">= 1", detected)
        elif restored < detected:
            yield expected_actual("storms restored", detected, restored)


class HostNicConsistency(Check):
    """Host NICs trust DSCP, run PFC on the switches' lossless priorities and send CNPs with
    the fabric's CNP DSCP and priority."""

    check_id = "RC201"
    categories = ("hosts",)

    def run(self, data: Collected) -> list[CheckResult]:
        results = []
        for host in data.hosts():
            if host.state is None:
                reason = host.error or "NIC state not collected (lab hosts have no RoCE NIC)"
                results.append(self.result(host.device.name, "skipped", [reason]))
                continue
            nic = host.plan.nic
            assert nic is not None
            problems = []
            if host.state.trust != nic.trust:
                problems.append(expected_actual("NIC trust", nic.trust, host.state.trust))
            for name, interface in host.state.interfaces.items():
                if list(interface.pfc_priorities) != nic.pfc_priorities:
                    problems.append(
                        expected_actual(
                            f"{name} PFC priorities",
                            nic.pfc_priorities,
                            list(interface.pfc_priorities),
                        )
                    )
            for dscp, priority in nic.dscp_to_priority.items():
                got = host.state.dscp_to_priority.get(dscp)
                if got != priority:
                    problems.append(expected_actual(f"NIC DSCP {dscp} → priority", priority, got))
            results.append(self.judge(host.device.name, problems))
        return results


class WireProbes(Check):
    """Every wire probe scenario behaved as a lossless fabric must (no loss on the lossless
    class; CE marks and CNPs with ECN on; storms detected within the watchdog's time)."""

    check_id = "RC301"
    categories = ("wire",)

    class Input(CheckInput):
        max_loss: int = Field(default=0, ge=0)

    def run(self, data: Collected) -> list[CheckResult]:
        if not data.probes:
            return [self.result("fabric", "skipped", ["no probe scenario was run"])]
        problems = []
        for probe in data.probes:
            label = probe.get("scenario", "probe")
            for failure in probe.get("failures", []):
                problems.append(f"{label}: {failure}")
            lost = probe.get("totals", {}).get("lost", 0)
            inputs = self.inputs
            assert isinstance(inputs, WireProbes.Input)
            if lost > inputs.max_loss and not probe.get("failures"):
                problems.append(expected_actual(f"{label} loss", f"<= {inputs.max_loss}", lost))
        return [self.judge("fabric", problems)]

"""The check framework, ANTA style: one class per check, an ID, pydantic inputs, a docstring
that states the expected result, uniform "Expected: … Actual: …" messages.

Checks run on collected data (:class:`Collected`), never on a live connection: collection
(SSH reads, counter snapshots, probe scenarios) happens first, so checks are pure and
table-testable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from agent.device.state import Counters, LinkHealth, PendingSession, QosState
from agent.intent.model import Device, FabricIntent
from agent.intent.plan import DevicePlan, Plan
from agent.observe.hostfacts import HostFacts

# "unverified": a check whose source could not be read (a switch that did not answer, a host
# command that failed or whose output was not the format): neither a pass nor a finding. It
# fails validate like "error" does (exit 1; docs/host-preflight.md says why) and is counted
# on its own.
Status = Literal["success", "failure", "skipped", "error", "unverified"]


@dataclass
class DeviceData:
    """What was collected from one device."""

    device: Device
    plan: DevicePlan
    state: QosState | None = None
    counters: Counters | None = None
    previous: Counters | None = None  # an earlier snapshot, for rates and deltas
    error: str | None = None  # why state/counters are missing
    sessions: list[PendingSession] | None = None  # not-final changes (None: not read)
    links: dict[str, LinkHealth] | None = None  # link up/down and error counters (None: not read)
    facts: HostFacts | None = None  # hosts: the pre-flight sources' outputs (None: not read)


@dataclass
class Collected:
    """Everything the checks look at."""

    intent: FabricIntent
    plan: Plan
    devices: dict[str, DeviceData] = field(default_factory=dict)
    probes: list[dict[str, Any]] = field(default_factory=list)  # scenario results

    def switches(self) -> Iterator[DeviceData]:
        for data in self.devices.values():
            if data.device.role != "host":
                yield data

    def hosts(self) -> Iterator[DeviceData]:
        for data in self.devices.values():
            if data.device.role == "host":
                yield data


@dataclass
class CheckResult:
    check: str
    name: str
    device: str  # "fabric" for fabric-wide checks
    status: Status
    messages: list[str] = field(default_factory=list)
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "name": self.name,
            "device": self.device,
            "status": self.status,
            "messages": self.messages,
            "description": self.description,
        }


def expected_actual(what: str, expected: Any, actual: Any) -> str:
    """The one message format every check uses."""
    return f"{what}: Expected: {expected} Actual: {actual}"


class CheckInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Check(ABC):
    """One check. Subclasses set ``check_id`` and ``categories``; the docstring's first line
    says what is expected."""

    check_id: ClassVar[str]
    categories: ClassVar[tuple[str, ...]]
    Input: ClassVar[type[CheckInput]] = CheckInput
    # False for a check that judges the plan (what the intent sizes), not what a device
    # holds: its result about a device stands whether or not the device could be read.
    reads_devices: ClassVar[bool] = True

    def __init__(self, inputs: CheckInput | dict[str, Any] | None = None) -> None:
        if isinstance(inputs, CheckInput):
            self.inputs = inputs
        else:
            self.inputs = self.Input.model_validate(inputs or {})

    @classmethod
    def name(cls) -> str:
        return cls.__name__

    @classmethod
    def description(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]

    def result(self, device: str, status: Status, messages: list[str] | None = None) -> CheckResult:
        return CheckResult(self.check_id, self.name(), device, status, messages or [],
                           self.description())  # fmt: skip

    def judge(self, device: str, problems: list[str]) -> CheckResult:
        return self.result(device, "failure" if problems else "success", problems)

    @abstractmethod
    def run(self, data: Collected) -> list[CheckResult]:
        """Results for every device the check applies to."""


class SwitchCheck(Check):
    """A check run on each switch. Where its data is missing: ``unverified`` with the cause
    when the switch could not be read (a check about a switch nobody read is neither a pass
    nor "does not apply"), else ``skipped`` with the reason (not collected by this run)."""

    def run(self, data: Collected) -> list[CheckResult]:
        results = []
        for device in data.switches():
            reason = self.skip_reason(device)
            if reason is not None:
                status: Status = "unverified" if device.error else "skipped"
                results.append(self.result(device.device.name, status, [reason]))
                continue
            results.append(self.judge(device.device.name, list(self.problems(device, data))))
        return results

    @abstractmethod
    def skip_reason(self, device: DeviceData) -> str | None: ...

    @abstractmethod
    def problems(self, device: DeviceData, data: Collected) -> Iterator[str]: ...


class SwitchStateCheck(SwitchCheck):
    """A check of each switch's configuration state; skipped where the state is unknown."""

    def skip_reason(self, device: DeviceData) -> str | None:
        if device.state is None:
            return device.error or "state not collected"
        return None


class SwitchCounterCheck(SwitchCheck):
    """A check of each switch's counters; skipped where no snapshot was collected."""

    needs_previous: ClassVar[bool] = False

    def skip_reason(self, device: DeviceData) -> str | None:
        if device.counters is None:
            return device.error or "counters not collected"
        if self.needs_previous and device.previous is None:
            return device.error or "needs two counter snapshots"
        return None

"""A perftest verdict: each rule's outcome per subject (a link, a switch, a NIC), each link's
row (what was measured against what its port can carry), and the overall status -- fail
when any outcome fails; unverified outcomes do not fail, they are listed. Records only:
:mod:`agent.observe.perftest.acceptance` makes them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.observe.perftest.inputs import Scenario, Test

Status = Literal["pass", "fail", "unverified"]
_ORDER: dict[Status, int] = {"pass": 0, "unverified": 1, "fail": 2}


@dataclass(frozen=True)
class RuleOutcome:
    """One rule's result for one subject (a link, a switch, a NIC)."""

    rule: str
    name: str
    subject: str
    status: Status
    messages: tuple[str, ...]
    description: str
    links: tuple[str, ...] = ()  # the link labels it concerns

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "subject": self.subject,
            "status": self.status,
            "messages": list(self.messages),
            "description": self.description,
            "links": list(self.links),
        }


@dataclass(frozen=True)
class LinkRow:
    """One direction of one pair: what was measured against what the port can carry."""

    link: str  # "h1→h3": data sender → receiver
    client: str
    server: str
    status: Status
    measured_bps: float | None
    line_rate_bps: float
    message_bytes: int | None = None
    qps: int | None = None
    messages: tuple[str, ...] = ()

    @property
    def percent_of_line_rate(self) -> float | None:
        if self.measured_bps is None:
            return None
        return 100.0 * self.measured_bps / self.line_rate_bps

    def as_dict(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "client": self.client,
            "server": self.server,
            "status": self.status,
            "measured_bps": self.measured_bps,
            "line_rate_bps": self.line_rate_bps,
            "percent_of_line_rate": self.percent_of_line_rate,
            "message_bytes": self.message_bytes,
            "qps": self.qps,
            "messages": list(self.messages),
        }


@dataclass(frozen=True)
class Verdict:
    """Overall: fail when any outcome fails; unverified outcomes do not fail, they are
    listed."""

    scenario: Scenario
    test: Test
    links: tuple[LinkRow, ...]
    outcomes: tuple[RuleOutcome, ...]

    @property
    def status(self) -> Literal["pass", "fail"]:
        return "fail" if any(o.status == "fail" for o in self.outcomes) else "pass"

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def unverified(self) -> tuple[RuleOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "unverified")

    @property
    def failures(self) -> tuple[RuleOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "fail")

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "test": self.test,
            "status": self.status,
            "passed": self.passed,
            "links": [row.as_dict() for row in self.links],
            "outcomes": [outcome.as_dict() for outcome in self.outcomes],
            "unverified": [f"{o.rule} {o.subject}" for o in self.unverified],
        }


def worst(statuses: Sequence[Status]) -> Status:
    return max(statuses, key=lambda s: _ORDER[s], default="pass")

"""What every perftest acceptance rule builds on: the :class:`Rule` base (an ID, a docstring
whose first line states the expected result, outcomes "Expected: … Actual: …"), the run's
context the rules read and fill (:class:`RunContext`), and how a link's measurement is
picked from its perftest outputs (:func:`measure`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from agent.device.state import InterfaceCounters
from agent.intent.units import format_rate
from agent.observe.perftest.inputs import (
    AcceptanceInput,
    LinkRun,
    NicDelta,
    Scenario,
    SwitchDelta,
    Test,
    direction,
    link_label,
)
from agent.observe.perftest.output import BwResult, PerftestRun
from agent.observe.perftest.verdict import LinkRow, RuleOutcome, Status


def gbps(bps: float) -> str:
    return format_rate(bps)


def link_labels(link: LinkRun, test: Test, scenario: Scenario) -> tuple[str, ...]:
    """The row labels a link can have: its direction; for -b both, and the pair's sum."""
    sender, receiver = direction(link, test)
    if scenario != "bidirectional":
        return (link_label(sender, receiver),)
    return (
        link_label(sender, receiver),
        link_label(receiver, sender),
        f"{link.client}↔{link.server}",
    )


@dataclass(frozen=True)
class Measured:
    """The row a link is judged on, or why there is none."""

    row: BwResult | None
    reason: str | None = None
    note: str | None = None


def pick(
    run: PerftestRun, scope: Literal["total", "local", "remote"], size: int, test: Test
) -> Measured:
    if run.kind != test:
        return Measured(None, f"a {run.test} run where {test} was to be judged")
    row = run.row(scope, size) or run.row(scope)
    if row is None:
        return Measured(None, f"no {scope} row in the {run.source} output")
    if row.iterations == 0:
        return Measured(
            None,
            f"0 iterations at {row.message_bytes} B ({run.source} line {row.line}): not a "
            "measurement",
        )
    note = None
    if row.message_bytes != size:
        note = f"judged at {row.message_bytes} B: no row for the policy's {size} B"
    return Measured(row, note=note)


def measure(link: LinkRun, test: Test, size: int) -> Measured:
    if link.error is not None:
        return Measured(None, link.error)
    if test == "send" and link.server_run is not None:
        return pick(link.server_run, "total", size, test)
    if link.client_run is not None:
        return pick(link.client_run, "total", size, test)
    if link.server_run is not None:  # write/read: the server prints the client's numbers
        return pick(link.server_run, "total", size, test)
    return Measured(None, f"no perftest output from {link.client} or {link.server}")


@dataclass
class RunContext:
    """One run's inputs as the rules read them, and the link rows they fill in."""

    inputs: AcceptanceInput
    rows: dict[str, LinkRow] = field(default_factory=dict)

    @property
    def test(self) -> Test:
        return self.inputs.kind

    @property
    def fraction(self) -> float:
        return self.inputs.policy.min_line_rate_fraction

    def nic(self, host: str, port: str | None) -> NicDelta | None:
        found = [
            n for n in self.inputs.nics if n.host == host and (port is None or n.rdma_port == port)
        ]
        if len(found) > 1:
            raise ValueError(
                f"NIC counters of {host}: Expected: one RDMA port, or the link naming it "
                f"Actual: {', '.join(n.rdma_port for n in found)}"
            )
        return found[0] if found else None

    def endpoints(self) -> Iterator[tuple[str, str | None, tuple[str, ...]]]:
        """(host, rdma port, link labels) of every host in the run, once each."""
        seen: dict[tuple[str, str | None], list[str]] = {}
        for link in self.inputs.links:
            labels = link_labels(link, self.test, self.inputs.scenario)
            for host, port in ((link.client, link.client_port), (link.server, link.server_port)):
                seen.setdefault((host, port), []).extend(labels)
        for (host, port), found in seen.items():
            yield host, port, tuple(dict.fromkeys(found))

    def switch_delta(
        self, switch: SwitchDelta, name: str
    ) -> tuple[InterfaceCounters | None, InterfaceCounters]:
        return switch.before.interfaces.get(name), switch.after.interfaces[name]


class Rule(ABC):
    """One acceptance rule; the docstring's first line is the expected result."""

    rule_id: ClassVar[str]
    scenarios: ClassVar[tuple[Scenario, ...]] = ("pairwise", "incast", "bidirectional")

    @classmethod
    def description(cls) -> str:
        """The docstring's first paragraph, on one line."""
        return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())

    def outcome(
        self,
        subject: str,
        status: Status,
        messages: Sequence[str] = (),
        links: Sequence[str] = (),
    ) -> RuleOutcome:
        return RuleOutcome(
            self.rule_id,
            type(self).__name__,
            subject,
            status,
            tuple(messages),
            self.description(),
            tuple(links),
        )

    @abstractmethod
    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]: ...


@dataclass(frozen=True)
class Judged:
    """One link row as a rule judged it: its label, status, the capacity it is measured
    against, the perftest row (None: no measurement) and the messages that say why."""

    label: str
    status: Status
    capacity: float
    row: BwResult | None
    messages: tuple[str, ...]

    def link_row(self, link: LinkRun) -> LinkRow:
        """The link's table row: what was measured against the capacity."""
        row = self.row
        return LinkRow(
            self.label,
            link.client,
            link.server,
            self.status,
            row.bw_average_bps if row else None,
            self.capacity,
            row.message_bytes if row else None,
            row.qps if row else None,
            self.messages,
        )

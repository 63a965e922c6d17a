"""The acceptance verdict of a perftest run: pure, on parsed results and counter deltas.

Rules, ANTA style (one class each, an ID, a docstring whose first line states the expected
result, messages "Expected: … Actual: …"), as the checks in :mod:`agent.observe.checks` are:

- **PT001** line rate per link (pairs; each direction of ``-b``): NVIDIA's multinode
  acceptance passes a link at 90 % of its port speed (Mellanox/ngc_multinode_perf common.sh,
  ``BW_PASS_RATE = multiplier * 0.9 * port_rate``, the multiplier 2 for ``-b``).
- **PT002/PT003** incast N:1: the aggregate against the receiver's port speed, and Jain's
  fairness index of the senders (R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of
  Fairness and Discrimination for Resource Allocation in Shared Computer Systems",
  DEC-TR-301, 1984). The naive sum misleads both ways: three senders at 44 + 46 + 9 Gb/s sum
  to line rate while one of them starves, and senders whose ``-D`` windows did not overlap
  sum to more than the port can carry.
- **PT004** zero lossless drops on every switch during the run.
- **PT005** CNPs where ECN marked: DCQCN's notification point answers CE marks with CNPs,
  its reaction point handles them (Zhu et al., SIGCOMM 2015). Counters: mlx5's
  ``np_ecn_marked_roce_packets``, ``np_cnp_sent``, ``rp_cnp_handled``
  (drivers/infiniband/hw/mlx5/counters.c); other NICs (rxe) lack them: unverified, never 0.
- **PT006** no PFC pause on lossy priorities, switch and NIC.
- **PT007** no sign of loss in the NICs' transport counters.

Data direction: ``ib_write_bw`` and ``ib_send_bw`` move data client → server, ``ib_read_bw``
server → client (the client reads). Which output measures: the client's for write and read
(the server prints the client's numbers, src/write_bw.c, read_bw.c), the server's for send
when given (it counts what arrived, ``run_iter_bw_server``), see
:mod:`agent.observe.perftest.output`.
A missing counter means the NIC does not provide it (``agent.observe.hostnic``): never read as 0.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from agent.device.state import Counters, InterfaceCounters
from agent.intent.model import PerftestPolicy
from agent.intent.units import format_rate
from agent.observe.hostnic import NicCounters
from agent.observe.perftest.output import BwResult, PerftestRun

Status = Literal["pass", "fail", "unverified"]
Scenario = Literal["pairwise", "incast", "bidirectional"]
Test = Literal["write", "read", "send"]

ECN_MARKED = "np_ecn_marked_roce_packets"
CNP_SENT = "np_cnp_sent"
CNP_HANDLED = "rp_cnp_handled"
# Transport counters that rise only when packets were lost or reordered on the way:
# mlx5 (counters.c) and rxe (drivers/infiniband/sw/rxe/rxe_hw_counters.c; see
# agent.observe.hostnic).
LOSS_COUNTERS: dict[str, str] = {
    "out_of_sequence": "mlx5: packets received out of sequence (a drop or reorder upstream)",
    "packet_seq_err": "mlx5: NAKs for a PSN sequence error received (the peer saw a gap)",
    "rcvd_seq_err": "rxe: NAKs for a PSN sequence error received (the peer saw a gap)",
    "out_of_seq_request": "rxe: requests past the expected PSN (something was lost)",
    "retry_exceeded_err": "rxe: retransmissions ran out (a work request failed)",
}
# perftest's bandwidth is payload: it cannot exceed the port speed. Above it by more than
# the cycle-counter error perftest lives with (cpu MHz from /proc/cpuinfo, get_clock.c), the
# senders' measurement windows did not overlap.
OVERLAP_SLACK = 1.01
_ORDER: dict[Status, int] = {"pass": 0, "unverified": 1, "fail": 2}


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class SwitchPort:
    """Where a host NIC is cabled: the switch and its interface."""

    device: str
    interface: str


@dataclass(frozen=True)
class NicDelta:
    """One host RDMA port's counters over the run (after − before).

    ``counters``: only those the NIC provides (a key absent = not provided, never 0).
    ``rx_pause``/``tx_pause``: per-priority pause frames from ethtool, None when the NIC
    exposes none. ``reset``: counters that went backwards during the run (driver reload):
    left out of ``counters``.
    """

    host: str
    rdma_port: str  # "mlx5_0/1"
    counters: Mapping[str, int] = field(default_factory=dict)
    rx_pause: tuple[int, ...] | None = None
    tx_pause: tuple[int, ...] | None = None
    netdev: str | None = None
    access: SwitchPort | None = None
    reset: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, value in self.counters.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"{self.host} {self.rdma_port} {name}: Expected: a delta >= 0 Actual: {value!r}"
                )
        for label, pause in (("rx_pause", self.rx_pause), ("tx_pause", self.tx_pause)):
            if pause is not None and (len(pause) != 8 or any(v < 0 for v in pause)):
                raise ValueError(
                    f"{self.host} {self.rdma_port} {label}: Expected: 8 deltas >= 0 "
                    f"Actual: {pause!r}"
                )

    @property
    def name(self) -> str:
        return f"{self.host} {self.rdma_port}"


def _deltas(
    before: Mapping[str, int], after: Mapping[str, int]
) -> tuple[dict[str, int], tuple[str, ...]]:
    common = sorted(set(before) & set(after))
    reset = tuple(name for name in common if after[name] < before[name])
    return {n: after[n] - before[n] for n in common if n not in reset}, reset


def nic_delta(
    host: str,
    rdma_port: str,
    before: NicCounters,
    after: NicCounters,
    *,
    netdev: str | None = None,
    access: SwitchPort | None = None,
) -> NicDelta:
    """:class:`NicDelta` from two :func:`agent.observe.hostnic` readings of one host."""
    device, _, port = rdma_port.partition("/")
    key = (device, port or "1")
    counters, reset = _deltas(before.hw.get(key, {}), after.hw.get(key, {}))
    rx_pause = tx_pause = None
    if netdev is not None:
        old, new = before.pause.get(netdev), after.pause.get(netdev)
        if old is not None and new is not None:
            rx = tuple(b - a for a, b in zip(old.rx_frames, new.rx_frames, strict=True))
            tx = tuple(b - a for a, b in zip(old.tx_frames, new.tx_frames, strict=True))
            # A pause counter that went backwards (driver reload) says nothing about the run.
            rx_pause = rx if min(rx) >= 0 else None
            tx_pause = tx if min(tx) >= 0 else None
    return NicDelta(host, rdma_port, counters, rx_pause, tx_pause, netdev, access, reset)


@dataclass(frozen=True)
class SwitchDelta:
    """One switch's counter snapshots around the run (:class:`agent.device.state.Counters`)."""

    before: Counters
    after: Counters

    def __post_init__(self) -> None:
        if self.before.device != self.after.device:
            raise ValueError(
                f"switch counters: Expected: two snapshots of one device "
                f"Actual: {self.before.device} and {self.after.device}"
            )

    @property
    def device(self) -> str:
        return self.after.device


@dataclass(frozen=True)
class LinkRun:
    """One perftest pair. ``line_rate_bps``: the smaller of the two ends' port speeds.
    ``error``: why there is no output (the run failed, the output was refused)."""

    client: str
    server: str
    line_rate_bps: float
    client_run: PerftestRun | None = None
    server_run: PerftestRun | None = None
    error: str | None = None
    client_port: str | None = None  # RDMA port, to find the NicDelta when a host has several
    server_port: str | None = None

    def __post_init__(self) -> None:
        if not math.isfinite(self.line_rate_bps) or self.line_rate_bps <= 0:
            raise ValueError(
                f"{self.client}-{self.server} line rate: Expected: > 0 bit/s "
                f"Actual: {self.line_rate_bps!r}"
            )
        if self.client == self.server:
            raise ValueError(f"link {self.client}: Expected: two hosts Actual: one")


@dataclass(frozen=True)
class AcceptanceInput:
    """Everything a verdict looks at. ``test`` defaults to the policy's."""

    scenario: Scenario
    links: tuple[LinkRun, ...]
    lossless_priorities: tuple[int, ...]
    roce_priority: int
    policy: PerftestPolicy = field(default_factory=PerftestPolicy)
    test: Test | None = None
    nics: tuple[NicDelta, ...] = ()
    switches: tuple[SwitchDelta, ...] = ()
    receiver_line_rate_bps: float | None = None  # incast: the receiver's port speed

    def __post_init__(self) -> None:
        if not self.links:
            raise ValueError("perftest verdict: Expected: at least one link Actual: none")
        for priority in (*self.lossless_priorities, self.roce_priority):
            if not 0 <= priority <= 7:
                raise ValueError(f"priority: Expected: 0-7 Actual: {priority}")
        if self.receiver_line_rate_bps is not None and not (
            math.isfinite(self.receiver_line_rate_bps) and self.receiver_line_rate_bps > 0
        ):
            raise ValueError(
                f"receiver line rate: Expected: > 0 bit/s Actual: {self.receiver_line_rate_bps!r}"
            )
        labels = [_label(*_direction(link, self.kind)) for link in self.links]
        if duplicates := sorted({label for label in labels if labels.count(label) > 1}):
            raise ValueError(
                "links: Expected: one pair per direction between two hosts "
                f"Actual: {', '.join(duplicates)} more than once"
            )
        if self.scenario == "incast":
            receivers = {_direction(link, self.kind)[1] for link in self.links}
            if len(self.links) < 2 or len(receivers) != 1:
                raise ValueError(
                    "incast: Expected: two or more senders into one receiver "
                    f"Actual: {len(self.links)} link(s) into {', '.join(sorted(receivers))}"
                )

    @property
    def kind(self) -> Test:
        return self.test or self.policy.test


# --------------------------------------------------------------------------- outputs


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


# --------------------------------------------------------------------------- helpers


def jain_fairness(values: Sequence[float]) -> float:
    """Jain's index (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one takes everything."""
    if not values:
        raise ValueError("fairness of no values")
    if any(v < 0 or not math.isfinite(v) for v in values):
        raise ValueError(f"fairness: Expected: finite values >= 0 Actual: {list(values)}")
    squares = math.fsum(v * v for v in values)
    if squares == 0:
        return 0.0
    return math.fsum(values) ** 2 / (len(values) * squares)


def _gbps(bps: float) -> str:
    return format_rate(bps)


def _direction(link: LinkRun, test: Test) -> tuple[str, str]:
    """(data sender, data receiver)."""
    return (link.server, link.client) if test == "read" else (link.client, link.server)


def _label(sender: str, receiver: str) -> str:
    return f"{sender}→{receiver}"


def _link_labels(link: LinkRun, test: Test, scenario: Scenario) -> tuple[str, ...]:
    """The row labels a link can have: its direction; for -b both, and the pair's sum."""
    sender, receiver = _direction(link, test)
    if scenario != "bidirectional":
        return (_label(sender, receiver),)
    return (_label(sender, receiver), _label(receiver, sender), f"{link.client}↔{link.server}")


def _worst(statuses: Sequence[Status]) -> Status:
    return max(statuses, key=lambda s: _ORDER[s], default="pass")


@dataclass(frozen=True)
class _Measured:
    """The row a link is judged on, or why there is none."""

    row: BwResult | None
    reason: str | None = None
    note: str | None = None


def _pick(
    run: PerftestRun, scope: Literal["total", "local", "remote"], size: int, test: Test
) -> _Measured:
    if run.kind != test:
        return _Measured(None, f"a {run.test} run where {test} was to be judged")
    row = run.row(scope, size) or run.row(scope)
    if row is None:
        return _Measured(None, f"no {scope} row in the {run.source} output")
    if row.iterations == 0:
        return _Measured(
            None,
            f"0 iterations at {row.message_bytes} B ({run.source} line {row.line}): not a "
            "measurement",
        )
    note = None
    if row.message_bytes != size:
        note = f"judged at {row.message_bytes} B: no row for the policy's {size} B"
    return _Measured(row, note=note)


def _measure(link: LinkRun, test: Test, size: int) -> _Measured:
    if link.error is not None:
        return _Measured(None, link.error)
    if test == "send" and link.server_run is not None:
        return _pick(link.server_run, "total", size, test)
    if link.client_run is not None:
        return _pick(link.client_run, "total", size, test)
    if link.server_run is not None:  # write/read: the server prints the client's numbers
        return _pick(link.server_run, "total", size, test)
    return _Measured(None, f"no perftest output from {link.client} or {link.server}")


@dataclass
class _Context:
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
            labels = _link_labels(link, self.test, self.inputs.scenario)
            for host, port in ((link.client, link.client_port), (link.server, link.server_port)):
                seen.setdefault((host, port), []).extend(labels)
        for (host, port), found in seen.items():
            yield host, port, tuple(dict.fromkeys(found))

    def switch_delta(
        self, switch: SwitchDelta, name: str
    ) -> tuple[InterfaceCounters | None, InterfaceCounters]:
        return switch.before.interfaces.get(name), switch.after.interfaces[name]


# --------------------------------------------------------------------------- rules


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
    def evaluate(self, ctx: _Context) -> list[RuleOutcome]: ...


class LineRate(Rule):
    """Each pair (each direction of -b) averages at least min_line_rate_fraction of its port
    speed."""

    rule_id = "PT001"
    scenarios = ("pairwise", "bidirectional")

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        outcomes = []
        size = ctx.inputs.policy.message_bytes
        for link in ctx.inputs.links:
            if ctx.inputs.scenario == "bidirectional":
                outcomes += self._bidirectional(ctx, link, size)
                continue
            sender, receiver = _direction(link, ctx.test)
            measured = _measure(link, ctx.test, size)
            outcomes.append(self._judge(ctx, link, sender, receiver, measured))
        return outcomes

    def _judge(
        self,
        ctx: _Context,
        link: LinkRun,
        sender: str,
        receiver: str,
        measured: _Measured,
        *,
        what: str = "average",
    ) -> RuleOutcome:
        label = _label(sender, receiver)
        required = ctx.fraction * link.line_rate_bps
        expected = f">= {ctx.fraction:.0%} of {_gbps(link.line_rate_bps)} ({_gbps(required)})"
        row = measured.row
        if row is None:
            message = f"{label} {what}: Expected: {expected} Actual: {measured.reason}"
            return self._row(ctx, label, link, "fail", link.line_rate_bps, None, [message])
        bps = row.bw_average_bps
        status: Status = "pass" if bps >= required else "fail"
        actual = f"{_gbps(bps)} ({100 * bps / link.line_rate_bps:.1f} %)"
        messages = [
            f"{label} {what}: Expected: {expected} Actual: {actual} at {row.message_bytes} B, "
            f"{row.qps} QPs"
        ]
        if measured.note:
            messages.append(measured.note)
        return self._row(ctx, label, link, status, link.line_rate_bps, row, messages)

    def _row(
        self,
        ctx: _Context,
        label: str,
        link: LinkRun,
        status: Status,
        capacity: float,
        row: BwResult | None,
        messages: list[str],
    ) -> RuleOutcome:
        """The link's table row (what was measured, against ``capacity``) and its outcome."""
        ctx.rows[label] = LinkRow(
            label,
            link.client,
            link.server,
            status,
            row.bw_average_bps if row else None,
            capacity,
            row.message_bytes if row else None,
            row.qps if row else None,
            tuple(messages),
        )
        return self.outcome(label, status, messages, [label])

    def _bidirectional(self, ctx: _Context, link: LinkRun, size: int) -> list[RuleOutcome]:
        forward = _direction(link, ctx.test)  # what the client initiates
        backward = (forward[1], forward[0])
        run = link.client_run
        if link.error is not None or run is None:
            missing = _Measured(None, link.error or f"no perftest output from {link.client}")
            return [self._judge(ctx, link, *pair, missing) for pair in (forward, backward)]
        if not run.bidirectional:
            missing = _Measured(None, f"a unidirectional run ({run.test} without -b)")
            return [self._judge(ctx, link, *pair, missing) for pair in (forward, backward)]
        local, remote = _pick(run, "local", size, ctx.test), _pick(run, "remote", size, ctx.test)
        if ctx.test != "send" and local.row is not None and remote.row is not None:
            # --report-both: the client's row is what it initiated, the remote row the server's
            return [
                self._judge(ctx, link, *forward, local, what="direction"),
                self._judge(ctx, link, *backward, remote, what="direction"),
            ]
        return [self._aggregate(ctx, link, _measure(link, ctx.test, size))]

    def _aggregate(self, ctx: _Context, link: LinkRun, measured: _Measured) -> RuleOutcome:
        """No per-direction rows (ib_send_bw -b -D never exchanges them; or --report-both
        was not given): the sum proves each direction only down to (2f − 1) of the port."""
        label = f"{link.client}↔{link.server}"
        capacity = 2 * link.line_rate_bps
        required = ctx.fraction * capacity
        expected = f">= {ctx.fraction:.0%} of 2 × {_gbps(link.line_rate_bps)} ({_gbps(required)})"
        row = measured.row
        if row is None:
            message = (
                f"{label} sum of both directions: Expected: {expected} Actual: {measured.reason}"
            )
            return self._row(ctx, label, link, "fail", capacity, None, [message])
        bps = row.bw_average_bps
        actual = f"{_gbps(bps)} ({100 * bps / capacity:.1f} % of both directions)"
        messages = [f"{label} sum of both directions: Expected: {expected} Actual: {actual}"]
        status: Status = "fail"
        if bps >= required:
            status = "unverified"
            floor = max(0.0, 2 * ctx.fraction - 1)
            messages.append(
                f"{label} each direction: Expected: >= {ctx.fraction:.0%} of "
                f"{_gbps(link.line_rate_bps)} Actual: not reported per direction (perftest "
                "prints both only with --report-both, and ib_send_bw -b -D never does); the "
                f"sum proves each direction only >= {floor:.0%} of the port"
            )
        return self._row(ctx, label, link, status, capacity, row, messages)


def _incast_rows(ctx: _Context) -> tuple[str, list[tuple[LinkRun, str, _Measured]]]:
    size = ctx.inputs.policy.message_bytes
    measured = []
    receiver = ""
    for link in ctx.inputs.links:
        sender, receiver = _direction(link, ctx.test)
        measured.append((link, sender, _measure(link, ctx.test, size)))
    return receiver, measured


def _receiver_rate(ctx: _Context) -> float:
    given = ctx.inputs.receiver_line_rate_bps
    return given if given is not None else max(link.line_rate_bps for link in ctx.inputs.links)


class IncastAggregate(Rule):
    """The senders together average at least min_line_rate_fraction of what the receiver's
    port (or, if less, the senders' ports together) can carry, and no more than it can."""

    rule_id = "PT002"
    scenarios = ("incast",)

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        receiver, measured = _incast_rows(ctx)
        labels = [_label(sender, receiver) for _, sender, _ in measured]
        port = _receiver_rate(ctx)
        capacity = min(port, math.fsum(link.line_rate_bps for link in ctx.inputs.links))
        required = ctx.fraction * capacity
        subject = f"{'+'.join(sender for _, sender, _ in measured)}→{receiver}"
        missing = [
            f"{_label(sender, receiver)}: Expected: a measurement Actual: {m.reason}"
            for _, sender, m in measured
            if m.row is None
        ]
        for link, sender, m in measured:
            label = _label(sender, receiver)
            bps = m.row.bw_average_bps if m.row else None
            ctx.rows[label] = LinkRow(
                label,
                link.client,
                link.server,
                "pass",
                bps,
                port,
                m.row.message_bytes if m.row else None,
                m.row.qps if m.row else None,
                (m.reason,) if m.reason else (),
            )
        if missing:
            return [self.outcome(subject, "fail", missing, labels)]
        total = math.fsum(m.row.bw_average_bps for _, _, m in measured if m.row)
        expected = f">= {ctx.fraction:.0%} of {_gbps(capacity)} ({_gbps(required)})"
        actual = f"{_gbps(total)} ({100 * total / port:.1f} % of {receiver}'s {_gbps(port)})"
        message = f"{subject} aggregate: Expected: {expected} Actual: {actual}"
        if total > OVERLAP_SLACK * port:
            return [
                self.outcome(
                    subject,
                    "unverified",
                    [
                        f"{subject} aggregate: Expected: <= {_gbps(port)} (what {receiver}'s "
                        f"port can carry) Actual: {_gbps(total)}: the senders' measurement "
                        "windows did not overlap; start them together and rerun"
                    ],
                    labels,
                )
            ]
        return [self.outcome(subject, "pass" if total >= required else "fail", [message], labels)]


class IncastFairness(Rule):
    """Jain's fairness index of the senders' average bandwidths is at least min_fairness."""

    rule_id = "PT003"
    scenarios = ("incast",)

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        receiver, measured = _incast_rows(ctx)
        labels = [_label(sender, receiver) for _, sender, _ in measured]
        subject = f"{'+'.join(sender for _, sender, _ in measured)}→{receiver}"
        if any(m.row is None for _, _, m in measured):
            return [
                self.outcome(
                    subject,
                    "fail",
                    [
                        f"{subject} fairness: Expected: every sender measured Actual: "
                        f"{sum(m.row is None for _, _, m in measured)} without a result"
                    ],
                    labels,
                )
            ]
        values = [m.row.bw_average_bps for _, _, m in measured if m.row]
        index = jain_fairness(values)
        minimum = ctx.inputs.policy.min_fairness
        shares = ", ".join(
            f"{sender} {_gbps(v)}" for (_, sender, _), v in zip(measured, values, strict=True)
        )
        message = (
            f"{subject} Jain's fairness: Expected: >= {minimum:.2f} Actual: {index:.3f} ({shares})"
        )
        return [self.outcome(subject, "pass" if index >= minimum else "fail", [message], labels)]


def _queue_drops(interface: InterfaceCounters, priority: int) -> int:
    queue = interface.queues.get(priority)
    return (queue.dropped_packets if queue else 0) + interface.headroom_drops[priority]


class NoLosslessDrops(Rule):
    """No switch drops a packet of a lossless priority during the run (egress queue drops
    plus ingress headroom drops)."""

    rule_id = "PT004"

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        if not ctx.inputs.switches:
            return [
                self.outcome(
                    "fabric",
                    "unverified",
                    ["switches: Expected: counters before and after the run Actual: none"],
                )
            ]
        outcomes = []
        lossless = sorted(set(ctx.inputs.lossless_priorities))
        for switch in ctx.inputs.switches:
            problems, unknown = [], []
            for name in sorted(switch.after.interfaces):
                before, after = ctx.switch_delta(switch, name)
                if before is None:
                    unknown.append(f"{switch.device} {name}: no counters before the run")
                    continue
                for priority in lossless:
                    dropped = _queue_drops(after, priority) - _queue_drops(before, priority)
                    if dropped < 0:
                        unknown.append(
                            f"{switch.device} {name} priority {priority} drops: counters "
                            "went backwards during the run (cleared?)"
                        )
                    elif dropped > 0:
                        problems.append(
                            f"{switch.device} {name} priority {priority} drops: Expected: 0 "
                            f"Actual: {dropped}"
                        )
            status: Status = "fail" if problems else ("unverified" if unknown else "pass")
            outcomes.append(self.outcome(switch.device, status, problems + unknown))
        return outcomes


def _marked_toward(ctx: _Context, nic: NicDelta) -> tuple[int, str] | None:
    """ECN marks the switch put on the RoCE queue toward this NIC during the run."""
    if nic.access is None:
        return None
    for switch in ctx.inputs.switches:
        interface = nic.access.interface
        if switch.device != nic.access.device or interface not in switch.after.interfaces:
            continue
        before, after = ctx.switch_delta(switch, nic.access.interface)
        priority = ctx.inputs.roce_priority
        new = after.queues.get(priority)
        old = before.queues.get(priority) if before else None
        if new is None or before is None:
            return None
        marked = new.ecn_marked_packets - (old.ecn_marked_packets if old else 0)
        return marked, f"{nic.access.device} {nic.access.interface} queue {priority}"
    return None


class CnpWhereMarked(Rule):
    """A receiver NIC that counted ECN-marked RoCE packets sent CNPs, and its senders' NICs
    handled CNPs; NICs without these (mlx5) counters are unverified."""

    rule_id = "PT005"

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        senders_of: dict[tuple[str, str | None], list[tuple[str, str | None, tuple[str, ...]]]]
        senders_of = {}
        for link in ctx.inputs.links:
            sender, receiver = _direction(link, ctx.test)
            ports = {link.client: link.client_port, link.server: link.server_port}
            pairs = [(sender, receiver)]
            both: tuple[str, ...] = ()
            if ctx.inputs.scenario == "bidirectional":
                pairs.append((receiver, sender))
                # a -b pair without per-direction rows has one row for both directions
                both = (f"{link.client}↔{link.server}",)
            for s, r in pairs:
                labels = (_label(s, r), *both)
                senders_of.setdefault((r, ports[r]), []).append((s, ports[s], labels))
        outcomes: list[RuleOutcome] = []
        for (host, port), senders in senders_of.items():
            outcomes += self._receiver(ctx, host, port, senders)
        return outcomes

    def _receiver(
        self,
        ctx: _Context,
        host: str,
        port: str | None,
        senders: list[tuple[str, str | None, tuple[str, ...]]],
    ) -> list[RuleOutcome]:
        """The receiver's outcome (all its links), then one per sender (its own link)."""
        labels = list(dict.fromkeys(label for _, _, own in senders for label in own))
        nic = ctx.nic(host, port)
        if nic is None:
            return [
                self.outcome(host, "unverified", [f"{host}: no NIC counters collected"], labels)
            ]
        switch_marks = _marked_toward(ctx, nic)
        if ECN_MARKED not in nic.counters:
            messages = [
                f"{nic.name} {ECN_MARKED}: Expected: a DCQCN notification point's counters "
                f"Actual: not provided ({ECN_MARKED}, {CNP_SENT} and {CNP_HANDLED} are mlx5 "
                "(ConnectX) hw_counters; rxe has no DCQCN)"
            ]
            if switch_marks and switch_marks[0] > 0:
                messages.append(
                    f"{switch_marks[1]} marked {switch_marks[0]} packets ECN toward {host} "
                    "during the run: nothing here can show that the marks were answered"
                )
            return [self.outcome(nic.name, "unverified", messages, labels)]
        marked = nic.counters[ECN_MARKED]
        if marked == 0:
            notes = []
            if switch_marks and switch_marks[0] > 0:
                notes.append(
                    f"note: {switch_marks[1]} marked {switch_marks[0]} packets toward {host} "
                    f"but {nic.name} counted no ECN-marked RoCE packet (other traffic in the "
                    "queue, or marks cleared on the way)"
                )
            return [self.outcome(nic.name, "pass", notes, labels)]
        sent = nic.counters.get(CNP_SENT)
        own: RuleOutcome
        if sent is None:
            own = self.outcome(
                nic.name,
                "unverified",
                [f"{nic.name} {CNP_SENT}: not provided by this NIC ({marked} ECN-marked)"],
                labels,
            )
        elif sent == 0:
            own = self.outcome(
                nic.name,
                "fail",
                [
                    f"{nic.name} {CNP_SENT}: Expected: > 0 (answering {marked} ECN-marked "
                    "RoCE packets) Actual: 0"
                ],
                labels,
            )
        else:
            own = self.outcome(nic.name, "pass", [], labels)
        outcomes = [own]
        for sender, sender_port, label in senders:
            peer = ctx.nic(sender, sender_port)
            if peer is None:
                outcomes.append(
                    self.outcome(
                        sender, "unverified", [f"{sender}: no NIC counters collected"], label
                    )
                )
            elif CNP_HANDLED not in peer.counters:
                outcomes.append(
                    self.outcome(
                        peer.name,
                        "unverified",
                        [
                            f"{peer.name} {CNP_HANDLED}: not provided by this NIC (a DCQCN "
                            "reaction point's counter, mlx5)"
                        ],
                        label,
                    )
                )
            elif peer.counters[CNP_HANDLED] == 0:
                outcomes.append(
                    self.outcome(
                        peer.name,
                        "fail",
                        [
                            f"{peer.name} {CNP_HANDLED}: Expected: > 0 ({nic.name} counted "
                            f"{marked} ECN-marked RoCE packets) Actual: 0"
                        ],
                        label,
                    )
                )
            else:
                outcomes.append(self.outcome(peer.name, "pass", [], label))
        return outcomes


class NoLossyPause(Rule):
    """No PFC pause frame is sent or received on a priority outside the lossless set, by any
    switch port or host NIC."""

    rule_id = "PT006"

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        lossy = [p for p in range(8) if p not in set(ctx.inputs.lossless_priorities)]
        outcomes = []
        for switch in ctx.inputs.switches:
            problems = []
            for name in sorted(switch.after.interfaces):
                before, after = ctx.switch_delta(switch, name)
                if before is None:
                    continue
                for direction, new, old in (
                    ("rx", after.pfc_rx, before.pfc_rx),
                    ("tx", after.pfc_tx, before.pfc_tx),
                ):
                    for priority in lossy:
                        frames = new[priority] - old[priority]
                        if frames > 0:
                            problems.append(
                                f"{switch.device} {name} PFC {direction} priority {priority}: "
                                f"Expected: 0 (lossy) Actual: {frames}"
                            )
            outcomes.append(self.outcome(switch.device, "fail" if problems else "pass", problems))
        for host, port, labels in ctx.endpoints():
            nic = ctx.nic(host, port)
            if nic is None or (nic.rx_pause is None and nic.tx_pause is None):
                continue  # a NIC without per-priority pause counters: its switch port tells
            problems = [
                f"{nic.name} {direction}_prio{priority}_pause: Expected: 0 (lossy) Actual: "
                f"{frames[priority]}"
                for direction, frames in (("rx", nic.rx_pause), ("tx", nic.tx_pause))
                if frames is not None
                for priority in lossy
                if frames[priority] > 0
            ]
            status: Status = "fail" if problems else "pass"
            outcomes.append(self.outcome(nic.name, status, problems, labels))
        return outcomes


class NoNicLoss(Rule):
    """No NIC in the run counts a sign of loss: out_of_sequence and packet_seq_err (mlx5),
    rcvd_seq_err, out_of_seq_request and retry_exceeded_err (rxe) stay flat."""

    rule_id = "PT007"

    def evaluate(self, ctx: _Context) -> list[RuleOutcome]:
        outcomes = []
        for host, port, labels in ctx.endpoints():
            nic = ctx.nic(host, port)
            if nic is None:
                outcomes.append(
                    self.outcome(host, "unverified", [f"{host}: no NIC counters collected"], labels)
                )
                continue
            provided = [name for name in LOSS_COUNTERS if name in nic.counters]
            problems = [
                f"{nic.name} {name}: Expected: 0 Actual: {nic.counters[name]} "
                f"({LOSS_COUNTERS[name]})"
                for name in provided
                if nic.counters[name] > 0
            ]
            unknown = [
                f"{nic.name} {name}: went backwards during the run (driver reload?)"
                for name in nic.reset
                if name in LOSS_COUNTERS
            ]
            if not provided and not nic.reset:
                unknown.append(
                    f"{nic.name}: Expected: one of {', '.join(LOSS_COUNTERS)} Actual: none provided"
                )
            status: Status = "fail" if problems else ("unverified" if unknown else "pass")
            outcomes.append(self.outcome(nic.name, status, problems + unknown, labels))
        return outcomes


RULES: tuple[type[Rule], ...] = (
    LineRate,
    IncastAggregate,
    IncastFairness,
    NoLosslessDrops,
    CnpWhereMarked,
    NoLossyPause,
    NoNicLoss,
)


def evaluate(inputs: AcceptanceInput) -> Verdict:
    """Run every rule that applies to the scenario; each link row's status is the worst of
    the outcomes that concern it."""
    ctx = _Context(inputs)
    outcomes: list[RuleOutcome] = []
    for rule in RULES:
        if inputs.scenario in rule.scenarios:
            outcomes += rule().evaluate(ctx)
    rows = []
    for label, row in ctx.rows.items():
        status = _worst([row.status, *(o.status for o in outcomes if label in o.links)])
        messages = list(row.messages)
        for outcome in outcomes:  # why a row is not a plain pass
            if label in outcome.links and outcome.status != "pass":
                messages += [m for m in outcome.messages if m not in messages]
        rows.append(
            LinkRow(
                row.link,
                row.client,
                row.server,
                status,
                row.measured_bps,
                row.line_rate_bps,
                row.message_bytes,
                row.qps,
                tuple(messages),
            )
        )
    return Verdict(inputs.scenario, inputs.kind, tuple(rows), tuple(outcomes))

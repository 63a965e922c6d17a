"""The perftest acceptance rules on bandwidth (ANTA style, one class each):

- **PT001** line rate per link (pairs; each direction of ``-b``): NVIDIA's multinode
  acceptance passes a link at 90 % of its port speed (Mellanox/ngc_multinode_perf common.sh,
  ``BW_PASS_RATE = multiplier * 0.9 * port_rate``, the multiplier 2 for ``-b``).
- **PT002/PT003** incast N:1: the aggregate against the receiver's port speed, and Jain's
  fairness index of the senders (R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of
  Fairness and Discrimination for Resource Allocation in Shared Computer Systems",
  DEC-TR-301, 1984). The naive sum misleads both ways: three senders at 44 + 46 + 9 Gb/s sum
  to line rate while one of them starves, and senders whose ``-D`` windows did not overlap
  sum to more than the port can carry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agent.observe.perftest.inputs import LinkRun, direction, link_label
from agent.observe.perftest.rule import (
    Judged,
    Measured,
    Rule,
    RunContext,
    gbps,
    measure,
    pick,
)
from agent.observe.perftest.verdict import RuleOutcome, Status

# perftest's bandwidth is payload: it cannot exceed the port speed. Above it by more than
# the cycle-counter error perftest lives with (cpu MHz from /proc/cpuinfo, get_clock.c), the
# senders' measurement windows did not overlap.
OVERLAP_SLACK = 1.01


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


class LineRate(Rule):
    """Each pair (each direction of -b) averages at least min_line_rate_fraction of its port
    speed."""

    rule_id = "PT001"
    scenarios = ("pairwise", "bidirectional")

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
        outcomes = []
        size = ctx.inputs.policy.message_bytes
        for link in ctx.inputs.links:
            if ctx.inputs.scenario == "bidirectional":
                outcomes += self._bidirectional(ctx, link, size)
                continue
            measured = measure(link, ctx.test, size)
            outcomes.append(self._judge(ctx, link, direction(link, ctx.test), measured))
        return outcomes

    def _judge(
        self,
        ctx: RunContext,
        link: LinkRun,
        pair: tuple[str, str],
        measured: Measured,
        what: str = "average",
    ) -> RuleOutcome:
        """One direction ``pair`` (data sender, receiver) of ``link`` against its port."""
        label = link_label(*pair)
        required = ctx.fraction * link.line_rate_bps
        expected = f">= {ctx.fraction:.0%} of {gbps(link.line_rate_bps)} ({gbps(required)})"
        row = measured.row
        if row is None:
            message = f"{label} {what}: Expected: {expected} Actual: {measured.reason}"
            judged = Judged(label, "fail", link.line_rate_bps, None, (message,))
            return self._row(ctx, link, judged)
        bps = row.bw_average_bps
        status: Status = "pass" if bps >= required else "fail"
        actual = f"{gbps(bps)} ({100 * bps / link.line_rate_bps:.1f} %)"
        messages = [
            f"{label} {what}: Expected: {expected} Actual: {actual} at {row.message_bytes} B, "
            f"{row.qps} QPs"
        ]
        if measured.note:
            messages.append(measured.note)
        return self._row(ctx, link, Judged(label, status, link.line_rate_bps, row, tuple(messages)))

    def _row(self, ctx: RunContext, link: LinkRun, judged: Judged) -> RuleOutcome:
        """The link's table row (what was measured, against its capacity) and its outcome."""
        ctx.rows[judged.label] = judged.link_row(link)
        return self.outcome(judged.label, judged.status, judged.messages, [judged.label])

    def _bidirectional(self, ctx: RunContext, link: LinkRun, size: int) -> list[RuleOutcome]:
        forward = direction(link, ctx.test)  # what the client initiates
        backward = (forward[1], forward[0])
        run = link.client_run
        if link.error is not None or run is None:
            missing = Measured(None, link.error or f"no perftest output from {link.client}")
            return [self._judge(ctx, link, pair, missing) for pair in (forward, backward)]
        if not run.bidirectional:
            missing = Measured(None, f"a unidirectional run ({run.test} without -b)")
            return [self._judge(ctx, link, pair, missing) for pair in (forward, backward)]
        local, remote = pick(run, "local", size, ctx.test), pick(run, "remote", size, ctx.test)
        if ctx.test != "send" and local.row is not None and remote.row is not None:
            # --report-both: the client's row is what it initiated, the remote row the server's
            return [
                self._judge(ctx, link, forward, local, what="direction"),
                self._judge(ctx, link, backward, remote, what="direction"),
            ]
        return [self._aggregate(ctx, link, measure(link, ctx.test, size))]

    def _aggregate(self, ctx: RunContext, link: LinkRun, measured: Measured) -> RuleOutcome:
        """No per-direction rows (ib_send_bw -b -D never exchanges them; or --report-both
        was not given): the sum proves each direction only down to (2f − 1) of the port."""
        label = f"{link.client}↔{link.server}"
        capacity = 2 * link.line_rate_bps
        required = ctx.fraction * capacity
        expected = f">= {ctx.fraction:.0%} of 2 × {gbps(link.line_rate_bps)} ({gbps(required)})"
        row = measured.row
        if row is None:
            message = (
                f"{label} sum of both directions: Expected: {expected} Actual: {measured.reason}"
            )
            return self._row(ctx, link, Judged(label, "fail", capacity, None, (message,)))
        bps = row.bw_average_bps
        actual = f"{gbps(bps)} ({100 * bps / capacity:.1f} % of both directions)"
        messages = [f"{label} sum of both directions: Expected: {expected} Actual: {actual}"]
        status: Status = "fail"
        if bps >= required:
            status = "unverified"
            floor = max(0.0, 2 * ctx.fraction - 1)
            messages.append(
                f"{label} each direction: Expected: >= {ctx.fraction:.0%} of "
                f"{gbps(link.line_rate_bps)} Actual: not reported per direction (perftest "
                "prints both only with --report-both, and ib_send_bw -b -D never does); the "
                f"sum proves each direction only >= {floor:.0%} of the port"
            )
        return self._row(ctx, link, Judged(label, status, capacity, row, tuple(messages)))


def _incast_rows(ctx: RunContext) -> tuple[str, list[tuple[LinkRun, str, Measured]]]:
    size = ctx.inputs.policy.message_bytes
    measured = []
    receiver = ""
    for link in ctx.inputs.links:
        sender, receiver = direction(link, ctx.test)
        measured.append((link, sender, measure(link, ctx.test, size)))
    return receiver, measured


def _receiver_rate(ctx: RunContext) -> float:
    given = ctx.inputs.receiver_line_rate_bps
    return given if given is not None else max(link.line_rate_bps for link in ctx.inputs.links)


class IncastAggregate(Rule):
    """The senders together average at least min_line_rate_fraction of what the receiver's
    port (or, if less, the senders' ports together) can carry, and no more than it can."""

    rule_id = "PT002"
    scenarios = ("incast",)

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
        receiver, measured = _incast_rows(ctx)
        labels = [link_label(sender, receiver) for _, sender, _ in measured]
        port = _receiver_rate(ctx)
        capacity = min(port, math.fsum(link.line_rate_bps for link in ctx.inputs.links))
        required = ctx.fraction * capacity
        subject = f"{'+'.join(sender for _, sender, _ in measured)}→{receiver}"
        missing = [
            f"{link_label(sender, receiver)}: Expected: a measurement Actual: {m.reason}"
            for _, sender, m in measured
            if m.row is None
        ]
        for link, sender, m in measured:
            label = link_label(sender, receiver)
            reason = (m.reason,) if m.reason else ()
            ctx.rows[label] = Judged(label, "pass", port, m.row, reason).link_row(link)
        if missing:
            return [self.outcome(subject, "fail", missing, labels)]
        total = math.fsum(m.row.bw_average_bps for _, _, m in measured if m.row)
        expected = f">= {ctx.fraction:.0%} of {gbps(capacity)} ({gbps(required)})"
        actual = f"{gbps(total)} ({100 * total / port:.1f} % of {receiver}'s {gbps(port)})"
        message = f"{subject} aggregate: Expected: {expected} Actual: {actual}"
        if total > OVERLAP_SLACK * port:
            return [
                self.outcome(
                    subject,
                    "unverified",
                    [
                        f"{subject} aggregate: Expected: <= {gbps(port)} (what {receiver}'s "
                        f"port can carry) Actual: {gbps(total)}: the senders' measurement "
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

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
        receiver, measured = _incast_rows(ctx)
        labels = [link_label(sender, receiver) for _, sender, _ in measured]
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
            f"{sender} {gbps(v)}" for (_, sender, _), v in zip(measured, values, strict=True)
        )
        message = (
            f"{subject} Jain's fairness: Expected: >= {minimum:.2f} Actual: {index:.3f} ({shares})"
        )
        return [self.outcome(subject, "pass" if index >= minimum else "fail", [message], labels)]

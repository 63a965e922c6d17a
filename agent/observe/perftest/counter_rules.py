"""The perftest acceptance rules on the switches' and NICs' counters (ANTA style, one class
each):

- **PT004** zero lossless drops on every switch during the run.
- **PT005** CNPs where ECN marked: DCQCN's notification point answers CE marks with CNPs,
  its reaction point handles them (Zhu et al., SIGCOMM 2015). Counters: mlx5's
  ``np_ecn_marked_roce_packets``, ``np_cnp_sent``, ``rp_cnp_handled``
  (drivers/infiniband/hw/mlx5/counters.c); other NICs (rxe) lack them: unverified, never 0.
- **PT006** no PFC pause on lossy priorities, switch and NIC.
- **PT007** no sign of loss in the NICs' transport counters.
"""

from __future__ import annotations

from agent.device.state import InterfaceCounters
from agent.observe.perftest.inputs import (
    CNP_HANDLED,
    CNP_SENT,
    ECN_MARKED,
    LOSS_COUNTERS,
    NicDelta,
    SwitchDelta,
    direction,
    link_label,
)
from agent.observe.perftest.rule import Rule, RunContext
from agent.observe.perftest.verdict import RuleOutcome, Status


def _queue_drops(interface: InterfaceCounters, priority: int) -> int:
    queue = interface.queues.get(priority)
    return (queue.dropped_packets if queue else 0) + interface.headroom_drops[priority]


class NoLosslessDrops(Rule):
    """No switch drops a packet of a lossless priority during the run (egress queue drops
    plus ingress headroom drops)."""

    rule_id = "PT004"

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
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


def _marked_toward(ctx: RunContext, nic: NicDelta) -> tuple[int, str] | None:
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


_Sender = tuple[str, str | None, tuple[str, ...]]  # a sender host, its RDMA port, its labels


class CnpWhereMarked(Rule):
    """A receiver NIC that counted ECN-marked RoCE packets sent CNPs, and its senders' NICs
    handled CNPs; NICs without these (mlx5) counters are unverified."""

    rule_id = "PT005"

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
        senders_of: dict[tuple[str, str | None], list[_Sender]] = {}
        for link in ctx.inputs.links:
            sender, receiver = direction(link, ctx.test)
            ports = {link.client: link.client_port, link.server: link.server_port}
            pairs = [(sender, receiver)]
            both: tuple[str, ...] = ()
            if ctx.inputs.scenario == "bidirectional":
                pairs.append((receiver, sender))
                # a -b pair without per-direction rows has one row for both directions
                both = (f"{link.client}↔{link.server}",)
            for s, r in pairs:
                labels = (link_label(s, r), *both)
                senders_of.setdefault((r, ports[r]), []).append((s, ports[s], labels))
        outcomes: list[RuleOutcome] = []
        for (host, port), senders in senders_of.items():
            outcomes += self._receiver(ctx, host, port, senders)
        return outcomes

    def _receiver(
        self,
        ctx: RunContext,
        host: str,
        port: str | None,
        senders: list[_Sender],
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
            return [self._no_notification_point(nic, switch_marks, labels)]
        marked = nic.counters[ECN_MARKED]
        if marked == 0:
            return [self._none_marked(nic, switch_marks, labels)]
        own = self._cnps_sent(nic, marked, labels)
        return [own, *(self._cnps_handled(ctx, nic, marked, sender) for sender in senders)]

    def _no_notification_point(
        self, nic: NicDelta, switch_marks: tuple[int, str] | None, labels: list[str]
    ) -> RuleOutcome:
        """A receiver NIC without DCQCN's counters: unverified, saying what the switch saw."""
        messages = [
            f"{nic.name} {ECN_MARKED}: Expected: a DCQCN notification point's counters "
            f"Actual: not provided ({ECN_MARKED}, {CNP_SENT} and {CNP_HANDLED} are mlx5 "
            "(ConnectX) hw_counters; rxe has no DCQCN)"
        ]
        if switch_marks and switch_marks[0] > 0:
            messages.append(
                f"{switch_marks[1]} marked {switch_marks[0]} packets ECN toward {nic.host} "
                "during the run: nothing here can show that the marks were answered"
            )
        return self.outcome(nic.name, "unverified", messages, labels)

    def _none_marked(
        self, nic: NicDelta, switch_marks: tuple[int, str] | None, labels: list[str]
    ) -> RuleOutcome:
        """Nothing marked, nothing to answer: a pass, with a note when the switch marked."""
        notes = []
        if switch_marks and switch_marks[0] > 0:
            notes.append(
                f"note: {switch_marks[1]} marked {switch_marks[0]} packets toward {nic.host} "
                f"but {nic.name} counted no ECN-marked RoCE packet (other traffic in the "
                "queue, or marks cleared on the way)"
            )
        return self.outcome(nic.name, "pass", notes, labels)

    def _cnps_sent(self, nic: NicDelta, marked: int, labels: list[str]) -> RuleOutcome:
        """The receiver answered ``marked`` ECN-marked packets with CNPs."""
        sent = nic.counters.get(CNP_SENT)
        if sent is None:
            return self.outcome(
                nic.name,
                "unverified",
                [f"{nic.name} {CNP_SENT}: not provided by this NIC ({marked} ECN-marked)"],
                labels,
            )
        if sent == 0:
            return self.outcome(
                nic.name,
                "fail",
                [
                    f"{nic.name} {CNP_SENT}: Expected: > 0 (answering {marked} ECN-marked "
                    "RoCE packets) Actual: 0"
                ],
                labels,
            )
        return self.outcome(nic.name, "pass", [], labels)

    def _cnps_handled(
        self, ctx: RunContext, nic: NicDelta, marked: int, sender: _Sender
    ) -> RuleOutcome:
        """One sender of the receiver ``nic`` handled the CNPs it was sent."""
        host, port, label = sender
        peer = ctx.nic(host, port)
        if peer is None:
            return self.outcome(host, "unverified", [f"{host}: no NIC counters collected"], label)
        if CNP_HANDLED not in peer.counters:
            return self.outcome(
                peer.name,
                "unverified",
                [
                    f"{peer.name} {CNP_HANDLED}: not provided by this NIC (a DCQCN "
                    "reaction point's counter, mlx5)"
                ],
                label,
            )
        if peer.counters[CNP_HANDLED] == 0:
            return self.outcome(
                peer.name,
                "fail",
                [
                    f"{peer.name} {CNP_HANDLED}: Expected: > 0 ({nic.name} counted "
                    f"{marked} ECN-marked RoCE packets) Actual: 0"
                ],
                label,
            )
        return self.outcome(peer.name, "pass", [], label)


class NoLossyPause(Rule):
    """No PFC pause frame is sent or received on a priority outside the lossless set, by any
    switch port or host NIC."""

    rule_id = "PT006"

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
        lossy = [p for p in range(8) if p not in set(ctx.inputs.lossless_priorities)]
        outcomes = [self._switch(ctx, switch, lossy) for switch in ctx.inputs.switches]
        for host, port, labels in ctx.endpoints():
            nic = ctx.nic(host, port)
            if nic is None or (nic.rx_pause is None and nic.tx_pause is None):
                continue  # a NIC without per-priority pause counters: its switch port tells
            problems = [
                f"{nic.name} {way}_prio{priority}_pause: Expected: 0 (lossy) Actual: "
                f"{frames[priority]}"
                for way, frames in (("rx", nic.rx_pause), ("tx", nic.tx_pause))
                if frames is not None
                for priority in lossy
                if frames[priority] > 0
            ]
            status: Status = "fail" if problems else "pass"
            outcomes.append(self.outcome(nic.name, status, problems, labels))
        return outcomes

    def _switch(self, ctx: RunContext, switch: SwitchDelta, lossy: list[int]) -> RuleOutcome:
        """Pause frames on ``lossy`` priorities that moved on the switch's ports."""
        problems = []
        for name in sorted(switch.after.interfaces):
            before, after = ctx.switch_delta(switch, name)
            if before is None:
                continue
            for way, new, old in (
                ("rx", after.pfc_rx, before.pfc_rx),
                ("tx", after.pfc_tx, before.pfc_tx),
            ):
                for priority in lossy:
                    frames = new[priority] - old[priority]
                    if frames > 0:
                        problems.append(
                            f"{switch.device} {name} PFC {way} priority {priority}: "
                            f"Expected: 0 (lossy) Actual: {frames}"
                        )
        return self.outcome(switch.device, "fail" if problems else "pass", problems)


class NoNicLoss(Rule):
    """No NIC in the run counts a sign of loss: out_of_sequence and packet_seq_err (mlx5),
    rcvd_seq_err, out_of_seq_request and retry_exceeded_err (rxe) stay flat."""

    rule_id = "PT007"

    def evaluate(self, ctx: RunContext) -> list[RuleOutcome]:
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

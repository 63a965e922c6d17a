"""What a perftest verdict looks at: the pairs that ran and their parsed outputs, the host
NICs' counter deltas and the switches' counter snapshots around the run.

Data direction: ``ib_write_bw`` and ``ib_send_bw`` move data client → server, ``ib_read_bw``
server → client (the client reads). Which output measures: the client's for write and read
(the server prints the client's numbers, src/write_bw.c, read_bw.c), the server's for send
when given (it counts what arrived, ``run_iter_bw_server``), see
:mod:`agent.observe.perftest.output`.
A missing counter means the NIC does not provide it (``agent.observe.hostnic``): never read as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict, Unpack

from agent.device.state import Counters
from agent.intent.model import PerftestPolicy
from agent.observe.hostnic import NicCounters
from agent.observe.perftest.output import PerftestRun

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


class NicPlace(TypedDict, total=False):
    """Where an RDMA port sits: its netdev (for the per-priority pause counters) and the
    switch port it is cabled to."""

    netdev: str | None
    access: SwitchPort | None


def nic_delta(
    host: str,
    rdma_port: str,
    before: NicCounters,
    after: NicCounters,
    **place: Unpack[NicPlace],
) -> NicDelta:
    """:class:`NicDelta` from two :func:`agent.observe.hostnic` readings of one host."""
    netdev, access = place.get("netdev"), place.get("access")
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
        labels = [link_label(*direction(link, self.kind)) for link in self.links]
        if duplicates := sorted({label for label in labels if labels.count(label) > 1}):
            raise ValueError(
                "links: Expected: one pair per direction between two hosts "
                f"Actual: {', '.join(duplicates)} more than once"
            )
        if self.scenario == "incast":
            receivers = {direction(link, self.kind)[1] for link in self.links}
            if len(self.links) < 2 or len(receivers) != 1:
                raise ValueError(
                    "incast: Expected: two or more senders into one receiver "
                    f"Actual: {len(self.links)} link(s) into {', '.join(sorted(receivers))}"
                )

    @property
    def kind(self) -> Test:
        return self.test or self.policy.test


def direction(link: LinkRun, test: Test) -> tuple[str, str]:
    """(data sender, data receiver)."""
    return (link.server, link.client) if test == "read" else (link.client, link.server)


def link_label(sender: str, receiver: str) -> str:
    """``h1→h3``: a link by the direction its data goes."""
    return f"{sender}→{receiver}"

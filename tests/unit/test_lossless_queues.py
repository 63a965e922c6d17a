"""lossless.queues: egress queues (depth, tail drop) and strict priority + ETS (DWRR).

Sources: IEEE 802.1Qaz ETS -- strict-priority classes are served first, bandwidth-allocated
classes share the rest by their percentages and an idle class's share goes to the others
(Dell FTOS DCB guide, "Enhanced Transmission Selection"; Microchip LAN969x "Enhanced
Transmission Selection (ETS)"); deficit round robin (Shreedhar & Varghese, SIGCOMM 1995):
byte-fair, a queue's credit grows by its quantum per round and an empty queue keeps none;
EOS ``priority strict`` / ``bandwidth percent`` semantics for the configuration.
"""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from typing import Any

import pytest
from pydantic import TypeAdapter

from lossless.config import EcnConfig, PortQosConfig
from lossless.pfc import IngressAccounting, ReceivedPause
from lossless.queues import (
    MARKED,
    QUEUED,
    EgressQueue,
    Scheduler,
    eligible_classes,
    enqueue,
    scheduler_weights,
)
from lossless.wred import EcnMarker

# scheduler_weights: (queues config, expected strict queues, expected weights[8]).
# Unconfigured non-strict queues share what is left of 100 % equally, at least 1 each.
WEIGHTS: list[tuple[str, dict[str, Any], set[int], list[int]]] = [
    ("no configuration: equal DWRR", {}, set(), [12] * 8),
    (
        "one queue at 50 %: 7 share the rest",
        {"3": {"bandwidth_percent": 50}},
        set(),
        [7, 7, 7, 50, 7, 7, 7, 7],
    ),
    (
        "strict queues take no weight",
        {"6": {"strict": True}, "7": {"strict": True}},
        {6, 7},
        [16, 16, 16, 16, 16, 16, 0, 0],
    ),
    (
        "nothing left: at least 1 each",
        {"3": {"bandwidth_percent": 60}, "0": {"bandwidth_percent": 40}},
        set(),
        [40, 1, 1, 60, 1, 1, 1, 1],
    ),
    (
        "RoCE profile: CNP strict, RoCE 75 %, default 20 %",
        {"6": {"strict": True}, "3": {"bandwidth_percent": 75}, "0": {"bandwidth_percent": 20}},
        {6},
        [20, 1, 1, 75, 1, 1, 0, 1],
    ),
]


@pytest.mark.parametrize(
    ("queues", "strict", "weights"), [row[1:] for row in WEIGHTS], ids=[row[0] for row in WEIGHTS]
)
def test_scheduler_weights(queues: dict[str, Any], strict: set[int], weights: list[int]) -> None:
    got_strict, got_weights = scheduler_weights(
        TypeAdapter(PortQosConfig).validate_python({"queues": queues})
    )
    assert {tc for tc in range(8) if got_strict[tc]} == strict
    assert got_weights == weights


def _queues(frames: dict[int, tuple[int, int]]) -> list[EgressQueue[bytearray]]:
    """Queues holding ``count`` frames of ``size`` bytes: ``{tc: (count, size)}``."""
    queues: list[EgressQueue[bytearray]] = [EgressQueue() for _ in range(8)]
    for tc, (count, size) in frames.items():
        for _ in range(count):
            queues[tc].push((bytearray(size), 0, tc))
    return queues


def _serve(
    scheduler: Scheduler,
    queues: list[EgressQueue[bytearray]],
    picks: int,
    paused: frozenset[int] = frozenset(),
) -> tuple[list[int], Counter[int]]:
    order: list[int] = []
    sent_bytes: Counter[int] = Counter()
    for _ in range(picks):
        eligible = [bool(q.packets) and tc not in paused for tc, q in enumerate(queues)]
        tc = scheduler.pick(queues, eligible)
        if tc is None:
            break
        order.append(tc)
        sent_bytes[tc] += len(queues[tc].pop()[0])
    return order, sent_bytes


# Strict priority: (strict queues, backlog {tc: (frames, size)}, paused, picks, order).
STRICT = [
    ("strict before weighted", {6}, {6: (3, 100), 0: (3, 100)}, set(), 4, [6, 6, 6, 0]),
    ("the higher strict queue first", {5, 7}, {5: (2, 100), 7: (2, 100)}, set(), 4, [7, 7, 5, 5]),
    ("a paused strict queue lets the others go", {6}, {6: (3, 100), 0: (2, 100)}, {6}, 3, [0, 0]),
]


@pytest.mark.parametrize(
    ("strict", "backlog", "paused", "picks", "order"),
    [row[1:] for row in STRICT],
    ids=[row[0] for row in STRICT],
)
def test_strict_priority(
    strict: set[int],
    backlog: dict[int, tuple[int, int]],
    paused: set[int],
    picks: int,
    order: list[int],
) -> None:
    scheduler = Scheduler([tc in strict for tc in range(8)], [1] * 8)
    assert _serve(scheduler, _queues(backlog), picks, frozenset(paused))[0] == order


# ETS by DWRR: (weights {tc: w}, backlog {tc: (frames, size)}, picks, expected byte share of
# the first listed queue, tolerance).  Shares are of bytes, whatever the frame sizes.
SHARES = [
    (
        "75/25 with equal frames",
        {3: 75, 0: 25},
        {3: (4000, 1000), 0: (4000, 1000)},
        2000,
        0.75,
        0.02,
    ),
    (
        "50/50 is byte-fair: 1500 B vs 500 B frames",
        {3: 50, 0: 50},
        {3: (4000, 1500), 0: (4000, 500)},
        2000,
        0.5,
        0.02,
    ),
    (
        "an idle queue's share goes to the other",
        {3: 75, 0: 25},
        {3: (0, 1000), 0: (500, 1000)},
        500,
        0.0,
        0.0,
    ),
    (
        "20/20/60 three ways",
        {1: 20, 2: 20, 3: 60},
        {1: (3000, 1000), 2: (3000, 1000), 3: (3000, 1000)},
        3000,
        0.2,
        0.02,
    ),
]


@pytest.mark.parametrize(
    ("weights", "backlog", "picks", "share", "tolerance"),
    [row[1:] for row in SHARES],
    ids=[row[0] for row in SHARES],
)
def test_ets_byte_shares(
    weights: dict[int, int],
    backlog: dict[int, tuple[int, int]],
    picks: int,
    share: float,
    tolerance: float,
) -> None:
    scheduler = Scheduler([False] * 8, [weights.get(tc, 1) for tc in range(8)])
    _, sent = _serve(scheduler, _queues(backlog), picks)
    first = next(iter(weights))
    assert sum(sent.values()) > 0
    assert sent[first] / sum(sent.values()) == pytest.approx(share, abs=tolerance)


def test_a_paused_queue_keeps_no_credit() -> None:
    # tc 3 has 90 % (14 400 B of credit per visit, 14 frames of 1000 B); it is paused in the
    # middle of its turn.  On resume it gets one fresh turn, not the rest of the old one on
    # top: an idle or paused queue does not hoard credit (DRR resets an empty queue's deficit).
    weights = [90 if tc == 3 else 10 for tc in range(8)]
    scheduler = Scheduler([False] * 8, weights)
    queues = _queues({0: (500, 1000), 1: (500, 1000), 3: (500, 1000)})
    order: list[int] = []
    while order[-3:] != [3, 3, 3]:
        order += _serve(scheduler, queues, 1)[0]
    order, _ = _serve(scheduler, queues, 10, paused=frozenset({3}))
    assert set(order) == {0, 1}
    order, _ = _serve(scheduler, queues, 60)
    runs = [len(list(run)) for tc, run in groupby(order) if tc == 3]
    # A fresh turn is 14 frames (400 B left over carry into the next turn: 14 or 15).
    assert runs[0] == 14 and max(runs) <= 15


# Egress queue and enqueue(): depth, watermark, tail drop at the limit (lossy classes), ECN
# marking from the depth the frame finds (lossless.wred: P 100 %, min 0, max 1000 B: every
# ECT frame marked once 1000 B are queued).  Steps: (op, bytes, ECT?, expected status).
QUEUE = [
    (
        "push/pop track depth and peak",
        [("push", 1000, False, None), ("push", 500, False, None), ("pop", 0, False, None)],
        (500, 1500, 0, 0),
    ),
    ("admitted up to the limit exactly", [("enqueue", 3000, False, QUEUED)], (3000, 3000, 0, 0)),
    (
        "refused above the limit, counted",
        [
            ("enqueue", 2500, False, QUEUED),
            ("enqueue", 501, False, 0),
            ("enqueue", 500, False, QUEUED),
        ],
        (3000, 3000, 1, 0),
    ),
    (
        "marked from the depth found, ECT only",
        [
            ("enqueue", 1000, True, QUEUED),
            ("enqueue", 1000, True, QUEUED | MARKED),
            ("enqueue", 500, False, QUEUED),
        ],
        (2500, 2500, 0, 1),
    ),
]


@pytest.mark.parametrize(
    ("steps", "expected"), [row[1:] for row in QUEUE], ids=[row[0] for row in QUEUE]
)
def test_egress_queue(
    steps: list[tuple[str, int, bool, int | None]], expected: tuple[int, int, int, int]
) -> None:
    queue: EgressQueue[bytearray] = EgressQueue()
    ingress = IngressAccounting(10e6)  # lossy: nothing configured
    marker = EcnMarker(EcnConfig(min_bytes=0, max_bytes=1000, max_probability=100))
    for op, length, ect, status in steps:
        packet = (bytearray(length), 0, 0)
        if op == "push":
            queue.push(packet)
        elif op == "pop":
            queue.pop()
        else:
            assert enqueue(queue, ingress, marker, packet, length, ect, 3000) == status
    assert (
        queue.depth_bytes,
        queue.watermark_bytes,
        queue.tail_drops,
        queue.ecn_marked,
    ) == expected


def test_eligible_classes_skip_empty_and_paused_queues() -> None:
    # 802.1Qbb: a paused priority may not transmit; the watchdog's override lifts that.
    queues = _queues({1: (1, 100), 3: (1, 100), 5: (1, 100)})
    pause = ReceivedPause(10e6)
    pause.configure([True] * 8)
    pause.receive(3, 0xFFFF, 0.0, False)
    pause.receive(5, 0xFFFF, 0.0, False)
    override = [tc == 5 for tc in range(8)]
    got = eligible_classes(queues, pause, override, 0.001)
    assert [tc for tc in range(8) if got[tc]] == [1, 5]

"""lossless.queues / lossless.config: packet trimming, the shared rule of lossy RoCE.

Sources: SONiC doc/packet_trimming/packet-trimming-design.md (a packet failing buffer
admission on a queue whose buffer profile's ``packet_discard_action`` is ``trim`` is cut to
``size`` -- a shorter one is sent whole -- and sent from ``queue_index`` with ``dscp_value``;
SAI counts it in ``TRIM_PACKETS`` and, when the trim queue drops it, ``DROPPED_TRIM_PACKETS``);
Cumulus Linux "Packet Trimming" (eligibility per egress traffic class, lossy classes only).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from lossless.config import PortQosConfig, TrimConfig
from lossless.pfc import IngressAccounting
from lossless.queues import (
    QUEUED,
    TRIMMED,
    EgressQueue,
    admit_trimmed,
    enqueue,
    trimmed_length,
)

LIMIT = 3000
TRIM_LIMIT = 600

# (name, frame lengths offered to a trimming queue (limit 3000) in order, trim size,
#  expected statuses, expected (depth, tail_drops, trimmed, trim_dropped) of the data queue,
#  expected depth of the trim queue (limit 600)).
TRIM_ROWS: list[tuple[str, list[int], int, list[int], tuple[int, int, int, int], int]] = [
    ("under the limit: queued whole", [1000, 1000], 256, [QUEUED, QUEUED], (2000, 0, 0, 0), 0),
    (
        "over the limit: trimmed to the size",
        [1500, 1500, 1500],
        256,
        [QUEUED, QUEUED, TRIMMED],
        (3000, 0, 1, 0),
        256,
    ),
    (
        "a frame shorter than the size goes whole to the trim queue",
        [1500, 1500, 1400, 200],
        256,
        [QUEUED, QUEUED, TRIMMED, TRIMMED],
        (3000, 0, 2, 0),
        456,
    ),
    (
        "the trim queue full: the trimmed header is dropped",
        [1500, 1500, 1500, 1500, 1500, 1500],
        256,
        [QUEUED, QUEUED, TRIMMED, TRIMMED, TRIMMED, TRIMMED],
        (3000, 0, 4, 2),
        512,
    ),
    (
        "not trimming: tail drop",
        [1500, 1500, 1500],
        0,
        [QUEUED, QUEUED, 0],
        (3000, 1, 0, 0),
        0,
    ),
]


@pytest.mark.parametrize(
    ("lengths", "size", "statuses", "expected", "trim_depth"),
    [row[1:] for row in TRIM_ROWS],
    ids=[row[0] for row in TRIM_ROWS],
)
def test_trimming_queue(
    lengths: list[int],
    size: int,
    statuses: list[int],
    expected: tuple[int, int, int, int],
    trim_depth: int,
) -> None:
    data: EgressQueue[bytearray] = EgressQueue(size)
    trim_queue: EgressQueue[bytearray] = EgressQueue()
    ingress = IngressAccounting(10e9)  # lossy
    got = []
    for length in lengths:
        status = enqueue(data, ingress, None, (bytearray(length), 0, 3), length, True, LIMIT)
        got.append(status)
        if status == TRIMMED:
            cut = trimmed_length(length, size)
            admit_trimmed(data, trim_queue, ingress, (bytearray(cut), 0, 6), cut, TRIM_LIMIT)
    assert got == statuses
    assert (data.depth_bytes, data.tail_drops, data.trimmed, data.trim_dropped) == expected
    assert trim_queue.depth_bytes == trim_depth
    assert trim_queue.ecn_marked == 0
    # Every admitted byte, whole or trimmed, is charged to the ingress (released on send).
    assert ingress.buffered_bytes[3] == data.depth_bytes
    assert ingress.buffered_bytes[6] == trim_depth


def test_trim_sizes_per_queue() -> None:
    qos = PortQosConfig(
        queues={3: _queue(trim=True), 6: _queue(strict=True)},
        trim=TrimConfig(dscp=48, queue=6, size_bytes=256),
    )
    assert qos.trim_sizes() == [0, 0, 0, 256, 0, 0, 0, 0]
    assert PortQosConfig().trim_sizes() == [0] * 8


# (name, port QoS as a file holds it, a fragment of the error).
BAD_TRIM: list[tuple[str, dict[str, Any], str]] = [
    ("a trimming queue without trim settings", {"queues": {"3": {"trim": True}}}, "no trim"),
    (
        "a lossless queue cannot trim",
        {
            "pfc_enabled": True,
            "pfc_priorities": [3],
            "queues": {"3": {"trim": True}},
            "trim": {"dscp": 48, "queue": 6},
        },
        "lossless",
    ),
    (
        "trimmed frames cannot go to the queue that trims",
        {"queues": {"3": {"trim": True}}, "trim": {"dscp": 48, "queue": 3}},
        "trimmed frames go to it",
    ),
    ("a size below 64 B", {"trim": {"dscp": 48, "queue": 6, "size_bytes": 32}}, "64"),
    ("a DSCP above 63", {"trim": {"dscp": 64, "queue": 6}}, "63"),
]


@pytest.mark.parametrize(
    ("data", "fragment"), [row[1:] for row in BAD_TRIM], ids=[row[0] for row in BAD_TRIM]
)
def test_bad_trim_settings_are_refused(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        TypeAdapter(PortQosConfig).validate_python(data)


def test_a_dropping_queue_is_reported_without_trim() -> None:
    adapter = TypeAdapter(PortQosConfig)
    qos = adapter.validate_python(
        {"queues": {"3": {"trim": True}, "6": {"strict": True}}, "trim": {"dscp": 48, "queue": 6}}
    )
    dumped = adapter.dump_python(qos)
    assert dumped["queues"][3]["trim"] is True
    assert "trim" not in dumped["queues"][6]


def _queue(**fields: Any) -> Any:
    from lossless.config import QueueConfig

    return QueueConfig(**fields)

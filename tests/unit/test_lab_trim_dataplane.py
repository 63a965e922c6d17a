"""The lab switch's packet trimming (issue #47), driven in-process over socket pairs: where a
trimming queue is over its limit the frame is cut to the trim size, its DSCP set to the trim
DSCP (ECN bits kept, header checksum valid, IPv4 total length left as sent) and it leaves
from the trim queue; the queue counts trimmed, trim sent and trim dropped (SAI
TRIM_PACKETS, TX_TRIM_PACKETS, DROPPED_TRIM_PACKETS: SONiC
doc/packet_trimming/packet-trimming-design.md §2.4)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from lab.mgmt.testing import fake_switch_config
from lab.vswitch import packet as pkt
from lab.vswitch.commands import clear_counters, counters_snapshot
from lab.vswitch.config import parse_config
from lab.vswitch.dataplane import Switch
from tests.unit.vswitch_wires import Clock, Wires

PORTS = ["eth1", "eth2", "eth3"]
QUEUE_LIMIT = 3000
ROCE_DSCP = 26
TRIM_DSCP = 48


def _qos(trim_size: int | None) -> dict[str, Any]:
    """DSCP 26 -> queue 3 (trimming when ``trim_size`` is set), 48 -> strict queue 6."""
    queue3: dict[str, Any] = {"bandwidth_percent": 50}
    port: dict[str, Any] = {"queues": {"3": queue3, "6": {"strict": True}}}
    if trim_size is not None:
        queue3["trim"] = True
        port["trim"] = {"dscp": TRIM_DSCP, "queue": 6, "size_bytes": trim_size}
    return {"dscp_to_tc": {str(ROCE_DSCP): 3, str(TRIM_DSCP): 6}, "ports": {"eth2": port}}


@pytest.fixture
def wired() -> Iterator[tuple[Wires, Clock, list[Switch]]]:
    wires, clock = Wires(), Clock()
    made: list[Switch] = []
    try:
        yield wires, clock, made
    finally:
        for switch in made:
            switch.close()
        wires.close()


def _switch(made: list[Switch], wires: Wires, clock: Clock, trim_size: int | None) -> Switch:
    config = fake_switch_config("leaf1", PORTS)
    config["buffer"]["queue_limit_bytes"] = QUEUE_LIMIT
    config["qos"] = _qos(trim_size)
    switch = Switch(
        parse_config(config), open_socket=wires.open, clock=clock, link_probe=wires.probe
    )
    made.append(switch)
    for i, port in enumerate(switch.ports):
        switch.neighbors.learn(port.ip + 1, bytes([2, 0, 0, 0, 9, i]), port.index)
    return switch


def _frame(switch: Switch, length: int, seq: int, ecn: int) -> bytes:
    """A RoCEv2-like frame of ``length`` bytes into eth1 for the host behind eth2."""
    src = socket.inet_aton("198.18.1.2")
    dst = (switch.ports[1].ip + 1).to_bytes(4, "big")
    payload = struct.pack("!I", seq) + bytes(length - 14 - 20 - 8 - 4)
    udp = struct.pack("!HHHH", 49152, 4791, 8 + len(payload), 0) + payload
    ip = bytearray(
        struct.pack(
            "!BBHHHBBH4s4s", 0x45, ROCE_DSCP << 2 | ecn, 20 + len(udp), 1, 0x4000, 64, 17, 0,
            src, dst,
        )
    )  # fmt: skip
    struct.pack_into("!H", ip, 10, pkt.checksum(ip))
    return bytes(switch.ports[0].mac + b"\x02\x00\x00\x00\x01\x01\x08\x00" + ip + udp)


def _run(
    switch: Switch, wires: Wires, clock: Clock, count: int, length: int, ecn: int
) -> list[bytes]:
    """``count`` frames arrive at once (the egress port sends nothing meanwhile); then the
    switch drains; what eth2 sent, in order."""
    for seq in range(count):
        wires.peer["eth1"].send(_frame(switch, length, seq, ecn))
    while True:  # RX_BATCH frames a call
        before = switch.ports[0].counters.rx_packets
        switch._receive(switch.ports[0])
        if switch.ports[0].counters.rx_packets == before:
            break
    sent: list[bytes] = []
    for _ in range(10 * count + 10):
        clock.t += 0.01
        switch._transmit(switch.ports[1], clock.t)
        sent += wires.received("eth2")
        if not switch.ports[1].backlog:
            break
    return sent


@dataclass(frozen=True)
class Row:
    name: str
    trim_size: int | None  # None: the queue tail-drops
    count: int
    length: int
    ecn: int
    # expected: frames sent whole, trimmed frames sent (and their length), tail drops,
    # the queue's (trimmed, trim_sent, trim_dropped)
    whole: int
    cut: int
    cut_length: int
    tail_drops: int
    trim: tuple[int, int, int]


ROWS = [
    Row("over the limit: cut to 128 B, ECT(0) kept", 128, 5, 1000, 2, 3, 2, 128, 0, (2, 2, 0)),
    Row("not ECN-capable stays so", 256, 4, 1000, 0, 3, 1, 256, 0, (1, 1, 0)),
    Row("a frame shorter than the size goes whole", 1500, 4, 1000, 1, 3, 1, 1000, 0, (1, 1, 0)),
    # 3000 B limit: 3 whole frames; the trim queue holds 5 x 512 B, the other 22 are dropped
    Row("the trim queue full drops the rest", 512, 30, 1000, 2, 3, 5, 512, 0, (27, 5, 22)),
    Row("a queue without trimming tail-drops", None, 5, 1000, 2, 3, 0, 0, 2, (0, 0, 0)),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_trimming_cuts_remarks_and_counts(
    wired: tuple[Wires, Clock, list[Switch]], row: Row
) -> None:
    wires, clock, made = wired
    switch = _switch(made, wires, clock, row.trim_size)
    sent = _run(switch, wires, clock, row.count, row.length, row.ecn)
    cut = [f for f in sent if f[15] >> 2 == TRIM_DSCP]
    whole = [f for f in sent if f[15] >> 2 == ROCE_DSCP]
    assert (len(whole), len(cut)) == (row.whole, row.cut)
    for frame in cut:
        assert len(frame) == row.cut_length
        assert frame[15] & pkt.ECN_MASK == row.ecn  # the ECN bits are the sender's
        assert pkt.checksum(frame[14:34]) == 0  # header checksum valid after the remark
        total = struct.unpack_from("!H", frame, 16)[0]
        assert total == row.length - 14  # the length the sender wrote: the cut shows
    # Trimmed frames leave from the strict trim queue, ahead of the queued whole ones.
    assert [f[15] >> 2 for f in sent[: row.cut]] == [TRIM_DSCP] * row.cut
    eth2 = counters_snapshot(switch)["ports"]["eth2"]
    queue3 = eth2["queues"]["3"]
    assert (queue3["trimmed"], queue3["trim_sent"], queue3["trim_dropped"]) == row.trim
    assert queue3["tail_drops"] == row.tail_drops
    assert eth2["queues"]["6"]["tail_drops"] == row.trim[2]  # where they were dropped
    assert eth2["queues"]["6"]["tx_packets"] == row.cut
    assert eth2["trim"] == dict(
        zip(("trimmed", "trim_sent", "trim_dropped"), row.trim, strict=True)
    )
    assert eth2["pfc"]["tx_xoff"] == [0] * 8


def test_clear_counters_zeroes_the_trim_counters(
    wired: tuple[Wires, Clock, list[Switch]],
) -> None:
    wires, clock, made = wired
    switch = _switch(made, wires, clock, 128)
    _run(switch, wires, clock, 5, 1000, 2)
    assert counters_snapshot(switch)["ports"]["eth2"]["trim"]["trimmed"] == 2
    clear_counters(switch)
    assert counters_snapshot(switch)["ports"]["eth2"]["trim"] == {
        "trimmed": 0,
        "trim_sent": 0,
        "trim_dropped": 0,
    }


def test_a_qos_change_turns_trimming_off(wired: tuple[Wires, Clock, list[Switch]]) -> None:
    wires, clock, made = wired
    switch = _switch(made, wires, clock, 128)
    assert [q.trim_bytes for q in switch.ports[1].queues] == [0, 0, 0, 128, 0, 0, 0, 0]
    switch.apply_config(parse_config({**switch.config.to_json_dict(), "qos": _qos(None)}))
    assert [q.trim_bytes for q in switch.ports[1].queues] == [0] * 8

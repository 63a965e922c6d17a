"""lab.vswitch WRED/ECN: the CE-marked fraction follows the configured curve.

Method: the receiver pauses class 3 of the switch port towards it (an injected XOFF), so the
egress queue only grows; frames of a fixed size are then sent one after the other, so frame
k is enqueued at an exactly known depth k x size.  After an XON the queue drains and every
frame's ECN field is read at the receiver.  That samples the whole curve (below min, the
linear ramp, above max) at controlled depths in one burst, repeated a few times.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.lab.support import frames
from tests.lab.support import vswitch as fx

pytestmark = [pytest.mark.lab, fx.requires_vswitch_lab]

MIN_BYTES, MAX_BYTES, MAX_PROBABILITY = 20000, 100000, 60
FRAME = 100  # bytes; depth seen by frame k of a round is k * FRAME
PER_ROUND = 1100  # depths 0 .. 109900: below min, the whole ramp, above max
ROUNDS = 4
NON_ECT_EVERY = 10  # every 10th frame is not ECN-capable


@pytest.fixture(scope="module")
def topo() -> Iterator[fx.Topology]:
    with fx.Topology.create("wred", n_hosts=3) as topology:
        yield topology


def expected_probability(depth: int) -> float:
    if depth < MIN_BYTES:
        return 0.0
    if depth >= MAX_BYTES:
        return 1.0
    return MAX_PROBABILITY / 100 * (depth - MIN_BYTES) / (MAX_BYTES - MIN_BYTES)


def test_marked_fraction_follows_the_wred_curve(topo: fx.Topology) -> None:
    config = topo.base_config()
    config["ports"][2]["buffer"] = {  # eth3: room for the whole paused burst (lossy ingress)
        "xoff_bytes": 30000,
        "xon_bytes": 15000,
        "headroom_bytes": 20000,
        "queue_limit_bytes": 400000,
    }
    ecn = {"min_bytes": MIN_BYTES, "max_bytes": MAX_BYTES, "max_probability": MAX_PROBABILITY}
    config["qos"]["ports"] = {
        "eth3": {"pfc_enabled": True, "pfc_priorities": [3], "queues": {"3": {"ecn": ecn}}}
    }
    h1, h3 = topo.host(1), topo.host(3)
    with fx.Rig(topo) as rig:
        switch = rig.switch(config)
        rig.sink(h3, 4791)
        capture = rig.capture(h3)
        tx, inject = rig.raw(h1), rig.raw(h3)
        client = rig.enter_context(switch.client())
        for round_no in range(ROUNDS):
            inject.send(frames.build_pfc(h3.mac, {3: 0xFFFF}))  # 3.4 s at 10 Mb/s: plenty
            time.sleep(0.02)
            for k in range(PER_ROUND):
                tx.send(_frame(h1, h3, round_no * PER_ROUND + k, ect=_ect(k)))

            def all_queued() -> bool:
                q3 = client.counters()["ports"]["eth3"]["queues"]["3"]
                return bool(q3["depth_bytes"] == PER_ROUND * FRAME)

            assert fx.wait_for(all_queued, 3.0), switch.log_tail()
            inject.send(frames.build_pfc(h3.mac, {3: 0}))
            assert fx.wait_for(
                lambda r=round_no: len(capture.udp(4791)) >= (r + 1) * PER_ROUND, 3.0
            )
        received = capture.udp(4791)
        assert len(received) == ROUNDS * PER_ROUND
        marked_by_switch = client.counters()["ports"]["eth3"]["queues"]["3"]["ecn_marked"]

    assert all(u.ip_checksum_ok for u in received)
    assert sum(u.ecn == 3 for u in received) == marked_by_switch
    _check_the_curve(_marks_by_depth(received))


def _check_the_curve(ect: list[tuple[int, bool]]) -> None:
    """None marked below min, all above max, the linear ramp's share in each half between."""
    below = [m for d, m in ect if d < MIN_BYTES]
    above = [m for d, m in ect if d >= MAX_BYTES]
    assert below and not any(below)
    assert above and all(above)
    mid = (MIN_BYTES + MAX_BYTES) // 2
    for low, high in ((MIN_BYTES, mid), (mid, MAX_BYTES)):
        bucket = [(d, m) for d, m in ect if low <= d < high]
        observed = sum(m for _, m in bucket) / len(bucket)
        expected = sum(expected_probability(d) for d, _ in bucket) / len(bucket)
        assert len(bucket) >= 1000
        assert abs(observed - expected) <= 0.05, (low, high, observed, expected)


def _ect(k: int) -> bool:
    """Whether frame ``k`` of a round is ECN-capable (every NON_ECT_EVERY-th is not)."""
    return k % NON_ECT_EVERY != NON_ECT_EVERY - 1


def _frame(src: fx.Host, dst: fx.Host, seq: int, ect: bool) -> bytes:
    """FRAME bytes of class 3 carrying ``seq``, ECN-capable (ECT(0)) or not."""
    return frames.build_udp(
        src.mac, src.switch_mac, src.ip, dst.ip, 40000, 4791, seq.to_bytes(4, "big"),
        dscp=26, ecn=2 if ect else 0, size=FRAME,
    )  # fmt: skip


def _marks_by_depth(received: list[frames.Udp]) -> list[tuple[int, bool]]:
    """(queue depth the frame was enqueued at, whether it left CE-marked) of every ECT frame;
    a non-ECT frame must leave unmarked."""
    ect = []
    for u in received:
        k = u.seq % PER_ROUND
        if not _ect(k):
            assert u.ecn == 0, "a non-ECT packet must be forwarded unmarked (no WRED drop profile)"
        else:
            ect.append((k * FRAME, u.ecn == 3))
    return ect

"""The probes recognise trimmed RoCEv2 frames (issue #47): a frame shorter than its IPv4 total
length says (+14 B of Ethernet), still holding its BTH, is counted per flow as ``trimmed``
with its DSCP -- not as lost, not as invalid, not as an ICRC error -- and the report's
warnings say ``trimmed N``.  The frames are cut and re-marked as the lab switch does
(lab/vswitch/dataplane.py ``Switch._trim``)."""

from __future__ import annotations

import pytest

from agent.observe.probes.analysis import RoceAnalyzer
from agent.observe.probes.packets import Flow, RoceTemplate, parse_trimmed
from lab.vswitch import packet as pkt

FLOW = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.1.2", "198.18.2.2", size=900)
TRIM_DSCP = 48


def _trim(frame: bytes, size: int, dscp: int = TRIM_DSCP) -> bytes:
    """Cut to ``size`` and re-mark as the lab switch does (total length left as sent)."""
    cut = bytearray(frame[:size])
    cut[15] = dscp << 2 | (cut[15] & pkt.ECN_MASK)
    cut[24:26] = b"\x00\x00"
    csum = pkt.checksum(cut[14:34])
    cut[24:26] = csum.to_bytes(2, "big")
    return bytes(cut)


# (name, trim size per sequence number to cut (others arrive whole), frames sent,
#  expected (received, trimmed, lost, invalid, icrc_errors))
ROWS: list[tuple[str, dict[int, int], int, tuple[int, int, int, int, int]]] = [
    ("nothing trimmed", {}, 6, (6, 0, 0, 0, 0)),
    ("one frame cut to 128 B", {2: 128}, 6, (5, 1, 0, 0, 0)),
    ("two cut to 512 B and 256 B", {1: 512, 4: 256}, 6, (4, 2, 0, 0, 0)),
    # Cut before the probe header (BTH ends at 54 B, the header at 78 B): trimmed, but its
    # sequence number is gone, so the gap it leaves stays counted as lost.
    ("cut to 64 B, before the probe header", {3: 64}, 6, (5, 1, 1, 0, 0)),
    ("the last one cut: no tail loss either", {5: 256}, 6, (5, 1, 0, 0, 0)),
    # A frame cut inside its BTH is no trimmed RoCE packet (a trim size is at least 64 B).
    ("cut inside the BTH: invalid, its number lost", {3: 50}, 6, (5, 0, 1, 1, 0)),
]


@pytest.mark.parametrize(("name", "cuts", "sent", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_trimmed_frames_are_counted_not_lost(
    name: str, cuts: dict[int, int], sent: int, expected: tuple[int, int, int, int, int]
) -> None:
    template = RoceTemplate(FLOW)
    analyzer = RoceAnalyzer()
    for seq in range(sent):
        frame = template.frame(seq, seq, 0)
        analyzer.feed(_trim(frame, cuts[seq]) if seq in cuts else frame)
    result = analyzer.result({("198.18.1.2", "198.18.2.2", FLOW.qpn): sent})
    (flow,) = result["flows"]
    found = (flow["received"], flow["trimmed"], flow["lost"], result["totals"]["invalid"],
             flow["icrc_errors"])  # fmt: skip
    assert found == expected
    assert result["totals"]["trimmed"] == expected[1]
    if expected[1]:
        assert flow["trimmed_dscp"] == TRIM_DSCP and flow["dscp"] == FLOW.dscp
        assert f"trimmed {expected[1]}:" in " ".join(result["warnings"])
    else:
        assert flow["trimmed_dscp"] is None
        assert not any(w.startswith("trimmed") for w in result["warnings"])


def test_a_whole_frame_or_another_port_is_not_trimmed() -> None:
    frame = RoceTemplate(FLOW).frame(7, 7, 0)
    assert parse_trimmed(frame) is None  # whole
    cut = _trim(frame, 128)
    fields = parse_trimmed(cut)
    assert fields is not None and fields[1] >> 2 == TRIM_DSCP and fields[4] == 7
    assert parse_trimmed(cut, udp_port=4792) is None

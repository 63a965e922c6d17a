"""RoCEv2/CNP/PFC frames: the fast path equals scapy byte for byte; tshark agrees."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from agent.observe.probes.packets import (
    ECN_CE,
    Flow,
    MalformedFrame,
    RoceTemplate,
    _parse_general,
    cnp_packet,
    icrc,
    icrc_ok,
    pack_icrc,
    parse_pfc,
    parse_roce,
    parse_roce_fields,
    pfc_frame,
    roce_icrc_ok,
    roce_packet,
    ud_to_gsi,
)

MAC_A, MAC_B = "02:00:00:00:00:01", "02:00:00:00:00:02"
IP_A, IP_B = "198.18.0.1", "198.18.0.3"


def flow(**changes: int) -> Flow:
    values = {"size": 64, "qpn": 0x1234, "sport": 50000, "dscp": 26, "flow_id": 7}
    values.update(changes)
    return Flow(MAC_A, MAC_B, IP_A, IP_B, **values)


@settings(max_examples=60, deadline=None)
@given(
    psn=st.integers(0, 0xFFFFFF),
    seq=st.integers(0, 2**64 - 1),
    sent_ns=st.integers(0, 2**64 - 1),
    size=st.integers(24, 1500),
    dscp=st.integers(0, 63),
    sport=st.integers(1, 0xFFFF),
    qpn=st.integers(0, 0xFFFFFF),
)
def test_fast_path_equals_scapy(
    psn: int, seq: int, sent_ns: int, size: int, dscp: int, sport: int, qpn: int
) -> None:
    f = flow(size=size, dscp=dscp, sport=sport, qpn=qpn)
    template = RoceTemplate(f)
    assert template.frame(psn, seq, sent_ns) == bytes(roce_packet(f, psn, seq, sent_ns))


@settings(max_examples=40, deadline=None)
@given(
    psn=st.integers(0, 0xFFFFFF),
    seq=st.integers(0, 2**64 - 1),
    size=st.integers(24, 1500),
    sport=st.integers(1, 0xFFFF),
)
def test_fast_path_equals_scapy_for_ud_packets_to_the_gsi_qp(
    psn: int, seq: int, size: int, sport: int
) -> None:
    """The frames the lab sends to a real RDMA stack (rxe) to prove it accepts our ICRC."""
    f = ud_to_gsi(flow(size=size, sport=sport))
    frame = RoceTemplate(f).frame(psn, seq, 5)
    assert frame == bytes(roce_packet(f, psn, seq, 5))
    parsed = Ether(frame)
    assert (parsed[BTH].opcode, parsed[BTH].dqpn, parsed[BTH].ackreq) == (0x64, 1, 0)
    # DETH: Q_Key 0x80010000 (the GSI's), then the source QP 1 (IBTA spec 9.3.4)
    assert frame[54:62] == bytes.fromhex("8001000000000001")
    assert icrc_ok(frame)


def test_template_reuse_does_not_leak_between_frames() -> None:
    template = RoceTemplate(flow())
    first = template.frame(1, 1, 10)
    template.frame(2, 2, 20)
    assert template.frame(1, 1, 10) == first


def test_scapy_accepts_our_icrc() -> None:
    frame = RoceTemplate(flow()).frame(42, 42, 1)
    parsed = Ether(frame)
    assert parsed[BTH].psn == 42 and parsed[BTH].dqpn == 0x1234
    assert parsed[BTH].icrc == int.from_bytes(frame[-4:], "big")  # scapy reads the raw field
    rebuilt = parsed.copy()
    rebuilt[BTH].icrc = None
    assert bytes(rebuilt) == frame


def test_ce_marking_keeps_icrc_valid_but_corruption_does_not() -> None:
    frame = bytearray(RoceTemplate(flow()).frame(3, 3, 3))
    frame[15] = (frame[15] & 0xFC) | ECN_CE  # a switch marks CE: TOS is masked out of the ICRC
    assert icrc_ok(bytes(frame))
    frame[-10] ^= 0xFF  # payload corruption is not
    assert not icrc_ok(bytes(frame))


def test_parse_roce_fields() -> None:
    frame = RoceTemplate(flow(dscp=26)).frame(0xABCDEF, 99, 123)
    view = parse_roce(frame)
    assert view is not None
    assert (view.src_ip, view.dst_ip, view.dscp, view.sport) == (IP_A, IP_B, 26, 50000)
    assert (view.opcode, view.qpn, view.psn, view.ackreq) == (0x04, 0x1234, 0xABCDEF, True)
    assert (view.flow_id, view.seq, view.sent_ns, view.icrc_valid) == (7, 99, 123, True)


def test_parse_cnp() -> None:
    frame = bytes(cnp_packet(MAC_B, MAC_A, IP_B, IP_A, 0x1234))
    view = parse_roce(frame)
    assert view is not None
    assert (view.opcode, view.becn, view.qpn, view.dscp, view.icrc_valid) == (
        0x81,
        True,
        0x1234,
        48,
        True,
    )
    assert view.seq is None


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        bytes(Ether() / IP(proto=6)),
        bytes(Ether(src=MAC_A, dst=MAC_B) / IP(src=IP_A, dst=IP_B) / (b"x" * 40))[:20],
    ],
)
def test_parse_roce_ignores_other_traffic(frame: bytes) -> None:
    assert parse_roce(frame) is None


def test_truncated_roce_is_malformed_not_a_crash() -> None:
    frame = RoceTemplate(flow()).frame(1, 1, 1)
    with pytest.raises(MalformedFrame):
        parse_roce(frame[:50])


# --- the fast path (one unpack of the fixed headers) against the general one ---

FAST_PATH_BASES = [
    RoceTemplate(flow(size=24)).frame(1, 1, 1),  # smallest probe payload
    RoceTemplate(flow(size=600)).frame(0xFFFFFF, 2**64 - 1, 7),
    RoceTemplate(flow(size=3000)).frame(5, 5, 5),  # long payload: ICRC read in place
    bytes(cnp_packet(MAC_B, MAC_A, IP_B, IP_A, 0x1234)),
]


def fields_both_ways(frame: bytes) -> tuple[object, object]:
    """(fast path, general path) of one frame: the fields, None, or the MalformedFrame text."""
    out = []
    for parse in (parse_roce_fields, _parse_general):
        try:
            fields = parse(frame)
        except MalformedFrame as exc:
            out.append(str(exc))
            continue
        if fields is None:
            out.append(None)
            continue
        icrc_valid = roce_icrc_ok(frame, fields)
        assert icrc_valid == icrc_ok(frame[: fields[9]])  # the masked copy scapy's ICRC uses
        out.append((*fields[:10], icrc_valid))
    return out[0], out[1]


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(FAST_PATH_BASES),
    changes=st.lists(st.tuples(st.integers(0, 3100), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 3100),
)
def test_fast_path_parses_like_the_general_path(
    base: bytes, changes: list[tuple[int, int]], cut: int
) -> None:
    """Bytes changed anywhere (header fields, lengths, the ICRC) and frames cut short: the one
    unpack of the fixed headers reads what the field-by-field path reads."""
    frame = bytearray(base)
    for position, value in changes:
        frame[position % len(frame)] = value
    data = bytes(frame[: len(frame) - cut % (len(frame) + 1)])
    fast, general = fields_both_ways(data)
    assert fast == general


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, "valid"),
        ({15: 0x03}, "valid"),  # CE mark: TOS is masked out of the ICRC
        ({22: 0x01}, "valid"),  # TTL, masked
        ({24: 0x12, 25: 0x34}, "valid"),  # IP checksum, masked
        ({40: 0xAB}, "valid"),  # UDP checksum, masked
        ({46: 0xC0}, "valid"),  # BTH FECN/BECN/resv6, masked
        ({20: 0x40}, "invalid"),  # IP flags: covered
        ({43: 0x01}, "invalid"),  # BTH flags byte: covered
        ({49: 0x01}, "invalid"),  # destination QP: covered
        ({53: 0x01}, "invalid"),  # PSN: covered
        ({60: 0x01}, "invalid"),  # payload: covered
        ({-1: 0x00}, "invalid"),  # the ICRC itself
    ],
)
def test_icrc_masks_exactly_the_variant_fields(change: dict[int, int], expected: str) -> None:
    frame = bytearray(RoceTemplate(flow()).frame(3, 3, 3))
    for position, value in change.items():
        frame[position] = value if frame[position] != value else value ^ 0xFF
    fields = parse_roce_fields(bytes(frame))
    assert fields is not None
    assert roce_icrc_ok(bytes(frame), fields) is (expected == "valid")
    assert icrc_ok(bytes(frame)) is (expected == "valid")  # scapy's masking, via the general path


def test_pfc_frame_has_all_eight_quanta() -> None:
    frame = pfc_frame(MAC_A, [None, None, None, 0xFFFF, None, None, None, None])
    assert len(frame) == 60
    assert frame[:6] == bytes.fromhex("0180c2000001")
    assert frame[12:16] == bytes.fromhex("88080101")
    assert frame[16:18] == bytes.fromhex("0008")
    assert len(frame[18:34]) == 16  # 8 quanta fields of 2 bytes (sonic-mgmt once wrote 7)
    view = parse_pfc(frame)
    assert view is not None
    assert view.enabled == 0b1000 and view.quanta[3] == 0xFFFF and view.paused(3)
    assert not view.paused(4)


def test_pfc_xon_is_quanta_zero() -> None:
    view = parse_pfc(pfc_frame(MAC_A, [None, None, None, 0, None, None, None, None]))
    assert view is not None and view.enabled == 0b1000 and not view.paused(3)


def test_icrc_helpers_agree() -> None:
    frame = RoceTemplate(flow()).frame(5, 5, 5)
    assert pack_icrc(icrc(frame)) == frame[-4:]


def test_tshark_dissects_our_pcap(tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("CI"):
            pytest.fail("tshark missing: make test installs it (scripts/ensure-system-deps.sh)")
        pytest.skip("tshark not installed (make test installs it)")
    template = RoceTemplate(flow())
    frames = [template.frame(psn, psn, 0) for psn in (100, 101, 102)]
    frames.append(bytes(cnp_packet(MAC_B, MAC_A, IP_B, IP_A, 0x1234)))
    frames.append(pfc_frame(MAC_A, [None, None, None, 0xFFFF, None, None, None, None]))
    pcap = tmp_path / "probe.pcap"
    wrpcap(str(pcap), [Ether(f) for f in frames])
    fields = [
        "frame.protocols",
        "ip.dsfield.dscp",
        "udp.dstport",
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.invariant.crc",
        "macc.cbfc.enbv",
        "macc.cbfc.pause_time.c3",
    ]
    done = subprocess.run(
        [tshark, "-r", str(pcap), "-T", "fields", "-E", "separator=|"]
        + [arg for field in fields for arg in ("-e", field)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    rows = [line.split("|") for line in done.stdout.strip().splitlines()]
    assert len(rows) == 5
    for row, psn, frame in zip(rows[:3], (100, 101, 102), frames, strict=False):
        assert "infiniband" in row[0]
        assert row[1:6] == ["26", "4791", "4", "0x001234", str(psn)]
        assert int(row[6], 16) == int.from_bytes(frame[-4:], "big")
    assert rows[3][3] == "129" and rows[3][4] == "0x001234"
    assert "macc" in rows[4][0] and int(rows[4][7], 16) == 0x8 and rows[4][8] == "65535"

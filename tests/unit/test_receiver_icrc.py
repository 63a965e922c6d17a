"""The live receiver checks the ICRC of every RoCEv2 data frame like a NIC does.

The ICRC (InfiniBand Architecture Specification, Annex A17 "RoCEv2") is a CRC-32 over a
pseudo-LRH of 8 bytes of 0xFF and the IP/UDP/BTH headers with the fields a router may change
masked to all 1s -- IP TOS (DSCP, ECN), TTL and header checksum, the UDP checksum and the
BTH's reserved byte -- then the payload; scapy.contrib.roce's ``BTH.compute_icrc`` masks the
same fields. So a switch that re-marks DSCP, marks CE or decrements TTL keeps it valid, while
one flipped bit anywhere else (a corrupting switch port: lab fault ``icrc_error``) breaks it:
the NIC drops the packet, which the transport then sees as lost, and counts it.

:func:`agent.observe.probes.receiver.run_receiver` is fed recorded frames through a stand-in for its
AF_PACKET socket (the lab test, tests/lab/test_paths_lab.py, corrupts frames on a real switch
port).
"""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest

from agent.observe.probes import receiver
from agent.observe.probes.packets import (
    BTH_OFFSET,
    ECN_CE,
    IP_OFFSET,
    PAYLOAD_OFFSET,
    UDP_OFFSET,
    Flow,
    RoceTemplate,
    icrc_ok,
)
from agent.observe.probes.ttl_probes import ipv4_checksum

FLOW = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.0.9", "198.18.0.13",
            qpn=0x101, size=64)  # fmt: skip
COUNT = 10
BAD = 4  # the frame (sequence number) the table's change is applied to


def _set(offset: int, value: int) -> Any:
    def change(frame: bytearray) -> None:
        frame[offset] = value

    return change


def _flip(offset: int) -> Any:
    def change(frame: bytearray) -> None:
        frame[offset] ^= 0x01

    return change


def _ttl(frame: bytearray) -> None:
    """A router's hop: TTL - 1, header checksum recomputed."""
    frame[IP_OFFSET + 8] -= 1
    frame[IP_OFFSET + 10 : IP_OFFSET + 12] = b"\x00\x00"
    struct.pack_into("!H", frame, IP_OFFSET + 10, ipv4_checksum(frame[IP_OFFSET : IP_OFFSET + 20]))


def _ce(frame: bytearray) -> None:
    frame[IP_OFFSET + 1] = (frame[IP_OFFSET + 1] & 0xFC) | ECN_CE


# change to frame BAD -> whether the ICRC still holds
CASES = [
    pytest.param(_ttl, True, id="ttl-decremented"),
    pytest.param(_ce, True, id="ce-marked"),
    pytest.param(_set(IP_OFFSET + 1, (0 << 2) | 2), True, id="dscp-remarked"),
    pytest.param(_set(UDP_OFFSET + 6, 0x12), True, id="udp-checksum"),
    pytest.param(_set(BTH_OFFSET + 4, 0x80), True, id="bth-resv8a"),
    pytest.param(_flip(BTH_OFFSET + 12), False, id="payload-first-byte"),  # lab icrc_error
    pytest.param(_flip(PAYLOAD_OFFSET + 30), False, id="payload-middle"),
    pytest.param(_flip(BTH_OFFSET + 11), False, id="bth-psn"),
    pytest.param(_flip(BTH_OFFSET + 7), False, id="bth-dest-qp"),
    pytest.param(_flip(IP_OFFSET + 4), False, id="ip-identification"),
    pytest.param(_flip(-1), False, id="icrc-field"),
]


def frames(change: Any) -> list[bytes]:
    template = RoceTemplate(FLOW)
    out = []
    for seq in range(COUNT):
        frame = bytearray(template.frame(seq, seq, 0))
        if seq == BAD:
            change(frame)
        out.append(bytes(frame))
    return out


class RecordedPort:
    """Stands in for the receiver's AF_PACKET socket: hands out frames, records sends."""

    def __init__(self, frames: list[bytes], readable_fd: int) -> None:
        self.frames = list(frames)
        self.sent: list[bytes] = []
        self.readable_fd = readable_fd  # what select() waits on

    def recv(self, size: int) -> bytes:
        if not self.frames:
            raise BlockingIOError
        return self.frames.pop(0)

    def recvmsg(self, size: int, ancillary: int) -> tuple[bytes, list[Any], int, None]:
        return self.recv(size), [], 0, None  # no kernel stamps: user space

    def setsockopt(self, *args: Any) -> None:
        raise OSError("SO_TIMESTAMPING not supported")

    def send(self, frame: bytes) -> int:
        self.sent.append(frame)
        return len(frame)

    def fileno(self) -> int:
        return self.readable_fd

    def close(self) -> None: ...


def run(
    monkeypatch: pytest.MonkeyPatch, recorded: list[bytes], **spec: Any
) -> tuple[dict[str, Any], list[bytes]]:
    read_end, write_end = os.pipe()
    os.write(write_end, b"x")  # always readable: select() wakes the loop at once
    port = RecordedPort(recorded, read_end)
    monkeypatch.setattr(receiver, "open_port", lambda ifname, bpf=None: port)
    monkeypatch.setattr(receiver, "interface_mac", lambda ifname: FLOW.dst_mac)
    spec.setdefault("expected", {f"{FLOW.src_ip}/{FLOW.qpn}": COUNT})
    try:
        result = receiver.run_receiver(
            receiver.ReceiveSpec(ifname="eth1", duration_s=0.3, link_speed_bps=10**7, **spec)
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    return result, port.sent


@pytest.mark.parametrize(("change", "valid"), CASES)
def test_receiver_drops_and_counts_exactly_the_frames_whose_icrc_is_broken(
    monkeypatch: pytest.MonkeyPatch, change: Any, valid: bool
) -> None:
    recorded = frames(change)
    assert icrc_ok(recorded[BAD]) is valid  # the reference (scapy's masking) agrees
    result, _ = run(monkeypatch, recorded)
    bad = 0 if valid else 1
    # A bit flipped in the destination QP makes the frame another QP's: its error is counted
    # there, the gap here.
    flow = next(f for f in result["flows"] if f["qpn"] == FLOW.qpn)
    assert (flow["received"], flow["lost"]) == (COUNT - bad, bad)
    assert result["totals"]["received"] == COUNT - bad
    assert result["totals"]["icrc_errors"] == bad
    assert result["totals"]["invalid"] == 0  # well-formed, only the CRC is wrong


def test_a_corrupted_ce_marked_frame_gets_no_cnp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A NIC drops a bad-ICRC packet before its congestion logic: no CNP for it."""

    def corrupt_marked(frame: bytearray) -> None:
        _ce(frame)
        frame[PAYLOAD_OFFSET + 30] ^= 0x01

    result, sent = run(monkeypatch, frames(corrupt_marked))
    assert sent == [] and result["cnps_sent"] == 0
    result, sent = run(monkeypatch, frames(_ce))
    assert len(sent) == 1 and result["cnps_sent"] == 1  # the same frame, intact: one CNP


def test_per_flow_rows_keep_each_flows_icrc_errors_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    other = Flow(FLOW.src_mac, FLOW.dst_mac, "198.18.0.11", FLOW.dst_ip, qpn=0x102, size=64)
    a, b = RoceTemplate(FLOW), RoceTemplate(other)
    recorded = []
    for seq in range(COUNT):
        for template, bad in ((a, seq in (2, 3, 7)), (b, False)):
            frame = bytearray(template.frame(seq, seq, 0))
            if bad:
                frame[-1] ^= 0xFF
            recorded.append(bytes(frame))
    result, _ = run(monkeypatch, recorded, expected=None, senders=(FLOW.src_ip, other.src_ip))
    rows = {(f["src_ip"], f["qpn"]): f for f in result["flows"]}
    assert rows[(FLOW.src_ip, 0x101)]["icrc_errors"] == 3
    assert rows[(FLOW.src_ip, 0x101)]["received"] == COUNT - 3
    assert rows[("198.18.0.11", 0x102)]["icrc_errors"] == 0
    assert rows[("198.18.0.11", 0x102)]["received"] == COUNT

"""Hostile and careless captures (issue #11): link types per packet, truncated and garbled
files, crafted traffic that used to exhaust memory. Every case either reads (with overflow
reported) or is a :class:`CaptureError` naming the file and the byte offset; none takes more
than bounded memory and time.

``python -m tests.unit.test_capture_hostile`` rewrites the stored corpus in
tests/data/bad/captures/ from the builders below.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.app.cli import main
from agent.app.probe import TABLE_MAX_FLOWS
from agent.observe.probes.analysis import analyze_frames
from agent.observe.probes.packets import (
    ICRC_LEN,
    PAYLOAD_OFFSET,
    Flow,
    RoceTemplate,
    icrc,
    pack_icrc,
    pfc_frame,
)
from agent.observe.probes.pcap import DEFAULT_MAX_BYTES, DEFAULT_MAX_FRAMES, Capture, CaptureError
from agent.observe.probes.receiver import ReceiveSpec
from tests.unit.bounded_cli import MEMORY_LIMIT, TIME_LIMIT_S, BoundedCli

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "bad" / "captures"
FLOW = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.0.1", "198.18.0.3", qpn=0x42, size=64)
SEQUENCE = [0, 1, 2, 4, 3, 5, 5, 8]  # 6, 7 lost; 3 late; 5 twice
EXPECTED = {"received": 7, "lost": 2, "reordered": 1, "duplicates": 1}

# --- writers (plain struct: the reader under test must not read what it wrote itself) ---


def pcap(records: Iterable[tuple[float, bytes]], linktype: int = 1) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype)]
    for at, data in records:
        sec, usec = int(at), round((at - int(at)) * 1e6)
        out.append(struct.pack("<IIII", sec, usec, len(data), len(data)) + data)
    return b"".join(out)


def block(kind: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    length = len(body) + 12
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


def pcapng(interfaces: list[int], packets: Iterable[tuple[int, float, bytes]]) -> bytes:
    """One section; ``packets`` are (interface index, time, data)."""
    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    out += [block(1, struct.pack("<HHI", linktype, 0, 262144)) for linktype in interfaces]
    for interface, at, data in packets:
        ticks = round(at * 1e6)
        header = struct.pack(
            "<IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)
        )
        out.append(block(6, header + data))
    return b"".join(out)


def frames() -> list[bytes]:
    template = RoceTemplate(FLOW)
    return [template.frame(seq, seq, 0) for seq in SEQUENCE]


def sll(frame: bytes) -> bytes:
    return struct.pack("!HHH", 0, 1, 6) + frame[6:12] + b"\x00\x00" + frame[12:]


def sll2(frame: bytes) -> bytes:
    return (
        frame[12:14]
        + b"\x00\x00"
        + struct.pack("!IHBB", 2, 1, 0, 6)
        + frame[6:12]
        + b"\x00\x00"
        + frame[14:]
    )


def raw_ip(frame: bytes) -> bytes:
    return frame[14:]


def vlan(frame: bytes, *tags: tuple[int, int]) -> bytes:
    header = b"".join(struct.pack("!HH", tpid, pcp << 13 | 10) for tpid, pcp in tags)
    return frame[:12] + header + frame[12:]


def psn_frame(template: RoceTemplate, psn: int) -> bytes:
    frame = bytearray(template.frame(psn, 0, 0))
    frame[PAYLOAD_OFFSET : PAYLOAD_OFFSET + 4] = b"ANY!"  # no probe payload: tracked on the PSN
    frame[-ICRC_LEN:] = pack_icrc(icrc(bytes(frame)))
    return bytes(frame)


def analyse(
    path: Path,
    max_flows: int = 65_536,
    max_frames: int | None = DEFAULT_MAX_FRAMES,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> dict:  # type: ignore[type-arg]
    capture = Capture(path, max_frames, max_bytes)
    result = analyze_frames(capture.frames_or_nothing(), 100_000_000, 0.2, max_flows)
    result["skipped"] = dict(capture.skipped)
    result["capped"] = capture.capped_by
    result["capture_warnings"] = capture.warnings()
    return result


def flow_counts(result: dict) -> dict[str, int]:  # type: ignore[type-arg]
    (flow,) = result["roce"]["flows"]
    return {name: flow[name] for name in EXPECTED}


# --- link types, per packet ---


@pytest.mark.parametrize(
    ("name", "linktype", "convert"),
    [
        ("ethernet", 1, lambda f: f),
        ("linux-sll", 113, sll),
        ("linux-sll2", 276, sll2),
        ("raw-ip", 101, raw_ip),
        ("raw-ipv4", 228, raw_ip),
    ],
)
def test_every_supported_link_type_gives_the_same_counts(
    tmp_path: Path, name: str, linktype: int, convert: Callable[[bytes], bytes]
) -> None:
    for kind, data in (
        ("pcap", pcap(((i * 0.001, convert(f)) for i, f in enumerate(frames())), linktype)),
        (
            "pcapng",
            pcapng([linktype], ((0, i * 0.001, convert(f)) for i, f in enumerate(frames()))),
        ),
    ):
        path = tmp_path / f"{name}.{kind}"
        path.write_bytes(data)
        assert flow_counts(analyse(path)) == EXPECTED, (name, kind)


def test_pcapng_link_type_is_taken_from_each_packets_interface(tmp_path: Path) -> None:
    """Interfaces 0 (802.11, unsupported), 1 (Ethernet) and 2 (SLL) in one file."""
    packets = []
    for i, frame in enumerate(frames()):
        interface = i % 2 + 1
        packets.append((interface, i * 0.001, frame if interface == 1 else sll(frame)))
        packets.append((0, i * 0.001, b"\x00" * 40))
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(pcapng([105, 1, 113], packets))
    result = analyse(path)
    assert flow_counts(result) == EXPECTED
    assert result["skipped"] == {105: len(frames())}


def test_tshark_reads_the_test_writers_files_the_same_way(tmp_path: Path) -> None:
    """The writers above are checked against an independent reader, not only ours."""
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("CI"):
            pytest.fail("tshark missing: make test installs it")
        pytest.skip("tshark not installed")
    fs = frames()
    path = tmp_path / "linktypes.pcapng"
    path.write_bytes(
        pcapng(
            [105, 276, 113, 228, 1],
            [(1, 0.0, sll2(fs[0])), (2, 0.001, sll(fs[1])), (3, 0.002, raw_ip(fs[2])),
             (4, 0.003, vlan(fs[3], (0x88A8, 1), (0x8100, 3))), (0, 0.004, bytes(40))],
        )
    )  # fmt: skip
    dissected = subprocess.run(
        [tshark, "-r", str(path), "-T", "fields", "-E", "separator=,", "-e", "frame.interface_id",
         "-e", "infiniband.bth.psn", "-e", "ip.src", "-e", "vlan.priority"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert dissected == [
        "1,0,198.18.0.1,",
        "2,1,198.18.0.1,",
        "3,2,198.18.0.1,",
        "4,4,198.18.0.1,3",
        "0,,,",
    ]
    ours = [(at, frame) for at, frame in Capture(path).frames_iter()]
    assert len(ours) == 4 and all(frame[12:14] in (b"\x08\x00", b"\x88\xa8") for _, frame in ours)


def test_pcapng_time_resolution_option_is_honoured(tmp_path: Path) -> None:
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    option = struct.pack("<HHB", 9, 1, 9) + bytes(3) + bytes(4)  # if_tsresol = 10^-9, end
    idb = block(1, struct.pack("<HHI", 1, 0, 0) + option)
    frame = frames()[0]
    ticks = 5_123_456_789
    epb = block(
        6, struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, len(frame), len(frame)) + frame
    )
    path = tmp_path / "ns.pcapng"
    path.write_bytes(shb + idb + epb)
    ((at, _),) = list(Capture(path).frames_iter())
    assert at == pytest.approx(5.123456789)


def test_vlan_tagged_roce_in_a_capture(tmp_path: Path) -> None:
    records = [(i * 0.001, vlan(f, (0x88A8, 0), (0x8100, 3))) for i, f in enumerate(frames())]
    records.append((0.1, pfc_frame(FLOW.src_mac, [None, None, None, 100, None, None, None, None])))
    path = tmp_path / "qinq.pcap"
    path.write_bytes(pcap(records))
    result = analyse(path)
    assert flow_counts(result) == EXPECTED
    assert result["roce"]["flows"][0]["pcp"] == 3
    assert result["pfc"]["priorities"]["3"]["xoff"] == 1


# --- the CLI on bad files: exit 2, file and byte offset ---


def good_pcap() -> bytes:
    return pcap((i * 0.001, f) for i, f in enumerate(frames()))


def good_pcapng() -> bytes:
    return pcapng([1], ((0, i * 0.001, f) for i, f in enumerate(frames())))


def many_qps(count: int) -> bytes:
    template = bytearray(frames()[0])
    records = []
    for qpn in range(count):
        frame = bytearray(template)
        frame[PAYLOAD_OFFSET - 7 : PAYLOAD_OFFSET - 4] = qpn.to_bytes(3, "big")
        frame[-ICRC_LEN:] = pack_icrc(icrc(bytes(frame)))
        records.append((0.0, bytes(frame)))
    return pcap(records)


def psn_jumps() -> bytes:
    template = RoceTemplate(FLOW)
    return pcap((i * 0.001, psn_frame(template, (i << 20) % (1 << 24))) for i in range(40))


def alternating_psns(count: int) -> bytes:
    """Every other PSN missing: as many gaps as packets."""
    template = RoceTemplate(FLOW)
    return pcap((0.0, psn_frame(template, (2 * i) % (1 << 24))) for i in range(count))


def huge_block_length() -> bytes:
    data = bytearray(good_pcapng())
    data[28 + 20 + 4 : 28 + 20 + 8] = struct.pack("<I", 0x7FFFFFFC)  # first EPB's length
    return bytes(data)


def huge_pcap_record() -> bytes:
    data = bytearray(good_pcap())
    data[24 + 8 : 24 + 12] = struct.pack("<I", 0xFFFFFFF0)
    return bytes(data)


def bad_interface() -> bytes:
    return pcapng([1], [(3, 0.0, frames()[0])])


# name → (bytes, exit code, text the message must hold)
CASES: dict[str, tuple[Callable[[], bytes], int, str]] = {
    "empty.pcap": (lambda: b"", 2, "byte 0: not a pcap/pcapng capture"),
    "text.pcap": (lambda: b"hello, this is not a capture\n", 2, "byte 0: not a pcap/pcapng"),
    "truncated-header.pcap": (lambda: good_pcap()[:20], 2, "byte 4: truncated pcap file header"),
    "truncated-record.pcap": (lambda: good_pcap()[:-7], 2, "truncated pcap packet"),
    "truncated-record-header.pcap": (
        lambda: good_pcap() + b"\x00" * 5,
        2,
        "truncated pcap record header",
    ),
    "huge-record.pcap": (huge_pcap_record, 2, "byte 32: garbled pcap record"),
    "truncated.pcapng": (lambda: good_pcapng()[:-9], 2, "truncated pcapng block"),
    "huge-block.pcapng": (huge_block_length, 2, "byte 52: garbled pcapng block"),
    "bad-tail-length.pcapng": (
        lambda: good_pcapng()[:-4] + b"\x00\x00\x00\x00",
        2,
        "trailing length",
    ),
    "bad-byte-order.pcapng": (
        lambda: good_pcapng()[:8] + b"XXXX" + good_pcapng()[12:],
        2,
        "byte 8: garbled pcapng",
    ),
    "undeclared-interface.pcapng": (bad_interface, 2, "Expected: interface < 1"),
    "wifi-only.pcapng": (lambda: pcapng([105], [(0, 0.0, b"\x00" * 60)]), 2, "link type 105"),
    "wifi-only.pcap": (lambda: pcap([(0.0, b"\x00" * 60)], 105), 2, "link type 105"),
    # valid but hostile: read, with the overflow reported
    "psn-jumps.pcap": (psn_jumps, 0, ""),
    "many-qps.pcap": (lambda: many_qps(3000), 0, "flow cap reached"),
    "alternating-psns.pcap": (lambda: alternating_psns(3000), 0, "missing-PSN bookkeeping full"),
    "vlan-qinq.pcap": (
        lambda: pcap(
            (i * 0.001, vlan(f, (0x88A8, 1), (0x8100, 3))) for i, f in enumerate(frames())
        ),
        0,
        "",
    ),
    "mixed-linktypes.pcapng": (
        lambda: pcapng([105, 1], [(0, 0.0, b"\x00" * 60), (1, 0.0, frames()[0])]),
        0,
        "skipped 1 packet(s) of link type 105",
    ),
    "header-only.pcap": (lambda: good_pcap()[:24], 0, ""),
}
MAX_FLOWS_IN_CORPUS = 1000  # many-qps.pcap has 3000


def write_corpus(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, (build, _, _) in CASES.items():
        (directory / name).write_bytes(build())


def test_the_stored_corpus_is_the_one_the_builders_make() -> None:
    stored = {p.name for p in CORPUS.iterdir() if p.suffix in (".pcap", ".pcapng")}
    assert stored == set(CASES), "run: python -m tests.unit.test_capture_hostile"
    for name, (build, _, _) in CASES.items():
        assert (CORPUS / name).read_bytes() == build(), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_in_a_subprocess_within_2_gib_and_30_s(name: str, bounded_cli: BoundedCli) -> None:
    _, code, text = CASES[name]
    path = CORPUS / name
    run = bounded_cli.run(
        "probe", "analyze", str(path), "--output", "json",
        "--max-flows", str(MAX_FLOWS_IN_CORPUS), env={"COLUMNS": "200"},
    )  # fmt: skip
    assert run.code is not None and run.seconds < TIME_LIMIT_S
    assert run.max_rss_kb * 1024 < MEMORY_LIMIT
    assert run.code == code, run.stderr
    assert "Traceback" not in run.stderr
    if code == 2:
        assert f"error: {path}" in run.stderr and text in run.stderr, run.stderr
        assert run.stdout == ""
        return
    assert text in run.stderr, run.stderr
    result = json.loads(run.stdout)
    if name == "many-qps.pcap":
        assert len(result["roce"]["flows"]) == MAX_FLOWS_IN_CORPUS
        assert result["roce"]["totals"]["untracked_frames"] == 3000 - MAX_FLOWS_IN_CORPUS
        assert result["roce"]["flows_overflow"] is True
    if name == "psn-jumps.pcap":
        assert result["roce"]["totals"]["lost"] == 39 * ((1 << 20) - 1)
    if name == "alternating-psns.pcap":
        assert result["roce"]["totals"]["lost"] == 2999
        assert result["roce"]["totals"]["missing_overflow"] > 0
    if name == "vlan-qinq.pcap":
        (flow,) = result["roce"]["flows"]
        assert {k: flow[k] for k in EXPECTED} == EXPECTED and flow["pcp"] == 3


def test_table_output_shows_overflow_and_skips(tmp_path: Path) -> None:
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(CASES["mixed-linktypes.pcapng"][0]())
    result = CliRunner().invoke(main, ["probe", "analyze", str(path)])
    assert result.exit_code == 0, result.output
    assert "skipped packets: 1" in result.stdout
    assert "warning:" in result.stderr and "link type 105" in result.stderr


@pytest.mark.parametrize(
    ("kind", "message"), [("fifo", "not a regular file"), ("directory", "is a directory")]
)
def test_special_files_are_refused_without_blocking(
    tmp_path: Path, kind: str, message: str
) -> None:
    path = tmp_path / "capture.pcap"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block until a writer comes
    else:
        path.mkdir()
    started = time.monotonic()
    result = CliRunner().invoke(main, ["probe", "analyze", str(path)])
    assert result.exit_code == 2 and message in result.stderr
    assert time.monotonic() - started < 5


def test_escape_sequences_in_a_file_name_are_shown_not_obeyed(tmp_path: Path) -> None:
    path = tmp_path / "\x1b[31mred.pcapng"
    path.write_bytes(CASES["mixed-linktypes.pcapng"][0]())
    result = CliRunner().invoke(main, ["probe", "analyze", str(path)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b[31mred" in result.stderr


def test_table_output_shows_the_worst_flows_when_there_are_too_many(tmp_path: Path) -> None:
    path = tmp_path / "qps.pcap"
    path.write_bytes(many_qps(TABLE_MAX_FLOWS + 200))
    result = CliRunner().invoke(main, ["probe", "analyze", str(path)])
    assert result.exit_code == 0, result.output
    assert "200 more flows not shown" in result.stdout


@pytest.mark.parametrize(
    ("spec", "sources"),
    [
        ({}, None),
        ({"senders": ("198.18.0.1",)}, {"198.18.0.1"}),
        (
            {"expected": {"198.18.0.1/0x100": 5, "198.18.0.5/0x100": 5}},
            {"198.18.0.1", "198.18.0.5"},
        ),
        ({"senders": ("198.18.0.9",), "expected": {"198.18.0.1/0x100": 5}}, {"198.18.0.9"}),
    ],
)
def test_receiver_sources(spec: dict, sources: set[str] | None) -> None:  # type: ignore[type-arg]
    assert ReceiveSpec("eth1", 1.0, 10_000_000, **spec).sources() == sources


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sender", "198.18.0"], "senders: '198.18.0' is not an IPv4 address"),
        (["--max-flows", "0"], "--max-flows"),
    ],
)
def test_receive_rejects_bad_bounds(args: list[str], message: str) -> None:
    result = CliRunner().invoke(
        main, ["probe", "receive", "--interface", "eth-none", "--duration", "1s",
               "--link-speed", "10M", *args],
    )  # fmt: skip
    assert result.exit_code == 2
    assert message in result.output


# --- the frame cap: any capture is read in bounded time ---


def analysed_frames(result: dict) -> int:  # type: ignore[type-arg]
    flows = result["roce"]["flows"]
    return sum(f["received"] + f["duplicates"] for f in flows)


FRAME_BYTES = len(frames()[0])  # every frame of good_pcap() is this long
FRAMES = len(SEQUENCE)
# Issue #42: pcapng blocks that are not packets count against the byte cap too. Those of
# good_pcapng() before its packets: the section header's body (16 bytes) and one interface
# description's (8).
HEAD = {"pcap": (0, ""), "pcapng": (16 + 8, " and 2 other pcapng blocks")}


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
@pytest.mark.parametrize(
    ("max_frames", "max_bytes", "capped", "analysed", "warning"),
    [
        (FRAMES - 1, None, "frames", FRAMES - 1, "frame cap reached: the first 7 frames were "
         "analysed, the rest of the capture was not read (raise --max-frames)"),
        (FRAMES, None, None, FRAMES, None),  # exactly at the cap: nothing was left unread
        (FRAMES + 1, None, None, FRAMES, None),
        (None, None, None, FRAMES, None),  # no cap
        (1, None, "frames", 1, "the first 1 frames were analysed"),
        (None, FRAMES * FRAME_BYTES - 1, "bytes", FRAMES - 1, "byte cap reached: the first 7 "
         f"frames{{blocks}} ({{{7 * FRAME_BYTES}}} of at most {{{FRAMES * FRAME_BYTES - 1}}} "
         "captured bytes) were analysed, the rest of the capture was not read (raise "
         "--max-bytes)"),
        (None, FRAMES * FRAME_BYTES, None, FRAMES, None),  # exactly at the byte cap
        (None, FRAME_BYTES, "bytes", 1, "byte cap reached: the first 1 frames"),
        (None, FRAME_BYTES - 1, "bytes", 0, "byte cap reached: the first 0 frames"),
        (3, 3 * FRAME_BYTES, "frames", 3, "frame cap reached"),  # both at once: frames named
        (4, 3 * FRAME_BYTES, "bytes", 3, "byte cap reached"),
    ],
)  # fmt: skip
def test_frame_and_byte_caps(
    tmp_path: Path,
    kind: str,
    max_frames: int | None,
    max_bytes: int | None,
    capped: str | None,
    analysed: int,
    warning: str | None,
) -> None:
    path = tmp_path / f"capture.{kind}"
    path.write_bytes(good_pcap() if kind == "pcap" else good_pcapng())
    # The same frames fit: the cap has room for the blocks before them too.
    head_bytes, blocks = HEAD[kind]
    max_bytes = None if max_bytes is None else max_bytes + head_bytes
    result = analyse(path, max_frames=max_frames, max_bytes=max_bytes)
    assert (result["capped"], analysed_frames(result)) == (capped, analysed)
    lines = [w for w in result["capture_warnings"] if " cap reached: " in w]
    if warning is None:
        assert lines == []
    else:
        (line,) = lines
        # {N}: a byte count, which grows by the blocks' bytes in a pcapng file.
        warning = re.sub(r"\{(\d+)\}", lambda m: str(int(m[1]) + head_bytes), warning)
        warning = warning.replace("{blocks}", blocks)
        assert line.startswith(f"{path}: ") and warning in line, line


def test_frames_past_the_cap_are_never_read(tmp_path: Path) -> None:
    """Garbage after the frames past the cap: read whole, the file is broken; capped, the
    garbage is never reached."""
    path = tmp_path / "garbage-tail.pcap"
    path.write_bytes(good_pcap() + b"\xff" * 40)
    with pytest.raises(CaptureError, match="garbled pcap record"):
        analyse(path, max_frames=None)
    result = analyse(path, max_frames=len(SEQUENCE) - 1)
    assert result["capped"] and analysed_frames(result) == len(SEQUENCE) - 1


def test_skipped_packets_count_towards_the_cap(tmp_path: Path) -> None:
    """Reading a packet of a link type we skip costs time too: a flood of them is capped."""
    path = tmp_path / "wifi-flood.pcapng"
    path.write_bytes(
        pcapng([105, 1], [(0, 0.0, b"\x00" * 60)] * 5 + [(1, 0.0, f) for f in frames()])
    )
    capture = Capture(path, max_frames=5)
    with pytest.raises(
        CaptureError, match=r"link type 105 \(only the first ones read: raise --max-frames\)"
    ):
        list(capture.frames_or_nothing())
    assert (capture.capped, capture.packets, capture.frames) == (True, 5, 0)
    result = analyse(path, max_frames=6)
    assert result["capped"] and analysed_frames(result) == 1


@pytest.mark.parametrize(
    ("caps", "message"),
    [
        ({"max_frames": 0}, "max_frames must be at least 1, got 0"),
        ({"max_frames": -1}, "max_frames must be at least 1, got -1"),
        ({"max_bytes": 0}, "max_bytes must be at least 1, got 0"),
    ],
)
def test_caps_must_be_positive(tmp_path: Path, caps: dict[str, int], message: str) -> None:
    path = tmp_path / "capture.pcap"
    path.write_bytes(good_pcap())
    with pytest.raises(ValueError, match=message):
        Capture(path, **caps)


def test_a_file_past_the_default_cap_through_the_cli(
    tmp_path: Path, bounded_cli: BoundedCli
) -> None:
    """DEFAULT_MAX_FRAMES + 1 frames (1 000 QPs, each seen 1 000 times): the default cap
    stops the CLI at DEFAULT_MAX_FRAMES, within the issue's 2 GiB and 30 s."""
    records = many_qps(1000)[24:]  # 1 000 records after the file header
    repeats, extra = divmod(DEFAULT_MAX_FRAMES + 1, 1000)
    path = tmp_path / "past-the-cap.pcap"
    with path.open("wb") as out:
        out.write(many_qps(1)[:24])
        for _ in range(repeats):
            out.write(records)
        out.write(many_qps(extra)[24:])
    run = bounded_cli.run("probe", "analyze", str(path), "--output", "json")
    assert run.code == 0, run.stderr
    assert run.seconds < TIME_LIMIT_S and run.max_rss_kb * 1024 < MEMORY_LIMIT
    assert f"warning: {path}: frame cap reached: the first {DEFAULT_MAX_FRAMES} frames" in (
        run.stderr
    )
    result = json.loads(run.stdout)
    assert analysed_frames(result) == DEFAULT_MAX_FRAMES
    assert len(result["roce"]["flows"]) == 1000
    assert (result["frames_capped"], result["capped_by"]) == (True, "frames")


@pytest.mark.parametrize(
    ("options", "capped_by", "frames"),
    [
        ([], None, 40),
        (["--max-frames", "40"], None, 40),
        (["--max-frames", "39"], "frames", 39),
        (["--max-bytes", "10"], "bytes", 0),  # not even the first packet fits
    ],
)
def test_cli_caps_are_options_and_reported_in_json(
    tmp_path: Path, options: list[str], capped_by: str | None, frames: int
) -> None:
    path = tmp_path / "forty.pcap"
    path.write_bytes(many_qps(40))
    result = CliRunner().invoke(main, ["probe", "analyze", str(path), "--output", "json", *options])
    # Even a cap that stops before the first packet is an acceptance: exit 0, said in a warning.
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["frames_capped"], report["capped_by"]) == (capped_by is not None, capped_by)
    assert analysed_frames(report) == frames


# --- property tests: mutated captures ---

BASE_PCAP = good_pcap()
BASE_PCAPNG = good_pcapng()
MEMORY_BOUND = 20_000_000
TIME_BOUND_S = 5.0


def bounded(tmp: Path, data: bytes) -> dict | None:  # type: ignore[type-arg]
    """Analyse ``data``; only CaptureError may come out; memory and time stay bounded."""
    path = tmp / "mutated.cap"
    path.write_bytes(data)
    started = time.monotonic()
    tracemalloc.start()
    try:
        try:
            return analyse(path, max_flows=64)
        except CaptureError as exc:
            assert str(path) in str(exc)
            return None
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            assert peak < MEMORY_BOUND, peak
            assert time.monotonic() - started < TIME_BOUND_S
    finally:
        tracemalloc.stop()


PROPERTY = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(
    base=st.sampled_from([BASE_PCAP, BASE_PCAPNG]),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=8),
)
def test_byte_flips(tmp_path: Path, base: bytes, flips: list[tuple[int, int]]) -> None:
    data = bytearray(base)
    for position, mask in flips:
        data[position % len(data)] ^= mask
    bounded(tmp_path, bytes(data))


@PROPERTY
@given(base=st.sampled_from([BASE_PCAP, BASE_PCAPNG]), cut=st.integers(0, 2_000))
def test_truncation_is_a_located_error_or_a_clean_prefix(
    tmp_path: Path, base: bytes, cut: int
) -> None:
    cut %= len(base) + 1
    bounded(tmp_path, base[:cut])
    path = tmp_path / "mutated.cap"
    try:
        list(Capture(path).frames_iter())
    except CaptureError as exc:
        assert exc.offset is not None and 0 <= exc.offset <= cut


@PROPERTY
@given(
    jumps=st.lists(st.integers(0, (1 << 24) - 1), min_size=1, max_size=60),
    qpns=st.lists(st.integers(0, (1 << 24) - 1), min_size=1, max_size=200),
)
def test_psn_jumps_and_random_qpns(tmp_path: Path, jumps: list[int], qpns: list[int]) -> None:
    template = RoceTemplate(FLOW)
    records = [(0.0, psn_frame(template, psn)) for psn in jumps]
    base = bytearray(frames()[0])
    for qpn in qpns:
        frame = bytearray(base)
        frame[PAYLOAD_OFFSET - 7 : PAYLOAD_OFFSET - 4] = qpn.to_bytes(3, "big")
        frame[-ICRC_LEN:] = pack_icrc(icrc(bytes(frame)))
        records.append((0.0, bytes(frame)))
    result = bounded(tmp_path, pcap(records))
    assert result is not None
    roce = result["roce"]
    assert len(roce["flows"]) <= 64
    tracked = sum(f["received"] + f["duplicates"] for f in roce["flows"])
    assert tracked + roce["totals"]["untracked_frames"] == len(records)


if __name__ == "__main__":
    write_corpus(CORPUS)
    print(f"wrote {len(CASES)} captures to {CORPUS}")

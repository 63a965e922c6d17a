"""``roce-agent probe analyze`` on crafted captures gives exact counts (pcap and pcapng)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from agent.app.cli import main
from agent.observe.probes.packets import ECN_CE, Flow, RoceTemplate, cnp_packet, pfc_frame

A = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.0.1", "198.18.0.3", qpn=0x11, size=64)
B = Flow("02:00:00:00:00:05", "02:00:00:00:00:02", "198.18.0.5", "198.18.0.3", qpn=0x22, size=64)


def crafted(path: Path) -> None:
    a, b = RoceTemplate(A), RoceTemplate(B)
    frames: list[bytes] = []
    frames += [a.frame(i, i, 0) for i in (0, 1, 2, 4, 3, 5, 5, 8)]  # 6, 7 lost; 3 late; 5 twice
    marked = bytearray(b.frame(0, 0, 0))
    marked[15] = (marked[15] & 0xFC) | ECN_CE
    frames += [bytes(marked), b.frame(1, 1, 0)]
    corrupt = bytearray(b.frame(2, 2, 0))
    corrupt[-5] ^= 0x40
    frames.append(bytes(corrupt))  # bad ICRC: counted, not trusted (so 2 is "lost")
    frames.append(b.frame(3, 3, 0))
    frames.append(bytes(cnp_packet(B.dst_mac, B.src_mac, B.dst_ip, B.src_ip, 0x22)))
    frames.append(a.frame(9, 9, 0)[:50])  # truncated: invalid
    quanta: list[int | None] = [None] * 8
    quanta[3] = 10_000  # 51.2 ms at 100 Mb/s
    frames.append(pfc_frame(A.src_mac, quanta))
    quanta[3] = 0
    frames.append(pfc_frame(A.src_mac, quanta))  # XON 20 ms later
    packets = [Ether(f) for f in frames]
    for i, packet in enumerate(packets):
        packet.time = 100.0 + i * 0.001
    packets[-1].time = packets[-2].time + 0.020
    wrpcap(str(path), packets)


def analyze(path: Path) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(
        main, ["probe", "analyze", str(path), "--link-speed", "100M", "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def check(result: dict) -> None:  # type: ignore[type-arg]
    flows = {f["qpn"]: f for f in result["roce"]["flows"] if f["src_ip"] != "198.18.0.3"}
    a, b = flows[0x11], flows[0x22]
    assert (a["received"], a["lost"], a["reordered"], a["duplicates"]) == (7, 2, 1, 1)
    assert (b["received"], b["lost"], b["ce_marked"], b["icrc_errors"]) == (3, 1, 1, 1)
    cnp = next(f for f in result["roce"]["flows"] if f["src_ip"] == "198.18.0.3")
    assert cnp["cnps"] == 1
    assert result["roce"]["totals"]["invalid"] == 1
    pause = result["pfc"]["priorities"]["3"]
    assert (pause["frames"], pause["xoff"], pause["xon"]) == (2, 1, 1)
    assert pause["paused_s"] == pytest.approx(0.020)
    assert result["pfc"]["priorities"]["0"]["frames"] == 0


def test_analyze_pcap_exact_counts(tmp_path: Path) -> None:
    capture = tmp_path / "crafted.pcap"
    crafted(capture)
    check(analyze(capture))


def test_analyze_pcapng(tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    if tshark is None:
        if os.environ.get("CI"):
            pytest.fail("tshark missing: make test installs it")
        pytest.skip("tshark not installed")
    capture, converted = tmp_path / "crafted.pcap", tmp_path / "crafted.pcapng"
    crafted(capture)
    subprocess.run(
        [tshark, "-r", str(capture), "-F", "pcapng", "-w", str(converted)],
        check=True,
        capture_output=True,
    )
    check(analyze(converted))


def test_analyze_rejects_non_captures(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not a capture")
    result = CliRunner().invoke(main, ["probe", "analyze", str(bogus)])
    assert result.exit_code == 2
    assert "not a pcap" in result.stderr
    missing = CliRunner().invoke(main, ["probe", "analyze", str(tmp_path / "none.pcap")])
    assert missing.exit_code == 2 and "no such capture" in missing.stderr

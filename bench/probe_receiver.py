"""Receiver analysis rate versus scapy.sniff(prn=...) on the same traffic, in one run.

Both read the same capture of RoCEv2 traffic (with losses, reorders, duplicates and CE marks
built in) and must report identical per-QP loss and CE counts; the script prints frames/s of
each and the ratio. Goal (issue #6): >= 20x.

It then times ``probe analyze``'s engine (capture reader and offline analysis, as the CLI runs
them) on a capture of ``--file-frames`` frames of the same traffic (issue #11: a capture of
the default frame cap must be analysed well inside 30 s); 0 skips it.

    python bench/probe_receiver.py [--frames 60000] [--file-frames 1000000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scapy.all import sniff
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.utils import RawPcapWriter

from agent.observe.probes.analysis import RoceAnalyzer, analyze_frames
from agent.observe.probes.packets import ECN_CE, Flow, RoceTemplate
from agent.observe.probes.pcap import Capture, read_frames

FLOWS = 8


def build_capture(path: Path, frames: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    templates = [
        RoceTemplate(
            Flow("02:00:00:00:00:01", "02:00:00:00:00:02", f"198.18.0.{2 * i + 1}",
                 "198.18.1.1", qpn=0x100 + i, sport=49152 + i, size=512)
        )
        for i in range(FLOWS)
    ]  # fmt: skip
    sequence = [0] * FLOWS
    writer = RawPcapWriter(str(path), linktype=1)
    written = 0
    while written < frames:
        flow = rng.randrange(FLOWS)
        seq = sequence[flow]
        sequence[flow] += 1
        roll = rng.random()
        if roll < 0.01:
            continue  # lost
        frame = bytearray(templates[flow].frame(seq, seq, 0))
        if roll < 0.2:
            frame[15] = (frame[15] & 0xFC) | ECN_CE
        writer.write(bytes(frame))
        written += 1
        if roll > 0.995:
            writer.write(bytes(frame))  # duplicate
            written += 1
    writer.close()


class ScapyCounter:
    """The same per-QP accounting done the scapy way: a dissected packet per callback."""

    def __init__(self) -> None:
        self.highest: dict[tuple[str, int], int] = {}
        self.seen: dict[tuple[str, int], set[int]] = {}
        self.ce: dict[tuple[str, int], int] = {}

    def __call__(self, packet: Any) -> None:
        if BTH not in packet:
            return
        key = (packet[IP].src, packet[BTH].dqpn)
        seq = int.from_bytes(bytes(packet[BTH].payload)[8:16], "big")
        self.seen.setdefault(key, set()).add(seq)
        self.highest[key] = max(self.highest.get(key, -1), seq)
        if packet[IP].tos & 0b11 == ECN_CE:
            self.ce[key] = self.ce.get(key, 0) + 1

    def lost(self) -> dict[tuple[str, int], int]:
        return {k: self.highest[k] + 1 - len(v) for k, v in self.seen.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60_000)
    parser.add_argument("--file-frames", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "traffic.pcap"
        build_capture(capture, args.frames)

        start = time.perf_counter()
        ours = RoceAnalyzer()
        count = 0
        for _, frame in read_frames(capture):
            ours.feed(frame)
            count += 1
        ours_s = time.perf_counter() - start

        start = time.perf_counter()
        counter = ScapyCounter()
        sniff(offline=str(capture), prn=counter, store=False)
        scapy_s = time.perf_counter() - start

    our_lost = {(f[0], f[2]): s.total_lost() for f, s in ours.flows.items()}
    our_ce = {(f[0], f[2]): s.ce_marked for f, s in ours.flows.items()}
    identical = our_lost == counter.lost() and our_ce == counter.ce
    ours_rate, scapy_rate = count / ours_s, count / scapy_s
    print(f"frames analysed            {count}")
    print(f"agent receiver engine      {ours_rate:12,.0f} frames/s")
    print(f"scapy sniff(prn=...)       {scapy_rate:12,.0f} frames/s")
    print(f"ratio                      {ours_rate / scapy_rate:12.1f}x   (goal >= 20x)")
    print(f"lost   (agent / scapy)     {sum(our_lost.values())} / {sum(counter.lost().values())}")
    print(f"CE     (agent / scapy)     {sum(our_ce.values())} / {sum(counter.ce.values())}")
    print(f"identical counts           {identical}")
    _ = Ether
    if args.file_frames > 0 and not file_path(args.file_frames):
        return 1
    return 0 if identical else 1


def file_path(frames: int) -> bool:
    """``probe analyze``'s engine on one capture file; False if it did not read every frame."""
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "traffic.pcap"
        build_capture(capture, frames)
        source = Capture(capture, max_frames=None, max_bytes=None)
        start = time.perf_counter()
        result = analyze_frames(source.frames_or_nothing(), 100_000_000_000)
        seconds = time.perf_counter() - start
    analysed: int = sum(f["received"] + f["duplicates"] for f in result["roce"]["flows"])
    print(f"probe analyze engine       {frames / seconds:12,.0f} frames/s   "
          f"({frames:,} frames from a file in {seconds:.1f} s)")  # fmt: skip
    return analysed == source.frames == frames


if __name__ == "__main__":
    sys.exit(main())

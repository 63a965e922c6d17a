"""A pause-honouring traffic source: ``python -m tests.lab.support.pfc_sender --ifname ...``.

Plain Linux hosts ignore PFC (there is no DCB on veth), so to get a truly lossless incast the
sender must behave like a RoCE NIC: pace at its line rate and stop a priority while a received
PFC frame says so. A tiny separate process per sender host does exactly that on a raw socket;
it shares no code with the switch, so the tests check the switch against an independent
implementation. It prints one JSON line: what it sent and the pauses it honoured.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from tests.lab.support.frames import open_packet_socket, parse_pfc


@dataclass
class Pauses:
    """What the PFC frames received so far say about one priority: paused until when (in
    ``time.monotonic()`` seconds), and the totals reported at the end."""

    speed_bps: float
    pause_class: int
    xoff_rx: int = 0
    xon_rx: int = 0
    max_quanta: int = 0
    paused_s: float = 0.0
    paused_until: float = 0.0
    began: float | None = None

    def honour(self, frame: bytes, now: float) -> None:
        """An XOFF pauses for its quanta x 512 bit times from ``now``; an XON resumes."""
        parsed = parse_pfc(frame)
        if parsed is None or not (parsed[0] >> self.pause_class) & 1:
            return
        quanta = parsed[1][self.pause_class]
        if quanta:
            self.xoff_rx += 1
            self.max_quanta = max(self.max_quanta, quanta)
            if self.began is None:
                self.began = now
            self.paused_until = now + quanta * 512 / self.speed_bps
        else:
            self.xon_rx += 1
            self.paused_until = 0.0

    def account(self, now: float) -> None:
        """Add a pause that has ended to ``paused_s``."""
        if self.began is not None and now >= self.paused_until:
            self.paused_s += now - self.began
            self.began = None

    def totals(self) -> dict[str, Any]:
        return {
            "xoff_rx": self.xoff_rx,
            "xon_rx": self.xon_rx,
            "paused_s": self.paused_s,
            "max_quanta": self.max_quanta,
        }


def _honour_waiting_frames(sock: socket.socket, pauses: Pauses, now: float) -> None:
    while True:
        try:
            rx = sock.recv(2048)
        except BlockingIOError:
            return
        pauses.honour(rx, now)


def _sleep_until_epoch(start_at: float) -> None:
    while time.time() < start_at:
        time.sleep(min(0.01, max(0.0, start_at - time.time())))


def _wait_on(sock: socket.socket, until: float, now: float) -> None:
    """Sleep until ``until``, or until a frame (a PFC frame, maybe) arrives."""
    select.select([sock], [], [], until - now)


def run_pfc_sender(
    ifname: str,
    frame_template: bytes,
    count: int,
    speed_bps: float,
    pause_class: int,
    start_at: float,
    drain_s: float,
) -> dict[str, Any]:
    """Send ``count`` frames paced at ``speed_bps``, honouring PFC for ``pause_class``.

    Bytes 42..45 of each frame carry its sequence number (the UDP checksum is zeroed --
    "no checksum" is legal for UDP over IPv4 -- since the payload changes per frame).
    """
    sock = open_packet_socket(ifname, rcvbuf=4 << 20)
    sock.setblocking(False)
    frame = bytearray(frame_template)
    frame[40:42] = b"\x00\x00"
    wire = (max(len(frame), 60) + 20) * 8 / speed_bps
    pauses = Pauses(speed_bps, pause_class)
    sent = 0
    _sleep_until_epoch(start_at)
    next_tx = time.monotonic()
    end_drain: float | None = None
    while True:
        now = time.monotonic()
        _honour_waiting_frames(sock, pauses, now)  # every PFC frame waiting first
        pauses.account(now)
        if sent >= count:
            end_drain = end_drain or now + drain_s
            if now >= end_drain:
                break
            _wait_on(sock, end_drain, now)
            continue
        resume = pauses.paused_until if now < pauses.paused_until else next_tx
        if now < resume:
            _wait_on(sock, resume, now)
            continue
        frame[42:46] = sent.to_bytes(4, "big")
        sock.send(frame)
        sent += 1
        next_tx = max(next_tx, now - 0.001) + wire
    sock.close()
    return {"sent": sent, **pauses.totals()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ifname", required=True)
    parser.add_argument("--frame-hex", required=True, help="template frame (seq at bytes 42..45)")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--speed-bps", type=float, required=True)
    parser.add_argument("--pause-class", type=int, required=True)
    parser.add_argument("--start-at", type=float, default=0.0, help="epoch seconds")
    parser.add_argument("--drain-s", type=float, default=0.5)
    args = parser.parse_args(argv)
    stats = run_pfc_sender(
        args.ifname,
        bytes.fromhex(args.frame_hex),
        args.count,
        args.speed_bps,
        args.pause_class,
        args.start_at,
        args.drain_s,
    )
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

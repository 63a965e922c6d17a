"""A storming NIC: send PFC XOFF for one priority out of one interface, continuously.

Started by ``roce-agent lab fault add storm HOST`` inside the host's namespace
(``python -m lab.faults_storm --ifname eth1 --priority 3``) and ended by PID (SIGTERM) on
``fault remove`` or ``lab down``. Prints ``storming`` once the first frame is out, so the
starter knows the socket works. Each frame carries the maximum pause time and the next one
follows long before it expires, so the peer's queue for that priority never resumes — what a
stuck NIC does (the PFC watchdog's case). The frame is ``lab.vswitch.packet.build_pfc_single``:
a full 802.1Qbb frame with all eight pause-time fields.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import time
from pathlib import Path

from lab.vswitch.packet import build_pfc_single, mac_to_bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.faults_storm", description=__doc__)
    parser.add_argument("--ifname", required=True)
    parser.add_argument("--priority", type=int, choices=range(8), required=True)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--quanta", type=int, default=0xFFFF, choices=range(1, 0x10000))
    args = parser.parse_args(argv)
    if not 0 < args.interval_ms <= 60_000:
        parser.error("--interval-ms: Expected: 0 < ms <= 60000")

    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        mac = Path(f"/sys/class/net/{args.ifname}/address").read_text().strip()
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        sock.bind((args.ifname, 0))
    except OSError as exc:
        print(f"error: {args.ifname}: {exc}", file=sys.stderr)
        return 2
    frame = build_pfc_single(mac_to_bytes(mac), args.priority, args.quanta)
    interval = args.interval_ms / 1000
    announced = False
    sent = failed = 0
    next_at = time.monotonic()
    while not stopping:
        try:
            sock.send(frame)
            sent += 1
        except OSError:
            failed += 1  # link down (ENETDOWN) or a full queue: a stuck NIC keeps trying
        if not announced:
            print("storming", flush=True)
            announced = True
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    print(f"stopped: {sent} PFC frames sent, {failed} send failures", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

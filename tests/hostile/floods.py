"""Hostile HTTP clients, each run as its own process (its own interpreter and GIL, as an
attacker would be), standard library only:

``python -m tests.hostile.floods passwords HOST PORT SECONDS THREADS SOURCE...``
    wrong passwords for ``prometheus``, THREADS threads per SOURCE address, without pause;
``python -m tests.hostile.floods readers HOST PORT SECONDS SOCKETS GZIP SOURCE...``
    SOCKETS connections per SOURCE that send a whole scrape (asking for gzip if GZIP is 1)
    and then read its answer at 1 KiB/s; every connection the server closes is reopened.

Each prints what happened as JSON when its SECONDS are up.
"""

from __future__ import annotations

import base64
import http.client
import json
import selectors
import socket
import sys
import threading
import time
from collections import Counter

WRONG = "Basic " + base64.b64encode(b"prometheus:guess").decode()
READ_PER_S = 1024


def passwords(
    host: str, port: int, seconds: float, threads: int, sources: list[str]
) -> Counter[str]:
    counts: Counter[str] = Counter()
    stop = time.monotonic() + seconds

    def flood(source: str) -> None:
        while time.monotonic() < stop:
            conn = http.client.HTTPConnection(host, port, timeout=5, source_address=(source, 0))
            try:
                conn.request("GET", "/metrics", headers={"Authorization": WRONG})
                counts[str(conn.getresponse().status)] += 1
            except OSError as exc:
                counts[type(exc).__name__] += 1
            finally:
                conn.close()

    workers = [
        threading.Thread(target=flood, args=(source,), daemon=True)
        for source in sources
        for _ in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 10)
    return counts


class Readers:
    """SOCKETS slow readers per source address, in one selector loop."""

    def __init__(self, target: tuple[str, int], sockets: int, gzip: bool, sources: list[str]):
        self.target, self.sockets, self.sources = target, sockets, sources
        head = "GET /metrics HTTP/1.1\r\nHost: exporter\r\nConnection: close\r\n"
        head += "Accept-Encoding: gzip\r\n" if gzip else ""
        self.request = (head + "\r\n").encode()
        self.selector = selectors.DefaultSelector()
        self.open: dict[str, set[socket.socket]] = {source: set() for source in sources}
        self.counts: Counter[str] = Counter()

    def run(self, seconds: float) -> Counter[str]:
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self._reopen()
                tick = time.monotonic()
                for key, _ in self.selector.select(timeout=0.1):
                    self._read(key.fileobj, key.data)  # type: ignore[arg-type]
                time.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))
                self.counts["held_max"] = max(
                    self.counts["held_max"], sum(map(len, self.open.values()))
                )
        finally:
            for socks in self.open.values():
                for sock in list(socks):
                    sock.close()
        return self.counts

    def _reopen(self) -> None:
        for source, socks in self.open.items():
            while len(socks) < self.sockets:
                sock = socket.socket()
                sock.bind((source, 0))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # read slowly
                try:
                    sock.connect(self.target)
                    sock.sendall(self.request)
                except OSError:
                    self.counts["connect_failed"] += 1
                    sock.close()
                    break
                sock.setblocking(False)
                self.selector.register(sock, selectors.EVENT_READ, source)
                socks.add(sock)
                self.counts["opened"] += 1

    def _read(self, sock: socket.socket, source: str) -> None:
        try:
            data = sock.recv(READ_PER_S // 10)  # ten ticks a second
        except OSError:
            data = b""
        if data.startswith(b"HTTP/1.0 503") or data.startswith(b"HTTP/1.1 503"):
            self.counts["refused_503"] += 1
        elif data:
            self.counts["read_bytes"] += len(data)
            return
        else:
            self.counts["closed"] += 1
        self.selector.unregister(sock)
        self.open[source].discard(sock)
        sock.close()


def main(argv: list[str]) -> None:
    kind, host, port, seconds, *rest = argv
    if kind == "passwords":
        threads, *sources = rest
        counts = passwords(host, int(port), float(seconds), int(threads), sources)
    else:
        sockets, gzip, *sources = rest
        counts = Readers((host, int(port)), int(sockets), gzip == "1", sources).run(float(seconds))
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

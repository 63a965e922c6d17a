"""A slow-client flood from one address, run as its own process (its own interpreter and GIL,
as an attacker would be): ``python -m tests.unit.slow_clients HOST PORT SOURCE SOCKETS
REOPEN_PER_S SECONDS``. It opens SOCKETS connections from SOURCE at once, sends each half a
request head and waits; every connection the server refuses or cuts is reopened, at most
REOPEN_PER_S a second. After SECONDS it closes everything and prints what happened as JSON.
Standard library only, one thread: it starts fast and stops cleanly."""

from __future__ import annotations

import json
import selectors
import socket
import sys
import time
from collections import Counter

HALF_HEAD = b"GET /metrics HTTP/1.1\r\nHost: exporter\r\n"


class Flood:
    def __init__(self, target: tuple[str, int], source: str, sockets: int, reopen_per_s: float):
        self.target, self.source = target, source
        self.sockets, self.reopen_per_s = sockets, reopen_per_s
        self.selector = selectors.DefaultSelector()
        self.open: set[socket.socket] = set()
        self.counts: Counter[str] = Counter()
        self.tokens = float(sockets)  # the first burst opens them all at once
        self.refilled = time.monotonic()

    def run(self, seconds: float) -> Counter[str]:
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self._reopen()
                for key, events in self.selector.select(timeout=0.05):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if events & selectors.EVENT_WRITE:
                        self._connected(sock)
                    else:
                        self._answered(sock)
                self.counts["held_max"] = max(self.counts["held_max"], len(self.open))
        finally:
            for sock in list(self.open):
                self._close(sock)
            self.selector.close()
        return self.counts

    def _reopen(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.sockets, self.tokens + (now - self.refilled) * self.reopen_per_s)
        self.refilled = now
        while len(self.open) < self.sockets and self.tokens >= 1:
            self.tokens -= 1
            sock = socket.socket()
            sock.setblocking(False)
            sock.bind((self.source, 0))
            sock.connect_ex(self.target)  # in progress; writable once connected
            self.selector.register(sock, selectors.EVENT_WRITE)
            self.open.add(sock)
            self.counts["opened"] += 1

    def _connected(self, sock: socket.socket) -> None:
        try:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                raise ConnectionError
            sock.send(HALF_HEAD)
        except OSError:
            self.counts["connect_failed"] += 1
            self._close(sock)
            return
        self.selector.modify(sock, selectors.EVENT_READ)

    def _answered(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(4096)
        except OSError:
            data = b""
        self.counts["refused_503" if data.startswith(b"HTTP/1.0 503") else "cut"] += 1
        self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        self.selector.unregister(sock)
        self.open.discard(sock)
        sock.close()


def main(argv: list[str]) -> None:
    host, port, source, sockets, reopen_per_s, seconds = argv
    flood = Flood((host, int(port)), source, int(sockets), float(reopen_per_s))
    print(json.dumps(flood.run(float(seconds))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

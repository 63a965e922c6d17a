"""The lab switch driven in-process: each port a datagram socket pair (the switch holds one
end, the test the other) and a clock the test sets (tests of the data plane's faults and of
its packet trimming)."""

from __future__ import annotations

import socket

from lab.vswitch.dataplane import Port


class Wires:
    """One datagram socket pair per port; ``link`` is what the switch's link probe reads."""

    def __init__(self) -> None:
        self.peer: dict[str, socket.socket] = {}
        self.mine: list[socket.socket] = []
        self.link: dict[str, bool] = {}

    def open(self, ifname: str) -> socket.socket:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.setblocking(False)
        b.setblocking(False)
        # Room for a burst's worth of frames the test reads only after the switch sent them.
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.peer[ifname] = b
        self.mine += [a, b]
        self.link[ifname] = True
        return a

    def probe(self, port: Port) -> bool:
        return self.link[port.name]

    def received(self, ifname: str) -> list[bytes]:
        frames = []
        while True:
            try:
                frames.append(self.peer[ifname].recv(65536))
            except BlockingIOError:
                return frames

    def close(self) -> None:
        for sock in self.mine:
            sock.close()


class Clock:
    """The switch's clock, moved by the test."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

"""Control socket: a unix stream socket speaking newline-delimited JSON, served from the
data plane's own poll loop (non-blocking, so a slow client never stalls forwarding).

Each request line is a JSON object with a ``cmd`` key; each gets exactly one response line,
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
from collections.abc import Callable
from typing import Any

log = logging.getLogger("lab.vswitch.control")

Handler = Callable[[dict[str, Any]], dict[str, Any]]

MAX_REQUEST_BYTES = 1 << 20
_MAX_CLIENTS = 64


class ControlSocketError(RuntimeError):
    """The control socket cannot be created."""


class _Client:
    __slots__ = ("inbuf", "outbuf", "sock", "waiting_write")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.waiting_write = False  # in write_fds because a reply did not fit the socket


def _remove_stale_socket(path: str) -> None:
    """Remove ``path`` if it is a unix socket nobody listens on; refuse anything else."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ControlSocketError(f"control socket path {path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)
        return
    finally:
        probe.close()
    raise ControlSocketError(f"control socket {path} is in use by another process")


class ControlServer:
    """Listening socket plus connected clients; the owner polls :meth:`read_fds` etc."""

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self._handler = handler
        _remove_stale_socket(path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(path)
        except OSError as exc:
            self._listener.close()
            raise ControlSocketError(f"cannot bind control socket {path}: {exc}") from None
        os.chmod(path, 0o660)
        self._listener.listen(16)
        self._listener.setblocking(False)
        self._clients: dict[int, _Client] = {}
        # Bumped whenever the descriptor sets change, so the loop can cache its fd lists.
        self.generation = 0

    def read_fds(self) -> list[int]:
        """Descriptors to watch for reading."""
        return [self._listener.fileno(), *self._clients]

    def write_fds(self) -> list[int]:
        """Descriptors with pending output."""
        return [fd for fd, c in self._clients.items() if c.waiting_write]

    def owns(self, fd: int) -> bool:
        """Whether ``fd`` belongs to the control server."""
        return fd == self._listener.fileno() or fd in self._clients

    def on_readable(self, fd: int) -> None:
        """Accept a client or read (and answer) its complete request lines."""
        if fd == self._listener.fileno():
            self._accept()
            return
        client = self._clients.get(fd)
        if client is None:
            return
        try:
            data = client.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            self._drop(fd)
            return
        if not data:
            self._drop(fd)
            return
        client.inbuf += data
        while True:
            newline = client.inbuf.find(b"\n")
            if newline < 0:
                break
            line = bytes(client.inbuf[:newline])
            del client.inbuf[: newline + 1]
            if line.strip():
                client.outbuf += self._answer(line)
        if len(client.inbuf) > MAX_REQUEST_BYTES:
            client.outbuf += _encode({"ok": False, "error": "request line too long"})
            client.inbuf.clear()
        self.on_writable(fd)

    def on_writable(self, fd: int) -> None:
        """Flush as much pending output as the socket takes."""
        client = self._clients.get(fd)
        if client is None or not client.outbuf:
            return
        try:
            sent = client.sock.send(client.outbuf)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop(fd)
            return
        del client.outbuf[:sent]
        if bool(client.outbuf) != client.waiting_write:
            client.waiting_write = bool(client.outbuf)
            self.generation += 1

    def close(self) -> None:
        """Close every socket and remove the socket file."""
        for fd in list(self._clients):
            self._drop(fd)
        self._listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except BlockingIOError:
            return
        if len(self._clients) >= _MAX_CLIENTS:
            sock.close()
            return
        sock.setblocking(False)
        self._clients[sock.fileno()] = _Client(sock)
        self.generation += 1

    def _drop(self, fd: int) -> None:
        client = self._clients.pop(fd, None)
        if client is not None:
            client.sock.close()
            self.generation += 1

    def _answer(self, line: bytes) -> bytes:
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _encode({"ok": False, "error": f"request is not JSON: {exc}"})
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            return _encode({"ok": False, "error": 'request must be an object with a "cmd" string'})
        try:
            response = self._handler(request)
        except Exception as exc:  # a bad request must never kill the data plane
            log.exception("control command %r failed", request.get("cmd"))
            response = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return _encode(response)


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"

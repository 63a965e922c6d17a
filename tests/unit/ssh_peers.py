"""SSH peers on 127.0.0.1 for the connect tests (tests/unit/test_ssh_connect.py) and the hostile
corpus (tests/hostile/test_ssh.py): what a misbehaving device, or something that is no SSH
server at all, sends.

- :class:`RawPeer`: a TCP listener whose every connection gets one behaviour: silence,
  garbage, an endless banner line, many lines, an immediate close.
- :class:`FakeSwitch`: a real SSH server (asyncssh) with a host key of a chosen type and a
  password, whose shell speaks just enough of EOS for netmiko's ``arista_eos`` driver to log
  in (prompt, ``terminal width``, ``terminal length``), and then answers ``show`` commands
  from ``replies`` -- or endlessly (``endless=True``), or never prints a prompt at all
  (``mute=True``).

Every peer listens on a free port, counts its connections and is stopped by the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

Behaviour = Callable[[socket.socket, threading.Event], None]


def silent(conn: socket.socket, stop: threading.Event) -> None:
    """Accept TCP, never say anything."""
    stop.wait()


def close_at_once(conn: socket.socket, stop: threading.Event) -> None:
    conn.close()


def garbage(conn: socket.socket, stop: threading.Event) -> None:
    """Random bytes without a newline, as fast as they are taken."""
    block = os.urandom(65536).replace(b"\n", b"x")
    with contextlib.suppress(OSError):
        while not stop.is_set():
            conn.sendall(block)


def garbage_lines(conn: socket.socket, stop: threading.Event) -> None:
    """Short text lines that are not an SSH version line (an HTTP server, a telnet banner)."""
    with contextlib.suppress(OSError):
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n" * 200)
        stop.wait()


def banner_of(size: int) -> Behaviour:
    """One line of ``size`` bytes, then the newline, then silence."""

    def send(conn: socket.socket, stop: threading.Event) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(b"SSH-2.0-" + b"A" * size + b"\r\n")
            stop.wait()

    return send


def many_lines(count: int) -> Behaviour:
    """``count`` short lines before any version line (what RFC 4253 allows, without end)."""

    def send(conn: socket.socket, stop: threading.Event) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(b"hello\r\n" * count)
            stop.wait()

    return send


class RawPeer:
    """A TCP listener on 127.0.0.1 with one behaviour per connection."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._conns.append(conn)
            worker = threading.Thread(target=self.behaviour, args=(conn, self.stop), daemon=True)
            worker.start()
            self._threads.append(worker)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(5)
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()
        for worker in self._threads:
            worker.join(5)
        self.sock.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --------------------------------------------------------------------------- a real SSH server

PROMPT = "leaf1#"
ENDLESS_CHUNK = "x" * 65536 + "\r\n"


@dataclass
class FakeSwitch:
    """An asyncssh server on its own event loop thread (see the module docstring)."""

    key_type: str = "ssh-ed25519"
    password: str = "right"
    replies: dict[str, str] = field(default_factory=dict)
    endless: bool = False
    mute: bool = False
    port: int = 0
    logins: int = 0
    sent: int = 0  # bytes written by endless replies

    def __post_init__(self) -> None:
        self.host_key = asyncssh.generate_private_key(self.key_type)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("the fake switch did not start")

    @property
    def public_line(self) -> str:
        """``TYPE BASE64`` of the host key, as ``host_key:`` in a fabric pins it."""
        key_type, blob = self.host_key.export_public_key().decode().split()[:2]
        return f"{key_type} {blob}"

    def known_hosts(self, path: Path) -> Path:
        """A known_hosts file with this switch's key."""
        path.write_text(f"[127.0.0.1]:{self.port} {self.public_line}\n")
        return path

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        switch = self

        class Server(asyncssh.SSHServer):
            def begin_auth(self, username: str) -> bool:
                return True

            def password_auth_supported(self) -> bool:
                return True

            def validate_password(self, username: str, password: str) -> bool:
                ok = password == switch.password
                switch.logins += ok
                return ok

        acceptor = await asyncssh.create_server(
            Server,
            "127.0.0.1",
            0,
            server_host_keys=[self.host_key],
            process_factory=self._shell,
            line_editor=True,  # echoes input as a switch's CLI does
            encoding="utf-8",
        )
        self.port = acceptor.get_port()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        acceptor.close()

    async def _shell(self, process: Any) -> None:
        try:
            if self.mute:
                await asyncio.sleep(3600)
            process.stdout.write(PROMPT)
            while not process.stdin.at_eof():
                line = (await process.stdin.readline()).strip()
                await self._answer(process, line)
        except (asyncssh.Error, ConnectionError, BrokenPipeError, asyncio.CancelledError):
            pass
        finally:
            process.exit(0)

    async def _answer(self, process: Any, line: str) -> None:
        if line.startswith("terminal width"):
            process.stdout.write(f"Width set to 511 columns.\r\n{PROMPT}")
        elif line.startswith("terminal length"):
            process.stdout.write(f"Pagination disabled.\r\n{PROMPT}")
        elif line.startswith("show") and self.endless:
            while not process.channel.is_closing():  # until the client hangs up
                process.stdout.write(ENDLESS_CHUNK)
                self.sent += len(ENDLESS_CHUNK)
                await process.stdout.drain()
        else:
            reply = self.replies.get(line, "")
            process.stdout.write(f"{reply}\r\n{PROMPT}" if reply else PROMPT)

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

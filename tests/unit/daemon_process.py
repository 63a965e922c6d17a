"""``roce-agent serve`` as a real process for tests: its JSON log, a fake systemd on
``$NOTIFY_SOCKET``, scrapes of its exporter, and fabrics whose switches are loopback ports
that never answer SSH. Used by the unit, hostile and lab tests of the daemon."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Re-exported: the daemon tests take every helper from here.
from tests.lab.support.loopback import free_port as free_port

REPO = Path(__file__).resolve().parents[2]
PASSWORD_ENV = "ROCE_TEST_SWITCH_PASSWORD"


class Notifications:
    """A fake systemd: the unix datagram socket $NOTIFY_SOCKET names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.seen: list[str] = []

    def drain(self) -> None:
        while True:
            try:
                self.seen.extend(self.sock.recv(4096).decode().splitlines())
            except (TimeoutError, BlockingIOError):
                return

    def wait_for(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.seen:
                if message.startswith(prefix):
                    self.seen.remove(message)
                    return message
            try:
                self.seen.extend(self.sock.recv(4096).decode().splitlines())
            except TimeoutError:
                continue
        raise AssertionError(f"no {prefix!r} within {timeout} s (seen {self.seen})")

    def close(self) -> None:
        self.sock.close()


class LogReader:
    """The daemon's JSON log lines, read without blocking."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[dict[str, Any]] = []
        assert process.stdout is not None
        os.set_blocking(process.stdout.fileno(), False)

    def poll(self) -> None:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                return
            self.lines.append(json.loads(line))

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            for entry in self.lines:
                if predicate(entry):
                    self.lines.remove(entry)
                    return entry
            time.sleep(0.1)
        raise AssertionError(f"no matching log line within {timeout} s: {self.lines[-5:]}")


@dataclass
class Daemon:
    """A running ``roce-agent serve``, its JSON log, its agent.yaml and its exporter's port."""

    process: subprocess.Popen[str]
    logs: LogReader
    config: Path
    port: int

    def reload(self, content: str | bytes) -> None:
        """A new agent.yaml, then SIGHUP."""
        if isinstance(content, bytes):
            self.config.write_bytes(content)
        else:
            self.config.write_text(content)
        self.process.send_signal(signal.SIGHUP)

    def reloaded(self, content: str | bytes, timeout: float = 40) -> None:
        self.reload(content)
        self.logs.wait_for(lambda e: e["message"] == "reloaded", timeout)

    def children(self) -> list[int]:
        """The daemon's child processes now (its reload worker, when one runs)."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []


@contextmanager
def serving(
    config: Path, port: int, folder: Path, environment: Mapping[str, str]
) -> Iterator[Daemon]:
    """``roce-agent serve --config CONFIG``, its stderr in FOLDER/stderr.txt. One still running
    on the way out is stopped: SIGABRT has faulthandler (if enabled) dump every thread's stack
    into stderr.txt first, printed then."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "serve", "--config", str(config)],
        cwd=REPO,
        env=dict(environment),
        stdout=subprocess.PIPE,
        stderr=(folder / "stderr.txt").open("w"),
        text=True,
    )
    try:
        yield Daemon(process, LogReader(process), config, port)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGABRT)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            print((folder / "stderr.txt").read_text()[-8000:])


def scrape(port: int, timeout: float = 5) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as response:
        return str(response.read().decode())


def sample(exposition: str, name: str) -> float:
    """The value of one sample (``name`` including its labels) in Prometheus text format,
    matched without the ``fabric`` label every series carries."""
    import re

    for line in exposition.splitlines():
        line = re.sub(r'fabric="[^"]*",?', "", line).replace(",}", "}").replace("{}", "")
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not served")


def fabric_on_loopback(
    path: Path, switches: Mapping[str, int], extra: str = "", hosts: tuple[str, ...] = ()
) -> Path:
    """A fabric whose switches (arista_eos, one port each) are ``127.0.0.1:PORT``; the
    password comes from $ROCE_TEST_SWITCH_PASSWORD. ``extra`` is appended to each switch
    (e.g. a pinned ``host_key``); ``hosts`` are lab hosts (in a namespace, no port)."""
    devices = "".join(
        f"  - name: {name}\n    platform: arista_eos\n    role: leaf\n"
        f"    host: 127.0.0.1\n    port: {port}\n{extra}"
        "    ports:\n      - {name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9214}\n"
        for name, port in switches.items()
    )
    devices += "".join(
        f"  - name: {name}\n    platform: linux_host\n    role: host\n    netns: {name}\n"
        for name in hosts
    )
    path.write_text(
        "name: loopback\nprofile: nvidia-default\ndefaults:\n  username: admin\n"
        f"  credentials: {{password_env: {PASSWORD_ENV}}}\ndevices:\n{devices}"
    )
    return path


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, PASSWORD_ENV: "admin", "PYTHONFAULTHANDLER": "1", **extra}

"""Where probes run: a lab host's network namespace, or a real host over SSH.

Both start the same worker (:mod:`agent.observe.probes.worker`) and read back one JSON line, so
scenarios do not care which kind of host they drive.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from agent.errors import AgentError
from agent.intent.model import Device

START_TIMEOUT_S = 10.0
# Over SSH a worker is ready after a login and an interpreter start with scapy on the host:
# seconds on a loaded host, more in a lab VM without KVM.
SSH_START_TIMEOUT_S = 30.0


class ProbeError(AgentError):
    """A probe that could not run or did not return a result."""


class ProbeHandle(ABC):
    """A probe started on some host: wait until it is ready, then for its result."""

    host: str
    role: str

    @abstractmethod
    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None: ...

    @abstractmethod
    def result(self, timeout: float) -> dict[str, Any]: ...

    @abstractmethod
    def kill(self) -> None: ...

    def go(self) -> None:
        """Tell a worker that waits for it (after READY) to start now: the line ``GO`` on its
        standard input. Clients of an incast start within milliseconds of each other this
        way, however long each took to get ready."""
        raise NotImplementedError(f"{type(self).__name__} cannot start a worker on GO")


GO_LINE = "GO"


def _parse_result(host: str, role: str, output: str, detail: str) -> dict[str, Any]:
    """The worker's JSON line (the last line that is a JSON object) as a dict."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "error" in data:
                raise ProbeError(f"{role} on {host}: {data['error']}")
            data["host"] = host
            return data
    raise ProbeError(f"{role} on {host} printed no result: {detail.strip()[-500:]}")


class ProbeProcess(ProbeHandle):
    """A worker running as a local process (lab namespaces); ``result()`` waits for it."""

    def __init__(self, host: str, role: str, process: subprocess.Popen[str]) -> None:
        self.host = host
        self.role = role
        self.process = process

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Block until a receiver says its socket is open (first stdout line)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline()
        if line.strip() != "READY" or time.monotonic() > deadline:
            self.process.kill()
            _, err = self.process.communicate()
            raise ProbeError(f"{self.role} on {self.host} did not start: {line.strip()} {err}")

    def result(self, timeout: float) -> dict[str, Any]:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise ProbeError(
                f"{self.role} on {self.host} did not finish within {timeout} s"
            ) from None
        code = self.process.returncode
        # A worker killed by a signal prints nothing: say which, or the error is blank.
        why = err if err.strip() or code == 0 else f"exit status {code}"
        data = _parse_result(self.host, self.role, out, why)
        if self.process.returncode != 0:
            raise ProbeError(f"{self.role} on {self.host} exited {self.process.returncode}: {err}")
        return data

    def kill(self) -> None:
        self.process.kill()
        self.process.communicate()

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(GO_LINE + "\n")
        self.process.stdin.flush()


class Runner(ABC):
    """Starts probe workers on one host."""

    host: str
    # How long a worker takes from start() to an open socket on the lab: the first of a
    # synchronised start's margin (one worker alone); each further worker started at once
    # adds the second.
    start_margin_s: tuple[float, float] = (1.0, 0.3)

    @abstractmethod
    def start(self, role: str, spec: dict[str, Any]) -> ProbeHandle: ...


class NetnsRunner(Runner):
    """A lab host: the worker runs in the host's network namespace (same Python)."""

    def __init__(self, host: str, netns: str) -> None:
        self.host = host
        self.netns = netns

    def command(self, role: str, spec: dict[str, Any]) -> list[str]:
        return [
            "ip", "netns", "exec", self.netns,
            sys.executable, "-m", "agent.observe.probes.worker", role, json.dumps(spec),
        ]  # fmt: skip

    def start(self, role: str, spec: dict[str, Any]) -> ProbeProcess:
        process = subprocess.Popen(
            self.command(role, spec),
            stdin=subprocess.PIPE,  # GO (ProbeHandle.go); closed by communicate()
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return ProbeProcess(self.host, role, process)


def _has_ready_line(text: str) -> bool:
    return "READY" in (line.strip() for line in text.splitlines())


class SshProbe(ProbeHandle):
    """A worker started over SSH (netmiko ``linux``) on a real host; output read from the
    channel, so a receiver's READY line arrives before the command ends."""

    def __init__(self, host: str, role: str, connection: Any, command: str) -> None:
        self.host = host
        self.role = role
        self.connection = connection
        self.output = ""
        self._consumed = 0
        connection.write_channel(command + "\n")
        # The shell echoes the command line; output starts after it.
        self._echo_end_marker = command[-40:]

    def _read(self, until: Callable[[str], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.output += self.connection.read_channel()
            if until(self._fresh()):
                return True
            time.sleep(0.05)
        return False

    def _fresh(self) -> str:
        index = self.output.find(self._echo_end_marker)
        return self.output[index + len(self._echo_end_marker) :] if index >= 0 else ""

    def wait_ready(self, timeout: float = SSH_START_TIMEOUT_S) -> None:
        if not self._read(_has_ready_line, timeout):
            self.kill()
            raise ProbeError(f"{self.role} on {self.host} did not start: {self._fresh()[-300:]}")

    def _finished(self, text: str) -> bool:
        """The worker printed its result and the shell prompt is back."""
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        return (
            any(line.lstrip().startswith("{") for line in lines)
            and self.connection.base_prompt in lines[-1]
            and lines[-1].endswith(("#", "$"))
        )

    def result(self, timeout: float) -> dict[str, Any]:
        try:
            if not self._read(self._finished, timeout):
                raise ProbeError(f"{self.role} on {self.host} did not finish within {timeout} s")
            return _parse_result(self.host, self.role, self._fresh(), self._fresh())
        finally:
            self.connection.disconnect()

    def go(self) -> None:
        self.connection.write_channel(GO_LINE + "\n")  # the worker's stdin is the SSH pty

    def kill(self) -> None:
        # Idempotent: a scenario that gives up kills every handle, some already closed.
        with contextlib.suppress(OSError, EOFError):
            self.connection.write_channel("\x03")
        with contextlib.suppress(OSError, EOFError):
            self.connection.disconnect()


class SshRunner(Runner):
    """A real host reached over SSH: ``python -m agent.observe.probes.worker`` runs there (the host
    needs roce-fabric-agent installed for that interpreter: the device's ``probe_python``)."""

    start_margin_s = (4.0, 0.5)  # an SSH login and the interpreter start on the host

    def __init__(self, device: Device) -> None:
        if device.host is None or device.username is None or device.credentials is None:
            raise ProbeError(f"host {device.name}: host, username and credentials are needed")
        self.host = device.name
        self.device = device

    def _connect(self) -> Any:
        """The raw netmiko session (the push path's connect: same credentials handling)."""
        from agent.device.platforms import platform_for
        from agent.device.push import Unreachable, connect

        assert self.device.credentials is not None
        self.device.credentials.check_key(self.device.name)
        try:
            return connect(self.device, platform_for("linux_host")).netmiko
        except Unreachable as exc:
            raise ProbeError(f"host {exc}") from None  # "h1: timed out: …" names the host

    def start(self, role: str, spec: dict[str, Any]) -> ProbeHandle:
        command = " ".join(
            shlex.quote(part)
            for part in (self.device.probe_python, "-m", "agent.observe.probes.worker", role,
                         json.dumps(spec, separators=(",", ":")))
        )  # fmt: skip
        return SshProbe(self.host, role, self._connect(), command)

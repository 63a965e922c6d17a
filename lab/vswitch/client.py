"""Client of the vswitch control socket (used by ``roce-agent lab counters`` and the SSH CLI)."""

from __future__ import annotations

import json
import socket
from types import TracebackType
from typing import Any


class VswitchError(RuntimeError):
    """The switch answered ``{"ok": false, ...}`` or the socket failed."""


class VswitchClient:
    """Newline-delimited JSON request/response over the switch's unix control socket.

    The connection is opened on first use and kept; use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, path: str, timeout: float = 5.0) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = bytearray()

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the decoded response (``ok`` may be false)."""
        sock = self._connect()
        try:
            sock.sendall(json.dumps(message).encode() + b"\n")
            while b"\n" not in self._buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    raise VswitchError(f"{self.path}: switch closed the control connection")
                self._buffer += chunk
        except OSError as exc:
            self.close()
            raise VswitchError(f"{self.path}: {exc}") from exc
        newline = self._buffer.index(b"\n")
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        response = json.loads(line)
        if not isinstance(response, dict):
            raise VswitchError(f"{self.path}: malformed response {line[:200]!r}")
        return response

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Like :meth:`request` but raise :class:`VswitchError` unless ``ok`` is true."""
        response = self.request(message)
        if not response.get("ok"):
            raise VswitchError(str(response.get("error", "unknown error")))
        return response

    def ping(self) -> bool:
        """True if the switch answers."""
        return bool(self.request({"cmd": "ping"}).get("ok"))

    def counters(self) -> dict[str, Any]:
        """The ``counters`` object (name, uptime_s, ports...)."""
        counters: dict[str, Any] = self.call({"cmd": "counters"})["counters"]
        return counters

    def clear_counters(self) -> None:
        """Zero the cumulative counters."""
        self.call({"cmd": "clear_counters"})

    def clear_watermarks(self) -> None:
        """Reset queue and ingress watermarks to the current depth."""
        self.call({"cmd": "clear_watermarks"})

    def get_config(self) -> dict[str, Any]:
        """The running configuration (same shape as the config file)."""
        config: dict[str, Any] = self.call({"cmd": "get_config"})["config"]
        return config

    def set_qos(self, qos: dict[str, Any]) -> dict[str, Any]:
        """Replace the QoS configuration; raises :class:`VswitchError` if it is refused."""
        return self.call({"cmd": "set_qos", "qos": qos})

    def set_buffer(self, buffer: dict[str, Any], port: str | None = None) -> dict[str, Any]:
        """Replace the default (or one port's) buffer thresholds."""
        message: dict[str, Any] = {"cmd": "set_buffer", "buffer": buffer}
        if port is not None:
            message["port"] = port
        return self.call(message)

    def set_faults(self, faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Replace the whole fault set (lab only; ``[]`` clears it) and return it normalised;
        raises :class:`VswitchError` naming the bad field if refused (then nothing changed)."""
        normalised: list[dict[str, Any]] = self.call({"cmd": "set_faults", "faults": faults})[
            "faults"
        ]
        return normalised

    def get_faults(self) -> list[dict[str, Any]]:
        """The current fault set, normalised (same shape as :meth:`set_faults` takes)."""
        faults: list[dict[str, Any]] = self.call({"cmd": "get_faults"})["faults"]
        return faults

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffer.clear()

    def __enter__(self) -> VswitchClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.path)
            except OSError as exc:
                sock.close()
                raise VswitchError(f"cannot connect to {self.path}: {exc}") from exc
            self._sock = sock
        return self._sock

"""A unix socket speaking the vswitch control protocol (newline-delimited JSON) from an
in-memory data plane, for a ``python -m lab.mgmt`` process under test."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

from lab.mgmt.testing import FakeDataplane


class FakeControlSocket:
    """Answers ``ping``, ``get_config``, ``counters`` and ``set_qos`` through ``dataplane``'s
    own methods (so a counting or validating fake behaves as it does in-process)."""

    def __init__(self, path: Path, dataplane: FakeDataplane) -> None:
        self.path = path
        self.dataplane = dataplane
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream:
            for raw in stream:
                answer = asyncio.run(self._answer(json.loads(raw)))
                stream.write(json.dumps(answer).encode() + b"\n")
                stream.flush()

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        dp, cmd = self.dataplane, request.get("cmd")
        try:
            if cmd == "ping":
                return {"ok": await dp.ping()}
            if cmd == "get_config":
                return {"ok": True, "config": await dp.get_config()}
            if cmd == "counters":
                return {"ok": True, "counters": await dp.counters()}
            if cmd == "set_qos":
                await dp.set_qos(request["qos"])
                return {"ok": True}
        except Exception as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": f"unknown cmd {cmd}"}

    def close(self) -> None:
        self.running = False
        self.listener.close()
        self.thread.join(2)

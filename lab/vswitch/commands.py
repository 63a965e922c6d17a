"""The control protocol's commands on a running switch (:class:`lab.vswitch.dataplane.Switch`):
what each ``cmd`` of a request does and answers -- read (``ping``, ``counters``,
``get_config``, ``get_faults``), reset (``clear_counters``, ``clear_watermarks``) and replace
(``set_qos``, ``set_buffer``, ``set_faults``: validated first; refused, nothing changes) -- and
serving them on the switch's control socket (:func:`serve_control`).

The socket itself (framing, clients, never blocking the loop) is :mod:`lab.vswitch.control`;
these run from the switch's own loop, one request at a time, so a change lands between two
frames.  Not compiled (:mod:`lossless.compiled`): a command runs per request, not per frame.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from lab.vswitch.config import ConfigError, SwitchConfig, faults_to_json, with_buffer, with_qos
from lab.vswitch.control import ControlServer
from lab.vswitch.counters import port_snapshot, queues_snapshot
from lab.vswitch.dataplane import Switch
from lab.vswitch.rawsock import take_kernel_drops
from lossless.config import NUM_CLASSES

# The data plane's own logger: a refused change is logged as the switch's.
log = logging.getLogger("lab.vswitch")


def serve_control(switch: Switch, path: str) -> None:
    """Answer the control protocol on the unix socket ``path`` from the switch's loop
    (:class:`lab.vswitch.control.ControlSocketError` when it cannot be created)."""
    switch.control = ControlServer(path, functools.partial(handle_request, switch))


def handle_request(switch: Switch, request: dict[str, Any]) -> dict[str, Any]:
    """Dispatch one control-socket request (see ``lab.vswitch.control``)."""
    cmd = request.get("cmd")
    if cmd == "set_qos":
        return _set_qos(switch, request)
    if cmd == "set_buffer":
        return _set_buffer(switch, request)
    if cmd == "set_faults":
        return _set_faults(switch, request)
    return _query(switch, cmd)


def _query(switch: Switch, cmd: Any) -> dict[str, Any]:
    """The requests that read, or reset counters (no payload besides ``cmd``)."""
    if cmd == "ping":
        return {"ok": True, "name": switch.config.name}
    if cmd == "counters":
        return {"ok": True, "counters": counters_snapshot(switch)}
    if cmd == "clear_counters":
        clear_counters(switch)
        return {"ok": True}
    if cmd == "clear_watermarks":
        clear_watermarks(switch)
        return {"ok": True}
    if cmd == "get_config":
        return {"ok": True, "config": switch.config.to_json_dict()}
    if cmd == "get_faults":
        return {"ok": True, "faults": faults_to_json(switch.faults)}
    return {
        "ok": False,
        "error": f"unknown cmd {cmd!r}; known: ping, counters, clear_counters, "
        "clear_watermarks, get_config, set_qos, set_buffer, set_faults, get_faults",
    }


def _set_qos(switch: Switch, request: dict[str, Any]) -> dict[str, Any]:
    if "qos" not in request:
        return {"ok": False, "error": 'set_qos needs a "qos" object'}
    return _reconfigure(switch, lambda: with_qos(switch.config, request["qos"]), "qos")


def _set_buffer(switch: Switch, request: dict[str, Any]) -> dict[str, Any]:
    if "buffer" not in request:
        return {"ok": False, "error": 'set_buffer needs a "buffer" object'}
    port = request.get("port")
    if port is not None and not isinstance(port, str):
        return {"ok": False, "error": "set_buffer: port must be a string"}
    return _reconfigure(
        switch, lambda: with_buffer(switch.config, request["buffer"], port), "buffer"
    )


def _set_faults(switch: Switch, request: dict[str, Any]) -> dict[str, Any]:
    if "faults" not in request:
        return {"ok": False, "error": 'set_faults needs a "faults" list'}
    try:
        switch.set_faults(request["faults"])
    except ConfigError as exc:
        log.warning("refused faults: %s", exc)
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "faults": faults_to_json(switch.faults)}


def _reconfigure(switch: Switch, build: Callable[[], SwitchConfig], what: str) -> dict[str, Any]:
    try:
        new_config = build()
    except ConfigError as exc:
        log.warning("refused %s change: %s", what, exc)
        return {"ok": False, "error": str(exc)}
    switch.apply_config(new_config)
    log.info("%s updated", what)
    return {"ok": True}


def counters_snapshot(switch: Switch) -> dict[str, Any]:
    """The ``counters`` object of the control protocol."""
    now = switch.clock.now()
    for port in switch.ports:
        port.counters.rx_overruns += take_kernel_drops(port.sock)
    return {
        "name": switch.config.name,
        "uptime_s": round(now - switch.started, 3),
        "ports": {
            port.name: port_snapshot(
                port.counters,
                port.oper_up,
                port.paused_view(now),
                port.ingress,
                queues_snapshot(port.queues, port.watchdog, port.counters.trim_sent),
            )
            for port in switch.ports
        },
    }


def clear_counters(switch: Switch) -> None:
    """Zero cumulative counters (depths, states and watermarks are kept)."""
    for port in switch.ports:
        take_kernel_drops(port.sock)
        port.counters.clear()
        port.ingress.headroom_drops = [0] * NUM_CLASSES
        for queue in port.queues:
            queue.clear_counters()
        for cls in port.watchdog.classes:
            cls.clear_counters()


def clear_watermarks(switch: Switch) -> None:
    """Restart the peak trackers from the current depths."""
    for port in switch.ports:
        port.ingress.watermark_bytes = list(port.ingress.buffered_bytes)
        for queue in port.queues:
            queue.watermark_bytes = queue.depth_bytes

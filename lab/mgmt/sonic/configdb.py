"""CONFIG_DB: the switch's configuration as a dict of tables, its factory content and its file.

Factory content is what a SONiC switch has after ``config qos reload`` and ``pfcwd
start_default``: sonic-net/sonic-buildimage ``files/build_templates/qos_config.j2`` (the
``AZURE`` DSCP_TO_TC_MAP with DSCP 26 -> TC 1, TC_TO_PRIORITY_GROUP_MAP / TC_TO_QUEUE_MAP /
MAP_PFC_PRIORITY_TO_QUEUE ``AZURE``, SCHEDULER ``scheduler.0`` DWRR 14 and ``scheduler.1``
DWRR 15, WRED_PROFILE ``AZURE_LOSSLESS`` 1048576-2097152 bytes 5 %, ``PORT_QOS_MAP|<port>``
with ``pfc_enable`` "3,4", QUEUE 0-6 per port) and ``buffers_config.j2`` (BUFFER_POOL,
BUFFER_PROFILE, BUFFER_PG ``<port>|0`` lossy and ``<port>|3-4`` lossless, BUFFER_QUEUE,
CABLE_LENGTH); PFC_WD per port as sonic-utilities ``pfcwd/main.py`` ``start_default`` writes it
(action drop, 200 ms detection and restoration, GLOBAL POLL_INTERVAL 200). PORT entries follow
the virtual switch's port map (sonic-buildimage ``device/virtual/x86_64-kvm_x86_64-r0/
Force10-S6000/port_config.ini``: four lanes per port, ``fortyGigE0/N`` aliases).

``sonic-cfggen -d --print-data`` prints the whole DB as JSON with 4-space indent and keys in
natural order (sonic-config-engine ``sonic-cfggen``: ``FormatConverter.to_serialized`` +
``json.dumps(..., indent=4)``); ``config save`` writes the same document to
``/etc/sonic/config_db.json`` (here ``<state_dir>/config_db.json``).
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.mgmt.sonic.text import natsorted_dict

ConfigDb = dict[str, dict[str, dict[str, Any]]]
CONFIG_DB_FILE = "config_db.json"
SHOWN_CONFIG_DB_PATH = "/etc/sonic/config_db.json"
MAP = "AZURE"
LOSSLESS_PRIORITIES = "3,4"
# qos_config.j2: DSCP -> TC of the AZURE map; every DSCP not listed goes to TC 1.
AZURE_DSCP_EXCEPTIONS = {3: 3, 4: 4, 5: 2, 8: 0, 46: 5, 48: 6}
AZURE_TC_TO_PG = {0: 0, 1: 0, 2: 0, 3: 3, 4: 4, 5: 0, 6: 0, 7: 7}
LANES_PER_PORT = 4
DEFAULT_MTU = 9100
CABLE = "5m"
WD_MS = "200"


@dataclass(frozen=True)
class SonicPort:
    """A front-panel port: SONiC name (``Ethernet0``), data-plane index (1 = ``eth1``)."""

    name: str
    index: int
    speed_bps: int | None
    mtu: int | None


def factory_config_db(hostname: str, mac: str, ports: list[SonicPort]) -> ConfigDb:
    """CONFIG_DB of a freshly installed switch with QoS and the PFC watchdog initialised."""
    db: ConfigDb = {
        "DEVICE_METADATA": {"localhost": _device_metadata(hostname, mac)},
        "PORT": {p.name: _port_entry(p) for p in ports},
    }
    db.update(_qos_tables(ports))
    db.update(_buffer_tables(ports))
    db["PFC_WD"] = {p.name: _watchdog_entry() for p in ports}
    db["PFC_WD"]["GLOBAL"] = {"POLL_INTERVAL": WD_MS}
    return db


def _device_metadata(hostname: str, mac: str) -> dict[str, Any]:
    return {
        "buffer_model": "traditional",
        "default_bgp_status": "up",
        "hostname": hostname,
        "hwsku": "Force10-S6000",
        "mac": mac,
        "platform": "x86_64-kvm_x86_64-r0",
        "type": "LeafRouter",
    }


def _port_entry(port: SonicPort) -> dict[str, Any]:
    first = (port.index - 1) * LANES_PER_PORT
    speed_mbps = (port.speed_bps or 40_000_000_000) // 1_000_000
    return {
        "admin_status": "up",
        "alias": f"fortyGigE0/{first}",
        "index": str(port.index - 1),
        "lanes": ",".join(str(25 + first + i) for i in range(LANES_PER_PORT)),
        "mtu": str(port.mtu or DEFAULT_MTU),
        "speed": str(max(1, speed_mbps)),
    }


def _watchdog_entry() -> dict[str, Any]:
    return {"action": "drop", "detection_time": WD_MS, "restoration_time": WD_MS}


def _identity(count: int) -> dict[str, str]:
    return {str(i): str(i) for i in range(count)}


def _qos_tables(ports: list[SonicPort]) -> ConfigDb:
    azure_dscp = {str(d): str(AZURE_DSCP_EXCEPTIONS.get(d, 1)) for d in range(64)}
    port_qos: dict[str, dict[str, Any]] = {
        p.name: {
            "dscp_to_tc_map": MAP,
            "pfc_enable": LOSSLESS_PRIORITIES,
            "pfc_to_queue_map": MAP,
            "pfcwd_sw_enable": LOSSLESS_PRIORITIES,
            "tc_to_pg_map": MAP,
            "tc_to_queue_map": MAP,
        }
        for p in ports
    }
    port_qos["global"] = {"dscp_to_tc_map": MAP}
    queues: dict[str, dict[str, Any]] = {}
    for p in ports:
        for q in range(7):
            entry: dict[str, Any] = {"scheduler": "scheduler.1" if q in (3, 4) else "scheduler.0"}
            if q in (3, 4):
                entry["wred_profile"] = "AZURE_LOSSLESS"
            queues[f"{p.name}|{q}"] = entry
    wred: dict[str, Any] = {"ecn": "ecn_all"}
    for colour in ("green", "yellow", "red"):
        wred[f"wred_{colour}_enable"] = "true"
        wred[f"{colour}_min_threshold"] = "1048576"
        wred[f"{colour}_max_threshold"] = "2097152"
        wred[f"{colour}_drop_probability"] = "5"
    return {
        "DSCP_TO_TC_MAP": {MAP: azure_dscp},
        "TC_TO_PRIORITY_GROUP_MAP": {MAP: {str(k): str(v) for k, v in AZURE_TC_TO_PG.items()}},
        "TC_TO_QUEUE_MAP": {MAP: _identity(8)},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: _identity(8)},
        "PORT_QOS_MAP": port_qos,
        "SCHEDULER": {
            "scheduler.0": {"type": "DWRR", "weight": "14"},
            "scheduler.1": {"type": "DWRR", "weight": "15"},
        },
        "WRED_PROFILE": {"AZURE_LOSSLESS": wred},
        "QUEUE": queues,
    }


def _lossless_profile(port: SonicPort) -> str:
    return f"pg_lossless_{(port.speed_bps or 40_000_000_000) // 1_000_000}_{CABLE}_profile"


def _buffer_tables(ports: list[SonicPort]) -> ConfigDb:
    profiles: dict[str, dict[str, Any]] = {
        "egress_lossless_profile": {
            "pool": "egress_lossless_pool",
            "size": "0",
            "static_th": "12766208",
        },
        "egress_lossy_profile": {"dynamic_th": "3", "pool": "egress_lossy_pool", "size": "1518"},
        "ingress_lossy_profile": {"dynamic_th": "3", "pool": "ingress_lossless_pool", "size": "0"},
    }
    pgs: dict[str, dict[str, Any]] = {}
    buffer_queues: dict[str, dict[str, Any]] = {}
    for p in ports:
        name = _lossless_profile(p)
        profiles[name] = {
            "dynamic_th": "0",
            "pool": "ingress_lossless_pool",
            "size": "56368",
            "xoff": "55120",
            "xon": "18432",
        }
        pgs[f"{p.name}|0"] = {"profile": "ingress_lossy_profile"}
        pgs[f"{p.name}|3-4"] = {"profile": name}
        buffer_queues[f"{p.name}|0-2"] = {"profile": "egress_lossy_profile"}
        buffer_queues[f"{p.name}|3-4"] = {"profile": "egress_lossless_profile"}
        buffer_queues[f"{p.name}|5-6"] = {"profile": "egress_lossy_profile"}
    return {
        "BUFFER_POOL": {
            "egress_lossless_pool": {"mode": "static", "size": "12766208", "type": "egress"},
            "egress_lossy_pool": {"mode": "dynamic", "size": "7326924", "type": "egress"},
            "ingress_lossless_pool": {
                "mode": "dynamic",
                "size": "12766208",
                "type": "ingress",
                "xoff": "4194112",
            },
        },
        "BUFFER_PROFILE": profiles,
        "BUFFER_PG": pgs,
        "BUFFER_QUEUE": buffer_queues,
        "CABLE_LENGTH": {MAP: {p.name: CABLE for p in ports}},
    }


def print_data(db: ConfigDb) -> str:
    """``sonic-cfggen -d --print-data``."""
    return json.dumps(natsorted_dict(db), indent=4)


def clone(db: ConfigDb) -> ConfigDb:
    """A deep copy (a candidate to patch)."""
    return copy.deepcopy(db)


class ConfigDbFile:
    """``/etc/sonic/config_db.json``: loaded at start, written by ``config save``."""

    def __init__(self, state_dir: Path | None) -> None:
        self.path = state_dir / CONFIG_DB_FILE if state_dir is not None else None
        self._memory: ConfigDb | None = None  # without a state directory (unit tests)

    def load(self) -> ConfigDb | None:
        """The saved DB, or None when there is none (or it is not a JSON object)."""
        if self.path is None:
            return clone(self._memory) if self._memory is not None else None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def save(self, db: ConfigDb) -> None:
        """Write atomically (a crash never leaves half a file)."""
        if self.path is None:
            self._memory = clone(db)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(print_data(db) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

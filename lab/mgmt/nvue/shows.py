"""``nv show …`` and ``nv config show|diff|history`` outputs.

Shapes, from NVIDIA's Cumulus Linux 5.14 user guide (CumulusNetworks/docs):

- ``nv show qos roce``: the table printed in ``RDMA-over-Converged-Ethernet-RoCE.md``
  (1ffba627), rows ``enable``, ``mode``, ``pfc.{pfc-priority, rx-enabled, tx-enabled,
  cable-length}``, ``congestion-control.{congestion-mode, enabled-tc, min-threshold,
  max-threshold, probability}``, ``trust.trust-mode``, ``lldp-app-tlv.{priority, protocol-id,
  selector}``; NVUE's table view prints the JSON keys, so ``-o json`` is that object. The
  guide prints no JSON of the three mapping/pool tables under it, so ``-o json`` leaves them
  out (their keys are unverified).
- ``nv show interface <if> counters qos``: "Show Qos Counters" of the QoS page, tables
  Ingress Buffer / Egress Queue / PFC / Qos Port Statistics with the column names used as keys
  (``egress-queue-stats.<tc>.{tx-frames, tx-bytes, tx-uc-buffer-discards, wred-discards}``,
  ``ingress-buffer-stats.<pg>.{rx-frames, rx-buffer-discards, rx-shared-buffer-discards}``,
  ``pfc-stats.<sp>.{rx-pause-frames, rx-pause-duration, tx-pause-frames,
  tx-pause-duration}``, ``port-stats.{rx-stats, tx-stats}``). The first two keys also appear
  in NVIDIA's own test code reading ``nv sh interface <if> counters qos egress-queue-stats
  -o json``.
- ``nv show interface <if> qos pfc-watchdog``: ``state`` and the "PFC WD Status" table
  (``traffic-class``, ``status`` OK|DEADLOCK, ``deadlock-count``).
- Packet trimming counters, in the Cumulus Linux 5.15 format (the release that added them and
  the one this personality reports; "Packet Trimming", CumulusNetworks/docs
  ``content/cumulus-linux-515/…/Packet-Trimming.md`` commit 504c13c2): ``nv show system
  forwarding packet-trim counters`` prints ``Global`` with ``trimmed-packets`` and
  ``trimmed-drop-packets``, then ``Port-Level`` with columns ``interface  trimmed-packets``;
  ``nv show interface <if> packet-trim counters`` (also answered as ``counters packet-trim``,
  the NVUE reference's form) prints ``traffic-class  trimmed-packets-tx`` per trimming class:
  the packets the class trimmed ("the number of trimmed packets for a specific interface by
  traffic class", NVUE reference), sent or dropped.  The port-level
  ``trimmed-packets`` is read as on Spectrum-5 ("the number of sent trimmed packets"), the
  data plane's TX_TRIM; the drops are its DROPPED_TRIM.  The guide prints no JSON of these:
  ``-o json`` gives the same fields under the printed labels (lab's choice, unverified).
- ``nv show interface <if> lldp neighbor``: ``{<neighbor-id>: {chassis: {system-name,
  chassis-id}, port: {name, description, type}}}`` (NVUE reference, as
  ``agent/device/lldp.py`` documents it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import yaml

from lab.mgmt.nvue.revisions import HistoryEntry
from lab.mgmt.nvue.translate import Effective
from lab.mgmt.nvue.tree import Tree
from lab.mgmt.switch import PortInfo

PRIORITIES = range(8)


def as_json(data: Any) -> str:
    """NVUE's ``-o json``: indented JSON."""
    return json.dumps(data, indent=2, sort_keys=False)


def as_yaml(data: Any) -> str:
    """NVUE's YAML output (``nv config show``, ``nv config diff``)."""
    if data in ({}, []):
        return ""
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False).rstrip("\n")


# ----------------------------------------------------------------------------- config


def diff_document(sets: Tree, unsets: Tree) -> list[dict[str, Any]]:
    """``nv config diff``: ``- set: …`` and ``- unset: …`` (NVUE CLI page examples)."""
    document: list[dict[str, Any]] = []
    if sets:
        document.append({"set": sets})
    if unsets:
        document.append({"unset": unsets})
    return document


def history_table(entries: list[HistoryEntry]) -> str:
    """``nv config history``: revision id, date, user, type, message (newest first)."""
    header = ("Rev ID", "Date", "User", "Type", "Message")
    rows = [
        (
            str(e.rev_id),
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.date)),
            e.user,
            e.kind,
            e.message,
        )
        for e in reversed(entries)
    ]
    return table(header, rows)


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """A plain column table as NVUE prints them (header, dashes, rows)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, tuple("-" * w for w in widths), *rows]]  # fmt: skip
    return "\n".join(lines)


# ----------------------------------------------------------------------------- qos roce


def roce_json(state: Effective) -> dict[str, Any]:
    """``nv show qos roce -o json`` (applied values)."""
    if not state.roce:
        return {"enable": "off"}
    ecn_tcs = sorted(state.ecn)
    # the RoCE class's thresholds (TC 3 by default), else the first marking class's
    shown = 3 if 3 in state.ecn else (ecn_tcs[0] if ecn_tcs else None)
    first = state.ecn[shown] if shown is not None else None
    return {
        "enable": "on",
        "mode": state.mode,
        "pfc": {
            "pfc-priority": ",".join(map(str, state.pfc_priorities)),
            "rx-enabled": "enabled" if state.pfc_rx and state.pfc_priorities else "disabled",
            "tx-enabled": "enabled" if state.pfc_tx and state.pfc_priorities else "disabled",
            "cable-length": state.cable_length,
        },
        "congestion-control": {
            "congestion-mode": "ECN",
            "enabled-tc": ",".join(map(str, ecn_tcs)),
            "min-threshold": first.min_bytes if first else None,
            "max-threshold": first.max_bytes if first else None,
            "probability": first.probability if first else None,
        },
        "trust": {"trust-mode": {"both": "pcp,dscp", "l3": "dscp", "l2": "pcp"}.get(
            state.trust, state.trust)},
        "lldp-app-tlv": {"priority": 3, "protocol-id": 4791, "selector": "UDP"},
    }  # fmt: skip


def roce_text(state: Effective) -> str:
    """``nv show qos roce``: the documented table, then the SP->TC/ETS table."""
    data = roce_json(state)
    rows: list[tuple[str, str, str]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            rows.append((key, "", ""))
            rows += [(f"  {k}", _cell(k, v), _cell(k, v)) for k, v in value.items()]
        else:
            rows.append((key, _cell(key, value), _cell(key, value)))
    text = table(("", "operational", "applied"), rows)
    ets = [
        (str(sp), str(sp), str(state.sp_to_tc[sp]), _weight(state, state.sp_to_tc[sp]))
        for sp in PRIORITIES
    ]
    return (
        text
        + "\nRoCE SP->TC mapping and ETS configurations\n"
        + "=" * 45
        + "\n"
        + table(("", "switch-prio", "traffic-class", "scheduler-weight"), ets)
    )


def _cell(key: str, value: Any) -> str:
    """Thresholds in KB/MB as the sample prints them (150000 B -> 146.48 KB)."""
    if key.endswith("-threshold") and isinstance(value, int):
        return f"{value / 1024:.2f} KB" if value < 1024 * 1024 else f"{value / 1048576:.2f} MB"
    return "" if value is None else str(value)


def _weight(state: Effective, tc: int) -> str:
    sched = state.scheduling[tc]
    return "strict-priority" if sched.strict else f"DWRR-{sched.weight or 0}%"


# ----------------------------------------------------------------------------- interfaces


def speed_label(bps: int | None) -> str:
    """``10000000`` -> ``10M`` (NVUE's link speed form: 1G, 100G, …)."""
    if not bps:
        return ""
    for unit, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if bps % scale == 0:
            return f"{bps // scale}{unit}"
    return str(bps)


def interfaces_json(ports: dict[str, PortInfo], counters: dict[str, Any]) -> dict[str, Any]:
    """``nv show interface -o json``: ``<swp>.{type, link.{speed, mtu, state}}``."""
    found: dict[str, Any] = {}
    for name, port in ports.items():
        dataplane = counters.get("ports", {}).get(_dataplane(name), {})
        up = dataplane.get("oper_up", True) is not False
        mtu = port.link.mtu if port.link is not None and port.link.mtu else 9216
        found[name] = {
            "type": "swp",
            "link": {
                "speed": speed_label(port.speed_bps),
                "mtu": mtu,
                "state": {"up" if up else "down": {}},
            },
        }
    return found


def lldp_neighbor_json(port: PortInfo) -> dict[str, Any]:
    """``nv show interface <if> lldp neighbor -o json``."""
    peer = port.link.peer if port.link is not None else None
    if peer is None:
        return {}
    return {
        peer.system_name: {
            "chassis": {
                "system-name": peer.system_name,
                "chassis-id": peer.chassis_mac,
                "management-address-ipv4": peer.management_address,
                "capability": {"router": {"enabled": "on" if peer.kind == "switch" else "off"}},
            },
            "port": {
                "name": peer.port,
                "description": peer.port,
                "type": "ifname",
                "id": peer.port_mac,
            },
        }
    }


def counters_qos_json(counters: dict[str, Any], name: str) -> dict[str, Any]:
    """``nv show interface <if> counters qos -o json`` from the data plane's counters."""
    port = counters.get("ports", {}).get(_dataplane(name), {})
    queues = port.get("queues", {})
    pfc = port.get("pfc", {})
    headroom = port.get("ingress", {}).get("headroom_drops", [0] * 8)
    egress = {}
    for tc in PRIORITIES:
        q = queues.get(str(tc), {})
        egress[str(tc)] = {
            "tx-frames": q.get("tx_packets", 0),
            "tx-bytes": q.get("tx_bytes", 0),
            "tx-uc-buffer-discards": q.get("tail_drops", 0)
            + q.get("watchdog", {}).get("dropped_packets", 0),
            "wred-discards": 0,  # the lab marks ECN, it never drops early
        }
    return {
        "egress-queue-stats": egress,
        "ingress-buffer-stats": {
            str(p): {
                "rx-frames": 0,  # the data plane counts received frames per port, not per PG
                "rx-buffer-discards": _at(headroom, p),
                "rx-shared-buffer-discards": 0,
            }
            for p in PRIORITIES
        },
        "pfc-stats": {
            str(p): {
                "rx-pause-frames": _at(pfc.get("rx_xoff"), p) + _at(pfc.get("rx_xon"), p),
                "rx-pause-duration": 0,
                "tx-pause-frames": _at(pfc.get("tx_xoff"), p) + _at(pfc.get("tx_xon"), p),
                "tx-pause-duration": 0,
            }
            for p in PRIORITIES
        },
        "port-stats": {
            "rx-stats": {"pause-frames": 0},
            "tx-stats": {
                "ecn-marked-packets": sum(int(q.get("ecn_marked", 0)) for q in queues.values()),
                "mc-buffer-discards": 0,
                "pause-frames": 0,
            },
        },
    }


def pfc_watchdog_json(counters: dict[str, Any], name: str, enabled: bool) -> dict[str, Any]:
    """``nv show interface <if> qos pfc-watchdog -o json``."""
    queues = counters.get("ports", {}).get(_dataplane(name), {}).get("queues", {})
    status = {}
    for tc in PRIORITIES:
        wd = queues.get(str(tc), {}).get("watchdog", {})
        status[str(tc)] = {
            "status": "DEADLOCK" if wd.get("state") == "stormed" else "OK",
            "deadlock-count": wd.get("storms_detected", 0),
        }
    return {"state": "enabled" if enabled else "disabled", "status": status}


def _at(values: Any, index: int) -> int:
    if isinstance(values, list) and index < len(values):
        return int(values[index])
    return 0


def _dataplane(swp: str) -> str:
    return "eth" + swp[3:]


# ----------------------------------------------------------------------------- trimming


def _trim(counters: dict[str, Any], swp: str) -> dict[str, Any]:
    found: dict[str, Any] = counters.get("ports", {}).get(_dataplane(swp), {}).get("trim", {})
    return found


def packet_trim_counters_json(counters: dict[str, Any], ports: list[str]) -> dict[str, Any]:
    """``nv show system forwarding packet-trim counters`` as data (see the module docstring)."""
    per_port = {swp: int(_trim(counters, swp).get("trim_sent", 0)) for swp in ports}
    dropped = sum(int(_trim(counters, swp).get("trim_dropped", 0)) for swp in ports)
    return {
        "global": {"trimmed-packets": sum(per_port.values()), "trimmed-drop-packets": dropped},
        "port-level": {swp: {"trimmed-packets": n} for swp, n in per_port.items()},
    }


def packet_trim_counters_text(data: dict[str, Any]) -> str:
    """The 5.15 text: ``Global`` rows (comma separators), then the ``Port-Level`` table."""
    glob = data["global"]
    lines = [
        "Global",
        f" trimmed-packets      {glob['trimmed-packets']:,}",
        f" trimmed-drop-packets {glob['trimmed-drop-packets']:,}",
        "Port-Level",
        "-------------",
    ]
    rows = [(swp, str(v["trimmed-packets"])) for swp, v in data["port-level"].items()]
    lines.append(table(("interface", "trimmed-packets"), rows))
    return "\n".join(lines)


def interface_trim_counters_json(
    counters: dict[str, Any], swp: str, classes: list[int]
) -> dict[str, Any]:
    """``nv show interface <if> packet-trim counters`` as data: per trimming traffic class,
    the packets it trimmed (the NVUE reference: "the number of trimmed packets for a specific
    interface by traffic class"; 5.19 names the column ``Trim Eligible Packets``)."""
    queues = counters.get("ports", {}).get(_dataplane(swp), {}).get("queues", {})
    return {
        str(tc): {"trimmed-packets-tx": int(queues.get(str(tc), {}).get("trimmed", 0))}
        for tc in classes
    }


def interface_trim_counters_text(data: dict[str, Any]) -> str:
    """The 5.15 table ``traffic-class  trimmed-packets-tx``."""
    rows = [(tc, str(v["trimmed-packets-tx"])) for tc, v in data.items()]
    return table(("traffic-class", "trimmed-packets-tx"), rows)

"""The sonic-utilities show commands the agent reads, filled from the live data-plane counters.

Formats are the expected outputs in sonic-net/sonic-utilities' own tests (commit
691b1bbc4fd2b71657d1b0b334c37136deb51526; copies in tests/data/platforms/sonic/upstream/):

* ``show pfc counters`` (scripts/pfcstat; tests/pfcstat_test.py ``show_pfc_counters_output``):
  a ``Port Rx`` and a ``Port Tx`` table, PFC0..PFC7 frames per port (XOFF and XON frames both
  count, as the SAI per-priority PFC packet counters do);
* ``show queue counters`` (scripts/queuestat; tests/queue_counter_test.py
  ``show_queue_counters``): per port ``For namespace :`` and a table of Port, TxQ (UC0..UC7),
  Counter/pkts, Counter/bytes, Drop/pkts (tail drops + watchdog drops), Drop/bytes (``N/A``:
  not counted);
* ``show queue wredcounters`` (tests/wred_queue_counter_test.py, one table per port):
  WredDrp/pkts (0: the lab's WRED only marks), WredDrp/bytes and EcnMarked/bytes ``N/A``,
  EcnMarked/pkts;
* ``show queue watermark unicast`` (scripts/watermarkstat; tests/wm_input/wm_test_vectors.py
  ``show_queue_wm_unicast_output``): per-queue egress watermark bytes;
* ``show priority-group watermark headroom|shared`` (``show_pg_wm_hdrm_output`` /
  ``show_pg_wm_shared_output``): the ingress watermark per priority split at the port's XOFF
  threshold (occupancy below XOFF is the shared pool, above it headroom);
* ``show priority-group drop counters`` (scripts/pg-drop; tests/pgdropstat_test.py
  ``show_pg_dropped_packet_stat``): headroom drops per priority;
* ``pfcwd show stats`` / ``show pfcwd stats`` (pfcwd/main.py; tests/pfcwd_input/
  pfcwd_test_vectors.py ``pfcwd_show_stats_output``): one row per watched queue with non-zero
  stats, ``<port>:<queue>``, STATUS, STORM DETECTED/RESTORED, TX/RX OK/DROP.

Packet trimming (sonic-utilities 202511, "[trim]: Add Packet Trimming CLI (#3830)" and "Drop
Counters CLI (#3993)"; SONiC doc/packet_trimming/packet-trimming-design.md §4):

* ``show queue counters [IFACE] --trim [-j]`` (scripts/queuestat ``-T``; tests/queue_counter_test
  vectors ``trim_counters_all`` / ``trim_eth0_counters`` and their ``_json``): per port ``For
  namespace :`` and Port, TxQ, Trim/pkts (SAI_QUEUE_STAT_TRIM_PACKETS), TrimSent/pkts
  (_TX_TRIM_PACKETS), TrimDrop/pkts (_DROPPED_TRIM_PACKETS); JSON ``{port: {queue:
  {trimdroppacket, trimpacket, trimsentpacket}}}``, two-space indent, keys sorted;
* ``show interfaces counters trim [IFACE] [-j]`` (utilities_common/portstat.py, ``portstat -T``;
  tests/portstat_input vector ``trim_counters_all``): IFACE, STATE (U/D), TRIM_PKTS,
  TRIM_TX_PKTS, TRIM_DRP_PKTS with comma separators; JSON ``{port: {STATE, TRIM_DRP_PKTS,
  TRIM_PKTS, TRIM_TX_PKTS}}``, four-space indent, keys sorted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.mgmt.sonic.text import simple_table, with_commas

PRIORITIES = range(8)


@dataclass(frozen=True)
class PortView:
    """One port as the show commands need it."""

    name: str  # SONiC name
    dataplane: str  # eth1
    xoff_bytes: int  # ingress XOFF threshold of the port


def _port(counters: dict[str, Any], view: PortView) -> dict[str, Any]:
    found: dict[str, Any] = counters.get("ports", {}).get(view.dataplane, {})
    return found


def _queue(counters: dict[str, Any], view: PortView, queue: int) -> dict[str, Any]:
    found: dict[str, Any] = _port(counters, view).get("queues", {}).get(str(queue), {})
    return found


def _per_priority(values: Any) -> list[int]:
    given = list(values) if isinstance(values, list) else []
    return [int(given[i]) if i < len(given) else 0 for i in PRIORITIES]


def pfc_counters(ports: Sequence[PortView], counters: dict[str, Any]) -> str:
    """``show pfc counters``."""
    titles = [f"PFC{p}" for p in PRIORITIES]
    tables = []
    for label, direction in (("Port Rx", "rx"), ("Port Tx", "tx")):
        rows = []
        for view in ports:
            pfc = _port(counters, view).get("pfc", {})
            xoff, xon = (
                _per_priority(pfc.get(f"{direction}_xoff")),
                _per_priority(pfc.get(f"{direction}_xon")),
            )
            rows.append([view.name, *(with_commas(xoff[p] + xon[p]) for p in PRIORITIES)])
        tables.append(simple_table([label, *titles], rows))
    return "\n\n".join(tables)


def _drops(queue: dict[str, Any]) -> int:
    return int(queue.get("tail_drops", 0)) + int(
        queue.get("watchdog", {}).get("dropped_packets", 0)
    )


def queue_counters(ports: Sequence[PortView], counters: dict[str, Any]) -> str:
    """``show queue counters``: one table per port, each after ``For namespace :``."""
    header = ["Port", "TxQ", "Counter/pkts", "Counter/bytes", "Drop/pkts", "Drop/bytes"]
    tables = []
    for view in ports:
        rows = []
        for q in PRIORITIES:
            queue = _queue(counters, view, q)
            rows.append(
                [
                    view.name,
                    f"UC{q}",
                    with_commas(int(queue.get("tx_packets", 0))),
                    with_commas(int(queue.get("tx_bytes", 0))),
                    with_commas(_drops(queue)),
                    "N/A",
                ]
            )
        tables.append("For namespace :\n" + simple_table(header, rows))
    return "\n\n".join(tables)


def wred_counters(ports: Sequence[PortView], counters: dict[str, Any]) -> str:
    """``show queue wredcounters``: one table per port."""
    header = ["Port", "TxQ", "WredDrp/pkts", "WredDrp/bytes", "EcnMarked/pkts", "EcnMarked/bytes"]
    tables = []
    for view in ports:
        rows = []
        for q in PRIORITIES:
            marked = int(_queue(counters, view, q).get("ecn_marked", 0))
            rows.append([view.name, f"UC{q}", "0", "N/A", with_commas(marked), "N/A"])
        tables.append(simple_table(header, rows))
    return "\n\n".join(tables)


def queue_watermark(ports: Sequence[PortView], counters: dict[str, Any]) -> str:
    """``show queue watermark unicast``."""
    rows = [
        [
            view.name,
            *(str(int(_queue(counters, view, q).get("watermark_bytes", 0))) for q in PRIORITIES),
        ]
        for view in ports
    ]
    header = ["Port", *(f"UC{q}" for q in PRIORITIES)]
    return "Egress shared pool occupancy per unicast queue:\n" + simple_table(header, rows)


def _ingress(counters: dict[str, Any], view: PortView, key: str) -> list[int]:
    return _per_priority(_port(counters, view).get("ingress", {}).get(key))


def pg_watermark(ports: Sequence[PortView], counters: dict[str, Any], kind: str) -> str:
    """``show priority-group watermark headroom|shared``."""
    rows = []
    for view in ports:
        marks = _ingress(counters, view, "watermark_bytes")
        if kind == "headroom":
            cells = [max(0, m - view.xoff_bytes) for m in marks]
        else:
            cells = [min(m, view.xoff_bytes) for m in marks]
        rows.append([view.name, *(str(c) for c in cells)])
    title = (
        "Ingress headroom per PG:"
        if kind == "headroom"
        else ("Ingress shared pool occupancy per PG:")
    )
    return title + "\n" + simple_table(["Port", *(f"PG{p}" for p in PRIORITIES)], rows)


def pg_drops(ports: Sequence[PortView], counters: dict[str, Any]) -> str:
    """``show priority-group drop counters``."""
    rows = [
        [view.name, *(with_commas(d) for d in _ingress(counters, view, "headroom_drops"))]
        for view in ports
    ]
    header = ["Port", *(f"PG{p}" for p in PRIORITIES)]
    return "Ingress PG dropped packets:\n" + simple_table(header, rows)


def pfcwd_stats(
    ports: Sequence[PortView], counters: dict[str, Any], watched: dict[str, list[int]], empty: bool
) -> str:
    """``pfcwd show stats [-e]``: queues the watchdog watches (``pfcwd_sw_enable``)."""
    header = [
        "QUEUE",
        "STATUS",
        "STORM DETECTED/RESTORED",
        "TX OK/DROP",
        "RX OK/DROP",
        "TX LAST OK/DROP",
        "RX LAST OK/DROP",
    ]
    rows = []
    for view in ports:
        for q in watched.get(view.name, []):
            queue = _queue(counters, view, q)
            wd = queue.get("watchdog", {})
            stats = [
                f"{wd.get('storms_detected', 0)}/{wd.get('storms_restored', 0)}",
                f"0/{wd.get('dropped_packets', 0)}",
                "0/0",
                "0/0",
                "0/0",
            ]
            if stats != ["0/0"] * len(stats) or empty:
                rows.append([f"{view.name}:{q}", str(wd.get("state", "operational")), *stats])
    return simple_table(header, rows)


# queuestat's trim columns and JSON keys, in its order (Trim, TrimSent, TrimDrop).
QUEUE_TRIM_COLUMNS = (
    ("Trim/pkts", "trimpacket", "trimmed"),
    ("TrimSent/pkts", "trimsentpacket", "trim_sent"),
    ("TrimDrop/pkts", "trimdroppacket", "trim_dropped"),
)
PORT_TRIM_COLUMNS = (
    ("TRIM_PKTS", "trimmed"),
    ("TRIM_TX_PKTS", "trim_sent"),
    ("TRIM_DRP_PKTS", "trim_dropped"),
)


def queue_trim_counters(
    ports: Sequence[PortView], counters: dict[str, Any], as_json: bool = False
) -> str:
    """``show queue counters [IFACE] --trim [-j]``."""
    if as_json:
        found = {
            view.name: {
                f"UC{q}": {
                    key: with_commas(int(_queue(counters, view, q).get(field, 0)))
                    for _, key, field in QUEUE_TRIM_COLUMNS
                }
                for q in PRIORITIES
            }
            for view in ports
        }
        return json.dumps(found, indent=2, sort_keys=True)
    header = ["Port", "TxQ", *(title for title, _, _ in QUEUE_TRIM_COLUMNS)]
    tables = []
    for view in ports:
        rows = []
        for q in PRIORITIES:
            queue = _queue(counters, view, q)
            cells = [with_commas(int(queue.get(field, 0))) for _, _, field in QUEUE_TRIM_COLUMNS]
            rows.append([view.name, f"UC{q}", *cells])
        tables.append("For namespace :\n" + simple_table(header, rows))
    return "\n\n".join(tables)


def _state(port: dict[str, Any]) -> str:
    """portstat's STATE: U (oper up), D (down), N/A (not read)."""
    if "oper_up" not in port:
        return "N/A"
    return "U" if port["oper_up"] else "D"


def interface_trim_counters(
    ports: Sequence[PortView], counters: dict[str, Any], as_json: bool = False
) -> str:
    """``show interfaces counters trim [IFACE] [-j]``."""
    rows = []
    for view in ports:
        port = _port(counters, view)
        trim = port.get("trim", {})
        cells = [with_commas(int(trim.get(field, 0))) for _, field in PORT_TRIM_COLUMNS]
        rows.append([view.name, _state(port), *cells])
    if as_json:
        titles = ["STATE", *(title for title, _ in PORT_TRIM_COLUMNS)]
        found = {row[0]: dict(zip(titles, row[1:], strict=True)) for row in rows}
        return json.dumps(found, indent=4, sort_keys=True)
    header = ["IFACE", "STATE", *(title for title, _ in PORT_TRIM_COLUMNS)]
    return simple_table(header, rows)

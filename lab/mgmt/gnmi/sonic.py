"""SONiC's gNMI server (sonic-gnmi's ``telemetry``), emulated for the lab's SONiC switch: the
Redis counter tables as the DB target ``COUNTERS_DB`` serves them.

Sources: sonic-net/sonic-gnmi (5ec1c20) ``doc/grpc_telemetry.md`` and its test data
(``testdata/COUNTERS:Ethernet68.txt``, ``COUNTERS:Ethernet68:Queues_expected.txt``,
``COUNTERS:Ethernet_wildcard_PFC_7_RX.txt``, ``COUNTERS:Ethernet68:Pfcwd.txt``,
``PERIODIC_WATERMARKS:Ethernet16:PriorityGroups_expected.txt``), its server
(``gnmi_server/server.go``: encodings JSON, JSON_IETF and PROTO, others UNIMPLEMENTED "unsupported
encoding"; gNMI version 0.7.0; ``client_subscribe.go``: an empty target is UNIMPLEMENTED "Empty
target data not supported", a path it cannot map NOT_FOUND "Invalid subscription path") and
``sonic_data_client/db_client.go`` (STREAM SAMPLE and ON_CHANGE -- field paths polled every
200 ms --, POLL, ONCE; ``MinSampleInterval`` 1 s).

The prefix's target is ``COUNTERS_DB``; a path is TABLE/KEY[/FIELD], each value a string:

- ``COUNTERS/<port>`` -> ``json_ietf_val`` of the port's field map
  (``SAI_PORT_STAT_PFC_<p>_RX_PKTS`` / ``_TX_PKTS``, ``SAI_PORT_STAT_IF_IN_OCTETS``...);
- ``COUNTERS/<port>/<FIELD>`` -> ``string_val``; ``COUNTERS/Ethernet*[/<FIELD>]`` -> one map
  keyed by port name;
- ``COUNTERS/<port>/Queues`` and ``COUNTERS/Ethernet*/Queues`` -> ``{"<port>:<q>": {...}}``:
  ``SAI_QUEUE_STAT_PACKETS``, ``_BYTES``, ``_DROPPED_PACKETS``, ``_SHARED_WATERMARK_BYTES``
  and ``SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS`` (COUNTERS:oid:<queue> on platforms that
  count it: sonic-net/SONiC ``doc/qos/ECN_and_WRED_statistics_HLD.md``, ebcd2a4a); on a
  queue the PFC watchdog watches (lossless, watchdog on) also ``PFC_WD_STATUS``
  operational|stormed, ``PFC_WD_ACTION``, ``PFC_WD_DETECTION_TIME`` / ``_RESTORATION_TIME``
  in µs (sonic-net/sonic-swss ``orchagent/pfcwdorch.cpp`` writes the configured ms × 1000),
  ``PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED`` / ``_RESTORED``, ``SAI_QUEUE_ATTR_PAUSE_STATUS``
  and ``SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES``;
- ``COUNTERS/<port>/Pfcwd``, ``COUNTERS/Ethernet*/Pfcwd`` -> the watched queues only;
- ``PERIODIC_WATERMARKS/<port>/PriorityGroups`` (and ``Ethernet*``) ->
  ``{"<port>:<pg>": {SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES,
  SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES}}``, the ingress watermark split at
  the port's XOFF threshold as the lab's ``show priority-group watermark`` splits it.

Left out, because the lab's data plane does not count them: ``SAI_QUEUE_STAT_DROPPED_BYTES``,
``SAI_PORT_STAT_PFC_<p>_ON2OFF_RX_PKTS``, the size-bucket and IP counters of a port, the
``<port>:<q>:periodic`` watermarks, ``PFC_WD_DETECTION_TIME_LEFT`` and the ``*_last`` fields
the watchdog's Lua script keeps for itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt import names
from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.nos import GnmiError, NosTree, not_found
from lab.mgmt.gnmi.paths import GPath
from lab.mgmt.gnmi.snapshot import PRIORITIES, View, port_index

TARGET = "COUNTERS_DB"
ALL_PORTS = "Ethernet*"
VIRTUAL = ("Queues", "Pfcwd")
PG_TABLE = "PERIODIC_WATERMARKS"
PG_KEY = "PriorityGroups"
PG_STAT = "SAI_INGRESS_PRIORITY_GROUP_STAT_"
PFC_FIELDS = tuple(
    f"SAI_PORT_STAT_PFC_{p}_{d}_PKTS" for p in PRIORITIES for d in ("RX", "TX")
)  # fmt: skip
PORT_FIELDS = (
    "SAI_PORT_STAT_IF_IN_OCTETS",
    "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
    "SAI_PORT_STAT_IF_IN_ERRORS",
    "SAI_PORT_STAT_IF_IN_DISCARDS",
    "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS",
    "SAI_PORT_STAT_IF_OUT_OCTETS",
    "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
    "SAI_PORT_STAT_IF_OUT_DISCARDS",
    *PFC_FIELDS,
)


class SonicTree(NosTree):
    nos = "sonic"
    default_port = 8080
    gnmi_version = "0.7.0"
    encodings = frozenset(
        {gnmi_pb2.Encoding.JSON, gnmi_pb2.Encoding.JSON_IETF, gnmi_pb2.Encoding.PROTO}
    )

    def __init__(self, ports: Sequence[str] = ()) -> None:
        super().__init__(ports)
        self.port_names = {sonic_name(p) for p in ports}

    def resolve(self, prefix: gnmi_pb2.Path, path: gnmi_pb2.Path) -> GPath:
        _check_target(prefix.target or path.target, prefix.origin or path.origin)
        try:
            query = paths.from_proto(prefix) + paths.from_proto(path)
        except paths.PathError as exc:
            raise GnmiError(
                grpc.StatusCode.NOT_FOUND, f"Invalid subscription path: {exc}"
            ) from None
        if any(keys for _, keys in query):
            raise not_found(query, "SONiC DB paths are TABLE/KEY/FIELD, without [key=value]")
        elems = paths.names(query)
        _check_shape(elems)
        if self.port_names and elems[1] != ALL_PORTS and elems[1] not in self.port_names:
            raise not_found(query, f"Invalid subscription path: no port {elems[1]} on this switch")
        return query

    def updates(self, query: GPath, view: View, encoding: int) -> list[gnmi_pb2.Update]:
        table, key, *rest = paths.names(query)
        ifnames = _ports(view, key, query)
        value = _value(table, rest, view, ifnames, wildcard=key == ALL_PORTS)
        if value is None:
            return []
        return [gnmi_pb2.Update(path=paths.to_proto(query), val=value)]

    def notification_prefix(self, prefix: gnmi_pb2.Path) -> gnmi_pb2.Path:
        return gnmi_pb2.Path(origin=prefix.origin, target=prefix.target or TARGET)

    def malformed(self, update: gnmi_pb2.Update) -> gnmi_pb2.Update:
        broken = gnmi_pb2.TypedValue(json_ietf_val=b'{"SAI_PORT_STAT_IF_IN_OCTETS": "12')
        return gnmi_pb2.Update(path=update.path, val=broken)

    def stray_path(self) -> GPath:
        return (("LAB_FAULT", ()), ("unrequested", ()))


def _check_target(target: str, origin: str) -> None:
    if origin:
        raise GnmiError(
            grpc.StatusCode.UNIMPLEMENTED,
            f"Unsupported origin: {origin} (the lab's SONiC serves the DB target {TARGET})",
        )
    if not target:
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED, "Empty target data not supported")
    if target != TARGET:
        raise GnmiError(
            grpc.StatusCode.NOT_FOUND,
            f"Invalid subscription path: target {target} is not served (the lab's SONiC "
            f"serves {TARGET})",
        )


def _check_shape(elems: tuple[str, ...]) -> None:
    """TABLE/KEY[/FIELD] as sonic-gnmi maps it for COUNTERS_DB (its virtual paths)."""
    where = "/".join(elems)
    if len(elems) == 3 and elems[0] == PG_TABLE and elems[2] == PG_KEY:
        return
    if elems[:1] == ("COUNTERS",) and len(elems) == 2:
        return
    if elems[:1] == ("COUNTERS",) and len(elems) == 3:
        if elems[2] in VIRTUAL or elems[2] in PORT_FIELDS:
            return
        raise GnmiError(
            grpc.StatusCode.NOT_FOUND,
            f"Invalid subscription path: {where}: the lab does not count {elems[2]}",
        )
    raise GnmiError(
        grpc.StatusCode.NOT_FOUND,
        f"Invalid subscription path: {where} (served: COUNTERS/<port>[/<field>|/Queues|/Pfcwd],"
        f" COUNTERS/Ethernet*[...], {PG_TABLE}/<port>/{PG_KEY})",
    )


def sonic_name(ifname: str) -> str:
    return names.nos_port_name("sonic", port_index(ifname))


def _ports(view: View, key: str, query: GPath) -> list[str]:
    if key == ALL_PORTS:
        return list(view.ports)
    for ifname in view.ports:
        if sonic_name(ifname) == key:
            return [ifname]
    raise not_found(query, f"Invalid subscription path: no port {key} on this switch")


def _value(
    table: str, rest: list[str], view: View, ifnames: list[str], *, wildcard: bool
) -> gnmi_pb2.TypedValue | None:
    if table == PG_TABLE:
        return _json({k: v for i in ifnames for k, v in pg_watermarks(view, i).items()})
    if rest and rest[0] in VIRTUAL:
        watched_only = rest[0] == "Pfcwd"
        return _json({k: v for i in ifnames for k, v in queues(view, i, watched_only).items()})
    if rest:
        field = rest[0]
        if not wildcard:
            return gnmi_pb2.TypedValue(string_val=port_fields(view, ifnames[0])[field])
        return _json({sonic_name(i): {field: port_fields(view, i)[field]} for i in ifnames})
    if not wildcard:
        return _json(port_fields(view, ifnames[0]))
    return _json({sonic_name(i): port_fields(view, i) for i in ifnames})


def _json(data: dict[str, Any]) -> gnmi_pb2.TypedValue:
    return gnmi_pb2.TypedValue(json_ietf_val=json.dumps(data).encode())


def port_fields(view: View, ifname: str) -> dict[str, str]:
    """A port's ``COUNTERS:oid:<port>`` fields the lab counts. PFC frames are XOFF and XON
    together (the SAI per-priority PFC packet counters); the lab does not split unicast from
    broadcast, so every packet counts as unicast."""
    port = view.port(ifname)
    drops = port.get("drops", {})
    in_discards = sum(int(v) for v in drops.values()) + sum(view.ingress(ifname, "headroom_drops"))
    fields = {
        "SAI_PORT_STAT_IF_IN_OCTETS": port.get("rx_bytes", 0),
        "SAI_PORT_STAT_IF_IN_UCAST_PKTS": port.get("rx_packets", 0),
        "SAI_PORT_STAT_IF_IN_ERRORS": port.get("rx_errors", 0),
        "SAI_PORT_STAT_IF_IN_DISCARDS": in_discards,
        "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS": port.get("rx_fcs_errors", 0),
        "SAI_PORT_STAT_IF_OUT_OCTETS": port.get("tx_bytes", 0),
        "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": port.get("tx_packets", 0),
        "SAI_PORT_STAT_IF_OUT_DISCARDS": sum(view.queue_drops(ifname, q) for q in PRIORITIES),
    }
    rx, tx = view.pfc_frames(ifname, "rx"), view.pfc_frames(ifname, "tx")
    for p in PRIORITIES:
        fields[f"SAI_PORT_STAT_PFC_{p}_RX_PKTS"] = rx[p]
        fields[f"SAI_PORT_STAT_PFC_{p}_TX_PKTS"] = tx[p]
    return {k: str(int(v)) for k, v in fields.items()}


def queues(view: View, ifname: str, watched_only: bool = False) -> dict[str, dict[str, str]]:
    """The ``Queues`` (or ``Pfcwd``) virtual path of one port."""
    watched = view.watched(ifname)
    found: dict[str, dict[str, str]] = {}
    for q in watched if watched_only else PRIORITIES:
        queue = view.queue(ifname, q)
        fields = {
            "SAI_QUEUE_STAT_PACKETS": str(int(queue.get("tx_packets", 0))),
            "SAI_QUEUE_STAT_BYTES": str(int(queue.get("tx_bytes", 0))),
            "SAI_QUEUE_STAT_DROPPED_PACKETS": str(view.queue_drops(ifname, q)),
            "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": str(int(queue.get("ecn_marked", 0))),
            "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(int(queue.get("watermark_bytes", 0))),
        }
        if q in watched:
            fields.update(watchdog_fields(view, ifname, q))
        found[f"{sonic_name(ifname)}:{q}"] = dict(sorted(fields.items()))
    return found


def watchdog_fields(view: View, ifname: str, queue: int) -> dict[str, str]:
    """The PFC watchdog's fields of a watched queue (pfcwdorch and its Lua plugin)."""
    config = view.watchdog(ifname) or {}
    counters = view.watchdog_counters(ifname, queue)
    depth = int(view.queue(ifname, queue).get("depth_bytes", 0))
    return {
        "PFC_WD_ACTION": str(config.get("action", "drop")),
        "PFC_WD_DETECTION_TIME": str(int(config.get("detection_ms", 0)) * 1000),
        "PFC_WD_RESTORATION_TIME": str(int(config.get("restoration_ms", 0)) * 1000),
        "PFC_WD_STATUS": str(counters.get("state", "operational")),
        "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": str(int(counters.get("storms_detected", 0))),
        "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": str(int(counters.get("storms_restored", 0))),
        "SAI_QUEUE_ATTR_PAUSE_STATUS": "true" if view.paused(ifname)[queue] else "false",
        "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": str(depth),
    }


def pg_watermarks(view: View, ifname: str) -> dict[str, dict[str, str]]:
    """``PERIODIC_WATERMARKS/<port>/PriorityGroups``: below XOFF the shared pool, above it
    the XOFF room (headroom)."""
    xoff = view.xoff_bytes(ifname)
    marks = view.ingress(ifname, "watermark_bytes")
    return {
        f"{sonic_name(ifname)}:{pg}": {
            f"{PG_STAT}SHARED_WATERMARK_BYTES": str(min(marks[pg], xoff)),
            f"{PG_STAT}XOFF_ROOM_WATERMARK_BYTES": str(max(0, marks[pg] - xoff)),
        }
        for pg in PRIORITIES
    }

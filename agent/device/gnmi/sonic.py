"""SONiC's gNMI telemetry: the Redis counter tables as the DB target ``COUNTERS_DB`` serves them.

sonic-net/sonic-gnmi (``doc/grpc_telemetry.md`` and ``testdata/`` at 5ec1c20): the path
prefix's target is the DB name, paths are ``TABLE/KEY[/FIELD]``, and a value is JSON_IETF of
the key's field map, every counter a decimal string. ``COUNTERS/Ethernet*`` answers one update
keyed by port name (``testdata/COUNTERS:Ethernet_wildcard_PFC_7_RX.txt``), with the SAI port
statistics ``SAI_PORT_STAT_PFC_<p>_{RX,TX}_PKTS``. The virtual path ``COUNTERS/Ethernet*/Queues``
maps ``<port>:<queue>`` to the queue's SAI statistics, with the PFC watchdog's fields on the
queues it watches (``testdata/COUNTERS:Ethernet68:Queues_expected.txt``); ``<port>:<q>:periodic``
keys carry periodic watermarks and are skipped.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from agent.device.gnmi.base import (
    CounterBuilder,
    Folder,
    GnmiProfile,
    Mode,
    QueueField,
    UpdateError,
    as_counter,
    decode_json,
)
from agent.device.gnmi.paths import GnmiPath
from agent.device.state import UnreadFamily

# SAI_PORT_STAT_PFC_<p>_RX_PKTS / _TX_PKTS -> (priority, direction)
_PFC_FIELDS = {
    f"SAI_PORT_STAT_PFC_{priority}_{direction.upper()}_PKTS": (priority, direction)
    for priority in range(8)
    for direction in ("rx", "tx")
}
_QUEUE_FIELDS: dict[str, QueueField] = {
    "SAI_QUEUE_STAT_PACKETS": "tx_packets",
    "SAI_QUEUE_STAT_BYTES": "tx_bytes",
    "SAI_QUEUE_STAT_DROPPED_PACKETS": "dropped_packets",
    "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": "ecn_marked_packets",
    "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "watermark_bytes",
}
_WATCHDOG_FIELDS = {
    "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": "storms_detected",
    "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": "storms_restored",
}


class SonicGnmi(GnmiProfile):
    platform = "sonic"
    # sonic-gnmi's own example (doc/grpc_telemetry.md) serves on 8080.
    default_port = 8080
    target = "COUNTERS_DB"
    encoding = "JSON_IETF"
    table_per_notification = True
    paths: ClassVar[tuple[tuple[str, Mode], ...]] = (
        ("COUNTERS/Ethernet*", "sample"),
        ("COUNTERS/Ethernet*/Queues", "sample"),
    )
    unread: ClassVar[dict[UnreadFamily, str]] = {
        "headroom_drops": "SONiC serves priority-group drops only by object id "
        "(COUNTERS:oid:...), not under a port's name",
    }

    def folder(self, path: GnmiPath) -> Folder:
        # One update per table a sample: nothing worth working out ahead.
        return functools.partial(self._fold, path)

    def _fold(self, path: GnmiPath, value: Any, builder: CounterBuilder) -> None:
        names = path.names()
        where = path.text()
        if value.WhichOneof("value") not in ("json_ietf_val", "json_val"):
            raise UpdateError(f"{where}: expected a JSON_IETF value")
        data = decode_json(getattr(value, value.WhichOneof("value")), where)
        if not isinstance(data, dict):
            raise UpdateError(f"{where}: expected a JSON object")
        if len(names) == 2 and names[0] == "COUNTERS":
            self._ports(names[1], data, builder, where)
        elif len(names) == 3 and names[0] == "COUNTERS" and names[2] == "Queues":
            self._queues(data, builder, where)
        else:
            raise UpdateError(f"{where}: not a path the agent subscribed to")

    @staticmethod
    def _ports(key: str, data: dict[str, Any], builder: CounterBuilder, where: str) -> None:
        by_port = data if "*" in key else {key: data}
        for port, fields in by_port.items():
            if not isinstance(fields, dict):
                raise UpdateError(f"{where}: {port}: expected the port's field map")
            # A port has ~100 fields; look up the 16 PFC ones rather than match every name.
            for name, (priority, direction) in _PFC_FIELDS.items():
                raw = fields.get(name)
                if raw is not None:
                    builder.pfc(port, priority, direction, as_counter(raw, where))

    @staticmethod
    def _queues(data: dict[str, Any], builder: CounterBuilder, where: str) -> None:
        for key, fields in data.items():
            port, _, queue_text = key.partition(":")
            if ":" in queue_text:
                continue  # <port>:<queue>:periodic -- the periodic watermark, not a counter
            if not queue_text.isdigit() or not isinstance(fields, dict):
                raise UpdateError(f"{where}: {key!r} is not <port>:<queue> with a field map")
            _queue_fields(port, int(queue_text), fields, builder, f"{where} {key}")


def _queue_fields(
    port: str, queue: int, fields: dict[str, Any], builder: CounterBuilder, where: str
) -> None:
    for name, counter in _QUEUE_FIELDS.items():
        raw = fields.get(name)
        if raw is not None:
            builder.queue(port, queue, counter, as_counter(raw, where))
    for name, watchdog_field in _WATCHDOG_FIELDS.items():
        raw = fields.get(name)
        if raw is not None:
            builder.watchdog(port, queue, watchdog_field, as_counter(raw, where))
    status = fields.get("PFC_WD_STATUS")
    if status is not None:
        # "operational" or "stormed" (sonic-utilities pfcwd show stats).
        builder.watchdog(port, queue, "stormed", status == "stormed")

"""Arista EOS's gNMI telemetry: OpenConfig with Arista's augments (``management api gnmi``).

Paths from aristanetworks/yang (63be023, ``EOS-4.36.1F/release/openconfig/models``). OpenConfig
has no PFC model, so the per-priority PFC frames come from Arista's augment of
``/interfaces/interface/ethernet`` with a ``pfc`` container
(``interfaces/arista-intf-augments.yang``):

- grouping ``arista-pfc-priority-counters``: ``priorities/priority[index]/state/in-frames``
  and ``out-frames``;
- grouping ``arista-pfc-watchdog-counters``:
  ``watchdog/tx-queues/tx-queue[index][queue-type]/state/stuck-count`` and ``recovery-count``.

Egress queues are OpenConfig QoS (``transmit-pkts``, ``transmit-octets``, ``dropped-pkts``)
with Arista's ``ecn-marked-pkts`` (``qos/arista-qos-augments.yang``). The watchdog is
subscribed ON_CHANGE: a storm shows when it starts, not at the next sample. EOS serves no
stormed flag: a queue whose stuck count exceeds its recovery count is in a storm now.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agent.device.gnmi.base import (
    CounterBuilder,
    Folder,
    GnmiProfile,
    Mode,
    QueueField,
    UpdateError,
    counter_value,
    ignore,
    key_number,
    key_text,
    pfc_folder,
    queue_folder,
    valid_priority,
)
from agent.device.gnmi.paths import GnmiPath
from agent.device.state import UnreadFamily

_PFC = {"in-frames": "rx", "out-frames": "tx"}
_QUEUE: dict[str, QueueField] = {
    "transmit-pkts": "tx_packets",
    "transmit-octets": "tx_bytes",
    "dropped-pkts": "dropped_packets",
    "ecn-marked-pkts": "ecn_marked_packets",
}
_WATCHDOG = {"stuck-count": "storms_detected", "recovery-count": "storms_restored"}


class EosGnmi(GnmiProfile):
    platform = "arista_eos"
    default_port = 6030
    origin = "openconfig"
    encoding = "PROTO"
    paths: ClassVar[tuple[tuple[str, Mode], ...]] = (
        ("/interfaces/interface[name=*]/ethernet/pfc/priorities/priority[index=*]/state",
         "sample"),
        ("/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state",
         "sample"),
        ("/interfaces/interface[name=*]/ethernet/pfc/watchdog/tx-queues"
         "/tx-queue[index=*][queue-type=*]/state", "on_change"),
    )  # fmt: skip
    unread: ClassVar[dict[UnreadFamily, str]] = {
        "headroom_drops": "EOS publishes no per-priority headroom drop counter over gNMI",
    }

    def folder(self, path: GnmiPath) -> Folder:
        names = path.names()
        where = path.text()
        leaf = names[-1]
        if names[:2] == ("interfaces", "interface") and "pfc" in names:
            interface = key_text(path, "interface", "name")
            if "priority" in names and leaf in _PFC:
                priority = key_number(path, "priority", "index")
                return pfc_folder(interface, priority, _PFC[leaf], where)
            if "tx-queue" in names and leaf in _WATCHDOG:
                return _watchdog_folder(path, interface, _WATCHDOG[leaf], where)
            return ignore
        if names[:3] == ("qos", "interfaces", "interface"):
            if "queue" in names and leaf in _QUEUE:
                interface = key_text(path, "interface", "interface-id")
                queue = key_number(path, "queue", "name")
                return queue_folder(interface, queue, _QUEUE[leaf], where)
            return ignore
        raise UpdateError(f"{where}: not a path the agent subscribed to")


def _watchdog_folder(path: GnmiPath, interface: str, name: str, where: str) -> Folder:
    if key_text(path, "tx-queue", "queue-type") != "UNICAST":
        return ignore  # RoCE is unicast; a multicast queue's watchdog is not the lossless class
    queue = valid_priority(key_number(path, "tx-queue", "index"))

    def fold(value: Any, builder: CounterBuilder) -> None:
        builder.watchdog(interface, queue, name, counter_value(value, where))
        so_far = builder.interfaces[interface].watchdog[queue]
        detected, restored = so_far.get("storms_detected", 0), so_far.get("storms_restored", 0)
        builder.watchdog(interface, queue, "stormed", int(detected) > int(restored))

    return fold

"""Cumulus Linux's (NVUE) gNMI telemetry: Subscribe only, the ``/qos`` tree.

CumulusNetworks/docs ``content/cumulus-linux-516/Monitoring-and-Troubleshooting/gNMI
Streaming.md`` (Cumulus Linux 5.16): the switch serves gNMI on port 9339, Capabilities and
Subscribe (STREAM sample and ON_CHANGE) only -- no Get or Set --, wildcard keys, PROTO or JSON
encoding. Per switch priority, ``in-pause-pkts`` and ``out-pause-pkts`` (pause frames received
and sent); per egress queue ``transmit-pkts``, ``transmit-octets``, ``wred-dropped-pkts``,
``ecn-marked-pkts`` and ``max-queue-len`` (bytes, since the watermarks were last cleared). The
page lists no PFC watchdog path and no headroom drop counter.
"""

from __future__ import annotations

from typing import ClassVar

from agent.device.gnmi.base import (
    Folder,
    GnmiProfile,
    Mode,
    QueueField,
    UpdateError,
    ignore,
    key_number,
    key_text,
    pfc_folder,
    queue_folder,
)
from agent.device.gnmi.paths import GnmiPath
from agent.device.state import UnreadFamily

_PAUSE = {"in-pause-pkts": "rx", "out-pause-pkts": "tx"}
_QUEUE: dict[str, QueueField] = {
    "transmit-pkts": "tx_packets",
    "transmit-octets": "tx_bytes",
    "wred-dropped-pkts": "dropped_packets",
    "ecn-marked-pkts": "ecn_marked_packets",
    "max-queue-len": "watermark_bytes",
}
_INTERFACE = ("qos", "interfaces", "interface")


class NvueGnmi(GnmiProfile):
    platform = "cumulus_nvue"
    default_port = 9339
    encoding = "PROTO"
    paths: ClassVar[tuple[tuple[str, Mode], ...]] = (
        ("/qos/interfaces/interface[interface-id=*]/switch-priority[priority=*]/state/counters",
         "sample"),
        ("/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state",
         "sample"),
    )  # fmt: skip
    unread: ClassVar[dict[UnreadFamily, str]] = {
        "watchdog": "Cumulus Linux publishes no PFC watchdog path over gNMI",
        "headroom_drops": "Cumulus Linux publishes no headroom drop counter over gNMI",
    }

    def folder(self, path: GnmiPath) -> Folder:
        names = path.names()
        where = path.text()
        if names[:3] != _INTERFACE:
            raise UpdateError(f"{where}: not a path the agent subscribed to")
        interface = key_text(path, "interface", "interface-id")
        leaf = names[-1]
        if "switch-priority" in names and leaf in _PAUSE:
            priority = key_number(path, "switch-priority", "priority")
            return pfc_folder(interface, priority, _PAUSE[leaf], where)
        if "queue" in names and leaf in _QUEUE:
            return queue_folder(interface, key_number(path, "queue", "name"), _QUEUE[leaf], where)
        return ignore

"""NVIDIA Cumulus Linux's gNMI agent (``nv set system gnmi-server``), for the lab's NVUE switch.

Source: CumulusNetworks/docs ``content/cumulus-linux-516/Monitoring-and-Troubleshooting/gNMI
Streaming.md`` (1a0006d8):

- "the gNMI agent that listens over port 9339" (the default port);
- RPC methods: Capabilities; subscriptions STREAM (sample_interval, updates_only,
  suppress_redundant, heartbeat_interval) and ON_CHANGE (updates_only, heartbeat_interval);
  notifications sync_response, update, delete. "Cumulus Linux does not support GET or SET RPC
  events": both answer UNIMPLEMENTED, and so do POLL and ONCE (listed for the NetQ agent only);
- encodings: "the Protobuf and JSON data formats" (PROTO, JSON);
- wildcard keys (``interface[interface-id=*]``, ``queue[name=*]``), no regular expressions;
- the QoS metrics: ``/qos/interfaces/interface[interface-id]/switch-priority[priority]/state/
  counters/{in-pause-pkts, out-pause-pkts, in-discards}``, ``.../state/{in-pause-duration,
  out-pause-duration}`` (µs), ``/qos/interfaces/interface[interface-id]/output/queues/
  queue[name]/state/{transmit-pkts, transmit-octets, ecn-marked-pkts, wred-dropped-pkts,
  no-buffer-uc-dropped-pkts, max-queue-len, instant-queue-len}``.

The page documents no PFC watchdog path, so none is served (the watchdog is read over
``nv show interface <if> qos pfc-watchdog``). The pause durations are in the schema but the
lab's data plane does not total paused time, so they give nothing.
"""

from __future__ import annotations

from typing import ClassVar

from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt import names
from lab.mgmt.gnmi.nos import Mode
from lab.mgmt.gnmi.openconfig import Leaf, OpenConfigTree, under
from lab.mgmt.gnmi.paths import GPath, elem, keyed
from lab.mgmt.gnmi.snapshot import PRIORITIES, View, port_index

_QOS_IF = "/qos/interfaces/interface[interface-id]"
_PRIO = f"{_QOS_IF}/switch-priority[priority]/state"
_QUEUE = f"{_QOS_IF}/output/queues/queue[name]/state"
PRIORITY_COUNTERS = ("in-pause-pkts", "out-pause-pkts", "in-discards")
QUEUE_LEAVES = (
    "transmit-pkts", "transmit-octets", "ecn-marked-pkts", "wred-dropped-pkts",
    "no-buffer-uc-dropped-pkts", "max-queue-len", "instant-queue-len",
)  # fmt: skip


class NvueTree(OpenConfigTree):
    nos = "nvue"
    default_port = 9339
    gnmi_version = "0.8.0"  # the gnmi.proto the lab serves (pygnmi's v0.8.0 spec)
    models = (("openconfig-qos", "OpenConfig working group", ""),)
    encodings = frozenset({gnmi_pb2.Encoding.JSON, gnmi_pb2.Encoding.PROTO})
    modes = frozenset({Mode.STREAM})
    get_refusal = "Cumulus Linux does not support GET or SET RPC events (gNMI Streaming.md)"
    schema_text: ClassVar[tuple[str, ...]] = (
        *(f"{_PRIO}/counters/{leaf}" for leaf in PRIORITY_COUNTERS),
        f"{_PRIO}/in-pause-duration",
        f"{_PRIO}/out-pause-duration",
        *(f"{_QUEUE}/{leaf}" for leaf in QUEUE_LEAVES),
    )  # fmt: skip

    def leaves(self, view: View) -> list[Leaf]:
        found: list[Leaf] = []
        for ifname in view.ports:
            name = names.nos_port_name("nvue", port_index(ifname))
            found += switch_priorities(view, ifname, name)
            found += queue_counters(view, ifname, name)
        return found


def _qos_interface(name: str) -> GPath:
    return (elem("qos"), elem("interfaces"), keyed("interface", {"interface-id": name}))


def switch_priorities(view: View, ifname: str, name: str) -> list[Leaf]:
    """Pause frames (XOFF and XON) received and sent per priority, and the priority's
    ingress drops (headroom overflow)."""
    rx, tx = view.pfc_frames(ifname, "rx"), view.pfc_frames(ifname, "tx")
    discards = view.ingress(ifname, "headroom_drops")
    found: list[Leaf] = []
    for p in PRIORITIES:
        priority = keyed("switch-priority", {"priority": str(p)})
        counters = (*_qos_interface(name), priority, elem("state"), elem("counters"))
        values = {"in-pause-pkts": rx[p], "out-pause-pkts": tx[p], "in-discards": discards[p]}
        found += under(counters, values)
    return found


def queue_counters(view: View, ifname: str, name: str) -> list[Leaf]:
    """Egress queue counters; WRED drops are 0 because the lab's WRED only marks, the
    no-buffer drops are the tail drops and the watchdog's, lengths in bytes."""
    found: list[Leaf] = []
    for q in PRIORITIES:
        queue = view.queue(ifname, q)
        base = (*_qos_interface(name), elem("output"), elem("queues"))
        state = (*base, elem("queue", name=str(q)), elem("state"))
        values = {
            "transmit-pkts": int(queue.get("tx_packets", 0)),
            "transmit-octets": int(queue.get("tx_bytes", 0)),
            "ecn-marked-pkts": int(queue.get("ecn_marked", 0)),
            "wred-dropped-pkts": 0,
            "no-buffer-uc-dropped-pkts": view.queue_drops(ifname, q),
            "max-queue-len": int(queue.get("watermark_bytes", 0)),
            "instant-queue-len": int(queue.get("depth_bytes", 0)),
        }
        found += under(state, values)
    return found

"""Arista EOS's gNMI server (``management api gnmi``), emulated for the lab's EOS switch.

Sources:

- port 6030: aristanetworks/openmgmt ``docs/configuration/openconfig.md`` (e38ff27): "the gNMI
  server, which listens by default on TCP/6030", with ``management api gnmi`` /
  ``transport grpc <name>``;
- paths: aristanetworks/yang (63be023), release ``EOS-4.36.1F``:
  ``openconfig/public/release/models/interfaces/openconfig-interfaces.yang`` (interface
  counters), ``openconfig-if-ethernet.yang`` (``in-mac-pause-frames``),
  ``qos/openconfig-qos-interfaces.yang`` (queue ``transmit-pkts``, ``transmit-octets``,
  ``dropped-pkts``, ``ecn-marked-pkts``), Arista's augments
  ``release/openconfig/models/qos/arista-qos-augments.yang`` (``ecn-marked-pkts`` on the queue
  state, line ~337) and ``release/openconfig/models/interfaces/arista-intf-augments.yang``
  (the ``pfc`` container on ``/interfaces/interface/ethernet``, line ~1055: groupings
  ``arista-pfc-priority-counters`` -- ``priorities/priority[index]/state/{index, in-frames,
  out-frames}`` -- and ``arista-pfc-watchdog-counters`` --
  ``watchdog/tx-queues/tx-queue[index][queue-type]/state/{index, queue-type, stuck-count,
  recovery-count}``, stuck/recovery counter32, queue-type UNICAST|MULTICAST);
  ``release/openconfig/models/not-supported/arista-qos-notsupported-deviations.yang`` drops
  ``max-queue-len``, ``avg-queue-len`` and ``ecn-marked-octets`` from EOS's queue state, so they
  are not served here either.

RPCs: Capabilities, Get and Subscribe (STREAM with SAMPLE or ON_CHANGE, POLL, ONCE); origin
``openconfig`` or none. Values typed (PROTO: ``uint_val``), or JSON / JSON_IETF.

Not served because the lab does not measure them: ``in-mac-pause-frames`` /
``out-mac-pause-frames`` (802.3x link PAUSE; the lab neither sends nor counts it, PFC is under
the ``pfc`` augment), the watchdog's ``*-last-occurred`` timestamps, ``out-errors`` and the
unicast/multicast split of the packet counters. The schema knows them, so a request for them
is accepted and gives nothing.
"""

from __future__ import annotations

from typing import ClassVar

from lab.mgmt import names
from lab.mgmt.gnmi.openconfig import Leaf, OpenConfigTree, under
from lab.mgmt.gnmi.paths import GPath, elem, keyed
from lab.mgmt.gnmi.snapshot import PRIORITIES, View, port_index

_IF = "/interfaces/interface[name]"
_PFC = f"{_IF}/ethernet/pfc"
_TXQ = f"{_PFC}/watchdog/tx-queues/tx-queue[index][queue-type]/state"
_QUEUE = "/qos/interfaces/interface[interface-id]/output/queues/queue[name]/state"
IF_COUNTERS = (
    "in-octets", "in-pkts", "in-errors", "in-fcs-errors", "in-discards",
    "out-octets", "out-pkts", "out-discards",
)  # fmt: skip
UNMEASURED = (
    f"{_IF}/state/counters/out-errors",
    f"{_IF}/state/counters/in-unicast-pkts",
    f"{_IF}/state/counters/out-unicast-pkts",
    f"{_IF}/ethernet/state/counters/in-mac-pause-frames",
    f"{_IF}/ethernet/state/counters/out-mac-pause-frames",
    f"{_TXQ}/stuck-count-last-occurred",
    f"{_TXQ}/recovery-count-last-occurred",
)
QUEUE_LEAVES = ("transmit-pkts", "transmit-octets", "dropped-pkts", "ecn-marked-pkts")


class EosTree(OpenConfigTree):
    nos = "eos"
    default_port = 6030
    gnmi_version = "0.8.0"  # the gnmi.proto the lab serves (pygnmi's v0.8.0 spec)
    models = (
        ("openconfig-interfaces", "OpenConfig working group", ""),
        ("openconfig-if-ethernet", "OpenConfig working group", ""),
        ("openconfig-qos", "OpenConfig working group", ""),
        ("arista-intf-augments", "Arista Networks, Inc.", ""),
        ("arista-qos-augments", "Arista Networks, Inc.", ""),
    )
    schema_text: ClassVar[tuple[str, ...]] = (
        *(f"{_IF}/state/counters/{leaf}" for leaf in IF_COUNTERS),
        *(f"{_PFC}/priorities/priority[index]/state/{leaf}"
          for leaf in ("index", "in-frames", "out-frames")),
        *(f"{_TXQ}/{leaf}" for leaf in ("index", "queue-type", "stuck-count", "recovery-count")),
        *(f"{_QUEUE}/{leaf}" for leaf in QUEUE_LEAVES),
        *UNMEASURED,
    )  # fmt: skip

    def leaves(self, view: View) -> list[Leaf]:
        found: list[Leaf] = []
        for ifname in view.ports:
            name = names.nos_port_name("eos", port_index(ifname))
            found += interface_counters(view, ifname, name)
            found += pfc_priorities(view, ifname, name)
            found += watchdog_queues(view, ifname, name)
            found += queue_counters(view, ifname, name)
        return found


def _interface(name: str) -> GPath:
    return (elem("interfaces"), elem("interface", name=name))


def interface_counters(view: View, ifname: str, name: str) -> list[Leaf]:
    """``/interfaces/interface[name]/state/counters``: in-discards are the forwarding drops
    (TTL, no route, ARP) and ingress headroom drops, out-discards every queue's drops."""
    port = view.port(ifname)
    drops = port.get("drops", {})
    in_discards = sum(int(v) for v in drops.values()) + sum(view.ingress(ifname, "headroom_drops"))
    values = {
        "in-octets": int(port.get("rx_bytes", 0)),
        "in-pkts": int(port.get("rx_packets", 0)),
        "in-errors": int(port.get("rx_errors", 0)),
        "in-fcs-errors": int(port.get("rx_fcs_errors", 0)),
        "in-discards": in_discards,
        "out-octets": int(port.get("tx_bytes", 0)),
        "out-pkts": int(port.get("tx_packets", 0)),
        "out-discards": sum(view.queue_drops(ifname, q) for q in PRIORITIES),
    }
    return under((*_interface(name), elem("state"), elem("counters")), values)


def pfc_priorities(view: View, ifname: str, name: str) -> list[Leaf]:
    """Arista's ``arista-pfc-priority-counters``: PFC frames (XOFF and XON) per priority."""
    rx, tx = view.pfc_frames(ifname, "rx"), view.pfc_frames(ifname, "tx")
    found: list[Leaf] = []
    for p in PRIORITIES:
        base = (*_interface(name), elem("ethernet"), elem("pfc"), elem("priorities"))
        state = (*base, elem("priority", index=str(p)), elem("state"))
        found.append(Leaf((*state, elem("index")), p, "uint8"))
        found += under(state, {"in-frames": rx[p], "out-frames": tx[p]})
    return found


def watchdog_queues(view: View, ifname: str, name: str) -> list[Leaf]:
    """Arista's ``arista-pfc-watchdog-counters``, for the queues the watchdog watches."""
    found: list[Leaf] = []
    for q in view.watched(ifname):
        wd = view.watchdog_counters(ifname, q)
        entry = keyed("tx-queue", {"index": str(q), "queue-type": "UNICAST"})
        base = (*_interface(name), elem("ethernet"), elem("pfc"), elem("watchdog"))
        state = (*base, elem("tx-queues"), entry, elem("state"))
        found.append(Leaf((*state, elem("index")), q, "uint8"))
        found.append(Leaf((*state, elem("queue-type")), "UNICAST", "enum"))
        counts = {
            "stuck-count": int(wd.get("storms_detected", 0)),
            "recovery-count": int(wd.get("storms_restored", 0)),
        }
        found += under(state, counts, "counter32")
    return found


def queue_counters(view: View, ifname: str, name: str) -> list[Leaf]:
    """``/qos/interfaces/interface[interface-id]/output/queues/queue[name]/state``."""
    found: list[Leaf] = []
    for q in PRIORITIES:
        queue = view.queue(ifname, q)
        base = (elem("qos"), elem("interfaces"), keyed("interface", {"interface-id": name}))
        state = (*base, elem("output"), elem("queues"), elem("queue", name=str(q)), elem("state"))
        values = {
            "transmit-pkts": int(queue.get("tx_packets", 0)),
            "transmit-octets": int(queue.get("tx_bytes", 0)),
            "dropped-pkts": view.queue_drops(ifname, q),
            "ecn-marked-pkts": int(queue.get("ecn_marked", 0)),
        }
        found += under(state, values)
    return found

"""Per-port counters and the JSON shape returned by the ``counters`` control command."""

from __future__ import annotations

from typing import Any

from lossless.config import NUM_CLASSES
from lossless.pfc import IngressAccounting
from lossless.queues import EgressQueue
from lossless.watchdog import PortWatchdog


class PortCounters:
    """Cumulative rx/tx, forwarding-drop and PFC frame counters of one port."""

    __slots__ = (
        "drop_arp_unresolved",
        "drop_no_route",
        "drop_ttl",
        "fault_corrupted",
        "fault_drops",
        "icmp_rate_limited",
        "icmp_time_exceeded",
        "pfc_rx_xoff",
        "pfc_rx_xon",
        "pfc_tx_xoff",
        "pfc_tx_xon",
        "rx_bytes",
        "rx_errors",
        "rx_fcs_errors",
        "rx_overruns",
        "rx_packets",
        "trim_sent",
        "tx_bytes",
        "tx_packets",
    )

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Zero everything."""
        self.rx_packets = 0
        self.rx_bytes = 0
        self.rx_overruns = 0
        self.rx_errors = 0
        self.rx_fcs_errors = 0
        self.tx_packets = 0
        self.tx_bytes = 0
        self.drop_ttl = 0
        self.drop_no_route = 0
        self.drop_arp_unresolved = 0
        self.icmp_time_exceeded = 0
        self.icmp_rate_limited = 0
        self.fault_drops = 0
        self.fault_corrupted = 0
        self.pfc_rx_xoff = [0] * NUM_CLASSES
        self.pfc_rx_xon = [0] * NUM_CLASSES
        self.pfc_tx_xoff = [0] * NUM_CLASSES
        self.pfc_tx_xon = [0] * NUM_CLASSES
        # Per queue that trimmed: its trimmed frames sent from the trim queue (SAI
        # SAI_QUEUE_STAT_TX_TRIM_PACKETS; trimmed and trim_dropped live on the queue).
        self.trim_sent = [0] * NUM_CLASSES


def queues_snapshot(
    queues: list[EgressQueue[bytearray]],
    watchdog: PortWatchdog,
    trim_sent: list[int] | None = None,
) -> dict[str, Any]:
    """The ``counters.ports.<ifname>.queues`` object: each egress queue with its watchdog and
    its trimming counters (``trim_sent``: :attr:`PortCounters.trim_sent`)."""
    sent = trim_sent if trim_sent is not None else [0] * NUM_CLASSES
    queue_view: dict[str, Any] = {}
    for tc in range(NUM_CLASSES):
        q = queues[tc]
        wd = watchdog.classes[tc]
        queue_view[str(tc)] = {
            "tx_packets": q.tx_packets,
            "tx_bytes": q.tx_bytes,
            "tail_drops": q.tail_drops,
            "ecn_marked": q.ecn_marked,
            "depth_bytes": q.depth_bytes,
            "watermark_bytes": q.watermark_bytes,
            # Packet trimming, as SAI counts it per queue (SAI_QUEUE_STAT_TRIM_PACKETS,
            # _TX_TRIM_PACKETS, _DROPPED_TRIM_PACKETS; SONiC packet-trimming-design.md §2.4):
            # frames this queue trimmed, those sent from the trim queue, those dropped there.
            "trimmed": q.trimmed,
            "trim_sent": sent[tc],
            "trim_dropped": q.trim_dropped,
            "watchdog": {
                "state": wd.state,
                "storms_detected": wd.storms_detected,
                "storms_restored": wd.storms_restored,
                "dropped_packets": wd.dropped_packets,
            },
        }
    return queue_view


def port_snapshot(
    counters: PortCounters,
    oper_up: bool,
    paused: list[bool],
    ingress: IngressAccounting,
    queues: dict[str, Any],
) -> dict[str, Any]:
    """The ``counters.ports.<ifname>`` object of the control protocol (``queues``: the port's
    :func:`queues_snapshot`)."""
    return {
        "rx_packets": counters.rx_packets,
        "rx_bytes": counters.rx_bytes,
        # Extension: frames the kernel dropped before the switch read them (it fell behind).
        "rx_overruns": counters.rx_overruns,
        # Frames that arrived damaged (bad FCS), counted instead of rx_packets, then dropped.
        "rx_fcs_errors": counters.rx_fcs_errors,
        "rx_errors": counters.rx_errors,
        "oper_up": oper_up,
        "tx_packets": counters.tx_packets,
        "tx_bytes": counters.tx_bytes,
        "drops": {
            "ttl": counters.drop_ttl,
            "no_route": counters.drop_no_route,
            "arp_unresolved": counters.drop_arp_unresolved,
        },
        # ICMP time exceeded sent for packets whose TTL expired arriving on this port, and
        # those the switch-wide rate limit suppressed.
        "icmp_time_exceeded": counters.icmp_time_exceeded,
        "icmp_rate_limited": counters.icmp_rate_limited,
        # Lab-only (fault injection): never shown by the management plane.
        "fault_drops": counters.fault_drops,
        "fault_corrupted": counters.fault_corrupted,
        "pfc": {
            "rx_xoff": list(counters.pfc_rx_xoff),
            "rx_xon": list(counters.pfc_rx_xon),
            "tx_xoff": list(counters.pfc_tx_xoff),
            "tx_xon": list(counters.pfc_tx_xon),
        },
        "paused": list(paused),
        "ingress": {
            "buffered_bytes": list(ingress.buffered_bytes),
            "watermark_bytes": list(ingress.watermark_bytes),
            "headroom_drops": list(ingress.headroom_drops),
        },
        # The port's trimming counters (SAI_PORT_STAT_TRIM_PACKETS, _TX_TRIM_PACKETS,
        # _DROPPED_TRIM_PACKETS): the sums over its queues.
        "trim": {
            key: sum(int(q.get(key, 0)) for q in queues.values())
            for key in ("trimmed", "trim_sent", "trim_dropped")
        },
        "queues": queues,
    }

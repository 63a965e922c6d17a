"""Read captures (pcap or pcapng, as tcpdump/tshark write them) as (time, frame) pairs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scapy.error import Scapy_Exception
from scapy.utils import RawPcapReader

from agent.errors import AgentError

LINKTYPE_ETHERNET = 1


def _seconds(meta: Any) -> float:
    if hasattr(meta, "sec"):  # pcap
        return float(meta.sec) + float(meta.usec) / 1e6
    ticks = (int(meta.tshigh) << 32) + int(meta.tslow)  # pcapng
    return ticks / float(getattr(meta, "tsresol", 1_000_000))


def read_frames(path: Path) -> Iterator[tuple[float, bytes]]:
    """Raw Ethernet frames with their capture time in seconds; no scapy object per frame.

    scapy's RawPcapReader picks the pcapng reader itself when the file is pcapng.
    """
    if not path.is_file():
        raise AgentError(f"{path}: no such capture file")
    try:
        reader = RawPcapReader(str(path))
    except (Scapy_Exception, OSError) as exc:
        raise AgentError(f"{path}: not a pcap/pcapng capture ({exc})") from None
    with reader:
        linktype = getattr(reader, "linktype", LINKTYPE_ETHERNET)
        if linktype != LINKTYPE_ETHERNET:
            raise AgentError(f"{path}: link type {linktype} is not Ethernet (use tcpdump -i IF)")
        for data, meta in reader:
            yield _seconds(meta), bytes(data)

"""Read captures (pcap or pcapng, as tcpdump/tshark write them) as (time, Ethernet frame) pairs.

A small reader of its own rather than scapy's ``RawPcapReader``: scapy ends iteration silently
at a truncated or garbled record (a broken file would read as a short, valid one), cannot say
where a file is broken, and allocates whatever length a hostile record header claims. Here
every length is checked against the file and a limit before anything is read, and a bad file
is a :class:`CaptureError` naming the file and the byte offset.

Link types are honoured per packet: a pcapng file can hold interfaces of several link types,
each Enhanced Packet Block names its interface. Ethernet, Linux cooked capture (SLL, SLL2)
and raw IPv4 are turned into Ethernet frames; packets of other link types are counted per link
type and skipped.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from agent.errors import AgentError

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # raw IPv4 or IPv6, told apart by the version nibble
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_LINUX_SLL2 = 276
SUPPORTED_LINKTYPES = {
    LINKTYPE_ETHERNET: "Ethernet",
    LINKTYPE_RAW: "raw IP",
    LINKTYPE_LINUX_SLL: "Linux cooked (SLL)",
    LINKTYPE_IPV4: "raw IPv4",
    LINKTYPE_LINUX_SLL2: "Linux cooked v2 (SLL2)",
}
# Largest packet any capture tool writes (tcpdump's MAXIMUM_SNAPLEN); anything above is garbage.
MAX_PACKET = 262_144
MAX_BLOCK = MAX_PACKET + 64 * 1024  # a packet block plus generous room for options

PCAP_MAGICS = {  # magic as read little-endian → (byte order, ticks per second)
    0xA1B2C3D4: ("<", 1_000_000),
    0xD4C3B2A1: (">", 1_000_000),
    0xA1B23C4D: ("<", 1_000_000_000),
    0x4D3CB2A1: (">", 1_000_000_000),
}
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_IDB = 1
PCAPNG_PB = 2  # obsolete Packet Block, still written by old tools
PCAPNG_SPB = 3
PCAPNG_EPB = 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
IF_TSRESOL = 9
ETHERTYPE_IPV4 = b"\x08\x00"
ETHERTYPE_IPV6 = b"\x86\xdd"
NO_MACS = bytes(12)


class CaptureError(AgentError):
    """A capture that cannot be read: names the file and, when it is broken, the byte offset."""

    def __init__(self, path: Path, message: str, offset: int | None = None) -> None:
        where = f"{path}" if offset is None else f"{path}: byte {offset}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.offset = offset


def to_ethernet(linktype: int, data: bytes) -> bytes | None:
    """The packet as an Ethernet frame (MACs zero where the link type has none); None if the
    link type is not one we read or the packet is too short for its link-layer header."""
    if linktype == LINKTYPE_ETHERNET:
        return data
    if linktype == LINKTYPE_LINUX_SLL:
        # packet type, ARPHRD, address length, 8 address bytes, protocol
        if len(data) < 16:
            return None
        halen = struct.unpack_from("!H", data, 4)[0]
        src = data[6:12] if halen == 6 else bytes(6)
        return bytes(6) + src + data[14:16] + data[16:]
    if linktype == LINKTYPE_LINUX_SLL2:
        # protocol, reserved, ifindex, ARPHRD, packet type, address length, 8 address bytes
        if len(data) < 20:
            return None
        src = data[12:18] if data[11] == 6 else bytes(6)
        return bytes(6) + src + data[0:2] + data[20:]
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4):
        if not data:
            return None
        version = data[0] >> 4
        if version == 4:
            return NO_MACS + ETHERTYPE_IPV4 + data
        if version == 6 and linktype == LINKTYPE_RAW:
            return NO_MACS + ETHERTYPE_IPV6 + data
        return None
    return None


class Capture:
    """One capture file; iterate :meth:`frames`, then read the per-link-type counts."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise CaptureError(path, "no such capture file (or not a regular file)")
        self.path = path
        self.packets = 0  # packets of any link type
        self.frames = 0  # packets turned into Ethernet frames
        self.skipped: Counter[int] = Counter()  # link type → packets skipped
        self.linktypes: Counter[int] = Counter()  # link type → packets seen

    def frames_iter(self) -> Iterator[tuple[float, bytes]]:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise CaptureError(self.path, f"cannot read: {exc.strerror}") from None
        with handle:
            size = self.path.stat().st_size
            reader = _Reader(self.path, handle, size)
            for at, linktype, data in reader.packets():
                self.packets += 1
                self.linktypes[linktype] += 1
                frame = to_ethernet(linktype, data)
                if frame is None:
                    self.skipped[linktype] += 1
                    continue
                self.frames += 1
                yield at, frame

    def frames_or_nothing(self) -> Iterator[tuple[float, bytes]]:
        """:meth:`frames_iter`, then an error if packets were read but none could be used."""
        yield from self.frames_iter()
        if self.packets and not self.frames:
            raise CaptureError(
                self.path,
                f"no packet of a supported link type: Expected: {_supported()}. "
                f"Actual: {_describe(self.skipped)}",
            )

    def warnings(self) -> list[str]:
        if not self.skipped:
            return []
        return [f"{self.path}: skipped {_describe(self.skipped)} (supported: {_supported()})"]


def _supported() -> str:
    return ", ".join(f"{name} ({number})" for number, name in SUPPORTED_LINKTYPES.items())


def _describe(counts: Counter[int]) -> str:
    return ", ".join(
        f"{count} packet(s) of link type {linktype}" for linktype, count in sorted(counts.items())
    )


class _Reader:
    """Walks pcap records or pcapng blocks, checking every length before reading."""

    def __init__(self, path: Path, handle: BinaryIO, size: int) -> None:
        self.path = path
        self.f = handle
        self.size = size

    def _error(self, offset: int, message: str) -> CaptureError:
        return CaptureError(self.path, message, offset)

    def _read(self, offset: int, length: int, what: str) -> bytes:
        if length < 0 or offset + length > self.size:
            raise self._error(
                offset,
                f"truncated {what}: Expected: {length} bytes. Actual: {max(0, self.size - offset)}",
            )
        data = self.f.read(length)
        if len(data) != length:  # the file shrank while we read it
            raise self._error(offset, f"truncated {what}: Expected: {length} bytes")
        return data

    def packets(self) -> Iterator[tuple[float, int, bytes]]:
        head = self._read(0, 4, "file header") if self.size >= 4 else b""
        if len(head) < 4:
            raise self._error(0, f"not a pcap/pcapng capture: only {self.size} bytes")
        magic = struct.unpack("<I", head)[0]
        if magic in PCAP_MAGICS:
            yield from self._pcap(magic)
        elif magic == PCAPNG_SHB:
            self.f.seek(0)  # the section header block starts with the magic just read
            yield from self._pcapng()
        else:
            raise self._error(
                0,
                f"not a pcap/pcapng capture: Expected: magic a1b2c3d4, a1b23c4d or 0a0d0d0a. "
                f"Actual: {head.hex()}",
            )

    def _pcap(self, magic: int) -> Iterator[tuple[float, int, bytes]]:
        order, ticks = PCAP_MAGICS[magic]
        header = self._read(4, 20, "pcap file header")
        linktype = struct.unpack_from(order + "I", header, 16)[0] & 0xFFFF  # high bits: FCS
        offset = 24
        record = struct.Struct(order + "IIII")
        while offset < self.size:
            sec, frac, caplen, _ = record.unpack(self._read(offset, 16, "pcap record header"))
            if caplen > MAX_PACKET:
                raise self._error(
                    offset + 8,
                    f"garbled pcap record: Expected: captured length <= {MAX_PACKET}. "
                    f"Actual: {caplen}",
                )
            data = self._read(offset + 16, caplen, "pcap packet")
            yield sec + frac / ticks, linktype, data
            offset += 16 + caplen

    def _pcapng(self) -> Iterator[tuple[float, int, bytes]]:
        offset = 0
        order = "<"
        interfaces: list[tuple[int, int, float]] = []  # (link type, snaplen, seconds per tick)
        while offset < self.size:
            start = self._read(offset, 12, "pcapng block header")
            blocktype = struct.unpack_from(order + "I", start)[0]
            if blocktype == PCAPNG_SHB:
                bom = start[8:12]
                if bom == struct.pack("<I", BYTE_ORDER_MAGIC):
                    order = "<"
                elif bom == struct.pack(">I", BYTE_ORDER_MAGIC):
                    order = ">"
                else:
                    raise self._error(
                        offset + 8,
                        f"garbled pcapng section header: Expected: byte-order magic 1a2b3c4d. "
                        f"Actual: {bom.hex()}",
                    )
                interfaces = []  # each section numbers its interfaces afresh
            length = struct.unpack_from(order + "I", start, 4)[0]
            if length < 12 or length % 4 or length > MAX_BLOCK:
                raise self._error(
                    offset + 4,
                    f"garbled pcapng block: Expected: a length of 12..{MAX_BLOCK}, a multiple "
                    f"of 4. Actual: {length}",
                )
            body = self._read(offset + 12, length - 12, "pcapng block")
            trailer = struct.unpack_from(order + "I", body, len(body) - 4)[0]
            if trailer != length:
                raise self._error(
                    offset + length - 4,
                    "garbled pcapng block: Expected: trailing length equal to the leading "
                    f"length {length}. Actual: {trailer}",
                )
            body = start[8:] + body[:-4]  # the block's fields after type and length
            if blocktype == PCAPNG_IDB:
                interfaces.append(self._interface(offset, order, body))
            elif blocktype in (PCAPNG_EPB, PCAPNG_PB, PCAPNG_SPB):
                yield self._packet(offset, order, blocktype, body, interfaces)
            offset += length

    def _interface(self, offset: int, order: str, body: bytes) -> tuple[int, int, float]:
        if len(body) < 8:
            raise self._error(offset, "garbled pcapng interface block: shorter than 8 bytes")
        linktype, _, snaplen = struct.unpack_from(order + "HHI", body)
        resolution = 1e-6
        position = 8
        while position + 4 <= len(body):
            code, size = struct.unpack_from(order + "HH", body, position)
            if code == 0:
                break
            value = body[position + 4 : position + 4 + size]
            if code == IF_TSRESOL and len(value) == 1:
                exponent = value[0] & 0x7F
                resolution = 2.0**-exponent if value[0] & 0x80 else 10.0**-exponent
            position += 4 + size + (-size % 4)
        return linktype, snaplen, resolution

    def _packet(
        self,
        offset: int,
        order: str,
        blocktype: int,
        body: bytes,
        interfaces: list[tuple[int, int, float]],
    ) -> tuple[float, int, bytes]:
        if blocktype == PCAPNG_SPB:
            if len(body) < 4:
                raise self._error(offset, "garbled pcapng simple packet block")
            interface, high, low = 0, 0, 0
            caplen = min(struct.unpack_from(order + "I", body)[0], len(body) - 4)
            first = 4
        else:
            if len(body) < 20:
                raise self._error(offset, "garbled pcapng packet block: shorter than 20 bytes")
            if blocktype == PCAPNG_EPB:
                interface, high, low, caplen = struct.unpack_from(order + "IIII", body)
            else:
                interface, _, high, low, caplen = struct.unpack_from(order + "HHIII", body)
            first = 20
        if interface >= len(interfaces):
            raise self._error(
                offset,
                f"garbled pcapng packet block: Expected: interface < {len(interfaces)} "
                f"(described so far). Actual: {interface}",
            )
        if first + caplen > len(body):
            raise self._error(
                offset,
                f"garbled pcapng packet block: Expected: captured length <= "
                f"{len(body) - first}. Actual: {caplen}",
            )
        linktype, snaplen, resolution = interfaces[interface]
        if blocktype == PCAPNG_SPB and snaplen:
            caplen = min(caplen, snaplen)
        return ((high << 32) + low) * resolution, linktype, body[first : first + caplen]


def read_frames(path: Path) -> Iterator[tuple[float, bytes]]:
    """Ethernet frames with their capture time in seconds; no scapy object per frame."""
    return Capture(path).frames_iter()

"""The /metrics page as the server sends it: a head that repeats while the snapshot is the same,
a small tail that changes with every scrape (the HTTP server's and the daemon's own series),
and gzip of the two without compressing the head again.

A scrape of a large fabric is megabytes of text; Prometheus asks for gzip (as its scrapes
always do) and several clients may ask for the same snapshot. :class:`GzipPages` keeps the
deflate state after the head (zlib's ``Compress.copy``), so a repeat costs the tail's
compression only, and the result is one ordinary gzip member any client reads.
"""

from __future__ import annotations

import struct
import threading
import zlib
from dataclasses import dataclass

# RFC 1952: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
LEVEL = 1  # scrapes are CPU, not link, bound


@dataclass(frozen=True)
class Page:
    """``head`` is the same object for as long as it is the same text (the snapshot's
    rendering); ``tail`` is made per scrape."""

    head: bytes
    tail: bytes = b""

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    def text(self) -> bytes:
        return self.head + self.tail if self.tail else self.head


class GzipPages:
    """gzip of pages whose head repeats: the head is compressed once per head object."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._head: bytes | None = None
        self._state = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._prefix = b""
        self._crc = 0

    def compress(self, page: Page) -> bytes:
        with self._lock:
            if self._head is not page.head:
                state = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
                self._prefix = state.compress(page.head)
                self._state, self._crc, self._head = state, zlib.crc32(page.head), page.head
            state, prefix, crc = self._state.copy(), self._prefix, self._crc
        body = state.compress(page.tail) + state.flush()
        trailer = struct.pack("<II", zlib.crc32(page.tail, crc), len(page) & 0xFFFFFFFF)
        return GZIP_HEADER + prefix + body + trailer

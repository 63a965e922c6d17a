"""Reading ``exporter --probe-results DIR`` within bounds: whatever lands in the directory,
a poll reads regular files only, each at most :data:`MAX_FILE_BYTES` and
:data:`FILE_DEADLINE_S`, and a file it will not read is skipped with one log line and a count
(``roce_probe_result_files_skipped_total{reason}``), never a blocked worker or a failed scrape.

Issue #42: a ``*.json`` symlink to /dev/zero grew the exporter past 2 GB; a FIFO left a poll
worker blocked for good. Every file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a symlink is
refused by the kernel, a FIFO or a device never waits for a writer) and checked with
``fstat`` on the descriptor it will read, so nothing can be swapped in between.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

# A probe result is a few kilobytes; a thousand flows with latency histograms stay well
# below this.
MAX_FILE_BYTES = 4 << 20
FILE_DEADLINE_S = 2.0
# Files looked at per poll; the rest wait for the next poll.
MAX_FILES_PER_POLL = 1000
CHUNK = 1 << 16
# Why a file was skipped: the label values of roce_probe_result_files_skipped_total.
SKIP_REASONS = (
    "symlink", "not_regular", "too_large", "timeout", "unreadable", "not_json", "not_a_result",
)  # fmt: skip


class Skipped(Exception):
    """A file of the directory that is not read, and why (one of :data:`SKIP_REASONS`)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Skipped("symlink", "a symbolic link (only regular files are read)") from None
        if exc.errno == errno.ENXIO:  # a unix socket: nothing to open
            raise Skipped("not_regular", "a socket (only regular files are read)") from None
        raise Skipped("unreadable", f"cannot open: {exc.strerror}") from None


def _check(fd: int) -> int:
    """The size of the regular file open on ``fd``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise Skipped("not_regular", f"{kind} (only regular files are read)")
    if info.st_size > MAX_FILE_BYTES:
        raise Skipped(
            "too_large", f"Expected: at most {MAX_FILE_BYTES} bytes. Actual: {info.st_size}"
        )
    return info.st_size


def _read(fd: int, deadline: float) -> bytes:
    chunks, total = [], 0
    while chunk := os.read(fd, CHUNK):
        total += len(chunk)
        if total > MAX_FILE_BYTES:  # it grew while we read it
            raise Skipped("too_large", f"Expected: at most {MAX_FILE_BYTES} bytes. Actual: more")
        if time.monotonic() > deadline:
            raise Skipped("timeout", f"not read within {FILE_DEADLINE_S:g} s")
        chunks.append(chunk)
    return b"".join(chunks)


def read_result(path: Path) -> Any:
    """The JSON of one result file, or :class:`Skipped` saying why not."""
    deadline = time.monotonic() + FILE_DEADLINE_S
    fd = _open(path)
    try:
        _check(fd)
        data = _read(fd, deadline)
    except OSError as exc:
        raise Skipped("unreadable", f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # json's own messages name line and column; RecursionError: nested too deep.
        raise Skipped("not_json", f"not JSON: {str(exc)[:200] or type(exc).__name__}") from None


def candidates(directory: Path) -> list[tuple[Path, tuple[int, int]]]:
    """The ``*.json`` entries of the directory with their (mtime, size) stamp from lstat,
    at most :data:`MAX_FILES_PER_POLL` (in name order)."""
    found: list[tuple[Path, tuple[int, int]]] = []
    for path in sorted(directory.glob("*.json"))[:MAX_FILES_PER_POLL]:
        try:
            info = path.lstat()
        except OSError:
            continue
        found.append((path, (info.st_mtime_ns, info.st_size)))
    return found

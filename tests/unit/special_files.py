"""Files that are not regular files, for the tests that every reader refuses them at once."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def unix_socket(path: Path) -> Path:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))  # the inode stays after close; that is all stat needs
    server.close()
    return path


def directory(path: Path) -> Path:
    path.mkdir()
    return path


def named(make: Callable[[Path], Path], name: str) -> Callable[[Path], Path]:
    """``make`` for the file ``name`` inside the folder a table row is given."""
    return lambda folder: make(folder / name)

"""The switch's ``bootflash:`` file system: a directory under the state directory, written by
SCP (NX-OS' ``feature scp-server``) and read by ``configure replace``, ``show file``,
``dir`` and ``delete``.

A file name is one path component: ``bootflash:NAME``, ``bootflash:/NAME`` and the bare
``NAME`` (what an SCP client sends, relative to bootflash:) are the same file; anything with
another file system, a sub-directory or ``..`` is refused, so nothing outside the directory
is ever reached.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

FILE_SYSTEM = "bootflash:"
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


class BootflashError(ValueError):
    """A file name or file this file system does not have (the message is printable)."""


@dataclass(frozen=True)
class Bootflash:
    """The files of ``bootflash:`` (None: a switch without a state directory has none)."""

    directory: Path | None

    def _root(self) -> Path:
        if self.directory is None:
            raise BootflashError(
                "% bootflash: is not available (the switch has no state directory)"
            )
        return self.directory

    def path(self, uri: str) -> Path:
        """The local file of ``bootflash:NAME``."""
        root = self._root()
        name = uri.removeprefix(FILE_SYSTEM).lstrip("/")
        if ":" in name or not _NAME.fullmatch(name) or name in (".", ".."):
            raise BootflashError(f"% Invalid file name {uri!r} (bootflash:NAME only)")
        return root / name

    def read(self, uri: str) -> str:
        try:
            return self.path(uri).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _missing(uri, exc) from None

    def md5(self, uri: str) -> str:
        try:
            return hashlib.md5(self.path(uri).read_bytes(), usedforsecurity=False).hexdigest()
        except OSError as exc:
            raise _missing(uri, exc) from None

    def delete(self, uri: str) -> None:
        try:
            self.path(uri).unlink()
        except OSError as exc:
            raise _missing(uri, exc) from None

    def listing(self) -> list[tuple[str, int, float]]:
        """(name, size, mtime) of every file, by name (none when the directory is unusable)."""
        root = self.directory
        if root is None:
            return []
        try:
            root.mkdir(parents=True, exist_ok=True)
            found = [(p.name, p.stat().st_size, p.stat().st_mtime) for p in root.iterdir()]
        except OSError:
            return []
        return sorted(f for f in found if _NAME.fullmatch(f[0]))

    def usage(self) -> tuple[int, int]:
        """(bytes used, bytes free) of the file system that holds the directory."""
        used = sum(size for _, size, _ in self.listing())
        try:
            return used, shutil.disk_usage(self._root()).free
        except OSError as exc:
            raise BootflashError(f"% Cannot read the usage of bootflash: ({exc})") from None


def _missing(uri: str, exc: Exception) -> BootflashError:
    """NX-OS' answer for a file it cannot read (with why, when it is not just absent)."""
    if isinstance(exc, FileNotFoundError):
        return BootflashError(f"% No such file or directory: {uri}")
    return BootflashError(f"% Cannot access {uri}: {exc}")


class _BootflashSftp(asyncssh.SFTPServer):
    """SFTP/SCP confined to the bootflash directory; ``bootflash:NAME`` is ``NAME`` there."""

    def map_path(self, path: bytes) -> bytes:
        return super().map_path(path.removeprefix(FILE_SYSTEM.encode()))


def sftp_factory(directory: Path) -> Any:
    """What :func:`asyncssh.create_server` takes as ``sftp_factory`` (SCP goes through it):
    SFTP and SCP confined to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)

    def factory(chan: asyncssh.SSHServerChannel[bytes]) -> asyncssh.SFTPServer:
        return _BootflashSftp(chan, chroot=str(directory).encode())

    return factory

"""Files under the state directory: ``startup-config``, the SSH host key; and how a CLI switch
(EOS, NX-OS) comes up from its saved ``startup-config`` (:func:`boot_from_startup`)."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import asyncssh

STARTUP_CONFIG = "startup-config"
HOST_KEY = "ssh_host_ed25519_key"
C = TypeVar("C")
log = logging.getLogger("lab.mgmt")


class StartupConfigStore:
    """``<state-dir>/startup-config``, replaced atomically so a crash never leaves half a file."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / STARTUP_CONFIG

    def load(self) -> str | None:
        """The saved text, or None if nothing was ever saved."""
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def save(self, text: str) -> None:
        """Write ``text`` (temp file + fsync + rename)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".startup-config.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def load_or_create_host_key(state_dir: Path) -> asyncssh.SSHKey:
    """The switch's host key; generated (ed25519, mode 0600) on first start.

    Several management processes may share a state dir and start at once: the key is written
    whole under a private name and linked into place, so the first one wins and every other
    reads that same, complete key.
    """
    path = state_dir / HOST_KEY
    with contextlib.suppress(FileNotFoundError):
        existing: asyncssh.SSHKey = asyncssh.read_private_key(str(path))
        return existing
    state_dir.mkdir(parents=True, exist_ok=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    private = path.with_name(f".{HOST_KEY}.{os.getpid()}")
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key.export_private_key())
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(private, path)
        except FileExistsError:
            key = asyncssh.read_private_key(str(path))
    finally:
        os.unlink(private)
    return key


def read_secret_file(path: Path) -> str:
    """A password file's content without the trailing newline."""
    return path.read_text(encoding="utf-8").rstrip("\r\n")


@dataclass(frozen=True)
class Boot(Generic[C]):
    """What a CLI switch needs to come up from its ``startup-config`` text: its factory
    configuration, the loader of the saved text onto it, the install into the data plane, and
    the exceptions by which the loader and the data plane refuse."""

    name: str
    factory: Callable[[], C]
    load: Callable[[C, str], C]
    install: Callable[[C], Awaitable[None]]
    unreadable: tuple[type[Exception], ...]
    refused: tuple[type[Exception], ...]


async def boot_from_startup(text: str | None, boot: Boot[C]) -> None:
    """Run the saved configuration, as a switch does at boot; a text the loader refuses or a
    configuration the data plane refuses leaves the factory configuration running (logged), so
    a bad file never keeps the switch from coming up."""
    candidate = boot.factory()
    if text:
        try:
            candidate = boot.load(candidate, text)
        except boot.unreadable as exc:
            log.error("%s: startup-config not loaded: %s", boot.name, exc)
            candidate = boot.factory()
    try:
        await boot.install(candidate)
    except boot.refused as exc:
        log.error(
            "%s: startup-config refused by the data plane (%s); using defaults", boot.name, exc
        )
        await boot.install(boot.factory())
    log.info("%s: running-config applied to the data plane", boot.name)

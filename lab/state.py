"""A lab's record of itself: ``state.json`` in its state directory, and the lock on that directory.

``lab up`` writes the record before it creates anything and after every change, so ``lab down``
(and ``lab fault``) can find everything a lab consists of; every ``roce-agent lab`` command that
changes a lab holds the lock on its directory while it does.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_STATE_ROOT = Path("/run/roce-agent/lab")
STATE_DIR_ENV = "ROCE_LAB_STATE_DIR"
STATE_FILE = "state.json"
STATE_SCHEMA = 1
LOCK_POLL_S = 0.05


class LabError(Exception):
    """A problem for the user: the CLI prints the message and exits 2."""


def now() -> str:
    """The time stamp the records carry (UTC, seconds)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def state_dir_for(lab_name: str, override: str | os.PathLike[str] | None = None) -> Path:
    """The lab's state directory: ``override`` (the directory itself) or the default."""
    if override:
        return Path(override).absolute()
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).absolute()
    return DEFAULT_STATE_ROOT / lab_name


@dataclass
class LabState:
    """``state.json``: what ``up`` created, saved atomically after every change."""

    directory: Path
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.directory / STATE_FILE

    @property
    def name(self) -> str:
        return str(self.data["lab"])

    @classmethod
    def load(cls, directory: Path) -> LabState | None:
        path = directory / STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LabError(f"cannot read the lab state {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA:
            raise LabError(f"{path} is not a lab state file this version understands")
        return cls(directory, data)

    def save(self) -> None:
        tmp = self.path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def netns(self) -> dict[str, str]:
        result: dict[str, str] = self.data.setdefault("netns", {})
        return result

    def processes(self) -> dict[str, dict[str, Any]]:
        result: dict[str, dict[str, Any]] = self.data.setdefault("processes", {})
        return result

    def files(self) -> list[str]:
        result: list[str] = self.data.setdefault("files", [])
        return result

    def dirs(self) -> list[str]:
        result: list[str] = self.data.setdefault("dirs", [])
        return result

    def add_dir(self, name: str) -> Path:
        """Record a directory (removed whole by ``down``) before it is created."""
        if name not in self.dirs():
            self.dirs().append(name)
            self.save()
        return self.directory / name

    def add_file(self, name: str) -> Path:
        """Record a file name before it is created; return its path."""
        if name not in self.files():
            self.files().append(name)
            self.save()
        return self.directory / name


@contextlib.contextmanager
def locked(directory: Path, busy: Callable[[], LabError], *, wait: float = 0.0) -> Iterator[None]:
    """One ``roce-agent lab`` command at a time per lab: a flock on the state directory itself.

    Waits up to ``wait`` seconds for another command to finish, then raises ``busy()``; an
    OSError means the directory cannot be opened (no lab there).
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise busy() from None
                time.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)

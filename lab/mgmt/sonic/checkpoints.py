"""GCU checkpoints: ``/etc/sonic/checkpoints/<name>.cp.json`` (here ``<state_dir>/checkpoints``).

sonic-utilities ``generic_config_updater/generic_updater.py``: ``CHECKPOINTS_DIR =
"/etc/sonic/checkpoints"``, ``CHECKPOINT_EXT = ".cp.json"``; ``Util.save_json_file`` writes
``json.dumps(content)`` (one line); ``list_checkpoints(includes_time)`` returns names, or
``{"name", "time"}`` with the file's mtime as a UTC ISO timestamp, newest first.
A switch without a state directory keeps them in memory (unit tests).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.mgmt.sonic.configdb import ConfigDb
from lab.mgmt.sonic.text import natural_key

CHECKPOINTS_DIR = "/etc/sonic/checkpoints"
CHECKPOINT_EXT = ".cp.json"


class CheckpointStore:
    """Checkpoint files of one switch (they outlive SSH connections and process restarts)."""

    def __init__(self, state_dir: Path | None) -> None:
        self.directory = state_dir / "checkpoints" if state_dir is not None else None
        self._memory: dict[str, tuple[str, float]] = {}

    @staticmethod
    def shown_path(name: str) -> str:
        """The path a SONiC switch would use (what the commands print)."""
        return f"{CHECKPOINTS_DIR}/{name}{CHECKPOINT_EXT}"

    def _file(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{name}{CHECKPOINT_EXT}"

    def save(self, name: str, db: ConfigDb) -> None:
        """Write (or overwrite) a checkpoint; OSError if the name is not a file name."""
        text = json.dumps(db)
        if "/" in name or name in ("", ".", ".."):
            raise OSError(f"[Errno 2] No such file or directory: '{self.shown_path(name)}'")
        if self.directory is None:
            self._memory[name] = (text, time.time())
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file(name).write_text(text, encoding="utf-8")

    def exists(self, name: str) -> bool:
        """Whether the checkpoint exists."""
        if "/" in name:
            return False
        if self.directory is None:
            return name in self._memory
        return self._file(name).is_file()

    def load(self, name: str) -> ConfigDb:
        """The checkpoint's CONFIG_DB."""
        if self.directory is None:
            data: Any = json.loads(self._memory[name][0])
        else:
            data = json.loads(self._file(name).read_text(encoding="utf-8"))
        return dict(data)

    def delete(self, name: str) -> None:
        """Remove the checkpoint."""
        if self.directory is None:
            del self._memory[name]
        else:
            self._file(name).unlink()

    def _mtimes(self) -> dict[str, float]:
        if self.directory is None:
            return {name: when for name, (_, when) in self._memory.items()}
        if not self.directory.is_dir():
            return {}
        return {
            p.name[: -len(CHECKPOINT_EXT)]: p.stat().st_mtime
            for p in self.directory.iterdir()
            if p.name.endswith(CHECKPOINT_EXT)
        }

    def listing(self, includes_time: bool) -> list[Any]:
        """``list_checkpoints``: names, or name and last-modified time (newest first)."""
        found = self._mtimes()
        names = sorted(found, key=natural_key)
        if not includes_time:
            return list(names)
        timed = [
            {"name": n, "time": datetime.fromtimestamp(found[n], tz=UTC).isoformat()} for n in names
        ]
        return sorted(timed, key=lambda c: c["time"], reverse=True)

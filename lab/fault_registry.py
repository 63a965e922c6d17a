"""The registry of a lab's active faults: ``STATE_DIR/faults.json``.

:mod:`lab.faults` writes it (what each fault asked for and what was done where, so it can be
undone exactly); ``lab down`` reads it to end the fault processes it records, by PID, before
its namespace sweep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import procs
from lab.state import LabError

FAULTS_FILE = "faults.json"
REGISTRY_SCHEMA = 1


class FaultError(LabError):
    """Bad input or a fault that could not be applied/undone; the CLI prints it, exit 2."""


@dataclass
class Fault:
    """One active fault: what was asked and what was done where (to undo exactly that)."""

    id: str
    kind: str
    target: str
    params: dict[str, Any]
    actions: list[dict[str, Any]]
    created_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "params": self.params,
            "actions": self.actions,
            "created_at": self.created_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        return cls(
            str(data["id"]),
            str(data["kind"]),
            str(data["target"]),
            dict(data["params"]),
            [dict(a) for a in data["actions"]],
            str(data.get("created_at", "")),
        )

    def key(self) -> str:
        """What makes two faults the same injection (refused twice)."""
        return ";".join(key for action in self.actions if (key := self._action_key(action)))

    def _action_key(self, action: Mapping[str, Any]) -> str:
        kind = action["type"]
        if kind == "vswitch":
            fault = action["fault"]
            detail = {k: v for k, v in fault.items() if k not in ("percent", "seed", "ms", "tc")}
            return f"vswitch:{action['switch']}:{json.dumps(detail, sort_keys=True)}"
        if kind == "link_down":
            return "link:" + "|".join(sorted(action["link"]))
        if kind == "trust":
            return f"trust:{action['switch']}:{action['interface']}"
        if kind == "process":
            return f"process:{self.kind}:{self.target}"
        return ""

    def processes(self) -> list[dict[str, Any]]:
        """The records of the processes this fault started (a storm's)."""
        return [a for a in self.actions if a["type"] == "process" and "pid" in a]

    def pids(self) -> list[int]:
        return [int(a["pid"]) for a in self.processes()]


@dataclass
class Registry:
    """``faults.json``: the next fault ID and the active faults, oldest first."""

    next_id: int = 1
    faults: list[Fault] = field(default_factory=list)

    @staticmethod
    def path_in(directory: Path) -> Path:
        return directory / FAULTS_FILE

    @classmethod
    def load(cls, directory: Path) -> Registry:
        path = cls.path_in(directory)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            raise FaultError(f"cannot read the fault registry {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("schema") != REGISTRY_SCHEMA:
            raise FaultError(f"{path} is not a fault registry this version understands")
        try:
            faults = [Fault.from_json(f) for f in data["faults"]]
            return cls(int(data["next_id"]), faults)
        except (KeyError, TypeError, ValueError) as exc:
            raise FaultError(f"{path}: malformed fault registry ({exc})") from None

    def save(self, directory: Path) -> None:
        path = self.path_in(directory)
        data = {
            "schema": REGISTRY_SCHEMA,
            "next_id": self.next_id,
            "faults": [f.to_json() for f in self.faults],
        }
        tmp = path.with_name(f".{FAULTS_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def stop_fault_processes(state_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """For ``lab down``: end every process recorded in ``faults.json`` (by PID)."""
    try:
        data = json.loads((Path(state_dir) / FAULTS_FILE).read_text(encoding="utf-8"))
        faults = [Fault.from_json(f) for f in data["faults"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no registry (or an unreadable one: the namespace sweep still gets them)
    return [
        {"node": f"fault {fault.id}", **procs.stop(record)}
        for fault in faults
        for record in fault.processes()
    ]

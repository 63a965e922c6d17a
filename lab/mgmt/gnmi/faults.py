"""Lab-only fault knobs of a switch's gNMI server, for drills of a gNMI client.

They live in the ``gnmi`` object of the management process's ``faults.json`` and are reloaded
with the SSH knobs on SIGUSR1 (``lab.mgmt.launcher.set_faults(state_dir, pid, gnmi={...})``);
nothing a gNMI client sends can set them:

- ``refuse``: every RPC answers UNAVAILABLE (a server that is up but will not serve);
- ``reset_after_s``: a Subscribe stream is aborted with UNAVAILABLE that many seconds after it
  started (a collector must reconnect and resubscribe);
- ``stale_s``: notification timestamps that many seconds in the past (a clock or a cache gone
  wrong);
- ``malformed``: values that do not parse (SONiC: a ``json_ietf_val`` that is not JSON; the
  others: a ``string_val`` where a counter belongs);
- ``oversized_bytes``: the first notification of an RPC carries one update whose value is a
  string of that many bytes (over a client's message limit: gRPC's default is 4 MiB);
- ``unknown_path``: every notification also carries an update under a path nobody asked for.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

log = logging.getLogger("lab.mgmt.gnmi")
MAX_OVERSIZED_BYTES = 64 * 1024 * 1024  # a drill's message, not the process's memory


@dataclass
class GnmiFaults:
    """The knobs; all off by default."""

    refuse: bool = False
    reset_after_s: float = 0.0
    stale_s: float = 0.0
    malformed: bool = False
    oversized_bytes: int = 0
    unknown_path: bool = False

    def load(self, path: Path) -> None:
        """Replace the knobs with the ``gnmi`` object of ``faults.json`` (a missing file or
        object clears them); ValueError naming the knob when one is wrong (then none
        changed)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        knobs = data.get("gnmi", {}) if isinstance(data, dict) else None
        if not isinstance(knobs, dict):
            raise ValueError("faults.json: gnmi must be an object")
        loaded = parse_knobs(knobs)
        for f in fields(self):
            setattr(self, f.name, getattr(loaded, f.name))
        if knobs:
            log.warning("gnmi faults: %s", knobs)

    def active(self) -> bool:
        return self != GnmiFaults()


def parse_knobs(knobs: dict[str, Any]) -> GnmiFaults:
    """The knobs of a ``gnmi`` object; ValueError naming an unknown or wrong one."""
    known = {f.name for f in fields(GnmiFaults)}
    unknown = sorted(set(knobs) - known)
    if unknown:
        raise ValueError(f"faults.json: gnmi: unknown knob(s) {unknown} (known: {sorted(known)})")
    faults = GnmiFaults(
        refuse=_flag(knobs, "refuse"),
        reset_after_s=_seconds(knobs, "reset_after_s"),
        stale_s=_seconds(knobs, "stale_s"),
        malformed=_flag(knobs, "malformed"),
        oversized_bytes=int(knobs.get("oversized_bytes", 0)),
        unknown_path=_flag(knobs, "unknown_path"),
    )
    if not 0 <= faults.oversized_bytes <= MAX_OVERSIZED_BYTES:
        raise ValueError(
            f"faults.json: gnmi.oversized_bytes must be 0..{MAX_OVERSIZED_BYTES}, "
            f"got {faults.oversized_bytes}"
        )
    return faults


def _flag(knobs: dict[str, Any], name: str) -> bool:
    value = knobs.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"faults.json: gnmi.{name} must be true or false, got {value!r}")
    return value


def _seconds(knobs: dict[str, Any], name: str) -> float:
    value = float(knobs.get(name, 0.0))
    if not value >= 0:  # NaN too
        raise ValueError(f"faults.json: gnmi.{name} must be >= 0 seconds, got {value}")
    return value

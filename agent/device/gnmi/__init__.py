"""gNMI telemetry: each NOS's paths (one module per NOS), and the stream that reads them.

:func:`profile_for` gives a platform's :class:`~agent.device.gnmi.base.GnmiProfile`, or None
for a platform whose gNMI counters the agent does not read (NX-OS: its OpenConfig and
``Cisco-NX-OS-device`` paths for per-priority PFC are not implemented here).
"""

from __future__ import annotations

from agent.device.gnmi.base import GnmiProfile
from agent.device.gnmi.eos import EosGnmi
from agent.device.gnmi.nvue import NvueGnmi
from agent.device.gnmi.sonic import SonicGnmi

_PROFILES: dict[str, type[GnmiProfile]] = {
    profile.platform: profile for profile in (EosGnmi, NvueGnmi, SonicGnmi)
}


def profile_for(platform: str) -> GnmiProfile | None:
    """The platform's gNMI profile; None where the agent reads the platform over SSH only."""
    found = _PROFILES.get(platform)
    return found() if found is not None else None

"""What the EOS terminal needs of the switch (the personality provides it); a protocol, so
that the terminal does not import the personality that creates it."""

from __future__ import annotations

from typing import Protocol

from lab.mgmt.eos.sessions import ConfigSessions
from lab.mgmt.switch import SwitchManager


class EosSwitch(Protocol):
    """Switch-wide EOS state: the shared manager, the config sessions, the startup-config."""

    manager: SwitchManager
    sessions: ConfigSessions

    async def save_startup(self) -> None:
        """``copy running-config startup-config`` (CliError without a place to save it)."""
        ...

    def startup_text(self) -> str | None:
        """The saved startup-config (None when never saved)."""
        ...

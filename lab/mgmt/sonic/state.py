"""What the shell and the commands need of the switch (the personality provides it); a
protocol, so that they do not import the personality that creates them."""

from __future__ import annotations

import asyncio
from typing import Protocol

from lab.mgmt.sonic.configdb import ConfigDb, SonicPort
from lab.mgmt.sonic.gcu import ConfigDbOwner
from lab.mgmt.sonic.timers import TimerUnits
from lab.mgmt.switch import SwitchManager


class SonicSwitch(ConfigDbOwner, Protocol):
    """Switch-wide state: CONFIG_DB (with GCU's needs), ports, /tmp, timers."""

    manager: SwitchManager
    hostname: str
    ports: list[SonicPort]
    timers: TimerUnits
    gcu_lock: asyncio.Lock

    def saved(self) -> ConfigDb | None:
        """``/etc/sonic/config_db.json`` (None when never saved)."""
        ...

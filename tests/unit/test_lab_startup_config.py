"""A CLI switch (EOS, NX-OS) comes up from its saved startup-config, and from its factory
configuration when the saved text cannot be read or the data plane refuses it
(:func:`lab.mgmt.persistence.boot_from_startup`, one implementation for both NOSes)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.nxos.personality import NxosPersonality
from lab.mgmt.testing import FakeSwitch
from tests.unit.lab_nxos_support import ports


@dataclass(frozen=True)
class Nos:
    create: Callable[..., Any]
    change: tuple[str, ...]  # a description on the first port, saved
    unreadable: str  # a startup-config whose second line the NOS does not know

    def running(self, switch: FakeSwitch[Any]) -> Any:
        """The running configuration in the NOS's own terms."""
        if isinstance(switch.personality, NxosPersonality):
            return switch.personality.running
        return switch.manager.running

    def factory(self, switch: FakeSwitch[Any]) -> Any:
        if isinstance(switch.personality, NxosPersonality):
            return switch.personality.factory_config()
        return switch.manager.factory_config()


SAVE = "copy running-config startup-config"
NOSES = {
    "eos": Nos(
        EosPersonality,
        ("configure", "interface Ethernet1", "description uplink", "end", SAVE),
        "interface Ethernet1\n   no-such-command 3\n",
    ),
    "nxos": Nos(
        NxosPersonality,
        ("configure terminal", "interface ethernet 1/1", "description uplink", "end", SAVE),
        "interface Ethernet1/1\n  no-such-command 3\n",
    ),
}


def _switch(nos: Nos, state: Path) -> FakeSwitch[Any]:
    return FakeSwitch(nos.create, ports(), state)


def _saved_switch(nos: Nos, state: Path) -> Any:
    """A switch with a change saved; its running configuration."""
    switch = _switch(nos, state)

    async def change() -> list[str]:
        await switch.personality.start()
        terminal = switch.personality.new_terminal("admin", True, "02:00:00:00:00:01")
        return [await terminal.execute(line) for line in nos.change]

    outputs = asyncio.run(change())
    assert not [o for o in outputs if o.startswith("%")], outputs
    return nos.running(switch)


@pytest.mark.parametrize("name", NOSES)
def test_a_restart_runs_the_saved_configuration(name: str, tmp_path: Path) -> None:
    nos = NOSES[name]
    saved = _saved_switch(nos, tmp_path)
    again = _switch(nos, tmp_path)
    asyncio.run(again.personality.start())
    assert nos.running(again) == saved and saved != nos.factory(again)


@pytest.mark.parametrize("name", NOSES)
def test_a_startup_config_it_cannot_read_boots_the_factory_configuration(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nos = NOSES[name]
    (tmp_path / "startup-config").write_text(nos.unreadable, encoding="utf-8")
    switch = _switch(nos, tmp_path)
    with caplog.at_level(logging.ERROR, logger="lab.mgmt"):
        asyncio.run(switch.personality.start())
    assert nos.running(switch) == nos.factory(switch)
    assert switch.dataplane.set_qos_calls, "the factory configuration never reached the data plane"
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "leaf1: startup-config not loaded" in record.getMessage()
    assert "no-such-command" in record.getMessage()


@pytest.mark.parametrize("name", NOSES)
def test_a_startup_config_the_data_plane_refuses_boots_the_factory_configuration(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nos = NOSES[name]
    _saved_switch(nos, tmp_path)
    switch = _switch(nos, tmp_path)
    switch.dataplane.fail_next_set_qos = "queue 3: no buffer left"
    with caplog.at_level(logging.ERROR, logger="lab.mgmt"):
        asyncio.run(switch.personality.start())
    assert nos.running(switch) == nos.factory(switch)
    assert len(switch.dataplane.set_qos_calls) == 1  # the factory one, after the refusal
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    message = record.getMessage()
    assert "leaf1: startup-config refused by the data plane" in message
    assert "no buffer left" in message

"""Pending changes as each non-EOS platform reports them (EOS: test_write_ahead_audit.py and
the lab). The outputs follow each NOS's documented format (sources in the platform modules);
none was captured from a real device here."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agent.device.platforms.base import Platform
from agent.device.platforms.cisco_nxos import CiscoNxos
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.platforms.sonic import Sonic, timespan_s
from agent.device.state import PendingSession

NOW = time.mktime(time.strptime("20261123-101500", "%Y%m%d-%H%M%S"))

NXOS_SUMMARY = """\
User Checkpoint Summary
--------------------------------------------------------------------------------
1) before-upgrade:
Created by admin
Created at Wed, 13:32:43 20 Nov 2024
Size is 14,823 bytes
Description: None

2) roce-agent-20261123-101000-042:
Created by netops
Created at Mon, 10:10:00 23 Nov 2026
Size is 27,536 bytes
Description: None
"""

SONIC_CHECKPOINTS = '["roce-agent-20261123-101400-001", "roce-agent-20261123-100000-002", "x"]'
SONIC_TIMERS = (
    "Mon 2026-11-23 10:19:00 UTC 4min 31s left n/a n/a "
    "roce-agent-20261123-101400-001-rollback.timer roce-agent-20261123-101400-001-rollback.service"
)


def by_name(sessions: list[PendingSession]) -> dict[str, dict[str, Any]]:
    return {
        s.name: {
            "kind": s.kind, "state": s.state, "user": s.user, "age_s": s.age_s,
            "rollback_in_s": s.rollback_in_s, "live": s.live,
        }
        for s in sessions
    }  # fmt: skip


@pytest.mark.parametrize(
    ("parse", "expected"),
    [
        pytest.param(
            lambda: CiscoNxos.sessions_from_text("n1", NXOS_SUMMARY, now=NOW),
            {"roce-agent-20261123-101000-042": {
                "kind": "NX-OS checkpoint", "state": "checkpoint", "user": "netops",
                "age_s": 300.0, "rollback_in_s": None, "live": True}},
            id="nxos-only-agent-checkpoints",
        ),
        pytest.param(
            lambda: CiscoNxos.sessions_from_text("n1", "User Checkpoint Summary\n---\n"),
            {},
            id="nxos-none",
        ),
        pytest.param(
            lambda: Sonic.sessions_from_text("s1", SONIC_CHECKPOINTS, SONIC_TIMERS, now=NOW),
            {
                "roce-agent-20261123-101400-001": {
                    "kind": "SONiC checkpoint", "state": "rollback timer running", "user": None,
                    "age_s": 60.0, "rollback_in_s": 271.0, "live": True},
                "roce-agent-20261123-100000-002": {
                    "kind": "SONiC checkpoint", "state": "checkpoint without rollback timer",
                    "user": None, "age_s": 900.0, "rollback_in_s": None, "live": True},
            },
            id="sonic-timer-and-orphan-checkpoint",
        ),
        pytest.param(lambda: Sonic.sessions_from_text("s1", "[]", ""), {}, id="sonic-none"),
        pytest.param(
            lambda: CumulusNvue.sessions_from_text(
                "c1", "Pending confirmation, 4 minutes 10 seconds left", "- set: qos"),
            {
                "applied revision": {
                    "kind": "NVUE revision", "state": "waiting for --confirm-yes", "user": None,
                    "age_s": None, "rollback_in_s": 250.0, "live": True},
                "pending revision": {
                    "kind": "NVUE revision", "state": "set, not applied", "user": None,
                    "age_s": None, "rollback_in_s": None, "live": False},
            },
            id="nvue-both",
        ),
        pytest.param(
            lambda: CumulusNvue.sessions_from_text("c1", "No pending confirmation", ""),
            {},
            id="nvue-none",
        ),
    ],
)  # fmt: skip
def test_pending_sessions_per_platform(parse: Any, expected: dict[str, Any]) -> None:
    assert by_name(parse()) == expected


def test_sonic_checkpoint_list_that_is_not_json_is_an_error() -> None:
    with pytest.raises(Exception, match="did not return JSON"):
        Sonic.sessions_from_text("s1", "Error: no such command", "")


@pytest.mark.parametrize(
    ("text", "seconds"), [("4min 31s", 271.0), ("1h 2min", 3720.0), ("500ms", 0.5), ("", 0.0)]
)
def test_systemd_timespans(text: str, seconds: float) -> None:
    assert timespan_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("name", "age"),
    [("roce-agent-20261123-101000-001", 300.0), ("operator-change", None), ("roce-agent-x", None)],
)
def test_age_from_agent_names(name: str, age: float | None) -> None:
    assert Platform.age_from_name(name, now=NOW) == age

"""EOS configuration sessions: the data, diffs and the commit-timer value.

EOS semantics (Arista "Config sessions" (4.15.0F) and "Config Session Commit Timer" articles,
eos.arista.com; walk-through at null.53bits.co.uk "Configuration Session"):

* ``configure session NAME`` starts from a copy of the running-config (or re-enters NAME);
  lines edit only the session; ``show session-config diffs`` compares it with running-config;
* ``commit`` replaces the running-config with the session's; ``abort`` drops the session;
* ``commit timer HH:MM:SS`` commits now and rolls back automatically at the end of the timer
  unless ``configure session NAME commit`` confirms it first (state ``pendingCommitTimer``);
* sessions belong to the switch, so another SSH connection sees them in
  ``show configuration sessions``. Like EOS, a session outlives the SSH connection that
  opened it: a still-``pending`` one stays (counting against the pending-session cap) until
  someone aborts or commits it, or until it is 24 hours old ("An uncommitted configuration
  session will be discarded if the switch reboots and will time out after 24 hours",
  arista.com/um-eos/eos-configure-session); a committed-with-timer one keeps its timer
  (losing the connection is exactly when the rollback must happen).
"""

from __future__ import annotations

import difflib
import re
import time
from dataclasses import dataclass, field
from typing import Literal

from lab.mgmt.model import SwitchConfig
from lab.mgmt.render import render_config

SessionState = Literal["pending", "pendingCommitTimer", "completed"]
MAX_PENDING_SESSIONS = 5
MAX_COMPLETED_SESSIONS = 1
UNCOMMITTED_LIFETIME_S = 24 * 3600
_TIMER_RE = re.compile(r"^(\d{1,2}):([0-5]\d):([0-5]\d)$")


@dataclass
class ConfigSession:
    """One named configuration session."""

    name: str
    config: SwitchConfig
    user: str
    owner: str | None
    state: SessionState = "pending"
    commit_deadline: float | None = None
    rollback_to: SwitchConfig | None = None
    completed_at: float | None = None
    created_at: float = field(default_factory=time.time)


def parse_commit_timer(text: str) -> int:
    """``00:05:00`` -> 300 seconds; ValueError if malformed or zero."""
    match = _TIMER_RE.match(text)
    if match is None:
        raise ValueError(text)
    hours, minutes, seconds = (int(g) for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total == 0:
        raise ValueError(text)
    return total


def format_duration(seconds: float) -> str:
    """300 -> ``0:05:00`` (as a remaining commit timer)."""
    whole = max(0, int(seconds + 0.999))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def session_diff(running: SwitchConfig, session: ConfigSession) -> str:
    """``show session-config diffs``: a unified diff, running-config -> session-config."""
    lines = difflib.unified_diff(
        render_config(running),
        render_config(session.config),
        fromfile="system:/running-config",
        tofile=f"session:/{session.name}-session-config",
        lineterm="",
    )
    return "\n".join(lines)

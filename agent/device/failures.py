"""Why a device could not be read or changed: one class per reason, one line per device.

Every failure the agent reports about a device is one of :data:`KINDS`, worded
``DEVICE: KIND: what happened. Fix: what to do``, on one line. Text from libraries (netmiko's
multi-paragraph advice, paramiko's exception chains) is folded to one line by
:func:`one_line`; the full exchange is in the ``--debug`` log. The kinds and their hints are
listed for users in docs/push.md ("When a device cannot be reached").
"""

from __future__ import annotations

import re

from agent.errors import AgentError, printable

# The classes a connection can fail in, in the order the connection meets them.
UNREACHABLE = "unreachable"  # no TCP connection: refused, no route, no answer, name unknown
TIMED_OUT = "timed out"  # TCP connected, the SSH exchange did not finish within the budget
PROTOCOL_ERROR = "protocol error"  # the peer answered, but not as an SSH server would
HOST_KEY_UNREADABLE = "host key unreadable"  # a known_hosts line about the device is broken
HOST_KEY_UNKNOWN = "host key unknown"
HOST_KEY_CHANGED = "host key changed"
AUTH_FAILED = "authentication failed"
# ...and once connected:
COMMAND_FAILED = "command failed"

NOT_CONNECTED = (
    UNREACHABLE,
    TIMED_OUT,
    PROTOCOL_ERROR,
    HOST_KEY_UNREADABLE,
    HOST_KEY_UNKNOWN,
    HOST_KEY_CHANGED,
    AUTH_FAILED,
)
"""The kinds for which nothing was read from the device (the exit-code contract's "not
reached")."""
KINDS = (*NOT_CONNECTED, COMMAND_FAILED)

# Longest detail kept of a library's text: one line of a table or a log, not a page.
DETAIL_LIMIT = 300
OWN_TEXT_LIMIT = 4000
_BLANK_RUN = re.compile(r"\n\s*\n+")
_SPACES = re.compile(r"\s+")


def one_line(text: str, limit: int = DETAIL_LIMIT) -> str:
    """``text`` on one line: paragraphs joined with ``"; "``, every other run of white space one
    space, control characters shown as escapes, at most ``limit`` characters (``…`` marks a
    cut). netmiko's advice ("Common causes of this problem are: 1. …") stays readable and
    takes one row of a table instead of fifteen."""
    folded = _BLANK_RUN.sub("; ", text.strip())
    folded = _SPACES.sub(" ", folded).strip(" ;")
    folded = printable(folded)
    return folded if len(folded) <= limit else folded[: limit - 1].rstrip() + "…"


def describe(exc: BaseException) -> str:
    """An exception as one line: its text, or its type's name when it has none."""
    text = one_line(str(exc))
    return text or type(exc).__name__


class DeviceFailure(AgentError):
    """A device that could not be read or changed: ``DEVICE: KIND: DETAIL. Fix: HINT``.

    ``exit_code`` 1: one device failed, the fabric file was fine; whether the command as a whole
    exits 1 or 2 is decided from all devices' outcomes (docs/cli-conventions.md)."""

    exit_code = 1

    default_kind = COMMAND_FAILED

    def __init__(
        self, device: str, kind: str | None = None, detail: str | None = None, hint: str = ""
    ) -> None:
        if kind is None or detail is None:
            # One argument, the whole message ("leaf1: …"), as older callers raise it.
            message = device
            self.device, _, rest = message.partition(": ")
            self.kind, self.detail, self.hint = kind or self.default_kind, rest, hint
            super().__init__(message)
            return
        self.device = device
        self.kind = kind
        # The agent's own text is never cut (a fingerprint must stay whole); a library's text
        # comes through describe(), which is.
        self.detail = one_line(detail, limit=OWN_TEXT_LIMIT)
        self.hint = one_line(hint)
        fix = f". Fix: {self.hint}" if self.hint else ""
        super().__init__(f"{device}: {kind}: {self.detail}{fix}")


class Unreachable(DeviceFailure):
    """The device could not be connected to; :attr:`kind` is one of :data:`NOT_CONNECTED`."""

    default_kind = UNREACHABLE


class CommandFailed(DeviceFailure):
    """Connected, but a command's reply could not be had (or was refused, or too large)."""

    def __init__(self, device: str, detail: str, hint: str = "") -> None:
        super().__init__(device, COMMAND_FAILED, detail, hint)


def failure_of(device: str, exc: BaseException) -> DeviceFailure:
    """``exc``, raised while talking to a connected ``device``, as a classified failure."""
    if isinstance(exc, DeviceFailure):
        return exc
    text = describe(exc).removeprefix(f"{device}: ")
    if not isinstance(exc, AgentError):  # a library's exception: its type says what it was
        text = f"{type(exc).__name__}: {text}"
    return CommandFailed(
        device,
        text,
        "re-run with --debug for the exchange; a device that answers too slowly or refuses "
        "the command is named in the detail",
    )

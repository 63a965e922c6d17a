"""The agent's shortcut in netmiko's read path (agent.device.platforms.base): reads without ESC skip
the ANSI scan, and every read comes out exactly as netmiko's own method would return it."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from netmiko.base_connection import BaseConnection

from agent.device.platforms.base import ESC, Connection, skip_ansi_scan_without_escape


class Handle:
    """Just what netmiko's ``strip_ansi_escape_codes`` uses of its connection."""

    RETURN = "\n"

    def __init__(self) -> None:
        self.scans = 0

    def strip_ansi_escape_codes(self, string_buffer: str) -> str:
        self.scans += 1
        return BaseConnection.strip_ansi_escape_codes(self, string_buffer)  # type: ignore[arg-type]


def netmiko_strip(text: str) -> str:
    return BaseConnection.strip_ansi_escape_codes(Handle(), text)  # type: ignore[arg-type]


# Text from a switch: prompts, JSON, line ends, and the escape codes netmiko knows (and some
# it does not), cut anywhere.
PIECES = st.sampled_from(
    ["leaf1(config-s-x)#", '{"a": 1}', "\r\n", "\n", " ", "%", "[", "2K", "?25h", ";", "m",
     f"{ESC}[2K", f"{ESC}[24;27H", f"{ESC}E", f"{ESC}[3L", f"{ESC}[00;32m", f"{ESC}[?2004h",
     f"{ESC}[", ESC, f"{ESC}[9999B", "E"]
)  # fmt: skip


@given(st.lists(PIECES, max_size=30).map("".join) | st.text(max_size=200))
@example(f"show version{ESC}[K\r\nleaf1#")
@example("")
def test_every_read_comes_out_as_netmikos_method_returns_it(text: str) -> None:
    handle = Handle()
    connection = Connection(handle, "leaf1")
    assert connection.netmiko.strip_ansi_escape_codes(text) == netmiko_strip(text)
    # The scan runs exactly when there is something for it to find.
    assert handle.scans == (1 if ESC in text else 0)


def test_wrapped_once_and_left_alone_without_the_method() -> None:
    handle = Handle()
    Connection(handle, "leaf1")
    first = handle.strip_ansi_escape_codes
    Connection(handle, "leaf1")  # a second wrapper (reconnect) does not stack a second layer
    assert handle.strip_ansi_escape_codes is first

    bare: Any = object()
    skip_ansi_scan_without_escape(bare)  # fakes without the method are not touched
    assert not hasattr(bare, "strip_ansi_escape_codes")

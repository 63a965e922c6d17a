"""SSH access to the switch (asyncssh): authentication, one personality terminal per shell.

The terminal behaves like a switch's over a pty: every input line is echoed (netmiko waits for the
echo of each command before it reads the output), output lines end in CRLF, and the prompt is
written after the output. Input typed ahead while a command runs is echoed when its turn
comes, so the transcript always reads ``prompt, command, output, prompt``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from lab.mgmt.personality import Personality, Terminal

log = logging.getLogger("lab.mgmt.ssh")

_BACKSPACES = ("\x7f", "\x08")
_CTRL_C = "\x03"
MAX_LINE_CHARS = 16384  # longer input lines are cut (a config line is never this long)


@dataclass(frozen=True)
class AuthSettings:
    """Who may log in: one user, by password and/or by public key."""

    username: str
    password: str | None = None
    authorized_keys: str | None = None


@dataclass(frozen=True)
class SshSettings:
    """Where the switch's SSH server listens, with which host key, whom it lets in, and how
    a login greets (``privileged_login``: EOS' privileged EXEC ``#`` or user EXEC ``>``)."""

    host: str
    port: int
    host_key: asyncssh.SSHKey
    auth: AuthSettings
    privileged_login: bool = True
    system_mac: str = "00:00:00:00:00:00"


@dataclass
class Faults:
    """Lab-only fault injection, set from ``faults.json`` when the process gets SIGUSR1.

    Never reachable over SSH: only whoever can signal the process and write its state
    directory (the lab's owner) can set them. ``delay_s`` holds back the reply of every
    command matching ``slow_on`` (a switch slower than the client's timeouts); ``cut_on``
    drops the TCP connection on a matching command, ``before`` running it (the command is
    lost) or ``after`` (it ran, its reply is lost), ``cut_count`` times; ``restart_on``
    restarts the whole SSH management plane when a matching command arrives (once).
    """

    delay_s: float = 0.0
    slow_on: re.Pattern[str] | None = None
    cut_on: re.Pattern[str] | None = None
    cut_when: str = "before"
    cut_count: int = 0
    restart_on: re.Pattern[str] | None = None
    request_restart: Callable[[], None] | None = None
    connections: set[asyncssh.SSHServerConnection] = field(default_factory=set)

    def load(self, path: Path) -> None:
        """Replace the knobs with the file's (a missing file clears them)."""
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        self.delay_s = float(data.get("delay_s", 0.0))
        self.slow_on = re.compile(data["slow_on"]) if data.get("slow_on") else None
        self.cut_on = re.compile(data["cut_on"]) if data.get("cut_on") else None
        self.cut_when = str(data.get("cut_when", "before"))
        if self.cut_when not in ("before", "after"):
            raise ValueError(f"cut_when must be before or after, got {self.cut_when!r}")
        self.cut_count = int(data.get("cut_count", 1 if self.cut_on else 0))
        self.restart_on = re.compile(data["restart_on"]) if data.get("restart_on") else None
        log.warning("faults: %s", {k: v for k, v in data.items()})

    def delay_for(self, line: str) -> float:
        if self.delay_s and (self.slow_on is None or self.slow_on.search(line)):
            return self.delay_s
        return 0.0

    def cut_for(self, line: str) -> str | None:
        """``before``/``after`` if this command is to lose its connection (uses one cut);
        ``restart`` if it restarts the management plane."""
        if self.restart_on is not None and self.restart_on.search(line):
            self.restart_on = None
            if self.request_restart is not None:
                self.request_restart()
                return "restart"
        if self.cut_on is None or self.cut_count <= 0 or not self.cut_on.search(line):
            return None
        self.cut_count -= 1
        return self.cut_when

    def drop_all(self) -> int:
        """Abort every open SSH connection (a management plane restart); how many."""
        dropped = list(self.connections)
        for conn in dropped:
            conn.abort()
        self.connections.clear()
        return len(dropped)


class LineDiscipline:
    """Turns raw terminal input into lines and echoes what a terminal would show.

    ``feed`` is only called while no command runs; characters of an unfinished line are
    echoed at once (so a person sees what they type), complete lines wait in :attr:`lines`
    with how much of them was already echoed.
    """

    def __init__(self, write: Callable[[str], None], echo: bool) -> None:
        self._write = write
        self._echo = echo
        self._partial = ""
        self._echoed = 0
        self._after_cr = False
        self.lines: deque[tuple[str, int]] = deque()
        self.interrupted = False

    def feed(self, data: str) -> None:
        """Take a chunk of input."""
        for char in data:
            if self._after_cr and char == "\n":  # CRLF is one end of line
                self._after_cr = False
                continue
            self._after_cr = char == "\r"
            if char in "\r\n":
                self.lines.append((self._partial, self._echoed))
                self._partial, self._echoed = "", 0
            elif char in _BACKSPACES:
                if self._partial:
                    self._partial = self._partial[:-1]
                    if self._echoed > len(self._partial):
                        self._echoed -= 1
                        if self._echo:
                            self._write("\b \b")
            elif char == _CTRL_C:
                self._partial, self._echoed = "", 0
                self.interrupted = True
            elif (char == "\t" or char.isprintable()) and len(self._partial) < MAX_LINE_CHARS:
                self._partial += char
        self.echo_partial()

    def echo_partial(self) -> None:
        """Echo the unfinished line, unless complete lines are still waiting their turn."""
        if self._echo and not self.lines and self._echoed < len(self._partial):
            self._write(self._partial[self._echoed :])
            self._echoed = len(self._partial)


class _SwitchSSHServer(asyncssh.SSHServer):
    def __init__(self, auth: AuthSettings, faults: Faults | None = None) -> None:
        self._auth = auth
        self._faults = faults
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        if self._faults is not None:
            self._faults.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._faults is not None and self._conn is not None:
            self._faults.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        if self._auth.authorized_keys and username == self._auth.username and self._conn:
            self._conn.set_authorized_keys(self._auth.authorized_keys)
        return True  # always require authentication

    def password_auth_supported(self) -> bool:
        return self._auth.password is not None

    def validate_password(self, username: str, password: str) -> bool:
        expected = self._auth.password
        if expected is None:
            return False
        user_ok = hmac.compare_digest(username.encode(), self._auth.username.encode())
        password_ok = hmac.compare_digest(password.encode(), expected.encode())
        return user_ok and password_ok

    def public_key_auth_supported(self) -> bool:
        return self._auth.authorized_keys is not None


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


class ShellHandler:
    """Runs one SSH shell (or exec request) against the switch."""

    def __init__(
        self,
        personality: Personality,
        privileged_login: bool,
        system_mac: str,
        faults: Faults | None = None,
    ) -> None:
        self._personality = personality
        self._privileged_login = privileged_login
        self._system_mac = system_mac
        self._faults = faults

    async def _execute(
        self, process: asyncssh.SSHServerProcess[Any], cli: Terminal, line: str
    ) -> str | None:
        """Run one command through the fault knobs; None when the connection was cut."""
        faults = self._faults
        cut = faults.cut_for(line) if faults is not None else None
        if cut == "restart":
            log.warning("fault: management plane restart on %r", line)
            process.channel.get_connection().abort()  # the others go with the restart
            return None
        if cut == "before":
            log.warning("fault: connection cut before %r", line)
            process.channel.get_connection().abort()
            return None
        output = await cli.execute(line)
        delay = faults.delay_for(line) if faults is not None else 0.0
        if delay:
            log.warning("fault: reply to %r delayed %gs", line, delay)
            await asyncio.sleep(delay)
        if cut == "after":
            log.warning("fault: connection cut after %r ran", line)
            process.channel.get_connection().abort()
            return None
        return output

    async def __call__(self, process: asyncssh.SSHServerProcess[Any]) -> None:
        user = str(process.get_extra_info("username") or "")
        cli = self._personality.new_terminal(user, self._privileged_login, self._system_mac)
        peer = process.get_extra_info("peername")
        log.info("%s: %s logged in from %s", self._personality.nos, user, peer)
        try:
            if process.command is not None:
                await self._run_exec(process, cli, process.command)
            else:
                await self._run_shell(process, cli)
        finally:
            cli.disconnect()
            log.info("%s: %s's connection closed", self._personality.nos, user)
        process.exit(0)

    async def _run_exec(
        self, process: asyncssh.SSHServerProcess[Any], cli: Terminal, command: str
    ) -> None:
        for line in command.splitlines() or [""]:
            output = await self._execute(process, cli, line)
            if output is None:
                return
            if output:
                process.stdout.write(output + "\n")

    async def _run_shell(self, process: asyncssh.SSHServerProcess[Any], cli: Terminal) -> None:
        write = process.stdout.write
        echo = process.get_terminal_type() is not None
        discipline = LineDiscipline(write, echo)
        write(cli.prompt())
        while True:
            while discipline.lines:
                line, echoed = discipline.lines.popleft()
                if echo:
                    write(line[echoed:] + "\r\n")
                output = await self._execute(process, cli, line)
                if output is None:
                    return
                if output:
                    write(_crlf(output) + "\r\n")
                if cli.closed:
                    return
                write(cli.prompt())
                discipline.echo_partial()
            if discipline.interrupted:
                discipline.interrupted = False
                write("^C\r\n" + cli.prompt())
            try:
                data = await process.stdin.read(4096)
            except (asyncssh.TerminalSizeChanged, asyncssh.BreakReceived, asyncssh.SignalReceived):
                continue
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError):
                return
            if not data:
                return
            discipline.feed(data)


async def start_ssh_server(
    settings: SshSettings, personality: Personality, faults: Faults | None = None
) -> asyncssh.SSHAcceptor:
    """Listen on ``settings.host:port``; returns the acceptor (``close()`` +
    ``wait_closed()``). Every terminal speaks ``personality``."""
    handler = ShellHandler(personality, settings.privileged_login, settings.system_mac, faults)
    # A NOS with a file system reached over SCP (NX-OS' bootflash:) offers it; the others
    # refuse SCP and SFTP.
    sftp_factory = getattr(personality, "sftp_factory", None)
    acceptor: asyncssh.SSHAcceptor = await asyncssh.create_server(
        lambda: _SwitchSSHServer(settings.auth, faults),
        settings.host,
        settings.port,
        server_host_keys=[settings.host_key],
        process_factory=handler,
        line_editor=False,  # the CLI does its own echo, exactly once per character
        encoding="utf-8",
        sftp_factory=sftp_factory,
        allow_scp=sftp_factory is not None,
        login_timeout=30,
        reuse_address=True,
    )
    return acceptor

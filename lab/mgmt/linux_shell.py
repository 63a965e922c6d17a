"""A bash login shell as netmiko's ``linux`` driver expects it: the base of the Linux-based
NOSes' terminals (SONiC, Cumulus Linux / NVUE).

netmiko 4.x ``netmiko/linux/linux_ssh.py`` (``LinuxSSH``): the prompt ends in ``$`` (``#`` for
root; ``prompt_pattern = r"[$#]"``), the session is prepared by reading until that pattern and
taking the prompt line as the base prompt, nothing else is prepared (``disable_paging`` is a
no-op: "Linux doesn't have paging by default"), and commands are echoed before their output
(the SSH layer echoes). So:

* the prompt is ``<user>@<hostname>:<directory>$ `` (bash's ``\\u@\\h:\\w\\$``; ``#`` for
  root), each NOS saying which directory its login lands in;
* a line is split as bash splits words (``-bash: syntax error: unexpected end of file`` for an
  open quote); a blank line or a ``#`` comment does nothing;
* the built-ins every NOS's shell has are one table (:data:`BUILTINS`): ``echo [-n]``,
  ``exit`` / ``logout``, ``hostname``, ``whoami``, ``true`` / ``:``; a NOS adds its own;
* anything else is the NOS's program (:meth:`LinuxShell.run_program`), or answers as bash
  does: ``-bash: foo: command not found`` (exit status 127).

The exit status of the last command (:data:`STATUS`) is what ``&&`` and ``||`` decide on.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from contextvars import ContextVar

SYNTAX_ERROR = "-bash: syntax error: unexpected end of file"
# The exit status of the last command (``sh -c 'a && b'`` runs b only when a succeeded).
STATUS: ContextVar[int] = ContextVar("shell_exit_status", default=0)


def failed(text: str, code: int = 1) -> str:
    """``text`` as the output of a command that exits with ``code``."""
    STATUS.set(code)
    return text


Builtin = Callable[["LinuxShell", list[str], bool], str]


def _echo(shell: LinuxShell, args: list[str], root: bool) -> str:
    return " ".join(args[1:] if args[:1] == ["-n"] else args)


def _exit(shell: LinuxShell, args: list[str], root: bool) -> str:
    shell.closed = True
    return shell.logout_text


def _hostname(shell: LinuxShell, args: list[str], root: bool) -> str:
    return shell.hostname


def _whoami(shell: LinuxShell, args: list[str], root: bool) -> str:
    return "root" if root else shell.user


def _true(shell: LinuxShell, args: list[str], root: bool) -> str:
    return ""


BUILTINS: Mapping[str, Builtin] = {
    "echo": _echo,
    "exit": _exit,
    "logout": _exit,
    "hostname": _hostname,
    "whoami": _whoami,
    "true": _true,
    ":": _true,
}


class LinuxShell:
    """One SSH login shell on a Linux-based NOS (a :class:`lab.mgmt.personality.Terminal`)."""

    directory = "~"  # where the login lands, as the prompt shows it
    logout_text = "logout"  # what ``exit`` prints as the shell ends
    builtins: Mapping[str, Builtin] = BUILTINS

    def __init__(self, user: str, root: bool = False) -> None:
        self.user = user
        self.root = root
        self.closed = False

    @property
    def hostname(self) -> str:
        """The switch's name, for the prompt and ``hostname``."""
        raise NotImplementedError

    def prompt(self) -> str:
        """``admin@leaf1:~$ `` (``#`` for root)."""
        return f"{self.user}@{self.hostname}:{self.directory}{'#' if self.root else '$'} "

    def disconnect(self) -> None:
        """The connection closed; the switch's state stays."""
        self.closed = True

    async def execute(self, line: str) -> str:
        """Run one input line; what it prints."""
        if not line.strip() or line.lstrip().startswith("#"):
            return ""
        try:
            argv = shlex.split(line)
        except ValueError:
            return SYNTAX_ERROR
        return await self.run_words(argv)

    async def run_words(self, argv: list[str]) -> str:
        """Run one split input line as the logged-in user."""
        return await self.run_argv(argv, self.root)

    async def run_argv(self, argv: list[str], root: bool) -> str:
        """Run one command: a built-in, else the NOS's program."""
        builtin = self.builtins.get(argv[0])
        if builtin is not None:
            STATUS.set(0)
            return builtin(self, argv[1:], root)
        return await self.run_program(argv, root)

    async def run_program(self, argv: list[str], root: bool) -> str:
        """A command that is not a built-in (what the NOS installs; here: nothing)."""
        return failed(f"-bash: {argv[0]}: command not found", 127)

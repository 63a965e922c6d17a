"""A Cumulus Linux login shell, as netmiko's ``linux`` driver expects it.

netmiko ``LinuxSSH`` (netmiko/linux/linux_ssh.py) finds the prompt by its last character,
``$`` or ``#`` (``prompt_pattern = "[$#]"``), sets the base prompt from it, and prepares
nothing else (``disable_paging`` is a no-op: "Linux doesn't have paging by default"). The
prompt is ``<user>@<hostname>:mgmt:~$`` as in NVIDIA's transcripts (the switch logs in to the
management VRF, e.g. ``cumulus@switch:mgmt:~$`` in the RoCE and NVUE CLI pages of the
Cumulus Linux 5.14 user guide). Anything that is not ``nv`` or one of the few shell built-ins
below answers as bash does: ``-bash: <name>: command not found``.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from lab.mgmt.nvue.commands import NvCommand
from lab.mgmt.nvue.errors import NvueError

if TYPE_CHECKING:
    from lab.mgmt.nvue import NvuePersonality


class NvueTerminal:
    """One SSH shell on the NVUE switch."""

    def __init__(self, personality: NvuePersonality, user: str) -> None:
        self.personality = personality
        self.user = user or "cumulus"
        self.closed = False

    def prompt(self) -> str:
        """``cumulus@leaf1:mgmt:~$ ``."""
        return f"{self.user}@{self.personality.hostname}:mgmt:~$ "

    async def execute(self, line: str) -> str:
        """Run one line as bash would (``nv`` is the only program installed)."""
        try:
            words = shlex.split(line)
        except ValueError:
            return "-bash: syntax error: unexpected end of file"
        if not words:
            return ""
        program, args = words[0], words[1:]
        if program == "nv":
            try:
                return await NvCommand(self.personality, self.user).run(args)
            except NvueError as exc:
                return str(exc)
        return self._builtin(program, args)

    def _builtin(self, program: str, args: list[str]) -> str:
        if program in ("exit", "logout"):
            self.closed = True
            return ""
        if program == "hostname":
            return self.personality.hostname
        if program == "whoami":
            return self.user
        if program == "echo":
            return " ".join(args)
        if program in ("true", ":"):
            return ""
        return f"-bash: {program}: command not found"

    def disconnect(self) -> None:
        """The connection closed: pending revisions and the confirm timer belong to the
        switch and stay."""
        self.closed = True

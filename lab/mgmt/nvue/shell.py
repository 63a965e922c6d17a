"""The Cumulus Linux login shell: :mod:`lab.mgmt.linux_shell` whose one program is ``nv``.

The prompt is ``<user>@<hostname>:mgmt:~$`` as in NVIDIA's transcripts (the switch logs in to
the management VRF, e.g. ``cumulus@switch:mgmt:~$`` in the RoCE and NVUE CLI pages of the
Cumulus Linux 5.14 user guide). Anything that is not ``nv`` or a shared built-in answers as
bash does: ``-bash: <name>: command not found``.
"""

from __future__ import annotations

from lab.mgmt.linux_shell import LinuxShell
from lab.mgmt.nvue.commands import NvCommand
from lab.mgmt.nvue.errors import NvueError
from lab.mgmt.nvue.state import NvueSwitch


class NvueShell(LinuxShell):
    """One SSH shell on the NVUE switch. Pending revisions and the confirm timer belong to the
    switch and outlive it."""

    directory = "mgmt:~"
    logout_text = ""

    def __init__(self, personality: NvueSwitch, user: str) -> None:
        super().__init__(user or "cumulus")
        self.personality = personality

    @property
    def hostname(self) -> str:
        """The switch's name."""
        return self.personality.hostname

    async def run_program(self, argv: list[str], root: bool) -> str:
        """``nv ...`` (its errors are what it prints)."""
        if argv[0] != "nv":
            return await super().run_program(argv, root)
        try:
            return await NvCommand(self.personality, self.user).run(argv[1:])
        except NvueError as exc:
            return str(exc)

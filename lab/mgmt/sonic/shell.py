"""The SONiC login shell: :mod:`lab.mgmt.linux_shell` with what the agent's SONiC driver and
``systemd-run`` use on top of the shared built-ins:

* prompt ``admin@<hostname>:~$ `` (SONiC's default bash prompt ``\\u@\\h:\\w\\$``), ``> ``
  while a heredoc is open (bash's PS2);
* ``cat > FILE <<'EOF'`` ... ``EOF`` writes FILE into the switch's in-memory ``/tmp`` (netmiko's
  ``send_config_set`` sends heredoc lines one by one waiting for each echo); ``cat FILE``
  (also the GCU checkpoints and ``/etc/sonic/config_db.json``), ``rm [-f] FILE``;
* ``sudo [-n] [-u root] COMMAND`` runs COMMAND as root (password-less for the lab user);
* ``sh -c 'A && B; C'`` (also ``bash -c``, ``/bin/sh -c``): commands joined by ``&&`` (B runs
  only if A exited 0), ``||`` and ``;``, as a ``systemd-run`` service line uses them.

The SONiC commands themselves are in :mod:`lab.mgmt.sonic.commands`.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable

from lab.mgmt.linux_shell import STATUS, LinuxShell, failed
from lab.mgmt.sonic import commands
from lab.mgmt.sonic.checkpoints import CHECKPOINT_EXT, CHECKPOINTS_DIR
from lab.mgmt.sonic.configdb import SHOWN_CONFIG_DB_PATH, print_data
from lab.mgmt.sonic.state import SonicSwitch


class SonicShell(LinuxShell):
    """One SSH shell on the SONiC switch."""

    def __init__(self, switch: SonicSwitch, user: str, root: bool = False) -> None:
        super().__init__(user, root)
        self.switch = switch
        self._heredoc: tuple[str, str, list[str]] | None = None  # (path, terminator, lines)

    @property
    def hostname(self) -> str:
        """The switch's hostname (DEVICE_METADATA)."""
        return self.switch.hostname

    def prompt(self) -> str:
        """``admin@leaf1:~$ `` (``#`` for root), ``> `` inside a heredoc."""
        if self._heredoc is not None:
            return "> "
        return super().prompt()

    def disconnect(self) -> None:
        """The connection closed: an unfinished heredoc is lost (switch state stays)."""
        super().disconnect()
        self._heredoc = None

    async def execute(self, line: str) -> str:
        """Run one input line; what it prints."""
        if self._heredoc is not None:
            return self._heredoc_line(line)
        return await super().execute(line)

    async def run_words(self, argv: list[str]) -> str:
        """``cat > FILE <<'EOF'`` opens a heredoc; anything else runs."""
        heredoc = _heredoc_target(argv)
        if heredoc is None:
            return await super().run_words(argv)
        path, terminator = heredoc
        self._heredoc = (path, terminator, [])
        return ""

    def _heredoc_line(self, line: str) -> str:
        assert self._heredoc is not None
        path, terminator, lines = self._heredoc
        if line == terminator:
            self.switch.files[path] = "".join(f"{text}\n" for text in lines)
            self._heredoc = None
        else:
            lines.append(line)
        return ""

    async def run_argv(self, argv: list[str], root: bool) -> str:
        """Run one parsed command line (``sudo`` and ``sh -c`` here, built-ins in the base,
        the rest in :mod:`lab.mgmt.sonic.commands`)."""
        if argv[0] == "sudo":
            rest = _strip_sudo_options(argv[1:])
            if isinstance(rest, str):
                return failed(rest)
            return await self.run_argv(rest, root=True)
        if os.path.basename(argv[0]) in ("sh", "bash") and argv[1:2] == ["-c"]:
            return await self._command_string(argv[2] if len(argv) > 2 else "", root)
        return await super().run_argv(argv, root)

    async def run_program(self, argv: list[str], root: bool) -> str:
        """``cat`` / ``rm`` on the switch's files, or a SONiC command (``config``, ``show``,
        ``sonic-cfggen``, ...)."""
        on_files = _FILE_COMMANDS.get(argv[0])
        if on_files is not None:
            STATUS.set(0)
            return on_files(self.switch, argv[1:])
        return await commands.run(self.switch, argv, root)

    async def _command_string(self, text: str, root: bool) -> str:
        """``sh -c TEXT``: simple commands joined by ``&&``, ``||`` and ``;``."""
        lexer = shlex.shlex(text, posix=True, punctuation_chars="&|;")
        lexer.whitespace_split = True
        outputs: list[str] = []
        words: list[str] = []
        skip = False
        for token in [*lexer, ";"]:
            if token not in ("&&", "||", ";"):
                words.append(token)
                continue
            if words and not skip:
                output = await self.run_argv(words, root)
                outputs += [output] if output else []
            words = []
            status = STATUS.get()
            skip = (token == "&&" and status != 0) or (token == "||" and status == 0)
        return "\n".join(outputs)


def _heredoc_target(argv: list[str]) -> tuple[str, str] | None:
    """(file, terminator) of ``cat > FILE <<'EOF'`` / ``cat <<EOF > FILE``, else None."""
    if argv[:1] != ["cat"]:
        return None
    path = terminator = None
    items = iter(argv[1:])
    for item in items:
        if item == ">":
            path = next(items, None)
        elif item.startswith(">"):
            path = item[1:]
        elif item.startswith("<<"):
            terminator = item.removeprefix("<<-").removeprefix("<<") or next(items, None)
    if path is None or terminator is None:
        return None
    return path, terminator


def _strip_sudo_options(args: list[str]) -> list[str] | str:
    """The command after sudo's options (``-n``, ``-E``, ``-H``, ``-u root``)."""
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in ("-u", "--user"):
            user = rest.pop(0) if rest else ""
            if user != "root":
                return (
                    f"sudo: unknown user {user}"
                    if user
                    else "sudo: option requires an argument -- 'u'"
                )
        elif option not in ("-n", "--non-interactive", "-E", "-H", "-S"):
            return f"sudo: invalid option -- '{option.lstrip('-')[:1]}'"
    if not rest:
        return "usage: sudo -h | -K | -k | -V"
    return rest


def _read_file(switch: SonicSwitch, path: str) -> str | None:
    """/tmp files, the GCU checkpoints and the saved config_db.json."""
    if path.startswith(CHECKPOINTS_DIR + "/") and path.endswith(CHECKPOINT_EXT):
        name = path[len(CHECKPOINTS_DIR) + 1 : -len(CHECKPOINT_EXT)]
        return (
            json.dumps(switch.checkpoints.load(name)) if switch.checkpoints.exists(name) else None
        )
    if path == SHOWN_CONFIG_DB_PATH:
        saved = switch.saved()
        return print_data(saved) if saved is not None else None
    return switch.files.get(path)


def _cat(switch: SonicSwitch, args: list[str]) -> str:
    out = []
    for path in args:
        text = _read_file(switch, path)
        if text is None:
            STATUS.set(1)
            out.append(f"cat: {path}: No such file or directory")
        else:
            out.append(text.rstrip("\n"))
    return "\n".join(out)


def _rm(switch: SonicSwitch, args: list[str]) -> str:
    force = any(a.startswith("-") and "f" in a for a in args)
    errors = []
    for path in (a for a in args if not a.startswith("-")):
        if switch.files.pop(path, None) is None and not force:
            errors.append(f"rm: cannot remove '{path}': No such file or directory")
            STATUS.set(1)
    return "\n".join(errors)


# The switch's files: /tmp (heredocs), the GCU checkpoints, the saved CONFIG_DB.
_FILE_COMMANDS: dict[str, Callable[[SonicSwitch, list[str]], str]] = {"cat": _cat, "rm": _rm}

"""One EOS CLI terminal: privilege, configuration modes, prompts, exec and show commands, pipes.

Pure text in, text out (no SSH here), so unit tests drive it directly. The strings netmiko's
``arista_eos`` driver waits for (netmiko 4.x ``netmiko/arista/arista.py``,
``cisco_base_connection.py``, ``base_connection.py``):

* prompts end in ``>`` / ``#`` (``AristaBase.prompt_pattern = r"[$>#]"``); config modes contain
  ``)#`` (``check_config_mode(check_string=")#", pattern=r"[>\\#]")``) and start with the base
  prompt (``config_mode`` waits for ``re.escape(base_prompt[:16]) + ".*" + re.escape(")#")``);
* ``terminal width 511`` must answer ``Width set to`` (``set_terminal_width(pattern=r"Width set
  to")``) and ``terminal length 0`` ``Pagination disabled`` (``disable_paging(pattern=
  r"Pagination disabled")``), the exact EOS replies ``Width set to 511 columns.`` and
  ``Pagination disabled.``;
* ``enable`` checks for ``#`` first (``check_enable_mode(check_string="#")``); ``configure
  terminal`` enters config, ``end`` leaves it (``exit_config_mode(exit_config="end",
  pattern=r"#.*")``); ``copy running-config startup-config`` is ``save_config``'s command;
* every command is echoed before its output (``command_echo_read`` / ``send_config_set`` read
  until ``re.escape(cmd.strip())`` then ``(?:base_prompt.*$|#.*$)``) -- the SSH layer echoes.

Errors are printed in EOS' words (``% Invalid input (at token N: 'WORD')`` ...) and change
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lab.mgmt.cli_grammar import (
    CliError,
    Command,
    Converter,
    is_comment,
    match_command,
    refused,
    register_value_type,
    tokenize,
)
from lab.mgmt.cli_output import (
    ExecResult,
    PipeDialect,
    ShowOutput,
    apply_pipes,
    clear_counters,
    config_sections,
    live_counters,
    pretty_json,
)
from lab.mgmt.eos import shows
from lab.mgmt.eos.commands import ConfigMode, GlobalMode, apply_line
from lab.mgmt.eos.sessions import parse_commit_timer, session_diff
from lab.mgmt.eos.state import EosSwitch
from lab.mgmt.switch import ConfigRefused

UNCONVERTED = "% This is an unconverted command"
PRIVILEGE_REQUIRED = "% Invalid input (privileged mode required)"
COPY_DONE = "Copy completed successfully."


def _hhmmss(_arg: str) -> Converter:
    def convert(token: str) -> int:
        return parse_commit_timer(token)

    return convert


register_value_type("hhmmss", _hhmmss)

ExecHandler = Callable[["CliSession", dict[str, Any]], Awaitable[ExecResult]]
NavHandler = Callable[["CliSession", dict[str, Any]], Awaitable[str]]
PIPES = PipeDialect({"json": pretty_json}, UNCONVERTED)


class CliSession:
    """The state of one terminal (one SSH shell) on a lab switch."""

    def __init__(
        self,
        switch: EosSwitch,
        user: str,
        terminal: str,
        privileged: bool = True,
        system_mac: str = "00:00:00:00:00:00",
    ) -> None:
        self.switch = switch
        self.manager = switch.manager
        self.sessions = switch.sessions
        self.user = user
        self.terminal = terminal
        self.privileged = privileged
        self.system_mac = system_mac
        self.config_stack: list[ConfigMode] | None = None
        self.session_name: str | None = None
        self.closed = False
        self.width = 80
        self.length = 0

    # ----------------------------------------------------------------- prompt

    def prompt(self) -> str:
        """``leaf1>``, ``leaf1#``, ``leaf1(config-s-S1-if-Et1)#`` ..."""
        host = self.manager.running.hostname
        if self.config_stack is None:
            return host + ("#" if self.privileged else ">")
        label = "config"
        if self.session_name is not None:
            label += f"-s-{self.session_name}"
        inner = self.config_stack[-1].label()
        if inner:
            label += f"-{inner}"
        return f"{host}({label})#"

    # ----------------------------------------------------------------- entry point

    async def execute(self, line: str) -> str:
        """Run one input line; returns what the terminal prints before the next prompt."""
        if is_comment(line):
            return ""
        try:
            if self.config_stack is not None:
                return await self._config_or_exec(line)
            return await self._exec(line)
        except CliError as exc:
            return str(exc)

    def disconnect(self) -> None:
        """The connection closed: its sessions stay on the switch (EOS does the same)."""
        self.sessions.release_owned(self.terminal)
        self.closed = True

    # ----------------------------------------------------------------- configuration

    async def _config_or_exec(self, line: str) -> str:
        tokens = tokenize(line)
        try:
            nav = match_command(self._navigation_commands(), tokens)
        except CliError:
            pass
        else:
            return await nav.command.handler(self, nav.args)
        try:
            await self._apply_config(line)
            return ""
        except CliError as config_error:
            first_word = tokens[0].lower() if tokens else ""
            if first_word in ("end", "exit"):
                raise
            try:
                return await self._exec(line)
            except CliError:
                raise config_error from None

    def _navigation_commands(self) -> Sequence[Command[NavHandler]]:
        commands: list[Command[NavHandler]] = [
            Command("end", _leave_config),
            Command("exit", _exit_mode),
        ]
        if self.session_name is not None:
            commands += [
                Command("commit", _commit),
                Command("commit timer <seconds:hhmmss>", _commit),
                Command("abort", _abort),
                Command("rollback clean-config", _clean_config),
            ]
        return commands

    async def _apply_config(self, line: str) -> None:
        stack = self.config_stack
        assert stack is not None
        if self.session_name is not None:
            session = self.sessions.session(self.session_name)
            if session.state == "pendingCommitTimer":
                raise CliError(
                    f"% Session {session.name} is waiting for commit confirmation; "
                    "only commit or abort are possible"
                )
            candidate = session.config.clone()
            new_stack = apply_line(candidate, stack, line)
            session.config = candidate
            self.config_stack = new_stack
            return
        result: list[list[ConfigMode]] = []
        try:
            await self.manager.edit_running(
                lambda candidate: result.append(apply_line(candidate, stack, line))
            )
        except ConfigRefused as exc:
            raise refused(exc) from None
        self.config_stack = result[0]

    def enter_config(self, session: str | None = None) -> None:
        """Switch to (session) configuration mode."""
        self.config_stack = [GlobalMode()]
        self.session_name = session

    def leave_config(self) -> None:
        """Back to privileged exec (a session stays pending)."""
        self.config_stack = None
        self.session_name = None

    # ----------------------------------------------------------------- exec

    async def _exec(self, line: str) -> str:
        command, *pipes = (part.strip() for part in line.split("|"))
        tokens = tokenize(command)
        if not tokens:
            raise CliError("% Incomplete command")
        match = match_command(EXEC_COMMANDS, tokens)
        if not self.privileged and match.command.pattern not in UNPRIVILEGED:
            raise CliError(PRIVILEGE_REQUIRED)
        result = await match.command.handler(self, match.args)
        return apply_pipes(result, pipes, len(tokens), PIPES)

    async def counters(self) -> dict[str, Any]:
        """Live counters from the data plane."""
        return await live_counters(self.manager)


# ----------------------------------------------------------------------------- handlers


async def _leave_config(cli: CliSession, _args: dict[str, Any]) -> str:
    cli.leave_config()
    return ""


async def _exit_mode(cli: CliSession, _args: dict[str, Any]) -> str:
    stack = cli.config_stack
    assert stack is not None
    if len(stack) > 1:
        cli.config_stack = stack[:-1]
    else:
        cli.leave_config()
    return ""


async def _commit(cli: CliSession, args: dict[str, Any]) -> str:
    assert cli.session_name is not None
    await cli.sessions.commit(cli.session_name, args.get("seconds"))
    cli.leave_config()
    return ""


async def _abort(cli: CliSession, _args: dict[str, Any]) -> str:
    assert cli.session_name is not None
    await cli.sessions.abort(cli.session_name)
    cli.leave_config()
    return ""


async def _clean_config(cli: CliSession, _args: dict[str, Any]) -> str:
    assert cli.session_name is not None
    session = cli.sessions.session(cli.session_name)
    session.config = cli.manager.factory_config()
    cli.config_stack = [GlobalMode()]
    return ""


async def _enable(cli: CliSession, _args: dict[str, Any]) -> str:
    cli.privileged = True
    return ""


async def _disable(cli: CliSession, _args: dict[str, Any]) -> str:
    cli.privileged = False
    cli.leave_config()
    return ""


async def _logout(cli: CliSession, _args: dict[str, Any]) -> str:
    cli.closed = True
    return ""


async def _terminal_length(cli: CliSession, args: dict[str, Any]) -> str:
    cli.length = args["n"]
    return "Pagination disabled." if args["n"] == 0 else f"Pagination set to {args['n']} lines."


async def _terminal_width(cli: CliSession, args: dict[str, Any]) -> str:
    cli.width = args["n"]
    return f"Width set to {args['n']} columns."


async def _configure(cli: CliSession, _args: dict[str, Any]) -> str:
    if cli.config_stack is None or cli.session_name is not None:
        cli.enter_config()
    return ""


async def _configure_session(cli: CliSession, args: dict[str, Any]) -> str:
    session = cli.sessions.open(args.get("name"), cli.terminal, cli.user)
    cli.enter_config(session.name)
    return ""


async def _session_commit(cli: CliSession, args: dict[str, Any]) -> str:
    await cli.sessions.commit(args["name"], args.get("seconds"))
    if cli.session_name == args["name"]:
        cli.leave_config()
    return ""


async def _session_abort(cli: CliSession, args: dict[str, Any]) -> str:
    await cli.sessions.abort(args["name"])
    if cli.session_name == args["name"]:
        cli.leave_config()
    return ""


async def _save(cli: CliSession, _args: dict[str, Any]) -> str:
    await cli.switch.save_startup()
    return COPY_DONE


async def _show_version(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    return shows.show_version(cli.manager, cli.system_mac)


async def _show_hostname(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    return shows.show_hostname(cli.manager.running)


async def _show_running(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    output = shows.show_running_config(cli.manager.running)
    if "regex" in args:
        try:
            return ShowOutput(config_sections(output.text, args["regex"]))
        except re.error:
            raise CliError(f"% Invalid regular expression: {args['regex']}") from None
    return output


async def _show_running_diffs(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    running = shows.show_running_config(cli.manager.running).text
    return shows.running_config_diffs(running, cli.switch.startup_text())


async def _show_startup(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    text = cli.switch.startup_text()
    if text is None:
        raise CliError("% Startup-config does not exist")
    return ShowOutput(text.rstrip("\n"))


async def _show_interfaces_status(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    return shows.show_interfaces_status(cli.manager, cli.manager.running, await cli.counters())


async def _show_interfaces(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    return shows.show_interfaces(cli.manager, cli.manager.running, await cli.counters())


async def _show_lldp(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_lldp(cli.manager, "detail" in args)


def _ifs(args: dict[str, Any]) -> tuple[str, ...] | None:
    selected = args.get("ifs")
    return None if selected is None else tuple(selected.names)


async def _show_counters_errors(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_interfaces_counters_errors(cli.manager, await cli.counters(), _ifs(args))


async def _show_queue_counters(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_queue_counters(cli.manager, await cli.counters(), _ifs(args))


async def _show_queue_drops(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_queue_drops(cli.manager, await cli.counters(), _ifs(args))


async def _show_pfc(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    return shows.show_pfc(cli.manager, cli.manager.running)


async def _show_pfc_counters(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_pfc_counters(cli.manager, await cli.counters(), _ifs(args))


async def _show_pfc_watchdog(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_pfc_watchdog_counters(cli.manager, await cli.counters(), _ifs(args))


async def _show_qos_maps(cli: CliSession, _args: dict[str, Any]) -> ExecResult:
    return shows.show_qos_maps(cli.manager.running)


async def _show_qos_interfaces(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_qos_interfaces(cli.manager, cli.manager.running, _ifs(args))


async def _show_ecn_counters(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_ecn_counters(cli.manager, await cli.counters(), _ifs(args))


async def _show_session_config(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    name = args.get("name") or cli.session_name
    if name is None:
        raise CliError("% Not in a configuration session")
    session = cli.sessions.session(name)
    if "diffs" in args:
        return ShowOutput(session_diff(cli.manager.running, session))
    return shows.show_running_config(session.config)


async def _show_sessions(cli: CliSession, args: dict[str, Any]) -> ExecResult:
    return shows.show_configuration_sessions(cli.sessions, cli.session_name, "detail" in args)


_IFS = "[<ifs:ifrange>]"
EXEC_COMMANDS: tuple[Command[ExecHandler], ...] = (
    Command("enable", _enable),
    Command("disable", _disable),
    Command("exit", _logout),
    Command("logout", _logout),
    Command("quit", _logout),
    Command("terminal length <n:int:0-32767>", _terminal_length),
    Command("terminal width <n:int:10-32767>", _terminal_width),
    Command("configure", _configure),
    Command("configure terminal", _configure),
    Command("configure session", _configure_session),
    Command("configure session <name:word>", _configure_session),
    Command("configure session <name:word> commit", _session_commit),
    Command("configure session <name:word> commit timer <seconds:hhmmss>", _session_commit),
    Command("configure session <name:word> abort", _session_abort),
    Command("copy running-config startup-config", _save),
    Command("write", _save),
    Command("write memory", _save),
    Command("clear counters", clear_counters),
    Command("show version", _show_version),
    Command("show hostname", _show_hostname),
    Command("show running-config", _show_running),
    Command("show running-config section <regex:rest>", _show_running),
    Command("show running-config diffs", _show_running_diffs),
    Command("show startup-config", _show_startup),
    Command("show interfaces", _show_interfaces),
    Command("show interfaces status", _show_interfaces_status),
    Command("show lldp neighbors [<detail:choice:detail>]", _show_lldp),
    Command(f"show interfaces {_IFS} counters queue", _show_queue_counters),
    Command(f"show interfaces {_IFS} counters errors", _show_counters_errors),
    Command(f"show interfaces {_IFS} counters queue drops", _show_queue_drops),
    Command("show priority-flow-control", _show_pfc),
    Command("show priority-flow-control counters [interfaces <ifs:ifrange>]", _show_pfc_counters),
    Command(
        "show priority-flow-control counters watchdog [interfaces <ifs:ifrange>]",
        _show_pfc_watchdog,
    ),
    Command("show qos maps", _show_qos_maps),
    Command(f"show qos interfaces {_IFS}", _show_qos_interfaces),
    Command(f"show qos interfaces {_IFS} ecn counters queue", _show_ecn_counters),
    Command("show session-config [<diffs:choice:diffs>]", _show_session_config),
    Command("show session-config named <name:word> [<diffs:choice:diffs>]", _show_session_config),
    Command("show configuration sessions [<detail:choice:detail>]", _show_sessions),
)

UNPRIVILEGED = frozenset(
    c.pattern
    for c in EXEC_COMMANDS
    if c.pattern.startswith(("show", "terminal", "enable", "exit", "logout", "quit"))
    and "session" not in c.pattern
    and "startup" not in c.pattern
    and "running" not in c.pattern
)
"""User EXEC (``>``) may look at state but not at configs, and change nothing."""

"""One NX-OS CLI terminal: exec and configuration modes, prompts, show commands, pipes.

Pure text in, text out (no SSH here), so unit tests drive it directly. What netmiko's
``cisco_nxos`` driver sends and waits for (netmiko 4.x ``netmiko/cisco/cisco_nxos.py``
``CiscoNxosBase.session_preparation`` and the base classes it calls):

* a first prompt ending in ``#`` (``_test_channel_read(pattern=r"[>#]")``): NX-OS logs an
  admin in at ``switch#``;
* ``terminal width 511``, answered by its echo alone (``set_terminal_width(pattern="terminal
  width 511")``), and ``terminal length 0`` (``disable_paging``): NX-OS prints nothing for
  either;
* ``set_base_prompt`` on the prompt line; configuration prompts contain ``)#``
  (``check_config_mode(check_string=")#")``): ``switch(config)#``, ``switch(config-if)#``,
  ``switch(config-pmap-nqos-c)#`` ...; ``configure terminal`` / ``end``;
* ``copy running-config startup-config`` is ``save_config``'s command.

Errors are printed as NX-OS prints them: a caret under the token that fits nowhere, then
``% Invalid command at '^' marker.`` (``Incomplete``, ``Ambiguous``); other refusals are one
``%`` line. A line may hold several commands separated by ``;`` (NX-OS runs them in turn and
stops at the first that fails).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lab.mgmt.cli_grammar import (
    CliError,
    Command,
    NoMatch,
    is_comment,
    match_command,
    tokenize,
)
from lab.mgmt.cli_output import (
    ExecResult,
    PipeDialect,
    ShowOutput,
    apply_pipes,
    clear_counters,
    live_counters,
    pretty_json,
)
from lab.mgmt.nxos import shows
from lab.mgmt.nxos.bootflash import BootflashError
from lab.mgmt.nxos.commands import (
    ConfigMode,
    GlobalMode,
    Ports,
    apply_line,
    load_config_text,
)
from lab.mgmt.nxos.render import ipqos_lines
from lab.mgmt.nxos.state import NxosSwitch

ExecHandler = Callable[["NxosCli", dict[str, Any]], Awaitable[ExecResult]]
NavHandler = Callable[["NxosCli", dict[str, Any]], Awaitable[str]]
# NX-OS' ``| json`` prints one line, ``| json-pretty`` indents (NX-OS Programmability Guide,
# "NX-API CLI": JSON output of show commands).
PIPES = PipeDialect(
    {"json": lambda data: json.dumps(data), "json-pretty": pretty_json},
    "% JSON output is not supported for this command",
    pass_verbs=("no-more", "xml"),
)
_MARKER = {
    "invalid": "% Invalid command at '^' marker.",
    "incomplete": "% Incomplete command at '^' marker.",
    "ambiguous": "% Ambiguous command at '^' marker.",
}
CONFIG_BANNER = "Enter configuration commands, one per line. End with CNTL/Z."


class NxosCli:
    """The state of one terminal (one SSH shell) on an NX-OS lab switch."""

    def __init__(self, switch: NxosSwitch, user: str, system_mac: str) -> None:
        self.switch = switch
        self.manager = switch.manager
        self.user = user
        self.system_mac = system_mac
        self.stack: list[ConfigMode] | None = None
        self.closed = False
        self.width = 80
        self.length = 24

    def prompt(self) -> str:
        """``leaf1#``, ``leaf1(config)#``, ``leaf1(config-pmap-c-que)#`` ..."""
        host = self.switch.running.hostname
        if self.stack is None:
            return f"{host}#"
        return f"{host}({self.stack[-1].label()})#"

    def disconnect(self) -> None:
        """The connection closed; checkpoints and a configure-replace timer stay."""
        self.closed = True

    async def execute(self, line: str) -> str:
        """Run one input line (its ``;``-separated commands in turn); what it prints."""
        outputs = []
        for part in line.split(";"):
            prompt = self.prompt()
            try:
                outputs.append(await self._one(part))
            except NoMatch as exc:
                outputs.append(_caret(prompt, part, exc))
                break
            except CliError as exc:
                outputs.append(str(exc))
                break
        return "\n".join(o for o in outputs if o)

    async def _one(self, line: str) -> str:
        if is_comment(line):
            return ""
        if self.stack is not None:
            return await self._config_or_exec(line)
        return await self._exec(line)

    # ----------------------------------------------------------------- configuration

    async def _config_or_exec(self, line: str) -> str:
        tokens = tokenize(line)
        try:
            nav = match_command(NAVIGATION, tokens)
        except CliError:
            pass
        else:
            return await nav.command.handler(self, nav.args)
        stack = self.stack
        assert stack is not None
        result: list[list[ConfigMode]] = []
        try:
            await self.switch.edit(lambda config: result.append(apply_line(config, stack, line)))
        except CliError as config_error:
            try:  # an exec command (show, copy, checkpoint ...) works in config mode too
                return await self._exec(line)
            except CliError:
                raise config_error from None
        self.stack = result[0]
        return ""

    # ----------------------------------------------------------------- exec

    async def _exec(self, line: str) -> str:
        command, *pipes = (part.strip() for part in line.split("|"))
        tokens = tokenize(command)
        if not tokens:
            raise CliError("% Incomplete command")
        match = match_command(EXEC_COMMANDS, tokens)
        result = await match.command.handler(self, match.args)
        return apply_pipes(result, pipes, len(tokens), PIPES)

    async def counters(self) -> dict[str, Any]:
        """Live counters from the data plane."""
        return await live_counters(self.manager)


def _caret(prompt: str, line: str, error: NoMatch) -> str:
    """NX-OS' error: a caret under the blamed token (after the line when it ended early)."""
    tokens = tokenize(line)
    position = len(line.rstrip()) + 1
    offset = 0
    for index, token in enumerate(tokens):
        offset = line.index(token, offset)
        if index == error.index:
            position = offset
            break
        offset += len(token)
    return " " * (len(prompt) + position) + "^\n" + _MARKER[error.kind]


# ----------------------------------------------------------------------------- navigation


async def _end(cli: NxosCli, _args: dict[str, Any]) -> str:
    cli.stack = None
    return ""


async def _exit(cli: NxosCli, _args: dict[str, Any]) -> str:
    assert cli.stack is not None
    cli.stack = cli.stack[:-1] if len(cli.stack) > 1 else None
    return ""


NAVIGATION: tuple[Command[NavHandler], ...] = (Command("end", _end), Command("exit", _exit))


# ----------------------------------------------------------------------------- exec handlers


async def _logout(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    cli.closed = True
    return ""


async def _terminal_length(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    cli.length = args["n"]
    return ""


async def _terminal_width(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    cli.width = args["n"]
    return ""


async def _configure(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    cli.stack = [GlobalMode()]
    return CONFIG_BANNER


async def _save(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    await cli.switch.save_startup()
    return "[########################################] 100%\nCopy complete."


async def _checkpoint(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return cli.switch.rollbacks.create(
        args["name"], cli.switch.running, cli.user, args.get("description")
    )


async def _no_checkpoint(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    cli.switch.rollbacks.delete(args["name"])
    return ""


async def _clear_checkpoints(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    cli.switch.rollbacks.checkpoints.clear()
    return ""


async def _rollback(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return await cli.switch.rollbacks.rollback(args["name"])


async def _replace(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    """``configure replace bootflash:FILE [commit-timeout N]``: the file read as a whole
    configuration from the factory one; a bad line refuses it all."""
    switch = cli.switch
    try:
        text = switch.bootflash.read(args["file"])
        candidate = load_config_text(switch.factory_config(), text)
    except (BootflashError, CliError) as exc:
        return (
            f"{_as_error(exc)}\nConfigure replace failed. The running configuration is unchanged."
        )
    return await switch.rollbacks.replace(candidate, switch.running, args.get("seconds"))


def _as_error(exc: Exception) -> str:
    text = str(exc)
    return text if text.startswith("%") else f"% {text}"


async def _replace_commit(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    cli.switch.rollbacks.commit()
    return ""


async def _delete(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    try:
        cli.switch.bootflash.delete(args["file"])
    except BootflashError as exc:
        raise CliError(str(exc)) from None
    return ""


async def _dir(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    bootflash = cli.switch.bootflash
    try:
        return shows.show_dir(bootflash.listing(), *bootflash.usage())
    except BootflashError as exc:
        raise CliError(str(exc)) from None


async def _md5(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    try:
        return cli.switch.bootflash.md5(args["file"])
    except BootflashError as exc:
        raise CliError(str(exc)) from None


async def _show_version(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    return shows.show_version(cli.manager, cli.system_mac)


async def _show_hostname(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    return shows.show_hostname(cli.switch.running)


async def _show_running(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    switch = cli.switch
    if args.get("part") == "diff":
        return shows.running_diff(switch.running, switch.startup_text())
    if args.get("part") == "ipqos":
        return ShowOutput("\n".join(ipqos_lines(switch.running)))
    return shows.show_running(switch.running, switch.changed_at)


async def _show_startup(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    text = cli.switch.startup_text()
    if text is None:
        raise CliError("% No startup-config was saved")
    return ShowOutput(text.rstrip("\n"))


async def _show_checkpoints(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return shows.show_checkpoint_summary(cli.switch.rollbacks.checkpoints, args.get("kind"))


async def _show_checkpoint(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return shows.show_checkpoint(cli.switch.rollbacks.checkpoint(args["name"]))


async def _show_policy_maps(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return shows.show_policy_maps(cli.switch.running, args.get("type"), args.get("name"))


async def _show_class_maps(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    return shows.show_class_maps(cli.switch.running)


async def _show_interfaces(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    return shows.show_interfaces(cli.manager, cli.switch.running, await cli.counters())


async def _show_pfc(cli: NxosCli, _args: dict[str, Any]) -> ExecResult:
    return shows.show_pfc(cli.manager, cli.switch.running, await cli.counters())


def _wanted(args: dict[str, Any]) -> Sequence[str] | None:
    ports: Ports | None = args.get("ports")
    return None if ports is None else ports.names


async def _show_queuing(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return shows.show_queuing(cli.manager, cli.switch.running, await cli.counters(), _wanted(args))


async def _show_pfc_queue(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    counters = await cli.counters()
    return shows.show_pfc_queue(cli.manager, cli.switch.running, counters, _wanted(args))


async def _show_lldp(cli: NxosCli, args: dict[str, Any]) -> ExecResult:
    return shows.show_lldp(cli.manager, "detail" in args)


_NAME = "<name:word:[A-Za-z0-9_.\\-]{1,80}>"
_FILE = "<file:word:(?:bootflash:)?/?[A-Za-z0-9_.\\-]{1,128}>"
_IF = "<ports:nxports>"
EXEC_COMMANDS: tuple[Command[ExecHandler], ...] = (
    Command("exit", _logout),
    Command("quit", _logout),
    Command("terminal length <n:int:0-511>", _terminal_length),
    Command("terminal width <n:int:24-511>", _terminal_width),
    Command("configure", _configure),
    Command("configure terminal", _configure),
    Command(f"configure replace {_FILE} [commit-timeout <seconds:int:30-3600>]", _replace),
    Command("configure replace commit", _replace_commit),
    Command("copy running-config startup-config", _save),
    Command(f"checkpoint {_NAME} [description <description:rest>]", _checkpoint),
    Command(f"no checkpoint {_NAME}", _no_checkpoint),
    Command("clear checkpoint database", _clear_checkpoints),
    Command(
        f"rollback running-config checkpoint {_NAME} "
        "[<mode:choice:atomic,best-effort,stop-at-first-failure>]",
        _rollback,
    ),
    Command(f"delete {_FILE} [<no_prompt:choice:no-prompt>]", _delete),
    Command("dir [<fs:choice:bootflash:>]", _dir),
    Command(f"show file {_FILE} md5sum", _md5),
    Command("clear counters", clear_counters),
    Command("clear qos statistics", clear_counters),
    Command("show version", _show_version),
    Command("show hostname", _show_hostname),
    Command("show running-config [<part:choice:ipqos,diff>]", _show_running),
    Command("show startup-config", _show_startup),
    Command("show checkpoint summary [<kind:choice:user,system>]", _show_checkpoints),
    Command(f"show checkpoint {_NAME}", _show_checkpoint),
    Command(
        f"show policy-map [type <type:choice:qos,queuing,network-qos>] [{_NAME}]",
        _show_policy_maps,
    ),
    Command("show class-map [type qos]", _show_class_maps),
    Command("show interface", _show_interfaces),
    Command("show interface priority-flow-control", _show_pfc),
    Command(f"show queuing interface [{_IF}]", _show_queuing),
    Command(f"show queuing interface ethernet {_IF}", _show_queuing),
    Command(f"show queuing pfc-queue [interface {_IF}] [<detail:choice:detail>]", _show_pfc_queue),
    Command("show lldp neighbors [<detail:choice:detail>]", _show_lldp),
)

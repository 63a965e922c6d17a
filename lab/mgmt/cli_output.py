"""What an industry-CLI show command prints, and the pipes after it (``| json``, ``| include``
...), shared by the EOS and NX-OS terminals.

A show command answers a :class:`ShowOutput`: its text and, where the NOS converts that command
to JSON, the data. :func:`apply_pipes` runs the pipes of one line; each NOS gives its own
:class:`PipeDialect` (which JSON verbs it has, how it prints JSON, what it says for a command
without a JSON form). :func:`live_counters` reads the data plane's counters for the shows
that print them; :func:`clear_counters` is the ``clear counters`` command of both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lab.mgmt.cli_grammar import CliError, invalid_input
from lab.mgmt.dataplane_handle import DataplaneError
from lab.mgmt.switch import SwitchManager

FILTER_VERBS = ("include", "exclude", "begin", "section")


@dataclass(frozen=True)
class ShowOutput:
    """Text for the terminal and, if the command is converted, its JSON form."""

    text: str
    data: dict[str, Any] | None = None


ExecResult = ShowOutput | str


@dataclass(frozen=True)
class PipeDialect:
    """One NOS's pipes: its JSON verbs (verb -> how the data is printed), the verbs that leave
    the text as it is, and the message for ``| json`` on a command without a JSON form."""

    json_verbs: dict[str, Callable[[dict[str, Any]], str]]
    unconverted: str
    pass_verbs: tuple[str, ...] = ("no-more",)
    filter_verbs: tuple[str, ...] = field(default=FILTER_VERBS)

    @property
    def verbs(self) -> tuple[str, ...]:
        return (*self.json_verbs, *self.pass_verbs, *self.filter_verbs)


async def live_counters(manager: SwitchManager) -> dict[str, Any]:
    """The data plane's counters now, for a show command (CliError when it does not answer)."""
    try:
        return await manager.dataplane.counters()
    except DataplaneError as exc:
        raise CliError(f"% Data plane unreachable: {exc}") from None


class OnSwitch(Protocol):
    """A terminal of a switch (what the shared exec commands need of it)."""

    manager: SwitchManager


async def clear_counters(cli: OnSwitch, _args: dict[str, Any]) -> str:
    """``clear counters``: the data plane's counters back to zero (nothing printed)."""
    try:
        await cli.manager.dataplane.clear_counters()
    except DataplaneError as exc:
        raise CliError(f"% Data plane unreachable: {exc}") from None
    return ""


def pretty_json(data: dict[str, Any]) -> str:
    """JSON indented by two spaces (EOS' ``| json``, NX-OS' ``| json-pretty``)."""
    return json.dumps(data, indent=2)


def apply_pipes(result: ExecResult, pipes: list[str], token_base: int, dialect: PipeDialect) -> str:
    """The text a command prints after its pipes. A verb may be abbreviated to any unique
    prefix; an unknown one is refused at its token (``token_base`` tokens came before)."""
    output = result if isinstance(result, ShowOutput) else ShowOutput(result)
    text = output.text
    for position, pipe in enumerate(pipes):
        words = pipe.split(maxsplit=1)
        if not words:
            raise CliError("% Incomplete command")
        exact = [v for v in dialect.verbs if v == words[0].lower()]
        candidates = exact or [v for v in dialect.verbs if v.startswith(words[0].lower())]
        if len(candidates) != 1:
            raise invalid_input(token_base + position + 1, words[0])
        verb = candidates[0]
        if verb in dialect.json_verbs:
            if output.data is None:
                raise CliError(dialect.unconverted)
            text = dialect.json_verbs[verb](output.data)
        elif verb in dialect.filter_verbs:
            text = _filter(text, verb, words[1] if len(words) > 1 else "")
    return text


def _filter(text: str, verb: str, argument: str) -> str:
    if not argument:
        raise CliError("% Incomplete command")
    try:
        regex = re.compile(argument)
    except re.error:
        raise CliError(f"% Invalid regular expression: {argument}") from None
    lines = text.splitlines()
    if verb == "include":
        return "\n".join(line for line in lines if regex.search(line))
    if verb == "exclude":
        return "\n".join(line for line in lines if not regex.search(line))
    if verb == "begin":
        for index, line in enumerate(lines):
            if regex.search(line):
                return "\n".join(lines[index:])
        return ""
    return config_sections(text, regex.pattern)


def config_sections(text: str, pattern: str) -> str:
    """``| section REGEX``: every top-level block of a configuration with a matching line."""
    regex = re.compile(pattern)
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("!") or line == "end":
            continue
        if not line.startswith(" ") or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    kept = [block for block in blocks if any(regex.search(line) for line in block)]
    out: list[str] = []
    for block in kept:
        out += [line for line in block if line.strip() != "!"]
    return "\n".join(out)

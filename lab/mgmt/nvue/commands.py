"""The ``nv`` command: ``set``/``unset``, ``config …`` and ``show …``.

Syntax from NVIDIA's Cumulus Linux 5.14 "NVUE CLI" page (CumulusNetworks/docs
``content/cumulus-linux-514/System-Configuration/NVIDIA-User-Experience-NVUE/NVUE-CLI.md`` at
14b5217a), "Configuration Management Commands" and "Monitoring Commands":

- ``nv config apply [<revision>] [-y|--assume-yes] [--assume-no] [--confirm [<time>]]
  [-m <message>]``, ``nv config apply --confirm-yes|--confirm-no|--confirm-status``;
- ``nv config diff [<rev> [<rev>]] [-o json]`` (revisions: integers, ``applied``,
  ``startup``, ``empty``); ``nv config show [-r <rev>] [-o json|yaml]``; ``nv config
  history``; ``nv config detach``; ``nv config save``;
- ``nv show … [-o|--output json|yaml|auto]``.

Times for ``--confirm`` are ``<n>[s|m|h|d]`` (the guide's example is ``60m``); a bare number
is read as seconds, which the guide does not say.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lab.mgmt.nvue import shows
from lab.mgmt.nvue.errors import NvueError
from lab.mgmt.nvue.revisions import DEFAULT_CONFIRM_S
from lab.mgmt.nvue.schema import resolve, root_schema
from lab.mgmt.nvue.state import NvueSwitch
from lab.mgmt.nvue.translate import Effective, effective
from lab.mgmt.nvue.tree import Tree, apply_set, apply_unset, diff, get

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class Options:
    """``nv`` options that may appear anywhere after the verb."""

    words: list[str] = field(default_factory=list)
    output: str = "auto"
    flags: set[str] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)


_WITH_VALUE = {"-o": "output", "--output": "output", "-m": "message", "--message": "message",
               "-r": "rev", "--rev": "rev"}  # fmt: skip


def parse_options(words: list[str]) -> Options:
    """Split words from ``-o json``-style options; ``--confirm`` takes an optional time."""
    found = Options()
    i = 0
    while i < len(words):
        word = words[i]
        key, eq, inline = word.partition("=")
        if key in _WITH_VALUE:
            value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
            if not value:
                raise NvueError(f"Error: option {key} needs a value")
            found.values[_WITH_VALUE[key]] = value
            i += 1 if eq else 2
        elif key == "--confirm":
            found.flags.add("--confirm")
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if eq or re.fullmatch(r"\d+[smhd]?", nxt):
                found.values["confirm"] = inline if eq else nxt
                i += 1 if eq else 2
            else:
                i += 1
        elif word.startswith("-"):
            found.flags.add(word)
            i += 1
        else:
            found.words.append(word)
            i += 1
    found.output = found.values.get("output", "auto")
    if found.output not in ("auto", "json", "yaml", "native", "commands"):
        raise NvueError(f"Error: Invalid value '{found.output}' for --output")
    return found


def confirm_seconds(text: str | None) -> int:
    """``90s``, ``10m``, ``1h``, ``90`` -> seconds (default ten minutes)."""
    if text is None:
        return DEFAULT_CONFIRM_S
    match = re.fullmatch(r"(\d+)([smhd]?)", text)
    if match is None or int(match.group(1)) == 0:
        raise NvueError(f"Error: Invalid value '{text}' for --confirm: expected a time such as 60m")
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


@dataclass
class NvCommand:
    """One ``nv …`` line run by ``user`` on the switch ``personality``."""

    personality: NvueSwitch
    user: str

    async def run(self, words: list[str]) -> str:
        if not words:
            return "Usage: nv [options] <command> [<args>]\nCommands: set unset show config action"
        verb, rest = words[0], words[1:]
        handler = self._verbs().get(verb)
        if handler is None:
            raise NvueError(f"Error: Invalid Command: {verb}")
        return await handler(rest)

    def _verbs(self) -> dict[str, Callable[[list[str]], Awaitable[str]]]:
        return {"set": self._set, "unset": self._unset, "config": self._config, "show": self._show}

    # ----------------------------------------------------------------- set / unset

    def _schema_paths(self, words: list[str], unset: bool) -> Any:
        if not words:
            raise NvueError(
                f"Error: Incomplete Command: nv {'unset' if unset else 'set'} <qos|interface>"
            )
        return resolve(root_schema(list(self.personality.ports)), words, unset)

    async def _set(self, words: list[str]) -> str:
        change = self._schema_paths(words, unset=False)
        apply_set(self.personality.store.pending_of(self.user).tree, change)
        return ""

    async def _unset(self, words: list[str]) -> str:
        change = self._schema_paths(words, unset=True)
        apply_unset(self.personality.store.pending_of(self.user).tree, change)
        return ""

    # ----------------------------------------------------------------- config

    async def _config(self, words: list[str]) -> str:
        options = parse_options(words)
        if not options.words:
            raise NvueError(
                "Error: Incomplete Command: nv config <apply|diff|show|history|detach|save>"
            )
        sub, args = options.words[0], options.words[1:]
        store = self.personality.store
        if sub == "apply":
            return await self._apply(options, args)
        if sub == "diff":
            return self._diff(options, args)
        if sub == "show":
            tree = self._revision(options.values.get("rev", "applied"))
            return _render(store.document(tree), options.output, yaml_default=True)
        if sub == "history":
            return shows.history_table(store.history)
        if sub == "detach":
            store.detach(self.user)
            return ""
        if sub == "save":
            async with self.personality.lock:
                await store.save()
            return ""
        raise NvueError(f"Error: Invalid Command: config {sub}")

    async def _apply(self, options: Options, args: list[str]) -> str:
        store = self.personality.store
        async with self.personality.lock:
            if "--confirm-status" in options.flags:
                return _confirm_status(store.confirm_left(), store.confirm)
            if "--confirm-yes" in options.flags:
                return f"Confirmed [rev_id: {await store.confirm_yes()}]"
            if "--confirm-no" in options.flags:
                return f"Rolled back [rev_id: {await store.confirm_no()}]"
            if "--assume-no" in options.flags:
                return "Aborted: --assume-no declines the apply"
            if args:
                self._attach(args[0])
            confirm = (
                confirm_seconds(options.values.get("confirm"))
                if "--confirm" in options.flags
                else None
            )
            rev_id = await store.apply(self.user, confirm, options.values.get("message", ""))
        if confirm is None:
            return f"applied [rev_id: {rev_id}]"
        return (
            f"applied [rev_id: {rev_id}]\n"
            f"Confirm within {confirm} seconds with 'nv config apply --confirm-yes', "
            "or it rolls back"
        )

    def _attach(self, name: str) -> None:
        """``nv config apply <rev>``: a detached revision becomes the user's pending one."""
        store = self.personality.store
        if not name.isdigit() or int(name) not in store.detached:
            raise NvueError(f"Error: Invalid revision '{name}'")
        revision = store.detached.pop(int(name))
        store.pending[self.user] = revision

    def _diff(self, options: Options, args: list[str]) -> str:
        if len(args) > 2:
            raise NvueError("Error: nv config diff takes at most two revisions")
        if not args:
            old, new = self.personality.store.applied.tree, self._revision("pending")
        elif len(args) == 1:
            old, new = self._revision(args[0]), self._revision("pending")
        else:
            old, new = self._revision(args[0]), self._revision(args[1])
        sets, unsets = diff(old, new)
        return _render(shows.diff_document(sets, unsets), options.output, yaml_default=True)

    def _revision(self, name: str) -> Tree:
        store = self.personality.store
        if name == "applied":
            return store.applied.tree
        if name == "pending":
            return store.pending_tree(self.user)
        if name == "empty":
            return {}
        if name == "startup":
            return store.load_startup() or {}
        if name.isdigit():
            rev = int(name)
            for revision in [*store.detached.values(), *store.pending.values(), store.applied]:
                if revision.rev_id == rev:
                    return revision.tree
        raise NvueError(f"Error: Invalid revision '{name}'")

    # ----------------------------------------------------------------- show

    async def _show(self, words: list[str]) -> str:
        options = parse_options(words)
        path = options.words
        personality = self.personality
        applied = personality.store.applied.tree
        if path == ["qos", "roce"]:
            state = effective(applied)
            if options.output == "json":
                return shows.as_json(shows.roce_json(state))
            return shows.roce_text(state)
        if path == ["system", "forwarding", "packet-trim", "counters"]:
            counters = await personality.manager.dataplane.counters()
            data = shows.packet_trim_counters_json(counters, list(personality.ports))
            if options.output == "json":
                return shows.as_json(data)
            return shows.packet_trim_counters_text(data)
        if path == ["interface"]:
            counters = await personality.manager.dataplane.counters()
            return _render(shows.interfaces_json(personality.ports, counters), options.output)
        if len(path) >= 2 and path[0] == "interface":
            return await self._show_interface(path[1], path[2:], options)
        found = get(applied, *path)
        if found is None:
            raise NvueError(f"Error: Invalid Command: show {' '.join(path)}")
        return _render(found, options.output)

    async def _show_interface(self, name: str, rest: list[str], options: Options) -> str:
        personality = self.personality
        port = personality.ports.get(name)
        if port is None:
            raise NvueError(f"Error: The requested item does not exist: interface {name}")
        if rest == ["lldp", "neighbor"]:
            return _render(shows.lldp_neighbor_json(port), options.output)
        counters = await personality.manager.dataplane.counters()
        if rest == ["counters", "qos"]:
            return _render(shows.counters_qos_json(counters, name), options.output)
        if rest in (["counters", "packet-trim"], ["packet-trim", "counters"]):
            classes = _trim_classes(effective(personality.store.applied.tree), name)
            data = shows.interface_trim_counters_json(counters, name, classes)
            if options.output == "json":
                return shows.as_json(data)
            return shows.interface_trim_counters_text(data)
        if rest == ["qos", "pfc-watchdog"]:
            on = name in effective(personality.store.applied.tree).watchdog_ports
            return _render(shows.pfc_watchdog_json(counters, name, on), options.output)
        if not rest:
            return _render(shows.interfaces_json({name: port}, counters)[name], options.output)
        raise NvueError(f"Error: Invalid Command: show interface {name} {' '.join(rest)}")


def _render(data: Any, output: str, yaml_default: bool = False) -> str:
    if output == "json":
        return shows.as_json(data)
    if output == "yaml" or yaml_default or output == "auto":
        return shows.as_yaml(data)
    return shows.as_json(data)


def _confirm_status(left: float | None, pending: Any) -> str:
    if left is None or pending is None:
        return "No applied revision is waiting for confirmation"
    return (
        f"Revision {pending.rev_id} is waiting for confirmation: "
        f"{int(left + 0.999)} seconds left before the automatic rollback"
    )


def _trim_classes(state: Effective, name: str) -> list[int]:
    """The traffic classes ``name`` trims (its own eligibility, else the default profile's)."""
    if state.trim is None:
        return []
    return list(state.trim_classes.get(name, state.trim_classes.get("*", ())))

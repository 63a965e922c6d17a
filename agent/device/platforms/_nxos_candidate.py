"""The whole configuration an NX-OS ``configure replace`` is given: the switch's own running
configuration with the agent's change in place.

``configure replace`` takes a complete configuration, not a list of changes (Cisco Nexus 9000
NX-OS System Management Configuration Guide, "Performing Configuration Replace": "It should
not be a partial configuration"), so the driver reads ``show running-config`` and puts its
rendered lines into it here -- pure text work, tested on its own:

- a ``class-map`` or ``policy-map`` block replaces the block of the same object (the driver
  renders MQC objects whole); a new one goes before what may refer to it (a class-map before
  the policy-maps, a policy-map before ``system qos`` and the interfaces);
- ``system qos`` and ``interface X`` blocks are merged line by line: a line replaces the line
  of the same setting (:data:`SETTINGS`: ``priority-flow-control mode``, ``service-policy type
  qos input`` ...), a ``no`` line removes it; every other line of the block stays;
- a global line (the PFC watchdog's) replaces the line of the same setting, or goes before the
  first interface; ``no X`` removes X;
- everything else -- lines the agent does not manage, comments, blank lines -- stays as it is,
  in place.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Settings that hold one value: a line starting with one of these replaces the line that
# starts with the same one (longest first, so "watch-dog interval" is not "watch-dog-interval").
SETTINGS = tuple(
    sorted(
        (
            "service-policy type qos input",
            "service-policy type queuing output",
            "service-policy type network-qos",
            "priority-flow-control mode",
            "priority-flow-control watch-dog-interval",
            "priority-flow-control watch-dog interval",
            "priority-flow-control watch-dog shutdown-multiplier",
            "priority-flow-control auto-restore multiplier",
        ),
        key=len,
        reverse=True,
    )
)
_OBJECT = re.compile(
    r"(?:no )?(?P<kind>class-map|policy-map) type (?P<type>\S+) "
    r"(?:match-any |match-all )?(?P<name>\S+)"
)
_MERGED = re.compile(r"system qos|interface \S+")


@dataclass
class Block:
    """A top-level line and the indented lines under it."""

    header: str
    body: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [self.header, *self.body]


def blocks(text_lines: list[str]) -> list[Block]:
    """Lines as top-level blocks (a blank or comment line is a block of its own)."""
    found: list[Block] = []
    for line in text_lines:
        if line.startswith((" ", "\t")) and found and found[-1].header.strip():
            found[-1].body.append(line.rstrip())
        else:
            found.append(Block(line.rstrip()))
    return found


def setting(line: str) -> str:
    """What a line sets: its :data:`SETTINGS` prefix, else the whole line (``no`` left out)."""
    text = line.strip().removeprefix("no ")
    return next((s for s in SETTINGS if text.startswith(s)), text)


def _object(header: str) -> tuple[str, ...] | None:
    match = _OBJECT.fullmatch(header)
    return None if match is None else (match["kind"], match["type"], match["name"])


def candidate_config(running: str, change: list[str]) -> str:
    """``running`` (``show running-config``) with ``change`` (the driver's lines) in place."""
    config = blocks(running.splitlines())
    for block in blocks(change):
        if block.header.strip():
            _apply(config, block)
    return "\n".join(line for b in config for line in b.lines()) + "\n"


def _apply(config: list[Block], block: Block) -> None:
    kind = _object(block.header)
    if kind is not None:
        _replace_object(config, block, kind)
    elif _MERGED.fullmatch(block.header):
        _merge_block(config, block)
    else:
        _replace_setting(config, block.header)


def _find(config: list[Block], wanted: Callable[[Block], bool]) -> int | None:
    return next((i for i, b in enumerate(config) if wanted(b)), None)


def _before_first(config: list[Block], prefix: str) -> int:
    """Where a new global block goes: before the first block starting with ``prefix`` (and the
    blank lines that set that section apart), else the end."""
    found = _find(config, lambda b: b.header.startswith(prefix))
    at = len(config) if found is None else found
    while at > 0 and not config[at - 1].header.strip():
        at -= 1
    return at


def _replace_object(config: list[Block], block: Block, kind: tuple[str, ...]) -> None:
    at = _find(config, lambda b: _object(b.header) == kind)
    if block.header.startswith("no "):
        if at is not None:
            del config[at]
        return
    if at is not None:
        config[at] = block
        return
    # Defined before what refers to it: class-maps before the policy-maps, policy-maps before
    # system qos and the interfaces.
    firsts = ["system qos", "interface "] + (["policy-map "] if kind[0] == "class-map" else [])
    config.insert(min(_before_first(config, prefix) for prefix in firsts), block)


def _merge_block(config: list[Block], block: Block) -> None:
    at = _find(config, lambda b: b.header == block.header)
    if at is None:  # system qos before the interfaces, a new interface last
        at = _before_first(config, "interface ") if block.header == "system qos" else len(config)
        config.insert(at, Block(block.header))
    existing = config[at]
    for line in block.body:
        key = setting(line)
        existing.body = [old for old in existing.body if setting(old) != key]
        if not line.strip().startswith("no "):
            existing.body.append(line)


def _replace_setting(config: list[Block], line: str) -> None:
    key = setting(line)
    at = _find(config, lambda b: bool(b.header) and not b.body and setting(b.header) == key)
    if line.startswith("no "):
        if at is not None:
            del config[at]
        return
    if at is not None:
        config[at] = Block(line)
    else:
        config.insert(_before_first(config, "interface "), Block(line))

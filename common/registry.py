"""One shape for every "pick an implementation by name" table of the project.

The platform drivers (``arista_eos`` -> its class), the lab's NOS personalities (``sonic`` ->
its factory), the commands loaded on first use (``twin`` -> its click command) and tune's
runners (``dask`` -> its factory) are each a :class:`Registry`: a name, a target written as
``"package.module:attribute"`` (imported only when that name is asked for, so a table costs no
imports) and a one-line summary for help texts and errors.

An unknown name raises :class:`UnknownName` (a ``LookupError``) whose message names what was
asked for and every name the table knows; callers turn it into their own error type where
their layer has one (an ``AgentError`` in the agent, a ``click`` error in a command).

Imports only the standard library (``common`` is a leaf).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

T = TypeVar("T")
D = TypeVar("D")


class UnknownName(LookupError):
    """A registry was asked for a name it does not hold."""


@dataclass(frozen=True)
class Entry:
    """What a name stands for: ``target`` is ``"package.module:attribute"``."""

    target: str
    summary: str = ""

    def __post_init__(self) -> None:
        module, sep, attribute = self.target.partition(":")
        if not (module and sep and attribute):
            raise ValueError(f"registry target {self.target!r}: Expected: 'module:attribute'")

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def attribute(self) -> str:
        return self.target.partition(":")[2]


class Registry(Mapping[str, Entry], Generic[T]):
    """Names -> :class:`Entry`, in the order they were given; :meth:`load` imports one.

    ``kind`` is what the names are ("platform", "NOS", "command"): it starts the message of
    an unknown name, e.g. ``unknown platform 'junos' (one of: arista_eos, sonic)``.
    """

    def __init__(self, kind: str, entries: Mapping[str, Entry | str]) -> None:
        self.kind = kind
        self._entries = {
            name: entry if isinstance(entry, Entry) else Entry(entry)
            for name, entry in entries.items()
        }

    def __getitem__(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(self.unknown(name)) from None

    # Mapping's own ``in`` and ``get`` look a name up through ``[]`` and catch only KeyError:
    # an UnknownName would escape them.
    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @overload
    def get(self, name: str, /) -> Entry | None: ...
    @overload
    def get(self, name: str, default: Entry | D, /) -> Entry | D: ...
    def get(self, name: str, default: object = None, /) -> object:
        return self._entries.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def unknown(self, name: str) -> str:
        """The message for a name this registry does not hold."""
        return f"unknown {self.kind} {name!r} (one of: {', '.join(self._entries)})"

    def load(self, name: str) -> T:
        """The object ``name`` stands for, its module imported now (an ImportError of a
        registered module is a bug or a missing optional dependency, and propagates)."""
        entry = self[name]
        value: T = getattr(importlib.import_module(entry.module), entry.attribute)
        return value

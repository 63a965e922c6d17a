"""Errors the CLIs turn into a message and an exit code instead of a traceback.

Shared by ``agent`` and ``lab``: an input file's problems are located the same way (FILE:LINE:COL)
whichever package reads the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# What a terminal could act on: C0/C1 controls, DEL, and the bidi and zero-width format
# characters that make printed text read differently from what it is.
_UNPRINTABLE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    Applied to everything the CLI prints that came from input (file names, keys, values,
    messages), so a YAML key holding an ANSI sequence is shown, never obeyed.
    """

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    text = _UNPRINTABLE.sub(escape, text)
    return text if keep_newlines else text.replace("\n", "\\n").replace("\t", "\\t")


# Characters of an input value an error quotes: enough to recognise it, never a whole file.
EXCERPT_CHARS = 40


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``repr`` of ``text``, cut to ``limit`` characters with its length when longer: an error
    names the value it refuses without echoing all of it (a 200 000-digit port name, the
    lines of a key file given as a config)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


@dataclass(frozen=True)
class SourcePosition:
    """Where a value came from: file, 1-based line and column."""

    file: Path
    line: int
    column: int

    def __str__(self) -> str:
        return f"{printable(str(self.file))}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located as precisely as the input allows."""

    position: SourcePosition | None
    field: str
    message: str
    rule: str | None = None

    def __str__(self) -> str:
        where = f"{self.position}: " if self.position else ""
        field = f"{printable(self.field)}: " if self.field else ""
        rule = f"{printable(self.rule)} " if self.rule else ""
        return f"{where}{field}{rule}{printable(self.message)}"


class AgentError(Exception):
    """A failure the user can act on; the CLI prints it and exits with ``exit_code``."""

    exit_code = 2


# Problems one error shows: a file with thousands of mistakes (a typo repeated by a
# generator) is fixed from the first ones, and 65 536 lines help nobody (issue #42).
MAX_SHOWN = 50


class IntentError(AgentError):
    """A fabric or profile file that cannot be used: the first :data:`MAX_SHOWN` problems
    found, then one line saying how many more there are; ``total`` counts them all."""

    def __init__(self, problems: list[Problem]) -> None:
        self.total = len(problems)
        self.problems = problems[:MAX_SHOWN]
        if self.total > MAX_SHOWN:
            more = self.total - MAX_SHOWN
            self.problems.append(
                Problem(
                    problems[MAX_SHOWN].position,  # the first one not shown
                    "",
                    f"and {more} more problem(s) from here on (the first {MAX_SHOWN} are shown)",
                )
            )
        super().__init__("\n".join(str(p) for p in self.problems))

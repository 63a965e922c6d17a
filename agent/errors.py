"""Errors the CLI turns into a message and an exit code instead of a traceback."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourcePosition:
    """Where a value came from: file, 1-based line and column."""

    file: Path
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, located as precisely as the input allows."""

    position: SourcePosition | None
    field: str
    message: str
    rule: str | None = None

    def __str__(self) -> str:
        where = f"{self.position}: " if self.position else ""
        field = f"{self.field}: " if self.field else ""
        rule = f"{self.rule} " if self.rule else ""
        return f"{where}{field}{rule}{self.message}"


class AgentError(Exception):
    """A failure the user can act on; the CLI prints it and exits with ``exit_code``."""

    exit_code = 2


class IntentError(AgentError):
    """A fabric or profile file that cannot be used; carries every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class CredentialError(AgentError):
    """A credential reference that cannot be resolved (missing env var, unreadable file)."""

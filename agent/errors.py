"""The agent's errors: the shared ones from :mod:`common.errors` plus the agent's own."""

from __future__ import annotations

from common.errors import AgentError, IntentError, Problem, SourcePosition, printable

__all__ = [
    "AgentError",
    "CredentialError",
    "IntentError",
    "Problem",
    "SourcePosition",
    "printable",
]


class CredentialError(AgentError):
    """A credential reference that cannot be resolved (missing env var, unreadable file)."""

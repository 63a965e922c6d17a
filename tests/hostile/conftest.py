"""Fixtures of the hostile corpus: the unit tests' bounded CLI runner (one zygote per session,
every case in its own forked process under memory and time caps)."""

from __future__ import annotations

from tests.unit.conftest import bounded_cli

__all__ = ["bounded_cli"]

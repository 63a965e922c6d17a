"""Shared fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.bounded_cli import BoundedCli


@pytest.fixture(scope="session")
def bounded_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoundedCli]:
    """``roce-agent`` runs, each in its own forked process under 2 GiB and 30 s."""
    runner = BoundedCli(tmp_path_factory.mktemp("bounded-cli"))
    try:
        yield runner
    finally:
        runner.close()

"""Every test session keeps the twin's networks (agent.twin.netcache) in a folder of its own,
removed at the end: a test never reads a network another run kept, nor leaves one in the
user's cache."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_network_cache() -> Iterator[None]:
    folder = tempfile.mkdtemp(prefix="roce-agent-cache-")
    before = os.environ.get("ROCE_AGENT_CACHE_DIR")
    os.environ["ROCE_AGENT_CACHE_DIR"] = folder
    yield
    if before is None:
        os.environ.pop("ROCE_AGENT_CACHE_DIR", None)
    else:
        os.environ["ROCE_AGENT_CACHE_DIR"] = before
    shutil.rmtree(folder, ignore_errors=True)

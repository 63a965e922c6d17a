"""One assertion for "bad input names file, line and field": the single problem a loader
raises, and where it points."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.errors import IntentError, Problem


def the_one_problem(load: Callable[[Path], Any], path: Path, line: int) -> Problem:
    """``load(path)`` fails with exactly one problem, located at ``path:line``."""
    with pytest.raises(IntentError) as caught:
        load(path)
    (problem,) = caught.value.problems
    assert problem.position is not None
    assert (problem.position.file, problem.position.line) == (path, line)
    return problem

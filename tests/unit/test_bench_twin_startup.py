"""bench/twin_startup.py: every case runs, and a twin case's simulation is a part of its total
(the JSON's ``wall_s``, or the API's printed one). No timing is judged here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agent.twin.network import star_fabric_yaml

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("twin_startup", REPO / "bench/twin_startup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["twin_startup"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_the_code_measured_is_this_checkout() -> None:
    assert bench.code_root() == REPO


@pytest.mark.parametrize("index", range(6))
def test_each_case_runs_once(tmp_path: Path, index: int) -> None:
    star = tmp_path / "star.yml"
    star.write_text(star_fabric_yaml(3, "100G"))
    case = bench.cases(REPO, star)[index]
    total, simulation = bench.run_once(case, bench.child_env(REPO, keep_env=True), REPO)
    if case.simulated is None:
        assert simulation == 0.0 < total
    else:
        assert 0.0 < simulation < total

"""common.plain gives what dataclasses.asdict gives: on random nested values and on the twin's
own reports (scenario and collective), drawn at random."""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.twin.collectives import CollectiveSpec, run_collective
from agent.twin.network import load_network, star_fabric_yaml
from agent.twin.results import run_twin
from common.plain import plain

ATOMS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text())


@dataclass
class Inner:
    value: Any
    items: list[Any] = field(default_factory=list)


class Pair(NamedTuple):
    left: Any
    right: Any


class Rows(list[Any]):
    """A list subclass: asdict rebuilds it as its own type."""


@dataclass
class Outer:
    inner: Inner
    table: dict[str, Any]
    rows: list[Any]
    pair: tuple[Any, ...] = ()


def _same(ours: Any, theirs: Any) -> bool:
    """Equal, and of the same type all the way down (a list subclass is not a list)."""
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, dict):
        return list(ours) == list(theirs) and all(_same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list | tuple):
        return len(ours) == len(theirs) and all(map(_same, ours, theirs))
    return bool(ours == theirs)


VALUES = st.recursive(
    ATOMS,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.tuples(children, children),
        st.builds(Inner, children, st.lists(children, max_size=4)),
        st.builds(Pair, children, children),
        st.lists(children, max_size=3).map(Rows),
        st.dictionaries(st.text(max_size=3), children, max_size=3).map(OrderedDict),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    VALUES, st.dictionaries(st.text(max_size=3), VALUES, max_size=3), st.lists(VALUES, max_size=5)
)
def test_the_same_as_asdict_on_random_values(
    value: Any, table: dict[str, Any], rows: list[Any]
) -> None:
    report = Outer(Inner(value, rows), table, rows, (value, rows))
    made = plain(report)
    assert _same(made, asdict(report))
    assert made["rows"] is not rows  # a copy, as asdict's


@pytest.mark.parametrize("seed", [3, 17, 2026])
def test_the_same_as_asdict_on_twin_reports(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    hosts = rng.choice([3, 5, 9])
    path = tmp_path / "star.yml"
    path.write_text(star_fabric_yaml(hosts, rng.choice(["25G", "100G", "400G"])))
    net = load_network(path)
    scenario = rng.choice(["incast", "all-to-all"])
    report = run_twin(net, scenario, senders=2, duration_s=rng.choice([1e-4, 3e-4]), seed=seed)
    assert _same(plain(report), asdict(report))
    collective = run_collective(net, CollectiveSpec("allreduce", hosts, 1 << 16))
    assert _same(plain(collective), asdict(collective))

"""agent.app.output.json_text writes what ``json.dumps(data, indent=2)`` writes, byte for byte:
on random nested data (every JSON type, non-string keys, subclasses, NaN and infinities,
unicode), on a twin report, and for the errors (an unknown type, a bad key, a cycle)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.app.output import json_text
from agent.twin.network import load_network, star_fabric_yaml
from agent.twin.results import run_twin


class Level(IntEnum):
    LOW = 1


ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.just(Level.LOW),
)
KEYS = st.one_of(
    st.text(max_size=5), st.integers(-9, 9), st.floats(allow_nan=False), st.booleans(), st.none()
)
DATA = st.recursive(
    ATOMS,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(KEYS, children, max_size=5),
        st.dictionaries(st.text(max_size=3), children, max_size=3).map(OrderedDict),
    ),
    max_leaves=40,
)


@settings(max_examples=500, deadline=None)
@given(DATA)
def test_the_same_text_as_json_dumps(data: Any) -> None:
    assert json_text(data) == json.dumps(data, indent=2) + "\n"


def test_the_same_text_on_a_twin_report(tmp_path: Path) -> None:
    path = tmp_path / "star.yml"
    path.write_text(star_fabric_yaml(5, "100G"))
    report = run_twin(load_network(path), "incast", senders=4, duration_s=2e-4).to_json()
    assert json_text(report) == json.dumps(report, indent=2) + "\n"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"a": [1, {2}]}, TypeError),
        ([object()], TypeError),
        ({(1, 2): [1, [2]]}, TypeError),
        ({(1, 2): 1}, TypeError),
    ],
    ids=["a set inside", "an object", "a tuple key above a container", "a tuple key"],
)
def test_the_same_errors(data: Any, error: type[Exception]) -> None:
    with pytest.raises(error) as ours:
        json_text(data)
    with pytest.raises(error) as theirs:
        json.dumps(data, indent=2)
    assert str(ours.value) == str(theirs.value)


def test_a_cycle_is_refused_as_json_refuses_it() -> None:
    loop: list[Any] = [1]
    loop.append([loop])
    with pytest.raises(ValueError, match="Circular reference detected"):
        json_text(loop)
    assert math.isnan(json.loads(json_text([math.nan]))[0])

"""pydantic errors located in the YAML file (common.validation), one row per kind of error."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from common.validation import data_loc, validation_problems
from common.yamlsource import load_yaml


def _even(value: int) -> int:
    if value % 2:
        raise ValueError(f"Expected: an even number Actual: {value}")
    return value


class Port(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    mtu: Annotated[int, AfterValidator(_even)] = 9000


class Switch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    ports: list[Port] = Field(default_factory=list)
    queues: dict[int, int] = Field(default_factory=dict)


NOT_AN_INT = "Input should be a valid integer, unable to parse string as an integer"
CASES = [
    # (YAML, expected "FILE:LINE:COL: field: message" after the file name)
    ("name: s1\nports:\n  - name: e1\n    mtu: 9001\n",
     "4:10: ports[0].mtu: Expected: an even number Actual: 9001"),
    ("name: s1\nports:\n  - name: e1\n    speed: 10G\n",
     "4:5: ports[0].speed: unknown field 'speed'"),
    ("ports: []\n", "1:1: name: field 'name' is required"),
    ("name: s1\nports:\n  - mtu: 9000\n", "3:5: ports[0].name: field 'name' is required"),
    ("name: s1\nqueues:\n  3: lots\n", f"3:6: queues[3]: {NOT_AN_INT}"),
    ("name: [1]\n", "1:7: name: Input should be a valid string"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_errors_name_file_line_column_and_field(tmp_path: Path, text: str, expected: str) -> None:
    file = tmp_path / "switch.yaml"
    file.write_text(text)
    data, source = load_yaml(file)
    with pytest.raises(ValidationError) as caught:
        Switch.model_validate(data)
    problems = validation_problems(caught.value, data, source)
    assert [str(p) for p in problems] == [f"{file}:{expected}"]


def test_prefix_places_the_data_inside_the_file(tmp_path: Path) -> None:
    file = tmp_path / "fabric.yaml"
    file.write_text("switches:\n  - name: s1\n    ports:\n      - name: e1\n        mtu: 1\n")
    data, source = load_yaml(file)
    with pytest.raises(ValidationError) as caught:
        Switch.model_validate(data["switches"][0])
    (problem,) = validation_problems(caught.value, data["switches"][0], source, ("switches", 0))
    assert str(problem).startswith(f"{file}:5:14: switches[0].ports[0].mtu: Expected: an even")


@pytest.mark.parametrize(
    ("loc", "data", "expected"),
    [
        (("ports", 0, "function-after[_even(), int]"), {"ports": [{}]}, ("ports", 0)),
        (("mtu[0]",), {"mtu[0]": 1}, ("mtu[0]",)),  # a key that looks like a step is kept
        (("queues", "3"), {"queues": {3: "x"}}, ("queues", "3")),
        (("missing",), {}, ("missing",)),
    ],
)
def test_validator_steps_are_dropped_but_keys_kept(
    loc: tuple[str | int, ...], data: object, expected: tuple[str | int, ...]
) -> None:
    assert data_loc(loc, data) == expected

"""common.registry: one shape for every name -> implementation table."""

from __future__ import annotations

import sys

import pytest

from common.registry import Entry, Registry, UnknownName


def test_a_name_loads_its_target_and_imports_only_then() -> None:
    table: Registry[object] = Registry(
        "codec", {"json": Entry("json:dumps", "JSON text"), "csv": "csv:writer"}
    )
    sys.modules.pop("csv", None)
    assert table.names == ("json", "csv")
    assert "csv" not in sys.modules
    import json

    assert table.load("json") is json.dumps
    assert table["json"].summary == "JSON text"
    assert table["csv"].module == "csv" and table["csv"].attribute == "writer"


@pytest.mark.parametrize("name", ["yaml", "", "JSON"])
def test_an_unknown_name_is_refused_naming_every_known_one(name: str) -> None:
    table: Registry[object] = Registry("codec", {"json": "json:dumps", "csv": "csv:writer"})
    with pytest.raises(UnknownName) as raised:
        table.load(name)
    assert str(raised.value) == f"unknown codec {name!r} (one of: json, csv)"
    assert isinstance(raised.value, LookupError)


@pytest.mark.parametrize("target", ["json", "json:", ":dumps", ""])
def test_a_target_without_module_and_attribute_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="Expected: 'module:attribute'"):
        Entry(target)


def test_in_and_get_answer_for_an_unknown_name_without_raising() -> None:
    table: Registry[object] = Registry("codec", {"json": "json:dumps"})
    assert "json" in table and "yaml" not in table
    assert table.get("yaml") is None and table.get("json") == Entry("json:dumps")

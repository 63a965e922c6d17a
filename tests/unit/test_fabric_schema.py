"""The fabric file's JSON Schema (docs/reference/fabric.schema.json, from
agent.intent.fabricfile.FabricFile): every shipped fabric validates against it, it refuses what
the loader refuses by shape, it allows x- keys and ranges, and the committed file is current."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from agent.intent.fabricfile import FabricFile, fabric_file_schema

ROOT = Path(__file__).resolve().parents[2]
FABRICS = sorted((ROOT / "playbooks" / "fabrics").glob("*.yml"))
SCHEMA_FILE = ROOT / "docs" / "reference" / "fabric.schema.json"
VALIDATOR = jsonschema.Draft202012Validator(fabric_file_schema())


def _as_json(path: Path) -> Any:
    """The file as an editor's YAML plugin sees it: merge keys resolved, keys as strings."""
    return json.loads(json.dumps(yaml.safe_load(path.read_text(encoding="utf-8"))))


def _errors(data: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(data)]


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(fabric_file_schema())


@pytest.mark.parametrize("path", FABRICS, ids=[p.stem for p in FABRICS])
def test_shipped_fabrics_validate_against_the_schema(path: Path) -> None:
    assert _errors(_as_json(path)) == []
    FabricFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def test_every_shipped_fabric_names_the_schema_or_is_written_out() -> None:
    """The compact examples carry the editor modeline (docs/fabric-file.md)."""
    for name in ("pod-32-leaf.yml", "pod-mixed.yml"):
        first = (ROOT / "playbooks" / "fabrics" / name).read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../../docs/reference/fabric.schema.json"


MINIMAL: dict[str, Any] = {
    "name": "t",
    "profile": "nvidia-default",
    "devices": [{"name": "leaf1", "platform": "arista_eos", "role": "leaf", "host": "10.0.0.1"}],
}


def _with(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


# (where, value, valid): the shape rules an editor can show while typing
CASES = [
    (("x-anchors",), {"platform": "arista_eos"}, True),
    (("defualts",), {}, False),
    (("defaults",), {"ports": {"speed": "400G", "mtu": 9214, "cable_m": 3}}, True),
    (("defaults",), {"ports": {"cable_m": -1}}, False),
    (("defaults",), {"ports": {"peer": "a:b"}}, False),  # peer is per port, never a default
    (("devices", 0, "port_defaults"), {"cable_m": 30}, True),
    (("devices", 0, "ports"), [{"name": "Ethernet1/1-8", "peer": "gpu{n}:eth0"}], True),
    (("devices", 0, "ports"), [{"name": "Ethernet1/31-32", "peer": "spine{i+1}:Ethernet1/1"}],
     True),
    (("devices", 0, "ports"), [{"name": "Ethernet0-56", "step": 8, "peer": "gpu1:eth{i}"}], True),
    (("devices", 0, "ports"), [{"name": "Ethernet0-56", "step": 0}], False),
    (("devices", 0, "ports"),
     [{"name": "eth0-7", "rdma_device": "mlx5_{i}/1", "peer": "leaf1:Ethernet{i*8}"}], True),
    (("devices", 0, "ports"), [{"name": "eth0", "rdma_device": "mlx5 0"}], False),
    (("devices", 0, "ports"), [{"name": "Ethernet1", "peer": "no-colon"}], False),
    (("devices", 0, "ports"), [{"name": "Ethernet1", "mtu": 100000}], False),
    (("devices", 0, "ports"), [{"name": "Ethernet1", "speed": "400Q"}], False),
    (("devices", 0, "ports"), [{"name": "Ethernet1", "speed": 400_000_000_000}], True),
    (("devices", 0, "ports"), [{"name": "eth..0"}], False),
    (("devices", 0, "ports"), [{"name": "Ethernet1", "colour": "blue"}], False),
    (("devices", 0, "platform"), "junos", False),
    (("devices", 0, "name"), "leaf1; reload", False),
    (("devices", 0, "host"), "10.0.0.1\nshutdown", False),
    (("devices", 0, "username"), "x" * 33, False),
    (("overrides",), {"ecn": {"queues": {"3": {"min_threshold": "100KB"}}}}, True),
    (("overrides",), {"pfc": {"priorites": [3]}}, False),
    (("overrides",), {"buffers": {"xoff": "auto"}}, True),
    (("overrides",), {"name": "renamed"}, False),
    (("devices",), [], False),
]  # fmt: skip


@pytest.mark.parametrize(("where", "value", "valid"), CASES)
def test_the_schema_checks_the_shape(where: tuple[str | int, ...], value: Any, valid: bool) -> None:
    errors = _errors(_with(where, value))
    assert (errors == []) == valid, errors


@given(key=st.from_regex(r"x-[a-z0-9_-]{1,20}", fullmatch=True), value=st.integers() | st.text())
def test_any_x_key_is_allowed_and_ignored(key: str, value: Any) -> None:
    data = {**MINIMAL, key: value}
    assert _errors(data) == []
    assert FabricFile.model_validate(data).name == "t"


@given(key=st.from_regex(r"[a-wyz][a-z_]{0,20}", fullmatch=True))
def test_any_other_unknown_top_level_key_is_refused(key: str) -> None:
    if key in FabricFile.model_fields:
        return
    assert _errors({**MINIMAL, key: 1}) != []


def test_the_committed_schema_is_current() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    assert SCHEMA_FILE.read_text(encoding="utf-8") == gen_docs.fabric_json_schema(), (
        "stale: run python scripts/gen_docs.py"
    )

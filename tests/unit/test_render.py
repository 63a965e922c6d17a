"""`roce-agent render`: each device's lines or patch, offline, from its platform's own
renderer; selection by --device globs and --role; bad input exits 2 naming the option."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.app.render import FORMS, as_text, render_fabric
from agent.device.platforms import platform_for
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "tests" / "data" / "render" / "mixed-fabric.yml"
POD = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
PLAN = build_plan(load_fabric(MIXED).intent)
BY_NAME = {d.name: d for d in PLAN.devices}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """render is offline: any connection attempt fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"render tried to connect: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def render(*args: str) -> Any:
    return CliRunner().invoke(main, ["render", *args])


def test_the_fixture_has_every_platform() -> None:
    assert {d.platform for d in PLAN.devices} == set(FORMS)


@pytest.mark.parametrize("device", sorted(BY_NAME))
def test_lines_are_the_platform_renderers_own(device: str) -> None:
    done = render(str(MIXED), "--device", device, "-o", "json")
    assert done.exit_code == 0, done.output
    (entry,) = json.loads(done.stdout)["devices"]
    plan = BY_NAME[device]
    expected = platform_for(plan.platform).render(plan)
    assert expected, "a renderer gave nothing: the comparison would prove nothing"
    if plan.platform == "sonic":
        assert entry["patch"] == json.loads("\n".join(expected))
        assert all({"op", "path"} <= set(op) for op in entry["patch"])
    else:
        assert entry["lines"] == expected
    assert entry["form"] == FORMS[plan.platform][0]


def test_text_is_a_header_per_device_then_its_lines() -> None:
    done = render(str(MIXED))
    assert done.exit_code == 0
    blocks = done.stdout.rstrip("\n").split("\n\n")
    assert len(blocks) == len(PLAN.devices)
    for block, plan in zip(blocks, PLAN.devices, strict=True):
        header, *lines = block.split("\n")
        comment = FORMS[plan.platform][1]
        assert header.startswith(f"{comment} {plan.name} ({plan.platform}, {plan.role}): ")
        assert header.endswith(f", {len(lines)} lines")
        assert lines == platform_for(plan.platform).render(plan)


SELECTIONS = [
    # (arguments, devices rendered)
    (("--device", "leaf-*"), ["leaf-eos", "leaf-nvue", "leaf-sonic"]),
    (("--role", "spine"), ["spine1"]),
    (("--device", "leaf-s*", "--device", "gpu1"), ["leaf-sonic", "gpu1"]),
    (("--device", "*", "--role", "host"), ["gpu1"]),
    ((), ["spine1", "leaf-eos", "leaf-nvue", "leaf-sonic", "gpu1"]),
]


@pytest.mark.parametrize(("args", "expected"), SELECTIONS)
def test_selection(args: tuple[str, ...], expected: list[str]) -> None:
    done = render(str(MIXED), *args, "-o", "json")
    assert done.exit_code == 0, done.output
    assert [d["device"] for d in json.loads(done.stdout)["devices"]] == expected


BAD = [
    # (arguments, the option the error names)
    ((str(MIXED), "--device", "nope*"), "'--device'"),
    ((str(MIXED), "--device", "spine1", "--role", "host"), "'--role'"),
    ((str(MIXED), "--role", "core"), "'--role'"),
    ((str(MIXED), "-o", "yaml"), "'-o' / '--output'"),
    ((), "FABRIC"),
]


@pytest.mark.parametrize(("args", "named"), BAD)
def test_bad_input_exits_2_naming_the_option(args: tuple[str, ...], named: str) -> None:
    done = render(*args)
    assert done.exit_code == 2 and named in done.stderr, done.stderr


def test_fabric_alias_gives_the_same_output() -> None:
    assert render("--fabric", str(MIXED)).stdout == render(str(MIXED)).stdout


def test_a_large_fabric_renders_every_device() -> None:
    name, rendered = render_fabric(POD)
    plan = build_plan(load_fabric(POD).intent)
    assert name == plan.fabric and [r.device for r in rendered] == [d.name for d in plan.devices]
    assert all(r.lines for r in rendered)
    assert as_text(rendered).count("\n\n") == len(rendered) - 1


def test_an_invalid_fabric_exits_2_located(tmp_path: Path) -> None:
    bad = ROOT / "tests" / "data" / "bad" / "13-roce-priority-without-pfc.yml"
    done = render(str(bad))
    assert done.exit_code == 2 and done.stdout == ""
    assert re.search(rf"{re.escape(str(bad))}:\d+:\d+: .*IR001", done.stderr), done.stderr

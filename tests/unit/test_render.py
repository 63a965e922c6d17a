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
from agent.app.render import FORMS, UNSET, as_text, render_fabric, unset_pattern
from agent.device.platforms import platform_for
from agent.device.platforms._common import class_selector
from agent.device.platforms.arista_eos import DSCP_MAP_RE
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
        notes = [line for line in lines if line.startswith(f"{comment} left to the defaults: ")]
        lines = lines[len(notes) :]
        assert header.startswith(f"{comment} {plan.name} ({plan.platform}, {plan.role}): ")
        assert header.endswith(f", {len(lines)} lines")
        assert lines == platform_for(plan.platform).render(plan)
        assert (plan.platform == "sonic") == (not notes)  # SONiC's patch sets it all


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


# ------------------------------------------------------------------ left to the defaults


@pytest.mark.parametrize("fabric", [MIXED, *sorted((ROOT / "playbooks" / "fabrics").glob("*.yml"))])
def test_what_a_render_leaves_to_the_defaults_is_said_and_true(fabric: Path) -> None:
    """Every device says what its lines leave to the NOS: EOS the DSCPs no line maps (and EOS's
    default map gives each the intent's class), every platform but SONiC the PFC buffers --
    and no rendered line sets what a note says is left."""
    _, rendered = render_fabric(fabric)
    assert rendered
    for item in rendered:
        for pattern in unset_pattern(item.platform):
            setting = [line for line in item.lines if pattern.search(line)]
            assert not setting, (item.device, pattern.pattern, setting[:3])
        assert item.defaults[len(item.defaults) - len(UNSET.get(item.platform, ())) :] == [
            note for note, _ in UNSET.get(item.platform, ())
        ]
        if item.platform != "arista_eos":
            continue
        written = {int(d) for line in item.lines if (m := DSCP_MAP_RE.fullmatch(line))
                   for d in m.group(1).split()}  # fmt: skip
        plan = next(d for d in build_plan(load_fabric(fabric).intent).devices
                    if d.name == item.device)  # fmt: skip
        wanted = platform_for("arista_eos").desired(plan).dscp_to_priority
        left = sorted(set(range(64)) - written)
        assert all(wanted[d] == class_selector(d) for d in left), item.device
        said = item.defaults[0] if left else ""
        named = set()
        for values, tc in re.findall(r"DSCP ([\d, -]+?) to traffic-class (\d)", said):
            for span in values.split(", "):
                low, _, high = span.partition("-")
                named |= {(d, int(tc)) for d in range(int(low), int(high or low) + 1)}
        assert named == {(d, wanted[d]) for d in left}, (item.device, said)


def test_text_and_json_say_the_same_defaults() -> None:
    text = render(str(MIXED), "--device", "leaf-eos")
    data = json.loads(render(str(MIXED), "--device", "leaf-eos", "-o", "json").stdout)
    notes = data["devices"][0]["left_to_defaults"]
    assert notes and all(f"! left to the defaults: {n}" in text.stdout for n in notes)
    assert "DSCP 0-7 to traffic-class 0" in notes[0]

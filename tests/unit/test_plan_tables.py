"""`roce-agent plan`'s tables at 100 columns: cells fold, never cut; every device, port and
peer name is shown whole; every buffer column has one unit (bytes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.intent.loader import load_fabric
from agent.intent.plan import Plan, build_plan
from agent.intent.plan_tables import render_plan_tables
from common.conventions import console

ROOT = Path(__file__).resolve().parents[2]
FABRICS = [
    ROOT / "playbooks" / "fabrics" / "pod-400g.yml",
    ROOT / "playbooks" / "fabrics" / "lab-leafspine.yml",
    ROOT / "tests" / "data" / "render" / "mixed-fabric.yml",
]


def shown(plan: Plan, width: int = 100) -> str:
    screen = console(width=width)
    with screen.capture() as captured:
        render_plan_tables(plan, screen)
    return captured.get()


def cells(text: str) -> set[str]:
    """Every table cell's text on one line (names are never split over lines)."""
    return {cell.strip() for line in text.splitlines() for cell in line.split("│")}


@pytest.mark.parametrize("fabric", FABRICS, ids=lambda p: p.stem)
def test_fits_100_columns_and_names_are_whole(fabric: Path) -> None:
    plan = build_plan(load_fabric(fabric).intent)
    text = shown(plan)
    assert "…" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    found = cells(text)
    for device in plan.devices:
        assert device.name in found
        if device.role == "host":
            continue
        for port in device.ports:
            assert port.name in found, port.name
            assert (port.peer or "-") in found, port.peer


@pytest.mark.parametrize("fabric", FABRICS, ids=lambda p: p.stem)
def test_one_unit_per_column(fabric: Path) -> None:
    """Buffer sizes are bytes in every row (the unit in the header), never ``1518428`` in
    one row and ``1518.2KB`` in another; where a column is the same on every port it is said
    once under the table, in bytes too."""
    plan = build_plan(load_fabric(fabric).intent)
    text = shown(plan, width=200)
    assert not re.search(r"\d(KB|MB|KiB|MiB)", text)
    for device in plan.devices:
        for port in device.ports:
            for headroom in port.headroom.values():
                for value in (headroom.xoff, headroom.xon, headroom.size):
                    assert str(value) in cells(text)
                assert re.search(rf"\b{headroom.pause_threshold}\b", text)


def test_a_column_that_differs_between_ports_stays_a_column() -> None:
    plan = build_plan(load_fabric(FABRICS[0]).intent)
    leaf = next(d for d in plan.devices if d.name == "leaf1")
    cables = {f"{p.cable_m:g}" for p in leaf.ports}
    assert len(cables) > 1  # the fixture: 30 m to the spines, 3 m to the hosts
    text = shown(plan.model_copy(update={"devices": [leaf]}))
    assert "cable m" in text and "on every port: speed 400G" in text
    assert "cable" not in text.split("on every port:")[1]

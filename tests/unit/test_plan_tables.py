"""`roce-agent plan`'s tables at 100 columns: cells fold, never cut; every device, port and
peer name is shown whole; every buffer column has one unit (bytes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.intent.loader import load_fabric
from agent.intent.plan import Plan, build_plan
from agent.intent.plan_tables import render_plan_tables, source_tag
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


# ------------------------------------------------------------------ any realistic device

LEAF = next(d for d in build_plan(load_fabric(FABRICS[0]).intent).devices if d.name == "leaf1")
NAMES = st.builds(
    lambda slot, port, lane: f"Ethernet{slot}/{port}" + (f"/{lane}" if lane else ""),
    st.integers(1, 8),
    st.integers(1, 64),
    st.sampled_from([0, 0, 1, 2, 3, 4]),
)
PEERS = st.builds(
    lambda device, port: f"{device}:{port}",
    st.sampled_from(["spine1", "spine16", "leaf32", "gpu256", "storage-a12"]),
    NAMES | st.sampled_from(["eth0", "enp65s0f1np1"]),
)


@st.composite
def leaves(draw: st.DrawFn) -> Plan:
    """leaf1 of the 400G pod with 1-48 ports of random names, peers, speeds (a 400G/800G
    mix), cable lengths and headroom: a 32-leaf fabric's widest realistic rows."""
    count = draw(st.integers(1, 48))
    names = draw(st.lists(NAMES, min_size=count, max_size=count, unique=True))
    template = LEAF.ports[0]
    ports = []
    for name in names:
        headroom = {
            priority: h.model_copy(
                update={"xoff": draw(st.integers(20_000, 999_999)),
                        "xon": draw(st.integers(9_000, 99_999))}
            )
            for priority, h in template.headroom.items()
        }  # fmt: skip
        ports.append(
            template.model_copy(
                update={
                    "name": name,
                    "peer": draw(PEERS),
                    "speed": draw(st.sampled_from(["400G", "800G"])),
                    "cable_m": draw(st.sampled_from([1.0, 3.0, 30.0, 100.0, 2.5])),
                    "headroom": headroom,
                }
            )
        )
    plan = build_plan(load_fabric(FABRICS[0]).intent)
    return plan.model_copy(update={"devices": [LEAF.model_copy(update={"ports": ports})]})


@settings(max_examples=40, deadline=None)
@given(plan=leaves())
def test_any_realistic_leaf_fits_100_columns_with_names_whole(plan: Plan) -> None:
    text = shown(plan)
    assert "…" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    found = cells(text)
    for port in plan.devices[0].ports:
        assert port.name in found and port.peer in found, (port.name, port.peer)


@pytest.mark.parametrize(
    ("source", "tag"),
    [
        ("fabric.yml:12:9", "line 12"),
        ("defaults.ports (fabric.yml:8:3)", "defaults.ports"),
        ("port_defaults of leaf1 (fabric.yml:20:21)", "port_defaults of leaf1"),
        ("range Ethernet1/1-8 (fabric.yml:30:63)", "range Ethernet1/1-8"),
        ("peer spine1:Ethernet1 via range Ethernet1/1-2 (f.yml:30:63)", "peer spine1:Ethernet1"),
        ("peer spine1:Ethernet1 (f.yml:40:14)", "peer spine1:Ethernet1"),
        (None, "-"),
    ],
)
def test_source_tag(source: str | None, tag: str) -> None:
    assert source_tag(source) == tag


def test_the_plan_says_where_each_cable_length_came_from(tmp_path: Path) -> None:
    """A derived end shows its peer, a range its range, a default the defaults; a column
    that is the same on every port is said once under the table."""
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(
        "name: t\nprofile: nvidia-default\n"
        "defaults: {username: u, credentials: {password_env: X}, ports: {speed: 100G, mtu: 9100}}\n"
        "devices:\n"
        "  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1,\n"
        "     ports: [{name: Ethernet1-2, peer: 'leaf{n}:Ethernet9', cable_m: 30}]}\n"
        "  - {name: leaf1, role: leaf, platform: arista_eos, host: 10.0.0.2,\n"
        "     ports: [{name: Ethernet1, cable_m: 3}]}\n"
        "  - {name: leaf2, role: leaf, platform: arista_eos, host: 10.0.0.3}\n"
    )
    text = shown(build_plan(load_fabric(fabric).intent))
    flat = " ".join(text.split())
    assert "cable 30 m from range Ethernet1-2" in flat  # spine1: every port from its range
    assert "cable 30 m from peer spine1:Ethernet2" in flat  # leaf2's port: derived
    assert "line 8" in cells(text)  # leaf1 writes its own
    assert "…" not in text

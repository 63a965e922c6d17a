"""``roce.lab/nos``: a switch's management-plane personality, the platform and port names the
lab's fabric file gives the agent, and the fault CLI's port names (no root)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lab.addressing import build_plan, fabric_document
from lab.fault_registry import FaultError
from lab.faults import LabWiring
from lab.mgmt.names import nos_port_index, nos_port_name
from lab.topology.loader import load_topology
from lab.topology.model import Endpoint, TopologyError

REPO = Path(__file__).resolve().parents[2]
MIXED = REPO / "containerlab" / "roce-leafspine-mixed.clab.yml"
_SW = "kind: linux, image: roce-vswitch:latest"
_HOST = "kind: linux, image: alpine:3"


@pytest.mark.parametrize(
    ("nos", "index", "name"),
    [("eos", 1, "Ethernet1"), ("eos", 12, "Ethernet12"), ("sonic", 1, "Ethernet0"),
     ("sonic", 4, "Ethernet12"), ("nvue", 1, "swp1"), ("nvue", 32, "swp32"),
     ("nxos", 1, "Ethernet1/1"), ("nxos", 48, "Ethernet1/48")],
)  # fmt: skip
def test_port_names_per_nos_round_trip(nos: str, index: int, name: str) -> None:
    assert nos_port_name(nos, index) == name
    assert nos_port_index(nos, name) == index


@pytest.mark.parametrize(
    ("nos", "name"),
    [("sonic", "Ethernet2"), ("sonic", "swp1"), ("nvue", "Ethernet1"), ("nvue", "swp0"),
     ("eos", "Ethernet0"), ("eos", "eth1")],
)  # fmt: skip
def test_names_that_are_not_that_nos_ports(nos: str, name: str) -> None:
    assert nos_port_index(nos, name) is None


def test_the_mixed_fabric_speaks_three_nos_and_names_ports_as_each_does() -> None:
    topology = load_topology(MIXED)
    assert {n: topology.nodes[n].nos for n in ("spine1", "spine2", "leaf1", "leaf2", "h1")} == {
        "spine1": "eos", "spine2": "nxos", "leaf1": "sonic", "leaf2": "nvue", "h1": None,
    }  # fmt: skip
    plan = build_plan(topology, "mx")
    doc = fabric_document(plan, {s.name: 30000 + n for n, s in enumerate(plan.switches())})
    devices = {d["name"]: d for d in doc["devices"]}
    assert [devices[n]["platform"] for n in ("spine1", "spine2", "leaf1", "leaf2", "h1")] == [
        "arista_eos", "cisco_nxos", "sonic", "cumulus_nvue", "linux_host",
    ]  # fmt: skip
    assert [p["name"] for p in devices["spine2"]["ports"]] == ["Ethernet1/1", "Ethernet1/2"]
    assert devices["spine2"]["ports"][0]["peer"] == "leaf1:Ethernet4"
    assert [p["name"] for p in devices["leaf1"]["ports"]] == [
        "Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12",
    ]  # fmt: skip
    assert [p["name"] for p in devices["leaf2"]["ports"]] == ["swp1", "swp2", "swp3", "swp4"]
    assert devices["spine1"]["ports"][1]["peer"] == "leaf2:swp1"
    assert devices["h1"]["ports"][0]["peer"] == "leaf1:Ethernet8"
    for device in doc["devices"]:  # every peer names the other end as its own NOS does
        for port in device["ports"]:
            peer_device, peer_port = port["peer"].split(":")
            back = next(p for p in devices[peer_device]["ports"] if p["name"] == peer_port)
            assert back["peer"] == f"{device['name']}:{port['name']}"


def test_the_mixed_fabric_passes_the_agents_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.intent.loader import load_fabric

    monkeypatch.setenv("ROCE_AGENT_PROFILES", str(REPO / "playbooks" / "profiles"))
    plan = build_plan(load_topology(MIXED))
    path = tmp_path / "fabric.yml"
    ports = {s.name: 20001 + n for n, s in enumerate(plan.switches())}
    path.write_text(yaml.safe_dump(fabric_document(plan, ports)))
    fabric = load_fabric(path)
    assert {d.name: d.platform for d in fabric.intent.devices if d.name.startswith("leaf")} == {
        "leaf1": "sonic", "leaf2": "cumulus_nvue",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("labels", "node", "field", "message"),
    [
        ("{roce.lab/nos: junos}", "s1", "topology.nodes.s1.labels.roce.lab/nos",
         "'junos' is not a NOS the lab switch speaks (eos, sonic, nvue, nxos)"),
        ("{roce.lab/nos: sonic}", "h1", "topology.nodes.h1.labels.roce.lab/nos",
         "roce.lab/nos only applies to switches"),
    ],
)  # fmt: skip
def test_bad_nos_labels_are_named_with_their_line(
    tmp_path: Path, labels: str, node: str, field: str, message: str
) -> None:
    nodes = {"s1": _SW, "h1": _HOST}
    nodes[node] += f", labels: {labels}"
    text = (
        "name: x\ntopology:\n  nodes:\n"
        + "".join(f"    {name}: {{{spec}}}\n" for name, spec in nodes.items())
        + "  links:\n    - endpoints: [s1:eth1, h1:eth1]\n"
    )
    path = tmp_path / "t.clab.yml"
    path.write_text(text)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    found = [(p.field, p.message, p.position) for p in caught.value.problems]
    assert any(f == field and message in m for f, m, _ in found), found
    line = 4 if node == "s1" else 5
    assert any(f == field and pos is not None and pos.line == line for f, _, pos in found), found


def test_a_nos_in_defaults_reaches_the_switches_and_not_the_hosts(tmp_path: Path) -> None:
    path = tmp_path / "t.clab.yml"
    path.write_text(
        "name: x\ntopology:\n  defaults: {labels: {roce.lab/nos: nvue}}\n  nodes:\n"
        f"    s1: {{{_SW}}}\n    h1: {{{_HOST}}}\n"
        "  links:\n    - endpoints: [s1:eth1, h1:eth1]\n"
    )
    topology = load_topology(path)
    assert topology.nodes["s1"].nos == "nvue" and topology.nodes["h1"].nos is None


def _wiring(nos: str) -> LabWiring:
    here, there = Endpoint("leaf1", "eth3", 3), Endpoint("h1", "eth1", 1)
    return LabWiring(
        frozenset({"leaf1"}),
        {"leaf1": "clab-x-leaf1", "h1": "clab-x-h1"},
        {here: there, there: here},
        {"leaf1": nos},
    )


@pytest.mark.parametrize(
    ("nos", "name"), [("eos", "Ethernet3"), ("sonic", "Ethernet8"), ("nvue", "swp3"),
                      ("sonic", "eth3")],
)  # fmt: skip
def test_fault_targets_take_the_switchs_own_port_names(nos: str, name: str) -> None:
    assert _wiring(nos).port(f"leaf1:{name}", "target") == Endpoint("leaf1", "eth3", 3)


@pytest.mark.parametrize(("nos", "name"), [("sonic", "Ethernet3"), ("nvue", "Ethernet3")])
def test_another_nos_port_name_is_refused(nos: str, name: str) -> None:
    with pytest.raises(FaultError, match="has no port"):
        _wiring(nos).port(f"leaf1:{name}", "target")


def test_lab_up_nos_makes_every_switch_speak_it_and_leaves_hosts_alone() -> None:
    topology = load_topology(MIXED).speaking("nvue")
    assert {n.name: n.nos for n in topology.nodes.values()} == {
        "spine1": "nvue", "spine2": "nvue", "leaf1": "nvue", "leaf2": "nvue",
        "h1": None, "h2": None, "h3": None, "h4": None,
    }  # fmt: skip
    with pytest.raises(ValueError, match="'ios' is not a NOS the lab switch speaks"):
        load_topology(MIXED).speaking("ios")


def test_lab_up_refuses_an_unknown_nos_before_touching_anything() -> None:
    from click.testing import CliRunner

    from lab.cli import group

    result = CliRunner().invoke(group, ["up", str(MIXED), "--nos", "junos"])
    assert result.exit_code == 2
    assert "Invalid value for '--nos'" in result.output and "'junos'" in result.output


def test_misclassify_is_refused_on_a_switch_that_does_not_speak_eos(tmp_path: Path) -> None:
    """The fault is a hand change of trust through the EOS CLI: on the mixed lab's SONiC and
    NVUE leaves it is refused, naming the NOS, and nothing is recorded."""
    from lab import runtime
    from lab.faults import LabFaults

    topology = load_topology(MIXED)
    plan = build_plan(topology, "mxf")
    directory = tmp_path / "mxf"
    directory.mkdir()
    state = runtime._new_state(plan, topology, directory)
    state.data["phase"] = "up"
    state.save()
    faults = LabFaults(directory)
    for target, nos in (("leaf1:Ethernet8", "sonic"), ("leaf2:swp3", "nvue")):
        with pytest.raises(FaultError, match=f"runs {nos}; this fault changes trust"):
            faults.add("misclassify", target)
    assert faults.list() == []

"""containerlab topology parsing, the address plan and the generated documents (no root)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from common.errors import Problem, SourcePosition
from lab import netns
from lab.addressing import build_plan, fabric_document, mac_for, vswitch_config
from lab.cli import group
from lab.container import eos_startup_config, host_exec_commands
from lab.topology.loader import load_topology
from lab.topology.model import Topology, TopologyError, container_name, default_buffer
from lab.topology.units import parse_size, parse_speed

REPO = Path(__file__).resolve().parents[2]
LEAFSPINE = REPO / "containerlab" / "roce-leafspine.clab.yml"
CEOS = REPO / "containerlab" / "roce-leafspine-ceos.clab.yml"
BAD = REPO / "tests" / "data" / "clab"

# file, line, field named in the message, what the message says
BAD_TOPOLOGIES = [
    ("ceos_kind", 8, "topology.nodes.leaf1.kind", "needs containerlab and a cEOS image"),
    ("unknown_kind", 8, "topology.nodes.br1.kind", "kind 'bridge' is not supported"),
    ("unknown_endpoint_node", 12, "topology.links[1].endpoints[1]", "unknown node 'h2'"),
    ("duplicate_interface", 15, "topology.links[1].endpoints[0]", "used by the link at line 14"),
    ("malformed_endpoint", 11, "topology.links[0].endpoints[0]", "not of the form 'node:ethN'"),
    ("bad_speed_label", 11, "topology.nodes.leaf1.labels.roce.lab/speed", "'fast' is not a speed"),
    ("eth0_endpoint", 11, "topology.links[0].endpoints[1]", "eth0 is containerlab's management"),
    ("unknown_label", 5, "topology.defaults.labels.roce.lab/sped", "did you mean 'roce.lab/speed'"),
    ("unknown_node_field", 6, "topology.nodes.leaf1.imgae", "did you mean 'image'"),
    ("missing_name", 1, "name", "must have a name"),
    ("yaml_syntax", 9, "", "YAML syntax error"),
    ("duplicate_key", 10, "topology.nodes.leaf1", "duplicate key 'leaf1' (first defined on line 4"),
    ("speed_mismatch", 13, "topology.links[0]", "different speeds"),
    ("xon_above_xoff", 9, "topology.nodes.leaf1.labels.roce.lab/xon-bytes", "must not exceed"),
    ("switch_role_wrong_image", 7, "topology.nodes.leaf1.labels.roce.lab/role", "roce-vswitch"),
    ("lab_label_on_node", 8, "topology.nodes.leaf1.labels.roce.lab/password", "lab-wide"),
    ("extended_link", 11, "topology.links[0].type", "extended link format is not supported"),
    ("self_link", 8, "topology.links[0].endpoints", "both ends are on node 'leaf1'"),
    ("bad_mtu_label", 12, "topology.links[0].mtu", "not an MTU"),
    ("switch_without_links", 4, "topology.nodes.leaf1", "needs at least one link"),
]  # fmt: skip


_SW = "kind: linux, image: roce-vswitch:latest"
_HOST = "kind: linux, image: alpine:3"

# Smaller cases, inline: (topology text, line, field, message)
INLINE_ERRORS = [
    ("", 1, "", "the file is empty"),
    ("- a\n- b\n", 1, "", "expected a mapping, got a list"),
    ("name: x\n", 1, "topology", "must have a 'topology' section"),
    ("name: x\nfoo: 1\ntopology: {nodes: {h1: {" + _HOST + "}}}\n", 2, "foo", "unknown top-level"),
    ("name: 'bad name'\ntopology: {nodes: {h1: {" + _HOST + "}}}\n", 1, "name", "not a lab name"),
    ("name: x\ntopology:\n  nodes: {}\n", 3, "topology.nodes", "has no nodes"),
    ("name: x\ntopology:\n  nodes:\n    h1: {image: alpine:3}\n", 4, "topology.nodes.h1.kind",
     "no kind"),
    ("name: x\ntopology:\n  nodes:\n    h1: {kind: linux}\n", 4, "topology.nodes.h1.image",
     "needs an image"),
    ("name: x\ntopology:\n  nodes:\n    h.1: {" + _HOST + "}\n", 4, "topology.nodes.h.1",
     "node names use"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + ", env: [a]}\n", 4,
     "topology.nodes.h1.env", "expected a mapping"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + ", labels: {roce.lab/cable-m: far}}\n",
     4, "topology.nodes.h1.labels.roce.lab/cable-m", "not a cable length"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + ", labels: {roce.lab/xoff-bytes: 1}}\n",
     4, "topology.nodes.h1.labels.roce.lab/xoff-bytes", "only apply to lab switches"),
    ("name: x\ntopology:\n  nodes:\n    s1: {" + _SW + ", labels: {roce.lab/xoff-bytes: lots}}\n"
     "    h1: {" + _HOST + "}\n  links:\n    - endpoints: [s1:eth1, h1:eth1]\n", 4,
     "topology.nodes.s1.labels.roce.lab/xoff-bytes", "not a size in bytes"),
    ("name: x\ntopology:\n  nodes:\n    s1: {" + _SW + ", labels: {roce.lab/role: core}}\n", 4,
     "topology.nodes.s1.labels.roce.lab/role", "not a role"),
    ("name: x\ntopology:\n  defaults: {labels: {roce.lab/password: ''}}\n"
     "  nodes:\n    h1: {" + _HOST + "}\n", 3, "topology.defaults.labels.roce.lab/password",
     "is empty"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n  links: {a: b}\n", 5,
     "topology.links", "expected a list"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n  links:\n    - [h1:eth1]\n", 6,
     "topology.links[0]", "expected a mapping"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n  links:\n"
     "    - endpoints: [h1:eth1]\n", 6, "topology.links[0].endpoints", "exactly two"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n  links:\n"
     "    - {endpoints: [h1:eth1, h1:eth2], speed: 1G}\n", 6, "topology.links[0].speed",
     "unknown link field"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n  links:\n"
     "    - {}\n", 6, "topology.links[0].endpoints", "needs endpoints"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n    h2: {" + _HOST
     + ", labels: {roce.lab/mtu: '1500'}}\n  links:\n    - endpoints: [h1:eth1, h2:eth1]\n", 7,
     "topology.links[0]", "different MTUs"),
    ("name: x\ntopology:\n  nodes:\n    h1: {" + _HOST + "}\n    h2: {" + _HOST + "}\n  links:\n"
     "    - endpoints: [h1:port1, h2:eth1]\n", 7, "topology.links[0].endpoints[0]",
     "use containerlab's names eth1"),
]  # fmt: skip


def _write(folder: Path, text: str) -> Path:
    path = folder / "t.clab.yml"
    path.write_text(text, encoding="utf-8")
    return path


def _problem_at(error: TopologyError, line: int, field: str, message: str) -> Problem | None:
    """The problem of ``error`` at ``line`` naming ``field`` and saying ``message``, if any."""
    for problem in error.problems:
        if (
            problem.position is not None
            and problem.position.line == line
            and problem.field == field
            and message in problem.message
        ):
            return problem
    return None


@pytest.mark.parametrize(("text", "line", "field", "message"), INLINE_ERRORS)
def test_parse_errors_name_line_and_field(
    text: str, line: int, field: str, message: str, tmp_path: Path
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    problem = _problem_at(caught.value, line, field, message)
    assert problem is not None and problem.position is not None, str(caught.value)
    assert str(problem).startswith(f"{path}:{line}:{problem.position.column}: ")


@pytest.fixture
def not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even as root, a topology that unexpectedly parses must not build anything here."""
    monkeypatch.setattr(netns, "is_root", lambda: False)


@pytest.mark.parametrize(("name", "line", "field", "message"), BAD_TOPOLOGIES)
def test_up_refuses_bad_topology_naming_line_and_field(
    name: str, line: int, field: str, message: str, tmp_path: Path, not_root: None
) -> None:
    path = BAD / f"{name}.clab.yml"
    result = CliRunner().invoke(group, ["up", str(path), "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2, result.output
    assert re.search(rf"^error: {re.escape(str(path))}:{line}:\d+: ", result.output, re.M)
    if field:
        assert f": {field}: " in result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "s").exists()


def test_ceos_topology_is_refused_with_a_pointer_to_the_netns_one(not_root: None) -> None:
    result = CliRunner().invoke(group, ["up", str(CEOS)])
    assert result.exit_code == 2
    assert "arista_ceos needs containerlab and a cEOS image" in result.output
    assert "use roce-leafspine.clab.yml" in result.output


def test_missing_file_is_a_clear_error(tmp_path: Path, not_root: None) -> None:
    result = CliRunner().invoke(group, ["up", str(tmp_path / "nope.clab.yml")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'nope.clab.yml'}: no such file" in result.output


def test_up_without_root_says_so(tmp_path: Path, not_root: None) -> None:
    result = CliRunner().invoke(group, ["up", str(LEAFSPINE), "--state-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "needs root" in result.output
    assert not (tmp_path / "s").exists()


def test_status_of_a_lab_that_is_not_up(tmp_path: Path) -> None:
    result = CliRunner().invoke(group, ["status", "--lab", "nolab", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "lab nolab is not up" in result.output


def test_down_of_a_lab_that_is_not_up_is_a_no_op(tmp_path: Path) -> None:
    result = CliRunner().invoke(group, ["down", "--lab", "nolab", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert "nothing to remove" in result.output


# --------------------------------------------------------------------------- parsing


def test_leafspine_nodes_roles_and_parameters() -> None:
    topology = load_topology(LEAFSPINE)
    assert topology.name == "roce-leafspine"
    roles = {name: (node.lab_kind, node.role) for name, node in topology.nodes.items()}
    assert roles == {
        "spine1": ("lab-switch", "spine"),
        "spine2": ("lab-switch", "spine"),
        "leaf1": ("lab-switch", "leaf"),
        "leaf2": ("lab-switch", "leaf"),
        "h1": ("host", "host"),
        "h2": ("host", "host"),
        "h3": ("host", "host"),
        "h4": ("host", "host"),
    }
    assert {n.speed_bps for n in topology.nodes.values()} == {10_000_000}
    assert {n.mtu for n in topology.nodes.values()} == {9000}
    assert len(topology.links) == 8
    assert topology.credentials.username == "admin"
    assert topology.profile == "nvidia-default"


def _parse(folder: Path, text: str) -> Topology:
    return load_topology(_write(folder, text))


def test_labels_merge_defaults_then_kinds_then_node(tmp_path: Path) -> None:
    topology = _parse(
        tmp_path,
        """
name: merge
topology:
  defaults:
    kind: linux
    labels: {roce.lab/speed: 10M, roce.lab/mtu: "9000"}
  kinds:
    linux:
      image: roce-vswitch:latest
      labels: {roce.lab/speed: 100M, roce.lab/mtu: "1500"}
  nodes:
    s1:
      labels: {roce.lab/mtu: "4000"}
    s2:
      labels: {roce.lab/mtu: "4000"}
  links:
    - endpoints: ["s1:eth1", "s2:eth1"]
""",
    )
    s1 = topology.nodes["s1"]
    assert (s1.speed_bps, s1.mtu, s1.image, s1.role) == (
        100_000_000,
        4000,
        "roce-vswitch:latest",
        "spine",
    )
    assert topology.links[0].mtu == 4000


def test_yaml_merge_keys_are_honoured(tmp_path: Path) -> None:
    topology = _parse(
        tmp_path,
        """
name: anchors
topology:
  nodes:
    s1: &switch
      kind: linux
      image: roce-vswitch:latest
    s2:
      <<: *switch
      image: roce-vswitch:dev
    h1: {kind: linux, image: alpine:3}
  links:
    - endpoints: ["s1:eth1", "s2:eth1"]
    - endpoints: ["s2:eth2", "h1:eth1"]
""",
    )
    assert topology.nodes["s2"].is_switch
    assert topology.nodes["s2"].image == "roce-vswitch:dev"  # the node's own key wins
    assert topology.nodes["s2"].role == "leaf"
    assert topology.nodes["s1"].role == "spine"


def test_buffer_defaults_match_the_vswitch_contract_at_10m() -> None:
    buffer = default_buffer(10_000_000, 9000)
    assert (
        buffer.xoff_bytes,
        buffer.xon_bytes,
        buffer.headroom_bytes,
        buffer.queue_limit_bytes,
    ) == (
        30000,
        15000,
        20000,
        60000,
    )
    faster = default_buffer(100_000_000, 9000)
    assert faster.headroom_bytes > buffer.headroom_bytes
    assert faster.xon_bytes < faster.xoff_bytes < faster.queue_limit_bytes


@pytest.mark.parametrize(
    ("text", "bps"), [("10M", 10**7), ("100Mbps", 10**8), ("1G", 10**9), ("2.5G", 25 * 10**8)]
)
def test_parse_speed(text: str, bps: int) -> None:
    assert parse_speed(text) == bps


@pytest.mark.parametrize("text", ["fast", "0", "10X", "1.5"])
def test_parse_speed_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_speed(text)


def test_parse_size() -> None:
    assert parse_size("30000") == 30000
    assert parse_size("30KB") == 30000
    assert parse_size("2KiB") == 2048


def test_container_names_follow_containerlab_prefix_rules() -> None:
    assert container_name(None, "lab", "h1") == "clab-lab-h1"
    assert container_name("", "lab", "h1") == "h1"
    assert container_name("__lab-name", "lab", "h1") == "lab-h1"
    assert container_name("dc", "lab", "h1") == "dc-lab-h1"


def test_topology_error_str_names_file_line_column_field() -> None:
    at = SourcePosition(Path("x.clab.yml"), 7, 13)
    error = TopologyError([Problem(at, "topology.nodes.a.kind", "bad"), Problem(None, "", "x")])
    assert str(error) == "x.clab.yml:7:13: topology.nodes.a.kind: bad\nx"


# --------------------------------------------------------------------------- address plan


def test_address_plan_of_the_leafspine() -> None:
    plan = build_plan(load_topology(LEAFSPINE))
    by_node = {
        name: {i.ifname: (str(i.address), i.peer) for i in p.interfaces}
        for name, p in plan.nodes.items()
    }
    assert by_node["spine1"] == {
        "eth1": ("198.18.0.0/31", "leaf1:eth1"),
        "eth2": ("198.18.0.2/31", "leaf2:eth1"),
    }
    assert by_node["leaf1"] == {
        "eth1": ("198.18.0.1/31", "spine1:eth1"),
        "eth2": ("198.18.0.5/31", "spine2:eth1"),
        "eth3": ("198.18.0.8/31", "h1:eth1"),
        "eth4": ("198.18.0.10/31", "h2:eth1"),
    }
    assert by_node["h1"] == {"eth1": ("198.18.0.9/31", "leaf1:eth3")}
    assert by_node["h4"] == {"eth1": ("198.18.0.15/31", "leaf2:eth4")}
    h1 = plan.nodes["h1"]
    assert h1.gateway is not None
    assert str(h1.gateway.peer_address) == "198.18.0.8"
    assert h1.interfaces[0].mac == "02:00:c6:12:00:09"
    assert plan.nodes["h1"].netns == "clab-roce-leafspine-h1"
    macs = [i.mac for p in plan.nodes.values() for i in p.interfaces]
    assert len(macs) == len(set(macs)) == 16
    assert all(int(m[:2], 16) & 0b10 and not int(m[:2], 16) & 1 for m in macs)


def test_name_override_renames_namespaces() -> None:
    plan = build_plan(load_topology(LEAFSPINE), "t123")
    assert plan.nodes["spine1"].netns == "clab-t123-spine1"


def test_mac_for() -> None:
    assert mac_for(ipaddress.IPv4Address("198.18.1.2")) == "02:00:c6:12:01:02"


def test_leaf_routes_remote_hosts_over_both_spines() -> None:
    plan = build_plan(load_topology(LEAFSPINE))
    routes = {str(r.prefix): r.nexthops for r in plan.nodes["leaf1"].routes}
    assert set(routes) == {"198.18.0.2/31", "198.18.0.6/31", "198.18.0.12/31", "198.18.0.14/31"}
    ecmp = [(str(h.ip), h.port) for h in routes["198.18.0.12/31"]]
    assert ecmp == [("198.18.0.0", "eth1"), ("198.18.0.4", "eth2")]
    assert [(str(h.ip), h.port) for h in routes["198.18.0.2/31"]] == [("198.18.0.0", "eth1")]
    spine = {str(r.prefix): r.nexthops for r in plan.nodes["spine1"].routes}
    assert [(str(h.ip), h.port) for h in spine["198.18.0.12/31"]] == [("198.18.0.3", "eth2")]
    assert "198.18.0.0/31" not in spine  # connected


def test_vswitch_config_matches_the_contract() -> None:
    plan = build_plan(load_topology(LEAFSPINE))
    config = vswitch_config(plan, "leaf1")
    assert list(config) == ["name", "ports", "neighbors", "routes", "buffer", "qos"]
    assert config["ports"][2] == {
        "ifname": "eth3",
        "mac": "02:00:c6:12:00:08",
        "ipv4": "198.18.0.8/31",
        "speed_bps": 10_000_000,
    }
    assert {"ip": "198.18.0.9", "mac": "02:00:c6:12:00:09", "port": "eth3"} in config["neighbors"]
    assert config["buffer"] == {
        "xoff_bytes": 30000,
        "xon_bytes": 15000,
        "headroom_bytes": 20000,
        "queue_limit_bytes": 60000,
    }
    assert config["qos"] == {
        "trust": "dscp",
        "dscp_to_tc": {},
        "watchdog": {
            "enabled": False,
            "detection_ms": 200,
            "restoration_ms": 400,
            "polling_ms": 100,
            "action": "drop",
        },
        "ports": {},
    }


def test_vswitch_accepts_every_generated_config() -> None:
    vswitch_config_module = pytest.importorskip("lab.vswitch.config")
    plan = build_plan(load_topology(LEAFSPINE))
    for switch in plan.switches():
        vswitch_config_module.parse_config(vswitch_config(plan, switch.name))


def test_fabric_document_shape_and_symmetric_peers() -> None:
    plan = build_plan(load_topology(LEAFSPINE), "lab1")
    ports = {s.name: 30000 + n for n, s in enumerate(plan.switches())}
    doc = fabric_document(plan, ports)
    assert list(doc) == ["name", "profile", "overrides", "defaults", "devices", "validation"]
    assert doc["name"] == "lab1"
    assert doc["overrides"]["ecn"]["queues"][3] == {
        "min_threshold": "6KB",
        "max_threshold": "18KB",
        "max_probability": 100,
    }
    assert doc["defaults"] == {
        "username": "admin",
        "credentials": {"password_env": "ROCE_LAB_PASSWORD"},
    }
    assert "admin" not in yaml.safe_dump(doc["devices"])  # no password anywhere
    devices = {d["name"]: d for d in doc["devices"]}
    assert devices["spine1"]["platform"] == "arista_eos"
    assert devices["spine1"]["host"] == "127.0.0.1"
    assert devices["spine1"]["port"] == ports["spine1"]
    assert devices["spine1"]["ports"][0] == {
        "name": "Ethernet1",
        "speed": "10M",
        "cable_m": 1,
        "mtu": 9000,
        "peer": "leaf1:Ethernet1",
        "ipv4": "198.18.0.0/31",
    }
    assert devices["h1"]["netns"] == "clab-lab1-h1"
    assert devices["h1"]["ports"][0]["peer"] == "leaf1:Ethernet3"
    assert devices["h1"]["ports"][0]["mac"] == "02:00:c6:12:00:09"
    for device in doc["devices"]:
        for port in device["ports"]:
            peer_device, peer_port = port["peer"].split(":")
            back = next(p for p in devices[peer_device]["ports"] if p["name"] == peer_port)
            assert back["peer"] == f"{device['name']}:{port['name']}"


def test_fabric_document_passes_the_agents_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = pytest.importorskip("agent.intent.loader")
    profiles = REPO / "playbooks" / "profiles"
    if not (profiles / "nvidia-default.yml").is_file():
        pytest.skip("profile nvidia-default not available yet")
    monkeypatch.setenv("ROCE_AGENT_PROFILES", str(profiles))
    plan = build_plan(load_topology(LEAFSPINE))
    path = tmp_path / "fabric.yml"
    ports = {s.name: 20001 + n for n, s in enumerate(plan.switches())}
    path.write_text(yaml.safe_dump(fabric_document(plan, ports)))
    loader.load_fabric(path)


# --------------------------------------------------------------------------- containerlab files


def test_host_exec_lines_in_the_clab_file_match_the_plan() -> None:
    plan = build_plan(load_topology(LEAFSPINE))
    raw = yaml.safe_load(LEAFSPINE.read_text())
    for host in plan.hosts():
        assert raw["topology"]["nodes"][host.name]["exec"] == host_exec_commands(plan, host.name)


def test_switch_nodes_run_the_vswitch_as_their_container_command() -> None:
    raw = yaml.safe_load(LEAFSPINE.read_text())
    for name, node in raw["topology"]["nodes"].items():
        if node["image"].startswith("roce-vswitch"):
            assert node["cmd"].startswith("python -m lab.container ")
            assert f"--node {name}" in node["cmd"]


def test_ceos_file_has_the_same_shape_and_generated_configs() -> None:
    plan = build_plan(load_topology(LEAFSPINE))
    linux = yaml.safe_load(LEAFSPINE.read_text())
    ceos = yaml.safe_load(CEOS.read_text())
    assert ceos["topology"]["links"] == linux["topology"]["links"]
    assert set(ceos["topology"]["nodes"]) == set(linux["topology"]["nodes"])
    for switch in plan.switches():
        assert ceos["topology"]["nodes"][switch.name]["kind"] == "arista_ceos"
        config = REPO / "containerlab" / "ceos" / f"{switch.name}.cfg"
        assert config.read_text() == eos_startup_config(plan, switch.name)
    for host in plan.hosts():
        expected = host_exec_commands(plan, host.name, static_gateway_arp=False)
        assert ceos["topology"]["nodes"][host.name]["exec"] == expected

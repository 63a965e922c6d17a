"""The compact fabric form (agent/intent/expand.py): ranges, patterns, defaults, links once.

Each rule is checked on its own (table-driven, errors located by a ``#<`` marker on the line
they must name) and as a whole: a random leaf-spine written compactly and written port by port
must load to the same intent.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.app.cli import main
from agent.errors import IntentError
from agent.intent.expand import expand_fabric
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from common.yamlsource import load_yaml

HEADER = """\
name: t
profile: nvidia-default
defaults:
  username: netops
  credentials: {password_env: FABRIC_PW}
"""
SWITCH = "platform: arista_eos, host: {host}"


def _write(folder: Path, text: str) -> Path:
    path = folder / "fabric.yml"
    path.write_text(text)
    return path


def _load(tmp_path: Path, body: str) -> object:
    return load_fabric(_write(tmp_path, HEADER + body)).intent


def _ports(intent: object, device: str) -> dict[str, object]:
    found = intent.device(device)  # type: ignore[attr-defined]
    assert found is not None
    return {p.name: p for p in found.ports}


# --------------------------------------------------------------------------- ranges


def test_a_range_expands_with_patterns_and_stepped_addresses(tmp_path: Path) -> None:
    intent = _load(
        tmp_path,
        """\
  ports: {speed: 400G, mtu: 9100, cable_m: 3}
devices:
  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1}
  - {name: spine2, role: spine, platform: arista_eos, host: 10.0.0.2}
  - name: leaf1
    role: leaf
    platform: arista_eos
    host: 10.0.0.11
    ports:
      - {name: Ethernet1/1-3, peer: "gpu{n}:eth0", description: "gpu {n} (index {i}, next {n+1})"}
      - {name: Ethernet1/31-32, peer: "spine{i+1}:Ethernet1/1", ipv4: 198.18.0.1/31}
  - {name: gpu1, role: host, platform: linux_host, netns: gpu1}
  - {name: gpu2, role: host, platform: linux_host, netns: gpu2}
  - {name: gpu3, role: host, platform: linux_host, netns: gpu3}
""",
    )
    leaf = _ports(intent, "leaf1")
    assert list(leaf) == [
        "Ethernet1/1",
        "Ethernet1/2",
        "Ethernet1/3",
        "Ethernet1/31",
        "Ethernet1/32",
    ]
    assert leaf["Ethernet1/2"].peer == "gpu2:eth0"  # type: ignore[attr-defined]
    assert leaf["Ethernet1/3"].description == "gpu 3 (index 2, next 4)"  # type: ignore[attr-defined]
    assert [str(leaf[n].ipv4) for n in ("Ethernet1/31", "Ethernet1/32")] == [  # type: ignore[attr-defined]
        "198.18.0.1/31",
        "198.18.0.3/31",
    ]
    # links declared once: the other ends exist, pointing back, with the other /31 address
    spine2 = _ports(intent, "spine2")["Ethernet1/1"]
    assert spine2.peer == "leaf1:Ethernet1/32"  # type: ignore[attr-defined]
    assert str(spine2.ipv4) == "198.18.0.2/31"  # type: ignore[attr-defined]
    gpu3 = _ports(intent, "gpu3")["eth0"]
    assert (gpu3.peer, gpu3.speed, gpu3.mtu, gpu3.cable_m) == (  # type: ignore[attr-defined]
        "leaf1:Ethernet1/3",
        400_000_000_000,
        9100,
        3.0,
    )


@pytest.mark.parametrize(
    ("platform", "name", "expected"),
    [
        ("arista_eos", "Ethernet1/1-3", ["Ethernet1/1", "Ethernet1/2", "Ethernet1/3"]),
        ("arista_eos", "Ethernet1/1/1-2", ["Ethernet1/1/1", "Ethernet1/1/2"]),  # the last number
        ("cumulus_nvue", "swp1s0-1", ["swp1s0", "swp1s1"]),
        ("linux_host", "eth08-10", ["eth08", "eth09", "eth10"]),  # a leading zero keeps the width
        ("sonic", "Ethernet7-7", ["Ethernet7"]),
    ],
)
def test_range_names(tmp_path: Path, platform: str, name: str, expected: list[str]) -> None:
    role = "host" if platform == "linux_host" else "leaf"
    intent = _load(
        tmp_path,
        f"""\
  ports: {{speed: 100G, mtu: 9100, cable_m: 3}}
devices:
  - {{name: leaf1, role: {role}, platform: {platform}, host: 10.0.0.1, ports: [{{name: {name}}}]}}
""",
    )
    assert list(_ports(intent, "leaf1")) == expected


def test_a_stepped_range_and_rdma_device_patterns_write_a_multi_nic_pod_short(
    tmp_path: Path,
) -> None:
    """A SONiC leaf's 400G ports are every 8th (Ethernet0, 8 ... 56); an 8-NIC host names its
    NICs eth0-7 with mlx5_0-7 behind them: two lines each, not one per port."""
    intent = _load(
        tmp_path,
        """\
  ports: {speed: 400G, mtu: 9100, cable_m: 3}
devices:
  - name: leaf1
    role: leaf
    platform: sonic
    host: 10.0.0.11
    ports:
      - {name: Ethernet0-56, step: 8, peer: "gpu1:eth{i}", description: "gpu1 rail {i} (n {n})"}
  - name: gpu1
    role: host
    platform: linux_host
    netns: gpu1
    ports:
      - {name: eth0-7, rdma_device: "mlx5_{i}/1", peer: "leaf1:Ethernet{i*8}"}
""",
    )
    leaf = _ports(intent, "leaf1")
    assert list(leaf) == [f"Ethernet{8 * k}" for k in range(8)]
    assert leaf["Ethernet16"].peer == "gpu1:eth2"  # type: ignore[attr-defined]
    assert leaf["Ethernet56"].description == "gpu1 rail 7 (n 56)"  # type: ignore[attr-defined]
    host = _ports(intent, "gpu1")
    assert [(p.name, p.rdma_device, p.peer) for p in host.values()] == [  # type: ignore[attr-defined]
        (f"eth{k}", f"mlx5_{k}/1", f"leaf1:Ethernet{8 * k}") for k in range(8)
    ]


def test_nics_written_for_their_rdma_device_take_the_links_the_leaves_declare(
    tmp_path: Path,
) -> None:
    """The leaves declare the links (rail r of every host on leaf r); a host writes its NICs
    only to name the RDMA device behind each: the peer and the /31's other address come from
    the leaf, as for a derived end."""
    intent = _load(
        tmp_path,
        """\
  ports: {speed: 400G, mtu: 9100, cable_m: 3}
devices:
  - {name: leaf1, role: leaf, platform: arista_eos, host: 10.0.0.11,
     ports: [{name: Ethernet1/1-2, peer: "gpu{n}:eth0", ipv4: 198.18.0.0/31}]}
  - {name: leaf2, role: leaf, platform: arista_eos, host: 10.0.0.12,
     ports: [{name: Ethernet1/1-2, peer: "gpu{n}:eth1"}]}
  - {name: gpu1, role: host, platform: linux_host, netns: gpu1,
     ports: [{name: eth0-1, rdma_device: "mlx5_{i}"}]}
  - {name: gpu2, role: host, platform: linux_host, netns: gpu2,
     ports: [{name: eth0-1, rdma_device: "mlx5_{i}"}]}
""",
    )
    gpu2 = _ports(intent, "gpu2")
    assert [(p.name, p.rdma_device, p.peer) for p in gpu2.values()] == [  # type: ignore[attr-defined]
        ("eth0", "mlx5_0", "leaf1:Ethernet1/2"),
        ("eth1", "mlx5_1", "leaf2:Ethernet1/2"),
    ]
    assert str(gpu2["eth0"].ipv4) == "198.18.0.3/31"  # type: ignore[attr-defined]
    assert _ports(intent, "gpu1")["eth1"].ipv4 is None  # type: ignore[attr-defined]


def _two_leaves_and_a_host(first_peer: str, second_peer: str, host_port: str) -> str:
    """Ethernet1 of leaf1 and of leaf2 naming the given peers; host gpu1 with one port entry."""
    return f"""\
  ports: {{speed: 400G, mtu: 9100, cable_m: 3}}
devices:
  - {{name: leaf1, role: leaf, platform: arista_eos, host: 10.0.0.11,
     ports: [{{name: Ethernet1, peer: "{first_peer}"}}]}}
  - {{name: leaf2, role: leaf, platform: arista_eos, host: 10.0.0.12,
     ports: [{{name: Ethernet1, peer: "{second_peer}"}}]}}
  - {{name: gpu1, role: host, platform: linux_host, netns: gpu1, ports: [{host_port}]}}
"""


def test_a_nic_two_leaves_name_keeps_the_first_and_the_second_is_refused(tmp_path: Path) -> None:
    body = _two_leaves_and_a_host("gpu1:eth0", "gpu1:eth0", "{name: eth0, rdma_device: mlx5_0}")
    with pytest.raises(IntentError) as caught:
        _load(tmp_path, body)
    assert (
        "IR011 Expected: gpu1:eth0 to have peer leaf2:Ethernet1 Actual: gpu1:eth0 has peer "
        "leaf1:Ethernet1" in str(caught.value)
    )


def test_each_nic_of_a_range_points_back_to_the_leaf_line_that_names_it(tmp_path: Path) -> None:
    """The members of one range entry answered by two leaves: each member's peer is located
    on its own leaf's line (an error about it must name that line, not the last one written)."""
    body = _two_leaves_and_a_host(
        "gpu1:eth0", "gpu1:eth1", '{name: eth0-1, rdma_device: "mlx5_{i}"}'
    )
    path = _write(tmp_path, HEADER + body)
    expanded = expand_fabric(*load_yaml(path))
    assert not expanded.problems
    lines = path.read_text().splitlines()
    for k, leaf in enumerate(("leaf1", "leaf2")):
        where = expanded.source.values[("devices", 2, "ports", k, "peer")]
        assert f'peer: "gpu1:eth{k}"' in lines[where.line - 1] and leaf in lines[where.line - 2]


def _rail_pod(leaves: int, hosts: int, host_ports: str) -> str:
    """Rail r of every host on leaf r; the leaves declare the links (with /31s on leaf1)."""
    text = "  ports: {speed: 400G, mtu: 9100, cable_m: 3}\ndevices:\n"
    for r in range(leaves):
        address = ", ipv4: 198.18.0.0/31" if r == 0 else ""
        text += (
            f"  - {{name: leaf{r + 1}, role: leaf, platform: arista_eos, host: 10.0.0.{r + 1},"
            f' ports: [{{name: Ethernet1-{hosts}, peer: "gpu{{n}}:eth{r}"{address}}}]}}\n'
        )
    for h in range(1, hosts + 1):
        text += (
            f"  - {{name: gpu{h}, role: host, platform: linux_host, netns: gpu{h}{host_ports}}}\n"
        )
    return text


@settings(max_examples=25, deadline=None, derandomize=True)
@given(leaves=st.integers(1, 8), hosts=st.integers(1, 12))
def test_nics_written_only_for_their_rdma_device_load_to_the_links_a_bare_host_gets(
    leaves: int, hosts: int
) -> None:
    """A host that writes its NICs only to name their RDMA devices gets the same links (peer,
    address, speed) as a host that writes no port at all: the leaves' declaration decides."""
    nics = f', ports: [{{name: eth0-{leaves - 1}, rdma_device: "mlx5_{{i}}"}}]'
    with tempfile.TemporaryDirectory() as folder:
        bare = _load(Path(folder), _rail_pod(leaves, hosts, ""))
        named = _load(Path(folder), _rail_pod(leaves, hosts, nics))
    for h in range(1, hosts + 1):
        ports = _ports(named, f"gpu{h}")
        assert [p.rdma_device for p in ports.values()] == [f"mlx5_{r}" for r in range(leaves)]  # type: ignore[attr-defined]
        link = ("name", "peer", "ipv4", "speed", "mtu", "cable_m")
        assert [p.model_dump(include=set(link)) for p in ports.values()] == [  # type: ignore[attr-defined]
            p.model_dump(include=set(link))  # type: ignore[attr-defined]
            for p in sorted(_ports(bare, f"gpu{h}").values(), key=lambda p: p.name)  # type: ignore[attr-defined]
        ]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    first=st.integers(0, 64),
    step=st.integers(1, 16),
    count=st.integers(1, 12),
    offset=st.integers(0, 3),
)
def test_a_stepped_range_holds_every_step_th_number_and_patterns_follow_it(
    first: int, step: int, count: int, offset: int
) -> None:
    last = first + step * (count - 1)
    body = f"""\
  ports: {{speed: 100G, mtu: 9100, cable_m: 3}}
devices:
  - name: h1
    role: host
    platform: linux_host
    netns: h1
    ports:
      - {{name: eth{first}-{last}, step: {step}, rdma_device: "mlx5_{{i+{offset}}}",
          description: "n={{n}} i={{i}}"}}
"""
    with tempfile.TemporaryDirectory() as folder:
        ports = list(_ports(_load(Path(folder), body), "h1").values())
    assert [p.name for p in ports] == [f"eth{first + step * k}" for k in range(count)]  # type: ignore[attr-defined]
    assert [p.rdma_device for p in ports] == [f"mlx5_{k + offset}" for k in range(count)]  # type: ignore[attr-defined]
    assert [p.description for p in ports] == [  # type: ignore[attr-defined]
        f"n={first + step * k} i={k}" for k in range(count)
    ]


def test_ranges_reused_through_anchors_are_bounded(tmp_path: Path) -> None:
    """17 devices sharing 4096 ports through one anchor: 69 632 ports from 20 lines."""
    devices = "".join(
        f"  - {{name: l{k}, role: leaf, platform: arista_eos, host: 10.0.0.{k}, ports: *p}}\n"
        for k in range(2, 18)
    )
    body = (
        "devices:\n  - {name: l1, role: leaf, platform: arista_eos, host: 10.0.0.1,"
        " ports: &p [{name: Ethernet1/1-4096, speed: 1G, mtu: 9100, cable_m: 1}]}\n" + devices
    )
    with pytest.raises(IntentError) as caught:
        load_fabric(_write(tmp_path, HEADER + body))
    (problem,) = caught.value.problems
    # where the range is written (the anchor), on the device that passes the limit
    assert problem.position is not None and problem.position.line == 7
    assert problem.field == "devices[16].ports[0].name"
    assert "Expected: at most 65536 ports in the fabric" in problem.message


def test_defaults_give_derived_ports_their_device_description(tmp_path: Path) -> None:
    intent = _load(
        tmp_path,
        """\
  ports: {speed: 100G, mtu: 9100, cable_m: 3, description: fabric link}
devices:
  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1,
     port_defaults: {description: to a leaf}}
  - {name: leaf1, role: leaf, platform: arista_eos, host: 10.0.0.2,
     ports: [{name: Ethernet1, peer: "spine1:Ethernet1"}]}
""",
    )
    assert _ports(intent, "spine1")["Ethernet1"].description == "to a leaf"  # type: ignore[attr-defined]
    assert _ports(intent, "leaf1")["Ethernet1"].description == "fabric link"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("address", "other"),
    [
        ("10.0.0.1/31", "10.0.0.0/31"),
        ("10.0.0.0/31", "10.0.0.1/31"),
        ("10.0.0.1/30", "10.0.0.2/30"),
        ("10.0.0.2/30", "10.0.0.1/30"),
        ("10.0.0.3/30", None),  # the broadcast address: no other end to give
        ("10.0.0.1/24", None),  # not point-to-point: the other end's address is unknown
    ],
)
def test_a_derived_end_gets_the_other_point_to_point_address(
    tmp_path: Path, address: str, other: str | None
) -> None:
    intent = _load(
        tmp_path,
        f"""\
  ports: {{speed: 100G, mtu: 9100, cable_m: 3}}
devices:
  - {{name: spine1, role: spine, {SWITCH.format(host="10.9.0.1")}}}
  - name: leaf1
    role: leaf
    platform: arista_eos
    host: 10.9.0.2
    ports: [{{name: Ethernet1, peer: "spine1:Ethernet7", ipv4: {address}}}]
""",
    )
    derived = _ports(intent, "spine1")["Ethernet7"]
    assert (str(derived.ipv4) if derived.ipv4 else None) == other  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- resolution

LINK = """\
devices:
  - name: spine1
    role: spine
    platform: arista_eos
    host: 10.0.0.1
{spine_defaults}    ports:
      - {{name: Ethernet1, peer: "leaf1:Ethernet1", speed: 100G{spine_port}}}
  - name: leaf1
    role: leaf
    platform: arista_eos
    host: 10.0.0.2
{leaf_defaults}    ports:
      - {{name: Ethernet1, peer: "spine1:Ethernet1", speed: 100G{leaf_port}}}
"""


def _link(
    fabric: str = "", spine_defaults: str = "", spine_port: str = "", leaf_port: str = ""
) -> str:
    return (f"  ports: {{{fabric}}}\n" if fabric else "") + LINK.format(
        spine_defaults=f"    port_defaults: {{{spine_defaults}}}\n" if spine_defaults else "",
        leaf_defaults="",
        spine_port=f", {spine_port}" if spine_port else "",
        leaf_port=f", {leaf_port}" if leaf_port else "",
    )


# What the end states (its port, else its port_defaults), else what the other end states,
# else defaults.ports. Two ends that state different values keep them (IR009 refuses the
# link, test_link_rules.py): a port_defaults is never overridden by the other end's port.
SPINE_DEFAULTS = "port_defaults of spine1 (F:12:30)"
RESOLUTION = [
    # (defaults.ports, spine1's port_defaults, spine1's port, leaf1's port, value, source)
    ("cable_m: 1, mtu: 9100", "cable_m: 2", "cable_m: 3", "cable_m: 4", 3, "POSITION"),
    ("cable_m: 1, mtu: 9100", "cable_m: 2", "", "cable_m: 4", 2, SPINE_DEFAULTS),
    ("cable_m: 1, mtu: 9100", "", "", "cable_m: 4", 4, "peer leaf1:Ethernet1 (F:"),
    ("cable_m: 1, mtu: 9100", "cable_m: 2", "", "", 2, SPINE_DEFAULTS),
    ("cable_m: 1, mtu: 9100", "", "", "", 1, "defaults.ports (F:6:20)"),
]


@pytest.mark.parametrize(
    ("fabric", "device", "spine_port", "leaf_port", "cable", "source"), RESOLUTION
)
def test_speed_mtu_cable_resolve_in_order_and_say_from_where(
    tmp_path: Path,
    fabric: str,
    device: str,
    spine_port: str,
    leaf_port: str,
    cable: float,
    source: str,
) -> None:
    """On the expansion alone: the two ends disagree on purpose, which the rules refuse."""
    path = _write(tmp_path, HEADER + _link(fabric, device, spine_port, leaf_port))
    data, source_map = load_yaml(path)
    expanded = expand_fabric(data, source_map)
    assert not expanded.problems
    assert expanded.devices[0]["ports"][0]["cable_m"] == cable
    where = expanded.sources[("spine1", "Ethernet1")]["cable_m"]
    if source == "POSITION":  # the port's own value: just where it is written
        row = next(i for i, r in enumerate(path.read_text().splitlines(), 1) if "cable_m: 3" in r)
        assert where == f"{path}:{row}:{path.read_text().splitlines()[row - 1].index('3}') + 1}"
    else:
        assert where.startswith(source.replace("F:", f"{path}:")), where
    # speed is the port's own everywhere here
    assert "(" not in expanded.sources[("spine1", "Ethernet1")]["speed"]


def test_the_plan_says_where_each_value_came_from(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + _link("mtu: 9100", spine_port="cable_m: 30"))
    result = CliRunner().invoke(main, ["plan", str(path), "--output", "json"])
    assert result.exit_code == 0, result.output
    ports = {
        (d["name"], p["name"]): p for d in json.loads(result.output)["devices"] for p in d["ports"]
    }
    assert ports[("spine1", "Ethernet1")]["sources"] == {
        "speed": f"{path}:13:59",
        "mtu": f"defaults.ports ({path}:6:16)",
        "cable_m": f"{path}:13:74",
    }
    assert ports[("leaf1", "Ethernet1")]["sources"]["cable_m"] == (
        f"peer spine1:Ethernet1 ({path}:13:74)"
    )


def test_build_plan_without_the_loader_has_no_sources(tmp_path: Path) -> None:
    loaded = load_fabric(_write(tmp_path, HEADER + _link("cable_m: 3, mtu: 9100")))
    assert loaded.sources
    copy = type(loaded.intent).model_validate(loaded.intent.model_dump())
    assert build_plan(loaded.intent).devices[0].ports[0].sources
    assert build_plan(copy).devices[0].ports[0].sources == {}
    explicit = {("spine1", "Ethernet1"): {"mtu": "here"}}
    assert build_plan(copy, explicit).devices[0].ports[0].sources == {"mtu": "here"}


# --------------------------------------------------------------------------- errors

DEVICES = """\
devices:
  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1}
  - name: leaf1
    role: leaf
    platform: arista_eos
    host: 10.0.0.2
"""

ERRORS = [
    # (id, fabric body after the header, field named, words in the message); the error must be
    # on the line marked #<
    (
        "cable_m required",
        "  ports: {speed: 100G, mtu: 9100}\n" + DEVICES + "    ports:\n"
        '      - {name: Ethernet1, peer: "spine1:Ethernet1"}  #<\n',
        "devices[1].ports[0].cable_m",
        "required: PFC headroom depends on the cable length; set it on this port, on its "
        "peer spine1:Ethernet1, in port_defaults of leaf1 or in defaults.ports",
    ),
    (
        "mtu required",
        "  ports: {speed: 100G, cable_m: 3}\n" + DEVICES + "    ports:\n"
        "      - {name: Ethernet1}  #<\n",
        "devices[1].ports[0].mtu",
        "required: PFC headroom and ECN thresholds depend on the MTU; set it on this port, in",
    ),
    (
        "speed required, in a range",
        "  ports: {mtu: 9100, cable_m: 3}\n" + DEVICES + "    ports:\n"
        "      - {name: Ethernet1/1-2}  #<\n",
        "devices[1].ports[0].speed (Ethernet1/1 and 1 more)",  # one mistake, one error
        "required:",
    ),
    (
        "a typo in a range is one error",
        "  ports: {speed: 100G, mtu: 9100, cable_m: 3}\n"
        + DEVICES
        + "    ports:\n      - {name: Ethernet1/1-32, cabel_m: 3}  #<\n",
        "devices[1].ports[0].cabel_m (Ethernet1/1 and 31 more)",
        "unknown field 'cabel_m'",
    ),
    (
        "reversed range",
        DEVICES + "    ports:\n      - {name: Ethernet1/8-1, speed: 1G}  #<\n",
        "devices[1].ports[0].name",
        "Expected: a range from low to high such as Ethernet1/1-8 Actual: 'Ethernet1/8-1'",
    ),
    (
        "too many ports",
        DEVICES + "    ports:\n      - {name: Ethernet1/1-4097, speed: 1G}  #<\n",
        "devices[1].ports[0].name",
        "Expected: at most 4096 ports in one range Actual: 'Ethernet1/1-4097' is 4097 ports",
    ),
    (
        "unknown pattern",
        DEVICES + '    ports:\n      - {name: Ethernet1/1-2, peer: "gpu{k}:eth0"}  #<\n',
        "devices[1].ports[0].peer",
        "Expected: a pattern {n}, {i}, {n+K}, {n-K}, {i+K}, {i-K}, {i*K} or {i*K+C} Actual: '{k}'",
    ),
    (
        "unbalanced brace",
        DEVICES + '    ports:\n      - {name: Ethernet1/1-2, description: "gpu{n"}  #<\n',
        "devices[1].ports[0].description",
        "Expected: braces only around a pattern",
    ),
    (
        "negative number",
        DEVICES + '    ports:\n      - {name: Ethernet1/1-2, peer: "gpu{i-1}:eth0"}  #<\n',
        "devices[1].ports[0].peer",
        "Expected: {i-1} >= 0 for every port of the range Actual: -1 (for n=1, i=0)",
    ),
    (
        "one peer for a whole range",
        DEVICES + '    ports:\n      - {name: Ethernet1/1-2, peer: "spine1:Ethernet1"}  #<\n',
        "devices[1].ports[0].peer",
        "Expected: a peer with a pattern ({n}, {i}, {n+K}, {n-K}, {i+K}, {i-K}, {i*K} or "
        "{i*K+C}; each port of "
        "a range has its own peer) Actual: 'spine1:Ethernet1' for all 2 ports of 'Ethernet1/1-2'",
    ),
    (
        "a second declaring end of a derived port (IR011)",
        "  ports: {speed: 100G, mtu: 9100, cable_m: 3}\n"
        + DEVICES
        + "    ports:\n"
        + '      - {name: Ethernet1, peer: "spine1:Ethernet1"}\n'
        + '      - {name: Ethernet2, peer: "spine1:Ethernet1"}  #<\n',
        "devices[1].ports[1].peer",
        "IR011 Expected: spine1:Ethernet1 to have peer leaf1:Ethernet2 Actual: spine1:Ethernet1 "
        "has peer leaf1:Ethernet1",
    ),
    (
        "pattern on a single port",
        DEVICES + '    ports:\n      - {name: Ethernet1, peer: "gpu{n}:eth0"}  #<\n',
        "devices[1].ports[0].peer",
        "only in a port range",
    ),
    (
        "duplicate expansion",
        DEVICES + "    ports:\n      - {name: Ethernet1/1-4, speed: 1G}\n"
        "      - {name: Ethernet1/3, speed: 1G}  #<\n",
        "devices[1].ports[1].name",
        "Expected: each port once on leaf1 Actual: Ethernet1/3 is also declared by the range "
        "'Ethernet1/1-4' at ",
    ),
    (
        "a step that misses the last number",
        DEVICES + "    ports:\n      - {name: Ethernet0-60, step: 8, speed: 1G}  #<\n",
        "devices[1].ports[0].step",
        "Expected: a step from 0 that lands on 60, the range's last number Actual: step 8 on "
        "'Ethernet0-60' ends at 56 (write Ethernet0-56, or another step)",
    ),
    (
        "a step of zero",
        DEVICES + "    ports:\n      - {name: Ethernet0-56, step: 0, speed: 1G}  #<\n",
        "devices[1].ports[0].step",
        "Expected: a whole number from 1 to 4096 (every step-th number of the range) Actual: 0",
    ),
    (
        "a step that is text",
        DEVICES + "    ports:\n      - {name: Ethernet0-56, step: eight, speed: 1G}  #<\n",
        "devices[1].ports[0].step",
        "Actual: 'eight'",
    ),
    (
        "a step on a single port",
        DEVICES + "    ports:\n      - {name: Ethernet8, step: 8, speed: 1G}  #<\n",
        "devices[1].ports[0].step",
        "Expected: step on a port range such as Ethernet0-56 Actual: step on the single port "
        "'Ethernet8'",
    ),
    (
        "one rdma_device for a whole range",
        DEVICES.replace("role: leaf", "role: host").replace(
            "arista_eos\n    host", "linux_host\n    host"
        )
        + "    ports:\n      - {name: eth0-7, speed: 1G, rdma_device: mlx5_0}  #<\n",
        "devices[1].ports[0].rdma_device",
        "Expected: an rdma_device with a pattern (mlx5_{i}; each port of a range has its own "
        "rdma_device) Actual: 'mlx5_0' for all 8 ports of 'eth0-7'",
    ),
    (
        "an rdma_device pattern on a single port",
        DEVICES + '    ports:\n      - {name: eth0, speed: 1G, rdma_device: "mlx5_{i}"}  #<\n',
        "devices[1].ports[0].rdma_device",
        "Expected: patterns ({n}, {i}, {n+K}, {n-K}, {i+K}, {i-K}, {i*K} or {i*K+C}) only in a "
        "port range",
    ),
    (
        "mac on a range",
        DEVICES + "    ports:\n"
        "      - {name: Ethernet1/1-4, speed: 1G, mac: '02:00:00:00:00:01'}  #<\n",
        "devices[1].ports[0].mac",
        "Expected: mac on single ports only",
    ),
    (
        "addresses run out",
        DEVICES + "    ports:\n"
        "      - {name: Ethernet1/1-2, speed: 1G, ipv4: 255.255.255.254/31}  #<\n",
        "devices[1].ports[0].ipv4",
        "Expected: 2 subnets /31 from 255.255.255.254/31 Actual: they run past",
    ),
    (
        "bad address in a range",
        DEVICES + "    ports:\n      - {name: Ethernet1/1-2, speed: 1G, ipv4: 10.0.0.300/31}  #<\n",
        "devices[1].ports[0].ipv4",
        "Expected: an IPv4 address with its prefix length",
    ),
    (
        "unknown default",
        "  ports: {speed: 100G, peer: 'x:y'}  #<\n" + DEVICES,
        "defaults.ports.peer",
        "Expected: one of speed, mtu, cable_m, description",
    ),
    (
        "port_defaults not a mapping",
        DEVICES + "    port_defaults: 3  #<\n",
        "devices[1].port_defaults",
        "Expected: a mapping of port fields",
    ),
    (
        "model error in a default points at the default",
        "  ports: {speed: 100G, mtu: 100, cable_m: 3}  #<\n" + DEVICES + "    ports:\n"
        "      - {name: Ethernet1}\n",
        "devices[1].ports[0].mtu",
        "greater than or equal to 1280",
    ),
    (
        "model error in a range member points at the range",
        "  ports: {mtu: 9100, cable_m: 3}\n" + DEVICES + "    ports:\n"
        "      - {name: Ethernet1/1-2, speed: 1T}  #<\n",
        "devices[1].ports[0].speed (Ethernet1/1 and 1 more)",
        "",
    ),
    (
        "a derived port's problem points at the declaring end",
        "  ports: {speed: 100G, mtu: 9100, cable_m: 3}\n"
        "devices:\n"
        "  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1,"
        " ports: [{name: Ethernet9, ipv4: 10.0.0.0/31}]}\n"
        "  - name: leaf1\n    role: leaf\n    platform: arista_eos\n    host: 10.0.0.2\n"
        "    ports:\n"
        '      - {name: Ethernet1, peer: "spine1:Ethernet1", ipv4: 10.0.0.1/31}  #<\n',
        "devices[1].ports[0].peer (derived port spine1:Ethernet1 ipv4)",
        "IR012 Expected: a unique data-plane address Actual: 10.0.0.0 is also on spine1:Ethernet9",
    ),
    (
        "a port answered under another name is not derived again (IR010)",
        "  ports: {speed: 100G, mtu: 9100, cable_m: 3}\n"
        "devices:\n"
        "  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1,"
        ' ports: [{name: Ethernet9, peer: "leaf1:Ethernet1"}]}\n'
        "  - name: leaf1\n    role: leaf\n    platform: arista_eos\n    host: 10.0.0.2\n"
        "    ports:\n"
        '      - {name: Ethernet1, peer: "spine1:Ethernet1"}  #<\n',
        "devices[1].ports[0].peer",
        "IR010 Expected: a port 'Ethernet1' on spine1 Actual: spine1 has no port 'Ethernet1'",
    ),
]


@pytest.mark.parametrize(
    ("body", "field", "words"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_errors_name_file_line_column_and_field(
    tmp_path: Path, body: str, field: str, words: str
) -> None:
    path = _write(tmp_path, HEADER + body)
    line = 1 + (HEADER + body).splitlines().index(
        next(row for row in (HEADER + body).splitlines() if row.endswith("#<"))
    )
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    texts = [str(p) for p in caught.value.problems]
    wanted = [
        t for t in texts if t.startswith(f"{path}:{line}:") and f": {field}: " in t and words in t
    ]
    assert wanted, "\n".join(texts)


# --------------------------------------------------------------------------- compact = explicit


@st.composite
def pods(draw: st.DrawFn) -> dict[str, object]:
    return {
        "spines": draw(st.integers(1, 4)),
        "leaves": draw(st.integers(1, 4)),
        "hosts": draw(st.integers(1, 4)),
        "host_speed": draw(st.sampled_from(["25G", "100G", "200G", "400G"])),
        "uplink_speed": draw(st.sampled_from(["100G", "400G", "800G"])),
        "mtu": draw(st.sampled_from([1500, 4200, 9000, 9100, 9216])),
        "host_cable": draw(st.sampled_from([1, 2.5, 3, 5])),
        "uplink_cable": draw(st.sampled_from([3, 10, 30, 100])),
        # per leaf: do the hosts declare the link (True) or the leaf (False)?
        "host_side": draw(st.lists(st.booleans(), min_size=4, max_size=4)),
        "addresses": draw(st.booleans()),
    }


def _compact(pod: dict) -> str:
    lines = [
        HEADER.rstrip("\n"),
        f"  ports: {{mtu: {pod['mtu']}, cable_m: {pod['host_cable']}}}",
        "x-host: &host {platform: linux_host, role: host}",
        "devices:",
    ]
    for s in range(1, pod["spines"] + 1):
        lines.append(f"  - {{name: spine{s}, role: spine, {SWITCH.format(host=f'10.1.0.{s}')}}}")
    for leaf in range(1, pod["leaves"] + 1):
        lines += [
            f"  - name: leaf{leaf}",
            "    role: leaf",
            "    platform: arista_eos",
            f"    host: 10.2.0.{leaf}",
            f"    port_defaults: {{speed: {pod['host_speed']}}}",
            "    ports:",
        ]
        if not pod["host_side"][leaf - 1]:
            lines.append(
                f'      - {{name: Ethernet1/1-{pod["hosts"]}, peer: "l{leaf}h{{n}}:eth0"}}'
            )
        address = f", ipv4: 10.3.{leaf}.1/31" if pod["addresses"] else ""
        lines.append(
            f'      - {{name: Ethernet2/1-{pod["spines"]}, peer: "spine{{n}}:Ethernet1/{leaf}",'
            f" speed: {pod['uplink_speed']}, cable_m: {pod['uplink_cable']}{address}}}"
        )
    for leaf in range(1, pod["leaves"] + 1):
        for h in range(1, pod["hosts"] + 1):
            ports = (
                f', ports: [{{name: eth0, peer: "leaf{leaf}:Ethernet1/{h}", '
                f"speed: {pod['host_speed']}}}]"
                if pod["host_side"][leaf - 1]
                else ""
            )
            lines.append(f"  - {{<<: *host, name: l{leaf}h{h}, netns: l{leaf}h{h}{ports}}}")
    return "\n".join(lines) + "\n"


def _port(name: str, peer: str, speed: str, cable: float, mtu: int, ipv4: str = "") -> str:
    address = f", ipv4: {ipv4}" if ipv4 else ""
    return (
        f'      - {{name: {name}, peer: "{peer}", speed: {speed}, cable_m: {cable}, '
        f"mtu: {mtu}{address}}}"
    )


def _explicit(pod: dict) -> str:
    mtu, spines, hosts = pod["mtu"], pod["spines"], pod["hosts"]
    up = (pod["uplink_speed"], pod["uplink_cable"], mtu)
    down = (pod["host_speed"], pod["host_cable"], mtu)

    def addr(leaf: int, s: int, end: int) -> str:
        return f"10.3.{leaf}.{2 * (s - 1) + end}/31" if pod["addresses"] else ""

    lines = [HEADER.rstrip("\n"), "devices:"]
    for s in range(1, spines + 1):
        lines += [f"  - name: spine{s}", "    role: spine", "    platform: arista_eos",
                  f"    host: 10.1.0.{s}", "    ports:"]  # fmt: skip
        lines += [
            _port(f"Ethernet1/{leaf}", f"leaf{leaf}:Ethernet2/{s}", *up, addr(leaf, s, 0))
            for leaf in range(1, pod["leaves"] + 1)
        ]
    for leaf in range(1, pod["leaves"] + 1):
        lines += [f"  - name: leaf{leaf}", "    role: leaf", "    platform: arista_eos",
                  f"    host: 10.2.0.{leaf}", "    ports:"]  # fmt: skip
        host_ports = [
            _port(f"Ethernet1/{h}", f"l{leaf}h{h}:eth0", *down) for h in range(1, hosts + 1)
        ]
        uplinks = [
            _port(f"Ethernet2/{s}", f"spine{s}:Ethernet1/{leaf}", *up, addr(leaf, s, 1))
            for s in range(1, spines + 1)
        ]
        # derived ports come after the declared ones, in the order they are declared
        lines += uplinks + host_ports if pod["host_side"][leaf - 1] else host_ports + uplinks
    for leaf in range(1, pod["leaves"] + 1):
        for h in range(1, hosts + 1):
            lines += [f"  - name: l{leaf}h{h}", "    role: host", "    platform: linux_host",
                      f"    netns: l{leaf}h{h}", "    ports:",
                      _port("eth0", f"leaf{leaf}:Ethernet1/{h}", *down)]  # fmt: skip
    return "\n".join(lines) + "\n"


@settings(max_examples=30, deadline=None, derandomize=True)
@given(pods())
def test_compact_and_explicit_fabrics_load_to_the_same_intent(pod: dict) -> None:
    with tempfile.TemporaryDirectory() as folder:
        compact = load_fabric(_write(Path(folder), _compact(pod))).intent
        explicit = load_fabric(_write(Path(folder), _explicit(pod))).intent
    assert compact == explicit
    # and so do their plans, though each port says a different place for its values
    plans = build_plan(compact), build_plan(explicit)
    assert plans[0] == plans[1]
    assert plans[0].devices[0].ports[0].sources != plans[1].devices[0].ports[0].sources
    links = pod["spines"] * pod["leaves"] + pod["leaves"] * pod["hosts"]
    assert sum(len(d.ports) for d in compact.devices) == 2 * links


_VALUE = re.compile(r"(?<=[{ ,])(\w+): ([^,{}\n\[\]]+)")
_JUNK = [
    "[]", "{}", "~", "-1", "1.0e+999", "'{n}'", "'gpu{q}:eth0'", "'a{n-99}:b'", "Ethernet9-1",
    "Ethernet1-99999", "*nowhere", "10.0.0.1/33", "'x:'", "true", "'{{n}}'", "[1, [2]]",
]  # fmt: skip


@settings(max_examples=60, deadline=None, derandomize=True)
@given(pods(), st.lists(st.tuples(st.floats(0, 1), st.sampled_from(_JUNK)), min_size=1, max_size=3))
def test_a_damaged_compact_fabric_is_refused_with_a_location(
    pod: dict, picks: list[tuple[float, str]]
) -> None:
    """Whatever a value is replaced by, loading ends in the intent or in located problems."""
    text = _compact(pod)
    for where, junk in picks:
        spots = list(_VALUE.finditer(text))
        spot = spots[min(int(where * len(spots)), len(spots) - 1)]
        text = f"{text[: spot.start(2)]}{junk}{text[spot.end(2) :]}"
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), text)
        try:
            load_fabric(path)
        except IntentError as exc:
            assert exc.problems
            assert all(p.position is not None and p.position.file == path for p in exc.problems), (
                str(exc)
            )

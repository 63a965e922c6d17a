"""``roce-agent discover``: the per-platform LLDP / speed / MTU parsers on recorded and
vendor-documented outputs (each sample says where it comes from; trimmed to the keys that
matter plus a few that must be ignored), the skeleton builder, the lab switch's LLDP answers
read back by the agent's EOS parser, and bad input to the command (exit 2, option named)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from agent.app import discover
from agent.app.discover import build_skeleton, parse_target, renamed, render
from agent.device import lldp
from agent.device.lldp import Discovered, Neighbor, PortFacts
from lab.mgmt import lldp as lab_lldp
from lab.mgmt.eos import lldp as eos_lldp

# ----------------------------------------------------------------------------- Arista EOS

# ANTA tests/units/anta_tests/test_connectivity.py, VerifyLLDPNeighbors "success" (two
# switches) + napalm test/eos/mocked_data/test_get_lldp_neighbors_detail/normal (a Linux
# server: MAC as the port ID, its interface name in the description, no capabilities), and
# an empty port as napalm's recording has them.
EOS_DETAIL: dict[str, Any] = {
    "lldpNeighbors": {
        "Ethernet1": {
            "lldpNeighborInfo": [
                {
                    "chassisIdType": "macAddress",
                    "chassisId": "001c.73a0.fc18",
                    "systemName": "DC1-SPINE1",
                    "neighborInterfaceInfo": {
                        "interfaceIdType": "interfaceName",
                        "interfaceId": '"Ethernet1"',
                        "interfaceId_v2": "Ethernet1",
                        "interfaceDescription": "P2P_LINK_TO_DC1-LEAF1A_Ethernet1",
                    },
                }
            ]
        },
        "Ethernet2": {
            "lldpNeighborInfo": [
                {
                    "chassisIdType": "macAddress",
                    "chassisId": "001c.73f7.d138",
                    "systemName": "DC1-SPINE2",
                    "neighborInterfaceInfo": {
                        "interfaceIdType": "interfaceName",
                        "interfaceId": '"Ethernet1"',
                        "interfaceId_v2": "Ethernet1",
                        "interfaceDescription": "P2P_LINK_TO_DC1-LEAF1A_Ethernet2",
                    },
                }
            ]
        },
        "Ethernet8": {
            "lldpNeighborInfo": [
                {
                    "systemCapabilities": {
                        "bridge": False,
                        "router": False,
                        "wlanAccessPoint": False,
                    },
                    "neighborInterfaceInfo": {
                        "interfaceIdType": "macAddress",
                        "interfaceId": "000f.532e.ced1",
                        "interfaceDescription": "eth3",
                        "maxFrameSize": 0,
                    },
                    "chassisId": "2c60.0cad.30de",
                    "systemName": "78m3",
                    "systemDescription": "Linux 3.18.22-cloudflare x86_64",
                    "ttl": 120,
                    "managementAddresses": [
                        {
                            "oidString": "",
                            "interfaceNumType": "ifIndex",
                            "interfaceNum": 5,
                            "address": "192.168.8.21",
                            "addressType": "ipv4",
                        }
                    ],
                    "chassisIdType": "macAddress",
                }
            ]
        },
        "Ethernet52/1": {"lldpNeighborInfo": []},
    }
}

# napalm test/eos/mocked_data/test_get_interfaces/normal/show_interfaces.json (keys napalm's
# get_interfaces reads: bandwidth in bit/s, mtu), trimmed; Management1 must be ignored.
EOS_INTERFACES: dict[str, Any] = {
    "interfaces": {
        "Ethernet1": {
            "name": "Ethernet1",
            "bandwidth": 400_000_000_000,
            "mtu": 9214,
            "interfaceStatus": "connected",
        },
        "Ethernet2": {
            "name": "Ethernet2",
            "bandwidth": 100_000_000_000,
            "mtu": 9214,
            "interfaceStatus": "connected",
        },
        "Management1": {"name": "Management1", "bandwidth": 1_000_000_000, "mtu": 1500},
    }
}


def test_eos_neighbors_follow_anta_and_napalm_recordings() -> None:
    found = lldp.eos_neighbors(EOS_DETAIL)
    assert [(n.local_port, n.system_name, n.port, n.forwards) for n in found] == [
        ("Ethernet1", "DC1-SPINE1", "Ethernet1", None),
        ("Ethernet2", "DC1-SPINE2", "Ethernet1", None),
        ("Ethernet8", "78m3", "eth3", False),  # the server's MAC port ID: its name is used
    ]
    assert found[2].management_address == "192.168.8.21"


def test_eos_ports_speed_and_mtu() -> None:
    assert lldp.eos_ports(EOS_INTERFACES) == {
        "Ethernet1": PortFacts("Ethernet1", 400_000_000_000, 9214),
        "Ethernet2": PortFacts("Ethernet2", 100_000_000_000, 9214),
    }


# ----------------------------------------------------------------------------- Cisco NX-OS

# NX-API ``show lldp neighbors detail``: TABLE_nbor_detail.ROW_nbor_detail with the keys
# napalm's nxos driver and ONOS' LinkDiscoveryCiscoImpl read (l_port_id in the short Eth form
# as NX-OS prints it); one row is a dict, several a list.
NXOS_DETAIL_ROWS = [
    {"chassis_type": "Mac Address", "chassis_id": "5254.000d.e746", "l_port_id": "Eth1/49",
     "port_id": "Ethernet1/1", "port_desc": "to leaf1", "sys_name": "spine1",
     "system_capability": "B, R", "enabled_capability": "B, R", "mgmt_addr": "10.0.0.1"},
    {"chassis_type": "Mac Address", "chassis_id": "0c42.a1b2.c3d4", "l_port_id": "Eth1/1",
     "port_id": "0c42.a1b2.c3d5", "port_desc": "enp65s0f0np0", "sys_name": "gpu01",
     "system_capability": "S", "enabled_capability": "S", "mgmt_addr": "10.1.0.1"},
]  # fmt: skip
# napalm test/nxos/mocked_data/test_get_interfaces/admin_up_oper_down/show_interface.json,
# plus an up 400G port (eth_speed "400 Gb/s") and mgmt0 to ignore.
NXOS_INTERFACES: dict[str, Any] = {
    "TABLE_interface": {
        "ROW_interface": [
            {"interface": "Ethernet1/1", "state": "up", "eth_mtu": "9216", "eth_bw": 400000000,
             "eth_speed": "400 Gb/s"},
            {"interface": "Ethernet1/2", "state": "down", "admin_state": "down",
             "eth_mtu": "1500", "eth_bw": 1000000, "eth_speed": "auto-speed"},
            {"interface": "mgmt0", "eth_mtu": "1500", "eth_bw": 1000000},
        ]
    }
}  # fmt: skip


def test_nxos_neighbors_accept_one_row_or_many() -> None:
    many = lldp.nxos_neighbors({"TABLE_nbor_detail": {"ROW_nbor_detail": NXOS_DETAIL_ROWS}})
    assert [(n.local_port, n.system_name, n.port, n.forwards) for n in many] == [
        ("Ethernet1/1", "gpu01", "enp65s0f0np0", False),
        ("Ethernet1/49", "spine1", "Ethernet1/1", True),
    ]
    one = lldp.nxos_neighbors({"TABLE_nbor_detail": {"ROW_nbor_detail": NXOS_DETAIL_ROWS[0]}})
    assert [n.system_name for n in one] == ["spine1"]
    assert lldp.nxos_neighbors({}) == []


def test_nxos_ports_speed_from_eth_speed_else_eth_bw() -> None:
    assert lldp.nxos_ports(NXOS_INTERFACES) == {
        "Ethernet1/1": PortFacts("Ethernet1/1", 400_000_000_000, 9216),
        "Ethernet1/2": PortFacts("Ethernet1/2", 1_000_000_000, 1500),
    }


# ----------------------------------------------------------------------------- SONiC

# lldpd's JSON writer (lldpctl -f json, SONiC's lldp container): several interfaces are a list
# of one-key objects; the chassis is keyed by the system name. A host running lldpd sends its
# MAC as port ID and its interface name as description.
LLDPCTL_MANY: dict[str, Any] = {
    "lldp": {
        "interface": [
            {"Ethernet0": {"via": "LLDP", "rid": "1", "age": "0 day, 01:00:00",
                "chassis": {"spine1": {"id": {"type": "mac", "value": "52:54:00:12:34:56"},
                    "descr": "SONiC Software Version: SONiC.202311",
                    "mgmt-ip": "10.0.0.1",
                    "capability": [{"type": "Bridge", "enabled": True},
                                   {"type": "Router", "enabled": True}]}},
                "port": {"id": {"type": "ifname", "value": "Ethernet8"},
                         "descr": "leaf1:Ethernet0", "ttl": "120"}}},
            {"Ethernet4": {"via": "LLDP", "rid": "2",
                "chassis": {"gpu01": {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"},
                    "mgmt-ip": ["10.1.0.1", "fe80::1"],
                    "capability": [{"type": "Bridge", "enabled": False},
                                   {"type": "Router", "enabled": False},
                                   {"type": "Station", "enabled": True}]}},
                "port": {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"},
                         "descr": "eth0"}}},
        ]
    }
}  # fmt: skip
# One interface: lldpd writes it as an object, not a one-element list.
LLDPCTL_ONE: dict[str, Any] = {"lldp": {"interface": LLDPCTL_MANY["lldp"]["interface"][0]}}
# CONFIG_DB PORT (sonic-port.yang: speed in Mb/s, mtu), as sonic-cfggen -d --var-json PORT.
SONIC_PORT: dict[str, Any] = {
    "Ethernet0": {"alias": "etp1", "lanes": "0,1,2,3,4,5,6,7", "speed": "400000", "mtu": "9100",
                  "admin_status": "up"},
    "Ethernet4": {"alias": "etp2", "lanes": "8,9", "speed": "100000", "mtu": "9100"},
}  # fmt: skip


def test_lldpctl_list_or_object() -> None:
    many = lldp.lldpctl_neighbors(LLDPCTL_MANY)
    assert [(n.local_port, n.system_name, n.port, n.forwards) for n in many] == [
        ("Ethernet0", "spine1", "Ethernet8", True),
        ("Ethernet4", "gpu01", "eth0", False),
    ]
    assert many[1].management_address == "10.1.0.1"
    assert [n.system_name for n in lldp.lldpctl_neighbors(LLDPCTL_ONE)] == ["spine1"]
    assert lldp.lldpctl_neighbors({"lldp": {}}) == []


def test_sonic_ports_mbps() -> None:
    assert lldp.sonic_ports(SONIC_PORT) == {
        "Ethernet0": PortFacts("Ethernet0", 400_000_000_000, 9100),
        "Ethernet4": PortFacts("Ethernet4", 100_000_000_000, 9100),
    }


# ----------------------------------------------------------------------------- NVUE

# NVUE reference, Show Commands > Interface / LLDP: ``nv show interface -o json`` (link.speed
# like "100G", link.mtu, type swp; eth0 and lo are not fabric ports) and ``nv show interface
# swp51 lldp neighbor -o json`` (the documented table: Neighbor spine01, Remote IP
# 10.10.10.101, Remote Port swp1).
NVUE_INTERFACES: dict[str, Any] = {
    "eth0": {"type": "eth", "link": {"mtu": 1500, "speed": "1G"}},
    "lo": {"type": "loopback", "link": {"mtu": 65536}},
    "swp1": {"type": "swp", "link": {"mtu": 9216, "speed": "400G", "state": {"up": {}}}},
    "swp51": {"type": "swp", "link": {"mtu": 9216, "speed": "100G", "state": {"up": {}}}},
    "swp52": {"type": "swp", "link": {"mtu": 9216, "speed": "100G", "state": {"down": {}}}},
}
NVUE_SWP51: dict[str, Any] = {
    "spine01": {
        "chassis": {"chassis-id": "44:38:39:00:00:5e", "system-name": "spine01",
                    "management-address-ipv4": "10.10.10.101",
                    "capability": {"bridge": {"enabled": "on"}, "router": {"enabled": "on"}}},
        "port": {"name": "swp1", "description": "swp1", "type": "ifname", "ttl": 120},
    }
}  # fmt: skip


def test_nvue_ports_and_neighbors() -> None:
    assert lldp.nvue_ports(NVUE_INTERFACES) == {
        "swp1": PortFacts("swp1", 400_000_000_000, 9216),
        "swp51": PortFacts("swp51", 100_000_000_000, 9216),
        "swp52": PortFacts("swp52", 100_000_000_000, 9216),
    }
    (found,) = lldp.nvue_neighbors("swp51", NVUE_SWP51)
    assert (found.local_port, found.system_name, found.port, found.forwards) == (
        "swp51", "spine01", "swp1", True,
    )  # fmt: skip
    assert found.management_address == "10.10.10.101"


class _Recorded:
    """A connection that answers from recorded outputs and fails on anything else."""

    device = "sw"

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        import json

        self.asked.append(command)
        answer = self.answers[command]
        return answer if isinstance(answer, str) else json.dumps(answer)


@pytest.mark.parametrize(
    ("platform", "answers", "name", "links"),
    [
        ("arista_eos", {"show hostname | json": {"hostname": "leaf1", "fqdn": "leaf1.lab"},
                        "show lldp neighbors detail | json": EOS_DETAIL,
                        "show interfaces | json": EOS_INTERFACES}, "leaf1", 3),
        ("cisco_nxos", {"show hostname | json": {"hostname": "n9k1"},
                        "show lldp neighbors detail | json":
                            {"TABLE_nbor_detail": {"ROW_nbor_detail": NXOS_DETAIL_ROWS}},
                        "show interface | json": NXOS_INTERFACES}, "n9k1", 2),
        ("sonic", {"hostname": "sonic-leaf1\n", "docker exec lldp lldpctl -f json": LLDPCTL_MANY,
                   "sonic-cfggen -d --var-json PORT": SONIC_PORT}, "sonic-leaf1", 2),
        ("cumulus_nvue", {"hostname": "cl-leaf1", "nv show interface -o json": NVUE_INTERFACES,
                          "nv show interface swp1 lldp neighbor -o json": {},
                          "nv show interface swp51 lldp neighbor -o json": NVUE_SWP51},
         "cl-leaf1", 1),
    ],
)  # fmt: skip
def test_readers_use_their_platform_commands(
    platform: str, answers: dict[str, Any], name: str, links: int
) -> None:
    conn = _Recorded(answers)
    found = lldp.read(conn, platform)
    assert (found.name, found.platform, len(found.neighbors)) == (name, platform, links)
    assert sorted(conn.asked) == sorted(answers)


def test_reader_names_device_and_command_when_output_is_not_json() -> None:
    conn = _Recorded({"show hostname | json": "% Invalid input", "show lldp neighbors "
                      "detail | json": "% Invalid input"})  # fmt: skip
    with pytest.raises(lldp.DiscoveryError, match=r"sw: 'show hostname \| json' Expected: JSON"):
        lldp.read(conn, "arista_eos")
    with pytest.raises(lldp.DiscoveryError, match="Expected: a platform of"):
        lldp.read(conn, "junos")


@pytest.mark.parametrize(
    ("given", "expected"),
    [("Eth1/1", "Ethernet1/1"), ("Et3", "Ethernet3"), ('"Ethernet1"', "Ethernet1"),
     ("swp1", "swp1"), ("Ethernet1/1", "Ethernet1/1"), ("eth0", "eth0")],
)  # fmt: skip
def test_long_port_names(given: str, expected: str) -> None:
    assert lldp.long_port_name(given) == expected


# ----------------------------------------------------------------------------- skeleton

G400 = 400_000_000_000


def _leaf_spine(spines: int, leaves: int, hosts: int, mtu: int = 9100) -> list[Discovered]:
    """What the switches of a leaf-spine would report: leaf L port S -> spine S port L,
    leaf L port spines+H -> host hL_H eth0."""
    found = []
    for s in range(1, spines + 1):
        found.append(Discovered(f"spine{s}", "arista_eos", [
            Neighbor(f"Ethernet{leaf}", f"leaf{leaf}", f"Ethernet{s}", forwards=True)
            for leaf in range(1, leaves + 1)
        ], {f"Ethernet{leaf}": PortFacts(f"Ethernet{leaf}", G400, mtu)
            for leaf in range(1, leaves + 1)}))  # fmt: skip
    for leaf in range(1, leaves + 1):
        neighbors = [Neighbor(f"Ethernet{s}", f"spine{s}", f"Ethernet{leaf}", forwards=True)
                     for s in range(1, spines + 1)]  # fmt: skip
        neighbors += [
            Neighbor(f"Ethernet{spines + h}", f"h{leaf}_{h}", "eth0", forwards=False)
            for h in range(1, hosts + 1)
        ]
        ports = {n.local_port: PortFacts(n.local_port, G400, mtu) for n in neighbors}
        found.append(Discovered(f"leaf{leaf}", "arista_eos", neighbors, ports))
    return found


def _links(document: dict[str, Any]) -> set[frozenset[str]]:
    return {
        frozenset({f"{d['name']}:{p['name']}", p["peer"]})
        for d in document["devices"]
        for p in d.get("ports", [])
    }


@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 4))
def test_skeleton_declares_every_link_once_with_roles(spines: int, leaves: int, hosts: int) -> None:
    skeleton = build_skeleton(_leaf_spine(spines, leaves, hosts), name="pod")
    document = skeleton.document
    ports = [p for d in document["devices"] for p in d.get("ports", [])]
    assert len(ports) == leaves * (spines + hosts)  # each link once
    assert len(_links(document)) == len(ports)
    roles = {d["name"]: d["role"] for d in document["devices"]}
    for leaf in range(1, leaves + 1):
        assert roles[f"leaf{leaf}"] == ("leaf" if hosts else "spine")
    assert sum(r == "host" for r in roles.values()) == leaves * hosts
    assert document["defaults"]["ports"] == {"speed": "400G", "mtu": 9100}
    assert "cable_m" not in str(document)  # never guessed


def test_skeleton_writes_both_ends_when_they_disagree_and_warns_on_one_sided_links() -> None:
    found = _leaf_spine(1, 2, 1)
    spine = found[0]
    spine.ports["Ethernet2"] = PortFacts("Ethernet2", G400, 1500)  # leaf2's uplink: MTU differs
    spine.neighbors[0] = Neighbor("Ethernet1", "leaf9", "Ethernet1", forwards=True)
    spine.neighbors.append(Neighbor("Ethernet2", "nic-agent", "p0", forwards=False))
    skeleton = build_skeleton(found, name="pod", cable_m=3)
    spine_ports = next(d for d in skeleton.document["devices"] if d["name"] == "spine1")["ports"]
    assert spine_ports == [{"name": "Ethernet2", "peer": "leaf2:Ethernet1", "mtu": 1500}]
    assert skeleton.document["defaults"]["ports"]["cable_m"] == 3
    assert any("leaf9" in w and "not discovered" in w for w in skeleton.warnings)
    assert any("LLDP tables disagree" in w for w in skeleton.warnings)
    assert any("Ethernet2: more than one LLDP neighbour" in w for w in skeleton.warnings)
    assert "nic-agent" not in str(skeleton.document)


def test_skeleton_renames_and_renders_yaml_with_the_cable_note() -> None:
    found = renamed(_leaf_spine(1, 1, 1), {"leaf1": "rack1-leaf"})
    skeleton = build_skeleton(found, name="pod", login={"username": "admin"})
    text = render(skeleton, "yaml", None)
    assert text.startswith("# Fabric file skeleton")
    assert "cable_m is not set" in text
    document = yaml.safe_load(text)
    assert {"rack1-leaf:Ethernet1", "spine1:Ethernet1"} in [set(x) for x in _links(document)]
    assert document["defaults"]["username"] == "admin"


# ----------------------------------------------------------------------------- lab switch


def test_lab_lldp_answers_read_back_by_the_agent_parser() -> None:
    links = [
        ("Ethernet1", lab_lldp.PortLink(9100, lab_lldp.LldpPeer(
            "spine1", "Ethernet3", "02:00:00:00:01:03", "02:00:00:00:01:01", "switch"))),
        ("Ethernet2", lab_lldp.PortLink(9100, lab_lldp.LldpPeer(
            "h1", "eth1", "02:00:00:00:02:01", "02:00:00:00:02:01", "host", "198.18.1.2"))),
        ("Ethernet3", None),
    ]  # fmt: skip
    found = lldp.eos_neighbors(eos_lldp.lldp_neighbors_detail(links))
    assert [(n.local_port, n.system_name, n.port, n.forwards) for n in found] == [
        ("Ethernet1", "spine1", "Ethernet3", True),
        ("Ethernet2", "h1", "eth1", False),
    ]
    summary = eos_lldp.lldp_neighbors(links)["lldpNeighbors"]
    assert summary == [
        {"port": "Ethernet1", "neighborDevice": "spine1", "neighborPort": "Ethernet3", "ttl": 120},
        {"port": "Ethernet2", "neighborDevice": "h1", "neighborPort": "0200.0000.0201", "ttl": 120},
    ]


# ----------------------------------------------------------------------------- command line


@pytest.mark.parametrize(
    ("text", "expected"),
    [("10.0.0.1", (None, "10.0.0.1", 22)), ("admin@leaf1:2222", ("admin", "leaf1", 2222)),
     ("ops@[2001:db8::1]:22", ("ops", "2001:db8::1", 22))],
)  # fmt: skip
def test_parse_target(text: str, expected: tuple[str | None, str, int]) -> None:
    assert parse_target(text) == expected


@given(st.text(min_size=1, max_size=30))
def test_parse_target_accepts_or_names_the_argument(text: str) -> None:
    import click

    try:
        _user, host, port = parse_target(text)
    except click.BadParameter as exc:
        assert exc.param_hint == "'TARGET'"
        assert repr(text) in exc.message
    else:
        assert host and 1 <= port <= 65535


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(discover.discover_command, list(args), env=env)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["leaf1:99999", "--platform", "arista_eos", "--password-env", "PW"], "TARGET"),
        (["a@b@c", "--platform", "arista_eos", "--password-env", "PW"], "TARGET"),
        (["admin@leaf1", "--password-env", "PW"], "--platform"),
        (["admin@leaf1", "--platform", "junos", "--password-env", "PW"], "--platform"),
        (["admin@leaf1", "--platform", "arista_eos"], "--password-env"),
        (["admin@leaf1", "--platform", "arista_eos", "--password-env", "UNSET_VAR_X"],
         "--password-env"),
        (["leaf1", "--platform", "arista_eos", "--password-env", "PW"], "--username"),
        (["missing.yml"], "FABRIC"),
        (["a.yml", "admin@leaf1"], "TARGET"),
        (["admin@leaf1", "--cable-m", "0"], "--cable-m"),
        (["admin@leaf1", "-o", "xml"], "-o"),
        (["admin@leaf1", "--name", "my pod"], "--name"),
        (["bad user@leaf1", "--platform", "arista_eos", "--password-env", "PW"], "TARGET"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_naming_it(args: list[str], named: str) -> None:
    result = _run(*args, env={"PW": "secret"})
    assert result.exit_code == 2, result.output
    assert named in result.output


def test_existing_write_file_is_refused_without_force(tmp_path: Path) -> None:
    target = tmp_path / "fabric.yml"
    target.write_text("keep me\n")
    result = _run("admin@leaf1", "--platform", "arista_eos", "--password-env", "PW",
                  "--write", str(target), env={"PW": "x"})  # fmt: skip
    assert result.exit_code == 2
    assert "--write" in result.output and "exists" in result.output
    assert target.read_text() == "keep me\n"


def test_unreachable_target_exits_2_naming_it() -> None:
    # 127.0.0.1 port 1: nothing listens there; the error names the target as given.
    result = _run("admin@127.0.0.1:1", "--platform", "arista_eos", "--password-env", "PW",
                  env={"PW": "x"})  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "admin@127.0.0.1:1" in result.output and "unreachable" in result.output


def test_help_has_examples() -> None:
    result = _run("--help")
    assert result.exit_code == 0
    assert "Examples:" in result.output and "roce-agent discover" in result.output


def test_lab_switch_cli_answers_lldp_and_interfaces_as_json() -> None:
    import asyncio
    import json

    from lab.mgmt.eos.cli import CliSession
    from lab.mgmt.eos.personality import EosPersonality
    from lab.mgmt.switch import PortInfo, SwitchManager
    from lab.mgmt.testing import FakeClock, FakeDataplane, fake_switch_config

    peer = lab_lldp.LldpPeer("spine1", "Ethernet2", "02:00:00:00:09:02", "02:00:00:00:09:01",
                             "switch")  # fmt: skip
    ports = [
        PortInfo("Ethernet1", 10_000_000, lab_lldp.PortLink(9100, peer)),
        PortInfo("Ethernet2", 10_000_000, None),
    ]

    async def scenario() -> dict[str, str]:
        dataplane = FakeDataplane(fake_switch_config("leaf1", ["eth1", "eth2"]))
        eos = EosPersonality(SwitchManager("leaf1", ports, dataplane, FakeClock()))
        await eos.start()
        cli = CliSession(eos, "admin", "vty1")
        commands = [
            "show lldp neighbors | json",
            "show lldp neighbors detail | json",
            "show interfaces | json",
            "show lldp neighbors",
            "show interfaces status",
        ]
        return {c: await cli.execute(c) for c in commands}  # fmt: skip

    out = asyncio.run(scenario())
    detail = json.loads(out["show lldp neighbors detail | json"])
    assert [(n.local_port, n.system_name, n.port) for n in lldp.eos_neighbors(detail)] == [
        ("Ethernet1", "spine1", "Ethernet2")
    ]
    summary = json.loads(out["show lldp neighbors | json"])["lldpNeighbors"]
    assert summary == [
        {"port": "Ethernet1", "neighborDevice": "spine1", "neighborPort": "Ethernet2", "ttl": 120}
    ]
    facts = lldp.eos_ports(json.loads(out["show interfaces | json"]))
    assert facts["Ethernet1"] == PortFacts("Ethernet1", 10_000_000, 9100)
    assert facts["Ethernet2"].mtu == 1500  # no lab link: the EOS default
    assert "spine1" in out["show lldp neighbors"]
    assert "Ethernet" in out["show interfaces status"] or "Et1" in out["show interfaces status"]


def test_port_names_that_do_not_fit_the_platform_are_reported() -> None:
    # agent.intent.portnames comes with the fabric file's naming rule (IR021).
    pytest.importorskip("agent.intent.portnames")
    wrong = Discovered("leaf1", "arista_eos", [Neighbor("swp1", "spine1", "swp3")], {})
    right = Discovered("leaf2", "cumulus_nvue", [Neighbor("swp1", "spine1", "swp4")], {})
    (problem,) = discover._check_names([wrong, right])
    assert problem.startswith("leaf1 (arista_eos) port 'swp1': Expected: an arista_eos")
    assert problem.endswith("Actual: 'swp1'")

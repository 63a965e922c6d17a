"""``roce-agent nccl``: selection, the three outputs, hosts that agree or differ, exit codes.

The hosts are namespace hosts of a small fabric written here; their facts come from the real
collection path (agent.observe.hostfacts.collect_many with the GID source's own script) run on
this machine over sysfs trees laid out as the kernel's (Documentation/ABI/stable/
sysfs-class-infiniband), one tree per host.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app import nccl
from agent.app.cli import main
from agent.intent.model import Device, FabricIntent
from agent.observe import hostfacts
from agent.observe.hostfacts import CommandResult, HostFacts, collect_many, run_local

LINK_LOCAL = "fe80:0000:0000:0000:5054:00ff:fe12:3401"
ADDRESSES = {"h1": "198.18.99.1", "h2": "198.18.99.3", "h3": "198.18.99.5"}

FABRIC = """\
name: jobs
profile: nvidia-default
devices:
- name: leaf1
  platform: arista_eos
  role: leaf
  host: 192.0.2.1
  username: admin
  credentials: {password_env: NCCL_TEST_PASSWORD}
  ports:
  - {name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9100, peer: "h1:eth1"}
  - {name: Ethernet2, speed: 100G, cable_m: 3, mtu: 9100, peer: "h2:eth1"}
  - {name: Ethernet3, speed: 100G, cable_m: 3, mtu: 9100, peer: "h3:eth1"}
  - {name: Ethernet4, speed: 100G, cable_m: 3, mtu: 9100, peer: "h4:eth1"}
"""
HOST = """\
- name: {name}
  platform: linux_host
  role: host
  netns: ns-{name}
  ports:
  - {{name: eth1, speed: 100G, cable_m: 3, mtu: 9100, {rdma}ipv4: {ipv4}/31,
     peer: "leaf1:Ethernet{n}"}}
"""


def _mapped(ipv4: str) -> str:
    packed = ipaddress.IPv4Address(ipv4).packed.hex()
    return f"0000:0000:0000:0000:0000:ffff:{packed[:4]}:{packed[4:]}"


def _tree(root: Path, slots: dict[int, tuple[str, str]]) -> Path:
    """rxe0 port 1 on eth1: index -> (gid, type); other slots unused (zero GID, no type)."""
    base = root / "class" / "infiniband" / "rxe0" / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    for index in range(4):
        gid, kind = slots.get(index, ("0000:0000:0000:0000:0000:0000:0000:0000", ""))
        (base / "gids" / str(index)).write_text(gid + "\n")
        for attr, value in (("types", kind), ("ndevs", "eth1")):
            path = base / "gid_attrs" / attr / str(index)
            if kind:
                path.write_text(value + "\n")
            else:  # an unused slot's type and netdev read EINVAL: no file here
                path.unlink(missing_ok=True)
    return root


def _rxe(root: Path, host: str, index: int = 1) -> Path:
    """A Soft-RoCE VM's table: link-local at 0, the fabric address at ``index``."""
    slots = {0: (LINK_LOCAL, "RoCE v2"), index: (_mapped(ADDRESSES[host]), "RoCE v2")}
    return _tree(root / host, slots)


@pytest.fixture
def fabric(tmp_path: Path) -> Path:
    text = FABRIC
    for n, name in enumerate(("h1", "h2", "h3", "h4"), 1):
        rdma = "" if name == "h4" else "rdma_device: rxe0, "
        text += HOST.format(name=name, n=n, rdma=rdma, ipv4=ADDRESSES.get(name, "198.18.99.7"))
    path = tmp_path / "fabric.yml"
    path.write_text(text)
    return path


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Each host's sysfs tree (tests change them); the command collects from them."""
    roots = {name: _rxe(tmp_path / "sysfs", name) for name in ("h1", "h2", "h3")}
    roots["h4"] = _tree(tmp_path / "sysfs" / "h4", {})

    def collect(devices: Sequence[Device], intent: FabricIntent) -> dict[str, HostFacts]:
        def shell_for(device: Device) -> hostfacts.HostShell:
            def run(command: str) -> CommandResult:
                env = ["env", f"SYSFS={roots[device.name]}", "sh", "-s"]
                return run_local(env, command)

            return run

        return collect_many(devices, intent, shell_for=shell_for)

    monkeypatch.setattr(nccl, "collect", collect)
    return roots


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["nccl", *args])
    return result.exit_code, result.stdout, result.stderr


EXPORTS = [
    "export NCCL_IB_HCA=rxe0:1",
    "export NCCL_IB_GID_INDEX=1",
    "export NCCL_IB_TC=106",
    "export UCX_NET_DEVICES=rxe0:1",
    "export UCX_IB_GID_INDEX=1",
    "export UCX_IB_TRAFFIC_CLASS=106",
]


def test_one_host_plain_exports(fabric: Path, trees: dict[str, Path]) -> None:
    code, out, err = run(str(fabric), "--host", "h2")
    assert (code, err) == (0, "")
    assert out.splitlines() == EXPORTS


def test_hosts_that_agree_share_one_block(fabric: Path, trees: dict[str, Path]) -> None:
    code, out, err = run(str(fabric))  # default: every host with an rdma_device (not h4)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["# hosts h1, h2, h3: the same environment", *EXPORTS]


def test_hosts_that_differ_are_reported_per_host(fabric: Path, trees: dict[str, Path]) -> None:
    _rxe(trees["h2"].parent, "h2", index=2)  # h2's address landed at another index
    code, out, err = run(str(fabric))
    assert code == 0
    blocks = out.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == ["# host h1", "# host h2", "# host h3"]
    assert "export NCCL_IB_GID_INDEX=2" in blocks[1] and "export NCCL_IB_GID_INDEX=1" in blocks[0]
    assert "NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX" in err and "--host NAME" in err


def test_a_host_without_its_gid_gets_the_intents_variables_and_a_comment(
    fabric: Path, trees: dict[str, Path]
) -> None:
    _tree(trees["h3"], {0: (LINK_LOCAL, "RoCE v2")})  # the address is gone: only link-local
    code, out, err = run(str(fabric))
    assert code == 1
    problem = (
        "host h3: rxe0 port 1 netdev eth1: Expected: a RoCE v2 GID for 198.18.99.5 "
        "Actual: index 0 fe80::5054:ff:fe12:3401 RoCE v2 eth1"
    )
    blocks = out.split("\n\n")
    assert blocks[0].splitlines() == ["# host h1", *EXPORTS]
    assert blocks[2].splitlines() == [
        "# host h3",
        f"# host h3: NCCL_IB_GID_INDEX not set: {problem}",
        f"# host h3: UCX_IB_GID_INDEX not set: {problem}",
        *[e for e in EXPORTS if "GID_INDEX" not in e],
    ]
    assert err.splitlines()[0] == f"error: {problem}"


def test_the_namespace_host_without_rdma_device_says_why(
    fabric: Path, trees: dict[str, Path]
) -> None:
    code, out, err = run(str(fabric), "--host", "h4")
    assert (code, out) == (1, "# host h4: nothing to export (see the errors)\n")
    assert "host h4: Expected: a port with an rdma_device in the fabric Actual: none" in err


@pytest.mark.parametrize(
    ("host", "message"),
    [
        (
            "nope",
            "Invalid value for '--host': Expected: a host name or glob of fabric jobs "
            "Actual: 'nope' matches none (hosts: h1",
        ),
        (
            "leaf*",
            "Invalid value for '--host': Expected: a host name or glob of fabric jobs "
            "Actual: 'leaf*' matches none",
        ),
        ("leaf1", "Invalid value for '--host': leaf1 is a leaf (arista_eos), not a host"),
    ],
)
def test_bad_host_exits_2_naming_the_option(
    fabric: Path, trees: dict[str, Path], host: str, message: str
) -> None:
    code, out, err = run(str(fabric), "--host", host)
    assert code == 2 and out == ""
    assert message in err


def test_a_glob_selects_hosts_in_fabric_order_once(fabric: Path, trees: dict[str, Path]) -> None:
    code, out, _ = run(str(fabric), "-o", "json", "--host", "h[21]", "--host", "h1")
    assert code == 0
    assert [h["host"] for h in json.loads(out)["hosts"]] == ["h1", "h2"]


def test_bad_fabric_exits_2(tmp_path: Path) -> None:
    code, _, err = run(str(tmp_path / "missing.yml"))
    assert code == 2 and "error:" in err and "Traceback" not in err


def test_json_carries_the_evidence(fabric: Path, trees: dict[str, Path]) -> None:
    code, out, _ = run(str(fabric), "--output", "json", "--host", "h1", "--host", "h4")
    assert code == 1
    document = json.loads(out)
    assert (document["fabric"], document["profile"], document["ok"]) == (
        "jobs",
        "nvidia-default",
        False,
    )
    h1, h4 = document["hosts"]
    assert h1["ok"] and h1["variables"]["NCCL_IB_GID_INDEX"] == "1"
    assert h1["ports"] == [
        {
            "port": "eth1", "device": "rxe0", "ib_port": 1, "netdev": "eth1",
            "ipv4": "198.18.99.1", "gid_index": 1, "gid": _mapped("198.18.99.1"),
            "gid_type": "RoCE v2", "gid_netdev": "eth1", "problem": None,
        }
    ]  # fmt: skip
    assert not h4["ok"] and h4["variables"] == {} and h4["problems"]


def test_table_shows_values_origins_and_gids(fabric: Path, trees: dict[str, Path]) -> None:
    code, out, _ = run(str(fabric), "--output", "table", "--host", "h1")
    assert code == 0
    assert "h1: ready" in out
    assert "NCCL_IB_TC" in out and "roce.dscp << 2" in out
    assert "GID index 1 198.18.99.1 RoCE v2 eth1" in out
    assert "note: NCCL_IB_SL not set" in out


def test_the_output_is_a_script_sh_can_source(
    fabric: Path, trees: dict[str, Path], tmp_path: Path
) -> None:
    _, out, _ = run(str(fabric))
    script = tmp_path / "job.env"
    script.write_text(out)
    done = subprocess.run(
        ["sh", "-c", f'. {script} && echo "$NCCL_IB_HCA $NCCL_IB_GID_INDEX $UCX_IB_TRAFFIC_CLASS"'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == "rxe0:1 1 106\n"


def test_an_unreachable_namespace_host(
    fabric: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The only host cannot be read: exit 2 (nothing reachable), and still the variables the
    intent decides, the GID index marked not read (issue #41, finding 4)."""
    monkeypatch.setattr(hostfacts, "NETNS_DIR", tmp_path / "no-netns")
    code, out, err = run(str(fabric), "--host", "h1")
    assert code == 2
    why = f"host h1: network namespace ns-h1 does not exist ({tmp_path}/no-netns/ns-h1)"
    assert out.splitlines() == [
        f"# host h1: NCCL_IB_GID_INDEX not set: not read: {why}",
        f"# host h1: UCX_IB_GID_INDEX not set: not read: {why}",
        *[e for e in EXPORTS if "GID_INDEX" not in e],
    ]
    assert err == f"error: {why}\n"


def test_one_host_unreachable_of_three_exits_1_and_prints_all(
    fabric: Path, trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = nccl.collect

    def collect(devices: Sequence[Device], intent: FabricIntent) -> dict[str, HostFacts]:
        found = real(devices, intent)
        found["h2"] = HostFacts("h2", ports=found["h2"].ports, error="host h2: timed out: …")
        return found

    monkeypatch.setattr(nccl, "collect", collect)
    code, out, err = run(str(fabric), "-o", "json")
    assert code == 1
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert hosts["h1"]["variables"]["NCCL_IB_GID_INDEX"] == "1"
    assert hosts["h2"]["variables"]["NCCL_IB_GID_INDEX"] is None
    assert hosts["h2"]["not_set"] == {
        "NCCL_IB_GID_INDEX": "not read: host h2: timed out: …",
        "UCX_IB_GID_INDEX": "not read: host h2: timed out: …",
    }
    assert hosts["h2"]["variables"]["NCCL_IB_TC"] == "106"
    assert err.splitlines()[0] == "error: host h2: timed out: …"
    assert "the hosts differ in NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX" in err

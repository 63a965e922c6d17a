"""``roce-agent lab up|status|counters|down`` on real namespaces (needs root)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lab.support.labs import (
    LEAFSPINE,
    NODES,
    REPO,
    Lab,
    LabFactory,
    netns_exists,
    ns_run,
    requires_lab,
    run_cli,
    stop_lab,
)
from tests.lab.support.polling import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]

SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
HOSTS = ("h1", "h2", "h3", "h4")


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _root_interfaces() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True)
    return {link["ifname"] for link in json.loads(out.stdout)}


def _root_routes() -> str:
    return subprocess.run(["ip", "route", "show"], capture_output=True, text=True).stdout


# --------------------------------------------------------------------------- shared lab


def test_status_json_has_every_field(leafspine_lab: Lab) -> None:
    status = leafspine_lab.current_status()
    assert status["name"] == leafspine_lab.name
    assert status["phase"] == "up"
    assert status["healthy"] is True
    assert status["state_dir"] == str(leafspine_lab.state_dir)
    assert status["fabric_file"] == str(leafspine_lab.state_dir / "fabric.yml")
    assert status["topology_file"] == str(LEAFSPINE)
    assert status["credentials"] == {"username": "admin", "password": "admin"}
    assert status["password_env"] == "ROCE_LAB_PASSWORD"
    assert list(status["nodes"]) == list(NODES)
    ports = set()
    for name in SWITCHES:
        node = status["nodes"][name]
        assert node["kind"] == "lab-switch"
        assert node["netns"] == leafspine_lab.netns(name)
        assert node["netns_present"] is True
        assert node["mgmt_host"] == "127.0.0.1"
        assert 0 < node["mgmt_port"] < 65536
        ports.add(node["mgmt_port"])
        assert node["mgmt_state"] == "running"
        assert node["alive"] is True
        assert _pid_alive(node["pid"])
        assert node["vswitch"] == "ok"
        assert Path(node["control_socket"]).is_socket()
        for key in ("config_file", "log_file"):
            assert Path(node[key]).is_file()
    assert len(ports) == 4
    for name in HOSTS:
        node = status["nodes"][name]
        assert node["kind"] == "host"
        assert node["netns"] == leafspine_lab.netns(name)
        assert "pid" not in node
    h1_eth1 = status["nodes"]["h1"]["interfaces"][0]
    assert h1_eth1 == {
        "ifname": "eth1",
        "fabric_port": "eth1",
        "mac": "02:00:c6:12:00:09",
        "ipv4": "198.18.0.9/31",
        "peer": "leaf1:eth3",
        "peer_ipv4": "198.18.0.8",
        "speed_bps": 10_000_000,
        "mtu": 9000,
    }
    assert status["nodes"]["h1"]["gateway"] == "198.18.0.8"


def test_status_table_for_people(leafspine_lab: Lab) -> None:
    result = leafspine_lab.cli("status")
    assert result.returncode == 0, result.stderr
    assert f"lab {leafspine_lab.name}" in result.stdout
    assert "healthy" in result.stdout
    assert str(leafspine_lab.state_dir / "fabric.yml") in result.stdout


def test_namespaces_veths_macs_and_addresses(leafspine_lab: Lab) -> None:
    for name, node in leafspine_lab.status["nodes"].items():
        netns = leafspine_lab.netns(name)
        assert netns_exists(netns)
        links = {
            link["ifname"]: link for link in json.loads(ns_run(netns, "ip", "-j", "addr", "show"))
        }
        expected = {i["ifname"] for i in node["interfaces"]}
        assert set(links) == expected | {"lo"}, name
        for iface in node["interfaces"]:
            link = links[iface["ifname"]]
            assert link["address"] == iface["mac"]
            assert link["mtu"] == 9000
            assert "UP" in link["flags"] and link["operstate"] == "UP"
            assert link["link_type"] == "ether"
            kernel_v4 = [a["local"] + "/" + str(a["prefixlen"]) for a in link.get("addr_info", [])
                         if a["family"] == "inet"]  # fmt: skip
            if node["kind"] == "host":
                assert kernel_v4 == [iface["ipv4"]]
            else:
                assert kernel_v4 == [], f"{name}: the switch kernel must own no data-plane IP"
            assert not [a for a in link.get("addr_info", []) if a["family"] == "inet6"]


def test_host_routes_and_static_gateway_arp(leafspine_lab: Lab) -> None:
    netns = leafspine_lab.netns("h3")
    routes = json.loads(ns_run(netns, "ip", "-j", "route", "show"))
    default = next(r for r in routes if r["dst"] == "default")
    assert (default["gateway"], default["dev"]) == ("198.18.0.12", "eth1")
    neigh = json.loads(ns_run(netns, "ip", "-j", "neigh", "show", "198.18.0.12"))
    assert neigh[0]["lladdr"] == "02:00:c6:12:00:0c"
    assert "PERMANENT" in neigh[0]["state"]


def test_switch_kernels_neither_forward_nor_answer(leafspine_lab: Lab) -> None:
    netns = leafspine_lab.netns("leaf1")
    values = ns_run(
        netns, "sysctl", "-n", "net.ipv4.ip_forward", "net.ipv4.conf.all.arp_ignore",
        "net.ipv4.icmp_echo_ignore_all", "net.ipv6.conf.all.disable_ipv6",
    ).split()  # fmt: skip
    assert values == ["0", "8", "1", "1"]
    routes = json.loads(ns_run(netns, "ip", "-j", "route", "show"))
    assert routes == []  # routes live in the vswitch config, not the kernel


def test_offloads_are_off_on_every_veth_end(leafspine_lab: Lab) -> None:
    for name, node in leafspine_lab.status["nodes"].items():
        for iface in node["interfaces"]:
            out = ns_run(leafspine_lab.netns(name), "ethtool", "-k", iface["ifname"])
            features = {
                key.strip(): value.split()[0]
                for key, _, value in (line.partition(":") for line in out.splitlines()[1:])
                if value.strip()
            }
            for feature in (
                "tx-checksumming",
                "tcp-segmentation-offload",
                "generic-segmentation-offload",
                "generic-receive-offload",
            ):
                assert features[feature] == "off", (name, iface["ifname"], feature)


def test_vswitch_configs_follow_the_plan(leafspine_lab: Lab) -> None:
    leaf1 = leafspine_lab.status["nodes"]["leaf1"]
    config = json.loads(Path(leaf1["config_file"]).read_text())
    assert config["name"] == "leaf1"
    assert [p["ifname"] for p in config["ports"]] == ["eth1", "eth2", "eth3", "eth4"]
    route = next(r for r in config["routes"] if r["prefix"] == "198.18.0.12/31")
    assert route["nexthops"] == [
        {"ip": "198.18.0.0", "port": "eth1"},
        {"ip": "198.18.0.4", "port": "eth2"},
    ]


def test_fabric_file_is_usable_by_the_agent(
    leafspine_lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = Path(leafspine_lab.status["fabric_file"])
    doc = yaml.safe_load(path.read_text())
    assert doc["name"] == leafspine_lab.name
    devices = {d["name"]: d for d in doc["devices"]}
    for name in SWITCHES:
        assert devices[name]["port"] == leafspine_lab.status["nodes"][name]["mgmt_port"]
        assert devices[name]["host"] == "127.0.0.1"
    assert devices["h1"]["netns"] == leafspine_lab.netns("h1")
    assert "password:" not in path.read_text()
    loader = pytest.importorskip("agent.intent.loader")
    monkeypatch.setenv("ROCE_AGENT_PROFILES", str(REPO / "playbooks" / "profiles"))
    loader.load_fabric(path)


def test_counters_json_and_table(leafspine_lab: Lab) -> None:
    result = run_cli(
        "counters", "spine1", "--lab", leafspine_lab.name,
        "--state-dir", leafspine_lab.state_dir, "-o", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    counters = json.loads(result.stdout)
    assert set(counters["ports"]) == {"eth1", "eth2"}
    table = run_cli("counters", "leaf1", "--lab", leafspine_lab.name,
                    "--state-dir", leafspine_lab.state_dir)  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "eth4" in table.stdout
    host = run_cli("counters", "h1", "--lab", leafspine_lab.name,
                   "--state-dir", leafspine_lab.state_dir)  # fmt: skip
    assert host.returncode == 2
    assert "h1 is a host" in host.stderr


def test_exec_runs_lines_on_a_switch_cli_and_names_what_is_not_one(leafspine_lab: Lab) -> None:
    where = ["--lab", leafspine_lab.name, "--state-dir", leafspine_lab.state_dir]
    done = run_cli("exec", "spine1", "show hostname", *where)
    assert done.returncode == 0, done.stderr
    assert "spine1" in done.stdout
    host = run_cli("exec", "h1", "show hostname", *where)
    assert host.returncode == 2 and "h1 is a host; exec runs on the lab switches" in host.stderr
    unknown = run_cli("exec", "leaf9", "show hostname", *where)
    assert unknown.returncode == 2 and "has no node 'leaf9'" in unknown.stderr
    assert "Traceback" not in host.stderr + unknown.stderr


def test_up_on_a_running_lab_refuses(leafspine_lab: Lab) -> None:
    result = run_cli(
        "up", LEAFSPINE, "--name", leafspine_lab.name, "--state-dir", leafspine_lab.state_dir
    )
    assert result.returncode == 2
    assert f"lab {leafspine_lab.name} is already up" in result.stderr
    assert "down" in result.stderr
    assert "Traceback" not in result.stderr
    assert leafspine_lab.current_status()["healthy"] is True  # untouched


# --------------------------------------------------------------------------- own labs


def _assert_gone(lab: Lab, pids: list[int], interfaces_before: set[str]) -> None:
    for node in NODES:
        assert not netns_exists(lab.netns(node)), node
    for pid in pids:
        assert wait_until(lambda pid=pid: not _pid_alive(pid)), f"PID {pid} still runs"
    assert not lab.state_dir.exists()
    new_root_ifaces = _root_interfaces() - interfaces_before
    assert not {i for i in new_root_ifaces if i.startswith("eth")}, new_root_ifaces
    assert "198.18." not in _root_routes()


def test_up_down_up_leaves_nothing_behind(lab_factory: LabFactory) -> None:
    before = _root_interfaces()
    lab = lab_factory.start("cy")
    pids = [lab.status["nodes"][s]["pid"] for s in SWITCHES]
    result = lab.cli("down")
    assert result.returncode == 0, result.stderr
    _assert_gone(lab, pids, before)
    again = lab.cli("status")
    assert again.returncode == 2 and "is not up" in again.stderr
    # and it can be built again under the same name
    up = run_cli("up", LEAFSPINE, "--name", lab.name, "--state-dir", lab.state_dir, "-o", "json")
    assert up.returncode == 0, up.stderr
    assert json.loads(up.stdout)["healthy"] is True
    pids = [json.loads(up.stdout)["nodes"][s]["pid"] for s in SWITCHES]
    down = lab.cli("down", "-o", "json")
    assert down.returncode == 0
    report = json.loads(down.stdout)
    assert report["result"] == "removed"
    assert sorted(report["deleted_netns"]) == sorted(lab.netns(n) for n in NODES)
    assert {s["how"] for s in report["stopped"]} <= {"SIGTERM", "SIGKILL"}
    _assert_gone(lab, pids, before)


def test_down_after_the_vswitches_were_killed(lab_factory: LabFactory) -> None:
    before = _root_interfaces()
    lab = lab_factory.start("kl")
    pids = [lab.status["nodes"][s]["pid"] for s in SWITCHES]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not any(_pid_alive(p) for p in pids))
    status = lab.current_status()
    assert status["healthy"] is False
    assert all(status["nodes"][s]["alive"] is False for s in SWITCHES)
    result = lab.cli("down", "-o", "json")
    assert result.returncode == 0, result.stderr
    stopped = json.loads(result.stdout)["stopped"]
    assert {s["how"] for s in stopped if s["node"] in SWITCHES} == {"already-exited"}
    # The management planes were still running and are stopped normally.
    assert {s["how"] for s in stopped if s["node"].endswith(":mgmt")} <= {"SIGTERM", "SIGKILL"}
    _assert_gone(lab, pids, before)


def test_down_after_up_was_killed_midway(tmp_path: Path) -> None:
    """SIGKILL `up` while it builds; `down` must still find and remove everything."""
    before = _root_interfaces()
    name = f"cr{os.getpid()}"
    state_dir = tmp_path / name
    state_file = state_dir / "state.json"
    up = subprocess.Popen(
        [sys.executable, "-m", "lab.cli", "up", str(LEAFSPINE), "--name", name,
         "--state-dir", str(state_dir)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    phase: Any = None
    try:
        # Kill it once a few namespaces exist (the record must already name them).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                state = json.loads(state_file.read_text())
            except (OSError, ValueError):
                state = {}
            if len(state.get("netns", {})) >= 3 or up.poll() is not None:
                phase = state.get("phase")
                break
            time.sleep(0.002)
        up.kill()
        up.wait()
        assert phase == "creating", f"could not catch up mid-way (phase {phase})"
        assert any(netns_exists(f"clab-{name}-{n}") for n in NODES)
        result = run_cli("down", "--lab", name, "--state-dir", state_dir)
        assert result.returncode == 0, result.stderr
        for node in NODES:
            assert not netns_exists(f"clab-{name}-{node}")
        assert not state_dir.exists()
        assert not {i for i in _root_interfaces() - before if i.startswith("eth")}
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        stop_lab(name, state_dir)


def test_up_refuses_a_foreign_namespace_with_the_same_name(tmp_path: Path) -> None:
    name = f"fn{os.getpid()}"
    foreign = f"clab-{name}-h2"
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        result = run_cli("up", LEAFSPINE, "--name", name, "--state-dir", tmp_path / name)
        assert result.returncode == 2
        assert foreign in result.stderr and "already exist" in result.stderr
        assert netns_exists(foreign), "a namespace that is not ours must not be touched"
        for node in NODES:
            if node != "h2":
                assert not netns_exists(f"clab-{name}-{node}")
        assert not (tmp_path / name).exists()
    finally:
        subprocess.run(["ip", "netns", "delete", foreign], capture_output=True)


def test_failed_up_rolls_back(tmp_path: Path) -> None:
    """A vswitch that refuses its config (speed beyond its limit) fails `up`, cleanly."""
    topology = tmp_path / "too-fast.clab.yml"
    topology.write_text(
        LEAFSPINE.read_text().replace("roce.lab/speed: 10M", "roce.lab/speed: 800G")
    )
    name = f"rb{os.getpid()}"
    state_dir = tmp_path / name
    try:
        result = run_cli("up", topology, "--name", name, "--state-dir", state_dir)
        assert result.returncode == 2
        assert "up failed" in result.stderr and "vswitch" in result.stderr
        assert "everything it had created was removed" in result.stderr
        for node in NODES:
            assert not netns_exists(f"clab-{name}-{node}")
        assert not state_dir.exists()
    finally:
        stop_lab(name, state_dir)


def test_lab_commands_explain_what_is_missing(tmp_path: Path) -> None:
    result = run_cli("status", "--lab", "nosuchlab", "--state-dir", tmp_path)
    assert result.returncode == 2
    assert "lab nosuchlab is not up" in result.stderr
    result = run_cli("down", "--lab", "nosuchlab", "--state-dir", tmp_path)
    assert result.returncode == 0
    assert "nothing to remove" in result.stdout


def test_credentials_can_be_overridden_from_the_environment(tmp_path: Path) -> None:
    name = f"cr2{os.getpid()}"
    state_dir = tmp_path / name
    env = dict(os.environ, ROCE_LAB_PASSWORD="s3cret", ROCE_LAB_USERNAME="ops")
    try:
        up = subprocess.run(
            [sys.executable, "-m", "lab.cli", "up", str(LEAFSPINE), "--name", name,
             "--state-dir", str(state_dir), "-o", "json"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        data: dict[str, Any] = json.loads(up.stdout)
        assert data["credentials"] == {"username": "ops", "password": "s3cret"}
        fabric = Path(data["fabric_file"]).read_text()
        assert "s3cret" not in fabric and "username: ops" in fabric
    finally:
        stop_lab(name, state_dir)

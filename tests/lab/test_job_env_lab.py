"""``roce-agent nccl`` on real RDMA hosts (issue #27 item 1): the session's RDMA lab
(``rdma_lab``: h1, h2, h3 qemu VMs with Soft-RoCE rxe0 on eth1, h4 a namespace without an RDMA
device, the lossless profile applied).

What the agent prints is checked against what each VM says when asked independently (its GID
table read over plain SSH with ``grep``, not the agent's script) and against the lab profile.
Read-only: nothing on the hosts changes.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.device import ssh
from agent.device.platforms import platform_for
from agent.device.push import close_quietly, connect
from agent.intent.model import FabricIntent
from agent.observe.hostfacts import collect_host_facts, exec_on
from agent.observe.hostsources import SOURCES, HostSource
from tests.lab.support.labs import Lab, requires_lab
from tests.lab.support.rdma import VM_CONNECT_TIMEOUT_S, vm_ssh
from tests.lab.support.rdma import device as lab_device
from tests.lab.support.rdma import vm_agent as agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
# Every module on the session's RDMA lab runs on one worker: its VMs boot once (conftest.py).
XDIST_GROUP = "rdma_lab"

VMS = ("h1", "h2", "h3")
PORT = "/sys/class/infiniband/rxe0/ports/1"


def vm_gid_index(lab: Lab, node: str, ipv4: str) -> int:
    """The index of ``node``'s RoCE v2 GID for ``ipv4``, read in the VM with grep."""
    # an unused slot's type reads EINVAL, so grep ends with status 2 whatever it printed
    text = vm_ssh(lab, node, f"cd {PORT} && grep -H . gids/* gid_attrs/types/* 2>/dev/null; :")
    gids: dict[int, str] = {}
    types: dict[int, str] = {}
    for line in text.splitlines():
        path, _, value = line.partition(":")
        kind, _, index = path.rpartition("/")
        (gids if kind == "gids" else types)[int(index)] = value.strip()
    packed = ipaddress.IPv4Address(ipv4).packed.hex()
    mapped = f"0000:0000:0000:0000:0000:ffff:{packed[:4]}:{packed[4:]}"
    (index,) = [i for i, gid in gids.items() if gid == mapped and types.get(i) == "RoCE v2"]
    return index


def expected_tc(intent: FabricIntent) -> int:
    profile = intent.profile
    ecn = profile.ecn.enabled and profile.roce.priority in profile.ecn.queues
    return profile.roce.dscp << 2 | (0b10 if ecn else 0)


def test_the_rxe_hosts_get_their_real_environment(rdma_lab: Lab) -> None:
    intent = rdma_lab.intent()
    fabric = rdma_lab.status["fabric_file"]
    done = agent("nccl", fabric, "--output", "json", timeout=180)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [h["host"] for h in document["hosts"]] == list(VMS)  # h4: no rdma_device, not listed
    tc = str(expected_tc(intent))
    for host in document["hosts"]:
        device = intent.device(host["host"])
        assert device is not None and device.ports[0].ipv4 is not None
        ipv4 = str(device.ports[0].ipv4.ip)
        index = vm_gid_index(rdma_lab, host["host"], ipv4)
        variables = host["variables"]
        assert variables["NCCL_IB_HCA"] == "rxe0:1"
        assert variables["NCCL_IB_GID_INDEX"] == str(index) == variables["UCX_IB_GID_INDEX"]
        assert variables["NCCL_IB_TC"] == tc == variables["UCX_IB_TRAFFIC_CLASS"]
        (port,) = host["ports"]
        assert (port["ipv4"], port["gid_type"], port["gid_netdev"]) == (ipv4, "RoCE v2", "eth1")


def test_env_output_sources_in_a_shell(rdma_lab: Lab, tmp_path: Path) -> None:
    done = agent("nccl", rdma_lab.status["fabric_file"], timeout=180)
    assert done.returncode == 0, done.stderr
    script = tmp_path / "job.env"
    script.write_text(done.stdout)
    shown = subprocess.run(
        ["sh", "-c", f'. {script} && echo "$NCCL_IB_HCA|$NCCL_IB_TC"'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert shown.stdout == f"rxe0:1|{expected_tc(rdma_lab.intent())}\n"
    if done.stdout.startswith("# hosts "):  # one block: the VMs agree
        assert done.stdout.splitlines()[0] == "# hosts h1, h2, h3: the same environment"
    else:  # per-host blocks, and stderr says why
        assert "differ in" in done.stderr


def test_the_namespace_host_is_named_with_the_reason(rdma_lab: Lab) -> None:
    done = agent("nccl", rdma_lab.status["fabric_file"], "--host", "h4", timeout=120)
    assert done.returncode == 1
    assert done.stdout == "# host h4: nothing to export (see the errors)\n"
    assert (
        "error: host h4: Expected: a port with an rdma_device in the fabric Actual: none"
        in done.stderr
    )


@pytest.fixture
def vm_login_budget() -> Iterator[None]:
    """This process's own SSH connections get the VMs' login budget (tests.lab.support.rdma)."""
    ssh.configure(connect_timeout_s=VM_CONNECT_TIMEOUT_S)
    try:
        yield
    finally:
        ssh.configure(connect_timeout_s=ssh.CONNECT_TIMEOUT_S)


@pytest.mark.usefixtures("vm_login_budget")
def test_exit_status_and_output_over_real_ssh(rdma_lab: Lab) -> None:
    """The exec channel's exit status is the command's, stdout and stderr both kept; the
    GID source runs as collect_host_facts runs it."""
    intent = rdma_lab.intent()
    device = intent.device("h1")
    assert device is not None
    failing = HostSource("probe", "echo out; echo err >&2; exit 3")
    facts = collect_host_facts(device, intent, sources=(*SOURCES, failing))
    assert facts.error is None
    gids = facts.result("gids")
    assert gids is not None and gids.ok and "rxe0\t1\t" in gids.output
    probe = facts.result("probe")
    assert probe is not None and probe.exit_status == 3
    assert sorted(probe.output.split()) == ["err", "out"]
    conn = connect(device, platform_for("linux_host"))
    try:
        transport = conn.netmiko.remote_conn_pre.get_transport()
        has_sudo = exec_on(transport, "sh -s", "command -v sudo").ok
        as_root = exec_on(transport, "sudo -n sh -s", "id -u", shown="sudo -n ")
    finally:
        close_quietly(conn)
    if has_sudo:
        assert (as_root.exit_status, as_root.output.strip()) == (0, "0")
    else:  # the lab VM has no sudo: the failure names the command and why
        assert as_root.exit_status == 127
        assert as_root.failure().startswith("`sudo -n id -u`: exit 127 (")


EXTRA = "198.18.77.2/32"  # outside the lab's address plan (containerlab/README.md)


@contextmanager
def readdressed(lab: Lab, node: str, *, keep_fabric_address: bool) -> Iterator[str]:
    """``node``'s fabric address taken off eth1 and ``EXTRA`` put on first, so it takes the
    address's GID slot; the fabric address added back after it (a later slot) unless not
    kept. Restored afterwards, checked: the address back at its slot, the route as before."""
    address = lab_device(lab, node)["ports"][0]["ipv4"]
    ip = address.split("/")[0]
    route = vm_ssh(lab, node, "ip route show default").strip()
    before = vm_gid_index(lab, node, ip)
    again = f" && ip addr add {address} dev eth1" if keep_fabric_address else ""
    vm_ssh(lab, node, f"ip addr del {address} dev eth1 && ip addr add {EXTRA} dev eth1{again}")
    try:
        yield ip
    finally:
        vm_ssh(
            lab, node,
            f"ip addr del {EXTRA} dev eth1; ip addr del {address} dev eth1 2>/dev/null; "
            f"ip addr add {address} dev eth1 && ip route replace {route}",
        )  # fmt: skip
        assert vm_gid_index(lab, node, ip) == before
        assert vm_ssh(lab, node, "ip route show default").strip() == route


def test_a_host_whose_gid_moved_is_reported_on_its_own(rdma_lab: Lab) -> None:
    """h2's fabric address at another GID slot than h1's and h3's: one block per host, h2's
    with the index the VM has, never one merged block."""
    with readdressed(rdma_lab, "h2", keep_fabric_address=True) as ip:
        moved = vm_gid_index(rdma_lab, "h2", ip)
        done = agent("nccl", rdma_lab.status["fabric_file"], timeout=180)
    assert done.returncode == 0, done.stderr
    blocks = {b.splitlines()[0]: b for b in done.stdout.split("\n\n")}
    assert list(blocks) == ["# host h1", "# host h2", "# host h3"]
    assert f"export NCCL_IB_GID_INDEX={moved}\n" in blocks["# host h2"]
    assert "note: the hosts differ in NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX" in done.stderr


def test_a_host_without_its_ipv4_gid_is_refused_the_others_printed(rdma_lab: Lab) -> None:
    with readdressed(rdma_lab, "h2", keep_fabric_address=False) as ip:
        done = agent("nccl", rdma_lab.status["fabric_file"], timeout=180)
    assert done.returncode == 1
    # every host printed; h2 with what the intent decides and why its index is not set
    blocks = {b.splitlines()[0]: b for b in done.stdout.split("\n\n")}
    assert set(blocks) == {"# host h1", "# host h2", "# host h3"}
    assert "export NCCL_IB_GID_INDEX=1" in blocks["# host h1"]
    assert "export NCCL_IB_GID_INDEX" not in blocks["# host h2"]
    assert "# host h2: NCCL_IB_GID_INDEX not set: host h2: rxe0 port 1" in blocks["# host h2"]
    assert "export NCCL_IB_HCA=rxe0:1" in blocks["# host h2"]
    error, note = done.stderr.strip().splitlines()
    assert note.startswith("note: the hosts differ in NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX")
    assert error.startswith(
        f"error: host h2: rxe0 port 1 netdev eth1: Expected: a RoCE v2 GID for {ip} Actual: "
    )
    assert "198.18.77.2 RoCE v2 eth1" in error  # the GID it has instead, named

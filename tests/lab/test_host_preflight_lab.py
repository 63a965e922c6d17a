"""Host pre-flight checks (RC202-RC207, `roce-agent validate --hosts-only`) on the session's
RDMA lab (``rdma_lab``: h1-h3 qemu VMs with rxe0 on eth1 behind virtio NICs, h4 a namespace).

What the real hosts say: the GID check finds the index rdma-core's own ``ibv_devinfo -v``
lists for the VM's address; the MTU check passes at the lab's 9000 and fails, naming host,
netdev, expected and actual, when one VM's netdev is set below the RoCE MTU (and put back);
trust and PFC are unverified with the real reason (no mlnx_qos, dcb on virtio not supported);
ACS is skipped (no nvidia-smi, no GPU); RoCE-enabled passes for rxe by construction.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.lab.support.labs import Lab, requires_lab
from tests.lab.support.rdma import device, vm_ssh
from tests.lab.support.rdma import vm_agent as agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
# Every module on the session's RDMA lab runs on one worker: its VMs boot once (conftest.py).
XDIST_GROUP = "rdma_lab"

VMS = ("h1", "h2", "h3")
HOST_CHECKS = ("RC202", "RC203", "RC204", "RC205", "RC206", "RC207")
DCB = {"RC203": "dcb -N app show dev eth1", "RC204": "dcb pfc show dev eth1"}


def hosts_only(lab: Lab) -> tuple[int, dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    done = agent("validate", lab.status["fabric_file"], "--hosts-only", "--output", "json")
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    return done.returncode, {(c["check"], c["device"]): c for c in report["checks"]}, report


def roce_v2_index(lab: Lab, host: str) -> int:
    """The GID index of the VM's fabric address as RoCE v2, as rdma-core's ``ibv_devinfo -v``
    lists it (``GID[  N]:  ::ffff:A.B.C.D, RoCE v2``): not the agent's code."""
    address = device(lab, host)["ports"][0]["ipv4"].partition("/")[0]
    listing = vm_ssh(lab, host, "ibv_devinfo -v -d rxe0 -i 1")
    pattern = rf"GID\[\s*(\d+)\]:\s+::ffff:{re.escape(address)}, RoCE v2"
    match = re.search(pattern, listing)
    assert match, listing[-2000:]
    return int(match.group(1))


@pytest.fixture(scope="module")
def preflight(rdma_lab: Lab) -> tuple[int, dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    return hosts_only(rdma_lab)


def test_hosts_only_reads_no_switch_and_runs_only_the_host_checks(preflight: Any) -> None:
    code, checks, report = preflight
    assert report["playbook"] == "host-preflight"
    assert {check for check, _ in checks} == set(HOST_CHECKS)
    assert report["steps"][0]["detail"] == {"unreachable": {}}
    # trust and PFC cannot be read on virtio NICs: unverified fails the run (exit 1)
    assert code == 1
    unverified = sorted(key for key, c in checks.items() if c["status"] == "unverified")
    assert unverified == sorted((check, host) for check in DCB for host in VMS), unverified
    assert report["steps"][1]["detail"]["unverified"] == len(unverified)


def test_the_gid_check_finds_the_real_index(rdma_lab: Lab, preflight: Any) -> None:
    _, checks, _ = preflight
    for host in VMS:
        result = checks[("RC202", host)]
        assert result["status"] == "success", result["messages"]
        index = roce_v2_index(rdma_lab, host)
        assert f"RoCE v2 GID index {index} " in result["messages"][0], (index, result)


def test_mtu_and_roce_pass_on_the_rxe_vms(preflight: Any) -> None:
    _, checks, _ = preflight
    for host in VMS:
        mtu, roce = checks[("RC207", host)], checks[("RC206", host)]
        assert mtu["status"] == "success", mtu["messages"]
        assert any("active_mtu 4096" in m for m in mtu["messages"]), mtu
        assert roce["status"] == "success", roce["messages"]
        assert "rxe (Soft-RoCE) on eth1: RoCE by construction" in roce["messages"][0]


def test_trust_and_pfc_are_unverified_with_the_real_reason(preflight: Any) -> None:
    _, checks, _ = preflight
    for host in VMS:
        for check, dcb in (
            ("RC203", "dcb -N app show dev eth1"),
            ("RC204", "dcb pfc show dev eth1"),
        ):
            result = checks[(check, host)]
            assert result["status"] == "unverified", result["messages"]
            text = " ".join(result["messages"])
            assert "`mlnx_qos -i eth1`: exit 127" in text, text
            assert f"`{dcb}" in text and "Operation not supported" in text, text


def test_acs_is_skipped_without_a_gpu(preflight: Any) -> None:
    _, checks, _ = preflight
    for host in VMS:
        result = checks[("RC205", host)]
        assert result["status"] == "skipped", result["messages"]
        assert "no GPU: nvidia-smi is not installed" in result["messages"][0]


def test_the_namespace_host_is_skipped(preflight: Any) -> None:
    _, checks, _ = preflight
    for check in HOST_CHECKS:
        result = checks[(check, "h4")]
        assert result["status"] == "skipped"
        assert "no port declares an rdma_device" in result["messages"][0]


def test_a_netdev_mtu_below_the_roce_mtu_fails(rdma_lab: Lab, preflight: Any) -> None:
    before = vm_ssh(rdma_lab, "h2", "cat /sys/class/net/eth1/mtu").strip()
    assert before == "9000"
    vm_ssh(rdma_lab, "h2", "ip link set dev eth1 mtu 1500")
    try:
        _, checks, _ = hosts_only(rdma_lab)
    finally:
        vm_ssh(rdma_lab, "h2", f"ip link set dev eth1 mtu {before}")
    assert vm_ssh(rdma_lab, "h2", "cat /sys/class/net/eth1/mtu").strip() == before
    result = checks[("RC207", "h2")]
    assert result["status"] == "failure", result["messages"]
    assert result["messages"][0] == (
        "h2 eth1 (rxe0/1) netdev MTU: Expected: >= 4192 (RoCE MTU 4096 from the intent's MTU "
        "9000, + 96 B of RoCE headers) Actual: 1500 (RoCE MTU 1024)"
    )
    # rxe follows its netdev (rxe_set_mtu): ibv_devinfo says the same
    assert (
        "h2 eth1 (rxe0/1) ibv_devinfo active_mtu: Expected: >= 4096 Actual: 1024"
        in (result["messages"])
    )
    assert checks[("RC207", "h1")]["status"] == "success"

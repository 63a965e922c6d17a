"""``roce-agent probe nccl`` and the playbook's nccl step on the session's RDMA lab
(containerlab/roce-rdma.clab.yml: h1-h3 qemu VMs with Soft-RoCE, h4 a namespace).

The VMs have no GPU and no NVIDIA driver: the acceptance must say so, per host, from what the
hosts answer over real SSH (``nvidia-smi -L`` exits 127: not found), and skip; nothing runs
nccl-tests, nothing pretends to. h4 declares no rdma_device and is not asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.lab.support.labs import Lab, requires_lab
from tests.lab.support.rdma import fabric, vm_ssh
from tests.lab.support.rdma import vm_agent as agent

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, requires_lab]
# Every module on the session's RDMA lab runs on one worker: its VMs boot once (conftest.py).
XDIST_GROUP = "rdma_lab"

VMS = ("h1", "h2", "h3")
NO_DRIVER = "nvidia-smi not found (no NVIDIA driver installed)"


def test_the_vms_really_have_no_gpu(rdma_lab: Lab) -> None:
    """The premise, read without the agent: no nvidia-smi, no NVIDIA PCI function (vendor
    0x10de, the PCI ID of NVIDIA Corporation in pciutils' pci.ids)."""
    for node in VMS:
        answer = vm_ssh(rdma_lab, node, "command -v nvidia-smi || echo absent")
        assert answer.strip() == "absent"
        vendors = vm_ssh(rdma_lab, node, "cat /sys/bus/pci/devices/*/vendor").split()
        assert "0x10de" not in vendors


def test_probe_nccl_skips_with_each_hosts_reason(rdma_lab: Lab) -> None:
    rdma_hosts = sorted(
        d["name"] for d in fabric(rdma_lab)["devices"]
        if d.get("role") == "host" and any(p.get("rdma_device") for p in d.get("ports", []))
    )  # fmt: skip
    assert rdma_hosts == list(VMS)  # h4 has no rdma_device
    done = agent("probe", "nccl", rdma_lab.status["fabric_file"], "--output", "json",
                 timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["skipped"] is True and report["verdict"] is None and report["runs"] == []
    assert report["hosts"] == {node: {"gpus": [], "reason": NO_DRIVER} for node in VMS}
    assert report["reason"] == "no host has a GPU (" + "; ".join(
        f"{node}: {NO_DRIVER}" for node in VMS
    ) + ")"  # fmt: skip

    table = agent("probe", "nccl", rdma_lab.status["fabric_file"], "--host", "h1",
                  "--host", "h3", timeout=300)  # fmt: skip
    assert table.returncode == 2
    assert f"nccl acceptance skipped: no host has a GPU (h1: {NO_DRIVER}; h3: {NO_DRIVER})" in (
        table.stderr
    )


def test_the_playbook_step_is_skipped(rdma_lab: Lab, tmp_path: Path) -> None:
    playbook = tmp_path / "nccl-only.yml"
    playbook.write_text("name: nccl-only\nsteps:\n  - name: nccl-tests\n    nccl: {}\n")
    done = agent("run", str(playbook), rdma_lab.status["fabric_file"], "--output", "json",
                 timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (step,) = json.loads(done.stdout)["steps"]
    assert step["status"] == "skipped"
    assert step["detail"]["reason"].startswith(f"no host has a GPU (h1: {NO_DRIVER}")

"""The lab with real RDMA hosts (containerlab/roce-rdma.clab.yml): three VMs running Soft-RoCE
(h1, h2 on leaf1; h3 on leaf2) and one namespace host (h4 on leaf2). Helpers to reach a VM
over SSH the way the agent does (the lab's key, the pinned host key) and to read its rxe
counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.lab.support.labs import REPO, Lab, run_agent

RDMA_LAB = REPO / "containerlab" / "roce-rdma.clab.yml"
RXE_COUNTERS = "/sys/class/infiniband/rxe0/ports/1/hw_counters"
# A login to a VM without KVM is emulated instruction by instruction (key exchange, the host
# key's signature): beside the other test worker's labs on a 2-core CI machine it ran past the
# CLI's default 10 s budget (clean-clone runs 19 and 20), so the agent gets a slow device's.
VM_CONNECT_TIMEOUT_S = 60
VM_CONNECT_TIMEOUT = f"{VM_CONNECT_TIMEOUT_S}s"


def vm_agent(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m agent ARGS`` (:func:`run_agent`) with the VMs' login budget."""
    return run_agent("--connect-timeout", VM_CONNECT_TIMEOUT, *args, timeout=timeout)


def fabric(lab: Lab) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(Path(lab.status["fabric_file"]).read_text())
    return document


def device(lab: Lab, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(d for d in fabric(lab)["devices"] if d["name"] == name)
    return found


def vm_ssh(lab: Lab, node: str, command: str, timeout: float = 60) -> str:
    """Run ``command`` in VM host ``node`` over SSH (its pinned host key, the lab's key)."""
    dev = device(lab, node)
    known = lab.state_dir / f"{node}.known_hosts"
    known.write_text(f"[{dev['host']}]:{dev['port']} {dev['host_key']}\n")
    done = subprocess.run(
        [
            "ssh", "-q", "-i", dev["credentials"]["ssh_key"], "-p", str(dev["port"]),
            "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", f"{dev['username']}@{dev['host']}", command,
        ],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, f"{node}: {command}: {done.stderr}"
    return done.stdout


def rxe_counters(lab: Lab, node: str) -> dict[str, int]:
    """Every rxe hw_counter of ``node``'s rxe0, read in the VM."""
    text = vm_ssh(lab, node, f"cd {RXE_COUNTERS} && grep -H . *")
    counters = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        counters[name] = int(value)
    return counters


def ns_python(lab: Lab, node: str, code: str, timeout: float = 60) -> Any:
    """Run Python ``code`` in namespace host ``node``; it prints one JSON line, returned."""
    done = subprocess.run(
        ["ip", "netns", "exec", lab.netns(node), sys.executable, "-c", code],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, f"{node}: {done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])

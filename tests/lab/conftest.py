"""Fixtures of the netns runtime tests (``roce-agent lab``): real labs, really torn down.

Every lab here gets a unique name (``<tag><pid>``, so namespaces are ``clab-<tag><pid>-<node>``)
and a private state directory; teardown runs ``lab down`` and, only if that failed, deletes
the namespaces this lab's plan names — exactly those, by name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LEAFSPINE = REPO / "containerlab" / "roce-leafspine.clab.yml"
NODES = ("spine1", "spine2", "leaf1", "leaf2", "h1", "h2", "h3", "h4")
INCAST = REPO / "containerlab" / "roce-incast.clab.yml"  # one leaf, five hosts
INCAST_NODES = ("leaf1", "h1", "h2", "h3", "h4", "h5")
IP_RECVTTL = 12  # linux/in.h; Python's socket module has no name for it
IP_TTL = 2


def lab_unavailable_reason() -> str | None:
    """Why lab tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "netns lab tests need root (network namespaces, veth pairs)"
    for tool in ("ip", "ethtool", "sysctl"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (apt-get install iproute2 ethtool procps)"
    probe = f"clabprobe{os.getpid()}"
    added = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if added.returncode != 0:
        return f"network namespaces unavailable: {added.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


LAB_UNAVAILABLE = lab_unavailable_reason()
requires_lab = pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=LAB_UNAVAILABLE or "")


def _run_module(
    module: str, args: tuple[str | Path, ...], timeout: float, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m lab.cli ARGS`` as a user would run it (own process, real exit code)."""
    env = {k: v for k, v in os.environ.items() if k != "ROCE_LAB_STATE_DIR"}
    return _run_module("lab.cli", args, timeout, env)


def run_agent(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m agent ARGS`` as a user runs it (own process, real exit code), with the lab
    switches' password in its environment."""
    return _run_module("agent", args, timeout, {**os.environ, "ROCE_LAB_PASSWORD": "admin"})


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def ns_run(netns: str, *argv: str, timeout: float = 30) -> str:
    """Run a command inside a namespace; return stdout (raises on failure)."""
    return subprocess.run(
        ["ip", "netns", "exec", netns, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout


@dataclass
class Lab:
    """A lab started by a test: name, state directory and the status JSON of ``up``."""

    name: str
    state_dir: Path
    status: dict[str, Any]

    def netns(self, node: str) -> str:
        return f"clab-{self.name}-{node}"

    def cli(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--lab", self.name, "--state-dir", self.state_dir)

    def current_status(self) -> dict[str, Any]:
        result = self.cli("status", "-o", "json")
        assert result.returncode == 0, result.stderr
        status: dict[str, Any] = json.loads(result.stdout)
        return status


def start_lab(name: str, state_dir: Path, topology: Path = LEAFSPINE) -> Lab:
    result = run_cli("up", topology, "--name", name, "--state-dir", state_dir, "-o", "json")
    assert result.returncode == 0, f"lab up failed:\n{result.stdout}\n{result.stderr}"
    return Lab(name, state_dir, json.loads(result.stdout))


def stop_lab(name: str, state_dir: Path, nodes: tuple[str, ...] = NODES) -> None:
    """``lab down``; if that leaves anything, delete this lab's namespaces by exact name."""
    result = run_cli("down", "--lab", name, "--state-dir", state_dir)
    leftovers = [f"clab-{name}-{node}" for node in nodes if netns_exists(f"clab-{name}-{node}")]
    for netns in leftovers:
        subprocess.run(["ip", "netns", "delete", netns], capture_output=True)
    assert result.returncode == 0, f"lab down failed:\n{result.stdout}\n{result.stderr}"
    assert not leftovers, f"lab down left namespaces behind: {leftovers}"


@contextmanager
def running_lab(name: str, state_dir: Path, password: str = "admin") -> Iterator[Lab]:
    """A leaf-spine lab whose switches take ``password``; the agent in this process reads it
    from ``$ROCE_LAB_PASSWORD`` (restored afterwards). Torn down whatever happens."""
    previous = os.environ.get("ROCE_LAB_PASSWORD")
    os.environ["ROCE_LAB_PASSWORD"] = password  # the lab takes it at `up`; the agent reads it
    try:
        started = start_lab(name, state_dir)
        try:
            yield started
        finally:
            stop_lab(name, state_dir)
    finally:
        if previous is None:
            os.environ.pop("ROCE_LAB_PASSWORD", None)
        else:
            os.environ["ROCE_LAB_PASSWORD"] = previous


@pytest.fixture
def lab_factory(tmp_path: Path) -> Iterator[Any]:
    """Start labs inside a test (``lab_factory("cyc")``); each is torn down afterwards."""
    started: list[tuple[str, Path]] = []

    def factory(tag: str) -> Lab:
        name = f"{tag}{os.getpid()}"
        state_dir = tmp_path / name
        started.append((name, state_dir))
        return start_lab(name, state_dir)

    yield factory
    for name, state_dir in started:
        stop_lab(name, state_dir)


@pytest.fixture(scope="session")
def leafspine_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One lab from containerlab/roce-leafspine.clab.yml shared by the read-only tests."""
    if LAB_UNAVAILABLE:
        pytest.skip(LAB_UNAVAILABLE)
    name = f"ls{os.getpid()}"
    state_dir = tmp_path_factory.mktemp("lab") / name
    lab = start_lab(name, state_dir)
    try:
        yield lab
    finally:
        stop_lab(name, state_dir)


# Receiver: prints "ready", then one JSON line per datagram with the TTL it arrived with.
RECEIVER = f"""
import json, socket, sys, time
bind_ip, port = sys.argv[1], int(sys.argv[2])
count, timeout = int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, {IP_RECVTTL}, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((bind_ip, port))
print("ready", flush=True)
deadline = time.monotonic() + timeout
got = 0
while got < count and time.monotonic() < deadline:
    s.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        data, anc, _, src = s.recvmsg(65535, 64)
    except socket.timeout:
        break
    ttl = next((int.from_bytes(v, "little") for lv, t, v in anc if t == {IP_TTL}), None)
    line = {{"src": src[0], "sport": src[1], "ttl": ttl, "data": data.decode()}}
    print(json.dumps(line), flush=True)
    got += 1
"""

# Sender: FLOWS sockets with consecutive source ports, PER_FLOW datagrams each.
SENDER = """
import socket, sys, time
src_ip, dst_ip, dst_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
first_sport, flows, per_flow = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
for flow in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src_ip, first_sport + flow))
    for n in range(per_flow):
        s.sendto(f"flow{flow}-{n}".encode(), (dst_ip, dst_port))
        time.sleep(0.002)
    s.close()
"""


def udp_exchange(
    lab: Lab,
    src: str,
    dst: str,
    *,
    flows: int = 1,
    per_flow: int = 1,
    first_sport: int = 40000,
    dst_port: int = 5000,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """Send UDP from host ``src`` to host ``dst`` with normal sockets; what ``dst`` received."""
    src_ip = lab.status["nodes"][src]["interfaces"][0]["ipv4"].split("/")[0]
    dst_ip = lab.status["nodes"][dst]["interfaces"][0]["ipv4"].split("/")[0]
    total = flows * per_flow
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", lab.netns(dst), sys.executable, "-c", RECEIVER,
         dst_ip, str(dst_port), str(total), str(timeout)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        ns_run(
            lab.netns(src), sys.executable, "-c", SENDER, src_ip, dst_ip, str(dst_port),
            str(first_sport), str(flows), str(per_flow),
        )  # fmt: skip
        out, err = receiver.communicate(timeout=timeout + 10)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    assert receiver.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_until(predicate: Any, timeout: float = 5.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())

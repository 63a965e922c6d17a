"""The SSH runner against a real OpenSSH server: a "real host" in a namespace, reached over
its own management link (netmiko ``linux``), runs the probe worker and returns its result."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.intent.model import Credentials, Device, Port
from agent.observe.probes.runner import NetnsRunner, ProbeError, SshRunner
from tests.lab.support.netns_pair import Pair, requires_netns, run_ip, veth_pair

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = [
    pytest.mark.lab,
    pytest.mark.lab_parallel,  # one veth and the kernel's sshd: no lab switch, no rate
    requires_netns,
    pytest.mark.skipif(
        not os.path.exists(SSHD) and not os.environ.get("CI"),
        reason="needs openssh-server (make test installs it)",
    ),
]
MGMT_ROOT, MGMT_HOST = "198.19.254.0", "198.19.254.1"


@pytest.fixture(scope="module")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pair, Device]]:
    """Namespace b of a veth pair runs sshd on a management veth to the root namespace."""
    tmp = tmp_path_factory.mktemp("sshhost")
    with veth_pair("ssh", subnet_index=3) as pair:
        root_if, host_if = f"rfm{os.getpid()}"[:15], "mgmt0"
        run_ip("link", "add", root_if, "type", "veth", "peer", "name", host_if, "netns", pair.b)
        sshd: subprocess.Popen[bytes] | None = None
        made_run_sshd = not os.path.isdir("/run/sshd")
        try:
            run_ip("addr", "add", f"{MGMT_ROOT}/31", "dev", root_if)
            run_ip("link", "set", root_if, "up")
            run_ip("-n", pair.b, "addr", "add", f"{MGMT_HOST}/31", "dev", host_if)
            run_ip("-n", pair.b, "link", "set", host_if, "up")
            key = tmp / "id_ed25519"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                           check=True)  # fmt: skip
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(tmp / "host_key")], check=True)  # fmt: skip
            (tmp / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
            config = tmp / "sshd_config"
            config.write_text(
                f"ListenAddress {MGMT_HOST}\nPort 22\nHostKey {tmp / 'host_key'}\n"
                f"PidFile {tmp / 'sshd.pid'}\nAuthorizedKeysFile {tmp / 'authorized_keys'}\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            )
            os.makedirs("/run/sshd", exist_ok=True)  # privilege separation directory
            sshd = subprocess.Popen(
                ["ip", "netns", "exec", pair.b, SSHD, "-D", "-e", "-f", str(config)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(0.5)
            device = Device(
                name="gpu01", platform="linux_host", role="host", host=MGMT_HOST,
                username="root", credentials=Credentials(ssh_key=key),
                host_key=(tmp / "host_key.pub").read_text().strip(),  # checked like a switch's
                probe_python=sys.executable,
                ports=[Port(name="eth1", speed="10M", cable_m=1, mtu=9000, ipv4=f"{pair.ip_b}/31")],
            )  # fmt: skip
            yield pair, device
        finally:
            if sshd is not None:
                sshd.terminate()
                sshd.wait(timeout=5)
            subprocess.run(["ip", "link", "delete", root_if], capture_output=True)
            if made_run_sshd:
                shutil.rmtree("/run/sshd", ignore_errors=True)


def test_receiver_over_ssh_counts_a_flow(ssh_host: tuple[Pair, Device]) -> None:
    pair, device = ssh_host
    receiver = SshRunner(device).start(
        "receive", {"ifname": "eth1", "duration_s": 6, "link_speed_bps": 10_000_000,
                    "idle_timeout_s": 0.5},
    )  # fmt: skip
    receiver.wait_ready(timeout=15)
    sent = NetnsRunner("a", pair.a).start(
        "send", {"ifname": "eth1", "dst_ip": pair.ip_b, "rate_bps": 2_000_000,
                 "link_speed_bps": 10_000_000, "count": 100, "size": 300},
    ).result(timeout=15)  # fmt: skip
    got = receiver.result(timeout=20)
    assert sent["sent"] == 100
    assert got["host"] == "gpu01"
    assert got["totals"]["received"] == 100 and got["totals"]["lost"] == 0


def test_ssh_errors_are_probe_errors(ssh_host: tuple[Pair, Device], tmp_path: Path) -> None:
    _, device = ssh_host
    bad = device.model_copy(update={"probe_python": "/nonexistent/python3"})
    with pytest.raises(ProbeError):
        SshRunner(bad).start(
            "sniff-pfc", {"interfaces": ["eth1"], "duration_s": 0.2, "link_speed_bps": 10**7}
        ).result(timeout=10)
    other_key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)],
                   check=True)  # fmt: skip
    wrong = device.model_copy(update={"credentials": Credentials(ssh_key=other_key)})
    with pytest.raises(ProbeError, match=r"authentication failed: .* refused user"):
        SshRunner(wrong).start("sniff-pfc", {})

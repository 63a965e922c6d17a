"""Two network namespaces joined by one veth pair: the smallest wire a probe can run on.

Used by probe tests that need a real link but no switch. Everything created is named with
the creating process's PID and removed by name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


def run_ip(*args: str) -> None:
    """``ip ARGS``, raising on failure."""
    subprocess.run(["ip", *args], check=True, capture_output=True)


def netns_usable() -> str | None:
    """None when namespaces can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2 (make test installs it)"
    return None


_UNUSABLE = netns_usable()
requires_netns = pytest.mark.skipif(_UNUSABLE is not None, reason=str(_UNUSABLE))


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    if_a: str
    if_b: str
    ip_a: str
    ip_b: str
    mac_a: str
    mac_b: str


@contextmanager
def veth_pair(tag: str, subnet_index: int = 0) -> Iterator[Pair]:
    """Namespaces ``rfa<pid><tag>a``/``…b`` with eth1 each, 198.19.255.x/31, static ARP."""
    base = f"rfa{os.getpid()}{tag}"
    pair = Pair(
        a=f"{base}a",
        b=f"{base}b",
        if_a="eth1",
        if_b="eth1",
        ip_a=f"198.19.255.{2 * subnet_index}",
        ip_b=f"198.19.255.{2 * subnet_index + 1}",
        mac_a=f"02:fa:00:00:{subnet_index:02x}:0a",
        mac_b=f"02:fa:00:00:{subnet_index:02x}:0b",
    )
    created: list[str] = []
    try:
        for ns in (pair.a, pair.b):
            run_ip("netns", "add", ns)
            created.append(ns)
        tmp_a, tmp_b = f"{base}va"[:15], f"{base}vb"[:15]
        run_ip("link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        for tmp, ns, mac, ip, peer_ip, peer_mac in (
            (tmp_a, pair.a, pair.mac_a, pair.ip_a, pair.ip_b, pair.mac_b),
            (tmp_b, pair.b, pair.mac_b, pair.ip_b, pair.ip_a, pair.mac_a),
        ):
            run_ip("link", "set", tmp, "netns", ns)
            run_ip("-n", ns, "link", "set", tmp, "name", "eth1")
            run_ip("-n", ns, "link", "set", "eth1", "address", mac, "up")
            run_ip("-n", ns, "link", "set", "lo", "up")
            run_ip("-n", ns, "addr", "add", f"{ip}/31", "dev", "eth1")
            run_ip("-n", ns, "neigh", "replace", peer_ip, "lladdr", peer_mac, "dev", "eth1",
                "nud", "permanent")  # fmt: skip
        yield pair
    finally:
        for ns in created:
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)

"""Thin, checked wrappers around iproute2, ethtool and sysctl for the lab runtime.

Everything goes through :func:`run` (argv lists, never a shell) so a failing command
becomes a :class:`CommandError` that quotes the command and its stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

NETNS_DIR = Path("/run/netns")
# What the hosts' and switches' veth ends must not offload: a user-space switch forwards
# frames as they are, so checksums must be complete and segments MTU-sized (LAB-NOTES).
OFFLOADS_OFF = ("tx", "tso", "gso", "gro")
REQUIRED_TOOLS = {"ip": "iproute2", "ethtool": "ethtool", "sysctl": "procps"}


class CommandError(RuntimeError):
    """A system command failed; the message names the command and quotes its stderr."""


def missing_tools() -> list[str]:
    """Required commands that are not on PATH, as 'command (package)'."""
    return [
        f"{tool} (apt-get install {pkg})"
        for tool, pkg in REQUIRED_TOOLS.items()
        if not shutil.which(tool)
    ]


def run(argv: Sequence[str], *, stdin: str | None = None, timeout: float = 20.0) -> str:
    """Run ``argv``; return stdout or raise :class:`CommandError`."""
    try:
        proc = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise CommandError(f"{argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise CommandError(f"`{' '.join(argv)}` did not finish in {timeout:g} s") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", "; ")
        raise CommandError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {detail}")
    return proc.stdout


def netns_exists(name: str) -> bool:
    """Whether a named network namespace (``ip netns``) exists."""
    return (NETNS_DIR / name).exists()


def add_netns(name: str) -> None:
    """Create a named network namespace; fails if the name is taken."""
    run(["ip", "netns", "add", name])


def delete_netns(name: str) -> None:
    """Delete a named network namespace (its veth ends, and so their peers, go with it)."""
    run(["ip", "netns", "delete", name])


def netns_pids(name: str) -> list[int]:
    """PIDs of the processes whose network namespace is ``name``."""
    if not netns_exists(name):
        return []
    return [int(pid) for pid in run(["ip", "netns", "pids", name]).split()]


def set_sysctls(netns: str, values: Mapping[str, str | int]) -> None:
    """Set sysctls inside ``netns`` (net.* are per namespace)."""
    if values:
        run(
            [
                "ip",
                "netns",
                "exec",
                netns,
                "sysctl",
                "-q",
                "-w",
                *(f"{k}={v}" for k, v in values.items()),
            ]
        )


class VethEnd(NamedTuple):
    """One end of a veth pair: the namespace it lives in, its interface name and MAC."""

    netns: str
    ifname: str
    mac: str


def add_veth(a: VethEnd, b: VethEnd, mtu: int) -> None:
    """Create a veth pair with each end directly in its namespace, final name, MAC and MTU.

    Creating both ends inside their namespaces in one netlink request never puts a device
    in the root namespace, so there is nothing there to collide with or to leak.
    """
    run(
        [
            "ip", "link", "add", a.ifname, "netns", a.netns, "address", a.mac, "mtu", str(mtu),
            "type", "veth",
            "peer", "name", b.ifname, "netns", b.netns, "address", b.mac, "mtu", str(mtu),
        ]
    )  # fmt: skip


def ip_batch(netns: str, commands: Sequence[str]) -> None:
    """Run several ``ip`` commands in ``netns`` in one process (``ip -n NS -batch -``)."""
    if commands:
        run(["ip", "-n", netns, "-batch", "-"], stdin="\n".join(commands) + "\n")


def disable_offloads(netns: str, ifname: str) -> None:
    """``ethtool -K IF tx off tso off gso off gro off`` inside ``netns``."""
    args: list[str] = []
    for feature in OFFLOADS_OFF:
        args += [feature, "off"]
    run(["ip", "netns", "exec", netns, "ethtool", "-K", ifname, *args])


def is_root() -> bool:
    """Whether this process can create namespaces and veths (effective UID 0)."""
    return os.geteuid() == 0


CLONE_NEWNET = 0x40000000  # linux/sched.h
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Switch the calling thread into netns ``name`` (sockets created inside stay there)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
        try:
            yield
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:  # pragma: no cover - cannot happen
                raise OSError(ctypes.get_errno(), "setns back to the original netns failed")
    finally:
        os.close(target)
        os.close(home)

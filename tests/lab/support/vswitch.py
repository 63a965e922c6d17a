"""One ``lab.vswitch`` in a namespace wired to host namespaces, for the ``lab.vswitch`` tests:
topology, switch process, captures, sockets and pause-honouring senders.

Everything here creates uniquely named namespaces (``vsw-t<pid>-<tag>-...``) and removes
exactly those, and only the processes it started (by PID).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from lab import netns as lab_netns
from tests.lab.support.frames import (
    Udp,
    build_udp,
    inet_checksum,
    open_packet_socket,
    parse_pfc,
    parse_udp,
    recv_timestamped,
)
from tests.lab.support.polling import wait_until

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SPEED = 10_000_000


# --------------------------------------------------------------------------- environment


def lab_unavailable_reason() -> str | None:
    """Why the lab tests cannot run here, or None if they can."""
    if os.geteuid() != 0:
        return "lab tests need root (network namespaces, AF_PACKET)"
    if shutil.which("ip") is None:
        return "iproute2 `ip` not found"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` unavailable: {probe.stderr.strip()}"
    if shutil.which("ethtool") is None:
        return "ethtool missing (needed to turn veth offloads off): apt-get install -y ethtool"
    return None


_UNAVAILABLE = lab_unavailable_reason()
requires_vswitch_lab = pytest.mark.skipif(_UNAVAILABLE is not None, reason=_UNAVAILABLE or "")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command, raising with its stderr on failure."""
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


in_netns = lab_netns.in_netns  # re-exported: the tests use fx.in_netns


def raw_socket(host: Host) -> socket.socket:
    """A raw packet socket on ``host``'s interface, opened inside its namespace."""
    with in_netns(host.ns):
        return open_packet_socket(host.ifname)


# --------------------------------------------------------------------------- capture


class Capture:
    """Background capture of every frame arriving on a host interface, with timestamps."""

    def __init__(self, ns: str, ifname: str) -> None:
        with in_netns(ns):
            self.sock = open_packet_socket(ifname)
        self.frames: list[tuple[float, bytes]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            item = recv_timestamped(self.sock, 0.05)
            if item is not None:
                with self._lock:
                    self.frames.append(item)

    def snapshot(self) -> list[tuple[float, bytes]]:
        """Frames captured so far."""
        with self._lock:
            return list(self.frames)

    def udp(self, dport: int | None = None) -> list[Udp]:
        """Captured UDP frames (optionally to one destination port)."""
        out = []
        for ts, frame in self.snapshot():
            parsed = parse_udp(ts, frame)
            if parsed is not None and (dport is None or parsed.dport == dport):
                out.append(parsed)
        return out

    def pfc(self) -> list[tuple[float, bytes]]:
        """Captured PFC frames."""
        return [(ts, f) for ts, f in self.snapshot() if parse_pfc(f) is not None]

    def clear(self) -> None:
        """Forget what was captured so far."""
        with self._lock:
            self.frames.clear()

    def close(self) -> None:
        """Stop the thread and close the socket."""
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


def icmp_ping(ns: str, dst: str, count: int = 3, timeout: float = 1.0) -> int:
    """Send ``count`` ICMP echo requests from netns ``ns`` (kernel raw socket); return replies.

    Self-contained so the tests do not depend on an installed ``ping`` binary.
    """
    with in_netns(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    replies = 0
    try:
        for seq in range(count):
            body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"vswitch-ping"
            body = body[:2] + struct.pack("!H", inet_checksum(body)) + body[4:]
            sock.sendto(body, (dst, 0))
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                packet, (src, _) = sock.recvfrom(2048)
                icmp = packet[(packet[0] & 0x0F) * 4 :]
                if (
                    src == dst
                    and icmp[0] == 0
                    and struct.unpack_from("!HH", icmp, 4)
                    == (
                        ident,
                        seq,
                    )
                ):
                    replies += 1
                    break
    finally:
        sock.close()
    return replies


# --------------------------------------------------------------------------- topology


@dataclass
class Host:
    """A host namespace wired to one switch port."""

    ns: str
    ifname: str
    mac: str
    ip: str
    switch_port: str
    switch_mac: str
    switch_ip: str


@dataclass
class Topology:
    """One switch namespace with ports eth1..ethN, each wired to a host namespace."""

    tag: str
    switch_ns: str
    hosts: list[Host]
    workdir: Path
    speed_bps: int = DEFAULT_SPEED
    _namespaces: list[str] = field(default_factory=list)
    _switches: list[VswitchProcess] = field(default_factory=list)
    _helpers: list[subprocess.Popen[str]] = field(default_factory=list)

    @classmethod
    def create(cls, tag: str, n_hosts: int) -> Topology:
        """Build it (and tear down what was built if anything fails)."""
        prefix = f"vsw-t{os.getpid()}-{tag}"
        topo = cls(
            tag=tag,
            switch_ns=f"{prefix}-sw",
            hosts=[],
            workdir=Path(tempfile.mkdtemp(prefix=f"{prefix}-")),
        )
        try:
            topo._build(prefix, n_hosts)
        except BaseException:
            topo.destroy()
            raise
        return topo

    def __enter__(self) -> Topology:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.destroy()

    def _add_ns(self, name: str) -> None:
        sh("ip", "netns", "add", name)
        self._namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        for key in ("all", "default"):
            sh("ip", "netns", "exec", name, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")

    def _build(self, prefix: str, n_hosts: int) -> None:
        self._add_ns(self.switch_ns)
        for i in range(1, n_hosts + 1):
            host = Host(
                ns=f"{prefix}-h{i}",
                ifname="eth1",
                mac=f"02:00:00:00:01:{i:02x}",
                ip=f"198.18.{i}.2",
                switch_port=f"eth{i}",
                switch_mac=f"02:00:00:00:00:{i:02x}",
                switch_ip=f"198.18.{i}.1",
            )
            self._add_ns(host.ns)
            sh(
                "ip", "link", "add", host.switch_port, "netns", self.switch_ns, "type", "veth",
                "peer", "name", host.ifname, "netns", host.ns,
            )  # fmt: skip
            for ns, ifname, mac in (
                (self.switch_ns, host.switch_port, host.switch_mac),
                (host.ns, host.ifname, host.mac),
            ):
                sh("ip", "-n", ns, "link", "set", ifname, "address", mac)
                sh(
                    "ip", "netns", "exec", ns, "ethtool", "-K", ifname,
                    "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                )  # fmt: skip
                sh("ip", "-n", ns, "link", "set", ifname, "up")
            sh("ip", "-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", host.ifname)
            sh("ip", "-n", host.ns, "route", "add", "default", "via", host.switch_ip)
            self.hosts.append(host)

    def host(self, i: int) -> Host:
        """Host wired to switch port eth<i> (1-based)."""
        return self.hosts[i - 1]

    def base_config(self, static_neighbors: bool = True) -> dict[str, Any]:
        """A switch config for this topology (10 Mb/s ports, DSCP 26 -> tc 3)."""
        return {
            "name": f"vsw-{self.tag}",
            "ports": [
                {
                    "ifname": h.switch_port,
                    "mac": h.switch_mac,
                    "ipv4": f"{h.switch_ip}/24",
                    "speed_bps": self.speed_bps,
                }
                for h in self.hosts
            ],
            "neighbors": (
                [{"ip": h.ip, "mac": h.mac, "port": h.switch_port} for h in self.hosts]
                if static_neighbors
                else []
            ),
            "routes": [],
            "buffer": {
                "xoff_bytes": 30000,
                "xon_bytes": 15000,
                "headroom_bytes": 20000,
                "queue_limit_bytes": 60000,
            },
            "qos": {"trust": "dscp", "dscp_to_tc": {"26": 3, "48": 6}},
        }

    def start_switch(self, config: dict[str, Any]) -> VswitchProcess:
        """Start ``python -m lab.vswitch`` in the switch namespace and wait until it answers."""
        n = len(self._switches)
        proc = VswitchProcess.start(self.switch_ns, config, self.workdir / f"sw{n}")
        self._switches.append(proc)
        return proc

    def spawn_in(self, ns: str, argv: list[str]) -> subprocess.Popen[str]:
        """Start a helper process in ``ns``; it is killed (by PID) at teardown if still alive."""
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, *argv],
            cwd=REPO_ROOT,  # where ``python -m tests.lab.support...`` finds its package
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._helpers.append(proc)
        return proc

    def destroy(self) -> None:
        """Stop our processes, delete our namespaces and temp dir (never anything else)."""
        for proc in self._helpers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
        for switch in self._switches:
            switch.kill()
        for name in reversed(self._namespaces):
            sh("ip", "netns", "del", name, check=False)
        self._namespaces.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


class VswitchProcess:
    """A running ``python -m lab.vswitch`` (``ip netns exec`` execs it: same PID)."""

    def __init__(self, proc: subprocess.Popen[bytes], workdir: Path) -> None:
        self.proc = proc
        self.workdir = workdir
        self.control_path = str(workdir / "control.sock")
        self.log_path = workdir / "vswitch.log"

    @classmethod
    def start(cls, ns: str, config: dict[str, Any], workdir: Path) -> VswitchProcess:
        """Write the config, start the process, wait for the control socket to answer."""
        workdir.mkdir(parents=True, exist_ok=True)
        config_path = workdir / "config.json"
        config_path.write_text(json.dumps(config, indent=2))
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        argv = [
            "ip", "netns", "exec", ns, sys.executable, "-m", "lab.vswitch",
            "--config", str(config_path), "--control", str(workdir / "control.sock"),
            "--log-file", str(workdir / "vswitch.log"),
        ]  # fmt: skip
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE)
        switch = cls(proc, workdir)
        switch.wait_ready()
        return switch

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Poll the control socket until ``ping`` works."""
        from lab.vswitch.client import VswitchClient, VswitchError

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vswitch exited with {self.proc.returncode}: {self.log_tail()}")
            if os.path.exists(self.control_path):
                try:
                    with VswitchClient(self.control_path, timeout=2) as client:
                        if client.ping():
                            return
                except VswitchError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"vswitch not ready after {timeout}s: {self.log_tail()}")

    def client(self) -> Any:
        """A new :class:`lab.vswitch.client.VswitchClient` for this switch."""
        from lab.vswitch.client import VswitchClient

        return VswitchClient(self.control_path)

    def log_tail(self, lines: int = 30) -> str:
        """Last lines of the switch log (for assertion messages)."""
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def terminate(self, timeout: float = 5.0) -> tuple[int | None, float]:
        """SIGTERM; returns (exit code or None if still running, seconds waited)."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc: int | None = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - start

    def kill(self) -> None:
        """Make sure it is gone (SIGTERM, then SIGKILL by PID)."""
        if self.proc.poll() is None:
            rc, _ = self.terminate(timeout=3)
            if rc is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def udp_sink(ns: str, ip: str, port: int) -> socket.socket:
    """A bound, never-read UDP socket: the host kernel then answers no ICMP port-unreachable."""
    with in_netns(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((ip, port))
    return sock


def start_pfc_sender(
    topo: Topology,
    src: Host,
    dst: Host,
    count: int,
    start_at: float,
    sport: int = 49152,
    dport: int = 4791,
    size: int = 1000,
    dscp: int = 26,
    ecn: int = 2,
    pause_class: int = 3,
    drain_s: float = 0.5,
) -> subprocess.Popen[str]:
    """Start the pause-honouring sender (:mod:`.pfc_sender`) in ``src``'s namespace."""
    template = build_udp(
        src.mac, src.switch_mac, src.ip, dst.ip, sport, dport, b"", dscp=dscp, ecn=ecn, size=size
    )
    return topo.spawn_in(
        src.ns,
        [
            sys.executable, "-m", "tests.lab.support.pfc_sender",
            "--ifname", src.ifname, "--frame-hex", template.hex(), "--count", str(count),
            "--speed-bps", str(topo.speed_bps), "--pause-class", str(pause_class),
            "--start-at", repr(start_at), "--drain-s", str(drain_s),
        ],
    )  # fmt: skip


def sender_result(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for a sender and decode its JSON summary."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"sender failed ({proc.returncode}): {err}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def incast_into_h3(
    topo: Topology, switch: VswitchProcess, count: int, start_in: float
) -> list[dict[str, Any]]:
    """h1 and h2 send ``count`` frames each at line rate to h3, pause-honouring senders that
    start together ``start_in`` seconds from now; their summaries, once the switch's eth3 (h3's
    port) has drained its queues."""
    h1, h2, h3 = topo.host(1), topo.host(2), topo.host(3)
    start_at = time.time() + start_in
    senders = [
        start_pfc_sender(topo, h, h3, count, start_at, sport=50000 + i)
        for i, h in enumerate((h1, h2))
    ]
    results = [sender_result(p, timeout=25) for p in senders]
    with switch.client() as client:

        def drained() -> bool:
            eth3 = client.counters()["ports"]["eth3"]
            return all(q["depth_bytes"] == 0 for q in eth3["queues"].values())

        assert wait_for(drained, 10.0), switch.log_tail()
    time.sleep(0.2)  # the last frames reach the capture
    return results


def wait_for(predicate: Callable[[], object], timeout: float) -> bool:
    """:func:`wait_until`, polling often: these tests wait for frames tens of ms apart."""
    return wait_until(predicate, timeout, interval=0.02)


class Rig(ExitStack):
    """One test's switch, sockets and captures on ``topo``: each is released when the ``with``
    ends (sockets and captures first, the switch last, as they were made in that order)."""

    def __init__(self, topo: Topology) -> None:
        super().__init__()
        self.topo = topo

    def __enter__(self) -> Rig:
        super().__enter__()
        return self

    def switch(self, config: dict[str, Any]) -> VswitchProcess:
        started = self.topo.start_switch(config)
        self.callback(started.kill)
        return started

    def raw(self, host: Host) -> socket.socket:
        """A raw socket on ``host``: frames sent on it enter the switch port it is wired to."""
        return self.enter_context(raw_socket(host))

    def capture(self, host: Host) -> Capture:
        found = Capture(host.ns, host.ifname)
        self.callback(found.close)
        return found

    def sink(self, host: Host, port: int) -> socket.socket:
        return self.enter_context(udp_sink(host.ns, host.ip, port))

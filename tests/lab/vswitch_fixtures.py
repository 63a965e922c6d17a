"""Netns helpers for the ``lab.vswitch`` tests: topology, switch process, sockets, senders.

Everything here creates uniquely named namespaces (``vsw-t<pid>-<tag>-...``) and removes
exactly those, and only the processes it started (by PID).

Also runnable as a script: ``python vswitch_fixtures.py pfc-sender ...`` is the
pause-honouring traffic source used for the lossless incast tests.  Plain Linux hosts ignore
PFC (there is no DCB on veth), so to get a truly lossless incast the sender must behave like
a RoCE NIC: pace at its line rate and stop a priority while a received PFC frame says so.  A
tiny separate process per sender host does exactly that on a raw socket; it shares no code
with the switch, so the test checks the switch against an independent implementation.
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import netns as lab_netns

REPO_ROOT = Path(__file__).resolve().parents[2]

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35
PFC_DST = bytes.fromhex("0180c2000001")

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


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command, raising with its stderr on failure."""
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


in_netns = lab_netns.in_netns  # re-exported: the tests use fx.in_netns


# --------------------------------------------------------------------------- frames


def mac_bytes(mac: str) -> bytes:
    """``"02:00:..."`` -> bytes."""
    return bytes.fromhex(mac.replace(":", ""))


def inet_checksum(data: bytes) -> int:
    """RFC 1071 checksum."""
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build_udp(
    src_mac: str,
    dst_mac: str,
    src_ip: str,
    dst_ip: str,
    sport: int,
    dport: int,
    payload: bytes,
    dscp: int = 0,
    ecn: int = 0,
    ttl: int = 64,
    size: int | None = None,
) -> bytes:
    """Ethernet/IPv4/UDP frame with valid IP and UDP checksums; padded to ``size`` bytes."""
    if size is not None:
        payload = payload + bytes(max(0, size - 42 - len(payload)))
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    udp_len = 8 + len(payload)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    udp_csum = inet_checksum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", udp_csum) + udp[8:]
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, (dscp << 2) | ecn, 20 + udp_len, 0, 0x4000, ttl, 17, 0, src, dst
    )
    ip = ip[:10] + struct.pack("!H", inet_checksum(ip)) + ip[12:]
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00" + ip + udp


def build_pfc(src_mac: str, quanta: dict[int, int]) -> bytes:
    """PFC frame with the given per-priority quanta (enable bits set for those priorities)."""
    cev = 0
    times = [0] * 8
    for prio, value in quanta.items():
        cev |= 1 << prio
        times[prio] = value
    frame = PFC_DST + mac_bytes(src_mac) + struct.pack("!HHH8H", 0x8808, 0x0101, cev, *times)
    return frame + bytes(60 - len(frame))


@dataclass(frozen=True)
class Udp:
    """The fields of a captured Ethernet/IPv4/UDP frame the tests look at."""

    ts: float
    eth_dst: bytes
    eth_src: bytes
    tos: int
    ttl: int
    ip_checksum_ok: bool
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    payload: bytes

    @property
    def ecn(self) -> int:
        """ECN field (3 = CE)."""
        return self.tos & 3

    @property
    def seq(self) -> int:
        """Sequence number the test senders put in the first 4 payload bytes."""
        return int.from_bytes(self.payload[:4], "big")


def parse_udp(ts: float, frame: bytes) -> Udp | None:
    """Decode an IPv4/UDP frame, or None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    total = struct.unpack_from("!H", frame, 16)[0]
    l4 = 14 + ihl
    sport, dport, udp_len = struct.unpack_from("!HHH", frame, l4)
    return Udp(
        ts=ts,
        eth_dst=frame[0:6],
        eth_src=frame[6:12],
        tos=frame[15],
        ttl=frame[22],
        ip_checksum_ok=inet_checksum(frame[14 : 14 + ihl]) == 0,
        src_ip=socket.inet_ntoa(frame[26:30]),
        dst_ip=socket.inet_ntoa(frame[30:34]),
        sport=sport,
        dport=dport,
        payload=frame[l4 + 8 : min(l4 + udp_len, 14 + total)],
    )


def parse_pfc(frame: bytes) -> tuple[int, list[int]] | None:
    """``(class_enable_vector, quanta[8])`` of a PFC frame, or None."""
    if len(frame) < 34 or frame[0:6] != PFC_DST or frame[12:16] != b"\x88\x08\x01\x01":
        return None
    cev, *quanta = struct.unpack_from("!H8H", frame, 16)
    return cev, list(quanta)


# --------------------------------------------------------------------------- sockets


def open_packet_socket(ifname: str, rcvbuf: int = 16 << 20) -> socket.socket:
    """Raw socket on ``ifname`` in the *current* netns, kernel rx timestamps, no own echo."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((ifname, ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    return sock


def recv_timestamped(sock: socket.socket, timeout: float) -> tuple[float, bytes] | None:
    """One frame and its kernel receive time (CLOCK_REALTIME), or None on timeout."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        return None
    data, ancdata, _flags, _addr = sock.recvmsg(65536, 64)
    ts = time.time()
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", payload[:16])
            ts = sec + nsec / 1e9
    return ts, data


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
    """Start the pause-honouring sender (this file as a script) in ``src``'s namespace."""
    template = build_udp(
        src.mac, src.switch_mac, src.ip, dst.ip, sport, dport, b"", dscp=dscp, ecn=ecn, size=size
    )
    return topo.spawn_in(
        src.ns,
        [
            sys.executable, str(Path(__file__).resolve()), "pfc-sender",
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


def wait_for(predicate: Any, timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate()`` until true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# --------------------------------------------------------------------------- pfc-sender


def run_pfc_sender(
    ifname: str,
    frame_template: bytes,
    count: int,
    speed_bps: float,
    pause_class: int,
    start_at: float,
    drain_s: float,
) -> dict[str, Any]:
    """Send ``count`` frames paced at ``speed_bps``, honouring PFC for ``pause_class``.

    Bytes 42..45 of each frame carry its sequence number (the UDP checksum is zeroed --
    "no checksum" is legal for UDP over IPv4 -- since the payload changes per frame).
    """
    sock = open_packet_socket(ifname, rcvbuf=4 << 20)
    sock.setblocking(False)
    frame = bytearray(frame_template)
    frame[40:42] = b"\x00\x00"
    wire = (max(len(frame), 60) + 20) * 8 / speed_bps
    sent = xoff_rx = xon_rx = max_quanta = 0
    paused_s = 0.0
    paused_until = 0.0
    pause_began: float | None = None
    while time.time() < start_at:
        time.sleep(min(0.01, max(0.0, start_at - time.time())))
    next_tx = time.monotonic()
    end_drain: float | None = None
    while True:
        now = time.monotonic()
        while True:  # honour every PFC frame waiting on the socket first
            try:
                rx = sock.recv(2048)
            except BlockingIOError:
                break
            parsed = parse_pfc(rx)
            if parsed is None or not (parsed[0] >> pause_class) & 1:
                continue
            quanta = parsed[1][pause_class]
            if quanta:
                xoff_rx += 1
                max_quanta = max(max_quanta, quanta)
                if pause_began is None:
                    pause_began = now
                paused_until = now + quanta * 512 / speed_bps
            else:
                xon_rx += 1
                paused_until = 0.0
        if pause_began is not None and now >= paused_until:
            paused_s += now - pause_began
            pause_began = None
        if sent >= count:
            end_drain = end_drain or now + drain_s
            if now >= end_drain:
                break
            select.select([sock], [], [], end_drain - now)
            continue
        if now < paused_until:
            select.select([sock], [], [], paused_until - now)
            continue
        if now < next_tx:
            select.select([sock], [], [], next_tx - now)
            continue
        frame[42:46] = sent.to_bytes(4, "big")
        sock.send(frame)
        sent += 1
        next_tx = max(next_tx, now - 0.001) + wire
    sock.close()
    return {
        "sent": sent,
        "xoff_rx": xoff_rx,
        "xon_rx": xon_rx,
        "paused_s": paused_s,
        "max_quanta": max_quanta,
    }


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sender = sub.add_parser("pfc-sender", help="pause-honouring paced UDP sender")
    sender.add_argument("--ifname", required=True)
    sender.add_argument("--frame-hex", required=True, help="template frame (seq at bytes 42..45)")
    sender.add_argument("--count", type=int, required=True)
    sender.add_argument("--speed-bps", type=float, required=True)
    sender.add_argument("--pause-class", type=int, required=True)
    sender.add_argument("--start-at", type=float, default=0.0, help="epoch seconds")
    sender.add_argument("--drain-s", type=float, default=0.5)
    args = parser.parse_args(argv)
    stats = run_pfc_sender(
        args.ifname,
        bytes.fromhex(args.frame_hex),
        args.count,
        args.speed_bps,
        args.pause_class,
        args.start_at,
        args.drain_s,
    )
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main())

"""The NIC port of a VM host: the VM's frames onto the lab link, the link's frames into the VM.

``python -m lab.vmhost.nic --ifname eth1 --socket PATH --speed-bps N [--stats PATH]`` runs in
the host's network namespace. qemu connects to ``--socket`` (``-netdev stream``, a unix
stream: each frame is a 4-byte big-endian length, then the frame; qemu's net/stream.c). The
link end is an AF_PACKET socket on ``--ifname`` (the veth to the leaf).

What a RoCE NIC port does and a veth does not (:class:`NicPort`, pure: the time is an
argument, so a unit test drives it on virtual time):

- **Line rate.** Frames leave at the port's speed, preamble and inter-frame gap included
  (:func:`lab.vswitch.packet.wire_time`, the switch's own shaper rule).
- **PFC honouring per priority.** A PFC frame from the switch pauses the priorities in its
  class-enable vector for ``quanta x 512`` bit times (:class:`lossless.pfc.PauseHonouring`,
  the model every NIC of the lab uses); PFC frames are consumed here, never passed to the VM
  (a NIC's MAC handles MAC Control). A frame's priority comes from its DSCP through the NIC's
  trust-DSCP map: mlx5's default, priority = DSCP >> 3 (DSCP 26 -> 3, CNPs' 48 -> 6;
  ``mlnx_qos --trust dscp``), unless ``--dscp-map`` says otherwise.
- **Back-pressure instead of loss.** The transmit buffer is small and shared by the
  priorities; while it is full the NIC stops reading the VM's socket, so a paused RoCE
  priority stalls the guest's virtio queue and rxe waits, as a paused priority stalls a real
  NIC's send queues. Frames for the VM wait in a bounded buffer; beyond it they are dropped
  and counted (``rx_discards``).
- **Counters** named like mlx5's ``ethtool -S`` (``rx_prio3_pause``,
  ``rx_prio3_pause_duration`` in microseconds, ``tx_packets``, ...), written as JSON to
  ``--stats`` every second and on exit: the VM's virtio NIC has no such counters.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import os
import select
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.logsetup import setup_logging, stop_on_signals
from lab.vswitch.packet import ETHERTYPE_IPV4, ETHERTYPE_MAC_CONTROL, parse_pfc, wire_time
from lab.vswitch.rawsock import PortSocketError, open_port_socket
from lossless.pfc import PauseHonouring

log = logging.getLogger("lab.vmhost.nic")

PRIORITIES = 8
STREAM_HEADER = struct.Struct("!I")  # qemu net/stream.c: uint32 length in network order
MAX_FRAME_BYTES = 65536 + 4096  # qemu's NET_BUFSIZE: nothing longer crosses a stream netdev
# The shared transmit buffer: a few jumbo frames. Small on purpose: a paused priority must
# reach the guest as back-pressure, not disappear into a deep buffer here.
TX_BUFFER_BYTES = 64 * 1024
TO_VM_BUFFER_BYTES = 4 << 20
# Send a frame when the shaper frees the wire within this time (fewer wake-ups; the error
# is a fraction of one 1 KB frame at 10 Mb/s).
TX_LOOKAHEAD_S = 0.0002
STATS_INTERVAL_S = 1.0
VLAN_TPIDS = (0x8100, 0x88A8)


def mlx5_default_dscp_map() -> list[int]:
    """mlx5's trust-DSCP default: the top three DSCP bits are the priority."""
    return [dscp >> 3 for dscp in range(64)]


def frame_priority(frame: bytes | bytearray, dscp_map: Sequence[int]) -> int:
    """The priority a trust-DSCP NIC sends ``frame`` on; non-IP frames (ARP) on 0."""
    offset = 12
    ethertype = int.from_bytes(frame[offset : offset + 2], "big")
    while ethertype in VLAN_TPIDS and len(frame) >= offset + 6:
        offset += 4
        ethertype = int.from_bytes(frame[offset : offset + 2], "big")
    if ethertype != ETHERTYPE_IPV4 or len(frame) < offset + 4:
        return 0
    return dscp_map[frame[offset + 3] >> 2]


@dataclass
class NicCounters:
    """``ethtool -S``-style counters of the NIC port (mlx5 names where mlx5 has one)."""

    tx_packets: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    rx_bytes: int = 0
    rx_discards: int = 0  # for the VM, beyond the receive buffer
    rx_pause_frames: list[int] = field(default_factory=lambda: [0] * PRIORITIES)
    tx_prio_packets: list[int] = field(default_factory=lambda: [0] * PRIORITIES)

    def as_ethtool(self, paused_s: Sequence[float]) -> dict[str, int]:
        stats = {
            "tx_packets": self.tx_packets,
            "tx_bytes": self.tx_bytes,
            "rx_packets": self.rx_packets,
            "rx_bytes": self.rx_bytes,
            "rx_discards_phy": self.rx_discards,
        }
        for p in range(PRIORITIES):
            stats[f"rx_prio{p}_pause"] = self.rx_pause_frames[p]
            stats[f"rx_prio{p}_pause_duration"] = round(paused_s[p] * 1e6)
            stats[f"tx_prio{p}_packets"] = self.tx_prio_packets[p]
        return stats


class NicPort:
    """The NIC's decisions, on a clock given to each call (seconds)."""

    def __init__(
        self,
        speed_bps: float,
        dscp_map: Sequence[int] | None = None,
        tx_buffer_bytes: int = TX_BUFFER_BYTES,
        to_vm_buffer_bytes: int = TO_VM_BUFFER_BYTES,
    ) -> None:
        self.speed_bps = speed_bps
        self.dscp_map = list(dscp_map) if dscp_map is not None else mlx5_default_dscp_map()
        self.tx_buffer_bytes = tx_buffer_bytes
        self.to_vm_buffer_bytes = to_vm_buffer_bytes
        self.pause = [PauseHonouring(speed_bps) for _ in range(PRIORITIES)]
        self.queues: list[collections.deque[bytes]] = [
            collections.deque() for _ in range(PRIORITIES)
        ]
        self.queued_bytes = 0
        self.tx_free_at = 0.0
        self.to_vm: collections.deque[bytes] = collections.deque()
        self.to_vm_bytes = 0
        self.counters = NicCounters()

    # ---- from the VM -------------------------------------------------------------------

    def tx_room(self) -> int:
        """Bytes the transmit buffer can still take (0: stop reading the VM)."""
        return max(0, self.tx_buffer_bytes - self.queued_bytes)

    def from_vm(self, frame: bytes) -> None:
        priority = frame_priority(frame, self.dscp_map)
        self.queues[priority].append(frame)
        self.queued_bytes += len(frame)

    def next_frame(self, now: float) -> bytes | None:
        """The frame to put on the wire at ``now``, if the wire is free and a priority with
        frames is not paused: the highest such priority first (CNPs before RoCE data, as the
        profiles' strict CNP queue)."""
        if self.tx_free_at > now + TX_LOOKAHEAD_S:
            return None
        for priority in range(PRIORITIES - 1, -1, -1):
            queue = self.queues[priority]
            if queue and not self.pause[priority].is_paused(now):
                frame = queue.popleft()
                self.queued_bytes -= len(frame)
                start = max(self.tx_free_at, now)
                self.tx_free_at = start + wire_time(len(frame), self.speed_bps)
                self.counters.tx_packets += 1
                self.counters.tx_bytes += len(frame)
                self.counters.tx_prio_packets[priority] += 1
                return frame
        return None

    def wake_at(self, now: float) -> float | None:
        """When :meth:`next_frame` may next have something: the shaper, or a pause's end."""
        times = []
        for priority in range(PRIORITIES):
            if self.queues[priority]:
                paused_until = self.pause[priority].paused_until
                times.append(max(self.tx_free_at, paused_until if paused_until > now else now))
        return min(times) if times else None

    # ---- from the wire -----------------------------------------------------------------

    def from_wire(self, frame: bytes, now: float) -> None:
        """A frame from the switch: PFC is honoured here, everything else goes to the VM."""
        self.counters.rx_packets += 1
        self.counters.rx_bytes += len(frame)
        if int.from_bytes(frame[12:14], "big") == ETHERTYPE_MAC_CONTROL:
            pfc = parse_pfc(frame)
            if pfc is not None:
                enabled, quanta = pfc
                for priority in range(PRIORITIES):
                    if enabled >> priority & 1:
                        self.pause[priority].receive(quanta[priority], now)
                        self.counters.rx_pause_frames[priority] += 1
            return  # MAC Control (PFC or 802.3x) ends at the MAC
        if self.to_vm_bytes + len(frame) > self.to_vm_buffer_bytes:
            self.counters.rx_discards += 1
            return
        self.to_vm.append(frame)
        self.to_vm_bytes += len(frame)

    def ethtool(self, now: float) -> dict[str, int]:
        """The counters as ``ethtool -S`` names them, paused time up to ``now``."""
        paused = []
        for honour in self.pause:
            running = max(0.0, honour.paused_until - now)
            paused.append(honour.paused_s - running)
        return self.counters.as_ethtool(paused)


class StreamDecoder:
    """qemu's stream framing: 4-byte big-endian length, then the frame."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        frames = []
        while len(self.buffer) >= STREAM_HEADER.size:
            (length,) = STREAM_HEADER.unpack_from(self.buffer)
            if not 0 < length <= MAX_FRAME_BYTES:
                raise ValueError(f"stream frame length {length} outside 1..{MAX_FRAME_BYTES}")
            end = STREAM_HEADER.size + length
            if len(self.buffer) < end:
                break
            frames.append(bytes(self.buffer[STREAM_HEADER.size : end]))
            del self.buffer[:end]
        return frames


def encode(frame: bytes) -> bytes:
    return STREAM_HEADER.pack(len(frame)) + frame


class NicProcess:
    """The I/O around :class:`NicPort`: the VM's stream socket and the link's raw socket."""

    def __init__(
        self,
        ifname: str,
        socket_path: Path,
        nic: NicPort,
        stats_path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ifname = ifname
        self.socket_path = socket_path
        self.nic = nic
        self.stats_path = stats_path
        self.clock = clock
        self.stopping = False
        self.wire = open_port_socket(ifname)
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(socket_path))
        os.chmod(socket_path, 0o600)
        self.listener.listen(1)
        self.vm: socket.socket | None = None
        self.decoder = StreamDecoder()
        self.out = bytearray()  # encoded frames for the VM not yet written
        self.stats_due = 0.0

    def request_stop(self) -> None:
        self.stopping = True

    def run(self) -> None:
        log.info("NIC on %s at %.0f b/s, waiting for the VM on %s",
                 self.ifname, self.nic.speed_bps, self.socket_path)  # fmt: skip
        try:
            while not self.stopping:
                self._step()
        finally:
            self._write_stats()
            for sock in (self.vm, self.listener, self.wire):
                if sock is not None:
                    sock.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def _step(self) -> None:
        now = self.clock()
        readers: list[socket.socket] = [self.wire]
        writers: list[socket.socket] = []
        if self.vm is None:
            readers.append(self.listener)
        else:
            if self.nic.tx_room() > 0:
                readers.append(self.vm)
            if self.out or self.nic.to_vm:
                writers.append(self.vm)
        wake = self.nic.wake_at(now)
        timeout = min(STATS_INTERVAL_S, max(0.0, wake - now)) if wake is not None else 0.5
        readable, _writable, _ = select.select(readers, writers, [], timeout)
        now = self.clock()
        if self.wire in readable:
            self._receive_wire(now)
        if self.listener in readable:
            self.vm, _ = self.listener.accept()
            self.vm.setblocking(False)
            log.info("VM connected")
        if self.vm is not None and self.vm in readable:
            self._read_vm()
        if self.vm is not None and (self.out or self.nic.to_vm):
            self._write_vm()
        self._transmit(self.clock())
        if now >= self.stats_due:
            self._write_stats()
            self.stats_due = now + STATS_INTERVAL_S

    def _receive_wire(self, now: float) -> None:
        while True:
            try:
                frame = self.wire.recv(MAX_FRAME_BYTES)
            except BlockingIOError:
                return
            self.nic.from_wire(frame, now)

    def _read_vm(self) -> None:
        assert self.vm is not None
        # Read only what the transmit buffer can take (plus a header): the rest stays in the
        # socket, where it holds the guest back.
        want = self.nic.tx_room() + STREAM_HEADER.size
        try:
            data = self.vm.recv(want)
        except BlockingIOError:
            return
        if not data:
            log.warning("the VM closed its NIC socket")
            self.stopping = True
            return
        try:
            frames = self.decoder.feed(data)
        except ValueError as exc:
            log.error("VM stream: %s; closing", exc)
            self.stopping = True
            return
        for frame in frames:
            self.nic.from_vm(frame)

    def _write_vm(self) -> None:
        assert self.vm is not None
        while self.nic.to_vm and len(self.out) < 256 * 1024:
            frame = self.nic.to_vm.popleft()
            self.nic.to_vm_bytes -= len(frame)
            self.out += encode(frame)
        try:
            sent = self.vm.send(self.out)
        except BlockingIOError:
            return
        log.debug("to VM: %d of %d bytes", sent, len(self.out))
        del self.out[:sent]

    def _transmit(self, now: float) -> None:
        while (frame := self.nic.next_frame(now)) is not None:
            try:
                self.wire.send(frame)
            except (BlockingIOError, OSError) as exc:
                log.debug("send on %s failed: %s", self.ifname, exc)

    def _write_stats(self) -> None:
        if self.stats_path is None:
            return
        document: dict[str, Any] = {"interface": self.ifname, "at": time.time(),
                                    "ethtool": self.nic.ethtool(self.clock())}  # fmt: skip
        tmp = self.stats_path.with_name(f".{self.stats_path.name}.tmp")
        tmp.write_text(json.dumps(document) + "\n")
        os.replace(tmp, self.stats_path)


def _dscp_map(text: str) -> list[int]:
    """``26:3,48:6`` on top of the mlx5 default."""
    mapping = mlx5_default_dscp_map()
    for item in filter(None, text.split(",")):
        dscp, _, priority = item.partition(":")
        if not (dscp.isdigit() and priority.isdigit() and int(dscp) < 64 and int(priority) < 8):
            raise argparse.ArgumentTypeError(f"expected DSCP:PRIORITY pairs, got {item!r}")
        mapping[int(dscp)] = int(priority)
    return mapping


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.vmhost.nic", description=__doc__)
    parser.add_argument("--ifname", required=True, help="the link's interface (veth)")
    parser.add_argument("--socket", required=True, type=Path, help="unix socket for qemu")
    parser.add_argument("--speed-bps", required=True, type=float, help="port speed")
    parser.add_argument("--dscp-map", type=_dscp_map, default=None, help="DSCP:PRIO,...")
    parser.add_argument("--stats", type=Path, help="write ethtool-style counters here (JSON)")
    parser.add_argument("--log-file")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    args = parser.parse_args(argv)
    setup_logging(args.log_file, args.log_level, {"lab.vmhost": ""})
    if args.speed_bps <= 0:
        log.error("--speed-bps must be positive")
        return 2
    try:
        process = NicProcess(
            args.ifname, args.socket, NicPort(args.speed_bps, args.dscp_map), args.stats
        )
    except (PortSocketError, OSError) as exc:
        log.error("cannot start the NIC: %s", exc)
        return 1

    stop_on_signals(process.request_stop, log)
    process.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

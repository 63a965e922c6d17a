"""The switch: one single-threaded loop over the port sockets, the control socket and timers.

Why one thread and ``select``: the per-packet work is pure Python, so threads would only
add GIL hand-offs and locking around queues that every stage touches (enqueue accounting,
PFC generation and the scheduler share state).  One loop keeps every decision ordered and
cheap, and the management plane lives in another process behind the control socket, so it
can never stall forwarding.  ``select`` (not ``poll``/``epoll``) because it takes a
microsecond-resolution timeout: at 10 Mb/s a 1000-byte frame lasts 816 us, and the poll
timeout is the time to the next event (transmit opportunity, pause expiry, PFC refresh,
watchdog poll).

The rules -- buffer accounting and PFC generation, pause timers, queues and scheduling,
WRED/ECN, the watchdog -- are the shared model's (:mod:`lossless`); this module is the I/O
around them (sockets, shaper, control socket, timers) and drives the model on wall time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import socket
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from lab.vswitch import packet as pkt
from lab.vswitch.config import (
    ClassifyFault,
    DelayFault,
    DropFault,
    FaultConfig,
    FcsErrorFault,
    IcrcErrorFault,
    IgnorePfcFault,
    PortConfig,
    SwitchConfig,
    faults_to_json,
    parse_faults,
)
from lab.vswitch.control import ControlServer
from lab.vswitch.counters import PortCounters
from lab.vswitch.forwarding import NeighborTable, RouteTable, ecmp_index, ip_to_int
from lab.vswitch.rawsock import interface_running, open_port_socket
from lossless.clock import Clock, WallClock
from lossless.config import NUM_CLASSES, WatchdogConfig
from lossless.pfc import PFC_QUANTA_MAX, IngressAccounting, ReceivedPause
from lossless.queues import (
    MARKED,
    TRIMMED,
    XOFF_DUE,
    EgressQueue,
    QueuedPacket,
    Scheduler,
    admit_trimmed,
    eligible_classes,
    enqueue,
    mark_on_dequeue,
    scheduler_weights,
    trimmed_length,
)
from lossless.watchdog import PortWatchdog
from lossless.wred import EcnMarker

log = logging.getLogger("lab.vswitch")
watchdog_log = logging.getLogger("lab.vswitch.watchdog")

# Shaper: each port has a virtual clock ``tx_free_at`` that every frame advances by its wire
# time; a frame may go when the clock is not ahead of real time, so the long-run rate never
# exceeds the port speed.  While the port stays backlogged, the clock may lag real time by up
# to this much: a late wake-up (timer slack, another process on the core, a long loop
# iteration) is caught up instead of being lost bandwidth -- the port only sends what a real
# port would already have sent by now.  An idle port restarts from "now" (no burst credit).
SHAPER_CATCHUP_S: Final = 0.02
# A frame due within this much is sent now: below the loop's timer resolution, and it lets a
# fast port drain several frames per wake-up instead of one select() per frame.
TX_LOOKAHEAD_S: Final = 0.00005
RX_BATCH: Final = 32
MAX_POLL_TIMEOUT_S: Final = 0.5
ARP_RETRY_S: Final = 0.2
RX_BUFFER_BYTES: Final = 65536
# Carrier is polled like a switch's link scan: a link taken down is noticed within this.
LINK_POLL_S: Final = 0.1
# A delay fault holds at most this many frames per port (1 s at 10 Mb/s is ~1300 frames of
# 1000 bytes); beyond it frames are lost, counted as fault drops.
MAX_DELAYED_FRAMES: Final = 100_000
# At most this many remembered adjacencies (destination addresses); beyond it they are
# forgotten and rebuilt from the tables, like the route cache (lab.vswitch.forwarding).
ADJACENCY_LIMIT: Final = 65536
# ICMP error rate limit, per switch (token bucket), like a router's control-plane policer.
ICMP_RATE_PER_S: Final = 1000.0
ICMP_BURST: Final = 200.0
# A trimmed frame waits in the trim queue with its ingress port's index plus this times
# (1 + the queue it was trimmed from) in the packet's index field: its transmission is
# then counted as that queue's TX_TRIM (SAI_QUEUE_STAT_TX_TRIM_PACKETS) without a second
# structure a frame, and an untrimmed frame pays one integer comparison.
TRIM_TAG: Final = 1 << 16

PortOpener = Callable[[str], socket.socket]
LinkProbe = Callable[["Port"], bool]
Chance = tuple[random.Random, float]  # a fault's own generator and its percentage


def link_is_up(port: Port) -> bool:
    """The default link probe: the kernel's flags of the port's interface
    (:func:`lab.vswitch.rawsock.interface_running`)."""
    return interface_running(port.name, port.fd)


class Port:
    """Runtime state of one port: socket, counters, ingress accounting, egress queues."""

    def __init__(self, index: int, config: PortConfig, sock: socket.socket, now: float) -> None:
        self.index = index
        self.name = config.ifname
        self.mac = pkt.mac_to_bytes(config.mac)
        self.ip = ip_to_int(config.ipv4.ip)
        self.ip_bytes = config.ipv4.ip.packed
        self.net_mask = ip_to_int(config.ipv4.network.netmask)
        self.net_addr = ip_to_int(config.ipv4.network.network_address)
        self.speed_bps = float(config.speed_bps)
        self.byte_time = 8.0 / self.speed_bps
        self.sock = sock
        self.fd = sock.fileno()
        self.counters = PortCounters()
        self.ingress = IngressAccounting(self.speed_bps)
        self.pause = ReceivedPause(self.speed_bps)
        self.queues: list[EgressQueue[bytearray]] = [EgressQueue() for _ in range(NUM_CLASSES)]
        self.backlog = 0  # packets in all egress queues
        self.control_tx: deque[bytes] = deque()  # PFC, ARP, ICMP: ahead of data, still shaped
        self.tx_free_at = now
        self.tx_idle = True  # nothing was eligible at the last transmit opportunity
        # Compiled from the config by Switch._compile_port.
        self.scheduler = Scheduler([False] * NUM_CLASSES, [1] * NUM_CLASSES)
        self.watchdog = PortWatchdog(WatchdogConfig(), now)
        self.ecn: list[EcnMarker | None] = [None] * NUM_CLASSES
        self.queue_limit = 0  # tail-drop limit of this port's lossy egress queues
        # Packet trimming (lossless.queues, TRIMMED): the queue and DSCP of trimmed frames.
        self.trim_queue = 0
        self.trim_dscp = 0
        self.tc_of_dscp = [0] * 64  # ingress classification (trust, classify faults)
        self.tc_of_udp_port: dict[int, int] = {}  # a QoS policy on UDP ports, before DSCP
        self.oper_up = True
        # Faults (lab only).  The hot paths test one flag per frame: a port without faults
        # pays one attribute read on receive and one on transmit.
        self.rx_faulty = False
        self.rx_drop: Chance | None = None
        self.rx_fcs: Chance | None = None
        self.tx_faulty = False
        self.tx_drop: Chance | None = None
        self.tx_icrc: Chance | None = None
        self.delay_s = 0.0
        self.delay_line: deque[tuple[float, bytes | bytearray]] = deque()
        self.ignore_pfc = False

    def clear_faults(self) -> None:
        """No fault on this port (frames still in its delay line are sent on time)."""
        self.rx_faulty = self.tx_faulty = self.ignore_pfc = False
        self.rx_drop = self.rx_fcs = self.tx_drop = self.tx_icrc = None
        self.delay_s = 0.0

    def in_subnet(self, ip: int) -> bool:
        """Whether ``ip`` is in this port's connected subnet."""
        return (ip & self.net_mask) == self.net_addr

    def paused_view(self, now: float) -> list[bool]:
        """Effective pause per class (a watchdog-overridden pause does not count)."""
        return self.pause.blocked(now, self.watchdog.override_pause)


class Adjacency:
    """Where frames to one destination address go when its route has a single next hop that
    is resolved: the egress port and the frame's new Ethernet addresses (the next hop's MAC,
    then the port's).  What the route and neighbor lookups would answer, built from them."""

    __slots__ = ("addresses", "port")

    def __init__(self, port: Port, addresses: bytes) -> None:
        self.port = port
        self.addresses = addresses


class Switch:
    """The data plane.  ``run()`` loops until :meth:`request_stop` (or a signal wake-up)."""

    def __init__(
        self,
        config: SwitchConfig,
        open_socket: PortOpener = open_port_socket,
        clock: Clock | None = None,
        link_probe: LinkProbe = link_is_up,
    ) -> None:
        self.config = config
        self.faults: list[FaultConfig] = []
        self._link_probe = link_probe
        self.clock: Clock = clock if clock is not None else WallClock()
        self.started = self.clock.now()
        now = self.started
        self.ports: list[Port] = []
        try:
            for i, port_cfg in enumerate(config.ports):
                self.ports.append(Port(i, port_cfg, open_socket(port_cfg.ifname), now))
        except OSError:
            for port in self.ports:
                port.sock.close()
            raise
        self._port_by_fd = {p.fd: p for p in self.ports}
        index = {p.name: p.index for p in self.ports}
        self.routes = RouteTable(config, index)
        self.neighbors = NeighborTable(config, index)
        # Destination address -> adjacency, valid for the route and neighbor tables' versions
        # it was built from (a link change or a learned neighbor empties it).  A destination
        # seen here is never one of the switch's own addresses.
        self._adjacencies: dict[int, Adjacency] = {}
        self._adjacency_routes = -1
        self._adjacency_neighbors = -1
        self._local_ips = {p.ip for p in self.ports}
        self._arp_last_request: dict[int, float] = {}
        self._rx_buf = bytearray(RX_BUFFER_BYTES)
        self._timers_due = 0.0  # clock time _run_timers must next run
        self._link_next_poll = 0.0
        self._icmp_tokens = ICMP_BURST
        self._icmp_refilled_at = now
        self._running = False
        self._wakeup_r, self._wakeup_w = os.pipe()
        os.set_blocking(self._wakeup_r, False)
        os.set_blocking(self._wakeup_w, False)
        # Answers the control protocol from this loop (lab.vswitch.commands.serve_control).
        self.control: ControlServer | None = None
        self.apply_config(config)

    # ---------------------------------------------------------------- configuration

    def apply_config(self, config: SwitchConfig) -> None:
        """Compile QoS/buffer settings into the per-port fast-path tables (next packet on)."""
        self.config = config
        now = self.clock.now()
        for port in self.ports:
            self._compile_port(port, config, now)
        self._compile_classes()
        self._timers_due = 0.0  # watchdog periods may have changed: recompute at once

    def set_faults(self, data: Any) -> None:
        """Replace the whole fault set (validated first: :class:`ConfigError`, nothing changed)."""
        faults = parse_faults(data, [p.name for p in self.ports])
        self.faults = faults
        self._compile_faults()
        self._compile_classes()
        if faults:
            log.warning("faults set: %s", faults_to_json(faults))
        else:
            log.info("faults cleared")

    def _compile_classes(self) -> None:
        """Ingress classification per port: its trust, then any ``classify`` fault on top (so
        the "ASIC" keeps disagreeing with a QoS change made while the fault is on)."""
        by_name = {p.name: p for p in self.ports}
        for port in self.ports:
            port.tc_of_dscp = self.config.qos.port_classes(port.name)
            port.tc_of_udp_port = dict(self.config.qos.port(port.name).udp_dst_port_tc)
        for fault in self.faults:
            if isinstance(fault, ClassifyFault):
                by_name[fault.port].tc_of_dscp[fault.dscp] = fault.tc

    def _compile_faults(self) -> None:
        """Per-port fault state from :attr:`faults`; a fresh generator per fault (seeded), so a
        run is reproducible from the moment the fault set is replaced (a QoS change made
        meanwhile does not restart them)."""
        by_name = {p.name: p for p in self.ports}
        for port in self.ports:
            port.clear_faults()
        for fault in self.faults:
            port = by_name[fault.port]
            if isinstance(fault, DropFault):
                chance = (random.Random(fault.seed), fault.percent)
                if fault.direction == "rx":
                    port.rx_drop = chance
                else:
                    port.tx_drop = chance
            elif isinstance(fault, FcsErrorFault):
                port.rx_fcs = (random.Random(fault.seed), fault.percent)
            elif isinstance(fault, IcrcErrorFault):
                port.tx_icrc = (random.Random(fault.seed), fault.percent)
            elif isinstance(fault, IgnorePfcFault):
                port.ignore_pfc = True
                for tc in range(NUM_CLASSES):  # a pause already running is forgotten too
                    port.pause.clear(tc)
            elif isinstance(fault, DelayFault):
                port.delay_s = fault.ms / 1000.0
        for port in self.ports:
            port.rx_faulty = port.rx_drop is not None or port.rx_fcs is not None
            port.tx_faulty = (
                port.tx_drop is not None or port.tx_icrc is not None or port.delay_s > 0
            )

    def _compile_port(self, port: Port, config: SwitchConfig, now: float) -> None:
        qos = config.qos.port(port.name)
        buffer = config.buffer_for(port.name)
        lossless = qos.lossless()
        port.queue_limit = buffer.queue_limit_bytes
        port.ecn = [None] * NUM_CLASSES
        for tc, queue_cfg in qos.queues.items():
            if queue_cfg.ecn is not None:
                port.ecn[tc] = EcnMarker(queue_cfg.ecn)
        port.scheduler = Scheduler(*scheduler_weights(qos))
        for queue, trim_bytes in zip(port.queues, qos.trim_sizes(), strict=True):
            queue.trim_bytes = trim_bytes
        if qos.trim is not None:
            port.trim_queue = qos.trim.queue
            port.trim_dscp = qos.trim.dscp
        # PFC is generated and honoured for the same priorities (EOS no-drop).
        port.pause.configure(lossless)
        for tc in port.ingress.configure(buffer, lossless):
            self._send_pfc(port, tc, 0, now)  # release the upstream: no longer lossless
        for tc in port.watchdog.reconfigure(config.qos.watchdog_for(port.name), now):
            log.warning("%s priority %d: watchdog disabled, storm state cleared", port.name, tc)

    # ---------------------------------------------------------------- main loop

    def request_stop(self) -> None:
        """Ask the loop to exit (safe from a signal handler)."""
        self._running = False
        with contextlib.suppress(OSError):
            os.write(self._wakeup_w, b"\x00")

    @property
    def wakeup_fd(self) -> int:
        """Write end of the self-pipe; pass to ``signal.set_wakeup_fd``."""
        return self._wakeup_w

    def _start(self) -> list[int]:
        """Mark the loop running; the descriptors it always reads (ports, the wake-up pipe)."""
        self._running = True
        log.info("%s: forwarding on %s", self.config.name, ", ".join([p.name for p in self.ports]))
        return [p.fd for p in self.ports] + [self._wakeup_r]

    def run(self) -> None:
        """Forward until stopped."""
        base_fds = self._start()
        port_by_fd = self._port_by_fd
        control = self.control
        read_fds = base_fds
        write_fds: list[int] = []
        generation = -1
        clock_now = self.clock.now
        while self._running:
            now = clock_now()
            timeout = self._poll_timeout(now)
            if control is not None and control.generation != generation:
                generation = control.generation
                read_fds = base_fds + control.read_fds()
                write_fds = control.write_fds()
            readable, writable, _ = select.select(read_fds, write_fds, [], timeout)
            for fd in readable:
                port = port_by_fd.get(fd)
                if port is not None:
                    self._receive(port)
                elif fd == self._wakeup_r:
                    self._drain_wakeup()
                elif control is not None:
                    control.on_readable(fd)
            if control is not None:
                for fd in writable:
                    control.on_writable(fd)
            now = clock_now()
            if now >= self._timers_due:
                self._run_timers(now)
            for port in self.ports:
                if port.control_tx or port.backlog:
                    self._transmit(port, now)

    def close(self) -> None:
        """Close sockets and remove the control socket file."""
        if self.control is not None:
            self.control.close()
            self.control = None
        for port in self.ports:
            port.sock.close()
        for fd in (self._wakeup_r, self._wakeup_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _drain_wakeup(self) -> None:
        try:
            while os.read(self._wakeup_r, 512):
                pass
        except BlockingIOError:
            pass

    def _poll_timeout(self, now: float) -> float:
        deadline = min(now + MAX_POLL_TIMEOUT_S, self._timers_due)
        for port in self.ports:
            if port.control_tx:
                deadline = min(deadline, port.tx_free_at - TX_LOOKAHEAD_S)
            elif port.backlog:
                # A queued class that is paused (and not overridden by the watchdog) waits for
                # its pause to end, any other one for the shaper.
                pause_until = port.pause.paused_until
                override = port.watchdog.override_pause
                queues = port.queues
                for tc in range(NUM_CLASSES):
                    if not queues[tc].packets.count:
                        continue
                    if pause_until[tc] > now and not override[tc]:
                        deadline = min(deadline, pause_until[tc])
                    else:
                        deadline = min(deadline, port.tx_free_at - TX_LOOKAHEAD_S)
                        break
        return max(0.0, deadline - now)

    def _run_timers(self, now: float) -> None:
        """PFC XOFF refreshes, watchdog polls, link scan, delay lines; then note when the next
        one is due."""
        due = now + MAX_POLL_TIMEOUT_S
        if now >= self._link_next_poll:
            self._poll_links(now)
            self._link_next_poll = now + LINK_POLL_S
        due = min(due, self._link_next_poll)
        for port in self.ports:
            line = port.delay_line
            if line:
                while line and line[0][0] <= now:
                    self._send(port, line.popleft()[1])
                if line:
                    due = min(due, line[0][0])
            ingress = port.ingress
            if any(ingress.xoff_active):
                for tc in ingress.refresh_due(now):
                    self._send_pfc(port, tc, PFC_QUANTA_MAX, now)
                refresh = ingress.next_refresh()
                if refresh is not None:
                    due = min(due, refresh)
            watchdog = port.watchdog
            if watchdog.enabled:
                if now >= watchdog.next_poll:
                    self._poll_watchdog(port, now)
                due = min(due, watchdog.next_poll)
        self._timers_due = due

    def _poll_watchdog(self, port: Port, now: float) -> None:
        """One PFC watchdog poll of ``port``: log what it detected or restored, and act on a
        detected storm (ignore the pause, drop the priority's traffic) as configured."""
        watchdog = port.watchdog
        queued = [q.packets.count > 0 for q in port.queues]
        events = watchdog.poll(now, port.pause, queued)
        for event in events:
            if event.detected:
                watchdog_log.warning(
                    "%s priority %d: PFC storm detected (paused %.0f ms), action %s",
                    port.name,
                    event.priority,
                    event.paused_s * 1000,
                    watchdog.config.action,
                )
            else:
                watchdog_log.warning(
                    "%s priority %d: PFC storm restored", port.name, event.priority
                )
        for event in events:
            if not event.detected:
                continue
            if watchdog.override_pause[event.priority]:
                port.pause.clear(event.priority)
            if watchdog.drop_traffic[event.priority]:
                self._flush_queue(port, event.priority, now)

    # ---------------------------------------------------------------- receive path

    def _receive(self, port: Port) -> None:
        buf = self._rx_buf
        counters = port.counters
        # One timestamp per batch for forwarding (a batch is short);
        # PFC frames get their own, their arrival time is what the pause is measured from.
        clock_now = self.clock.now
        now = clock_now()
        if not port.oper_up:
            self._discard_input(port)
            return
        recv_into = port.sock.recv_into
        rx_faulty = port.rx_faulty
        for _ in range(RX_BATCH):
            try:
                n: int = recv_into(buf)
            except BlockingIOError:
                return
            except OSError as exc:
                log.error("%s: receive failed: %s", port.name, exc)
                return
            if rx_faulty and self._rx_fault(port):
                continue
            counters.rx_packets += 1
            counters.rx_bytes += n
            if n < pkt.ETH_HEADER_LEN:
                continue
            ethertype = (buf[12] << 8) | buf[13]
            if ethertype == pkt.ETHERTYPE_IPV4:
                self._on_ipv4(port, buf[:n], now)
            elif ethertype == pkt.ETHERTYPE_MAC_CONTROL:
                self._on_mac_control(port, buf[:n], clock_now())
            elif ethertype == pkt.ETHERTYPE_ARP:
                self._on_arp(port, buf[:n], now)

    def _discard_input(self, port: Port) -> None:
        """An oper-down port receives nothing: empty what the kernel still holds."""
        try:
            while True:
                port.sock.recv_into(self._rx_buf)
        except OSError:
            pass

    def _rx_fault(self, port: Port) -> bool:
        """Whether a receive fault eats the frame just read (lost on the wire, or damaged)."""
        drop = port.rx_drop
        if drop is not None and drop[0].random() * 100.0 < drop[1]:
            port.counters.fault_drops += 1  # never reached the port: no counter a switch has
            return True
        fcs = port.rx_fcs
        if fcs is not None and fcs[0].random() * 100.0 < fcs[1]:
            port.counters.rx_fcs_errors += 1
            port.counters.rx_errors += 1
            return True
        return False

    def _on_ipv4(self, port: Port, frame: bytearray, now: float) -> None:
        if len(frame) < 34:
            return
        fields = pkt.IPV4_FIELDS.unpack_from(frame)
        dst_mac: bytes = fields[0]
        if dst_mac != port.mac:
            return  # not routed to us (broadcast/multicast/other host): a router ignores it
        ver_ihl: int = fields[1]
        ihl = (ver_ihl & 0x0F) * 4
        if ver_ihl >> 4 != 4 or ihl < 20 or len(frame) < 14 + ihl:
            return
        ttl: int = fields[5]
        dst: int = fields[8]
        # The adjacency of a destination already forwarded to (most frames): no route or
        # neighbor lookup.  Only a miss can be a local address (those never get one).
        adjacency = self._adjacency(dst)
        if adjacency is None:
            adjacency = self._route(port, frame, ihl, dst, now)
            if adjacency is None:
                return
        elif ttl <= 1:
            port.counters.drop_ttl += 1
            self._time_exceeded(port, frame, ihl, now)
            return
        pkt.ETH_ADDRESSES.pack_into(frame, 0, adjacency.addresses)
        frame[22] = ttl - 1
        # RFC 1624 incremental update for TTL-1 (the word ttl<<8|proto drops by 0x100):
        # HC' = ~(~HC + ~m + m') and ~m + m' == 0xFEFF; one carry fold is enough here.
        header_checksum: int = fields[7]
        total = (header_checksum ^ 0xFFFF) + 0xFEFF
        csum = ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF
        frame[24] = csum >> 8
        frame[25] = csum & 0xFF
        tos: int = fields[2]
        tc = port.tc_of_dscp[tos >> 2]
        if port.tc_of_udp_port:
            flags_offset: int = fields[3]
            offset_low: int = fields[4]
            protocol: int = fields[6]
            if protocol == pkt.IP_PROTO_UDP and not (flags_offset & 0x3F or offset_low):
                l4 = 14 + ihl  # a first fragment or a whole datagram
                tc = port.tc_of_udp_port.get((frame[l4 + 2] << 8) | frame[l4 + 3], tc)
        self._enqueue(port, adjacency.port, tc, frame, now)

    def _route(
        self, port: Port, frame: bytearray, ihl: int, dst: int, now: float
    ) -> Adjacency | None:
        """The slow path of :meth:`_on_ipv4`: a frame to the switch itself, one that expired
        (its TTL, byte 22, not yet decremented), then the route and neighbor lookups.  None:
        the frame was handled here (answered, dropped and counted); else where to send it,
        remembered for ``dst`` unless ECMP chose among several next hops."""
        if dst in self._local_ips:
            self._on_local_ipv4(port, frame, ihl, now)
            return None
        if frame[22] <= 1:
            port.counters.drop_ttl += 1
            self._time_exceeded(port, frame, ihl, now)
            return None
        hops = self.routes.lookup(dst)
        if hops is None:
            port.counters.drop_no_route += 1
            return None
        hop = hops[0] if len(hops) == 1 else hops[ecmp_index(frame, ihl, len(hops))]
        out_port = self.ports[hop.port]
        nh_ip = dst if hop.ip is None else hop.ip
        neighbor = self.neighbors.entries.get(nh_ip)
        if neighbor is None:
            port.counters.drop_arp_unresolved += 1
            self._resolve(out_port, nh_ip, now)
            return None
        adjacency = Adjacency(out_port, neighbor[0] + out_port.mac)
        if len(hops) == 1:  # ECMP picks per frame: only a single path is remembered
            if len(self._adjacencies) >= ADJACENCY_LIMIT:
                self._adjacencies.clear()
            self._adjacencies[dst] = adjacency
        return adjacency

    def _adjacency(self, dst: int) -> Adjacency | None:
        """The remembered adjacency of ``dst``, if the tables did not change since."""
        routes = self.routes.version
        neighbors = self.neighbors.version
        if routes != self._adjacency_routes or neighbors != self._adjacency_neighbors:
            self._adjacencies.clear()
            self._adjacency_routes = routes
            self._adjacency_neighbors = neighbors
            return None
        return self._adjacencies.get(dst)

    def _time_exceeded(self, port: Port, frame: bytearray, ihl: int, now: float) -> None:
        """Answer an expired packet like a router: ICMP time exceeded from the ingress port's
        address (so a traceroute hop names the link the packet came over), rate-limited."""
        src = int.from_bytes(frame[26:30], "big")
        if (
            src == 0
            or src >= 0xE0000000  # multicast, reserved, broadcast
            or (frame[20] & 0x1F)
            or frame[21]  # not the first fragment (RFC 1812 4.3.2.7)
        ):
            return
        if frame[23] == pkt.IP_PROTO_ICMP and (
            len(frame) <= 14 + ihl or frame[14 + ihl] in pkt.ICMP_ERROR_TYPES
        ):
            return
        tokens = min(
            ICMP_BURST, self._icmp_tokens + (now - self._icmp_refilled_at) * ICMP_RATE_PER_S
        )
        self._icmp_refilled_at = now
        if tokens < 1.0:
            self._icmp_tokens = tokens
            port.counters.icmp_rate_limited += 1
            return
        self._icmp_tokens = tokens - 1.0
        hops = self.routes.lookup(src)
        if hops is None:
            return
        reply = bytearray(
            pkt.build_icmp_time_exceeded(frame, port.ip_bytes, pkt.ZERO_MAC, pkt.ZERO_MAC)
        )
        hop = hops[0] if len(hops) == 1 else hops[ecmp_index(reply, 20, len(hops))]
        out_port = self.ports[hop.port]
        nh_ip = src if hop.ip is None else hop.ip
        neighbor = self.neighbors.entries.get(nh_ip)
        if neighbor is None:
            self._resolve(out_port, nh_ip, now)
            return
        reply[0:12] = neighbor[0] + out_port.mac
        out_port.control_tx.append(bytes(reply))
        port.counters.icmp_time_exceeded += 1

    def _on_local_ipv4(self, port: Port, frame: bytearray, ihl: int, now: float) -> None:
        """Packets to a switch address: answer ICMP echo, drop the rest."""
        if frame[23] != pkt.IP_PROTO_ICMP or len(frame) < 14 + ihl + 8 or frame[14 + ihl] != 8:
            return
        src = int.from_bytes(frame[26:30], "big")
        hops = self.routes.lookup(src)
        if hops is None:
            return
        out_port = self.ports[hops[0].port]
        nh_ip = src if hops[0].ip is None else hops[0].ip
        neighbor = self.neighbors.entries.get(nh_ip)
        if neighbor is None:
            self._resolve(out_port, nh_ip, now)
            return
        out_port.control_tx.append(pkt.build_icmp_echo_reply(frame, out_port.mac, neighbor[0]))

    def _on_arp(self, port: Port, frame: bytearray, now: float) -> None:
        parsed = pkt.parse_arp(frame)
        if parsed is None:
            return
        op, sender_mac, sender_ip, _target_mac, target_ip = parsed
        sender = int.from_bytes(sender_ip, "big")
        learnable = sender and port.in_subnet(sender) and sender != port.ip
        if (
            learnable
            and not sender_mac[0] & 1
            and self.neighbors.learn(sender, sender_mac, port.index)
        ):
            log.info("%s: learned %s is-at %s", port.name, sender_ip.hex(), sender_mac.hex())
        if op == 1 and target_ip == port.ip_bytes:
            reply = pkt.build_arp(2, port.mac, port.ip_bytes, sender_mac, sender_ip)
            port.control_tx.append(reply)

    def _on_mac_control(self, port: Port, frame: bytearray, now: float) -> None:
        if len(frame) < 34 or frame[14] != 0x01 or frame[15] != 0x01:
            return  # not PFC (e.g. 802.3x PAUSE, opcode 0x0001): not used in this lab
        class_enable = frame[17]
        counters = port.counters
        pause = port.pause
        override = port.watchdog.override_pause
        for tc in range(NUM_CLASSES):
            if not (class_enable >> tc) & 1:
                continue
            offset = 18 + 2 * tc
            quanta = (frame[offset] << 8) | frame[offset + 1]
            # Counted whether or not the port acts on it (see lossless.pfc).
            if quanta:
                counters.pfc_rx_xoff[tc] += 1
            else:
                counters.pfc_rx_xon[tc] += 1
            if not port.ignore_pfc:
                pause.receive(tc, quanta, now, override[tc])

    def _resolve(self, port: Port, ip: int, now: float) -> None:
        """Send (rate-limited) an ARP request for an unresolved next hop."""
        if now - self._arp_last_request.get(ip, -1e9) < ARP_RETRY_S:
            return
        self._arp_last_request[ip] = now
        request = pkt.build_arp(1, port.mac, port.ip_bytes, pkt.ZERO_MAC, ip.to_bytes(4, "big"))
        port.control_tx.append(request)

    # ---------------------------------------------------------------- buffers and queues

    def _enqueue(
        self, in_port: Port, out_port: Port, tc: int, frame: bytearray, now: float
    ) -> None:
        """Admission (watchdog, headroom/tail drop), ECN marking, accounting, PFC XOFF."""
        watchdog = out_port.watchdog
        if watchdog.drop_traffic[tc]:
            watchdog.classes[tc].dropped_packets += 1
            return
        tos = frame[15]
        status = enqueue(
            out_port.queues[tc],
            in_port.ingress,
            out_port.ecn[tc],
            (frame, in_port.index, tc),
            len(frame),
            (tos & pkt.ECN_MASK) in (1, 2),
            out_port.queue_limit,
        )
        if not status:
            return  # a headroom drop (lossless) or a tail drop (lossy), counted
        if status & TRIMMED:
            status = self._trim(in_port, out_port, tc, frame)
            if not status:
                return
        elif status & MARKED:
            _set_ce(frame)
        out_port.backlog += 1
        if status & XOFF_DUE:
            self._send_pfc(in_port, tc, PFC_QUANTA_MAX, now)

    def _trim(self, in_port: Port, out_port: Port, tc: int, frame: bytearray) -> int:
        """A frame queue ``tc`` of ``out_port`` trims (:data:`lossless.queues.TRIMMED`): cut
        to the queue's trim size, its DSCP set to the port's trim DSCP (ECN bits kept, header
        checksum recomputed), offered to the trim queue (SONiC packet-trimming-design.md
        §2.2; SAI-Proposal-Packet-Trimming.md).  The IPv4 total length is left as the sender
        wrote it: the designs name only size, DSCP and queue, and the lab chose the length
        that lets a receiver see the cut (captured length < 14 + total length).  The
        status :func:`lossless.queues.admit_trimmed` answers."""
        queue = out_port.queues[tc]
        length = trimmed_length(len(frame), queue.trim_bytes)
        if length < len(frame):
            del frame[length:]
        tos = frame[15]
        frame[15] = (out_port.trim_dscp << 2) | (tos & pkt.ECN_MASK)
        ihl = (frame[14] & 0x0F) * 4
        frame[24] = frame[25] = 0
        csum = pkt.checksum(frame[14 : 14 + ihl])
        frame[24] = csum >> 8
        frame[25] = csum & 0xFF
        trim_tc = out_port.trim_queue
        return admit_trimmed(
            queue,
            out_port.queues[trim_tc],
            in_port.ingress,
            (frame, in_port.index + TRIM_TAG * (tc + 1), trim_tc),
            length,
            out_port.queue_limit,
        )

    def _release(self, packet: QueuedPacket[bytearray], now: float) -> None:
        """A queued frame left the switch (sent or dropped): uncharge its ingress."""
        frame, in_index, tc = packet
        in_port = self.ports[in_index % TRIM_TAG]
        if in_port.ingress.release(tc, len(frame)):
            self._send_pfc(in_port, tc, 0, now)

    def _send_pfc(self, port: Port, tc: int, quanta: int, now: float) -> None:
        """Queue XOFF (quanta > 0) or XON for priority ``tc`` out of ``port``, ahead of data."""
        ingress = port.ingress
        if quanta:
            ingress.xoff_sent(tc, now)
            port.counters.pfc_tx_xoff[tc] += 1
            self._timers_due = min(self._timers_due, now + ingress.refresh_interval)
        else:
            ingress.xon_sent(tc)
            port.counters.pfc_tx_xon[tc] += 1
        port.control_tx.append(pkt.build_pfc_single(port.mac, tc, quanta))

    def _flush_queue(self, port: Port, tc: int, now: float, count: bool = True) -> None:
        """Discard everything queued in ``tc`` (watchdog drop action, or the link went down)."""
        queue = port.queues[tc]
        dropped = 0
        while queue.packets.count:
            self._release(queue.pop(), now)
            dropped += 1
        port.backlog -= dropped
        if count:
            port.watchdog.classes[tc].dropped_packets += dropped

    def _transmit(self, port: Port, now: float) -> None:
        """Send while the shaper allows: control frames first, then the scheduler's pick."""
        if not port.oper_up:
            port.control_tx.clear()
            return
        tx_free_at = port.tx_free_at
        if port.tx_idle:
            if tx_free_at < now:
                tx_free_at = now
            port.tx_idle = False
        earliest_start = now - SHAPER_CATCHUP_S
        horizon = now + TX_LOOKAHEAD_S
        queues = port.queues
        control_tx = port.control_tx
        counters = port.counters
        byte_time = port.byte_time
        send = port.sock.send
        eligible: list[bool] | None = None  # pauses cannot change within this call
        while tx_free_at <= horizon:
            if control_tx:
                frame: bytes | bytearray = control_tx.popleft()
            elif port.backlog:
                if eligible is None:
                    eligible = eligible_classes(
                        queues, port.pause, port.watchdog.override_pause, now
                    )
                dequeued = self._dequeue(port, eligible, now)
                if dequeued is None:
                    port.tx_idle = True  # only paused classes left: no credit while paused
                    break
                frame = dequeued
            else:
                port.tx_idle = True
                break
            if port.tx_faulty:
                self._send_faulty(port, frame, now)
            else:
                try:
                    send(frame)
                except OSError as exc:  # e.g. ENOBUFS: the frame is lost on the "wire"
                    log.debug("%s: send failed: %s", port.name, exc)
            length = len(frame)
            counters.tx_packets += 1
            counters.tx_bytes += length
            start = tx_free_at if tx_free_at > earliest_start else earliest_start
            wire_bytes = length if length > pkt.MIN_FRAME_LEN else pkt.MIN_FRAME_LEN
            tx_free_at = start + (wire_bytes + pkt.WIRE_OVERHEAD) * byte_time
        port.tx_free_at = tx_free_at

    def _dequeue(self, port: Port, eligible: list[bool], now: float) -> bytearray | None:
        """The scheduler's next frame of ``port`` off its queue, accounted as sent, its ingress
        uncharged (None: no eligible class)."""
        queues = port.queues
        tc = port.scheduler.pick(queues, eligible)
        if tc is None:
            return None
        queue = queues[tc]
        frame, in_index, in_tc = queue.pop()
        marker = port.ecn[tc]
        if (
            marker is not None
            and marker.at_dequeue
            and (frame[15] & pkt.ECN_MASK) in (1, 2)
            and mark_on_dequeue(queue, marker)
        ):
            _set_ce(frame)
        length = len(frame)
        if not queue.packets.count:
            eligible[tc] = False
        port.backlog -= 1
        queue.tx_packets += 1
        queue.tx_bytes += length
        if in_index >= TRIM_TAG:
            port.counters.trim_sent[(in_index >> 16) - 1] += 1
            in_index &= TRIM_TAG - 1
        in_port = self.ports[in_index]
        if in_port.ingress.release(in_tc, length):
            self._send_pfc(in_port, in_tc, 0, now)
        return frame

    def _send(self, port: Port, frame: bytes | bytearray) -> None:
        try:
            port.sock.send(frame)
        except OSError as exc:
            log.debug("%s: send failed: %s", port.name, exc)

    def _send_faulty(self, port: Port, frame: bytes | bytearray, now: float) -> None:
        """The wire after a faulty transmitter: the switch counted the frame as sent."""
        drop = port.tx_drop
        if drop is not None and drop[0].random() * 100.0 < drop[1]:
            port.counters.fault_drops += 1
            return
        icrc = port.tx_icrc
        # Only RoCEv2 frames carry an ICRC to break, and only they draw from the generator:
        # ``percent`` is a share of the RoCE frames, reproducible whatever else is sent.
        if icrc is not None and pkt.roce_flip_offset(frame) and icrc[0].random() * 100.0 < icrc[1]:
            # Queued frames are the switch's own bytearrays; control frames are immutable.
            damaged = frame if isinstance(frame, bytearray) else bytearray(frame)
            pkt.corrupt_roce(damaged)
            frame = damaged
            port.counters.fault_corrupted += 1
        if port.delay_s > 0.0:
            line = port.delay_line
            if len(line) >= MAX_DELAYED_FRAMES:
                port.counters.fault_drops += 1
                return
            release = now + port.delay_s
            line.append((release, frame))
            if release < self._timers_due:
                self._timers_due = release
            return
        self._send(port, frame)

    def _poll_links(self, now: float) -> None:
        """Link scan: a port whose carrier went away is oper-down (queues flushed, routes over
        it withdrawn); back up, it is used again."""
        changed = False
        for port in self.ports:
            up = self._link_probe(port)
            if up == port.oper_up:
                continue
            changed = True
            port.oper_up = up
            if up:
                log.warning("%s: link up", port.name)
                port.tx_idle = True
                continue
            log.warning("%s: link down", port.name)
            for tc in range(NUM_CLASSES):
                self._flush_queue(port, tc, now, count=False)
                port.pause.clear(tc)
            port.control_tx.clear()
            port.delay_line.clear()
        if changed:
            self.routes.set_down(frozenset(p.index for p in self.ports if not p.oper_up))


def _set_ce(frame: bytearray) -> None:
    """Mark an ECN-capable IPv4 frame CE, its header checksum updated (RFC 1624)."""
    tos = frame[15]
    old_word = (frame[14] << 8) | tos
    frame[15] = tos | pkt.ECN_CE
    csum = pkt.checksum_update((frame[24] << 8) | frame[25], old_word, old_word | pkt.ECN_CE)
    frame[24] = csum >> 8
    frame[25] = csum & 0xFF

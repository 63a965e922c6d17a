"""Host NIC counters: RDMA hardware counters from sysfs and per-priority pause from ethtool.

Sources (cited in ``exporters/METRICS.md``):

- ``/sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name>`` — one integer per file; the
  layout is the kernel's (Documentation/ABI/stable/sysfs-class-infiniband,
  drivers/infiniband/core/sysfs.c). Which names exist is the driver's choice:
  mlx5 (ConnectX) defines them in drivers/infiniband/hw/mlx5/counters.c, each group only when
  the firmware has the capability (``cong_cnts`` — np_cnp_sent, np_ecn_marked_roce_packets,
  rp_cnp_handled, rp_cnp_ignored — need ``cc_query_allowed``; ``out_of_sequence`` needs
  ``out_of_seq_cnt``; duplicate_request and packet_seq_err need
  ``retransmission_q_counters``); Soft-RoCE (rxe) defines its own set in
  drivers/infiniband/sw/rxe/rxe_hw_counters.c and has no DCQCN, so no np_/rp_ counter at all.
  Only counters whose file exists and reads an integer are returned: a counter the NIC does
  not provide is absent, never 0. ``lifespan`` in the same directory is not a counter (the
  counters' cache lifetime in milliseconds, ``show_stats_lifespan`` in core/sysfs.c) and is
  never read. The netdev of a RoCE port is ``ports/<port>/gid_attrs/ndevs/<index>`` (or the
  PCI function's ``device/net/*``; rxe has no PCI function, only its GIDs).
- ``ethtool -S <netdev>`` — mlx5 "Priority Port Counters" ``rx_prio<p>_pause``,
  ``rx_prio<p>_pause_duration`` (microseconds), ``tx_prio<p>_pause``,
  ``tx_prio<p>_pause_duration`` (kernel Documentation/networking/device_drivers/ethernet/
  mellanox/mlx5/counters.rst). mlx5e prints them only for priorities with PFC enabled
  (``mlx5e_grp_per_prio_pfc_fill_strings`` iterates the PFC bitmap): absent priorities of a
  netdev that lists some read 0 in :class:`PortPause` (its ``listed`` says which were read, and
  the exporter serves only those). A netdev that lists none (virtio_net, veth, a NIC with PFC off
  on every priority) does not report per-priority pause at all: its reading is None, not eight
  zeros.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from common.text import is_decimal

# mlx5's congestion (DCQCN) and sequence-error counters (drivers/infiniband/hw/mlx5/counters.c).
MLX5_COUNTERS = (
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "out_of_sequence",
    "packet_seq_err",
)
# rxe's counters that tell RoCE health (names: drivers/infiniband/sw/rxe/rxe_hw_counters.c;
# where each is counted is in METRICS.md). Left out: ack_deferred (the completer ran deferred
# because responses queued up: CPU scheduling, not the network) and lifespan (not a counter).
RXE_COUNTERS = (
    # Loss in the fabric, seen from both ends of a reliable connection.
    "rcvd_seq_err",  # requester got a NAK "PSN sequence error": the peer saw a gap
    "out_of_seq_request",  # responder got a PSN past the expected one: something was lost
    "duplicate_request",  # responder got a PSN it already had: a retransmission arrived
    "completer_retry_err",  # requester started retransmitting (NAK or ACK timeout)
    "retry_exceeded_err",  # retransmissions ran out: the work request failed, QP in error
    # Receiver not ready (a host that posts receives too slowly, not the fabric).
    "rcvd_rnr_err",
    "send_rnr_err",
    "retry_rnr_exceeded_err",
    # The local netdev: transmit failures and link-down events.
    "send_err",
    "link_downed",
    # Traffic, the denominators for the rates above.
    "sent_pkts",
    "rcvd_pkts",
    "rdma_sends",
    "rdma_recvs",
)
# Every counter read, in this order; a name two drivers share (duplicate_request) once.
HW_COUNTERS = tuple(dict.fromkeys((*MLX5_COUNTERS, *RXE_COUNTERS)))
# What proves DCQCN ran on a port: the notification point sent CNPs and the reaction point
# handled them. A NIC without them (rxe) cannot tell whether congestion control acted.
DCQCN_COUNTERS = ("np_cnp_sent", "rp_cnp_handled")
ETHTOOL_TIMEOUT_S = 5.0
MICROSECONDS = 1e-6
PAUSE_RE = re.compile(r"(rx|tx)_prio([0-7])_pause(_duration)?")
COUNTER_RE = re.compile(r"[0-9]+")
ZERO8 = (0,) * 8
# ethtool's do_gstats exits 94 with "no stats available" when the driver has no statistics.
ETHTOOL_NO_STATS = "no stats available"


class NicReadError(Exception):
    """A host NIC source could not be read; ``source`` is sysfs or ethtool."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(message)
        self.source = source


@dataclass(frozen=True)
class PortPause:
    """Per-priority PFC of one netdev: frames and paused microseconds, rx and tx.
    ``listed``: the priorities ethtool listed (the others read 0 here, but were not read)."""

    rx_frames: tuple[int, ...] = ZERO8
    tx_frames: tuple[int, ...] = ZERO8
    rx_duration_us: tuple[int, ...] = ZERO8
    tx_duration_us: tuple[int, ...] = ZERO8
    listed: tuple[int, ...] = tuple(range(8))


@dataclass(frozen=True)
class NicCounters:
    """One reading of the host's RDMA NICs.

    ``hw``: per RDMA port, only the counters the NIC provides (a port that provides none of
    :data:`HW_COUNTERS` maps to an empty dict). ``pause``: per netdev, None when ethtool lists
    no per-priority pause counter for it (the NIC does not report pause, which is not 0 pause).
    """

    hw: Mapping[tuple[str, str], Mapping[str, int]] = field(default_factory=dict)
    pause: Mapping[str, PortPause | None] = field(default_factory=dict)
    collected_at: float = 0.0


def missing_dcqcn_counters(counters: Iterable[str]) -> tuple[str, ...]:
    """The :data:`DCQCN_COUNTERS` not among ``counters`` (names, or a port's reading)."""
    have = set(counters)
    return tuple(name for name in DCQCN_COUNTERS if name not in have)


def provides_dcqcn(counters: Iterable[str]) -> bool:
    """True for an mlx5-style NIC whose counters show DCQCN at work (:data:`DCQCN_COUNTERS`);
    False for one that cannot tell (rxe): a verdict that needs CNPs is then unverified."""
    return not missing_dcqcn_counters(counters)


def infiniband_class(sysfs_root: Path) -> Path:
    return sysfs_root / "class" / "infiniband"


def host_nic_present(sysfs_root: Path = Path("/sys")) -> bool:
    """True when the host has RDMA devices (the ``--host-nic`` auto mode)."""
    base = infiniband_class(sysfs_root)
    return base.is_dir() and any(base.iterdir())


def _read_int(path: Path) -> int | None:
    """A sysfs counter; None when the driver does not provide it: no file, a read that fails
    (core/sysfs.c ``show_hw_stats`` returns the driver's error, e.g. EINVAL) or text that is
    not a non-negative integer ("N/A")."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if COUNTER_RE.fullmatch(text) else None


def read_hw_counters(sysfs_root: Path) -> dict[tuple[str, str], dict[str, int]]:
    """``{(rdma_device, port): {counter: value}}`` for every port with hw_counters, holding
    only the :data:`HW_COUNTERS` the port provides (see :func:`_read_int`)."""
    base = infiniband_class(sysfs_root)
    try:
        devices = sorted(p.name for p in base.iterdir())
    except OSError as exc:
        raise NicReadError("sysfs", f"cannot list {base}: {exc.strerror}") from None
    found: dict[tuple[str, str], dict[str, int]] = {}
    for device in devices:
        ports = base / device / "ports"
        if not ports.is_dir():
            continue
        for port in sorted(p.name for p in ports.iterdir() if is_decimal(p.name)):
            counters_dir = ports / port / "hw_counters"
            if not counters_dir.is_dir():
                continue
            values = {}
            for name in HW_COUNTERS:
                value = _read_int(counters_dir / name)
                if value is not None:
                    values[name] = value
            found[(device, port)] = values
    return found


def _gid_netdevs(base: Path) -> set[tuple[str, str, str]]:
    """``(rdma_device, port, netdev)`` for every used GID slot (``gid_attrs/ndevs/<index>``
    holds the netdev a RoCE GID belongs to; an unused slot reads EINVAL)."""
    found: set[tuple[str, str, str]] = set()
    for ndev in base.glob("*/ports/*/gid_attrs/ndevs/*"):
        try:
            name = ndev.read_text().strip()
        except OSError:
            continue
        if name:
            found.add((ndev.parents[4].name, ndev.parents[2].name, name))
    return found


def rdma_netdevs(sysfs_root: Path) -> list[str]:
    """The Ethernet netdevs behind the RDMA devices (RoCE ports), sorted, unique."""
    base = infiniband_class(sysfs_root)
    if not base.is_dir():
        return []
    from_gids = _gid_netdevs(base)
    names = {netdev for _, _, netdev in from_gids}
    with_gids = {device for device, _, _ in from_gids}
    for device in base.iterdir():
        net = device / "device" / "net"
        if device.name not in with_gids and net.is_dir():
            names |= {p.name for p in net.iterdir()}
    return sorted(names)


def rdma_devices_on(interface: str, sysfs_root: Path = Path("/sys")) -> list[str]:
    """The RDMA ports (``device/port``) whose GIDs sit on ``interface``: a NIC whose RDMA
    engine would take UDP 4791 frames addressed to this interface before the kernel sees them."""
    base = infiniband_class(sysfs_root)
    if not base.is_dir():
        return []
    found = {
        f"{device}/{port}" for device, port, netdev in _gid_netdevs(base) if netdev == interface
    }
    # A NIC whose GID table is still empty (no address yet) gets one the moment the interface
    # has an address: the PCI function's netdev counts too (no port known, the device alone).
    named = {port.partition("/")[0] for port in found}
    for device in base.iterdir():
        if device.name not in named and (device / "device" / "net" / interface).is_dir():
            found.add(device.name)
    return sorted(found)


def parse_ethtool_stats(text: str) -> dict[str, int]:
    """``name: value`` lines of ``ethtool -S`` (names stripped: some mlx5 versions printed a
    trailing space in ``tx_pause_storm_warning_events ``); non-integers are skipped."""
    stats: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.rpartition(":")
        if not sep:
            continue
        value = value.strip()
        if COUNTER_RE.fullmatch(value):
            stats[name.strip()] = int(value)
    return stats


def pause_from_stats(stats: Mapping[str, int]) -> PortPause | None:
    """Per-priority pause frames and durations; priorities ethtool does not list are 0 and
    left out of ``listed`` (mlx5 lists only PFC-enabled ones). None when it lists no
    ``rx_prio<p>_pause``-style counter at all: the driver does not report per-priority pause
    (virtio_net, veth)."""
    matches = [(PAUSE_RE.fullmatch(name), value) for name, value in stats.items()]
    found = [(match.groups(), value) for match, value in matches if match]
    if not found:
        return None
    table = {
        ("rx", False): [0] * 8,
        ("tx", False): [0] * 8,
        ("rx", True): [0] * 8,
        ("tx", True): [0] * 8,
    }
    for (direction, priority, duration), value in found:
        table[(direction, duration is not None)][int(priority)] = value
    return PortPause(
        rx_frames=tuple(table[("rx", False)]),
        tx_frames=tuple(table[("tx", False)]),
        rx_duration_us=tuple(table[("rx", True)]),
        tx_duration_us=tuple(table[("tx", True)]),
        listed=tuple(sorted({int(priority) for (_, priority, _), _ in found})),
    )


def run_ethtool(interface: str) -> str:
    """``ethtool -S IF``; "" when the driver has no statistics at all (nothing to report is
    not a failure); raises :class:`NicReadError` on any other failure."""
    try:
        done = subprocess.run(
            ["ethtool", "-S", interface],
            capture_output=True,
            text=True,
            timeout=ETHTOOL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NicReadError("ethtool", f"ethtool -S {interface}: {exc}") from None
    if done.returncode != 0:
        if ETHTOOL_NO_STATS in done.stderr or ETHTOOL_NO_STATS in done.stdout:
            return ""
        raise NicReadError("ethtool", f"ethtool -S {interface}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class HostNicReader:
    """Reads every RDMA port's hw_counters and its netdev's per-priority pause counters.

    ``sysfs_root`` is overridable so tests run on a fake tree laid out like /sys;
    ``ethtool`` takes an interface name and returns ``ethtool -S`` text.
    """

    sysfs_root: Path = Path("/sys")
    ethtool: Callable[[str], str] = run_ethtool
    interfaces: tuple[str, ...] | None = None  # None: the RDMA devices' netdevs

    def read(self) -> NicCounters:
        hw = read_hw_counters(self.sysfs_root)
        pause: dict[str, PortPause | None] = {}
        for interface in self.interfaces or tuple(rdma_netdevs(self.sysfs_root)):
            pause[interface] = pause_from_stats(parse_ethtool_stats(self.ethtool(interface)))
        return NicCounters(hw=hw, pause=pause, collected_at=time.time())

"""Host NIC counters: RDMA hardware counters from sysfs and per-priority pause from ethtool.

Sources (cited in ``exporters/METRICS.md``):

- ``/sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name>`` — one integer per file; the
  layout and names are the kernel's (Documentation/ABI/stable/sysfs-class-infiniband; the mlx5
  names np_cnp_sent, np_ecn_marked_roce_packets, rp_cnp_handled, rp_cnp_ignored,
  out_of_sequence, packet_seq_err as read by prometheus/procfs ``sysfs/class_infiniband.go``).
  The netdev of a RoCE port is ``ports/<port>/gid_attrs/ndevs/0`` (or the PCI function's
  ``device/net/*``).
- ``ethtool -S <netdev>`` — mlx5 "Priority Port Counters" ``rx_prio<p>_pause``,
  ``rx_prio<p>_pause_duration`` (microseconds), ``tx_prio<p>_pause``,
  ``tx_prio<p>_pause_duration`` (kernel Documentation/networking/device_drivers/ethernet/
  mellanox/mlx5/counters.rst). mlx5e prints them only for priorities with PFC enabled
  (``mlx5e_grp_per_prio_pfc_fill_strings`` iterates the PFC bitmap), so absent priorities are 0.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

HW_COUNTERS = (
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "out_of_sequence",
    "packet_seq_err",
)
ETHTOOL_TIMEOUT_S = 5.0
MICROSECONDS = 1e-6
PAUSE_RE = re.compile(r"(rx|tx)_prio([0-7])_pause(_duration)?")
ZERO8 = (0,) * 8


class NicReadError(Exception):
    """A host NIC source could not be read; ``source`` is sysfs or ethtool."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(message)
        self.source = source


@dataclass(frozen=True)
class PortPause:
    """Per-priority PFC of one netdev: frames and paused microseconds, rx and tx."""

    rx_frames: tuple[int, ...] = ZERO8
    tx_frames: tuple[int, ...] = ZERO8
    rx_duration_us: tuple[int, ...] = ZERO8
    tx_duration_us: tuple[int, ...] = ZERO8


@dataclass(frozen=True)
class NicCounters:
    """One reading of the host's RDMA NICs."""

    hw: Mapping[tuple[str, str], Mapping[str, int]] = field(default_factory=dict)
    pause: Mapping[str, PortPause] = field(default_factory=dict)
    collected_at: float = 0.0


def infiniband_class(sysfs_root: Path) -> Path:
    return sysfs_root / "class" / "infiniband"


def host_nic_present(sysfs_root: Path = Path("/sys")) -> bool:
    """True when the host has RDMA devices (the ``--host-nic`` auto mode)."""
    base = infiniband_class(sysfs_root)
    return base.is_dir() and any(base.iterdir())


def _read_int(path: Path) -> int | None:
    """A sysfs counter; None when the driver does not provide it (missing, EINVAL, N/A)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def read_hw_counters(sysfs_root: Path) -> dict[tuple[str, str], dict[str, int]]:
    """``{(rdma_device, port): {counter: value}}`` for every port with hw_counters."""
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
        for port in sorted(p.name for p in ports.iterdir() if p.name.isdigit()):
            counters_dir = ports / port / "hw_counters"
            if not counters_dir.is_dir():
                continue
            values = {}
            for name in HW_COUNTERS:
                value = _read_int(counters_dir / name)
                values[name] = value if value is not None else 0
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
        if value.isdigit():
            stats[name.strip()] = int(value)
    return stats


def pause_from_stats(stats: Mapping[str, int]) -> PortPause:
    """Per-priority pause frames and durations; priorities ethtool does not list are 0."""
    table = {
        ("rx", False): [0] * 8,
        ("tx", False): [0] * 8,
        ("rx", True): [0] * 8,
        ("tx", True): [0] * 8,
    }
    for name, value in stats.items():
        match = PAUSE_RE.fullmatch(name)
        if match:
            direction, priority, duration = match.groups()
            table[(direction, duration is not None)][int(priority)] = value
    return PortPause(
        rx_frames=tuple(table[("rx", False)]),
        tx_frames=tuple(table[("tx", False)]),
        rx_duration_us=tuple(table[("rx", True)]),
        tx_duration_us=tuple(table[("tx", True)]),
    )


def run_ethtool(interface: str) -> str:
    """``ethtool -S IF``; raises :class:`NicReadError` on any failure."""
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
        pause = {}
        for interface in self.interfaces or tuple(rdma_netdevs(self.sysfs_root)):
            pause[interface] = pause_from_stats(parse_ethtool_stats(self.ethtool(interface)))
        return NicCounters(hw=hw, pause=pause, collected_at=time.time())

"""Which GID index perftest's ``-x`` gets, and its ``--tclass``.

A RoCE port carries one GID per (address, RoCE version): link-local and IPv4-mapped, each as
RoCE v1 and RoCE v2 on mlx5, only v2 on rxe. perftest left to itself picks "the best" GID
(``get_best_gid_index`` in src/perftest_communication.c: any IPv4-mapped GID, RoCE v2 over
v1), the *first* such one: with two addresses on the netdev, or a VLAN netdev on the same port,
it can pick the wrong one, and RoCE v1 is not routable at all. So the agent names the index.

Sources, read-only:

- sysfs (kernel Documentation/ABI/stable/sysfs-class-infiniband, drivers/infiniband/core/
  sysfs.c): ``class/infiniband/DEV/ports/P/gids/I`` (16 bytes as 8 colon groups, all zero for
  an unused slot), ``gid_attrs/types/I`` ("RoCE v2" or "IB/RoCE v1") and ``gid_attrs/ndevs/I``
  (the netdev); reading the type or netdev of an unused slot fails with EINVAL.
- the text of NVIDIA's ``show_gids`` (MLNX_OFED /usr/sbin/show_gids, Mellanox 2016; explained
  at https://enterprise-support.nvidia.com/s/article/understanding-show-gids-script): a header
  ``DEV PORT INDEX GID IPv4 VER DEV``, a dashes line, one tab-separated row per used GID
  (the IPv4 column, with trailing spaces, only for GIDs starting with 0000; VER is ``v1``/``v2``
  cut from the type file; the last DEV is the netdev) and ``n_gids_found=N``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from agent.errors import AgentError, printable
from agent.intent.tokens import check_rdma_port_ref
from common.text import is_decimal

MAX_GID_SLOTS = 4096  # rxe has 1024 slots, mlx5 up to 256: more is not a GID table
MAX_SHOW_GIDS_BYTES = 1 << 20
MAX_LISTED = 16
_SYSFS_READ_LIMIT = 256

Version = Literal["v1", "v2"]

_GID_RE = re.compile(r"[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}")
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
# A Linux interface name: IFNAMSIZ - 1 characters, no '/' and no whitespace.
_NETDEV_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")


class GidSelectionError(AgentError):
    """No usable RoCE v2 GID, or input that is not a GID table."""


def check_rdma_device(name: str) -> str:
    """An RDMA device name as ``agent.intent.model.RdmaPortRef`` allows it, without the port: it
    becomes a sysfs path component and perftest's ``-d``."""
    try:
        check_rdma_port_ref(name)
    except (ValueError, TypeError) as exc:
        raise GidSelectionError(printable(str(exc))) from None
    if "/" in name:
        raise GidSelectionError(
            f"RDMA device: Expected: a device name without its port Actual: {printable(name)!r}"
        )
    return name


def check_netdev(name: str) -> str:
    if not _NETDEV_RE.fullmatch(name) or name in (".", ".."):
        raise GidSelectionError(
            f"netdev: Expected: a Linux interface name (1-15 characters, no '/' or spaces) "
            f"Actual: {printable(name[:40])!r}"
        )
    return name


def check_port(port: int) -> int:
    # perftest's -i is a uint8_t (CHECK_VALUE in src/perftest_parameters.c); ports start at 1
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 255:
        raise GidSelectionError(f"RDMA port: Expected: 1-255 Actual: {port!r}")
    return port


@dataclass(frozen=True)
class GidEntry:
    """One used slot of a port's GID table."""

    device: str
    port: int
    index: int
    gid: str  # as sysfs prints it: 8 groups of 4 hex digits
    version: Version | None  # None: the type could not be read
    netdev: str | None
    source: Literal["sysfs", "show_gids"] = "sysfs"

    @property
    def ipv4(self) -> ipaddress.IPv4Address | None:
        """The IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``), else None."""
        return ipaddress.IPv6Address(self.gid).ipv4_mapped

    def describe(self) -> str:
        address = str(self.ipv4) if self.ipv4 else str(ipaddress.IPv6Address(self.gid))
        version = f"RoCE {self.version}" if self.version else "type unknown"
        netdev = self.netdev or "no netdev"
        return f"index {self.index} {address} {version} {netdev}"


def _read_small(path: Path) -> str | None:
    """A sysfs attribute, or None when it cannot be read (EINVAL for an unused GID slot)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_SYSFS_READ_LIMIT)
    except OSError:
        return None
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None


def _version(type_text: str | None) -> Version | None:
    # "RoCE v2", "IB/RoCE v1" (core/cache.c gid_type_str); show_gids greps "[Vv].*" from it
    if type_text is None:
        return None
    lowered = type_text.lower()
    if lowered.endswith("v2"):
        return "v2"
    if lowered.endswith("v1"):
        return "v1"
    return None


def read_gid_table(
    sysfs_root: Path, device: str, port: int, *, netdev: str | None = None
) -> list[GidEntry]:
    """The used GID slots of ``device`` port ``port`` under ``sysfs_root`` (``/sys`` on a
    host, a recorded tree in tests), by index. ``netdev`` only names the interface in
    errors."""
    check_rdma_device(device)
    check_port(port)
    base = sysfs_root / "class" / "infiniband" / device / "ports" / str(port)
    gids_dir = base / "gids"
    where = f"{device} port {port}" + (f" netdev {printable(netdev)}" if netdev else "")
    entries = (_sysfs_entry(base, device, port, index) for index in _gid_slots(gids_dir, where))
    return [entry for entry in entries if entry is not None]


def _gid_slots(gids_dir: Path, where: str) -> list[int]:
    """The GID slot indexes listed under ``gids_dir``, in order, at most MAX_GID_SLOTS."""
    try:
        names = [entry.name for entry in gids_dir.iterdir()]
    except OSError as exc:
        raise GidSelectionError(
            f"{where}: Expected: a GID table at {printable(str(gids_dir))} "
            f"Actual: {printable(exc.strerror or type(exc).__name__)}"
        ) from None
    indexes = sorted(int(name) for name in names if is_decimal(name) and len(name) < 6)
    if len(indexes) > MAX_GID_SLOTS:
        raise GidSelectionError(
            f"{where}: Expected: at most {MAX_GID_SLOTS} GID slots Actual: {len(indexes)}"
        )
    return indexes


def _sysfs_entry(base: Path, device: str, port: int, index: int) -> GidEntry | None:
    """The GID in slot ``index`` of the port at ``base``; None for an unused slot."""
    gid = _read_small(base / "gids" / str(index))
    if gid is None or not _GID_RE.fullmatch(gid) or gid == _ZERO_GID:
        return None
    netdev = _read_small(base / "gid_attrs" / "ndevs" / str(index)) or None
    if netdev is not None and not _NETDEV_RE.fullmatch(netdev):
        netdev = None
    return GidEntry(
        device=device,
        port=port,
        index=index,
        gid=gid.lower(),
        version=_version(_read_small(base / "gid_attrs" / "types" / str(index))),
        netdev=netdev,
    )


def parse_show_gids(text: str) -> list[GidEntry]:
    """The rows of ``show_gids`` output, checked against its ``n_gids_found`` line."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SHOW_GIDS_BYTES:
        raise GidSelectionError(
            f"show_gids: Expected: at most {MAX_SHOW_GIDS_BYTES} bytes Actual: {size} bytes"
        )
    entries: list[GidEntry] = []
    found: int | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        at = f"show_gids line {number}"
        tokens = raw.split()
        if not tokens or tokens[0] in ("DEV", "---"):
            continue
        if tokens[0].startswith("n_gids_found="):
            count = tokens[0].partition("=")[2]
            if not is_decimal(count) or len(tokens) != 1:
                raise GidSelectionError(
                    f"{at}: Expected: n_gids_found=<count> Actual: {printable(raw[:80])!r}"
                )
            found = int(count)
            continue
        entries.append(_show_gids_row(tokens, at, raw))
    if found is None:
        raise GidSelectionError(
            "show_gids: Expected: a closing n_gids_found=<count> line Actual: none (cut short?)"
        )
    if found != len(entries):
        raise GidSelectionError(
            f"show_gids: Expected: {found} GID rows (n_gids_found) Actual: {len(entries)}"
        )
    return entries


def _show_gids_row(tokens: list[str], at: str, raw: str) -> GidEntry:
    """One row: DEV PORT INDEX GID [IPv4] [VER] [DEV], its IPv4 column checked against
    the GID."""
    shown = printable(raw[:120])
    entry = _show_gids_slot(tokens, at, shown)
    rest = tokens[4:]
    if rest and re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}", rest[0]):
        column = rest.pop(0)
        if str(entry.ipv4) != column:
            raise GidSelectionError(
                f"{at}: IPv4 column: Expected: {entry.ipv4 or 'none'} (from the GID) "
                f"Actual: {printable(column)}"
            )
    version: Version | None = None
    if rest and rest[0] in ("v1", "v2"):
        version = "v1" if rest.pop(0) == "v1" else "v2"
    netdev = rest.pop(0) if rest else None
    if rest or (netdev is not None and not _NETDEV_RE.fullmatch(netdev)):
        raise GidSelectionError(f"{at}: Expected: ... VER DEV Actual: {shown!r}")
    return replace(entry, version=version, netdev=netdev)


def _show_gids_slot(tokens: list[str], at: str, shown: str) -> GidEntry:
    """DEV PORT INDEX GID of a row, checked; no version or netdev yet."""
    if len(tokens) < 4 or not is_decimal(tokens[1]) or not is_decimal(tokens[2]):
        raise GidSelectionError(f"{at}: Expected: DEV PORT INDEX GID ... Actual: {shown!r}")
    device, port, index, gid = tokens[0], int(tokens[1]), int(tokens[2]), tokens[3]
    try:
        check_rdma_device(device)
        check_port(port)
    except GidSelectionError as exc:
        raise GidSelectionError(f"{at}: {exc}") from None
    if not _GID_RE.fullmatch(gid) or index >= MAX_GID_SLOTS:
        raise GidSelectionError(f"{at}: Expected: INDEX and a GID like sysfs's Actual: {shown!r}")
    return GidEntry(device, port, index, gid.lower(), None, None, "show_gids")


def _listing(entries: list[GidEntry]) -> str:
    if not entries:
        return "no GIDs"
    shown = "; ".join(entry.describe() for entry in entries[:MAX_LISTED])
    more = len(entries) - MAX_LISTED
    return shown + (f"; and {more} more" if more > 0 else "")


def select_gid(
    entries: Iterable[GidEntry],
    *,
    device: str,
    port: int,
    netdev: str,
    ipv4: ipaddress.IPv4Address | str | None = None,
) -> GidEntry:
    """The RoCE v2 GID perftest should use on ``device``/``port`` for ``netdev``: the one
    whose IPv4-mapped address is ``ipv4`` when given, else the single IPv4-mapped RoCE v2 GID
    on ``netdev``. Anything else is an error naming the device, port, netdev and the GIDs."""
    check_rdma_device(device)
    check_port(port)
    check_netdev(netdev)
    wanted = ipaddress.IPv4Address(ipv4) if ipv4 is not None else None
    table = sorted(
        (e for e in entries if e.device == device and e.port == port), key=lambda e: e.index
    )
    where = f"{device} port {port} netdev {netdev}"
    candidates = [e for e in table if e.version == "v2" and e.ipv4 and e.netdev == netdev]
    if wanted is not None:
        matching = [e for e in candidates if e.ipv4 == wanted]
        if matching:
            return matching[0]
        raise GidSelectionError(
            f"{where}: Expected: a RoCE v2 GID for {wanted} Actual: {_listing(table)}"
        )
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise GidSelectionError(
            f"{where}: Expected: one RoCE v2 GID with an IPv4 address Actual: {_listing(table)}"
        )
    raise GidSelectionError(
        f"{where}: Expected: one RoCE v2 IPv4 GID (or the interface's address to choose) "
        f"Actual: {len(candidates)}: {_listing(candidates)}"
    )


def gid_index(
    sysfs_root: Path,
    device: str,
    port: int,
    netdev: str,
    ipv4: ipaddress.IPv4Address | str | None = None,
) -> int:
    """:func:`select_gid` over the sysfs tree at ``sysfs_root``: the index for ``-x``."""
    table = read_gid_table(sysfs_root, device, port, netdev=netdev)
    return select_gid(table, device=device, port=port, netdev=netdev, ipv4=ipv4).index


def tclass_for(dscp: int, ecn_capable: bool = True) -> int:
    """perftest's ``--tclass``: the GRH traffic class, which RoCEv2 carries as the IP TOS
    byte (DSCP in the upper six bits, ECN in the lower two).

    ECT(0) (binary 10) is set because DCQCN needs ECN-capable packets: a switch only marks CE
    on ECT traffic (RFC 3168) and drops or leaves the rest, so without ECT the receiver never
    sends CNPs and senders never slow down (Zhu et al., "Congestion Control for Large-Scale
    RDMA Deployments", SIGCOMM 2015). NVIDIA's RoCE guides use ``--tclass=106`` for DSCP 26:
    26 << 2 | 2. mlx5 NICs set ECT themselves when ECN is enabled; rxe and other NICs send the
    traffic class as given.
    """
    if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= 63:
        raise ValueError(f"DSCP: Expected: 0-63 Actual: {dscp!r}")
    return dscp << 2 | (0b10 if ecn_capable else 0)

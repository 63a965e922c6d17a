"""Parsers of the host pre-flight sources (:mod:`agent.observe.hostsources`), one per output
format, each tested on recorded outputs (tests/data/hosts/, README there says where each
format comes from). A text that is not the format raises :class:`HostParseError` naming the
source and the line; the checks turn that into "unverified", never into a pass.

Formats and their sources:

- ``dcb pfc show dev IF``: iproute2 dcb/dcb_pfc.c (``dcb_pfc_print``) and the dcb-pfc(8)
  example: ``pfc-cap 8 macsec-bypass off delay 4096`` then ``prio-pfc 0:off ... 7:on``.
- ``dcb -N app show dev IF dscp-prio``: iproute2 dcb/dcb_app.c and the dcb-app(8) example:
  ``dscp-prio 0:0 24:2 24:3 48:6`` (-N: numeric DSCPs; a DSCP may map to several priorities),
  nothing when the table has no DSCP entry.
- ``/sys/class/infiniband/DEV/tc/PORT/traffic_class``: MLNX_OFED only, ``Global tclass=N``
  when a global traffic class is forced, else empty, then any per-address rules
  (``traffic_class_show`` in MLNX_OFED's drivers/infiniband/hw/mlx5/main_ext.c).
- ``devlink dev param show DEV name P``: iproute2 devlink/devlink.c (``pr_out_param``,
  ``pr_out_param_value``): ``name P type generic`` then ``values:`` and one ``cmode C value V``
  line per configuration mode.
- ``ibv_devinfo -d DEV -i PORT``: rdma-core libibverbs/examples/devinfo.c: ``port:\\tN`` then
  ``state:``, ``max_mtu:``, ``active_mtu:`` as ``4096 (5)`` and ``link_layer:``.
- ``nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader``: one ``00000000:3B:00.0`` a line
  (nvidia-smi(1), ``--help-query-gpu``: "pci.bus_id: PCI bus id as domain:bus:device.function,
  in hex"), 8-digit domain where sysfs has 4.
- ``lspci -D -vvv``: pciutils lspci.c (``show_device``: a line ``DOMAIN:BUS:DEV.FN class:
  name`` per function, then tab-indented details) and ls-ecaps.c (``cap_acs``: ``ACSCtl:\\t
  SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-``); without
  root lspci prints ``Capabilities: <access denied>`` instead of the capabilities.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from agent.errors import AgentError, printable
from agent.intent.sizing import IB_MTUS
from common.text import is_decimal

_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_MAX_TEXT = 4 << 20  # lspci -vvv of a large GPU server is ~1 MB; more is not lspci


class HostParseError(AgentError):
    """A source's output is not in the format its parser reads."""


def _lines(text: str, what: str) -> list[str]:
    if len(text) > _MAX_TEXT:
        raise HostParseError(
            f"{what}: Expected: at most {_MAX_TEXT} characters Actual: {len(text)}"
        )
    return text.splitlines()


def _bad(what: str, number: int, expected: str, raw: str) -> HostParseError:
    return HostParseError(
        f"{what} line {number}: Expected: {expected} Actual: {printable(raw.strip()[:120])!r}"
    )


# --------------------------------------------------------------------------- MTU


def parse_mtu(text: str) -> int:
    """``/sys/class/net/IF/mtu``: one decimal number (Documentation/ABI/testing/sysfs-class-net)."""
    value = text.strip()
    if not is_decimal(value) or len(value) > 6:
        raise HostParseError(f"mtu: Expected: a number Actual: {printable(value[:40])!r}")
    return int(value)


# --------------------------------------------------------------------------- dcb


@dataclass(frozen=True)
class DcbPfc:
    pfc_cap: int | None
    enabled: tuple[int, ...]  # the priorities with PFC on


def parse_dcb_pfc(text: str) -> DcbPfc:
    """``dcb pfc show dev IF``: the ``prio-pfc`` line (and ``pfc-cap`` when shown)."""
    what = "dcb pfc show"
    cap: int | None = None
    enabled: list[int] | None = None
    for number, raw in enumerate(_lines(text, what), 1):
        tokens = raw.split()
        if not tokens:
            continue
        if "pfc-cap" in tokens:
            at = tokens.index("pfc-cap")
            if at + 1 >= len(tokens) or not is_decimal(tokens[at + 1]):
                raise _bad(what, number, "pfc-cap N", raw)
            cap = int(tokens[at + 1])
        if tokens[0] == "prio-pfc":
            enabled = _prio_pfc(tokens[1:], what, number, raw)
    if enabled is None:
        raise HostParseError(f"{what}: Expected: a prio-pfc line Actual: {printable(text[:120])!r}")
    return DcbPfc(cap, tuple(enabled))


def _prio_pfc(pairs: list[str], what: str, number: int, raw: str) -> list[int]:
    seen: dict[int, bool] = {}
    for pair in pairs:
        prio, _, state = pair.partition(":")
        if not is_decimal(prio) or int(prio) > 7 or state not in ("on", "off"):
            raise _bad(what, number, "PRIO:on|off for priorities 0-7", raw)
        seen[int(prio)] = state == "on"
    if sorted(seen) != list(range(8)):
        raise _bad(what, number, "one entry for each priority 0-7", raw)
    return [p for p, on in sorted(seen.items()) if on]


def parse_dcb_app_dscp(text: str) -> dict[int, tuple[int, ...]]:
    """``dcb -N app show dev IF dscp-prio``: DSCP -> the priorities its APP entries give (an
    empty table prints nothing)."""
    what = "dcb app show dscp-prio"
    table: dict[int, list[int]] = {}
    for number, raw in enumerate(_lines(text, what), 1):
        tokens = raw.split()
        if not tokens:
            continue
        if tokens[0] != "dscp-prio":
            raise _bad(what, number, "dscp-prio DSCP:PRIO ...", raw)
        for pair in tokens[1:]:
            dscp, _, prio = pair.partition(":")
            if not (is_decimal(dscp) and is_decimal(prio) and int(dscp) <= 63 and int(prio) <= 7):
                raise _bad(
                    what, number, "numeric DSCP:PRIO pairs (dcb -N), DSCP 0-63, PRIO 0-7", raw
                )
            table.setdefault(int(dscp), []).append(int(prio))
    return {dscp: tuple(prios) for dscp, prios in sorted(table.items())}


# --------------------------------------------------------------------------- mlx5 tclass


@dataclass(frozen=True)
class TrafficClass:
    exists: bool  # the sysfs file exists (MLNX_OFED mlx5)
    global_tclass: int | None  # the forced traffic class (TOS byte), None when not forced
    rules: tuple[str, ...] = ()  # per-address rules, as printed


def parse_traffic_class(text: str) -> TrafficClass:
    """The ``traffic_class`` source: ``absent: PATH`` (no such file), or the file."""
    what = "traffic_class"
    stripped = text.strip()
    if stripped.startswith("absent: "):
        return TrafficClass(False, None)
    forced: int | None = None
    rules: list[str] = []
    for number, raw in enumerate(_lines(stripped, what), 1):
        line = raw.strip()
        if not line:
            continue
        match = re.fullmatch(r"Global tclass=(\d{1,3})", line)
        if match and number == 1:
            forced = int(match.group(1))
            if forced > 255:
                raise _bad(what, number, "Global tclass=0-255", raw)
        elif re.fullmatch(r"(?:[a-z_0-9]+=[^,\s]+,)+tclass=\d{1,3}", line):
            rules.append(line)  # e.g. dst_ip=10.0.0.0/8,tclass=106 (tclass_print_*)
        else:
            raise _bad(what, number, "Global tclass=N or a rule ending in tclass=N", raw)
    return TrafficClass(True, forced, tuple(rules))


# --------------------------------------------------------------------------- RDMA device


@dataclass(frozen=True)
class RdmaDevice:
    link_layer: str
    parent: str | None  # rxe: the netdev it runs on
    driver: str | None  # the PCI driver (mlx5_core, ...), None for software devices
    pci: str | None  # the PCI function, e.g. 0000:3b:00.0

    @property
    def is_rxe(self) -> bool:
        return self.parent is not None and self.driver is None


def parse_rdma_device(text: str) -> RdmaDevice:
    """The ``rdma_device`` source's ``key=value`` lines."""
    what = "rdma_device"
    values: dict[str, str] = {}
    for number, raw in enumerate(_lines(text, what), 1):
        if not raw.strip():
            continue
        key, sep, value = raw.partition("=")
        if not sep or key not in ("link_layer", "parent", "driver", "pci"):
            raise _bad(what, number, "link_layer=, parent=, driver= or pci=", raw)
        values[key] = value.strip()
    if not values.get("link_layer"):
        raise HostParseError(f"{what}: Expected: link_layer=... Actual: {printable(text[:120])!r}")
    pci = values.get("pci") or None
    pci = pci if pci and _BDF.fullmatch(pci) else None
    driver = values.get("driver") or None
    # readlink -f of a missing driver link ends in ".../driver" (or "device"): no driver.
    driver = None if pci is None or driver in ("driver", "device") else driver
    return RdmaDevice(values["link_layer"], values.get("parent") or None, driver, pci)


def parse_devlink_param(text: str, name: str) -> dict[str, str]:
    """``devlink dev param show DEV name NAME``: configuration mode -> value."""
    what = f"devlink param {name}"
    values: dict[str, str] = {}
    named = False
    for raw in _lines(text, what):
        tokens = raw.split()
        if tokens[:2] == ["name", name]:
            named = True
        match = re.search(r"\bcmode (\w+) value (\S+)", raw)
        if match and named:
            values[match.group(1)] = match.group(2)
    if not named or not values:
        raise HostParseError(
            f"{what}: Expected: name {name} ... cmode C value V Actual: {printable(text[:120])!r}"
        )
    return values


# --------------------------------------------------------------------------- ibv_devinfo


@dataclass(frozen=True)
class IbvPort:
    port: int
    state: str | None
    max_mtu: int | None
    active_mtu: int | None
    link_layer: str | None


def parse_ibv_devinfo(text: str) -> dict[int, IbvPort]:
    """``ibv_devinfo -d DEV [-i PORT]``: the port blocks."""
    what = "ibv_devinfo"
    ports: dict[int, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(_lines(text, what), 1):
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        value = value.strip()
        if key == "port":
            if not is_decimal(value):
                raise _bad(what, number, "port:\tN", raw)
            current = ports.setdefault(int(value), {})
        elif current is not None and key in ("state", "max_mtu", "active_mtu", "link_layer"):
            current[key] = value
    if not ports:
        raise HostParseError(f"{what}: Expected: a port: block Actual: {printable(text[:120])!r}")
    return {port: _ibv_port(port, fields) for port, fields in ports.items()}


def _ibv_port(port: int, fields: dict[str, str]) -> IbvPort:
    def mtu(key: str) -> int | None:
        # devinfo.c mtu_str(): "4096 (5)"; "invalid MTU" for anything else
        match = re.fullmatch(r"(\d+) \(\d\)", fields.get(key, ""))
        return int(match.group(1)) if match and int(match.group(1)) in IB_MTUS else None

    state = fields.get("state")
    return IbvPort(port, state.split()[0] if state else None, mtu("max_mtu"),
                   mtu("active_mtu"), fields.get("link_layer"))  # fmt: skip


# --------------------------------------------------------------------------- PCIe


def parse_gpu_bus_ids(text: str) -> list[str]:
    """nvidia-smi's ``pci.bus_id`` lines as sysfs names (``0000:3b:00.0``)."""
    what = "nvidia-smi pci.bus_id"
    ids = []
    for number, raw in enumerate(_lines(text, what), 1):
        line = raw.strip().lower()
        if not line:
            continue
        match = re.fullmatch(r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])", line)
        if not match or int(match.group(1), 16) > 0xFFFF:
            raise _bad(what, number, "DOMAIN:BUS:DEVICE.FUNCTION in hex", raw)
        ids.append(
            f"{int(match.group(1), 16):04x}:{match.group(2)}:{match.group(3)}.{match.group(4)}"
        )
    return ids


@dataclass
class PciPaths:
    rdma: dict[str, str] = field(default_factory=dict)  # RDMA device -> its PCI function
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)  # function -> chain

    def chain(self, bdf: str) -> tuple[str, ...] | None:
        """The PCI functions from the root port down to ``bdf`` (itself last)."""
        return self.paths.get(bdf)


def parse_pci_paths(text: str) -> PciPaths:
    """The ``pci_paths`` source: ``ib DEV PATH`` and ``pci PATH`` lines (sysfs device paths
    such as ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0``)."""
    what = "pci_paths"
    found = PciPaths()
    for number, raw in enumerate(_lines(text, what), 1):
        tokens = raw.split()
        if not tokens:
            continue
        if tokens[0] == "ib" and len(tokens) == 3:
            bdf = PurePosixPath(tokens[2]).name
            if _BDF.fullmatch(bdf):
                found.rdma[tokens[1]] = bdf
            continue
        if tokens[0] != "pci" or len(tokens) != 2:
            raise _bad(what, number, "ib DEV PATH or pci PATH", raw)
        chain = tuple(part for part in PurePosixPath(tokens[1]).parts if _BDF.fullmatch(part))
        if not chain:
            raise _bad(what, number, "a sysfs PCI device path", raw)
        found.paths[chain[-1]] = chain
    return found


def bridges_between(gpu: tuple[str, ...], nic: tuple[str, ...]) -> list[str]:
    """The PCI functions a GPU-to-NIC transfer passes, endpoints excluded: both chains below
    their last common function, and that function (the switch port or root port where the
    paths meet). Without a common function (different root complexes) every bridge of both."""
    common = 0
    while common < min(len(gpu), len(nic)) - 1 and gpu[common] == nic[common]:
        common += 1
    meet = [gpu[common - 1]] if common else []
    return meet + list(gpu[common:-1]) + list(nic[common:-1])


@dataclass(frozen=True)
class AcsControl:
    function: str
    description: str  # lspci's "class: name" after the address
    flags: dict[str, bool] | None  # ACSCtl flags, None: the function has no ACS capability
    access_denied: bool = False  # lspci ran without root: capabilities not shown

    @property
    def enabled(self) -> list[str]:
        return [name for name, on in (self.flags or {}).items() if on]


def parse_lspci_acs(text: str) -> dict[str, AcsControl]:
    """Every function of ``lspci -D -vvv`` with its ``ACSCtl`` flags."""
    what = "lspci -vvv"
    found: dict[str, AcsControl] = {}
    current: str | None = None
    for number, raw in enumerate(_lines(text, what), 1):
        if raw and not raw[0].isspace():
            address, _, rest = raw.partition(" ")
            if not _BDF.fullmatch(address.lower()):
                raise _bad(what, number, "DOMAIN:BUS:DEV.FN at the start (lspci -D)", raw)
            current = address.lower()
            found[current] = AcsControl(current, rest.strip(), None)
            continue
        line = raw.strip()
        if current is None or not line:
            continue
        if line.startswith("Capabilities: <access denied>"):
            found[current] = AcsControl(current, found[current].description, None, True)
        elif line.startswith("ACSCtl:"):
            flags = _acs_flags(line.removeprefix("ACSCtl:"), what, number, raw)
            found[current] = AcsControl(current, found[current].description, flags)
    return found


def _acs_flags(text: str, what: str, number: int, raw: str) -> dict[str, bool]:
    flags = {}
    for token in text.split():
        if len(token) < 2 or token[-1] not in "+-":
            raise _bad(what, number, "ACSCtl: Name+ or Name- flags", raw)
        flags[token[:-1]] = token[-1] == "+"
    if not flags:
        raise _bad(what, number, "ACSCtl flags", raw)
    return flags

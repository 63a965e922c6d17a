"""Interface names: EOS ``Ethernet3`` <-> data plane ``eth3`` (containerlab naming), ranges."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_DATAPLANE_RE = re.compile(r"^eth(\d+)$")
# EOS accepts any abbreviation of "Ethernet" down to "Et" (case-insensitive).
_EOS_RE = re.compile(r"^(?:e(?:t(?:h(?:e(?:r(?:n(?:e(?:t)?)?)?)?)?)?))(\d[\d,\-]*)$", re.IGNORECASE)
_RANGE_ITEM_RE = re.compile(r"^(\d+)(?:-(\d+))?$")


class InterfaceNameError(ValueError):
    """A name that is not an Ethernet interface or range."""


def eos_name(dataplane_name: str) -> str:
    """``eth3`` -> ``Ethernet3``."""
    match = _DATAPLANE_RE.match(dataplane_name)
    if match is None:
        raise InterfaceNameError(f"not a data-plane port name (ethN): {dataplane_name!r}")
    return f"Ethernet{int(match.group(1))}"


def dataplane_name(eos: str) -> str:
    """``Ethernet3`` -> ``eth3``."""
    return f"eth{interface_number(eos)}"


def interface_number(eos: str) -> int:
    """``Ethernet3`` -> 3."""
    if not eos.startswith("Ethernet") or not eos[8:].isdigit():
        raise InterfaceNameError(f"not an EOS Ethernet name: {eos!r}")
    return int(eos[8:])


def short_name(eos: str) -> str:
    """``Ethernet3`` -> ``Et3`` (the form EOS uses in tables and prompts)."""
    return f"Et{interface_number(eos)}"


def parse_number_list(text: str) -> list[int]:
    """``1-3,5`` -> [1, 2, 3, 5]; raises :class:`InterfaceNameError`."""
    numbers: list[int] = []
    for item in text.split(","):
        match = _RANGE_ITEM_RE.match(item)
        if match is None:
            raise InterfaceNameError(f"bad interface range item {item!r}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        if last < first:
            raise InterfaceNameError(f"descending range {item!r}")
        numbers.extend(range(first, last + 1))
    return sorted(set(numbers))


def parse_interface_range(text: str) -> list[str]:
    """``Ethernet1-2,4`` / ``Et1`` / ``eth1,3`` -> EOS names, sorted."""
    match = _EOS_RE.match(text)
    if match is None:
        raise InterfaceNameError(f"not an Ethernet interface: {text!r}")
    return [f"Ethernet{n}" for n in parse_number_list(match.group(1))]


def compact_ranges(numbers: Iterable[int]) -> str:
    """[1, 2, 3, 5] -> ``1-3,5``."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for n in ordered:
        if start is None:
            start = prev = n
        elif prev is not None and n == prev + 1:
            prev = n
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def range_label(names: Sequence[str]) -> str:
    """Prompt label of one interface or a range: ``Et1``, ``Et1-4``, ``Et1,3``."""
    return "Et" + compact_ranges(interface_number(n) for n in names)


def sort_key(eos: str) -> int:
    """Sort interfaces numerically (Ethernet2 before Ethernet10)."""
    return interface_number(eos)


# Front-panel names per NOS for data-plane port ethN (N from 1). SONiC names a port after its
# first SerDes lane, so four-lane ports read Ethernet0, Ethernet4, ... (sonic-buildimage
# device/virtual/x86_64-kvm_x86_64-r0/Force10-S6000/port_config.ini, the virtual switch's
# port map); Cumulus Linux names them swpN (NVIDIA Cumulus Linux user guide, "Interface
# Configuration and Management"). EOS is EthernetN; NX-OS names a fixed switch's front panel
# Ethernet1/N, slot 1 (Cisco Nexus 9000 NX-OS Interfaces Configuration Guide, "interface
# ethernet slot/port").
SONIC_LANES_PER_PORT = 4
_NOS_PORT_PATTERNS = {"sonic": r"Ethernet(\d+)", "nvue": r"swp(\d+)", "nxos": r"Ethernet1/(\d+)"}


def nos_port_name(nos: str, index: int) -> str:
    """The NOS's name of data-plane port ``eth<index>``."""
    if nos == "sonic":
        return f"Ethernet{(index - 1) * SONIC_LANES_PER_PORT}"
    if nos == "nvue":
        return f"swp{index}"
    if nos == "nxos":
        return f"Ethernet1/{index}"
    return f"Ethernet{index}"


def nos_port_index(nos: str, name: str) -> int | None:
    """The data-plane index of the NOS port ``name`` (None when it is not such a name)."""
    match = re.fullmatch(_NOS_PORT_PATTERNS.get(nos, r"Ethernet(\d+)"), name)
    if match is None:
        return None
    number = int(match.group(1))
    if nos == "sonic":
        return number // SONIC_LANES_PER_PORT + 1 if number % SONIC_LANES_PER_PORT == 0 else None
    return number if number >= 1 else None

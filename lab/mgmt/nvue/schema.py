"""The part of NVUE's object model the lab switch accepts: ``nv set``/``nv unset`` paths.

Every path and value range below is written from NVIDIA's Cumulus Linux 5.x user guide
(CumulusNetworks/docs, ``content/cumulus-linux-514/Layer-1-and-Switch-Ports/
Quality-of-Service/_index.md`` at 0d142afe and ``.../RDMA-over-Converged-Ethernet-RoCE.md`` at
1ffba627):

- ``qos roce [enable on|off] [mode lossless|lossy|lossless-single-ipool|lossy-multi-tc]``
  (RoCE page: "``nv set qos roce`` and ``nv set qos roce mode lossless`` are equivalent");
- ``qos mapping default-global trust l2|l3|port|both``, ``… dscp <0-63 list> switch-priority
  <0-7>``, ``… pcp <0-7 list> switch-priority <0-7>``, ``… port-default-sp <0-7>``
  ("Classification", "Trust Port"; ``both`` in "Change RoCE Configuration");
- ``qos egress-queue-mapping default-global switch-priority <list> traffic-class <0-7>``
  ("Egress Queues": "NVUE only supports the default-global profile");
- ``qos pfc default-global switch-priority <list>`` / ``tx|rx enable|disable`` /
  ``cable-length`` / ``xoff-threshold`` / ``xon-threshold`` / ``port-buffer`` ("Priority Flow
  Control (PFC)", "All PFC commands");
- ``qos congestion-control default-global traffic-class <list> ecn|red enable|disable`` /
  ``min-threshold`` / ``max-threshold`` / ``probability`` ("Congestion Control (ECN)");
- ``qos egress-scheduler default-global traffic-class <list> mode dwrr|strict`` / ``bw-percent
  <1-100>`` ("Egress Scheduler": "a bandwidth percent value between 1 and 100");
- ``qos pfc-watchdog polling-interval`` / ``robustness`` and ``interface <swp> qos
  pfc-watchdog [state enable|disable]`` ("PFC Watchdog");
- ``qos traffic-pool <pool> switch-priority <list>`` / ``memory-percent <0-100>`` ("Flow
  Control Buffers", "Change RoCE Configuration");
- ``interface <swp> type swp`` (the interface type NVUE records for a switch port, as in
  ``nv show interface``'s Type column, "NVUE CLI" page).

Collections (``dscp``, ``switch-priority``, ``traffic-class``, interfaces) are written one key
per member, as NVUE expands ranges: ``swp1-2,5-6 -> swp1,swp2,swp5,swp6`` ("NVUE CLI", Command
Help). Numeric ranges the guide does not state are marked ``# lab bound``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.mgmt.nvue.errors import NvueError

ROCE_MODES = ("lossless", "lossy", "lossless-single-ipool", "lossy-multi-tc")
ENABLE = ("enable", "disable")


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of words."""

    values: tuple[str, ...]

    def parse(self, text: str) -> str | int:
        if text not in self.values:
            raise NvueError(
                f"Error: Invalid value '{text}': expected one of {', '.join(self.values)}"
            )
        return text

    def describe(self) -> str:
        return "enum:" + ", ".join(self.values)


@dataclass(frozen=True)
class Number:
    """An integer in [low, high]."""

    low: int
    high: int

    def parse(self, text: str) -> str | int:
        if not re.fullmatch(r"\d+", text):
            raise NvueError(
                f"Error: Invalid value '{text}': expected integer:{self.low} - {self.high}"
            )
        value = int(text)
        if not self.low <= value <= self.high:
            raise NvueError(
                f"Error: Invalid value '{text}': {value} is not in integer:{self.low} - {self.high}"
            )
        return value

    def describe(self) -> str:
        return f"integer:{self.low} - {self.high}"


@dataclass(frozen=True)
class Trimmed:
    """The trimmed size: "a value between 256 and 1024; the value must be a multiple of 4"."""

    def parse(self, text: str) -> str | int:
        value = Number(256, 1024).parse(text)
        if int(value) % 4:
            raise NvueError(f"Error: Invalid value '{text}': must be a multiple of 4")
        return value

    def describe(self) -> str:
        return "integer:256 - 1024, a multiple of 4"


@dataclass(frozen=True)
class Remark:
    """The trimmed frames' DSCP: 0-63, or ``port-level`` (asymmetric trimming)."""

    def parse(self, text: str) -> str | int:
        return "port-level" if text == "port-level" else Number(0, 63).parse(text)

    def describe(self) -> str:
        return "integer:0 - 63, port-level"


Leaf = Choice | Number | Trimmed | Remark


@dataclass(frozen=True)
class Obj:
    """A container; ``bare`` when ``nv set <path>`` may stop here (``qos roce``)."""

    children: dict[str, Node]
    bare: bool = False
    # written when the path stops here: ``nv set qos roce`` turns RoCE on
    bare_fill: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Coll:
    """A collection keyed by members of ``keys`` (expanded); ``child`` None = a plain set."""

    name: str
    keys: Callable[[str], list[str]]
    child: Obj | None = None


Node = Obj | Coll | Leaf


def numbers(low: int, high: int) -> Callable[[str], list[str]]:
    """``3``, ``3,4``, ``0-2,5`` -> members as strings, each within [low, high]."""

    def expand(text: str) -> list[str]:
        found: list[int] = []
        for part in text.split(","):
            match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
            if match is None:
                raise NvueError(f"Error: Invalid value '{text}': expected integer:{low} - {high}")
            first = int(match.group(1))
            last = int(match.group(2) or first)
            if not low <= first <= last <= high:
                raise NvueError(
                    f"Error: Invalid value '{text}': {part} is not in integer:{low} - {high}"
                )
            found.extend(range(first, last + 1))
        return [str(n) for n in sorted(set(found))]

    return expand


def only(*names: str) -> Callable[[str], list[str]]:
    """A profile collection of which the lab has only the named members."""

    def expand(text: str) -> list[str]:
        if text not in names:
            raise NvueError(
                f"Error: Invalid value '{text}': the lab switch supports profile(s) "
                f"{', '.join(names)} only"
            )
        return [text]

    return expand


def interface_names(ports: list[str]) -> Callable[[str], list[str]]:
    """``swp1``, ``swp1-4,swp6``, ``swp1,3`` -> existing ``swpN`` names."""

    def expand(text: str) -> list[str]:
        found: list[str] = []
        for part in text.split(","):
            match = re.fullmatch(r"(?:swp)?(\d+)(?:-(?:swp)?(\d+))?", part)
            if match is None:
                raise NvueError(f"Error: Invalid value '{text}': not an interface (swpN)")
            first, last = int(match.group(1)), int(match.group(2) or match.group(1))
            for number in range(first, last + 1):
                name = f"swp{number}"
                if name not in ports:
                    raise NvueError(
                        f"Error: Invalid value '{text}': interface {name} does not exist"
                    )
                found.append(name)
        return sorted(set(found), key=lambda n: int(n[3:]))

    return expand


def _sp_set() -> Coll:
    return Coll("switch-priority", numbers(0, 7))


def qos_schema() -> Obj:
    """``nv set qos …``."""
    roce = Obj(
        {"enable": Choice(("on", "off")), "mode": Choice(ROCE_MODES)},
        bare=True,
        bare_fill=(("enable", "on"),),
    )
    mapping = Obj(
        {
            "trust": Choice(("l2", "l3", "port", "both")),
            "port-default-sp": Number(0, 7),
            "dscp": Coll("dscp", numbers(0, 63), Obj({"switch-priority": Number(0, 7)})),
            "pcp": Coll("pcp", numbers(0, 7), Obj({"switch-priority": Number(0, 7)})),
        }
    )
    egress_map = Obj(
        {
            "switch-priority": Coll(
                "switch-priority", numbers(0, 7), Obj({"traffic-class": Number(0, 7)})
            )
        }
    )
    pfc = Obj(
        {
            "switch-priority": _sp_set(),
            "tx": Choice(ENABLE),
            "rx": Choice(ENABLE),
            "cable-length": Number(1, 100000),  # lab bound
            "xoff-threshold": Number(0, 2**31 - 1),  # lab bound
            "xon-threshold": Number(0, 2**31 - 1),  # lab bound
            "port-buffer": Number(0, 2**31 - 1),  # lab bound
        }
    )
    ecn = Obj(
        {
            "ecn": Choice(ENABLE),
            "red": Choice(ENABLE),
            "min-threshold": Number(1, 2**31 - 1),  # lab bound
            "max-threshold": Number(1, 2**31 - 1),  # lab bound
            "probability": Number(0, 100),
        }
    )
    scheduler = Obj({"mode": Choice(("dwrr", "strict")), "bw-percent": Number(1, 100)})
    pool = Obj({"switch-priority": _sp_set(), "memory-percent": Number(0, 100)})
    default_global = only("default-global")
    return Obj(
        {
            "roce": roce,
            "mapping": Obj({"": Coll("mapping", default_global, mapping)}),
            "egress-queue-mapping": Obj(
                {"": Coll("egress-queue-mapping", default_global, egress_map)}
            ),
            "pfc": Obj({"": Coll("pfc", default_global, pfc)}),
            "congestion-control": Obj(
                {
                    "": Coll(
                        "congestion-control",
                        default_global,
                        Obj({"traffic-class": Coll("traffic-class", numbers(0, 7), ecn)}),
                    )
                }
            ),
            "egress-scheduler": Obj(
                {
                    "": Coll(
                        "egress-scheduler",
                        default_global,
                        Obj({"traffic-class": Coll("traffic-class", numbers(0, 7), scheduler)}),
                    )
                }
            ),
            "pfc-watchdog": Obj(
                {"polling-interval": Number(1, 100000), "robustness": Number(1, 1000)}  # lab bound
            ),
            "traffic-pool": Obj(
                {
                    "": Coll(
                        "traffic-pool",
                        only("default-lossy", "default-lossless", "roce-lossless", "roce-lossy"),
                        pool,
                    )
                }
            ),
        }
    )


def packet_trim_schema() -> Obj:
    """``nv set system forwarding packet-trim …`` (Cumulus Linux, "Packet Trimming":
    CumulusNetworks/docs ``content/cumulus-linux-514/Layer-1-and-Switch-Ports/
    Quality-of-Service/Packet-Trimming.md``): state, size, remark dscp, switch-priority and
    the default profile; the SN5610's ``service-port`` is not modelled."""
    return Obj(
        {
            "state": Choice(("enabled", "disabled")),
            "size": Trimmed(),
            "remark": Obj({"dscp": Remark()}),
            "switch-priority": Number(0, 7),
            "profile": Choice(("packet-trim-default",)),
        }
    )


def root_schema(ports: list[str]) -> Obj:
    """``nv set``: ``qos``, ``system forwarding packet-trim`` and ``interface <swp> qos
    pfc-watchdog`` / ``packet-trim egress-eligibility traffic-class <0-7>``."""
    watchdog = Obj({"state": Choice(ENABLE)}, bare=True)
    eligibility = Obj({"traffic-class": Coll("traffic-class", numbers(0, 7))})
    interface = Obj(
        {
            "type": Choice(("swp",)),
            "qos": Obj({"pfc-watchdog": watchdog}),
            "packet-trim": Obj({"egress-eligibility": eligibility}),
        }
    )
    return Obj(
        {
            "qos": qos_schema(),
            "system": Obj({"forwarding": Obj({"packet-trim": packet_trim_schema()})}),
            "interface": Obj({"": Coll("interface", interface_names(ports), interface)}),
        }
    )


@dataclass
class Assignment:
    """What one ``nv set``/``nv unset`` line does: paths (one per expanded member) and the
    value to write at the end of each (None: an object or set member, written as ``{}``)."""

    paths: list[tuple[str, ...]] = field(default_factory=list)
    value: str | int | None = None
    leaf: bool = False
    fill: tuple[tuple[str, str], ...] = ()


def resolve(schema: Obj, words: list[str], unset: bool) -> Assignment:
    """The paths ``words`` address, or :class:`NvueError` with NVUE's wording."""
    paths: list[tuple[str, ...]] = [()]
    node: Node = schema
    i = 0
    while i < len(words):
        word = words[i]
        if isinstance(node, Obj):
            if "" in node.children:  # an unnamed collection under this keyword
                node = node.children[""]
                continue
            if word not in node.children:
                raise _invalid(words, i)
            paths = [(*p, word) for p in paths]
            node = node.children[word]
            i += 1
        elif isinstance(node, Coll):
            members = node.keys(word)
            paths = [(*p, m) for p in paths for m in members]
            i += 1
            if node.child is None:
                if i != len(words):
                    raise _invalid(words, i)
                return Assignment(paths)
            node = node.child
        else:
            if i != len(words) - 1:
                raise _invalid(words, i + 1)
            return Assignment(paths, node.parse(word), leaf=True)
    return _end(node, paths, words, unset)


def _end(node: Node, paths: list[tuple[str, ...]], words: list[str], unset: bool) -> Assignment:
    """The path stops at ``node`` with no value."""
    if unset:
        return Assignment(paths)
    if isinstance(node, Obj) and node.bare:
        return Assignment(paths, fill=node.bare_fill)
    if isinstance(node, Obj) and "" in node.children:
        node = node.children[""]
    expected = _expected(node)
    raise NvueError(f"Error: Incomplete Command: nv set {' '.join(words)} {expected}".rstrip())


def _expected(node: Node) -> str:
    if isinstance(node, Obj):
        return "<" + "|".join(sorted(k for k in node.children if k)) + ">"
    if isinstance(node, Coll):
        return f"<{node.name}-id>"
    return f"<arg> ({node.describe()})"


def _invalid(words: list[str], index: int) -> NvueError:
    return NvueError(
        "Error: Invalid Command: "
        + " ".join(words[: index + 1])
        + (f" (unknown keyword '{words[index]}')" if index < len(words) else "")
    )

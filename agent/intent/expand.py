"""The compact fabric file form, expanded into the explicit one the models validate.

A real pod written port by port is about a thousand lines for 256 GPUs, most of them the
same link written twice. The file may therefore say less, and this module writes out the rest
before :mod:`agent.intent.model` sees it:

- ``defaults.ports`` and a device's ``port_defaults``: values for every port (speed, mtu,
  cable_m, description);
- port ranges in the last number of the name (``Ethernet1/1-8``), every number or every
  ``step``-th (``Ethernet0-56`` with ``step: 8``: a SONiC switch's 400G ports), with ``{n}``
  (the number), ``{i}`` (the index from 0), ``{n+K}``/``{n-K}``/``{i+K}``/``{i-K}`` and
  ``{i*K}``/``{i*K+C}`` (``{n*K…}`` too) in
  ``peer``, ``description`` and ``rdma_device`` (``mlx5_{i}``), and ``ipv4`` stepping to the
  next subnet of the same length per port;
- links declared once: a ``peer: D:P`` whose device D exists but does not declare P gives D
  the port P, copying speed, mtu and cable_m from this end and pointing back; a P that D
  declares without a peer (a host's NICs written for their ``rdma_device``) points back too.

Speed, mtu and cable_m are resolved per link, so both ends of one cable get one value or the
file is refused. What an end *states* is its port's own value (or its range entry's), else its
device's ``port_defaults``; a derived end states only its device's ``port_defaults``. An end
that states nothing takes what the other end states; a link where neither end states anything
takes ``defaults.ports`` (one value for every port of the fabric, so it can never make the two
ends differ). Two ends that state different values keep them, and rule IR009 refuses the link
naming both ends and where each value came from: "all spine ports are 20 m" in a spine's
``port_defaults`` against ``cable_m: 3`` on the leaf's port is a contradiction, not an
override. mtu and cable_m size PFC headroom, so no model default may fill them silently: when
nothing supplies one the port is an error. Where each value came from is kept
(:class:`Expanded.sources`) so ``plan -o json`` can show it, and every expanded path keeps a
position in the file (the value as written, the range entry, the default, or the declaring end
of a derived port), so errors stay FILE:LINE:COL.

Every user string meets a pattern only after a length check, and the patterns here cannot
backtrack: a range name is split by hand (:func:`split_range`), not by a regular expression.
"""

from __future__ import annotations

import ipaddress
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.errors import Problem, SourcePosition
from agent.intent.model import MAX_DESCRIPTION, MAX_INTERFACE, check_interface, check_name
from common.errors import excerpt
from common.yamlsource import PathKey, SourceMap, dotted_path

# Port fields a default may set: the rest (name, peer, ipv4, mac, rdma_device) name one port.
DEFAULTABLE = ("speed", "mtu", "cable_m", "description")
RESOLVED = ("speed", "mtu", "cable_m")
MAX_RANGE_PORTS = 4096
# All ports after expansion, the ends derived from peers included: a few lines of ranges,
# reused through anchors or declared on one end, must not become millions of ports (the YAML
# limits bound what is written, this bounds what it expands to).
MAX_FABRIC_PORTS = 65_536
# Longest text a pattern ({n}, {i+K}) is looked for in: the model's longest such field (a
# description) with room for patterns that expand shorter. A longer text is left as written
# and the model refuses it by its length, before any pattern runs.
MAX_PATTERN_TEXT = 2 * MAX_DESCRIPTION
_DIGITS = frozenset("0123456789")
# No backtracking: {, then anything but braces, then }; each character is looked at once.
_PATTERN = re.compile(r"\{([^{}]*+)\}")
_TERM = re.compile(r"(?P<var>[ni])(?:\*(?P<factor>\d{1,6}))?(?:(?P<op>[+-])(?P<k>\d{1,6}))?")
_PATTERN_TEXT = "{n}, {i}, {n+K}, {n-K}, {i+K}, {i-K}, {i*K} or {i*K+C}"
# Not per-port: a range entry cannot give one value to every port it expands to (an
# rdma_device can, through a pattern: mlx5_{i}).
_ONE_PORT_ONLY = ("mac",)
# Fields of a range entry that hold a pattern, filled per port.
_PATTERN_FIELDS = ("peer", "description", "rdma_device")
# A key of a range entry that is not a port field: every step-th number of the range.
STEP = "step"
_WHY = {
    "speed": "PFC headroom, ECN thresholds and line-rate checks depend on the port speed",
    "mtu": "PFC headroom and ECN thresholds depend on the MTU",
    "cable_m": "PFC headroom depends on the cable length",
}

PortSources = dict[tuple[str, str], dict[str, str]]
# field -> (value, where it was written): a port's own values, port_defaults, defaults.ports
Defaults = dict[str, tuple[Any, "Origin"]]


@dataclass(frozen=True)
class Origin:
    """Where one resolved value was written, and through what (range, defaults, peer)."""

    position: SourcePosition | None
    via: str = ""

    def __str__(self) -> str:
        where = str(self.position) if self.position else "?"
        return f"{self.via} ({where})" if self.via else where


@dataclass
class _Port:
    """One port after range expansion: its data and where each part of it was written."""

    device: int
    data: dict[str, Any]
    written: PathKey  # the entry as written: ("devices", d, "ports", j)
    positions: dict[PathKey, SourcePosition]  # values, relative to the port
    keys: dict[PathKey, SourcePosition]
    range_name: str | None = None
    derived_from: _Port | None = None
    origins: dict[str, Origin] = field(default_factory=dict)
    # The fields the file gives this port itself (its entry, or its range entry).
    explicit: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if isinstance(self.data, dict) and self.derived_from is None:
            self.explicit = frozenset(k for k, v in self.data.items() if v is not None)

    @property
    def name(self) -> str:
        return str(self.data.get("name"))


@dataclass
class Expanded:
    """The explicit devices, where every path of them was written, and each value's origin."""

    devices: Any
    source: SourceMap
    names: dict[PathKey, tuple[PathKey, str]]  # expanded port path -> (written path, note)
    sources: PortSources
    problems: list[Problem]

    def field_name(self, loc: PathKey) -> str:
        """The dotted field of ``loc`` as the user wrote it (ranges and derived ports named)."""
        prefix, rest = loc[:4], loc[4:]
        if len(prefix) == 4 and prefix in self.names:
            written, note = self.names[prefix]
            if note.startswith("derived "):
                inner = f" {dotted_path(rest)}" if rest else ""
                return f"{dotted_path((*written, 'peer'))} ({note}{inner})"
            base = dotted_path(written + rest)
            return f"{base} ({note})" if note else base
        return dotted_path(loc)


class _Context:
    def __init__(self, data: dict[str, Any], source: SourceMap) -> None:
        self.data = data
        self.source = source
        self.problems: list[Problem] = []
        # Positions under each port entry, relative to it: one pass over the map, not one per
        # port (an explicit file of 18 000 ports holds some 200 000 positions).
        self.entry_values = _by_entry(source.values)
        self.entry_keys = _by_entry(source.keys)
        self.expanded_ports = 0

    def problem(self, path: PathKey, message: str) -> None:
        self.problems.append(Problem(self.source.locate(path), dotted_path(path), message))

    def at(self, path: PathKey) -> SourcePosition | None:
        return self.source.locate(path)


def expand_fabric(data: dict[str, Any], source: SourceMap) -> Expanded:
    """Expand ``data["devices"]`` (ranges, defaults, derived peer ends); problems collected."""
    ctx = _Context(data, source)
    fabric_defaults = _port_defaults(ctx, data.get("defaults"), ("defaults", "ports"))
    devices = data.get("devices")
    if not isinstance(devices, list):
        return Expanded(devices, source, {}, {}, ctx.problems)
    ports: list[list[_Port] | None] = []
    device_defaults: list[Defaults] = []
    for d, device in enumerate(devices):
        device_defaults.append(_device_defaults(ctx, device, d))
        ports.append(_expand_device(ctx, device, d))
    _derive_peer_ends(ctx, devices, ports)
    if ctx.expanded_ports > MAX_FABRIC_PORTS:  # refused: resolving the rest is wasted work
        return Expanded(devices, source, {}, {}, ctx.problems)
    index = _index(devices, ports)
    every = [port for device_ports in ports for port in device_ports or []]
    stated = {id(port): _stated(port, device_defaults[port.device]) for port in every}
    for port in every:
        link = _Link(_partner(index, port), stated, fabric_defaults)
        _resolve(ctx, devices, port, link, device_defaults[port.device])
    return _assemble(ctx, devices, ports)


# ------------------------------------------------------------------------------ defaults


def _port_defaults(ctx: _Context, section: Any, path: PathKey) -> Defaults:
    """``defaults.ports`` or ``port_defaults``: field -> (value, origin)."""
    holder = section.get(path[-1]) if isinstance(section, dict) else None
    if holder is None:
        return {}
    if not isinstance(holder, dict):
        ctx.problem(path, f"Expected: a mapping of port fields ({', '.join(DEFAULTABLE)}) "
                    f"Actual: {type(holder).__name__}")  # fmt: skip
        return {}
    what = "defaults.ports" if path == ("defaults", "ports") else _device_label(ctx, path)
    values = {}
    for key, value in holder.items():
        if key not in DEFAULTABLE:
            ctx.problems.append(
                Problem(
                    ctx.source.keys.get((*path, key)) or ctx.at(path),
                    dotted_path((*path, key)),
                    f"Expected: one of {', '.join(DEFAULTABLE)} (a default for every port; "
                    f"name, peer, ipv4, mac and rdma_device name one port) "
                    f"Actual: {excerpt(str(key))}",
                )
            )
            continue
        values[key] = (value, Origin(ctx.at((*path, key)), what))
    return values


def _device_label(ctx: _Context, path: PathKey) -> str:
    device = ctx.data["devices"][path[1]]
    return f"port_defaults of {device.get('name', dotted_path(path[:2]))}"


def _device_defaults(ctx: _Context, device: Any, d: int) -> Defaults:
    if not isinstance(device, dict):
        return {}
    return _port_defaults(ctx, device, ("devices", d, "port_defaults"))


# ------------------------------------------------------------------------------ ranges


def _expand_device(ctx: _Context, device: Any, d: int) -> list[_Port] | None:
    if not isinstance(device, dict):
        return None
    entries = device.get("ports")
    if entries is None:
        return []
    if not isinstance(entries, list):
        return None  # the model says what is wrong with it
    ports: list[_Port] = []
    seen: dict[str, _Port] = {}
    for j, entry in enumerate(entries):
        for port in _expand_entry(ctx, entry, ("devices", d, "ports", j), d):
            _check_duplicate(ctx, device, seen, port)
            ports.append(port)
    return ports


def _by_entry(
    source: Mapping[PathKey, SourcePosition],
) -> dict[PathKey, dict[PathKey, SourcePosition]]:
    grouped: dict[PathKey, dict[PathKey, SourcePosition]] = {}
    for key, position in source.items():
        if len(key) >= 4 and key[0] == "devices" and key[2] == "ports":
            grouped.setdefault(key[:4], {})[key[4:]] = position
    return grouped


def split_range(name: str) -> tuple[str, str, str] | None:
    """``("Ethernet1/", "1", "8")`` for ``Ethernet1/1-8`` (a range in the last number of the
    name), None for a plain name. By hand rather than by a regular expression: the obvious
    pattern (a lazy prefix, digits, '-', digits) backtracks over a long digit run, 20 000
    digits took 10 s (issue #42). Names longer than an interface name can be are never
    ranges (the model refuses them by length), and digits are ASCII only (``\\d`` would take
    ``١-٣`` and expand it to ASCII names)."""
    if len(name) > MAX_INTERFACE:
        return None
    head, dash, last = name.rpartition("-")
    if not dash or not last or not _DIGITS.issuperset(last):
        return None
    start = len(head)
    while start > 0 and head[start - 1] in _DIGITS:
        start -= 1
    if start == len(head):
        return None
    return head[:start], head[start:], last


@dataclass(frozen=True)
class _Range:
    name: str
    prefix: str
    first: str
    last: str


def _expand_entry(ctx: _Context, entry: Any, path: PathKey, d: int) -> list[_Port]:
    name = entry.get("name") if isinstance(entry, dict) else None
    parts = split_range(name) if isinstance(name, str) else None
    if parts is None:
        return _single_port(ctx, entry, path, d)
    assert isinstance(entry, dict) and isinstance(name, str)  # a range name comes from a mapping
    spec = _Range(name, *parts)
    numbers = _range_numbers(ctx, spec, path, entry)
    templates = _templates(ctx, entry, path) if numbers else None
    if templates is None:
        return []
    positions = dict(ctx.entry_values.get(path, {}))
    keys = dict(ctx.entry_keys.get(path, {}))
    members = []
    width = len(spec.first) if spec.first.startswith("0") else 0
    fields = {key: value for key, value in entry.items() if key != STEP}
    for i, n in enumerate(numbers):
        data = {**fields, "name": f"{spec.prefix}{n:0{width}d}"}
        if not _substitute(ctx, data, path, templates, (n, i)):
            return []
        members.append(_Port(d, data, path, positions, keys, range_name=name))
    if not _step_ipv4(ctx, entry, members, path):
        return []
    return members


def _single_port(ctx: _Context, entry: Any, path: PathKey, d: int) -> list[_Port]:
    """The port of an entry that is no range (whatever it holds: the model says what is wrong
    with it), unless it carries what only a range may."""
    if isinstance(entry, dict) and not _single_port_ok(ctx, entry, path):
        return []
    if not _admit(ctx, 1, (*path, "name"), "this port"):
        return []
    positions = dict(ctx.entry_values.get(path, {}))
    keys = dict(ctx.entry_keys.get(path, {}))
    data = dict(entry) if isinstance(entry, dict) else entry
    return [_Port(d, data, path, positions, keys)]


def _admit(ctx: _Context, count: int, path: PathKey, what: str) -> bool:
    """Count ``count`` more ports against :data:`MAX_FABRIC_PORTS`; False (and one problem,
    where the limit is first passed) once the fabric holds more."""
    crossed = ctx.expanded_ports <= MAX_FABRIC_PORTS
    ctx.expanded_ports += count
    if ctx.expanded_ports <= MAX_FABRIC_PORTS:
        return True
    if crossed:
        ctx.problem(
            path,
            f"Expected: at most {MAX_FABRIC_PORTS} ports in the fabric after expanding ranges "
            f"and deriving the other ends of links Actual: more from {what} on",
        )
    return False


def _range_numbers(ctx: _Context, spec: _Range, path: PathKey, entry: dict[str, Any]) -> list[int]:
    # split_range bounds both numbers to an interface name's length (48 characters)
    first, last = int(spec.first), int(spec.last)
    name = spec.name
    if first > last:
        ctx.problem(
            (*path, "name"),
            f"Expected: a range from low to high such as {spec.prefix}{last}-{first} "
            f"Actual: {name!r} (reversed)",
        )
        return []
    step = _range_step(ctx, spec, path, entry)
    if step is None:
        return []
    count = (last - first) // step + 1
    if count > MAX_RANGE_PORTS:
        ctx.problem(
            (*path, "name"),
            f"Expected: at most {MAX_RANGE_PORTS} ports in one range Actual: {name!r} is "
            f"{count} ports",
        )
        return []
    if not _admit(ctx, count, (*path, "name"), "this range"):
        return []
    if not _per_port_fields_ok(ctx, spec, path, entry, count):
        return []
    return list(range(first, last + 1, step))


def _range_step(ctx: _Context, spec: _Range, path: PathKey, entry: dict[str, Any]) -> int | None:
    """The range's ``step`` (1 when not given); None after a problem. The step must land on the
    last number, so what the name says is what the range holds."""
    step = entry.get(STEP, 1)
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= MAX_RANGE_PORTS:
        shown = str(step) if isinstance(step, int | float) else excerpt(str(step))
        ctx.problem(
            (*path, STEP),
            f"Expected: a whole number from 1 to {MAX_RANGE_PORTS} (every step-th number of "
            f"the range) Actual: {shown}",
        )
        return None
    first, last = int(spec.first), int(spec.last)
    if (last - first) % step:
        below = last - (last - first) % step
        ctx.problem(
            (*path, STEP),
            f"Expected: a step from {first} that lands on {last}, the range's last number "
            f"Actual: step {step} on {spec.name!r} ends at {below} (write "
            f"{spec.prefix}{first}-{below}, or another step)",
        )
        return None
    return step


def _per_port_fields_ok(
    ctx: _Context, spec: _Range, path: PathKey, entry: dict[str, Any], count: int
) -> bool:
    """A range of more than one port gives each port its own peer and rdma_device (through a
    pattern) and no mac; False after a problem."""
    if count == 1:
        return True
    for key, wanted in (
        ("peer", f"a peer with a pattern ({_PATTERN_TEXT}"),
        ("rdma_device", "an rdma_device with a pattern (mlx5_{i}"),
    ):
        value = entry.get(key)
        if isinstance(value, str) and not _has_pattern(value):
            ctx.problem(
                (*path, key),
                f"Expected: {wanted}; each port of a range has its own {key}) Actual: "
                f"{excerpt(value)} for all {count} ports of {spec.name!r}",
            )
            return False
    for key in _ONE_PORT_ONLY:
        if key in entry:
            ctx.problem(
                (*path, key),
                f"Expected: {key} on single ports only (each port has its own) "
                f"Actual: {key} on the range {spec.name!r}",
            )
            return False
    return True


def _single_port_ok(ctx: _Context, entry: dict[str, Any], path: PathKey) -> bool:
    """A single port has no step and no pattern (those belong to a range); False after a
    problem."""
    name = excerpt(str(entry.get("name")))
    if STEP in entry:
        ctx.problem(
            (*path, STEP),
            f"Expected: {STEP} on a port range such as Ethernet0-56 Actual: {STEP} on the "
            f"single port {name}",
        )
        return False
    for key in ("peer", "rdma_device"):
        value = entry.get(key)
        if isinstance(value, str) and _has_pattern(value):
            ctx.problem(
                (*path, key),
                f"Expected: patterns ({_PATTERN_TEXT}) only in a port range such as "
                f"Ethernet1/1-8 Actual: {excerpt(value)} on the single port {name}",
            )
            return False
    return True


def _has_pattern(text: str) -> bool:
    return len(text) <= MAX_PATTERN_TEXT and _PATTERN.search(text) is not None


@dataclass(frozen=True)
class _Term:
    """One ``{n}``, ``{i+K}`` ... of a pattern: as written, which number, what offset."""

    written: str
    var: str
    offset: int
    factor: int = 1  # {i*8}: a stepped range's partner (Ethernet0, 8, 16 ... on a SONiC leaf)


Template = tuple[str | _Term, ...]


def _template(text: str) -> Template:
    """``text`` as literal parts and terms, parsed once per range entry (not once per port:
    a 4 096-port range fills it 4 096 times); ValueError naming a term that is none."""
    parts: list[str | _Term] = []
    end = 0
    for match in _PATTERN.finditer(text):
        parts.append(text[end : match.start()])
        term = _TERM.fullmatch(match.group(1).replace(" ", ""))
        if term is None:
            raise ValueError(f"Expected: a pattern {_PATTERN_TEXT} Actual: {match.group()!r}")
        sign = -1 if term["op"] == "-" else 1
        factor = int(term["factor"] or 1)
        parts.append(_Term(match.group(), term["var"], sign * int(term["k"] or 0), factor))
        end = match.end()
    parts.append(text[end:])
    if any(isinstance(part, str) and ("{" in part or "}" in part) for part in parts):
        raise ValueError(
            f"Expected: braces only around a pattern {_PATTERN_TEXT} Actual: {excerpt(text)}"
        )
    return tuple(parts)


def _fill(template: Template, n: int, i: int) -> str:
    filled = []
    for part in template:
        if isinstance(part, str):
            filled.append(part)
            continue
        value = (n if part.var == "n" else i) * part.factor + part.offset
        if value < 0:
            raise ValueError(
                f"Expected: {part.written} >= 0 for every port of the range Actual: {value} "
                f"(for n={n}, i={i})"
            )
        filled.append(str(value))
    return "".join(filled)


def _templates(ctx: _Context, entry: dict[str, Any], path: PathKey) -> dict[str, Template] | None:
    """The patterns of a range entry's peer, description and rdma_device; None after a
    problem."""
    templates = {}
    for key in _PATTERN_FIELDS:
        text = entry.get(key)
        if not isinstance(text, str) or len(text) > MAX_PATTERN_TEXT:
            continue  # too long for the field: the model says so, with the field's limit
        try:
            templates[key] = _template(text)
        except ValueError as exc:
            ctx.problem((*path, key), str(exc))
            return None
    return templates


def _substitute(
    ctx: _Context, data: dict[str, Any], path: PathKey, templates: dict[str, Template],
    number: tuple[int, int],
) -> bool:  # fmt: skip
    """Fill the ``{n}``/``{i}`` patterns of peer, description and rdma_device for the port
    ``number`` (n, i); False after a problem."""
    for key, template in templates.items():
        try:
            data[key] = _fill(template, *number)
        except ValueError as exc:
            ctx.problem((*path, key), str(exc))
            return False
    return True


def _step_ipv4(ctx: _Context, entry: dict[str, Any], members: list[_Port], path: PathKey) -> bool:
    """The first port gets ``ipv4``; each next one the next subnet of the same length."""
    value = entry.get("ipv4")
    if value is None or len(members) == 1:
        return True
    try:
        first = ipaddress.IPv4Interface(value)
    except (ValueError, TypeError):
        ctx.problem(
            (*path, "ipv4"),
            f"Expected: an IPv4 address with its prefix length such as 198.18.0.1/31 "
            f"Actual: {excerpt(repr(value))}",
        )
        return False
    step = 2 ** (32 - first.network.prefixlen)
    last = int(first.ip) + step * (len(members) - 1)
    if last > 2**32 - 1:
        ctx.problem(
            (*path, "ipv4"),
            f"Expected: {len(members)} subnets /{first.network.prefixlen} from {first} "
            f"Actual: they run past 255.255.255.255",
        )
        return False
    for k, member in enumerate(members):
        address = ipaddress.IPv4Address(int(first.ip) + step * k)
        member.data["ipv4"] = f"{address}/{first.network.prefixlen}"
    return True


def _check_duplicate(
    ctx: _Context, device: dict[str, Any], seen: dict[str, _Port], port: _Port
) -> None:
    """A range that yields a port declared elsewhere on the device (IR012 reports the plain
    duplicates, as before)."""
    if not isinstance(port.data, dict) or not isinstance(port.data.get("name"), str):
        return
    first = seen.setdefault(port.name, port)
    if first is port or (first.range_name is None and port.range_name is None):
        return
    where = first.positions.get(()) or ctx.at(first.written)
    origin = f"the range {first.range_name!r}" if first.range_name else "a port entry"
    ctx.problem(
        (*port.written, "name"),
        f"Expected: each port once on {device.get('name')} Actual: {port.name} is also "
        f"declared by {origin} at {where}",
    )


# ------------------------------------------------------------------------------ links once


def _index(devices: list[Any], ports: list[list[_Port] | None]) -> dict[tuple[str, str], _Port]:
    index: dict[tuple[str, str], _Port] = {}
    for device, device_ports in zip(devices, ports, strict=True):
        if isinstance(device, dict) and device_ports is not None:
            for port in device_ports:
                if isinstance(port.data, dict):
                    index.setdefault((str(device.get("name")), port.name), port)
    return index


def _peer_ref(port: _Port) -> tuple[str, str] | None:
    """``(device, port)`` of a well-formed peer, else None (the model reports it)."""
    peer = port.data.get("peer") if isinstance(port.data, dict) else None
    if not isinstance(peer, str):
        return None
    device, sep, name = peer.partition(":")
    try:
        check_name(device)
        check_interface(name)
    except ValueError:
        return None
    return (device, name) if sep else None


@dataclass
class _Peers:
    """What deriving the other ends of links looks ports up in."""

    index: dict[tuple[str, str], _Port]  # (device, port) -> the port
    where: dict[str, int]  # device name -> its position in ``devices``
    # (device, its port's peer): D already answers X:Q from another port, so the link is
    # declared on both ends, inconsistently; deriving a second port would hide that (IR010).
    answered: set[tuple[str, str]]


def _derive_peer_ends(ctx: _Context, devices: list[Any], ports: list[list[_Port] | None]) -> None:
    """The ends of links declared on one end only, on the devices the peers name; each counted
    against :data:`MAX_FABRIC_PORTS` (a file of 65 536 ports declared once must not become
    131 072)."""
    index = _index(devices, ports)
    peers = _Peers(
        index,
        where={
            device["name"]: d
            for d, device in reversed(list(enumerate(devices)))
            if isinstance(device, dict) and isinstance(device.get("name"), str)
        },
        answered={
            (device, peer)
            for (device, _), port in index.items()
            if isinstance(peer := port.data.get("peer"), str)
        },
    )
    for d, device_ports in enumerate(ports):
        for port in list(device_ports or []):
            if not _other_end(ctx, (devices, ports), peers, d, port):
                return


def _other_end(
    ctx: _Context,
    fabric: tuple[list[Any], list[list[_Port] | None]],
    peers: _Peers,
    d: int,
    port: _Port,
) -> bool:
    """The other end of ``port``'s link: answered back, derived, or left to the rules; False
    once the fabric holds too many ports."""
    devices, ports = fabric
    ref = _peer_ref(port)
    if ref is None:
        return True
    if ref in peers.index:
        _answer_back(peers.index[ref], port, devices[d])
        return True
    if ref[0] not in peers.where:
        return True
    if (ref[0], f"{devices[d].get('name')}:{port.name}") in peers.answered:
        return True
    target = peers.where[ref[0]]
    target_ports = ports[target]
    if target_ports is None:
        return True
    if not _admit(ctx, 1, (*port.written, "peer"), "the ports derived from here"):
        return False
    derived = _derived(port, devices[d], ref, target)
    target_ports.append(derived)
    peers.index[ref] = derived
    return True


def _answer_back(named: _Port, declarer: _Port, device: dict[str, Any]) -> None:
    """A port the file declares without a peer (a host's NICs written for their rdma_device)
    that another port names as its peer takes the link from it: the peer pointing back and,
    when it has none, the other address of a /31 or /30, as a derived end would."""
    if not isinstance(named.data, dict) or named.data.get("peer") is not None:
        return
    data, positions = _link_back(declarer, device)
    if named.data.get("ipv4") is not None:
        data.pop("ipv4", None)
        positions.pop(("ipv4",), None)
    named.data.update(data)
    # The members of a range share one positions table: this member gets its own.
    named.positions = {**named.positions, **positions}


def _derived(declarer: _Port, device: dict[str, Any], ref: tuple[str, str], target: int) -> _Port:
    data, positions = _link_back(declarer, device)
    if ("peer",) in positions:
        positions[()] = positions[("name",)] = positions[("peer",)]
    return _Port(
        target, {"name": ref[1], **data}, declarer.written, positions, {}, derived_from=declarer
    )


def _link_back(
    declarer: _Port, device: dict[str, Any]
) -> tuple[dict[str, Any], dict[PathKey, SourcePosition]]:
    """What the other end of ``declarer``'s link holds (its peer pointing back, the other
    address of a point-to-point subnet) and where the file says so."""
    data: dict[str, Any] = {"peer": f"{device.get('name')}:{declarer.name}"}
    positions: dict[PathKey, SourcePosition] = {}
    at = declarer.positions.get(("peer",)) or declarer.positions.get(())
    if at is not None:
        positions[("peer",)] = at
    other = _other_address(declarer.data.get("ipv4"))
    if other is not None:
        data["ipv4"] = other
        if ("ipv4",) in declarer.positions:
            positions[("ipv4",)] = declarer.positions[("ipv4",)]
    return data, positions


def _other_address(value: Any) -> str | None:
    """The other usable address of a point-to-point subnet (/31, RFC 3021; /30)."""
    try:
        interface = ipaddress.IPv4Interface(value)
    except (ValueError, TypeError):
        return None
    network = interface.network
    if network.prefixlen == 31:
        hosts = [network.network_address, network.broadcast_address]
    elif network.prefixlen == 30:
        hosts = list(network.hosts())
    else:
        return None
    if interface.ip not in hosts:
        return None
    other = hosts[1] if interface.ip == hosts[0] else hosts[0]
    return f"{other}/{network.prefixlen}"


# ------------------------------------------------------------------------------ resolution


def _stated(port: _Port, device_defaults: Defaults) -> Defaults:
    """What one end states about its link: the port's own value (or its range entry's), else
    its device's port_defaults. A derived end has only the latter."""
    stated = {}
    for key in RESOLVED:
        found = _own(port, key) if port.derived_from is None else None
        found = found or device_defaults.get(key)
        if found is not None:
            stated[key] = found
    return stated


def _partner(index: dict[tuple[str, str], _Port], port: _Port) -> _Port | None:
    """The other end of ``port``'s link: the port its peer names (declared or derived), or
    the end a derived port was derived from."""
    if port.derived_from is not None:
        return port.derived_from
    ref = _peer_ref(port)
    return index.get(ref) if ref is not None else None


@dataclass(frozen=True)
class _Link:
    """What resolving one port needs to know beyond the port: the other end, what every end
    states, and the fabric's defaults."""

    partner: _Port | None
    stated: dict[int, Defaults]
    fabric_defaults: Defaults

    def value(self, port: _Port, key: str) -> tuple[Any, Origin] | None:
        """The port's own statement, else the other end's, else defaults.ports."""
        found = self.stated[id(port)].get(key)
        if found is None and self.partner is not None:
            theirs = self.stated[id(self.partner)].get(key)
            if theirs is not None:
                value, origin = theirs
                via = f"peer {port.data.get('peer')}" + (f" via {origin.via}" if origin.via else "")
                found = value, Origin(origin.position, via)
        return found or self.fabric_defaults.get(key)


def _resolve(
    ctx: _Context, devices: list[Any], port: _Port, link: _Link, device_defaults: Defaults
) -> None:
    """Fill speed, mtu, cable_m (per link, :class:`_Link`) and a default description (the
    port's own, its device's port_defaults, defaults.ports)."""
    if not isinstance(port.data, dict):
        return
    for key in RESOLVED:
        found = link.value(port, key)
        if found is None:
            if port.derived_from is None:  # a derived end's gap is its declarer's error
                _required(ctx, port, key, devices)
            continue
        port.data[key], port.origins[key] = found
    description = (
        _own(port, "description")
        or device_defaults.get("description")
        or link.fabric_defaults.get("description")
    )
    if description is not None:
        port.data["description"] = description[0]


def _own(port: _Port, key: str) -> tuple[Any, Origin] | None:
    if key not in port.explicit:
        return None
    via = f"range {port.range_name}" if port.range_name else ""
    return port.data[key], Origin(port.positions.get((key,)), via)


def _required(ctx: _Context, port: _Port, key: str, devices: list[Any]) -> None:
    peer = port.data.get("peer")
    on_peer = f", on its peer {peer}" if isinstance(peer, str) else ""
    device = devices[port.device].get("name")
    ctx.problems.append(
        Problem(
            port.positions.get(()) or ctx.at(port.written),
            dotted_path((*port.written, key)) + (f" ({port.name})" if port.range_name else ""),
            f"required: {_WHY[key]}; set it on this port{on_peer}, in port_defaults of "
            f"{device} or in defaults.ports",
        )
    )


# ------------------------------------------------------------------------------ assembly


def _assemble(ctx: _Context, devices: list[Any], ports: list[list[_Port] | None]) -> Expanded:
    """The explicit device list, a source map for it and the provenance of every port."""
    rewritten = {
        d
        for d, device in enumerate(devices)
        if isinstance(device, dict) and ports[d] is not None and (ports[d] or "ports" in device)
    }
    source = SourceMap(ctx.source.file)
    source.values = _without_ports(ctx.source.values, rewritten)
    source.keys = _without_ports(ctx.source.keys, rewritten)
    names: dict[PathKey, tuple[PathKey, str]] = {}
    sources: PortSources = {}
    out: list[Any] = []
    for d, device in enumerate(devices):
        if not isinstance(device, dict):
            out.append(device)
            continue
        filled = {k: v for k, v in device.items() if k != "port_defaults"}
        device_ports = ports[d]
        if d in rewritten and device_ports is not None:
            filled["ports"] = [port.data for port in device_ports]
            for p, port in enumerate(device_ports):
                _place(source, names, ("devices", d, "ports", p), port)
            sources.update(_port_sources(str(device.get("name")), device_ports))
        out.append(filled)
    return Expanded(out, source, names, sources, ctx.problems)


def _port_sources(device: str, ports: list[_Port]) -> PortSources:
    """Where each port's values came from (a default, a range, the peer), by port."""
    return {
        (device, port.name): {key: str(origin) for key, origin in port.origins.items()}
        for port in ports
        if port.origins and isinstance(port.data, dict)
    }


def _without_ports(
    table: Mapping[PathKey, SourcePosition], rewritten: set[int]
) -> dict[PathKey, SourcePosition]:
    """``table`` less the positions under the port entries of the ``rewritten`` devices."""
    return {
        k: v
        for k, v in table.items()
        if not (len(k) > 3 and k[0] == "devices" and k[1] in rewritten and k[2] == "ports")
    }


def _place(
    source: SourceMap,
    names: dict[PathKey, tuple[PathKey, str]],
    path: PathKey,
    port: _Port,
) -> None:
    for rest, position in port.positions.items():
        source.values[path + rest] = position
    for rest, position in port.keys.items():
        source.keys[path + rest] = position
    for key, origin in port.origins.items():
        if origin.position is not None:
            source.values[(*path, key)] = origin.position
    if port.derived_from is not None:
        names[path] = (port.derived_from.written, f"derived port {_device_of(port)}{port.name}")
    elif port.range_name is not None:
        names[path] = (port.written, port.name)
    elif path != port.written:
        names[path] = (port.written, "")


def _device_of(port: _Port) -> str:
    peer = port.derived_from.data.get("peer") if port.derived_from else None
    device, _, _ = str(peer).partition(":")
    return f"{device}:"


# ------------------------------------------------------------------------------ provenance

# The loader records each loaded intent's provenance here, so ``build_plan(intent)`` can put
# it in the plan without every caller passing it along. Keyed by identity and dropped when the
# intent is collected (pydantic models with list fields are not hashable).
_RECORDED: dict[int, PortSources] = {}


def record_sources(intent: object, sources: PortSources) -> None:
    key = id(intent)
    _RECORDED[key] = sources
    weakref.finalize(intent, _RECORDED.pop, key, None)


def recorded_sources(intent: object) -> PortSources:
    """What the loader recorded for ``intent``; empty for an intent built in code."""
    return _RECORDED.get(id(intent), {})

"""Read a containerlab topology (``*.clab.yml``) into what the netns runtime can build.

The file stays in containerlab's own format (``name``, ``topology.defaults|kinds|nodes|links``,
brief-format link ``endpoints: ["a:eth1", "b:eth1"]``) so the same file deploys under real
containerlab. Lab parameters live where containerlab allows free-form data: node ``labels``
under the ``roce.lab/`` prefix, merged like containerlab merges them (defaults < kinds <
node). Everything the runtime cannot honour is refused here, before anything is created,
each problem as ``FILE:LINE:COL: field: message``. The checks run in passes (the file's
shape; nodes and links; node parameters; both ends of each link), each reporting every
problem it finds, so one run shows all mistakes that do not hide behind another.

The file is read by :func:`common.yamlsource.load_yaml`, the loader every other YAML input
goes through, so its limits (size, aliases, depth, special files, control characters,
duplicate keys) hold for topologies too; its shape is checked by pydantic models of
containerlab's schema, and what is left (references between nodes and links, label values,
both ends of a link agreeing) by the checks below, located through the loader's source map.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    field_validator,
    model_validator,
)

from common.errors import IntentError, Problem, SourcePosition
from common.yamlsource import PathKey, SourceMap, load_yaml

LABEL_PREFIX = "roce.lab/"
DEFAULT_SPEED_BPS = 10_000_000
DEFAULT_MTU = 9000
DEFAULT_CABLE_M = 1.0
DEFAULT_PROFILE = "nvidia-default"
DEFAULT_USERNAME = "admin"
DEFAULT_PASSWORD = "admin"
VSWITCH_IMAGE = "roce-vswitch"
# Data-plane addressing needs one /31 per link inside 198.18.0.0/16.
MAX_LINKS = 2**15

Role = Literal["spine", "leaf", "host"]
LabKind = Literal["lab-switch", "host"]

# Every field containerlab's schema knows for a node (old and new spellings). The runtime
# honours kind, image, labels and group; the container-only ones (cmd, binds, exec, env, …)
# are accepted so the same file deploys under containerlab, and ignored here.
CONTAINERLAB_NODE_FIELDS = frozenset(
    {
        "kind", "image", "image-pull-policy", "restart-policy", "type", "license", "group",
        "startup-config", "startup-delay", "enforce-startup-config", "suppress-startup-config",
        "auto-remove", "exec", "binds", "ports", "env", "env-files", "user", "entrypoint", "cmd",
        "publish", "labels", "runtime", "mgmt_ipv4", "mgmt_ipv6", "mgmt-ipv4", "mgmt-ipv6",
        "network-mode", "cpu", "memory", "cpu-set", "sandbox", "kernel", "extras", "config",
        "wait-for", "dns", "certificate", "healthcheck", "aliases", "devices", "cap-add",
        "shm-size", "components", "stages", "sysctls", "SANs",
    }
)  # fmt: skip
TOP_LEVEL_FIELDS = frozenset({"name", "prefix", "mgmt", "settings", "topology", "debug"})
TOPOLOGY_FIELDS = frozenset({"nodes", "links", "kinds", "defaults", "groups"})
LINK_FIELDS = frozenset({"endpoints", "mtu", "vars", "labels"})

NODE_LABELS = frozenset(
    {
        "role", "speed", "mtu", "cable-m",
        "xoff-bytes", "xon-bytes", "headroom-bytes", "queue-limit-bytes",
        "rdma", "nos",
    }
)  # fmt: skip
# roce.lab/rdma on a host: the host is a small VM with that RDMA stack (lab.vmhost). "rxe":
# Soft-RoCE in a stock Debian kernel, with rdma-core and perftest; the only one there is.
RDMA_STACKS = ("rxe",)
# roce.lab/nos on a switch: the NOS its management plane speaks over SSH (lab.mgmt.personality),
# and the platform the lab's fabric file gives the agent for it. The data plane is the same.
NOS_PLATFORMS = {"eos": "arista_eos", "sonic": "sonic", "nvue": "cumulus_nvue"}
DEFAULT_NOS = "eos"
# Lab-wide values: only meaningful in topology.defaults (the fabric file has one of each).
LAB_LABELS = frozenset({"profile", "username", "password", "time-dilation"})
# roce.lab/time-dilation D: a lab link stands for one D times faster (10M standing for 10G is
# 1000). It is the fabric's, not a switch's (the vswitch shapes to the lab speed either way), so
# it goes into the fabric file the lab writes (``emulation.time_dilation``), where the agent's
# probes read it to dilate the hosts' NIC timers (agent.observe.probes.dilation). 1 = real time.
DEFAULT_TIME_DILATION = 1
MAX_TIME_DILATION = 1_000_000

_CEOS_KINDS = {"arista_ceos", "ceos", "vr-arista_veos", "vr-veos", "arista_veos"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_LAB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ETH_RE = re.compile(r"^eth([1-9][0-9]{0,3})$")
# At most 15 digits, as in agent.intent.units: int() of thousands of digits raises deep inside, and
# no port speed or buffer needs more.
_SPEED_RE = re.compile(r"^([0-9]{1,15}(?:\.[0-9]{1,9})?)\s*([kmgt]?)(?:b/s|bps|b)?$", re.IGNORECASE)
_SIZE_RE = re.compile(r"^([0-9]{1,15})\s*(b|kb|kib|mb|mib)?$", re.IGNORECASE)
_SPEED_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 10**6, "mib": 2**20}


class TopologyError(IntentError):
    """A topology the runtime cannot build: every problem found in the file, each printed as
    ``FILE:LINE:COL: field: message`` (or ``FILE: message`` for the file as a whole)."""


@dataclass(frozen=True)
class BufferSettings:
    """Ingress/egress buffer thresholds of a lab switch (bytes), see :func:`default_buffer`."""

    xoff_bytes: int
    xon_bytes: int
    headroom_bytes: int
    queue_limit_bytes: int


@dataclass(frozen=True)
class Credentials:
    """Management credentials of the lab switches (lab defaults, like containerlab's)."""

    username: str
    password: str


@dataclass(frozen=True)
class Node:
    """One topology node with its merged labels and the lab parameters read from them."""

    name: str
    kind: str
    image: str
    lab_kind: LabKind
    role: Role
    speed_bps: int
    mtu: int
    cable_m: float
    buffer: BufferSettings | None
    labels: Mapping[str, str]
    line: int
    rdma: str | None = None  # roce.lab/rdma: a VM host with this RDMA stack (lab.vmhost)
    nos: str | None = None  # roce.lab/nos of a switch (None for a host)

    @property
    def is_switch(self) -> bool:
        return self.lab_kind == "lab-switch"

    @property
    def is_vm(self) -> bool:
        return self.rdma is not None


@dataclass(frozen=True)
class Endpoint:
    """``node:ethN`` — one end of a link."""

    node: str
    ifname: str
    index: int

    def __str__(self) -> str:
        return f"{self.node}:{self.ifname}"


def endpoint(node: str, ifname: str) -> Endpoint | None:
    """``node:ifname`` as an :class:`Endpoint`; None if ``ifname`` is not a data port ethN."""
    match = _ETH_RE.match(ifname)
    return Endpoint(node, ifname, int(match.group(1))) if match else None


@dataclass(frozen=True)
class Link:
    """A point-to-point link (a veth pair), in file order."""

    index: int
    a: Endpoint
    b: Endpoint
    mtu: int
    speed_bps: int
    line: int

    def endpoints(self) -> tuple[Endpoint, Endpoint]:
        return (self.a, self.b)


@dataclass(frozen=True)
class Topology:
    """A validated topology the netns runtime can build."""

    name: str
    path: Path
    prefix: str | None
    nodes: Mapping[str, Node]
    links: tuple[Link, ...]
    credentials: Credentials
    profile: str
    time_dilation: int = DEFAULT_TIME_DILATION

    def container_name(self, node: str, lab_name: str | None = None) -> str:
        """containerlab's container name, used as the node's network namespace name."""
        return container_name(self.prefix, lab_name or self.name, node)

    def speaking(self, nos: str) -> Topology:
        """The same lab with every switch speaking ``nos`` (``lab up --nos``): one topology
        file serves every platform (ValueError naming the known ones for another)."""
        if nos not in NOS_PLATFORMS:
            raise ValueError(
                f"{nos!r} is not a NOS the lab switch speaks ({', '.join(NOS_PLATFORMS)})"
            )
        nodes = {
            name: dataclasses.replace(node, nos=nos) if node.is_switch else node
            for name, node in self.nodes.items()
        }
        return dataclasses.replace(self, nodes=nodes)


def container_name(prefix: str | None, lab_name: str, node: str) -> str:
    """``clab-<lab>-<node>`` like containerlab, honouring its ``prefix`` setting."""
    if prefix is None:
        return f"clab-{lab_name}-{node}"
    if prefix == "":
        return node
    if prefix == "__lab-name":
        return f"{lab_name}-{node}"
    return f"{prefix}-{lab_name}-{node}"


def check_lab_name(name: str) -> str | None:
    """Why ``name`` cannot be a lab name, or None if it can."""
    if not _LAB_NAME_RE.match(name) or len(name) > 64:
        return f"{_shown(name)} is not a lab name (letters, digits, '.', '_', '-'; at most 64)"
    return None


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short: a 5 000-digit label is not echoed whole."""
    return repr(text if len(text) <= 40 else f"{text[:40]}…")


def parse_speed(text: str) -> int:
    """``10M`` / ``100Mbps`` / ``1G`` / ``10000000`` → bits per second."""
    match = _SPEED_RE.match(text.strip())
    if not match:
        raise ValueError(f"{_shown(text)} is not a speed (examples: 10M, 100M, 1G)")
    value = float(match.group(1)) * _SPEED_UNITS[match.group(2).lower()]
    if value < 1000 or not value.is_integer():
        raise ValueError(f"{_shown(text)} is not a usable port speed (at least 1K, whole bits/s)")
    return int(value)


def format_speed(bps: int) -> str:
    """Bits per second → ``10M`` / ``1G`` style used in the fabric file."""
    for unit, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if bps % scale == 0:
            return f"{bps // scale}{unit}"
    return str(bps)


def parse_size(text: str) -> int:
    """``30000`` / ``30KB`` / ``29KiB`` → bytes."""
    match = _SIZE_RE.match(text.strip())
    if not match:
        raise ValueError(f"{_shown(text)} is not a size in bytes (examples: 30000, 30KB, 32KiB)")
    return int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()]


def default_buffer(speed_bps: int, mtu: int) -> BufferSettings:
    """Buffer thresholds that make a software switch at ``speed_bps`` lossless.

    Headroom must absorb what is already on the way once XOFF is sent: up to one MTU frame
    leaving the peer plus one in flight, plus what arrives during the switch's own reaction
    time, for which a Python switch is given 1.6 ms. At 10 Mb/s and MTU 9000 this gives the
    contract numbers 30000/15000/20000/60000.
    """
    headroom = 2 * mtu + math.ceil(speed_bps / 8 * 0.0016)
    xoff = headroom * 3 // 2
    return BufferSettings(
        xoff_bytes=xoff,
        xon_bytes=xoff // 2,
        headroom_bytes=headroom,
        queue_limit_bytes=2 * xoff,
    )


# --------------------------------------------------------------------------- the file's shape


def _describe(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return _shown(value) if isinstance(value, str) else repr(value)


def _scalar(value: object) -> str:
    """A label, name or endpoint as containerlab reads it: a string, whatever YAML typed it as.

    The loader has already turned ``9000`` into an int and ``true`` into a bool; containerlab
    (Go, ``map[string]string``) reads both as text, so they are turned back into text here.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, datetime.date):  # datetime is a date too
        return value.isoformat()
    raise ValueError(f"expected a value, got {_describe(value)}")


def _string_keys(value: object) -> object:
    # The loader keeps ``1:`` an int; containerlab's names and labels are strings.
    if isinstance(value, dict):
        return {str(key): item for key, item in value.items()}
    return value


def _two_endpoints(value: object) -> object:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("expected a list of exactly two 'node:ethN' strings")
    return value


def _few_links(value: object) -> object:
    if isinstance(value, list) and len(value) > MAX_LINKS:
        raise ValueError(f"at most {MAX_LINKS} links fit 198.18.0.0/16")
    return value


Scalar = Annotated[str, BeforeValidator(_scalar)]
StringMap = Annotated[dict[str, Scalar], BeforeValidator(_string_keys)]

# Node fields the runtime does not use: accepted (the same file deploys under containerlab)
# and dropped before validation.
_CONTAINER_ONLY = CONTAINERLAB_NODE_FIELDS - {"kind", "image", "group", "labels", "env"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeDef(_Model):
    """A node, or the defaults, a kind or a group: the fields the runtime reads.

    A field present in the file is in ``model_fields_set`` (the empty defaults only stand
    for "not given"); ``kind: ~`` is refused like any other non-value.
    """

    kind: Scalar = ""
    image: Scalar = ""
    group: Scalar = ""
    labels: StringMap | None = None
    env: StringMap | None = None  # container-side; only its shape is checked

    @model_validator(mode="before")
    @classmethod
    def _without_container_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {str(k): v for k, v in data.items() if str(k) not in _CONTAINER_ONLY}
        return data


NodeMap = Annotated[dict[str, NodeDef | None], BeforeValidator(_string_keys)]


class LinkDef(_Model):
    """A brief-format link: ``endpoints: ["a:eth1", "b:eth1"]``."""

    endpoints: Annotated[list[Scalar], BeforeValidator(_two_endpoints)] = []
    mtu: Scalar = ""
    vars: Any = None
    labels: Any = None
    type: Any = None

    @model_validator(mode="before")
    @classmethod
    def _extended_format_alone(cls, data: Any) -> Any:
        # An extended-format link only gets the one message that tells what to write instead.
        if isinstance(data, dict) and "type" in data:
            return {"type": data["type"]}
        return data

    @field_validator("type")
    @classmethod
    def _no_extended_format(cls, value: Any) -> Any:
        raise ValueError(
            "extended link format is not supported; use endpoints: ['a:eth1', 'b:eth1']"
        )


class TopologyDef(_Model):
    nodes: NodeMap | None = None
    links: Annotated[list[LinkDef | None], BeforeValidator(_few_links)] | None = None
    kinds: NodeMap | None = None
    defaults: NodeDef | None = None
    groups: NodeMap | None = None


class ClabFile(_Model):
    """The top level of a ``*.clab.yml`` file."""

    name: Scalar
    prefix: Scalar | None = None
    mgmt: Any = None
    settings: Any = None
    debug: Any = None
    topology: TopologyDef | None


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _field(loc: Iterable[str | int]) -> str:
    """``topology.links[0].endpoints[1]``, ``topology.nodes.leaf1.labels.roce.lab/speed``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _unknown_field(loc: tuple[str | int, ...]) -> str:
    name = str(loc[-1])
    if len(loc) == 1:
        what, allowed = "top-level", TOP_LEVEL_FIELDS
    elif len(loc) == 2:
        what, allowed = "topology", TOPOLOGY_FIELDS
    elif loc[:2] == ("topology", "links"):
        what, allowed = "link", LINK_FIELDS
    else:
        what, allowed = "node", CONTAINERLAB_NODE_FIELDS
    return f"unknown {what} field{_hint(name, allowed)}"


_REQUIRED: dict[tuple[str | int, ...], str] = {
    ("name",): "the topology must have a name",
    ("topology",): "the topology must have a 'topology' section",
}
_MAPPING_ERRORS = {"model_type", "model_attributes_type", "dict_type"}


class _Checker:
    """Collects problems, located through the loader's source map."""

    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def position(self, path: PathKey, *, key: bool = False) -> SourcePosition | None:
        if key:
            for spelling in (path, tuple(_as_int(p) for p in path)):
                if spelling in self.source.keys:
                    return self.source.keys[spelling]
        return self.source.locate(path)

    def add(self, path: PathKey, field_name: str, message: str, *, key: bool = False) -> None:
        self.problems.append(Problem(self.position(path, key=key), field_name, message))

    def shape(self, exc: ValidationError) -> None:
        """pydantic's errors in the words the lab has always used."""
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            kind, value = error["type"], error.get("input")
            at_key = False
            if kind == "extra_forbidden":
                message, at_key = _unknown_field(loc), True
            elif kind == "missing":
                message = _REQUIRED.get(loc, f"field {str(loc[-1])!r} is required")
            elif kind in _MAPPING_ERRORS:
                message = f"expected a mapping, got {_describe(value)}"
            elif kind == "list_type":
                message = f"expected a list, got {_describe(value)}"
            elif kind == "string_type":
                message = f"expected a value, got {_describe(value)}"
            else:
                message = error["msg"].removeprefix("Value error, ")
            self.add(loc, _field(loc), message, key=at_key)

    def fail_if_any(self) -> None:
        if self.problems:
            # File order: the first line to fix comes first.
            self.problems.sort(
                key=lambda p: (p.position.line, p.position.column) if p.position else (0, 0)
            )
            raise TopologyError(self.problems)


def _as_int(part: str | int) -> str | int:
    if isinstance(part, str) and part.isascii() and part.isdigit() and len(part) < 20:
        return int(part)
    return part


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Setting:
    """One value from one layer, with where it came from."""

    value: str
    path: PathKey  # in the data, for the position
    field: str  # in messages


@dataclass
class _Layer:
    """One source of node settings: defaults, a kind, a group or the node itself."""

    field: str
    kind: _Setting | None
    image: _Setting | None
    labels: dict[str, _Setting]


_NO_NODE = NodeDef()


def load_topology(path: Path | str) -> Topology:
    """Read and validate ``path``; raise :class:`TopologyError` on anything not buildable."""
    file = Path(path)
    try:
        data, source = load_yaml(file)
    except IntentError as exc:
        raise TopologyError(exc.problems) from None
    return parse_topology(data, source)


def parse_topology(data: Any, source: SourceMap) -> Topology:
    """Validate ``data`` as loaded by :func:`common.yamlsource.load_yaml` with ``source``.

    In passes, each reporting every problem it finds before the next one starts: the file's
    shape; the lab, its nodes and links; each node's parameters; both ends of each link.
    """
    check = _Checker(source)
    clab = _shape(check, data)
    topo = clab.topology or TopologyDef()
    lab = _lab(check, clab, topo)
    layered = _node_layers(check, topo, lab)
    raw_links = _links(check, topo, dict.fromkeys(topo.nodes or {}))
    drafts = _drafts(check, layered)
    check.fail_if_any()

    peers = _peers(drafts, raw_links)
    nodes = _nodes(check, drafts, peers)
    check.fail_if_any()

    links = tuple(
        checked for raw in raw_links if (checked := _check_link(check, raw, nodes)) is not None
    )
    _check_attachments(check, nodes, peers)
    check.fail_if_any()
    return Topology(
        name=lab.name,
        path=source.file,
        prefix=lab.prefix,
        nodes=nodes,
        links=links,
        credentials=lab.credentials,
        profile=lab.profile,
        time_dilation=lab.time_dilation,
    )


def _shape(check: _Checker, data: Any) -> ClabFile:
    """The file as containerlab's schema (pydantic); every shape problem at once."""
    try:
        return ClabFile.model_validate(data)
    except ValidationError as exc:
        check.shape(exc)
        check.fail_if_any()
        raise AssertionError("unreachable: pydantic reported no error") from exc


@dataclass(frozen=True)
class _Lab:
    """The lab-wide settings, and the layers nodes inherit from (defaults, kinds, groups)."""

    name: str
    prefix: str | None
    credentials: Credentials
    profile: str
    time_dilation: int
    defaults: _Layer
    kinds: Mapping[str, _Layer]
    groups: Mapping[str, _Layer]


def _lab(check: _Checker, clab: ClabFile, topo: TopologyDef) -> _Lab:
    if (problem := check_lab_name(clab.name)) is not None:
        check.add(("name",), "name", problem)
    prefix: str | None = None
    if "prefix" in clab.model_fields_set:
        prefix = clab.prefix or ""  # ``prefix:`` with no value is containerlab's ""
    defaults = _layer(check, topo.defaults, ("topology", "defaults"))
    kinds = {
        kind: _layer(check, value, ("topology", "kinds", kind))
        for kind, value in (topo.kinds or {}).items()
    }
    groups = {
        group: _layer(check, value, ("topology", "groups", group))
        for group, value in (topo.groups or {}).items()
    }
    lab_labels = _lab_labels(check, defaults)
    return _Lab(
        name=clab.name,
        prefix=prefix,
        credentials=Credentials(
            username=lab_labels.get("username", DEFAULT_USERNAME),
            password=lab_labels.get("password", DEFAULT_PASSWORD),
        ),
        profile=lab_labels.get("profile", DEFAULT_PROFILE),
        time_dilation=_time_dilation(check, defaults),
        defaults=defaults,
        kinds=kinds,
        groups=groups,
    )


def _node_layers(check: _Checker, topo: TopologyDef, lab: _Lab) -> dict[str, list[_Layer]]:
    """Each well-named node's layers, least specific first: defaults, its kind, its group,
    itself."""
    raw_nodes = topo.nodes or {}
    if not raw_nodes:
        where: PathKey = (
            ("topology", "nodes") if "nodes" in topo.model_fields_set else ("topology",)
        )
        check.add(where, "topology.nodes", "the topology has no nodes")
    layered: dict[str, list[_Layer]] = {}
    for node_name, value in raw_nodes.items():
        layers = _layers_of(check, node_name, value or _NO_NODE, lab)
        if layers is not None:
            layered[node_name] = layers
    return layered


def _layers_of(check: _Checker, name: str, node_def: NodeDef, lab: _Lab) -> list[_Layer] | None:
    path: PathKey = ("topology", "nodes", name)
    node_field = _field(path)
    if not _NAME_RE.match(name) or len(name) > 48:
        message = "node names use letters, digits, '_' and '-' (at most 48)"
        check.add(path, node_field, message, key=True)
        return None
    own = _layer(check, node_def, path)
    for key in node_def.labels or {}:
        if key.startswith(LABEL_PREFIX) and key.removeprefix(LABEL_PREFIX) in LAB_LABELS:
            check.add(
                (*path, "labels", key),
                f"{node_field}.labels.{key}",
                "lab-wide setting: put it in topology.defaults.labels",
                key=True,
            )
    # Before topology.groups existed, group was a free-form label for graphing.
    group_layer = [lab.groups[node_def.group]] if node_def.group in lab.groups else []
    kind = _resolve([lab.defaults, *group_layer, own], "kind")
    if kind is None:
        message = "no kind (set it here or in topology.defaults)"
        check.add(path, f"{node_field}.kind", message, key=True)
        return None
    kind_layer = [lab.kinds[kind.value]] if kind.value in lab.kinds else []
    return [lab.defaults, *kind_layer, *group_layer, own]


def _drafts(check: _Checker, layered: Mapping[str, list[_Layer]]) -> dict[str, _Draft]:
    return {
        node_name: draft
        for node_name, layers in layered.items()
        if (draft := _draft(check, node_name, layers)) is not None
    }


def _peers(drafts: Mapping[str, _Draft], links: Iterable[_RawLink]) -> dict[str, list[str]]:
    """The nodes each node has links to (one entry per link)."""
    peers: dict[str, list[str]] = {node_name: [] for node_name in drafts}
    for link in links:
        peers[link.a.node].append(link.b.node)
        peers[link.b.node].append(link.a.node)
    return peers


def _nodes(
    check: _Checker, drafts: Mapping[str, _Draft], peers: Mapping[str, list[str]]
) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    for node_name, draft in drafts.items():
        if (built := _node(check, draft, _role(draft, drafts, peers))) is not None:
            nodes[node_name] = built
    return nodes


def _role(draft: _Draft, drafts: Mapping[str, _Draft], peers: Mapping[str, list[str]]) -> Role:
    if draft.role is not None:
        return draft.role
    if not draft.is_switch:
        return "host"
    # Unlabelled switch: a leaf if it has hosts attached, else a spine.
    return "leaf" if any(not drafts[peer].is_switch for peer in peers[draft.name]) else "spine"


def _check_attachments(
    check: _Checker, nodes: Mapping[str, Node], peers: Mapping[str, list[str]]
) -> None:
    """A switch has links; a VM host has exactly one, to a switch."""
    for node in nodes.values():
        path = ("topology", "nodes", node.name)
        if node.is_switch and not peers[node.name]:
            check.add(path, _field(path), "a lab switch needs at least one link", key=True)
        if node.is_vm and [nodes[p].is_switch for p in peers[node.name]] != [True]:
            check.add(
                path,
                _field(path),
                f"a VM host (roce.lab/rdma) needs exactly one link, to a lab switch; "
                f"it has {len(peers[node.name])}",
                key=True,
            )


def _layer(check: _Checker, node: NodeDef | None, path: PathKey) -> _Layer:
    node = node or _NO_NODE
    layer_field = _field(path)
    settings: dict[str, _Setting | None] = {
        attr: _Setting(getattr(node, attr), (*path, attr), f"{layer_field}.{attr}")
        if attr in node.model_fields_set
        else None
        for attr in ("kind", "image")
    }
    labels: dict[str, _Setting] = {}
    known = NODE_LABELS | LAB_LABELS
    for key, value in (node.labels or {}).items():
        setting = _Setting(value, (*path, "labels", key), f"{layer_field}.labels.{key}")
        if key.startswith(LABEL_PREFIX) and key.removeprefix(LABEL_PREFIX) not in known:
            known_keys = {LABEL_PREFIX + k for k in known}
            check.add(setting.path, setting.field, f"unknown lab label{_hint(key, known_keys)}")
            continue
        labels[key] = setting
    return _Layer(field=layer_field, kind=settings["kind"], image=settings["image"], labels=labels)


def _lab_labels(check: _Checker, defaults: _Layer) -> dict[str, str]:
    values: dict[str, str] = {}
    for short in sorted(LAB_LABELS):
        setting = defaults.labels.get(LABEL_PREFIX + short)
        if setting is None:
            continue
        if not setting.value.strip():
            check.add(setting.path, setting.field, "is empty")
            continue
        values[short] = setting.value
    return values


def _time_dilation(check: _Checker, defaults: _Layer) -> int:
    setting = defaults.labels.get(LABEL_PREFIX + "time-dilation")
    if setting is None or not setting.value.strip():
        return DEFAULT_TIME_DILATION  # an empty one is reported by _lab_labels
    text = setting.value.strip()
    # At most 7 digits: int() of a 5 000-digit label must not be attempted.
    if text.isascii() and text.isdigit() and len(text) <= 7:
        value = int(text)
        if 1 <= value <= MAX_TIME_DILATION:
            return value
    check.add(
        setting.path,
        setting.field,
        f"Expected: a whole time-dilation factor 1-{MAX_TIME_DILATION} (how many times faster "
        f"the emulated links are, e.g. 1000 for 10M standing for 10G) Actual: {_shown(text)}",
    )
    return DEFAULT_TIME_DILATION


def _resolve(layers: list[_Layer], attr: Literal["kind", "image"]) -> _Setting | None:
    for layer in reversed(layers):
        value: _Setting | None = getattr(layer, attr)
        if value is not None:
            return value
    return None


def _merged_labels(layers: list[_Layer]) -> dict[str, _Setting]:
    merged: dict[str, _Setting] = {}
    for layer in layers:
        merged.update(layer.labels)
    return merged


@dataclass(frozen=True)
class _RawLink:
    index: int
    a: Endpoint
    b: Endpoint
    mtu: int | None
    path: PathKey
    line: int


def _links(check: _Checker, topo: TopologyDef, node_names: Mapping[str, None]) -> list[_RawLink]:
    used: dict[tuple[str, str], int] = {}
    result: list[_RawLink] = []
    for index, link in enumerate(topo.links or []):
        path: PathKey = ("topology", "links", index)
        link_field = _field(path)
        link = link or LinkDef()
        if "endpoints" not in link.model_fields_set:
            check.add(path, f"{link_field}.endpoints", "a link needs endpoints")
            continue
        endpoints: list[Endpoint] = []
        for position, text in enumerate(link.endpoints):
            item_path = (*path, "endpoints", position)
            item_field = _field(item_path)
            endpoint = _endpoint(check, text, item_path, item_field, node_names)
            if endpoint is None:
                continue
            item_line = _line(check.position(item_path))
            key = (endpoint.node, endpoint.ifname)
            if key in used:
                check.add(
                    item_path, item_field, f"{text} is already used by the link at line {used[key]}"
                )
                continue
            used[key] = item_line
            endpoints.append(endpoint)
        if len(endpoints) != 2:
            continue
        if endpoints[0].node == endpoints[1].node:
            check.add(
                (*path, "endpoints"),
                f"{link_field}.endpoints",
                f"both ends are on node {endpoints[0].node!r}",
            )
            continue
        mtu: int | None = None
        if "mtu" in link.model_fields_set:
            mtu = _mtu(check, _Setting(link.mtu, (*path, "mtu"), f"{link_field}.mtu"))
            if mtu is None:
                continue
        line = _line(check.position(path))
        result.append(_RawLink(index, endpoints[0], endpoints[1], mtu, path, line))
    return result


_LISTED_NODES = 20


def _endpoint(
    check: _Checker, text: str, path: PathKey, item_field: str, node_names: Mapping[str, None]
) -> Endpoint | None:
    node_name, sep, ifname = text.partition(":")
    if not sep or not node_name or not ifname or ":" in ifname:
        check.add(path, item_field, f"{_shown(text)} is not of the form 'node:ethN'")
        return None
    if node_name not in node_names:
        names = ", ".join(list(node_names)[:_LISTED_NODES])
        more = ", …" if len(node_names) > _LISTED_NODES else ""
        check.add(path, item_field, f"unknown node {_shown(node_name)} (nodes: {names}{more})")
        return None
    if ifname == "eth0":
        check.add(
            path,
            item_field,
            "eth0 is containerlab's management interface; data links use eth1, eth2, …",
        )
        return None
    match = _ETH_RE.match(ifname)
    if not match:
        check.add(
            path, item_field, f"interface {_shown(ifname)}: use containerlab's names eth1, eth2, …"
        )
        return None
    return Endpoint(node_name, ifname, int(match.group(1)))


def _line(position: SourcePosition | None) -> int:
    return position.line if position is not None else 0


def _mtu(check: _Checker, setting: _Setting) -> int | None:
    text = setting.value.strip()
    # isascii: '９０００'.isdigit() is true too, and int('²') raises.
    if not (text.isascii() and text.isdigit()) or not 1280 <= int(text) <= 9216:
        check.add(
            setting.path,
            setting.field,
            f"{_shown(setting.value)} is not an MTU between 1280 and 9216",
        )
        return None
    return int(text)


@dataclass
class _Draft:
    """A node after its kind, image and role label are checked (phase one of two)."""

    name: str
    kind: str
    image: str
    labels: dict[str, _Setting]
    role: Role | None
    runs_vswitch: bool
    line: int
    path: PathKey = field(default=())

    @property
    def is_switch(self) -> bool:
        return self.role in ("spine", "leaf") or (self.role is None and self.runs_vswitch)

    def label(self, short: str) -> _Setting | None:
        return self.labels.get(LABEL_PREFIX + short)


def _draft(check: _Checker, name: str, layers: list[_Layer]) -> _Draft | None:
    path: PathKey = ("topology", "nodes", name)
    node_field = _field(path)
    kind_setting = _resolve(layers, "kind")
    assert kind_setting is not None  # checked by the caller
    kind = kind_setting.value
    if kind in _CEOS_KINDS:
        check.add(
            kind_setting.path,
            f"{node_field}.kind",
            f"kind {kind} needs containerlab and a cEOS image; "
            "use roce-leafspine.clab.yml with the netns runtime",
        )
        return None
    if kind != "linux":
        check.add(
            kind_setting.path,
            f"{node_field}.kind",
            f"kind {_shown(kind)} is not supported by the netns runtime (use linux)",
        )
        return None
    image_setting = _resolve(layers, "image")
    if image_setting is None:
        check.add(path, f"{node_field}.image", "kind linux needs an image", key=True)
        return None
    image = image_setting.value
    labels = _merged_labels(layers)
    runs_vswitch = _is_vswitch_image(image)
    role: Role | None = None
    role_setting = labels.get(LABEL_PREFIX + "role")
    if role_setting is not None:
        value = role_setting.value
        if value not in ("spine", "leaf", "host"):
            check.add(
                role_setting.path,
                role_setting.field,
                f"{_shown(value)} is not a role (spine, leaf or host)",
            )
            return None
        role = value  # type: ignore[assignment]
        if role != "host" and not runs_vswitch:
            check.add(
                role_setting.path,
                role_setting.field,
                f"role {role} runs the vswitch: it needs image {VSWITCH_IMAGE}:<tag>, "
                f"got {_shown(image)}",
            )
            return None
    line = _line(check.position(path, key=True))
    return _Draft(name, kind, image, labels, role, runs_vswitch, line, path)


def _node(check: _Checker, draft: _Draft, role: Role) -> Node | None:
    lab_kind: LabKind = "host" if role == "host" else "lab-switch"
    before = len(check.problems)
    speed = _speed(check, draft)
    mtu = _node_mtu(check, draft)
    cable = _cable_m(check, draft)
    buffer: BufferSettings | None = None
    if lab_kind == "lab-switch":
        if len(check.problems) == before:  # the defaults depend on speed and MTU
            buffer = _buffer(check, draft, speed, mtu)
    else:
        _no_own_buffer_labels(check, draft)
    rdma = _rdma(check, draft, lab_kind)
    nos = _nos(check, draft, lab_kind)
    if len(check.problems) > before:
        return None
    return Node(
        rdma=rdma,
        nos=nos,
        name=draft.name,
        kind=draft.kind,
        image=draft.image,
        lab_kind=lab_kind,
        role=role,
        speed_bps=speed,
        mtu=mtu,
        cable_m=cable,
        buffer=buffer,
        labels={key: setting.value for key, setting in draft.labels.items()},
        line=draft.line,
    )


def _speed(check: _Checker, draft: _Draft) -> int:
    setting = draft.label("speed")
    if setting is None:
        return DEFAULT_SPEED_BPS
    try:
        return parse_speed(setting.value)
    except ValueError as exc:
        check.add(setting.path, setting.field, str(exc))
        return DEFAULT_SPEED_BPS


def _node_mtu(check: _Checker, draft: _Draft) -> int:
    setting = draft.label("mtu")
    if setting is None:
        return DEFAULT_MTU
    return _mtu(check, setting) or DEFAULT_MTU


def _cable_m(check: _Checker, draft: _Draft) -> float:
    setting = draft.label("cable-m")
    if setting is None:
        return DEFAULT_CABLE_M
    try:
        cable = float(setting.value) if setting.value.isascii() else -1.0
    except ValueError:
        cable = -1.0
    if math.isnan(cable) or not 0 <= cable <= 10_000:
        check.add(
            setting.path,
            setting.field,
            f"{_shown(setting.value)} is not a cable length in metres (0-10000)",
        )
    return cable


def _own(draft: _Draft, setting: _Setting) -> bool:
    """The label is set on the node itself (not inherited from defaults, a kind or a group)."""
    return setting.field.startswith(_field(draft.path) + ".")


def _no_own_buffer_labels(check: _Checker, draft: _Draft) -> None:
    """A host's own buffer labels are a mistake; inherited ones target the switches."""
    for short in BUFFER_LABELS:
        setting = draft.label(short)
        if setting is not None and _own(draft, setting):
            check.add(setting.path, setting.field, "buffer labels only apply to lab switches")


def _rdma(check: _Checker, draft: _Draft, lab_kind: LabKind) -> str | None:
    setting = draft.label("rdma")
    if setting is None:
        return None
    if lab_kind == "lab-switch":
        if _own(draft, setting):
            check.add(setting.path, setting.field, "roce.lab/rdma only applies to hosts")
        return None
    if setting.value not in RDMA_STACKS:
        check.add(
            setting.path,
            setting.field,
            f"{_shown(setting.value)} is not an RDMA stack the lab can run "
            f"({', '.join(RDMA_STACKS)})",
        )
        return None
    return setting.value


def _nos(check: _Checker, draft: _Draft, lab_kind: LabKind) -> str | None:
    setting = draft.label("nos")
    if lab_kind != "lab-switch":
        if setting is not None and _own(draft, setting):
            check.add(setting.path, setting.field, "roce.lab/nos only applies to switches")
        return None
    if setting is None:
        return DEFAULT_NOS
    if setting.value not in NOS_PLATFORMS:
        check.add(
            setting.path,
            setting.field,
            f"{_shown(setting.value)} is not a NOS the lab switch speaks "
            f"({', '.join(NOS_PLATFORMS)})",
        )
        return None
    return setting.value


BUFFER_LABELS = {
    "xoff-bytes": "xoff_bytes",
    "xon-bytes": "xon_bytes",
    "headroom-bytes": "headroom_bytes",
    "queue-limit-bytes": "queue_limit_bytes",
}


def _buffer(check: _Checker, draft: _Draft, speed: int, mtu: int) -> BufferSettings | None:
    base = default_buffer(speed, mtu)
    sizes: dict[str, int] = {}
    before = len(check.problems)
    for short, attr in BUFFER_LABELS.items():
        setting = draft.label(short)
        if setting is None:
            sizes[attr] = getattr(base, attr)
            continue
        try:
            sizes[attr] = parse_size(setting.value)
        except ValueError as exc:
            check.add(setting.path, setting.field, str(exc))
            continue
        if sizes[attr] <= 0 and attr in ("xoff_bytes", "queue_limit_bytes"):
            check.add(setting.path, setting.field, "must be more than 0 bytes")
    if len(check.problems) > before:
        return None
    buffer = BufferSettings(**sizes)
    if buffer.xon_bytes > buffer.xoff_bytes:
        setting = draft.label("xon-bytes") or draft.label("xoff-bytes")
        assert setting is not None  # the defaults are consistent, so a label caused it
        check.add(
            setting.path,
            setting.field,
            f"xon ({buffer.xon_bytes} bytes) must not exceed xoff ({buffer.xoff_bytes} bytes)",
        )
        return None
    return buffer


def _is_vswitch_image(image: str) -> bool:
    repository = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return repository == VSWITCH_IMAGE


def _check_link(check: _Checker, raw: _RawLink, nodes: Mapping[str, Node]) -> Link | None:
    link_field = _field(raw.path)
    a, b = nodes[raw.a.node], nodes[raw.b.node]
    if a.speed_bps != b.speed_bps:
        check.add(
            raw.path,
            link_field,
            f"the ends run at different speeds ({raw.a}: {format_speed(a.speed_bps)}, "
            f"{raw.b}: {format_speed(b.speed_bps)}); label both nodes with the same roce.lab/speed",
        )
        return None
    if raw.mtu is not None:
        mtu = raw.mtu
    elif a.mtu != b.mtu:
        check.add(
            raw.path,
            link_field,
            f"the ends have different MTUs ({raw.a}: {a.mtu}, {raw.b}: {b.mtu}); "
            "set mtu on the link",
        )
        return None
    else:
        mtu = a.mtu
    return Link(
        index=raw.index,
        a=raw.a,
        b=raw.b,
        mtu=mtu,
        speed_bps=a.speed_bps,
        line=raw.line,
    )

"""Read a containerlab topology (``*.clab.yml``) into what the netns runtime can build.

The file stays in containerlab's own format (``name``, ``topology.defaults|kinds|nodes|links``,
brief-format link ``endpoints: ["a:eth1", "b:eth1"]``) so the same file deploys under real
containerlab. Lab parameters live where containerlab allows free-form data: node ``labels``
under the ``roce.lab/`` prefix, merged like containerlab merges them (defaults < kinds <
node). Everything the runtime cannot honour is refused here, before anything is created, with
``file:line: field: message``; line numbers come from PyYAML's composed node graph.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

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
    }
)  # fmt: skip
# Lab-wide values: only meaningful in topology.defaults (the fabric file has one of each).
LAB_LABELS = frozenset({"profile", "username", "password"})

_CEOS_KINDS = {"arista_ceos", "ceos", "vr-arista_veos", "vr-veos", "arista_veos"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_LAB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ETH_RE = re.compile(r"^eth([1-9][0-9]{0,3})$")
_SPEED_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:b/s|bps|b)?$", re.IGNORECASE)
_SIZE_RE = re.compile(r"^([0-9]+)\s*(b|kb|kib|mb|mib)?$", re.IGNORECASE)
_SPEED_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 10**6, "mib": 2**20}


class TopologyError(Exception):
    """A topology the runtime cannot build; names the file, line and field."""

    def __init__(self, file: Path | str, line: int, field: str, message: str) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line > 0 else self.file
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


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

    @property
    def is_switch(self) -> bool:
        return self.lab_kind == "lab-switch"


@dataclass(frozen=True)
class Endpoint:
    """``node:ethN`` — one end of a link."""

    node: str
    ifname: str
    index: int

    def __str__(self) -> str:
        return f"{self.node}:{self.ifname}"


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

    def container_name(self, node: str, lab_name: str | None = None) -> str:
        """containerlab's container name, used as the node's network namespace name."""
        return container_name(self.prefix, lab_name or self.name, node)


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
        return f"{name!r} is not a lab name (letters, digits, '.', '_', '-'; at most 64)"
    return None


def parse_speed(text: str) -> int:
    """``10M`` / ``100Mbps`` / ``1G`` / ``10000000`` → bits per second."""
    match = _SPEED_RE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a speed (examples: 10M, 100M, 1G)")
    value = float(match.group(1)) * _SPEED_UNITS[match.group(2).lower()]
    if value < 1000 or not value.is_integer():
        raise ValueError(f"{text!r} is not a usable port speed (at least 1K, whole bits/s)")
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
        raise ValueError(f"{text!r} is not a size in bytes (examples: 30000, 30KB, 32KiB)")
    return int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()]


def default_buffer(speed_bps: int, mtu: int) -> BufferSettings:
    """Buffer thresholds that make a software switch at ``speed_bps`` lossless.

    Headroom must absorb what is already on the way once XOFF is sent: up to one MTU frame
    leaving the peer plus one in flight, plus what arrives during the switch's own reaction
    time; a Python switch reacts in about a millisecond, 1.6 ms is budgeted. At 10 Mb/s and
    MTU 9000 this gives the contract numbers 30000/15000/20000/60000.
    """
    headroom = 2 * mtu + math.ceil(speed_bps / 8 * 0.0016)
    xoff = headroom * 3 // 2
    return BufferSettings(
        xoff_bytes=xoff,
        xon_bytes=xoff // 2,
        headroom_bytes=headroom,
        queue_limit_bytes=2 * xoff,
    )


# --------------------------------------------------------------------------- YAML walking


class _Doc:
    """Composed YAML of one file plus helpers that raise :class:`TopologyError`."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.loader = yaml.SafeLoader(text)
        self._mappings: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}
        try:
            root = self.loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark else 0
            raise TopologyError(path, line, "", f"not valid YAML: {exc.problem}") from None
        except yaml.YAMLError as exc:
            raise TopologyError(path, 0, "", f"not valid YAML: {exc}") from None
        if root is None:
            raise TopologyError(path, 1, "", "the file is empty")
        self.root = root

    def error(self, node: yaml.Node | None, field: str, message: str) -> TopologyError:
        line = node.start_mark.line + 1 if node is not None else 1
        return TopologyError(self.path, line, field, message)

    def mapping(self, node: yaml.Node, field: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key → (key node, value node); refuses non-mappings and duplicate keys."""
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            return {}
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, field, f"expected a mapping, got {_describe(node)}")
        cached = self._mappings.get(id(node))
        if cached is not None:  # flattening is not repeatable: own and merged keys then look alike
            return cached
        own = [k for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
        seen: dict[str, yaml.Node] = {}
        for key_node in own:
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.error(key_node, field, "keys must be plain strings")
            key = str(key_node.value)
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise self.error(
                    key_node, _join(field, key), f"duplicate key (first at line {first})"
                )
            seen[key] = key_node
        try:
            # YAML merge keys (<<: *anchor): merged pairs come first, so the node's own win.
            self.loader.flatten_mapping(node)
        except yaml.MarkedYAMLError as exc:
            raise self.error(node, field, f"bad merge key: {exc.problem}") from None
        result: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.error(key_node, field, "keys must be plain strings")
            result[str(key_node.value)] = (key_node, value_node)
        self._mappings[id(node)] = result
        return result

    def scalar(self, node: yaml.Node, field: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:null":
            raise self.error(node, field, f"expected a value, got {_describe(node)}")
        return str(node.value)

    def string_map(self, node: yaml.Node, field: str) -> dict[str, tuple[str, yaml.Node]]:
        """labels / env: string (or number) values."""
        return {
            key: (self.scalar(value, _join(field, key)), value)
            for key, (_, value) in self.mapping(node, field).items()
        }

    def check_fields(
        self,
        entries: Mapping[str, tuple[yaml.Node, yaml.Node]],
        allowed: frozenset[str],
        field: str,
        what: str,
    ) -> None:
        for key, (key_node, _) in entries.items():
            if key not in allowed:
                raise self.error(
                    key_node, _join(field, key), f"unknown {what} field{_hint(key, allowed)}"
                )


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def _describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag == "tag:yaml.org,2002:null":
        return "nothing"
    return f"{node.value!r}"


def _hint(word: str, choices: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------- parsing


@dataclass
class _Layer:
    """One source of node settings: defaults, a kind, a group or the node itself."""

    field: str
    kind: tuple[str, yaml.Node] | None
    image: tuple[str, yaml.Node] | None
    labels: dict[str, tuple[str, yaml.Node]]


def load_topology(path: Path | str) -> Topology:
    """Read and validate ``path``; raise :class:`TopologyError` on anything not buildable."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(file, 0, "", f"cannot read the topology: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise TopologyError(file, 0, "", "cannot read the topology: not UTF-8 text") from None
    return parse_topology(text, file)


def parse_topology(text: str, file: Path) -> Topology:
    """Validate topology ``text`` (read from ``file``, used in messages)."""
    doc = _Doc(file, text)
    top = doc.mapping(doc.root, "")
    doc.check_fields(top, TOP_LEVEL_FIELDS, "", "top-level")

    if "name" not in top:
        raise doc.error(doc.root, "name", "the topology must have a name")
    name_node = top["name"][1]
    name = doc.scalar(name_node, "name")
    problem = check_lab_name(name)
    if problem:
        raise doc.error(name_node, "name", problem)

    prefix: str | None = None
    if "prefix" in top:
        prefix_node = top["prefix"][1]
        prefix = "" if _is_null(prefix_node) else doc.scalar(prefix_node, "prefix")

    if "topology" not in top:
        raise doc.error(doc.root, "topology", "the topology must have a 'topology' section")
    topo_node = top["topology"][1]
    topo = doc.mapping(topo_node, "topology")
    doc.check_fields(topo, TOPOLOGY_FIELDS, "topology", "topology")

    defaults = _layer_from(doc, _get(topo, "defaults"), "topology.defaults")
    kinds = {
        kind: _layer_from(doc, value, f"topology.kinds.{kind}")
        for kind, (_, value) in doc.mapping(_get(topo, "kinds"), "topology.kinds").items()
    }
    groups = {
        group: _layer_from(doc, value, f"topology.groups.{group}")
        for group, (_, value) in doc.mapping(_get(topo, "groups"), "topology.groups").items()
    }

    lab_labels = _lab_labels(doc, defaults)
    credentials = Credentials(
        username=lab_labels.get("username", DEFAULT_USERNAME),
        password=lab_labels.get("password", DEFAULT_PASSWORD),
    )
    profile = lab_labels.get("profile", DEFAULT_PROFILE)

    if "nodes" not in topo:
        raise doc.error(topo_node, "topology.nodes", "the topology has no nodes")
    nodes_node = topo["nodes"][1]
    raw_nodes = doc.mapping(nodes_node, "topology.nodes")
    if not raw_nodes:
        raise doc.error(nodes_node, "topology.nodes", "the topology has no nodes")

    layered: dict[str, tuple[list[_Layer], yaml.Node]] = {}
    for node_name, (key_node, value_node) in raw_nodes.items():
        field = f"topology.nodes.{node_name}"
        if not _NAME_RE.match(node_name) or len(node_name) > 48:
            raise doc.error(
                key_node, field, "node names use letters, digits, '_' and '-' (at most 48)"
            )
        own = _layer_from(doc, value_node, field)
        for key, (label_key_node, _) in _label_keys(doc, value_node, field).items():
            if key.removeprefix(LABEL_PREFIX) in LAB_LABELS:
                raise doc.error(
                    label_key_node,
                    f"{field}.labels.{key}",
                    "lab-wide setting: put it in topology.defaults.labels",
                )
        group_layer: list[_Layer] = []
        group_entry = doc.mapping(value_node, field).get("group")
        if group_entry is not None:
            group_name = doc.scalar(group_entry[1], f"{field}.group")
            # Before topology.groups existed, group was a free-form label for graphing.
            if group_name in groups:
                group_layer = [groups[group_name]]
        kind_layers = [defaults, *group_layer, own]
        kind = _resolve(kind_layers, "kind")
        if kind is None:
            raise doc.error(
                key_node, f"{field}.kind", "no kind (set it here or in topology.defaults)"
            )
        layers = [defaults]
        if kind[0] in kinds:
            layers.append(kinds[kind[0]])
        layers += [*group_layer, own]
        layered[node_name] = (layers, key_node)

    links = _links(doc, topo, raw_nodes)

    drafts = {
        node_name: _draft(doc, node_name, layers, key_node)
        for node_name, (layers, key_node) in layered.items()
    }
    nodes: dict[str, Node] = {}
    for node_name, draft in drafts.items():
        role: Role
        if draft.role is not None:
            role = draft.role
        elif draft.is_switch:
            # Unlabelled switch: a leaf if it has hosts attached, else a spine.
            peers = [
                remote.node
                for link in links
                for local, remote in ((link.a, link.b), (link.b, link.a))
                if local.node == node_name
            ]
            role = "leaf" if any(not drafts[p].is_switch for p in peers) else "spine"
        else:
            role = "host"
        nodes[node_name] = _node(doc, draft, role)

    checked_links = tuple(_check_link(doc, link, nodes) for link in links)
    for node in nodes.values():
        if node.is_switch and not any(node.name in (lk.a.node, lk.b.node) for lk in checked_links):
            raise doc.error(
                layered[node.name][1],
                f"topology.nodes.{node.name}",
                "a lab switch needs at least one link",
            )
    return Topology(
        name=name,
        path=file,
        prefix=prefix,
        nodes=nodes,
        links=checked_links,
        credentials=credentials,
        profile=profile,
    )


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _get(entries: Mapping[str, tuple[yaml.Node, yaml.Node]], key: str) -> yaml.Node:
    if key in entries:
        return entries[key][1]
    return yaml.ScalarNode("tag:yaml.org,2002:null", "")


def _layer_from(doc: _Doc, node: yaml.Node, field: str) -> _Layer:
    entries = doc.mapping(node, field)
    doc.check_fields(entries, CONTAINERLAB_NODE_FIELDS, field, "node")
    kind = image = None
    if "kind" in entries:
        kind = (doc.scalar(entries["kind"][1], f"{field}.kind"), entries["kind"][1])
    if "image" in entries:
        image = (doc.scalar(entries["image"][1], f"{field}.image"), entries["image"][1])
    labels = doc.string_map(_get(entries, "labels"), f"{field}.labels")
    for key, (_, value_node) in labels.items():
        if key.startswith(LABEL_PREFIX):
            short = key.removeprefix(LABEL_PREFIX)
            known = NODE_LABELS | LAB_LABELS
            if short not in known:
                known_keys = {LABEL_PREFIX + k for k in known}
                raise doc.error(
                    value_node,
                    f"{field}.labels.{key}",
                    f"unknown lab label{_hint(key, known_keys)}",
                )
    if "env" in entries:
        doc.string_map(entries["env"][1], f"{field}.env")  # shape check only: container-side
    return _Layer(field=field, kind=kind, image=image, labels=labels)


def _label_keys(doc: _Doc, node: yaml.Node, field: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    entries = doc.mapping(node, field)
    if "labels" not in entries:
        return {}
    return doc.mapping(entries["labels"][1], f"{field}.labels")


def _lab_labels(doc: _Doc, defaults: _Layer) -> dict[str, str]:
    values: dict[str, str] = {}
    for short in LAB_LABELS:
        entry = defaults.labels.get(LABEL_PREFIX + short)
        if entry is None:
            continue
        value, node = entry
        if not value.strip():
            raise doc.error(node, f"topology.defaults.labels.{LABEL_PREFIX}{short}", "is empty")
        values[short] = value
    return values


def _resolve(layers: list[_Layer], attr: Literal["kind", "image"]) -> tuple[str, yaml.Node] | None:
    for layer in reversed(layers):
        value = getattr(layer, attr)
        if value is not None:
            return value  # type: ignore[no-any-return]
    return None


def _merged_labels(layers: list[_Layer]) -> dict[str, tuple[str, yaml.Node, str]]:
    merged: dict[str, tuple[str, yaml.Node, str]] = {}
    for layer in layers:
        for key, (value, node) in layer.labels.items():
            merged[key] = (value, node, f"{layer.field}.labels.{key}")
    return merged


@dataclass(frozen=True)
class _RawLink:
    index: int
    a: Endpoint
    b: Endpoint
    mtu: tuple[int, yaml.Node] | None
    node: yaml.Node


def _links(
    doc: _Doc,
    topo: Mapping[str, tuple[yaml.Node, yaml.Node]],
    raw_nodes: Mapping[str, tuple[yaml.Node, yaml.Node]],
) -> list[_RawLink]:
    links_node = _get(topo, "links")
    if _is_null(links_node):
        return []
    if not isinstance(links_node, yaml.SequenceNode):
        raise doc.error(
            links_node, "topology.links", f"expected a list, got {_describe(links_node)}"
        )
    if len(links_node.value) > MAX_LINKS:
        raise doc.error(
            links_node, "topology.links", f"at most {MAX_LINKS} links fit 198.18.0.0/16"
        )
    used: dict[tuple[str, str], int] = {}
    result: list[_RawLink] = []
    for index, link_node in enumerate(links_node.value):
        field = f"topology.links[{index}]"
        entries = doc.mapping(link_node, field)
        if "type" in entries:
            raise doc.error(
                entries["type"][0],
                f"{field}.type",
                "extended link format is not supported; use endpoints: ['a:eth1', 'b:eth1']",
            )
        doc.check_fields(entries, LINK_FIELDS, field, "link")
        if "endpoints" not in entries:
            raise doc.error(link_node, f"{field}.endpoints", "a link needs endpoints")
        ep_node = entries["endpoints"][1]
        ep_field = f"{field}.endpoints"
        if not isinstance(ep_node, yaml.SequenceNode) or len(ep_node.value) != 2:
            raise doc.error(ep_node, ep_field, "expected a list of exactly two 'node:ethN' strings")
        endpoints: list[Endpoint] = []
        for position, item in enumerate(ep_node.value):
            item_field = f"{ep_field}[{position}]"
            text = doc.scalar(item, item_field)
            node_name, sep, ifname = text.partition(":")
            if not sep or not node_name or not ifname or ":" in ifname:
                raise doc.error(item, item_field, f"{text!r} is not of the form 'node:ethN'")
            if node_name not in raw_nodes:
                raise doc.error(
                    item,
                    item_field,
                    f"unknown node {node_name!r} (nodes: {', '.join(raw_nodes)})",
                )
            if ifname == "eth0":
                raise doc.error(
                    item,
                    item_field,
                    "eth0 is containerlab's management interface; data links use eth1, eth2, …",
                )
            match = _ETH_RE.match(ifname)
            if not match:
                raise doc.error(
                    item,
                    item_field,
                    f"interface {ifname!r}: use containerlab's names eth1, eth2, …",
                )
            key = (node_name, ifname)
            if key in used:
                raise doc.error(
                    item, item_field, f"{text} is already used by the link at line {used[key]}"
                )
            used[key] = item.start_mark.line + 1
            endpoints.append(Endpoint(node_name, ifname, int(match.group(1))))
        if endpoints[0].node == endpoints[1].node:
            raise doc.error(ep_node, ep_field, f"both ends are on node {endpoints[0].node!r}")
        mtu: tuple[int, yaml.Node] | None = None
        if "mtu" in entries:
            mtu_node = entries["mtu"][1]
            mtu = (
                _mtu(doc, doc.scalar(mtu_node, f"{field}.mtu"), mtu_node, f"{field}.mtu"),
                mtu_node,
            )
        result.append(_RawLink(index, endpoints[0], endpoints[1], mtu, link_node))
    return result


def _mtu(doc: _Doc, text: str, node: yaml.Node, field: str) -> int:
    if not text.strip().isdigit() or not 1280 <= int(text) <= 9216:
        raise doc.error(node, field, f"{text!r} is not an MTU between 1280 and 9216")
    return int(text)


@dataclass
class _Draft:
    """A node after its kind, image and role label are checked (phase one of two)."""

    name: str
    key_node: yaml.Node
    kind: str
    image: str
    labels: dict[str, tuple[str, yaml.Node, str]]
    role: Role | None
    runs_vswitch: bool

    @property
    def is_switch(self) -> bool:
        return self.role in ("spine", "leaf") or (self.role is None and self.runs_vswitch)

    def label(self, short: str) -> tuple[str, yaml.Node, str] | None:
        return self.labels.get(LABEL_PREFIX + short)


def _draft(doc: _Doc, name: str, layers: list[_Layer], key_node: yaml.Node) -> _Draft:
    field = f"topology.nodes.{name}"
    kind_entry = _resolve(layers, "kind")
    assert kind_entry is not None  # checked by the caller
    kind, kind_node = kind_entry
    if kind in _CEOS_KINDS:
        raise doc.error(
            kind_node,
            f"{field}.kind",
            f"kind {kind} needs containerlab and a cEOS image; "
            "use roce-leafspine.clab.yml with the netns runtime",
        )
    if kind != "linux":
        raise doc.error(
            kind_node,
            f"{field}.kind",
            f"kind {kind!r} is not supported by the netns runtime (use linux)",
        )
    image_entry = _resolve(layers, "image")
    if image_entry is None:
        raise doc.error(key_node, f"{field}.image", "kind linux needs an image")
    image = image_entry[0]
    labels = _merged_labels(layers)
    runs_vswitch = _is_vswitch_image(image)
    role: Role | None = None
    role_entry = labels.get(LABEL_PREFIX + "role")
    if role_entry is not None:
        value, node, where = role_entry
        if value not in ("spine", "leaf", "host"):
            raise doc.error(node, where, f"{value!r} is not a role (spine, leaf or host)")
        role = value  # type: ignore[assignment]
        if role != "host" and not runs_vswitch:
            raise doc.error(
                node,
                where,
                f"role {role} runs the vswitch: it needs image {VSWITCH_IMAGE}:<tag>, "
                f"got {image!r}",
            )
    return _Draft(name, key_node, kind, image, labels, role, runs_vswitch)


def _node(doc: _Doc, draft: _Draft, role: Role) -> Node:
    field = f"topology.nodes.{draft.name}"
    lab_kind: LabKind = "host" if role == "host" else "lab-switch"
    speed = DEFAULT_SPEED_BPS
    if (entry := draft.label("speed")) is not None:
        try:
            speed = parse_speed(entry[0])
        except ValueError as exc:
            raise doc.error(entry[1], entry[2], str(exc)) from None
    mtu = DEFAULT_MTU
    if (entry := draft.label("mtu")) is not None:
        mtu = _mtu(doc, entry[0], entry[1], entry[2])
    cable = DEFAULT_CABLE_M
    if (entry := draft.label("cable-m")) is not None:
        try:
            cable = float(entry[0])
        except ValueError:
            cable = -1.0
        if math.isnan(cable) or not 0 <= cable <= 10_000:
            raise doc.error(
                entry[1], entry[2], f"{entry[0]!r} is not a cable length in metres (0-10000)"
            )
    buffer: BufferSettings | None = None
    if lab_kind == "lab-switch":
        buffer = _buffer(doc, draft, speed, mtu)
    else:
        for short in BUFFER_LABELS:
            entry = draft.label(short)
            # Inherited defaults are fine (they target the switches); the host's own are not.
            if entry is not None and entry[2].startswith(field + "."):
                raise doc.error(entry[1], entry[2], "buffer labels only apply to lab switches")
    return Node(
        name=draft.name,
        kind=draft.kind,
        image=draft.image,
        lab_kind=lab_kind,
        role=role,
        speed_bps=speed,
        mtu=mtu,
        cable_m=cable,
        buffer=buffer,
        labels={key: value for key, (value, _, _) in draft.labels.items()},
        line=draft.key_node.start_mark.line + 1,
    )


BUFFER_LABELS = {
    "xoff-bytes": "xoff_bytes",
    "xon-bytes": "xon_bytes",
    "headroom-bytes": "headroom_bytes",
    "queue-limit-bytes": "queue_limit_bytes",
}


def _buffer(doc: _Doc, draft: _Draft, speed: int, mtu: int) -> BufferSettings:
    base = default_buffer(speed, mtu)
    sizes: dict[str, int] = {}
    for short, attr in BUFFER_LABELS.items():
        entry = draft.label(short)
        if entry is None:
            sizes[attr] = getattr(base, attr)
            continue
        try:
            sizes[attr] = parse_size(entry[0])
        except ValueError as exc:
            raise doc.error(entry[1], entry[2], str(exc)) from None
        if sizes[attr] <= 0 and attr in ("xoff_bytes", "queue_limit_bytes"):
            raise doc.error(entry[1], entry[2], "must be more than 0 bytes")
    buffer = BufferSettings(**sizes)
    if buffer.xon_bytes > buffer.xoff_bytes:
        entry = draft.label("xon-bytes") or draft.label("xoff-bytes")
        assert entry is not None  # the defaults are consistent, so a label caused it
        raise doc.error(
            entry[1],
            entry[2],
            f"xon ({buffer.xon_bytes} bytes) must not exceed xoff ({buffer.xoff_bytes} bytes)",
        )
    return buffer


def _is_vswitch_image(image: str) -> bool:
    repository = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return repository == VSWITCH_IMAGE


def _check_link(doc: _Doc, raw: _RawLink, nodes: Mapping[str, Node]) -> Link:
    field = f"topology.links[{raw.index}]"
    a, b = nodes[raw.a.node], nodes[raw.b.node]
    if a.speed_bps != b.speed_bps:
        raise doc.error(
            raw.node,
            field,
            f"the ends run at different speeds ({raw.a}: {format_speed(a.speed_bps)}, "
            f"{raw.b}: {format_speed(b.speed_bps)}); label both nodes with the same roce.lab/speed",
        )
    if raw.mtu is not None:
        mtu = raw.mtu[0]
    elif a.mtu != b.mtu:
        raise doc.error(
            raw.node,
            field,
            f"the ends have different MTUs ({raw.a}: {a.mtu}, {raw.b}: {b.mtu}); "
            "set mtu on the link",
        )
    else:
        mtu = a.mtu
    return Link(
        index=raw.index,
        a=raw.a,
        b=raw.b,
        mtu=mtu,
        speed_bps=a.speed_bps,
        line=raw.node.start_mark.line + 1,
    )

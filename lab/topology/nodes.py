"""A topology's nodes: each node's kind, image and role (a draft), then its lab parameters from
its labels (speed, MTU, cable length, buffer, RDMA stack, NOS) into a :class:`Node`; and
which nodes each node is cabled to."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from common.yamlsource import PathKey
from lab.topology.checker import Checker, Setting, field_path
from lab.topology.layers import Layer, merged_labels, resolve
from lab.topology.links import RawLink
from lab.topology.model import (
    DEFAULT_CABLE_M,
    DEFAULT_MTU,
    DEFAULT_NOS,
    DEFAULT_SPEED_BPS,
    LABEL_PREFIX,
    NOS_PLATFORMS,
    VSWITCH_IMAGE,
    BufferSettings,
    LabKind,
    Node,
    Role,
    default_buffer,
    shown,
)
from lab.topology.schema import BUFFER_LABELS, RDMA_STACKS
from lab.topology.units import parse_mtu, parse_size, parse_speed

_CEOS_KINDS = {"arista_ceos", "ceos", "vr-arista_veos", "vr-veos", "arista_veos"}


@dataclass
class Draft:
    """A node after its kind, image and role label are checked (phase one of two)."""

    name: str
    kind: str
    image: str
    labels: dict[str, Setting]
    role: Role | None
    runs_vswitch: bool
    line: int
    path: PathKey = field(default=())

    @property
    def is_switch(self) -> bool:
        return self.role in ("spine", "leaf") or (self.role is None and self.runs_vswitch)

    def label(self, short: str) -> Setting | None:
        return self.labels.get(LABEL_PREFIX + short)


def read_drafts(check: Checker, layered: Mapping[str, list[Layer]]) -> dict[str, Draft]:
    return {
        node_name: draft
        for node_name, layers in layered.items()
        if (draft := _draft(check, node_name, layers)) is not None
    }


def cabled_peers(drafts: Mapping[str, Draft], links: Iterable[RawLink]) -> dict[str, list[str]]:
    """The nodes each node has links to (one entry per link)."""
    peers: dict[str, list[str]] = {node_name: [] for node_name in drafts}
    for link in links:
        peers[link.a.node].append(link.b.node)
        peers[link.b.node].append(link.a.node)
    return peers


def build_nodes(
    check: Checker, drafts: Mapping[str, Draft], peers: Mapping[str, list[str]]
) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    for node_name, draft in drafts.items():
        if (built := _node(check, draft, _role(draft, drafts, peers))) is not None:
            nodes[node_name] = built
    return nodes


def _role(draft: Draft, drafts: Mapping[str, Draft], peers: Mapping[str, list[str]]) -> Role:
    if draft.role is not None:
        return draft.role
    if not draft.is_switch:
        return "host"
    # Unlabelled switch: a leaf if it has hosts attached, else a spine.
    return "leaf" if any(not drafts[peer].is_switch for peer in peers[draft.name]) else "spine"


def check_attachments(
    check: Checker, nodes: Mapping[str, Node], peers: Mapping[str, list[str]]
) -> None:
    """A switch has links; a VM host has exactly one, to a switch."""
    for node in nodes.values():
        path = ("topology", "nodes", node.name)
        if node.is_switch and not peers[node.name]:
            check.add(path, field_path(path), "a lab switch needs at least one link", key=True)
        if node.is_vm and [nodes[p].is_switch for p in peers[node.name]] != [True]:
            check.add(
                path,
                field_path(path),
                f"a VM host (roce.lab/rdma) needs exactly one link, to a lab switch; "
                f"it has {len(peers[node.name])}",
                key=True,
            )


def _draft(check: Checker, name: str, layers: list[Layer]) -> Draft | None:
    path: PathKey = ("topology", "nodes", name)
    node_field = field_path(path)
    kind_setting = resolve(layers, "kind")
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
            f"kind {shown(kind)} is not supported by the netns runtime (use linux)",
        )
        return None
    image_setting = resolve(layers, "image")
    if image_setting is None:
        check.add(path, f"{node_field}.image", "kind linux needs an image", key=True)
        return None
    image = image_setting.value
    labels = merged_labels(layers)
    runs_vswitch = _is_vswitch_image(image)
    role: Role | None = None
    role_setting = labels.get(LABEL_PREFIX + "role")
    if role_setting is not None:
        value = role_setting.value
        if value not in ("spine", "leaf", "host"):
            check.add(
                role_setting.path,
                role_setting.field,
                f"{shown(value)} is not a role (spine, leaf or host)",
            )
            return None
        role = value  # type: ignore[assignment]
        if role != "host" and not runs_vswitch:
            check.add(
                role_setting.path,
                role_setting.field,
                f"role {role} runs the vswitch: it needs image {VSWITCH_IMAGE}:<tag>, "
                f"got {shown(image)}",
            )
            return None
    line = check.line(path, key=True)
    return Draft(name, kind, image, labels, role, runs_vswitch, line, path)


def _node(check: Checker, draft: Draft, role: Role) -> Node | None:
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


def _speed(check: Checker, draft: Draft) -> int:
    setting = draft.label("speed")
    if setting is None:
        return DEFAULT_SPEED_BPS
    speed = check.parsed(setting, parse_speed)
    return DEFAULT_SPEED_BPS if speed is None else speed


def _node_mtu(check: Checker, draft: Draft) -> int:
    setting = draft.label("mtu")
    if setting is None:
        return DEFAULT_MTU
    return check.parsed(setting, parse_mtu) or DEFAULT_MTU


def _cable_m(check: Checker, draft: Draft) -> float:
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
            f"{shown(setting.value)} is not a cable length in metres (0-10000)",
        )
    return cable


def _own(draft: Draft, setting: Setting) -> bool:
    """The label is set on the node itself (not inherited from defaults, a kind or a group)."""
    return setting.field.startswith(field_path(draft.path) + ".")


def _no_own_buffer_labels(check: Checker, draft: Draft) -> None:
    """A host's own buffer labels are a mistake; inherited ones target the switches."""
    for short in BUFFER_LABELS:
        setting = draft.label(short)
        if setting is not None and _own(draft, setting):
            check.add(setting.path, setting.field, "buffer labels only apply to lab switches")


def _rdma(check: Checker, draft: Draft, lab_kind: LabKind) -> str | None:
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
            f"{shown(setting.value)} is not an RDMA stack the lab can run "
            f"({', '.join(RDMA_STACKS)})",
        )
        return None
    return setting.value


def _nos(check: Checker, draft: Draft, lab_kind: LabKind) -> str | None:
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
            f"{shown(setting.value)} is not a NOS the lab switch speaks "
            f"({', '.join(NOS_PLATFORMS)})",
        )
        return None
    return setting.value


def _buffer(check: Checker, draft: Draft, speed: int, mtu: int) -> BufferSettings | None:
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

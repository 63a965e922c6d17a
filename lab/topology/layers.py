"""Where a node's settings come from: containerlab's layers (``topology.defaults`` < its kind
< its group < the node itself), and the lab-wide settings of ``topology.defaults`` (name,
prefix, credentials, profile, time dilation)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from common.yamlsource import PathKey
from lab.topology.checker import Checker, Setting, did_you_mean, field_path
from lab.topology.model import (
    DEFAULT_PASSWORD,
    DEFAULT_PROFILE,
    DEFAULT_TIME_DILATION,
    DEFAULT_USERNAME,
    LABEL_PREFIX,
    MAX_TIME_DILATION,
    Credentials,
    check_lab_name,
    shown,
)
from lab.topology.schema import LAB_LABELS, NODE_LABELS, ClabFile, NodeDef, TopologyDef

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass
class Layer:
    """One source of node settings: defaults, a kind, a group or the node itself."""

    field: str
    kind: Setting | None
    image: Setting | None
    labels: dict[str, Setting]


NO_NODE = NodeDef()


@dataclass(frozen=True)
class LabSettings:
    """The lab-wide settings, and the layers nodes inherit from (defaults, kinds, groups)."""

    name: str
    prefix: str | None
    credentials: Credentials
    profile: str
    time_dilation: int
    defaults: Layer
    kinds: Mapping[str, Layer]
    groups: Mapping[str, Layer]


def lab_settings(check: Checker, clab: ClabFile, topo: TopologyDef) -> LabSettings:
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
    return LabSettings(
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


def node_layers(check: Checker, topo: TopologyDef, lab: LabSettings) -> dict[str, list[Layer]]:
    """Each well-named node's layers, least specific first: defaults, its kind, its group,
    itself."""
    raw_nodes = topo.nodes or {}
    if not raw_nodes:
        where: PathKey = (
            ("topology", "nodes") if "nodes" in topo.model_fields_set else ("topology",)
        )
        check.add(where, "topology.nodes", "the topology has no nodes")
    layered: dict[str, list[Layer]] = {}
    for node_name, value in raw_nodes.items():
        layers = _layers_of(check, node_name, value or NO_NODE, lab)
        if layers is not None:
            layered[node_name] = layers
    return layered


def _layers_of(
    check: Checker, name: str, node_def: NodeDef, lab: LabSettings
) -> list[Layer] | None:
    path: PathKey = ("topology", "nodes", name)
    node_field = field_path(path)
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
    kind = resolve([lab.defaults, *group_layer, own], "kind")
    if kind is None:
        message = "no kind (set it here or in topology.defaults)"
        check.add(path, f"{node_field}.kind", message, key=True)
        return None
    kind_layer = [lab.kinds[kind.value]] if kind.value in lab.kinds else []
    return [lab.defaults, *kind_layer, *group_layer, own]


def _layer(check: Checker, node: NodeDef | None, path: PathKey) -> Layer:
    node = node or NO_NODE
    layer_field = field_path(path)
    settings: dict[str, Setting | None] = {
        attr: Setting(getattr(node, attr), (*path, attr), f"{layer_field}.{attr}")
        if attr in node.model_fields_set
        else None
        for attr in ("kind", "image")
    }
    labels: dict[str, Setting] = {}
    known = NODE_LABELS | LAB_LABELS
    for key, value in (node.labels or {}).items():
        setting = Setting(value, (*path, "labels", key), f"{layer_field}.labels.{key}")
        if key.startswith(LABEL_PREFIX) and key.removeprefix(LABEL_PREFIX) not in known:
            known_keys = {LABEL_PREFIX + k for k in known}
            check.add(
                setting.path, setting.field, f"unknown lab label{did_you_mean(key, known_keys)}"
            )
            continue
        labels[key] = setting
    return Layer(field=layer_field, kind=settings["kind"], image=settings["image"], labels=labels)


def _lab_labels(check: Checker, defaults: Layer) -> dict[str, str]:
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


def _time_dilation(check: Checker, defaults: Layer) -> int:
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
        f"the emulated links are, e.g. 1000 for 10M standing for 10G) Actual: {shown(text)}",
    )
    return DEFAULT_TIME_DILATION


def resolve(layers: list[Layer], attr: Literal["kind", "image"]) -> Setting | None:
    for layer in reversed(layers):
        value: Setting | None = getattr(layer, attr)
        if value is not None:
            return value
    return None


def merged_labels(layers: list[Layer]) -> dict[str, Setting]:
    merged: dict[str, Setting] = {}
    for layer in layers:
        merged.update(layer.labels)
    return merged

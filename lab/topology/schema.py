"""The shape of a ``*.clab.yml`` file: containerlab's schema as pydantic models, and the lab's
own labels (``roce.lab/...``) on its nodes.

Only the shape is checked here (mappings, lists, values, known fields); what the values mean
and how nodes and links refer to each other is checked by :mod:`lab.topology.layers`,
:mod:`lab.topology.nodes` and :mod:`lab.topology.links`."""

from __future__ import annotations

import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator, model_validator

from lab.topology.model import MAX_LINKS, shown

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

# Lab-wide values: only meaningful in topology.defaults (the fabric file has one of each).
LAB_LABELS = frozenset({"profile", "username", "password", "time-dilation"})

BUFFER_LABELS = {
    "xoff-bytes": "xoff_bytes",
    "xon-bytes": "xon_bytes",
    "headroom-bytes": "headroom_bytes",
    "queue-limit-bytes": "queue_limit_bytes",
}


def describe(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return shown(value) if isinstance(value, str) else repr(value)


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
    raise ValueError(f"expected a value, got {describe(value)}")


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

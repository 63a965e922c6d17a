"""A topology's links: each brief-format ``endpoints: ["a:eth1", "b:eth1"]`` checked against
the nodes (names, interfaces used once, not both ends on one node), and both ends of a link
agreeing on speed and MTU once the nodes are read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.yamlsource import PathKey
from lab.topology.checker import Checker, Setting, field_path
from lab.topology.model import Endpoint, Link, Node, endpoint, shown
from lab.topology.schema import LinkDef, TopologyDef
from lab.topology.units import format_speed, parse_mtu


@dataclass(frozen=True)
class RawLink:
    index: int
    a: Endpoint
    b: Endpoint
    mtu: int | None
    path: PathKey
    line: int


def read_links(check: Checker, topo: TopologyDef, node_names: Mapping[str, None]) -> list[RawLink]:
    used: dict[tuple[str, str], int] = {}
    result: list[RawLink] = []
    for index, link in enumerate(topo.links or []):
        path: PathKey = ("topology", "links", index)
        link_field = field_path(path)
        link = link or LinkDef()
        if "endpoints" not in link.model_fields_set:
            check.add(path, f"{link_field}.endpoints", "a link needs endpoints")
            continue
        endpoints: list[Endpoint] = []
        for position, text in enumerate(link.endpoints):
            item_path = (*path, "endpoints", position)
            item_field = field_path(item_path)
            endpoint = _endpoint(check, text, item_path, item_field, node_names)
            if endpoint is None:
                continue
            item_line = check.line(item_path)
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
            mtu = check.parsed(Setting(link.mtu, (*path, "mtu"), f"{link_field}.mtu"), parse_mtu)
            if mtu is None:
                continue
        line = check.line(path)
        result.append(RawLink(index, endpoints[0], endpoints[1], mtu, path, line))
    return result


_LISTED_NODES = 20


def _endpoint(
    check: Checker, text: str, path: PathKey, item_field: str, node_names: Mapping[str, None]
) -> Endpoint | None:
    node_name, sep, ifname = text.partition(":")
    if not sep or not node_name or not ifname or ":" in ifname:
        check.add(path, item_field, f"{shown(text)} is not of the form 'node:ethN'")
        return None
    if node_name not in node_names:
        names = ", ".join(list(node_names)[:_LISTED_NODES])
        more = ", …" if len(node_names) > _LISTED_NODES else ""
        check.add(path, item_field, f"unknown node {shown(node_name)} (nodes: {names}{more})")
        return None
    if ifname == "eth0":
        check.add(
            path,
            item_field,
            "eth0 is containerlab's management interface; data links use eth1, eth2, …",
        )
        return None
    found = endpoint(node_name, ifname)
    if found is None:
        check.add(
            path, item_field, f"interface {shown(ifname)}: use containerlab's names eth1, eth2, …"
        )
    return found


def check_link(check: Checker, raw: RawLink, nodes: Mapping[str, Node]) -> Link | None:
    link_field = field_path(raw.path)
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

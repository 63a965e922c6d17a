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
containerlab's schema (:mod:`lab.topology.schema`), and what is left (references between
nodes and links, label values, both ends of a link agreeing) by the passes of
:mod:`lab.topology.layers`, :mod:`lab.topology.nodes` and :mod:`lab.topology.links`, located
through the loader's source map (:mod:`lab.topology.checker`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from common.errors import IntentError
from common.yamlsource import SourceMap, load_yaml
from lab.topology.checker import Checker
from lab.topology.layers import lab_settings, node_layers
from lab.topology.links import check_link, read_links
from lab.topology.model import Topology, TopologyError
from lab.topology.nodes import build_nodes, cabled_peers, check_attachments, read_drafts
from lab.topology.schema import ClabFile, TopologyDef


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
    check = Checker(source)
    clab = _shape(check, data)
    topo = clab.topology or TopologyDef()
    lab = lab_settings(check, clab, topo)
    layered = node_layers(check, topo, lab)
    raw_links = read_links(check, topo, dict.fromkeys(topo.nodes or {}))
    drafts = read_drafts(check, layered)
    check.fail_if_any()

    peers = cabled_peers(drafts, raw_links)
    nodes = build_nodes(check, drafts, peers)
    check.fail_if_any()

    links = tuple(
        checked for raw in raw_links if (checked := check_link(check, raw, nodes)) is not None
    )
    check_attachments(check, nodes, peers)
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


def _shape(check: Checker, data: Any) -> ClabFile:
    """The file as containerlab's schema (pydantic); every shape problem at once."""
    try:
        return ClabFile.model_validate(data)
    except ValidationError as exc:
        check.shape(exc)
        check.fail_if_any()
        raise AssertionError("unreachable: pydantic reported no error") from exc

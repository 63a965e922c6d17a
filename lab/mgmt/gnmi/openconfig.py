"""The OpenConfig-style gNMI trees (EOS, Cumulus Linux): leaves with typed values.

A NOS module lists its schema (every leaf path the NOS documents for the counters the lab
has, keys named but not valued) and builds the leaves one snapshot holds. A request path is
served when it is a prefix of a schema path (wildcards allowed); it then gives every leaf at
or under it. A leaf the schema has but the lab does not measure (a pause duration, an
802.3x pause count) is accepted and gives nothing: the lab sends only what it read.

Encodings (gNMI specification 2.3): PROTO sends typed values (``uint_val`` for counters,
``string_val`` for enumerations); JSON a JSON number or string; JSON_IETF follows RFC 7951,
which writes 64-bit integers (counter64) as strings and smaller ones as numbers.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Literal, NamedTuple

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.nos import GnmiError, NosTree, not_found
from lab.mgmt.gnmi.paths import GPath
from lab.mgmt.gnmi.snapshot import View

Kind = Literal["counter64", "counter32", "uint8", "enum"]
ORIGINS = ("", "openconfig")


class Leaf(NamedTuple):
    """One leaf of a snapshot: its full path, value and YANG type."""

    path: GPath
    value: int | str
    kind: Kind


def typed_value(value: int | str, kind: Kind, encoding: int) -> gnmi_pb2.TypedValue:
    """A leaf's value in the requested encoding."""
    if encoding == gnmi_pb2.Encoding.PROTO:
        if isinstance(value, int):
            return gnmi_pb2.TypedValue(uint_val=value)
        return gnmi_pb2.TypedValue(string_val=value)
    if encoding == gnmi_pb2.Encoding.JSON_IETF:
        ietf: int | str = str(value) if kind == "counter64" else value
        return gnmi_pb2.TypedValue(json_ietf_val=json.dumps(ietf).encode())
    return gnmi_pb2.TypedValue(json_val=json.dumps(value).encode())


class OpenConfigTree(NosTree):
    """A tree of leaves; subclasses give the schema and the leaves of a snapshot."""

    schema_text: ClassVar[tuple[str, ...]]
    encodings: ClassVar[frozenset[int]] = frozenset(
        {gnmi_pb2.Encoding.JSON, gnmi_pb2.Encoding.JSON_IETF, gnmi_pb2.Encoding.PROTO}
    )

    def __init__(self, ports: Sequence[str] = ()) -> None:
        # A path naming a port the switch lacks is valid and gives nothing, as a list entry
        # that does not exist does.
        super().__init__(ports)
        self.schema = tuple(paths.parse_schema(t) for t in self.schema_text)
        self._cached: tuple[View, list[Leaf]] | None = None

    def resolve(self, prefix: gnmi_pb2.Path, path: gnmi_pb2.Path) -> GPath:
        for origin in (prefix.origin, path.origin):
            if origin not in ORIGINS:
                raise GnmiError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"origin {origin!r} is not served ({self.nos}: 'openconfig' or none)",
                )
        try:
            query = paths.from_proto(prefix) + paths.from_proto(path)
        except paths.PathError as exc:
            raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        if not any(paths.covers(query, t, paths.schema_match) for t in self.schema):
            raise not_found(query, f"not a path {self.nos}'s gNMI server serves")
        return query

    def updates(self, query: GPath, view: View, encoding: int) -> list[gnmi_pb2.Update]:
        return [
            gnmi_pb2.Update(
                path=paths.to_proto(leaf.path),
                val=typed_value(leaf.value, leaf.kind, encoding),
            )
            for leaf in self._leaves(view)
            if paths.covers(query, leaf.path)
        ]

    def _leaves(self, view: View) -> list[Leaf]:
        # Every subscription of a sample shares the view, so its leaves are built once.
        if self._cached is None or self._cached[0] is not view:
            self._cached = (view, self.leaves(view))
        return self._cached[1]

    @abstractmethod
    def leaves(self, view: View) -> list[Leaf]:
        """Every leaf the snapshot holds."""


def under(base: GPath, leaf_values: dict[str, int], kind: Kind = "counter64") -> list[Leaf]:
    """Leaves ``base/<name>`` for each name and value."""
    return [Leaf((*base, (name, ())), value, kind) for name, value in leaf_values.items()]

"""What a NOS's gNMI server is made of, for :mod:`lab.mgmt.gnmi.server`: its port, RPCs,
modes and encodings, and its tree -- which request paths it knows, and the updates a path
gives from one data-plane snapshot. One module per NOS fills it (``sonic``, ``nvue``,
``eos``); NX-OS has none (no gNMI server in this lab).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.paths import GPath
from lab.mgmt.gnmi.snapshot import View

Mode = gnmi_pb2.SubscriptionList.Mode
ENCODING_NAMES = {v: k for k, v in gnmi_pb2.Encoding.items()}
MODE_NAMES = {v: k for k, v in Mode.items()}
SECOND_NS = 1_000_000_000


class GnmiError(Exception):
    """An RPC ends with this gRPC status and message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def not_found(path: GPath, why: str) -> GnmiError:
    return GnmiError(grpc.StatusCode.NOT_FOUND, f"{paths.text(path)}: {why}")


class NosTree(ABC):
    """One NOS's gNMI server: what it serves and how its updates look."""

    nos: ClassVar[str]
    default_port: ClassVar[int]
    gnmi_version: ClassVar[str]
    models: ClassVar[tuple[tuple[str, str, str], ...]] = ()  # (name, organization, version)
    encodings: ClassVar[frozenset[int]]
    modes: ClassVar[frozenset[int]] = frozenset(Mode.values())
    get_refusal: ClassVar[str | None] = None  # why Get is UNIMPLEMENTED; None: Get is served
    default_interval_ns: ClassVar[int] = SECOND_NS

    def __init__(self, ports: Sequence[str] = ()) -> None:
        """``ports``: the data-plane ports served (``eth1``...)."""
        self.ports = tuple(ports)

    def capabilities(self) -> gnmi_pb2.CapabilityResponse:
        return gnmi_pb2.CapabilityResponse(
            supported_models=[
                gnmi_pb2.ModelData(name=n, organization=o, version=v) for n, o, v in self.models
            ],
            supported_encodings=sorted(self.encodings),
            gNMI_version=self.gnmi_version,
        )

    def check_encoding(self, encoding: int) -> None:
        if encoding not in self.encodings:
            known = ", ".join(ENCODING_NAMES[e] for e in sorted(self.encodings))
            raise GnmiError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"unsupported encoding: {ENCODING_NAMES.get(encoding, encoding)} "
                f"({self.nos} serves {known})",
            )

    def check_mode(self, mode: int) -> None:
        if mode not in self.modes:
            known = ", ".join(MODE_NAMES[m] for m in sorted(self.modes))
            raise GnmiError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"subscription mode {MODE_NAMES.get(mode, mode)} is not supported "
                f"({self.nos} serves {known})",
            )

    @abstractmethod
    def resolve(self, prefix: gnmi_pb2.Path, path: gnmi_pb2.Path) -> GPath:
        """The full path a request names (prefix and path joined); :class:`GnmiError` when the
        NOS does not serve it (NOT_FOUND, naming the path) or the origin/target is wrong."""

    @abstractmethod
    def updates(self, query: GPath, view: View, encoding: int) -> list[gnmi_pb2.Update]:
        """The updates ``query`` gives from one snapshot (none: nothing there now)."""

    def notification_prefix(self, prefix: gnmi_pb2.Path) -> gnmi_pb2.Path:
        """The prefix of a notification answering a request with ``prefix``: its origin and
        target (update paths are full paths)."""
        return gnmi_pb2.Path(origin=prefix.origin, target=prefix.target)

    def malformed(self, update: gnmi_pb2.Update) -> gnmi_pb2.Update:
        """The ``malformed`` fault: a string where a counter belongs."""
        return gnmi_pb2.Update(path=update.path, val=gnmi_pb2.TypedValue(string_val="garbage"))

    def stray_path(self) -> GPath:
        """The ``unknown_path`` fault's path: one nobody subscribes to."""
        return (("lab-fault", ()), ("unrequested", ()))

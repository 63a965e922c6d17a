"""The fabric file as it is written, for editors: :class:`FabricFile` and its JSON Schema.

:class:`agent.intent.model.FabricIntent` is the fabric after loading: the profile resolved and
merged with ``overrides``, defaults applied, port ranges expanded, links derived on their
second end, every port's speed, MTU and cable length resolved. The file is shorter: a profile
*name*, ``defaults.ports`` and ``port_defaults``, ranges (``Ethernet1/1-8``) and peer patterns
(``gpu{n}:eth0``), ``x-`` keys that hold YAML anchors. This module describes that form so an
editor can complete and check it (docs/fabric-file.md, "Editor support"); ``scripts/gen_docs.py``
writes :func:`fabric_file_schema` to ``docs/reference/fabric.schema.json``.

The schema checks shape, not meaning: whether a range is well formed, a peer exists, a port
name suits its platform (IR021) or both ends agree (IR009) is the loader's and the rules' job
(``roce-agent check``), which point at FILE:LINE:COL.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ConfigDict, Field, create_model, model_validator

from agent.intent.model import (
    Description,
    Device,
    DeviceDefaults,
    Emulation,
    MacAddress,
    Name,
    PortDefaults,
    Profile,
    SpeedBps,
    StrictModel,
    ValidationPolicy,
)

# An interface name, optionally a range in its last number ("Ethernet1/1-8", "swp1-32"):
# the model's interface-name grammar (agent.intent.model.check_interface) already allows the
# "-8"; the loader expands it.
# No look-ahead (pydantic-core's regex has none): "no '..' or '//'" as "a '/' or '.' is
# followed by another character, or ends the name".
PORT_NAME_PATTERN = r"^[A-Za-z](?:[A-Za-z0-9_-]|[/.][A-Za-z0-9_-])*[/.]?$"
# device:port, either side may hold {n}, {i}, {n+K}, {i-K}, {i*K+C} patterns (expanded per port).
PEER_PATTERN = r"^[A-Za-z0-9{][A-Za-z0-9_.{}+*-]*:[A-Za-z{][A-Za-z0-9_./{}+*-]*$"
# An RDMA device name, its port optional (mlx5_0/1); in a range with {n}, {i}, {i*K+C} patterns.
RDMA_DEVICE_PATTERN = r"^[A-Za-z{][A-Za-z0-9_{}+*-]*(/[1-9][0-9]{0,2})?$"
# Top-level keys an editor must not flag: room for YAML anchors (x-eos: &eos {...}).
EXTENSION_PREFIX = "x-"


class FilePort(StrictModel):
    """A port, or a range of ports, as written under a device's ``ports``.

    speed, mtu and cable_m may be left out here: they then come from the device's
    ``port_defaults``, the other end of the link or ``defaults.ports`` (none is an error)."""

    name: str = Field(
        pattern=PORT_NAME_PATTERN,
        max_length=48,
        description="interface name (Ethernet1/1, swp1, eth0), or a range in its last number "
        "(Ethernet1/1-8: eight ports)",
    )
    speed: SpeedBps | None = None
    mtu: int | None = Field(default=None, ge=1280, le=9216, description="L2 MTU in bytes")
    cable_m: float | None = Field(
        default=None, ge=0, le=10_000, description="cable length in metres (PFC headroom)"
    )
    peer: str | None = Field(
        default=None,
        pattern=PEER_PATTERN,
        max_length=120,
        description="device:port at the other end; in a range {n} is the port's number, {i} "
        "its index from 0, {n+K} {i-K} offsets, {i*K+C} multiples (gpu{n}:eth0, "
        "spine{i+1}:Ethernet1/1, leaf1:Ethernet{i*8}). The "
        "other end is derived when that device does not declare the port",
    )
    description: Description | None = Field(
        default=None, description="interface description ({n} and {i} expand in a range)"
    )
    ipv4: str | None = Field(
        default=None,
        pattern=r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$",
        description="address/prefix; in a range the first port's, the next ports get the next "
        "subnets of the same length; a /31 or /30 peer derived gets the other address",
    )
    step: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="in a range: every step-th number from the first, landing on the last "
        "(Ethernet0-56 with step 8: Ethernet0, Ethernet8 ... Ethernet56)",
    )
    mac: MacAddress | None = None
    rdma_device: str | None = Field(
        default=None,
        pattern=RDMA_DEVICE_PATTERN,
        max_length=64,
        description="hosts: the RDMA device behind this netdev (mlx5_0, mlx5_0/1); in a range a "
        "pattern gives each port its own (mlx5_{i})",
    )


def _without(fields: dict[str, Any], *names: str) -> dict[str, Any]:
    return {
        name: (field.annotation, copy.copy(field))
        for name, field in fields.items()
        if name not in names
    }


# The device as written: every field of the loaded Device (kept in step by construction),
# ports as written, and per-device port defaults. Device's own checks (a way in, IR020) need
# the defaults applied, so they are the loader's.
FileDevice = create_model(
    "FileDevice",
    __base__=StrictModel,
    __doc__="A switch or host as written under ``devices``.",
    **_without(Device.model_fields, "ports"),
    ports=(list[FilePort], Field(default_factory=list)),
    port_defaults=(
        PortDefaults | None,
        Field(default=None, description="defaults for this device's ports (beat defaults.ports)"),
    ),
)

FileDefaults = create_model(
    "FileDefaults",
    __base__=StrictModel,
    __doc__="Values every device (and, under ``ports``, every port) gets unless it sets its own.",
    **_without(DeviceDefaults.model_fields),
)


def _extension_keys(schema: dict[str, Any]) -> None:
    schema["patternProperties"] = {f"^{EXTENSION_PREFIX}": {}}


class FabricFile(StrictModel):
    """A fabric file as written (``roce-agent check FILE`` loads it into a FabricIntent)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, title="FabricFile", json_schema_extra=_extension_keys
    )

    name: Name
    profile: str = Field(
        min_length=1,
        max_length=255,
        description="a profile name (nvidia-default, sonic-default, dcqcn-paper, pfc-only or "
        "one in the profile search path) or a YAML file next to the fabric file",
    )
    overrides: dict[str, Any] | None = Field(
        default=None,
        description="deep-merged onto the profile: the profile's shape, every field optional",
    )
    defaults: FileDefaults | None = None
    devices: list[FileDevice] = Field(min_length=1)
    validation: ValidationPolicy | None = None
    emulation: Emulation | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_extensions(cls, data: Any) -> Any:
        """``x-`` keys hold anchors for the rest of the file; they mean nothing themselves."""
        if isinstance(data, dict):
            return {
                k: v
                for k, v in data.items()
                if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))
            }
        return data


# Where the docs site publishes it (mkdocs.yml's default site_url; mkdocs copies the file).
SCHEMA_ID = "https://roce-fabric-agent.readthedocs.io/en/latest/reference/fabric.schema.json"


def _optional_everywhere(node: Any, rename: dict[str, str]) -> Any:
    """A copy of a JSON Schema node with every ``required`` dropped and $refs renamed."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "required":
                continue
            if key == "$ref" and isinstance(value, str):
                name = value.removeprefix("#/$defs/")
                out[key] = f"#/$defs/{rename.get(name, name)}"
            else:
                out[key] = _optional_everywhere(value, rename)
        return out
    if isinstance(node, list):
        return [_optional_everywhere(item, rename) for item in node]
    return node


def fabric_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the fabric file, ``overrides`` included: the
    profile's own schema with every field optional (a deep merge fills the rest)."""
    schema = FabricFile.model_json_schema()
    profile = Profile.model_json_schema()
    rename = {name: f"Overrides{name}" for name in profile.get("$defs", {})}
    defs = schema.setdefault("$defs", {})
    for name, definition in profile.get("$defs", {}).items():
        defs[rename[name]] = _optional_everywhere(definition, rename)
    overrides = _optional_everywhere({k: v for k, v in profile.items() if k != "$defs"}, rename)
    overrides["properties"].pop("name", None)  # the profile's name is not overridden
    overrides["title"] = "Overrides"
    overrides["description"] = "Deep-merged onto the named profile (same shape, all optional)."
    defs["Overrides"] = overrides
    schema["properties"]["overrides"] = {"$ref": "#/$defs/Overrides"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }

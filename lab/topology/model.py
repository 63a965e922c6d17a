"""What a validated lab topology is: its nodes, links, credentials and lab-wide settings.

The runtime, the address plan and the lab commands read these frozen records; reading the
``*.clab.yml`` file into them is :mod:`lab.topology.loader`'s job. Also here: the lab's
defaults (port speed, MTU, cable length, credentials), the NOSes a lab switch speaks, the
default buffer thresholds of a lab switch and containerlab's naming of nodes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from common.errors import IntentError

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

# roce.lab/nos on a switch: the NOS its management plane speaks over SSH (lab.mgmt.personality),
# and the platform the lab's fabric file gives the agent for it. The data plane is the same.
NOS_PLATFORMS = {
    "eos": "arista_eos",
    "sonic": "sonic",
    "nvue": "cumulus_nvue",
    "nxos": "cisco_nxos",
}

DEFAULT_NOS = "eos"

# roce.lab/time-dilation D: a lab link stands for one D times faster (10M standing for 10G is
# 1000). It is the fabric's, not a switch's (the vswitch shapes to the lab speed either way), so
# it goes into the fabric file the lab writes (``emulation.time_dilation``), where the agent's
# probes read it to dilate the hosts' NIC timers (agent.observe.probes.dilation). 1 = real time.
DEFAULT_TIME_DILATION = 1

MAX_TIME_DILATION = 1_000_000

_LAB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

_ETH_RE = re.compile(r"^eth([1-9][0-9]{0,3})$")


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
        return f"{shown(name)} is not a lab name (letters, digits, '.', '_', '-'; at most 64)"
    return None


def shown(text: str) -> str:
    """``text`` quoted for a message, cut short: a 5 000-digit label is not echoed whole."""
    return repr(text if len(text) <= 40 else f"{text[:40]}…")


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

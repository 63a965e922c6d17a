"""The environment a job needs on one host, derived from the fabric's intent and what the host
itself says (:class:`agent.observe.hostfacts.HostFacts`): ``roce-agent nccl``.

Every variable and where its value comes from (NCCL: the environment-variable reference,
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, cited by section; UCX:
the configuration tables in openucx/ucx, ``ucx_info -f`` prints the same text):

``NCCL_IB_HCA``
    The RDMA devices and ports the fabric declares on the host (``rdma_device`` of each port),
    ``dev:port`` comma-separated ("``<hca>[:<port>...]``", section NCCL_IB_HCA). NCCL treats
    each name as a *prefix* unless the list starts with ``=``: "using ``mlx5_1`` without a
    preceding ``=`` will select ``mlx5_1`` as well as ``mlx5_10`` to ``mlx5_19``". The ``=``
    is added when one of the host's devices (from the intent or the host's GID table) starts
    with the name of a listed one; not otherwise, so the value stays what the docs' simplest
    examples show.
``NCCL_IB_GID_INDEX``
    The index of the RoCE v2 GID that carries the fabric port's IPv4 address, read from the
    host's GID table (sysfs ``ports/*/gids``, ``gid_attrs/types``, ``gid_attrs/ndevs``;
    :func:`agent.observe.perftest.gid.select_gid`). One value per process for every HCA
    (section NCCL_IB_GID_INDEX, default -1: NCCL picks by NCCL_IB_ADDR_FAMILY and
    NCCL_IB_ROCE_VERSION_NUM since 2.21): ports of one host at different indexes are a
    problem, never averaged.
``NCCL_IB_TC``
    "Defines the InfiniBand traffic class field" (section NCCL_IB_TC, default 0). NCCL's docs
    say nothing about the ECN bits. RoCE v2 carries the traffic class in the IP header's
    TOS / traffic class byte: DSCP in the upper six bits, ECN in the lower two (RFC 2474
    section 3, RFC 3168 section 5). The value is ``DSCP << 2`` with ECT(0) (``0b10``) where the
    profile marks ECN on the RoCE priority, as UCX does by default ("``auto`` option selects
    106 on RoCEv2", 106 = 26 << 2 | 2: UCX_IB_TRAFFIC_CLASS, src/uct/ib/base/ib_iface.c) and
    perftest's ``--tclass`` here does (:func:`agent.observe.perftest.gid.tclass_for`). mlx5
    takes only the DSCP bits from it (``path->ecn_dscp = (traffic_class >> 2) & 0x3f`` in
    ``mlx5_set_path``, drivers/infiniband/hw/mlx5/qp.c) and sets ECN itself; Soft-RoCE sends
    the byte as given, so without ECT(0) a switch could not mark its packets.
``NCCL_IB_SL``
    "Defines the InfiniBand Service Level" (default 0). On RoCE the SL's three bits become the
    Ethernet priority of the packet (``eth_prio``/``dci_cfi_prio_sl = (sl & 0x7) << 4`` in
    mlx5_set_path; UCX: "IB Service Level / RoCEv2 Ethernet Priority"): it matters only where
    the NIC or the switches classify by PCP (``trust: pcp``). With DSCP trust it is left out.
``NCCL_IB_FIFO_TC``
    "the InfiniBand traffic class for control messages" (since 2.22.3; default: NCCL_IB_TC),
    from the profile's ``job.control`` class, with the same ECN rule.
``NCCL_IB_QPS_PER_CONNECTION`` / ``NCCL_IB_SPLIT_DATA_ON_QPS``
    From the profile's ``job`` section (tune writes it). NCCL lists both under "Debugging"
    ("should generally not be set for production code"): they are printed only when the
    fabric's owner put them there, e.g. after ``roce-agent tune`` measured the gain.
``UCX_NET_DEVICES`` / ``UCX_IB_GID_INDEX`` / ``UCX_IB_TRAFFIC_CLASS`` (/ ``UCX_IB_SL``)
    The same devices (``mlx5_0:1``, Open MPI's UCX docs), GID index and traffic class for MPI
    jobs over UCX (``GID_INDEX`` in src/uct/ib/base/ib_md.c, ``TRAFFIC_CLASS`` and ``SL`` in
    src/uct/ib/base/ib_iface.c; ``UCX_IB_`` is their prefix).

A host that could not be read (unreachable, its GID table unreadable) still gets every variable
the intent alone decides (NCCL_IB_HCA, the traffic classes, SL, QPs, UCX_NET_DEVICES); what only
the host can say (its GID index) is in :attr:`HostEnvironment.not_set` with the reason, never
guessed. Whether NCCL_IB_HCA needs its ``=`` is then decided from the fabric's devices alone
(a note says so).

Not printed: ``NCCL_SOCKET_IFNAME``. It chooses the IP interfaces of NCCL's bootstrap and
socket traffic ("which IP interfaces to use for communication", section NCCL_SOCKET_IFNAME),
not the RDMA devices; RoCE data goes where NCCL_IB_HCA says. The intent describes the RoCE
fabric, not the management network the ranks rendezvous on, so the agent cannot know it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.intent.model import FabricIntent, Profile, TrafficClass
from agent.observe.hostfacts import HostFacts, RdmaPortFacts
from agent.observe.perftest.gid import (
    GidEntry,
    GidSelectionError,
    parse_show_gids,
    select_gid,
    tclass_for,
)

GID_SOURCE = "gids"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@dataclass(frozen=True)
class PortEvidence:
    """What the host said about one fabric port, and the GID chosen for it (None: none)."""

    port: RdmaPortFacts
    gid: GidEntry | None = None
    problem: str | None = None

    def as_json(self) -> dict[str, Any]:
        gid = self.gid
        return {
            "port": self.port.port,
            "device": self.port.device,
            "ib_port": self.port.ib_port,
            "netdev": self.port.netdev,
            "ipv4": self.port.ipv4,
            "gid_index": gid.index if gid else None,
            "gid": gid.gid if gid else None,
            "gid_type": f"RoCE {gid.version}" if gid and gid.version else None,
            "gid_netdev": gid.netdev if gid else None,
            "problem": self.problem,
        }


# What only the host's GID table can say (module docstring).
HOST_VARIABLES = ("NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX")


@dataclass
class HostEnvironment:
    """The variables one host's ranks need; ``problems`` say why one could not be derived
    (the host is then not ready: its variables are incomplete) and ``not_set`` which
    variables are missing for it, each with why (``not read: …`` when the host could not
    be read)."""

    host: str
    variables: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    ports: list[PortEvidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # variables left out on purpose, and why
    not_set: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        variables: dict[str, str | None] = dict(self.variables)
        variables.update(dict.fromkeys(self.not_set))  # null: not known, the reason beside
        return {
            "host": self.host,
            "ok": self.ok,
            "variables": variables,
            "not_set": dict(self.not_set),
            "problems": list(self.problems),
            "ports": [p.as_json() for p in self.ports],
            "notes": list(self.notes),
        }


def _ecn_marked(profile: Profile, klass: TrafficClass) -> bool:
    """The fabric marks ECN on this class's queue (profile ``ecn``), so its packets should be
    ECN-capable: ECT(0) in the traffic class."""
    return profile.ecn.enabled and klass.priority in profile.ecn.queues


def traffic_class(profile: Profile, klass: TrafficClass) -> int:
    """The traffic class byte for ``klass`` (module docstring: NCCL_IB_TC)."""
    return tclass_for(klass.dscp, ecn_capable=_ecn_marked(profile, klass))


def hca_list(ports: list[RdmaPortFacts], host_devices: set[str]) -> str:
    """NCCL_IB_HCA's value: ``dev:port`` per fabric port, ``=`` first when any device of the
    host would also match one of the names as a prefix (module docstring)."""
    entries = list(dict.fromkeys(f"{p.device}:{p.ib_port}" for p in ports))
    listed = {p.device for p in ports}
    clash = any(
        other != name and other.startswith(name) for name in listed for other in host_devices
    )
    return ("=" if clash else "") + ",".join(entries)


def _gid_table(facts: HostFacts) -> tuple[list[GidEntry] | None, str | None]:
    result = facts.result(GID_SOURCE)
    if result is None:
        return None, f"host {facts.host}: the GID table was not read (no `{GID_SOURCE}` source)"
    if not result.ok:
        return None, f"host {facts.host}: cannot read the GID table: {result.failure()}"
    try:
        return parse_show_gids(result.output), None
    except GidSelectionError as exc:
        return None, f"host {facts.host}: the GID table read is not one: {exc}"


def _port_evidence(facts: HostFacts, table: list[GidEntry]) -> list[PortEvidence]:
    evidence = []
    for port in facts.ports:
        try:
            chosen = select_gid(
                table, device=port.device, port=port.ib_port, netdev=port.netdev, ipv4=port.ipv4
            )
        except GidSelectionError as exc:
            evidence.append(PortEvidence(port, problem=f"host {facts.host}: {exc}"))
        else:
            evidence.append(PortEvidence(port, gid=chosen))
    return evidence


def _gid_index(host: str, evidence: list[PortEvidence]) -> tuple[int | None, str | None]:
    indexes = {e.gid.index for e in evidence if e.gid is not None}
    if len(indexes) == 1:
        return indexes.pop(), None
    if not indexes:
        return None, None  # each port's problem says why
    per_port = ", ".join(
        f"{e.port.device}:{e.port.ib_port} index {e.gid.index}" for e in evidence if e.gid
    )
    return None, (
        f"host {host}: NCCL_IB_GID_INDEX: Expected: one RoCE v2 GID index for every fabric "
        f"port (one value per process) Actual: {per_port}; leave it unset and let NCCL >= 2.21 "
        "pick each device's IPv4 RoCE v2 GID (NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM)"
    )


def _classes(profile: Profile, env: HostEnvironment) -> dict[str, str]:
    """The variables that come from the profile alone (traffic classes, SL, QPs)."""
    found = {"NCCL_IB_TC": str(traffic_class(profile, profile.roce))}
    pcp = profile.trust == "pcp" or profile.nic.trust == "pcp"
    if pcp:
        found["NCCL_IB_SL"] = str(profile.roce.priority)
    else:
        env.notes.append(
            "NCCL_IB_SL not set: on RoCE the SL is the packet's Ethernet (PCP) priority, and "
            "this fabric classifies by DSCP (trust dscp on switches and NICs)"
        )
    job = profile.job
    if job.control is not None:
        found["NCCL_IB_FIFO_TC"] = str(traffic_class(profile, job.control))
    if job.qps_per_connection is not None:
        found["NCCL_IB_QPS_PER_CONNECTION"] = str(job.qps_per_connection)
    if job.split_data_on_qps is not None:
        found["NCCL_IB_SPLIT_DATA_ON_QPS"] = "1" if job.split_data_on_qps else "0"
    if pcp:
        found["UCX_IB_SL"] = str(profile.roce.priority)
    return found


def job_environment(intent: FabricIntent, facts: HostFacts) -> HostEnvironment:
    """The job environment of ``facts.host`` (module docstring: what, and from where)."""
    env = HostEnvironment(host=facts.host)
    env.notes.append(
        "NCCL_SOCKET_IFNAME not set: it picks NCCL's bootstrap/socket interfaces, which the "
        "fabric intent does not describe (RoCE traffic follows NCCL_IB_HCA)"
    )
    if not facts.ports:
        env.problems.append(
            f"host {facts.host}: Expected: a port with an rdma_device in the fabric Actual: "
            "none (nothing for NCCL_IB_HCA)"
        )
        return env
    table, unread = (None, facts.error) if facts.error is not None else _gid_table(facts)
    index: int | None = None
    devices = {p.device for p in facts.ports}
    if table is None:
        why = unread or f"host {facts.host}: no GID table"
        env.ports = [PortEvidence(p) for p in facts.ports]
        env.problems.append(why)
        env.not_set = dict.fromkeys(HOST_VARIABLES, f"not read: {why}")
        env.notes.append(
            "NCCL_IB_HCA from the fabric's devices alone: the host's own devices were not read, "
            "so a device whose name starts with a listed one would not be noticed"
        )
    else:
        env.ports = _port_evidence(facts, table)
        env.problems += [e.problem for e in env.ports if e.problem]
        index, index_problem = _gid_index(facts.host, env.ports)
        if index_problem:
            env.problems.append(index_problem)
        if index is None:
            why = index_problem or "; ".join(e.problem for e in env.ports if e.problem)
            env.not_set = dict.fromkeys(HOST_VARIABLES, why)
        devices |= {e.device for e in table}
    classes = _classes(intent.profile, env)
    env.variables = {
        **_nccl_variables(facts, devices, index, classes),
        **_ucx_variables(facts, index, classes),
    }
    return env


def _nccl_variables(
    facts: HostFacts, devices: set[str], index: int | None, classes: dict[str, str]
) -> dict[str, str]:
    """NCCL's: the devices, the GID index when one serves every port, the classes."""
    nccl = {"NCCL_IB_HCA": hca_list(facts.ports, devices)}
    if index is not None:
        nccl["NCCL_IB_GID_INDEX"] = str(index)
    nccl.update({k: v for k, v in classes.items() if k.startswith("NCCL_")})
    return nccl


def _ucx_variables(facts: HostFacts, index: int | None, classes: dict[str, str]) -> dict[str, str]:
    """UCX's: the same devices, GID index and traffic class in UCX's names."""
    ucx = {
        "UCX_NET_DEVICES": ",".join(dict.fromkeys(f"{p.device}:{p.ib_port}" for p in facts.ports))
    }
    if index is not None:
        ucx["UCX_IB_GID_INDEX"] = str(index)
    ucx["UCX_IB_TRAFFIC_CLASS"] = classes["NCCL_IB_TC"]
    ucx.update({k: v for k, v in classes.items() if k.startswith("UCX_")})
    return ucx

"""Which UDP port a probe run uses: RoCEv2's 4791, or an alternate port on RDMA hosts.

A host whose NIC does RoCE (mlx5, bnxt_re, irdma, …) hands incoming UDP 4791 frames addressed
to one of its GIDs to the NIC's RDMA engine. A probe to a QP the NIC does not know ends there:
it never reaches the kernel netdev, an AF_PACKET receiver sees nothing, and the fabric gets the
blame for "100 % loss". Switches classify RoCE by DSCP (the profile's ``trust dscp``), not by
UDP port, so a probe with the same DSCP and BTH on another port rides the same lossless class
and keeps its PSN accounting, and the NIC leaves it to the kernel. The check ``RC010`` fails
when a switch does classify by UDP port.

The choice is per run, not per host: CNPs travel back to the sender on the data's port, and
the paths a run traces (ECMP hashes the 5-tuple, destination port included) must be the paths
its flows take. ``validation.probe.udp_port`` sets it (``auto``: ask each probed interface).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.device.fanout import results_or_raise, run_each
from agent.intent.model import ROCE_UDP_PORT, ProbePolicy
from agent.observe.hostnic import rdma_devices_on
from agent.observe.probes.runner import ProbeError, Runner

INSPECT_TIMEOUT_S = 30.0  # a worker start (an SSH login on real hosts) and a sysfs read
INSPECT_PARALLELISM = 16  # inspect runs at once


@dataclass(frozen=True)
class Transport:
    """The run's UDP destination port and why; ``rdma``: probed interfaces ("host:ifname")
    that carry RDMA ports ("device/port"), only those with any."""

    udp_port: int
    reason: str
    rdma: dict[str, list[str]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"udp_port": self.udp_port, "reason": self.reason, "rdma": self.rdma}

    def summary(self) -> str:
        return f"probes on UDP {self.udp_port}: {self.reason}"


ROCE = Transport(ROCE_UDP_PORT, "RoCEv2's port: no RDMA device on the probed interfaces")


def inspect_interface(ifname: str, sysfs_root: Path = Path("/sys")) -> dict[str, Any]:
    """The worker's ``inspect`` role: the RDMA ports whose GIDs sit on ``ifname``."""
    return {"role": "inspect", "interface": ifname, "rdma": rdma_devices_on(ifname, sysfs_root)}


def decide(policy: ProbePolicy, found: dict[str, list[str]]) -> Transport:
    """The port for a run whose probed interfaces carry ``found`` ("host:ifname" → RDMA
    ports; interfaces without any may be left out)."""
    rdma = {where: ports for where, ports in sorted(found.items()) if ports}
    if policy.udp_port != "auto":
        reason = "set by validation.probe.udp_port"
        if policy.udp_port == ROCE_UDP_PORT and rdma:
            # Said, not refused: the user may know that this NIC's RoCE is off.
            reason += f"; WARNING: {_listing(rdma)} would take UDP {ROCE_UDP_PORT}"
        return Transport(policy.udp_port, reason, rdma)
    if not rdma:
        return ROCE
    return Transport(
        policy.rdma_udp_port,
        f"{_listing(rdma)}: its NIC would take UDP {ROCE_UDP_PORT} frames for its own GIDs",
        rdma,
    )


def _listing(rdma: dict[str, list[str]]) -> str:
    return "; ".join(f"{where} carries RDMA {', '.join(ports)}" for where, ports in rdma.items())


def choose_transport(
    policy: ProbePolicy, interfaces: Iterable[tuple[str, str, Runner]]
) -> Transport:
    """Decide the run's port. In ``auto`` mode, and when 4791 is set by hand (to warn), each
    (host, ifname, runner) is inspected, all at once: one short worker run each."""
    if policy.udp_port not in ("auto", ROCE_UDP_PORT):
        return decide(policy, {})  # another port set by hand: no NIC takes it
    unique = {f"{host}:{ifname}": (host, ifname, runner) for host, ifname, runner in interfaces}
    if not unique:
        return ROCE
    found = run_each(unique, _inspect, INSPECT_PARALLELISM)
    return decide(policy, results_or_raise(found))


def _inspect(interface: tuple[str, str, Runner]) -> list[str]:
    """The RDMA ports on one host's interface, from one short worker run."""
    host, ifname, runner = interface
    result = runner.start("inspect", {"ifname": ifname}).result(timeout=INSPECT_TIMEOUT_S)
    ports = result.get("rdma")
    if not isinstance(ports, list) or not all(isinstance(p, str) for p in ports):
        raise ProbeError(f"inspect on {host}: Expected: rdma as a list Actual: {ports!r:.100}")
    return ports

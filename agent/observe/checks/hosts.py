"""Host pre-flight checks (RC202-RC207): what a RoCE job needs from each host, judged on the
host facts (:class:`agent.observe.hostfacts.HostFacts`, sources in
:mod:`agent.observe.hostsources`, parsers in :mod:`agent.observe.hostparse`).

Statuses, per host (the :class:`CheckResult` is the host's; messages name the netdev and the
RDMA device):

- ``skipped`` with the reason: the check does not apply (no port declares an ``rdma_device``,
  no GPU for the ACS check, host facts not collected by this playbook);
- ``unverified`` with the command and why (:meth:`CommandResult.failure`): a source the check
  needs failed or its output was not the format; never a silent pass;
- ``failure``: the host disagrees with the intent (``Expected: ... Actual: ...``);
- ``success``, with notes saying what was compared where that is not obvious (e.g. "rxe: RoCE
  by construction").

A failure on one port outranks an unverified one on another; both are listed.

The checks and what each failure means: docs/host-preflight.md.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from agent.device.platforms.base import PlatformError
from agent.device.platforms.linux_host import LinuxHost
from agent.device.state import QosState
from agent.intent.model import Port
from agent.intent.sizing import IBOE_MTU_OVERHEAD, roce_mtu
from agent.observe.checks.base import Check, CheckResult, Collected, DeviceData, expected_actual
from agent.observe.hostfacts import HostFacts, RdmaPortFacts
from agent.observe.hostparse import (
    AcsControl,
    HostParseError,
    PciPaths,
    bridges_between,
    parse_dcb_app_dscp,
    parse_dcb_pfc,
    parse_devlink_param,
    parse_gpu_bus_ids,
    parse_ibv_devinfo,
    parse_lspci_acs,
    parse_mtu,
    parse_pci_paths,
    parse_rdma_device,
    parse_traffic_class,
)
from agent.observe.perftest.gid import GidSelectionError, parse_show_gids, select_gid

NOT_COLLECTED = "host facts not collected (validate collects them with `collect: {hosts: true}`)"
NO_RDMA = "no port declares an rdma_device: no RoCE NIC to check"


class Unverified(Exception):
    """A source could not be read or parsed: the message names the command and why."""


class SkipHost(Exception):
    """The check does not apply to this host; the message says why."""


@dataclass
class Outcome:
    """What one check found on one host."""

    problems: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def result(self, check: Check, host: str) -> CheckResult:
        if self.problems:
            unread = [f"unverified: {u}" for u in self.unverified]
            return check.result(host, "failure", self.problems + unread)
        if self.unverified:
            return check.result(host, "unverified", self.unverified)
        if self.skipped and not self.notes:
            return check.result(host, "skipped", self.skipped)
        return check.result(host, "success", self.notes + self.skipped)


def where(facts: HostFacts, port: RdmaPortFacts) -> str:
    return f"{facts.host} {port.netdev} ({port.device}/{port.ib_port})"


def output_of(facts: HostFacts, name: str, port: RdmaPortFacts | None = None) -> str:
    """The output of source ``name`` (on ``port``), or :class:`Unverified` naming why not."""
    result = facts.result(name, port.port if port else None)
    if result is None:
        raise Unverified(f"source {name} was not collected")
    if not result.ok:
        raise Unverified(result.failure())
    return result.output


class HostCheck(Check):
    """A check of every host; skipped where it has no RDMA port or no facts."""

    categories: ClassVar[tuple[str, ...]] = ("hosts",)

    def run(self, data: Collected) -> list[CheckResult]:
        results = []
        for host in data.hosts():
            name = host.device.name
            if not host.device.rdma_ports():
                results.append(self.result(name, "skipped", [NO_RDMA]))
            elif host.facts is None:
                results.append(self.result(name, "skipped", [NOT_COLLECTED]))
            elif host.facts.error is not None:
                results.append(self.result(name, "unverified", [host.facts.error]))
            else:
                outcome = Outcome()
                self.judge_host(host, host.facts, data, outcome)
                results.append(outcome.result(self, name))
        return results

    @abstractmethod
    def judge_host(
        self, host: DeviceData, facts: HostFacts, data: Collected, outcome: Outcome
    ) -> None: ...


class PortCheck(HostCheck):
    """A host check made once per RDMA port of the intent."""

    def judge_host(
        self, host: DeviceData, facts: HostFacts, data: Collected, outcome: Outcome
    ) -> None:
        for port in facts.ports:
            try:
                self.judge_port(host, facts, port, data, outcome)
            except Unverified as exc:
                outcome.unverified.append(f"{where(facts, port)}: {exc}")
            except (HostParseError, GidSelectionError, PlatformError) as exc:
                outcome.unverified.append(f"{where(facts, port)}: {exc}")

    @abstractmethod
    def judge_port(
        self,
        host: DeviceData,
        facts: HostFacts,
        port: RdmaPortFacts,
        data: Collected,
        outcome: Outcome,
    ) -> None: ...


# --------------------------------------------------------------------------- RC202


class HostRoceV2Gid(PortCheck):
    """Each RDMA port has a RoCE v2 GID carrying the intent's IPv4 address of its netdev (the
    GID NCCL_IB_GID_INDEX must name)."""

    check_id = "RC202"

    def judge_port(
        self,
        host: DeviceData,
        facts: HostFacts,
        port: RdmaPortFacts,
        data: Collected,
        outcome: Outcome,
    ) -> None:
        if port.ipv4 is None:
            outcome.skipped.append(f"{where(facts, port)}: the intent gives this port no ipv4")
            return
        entries = parse_show_gids(output_of(facts, "gids"))
        try:
            gid = select_gid(
                entries, device=port.device, port=port.ib_port, netdev=port.netdev, ipv4=port.ipv4
            )
        except GidSelectionError as exc:
            outcome.problems.append(f"{facts.host} {exc}")
            return
        outcome.notes.append(f"{where(facts, port)}: RoCE v2 GID {gid.describe()}")


# --------------------------------------------------------------------------- RC203 / RC204


def mlnx_qos_state(facts: HostFacts, port: RdmaPortFacts) -> QosState | None:
    """``mlnx_qos -i IF`` parsed by the linux_host platform's parser, None where the host has
    no mlnx_qos (then dcb is read)."""
    result = facts.result("mlnx_qos", port.port)
    if result is None or not result.ok:
        return None
    return LinuxHost.parse_mlnx_qos(result.output)


def neither(facts: HostFacts, port: RdmaPortFacts, name: str) -> Unverified:
    reasons = []
    for source in ("mlnx_qos", name):
        result = facts.result(source, port.port)
        reasons.append(result.failure() if result else f"source {source} not collected")
        # one reason per tool, mlnx_qos first: it is the one MLNX_OFED hosts have
    return Unverified("; ".join(reasons))


class HostNicTrust(PortCheck):
    """Each RoCE NIC trusts DSCP, maps the intent's DSCPs to their priorities, and forces no
    other traffic class on RoCE packets (mlx5 ``tc/PORT/traffic_class``)."""

    check_id = "RC203"

    def judge_port(
        self,
        host: DeviceData,
        facts: HostFacts,
        port: RdmaPortFacts,
        data: Collected,
        outcome: Outcome,
    ) -> None:
        nic = host.plan.nic
        assert nic is not None  # every host has a NIC plan (agent.intent.plan.build_plan)
        at = where(facts, port)
        try:
            self.traffic_class(facts, port, data.intent.profile.roce.dscp, outcome)
        except (Unverified, HostParseError) as exc:
            outcome.unverified.append(f"{at}: {exc}")
        state = mlnx_qos_state(facts, port)
        mapping: dict[int, tuple[int, ...]]
        if state is not None:
            trust, mapping = state.trust, {d: (p,) for d, p in state.dscp_to_priority.items()}
            source = "mlnx_qos"
        else:
            result = facts.result("dcb_app", port.port)
            if result is None or not result.ok:
                raise neither(facts, port, "dcb_app")
            mapping = parse_dcb_app_dscp(result.output)
            # mlx5 switches to DSCP trust with the first DSCP APP entry and back to PCP with
            # the last one gone (en/en_dcbnl.c mlx5e_dcbnl_ieee_setapp/delapp)
            trust, source = ("dscp" if mapping else "pcp"), "dcb app"
        if trust != nic.trust:
            outcome.problems.append(expected_actual(f"{at} trust ({source})", nic.trust, trust))
        for dscp, priority in nic.dscp_to_priority.items():
            got = mapping.get(dscp)
            if got != (priority,):
                shown = "none" if got is None else ",".join(map(str, got))
                outcome.problems.append(
                    expected_actual(f"{at} DSCP {dscp} -> priority ({source})", priority, shown)
                )

    @staticmethod
    def traffic_class(facts: HostFacts, port: RdmaPortFacts, dscp: int, outcome: Outcome) -> None:
        """MLNX_OFED's forced traffic class overrides every QP's (NCCL_IB_TC's too): its DSCP
        bits (mlx5 writes ``tclass >> 2`` as the QP's DSCP, main_ext.c tclass_update_qp) must
        be the intent's RoCE DSCP."""
        tclass = parse_traffic_class(output_of(facts, "traffic_class", port))
        if tclass.global_tclass is not None and tclass.global_tclass >> 2 != dscp:
            outcome.problems.append(
                expected_actual(
                    f"{where(facts, port)} forced traffic class (tc/{port.ib_port}/traffic_class)",
                    f"DSCP {dscp} (tclass {dscp << 2}-{dscp << 2 | 3}) or none",
                    f"tclass {tclass.global_tclass} (DSCP {tclass.global_tclass >> 2})",
                )
            )


class HostNicPfc(PortCheck):
    """Each RoCE NIC has PFC on for exactly the intent's lossless priorities."""

    check_id = "RC204"

    def judge_port(
        self,
        host: DeviceData,
        facts: HostFacts,
        port: RdmaPortFacts,
        data: Collected,
        outcome: Outcome,
    ) -> None:
        nic = host.plan.nic
        assert nic is not None
        state = mlnx_qos_state(facts, port)
        if state is not None:
            # the platform's parser reads one interface and files it under "" (linux_host.py)
            interface = state.interfaces.get(port.netdev) or state.interfaces.get("")
            enabled = list(interface.pfc_priorities) if interface else []
            source = "mlnx_qos"
        else:
            result = facts.result("dcb_pfc", port.port)
            if result is None or not result.ok:
                raise neither(facts, port, "dcb_pfc")
            enabled, source = list(parse_dcb_pfc(result.output).enabled), "dcb pfc"
        if sorted(enabled) != sorted(nic.pfc_priorities):
            outcome.problems.append(
                expected_actual(
                    f"{where(facts, port)} PFC priorities ({source})",
                    sorted(nic.pfc_priorities),
                    sorted(enabled),
                )
            )


# --------------------------------------------------------------------------- RC205


class HostPcieAcs(HostCheck):
    """PCIe ACS is off on every bridge between each GPU and the fabric NIC it shares a PCIe
    switch or root port with (ACS redirects GPUDirect RDMA's peer-to-peer traffic through the
    CPU root complex: NVIDIA NCCL troubleshooting, "PCI Access Control Services")."""

    check_id = "RC205"

    def judge_host(
        self, host: DeviceData, facts: HostFacts, data: Collected, outcome: Outcome
    ) -> None:
        try:
            gpus = self.gpus(facts)
            paths = parse_pci_paths(output_of(facts, "pci_paths"))
            acs = parse_lspci_acs(output_of(facts, "lspci"))
        except SkipHost as exc:
            outcome.skipped.append(str(exc))
            return
        except (Unverified, HostParseError) as exc:
            outcome.unverified.append(f"{facts.host}: {exc}")
            return
        for gpu in gpus:
            self.judge_gpu(facts, gpu, paths, acs, outcome)

    @staticmethod
    def gpus(facts: HostFacts) -> list[str]:
        result = facts.result("gpus")
        if result is None:
            raise Unverified("source gpus was not collected")
        text = result.output
        if result.exit_status == 127 or "not found" in text:
            raise SkipHost("no GPU: nvidia-smi is not installed (no NVIDIA driver)")
        if "No devices were found" in text:
            raise SkipHost("no GPU: nvidia-smi found no devices")
        if "couldn't communicate with the NVIDIA driver" in text:
            raise SkipHost("no usable GPU: nvidia-smi cannot reach the NVIDIA driver")
        if not result.ok:
            raise Unverified(result.failure())
        gpus = parse_gpu_bus_ids(text)
        if not gpus:
            raise SkipHost("no GPU: nvidia-smi lists none")
        return gpus

    def judge_gpu(
        self,
        facts: HostFacts,
        gpu: str,
        paths: PciPaths,
        acs: dict[str, AcsControl],
        outcome: Outcome,
    ) -> None:
        chain = paths.chain(gpu)
        if chain is None:
            outcome.unverified.append(f"{facts.host}: GPU {gpu}: not among the PCI paths read")
            return
        nics = {p.device: paths.rdma.get(p.device) for p in facts.ports}
        near = [
            (name, bdf, nic_chain)
            for name, bdf in nics.items()
            if bdf and (nic_chain := paths.chain(bdf)) and nic_chain[0] == chain[0]
        ]
        if not near:
            outcome.notes.append(
                f"GPU {gpu}: shares no PCIe switch or root port with a fabric NIC "
                f"({', '.join(sorted(nics))}): they meet in the CPU, no bridge to check"
            )
            return
        for name, bdf, nic_chain in near:
            label = f"GPU {gpu} to {name} ({bdf})"
            self.judge_path(facts, label, bridges_between(chain, nic_chain), acs, outcome)

    @staticmethod
    def judge_path(
        facts: HostFacts,
        label: str,
        bridges: list[str],
        acs: dict[str, AcsControl],
        outcome: Outcome,
    ) -> None:
        """The bridges between a GPU and a NIC (``label`` names the pair): ACS off on
        each, or unverified where lspci could not tell."""
        for bridge in bridges:
            function = acs.get(bridge)
            if function is None:
                outcome.unverified.append(f"{facts.host}: {label}: bridge {bridge} not in lspci")
                continue
            if function.access_denied:
                outcome.unverified.append(
                    f"{facts.host}: {label}: bridge {bridge}: lspci shows no capabilities "
                    "(`Capabilities: <access denied>`: lspci ran without root)"
                )
                continue
            if enabled := function.enabled:
                outcome.problems.append(
                    expected_actual(
                        f"{facts.host} {label} bridge {bridge} ACSCtl",
                        "all off (ACS disabled)",
                        " ".join(f"{flag}+" for flag in enabled),
                    )
                )
        if bridges:
            outcome.notes.append(f"{label}: ACS off on {', '.join(bridges)}")


# --------------------------------------------------------------------------- RC206


class HostRoceEnabled(PortCheck):
    """Each RDMA port is RoCE: an Ethernet link layer, and RoCE enabled on the device (mlx5
    devlink ``enable_roce``; rxe is RoCE by construction; other drivers: RoCE GIDs exist)."""

    check_id = "RC206"

    def judge_port(
        self,
        host: DeviceData,
        facts: HostFacts,
        port: RdmaPortFacts,
        data: Collected,
        outcome: Outcome,
    ) -> None:
        at = where(facts, port)
        device = parse_rdma_device(output_of(facts, "rdma_device", port))
        if device.link_layer != "Ethernet":
            outcome.problems.append(
                expected_actual(f"{at} link layer", "Ethernet (RoCE)", device.link_layer)
            )
            return
        if device.is_rxe:
            outcome.notes.append(
                f"{at}: rxe (Soft-RoCE) on {device.parent}: RoCE by construction "
                "(drivers/infiniband/sw/rxe), nothing to enable"
            )
            return
        if device.driver == "mlx5_core":
            values = parse_devlink_param(output_of(facts, "enable_roce", port), "enable_roce")
            value = values.get("runtime", values.get("driverinit"))
            if value != "true":
                outcome.problems.append(
                    expected_actual(f"{at} devlink enable_roce ({device.pci})", "true", value)
                )
            else:
                outcome.notes.append(f"{at}: devlink enable_roce true")
            return
        self.by_gids(facts, port, device.driver, outcome)

    @staticmethod
    def by_gids(
        facts: HostFacts, port: RdmaPortFacts, driver: str | None, outcome: Outcome
    ) -> None:
        """Another driver: a RoCE-disabled device has no RoCE GIDs (mlx5.rst: "When RoCE is
        disabled, there is no gid table"), so RoCE GIDs on the port show it is on."""
        entries = parse_show_gids(output_of(facts, "gids"))
        roce = [e for e in entries if e.device == port.device and e.port == port.ib_port]
        at = where(facts, port)
        if not any(e.version in ("v1", "v2") for e in roce):
            outcome.problems.append(
                expected_actual(f"{at} RoCE GIDs ({driver or 'unknown driver'})", ">= 1", 0)
            )
        else:
            outcome.notes.append(f"{at}: {driver or 'unknown driver'}: RoCE GIDs present")


# --------------------------------------------------------------------------- RC207


def intent_port(host: DeviceData, name: str) -> Port:
    return next(p for p in host.device.ports if p.name == name)


class HostRoceMtu(PortCheck):
    """Each RoCE netdev's MTU carries the RoCE MTU the intent's port MTU allows (largest IB MTU
    256-4096 that fits with 96 bytes of RoCE headers), and ibv_devinfo's active_mtu (where
    installed) is that RoCE MTU."""

    check_id = "RC207"

    def judge_port(
        self,
        host: DeviceData,
        facts: HostFacts,
        port: RdmaPortFacts,
        data: Collected,
        outcome: Outcome,
    ) -> None:
        at = where(facts, port)
        intended = intent_port(host, port.port).mtu
        wanted = roce_mtu(intended)
        assert wanted is not None  # the intent's MTU is at least 1280 (agent.intent.model.Port)
        mtu = parse_mtu(output_of(facts, "mtu", port))
        if mtu < wanted + IBOE_MTU_OVERHEAD:
            outcome.problems.append(
                expected_actual(
                    f"{at} netdev MTU",
                    f">= {wanted + IBOE_MTU_OVERHEAD} (RoCE MTU {wanted} from the intent's MTU "
                    f"{intended}, + {IBOE_MTU_OVERHEAD} B of RoCE headers)",
                    f"{mtu} (RoCE MTU {roce_mtu(mtu) or 'none'})",
                )
            )
        self.active_mtu(facts, port, wanted, outcome)

    @staticmethod
    def active_mtu(facts: HostFacts, port: RdmaPortFacts, wanted: int, outcome: Outcome) -> None:
        at = where(facts, port)
        result = facts.result("ibv_devinfo", port.port)
        if result is None or not result.ok:
            why = result.failure() if result else "not collected"
            outcome.notes.append(f"{at}: active_mtu not compared: ibv_devinfo: {why}")
            return
        info = parse_ibv_devinfo(result.output).get(port.ib_port)
        if info is None or info.active_mtu is None:
            raise Unverified(f"ibv_devinfo shows no active_mtu for port {port.ib_port}")
        if info.active_mtu < wanted:
            outcome.problems.append(
                expected_actual(f"{at} ibv_devinfo active_mtu", f">= {wanted}", info.active_mtu)
            )
        else:
            outcome.notes.append(f"{at}: active_mtu {info.active_mtu}")


HOST_CHECKS: tuple[type[HostCheck], ...] = (
    HostRoceV2Gid,
    HostNicTrust,
    HostNicPfc,
    HostPcieAcs,
    HostRoceEnabled,
    HostRoceMtu,
)

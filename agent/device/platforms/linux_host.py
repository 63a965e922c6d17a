"""Host NIC side (NVIDIA/Mellanox ConnectX, mlx5): ``mlnx_qos`` and the mlx5 DCQCN sysfs.

netmiko ``linux`` on a GPU host. Render, per NIC port of the plan:

- ``sudo mlnx_qos -i IF --trust dscp|pcp``, ``--pfc 0,0,0,1,0,0,0,0`` (the plan's PFC vector,
  priority 0 first) and ``--dscp2prio set,DSCP,PRIO`` for all 64 DSCPs (the NIC default is
  ``dscp >> 3``, which would put DSCP 24-31 in the lossless priority) — MLNX_OFED ``mlnx_qos``
  options, output format as in ``mlnx_qos -i IF`` (fixture header);
- DCQCN under ``/sys/class/net/IF/ecn/``: ``roce_rp/enable/P`` and ``roce_np/enable/P`` = 1 for
  each lossless priority; reaction-point parameters (``rpg_*``, ``dce_tcp_g``,
  ``rate_reduce_monitor_period``, ``initial_alpha_value``) in ``roce_rp/``; notification-point
  parameters (``min_time_between_cnps``, ``cnp_dscp``, ``cnp_802p_prio``) in ``roce_np/`` (mlx5
  ``en_sysfs.c``; see :mod:`agent.intent.sizing`). Writes go through ``sudo tee``.

Changing real hosts is opt-in: ``LinuxHost(apply_hosts=True)``; the registry builds it with the
default ``False`` and :meth:`LinuxHost.transaction` then refuses with a clear error. With the
opt-in, the transaction snapshots the NIC (``mlnx_qos -i IF`` and the ``ecn`` sysfs files),
applies the lines, and restores the snapshot unless confirmed (a host has no device-side
timer). read_state parses ``mlnx_qos -i IF`` for every port it is given or finds.
"""

from __future__ import annotations

import re
from typing import ClassVar

from agent.device.platforms._common import changed_dscps, class_selector_map, run_checked
from agent.device.platforms.base import (
    Connection,
    Platform,
    PlatformError,
    Transaction,
    kill_point,
)
from agent.device.state import (
    DSCPS,
    PRIORITIES,
    Counters,
    InterfaceState,
    QosState,
    WatchdogState,
    full_dscp_map,
)
from agent.intent.plan import DevicePlan, NicPlan

NOTIFICATION_POINT = ("min_time_between_cnps", "cnp_dscp", "cnp_802p_prio")
FAILED = "% roce-agent: command failed"


def ecn_path(interface: str, side: str, parameter: str) -> str:
    return f"/sys/class/net/{interface}/ecn/{side}/{parameter}"


def sysfs_side(parameter: str) -> str:
    return "roce_np" if parameter in NOTIFICATION_POINT else "roce_rp"


def write(value: int | str, path: str) -> str:
    return f"echo {value} | sudo tee {path} > /dev/null"


class LinuxHost(Platform):
    name: ClassVar[str] = "linux_host"
    netmiko_device_type: ClassVar[str] = "linux"
    # What mlnx_qos configures and shows; DCQCN parameters are rendered but the normalized
    # model has no place for them, and hosts have no queue scheduling or PFC watchdog here.
    managed: ClassVar[frozenset[str]] = frozenset(
        {"trust", "dscp_to_priority", "pfc_enabled", "pfc_priorities"}
    )
    # Nothing on the host undoes a change by itself, and nothing can be saved (see save).
    saves_after_confirm: ClassVar[bool] = False

    def __init__(self, apply_hosts: bool = False) -> None:
        self.apply_hosts = apply_hosts
        self.interfaces: list[str] = []

    def desired(self, device: DevicePlan) -> QosState:
        nic = self._nic(device)
        self.interfaces = [port.name for port in device.ports]
        return QosState(
            trust=nic.trust,
            dscp_to_priority=full_dscp_map(nic.dscp_to_priority, device.default_priority),
            watchdog=WatchdogState(),
            interfaces={
                port.name: InterfaceState(
                    pfc_enabled=bool(nic.pfc_priorities),
                    pfc_priorities=tuple(nic.pfc_priorities),
                )
                for port in device.ports
            },
        )

    @staticmethod
    def _nic(device: DevicePlan) -> NicPlan:
        if device.nic is None:
            raise PlatformError(f"linux_host: {device.name} has no NIC settings in the plan")
        return device.nic

    # ------------------------------------------------------------------ render

    def render(self, device: DevicePlan) -> list[str]:
        nic = self._nic(device)
        lines = self.render_changes(self.desired(device), None)
        for port in device.ports:
            for priority in nic.pfc_priorities:
                for side in ("roce_rp", "roce_np"):
                    lines.append(write(1, ecn_path(port.name, side, f"enable/{priority}")))
            for parameter, value in sorted(
                nic.dcqcn.items(), key=lambda item: (sysfs_side(item[0]), item[0])
            ):
                lines.append(write(value, ecn_path(port.name, sysfs_side(parameter), parameter)))
        return lines

    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """``mlnx_qos`` commands for trust, PFC and DSCP entries that differ."""
        lines: list[str] = []
        dscps = list(DSCPS) if actual is None else changed_dscps(desired, actual)
        for name, want in desired.interfaces.items():
            have = actual.interfaces.get(name) if actual else None
            if actual is None or actual.trust != desired.trust:
                lines.append(f"sudo mlnx_qos -i {name} --trust {desired.trust}")
            if have is None or have.pfc_priorities != want.pfc_priorities:
                vector = ",".join("1" if p in want.pfc_priorities else "0" for p in PRIORITIES)
                lines.append(f"sudo mlnx_qos -i {name} --pfc {vector}")
            for dscp in dscps:
                priority = desired.dscp_to_priority[dscp]
                lines.append(f"sudo mlnx_qos -i {name} --dscp2prio set,{dscp},{priority}")
        return lines

    # ------------------------------------------------------------------ read

    def read_state(self, conn: Connection) -> QosState:
        names = self.interfaces or self._discover(conn)
        states = {name: self.parse_mlnx_qos(conn.show(f"mlnx_qos -i {name}")) for name in names}
        if not states:
            return QosState()
        trusts = {state.trust for state in states.values()}
        maps = [state.dscp_to_priority for state in states.values()]
        return QosState(
            trust=trusts.pop() if len(trusts) == 1 else "mixed",
            dscp_to_priority=maps[0],
            interfaces={name: next(iter(s.interfaces.values())) for name, s in states.items()},
        )

    @staticmethod
    def _discover(conn: Connection) -> list[str]:
        # Netdevs that have the mlx5 DCQCN sysfs directory are the RoCE ports.
        output = conn.show("ls -d /sys/class/net/*/ecn/roce_rp")
        return sorted(re.findall(r"/sys/class/net/([^/\s]+)/ecn/roce_rp", output))

    @staticmethod
    def parse_mlnx_qos(output: str) -> QosState:
        """One interface's ``mlnx_qos -i IF`` output (trust, dscp2prio, PFC enabled row)."""
        trust_match = re.search(r"Priority trust state:\s*(\w+)", output)
        if trust_match is None:
            raise PlatformError(f"not mlnx_qos output: {output.strip()[:200]!r}")
        dscp_map = class_selector_map()  # the NIC's default
        for priority, listed in re.findall(r"prio:(\d)\s+dscp:([\d,\s]*)", output):
            for dscp in re.findall(r"\d+", listed):
                dscp_map[int(dscp)] = int(priority)
        enabled = re.search(r"^\s*enabled((?:\s+[01])+)\s*$", output, re.MULTILINE)
        flags = [int(x) for x in enabled.group(1).split()] if enabled else [0] * 8
        priorities = tuple(p for p, flag in enumerate(flags) if flag)
        return QosState(
            trust=trust_match.group(1),
            dscp_to_priority=dscp_map,
            interfaces={
                "": InterfaceState(pfc_enabled=bool(priorities), pfc_priorities=priorities)
            },
        )

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        raise PlatformError(
            "linux_host: NIC counters are collected by the probes (agent.observe.probes), not here"
        )

    # ------------------------------------------------------------------ change (the base's flow)

    # A host has no device-side transaction: each line is live as it is sent, and the undo
    # is the snapshot taken at ``begin``, put back by the agent.

    def begin(self, conn: Connection, txn: Transaction) -> None:
        """Refuse without the opt-in; otherwise snapshot the NIC (``mlnx_qos`` and the ``ecn``
        sysfs files) as the commands that restore it."""
        if not self.apply_hosts:
            raise PlatformError(
                f"{conn.device}: changing host NICs is opt-in; build the platform with "
                "LinuxHost(apply_hosts=True) to apply mlnx_qos and DCQCN settings to real hosts"
            )
        before = self.read_state(conn)
        txn.undo = self.render_changes(before, None)
        for name in before.interfaces:
            output = conn.show(f"sudo grep -r . /sys/class/net/{name}/ecn")
            for path, value in re.findall(r"^(/sys/class/net/\S+?):(\S+)$", output, re.M):
                txn.undo.append(write(value, path))

    def stage(self, conn: Connection, txn: Transaction) -> None:
        for line in txn.lines:
            # Make a failing command print a refusal the checks recognise.
            run_checked(conn, f"{line} || echo '{FAILED}'")
            # Without a session, "in session" is mid-change: a kill there leaves the first
            # command live and the others not (docs/push.md).
            kill_point("in-session", conn.device)

    def rollback(self, conn: Connection, txn: Transaction) -> None:
        for command in txn.undo:
            conn.show(command)
        txn.rolled_back = True

    def confirm_change(self, conn: Connection, txn: Transaction) -> None:
        return None  # the host kept the change as it was made

    def save(self, conn: Connection) -> None:
        # mlnx_qos and sysfs settings do not survive a reboot; persisting them (a systemd unit
        # or the NIC firmware's mlxconfig) is the host build's job, not the agent's.
        return None

"""The netns runtime: build a containerlab topology out of network namespaces, and undo it.

``up`` creates one namespace per node (named like containerlab's containers), one veth pair
per link, configures hosts in their kernel and starts one ``lab.vswitch`` per switch; ``down``
removes exactly what ``up`` recorded. The record (``state.json`` in the lab's state directory)
is written *before* each namespace is created and right after each process starts, so a
crash or kill in the middle of ``up`` still leaves ``down`` everything it needs.

State directory (default ``/run/roce-agent/lab/<lab>/``; ``--state-dir`` / ``$ROCE_LAB_STATE_DIR``
name the directory itself)::

    state.json          what was created (namespaces, PIDs with their argv) and the plan
    fabric.yml          the agent's fabric file for this lab
    <switch>.json       lab.vswitch --config
    <switch>.sock       its control socket
    <switch>.log        its log (--log-file); <switch>.console.log: its stdout/stderr
    gnmi-ca.pem/.key    the lab's CA for the switches' gNMI servers (lab.mgmt.gnmi.tls)
    <switch>-mgmt/      the management process's state: host key, startup config, faults.json,
                        gnmi.pem/gnmi.key (its gNMI server certificate, signed by the lab's CA)
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lab import netns, procs
from lab.addressing import (
    MGMT_HOST,
    PASSWORD_ENV,
    LabPlan,
    NodePlan,
    build_plan,
    fabric_document,
    fabric_port_name,
    vswitch_config,
)
from lab.fault_registry import stop_fault_processes
from lab.state import (
    DEFAULT_STATE_ROOT,
    STATE_FILE,
    STATE_SCHEMA,
    LabError,
    LabState,
    locked,
    now,
    state_dir_for,
)
from lab.topology.loader import load_topology
from lab.topology.model import DEFAULT_NOS, Topology, check_lab_name

if TYPE_CHECKING:  # lab.vmhost is loaded only for labs with VM hosts
    from lab.vmhost.vm import VmHost

USERNAME_ENV = "ROCE_LAB_USERNAME"
FABRIC_FILE = "fabric.yml"
GNMI_CA = "gnmi-ca.pem"
GNMI_CA_KEY = "gnmi-ca.key"
GNMI_CERT = "gnmi.pem"  # in <switch>-mgmt/
GNMI_KEY = "gnmi.key"
START_TIMEOUT_S = 30.0
MAX_UNIX_PATH = 107  # sun_path is 108 bytes including the NUL
MGMT_SUFFIX = ":mgmt"  # process records of management planes are keyed "<node>:mgmt"
VM_SUFFIX = ":vm"  # a VM host's qemu
NIC_SUFFIX = ":nic"  # a VM host's NIC process (lab.vmhost.nic, in the host's namespace)
VSWITCH_POLL_S = 0.05

# Switch namespaces: the vswitch owns the data plane in user space; the kernel there must
# neither forward nor answer (no IPs on the ports, and belt and braces on ARP/ICMP).
SWITCH_SYSCTLS: dict[str, str | int] = {
    "net.ipv4.ip_forward": 0,
    "net.ipv4.conf.all.forwarding": 0,
    "net.ipv4.conf.all.arp_ignore": 8,
    "net.ipv4.conf.default.arp_ignore": 8,
    "net.ipv4.icmp_echo_ignore_all": 1,
}
# Every namespace: no IPv6, so no router solicitations, MLD or DAD frames on the lab wire —
# what the counters show is the test traffic.
COMMON_SYSCTLS: dict[str, str | int] = {
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
}


# --------------------------------------------------------------------------- helpers


def _require_root(command: str) -> None:
    if not netns.is_root():
        raise LabError(
            f"`roce-agent lab {command}` needs root: it creates network namespaces and veth "
            "pairs (run it with sudo)"
        )


def _busy(lab_name: str, directory: Path) -> LabError:
    return LabError(f"lab {lab_name}: another `roce-agent lab` command is working on {directory}")


def allocate_mgmt_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now (kernel-chosen)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((MGMT_HOST, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# --------------------------------------------------------------------------- up


def up(
    topology_path: str | os.PathLike[str],
    *,
    lab_name: str | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    start_timeout: float = START_TIMEOUT_S,
    nos: str | None = None,
) -> dict[str, Any]:
    """Build the lab; return its :func:`status`. Refuses (LabError) if it is already up.
    ``nos`` makes every switch speak that NOS whatever its roce.lab/nos label says.

    On any failure everything created so far is removed again before the error is raised.
    """
    topology = load_topology(Path(topology_path))
    if nos is not None:
        try:
            topology = topology.speaking(nos)
        except ValueError as exc:
            raise LabError(f"--nos: {exc}") from None
    name = lab_name or topology.name
    problem = check_lab_name(name)
    if problem:
        raise LabError(f"--name: {problem}")
    plan = build_plan(topology, name)
    _require_root("up")
    missing = netns.missing_tools()
    if missing:
        raise LabError("missing tools: " + ", ".join(missing))
    directory = state_dir_for(name, state_dir)
    _check_socket_paths(plan, directory)
    created_dir = not directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabError(f"cannot create the state directory {directory}: {exc.strerror}") from None
    try:
        with locked(directory, lambda: _busy(name, directory)):
            _refuse_if_present(plan, directory)
            state = _new_state(plan, topology, directory)
            state.save()
            _build_or_undo(state, plan, start_timeout)
    except LabError:
        if created_dir:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    return status(name, directory)


def _check_socket_paths(plan: LabPlan, directory: Path) -> None:
    """The lab's unix sockets live in the state directory: their paths must fit sun_path."""
    sockets = [str(directory / f"{s.name}.sock") for s in plan.switches()]
    sockets += [str(directory / f"{h.name}-vm" / "nic.sock") for h in plan.hosts() if h.node.is_vm]
    longest = max(sockets, key=len, default="")
    if len(longest.encode()) > MAX_UNIX_PATH:
        raise LabError(
            f"state directory {directory} is too long for the lab's unix sockets "
            f"({longest} exceeds {MAX_UNIX_PATH} bytes); use a shorter --state-dir"
        )


def _build_or_undo(state: LabState, plan: LabPlan, start_timeout: float) -> None:
    """Build the lab; on any failure (^C included) remove what was built, then say so."""
    try:
        _build(state, plan, start_timeout)
    except BaseException as exc:
        report = _teardown(state)
        cleaned = (
            "everything it had created was removed"
            if not report.warnings
            else "cleanup was incomplete: " + "; ".join(report.warnings)
        )
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        raise LabError(f"lab {plan.name}: up failed: {reason}\n({cleaned})") from exc


def _refuse_if_present(plan: LabPlan, directory: Path) -> None:
    existing = LabState.load(directory)
    if existing is not None:
        raise LabError(
            f"lab {existing.name} is already up (state: {existing.path}, phase "
            f"{existing.data.get('phase')}); run `roce-agent lab down --lab {existing.name}` "
            f"first"
            + (f" (with --state-dir {directory})" if directory.parent != DEFAULT_STATE_ROOT else "")
        )
    taken = [p.netns for p in plan.nodes.values() if netns.netns_exists(p.netns)]
    if taken:
        raise LabError(
            f"lab {plan.name}: network namespace(s) {', '.join(taken)} already exist and are "
            f"not recorded in {directory / STATE_FILE}, so they are not this lab's; pick another "
            "name with --name, or remove leftovers yourself with `ip netns delete NAME`"
        )


def _serves_gnmi(nos: str) -> bool:
    from lab.mgmt.gnmi import default_port

    return default_port(nos) is not None


def _new_state(plan: LabPlan, topology: Topology, directory: Path) -> LabState:
    managed = [p.name for p in plan.nodes.values() if p.node.is_switch or p.node.is_vm]
    telemetry = [
        f"{p.name}:gnmi" for p in plan.switches() if _serves_gnmi(p.node.nos or DEFAULT_NOS)
    ]
    # One allocation for both kinds: every switch shares 127.0.0.1, so no two may coincide.
    wanted = managed + telemetry
    ports = dict(zip(wanted, allocate_mgmt_ports(len(wanted)), strict=True))
    username = os.environ.get(USERNAME_ENV) or topology.credentials.username
    password = os.environ.get(PASSWORD_ENV) or topology.credentials.password
    nodes: dict[str, Any] = {}
    for node_plan in plan.nodes.values():
        node = node_plan.node
        info: dict[str, Any] = {
            "kind": node.lab_kind,
            "role": node.role,
            "netns": node_plan.netns,
        }
        if node.is_switch:
            info.update(_switch_record(node.name, node.nos or DEFAULT_NOS, directory, ports))
        elif node_plan.gateway is not None:
            info["gateway"] = str(node_plan.gateway.peer_address)
        if node.is_vm:
            # A VM host (lab.vmhost): SSH on a forwarded loopback port, its NIC process in the
            # namespace, its files in <node>-vm/.
            info.update(
                rdma=node.rdma,
                mgmt_host=MGMT_HOST,
                mgmt_port=ports[node.name],
                vm_dir=str(directory / f"{node.name}-vm"),
                nic_socket=str(directory / f"{node.name}-vm" / "nic.sock"),
                nic_stats=str(directory / f"{node.name}-vm" / "nic.json"),
                nic_log=str(directory / f"{node.name}-vm" / "nic.log"),
            )
        info["interfaces"] = [
            {
                "ifname": i.ifname,
                "fabric_port": fabric_port_name(plan, node.name, i.index),
                "mac": i.mac,
                "ipv4": str(i.address),
                "peer": i.peer,
                "peer_ipv4": str(i.peer_address),
                "speed_bps": i.speed_bps,
                "mtu": i.mtu,
            }
            for i in node_plan.interfaces
        ]
        nodes[node.name] = info
    data: dict[str, Any] = {
        "schema": STATE_SCHEMA,
        "lab": plan.name,
        "topology_file": str(Path(topology.path).absolute()),
        "state_dir": str(directory),
        "phase": "creating",
        "owner_pid": os.getpid(),
        "created_at": now(),
        "credentials": {"username": username, "password": password},
        "fabric_file": str(directory / FABRIC_FILE),
        "files": [],
        "netns": {},
        "processes": {},
        "nodes": nodes,
    }
    return LabState(directory, data)


def _switch_record(name: str, nos: str, directory: Path, ports: dict[str, int]) -> dict[str, Any]:
    """A switch's record: its NOS, management ports and files."""
    info: dict[str, Any] = {
        "nos": nos,
        "mgmt_host": MGMT_HOST,
        "mgmt_port": ports[name],
        "config_file": str(directory / f"{name}.json"),
        "control_socket": str(directory / f"{name}.sock"),
        "log_file": str(directory / f"{name}.log"),
    }
    if f"{name}:gnmi" in ports:
        info.update(_gnmi_info(directory, name, ports[f"{name}:gnmi"]))
    return info


def _gnmi_info(directory: Path, name: str, port: int) -> dict[str, Any]:
    """A switch's gNMI endpoint: its port on the management host, the lab CA that signed its
    certificate and the name the certificate carries (the switch's)."""
    mgmt = directory / f"{name}-mgmt"
    return {
        "gnmi_host": MGMT_HOST,
        "gnmi_port": port,
        "gnmi_ca": str(directory / GNMI_CA),
        "gnmi_server_name": name,
        "gnmi_cert": str(mgmt / GNMI_CERT),
        "gnmi_key": str(mgmt / GNMI_KEY),
    }


def _make_gnmi_certs(state: LabState) -> None:
    """The lab's CA and a server certificate per switch that serves gNMI (recorded first, so
    ``down`` removes them)."""
    switches = {n: i for n, i in state.data["nodes"].items() if "gnmi_port" in i}
    if not switches:
        return
    from lab.mgmt.gnmi.tls import CertFiles, create_ca, issue_server_cert

    ca = CertFiles(state.add_file(GNMI_CA), state.add_file(GNMI_CA_KEY))
    create_ca(ca, state.name)
    for name, info in switches.items():
        state.add_dir(f"{name}-mgmt").mkdir(parents=True, exist_ok=True)
        files = CertFiles(Path(info["gnmi_cert"]), Path(info["gnmi_key"]))
        issue_server_cert(ca, files, info["gnmi_server_name"])


def _build(state: LabState, plan: LabPlan, start_timeout: float) -> None:
    _create_namespaces(state, plan)
    _wire(plan)
    for node_plan in plan.nodes.values():
        netns.ip_batch(node_plan.netns, _ip_commands(node_plan))
        for interface in node_plan.interfaces:
            netns.disable_offloads(node_plan.netns, interface.ifname)
    for node_plan in plan.switches():
        config = state.add_file(f"{node_plan.name}.json")
        config.write_text(json.dumps(vswitch_config(plan, node_plan.name), indent=2) + "\n")
    _make_gnmi_certs(state)
    _start_processes(state, plan, start_timeout)
    state.data["phase"] = "up"
    state.data["up_at"] = now()
    state.save()


def _create_namespaces(state: LabState, plan: LabPlan) -> None:
    for node_plan in plan.nodes.values():
        # Recorded first: a crash right after `ip netns add` still leaves it to `down`.
        state.netns()[node_plan.netns] = "creating"
        state.save()
        try:
            netns.add_netns(node_plan.netns)
        except netns.CommandError:
            del state.netns()[node_plan.netns]  # not ours: someone else holds the name
            state.save()
            raise
        state.netns()[node_plan.netns] = "created"
        state.save()
        sysctls = dict(COMMON_SYSCTLS)
        if node_plan.node.is_switch or node_plan.node.is_vm:
            # A VM host's namespace only carries its NIC process: its kernel stays silent too.
            sysctls.update(SWITCH_SYSCTLS)
        netns.set_sysctls(node_plan.netns, sysctls)


def _wire(plan: LabPlan) -> None:
    """One veth pair per link, its ends already named, addressed by MAC and sized."""
    for link in plan.topology.links:
        a = plan.nodes[link.a.node]
        b = plan.nodes[link.b.node]
        a_if = next(i for i in a.interfaces if i.ifname == link.a.ifname)
        b_if = next(i for i in b.interfaces if i.ifname == link.b.ifname)
        netns.add_veth(
            netns.VethEnd(a.netns, a_if.ifname, a_if.mac),
            netns.VethEnd(b.netns, b_if.ifname, b_if.mac),
            link.mtu,
        )


def _start_processes(state: LabState, plan: LabPlan, start_timeout: float) -> None:
    """VM hosts first (the long pole), then the vswitches and their management planes."""
    vms = [p for p in plan.hosts() if p.node.is_vm]
    booting = _start_vm_hosts(state, vms) if vms else {}
    _write_fabric_file(state, plan)
    launched = {p.name: _start_vswitch(state, p) for p in plan.switches()}
    _wait_for_vswitches(state, launched, start_timeout)
    for switch in plan.switches():
        _write_links(state, plan, switch)
    moved = [_start_management(state, p, start_timeout) for p in plan.switches()]
    if any(moved):
        _write_fabric_file(state, plan)  # the agent must find the switches where they listen
    _wait_for_vm_hosts(state, booting)


def _write_links(state: LabState, plan: LabPlan, node_plan: NodePlan) -> None:
    """``<node>-mgmt/links.json``: each port's MTU and what LLDP would see on it (lab.mgmt.lldp
    answers ``show lldp neighbors`` from it; the lab has no LLDP on the wire)."""
    from lab.mgmt.lldp import LINKS_FILE

    ports: dict[str, Any] = {}
    for i in node_plan.interfaces:
        peer = plan.nodes[i.peer_node]
        peer_if = next(p for p in peer.interfaces if p.ifname == i.peer_ifname)
        ports[i.ifname] = {
            "mtu": i.mtu,
            "peer": {
                "system_name": i.peer_node,
                "port": fabric_port_name(plan, i.peer_node, i.peer_index),
                "port_mac": i.peer_mac,
                # A switch's chassis MAC is its first port's (lab.mgmt's system MAC); lldpd
                # on a host uses its interface's.
                "chassis_mac": peer.interfaces[0].mac if peer.node.is_switch else i.peer_mac,
                "kind": "switch" if peer.node.is_switch else "host",
                "management_address": "" if peer.node.is_switch else str(peer_if.address.ip),
            },
        }
    directory = state.add_dir(f"{node_plan.name}-mgmt")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LINKS_FILE).write_text(json.dumps({"ports": ports}, indent=2) + "\n")


def _ip_commands(node_plan: NodePlan) -> list[str]:
    """``ip -batch`` lines that bring a node's interfaces up (and address hosts)."""
    commands = ["link set dev lo up"]
    for i in node_plan.interfaces:
        commands.append(f"link set dev {i.ifname} up")
    if node_plan.node.is_switch or node_plan.node.is_vm:
        return commands  # no kernel addresses: the vswitch (or the VM) owns the data plane
    for i in node_plan.interfaces:
        commands.append(f"addr add {i.address} dev {i.ifname}")
        # Static ARP: the first packets must not wait for (or lose) resolution.
        commands.append(
            f"neigh replace {i.peer_address} lladdr {i.peer_mac} dev {i.ifname} nud permanent"
        )
    if node_plan.gateway is not None:
        gw = node_plan.gateway
        commands.append(f"route add default via {gw.peer_address} dev {gw.ifname}")
    return commands


# The hosts' DCQCN on a time-dilated lab: the values of Zhu et al., "Congestion Control for
# Large-Scale RDMA Deployments" (SIGCOMM 2015), section 5: rate-increase timer T = 55 µs,
# additive step R_AI = 40 Mb/s, CNP interval N = 50 µs (used for the least time between cuts
# too); hyper step 5 x R_AI (no source: a choice). The profile's mlx5 defaults are set for
# 100G+ NICs: their +5 Mb/s steps every 300 µs cannot win back a halved rate within the 20 ms
# a 2 s lab run stands for at time_dilation 100 (10 Mb/s standing for 1 Gb/s), so an incast
# leaves its senders far below their share.  The paper's reaction point sets the target rate
# to the current rate on every CNP: mlx5's clamp_tgt_rate 1 (its default 0 keeps the target
# through a burst of cuts, and the lab's own ECN setting then fills the link without tuning:
# docs/lab.md, "The target clamp").
DILATED_LAB_DCQCN: dict[str, int] = {
    "clamp_tgt_rate": 1,
    "rpg_time_reset": 55,
    "rpg_ai_rate": 40,
    "rpg_hai_rate": 200,
    "min_time_between_cnps": 50,
    "rate_reduce_monitor_period": 50,
}


def _write_fabric_file(state: LabState, plan: LabPlan) -> None:
    ports = {
        name: int(info["mgmt_port"])
        for name, info in state.data["nodes"].items()
        if "mgmt_port" in info
    }
    document = fabric_document(plan, ports, _gnmi_blocks(state))
    from lab.mgmt.launcher import host_public_key

    for device in document["devices"]:
        info = state.data["nodes"][device["name"]]
        if "vm_dir" in info:
            _vm_host_device(device, info)
        elif device["name"] in ports:  # pinned: the agent checks host keys by default
            device["host_key"] = host_public_key(state.add_dir(f"{device['name']}-mgmt"))
    if state.data["credentials"]["username"] != plan.topology.credentials.username:
        document["defaults"]["username"] = state.data["credentials"]["username"]
    # What the lab's links stand for (roce.lab/time-dilation): the agent cannot import lab, so
    # the fabric file carries it; the probes dilate the hosts' NIC timers by it. Always
    # written, 1 included, so the file says whether its numbers are real time.
    document = {
        **{k: v for k, v in document.items() if k != "devices"},
        "emulation": {"time_dilation": plan.topology.time_dilation},
        "devices": document["devices"],
    }
    if plan.topology.time_dilation > 1:
        document["overrides"]["nic"] = {"dcqcn": dict(DILATED_LAB_DCQCN)}
    path = state.add_file(FABRIC_FILE)
    header = (
        f"# Fabric file of lab {plan.name}, generated by `roce-agent lab up` from\n"
        f"# {state.data['topology_file']}. The password is read from ${PASSWORD_ENV}\n"
        f"# (the lab's is shown by `roce-agent lab status`).\n"
    )
    path.write_text(header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False))


def _gnmi_blocks(state: LabState) -> dict[str, dict[str, Any]]:
    """Each gNMI switch's ``gnmi`` block of the fabric file: where it serves gNMI and how to
    check its certificate (the lab's CA, the switch's name)."""
    return {
        name: {
            "port": int(info["gnmi_port"]),
            "tls": {"ca": info["gnmi_ca"], "server_name": info["gnmi_server_name"]},
        }
        for name, info in state.data["nodes"].items()
        if "gnmi_port" in info
    }


def _vm_host_device(device: dict[str, Any], info: Mapping[str, Any]) -> None:
    """A VM host in the fabric file: reached over SSH like a real host (key login as root,
    pinned host key), probes run by this interpreter inside the guest (the guest sees this
    machine's file system), its port backed by the RDMA device the guest created."""
    from lab.vmhost.vm import RDMA_DEVICE, public_key_line

    vm_dir = Path(info["vm_dir"])
    device.pop("netns", None)
    device.update(
        host=info["mgmt_host"],
        port=int(info["mgmt_port"]),
        username="root",
        credentials={"ssh_key": str(vm_dir / "id_ed25519")},
        host_key=public_key_line(vm_dir / "ssh_host_ed25519_key.pub"),
        probe_python=sys.executable,
    )
    for port in device["ports"]:
        port["rdma_device"] = RDMA_DEVICE


def _vm_host(state: LabState, node_plan: NodePlan, index: int) -> VmHost:
    from lab.vmhost.vm import VmHost

    info = state.data["nodes"][node_plan.name]
    gateway = node_plan.gateway
    assert gateway is not None  # a VM host has exactly one link, to a switch (topology)
    return VmHost(
        name=node_plan.name,
        directory=Path(info["vm_dir"]),
        mac=gateway.mac,
        address=gateway.address,
        gateway=gateway.peer_address,
        gateway_mac=gateway.peer_mac,
        mtu=gateway.mtu,
        nic_socket=Path(info["nic_socket"]),
        ssh_port=int(info["mgmt_port"]),
        index=index,
    )


def _start_vm_hosts(
    state: LabState, vms: list[NodePlan]
) -> dict[str, tuple[VmHost, subprocess.Popen[bytes]]]:
    """Each VM host's NIC process (in its namespace), then qemu (in the root namespace: its
    SSH port is forwarded from loopback), all recorded before they start booting."""
    from concurrent.futures import ThreadPoolExecutor

    from lab.vmhost.vm import VmError, missing_requirements, prepare, qemu_command

    missing = missing_requirements()
    if missing:
        raise LabError("VM hosts (roce.lab/rdma) need: " + "; ".join(missing))
    hosts = [_vm_host(state, node_plan, index) for index, node_plan in enumerate(vms, 1)]
    for vm, node_plan in zip(hosts, vms, strict=True):
        state.add_dir(vm.directory.name)
        try:
            prepare(vm)
        except VmError as exc:
            raise LabError(str(exc)) from None
        _start_vm_nic(state, node_plan)
    try:
        # virtme-run builds an initramfs per VM, mostly waiting: all at once.
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            commands = list(pool.map(qemu_command, hosts))
    except VmError as exc:
        raise LabError(str(exc)) from None
    booting = {}
    for vm, argv in zip(hosts, commands, strict=True):
        _wait_for_file(Path(state.data["nodes"][vm.name]["nic_socket"]), vm.name, state)
        booting[vm.name] = (vm, _start_qemu(state, vm, argv))
    return booting


def _wait_for_file(
    path: Path, node: str, state: LabState, timeout: float = START_TIMEOUT_S
) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            log = procs.tail(Path(state.data["nodes"][node]["nic_log"]))
            raise LabError(
                f"the NIC of VM host {node} did not start" + (f":\n{log}" if log else "")
            )
        time.sleep(0.05)


def _start_vm_nic(state: LabState, node_plan: NodePlan) -> None:
    info = state.data["nodes"][node_plan.name]
    gateway = node_plan.gateway
    assert gateway is not None
    argv = [
        sys.executable, "-m", "lab.vmhost.nic",
        "--ifname", gateway.ifname,
        "--socket", info["nic_socket"],
        "--speed-bps", str(gateway.speed_bps),
        "--stats", info["nic_stats"],
        "--log-file", info["nic_log"],
    ]  # fmt: skip
    launcher = ["ip", "netns", "exec", node_plan.netns]
    console = Path(info["vm_dir"]) / "nic.console.log"
    _start_recorded(state, f"{node_plan.name}{NIC_SUFFIX}", argv, launcher, console)


def _start_qemu(state: LabState, vm: VmHost, argv: list[str]) -> subprocess.Popen[bytes]:
    # Below the switches: a TCG guest can take a whole core, the vswitches must keep time.
    return _start_recorded(state, f"{vm.name}{VM_SUFFIX}", argv, ["nice", "-n", "10"],
                           vm.directory / "qemu.log")  # fmt: skip


def _start_recorded(
    state: LabState, key: str, argv: list[str], launcher: list[str], console: Path
) -> subprocess.Popen[bytes]:
    """Start ``launcher + argv`` in its own session and record it under ``key`` (down stops
    it by that PID, and only while it still runs ``argv``)."""
    with console.open("ab") as out:
        proc = procs.spawn([*launcher, *argv], stdout=out, stderr=subprocess.STDOUT)
    state.processes()[key] = {
        "pid": proc.pid,
        "argv": argv,
        "launcher": launcher,
        "started_at": now(),
    }
    state.save()
    return proc


def _wait_for_vm_hosts(
    state: LabState, booting: Mapping[str, tuple[VmHost, subprocess.Popen[bytes]]]
) -> None:
    from lab.vmhost.vm import VmError, wait_ready

    for name, (vm, proc) in booting.items():
        try:
            seconds = wait_ready(vm, proc)
        except VmError as exc:
            raise LabError(str(exc)) from None
        state.data["nodes"][name]["boot_s"] = round(seconds, 1)
    state.save()


def _start_vswitch(state: LabState, node_plan: NodePlan) -> subprocess.Popen[bytes]:
    info = state.data["nodes"][node_plan.name]
    state.add_file(Path(info["control_socket"]).name)
    state.add_file(Path(info["log_file"]).name)
    console = state.add_file(f"{node_plan.name}.console.log")
    argv = [
        sys.executable, "-m", "lab.vswitch",
        "--config", info["config_file"],
        "--control", info["control_socket"],
        "--log-file", info["log_file"],
    ]  # fmt: skip
    launcher = ["ip", "netns", "exec", node_plan.netns]
    return _start_recorded(state, node_plan.name, argv, launcher, console)


PORT_ATTEMPTS = 3


def _start_management(state: LabState, node_plan: NodePlan, timeout: float) -> bool:
    """The switch's SSH management plane (the personality of its NOS, with its gNMI server) on
    its recorded loopback ports, or on new ones if another process took one between its
    allocation and the bind (labs coming up side by side). True when the ports moved."""
    from lab.mgmt.launcher import (
        ManagementOptions,
        ManagementStartError,
        PortTaken,
        start_management,
    )

    info = state.data["nodes"][node_plan.name]
    directory = state.add_dir(f"{node_plan.name}-mgmt")
    credentials = state.data["credentials"]
    moved = False
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            switch = ManagementOptions(
                node_plan.name,
                info["mgmt_host"],
                int(info["mgmt_port"]),
                info["control_socket"],
                directory,
                credentials["username"],
                credentials["password"],
                [i.ifname for i in node_plan.interfaces],
                nos=info.get("nos", DEFAULT_NOS),
                gnmi_port=info.get("gnmi_port"),
                gnmi_cert=info.get("gnmi_cert"),
                gnmi_key=info.get("gnmi_key"),
            )
            proc = start_management(switch, timeout=timeout)
            break
        except PortTaken as exc:
            if attempt == PORT_ATTEMPTS:
                raise LabError(f"management plane of {node_plan.name}: {exc}") from None
            _move_ports(info)
            state.save()
            moved = True
        except ManagementStartError as exc:
            raise LabError(f"management plane of {node_plan.name} did not start: {exc}") from None
    state.processes()[node_plan.name + MGMT_SUFFIX] = {
        "pid": proc.pid,
        "argv": [str(a) for a in proc.args],  # type: ignore[union-attr]
        "launcher": [],
        "started_at": now(),
    }
    state.save()
    return moved


def _move_ports(info: dict[str, Any]) -> None:
    """New SSH (and gNMI) ports for a switch whose ports were taken before it bound them."""
    if "gnmi_port" in info:
        info["mgmt_port"], info["gnmi_port"] = allocate_mgmt_ports(2)
    else:
        (info["mgmt_port"],) = allocate_mgmt_ports(1)


def _wait_for_vswitches(
    state: LabState, launched: Mapping[str, subprocess.Popen[bytes]], timeout: float
) -> None:
    pending = dict(launched)
    deadline = time.monotonic() + timeout
    while pending:
        for node, proc in list(pending.items()):
            if _vswitch_answers(state, node, proc):
                del pending[node]
        if pending and time.monotonic() > deadline:
            raise LabError(
                f"vswitch(es) {', '.join(pending)} did not answer ping on their control socket "
                f"within {timeout:g} s (logs in {state.directory})"
            )
        if pending:
            time.sleep(VSWITCH_POLL_S)


def _vswitch_answers(state: LabState, node: str, proc: subprocess.Popen[bytes]) -> bool:
    """The vswitch answers a ping on its control socket; LabError if it has exited."""
    info = state.data["nodes"][node]
    if proc.poll() is not None:
        log = procs.tail(Path(info["log_file"])) or procs.tail(
            state.directory / f"{node}.console.log"
        )
        raise LabError(
            f"vswitch {node} exited with code {proc.returncode} during start"
            + (f"; its log ends with:\n{log}" if log else "")
        )
    if not os.path.exists(info["control_socket"]):
        return False
    return _ping(info["control_socket"], timeout=1.0) == "ok"


# --------------------------------------------------------------------------- down


@dataclass
class TeardownReport:
    """What ``down`` removed, and what it could not."""

    stopped: list[dict[str, Any]] = field(default_factory=list)
    killed_in_netns: list[dict[str, Any]] = field(default_factory=list)
    deleted_netns: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # informational
    warnings: list[str] = field(default_factory=list)  # something is left behind


def down(lab_name: str, state_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Remove exactly what ``up`` recorded for ``lab_name``; a lab that is not up is a no-op."""
    directory = state_dir_for(lab_name, state_dir)
    state = LabState.load(directory) if directory.is_dir() else None
    if state is None:
        return {
            "name": lab_name,
            "state_dir": str(directory),
            "result": "not-up",
            "message": f"lab {lab_name}: nothing recorded in {directory}; nothing to remove",
        }
    if state.name != lab_name:
        raise LabError(f"{state.path} belongs to lab {state.name}, not {lab_name}")
    _require_root("down")
    with locked(directory, lambda: _busy(lab_name, directory)):
        state = LabState.load(directory)  # re-read under the lock
        if state is None:
            return {"name": lab_name, "state_dir": str(directory), "result": "not-up"}
        report = _teardown(state)
    return {
        "name": lab_name,
        "state_dir": str(directory),
        "result": "removed" if not report.warnings else "incomplete",
        "stopped": report.stopped,
        "killed_in_netns": report.killed_in_netns,
        "deleted_netns": report.deleted_netns,
        "removed_files": report.removed_files,
        "notes": report.notes,
        "warnings": report.warnings,
    }


def _teardown(state: LabState) -> TeardownReport:
    """Undo what the record says, in the order that leaves nothing behind; keep the record
    while anything could not be removed, so another ``down`` can finish the job."""
    report = TeardownReport()
    state.data["phase"] = "destroying"
    state.save()
    # Fault processes (`lab fault add storm`) first, by the PIDs faults.json records; the
    # namespace sweep is only their safety net.
    report.stopped.extend(stop_fault_processes(state.directory))
    _stop_recorded_processes(state, report)
    _sweep_namespaces(state, report)
    _delete_namespaces(state, report)
    if not report.warnings:
        _remove_files(state, report)
    return report


def _stop_recorded_processes(state: LabState, report: TeardownReport) -> None:
    """The processes up started, by recorded PID, only if still running what we started."""
    ours: dict[int, str] = {}
    for node, record in state.processes().items():
        pid = int(record["pid"])
        if not procs.pid_alive(pid):
            procs.reap(pid)
            report.stopped.append({"node": node, "pid": pid, "how": "already-exited"})
        elif procs.is_our_process(pid, record):
            ours[pid] = node
        else:
            report.notes.append(f"PID {pid} ({node}) now runs something else; not signalled")
    for pid, how in procs.terminate(list(ours)).items():
        report.stopped.append({"node": ours[pid], "pid": pid, "how": how})


def _sweep_namespaces(state: LabState, report: TeardownReport) -> None:
    """Anything else still inside our namespaces (a namespace with processes in it outlives
    its name, and so would its interfaces)."""
    for name in list(state.netns()):
        try:
            pids = netns.netns_pids(name)
        except netns.CommandError as exc:
            report.warnings.append(str(exc))
            continue
        for pid, how in procs.terminate(pids).items():
            report.killed_in_netns.append({"netns": name, "pid": pid, "how": how})


def _delete_namespaces(state: LabState, report: TeardownReport) -> None:
    """The namespaces (their veth ends, and thereby the peers, go with them)."""
    for name in list(state.netns()):
        if netns.netns_exists(name):
            try:
                netns.delete_netns(name)
                report.deleted_netns.append(name)
            except netns.CommandError as exc:
                report.warnings.append(str(exc))
                continue
        del state.netns()[name]
        state.save()


def _remove_files(state: LabState, report: TeardownReport) -> None:
    """The files up created, then the record itself, then the directory if now empty."""
    for name in list(state.files()):
        with contextlib.suppress(FileNotFoundError):
            (state.directory / name).unlink()
            report.removed_files.append(name)
    for name in list(state.dirs()):
        path = state.directory / name
        if path.is_dir():
            report.removed_files.extend(
                str(p.relative_to(state.directory)) for p in path.rglob("*") if p.is_file()
            )
            shutil.rmtree(path)
    state.path.unlink(missing_ok=True)
    for leftover in state.directory.glob(f".{STATE_FILE}.*.tmp"):
        leftover.unlink(missing_ok=True)
    try:
        state.directory.rmdir()
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            report.notes.append(f"kept {state.directory}: it holds files up did not create")


# --------------------------------------------------------------------------- status


def load_state(lab_name: str, state_dir: str | os.PathLike[str] | None = None) -> LabState:
    """The lab's state, or LabError if it is not up."""
    directory = state_dir_for(lab_name, state_dir)
    state = LabState.load(directory) if directory.is_dir() else None
    if state is None:
        raise LabError(f"lab {lab_name} is not up (no {STATE_FILE} in {directory})")
    if state.name != lab_name:
        raise LabError(f"{state.path} belongs to lab {state.name}, not {lab_name}")
    return state


def status(
    lab_name: str, state_dir: str | os.PathLike[str] | None = None, *, probe: bool = True
) -> dict[str, Any]:
    """The lab as recorded plus live checks (namespace present, PID alive, vswitch answers)."""
    state = load_state(lab_name, state_dir)
    data = state.data
    nodes: dict[str, Any] = {}
    healthy = data.get("phase") == "up"
    for name, info in data["nodes"].items():
        nodes[name], node_healthy = _node_status(state, name, info, probe)
        healthy = healthy and node_healthy
    return {
        "name": data["lab"],
        "phase": data.get("phase"),
        "healthy": healthy,
        "topology_file": data["topology_file"],
        "state_dir": str(state.directory),
        "fabric_file": data["fabric_file"],
        "credentials": data["credentials"],
        "password_env": PASSWORD_ENV,
        "created_at": data.get("created_at"),
        "nodes": nodes,
    }


def _node_status(
    state: LabState, name: str, info: Mapping[str, Any], probe: bool
) -> tuple[dict[str, Any], bool]:
    """One node's status entry, and whether everything it should run runs."""
    entry: dict[str, Any] = {
        "kind": info["kind"],
        "role": info["role"],
        "netns": info["netns"],
        "netns_present": netns.netns_exists(info["netns"]),
    }
    healthy = bool(entry["netns_present"])
    if info["kind"] == "lab-switch":
        entry["nos"] = info.get("nos", DEFAULT_NOS)
        healthy = _switch_status(state, name, info, probe, entry) and healthy
    elif "gateway" in info:
        entry["gateway"] = info["gateway"]
    if "vm_dir" in info:
        healthy = _vm_status(state, name, info, entry) and healthy
    entry["interfaces"] = info["interfaces"]
    return entry, healthy


def _switch_status(
    state: LabState, name: str, info: Mapping[str, Any], probe: bool, entry: dict[str, Any]
) -> bool:
    """A switch's vswitch and management plane (into ``entry``); True if both serve."""
    record = state.processes().get(name)
    mgmt = state.processes().get(name + MGMT_SUFFIX)
    alive = procs.running(record)
    mgmt_alive = procs.running(mgmt)
    if not alive:
        vswitch = "not-running"
    else:
        vswitch = _ping(info["control_socket"]) if probe else "not-probed"
    entry.update(
        mgmt_host=info["mgmt_host"],
        mgmt_port=info["mgmt_port"],
        mgmt_state="running" if mgmt_alive else "not-running",
        mgmt_pid=int(mgmt["pid"]) if mgmt else None,
        pid=int(record["pid"]) if record else None,
        alive=alive,
        vswitch=vswitch,
        config_file=info["config_file"],
        control_socket=info["control_socket"],
        log_file=info["log_file"],
    )
    if "gnmi_port" in info:  # NX-OS switches (and labs older than gNMI) serve none
        entry.update(
            gnmi=f"{info['gnmi_host']}:{info['gnmi_port']}",
            gnmi_ca=info["gnmi_ca"],
            gnmi_server_name=info["gnmi_server_name"],
        )
    return mgmt_alive and alive and vswitch in ("ok", "not-probed")


def _vm_status(state: LabState, name: str, info: Mapping[str, Any], entry: dict[str, Any]) -> bool:
    """A VM host's qemu and NIC process (into ``entry``); True if both run."""
    vm = procs.running(state.processes().get(name + VM_SUFFIX))
    nic = procs.running(state.processes().get(name + NIC_SUFFIX))
    entry.update(
        rdma=info["rdma"],
        mgmt_host=info["mgmt_host"],
        mgmt_port=info["mgmt_port"],
        vm_state="running" if vm else "not-running",
        nic_state="running" if nic else "not-running",
        boot_s=info.get("boot_s"),
        vm_dir=info["vm_dir"],
    )
    return vm and nic


def _ping(control_socket: str, timeout: float = 2.0) -> str:
    from lab.vswitch.client import VswitchClient, VswitchError

    try:
        with VswitchClient(control_socket, timeout=timeout) as client:
            return "ok" if client.ping() else "error"
    except (VswitchError, OSError, ValueError):
        return "no-answer"


def exec_on_switch(
    node: str, lines: list[str], lab_name: str, state_dir: str | os.PathLike[str] | None = None
) -> str:
    """Run ``lines`` on ``node``'s management plane over SSH as an operator would (in the NOS
    its roce.lab/nos label names); what the switch printed."""
    from lab.fault_registry import FaultError
    from lab.faults import switch_cli

    state = load_state(lab_name, state_dir)
    _switch_info(state, node, lab_name, "exec runs on")
    try:
        return switch_cli(state, node, lines)
    except FaultError as exc:
        raise LabError(str(exc)) from None


def _switch_info(state: LabState, node: str, lab_name: str, what: str) -> Mapping[str, Any]:
    """``node``'s record, LabError unless it is a switch of the lab."""
    info = state.data["nodes"].get(node)
    if info is None:
        raise LabError(
            f"lab {lab_name} has no node {node!r} (nodes: {', '.join(state.data['nodes'])})"
        )
    if info["kind"] != "lab-switch":
        switches = [n for n, i in state.data["nodes"].items() if i["kind"] == "lab-switch"]
        raise LabError(f"{node} is a host; {what} the lab switches ({', '.join(switches)})")
    return info  # type: ignore[no-any-return]


def counters(
    node: str, lab_name: str, state_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The vswitch counters of ``node`` (its control socket's ``counters`` answer)."""
    from lab.vswitch.client import VswitchClient, VswitchError

    state = load_state(lab_name, state_dir)
    info = _switch_info(state, node, lab_name, "counters come from")
    try:
        with VswitchClient(info["control_socket"], timeout=5.0) as client:
            return client.counters()
    except PermissionError:
        raise LabError(f"no permission to open {info['control_socket']} (run as root)") from None
    except (VswitchError, OSError, ValueError) as exc:
        raise LabError(f"vswitch {node} did not answer: {exc}") from None


def running_labs(root: Path = DEFAULT_STATE_ROOT) -> list[str]:
    """Names of labs with a state file under ``root``."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / STATE_FILE).is_file())

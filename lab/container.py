"""The same lab under real containerlab: switch entrypoint, host exec lines, cEOS configs.

``python -m lab.container --topology FILE [--node NAME]`` is the command of every switch node
of ``containerlab/roce-leafspine.clab.yml`` in the ``roce-vswitch`` image: it waits until
containerlab has plugged in the node's ``ethN`` interfaces (``$CLAB_INTFS`` says how many),
gives them the planned MACs/MTU, turns offloads off, writes the vswitch config from the same
address plan as the netns runtime, and execs ``python -m lab.vswitch``.

:func:`host_exec_commands` and :func:`eos_startup_config` produce the host ``exec:`` lines and
the cEOS startup configs kept in ``containerlab/``; unit tests check those files against them
so they cannot drift from the plan.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

from lab import netns
from lab.addressing import LabPlan, build_plan, vswitch_config
from lab.runtime import COMMON_SYSCTLS, SWITCH_SYSCTLS
from lab.topology.loader import load_topology
from lab.topology.model import TopologyError

SYS_CLASS_NET = Path("/sys/class/net")
RUN_DIR = Path("/run/roce-vswitch")


def host_exec_commands(plan: LabPlan, node: str, *, static_gateway_arp: bool = True) -> list[str]:
    """containerlab ``exec:`` lines that configure a plain Linux (alpine) host like ``up`` does.

    A route to 198.18.0.0/16 replaces the netns runtime's default route, so the container
    keeps containerlab's management default route on eth0.
    """
    node_plan = plan.nodes[node]
    commands = ["apk add --no-cache -q ethtool iproute2"]
    for i in node_plan.interfaces:
        commands += [
            f"ip link set dev {i.ifname} address {i.mac} mtu {i.mtu}",
            f"ethtool -K {i.ifname} tx off tso off gso off gro off",
            f"ip addr add {i.address} dev {i.ifname}",
        ]
    gateway = node_plan.gateway
    if gateway is not None:
        commands.append(
            f"ip route replace 198.18.0.0/16 via {gateway.peer_address} dev {gateway.ifname}"
        )
        if static_gateway_arp:
            commands.append(
                f"ip neigh replace {gateway.peer_address} lladdr {gateway.peer_mac} "
                f"dev {gateway.ifname} nud permanent"
            )
    return commands


def eos_startup_config(plan: LabPlan, node: str) -> str:
    """cEOS startup config with the plan's routed /31 ports and ECMP static routes."""
    node_plan = plan.nodes[node]
    credentials = plan.topology.credentials
    lines = [
        f"! {node}: generated from the lab address plan (lab.container.eos_startup_config)",
        f"hostname {node}",
        f"username {credentials.username} privilege 15 role network-admin "
        f"secret {credentials.password}",
        "!",
        "service routing protocols model multi-agent",
        "ip routing",
        "!",
    ]
    for i in node_plan.interfaces:
        peer_port = (
            f"Ethernet{i.peer_index}" if plan.nodes[i.peer_node].node.is_switch else i.peer_ifname
        )
        lines += [
            f"interface Ethernet{i.index}",
            f"   description {i.peer_node}:{peer_port}",
            f"   mtu {i.mtu}",
            "   no switchport",
            f"   ip address {i.address}",
            "!",
        ]
    for route in node_plan.routes:
        for hop in route.nexthops:
            lines.append(f"ip route {route.prefix} {hop.ip}")
    lines += ["!", "management api http-commands", "   no shutdown", "!", "end", ""]
    return "\n".join(lines)


def _wait_for_interfaces(names: list[str], timeout: float) -> None:
    """containerlab attaches data links after the container starts: wait for all of them."""
    expected = int(os.environ.get("CLAB_INTFS", len(names)))
    deadline = time.monotonic() + timeout
    while True:
        missing = [n for n in names if not (SYS_CLASS_NET / n).exists()]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise SystemExit(
                f"lab.container: interfaces {', '.join(missing)} did not appear within "
                f"{timeout:g} s (CLAB_INTFS={expected})"
            )
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    """Configure this container's ports and exec the vswitch (does not return on success)."""
    parser = argparse.ArgumentParser(prog="python -m lab.container", description=__doc__)
    parser.add_argument("--topology", required=True, help="the lab's .clab.yml (bind-mounted)")
    parser.add_argument("--node", default=socket.gethostname(), help="default: hostname")
    parser.add_argument("--wait", type=float, default=300.0, help="seconds to wait for ethN")
    args = parser.parse_args(argv)
    try:
        plan = build_plan(load_topology(args.topology))
    except TopologyError as exc:
        for problem in exc.problems:
            print(f"lab.container: {problem}", file=sys.stderr)
        return 2
    node_plan = plan.nodes.get(args.node)
    if node_plan is None or not node_plan.node.is_switch:
        print(f"lab.container: {args.node} is not a lab switch of {args.topology}", file=sys.stderr)
        return 2
    _wait_for_interfaces([i.ifname for i in node_plan.interfaces], args.wait)
    for key, value in {**COMMON_SYSCTLS, **SWITCH_SYSCTLS}.items():
        Path("/proc/sys", *key.split(".")).write_text(f"{value}\n")
    for i in node_plan.interfaces:
        netns.run(["ip", "link", "set", "dev", i.ifname, "address", i.mac, "mtu", str(i.mtu)])
        netns.run(["ip", "link", "set", "dev", i.ifname, "up"])
        netns.run(
            ["ethtool", "-K", i.ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off"]
        )
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    config = RUN_DIR / f"{args.node}.json"
    config.write_text(json.dumps(vswitch_config(plan, args.node), indent=2) + "\n")
    control = RUN_DIR / f"{args.node}.sock"
    vswitch = [
        sys.executable,
        "-m",
        "lab.vswitch",
        "--config",
        str(config),
        "--control",
        str(control),
    ]
    os.execv(sys.executable, vswitch)  # logs go to the container's stderr (docker logs)


if __name__ == "__main__":
    sys.exit(main())

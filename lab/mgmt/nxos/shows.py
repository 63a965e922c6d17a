"""NX-OS show commands: text as NX-OS prints it and, where NX-OS converts the command to JSON
and its shape is on record, that JSON.

Each shape names where it was taken from (docs/lab-nxos.md has the list and what could not be
checked):

* ``show interface priority-flow-control`` -- the table ``Port / Mode / Oper(VL bmap) / RxPPP
  / TxPPP`` between ``=`` rules, as recorded from Nexus switches (OpenTelemetry's
  ciscoosreceiver test data, public UCS/Nexus monitoring scripts); ``| json``:
  ``TABLE_module.ROW_module.TABLE_pfc_interface.ROW_pfc_interface[]`` with ``if_name_str``,
  ``admin``, ``oper``, ``rx-stats``, ``tx-stats`` (the NX-API keys public Nexus exporters read);
  Oper is ``On (bmap)`` where PFC runs (the bitmap of the lossless priorities), ``Off``
  elsewhere;
* ``show queuing interface`` -- per port ``Egress Queuing for EthX [System]`` and a box per
  QOS GROUP with ``Tx Pkts``, ``Tx Byts``, ``Dropped Pkts`` in Unicast / OOBFC
  Unicast / Multicast columns, then ``Ingress Queuing for EthX`` with ``Port Ingress
  Statistics`` (``Ingress MMU Drop Pkts``: the port's drops beyond the headroom) and the ``PFC
  Statistics`` table per COS (TxPause/TxCount, RxPause/RxCount), as recorded (OpenTelemetry);
  the row ``ECN Marked Pkts`` is the lab's (no recording with ECN marks was found);
* ``show queuing pfc-queue [interface X] [detail]`` -- per port ``EthX Interface PFC watchdog:
  [Enabled]``, a box per lossless QOS GROUP ``[Active|Shutdown]`` with its Shutdown /
  Restored counts (OpenTelemetry's recording);
* ``show running-config [ipqos|diff]``, ``show startup-config``, ``show checkpoint ...``,
  ``show policy-map``, ``show class-map``, ``dir``, ``show file ... md5sum``: configuration text
  (:mod:`lab.mgmt.nxos.render`) and the lab's layouts of the rest.

Counters come from the data plane's control socket (one snapshot per command).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from typing import Any

from lab.mgmt import names
from lab.mgmt.cli_output import ShowOutput
from lab.mgmt.nxos import lldp
from lab.mgmt.nxos.config import NxosConfig, PolicyType
from lab.mgmt.nxos.render import NXOS_VERSION, class_lines, header_lines, render_lines
from lab.mgmt.nxos.rollback import Checkpoint
from lab.mgmt.nxos.translate import lossless_priorities
from lab.mgmt.switch import PortInfo, SwitchManager

QOS_GROUPS = range(8)
SUMMARY_RULE = "-" * 53  # genieparser's recording of show checkpoint summary
RULE = "=" * 60


def nxos_ports(manager: SwitchManager) -> list[tuple[str, PortInfo]]:
    """(NX-OS name, port) of every front-panel port, in order."""
    return [(f"Ethernet1/{names.interface_number(p.name)}", p) for p in manager.ports]


def selected(manager: SwitchManager, wanted: Sequence[str] | None) -> list[tuple[str, PortInfo]]:
    return [(n, p) for n, p in nxos_ports(manager) if wanted is None or n in wanted]


def port_counters(counters: dict[str, Any], port: PortInfo) -> dict[str, Any]:
    found: dict[str, Any] = counters.get("ports", {}).get(names.dataplane_name(port.name), {})
    return found


# ----------------------------------------------------------------------------- system


def show_version(manager: SwitchManager, system_mac: str) -> ShowOutput:
    """``show version`` (the keys napalm's nxos ``get_facts`` reads)."""
    uptime_s = int(time.time() - manager.booted_at)
    data = {
        "host_name": manager.name,
        "nxos_ver_str": NXOS_VERSION,
        "chassis_id": "Nexus9000 lab vswitch Chassis",
        "proc_board_id": f"LAB-{manager.name}",
        "kern_uptm_days": uptime_s // 86400,
        "kern_uptm_hrs": uptime_s // 3600 % 24,
        "kern_uptm_mins": uptime_s // 60 % 60,
        "kern_uptm_secs": uptime_s % 60,
    }
    text = "\n".join(
        [
            "Cisco Nexus Operating System (NX-OS) Software (roce-fabric-agent lab switch)",
            "Software",
            f"  NXOS: version {NXOS_VERSION}",
            "Hardware",
            f"  cisco {data['chassis_id']}",
            f"  Device name: {manager.name}",
            f"  System MAC: {system_mac}",
            f"Kernel uptime is {data['kern_uptm_days']} day(s), {data['kern_uptm_hrs']} hour(s), "
            f"{data['kern_uptm_mins']} minute(s), {data['kern_uptm_secs']} second(s)",
        ]
    )
    return ShowOutput(text, data)


def show_hostname(config: NxosConfig) -> ShowOutput:
    """``show hostname`` (``{"hostname": ...}``, as napalm's ``get_facts`` reads it)."""
    return ShowOutput(config.hostname, {"hostname": config.hostname})


# ----------------------------------------------------------------------------- configuration


def show_running(config: NxosConfig, changed_at: float) -> ShowOutput:
    return ShowOutput(
        "\n".join(header_lines("show running-config", changed_at) + render_lines(config))
    )


def running_diff(running: NxosConfig, startup: str | None) -> ShowOutput:
    """``show running-config diff``: what a reload would lose, as a context diff from the
    startup-config to the running-config (comment lines left out: they hold times); empty
    when they are the same."""
    old = _body((startup or "").splitlines())
    new = _body(render_lines(running))
    lines = difflib.context_diff(old, new, "Startup-config", "Running-config", lineterm="")
    return ShowOutput("\n".join(lines))


def _body(lines: list[str]) -> list[str]:
    """A configuration without its comment header (the lines that say when)."""
    kept = [line for line in lines if not line.startswith("!")]
    while kept and not kept[0]:
        kept.pop(0)
    return kept


def show_checkpoint_summary(checkpoints: dict[str, Checkpoint], kind: str | None) -> ShowOutput:
    """``show checkpoint summary [user|system]`` (the layout of Cisco's example and genie's
    recording: ``N) NAME:``, ``Created by``, ``Created at``, ``Size is``, ``Description``)."""
    if kind == "system":
        return ShowOutput("System Checkpoint Summary\n" + SUMMARY_RULE)
    out = ["User Checkpoint Summary", SUMMARY_RULE]
    for number, point in enumerate(checkpoints.values(), start=1):
        size = len("\n".join(render_lines(point.config)).encode())
        out += [
            f"{number}) {point.name}:",
            f"Created by {point.user}",
            f"Created at {_created(point.created_at)}",
            f"Size is {size:,} bytes",
            f"Description: {point.description or 'None'}",
            "",
        ]
    return ShowOutput("\n".join(out).rstrip())


def _created(seconds: float) -> str:
    """``Wed, 12:56:56 31 May 2017`` (``show checkpoint summary``'s Created at)."""
    return time.strftime("%a, %H:%M:%S %d %b %Y", time.localtime(seconds))


def show_checkpoint(point: Checkpoint) -> ShowOutput:
    """``show checkpoint NAME``: its name and its configuration."""
    head = ["-" * 80, f"Name: {point.name}"]
    return ShowOutput(
        "\n".join(
            head
            + header_lines("Checkpoint cmd vdc 1", point.created_at)
            + render_lines(point.config)
        )
    )


def show_policy_maps(config: NxosConfig, kind: PolicyType | None, name: str | None) -> ShowOutput:
    """``show policy-map [type KIND] [NAME]``."""
    out: list[str] = []
    for policy_kind in ("qos", "queuing", "network-qos"):
        if kind not in (None, policy_kind):
            continue
        found = [
            (n, p)
            for (k, n), p in sorted(config.policies.items())
            if k == policy_kind and name in (None, n)
        ]
        if not found:
            continue
        title = f"  Type {policy_kind} policy-maps"
        out += ["", title, "  " + "=" * (len(title) - 2), ""]
        for policy_name, policy in found:
            out.append(f"  policy-map type {policy_kind} {policy_name}")
            for class_name, entry in policy.classes.items():
                keyword = "class" if policy_kind == "qos" else f"class type {policy_kind}"
                out.append(f"    {keyword} {class_name}")
                out += [f"      {line}" for line in class_lines(policy_kind, entry)]
    return ShowOutput("\n".join(out))


def show_class_maps(config: NxosConfig) -> ShowOutput:
    """``show class-map type qos``."""
    out = ["", "  Type qos class-maps", "  ====================", ""]
    for name, class_map in sorted(config.class_maps.items()):
        out.append(
            f"    class-map type qos {'match-all' if class_map.match_all else 'match-any'} {name}"
        )
        if class_map.dscp:
            out.append(f"      match dscp {names.compact_ranges(class_map.dscp)}")
        if class_map.cos:
            out.append(f"      match cos {names.compact_ranges(class_map.cos)}")
    return ShowOutput("\n".join(out))


# ----------------------------------------------------------------------------- interfaces


def show_interfaces(
    manager: SwitchManager, config: NxosConfig, counters: dict[str, Any]
) -> ShowOutput:
    """``show interface``: state, MTU and speed per port."""
    rows = []
    text: list[str] = []
    for name, port in nxos_ports(manager):
        data = port_counters(counters, port)
        up = data.get("oper_up", True) is not False
        mtu = port.link.mtu if port.link is not None and port.link.mtu else 1500
        speed = port.speed_bps or 0
        rows.append(
            {
                "interface": name,
                "state": "up" if up else "down",
                "admin_state": "up",
                "desc": config.interfaces[name].description or "",
                "eth_hw_desc": "100/1000/10000/25000/40000/50000/100000 Ethernet",
                "eth_mtu": str(mtu),
                "eth_bw": speed // 1000,
                "eth_speed": _speed_text(speed) if up else "auto-speed",
                # What the data plane counts of a port's errors: frames with a bad FCS, and
                # every damaged frame; it sends none badly (no transmit errors to count).
                "eth_crc": str(data.get("rx_fcs_errors", 0)),
                "eth_inerr": str(data.get("rx_errors", 0)),
                "eth_outerr": "0",
            }
        )
        text += [
            f"{name} is {'up' if up else 'down'}",
            "admin state is up, Dedicated Interface",
            f"  MTU {mtu} bytes, BW {speed // 1000} Kbit",
            f"  {'full-duplex, ' + _speed_text(speed) if up else 'auto-duplex, auto-speed'}",
        ]
    return ShowOutput("\n".join(text), lldp.table("interface", rows))


def _speed_text(bps: int) -> str:
    """``10 Mb/s``, ``100 Gb/s`` (NX-OS' ``eth_speed``)."""
    if bps and bps % 1_000_000_000 == 0:
        return f"{bps // 1_000_000_000} Gb/s"
    return f"{bps // 1_000_000} Mb/s"


def show_lldp(manager: SwitchManager, detail: bool) -> ShowOutput:
    """``show lldp neighbors [detail]`` from the ports' lab links."""
    ports = [(name, port.link) for name, port in nxos_ports(manager)]
    if detail:
        data = lldp.neighbors_detail(ports)
        return ShowOutput(lldp.detail_text(data), data)
    data = lldp.neighbors(ports)
    return ShowOutput(lldp.neighbors_text(data), data)


# ----------------------------------------------------------------------------- PFC / queuing


def _pfc_oper(config: NxosConfig, name: str) -> tuple[str, str]:
    """(Mode, Oper) of a port: ``On``/``Off``/``Auto`` and ``On (bmap)`` / ``Off``."""
    mode = config.interfaces[name].pfc_mode or "auto"
    lossless = lossless_priorities(config)
    if mode == "on" and lossless:
        return "On", f"On   ({sum(1 << p for p in lossless):x})"
    return mode.capitalize(), "Off"


def show_pfc(manager: SwitchManager, config: NxosConfig, counters: dict[str, Any]) -> ShowOutput:
    """``show interface priority-flow-control``: per port the mode and the pause frames
    received and sent (XOFF + XON, every priority)."""
    text = [RULE, f"{'Port':<19}{'Mode':<5}{'Oper(VL bmap)':<15}{'RxPPP':<11}TxPPP", RULE, ""]
    rows = []
    for name, port in nxos_ports(manager):
        pfc = port_counters(counters, port).get("pfc", {})
        rx = sum(pfc.get("rx_xoff", [])) + sum(pfc.get("rx_xon", []))
        tx = sum(pfc.get("tx_xoff", [])) + sum(pfc.get("tx_xon", []))
        mode, oper = _pfc_oper(config, name)
        text.append(f"{name:<19}{mode:<5}{oper:<15}{rx:<11}{tx}")
        rows.append(
            {"if_name_str": name, "admin": mode.lower(), "oper": oper.split()[0].lower(),
             "rx-stats": rx, "tx-stats": tx}
        )  # fmt: skip
    data = {"TABLE_module": {"ROW_module": {"module": 1, **lldp.table("pfc_interface", rows)}}}
    return ShowOutput("\n".join(text), data)


_BOX = "+" + "-" * 67 + "+"
_COLUMNS = "|                |  Unicast       | OOBFC Unicast  |  Multicast     |"


def _stat_row(label: str, unicast: int) -> str:
    return f"|{label:>15} |{unicast:>16}|{0:>16}|{0:>16}|"


def _group_box(group: int, queue: dict[str, Any]) -> list[str]:
    dropped = queue.get("tail_drops", 0) + queue.get("watchdog", {}).get("dropped_packets", 0)
    return [
        _BOX,
        f"|{' ' * 30}QOS GROUP {group}{' ' * 26}|",
        _BOX,
        _COLUMNS,
        _BOX,
        _stat_row("Tx Pkts", queue.get("tx_packets", 0)),
        _stat_row("Tx Byts", queue.get("tx_bytes", 0)),
        _stat_row("Dropped Pkts", dropped),
        _stat_row("ECN Marked Pkts", queue.get("ecn_marked", 0)),
    ]


def _ingress_statistics(ingress: dict[str, Any]) -> list[str]:
    """The port's ingress drops (NX-OS counts them per port): the data plane's drops beyond
    the headroom, summed over the priorities. The data plane counts no bytes for them, so the
    ``Ingress MMU Drop Bytes`` row is left out."""
    dropped = sum(ingress.get("headroom_drops", []))
    return ["Port Ingress Statistics", "-" * 56, f"{'Ingress MMU Drop Pkts':<44}{dropped}"]


def _pfc_statistics(pfc: dict[str, Any], lossless: list[int]) -> list[str]:
    rx_total = sum(pfc.get("rx_xoff", [])) + sum(pfc.get("rx_xon", []))
    tx_total = sum(pfc.get("tx_xoff", [])) + sum(pfc.get("tx_xon", []))
    out = [
        "PFC Statistics",
        "-" * 76,
        f"TxPPP:{tx_total:>22}, RxPPP:{rx_total:>22}",
        "-" * 76,
        "COS QOS Group        PG   TxPause   TxCount         RxPause         RxCount",
    ]
    for cos in QOS_GROUPS:
        tx = _at(pfc, "tx_xoff", cos) + _at(pfc, "tx_xon", cos)
        rx = _at(pfc, "rx_xoff", cos) + _at(pfc, "rx_xon", cos)
        group = str(cos) if cos in lossless else "-"
        state = "Active" if cos in lossless else "Inactive"
        out.append(f"{cos:>4}{group:>10}{group:>10}  {state:<9}{tx:>9}        {state:<9}{rx:>15}")
    return [*out, "-" * 76]


def _at(pfc: dict[str, Any], key: str, cos: int) -> int:
    values = pfc.get(key, [])
    return int(values[cos]) if cos < len(values) else 0


def show_queuing(
    manager: SwitchManager,
    config: NxosConfig,
    counters: dict[str, Any],
    wanted: Sequence[str] | None,
) -> ShowOutput:
    """``show queuing interface [EthX]``: egress counters per QOS GROUP, PFC per COS."""
    lossless = lossless_priorities(config)
    out: list[str] = []
    for name, port in selected(manager, wanted):
        data = port_counters(counters, port)
        queues = data.get("queues", {})
        out.append(f"Egress Queuing for {name} [System]")
        for group in QOS_GROUPS:
            out += _group_box(group, queues.get(str(group), {}))
        out.append(_BOX)
        out.append(f"Ingress Queuing for {name}")
        out += _ingress_statistics(data.get("ingress", {}))
        out += _pfc_statistics(data.get("pfc", {}), lossless)
    return ShowOutput("\n".join(out))


_WD_BOX = "+" + "-" * 52 + "+"


def _watchdog_on(config: NxosConfig, name: str) -> bool:
    own = config.interfaces[name].watchdog
    return own if own is not None else bool(config.watchdog.enabled)


def show_pfc_queue(
    manager: SwitchManager,
    config: NxosConfig,
    counters: dict[str, Any],
    wanted: Sequence[str] | None,
) -> ShowOutput:
    """``show queuing pfc-queue [interface X] [detail]``: the watchdog per port and lossless
    QOS GROUP (``[Shutdown]`` while the queue is stormed)."""
    lossless = lossless_priorities(config)
    out: list[str] = []
    for name, port in selected(manager, wanted):
        enabled = _watchdog_on(config, name)
        out += [
            f"{name} Interface PFC watchdog: [{'Enabled' if enabled else 'Disabled'}]",
            "Disable-action                     : No",
            "PFC watch-dog interface-multiplier : 0",
        ]
        queues = port_counters(counters, port).get("queues", {})
        for group in lossless:
            wd = queues.get(str(group), {}).get("watchdog", {})
            state = "Shutdown" if wd.get("state") == "stormed" else "Active"
            out += [
                _WD_BOX,
                f"| QOS GROUP {group} [{state}] PFC [YES] PFC-COS [{group}]",
                _WD_BOX,
                "|                               |  Stats             |",
                _WD_BOX,
                f"|{'Shutdown':>31}|{wd.get('storms_detected', 0):>20}|",
                f"|{'Restored':>31}|{wd.get('storms_restored', 0):>20}|",
                f"|{'Total pkts dropped':>31}|{wd.get('dropped_packets', 0):>20}|",
                _WD_BOX,
            ]
    return ShowOutput("\n".join(out))


# ----------------------------------------------------------------------------- bootflash


def show_dir(listing: list[tuple[str, int, float]], used: int, free: int) -> ShowOutput:
    """``dir bootflash:``."""
    out = [
        f"{size:>12}    {time.strftime('%b %d %H:%M:%S %Y', time.localtime(mtime))}  {name}"
        for name, size, mtime in listing
    ]
    out += [
        "",
        "Usage for bootflash://sup-local",
        f"{used:>12} bytes used",
        f"{free:>12} bytes free",
        f"{used + free:>12} bytes total",
    ]
    return ShowOutput("\n".join(out))

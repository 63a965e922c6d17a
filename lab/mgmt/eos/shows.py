"""EOS show commands: a human-readable text and, for ``| json``, a dict shaped like EOS' JSON.

Every JSON shape names where it was taken from. Where a public fixture of real EOS output
exists it is followed key for key; where none was found the shape is this lab's own and says
so (the agent's parsers should prefer the fixture-backed commands):

* ``show version``                       napalm ``napalm/eos/eos.py`` ``get_facts`` keys
  (``modelName``, ``serialNumber``, ``internalVersion``, ``bootupTimestamp``) + ``version``,
  ``uptime``, ``mfgName``, ``systemMacAddress`` (eAPI ``show version`` model);
* ``show hostname``                      napalm ``get_facts`` (``hostname``, ``fqdn``);
* ``show interfaces status``             ANTA ``tests/units/anta_tests/test_interfaces.py``
  ``create_status_data`` (``interfaceStatuses.<if>.duplex/bandwidth``) + ``linkStatus``,
  ``lineProtocolStatus``, ``description``, ``vlanInformation``; a port the data plane sees
  without carrier is ``linkStatus: notconnect`` / ``lineProtocolStatus: down`` (what EOS'
  eAPI answers for a port whose cable is in but has no link; ``notPresent`` would mean no
  transceiver);
* ``show interfaces counters errors``    ANTA ``VerifyInterfaceErrors`` test data
  (``interfaceErrorCounters.<if>.{inErrors, frameTooLongs, outErrors, frameTooShorts,
  fcsErrors, alignmentErrors, symbolErrors}``), fed by the data plane's ``rx_errors`` /
  ``rx_fcs_errors`` (the rest are 0: the lab has no runts, giants or PHY symbol errors); text
  columns as EOS prints them (Port, FCS, Align, Symbol, Rx, Runts, Giants, Tx);
* ``show priority-flow-control counters``    ANTA ``VerifyInterfacesPFCCounters`` test data
  (``interfaceCounters.<if>.rxFrames/txFrames``);
* ``show priority-flow-control counters watchdog``  public EOS health-check code that reads
  ``interfaces.<if>.txQueues.<q>.stuckCount/recoveryCount`` and notes EOS omits an interface
  until its first watchdog event (code search, file id 56154065654);
* ``show qos interfaces ecn counters queue``  ANTA ``VerifyInterfacesECNCounters`` data
  (``intfQueueCounters.<if>.queueCounters.<q>`` = string count, ``"-"`` if ECN is off);
* ``show interfaces counters queue``     ANTA ``VerifyInterfacesEgressQueueDrops`` data
  (``egressQueueCounters.interfaces.<if>.ucastQueues.trafficClasses.TC<n>.dropPrecedences.DP0
  .droppedPackets``) + ``enqueuedPackets/enqueuedBytes`` (EOS ``counters queue rates`` uses
  the same tree with ``enqueuedBitsRate``);
* ``show interfaces counters queue drops``   ANTA ``VerifyInterfacesVoqAndEgressQueueDrops``
  (``interfaces.<if>.trafficClasses.TC<n>.egressQueueCounters.countersSum.droppedPackets`` and
  ``ingressVoqCounters.countersSum.droppedPackets``; here ingress = PFC headroom drops);
* ``show interfaces``, ``show lldp neighbors [detail]``: see :mod:`lab.mgmt.eos.lldp` (napalm
  ``get_interfaces`` / ``get_lldp_neighbors*`` recordings, ANTA ``VerifyLLDPNeighbors``);
* ``show priority-flow-control``, ``show qos maps``, ``show qos interfaces``,
  ``show configuration sessions``: lab shapes (no public EOS fixture found); the session
  ``state`` values (``pending``, ``pendingCommitTimer``, ``completed``) are EOS'.
"""

from __future__ import annotations

import difflib
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lab.mgmt import names
from lab.mgmt.cli_output import ShowOutput
from lab.mgmt.dataplane_qos import effective_qos
from lab.mgmt.eos import lldp
from lab.mgmt.eos.render import EOS_VERSION, MODEL_NAME, config_tree, render_text
from lab.mgmt.eos.sessions import (
    MAX_COMPLETED_SESSIONS,
    MAX_PENDING_SESSIONS,
    ConfigSessions,
    format_duration,
)
from lab.mgmt.model import NUM_TRAFFIC_CLASSES, SwitchConfig
from lab.mgmt.switch import SwitchManager


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, a dashed rule under the headers."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def _speed_label(bps: int | None) -> str:
    if not bps:
        return "auto"
    for unit, scale in (("G", 1_000_000_000), ("M", 1_000_000), ("K", 1_000)):
        if bps >= scale and bps % scale == 0:
            return f"{bps // scale}{unit}"
    return str(bps)


def _uptime_text(seconds: float) -> str:
    minutes = int(seconds // 60)
    weeks, rest = divmod(minutes, 7 * 24 * 60)
    days, rest = divmod(rest, 24 * 60)
    hours, minutes = divmod(rest, 60)
    return f"{weeks} weeks, {days} days, {hours} hours and {minutes} minutes"


def _selected(manager: SwitchManager, interfaces: Sequence[str] | None) -> list[str]:
    every = [p.name for p in manager.ports]
    return [n for n in every if interfaces is None or n in interfaces]


def _port_counters(counters: dict[str, Any], interface: str) -> dict[str, Any]:
    ports: dict[str, Any] = counters.get("ports", {})
    found: dict[str, Any] = ports.get(names.dataplane_name(interface), {})
    return found


# ----------------------------------------------------------------------------- system


def show_version(manager: SwitchManager, system_mac: str) -> ShowOutput:
    """``show version``."""
    uptime = time.time() - manager.booted_at
    data = {
        "mfgName": "roce-fabric-agent lab",
        "modelName": MODEL_NAME,
        "hardwareRevision": "",
        "serialNumber": f"LAB-{manager.name}",
        "systemMacAddress": system_mac,
        "hwMacAddress": system_mac,
        "configMacAddress": "00:00:00:00:00:00",
        "version": EOS_VERSION,
        "architecture": platform.machine() or "x86_64",
        "internalVersion": EOS_VERSION,
        "internalBuildId": "lab-vswitch",
        "imageFormatVersion": "1.0",
        "imageOptimization": "None",
        "bootupTimestamp": manager.booted_at,
        "uptime": round(uptime, 2),
        "memTotal": 0,
        "memFree": 0,
        "isIntlVersion": False,
    }
    text = "\n".join(
        [
            f"roce-fabric-agent lab switch {MODEL_NAME}",
            "Hardware version: ",
            f"Serial number: {data['serialNumber']}",
            f"Hardware MAC address: {system_mac}",
            f"System MAC address: {system_mac}",
            "",
            f"Software image version: {EOS_VERSION}",
            f"Architecture: {data['architecture']}",
            f"Internal build version: {EOS_VERSION}",
            "Internal build ID: lab-vswitch",
            "",
            f"Uptime: {_uptime_text(uptime)}",
        ]
    )
    return ShowOutput(text, data)


def show_hostname(config: SwitchConfig) -> ShowOutput:
    """``show hostname``."""
    text = f"Hostname: {config.hostname}\nFQDN:     {config.hostname}"
    return ShowOutput(text, {"hostname": config.hostname, "fqdn": config.hostname})


def show_running_config(config: SwitchConfig) -> ShowOutput:
    """``show running-config`` (JSON: EOS' nested ``cmds`` tree)."""
    return ShowOutput(render_text(config).rstrip("\n"), config_tree(config))


def running_config_diffs(running: str, startup: str | None) -> ShowOutput:
    """``show running-config diffs``: what a reload would lose, as EOS prints it (a unified
    diff from the startup-config to the running-config; empty when they are the same)."""
    old = (startup or "").splitlines()
    new = running.splitlines()
    lines = difflib.unified_diff(
        old, new, "flash:/startup-config", "system:/running-config", lineterm=""
    )
    return ShowOutput("\n".join(lines))


def show_interfaces_status(
    manager: SwitchManager, config: SwitchConfig, counters: dict[str, Any]
) -> ShowOutput:
    """``show interfaces status`` (link state as the data plane sees it: carrier)."""
    statuses: dict[str, Any] = {}
    rows = []
    for port in manager.ports:
        description = config.interfaces[port.name].description or ""
        up = _port_counters(counters, port.name).get("oper_up", True) is not False
        status = "connected" if up else "notconnect"
        statuses[port.name] = {
            "description": description,
            "linkStatus": status,
            "lineProtocolStatus": "up" if up else "down",
            "vlanInformation": {"interfaceMode": "routed", "interfaceForwardingModel": "routed"},
            "bandwidth": port.speed_bps or 0,
            "interfaceType": "lab-veth",
            "duplex": "duplexFull",
            "autoNegotiateActive": False,
        }
        rows.append(
            [
                names.short_name(port.name),
                description,
                status,
                "routed",
                "full",
                _speed_label(port.speed_bps),
                "lab-veth",
            ]
        )
    text = table(["Port", "Name", "Status", "Vlan", "Duplex", "Speed", "Type"], rows)
    return ShowOutput(text, {"interfaceStatuses": statuses})


def show_interfaces(
    manager: SwitchManager, config: SwitchConfig, counters: dict[str, Any]
) -> ShowOutput:
    """``show interfaces``: speed (``bandwidth``, bit/s) and ``mtu`` per port."""
    data: dict[str, Any] = {}
    text = []
    for port in manager.ports:
        up = _port_counters(counters, port.name).get("oper_up", True) is not False
        mtu = port.link.mtu if port.link is not None and port.link.mtu else 1500
        data[port.name] = {
            "name": port.name,
            "description": config.interfaces[port.name].description or "",
            "interfaceStatus": "connected" if up else "notconnect",
            "lineProtocolStatus": "up" if up else "down",
            "hardware": "ethernet",
            "forwardingModel": "routed",
            "bandwidth": port.speed_bps or 0,
            "mtu": mtu,
        }
        state = "up" if up else "down"
        text += [
            f"{port.name} is {state}, line protocol is {state}",
            "  Hardware is Ethernet",
            f"  IP MTU {mtu} bytes, BW {(port.speed_bps or 0) // 1000} kbit",
        ]
    return ShowOutput("\n".join(text), {"interfaces": data})


def show_lldp(manager: SwitchManager, detail: bool) -> ShowOutput:
    """``show lldp neighbors [detail]`` from the ports' lab links."""
    ports = [(p.name, p.link) for p in manager.ports]
    if detail:
        data = lldp.lldp_neighbors_detail(ports)
        return ShowOutput(lldp.detail_text(data), data)
    data = lldp.lldp_neighbors(ports)
    return ShowOutput(lldp.neighbors_text(data), data)


def show_interfaces_counters_errors(
    manager: SwitchManager, counters: dict[str, Any], interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show interfaces counters errors``."""
    data: dict[str, Any] = {}
    rows = []
    for name in _selected(manager, interfaces):
        port = _port_counters(counters, name)
        fcs = int(port.get("rx_fcs_errors", 0))
        rx = int(port.get("rx_errors", 0))
        data[name] = {
            "inErrors": rx,
            "frameTooLongs": 0,
            "outErrors": 0,
            "frameTooShorts": 0,
            "fcsErrors": fcs,
            "alignmentErrors": 0,
            "symbolErrors": 0,
        }
        rows.append([names.short_name(name), fcs, 0, 0, rx, 0, 0, 0])
    text = table(["Port", "FCS", "Align", "Symbol", "Rx", "Runts", "Giants", "Tx"], rows)
    return ShowOutput(text, {"interfaceErrorCounters": data})


# ----------------------------------------------------------------------------- PFC


def _applied_port(manager: SwitchManager, interface: str) -> dict[str, Any]:
    qos = manager.applied_qos() or {}
    port: dict[str, Any] = qos.get("ports", {}).get(names.dataplane_name(interface), {})
    return port


def _port_watchdog(manager: SwitchManager, interface: str) -> dict[str, Any]:
    qos = manager.applied_qos() or {}
    port = _applied_port(manager, interface)
    watchdog: dict[str, Any] = port.get("watchdog") or qos.get("watchdog") or {}
    return watchdog


# The data plane's watchdog action in EOS' words, where they differ.
_EOS_WATCHDOG_ACTION = {"forward": "no-drop"}


def _eos_action(watchdog: dict[str, Any]) -> str:
    action: str = watchdog.get("action", "-")
    return _EOS_WATCHDOG_ACTION.get(action, action)


def _seconds(milliseconds: int) -> str:
    return f"{milliseconds / 1000:g}"


def _pfc_header(config: SwitchConfig, watchdog: dict[str, Any]) -> list[str]:
    """The lines above the port table: supported priorities, the switch-wide watchdog."""
    lines = [
        "The hardware supports PFC on priorities " + " ".join(map(str, range(NUM_TRAFFIC_CLASSES))),
    ]
    if watchdog.get("enabled"):
        lines += [
            f"The PFC watchdog timeout is {_seconds(watchdog['detection_ms'])} second(s)",
            f"The PFC watchdog recovery-time is {_seconds(watchdog['restoration_ms'])} second(s)",
            f"The PFC watchdog polling-interval is {_seconds(watchdog['polling_ms'])} second(s)",
            f"The PFC watchdog action is {_eos_action(watchdog)}",
        ]
    lines += [f"Global PFC : {'Enabled' if not config.pfc_all_off else 'Disabled'}", ""]
    lines.append("E: PFC Enabled, D: PFC Disabled, A: PFC Active, W: PFC Watchdog Enabled")
    return lines


@dataclass(frozen=True)
class _PortPfc:
    """What ``show priority-flow-control`` says about one port."""

    enabled: bool
    priorities: list[int]
    watchdog: dict[str, Any] | None  # None: the watchdog is off on the port

    @property
    def active(self) -> bool:
        return self.enabled and bool(self.priorities)

    def flags(self) -> str:
        return " ".join(
            ["E" if self.enabled else "D"]
            + (["A"] if self.active else [])
            + (["W"] if self.watchdog is not None else [])
        )

    def row(self, name: str) -> list[object]:
        wd = self.watchdog
        timers = (
            [
                _seconds(wd["detection_ms"]),
                _seconds(wd["restoration_ms"]),
                _seconds(wd["polling_ms"]),
            ]
            if wd is not None
            else ["-", "-", "-"]
        )
        action = _eos_action(wd) if wd is not None else "-"
        priorities = ",".join(map(str, self.priorities)) or "-"
        return [names.short_name(name), self.flags(), priorities, action, *timers]

    def status(self) -> dict[str, Any]:
        wd = self.watchdog or {}
        return {
            "enabled": self.enabled,
            "active": self.active,
            "priorities": self.priorities,
            "watchdogEnabled": self.watchdog is not None,
            "watchdogAction": _eos_action(wd) if wd else None,
            "watchdogTimeout": wd["detection_ms"] / 1000 if wd else None,
            "watchdogRecoveryTime": wd["restoration_ms"] / 1000 if wd else None,
            "watchdogPollingInterval": wd["polling_ms"] / 1000 if wd else None,
        }


def _port_pfc(manager: SwitchManager, name: str) -> _PortPfc:
    applied = _applied_port(manager, name)
    enabled = bool(applied.get("pfc_enabled"))
    watchdog = _port_watchdog(manager, name)
    watchdog_on = bool(watchdog.get("enabled")) and enabled
    return _PortPfc(
        enabled, list(applied.get("pfc_priorities", [])), watchdog if watchdog_on else None
    )


def show_pfc(manager: SwitchManager, config: SwitchConfig) -> ShowOutput:
    """``show priority-flow-control`` (lab JSON shape)."""
    qos = manager.applied_qos() or {}
    lines = _pfc_header(config, qos.get("watchdog", {}))
    ports = {port.name: _port_pfc(manager, port.name) for port in manager.ports}
    headers = ["Port", "Status", "Priorities", "Action", "Timeout", "Recovery", "Polling"]
    lines.append(table(headers, [pfc.row(name) for name, pfc in ports.items()]))
    data = {
        "globalPfcEnabled": not config.pfc_all_off,
        "supportedPriorities": list(range(NUM_TRAFFIC_CLASSES)),
        "interfaceStatuses": {name: pfc.status() for name, pfc in ports.items()},
    }
    return ShowOutput("\n".join(lines), data)


def show_pfc_counters(
    manager: SwitchManager, counters: dict[str, Any], interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show priority-flow-control counters``.

    Frames = XOFF + XON summed over the priorities (the data plane sends one frame per
    priority, so tx is exact; a received frame pausing several priorities counts once each).
    """
    data: dict[str, Any] = {}
    rows = []
    for name in _selected(manager, interfaces):
        pfc = _port_counters(counters, name).get("pfc", {})
        rx = sum(pfc.get("rx_xoff", [])) + sum(pfc.get("rx_xon", []))
        tx = sum(pfc.get("tx_xoff", [])) + sum(pfc.get("tx_xon", []))
        data[name] = {"rxFrames": rx, "txFrames": tx}
        rows.append([names.short_name(name), rx, tx])
    return ShowOutput(table(["Port", "RxPfc", "TxPfc"], rows), {"interfaceCounters": data})


def show_pfc_watchdog_counters(
    manager: SwitchManager, counters: dict[str, Any], interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show priority-flow-control counters watchdog``: only queues that saw a storm."""
    data: dict[str, Any] = {}
    rows = []
    for name in _selected(manager, interfaces):
        queues = _port_counters(counters, name).get("queues", {})
        entries: dict[str, Any] = {}
        for queue_id in sorted(queues, key=int):
            wd = queues[queue_id].get("watchdog", {})
            if not wd.get("storms_detected"):
                continue
            entries[queue_id] = {
                "stuckCount": wd["storms_detected"],
                "recoveryCount": wd.get("storms_restored", 0),
                "droppedPackets": wd.get("dropped_packets", 0),
                "state": wd.get("state", "operational"),
            }
            rows.append(
                [
                    names.short_name(name),
                    queue_id,
                    wd["storms_detected"],
                    wd.get("storms_restored", 0),
                    wd.get("dropped_packets", 0),
                    wd.get("state", "operational"),
                ]
            )
        if entries:
            data[name] = {"txQueues": entries}
    text = table(["Port", "TxQ", "Stuck", "Recovered", "Dropped", "State"], rows)
    return ShowOutput(text, {"interfaces": data})


# ----------------------------------------------------------------------------- queues / ECN


def show_ecn_counters(
    manager: SwitchManager, counters: dict[str, Any], interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show qos interfaces ecn counters queue``."""
    data: dict[str, Any] = {}
    rows = []
    for name in _selected(manager, interfaces):
        applied_queues = _applied_port(manager, name).get("queues", {})
        queues = _port_counters(counters, name).get("queues", {})
        per_queue: dict[str, str] = {}
        for queue_id in map(str, range(NUM_TRAFFIC_CLASSES)):
            configured = bool(applied_queues.get(queue_id, {}).get("ecn"))
            marked = queues.get(queue_id, {}).get("ecn_marked", 0)
            per_queue[queue_id] = str(marked) if configured else "-"
            rows.append([names.short_name(name), queue_id, per_queue[queue_id]])
        data[name] = {"queueCounters": per_queue}
    text = table(["Port", "TxQ", "ECN-marked packets"], rows)
    return ShowOutput(text, {"intfQueueCounters": data})


def _egress_drops(queue: dict[str, Any]) -> int:
    """A queue's drops at egress: tail drops and what its PFC watchdog dropped."""
    dropped: int = queue.get("tail_drops", 0) + queue.get("watchdog", {}).get("dropped_packets", 0)
    return dropped


def show_queue_counters(
    manager: SwitchManager, counters: dict[str, Any], interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show interfaces counters queue``."""
    data: dict[str, Any] = {}
    rows = []
    for name in _selected(manager, interfaces):
        queues = _port_counters(counters, name).get("queues", {})
        classes: dict[str, Any] = {}
        for tc in range(NUM_TRAFFIC_CLASSES):
            q = queues.get(str(tc), {})
            dropped = _egress_drops(q)
            classes[f"TC{tc}"] = {
                "dropPrecedences": {
                    "DP0": {
                        "enqueuedPackets": q.get("tx_packets", 0),
                        "enqueuedBytes": q.get("tx_bytes", 0),
                        "droppedPackets": dropped,
                    }
                }
            }
            rows.append(
                [
                    names.short_name(name),
                    f"UC{tc}",
                    q.get("tx_packets", 0),
                    q.get("tx_bytes", 0),
                    dropped,
                ]
            )
        data[name] = {
            "ucastQueues": {"trafficClasses": classes},
            "mcastQueues": {"trafficClasses": {}},
        }
    text = table(["Port", "TxQ", "Counter/pkts", "Counter/bytes", "Drop/pkts"], rows)
    return ShowOutput(text, {"egressQueueCounters": {"interfaces": data}})


def show_queue_drops(
    manager: SwitchManager, counters: dict[str, Any], interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show interfaces counters queue drops``."""
    data: dict[str, Any] = {}
    rows = []
    for name in _selected(manager, interfaces):
        port = _port_counters(counters, name)
        queues = port.get("queues", {})
        headroom = port.get("ingress", {}).get("headroom_drops", [0] * NUM_TRAFFIC_CLASSES)
        classes: dict[str, Any] = {}
        for tc in range(NUM_TRAFFIC_CLASSES):
            q = queues.get(str(tc), {})
            egress = _egress_drops(q)
            ingress = headroom[tc] if tc < len(headroom) else 0
            classes[f"TC{tc}"] = {
                "egressQueueCounters": {"countersSum": {"droppedPackets": egress}},
                "ingressVoqCounters": {"countersSum": {"droppedPackets": ingress}},
            }
            rows.append([names.short_name(name), f"TC{tc}", egress, ingress])
        data[name] = {"trafficClasses": classes}
    text = table(["Port", "TC", "Egress drops", "Ingress drops"], rows)
    return ShowOutput(text, {"interfaces": data})


# ----------------------------------------------------------------------------- QoS config views


def show_qos_maps(config: SwitchConfig) -> ShowOutput:
    """``show qos maps`` (lab JSON shape)."""
    dscp_tc = {d: config.dscp_to_tc.get(d, d >> 3) for d in range(64)}
    tc_dscp = {tc: config.tc_to_dscp.get(tc, tc * 8) for tc in range(NUM_TRAFFIC_CLASSES)}
    lines = [
        f"Number of Traffic Classes supported: {NUM_TRAFFIC_CLASSES}",
        f"Number of transmit queues supported: {NUM_TRAFFIC_CLASSES}",
        "",
        "Dscp-tc map:",
        "  d1 :  d2 " + " ".join(f"{d:2d}" for d in range(10)),
        "  " + "-" * 40,
    ]
    for tens in range(7):
        row = [dscp_tc[tens * 10 + d] for d in range(10) if tens * 10 + d < 64]
        lines.append(f"  {tens:2d} :     " + " ".join(f"{tc:2d}" for tc in row))
    lines += [
        "",
        "Tc-dscp map:",
        "  tc:   " + " ".join(f"{tc:3d}" for tc in range(NUM_TRAFFIC_CLASSES)),
        "  " + "-" * 34,
        "  dscp: " + " ".join(f"{tc_dscp[tc]:3d}" for tc in range(NUM_TRAFFIC_CLASSES)),
    ]
    data = {
        "numTcSupported": NUM_TRAFFIC_CLASSES,
        "numTxQueueSupported": NUM_TRAFFIC_CLASSES,
        "dscpTcMap": {str(d): tc for d, tc in dscp_tc.items()},
        "tcDscpMap": {str(tc): d for tc, d in tc_dscp.items()},
    }
    return ShowOutput("\n".join(lines), data)


_TRUST_LABEL = {"dscp": "DSCP", "cos": "COS", "none": "UNTRUSTED"}


def show_qos_interfaces(
    manager: SwitchManager, config: SwitchConfig, interfaces: Sequence[str] | None = None
) -> ShowOutput:
    """``show qos interfaces`` (lab JSON shape): effective trust, PFC, per-queue scheduling/ECN."""
    qos = manager.applied_qos() or {}
    data: dict[str, Any] = {}
    blocks = []
    for name in _selected(manager, interfaces):
        settings = effective_qos(config, name)
        applied = _applied_port(manager, name)
        trust = _TRUST_LABEL[applied.get("trust") or qos.get("trust", "dscp")]
        queues_applied = applied.get("queues", {})
        tx_queues: dict[str, Any] = {}
        rows = []
        for tc in range(NUM_TRAFFIC_CLASSES - 1, -1, -1):
            entry = queues_applied.get(str(tc), {})
            ecn = entry.get("ecn")
            tx_queues[str(tc)] = {
                "bandwidthPercent": entry.get("bandwidth_percent"),
                "priority": "strict" if entry.get("strict") else "roundRobin",
                "ecn": None
                if ecn is None
                else {
                    "minThresholdBytes": ecn["min_bytes"],
                    "maxThresholdBytes": ecn["max_bytes"],
                    "maxMarkProbability": ecn["max_probability"],
                },
            }
            rows.append(
                [
                    tc,
                    entry.get("bandwidth_percent", "-"),
                    "SP" if entry.get("strict") else "RR",
                    f"{ecn['min_bytes']}-{ecn['max_bytes']} B @{ecn['max_probability']}%"
                    if ecn
                    else "-",
                ]
            )
        no_drop = list(applied.get("pfc_priorities", []))
        data[name] = {
            "trustMode": trust,
            "serviceProfile": config.interfaces[name].service_profile,
            "pfcEnabled": bool(applied.get("pfc_enabled")),
            "pfcNoDropPriorities": no_drop,
            "pfcWatchdog": settings.pfc_watchdog,
            "txQueues": tx_queues,
        }
        profile = config.interfaces[name].service_profile or "none"
        pfc = f"enabled, no-drop priorities {no_drop}" if applied.get("pfc_enabled") else "disabled"
        blocks.append(
            "\n".join(
                [
                    f"{name}:",
                    f"   Trust Mode: {trust}",
                    f"   Service profile: {profile}",
                    f"   PFC: {pfc}",
                    "",
                    table(["TxQ", "Bandwidth%", "Priority", "ECN thresholds"], rows),
                ]
            )
        )
    return ShowOutput("\n\n".join(blocks), {"intfQosDetailed": data})


def show_configuration_sessions(
    config_sessions: ConfigSessions, current: str | None, detail: bool
) -> ShowOutput:
    """``show configuration sessions [detail]``."""
    now = config_sessions.manager.clock.now()
    rows = []
    sessions: dict[str, Any] = {}
    for session in config_sessions.values():
        remaining = (
            session.commit_deadline - now
            if session.state == "pendingCommitTimer" and session.commit_deadline is not None
            else None
        )
        marker = "*" if session.name == current else " "
        row: list[object] = [
            f"{marker} {session.name}",
            session.state,
            session.user,
            session.owner or "",
        ]
        if detail:
            row.append(format_duration(remaining) if remaining is not None else "")
        rows.append(row)
        sessions[session.name] = {
            "state": session.state,
            "user": session.user,
            "terminal": session.owner or "",
            "commitTimerRemaining": None if remaining is None else round(max(0.0, remaining), 3),
            "completedTime": session.completed_at or 0,
            "createdTime": round(session.created_at, 3),
        }
    headers = ["  Name", "State", "User", "Terminal"] + (["Commit Time Left"] if detail else [])
    text = "\n".join(
        [
            f"Maximum number of completed sessions: {MAX_COMPLETED_SESSIONS}",
            f"Maximum number of pending sessions: {MAX_PENDING_SESSIONS}",
            "",
            table(headers, rows),
        ]
    )
    data = {
        "sessions": sessions,
        "maxSavedSessions": MAX_COMPLETED_SESSIONS,
        "maxOpenSessions": MAX_PENDING_SESSIONS,
    }
    return ShowOutput(text, data)

"""Lab faults: break a running lab on purpose, by fabric element, and undo exactly that.

``roce-agent lab fault add|remove|list`` and the Python API :class:`LabFaults` (tests and
benches). A fault is named the way an operator names a fabric element — a link direction
``leaf1:eth3>spine1`` or ``h1>leaf1``, a link or port ``leaf1:eth3``, a host ``h1`` — and is
mapped to what a real fault of that kind would do where it happens:

========================  ======================================================================
kind                      what is done (and where)
========================  ======================================================================
``loss``                  vswitch ``drop`` on the switch end of that direction (tx leaving a
                          switch, else rx entering it): a gray failure no counter shows
``corrupt``               receiver a switch: ``fcs_error`` on its receiving port (it counts FCS
                          errors); receiver a host: ``icrc_error`` on the sending switch port
``icrc``                  ``icrc_error`` on the switch egress of that direction
``down``                  ``ip link set dev IF down`` in the switch namespace (the veth peer
                          loses carrier: both ends are down, as with a pulled cable)
``misclassify``           per-port ``qos trust cos`` pushed through the switch's SSH CLI (a
                          config session): RoCE lands in a lossy class, and the config shows it
``asic-misclassify``      vswitch ``classify`` (DSCP -> TC) on the port: the config and every
                          ``show`` stay clean ("the ASIC disagrees with the config")
``ignore-pfc``            vswitch ``ignore_pfc`` on the port
``storm``                 a process in the host's namespace sends PFC XOFF on the fabric's RoCE
                          priority continuously (started and killed by PID)
``latency``               vswitch ``delay`` on the switch egress of that direction
``host-stall``            a process in the lab's own namespace stops every process of the host's
                          namespace for MS ms of every 100 ms (SIGSTOP/SIGCONT by pidfd): the
                          kernel still receives, user space reads late (:mod:`lab.faults_stall`)
========================  ======================================================================

The registry is ``STATE_DIR/faults.json`` (registered in ``state.json``, so ``lab down``
removes it; ``lab down`` also ends the storm and stall processes it records; a stall continues
what it stopped when it ends). A vswitch's
``set_faults`` replaces its whole fault set, so every change sends each touched switch the
union of its active faults. Everything is checked before anything is done: bad input raises
:class:`FaultError` naming what and where, and nothing is applied.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from common.resources import builtin_profiles
from lab import netns, procs
from lab.fault_registry import FAULTS_FILE, Fault, FaultError, Registry
from lab.mgmt.names import nos_port_index
from lab.state import LabError, LabState, locked, now
from lab.topology.model import Endpoint, endpoint

FAULTS_DIR = "faults"  # logs of fault processes
STORM_INTERVAL_S = 0.01  # well inside one XOFF's pause time: the queue never resumes
STORM_QUANTA = 0xFFFF
START_TIMEOUT_S = 10.0
STALL_PERIOD_MS = 100.0  # a host-stall stops the host for MS ms of every this many
LOCK_TIMEOUT_S = 30.0
SSH_TIMEOUT_S = 30.0
BUILTIN_PROFILES = builtin_profiles()

DIRECTION, LINK, PORT, HOST = "direction", "link", "port", "host"


@dataclass(frozen=True)
class KindSpec:
    """What a kind targets, which parameters it takes and needs, and what it is for."""

    target: str
    allowed: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    summary: str = ""


KINDS: dict[str, KindSpec] = {
    "loss": KindSpec(
        DIRECTION,
        frozenset({"percent", "seed"}),
        frozenset({"percent"}),
        "silent random loss of PERCENT % in one link direction (a flaky optic)",
    ),
    "corrupt": KindSpec(
        DIRECTION,
        frozenset({"percent", "seed"}),
        frozenset({"percent"}),
        "corrupted frames: FCS errors at a receiving switch, bad ICRC towards a host",
    ),
    "icrc": KindSpec(
        DIRECTION,
        frozenset({"percent", "seed"}),
        frozenset({"percent"}),
        "RoCE frames leaving a switch port with a bad ICRC",
    ),
    "down": KindSpec(LINK, summary="the link goes down (both ends lose carrier)"),
    "misclassify": KindSpec(
        PORT, summary="`qos trust cos` on a switch port: RoCE lands in a lossy class"
    ),
    "asic-misclassify": KindSpec(
        PORT,
        frozenset({"dscp", "tc"}),
        summary="the data plane sends DSCP to TC whatever the config says (default: RoCE to 0)",
    ),
    "ignore-pfc": KindSpec(PORT, summary="PFC frames received on the port are not acted upon"),
    "storm": KindSpec(HOST, summary="the host sends PFC XOFF on the RoCE priority continuously"),
    "latency": KindSpec(
        DIRECTION,
        frozenset({"ms"}),
        frozenset({"ms"}),
        "every frame in one link direction leaves MS ms later",
    ),
    "host-stall": KindSpec(
        HOST,
        frozenset({"ms"}),
        frozenset({"ms"}),
        f"the host's processes stop for MS ms of every {STALL_PERIOD_MS:g} ms (a slow host, "
        "not a slow link)",
    ),
}
PARAMETERS = ("percent", "ms", "seed", "dscp", "tc")
TARGET_EXAMPLES = {
    DIRECTION: "a link direction like leaf1:eth3>spine1 or h1>leaf1",
    LINK: "a link named by one of its ends, like leaf1:eth1",
    PORT: "a switch port like leaf1:eth3",
    HOST: "a host like h1",
}


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Direction:
    """Frames leaving ``src`` towards ``dst`` (the two ends of one link)."""

    src: Endpoint
    dst: Endpoint

    def __str__(self) -> str:
        return f"{self.src}>{self.dst.node}"


@dataclass(frozen=True)
class LabWiring:
    """The running lab's nodes and links as ``state.json`` records them (not the topology
    file, which may have changed since ``lab up``)."""

    switches: frozenset[str]
    netns: Mapping[str, str]
    peers: Mapping[Endpoint, Endpoint]
    nos: Mapping[str, str] = field(default_factory=dict)  # switch -> roce.lab/nos

    @classmethod
    def from_state(cls, state: LabState) -> LabWiring:
        switches: set[str] = set()
        namespaces: dict[str, str] = {}
        peers: dict[Endpoint, Endpoint] = {}
        nos: dict[str, str] = {}
        for name, info in state.data["nodes"].items():
            namespaces[name] = str(info["netns"])
            if info["kind"] == "lab-switch":
                switches.add(name)
                nos[name] = str(info.get("nos", "eos"))
            for interface in info["interfaces"]:
                peer_node, _, peer_if = str(interface["peer"]).partition(":")
                here = endpoint(name, str(interface["ifname"]))
                there = endpoint(peer_node, peer_if)
                if here is not None and there is not None:  # every lab port is an ethN
                    peers[here] = there
        return cls(frozenset(switches), namespaces, peers, nos)

    def is_switch(self, node: str) -> bool:
        return node in self.switches

    def ports_of(self, node: str) -> list[str]:
        return [p.ifname for p in sorted((p for p in self.peers if p.node == node), key=_index)]

    def node(self, name: str, where: str) -> str:
        if name not in self.netns:
            raise FaultError(
                f"{where}: unknown node {name!r}. Expected: one of {', '.join(self.netns)}"
            )
        return name

    def port(self, text: str, where: str) -> Endpoint:
        node, _, ifname = text.partition(":")
        self.node(node, where)
        # The fabric file (and `roce-agent locate`) names a switch port as its NOS does:
        # EOS Ethernet3, SONiC Ethernet8 and NVUE swp3 are all the lab's eth3.
        if self.is_switch(node):
            index = nos_port_index(self.nos.get(node, "eos"), ifname)
            ifname = f"eth{index}" if index is not None else ifname
        port = endpoint(node, ifname)
        if port is None or port not in self.peers:
            raise FaultError(
                f"{where}: {node} has no port {ifname!r}. Expected: one of "
                f"{', '.join(self.ports_of(node))}"
            )
        return port

    def direction(self, text: str, where: str) -> Direction:
        left, _, right = text.partition(">")
        dst_node = self.node(right, where) if ":" not in right else self.port(right, where).node
        src = self.port(left, where) if ":" in left else self._only_link(left, dst_node, where)
        dst = self.peers[src]
        if dst.node != dst_node or (":" in right and str(dst) != right):
            raise FaultError(
                f"{where}: {src} leads to {dst}, not {right}. Expected: {src}>{dst.node}"
            )
        return Direction(src, dst)

    def _only_link(self, node: str, dst_node: str, where: str) -> Endpoint:
        """The port of ``node`` that leads to ``dst_node``, if there is exactly one."""
        self.node(node, where)
        candidates = [p for p in self.peers if p.node == node and self.peers[p].node == dst_node]
        if not candidates:
            raise FaultError(f"{where}: {node} has no link to {dst_node}")
        if len(candidates) > 1:
            names = ", ".join(f"{p}>{dst_node}" for p in sorted(candidates, key=str))
            raise FaultError(
                f"{where}: {node} has several links to {dst_node}: name one of {names}"
            )
        return candidates[0]


def _index(port: Endpoint) -> int:
    return port.index


def _target_form(text: str) -> str:
    """What ``text`` names by its spelling: a direction, a port or a node."""
    if ">" in text:
        return DIRECTION
    if ":" in text:
        return PORT
    return HOST


def parse_target(wiring: LabWiring, kind: str, text: str) -> Direction | Endpoint | str:
    """The element ``text`` names, in the form ``kind`` needs (FaultError otherwise)."""
    spec = KINDS[kind]
    where = f"target {text!r}"
    if not text or text != text.strip():
        raise FaultError(f"{where}: Expected: {TARGET_EXAMPLES[spec.target]}")
    given = _target_form(text)
    wanted = PORT if spec.target == LINK else spec.target
    if given != wanted:
        raise FaultError(
            f"{where}: {kind} needs {TARGET_EXAMPLES[spec.target]}. Actual: "
            + {DIRECTION: "a link direction", PORT: "a port", HOST: "a node"}[given]
        )
    if given == DIRECTION:
        return wiring.direction(text, where)
    if given == PORT:
        port = wiring.port(text, where)
        if spec.target == PORT and not wiring.is_switch(port.node):
            raise FaultError(
                f"{where}: {kind} needs a switch port; {port.node} is a host. Expected: its "
                f"peer {wiring.peers[port]}"
            )
        return port
    node = wiring.node(text, where)
    if wiring.is_switch(node):
        raise FaultError(f"{where}: {kind} needs a host; {node} is a switch")
    return node


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class _Rule:
    """What one parameter must be: a whole number or any number, maybe within a range."""

    whole: bool
    low: float | None = None
    high: float = 0
    low_exclusive: bool = False
    what: str = ""

    def check(self, name: str, value: Any) -> None:
        if not self._is_kind(value):
            expected = "a whole number" if self.whole else "a number"
            raise FaultError(f"{_flag(name)}: Expected: {expected}. Actual: {value!r}")
        if self.low is not None and not self._in_range(value):
            raise FaultError(f"{_flag(name)}: Expected: {self.what}. Actual: {value:g}")

    def _is_kind(self, value: Any) -> bool:
        if isinstance(value, bool):  # JSON's true is not 1
            return False
        if self.whole:
            return isinstance(value, int)
        return isinstance(value, (int, float)) and value == value  # not NaN

    def _in_range(self, value: float) -> bool:
        assert self.low is not None
        too_low = value <= self.low if self.low_exclusive else value < self.low
        return not too_low and value <= self.high


# The command-line option of each parameter where it differs (`fault add --delay 5ms`
# sets ms): errors name what the user typed.
OPTION_NAMES = {"ms": "delay"}


def _flag(name: str) -> str:
    return f"--{OPTION_NAMES.get(name, name)}"


PARAMETER_RULES: dict[str, _Rule] = {
    "percent": _Rule(False, 0, 100, True, "0 < percent <= 100"),
    "ms": _Rule(False, 0, 1000, True, "0 < ms <= 1000"),
    "seed": _Rule(True),
    "dscp": _Rule(True, 0, 63, False, "a DSCP from 0 to 63"),
    "tc": _Rule(True, 0, 7, False, "a traffic class from 0 to 7"),
}


def check_parameters(kind: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that apply to ``kind``, checked; FaultError names the bad one."""
    if kind not in KINDS:
        raise FaultError(f"kind: unknown fault kind {kind!r}. Expected: one of {', '.join(KINDS)}")
    spec = KINDS[kind]
    values = {k: v for k, v in given.items() if v is not None}
    _check_names(kind, spec, values)
    for name, value in values.items():
        PARAMETER_RULES[name].check(name, value)
    if "seed" in spec.allowed:
        values.setdefault("seed", 1)
    return values


def _check_names(kind: str, spec: KindSpec, values: Mapping[str, Any]) -> None:
    """Every parameter given is one ``kind`` takes, and every one it needs is given."""
    for name in values:
        if name not in PARAMETERS:
            raise FaultError(f"{kind}: unknown parameter {name!r}")
        if name not in spec.allowed:
            takes = ", ".join(_flag(p) for p in sorted(spec.allowed)) or "no parameters"
            raise FaultError(f"{_flag(name)}: does not apply to {kind}. Expected: {takes}")
    for name in sorted(spec.required - set(values)):
        raise FaultError(f"{_flag(name)}: {kind} needs it")


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class _Request:
    """One fault to plan: its element in the running lab, in the form its kind needs."""

    state: LabState
    wiring: LabWiring
    fault: Fault
    element: Direction | Endpoint | str

    @property
    def direction(self) -> Direction:
        assert isinstance(self.element, Direction)  # parse_target gives a kind its form
        return self.element

    @property
    def port(self) -> Endpoint:
        assert isinstance(self.element, Endpoint)
        return self.element

    @property
    def host(self) -> str:
        assert isinstance(self.element, str)
        return self.element

    def rate(self) -> dict[str, Any]:
        return {k: self.fault.params[k] for k in ("percent", "seed") if k in self.fault.params}

    def switch_egress(self) -> Endpoint:
        """The sending end of the direction, which must be a switch port."""
        src, dst = self.direction.src, self.direction.dst
        if not self.wiring.is_switch(src.node):
            raise FaultError(
                f"target {self.fault.target!r}: {self.fault.kind} acts on a switch egress and "
                f"{src.node} is a host. Expected: a direction leaving a switch port, like "
                f"{dst}>{src.node}"
            )
        return src


Actions = list[dict[str, Any]]


def _plan_loss(request: _Request) -> Actions:
    """Dropped where a switch sees it: leaving a switch (tx), else entering one (rx)."""
    src, dst = request.direction.src, request.direction.dst
    if request.wiring.is_switch(src.node):
        return [_vswitch(src, {"kind": "drop", "direction": "tx", **request.rate()})]
    return [_vswitch(dst, {"kind": "drop", "direction": "rx", **request.rate()})]


def _plan_corrupt(request: _Request) -> Actions:
    """A switch receiver counts FCS errors; a host receiver gets a bad ICRC from its switch."""
    src, dst = request.direction.src, request.direction.dst
    if request.wiring.is_switch(dst.node):
        return [_vswitch(dst, {"kind": "fcs_error", **request.rate()})]
    return [_vswitch(src, {"kind": "icrc_error", **request.rate()})]


def _plan_icrc(request: _Request) -> Actions:
    return [_vswitch(request.switch_egress(), {"kind": "icrc_error", **request.rate()})]


def _plan_latency(request: _Request) -> Actions:
    egress = request.switch_egress()
    return [_vswitch(egress, {"kind": "delay", "ms": request.fault.params["ms"]})]


def _plan_down(request: _Request) -> Actions:
    """Set down on the switch end (a host end's peer): the veth peer loses carrier too."""
    port, peers = request.port, request.wiring.peers
    end = port if request.wiring.is_switch(port.node) else peers[port]
    return [
        {
            "type": "link_down",
            "node": end.node,
            "netns": request.wiring.netns[end.node],
            "ifname": end.ifname,
            "link": sorted([str(port), str(peers[port])]),
        }
    ]


def _plan_misclassify(request: _Request) -> Actions:
    port = request.port
    nos = request.wiring.nos.get(port.node, "eos")
    if nos != "eos":
        # The fault is a hand change of the trust mode through the switch's EOS CLI.
        raise FaultError(
            f"misclassify {port}: {port.node} runs {nos}; this fault changes trust through the "
            "EOS CLI. Expected: a port of an EOS switch"
        )
    return [
        {
            "type": "trust",
            "switch": port.node,
            "interface": _eos_name(port.ifname),
            "set": "qos trust cos",
        }
    ]


def _plan_asic_misclassify(request: _Request) -> Actions:
    """By default RoCE's own DSCP goes to TC 0 (the fabric's DSCP, from its profile)."""
    params = request.fault.params
    dscp = params.get("dscp")
    if dscp is None:
        dscp = roce_class(request.state)["dscp"]
        params["dscp"] = dscp
    params.setdefault("tc", 0)
    return [_vswitch(request.port, {"kind": "classify", "dscp": dscp, "tc": params["tc"]})]


def _plan_ignore_pfc(request: _Request) -> Actions:
    return [_vswitch(request.port, {"kind": "ignore_pfc"})]


def _plan_storm(request: _Request) -> Actions:
    """A process on the host's one port, storming on the fabric's RoCE priority."""
    host = request.host
    ports = request.wiring.ports_of(host)
    if len(ports) != 1:
        raise FaultError(f"target {host!r}: storm needs a host with one port; it has {ports}")
    priority = roce_class(request.state)["priority"]
    request.fault.params["priority"] = priority
    return [
        {
            "type": "process",
            "node": host,
            "netns": request.wiring.netns[host],
            "ifname": ports[0],
            "priority": priority,
        }
    ]


def _plan_host_stall(request: _Request) -> Actions:
    """A process outside the host's namespace that stops and continues the processes in it."""
    ms = request.fault.params["ms"]
    if ms >= STALL_PERIOD_MS:
        raise FaultError(
            f"--delay: Expected: a stall shorter than its period ({STALL_PERIOD_MS:g} ms). "
            f"Actual: {ms:g} ms"
        )
    host = request.host
    return [
        {
            "type": "process",
            "node": host,
            "netns": request.wiring.netns[host],
            "stall_ms": ms,
            "period_ms": STALL_PERIOD_MS,
        }
    ]


PLANNERS: dict[str, Callable[[_Request], Actions]] = {
    "loss": _plan_loss,
    "corrupt": _plan_corrupt,
    "icrc": _plan_icrc,
    "down": _plan_down,
    "misclassify": _plan_misclassify,
    "asic-misclassify": _plan_asic_misclassify,
    "ignore-pfc": _plan_ignore_pfc,
    "storm": _plan_storm,
    "latency": _plan_latency,
    "host-stall": _plan_host_stall,
}

# --------------------------------------------------------------------------- the lab's faults


class LabFaults:
    """The faults of the lab whose state directory is ``state_dir``."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.directory = Path(state_dir).absolute()

    # ----------------------------------------------------------------- public API

    def plan(self, kind: str, target: str, **params: Any) -> Fault:
        """What ``add`` would do (nothing is applied); FaultError on bad input."""
        state = LabState.load(self.directory) or self._not_up()
        return self._planned(state, Registry.load(self.directory), kind, target, params)

    def add(self, kind: str, target: str, **params: Any) -> Fault:
        """Inject one fault; FaultError (nothing applied) if the input or the lab refuses it."""
        with self._locked() as state:
            registry = Registry.load(self.directory)
            fault = self._planned(state, registry, kind, target, params)
            state.add_file(FAULTS_FILE)  # from now on `lab down` removes the registry
            self._apply(state, registry, fault)
            registry.next_id += 1
            registry.faults.append(fault)
            registry.save(self.directory)
            return fault

    def _planned(
        self, state: LabState, registry: Registry, kind: str, target: str, params: Any
    ) -> Fault:
        params = check_parameters(kind, params)
        wiring = LabWiring.from_state(state)
        element = parse_target(wiring, kind, target)
        fault = Fault(f"f{registry.next_id}", kind, target, params, [], now())
        fault.actions = PLANNERS[kind](_Request(state, wiring, fault, element))
        for other in registry.faults:
            if other.key() == fault.key():
                raise FaultError(
                    f"target {target!r}: the same fault is already injected there as "
                    f"{other.id} ({other.kind} {other.target}); remove it first"
                )
        return fault

    def remove(self, fault_id: str) -> Fault:
        """Undo one fault exactly; FaultError if the ID is unknown or the undo failed."""
        with self._locked() as state:
            registry = Registry.load(self.directory)
            fault = next((f for f in registry.faults if f.id == fault_id), None)
            if fault is None:
                known = ", ".join(f.id for f in registry.faults) or "none"
                raise FaultError(f"fault {fault_id!r}: no such fault. Expected: one of {known}")
            self._undo(state, registry, fault)
            registry.faults.remove(fault)
            registry.save(self.directory)
            return fault

    def list(self) -> list[Fault]:
        """The active faults, oldest first."""
        LabState.load(self.directory) or self._not_up()
        return list(Registry.load(self.directory).faults)

    def clear(self) -> builtins.list[Fault]:
        """Remove every fault (newest first); FaultError lists the ones that could not be."""
        removed: builtins.list[Fault] = []
        problems: builtins.list[str] = []
        for fault in reversed(self.list()):
            try:
                removed.append(self.remove(fault.id))
            except LabError as exc:
                problems.append(str(exc))
        if problems:
            raise FaultError("; ".join(problems) + " (those faults stay recorded)")
        return removed

    # ----------------------------------------------------------------- doing and undoing

    def _apply(self, state: LabState, registry: Registry, fault: Fault) -> None:
        action = fault.actions[0]  # every kind is one action: all or nothing
        if action["type"] == "vswitch":
            self._push_switch(state, [*registry.faults, fault], action["switch"])
        elif action["type"] == "link_down":
            _ip_link(action, "down")
        elif action["type"] == "trust":
            running = switch_cli(state, action["switch"], ["show running-config"])
            action["previous"] = interface_trust(running, action["interface"])
            _configure_trust(state, action, fault.id, action["set"])
        elif action["type"] == "process":
            action.update(self._start_process(state, fault.id, action))

    def _undo(self, state: LabState, registry: Registry, fault: Fault) -> None:
        action = fault.actions[0]
        if action["type"] == "vswitch":
            rest = [f for f in registry.faults if f is not fault]
            self._push_switch(state, rest, action["switch"])
        elif action["type"] == "link_down":
            _ip_link(action, "up")
        elif action["type"] == "trust":
            _configure_trust(state, action, fault.id, action.get("previous") or "default qos trust")
        elif action["type"] == "process":
            procs.stop(action)
            if "stall_ms" in action:
                _continue_all(action)

    def _push_switch(self, state: LabState, faults: builtins.list[Fault], switch: str) -> None:
        """Send ``switch`` the union of the faults meant for it (set_faults replaces)."""
        from lab.vswitch.client import VswitchClient, VswitchError

        wanted = [
            a["fault"]
            for f in faults
            for a in f.actions
            if a["type"] == "vswitch" and a["switch"] == switch
        ]
        socket_path = state.data["nodes"][switch]["control_socket"]
        try:
            with VswitchClient(socket_path, timeout=5.0) as client:
                client.set_faults(wanted)
        except PermissionError:
            raise FaultError(f"no permission to open {socket_path} (run as root)") from None
        except VswitchError as exc:
            raise FaultError(f"{switch}: the switch refused the fault set: {exc}") from None
        except (OSError, ValueError) as exc:
            raise FaultError(f"{switch}: vswitch did not answer: {exc}") from None

    def _start_process(
        self, state: LabState, fault_id: str, action: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A storm (inside the host's namespace) or a stall (outside the namespace it stops:
        it would stop itself), started and known by PID."""
        log_dir = state.add_dir(FAULTS_DIR)
        log_dir.mkdir(exist_ok=True)
        log = log_dir / f"{fault_id}.log"
        if "stall_ms" in action:
            argv = [
                sys.executable, "-m", "lab.faults_stall",
                "--netns", str(action["netns"]),
                "--ms", f"{action['stall_ms']:g}",
                "--period-ms", f"{action['period_ms']:g}",
            ]  # fmt: skip
            launcher: list[str] = []
            word, what = b"stalling", "stall"
        else:
            argv = [
                sys.executable, "-m", "lab.faults_storm",
                "--ifname", str(action["ifname"]),
                "--priority", str(action["priority"]),
                "--interval-ms", f"{STORM_INTERVAL_S * 1000:g}",
                "--quanta", str(STORM_QUANTA),
            ]  # fmt: skip
            launcher = ["ip", "netns", "exec", str(action["netns"])]
            word, what = b"storming", "storm"
        with log.open("ab") as err:
            # The storm outlives this command; it ends by PID (remove, lab down).
            proc = procs.spawn([*launcher, *argv], stdout=subprocess.PIPE, stderr=err)
        record = {"pid": proc.pid, "argv": argv, "launcher": launcher, "log": str(log)}
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        line = proc.stdout.readline() if ready else b""
        proc.stdout.close()
        if line.strip() != word:
            procs.stop(record)
            if "stall_ms" in action:
                _continue_all(action)
            ending = procs.tail(log)
            raise FaultError(
                f"{what} on {action['node']} did not start within {START_TIMEOUT_S:g} s"
                + (f"; its log ends with:\n{ending}" if ending else "")
            )
        return record

    # ----------------------------------------------------------------- files

    @property
    def path(self) -> Path:
        return Registry.path_in(self.directory)

    def _not_up(self) -> NoReturn:
        raise FaultError(f"no lab is up with the state directory {self.directory}")

    def _busy(self) -> FaultError:
        return FaultError(
            f"{self.directory}: another `roce-agent lab` command holds the lab "
            f"for more than {LOCK_TIMEOUT_S:g} s"
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[LabState]:
        """Exclusive with other fault commands and with `lab up/down` of this lab (the same
        lock, but waiting: two `fault add` in a row from a script both succeed)."""
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(locked(self.directory, self._busy, wait=LOCK_TIMEOUT_S))
            except OSError:
                self._not_up()
            state = LabState.load(self.directory) or self._not_up()
            if state.data.get("phase") != "up":
                raise FaultError(f"lab {state.name} is {state.data.get('phase')}, not up")
            yield state


# --------------------------------------------------------------------------- actions


def _vswitch(port: Endpoint, fault: dict[str, Any]) -> dict[str, Any]:
    return {"type": "vswitch", "switch": port.node, "fault": {**fault, "port": port.ifname}}


def _eos_name(ifname: str) -> str:
    from lab.mgmt.names import eos_name

    return eos_name(ifname)


def _continue_all(action: Mapping[str, Any]) -> None:
    """After a stall ends: every process of the host's namespace continued, also one the
    stall process stopped and could not continue (killed in a stall)."""
    from lab.faults_stall import continue_all

    with contextlib.suppress(OSError):  # the namespace is gone: nothing left stopped
        continue_all(str(action["netns"]))


def _ip_link(action: Mapping[str, Any], how: str) -> None:
    try:
        netns.run(["ip", "-n", str(action["netns"]), "link", "set", "dev", action["ifname"], how])
    except netns.CommandError as exc:
        raise FaultError(f"{action['node']}:{action['ifname']}: link {how} failed: {exc}") from None


# --------------------------------------------------------------------------- management plane


def interface_trust(running_config: str, interface: str) -> str | None:
    """The interface's own trust line in ``show running-config`` (None: it inherits)."""
    inside = False
    for line in running_config.splitlines():
        if line and not line[0].isspace():
            inside = line.strip() == f"interface {interface}"
        elif inside and line.strip() in ("qos trust dscp", "qos trust cos", "no qos trust"):
            return line.strip()
    return None


def _configure_trust(state: LabState, action: Mapping[str, Any], fault_id: str, line: str) -> None:
    """One config session, committed: the change is on the switch whole or not at all."""
    session = f"lab-fault-{fault_id}"
    output = switch_cli(
        state,
        action["switch"],
        # `commit` leaves configuration mode, as on EOS
        [f"configure session {session}", f"interface {action['interface']}", line, "commit"],
    )
    problems = [x.strip() for x in output.splitlines() if x.strip().startswith("%")]
    if problems:
        with contextlib.suppress(LabError):
            switch_cli(state, action["switch"], [f"configure session {session} abort"])
        raise FaultError(
            f"{action['switch']} {action['interface']}: `{line}` refused by the switch CLI: "
            + "; ".join(problems)
        )


def switch_cli(state: LabState, switch: str, lines: list[str]) -> str:
    """Run CLI lines on ``switch`` over SSH as an operator would (its pinned host key, the
    lab's credentials); returns what the switch printed."""
    import asyncssh

    from lab.mgmt.launcher import host_public_key

    info = state.data["nodes"][switch]
    credentials = state.data["credentials"]
    host_key = asyncssh.import_public_key(host_public_key(state.directory / f"{switch}-mgmt"))

    async def run() -> str:
        async with asyncssh.connect(
            info["mgmt_host"],
            int(info["mgmt_port"]),
            username=credentials["username"],
            password=credentials["password"],
            known_hosts=([host_key], [], []),
            client_keys=None,
            agent_path=None,
            preferred_auth="password",
            connect_timeout=SSH_TIMEOUT_S,
        ) as conn:
            result = await conn.run("\n".join(lines), check=False, timeout=SSH_TIMEOUT_S)
        return str(result.stdout or "")

    try:
        return asyncio.run(run())
    except (TimeoutError, OSError, asyncssh.Error) as exc:
        where = f"{info['mgmt_host']}:{info['mgmt_port']}"
        raise FaultError(f"{switch}: management plane at {where} failed: {exc}") from None


# --------------------------------------------------------------------------- profile


def roce_class(state: LabState) -> dict[str, int]:
    """The fabric's RoCE DSCP and priority: its profile, with the fabric file's overrides."""
    fabric_file = Path(state.data["fabric_file"])
    fabric = _read_yaml(fabric_file, "the lab's fabric file")
    reference = str(fabric.get("profile", ""))
    path = _profile_path(fabric_file, reference)
    profile = _read_yaml(path, "the profile")
    roce = dict(profile.get("roce") or {})
    roce.update((fabric.get("overrides") or {}).get("roce") or {})
    try:
        return {"dscp": int(roce["dscp"]), "priority": int(roce["priority"])}
    except (KeyError, TypeError, ValueError):
        raise FaultError(f"{path}: roce.dscp / roce.priority missing or not numbers") from None


def _read_yaml(path: Path, what: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise FaultError(f"cannot read {what} {path}: {exc}") from None
    return data


def _profile_path(fabric_file: Path, reference: str) -> Path:
    """Where the fabric file's profile is: a file next to it, or a named profile looked up
    like the agent does ($ROCE_AGENT_PROFILES, then profiles/ folders, then the built-ins)."""
    here = fabric_file.parent
    if reference.endswith((".yml", ".yaml")):
        candidates = [here / reference]
    else:
        extra = [Path(p) for p in os.environ.get("ROCE_AGENT_PROFILES", "").split(os.pathsep) if p]
        folders = [*extra, here / "profiles", here.parent / "profiles", BUILTIN_PROFILES]
        candidates = [d / f"{reference}{s}" for d in folders for s in (".yml", ".yaml")]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise FaultError(
            f"{fabric_file}: profile {reference!r} not found (needed for the RoCE class)"
        )
    return path


def describe(fault: Fault) -> str:
    """One line: what was done where (for tables)."""
    parts = []
    for action in fault.actions:
        if action["type"] == "vswitch":
            detail = {k: v for k, v in action["fault"].items() if k not in ("kind", "port")}
            args = " ".join(f"{k}={v}" for k, v in detail.items())
            parts.append(
                f"{action['switch']} vswitch {action['fault']['kind']} on "
                f"{action['fault']['port']}" + (f" ({args})" if args else "")
            )
        elif action["type"] == "link_down":
            parts.append(f"ip link set dev {action['ifname']} down in {action['netns']}")
        elif action["type"] == "trust":
            before = action.get("previous") or "inherited trust"
            parts.append(
                f"{action['switch']} {action['interface']}: {action['set']} (was {before})"
            )
        elif action["type"] == "process" and "stall_ms" in action:
            parts.append(
                f"processes of {action['node']} stopped {action['stall_ms']:g} ms of every "
                f"{action['period_ms']:g} ms, pid {action.get('pid', '?')}"
            )
        elif action["type"] == "process":
            parts.append(
                f"PFC XOFF storm on {action['node']}:{action['ifname']} priority "
                f"{action['priority']}, pid {action.get('pid', '?')}"
            )
    return "; ".join(parts)

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
========================  ======================================================================

The registry is ``STATE_DIR/faults.json`` (registered in ``state.json``, so ``lab down``
removes it; ``lab down`` also kills the storm processes it records). A vswitch's
``set_faults`` replaces its whole fault set, so every change sends each touched switch the
union of its active faults. Everything is checked before anything is done: bad input raises
:class:`FaultError` naming what and where, and nothing is applied.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import fcntl
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from lab import netns, runtime

FAULTS_FILE = "faults.json"
FAULTS_DIR = "faults"  # logs of fault processes
REGISTRY_SCHEMA = 1
STORM_INTERVAL_S = 0.01  # well inside one XOFF's pause time: the queue never resumes
STORM_QUANTA = 0xFFFF
START_TIMEOUT_S = 10.0
LOCK_TIMEOUT_S = 30.0
SSH_TIMEOUT_S = 30.0
BUILTIN_PROFILES = Path(__file__).resolve().parent.parent / "playbooks" / "profiles"

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
}
PARAMETERS = ("percent", "ms", "seed", "dscp", "tc")
TARGET_EXAMPLES = {
    DIRECTION: "a link direction like leaf1:eth3>spine1 or h1>leaf1",
    LINK: "a link named by one of its ends, like leaf1:eth1",
    PORT: "a switch port like leaf1:eth3",
    HOST: "a host like h1",
}


class FaultError(runtime.LabError):
    """Bad input or a fault that could not be applied/undone; the CLI prints it, exit 2."""


# --------------------------------------------------------------------------- topology


@dataclass(frozen=True)
class Port:
    """One end of a link: ``node:ifname``."""

    node: str
    ifname: str

    def __str__(self) -> str:
        return f"{self.node}:{self.ifname}"


@dataclass(frozen=True)
class Direction:
    """Frames leaving ``src`` towards ``dst`` (the two ends of one link)."""

    src: Port
    dst: Port

    def __str__(self) -> str:
        return f"{self.src}>{self.dst.node}"


@dataclass(frozen=True)
class LabTopology:
    """The running lab as ``state.json`` records it: nodes, roles, ports and their peers."""

    switches: frozenset[str]
    netns: Mapping[str, str]
    peers: Mapping[Port, Port]

    @classmethod
    def from_state(cls, state: runtime.LabState) -> LabTopology:
        switches: set[str] = set()
        namespaces: dict[str, str] = {}
        peers: dict[Port, Port] = {}
        for name, info in state.data["nodes"].items():
            namespaces[name] = str(info["netns"])
            if info["kind"] == "lab-switch":
                switches.add(name)
            for interface in info["interfaces"]:
                peer_node, _, peer_if = str(interface["peer"]).partition(":")
                peers[Port(name, str(interface["ifname"]))] = Port(peer_node, peer_if)
        return cls(frozenset(switches), namespaces, peers)

    def is_switch(self, node: str) -> bool:
        return node in self.switches

    def ports_of(self, node: str) -> list[str]:
        return sorted((p.ifname for p in self.peers if p.node == node), key=_natural)

    def node(self, name: str, where: str) -> str:
        if name not in self.netns:
            raise FaultError(
                f"{where}: unknown node {name!r}. Expected: one of {', '.join(self.netns)}"
            )
        return name

    def port(self, text: str, where: str) -> Port:
        node, _, ifname = text.partition(":")
        self.node(node, where)
        # The fabric file (and `roce-agent locate`) names a switch port as the NOS does:
        # Ethernet3 is the lab's eth3.
        if re.fullmatch(r"Ethernet\d+", ifname) and self.is_switch(node):
            ifname = "eth" + ifname.removeprefix("Ethernet")
        port = Port(node, ifname)
        if port not in self.peers:
            raise FaultError(
                f"{where}: {node} has no port {ifname!r}. Expected: one of "
                f"{', '.join(self.ports_of(node))}"
            )
        return port

    def direction(self, text: str, where: str) -> Direction:
        left, _, right = text.partition(">")
        dst_node = self.node(right, where) if ":" not in right else self.port(right, where).node
        if ":" in left:
            src = self.port(left, where)
        else:
            self.node(left, where)
            candidates = [
                p for p in self.peers if p.node == left and self.peers[p].node == dst_node
            ]
            if not candidates:
                raise FaultError(f"{where}: {left} has no link to {dst_node}")
            if len(candidates) > 1:
                names = ", ".join(f"{p}>{dst_node}" for p in sorted(candidates, key=str))
                raise FaultError(
                    f"{where}: {left} has several links to {dst_node}: name one of {names}"
                )
            src = candidates[0]
        dst = self.peers[src]
        if dst.node != dst_node or (":" in right and str(dst) != right):
            raise FaultError(
                f"{where}: {src} leads to {dst}, not {right}. Expected: {src}>{dst.node}"
            )
        return Direction(src, dst)


def _natural(ifname: str) -> tuple[str, int]:
    digits = ifname.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.-")
    return (ifname[: len(ifname) - len(digits)], int(digits) if digits.isdigit() else -1)


def parse_target(topology: LabTopology, kind: str, text: str) -> Direction | Port | str:
    """The element ``text`` names, in the form ``kind`` needs (FaultError otherwise)."""
    spec = KINDS[kind]
    where = f"target {text!r}"
    if not text or text != text.strip():
        raise FaultError(f"{where}: Expected: {TARGET_EXAMPLES[spec.target]}")
    if ">" in text:
        given = DIRECTION
    elif ":" in text:
        given = PORT
    else:
        given = HOST
    wanted = PORT if spec.target == LINK else spec.target
    if given != wanted:
        raise FaultError(
            f"{where}: {kind} needs {TARGET_EXAMPLES[spec.target]}. Actual: "
            + {DIRECTION: "a link direction", PORT: "a port", HOST: "a node"}[given]
        )
    if given == DIRECTION:
        return topology.direction(text, where)
    if given == PORT:
        port = topology.port(text, where)
        if spec.target == PORT and not topology.is_switch(port.node):
            raise FaultError(
                f"{where}: {kind} needs a switch port; {port.node} is a host. Expected: its "
                f"peer {topology.peers[port]}"
            )
        return port
    node = topology.node(text, where)
    if topology.is_switch(node):
        raise FaultError(f"{where}: {kind} needs a host; {node} is a switch")
    return node


# --------------------------------------------------------------------------- parameters


def check_parameters(kind: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that apply to ``kind``, checked; FaultError names the bad one."""
    if kind not in KINDS:
        raise FaultError(f"kind: unknown fault kind {kind!r}. Expected: one of {', '.join(KINDS)}")
    spec = KINDS[kind]
    values = {k: v for k, v in given.items() if v is not None}
    for name in values:
        if name not in PARAMETERS:
            raise FaultError(f"{kind}: unknown parameter {name!r}")
        if name not in spec.allowed:
            takes = ", ".join(f"--{p}" for p in sorted(spec.allowed)) or "no parameters"
            raise FaultError(f"--{name}: does not apply to {kind}. Expected: {takes}")
    for name in sorted(spec.required - set(values)):
        raise FaultError(f"--{name}: {kind} needs it")
    checks: dict[str, tuple[float, float, bool, str]] = {
        # name: (low, high, low exclusive, what)
        "percent": (0, 100, True, "0 < percent <= 100"),
        "ms": (0, 1000, True, "0 < ms <= 1000"),
        "dscp": (0, 63, False, "a DSCP from 0 to 63"),
        "tc": (0, 7, False, "a traffic class from 0 to 7"),
    }
    for name, value in values.items():
        if name in ("seed", "dscp", "tc") and (
            isinstance(value, bool) or not isinstance(value, int)
        ):
            raise FaultError(f"--{name}: Expected: a whole number. Actual: {value!r}")
        if name in ("percent", "ms") and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value != value
        ):
            raise FaultError(f"--{name}: Expected: a number. Actual: {value!r}")
        if name in checks:
            low, high, exclusive, what = checks[name]
            if (value <= low if exclusive else value < low) or value > high:
                raise FaultError(f"--{name}: Expected: {what}. Actual: {value:g}")
    if "seed" in spec.allowed:
        values.setdefault("seed", 1)
    return values


# --------------------------------------------------------------------------- the registry


@dataclass
class Fault:
    """One active fault: what was asked and what was done where (to undo exactly that)."""

    id: str
    kind: str
    target: str
    params: dict[str, Any]
    actions: list[dict[str, Any]]
    created_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "params": self.params,
            "actions": self.actions,
            "created_at": self.created_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        return cls(
            str(data["id"]),
            str(data["kind"]),
            str(data["target"]),
            dict(data["params"]),
            [dict(a) for a in data["actions"]],
            str(data.get("created_at", "")),
        )

    def key(self) -> str:
        """What makes two faults the same injection (refused twice)."""
        parts = []
        for action in self.actions:
            if action["type"] == "vswitch":
                fault = action["fault"]
                detail = {
                    k: v for k, v in fault.items() if k not in ("percent", "seed", "ms", "tc")
                }
                parts.append(f"vswitch:{action['switch']}:{json.dumps(detail, sort_keys=True)}")
            elif action["type"] == "link_down":
                parts.append("link:" + "|".join(sorted(action["link"])))
            elif action["type"] == "trust":
                parts.append(f"trust:{action['switch']}:{action['interface']}")
            elif action["type"] == "process":
                parts.append(f"process:{self.kind}:{self.target}")
        return ";".join(parts)

    def pids(self) -> list[int]:
        return [int(a["pid"]) for a in self.actions if a["type"] == "process" and "pid" in a]


@dataclass
class _Registry:
    next_id: int = 1
    faults: list[Fault] = field(default_factory=list)


class LabFaults:
    """The faults of the lab whose state directory is ``state_dir``."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.directory = Path(state_dir).absolute()

    # ----------------------------------------------------------------- public API

    def plan(self, kind: str, target: str, **params: Any) -> Fault:
        """What ``add`` would do (nothing is applied); FaultError on bad input."""
        state = runtime.LabState.load(self.directory) or self._not_up()
        return self._planned(state, self._load(), kind, target, params)

    def add(self, kind: str, target: str, **params: Any) -> Fault:
        """Inject one fault; FaultError (nothing applied) if the input or the lab refuses it."""
        with self._locked() as state:
            registry = self._load()
            fault = self._planned(state, registry, kind, target, params)
            state.add_file(FAULTS_FILE)  # from now on `lab down` removes the registry
            self._apply(state, registry, fault)
            registry.next_id += 1
            registry.faults.append(fault)
            self._save(registry)
            return fault

    def _planned(
        self, state: runtime.LabState, registry: _Registry, kind: str, target: str, params: Any
    ) -> Fault:
        params = check_parameters(kind, params)
        topology = LabTopology.from_state(state)
        element = parse_target(topology, kind, target)
        fault = Fault(f"f{registry.next_id}", kind, target, params, [], runtime._now())
        fault.actions = self._plan(state, topology, fault, element)
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
            registry = self._load()
            fault = next((f for f in registry.faults if f.id == fault_id), None)
            if fault is None:
                known = ", ".join(f.id for f in registry.faults) or "none"
                raise FaultError(f"fault {fault_id!r}: no such fault. Expected: one of {known}")
            self._undo(state, registry, fault)
            registry.faults.remove(fault)
            self._save(registry)
            return fault

    def list(self) -> list[Fault]:
        """The active faults, oldest first."""
        runtime.LabState.load(self.directory) or self._not_up()
        return list(self._load().faults)

    def clear(self) -> builtins.list[Fault]:
        """Remove every fault (newest first); FaultError lists the ones that could not be."""
        removed: builtins.list[Fault] = []
        problems: builtins.list[str] = []
        for fault in reversed(self.list()):
            try:
                removed.append(self.remove(fault.id))
            except runtime.LabError as exc:
                problems.append(str(exc))
        if problems:
            raise FaultError("; ".join(problems) + " (those faults stay recorded)")
        return removed

    # ----------------------------------------------------------------- planning

    def _plan(
        self,
        state: runtime.LabState,
        topology: LabTopology,
        fault: Fault,
        element: Direction | Port | str,
    ) -> builtins.list[dict[str, Any]]:
        kind, params = fault.kind, fault.params
        rate: dict[str, Any] = {k: params[k] for k in ("percent", "seed") if k in params}
        if isinstance(element, Direction):
            src, dst = element.src, element.dst
            sending_switch = topology.is_switch(src.node)
            if kind == "loss":
                if sending_switch:
                    return [_vswitch(src, {"kind": "drop", "direction": "tx", **rate})]
                return [_vswitch(dst, {"kind": "drop", "direction": "rx", **rate})]
            if kind == "corrupt":
                if topology.is_switch(dst.node):
                    return [_vswitch(dst, {"kind": "fcs_error", **rate})]
                return [_vswitch(src, {"kind": "icrc_error", **rate})]
            if not sending_switch:
                raise FaultError(
                    f"target {fault.target!r}: {kind} acts on a switch egress and {src.node} is a "
                    f"host. Expected: a direction leaving a switch port, like {dst}>{src.node}"
                )
            if kind == "icrc":
                return [_vswitch(src, {"kind": "icrc_error", **rate})]
            if kind == "latency":
                return [_vswitch(src, {"kind": "delay", "ms": params["ms"]})]
        elif isinstance(element, Port):
            if kind == "down":
                end = element if topology.is_switch(element.node) else topology.peers[element]
                return [
                    {
                        "type": "link_down",
                        "node": end.node,
                        "netns": topology.netns[end.node],
                        "ifname": end.ifname,
                        "link": sorted([str(element), str(topology.peers[element])]),
                    }
                ]
            if kind == "misclassify":
                return [
                    {
                        "type": "trust",
                        "switch": element.node,
                        "interface": _eos_name(element.ifname),
                        "set": "qos trust cos",
                    }
                ]
            if kind == "asic-misclassify":
                dscp = params.get("dscp")
                if dscp is None:
                    dscp = roce_class(state)["dscp"]
                    params["dscp"] = dscp
                params.setdefault("tc", 0)
                return [_vswitch(element, {"kind": "classify", "dscp": dscp, "tc": params["tc"]})]
            if kind == "ignore-pfc":
                return [_vswitch(element, {"kind": "ignore_pfc"})]
        elif kind == "storm":
            host = element
            ports = topology.ports_of(host)
            if len(ports) != 1:
                raise FaultError(
                    f"target {host!r}: storm needs a host with one port; it has {ports}"
                )
            priority = roce_class(state)["priority"]
            params["priority"] = priority
            return [
                {
                    "type": "process",
                    "node": host,
                    "netns": topology.netns[host],
                    "ifname": ports[0],
                    "priority": priority,
                }
            ]
        raise AssertionError(f"no plan for {kind} on {element!r}")  # parse_target prevents it

    # ----------------------------------------------------------------- doing and undoing

    def _apply(self, state: runtime.LabState, registry: _Registry, fault: Fault) -> None:
        action = fault.actions[0]  # every kind is one action: all or nothing
        if action["type"] == "vswitch":
            self._push_switch(state, [*registry.faults, fault], action["switch"])
        elif action["type"] == "link_down":
            _ip_link(action, "down")
        elif action["type"] == "trust":
            running = _mgmt_cli(state, action["switch"], ["show running-config"])
            action["previous"] = interface_trust(running, action["interface"])
            _configure_trust(state, action, fault.id, action["set"])
        elif action["type"] == "process":
            action.update(self._start_storm(state, fault.id, action))

    def _undo(self, state: runtime.LabState, registry: _Registry, fault: Fault) -> None:
        action = fault.actions[0]
        if action["type"] == "vswitch":
            rest = [f for f in registry.faults if f is not fault]
            self._push_switch(state, rest, action["switch"])
        elif action["type"] == "link_down":
            _ip_link(action, "up")
        elif action["type"] == "trust":
            _configure_trust(state, action, fault.id, action.get("previous") or "default qos trust")
        elif action["type"] == "process":
            stop_process(action)

    def _push_switch(
        self, state: runtime.LabState, faults: builtins.list[Fault], switch: str
    ) -> None:
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

    def _start_storm(
        self, state: runtime.LabState, fault_id: str, action: Mapping[str, Any]
    ) -> dict[str, Any]:
        log_dir = state.add_dir(FAULTS_DIR)
        log_dir.mkdir(exist_ok=True)
        log = log_dir / f"{fault_id}.log"
        argv = [
            sys.executable, "-m", "lab.faults_storm",
            "--ifname", str(action["ifname"]),
            "--priority", str(action["priority"]),
            "--interval-ms", f"{STORM_INTERVAL_S * 1000:g}",
            "--quanta", str(STORM_QUANTA),
        ]  # fmt: skip
        launcher = ["ip", "netns", "exec", str(action["netns"])]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (runtime._package_root(), env.get("PYTHONPATH")) if p
        )
        with log.open("ab") as err:
            # Own session: the storm outlives this command; it ends by PID (remove, lab down).
            proc = subprocess.Popen(
                [*launcher, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                start_new_session=True,
            )
        record = {"pid": proc.pid, "argv": argv, "launcher": launcher, "log": str(log)}
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        line = proc.stdout.readline() if ready else b""
        proc.stdout.close()
        if line.strip() != b"storming":
            stop_process(record)
            raise FaultError(
                f"storm on {action['node']} did not start within {START_TIMEOUT_S:g} s"
                + (f"; its log ends with:\n{runtime._tail(log)}" if runtime._tail(log) else "")
            )
        return record

    # ----------------------------------------------------------------- files

    @property
    def path(self) -> Path:
        return self.directory / FAULTS_FILE

    def _not_up(self) -> NoReturn:
        raise FaultError(f"no lab is up with the state directory {self.directory}")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[runtime.LabState]:
        """Exclusive with other fault commands and with `lab up/down` of this lab (same flock
        as runtime's, but waiting: two `fault add` in a row from a script both succeed)."""
        try:
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self._not_up()
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise FaultError(
                            f"{self.directory}: another `roce-agent lab` command holds the lab "
                            f"for more than {LOCK_TIMEOUT_S:g} s"
                        ) from None
                    time.sleep(0.05)
            state = runtime.LabState.load(self.directory) or self._not_up()
            if state.data.get("phase") != "up":
                raise FaultError(f"lab {state.name} is {state.data.get('phase')}, not up")
            yield state
        finally:
            os.close(fd)

    def _load(self) -> _Registry:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return _Registry()
        except (OSError, ValueError) as exc:
            raise FaultError(f"cannot read the fault registry {self.path}: {exc}") from None
        if not isinstance(data, dict) or data.get("schema") != REGISTRY_SCHEMA:
            raise FaultError(f"{self.path} is not a fault registry this version understands")
        try:
            faults = [Fault.from_json(f) for f in data["faults"]]
            return _Registry(int(data["next_id"]), faults)
        except (KeyError, TypeError, ValueError) as exc:
            raise FaultError(f"{self.path}: malformed fault registry ({exc})") from None

    def _save(self, registry: _Registry) -> None:
        data = {
            "schema": REGISTRY_SCHEMA,
            "next_id": registry.next_id,
            "faults": [f.to_json() for f in registry.faults],
        }
        tmp = self.path.with_name(f".{FAULTS_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


# --------------------------------------------------------------------------- actions


def _vswitch(port: Port, fault: dict[str, Any]) -> dict[str, Any]:
    return {"type": "vswitch", "switch": port.node, "fault": {**fault, "port": port.ifname}}


def _eos_name(ifname: str) -> str:
    from lab.mgmt.names import eos_name

    return eos_name(ifname)


def _ip_link(action: Mapping[str, Any], how: str) -> None:
    try:
        netns.run(["ip", "-n", str(action["netns"]), "link", "set", "dev", action["ifname"], how])
    except netns.CommandError as exc:
        raise FaultError(f"{action['node']}:{action['ifname']}: link {how} failed: {exc}") from None


def stop_process(record: Mapping[str, Any]) -> dict[str, Any]:
    """End a fault process by its recorded PID, only if it still runs what was started."""
    pid = int(record["pid"])
    if not runtime.pid_alive(pid):
        runtime._reap(pid)
        return {"pid": pid, "how": "already-exited"}
    if not runtime._is_our_process(pid, record):
        return {"pid": pid, "how": "not-ours"}
    return {"pid": pid, "how": runtime._terminate([pid])[pid]}


def stop_fault_processes(state_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """For ``lab down``: end every process recorded in ``faults.json`` (by PID)."""
    try:
        data = json.loads((Path(state_dir) / FAULTS_FILE).read_text(encoding="utf-8"))
        faults = [Fault.from_json(f) for f in data["faults"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no registry (or an unreadable one: the namespace sweep still gets them)
    stopped = []
    for fault in faults:
        for action in fault.actions:
            if action["type"] == "process" and "pid" in action:
                stopped.append({"node": f"fault {fault.id}", **stop_process(action)})
    return stopped


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


def _configure_trust(
    state: runtime.LabState, action: Mapping[str, Any], fault_id: str, line: str
) -> None:
    """One config session, committed: the change is on the switch whole or not at all."""
    session = f"lab-fault-{fault_id}"
    output = _mgmt_cli(
        state,
        action["switch"],
        # `commit` leaves configuration mode, as on EOS
        [f"configure session {session}", f"interface {action['interface']}", line, "commit"],
    )
    problems = [x.strip() for x in output.splitlines() if x.strip().startswith("%")]
    if problems:
        with contextlib.suppress(runtime.LabError):
            _mgmt_cli(state, action["switch"], [f"configure session {session} abort"])
        raise FaultError(
            f"{action['switch']} {action['interface']}: `{line}` refused by the switch CLI: "
            + "; ".join(problems)
        )


def _mgmt_cli(state: runtime.LabState, switch: str, lines: list[str]) -> str:
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


def roce_class(state: runtime.LabState) -> dict[str, int]:
    """The fabric's RoCE DSCP and priority: its profile, with the fabric file's overrides."""
    fabric_file = Path(state.data["fabric_file"])
    try:
        fabric = yaml.safe_load(fabric_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise FaultError(f"cannot read the lab's fabric file {fabric_file}: {exc}") from None
    reference = str(fabric.get("profile", ""))
    extra = [Path(p) for p in os.environ.get("ROCE_AGENT_PROFILES", "").split(os.pathsep) if p]
    here = fabric_file.parent
    if reference.endswith((".yml", ".yaml")):
        candidates = [here / reference]
    else:
        folders = [*extra, here / "profiles", here.parent / "profiles", BUILTIN_PROFILES]
        candidates = [d / f"{reference}{s}" for d in folders for s in (".yml", ".yaml")]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise FaultError(
            f"{fabric_file}: profile {reference!r} not found (needed for the RoCE class)"
        )
    try:
        profile = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise FaultError(f"cannot read the profile {path}: {exc}") from None
    roce = dict(profile.get("roce") or {})
    roce.update((fabric.get("overrides") or {}).get("roce") or {})
    try:
        return {"dscp": int(roce["dscp"]), "priority": int(roce["priority"])}
    except (KeyError, TypeError, ValueError):
        raise FaultError(f"{path}: roce.dscp / roce.priority missing or not numbers") from None


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
        elif action["type"] == "process":
            parts.append(
                f"PFC XOFF storm on {action['node']}:{action['ifname']} priority "
                f"{action['priority']}, pid {action.get('pid', '?')}"
            )
    return "; ".join(parts)

"""A ``roce-agent lab`` started by a test and always torn down, and the CLIs as a user runs them.

Every lab gets a unique name (``<tag><pid>``, so namespaces are ``clab-<tag><pid>-<node>``)
and a private state directory; teardown runs ``lab down`` and, only if that left anything,
deletes the namespaces its topology names — exactly those, by name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.device.fanout import results_or_raise, run_each
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent

REPO = Path(__file__).resolve().parents[3]
LEAFSPINE = REPO / "containerlab" / "roce-leafspine.clab.yml"
NODES = ("spine1", "spine2", "leaf1", "leaf2", "h1", "h2", "h3", "h4")
INCAST = REPO / "containerlab" / "roce-incast.clab.yml"  # one leaf, five hosts
PASSWORD_ENV = "ROCE_LAB_PASSWORD"


def lab_unavailable_reason() -> str | None:
    """Why lab tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "netns lab tests need root (network namespaces, veth pairs)"
    for tool in ("ip", "ethtool", "sysctl"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (apt-get install iproute2 ethtool procps)"
    probe = f"clabprobe{os.getpid()}"
    added = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if added.returncode != 0:
        return f"network namespaces unavailable: {added.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


LAB_UNAVAILABLE = lab_unavailable_reason()
requires_lab = pytest.mark.skipif(LAB_UNAVAILABLE is not None, reason=LAB_UNAVAILABLE or "")


def topology_nodes(topology: Path) -> tuple[str, ...]:
    """The nodes a containerlab topology file declares: each is a namespace of its lab."""
    document = yaml.safe_load(topology.read_text())
    return tuple(document["topology"]["nodes"])


# --------------------------------------------------------------------------- the CLIs


def _run_module(
    module: str, args: tuple[str | Path, ...], timeout: float, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m lab.cli ARGS`` as a user would run it (own process, real exit code)."""
    env = {k: v for k, v in os.environ.items() if k != "ROCE_LAB_STATE_DIR"}
    return _run_module("lab.cli", args, timeout, env)


def run_agent(
    *args: str | Path,
    timeout: float = 300,
    password: str = "admin",
    env: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m agent ARGS`` as a user runs it (own process, real exit code), with the lab
    switches' ``password`` in its environment; ``env`` sets more variables (None: unsets)."""
    environment = {**os.environ, PASSWORD_ENV: password}
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return _run_module("agent", args, timeout, environment)


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def ns_run(netns: str, *argv: str, timeout: float = 30) -> str:
    """Run a command inside a namespace; return stdout (raises on failure)."""
    return subprocess.run(
        ["ip", "netns", "exec", netns, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout


# --------------------------------------------------------------------------- one lab


@dataclass
class Lab:
    """A lab started by a test: name, state directory and the status JSON of ``up``."""

    name: str
    state_dir: Path
    status: dict[str, Any]

    def netns(self, node: str) -> str:
        return f"clab-{self.name}-{node}"

    def cli(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--lab", self.name, "--state-dir", self.state_dir)

    def exec(self, node: str, *lines: str) -> str:
        """``roce-agent lab exec NODE LINES``: what the switch printed (it must succeed)."""
        done = self.cli("exec", node, *lines)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def current_status(self) -> dict[str, Any]:
        result = self.cli("status", "-o", "json")
        assert result.returncode == 0, result.stderr
        status: dict[str, Any] = json.loads(result.stdout)
        return status

    def intent(self) -> FabricIntent:
        """The lab's fabric file as the agent in this process loads it (the switches'
        password from ``$ROCE_LAB_PASSWORD``: the lab's default unless a test set one)."""
        os.environ.setdefault(PASSWORD_ENV, "admin")
        return load_fabric(Path(self.status["fabric_file"])).intent


def probing_on(intent: FabricIntent, udp_port: int) -> FabricIntent:
    """``intent`` with its wire probes on ``udp_port`` (``validation.probe.udp_port``)."""
    probe = intent.validation.probe.model_copy(update={"udp_port": udp_port})
    validation = intent.validation.model_copy(update={"probe": probe})
    return intent.model_copy(update={"validation": validation})


def start_lab(
    name: str, state_dir: Path, topology: Path = LEAFSPINE, nos: str | None = None
) -> Lab:
    speaking = ["--nos", nos] if nos else []
    # A lab of qemu VMs boots them without KVM: 82 s on a quiet machine, 118 s at load 8-13
    # (measured); the limit is for a hung `lab up`, not a slow one.
    result = run_cli(
        "up", topology, "--name", name, "--state-dir", state_dir, "-o", "json", *speaking,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"lab up failed:\n{result.stdout}\n{result.stderr}"
    return Lab(name, state_dir, json.loads(result.stdout))


def stop_lab(name: str, state_dir: Path, topology: Path = LEAFSPINE) -> None:
    """``lab down``; if that leaves anything, delete this lab's namespaces by exact name."""
    result = run_cli("down", "--lab", name, "--state-dir", state_dir)
    netns = [f"clab-{name}-{node}" for node in topology_nodes(topology)]
    leftovers = [each for each in netns if netns_exists(each)]
    for left in leftovers:
        subprocess.run(["ip", "netns", "delete", left], capture_output=True)
    assert result.returncode == 0, f"lab down failed:\n{result.stdout}\n{result.stderr}"
    assert not leftovers, f"lab down left namespaces behind: {leftovers}"


@contextmanager
def exporter_serving(fabric: str | Path, *options: str, interval: str = "2s") -> Iterator[str]:
    """``roce-agent exporter FABRIC`` on a free loopback port (2 s polls, no host NICs, and
    ``options``), as a user runs it; yields its /metrics URL and stops it afterwards (a
    traceback on its stderr fails the test)."""
    from tests.lab.support.loopback import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "exporter", str(fabric), "--listen",
         f"127.0.0.1:{port}", "--interval", interval, "--no-host-nic", *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, PASSWORD_ENV: os.environ.get(PASSWORD_ENV, "admin")},
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
        assert "Traceback" not in err, err


@contextmanager
def host_storming(lab: Lab, host: str) -> Iterator[None]:
    """The lab's ``storm`` fault on ``host`` (PFC XOFF on the RoCE priority), removed after."""
    from lab.faults import LabFaults

    faults = LabFaults(lab.state_dir)
    fault = faults.add("storm", host)
    try:
        yield
    finally:
        faults.remove(fault.id)


def apply_fabric(lab: Lab, timeout: float = 120, connect_timeout: str = "10s") -> None:
    """``roce-agent apply`` of the lab's own fabric file: the switches become lossless."""
    applied = run_agent(
        "--connect-timeout", connect_timeout,
        "apply", lab.status["fabric_file"], "--yes", "--state-dir", lab.state_dir / "agent",
        timeout=timeout,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr


# --------------------------------------------------------------------------- many labs


@dataclass(frozen=True)
class _Started:
    name: str
    state_dir: Path
    topology: Path


class LabFactory:
    """Labs for one scope (a test, a module, the session), each under ``base``.

    A lab is recorded before ``up`` runs, so :meth:`stop_all` tears down every lab it was
    asked for, one whose start failed half-way too. ``start`` may run in several threads.
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self._started: dict[str, _Started] = {}
        self._lock = threading.Lock()
        self._environment = pytest.MonkeyPatch()

    def start(
        self,
        tag: str,
        topology: Path = LEAFSPINE,
        *,
        password: str | None = None,
        suffix: str = "",
        nos: str | None = None,
    ) -> Lab:
        """Lab ``<tag><pid><suffix>`` of ``topology``. With ``password`` the switches take it
        (the lab reads it at ``up``) and so does the agent in this process, both from
        ``$ROCE_LAB_PASSWORD``, set until :meth:`stop_all`. With ``nos`` every switch speaks
        that NOS (``lab up --nos``)."""
        name = f"{tag}{os.getpid()}{suffix}"
        started = _Started(name, self.base / name, topology)
        with self._lock:
            self._started[name] = started
            if password is not None:
                self._environment.setenv(PASSWORD_ENV, password)
        return start_lab(name, started.state_dir, topology, nos)

    def stop(self, lab: Lab) -> None:
        """Tear one lab down now (a test that checks what ``down`` leaves behind)."""
        with self._lock:
            started = self._started.pop(lab.name)
        stop_lab(started.name, started.state_dir, started.topology)

    def stop_all(self) -> None:
        """Tear every lab down, side by side; then raise the first failure, if any."""
        with self._lock:
            started, self._started = self._started, {}
        try:
            outcomes = run_each(
                started, lambda lab: stop_lab(lab.name, lab.state_dir, lab.topology)
            )
        finally:
            self._environment.undo()
        results_or_raise(outcomes)


# --------------------------------------------------------------------------- a NOS's lab


def incast_lab_speaking(nos: str) -> Any:
    """The module-scoped ``lab`` fixture of a NOS's lab tests: the one-leaf incast topology with
    every switch speaking ``nos`` (``lab up --nos``), lab ``<nos[:2]><pid>``. A test module
    takes it as ``lab = incast_lab_speaking("sonic")``."""

    @pytest.fixture(scope="module")
    def lab(module_labs: LabFactory) -> Lab:
        return module_labs.start(nos[:2], INCAST, nos=nos)

    return lab


def agent_state_dir() -> Any:
    """A module-scoped fixture: the agent's state directory for the module's runs (its audit
    log, pending changes), e.g. ``state = agent_state_dir()``."""

    @pytest.fixture(scope="module")
    def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp("agent")

    return state


def run_agent_in(state: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """:func:`run_agent` with the agent's state directory at ``state``."""
    return run_agent(*args, timeout=timeout, env={"ROCE_AGENT_STATE_DIR": str(state)})


def apply_from_factory(state: Path, fabric: str | Path, switch: str) -> None:
    """``drift`` finds the switch at its factory QoS, ``apply`` applies the fabric (the
    switch ``applied``), and ``drift`` then finds nothing: what a NOS's lab test starts with."""

    def device(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        devices = {d["device"]: d for d in json.loads(done.stdout)["devices"]}
        return devices[switch]  # type: ignore[no-any-return]

    before = run_agent_in(state, "drift", str(fabric), "--output", "json")
    assert before.returncode == 1 and device(before)["changes"] > 0, before.stdout
    applied = run_agent_in(state, "apply", str(fabric), "--yes", "--output", "json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert device(applied)["result"] == "applied"
    after = run_agent_in(state, "drift", str(fabric), "--output", "json")
    assert after.returncode == 0 and device(after)["changes"] == 0, after.stdout


@contextmanager
def labs_in(base: Path) -> Iterator[LabFactory]:
    """A :class:`LabFactory` whose labs are all torn down when the ``with`` ends."""
    factory = LabFactory(base)
    try:
        yield factory
    finally:
        factory.stop_all()

"""A lab switch with its management plane, for the ``test_mgmt_*`` lab tests.

Builds on :mod:`tests.lab.support.vswitch`: its :class:`Topology` creates one
switch namespace wired to host namespaces (unique names, removed by name at teardown) and
starts ``python -m lab.vswitch`` in it; here ``lab.mgmt`` is started next to it (root netns,
loopback only) through :func:`lab.mgmt.launcher.start_management`, and stopped by PID.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.mgmt.launcher import ManagementOptions, start_management, stop_management
from tests.lab.support import vswitch as fx
from tests.lab.support.loopback import free_port

USERNAME = "admin"
PASSWORD = "admin"
MGMT_HOST = "127.0.0.1"


@dataclass
class ManagedSwitch:
    """Topology + running vswitch + running ``lab.mgmt`` (its SSH port on loopback)."""

    name: str
    topo: fx.Topology
    vswitch: fx.VswitchProcess
    port: int
    state_dir: Path
    processes: list[Any] = field(default_factory=list)

    @property
    def control_path(self) -> str:
        """The vswitch control socket."""
        return self.vswitch.control_path

    def start_mgmt(self) -> None:
        """Start (or restart) the management process with the same state directory."""
        proc = start_management(
            ManagementOptions(
                self.name,
                MGMT_HOST,
                self.port,
                self.control_path,
                self.state_dir,
                USERNAME,
                PASSWORD,
                [h.switch_port for h in self.topo.hosts],
            )
        )
        self.processes.append(proc)

    def stop_mgmt(self) -> int | None:
        """Stop the current management process (by PID); returns its exit code."""
        proc = self.processes[-1]
        return stop_management(proc)

    def connect(self, **extra: Any) -> Any:
        """A netmiko ``arista_eos`` connection, exactly as the agent opens one."""
        from netmiko import ConnectHandler

        params: dict[str, Any] = {
            "device_type": "arista_eos",
            "host": MGMT_HOST,
            "port": self.port,
            "username": USERNAME,
            "password": PASSWORD,
        }
        params.update(extra)
        return ConnectHandler(**params)

    def dataplane_qos(self) -> dict[str, Any]:
        """The QoS the data plane runs with, asked over the control socket."""
        with self.vswitch.client() as client:
            qos: dict[str, Any] = client.get_config()["qos"]
            return qos

    def counters(self) -> dict[str, Any]:
        """The data plane's counters, straight from the control socket."""
        with self.vswitch.client() as client:
            counters: dict[str, Any] = client.counters()
            return counters

    def mgmt_log(self) -> str:
        """The management process log (for assertion messages)."""
        try:
            return (self.state_dir / "mgmt.log").read_text()[-3000:]
        except OSError:
            return "(no mgmt log)"


@contextlib.contextmanager
def managed_switch(tag: str, n_hosts: int = 3, name: str = "leaf1") -> Iterator[ManagedSwitch]:
    """Build it all; tear down exactly what was created, whatever happens."""
    topo = fx.Topology.create(tag, n_hosts=n_hosts)
    switch: ManagedSwitch | None = None
    try:
        vswitch = topo.start_switch(topo.base_config())
        switch = ManagedSwitch(
            name=name,
            topo=topo,
            vswitch=vswitch,
            port=free_port(),
            state_dir=topo.workdir / "mgmt-state",
        )
        switch.start_mgmt()
        yield switch
    finally:
        if switch is not None:
            for proc in switch.processes:
                stop_management(proc)
        topo.destroy()

"""Issue #41, "nothing reported that was not read": ``serve`` and ``exporter`` against a
fabric of one real switch and three that never answer SSH.

leaf1 is a lab EOS switch's SSH plane in this process (lab.mgmt.testing, a fake data plane,
its host key pinned); leaf2 is a closed port, leaf3 accepts and hangs up, leaf4 accepts and
never says a word. Both processes run at once. Once each has tried every switch (the
daemon: its reconcile and a scheduled playbook of checks; the exporter: a poll of each), a
scrape of each must hold, for the three switches never read, ``roce_device_up`` 0, the
state saying why, and no drift, counter, session or poll figure; every check about them
``unverified`` (never pass, fail or skipped); and ``last-reconcile.json`` must say
``read: false`` with no count of differences. leaf1, read, has its figures: the test can
fail.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from agent.device.failures import NOT_CONNECTED, TIMED_OUT, UNREACHABLE
from lab.mgmt.eos.personality import EosPersonality
from lab.mgmt.persistence import HOST_KEY
from lab.mgmt.ssh_server import AuthSettings
from lab.mgmt.switch import PortInfo
from lab.mgmt.testing import ServedSwitch, SshSwitchThread
from tests.unit.daemon_process import (
    REPO,
    Daemon,
    environment,
    fabric_on_loopback,
    free_port,
    scrape,
    serving,
)

UNREAD = ("leaf2", "leaf3", "leaf4")
# Series about a switch that exist before it was ever read: the exporter's knowledge of it
# (up, and why not, and the transport it reads it with), the plan, and the verdict "could not
# judge".
ALLOWED_UNREAD = {
    "roce_device_up", "roce_device_state", "roce_device_telemetry_info", "roce_intended_class_info",
}  # fmt: skip


class Peer:
    """A loopback port that accepts and then hangs up (``closes``) or says nothing
    (``silent``), as a switch whose SSH server is broken or wedged."""

    def __init__(self, mode: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.mode = mode
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "closes":
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@dataclass
class Fabric:
    path: Path
    playbook: Path


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fabric]:
    folder = tmp_path_factory.mktemp("not-read")
    served = ServedSwitch(
        EosPersonality, [PortInfo("Ethernet1", 10_000_000)], AuthSettings("admin", "admin")
    )
    switch = SshSwitchThread(folder / "leaf1-state", served)
    closes, silent = Peer("closes"), Peer("silent")
    key = asyncssh.read_private_key(str(folder / "leaf1-state" / HOST_KEY)).export_public_key()
    pinned = f"    host_key: '{key.decode().strip()}'\n"
    path = fabric_on_loopback(folder / "fabric.yml", {"leaf1": switch.port})
    others = fabric_on_loopback(
        folder / "others.yml", {"leaf2": free_port(), "leaf3": closes.port, "leaf4": silent.port}
    )
    text = path.read_text().replace("    ports:", pinned + "    ports:", 1)
    path.write_text(text + others.read_text().split("devices:\n", 1)[1])
    playbook = folder / "read-and-check.yml"
    playbook.write_text(
        "name: read-and-check\ndescription: read every switch, run every check\nsteps:\n"
        "  - collect: {counters: true}\n    stop_on_failure: false\n"
        "  - checks: {ids: all}\n"
    )
    try:
        yield Fabric(path, playbook)
    finally:
        switch.stop()
        closes.close()
        silent.close()


@dataclass
class Running:
    daemon: Daemon
    exporter: subprocess.Popen[str]
    exporter_port: int
    state: Path


@pytest.fixture(scope="module")
def running(fabric: Fabric, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("processes")
    daemon_port, exporter_port = free_port(), free_port()
    config = folder / "agent.yaml"
    config.write_text(
        f"fabric: {fabric.path}\nstate_dir: {folder / 'state'}\n"
        f"exporter: {{listen: '127.0.0.1:{daemon_port}', poll_interval_s: 2}}\n"
        "intervals: {reconcile_s: 3600}\n"
        f"playbooks: [{{name: {fabric.playbook}, every_s: 3600}}]\n"
    )
    exporter = subprocess.Popen(
        [sys.executable, "-m", "agent", "exporter", str(fabric.path), "--listen",
         f"127.0.0.1:{exporter_port}", "--interval", "2s", "--timeout", "3s"],
        cwd=REPO, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        with serving(config, daemon_port, folder, environment()) as daemon:
            daemon.logs.wait_for(lambda e: e["message"] == "started", 30)
            yield Running(daemon, exporter, exporter_port, folder / "state")
    finally:
        exporter.terminate()
        exporter.wait(15)


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` → value, the fabric label left out, labels in their order."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[re.sub(r'fabric="[^"]*",?', "", key).replace(",}", "}")] = float(value)
    return out


def about(found: dict[str, float], device: str) -> dict[str, float]:
    return {k: v for k, v in found.items() if f'device="{device}"' in k}


def families(series: dict[str, float]) -> set[str]:
    return {key.split("{", 1)[0] for key in series}


def wait_for_every_switch_tried(port: int, timeout: float) -> dict[str, float]:
    """A scrape once no switch is ``not_polled_yet`` and leaf1 is up."""
    deadline = time.monotonic() + timeout
    pending: list[str] = ["the exporter is not listening yet"]
    while True:
        try:
            found = samples(scrape(port))
        except OSError:  # still starting (its imports take seconds on a loaded machine)
            found = {}
        else:
            pending = [k for k, v in found.items() if 'state="not_polled_yet"' in k and v == 1]
        if found and not pending and found.get('roce_device_up{device="leaf1"}') == 1:
            return found
        assert time.monotonic() < deadline, f"not every switch polled: {pending}"
        time.sleep(1)


def reads_devices(series: str) -> bool:
    """Whether the check of a roce_check_result series reads devices (some judge the plan:
    their verdict stands without a read)."""
    from agent.observe.checks import CATALOG

    check = re.search(r'check="([^"]+)"', series)
    return check is not None and CATALOG[check[1]].reads_devices


def assert_nothing_about_the_unread(found: dict[str, float]) -> None:
    for device in UNREAD:
        series = about(found, device)
        assert series[f'roce_device_up{{device="{device}"}}'] == 0, device
        states = {k: v for k, v in series.items() if k.startswith("roce_device_state")}
        (now,) = [k for k, v in states.items() if v == 1]
        assert 'state="up"' not in now and 'state="not_polled_yet"' not in now, now
        checks = {
            k: v
            for k, v in series.items()
            if k.startswith("roce_check_result") and reads_devices(k)
        }
        judged = families(series) - ALLOWED_UNREAD - {"roce_check_result"}
        assert not judged, f"{device}: figures never read: {sorted(judged)}"
        for key, value in checks.items():
            assert value == (1 if 'result="unverified"' in key else 0), (device, key)


def test_the_exporter_says_not_read_and_nothing_else(running: Running) -> None:
    found = wait_for_every_switch_tried(running.exporter_port, 60)
    assert_nothing_about_the_unread(found)
    leaf1 = families(about(found, "leaf1"))
    assert {"roce_drift_items", "roce_queue_transmitted_packets_total", "roce_polls_total"} <= (
        leaf1
    ), leaf1
    assert found['roce_device_state{device="leaf4",state="timeout"}'] == 1  # silent: 3 s


def test_the_daemon_says_not_read_and_nothing_else(running: Running) -> None:
    daemon, state = running.daemon, running.state
    report = state / "reports" / "last-read-and-check.json"
    deadline = time.monotonic() + 240  # a silent switch costs a reconcile ~40 s to give up
    while not report.exists():
        daemon.logs.poll()  # keep its stdout pipe drained
        assert time.monotonic() < deadline and daemon.process.poll() is None, "no playbook ran"
        time.sleep(1)
    found = wait_for_every_switch_tried(daemon.port, 60)
    assert_nothing_about_the_unread(found)
    assert found['roce_drift_items{device="leaf1"}'] > 0  # read: the fresh switch differs
    verdicts = {k: v for k, v in about(found, "leaf1").items() if "roce_check_result" in k}
    assert any('result="fail"' in k and v == 1 for k, v in verdicts.items()), verdicts
    assert not any('result="unverified"' in k and v == 1 for k, v in verdicts.items())
    reconciled = json.loads((state / "last-reconcile.json").read_text())
    by_name = {d["device"]: d for d in reconciled["devices"]}
    assert sorted(reconciled["not_read"]) == sorted(UNREAD)
    for device in UNREAD:
        entry = by_name[device]
        assert (entry["read"], entry["changes"], entry["differences"]) == (False, None, None)
        assert entry["result"] in NOT_CONNECTED and entry["error"], entry
    assert by_name["leaf2"]["result"] == UNREACHABLE  # nothing listens on its port
    assert by_name["leaf4"]["result"] == TIMED_OUT  # connected, never answered
    assert by_name["leaf1"]["read"] and by_name["leaf1"]["changes"] > 0

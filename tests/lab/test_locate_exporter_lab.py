"""The daemon's scheduled `locate` playbook against a lab (issue #15, item 3): a fault injected
with `roce-agent lab fault` becomes `roce_locate_suspect` on the daemon's /metrics, scraped
over HTTP as Prometheus does, and the series disappears with the first run after the fault is
removed (the verdict the alert reads is always the latest run's)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, requires_lab, running_lab

from lab.faults import LabFaults

pytestmark = [pytest.mark.lab, requires_lab]

LINK = "leaf1:Ethernet1>spine1"  # frames leaving leaf1's Ethernet1 toward spine1
LAB_TARGET = "leaf1:eth1>spine1"  # the same in containerlab's spelling (both are accepted)
EVERY_S = 20  # the locate schedule here (600 s in production: README, RoceLocateSuspect)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text: str = answer.read().decode()
        return text


def locate_series(text: str) -> dict[str, float]:
    return {
        match[1]: float(match[2])
        for match in re.finditer(r"^(roce_locate_\w+(?:\{[^}]*\})?) (\S+)$", text, re.M)
    }


def next_verdict(port: int, after: float, timeout: float) -> dict[str, float]:
    """The locate series of the first run stored after ``after`` (Unix time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = locate_series(scrape(port))
        except OSError:
            found = {}
        stamps = [v for k, v in found.items() if k.startswith("roce_locate_last_run_")]
        if stamps and stamps[0] > after:
            return found
        time.sleep(1)
    raise AssertionError(f"no locate run stored within {timeout} s after {after}")


def test_scheduled_locate_serves_the_injected_fault_then_clears(tmp_path: Path) -> None:
    name = f"lx{os.getpid()}"
    with running_lab(name, tmp_path / name) as lab:
        env = {**os.environ, "ROCE_LAB_PASSWORD": "admin"}
        fabric = lab.status["fabric_file"]
        # A lab comes up without the plan's QoS: locate would rightly name every port.
        applied = subprocess.run(
            [sys.executable, "-m", "agent", "apply", fabric, "--yes", "--state-dir",
             str(tmp_path / "apply")],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
        faults = LabFaults(lab.state_dir)
        fault = faults.add("corrupt", LAB_TARGET, percent=20)
        port = free_port()
        config = tmp_path / "agent.yaml"
        config.write_text(
            f"fabric: {fabric}\nstate_dir: {tmp_path / 'state'}\n"
            f"exporter: {{listen: '127.0.0.1:{port}', poll_interval_s: 5}}\n"
            "intervals: {reconcile_s: 86400}\n"
            f"playbooks: [{{name: locate, every_s: {EVERY_S}}}]\n"
        )
        daemon = subprocess.Popen(
            [sys.executable, "-m", "agent", "serve", "--config", str(config)],
            cwd=REPO,
            env=env,
            stdout=(tmp_path / "daemon.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        try:
            started = time.time()
            faulty = next_verdict(port, 0, timeout=180)
            took = time.time() - started
            suspect = f'roce_locate_suspect{{element="{LINK}",fabric="{name}",kind="link"}}'
            assert faulty.get(suspect, 0) >= 0.5, (faulty, (tmp_path / "daemon.log").read_text())
            assert faulty[f'roce_locate_bad_paths{{fabric="{name}"}}'] > 0
            print(f"first verdict {took:.0f} s after the daemon started: {faulty}")

            faults.remove(fault.id)
            stamp_key = f'roce_locate_last_run_timestamp_seconds{{fabric="{name}"}}'
            # The run in flight when the fault went away may still see it; the daemon runs one
            # job at a time, so the second run stored after the removal started after it.
            in_flight = next_verdict(port, faulty[stamp_key], timeout=EVERY_S + 150)
            clean = next_verdict(port, in_flight[stamp_key], timeout=EVERY_S + 150)
            assert not [k for k in clean if k.startswith("roce_locate_suspect")], clean
            assert clean[f'roce_locate_paths{{fabric="{name}"}}'] > 0
            assert clean[f'roce_locate_bad_paths{{fabric="{name}"}}'] == 0
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
            faults.clear()

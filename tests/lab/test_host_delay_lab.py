"""Host delay is not link delay (issue #30, item 4), against faults injected in the lab.

One leaf-spine lab configured by `roce-agent apply`; `roce-agent locate` (no `--load`) with
``host-stall`` on h3 (every process of h3's namespace stopped 30 ms of every 100 ms: the
kernel still receives and stamps the probes, user space reads them late) and with the
``latency`` fault on h3's access link (the switch egress towards h3). The first must name
h3 as host delay and no link; the second the link and no host. The receivers' timestamp
source is read from the JSON: the lab's veths give software stamps (no PHC).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from lab.faults import LabFaults
from tests.lab.support.labs import Lab, LabFactory, apply_fabric, requires_lab, run_agent

pytestmark = [pytest.mark.lab, requires_lab]
DURATION_S = 3.0
ACCESS_INTO_H3 = "leaf2:Ethernet3>h3"
STALL = {"ms": 30.0}
DELAY = {"ms": 20.0}


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("hd", password="admin")
    apply_fabric(started)
    return started


def _locate(lab: Lab) -> dict[str, Any]:
    done = run_agent(
        "locate", lab.status["fabric_file"], "--duration", f"{DURATION_S:g}s", "--output", "json"
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    verdict: dict[str, Any] = json.loads(done.stdout)
    return verdict


def _stopped_in(netns: str) -> list[int]:
    pids = subprocess.run(
        ["ip", "netns", "pids", netns], capture_output=True, text=True, check=True
    ).stdout.split()
    states = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] == "T":
            states.append(int(pid))
    return states


def test_a_stalled_host_is_host_delay_not_its_access_link(lab: Lab) -> None:
    faults = LabFaults(lab.state_dir)
    added = faults.add("host-stall", "h3", **STALL)
    try:
        verdict = _locate(lab)
    finally:
        faults.remove(added.id)
    netns = added.actions[0]["netns"]
    time.sleep(0.2)
    assert _stopped_in(netns) == []  # removed cleanly: every process continued
    named = [(s["kind"], s["element"]) for s in verdict["suspects"]]
    assert ("host", "h3") in named, verdict
    assert not [s for s in verdict["suspects"] if s["kind"] == "link"], verdict
    into_h3 = [p for p in verdict["probed_paths"] if p["to"] == "h3"]
    assert {p["timestamp_source"] for p in into_h3} <= {"hardware", "software"}, into_h3
    assert min(p["host_delay_p90_ms"] for p in into_h3) > 5.0, into_h3


def test_latency_on_the_access_link_still_names_the_link(lab: Lab) -> None:
    faults = LabFaults(lab.state_dir)
    added = faults.add("latency", ACCESS_INTO_H3, **DELAY)
    try:
        verdict = _locate(lab)
    finally:
        faults.remove(added.id)
    first = verdict["suspects"][0]
    assert (first["kind"], first["element"]) == ("link", ACCESS_INTO_H3), verdict
    assert not [s for s in verdict["suspects"] if s["kind"] == "host"], verdict

"""`validate --no-traffic` and `validate --checks` on the leaf-spine lab with the fabric
applied: read-only runs pass, send no probe (the hosts' fabric interfaces barely move: a
pairwise probe alone sends thousands of frames), and run exactly the checks asked for."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.lab.support.labs import Lab, LabFactory, apply_fabric, ns_run, requires_lab
from tests.lab.support.labs import run_agent as agent

pytestmark = [pytest.mark.lab, requires_lab]

HOSTS = ("h1", "h2", "h3", "h4")
# Frames a host may send on its own in a run (neighbour discovery, ARP): far fewer than the
# pairwise probe's 1 Mb/s for 2 s between every pair of hosts.
BACKGROUND_FRAMES = 50


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("vn")
    apply_fabric(started)
    return started


def tx_frames(lab: Lab) -> dict[str, int]:
    return {
        host: int(ns_run(lab.netns(host), "cat", "/sys/class/net/eth1/statistics/tx_packets"))
        for host in HOSTS
    }


def validate(lab: Lab, *args: str) -> tuple[int, dict[str, Any]]:
    done = agent("validate", lab.status["fabric_file"], *args, "-o", "json")
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_no_traffic_passes_without_sending_a_probe(lab: Lab) -> None:
    before = tx_frames(lab)
    code, report = validate(lab, "--no-traffic")
    after = tx_frames(lab)
    assert code == 0, (report["steps"], report["checks"])
    sent = {host: after[host] - before[host] for host in HOSTS}
    assert all(frames < BACKGROUND_FRAMES for frames in sent.values()), sent
    skipped = [s for s in report["steps"] if s["status"] == "skipped"]
    assert [s["kind"] for s in skipped] == ["probe", "probe", "perftest"]
    assert {s["detail"]["reason"] for s in skipped} == {"--no-traffic: this step sends traffic"}
    assert report["probes"] == [] and report["selection"]["no_traffic"] is True
    ran = {c["check"] for c in report["checks"]}
    assert {"RC001", "RC003", "RC007", "RC008", "RC101", "RC103"} <= ran
    assert "RC301" not in ran


def test_checks_runs_only_those_and_sends_nothing(lab: Lab) -> None:
    before = tx_frames(lab)
    code, report = validate(lab, "--checks", "RC003,RC008")
    after = tx_frames(lab)
    assert code == 0, report["checks"]
    assert {c["check"] for c in report["checks"]} == {"RC003", "RC008"}
    assert {c["status"] for c in report["checks"]} == {"success"}
    assert all(after[h] - before[h] < BACKGROUND_FRAMES for h in HOSTS)


def test_the_same_run_with_traffic_does_send(lab: Lab) -> None:
    """The control: without --no-traffic the probes run and the counters move (so the
    bound above can tell the two apart)."""
    before = tx_frames(lab)
    code, report = validate(lab, "--checks", "RC301")
    after = tx_frames(lab)
    assert report["probes"], report["steps"]
    assert sum(after[h] - before[h] for h in HOSTS) > 10 * BACKGROUND_FRAMES, (before, after)
    assert code == 0, report["checks"]

"""A ring all-reduce among the lab's four hosts (:func:`agent.observe.probes.scenarios.
ring_allreduce`): every step arrives, nothing is lost, the completion time sits between the
line-rate bound and a small multiple of it, and the twin's completion time is within ±15 % of
the lab's (``roce-agent probe allreduce``)."""

from __future__ import annotations

import json

import pytest

from agent.observe.probes.scenarios import ring_allreduce
from tests.lab.support.labs import Lab, LabFactory, apply_fabric, requires_lab, run_agent

pytestmark = [pytest.mark.lab, requires_lab]
HOSTS = ["h1", "h2", "h3", "h4"]
SIZE = 400_000  # nccl-tests' size: 100 KB chunks, 6 steps, about 0.5 s of lab time
WIRE_OVERHEAD = 82  # RoCEv2 headers, FCS, preamble and gap per packet (agent.ops.twin_vs_lab)


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("rg")
    apply_fabric(started)
    return started


@pytest.mark.parametrize("payload", [1000, 4096])
def test_ring_allreduce_completes_near_the_line_rate(lab: Lab, payload: int) -> None:
    intent = lab.intent()
    done = ring_allreduce(intent, HOSTS, SIZE, payload=payload, deadline_s=30)
    assert done["passed"], done["failures"]
    assert done["lost"] == 0 and done["steps"] == 6
    # Every step of every rank arrived, in order of steps.
    chunk_frames = -(-SIZE // 4 // payload)  # ceil
    for rank in done["ranks_detail"]:
        times = rank["steps_arrived_s"]
        assert times == sorted(times) and rank["frames_received"] == [chunk_frames] * 6
    # Line-rate bound: 6 steps of a chunk at 10 Mb/s with the wire overhead. A ring cannot beat
    # it by more than the lab shaper's slack (lab/vswitch/dataplane.py: a frame due within
    # TX_LOOKAHEAD_S goes at once; 2 %), and a working one is not three times slower.
    bound = 6 * chunk_frames * (payload + WIRE_OVERHEAD) * 8 / 10e6
    assert 0.98 * bound <= done["time_s"] <= 3 * bound, (bound, done["time_s"])
    assert done["busbw_Bps"] == pytest.approx(done["algbw_Bps"] * 1.5)
    assert done["emulated_time_s"] == pytest.approx(done["time_s"] / 100)


def test_twin_predicts_the_lab_ring_within_15_percent(lab: Lab) -> None:
    """``roce-agent probe allreduce`` as a user runs it: the lab's ring and the twin's ring on
    the same fabric file, compared in the time of the fabric the lab stands for."""
    done = run_agent(
        "probe", "allreduce", lab.status["fabric_file"], "--hosts", ",".join(HOSTS),
        "--size", str(SIZE), "--deadline", "30s", "--output", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    lab_s, twin = result["emulated_time_s"], result["twin"]
    assert twin["time_s"] is not None and abs(twin["time_s"] - lab_s) <= 0.15 * lab_s, (twin, lab_s)
    assert twin["agrees"] and result["passed"]


def test_probe_allreduce_names_a_host_it_cannot_find(lab: Lab) -> None:
    done = run_agent(
        "probe", "allreduce", lab.status["fabric_file"], "--hosts", "h1,h9",
    )  # fmt: skip
    assert done.returncode == 2 and "h9" in done.stderr, done.stdout + done.stderr

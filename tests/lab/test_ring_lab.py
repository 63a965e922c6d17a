"""A ring all-reduce among the lab's four hosts (:func:`agent.observe.probes.scenarios.
ring_allreduce`): every step arrives, nothing is lost, the completion time sits between the
line-rate bound and a small multiple of it, and -- where the twin's collectives exist -- the
twin's completion time is within ±15 % of the lab's."""

from __future__ import annotations

import importlib.util

import pytest

from agent.observe.probes.scenarios import ring_allreduce
from tests.lab.support.labs import Lab, LabFactory, apply_fabric, requires_lab

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


@pytest.mark.skipif(
    importlib.util.find_spec("agent.twin.collectives") is None,
    reason="the twin's collectives (agent.twin.collectives) are not in this tree",
)
def test_twin_predicts_the_lab_ring_within_15_percent(lab: Lab) -> None:
    from agent.twin import collectives  # type: ignore[attr-defined,unused-ignore]
    from agent.twin.network import build_network

    intent = lab.intent()
    # The twin sends RoCE-MTU frames (4096 B at MTU 9000): the lab ring sends the same.
    lab_s = ring_allreduce(intent, HOSTS, SIZE, payload=4096, deadline_s=30)["emulated_time_s"]
    spec = collectives.CollectiveSpec("allreduce", 4, SIZE, hosts=tuple(HOSTS))
    twin = collectives.run_collective(build_network(intent), spec)
    assert twin.completed
    assert abs(twin.time_s - lab_s) <= 0.15 * lab_s, (twin.time_s, lab_s)

"""Where the switch decides the ECN mark (profile ``ecn.marking``, lossless.wred): at enqueue
from the depth a frame finds, or at dequeue from the depth it leaves behind (the RDMA ns-3 of
HPCC and htsim mark at dequeue).  At dequeue the mark leaves with the head of the queue, so
DCQCN hears of a queue one queueing delay sooner: the queue stays shorter and pauses less.
Checked on seeded draws of speed, sender count and seed, not only on the case measured."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.intent.loader import load_fabric
from agent.twin.network import load_network, star_fabric_yaml
from agent.twin.results import TwinReport, run_twin


def _incast(folder: Path, marking: str, speed: str, senders: int, seed: int) -> TwinReport:
    path = folder / f"star-{marking}.yml"
    path.write_text(
        star_fabric_yaml(senders + 1, speed, extra_overrides=f"ecn: {{marking: {marking}}}")
    )
    return run_twin(load_network(path), "incast", senders=senders, duration_s=2e-3, seed=seed)


def test_at_dequeue_an_8_to_1_incast_at_100g_queues_far_less(tmp_path: Path) -> None:
    """The measured case (docs/architecture.md): 8:1 at 100G, 2 ms, dcqcn-paper."""
    enq = _incast(tmp_path, "enqueue", "100G", 8, 1)
    deq = _incast(tmp_path, "dequeue", "100G", 8, 1)
    assert deq.queue_peak_bytes < enq.queue_peak_bytes / 2, (
        deq.queue_peak_bytes,
        enq.queue_peak_bytes,
    )
    assert enq.pfc_frames > 0 and deq.pfc_frames < enq.pfc_frames
    assert enq.lossless_drops == deq.lossless_drops == 0


@pytest.mark.parametrize("draw", [3, 14, 15, 92, 65])
def test_marking_at_dequeue_never_pauses_more(tmp_path: Path, draw: int) -> None:
    rng = random.Random(draw)
    speed, senders, seed = (
        rng.choice(["25G", "100G", "400G"]),
        rng.randint(2, 12),
        rng.randint(1, 99),
    )
    enq = _incast(tmp_path, "enqueue", speed, senders, seed)
    deq = _incast(tmp_path, "dequeue", speed, senders, seed)
    assert deq.pfc_frames <= enq.pfc_frames, (speed, senders, seed, deq.pfc_frames, enq.pfc_frames)
    assert deq.queue_p99_bytes <= enq.queue_p99_bytes * 1.05, (speed, senders, seed)
    assert enq.lossless_drops == deq.lossless_drops == 0


def test_the_profiles_mark_at_enqueue_and_the_field_is_checked(tmp_path: Path) -> None:
    """No vendor document of the NOSes driven says where their ASICs mark: the shipped
    profiles keep enqueue; a value other than the two is refused with its line."""
    path = tmp_path / "star.yml"
    path.write_text(star_fabric_yaml(3, "100G"))
    assert load_fabric(path).intent.profile.ecn.marking == "enqueue"
    path.write_text(star_fabric_yaml(3, "100G", extra_overrides="ecn: {marking: egress}"))
    with pytest.raises(Exception, match=r"star.yml:\d+:\d+: .*ecn.marking"):
        load_fabric(path)

"""The lab ring all-reduce's bookkeeping: its spec's bounds, and what the scenario concludes
from the ranks' results (the wire is tested in tests/lab/test_ring_lab.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.intent.loader import load_fabric
from agent.observe.probes.ring import RingSpec
from agent.observe.probes.scenarios import RingShape, ScenarioError, _ring_report, ring_allreduce

LAB_FABRIC = Path(__file__).resolve().parents[2] / "playbooks" / "fabrics" / "lab-leafspine.yml"


@pytest.mark.parametrize(
    ("field", "value"),
    [("steps", 0), ("steps", 2000), ("chunk_frames", 0), ("deadline_s", 0), ("deadline_s", 1e9)],
)
def test_a_rank_is_bounded(field: str, value: float) -> None:
    spec: dict[str, Any] = {"send": {}, "prev_qpn": 0x100, "steps": 6, "chunk_frames": 10,
                            "deadline_s": 5.0, field: value}  # fmt: skip
    with pytest.raises(ValueError, match=field):
        RingSpec(**spec)


def _rank(times: Sequence[float | None], received: int = 10, sent: int = 20) -> dict[str, Any]:
    complete = all(t is not None for t in times)
    return {"complete": complete, "time_s": times[-1] if complete else None,
            "steps_arrived_s": list(times), "frames_received": [received] * len(times),
            "frames_sent": sent}  # fmt: skip


@given(ranks=st.integers(2, 16), size=st.integers(1000, 10**9), time_s=st.floats(1e-3, 100))
@settings(max_examples=50, deadline=None)
def test_bandwidths_are_nccl_tests(ranks: int, size: int, time_s: float) -> None:
    intent = load_fabric(LAB_FABRIC).intent
    hosts = [f"h{i}" for i in range(ranks)]
    steps = 2 * (ranks - 1)
    results = [_rank([time_s / 2] * (steps - 1) + [time_s * (0.5 + i / ranks)], 10, 10 * steps)
               for i in range(ranks)]  # fmt: skip
    done = _ring_report(intent, RingShape(hosts, size, 1000, steps), results)
    slowest = max(r["time_s"] for r in results)
    assert done["passed"] and done["time_s"] == slowest and done["lost"] == 0
    assert done["algbw_Bps"] == pytest.approx(size / slowest)
    assert done["busbw_Bps"] == pytest.approx(size / slowest * 2 * (ranks - 1) / ranks)
    assert done["emulated_time_s"] == pytest.approx(slowest / intent.emulation.time_dilation)


def test_a_missing_step_fails_the_ring_naming_it() -> None:
    intent = load_fabric(LAB_FABRIC).intent
    results = [_rank([0.1, 0.2]), _rank([0.1, None], received=9)]
    done = _ring_report(intent, RingShape(["h1", "h2"], 20_000, 1000, 2), results)
    assert not done["passed"] and done["time_s"] is None and done["busbw_Bps"] is None
    assert done["failures"] == ["h2: missing steps [1]"]
    assert done["lost"] == 2  # 40 sent, 38 received


@pytest.mark.parametrize("hosts", [["h1"], ["h1", "h1"]])
def test_a_ring_needs_two_distinct_hosts(hosts: list[str]) -> None:
    with pytest.raises(ScenarioError, match="two or more distinct hosts"):
        ring_allreduce(load_fabric(LAB_FABRIC).intent, hosts, 400_000)

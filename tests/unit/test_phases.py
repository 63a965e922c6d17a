"""The one phase timer (common.phases)."""

from __future__ import annotations

import pytest

from common.phases import Phases


def test_phases_add_up_in_first_run_order_even_when_a_phase_fails() -> None:
    now = [0.0]
    phases = Phases(clock=lambda: now[0])
    with phases("paths"):
        now[0] += 2.0
    with pytest.raises(RuntimeError), phases("probes"):
        now[0] += 0.5
        raise RuntimeError("cut")
    with phases("paths"):
        now[0] += 1.0
    assert phases.durations == {"paths": 3.0, "probes": 0.5}
    assert list(phases.durations) == ["paths", "probes"]
    assert phases.total == 3.5

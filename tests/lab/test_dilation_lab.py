"""A time-faithful lab: with the hosts' DCQCN dilated to what the lab links stand for, a 2:1
incast is handled by ECN and DCQCN, not by PFC; at real time (factor 1) PFC does all the work.

Same lab, same switch thresholds (6-18 KB, PFC at 30 KB), same DCQCN parameters; only
``emulation.time_dilation`` differs between the two runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.intent.model import Emulation
from agent.observe.probes import scenarios
from tests.lab.support.dataplane import set_qos, switch_totals
from tests.lab.support.labs import Lab, LabFactory, requires_lab

pytestmark = [pytest.mark.lab, requires_lab]
DURATION_S = 2.0
LINE_BPS = 10_000_000


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("dl")


def _incast(lab: Lab, factor: int) -> dict[str, Any]:
    fabric = lab.intent()
    dilated = fabric.model_copy(update={"emulation": Emulation(time_dilation=factor)})
    set_qos(lab, pfc=True, ecn=True)  # also clears the switch counters
    result = scenarios.incast(dilated, "h3", ["h1", "h2"], duration_s=DURATION_S, dcqcn=True)
    result["switch"] = switch_totals(lab)
    return result


def test_dilated_dcqcn_acts_before_pfc_real_time_dcqcn_does_not(lab: Lab) -> None:
    factor = lab.intent().emulation.time_dilation
    assert factor > 1, "the leaf-spine lab declares what it stands for"
    real_time = _incast(lab, 1)
    dilated = _incast(lab, factor)
    for result in (real_time, dilated):
        assert result["totals"]["lost"] == 0, result["totals"]
        assert result["switch"]["headroom_drops"] == result["switch"]["tail_drops"] == 0
        assert result["totals"]["ce_marked"] > 0 and result["totals"]["cnps_received"] > 0
    # Dilated: the reaction point cuts and stays cut between packets, so the frames go out
    # paced below line rate, and the switch pauses them far less.
    assert dilated["time_dilation"] == factor
    assert dilated["totals"]["rate_cuts"] > 0
    for row in dilated["flows"]:
        assert row["paced_rate_bps"] < 0.8 * LINE_BPS, row
    # Real time: the rate is back at line rate before the next frame, PFC does the work. The
    # paced rate, not the achieved one: a sender the CPU holds back sends below its pace
    # (a clean-clone CI run under load read 8.0 Mb/s achieved).
    for row in real_time["flows"]:
        assert row["paced_rate_bps"] > 0.9 * LINE_BPS, row
    pauses = (real_time["totals"]["pfc_frames_received"], dilated["totals"]["pfc_frames_received"])
    assert pauses[1] * 4 <= pauses[0], f"PFC frames real time vs dilated: {pauses}"
    assert dilated["totals"]["paused_s"] * 4 <= real_time["totals"]["paused_s"]

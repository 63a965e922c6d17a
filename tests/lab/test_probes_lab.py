"""Wire validation on the leaf-spine lab: what the probes see equals what the switches count.

The lab switches' QoS is set through their control socket here (the SSH management plane and
the push path have their own tests); the probes then run exactly as a user runs them.
"""

from __future__ import annotations

import time

import pytest

from agent.observe.probes import scenarios
from tests.lab.support.dataplane import control, set_qos, switch_totals
from tests.lab.support.labs import Lab, LabFactory, probing_on, requires_lab

pytestmark = [pytest.mark.lab, requires_lab]


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("pr")


def test_pfc_off_probe_loss_equals_switch_drops(lab: Lab) -> None:
    set_qos(lab, pfc=False, ecn=False)
    result = scenarios.incast(lab.intent(), "h3", ["h1", "h2"], duration_s=2.0, dcqcn=False)
    counted = switch_totals(lab)
    assert result["totals"]["lost"] > 0
    assert result["totals"]["lost"] == counted["tail_drops"] + counted["headroom_drops"]
    assert not result["passed"]


def test_pfc_on_no_loss_and_pauses_on_the_wire(lab: Lab) -> None:
    set_qos(lab, pfc=True, ecn=False)
    result = scenarios.incast(lab.intent(), "h3", ["h1", "h2"], duration_s=2.0, dcqcn=False)
    counted = switch_totals(lab)
    assert result["totals"]["lost"] == 0
    assert result["totals"]["pfc_frames_received"] > 0  # the senders (NICs) were paused
    assert counted["pfc_tx"] > 0 and counted["tail_drops"] == counted["headroom_drops"] == 0


def test_ecn_marks_cnps_and_the_reaction_point_slows_the_senders(lab: Lab) -> None:
    set_qos(lab, pfc=True, ecn=True)
    result = scenarios.incast(lab.intent(), "h3", ["h1", "h2"], duration_s=2.0, dcqcn=True)
    totals = result["totals"]
    assert result["passed"], result["failures"]
    assert totals["lost"] == 0
    assert totals["ce_marked"] > 0 and totals["cnps_received"] > 0
    assert totals["rate_cuts"] > 0
    assert all(row["min_rate_bps"] < 10_000_000 * 0.75 for row in result["flows"])
    assert switch_totals(lab)["ecn_marked"] == totals["ce_marked"]


def test_storm_is_seen_on_the_wire_and_by_the_watchdog(lab: Lab) -> None:
    set_qos(lab, pfc=True, ecn=True, watchdog=True)
    result = scenarios.storm(lab.intent(), "h3", duration_s=1.5, rate_pps=200, traffic_from="h1")
    assert result["passed"], result["failures"]
    stats = result["sniffed"]["priorities"]["3"]
    assert stats["storms"] == 1 and stats["time_to_detect_s"][0] <= result["detection_bound_s"]
    time.sleep(1.0)  # restoration after restoration_ms without pause
    with control(lab, "leaf2") as c:
        watchdog = c.counters()["ports"]["eth3"]["queues"]["3"]["watchdog"]
    assert watchdog["storms_detected"] >= 1
    assert watchdog["storms_restored"] == watchdog["storms_detected"]
    assert watchdog["state"] == "operational"


def test_pairwise_every_host_pair_without_loss(lab: Lab) -> None:
    set_qos(lab, pfc=True, ecn=True)
    result = scenarios.pairwise(lab.intent(), rate_bps=500_000, duration_s=1.5)
    assert result["passed"], result["failures"]
    assert len(result["flows"]) == 12
    assert all(row["received"] == row["sent"] > 0 for row in result["flows"])
    # No host here has an RDMA device: RoCEv2's own port, and the output says why.
    assert result["transport"]["udp_port"] == 4791
    assert "no RDMA device" in result["transport"]["reason"]


def test_probes_on_another_udp_port_ride_the_lossless_class_by_dscp(lab: Lab) -> None:
    """What probes do on RDMA hosts (``validation.probe.udp_port``, or ``auto`` there): the
    switches classify by DSCP, so the same queue marks them, PFC holds them, the receiver
    answers with CNPs on that port and the senders slow down."""
    set_qos(lab, pfc=True, ecn=True)
    moved = probing_on(lab.intent(), 54791)
    result = scenarios.incast(moved, "h3", ["h1", "h2"], duration_s=2.0, dcqcn=True)
    assert result["transport"] == {
        "udp_port": 54791, "reason": "set by validation.probe.udp_port", "rdma": {},
    }  # fmt: skip
    totals = result["totals"]
    assert result["passed"], result["failures"]
    assert totals["lost"] == 0
    assert totals["ce_marked"] > 0 and totals["cnps_received"] > 0 and totals["rate_cuts"] > 0
    # Marked in queue 3 of the switches: the lossless class, chosen by DSCP, not by port.
    assert switch_totals(lab)["ecn_marked"] == totals["ce_marked"]

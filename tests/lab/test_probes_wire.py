"""Probes on a real veth link between two namespaces: pacing, counts, PFC honouring by the
sender, CNP generation by the receiver and the DCQCN rate cut it causes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agent.intent import sizing
from agent.observe.probes.packets import ECN_CE
from agent.observe.probes.runner import NetnsRunner
from tests.lab.support.netns_pair import Pair, requires_netns, veth_pair

pytestmark = [
    pytest.mark.lab,
    requires_netns,
]
LINK = 10_000_000


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with veth_pair("pw") as created:
        yield created


def test_paced_flow_arrives_complete_and_never_above_rate(pair: Pair) -> None:
    receiver = NetnsRunner("b", pair.b).start(
        "receive", {"ifname": "eth1", "duration_s": 8, "link_speed_bps": LINK,
                    "idle_timeout_s": 0.5, "expected": {f"{pair.ip_a}/0x100": 300}},
    )  # fmt: skip
    receiver.wait_ready()
    sent = NetnsRunner("a", pair.a).start(
        "send", {"ifname": "eth1", "dst_ip": pair.ip_b, "rate_bps": 5_000_000,
                 "link_speed_bps": LINK, "count": 300, "size": 500},
    ).result(timeout=20)  # fmt: skip
    got = receiver.result(timeout=20)
    assert sent["sent"] == 300
    assert sent["send_rate_bps"] <= 5_000_000
    assert got["totals"]["received"] == 300
    assert got["totals"]["lost"] == 0 and got["totals"]["icrc_errors"] == 0
    flow = got["flows"][0]
    assert (flow["src_ip"], flow["qpn"], flow["dscp"]) == (pair.ip_a, 0x100, 26)
    assert flow["latency"]["count"] == 300 and flow["latency"]["max_s"] < 0.5


def test_sender_honours_pfc_like_a_nic(pair: Pair) -> None:
    """XOFF on priority 3 from the far end stops the RoCE flow for the paused time."""
    quanta = 2000  # 102.4 ms at 10 Mb/s
    sender = NetnsRunner("a", pair.a).start(
        "send", {"ifname": "eth1", "dst_ip": pair.ip_b, "rate_bps": 2_000_000,
                 "link_speed_bps": LINK, "duration_s": 2.0, "size": 200},
    )  # fmt: skip
    time.sleep(0.3)
    storm = NetnsRunner("b", pair.b).start(
        "storm", {"ifname": "eth1", "priorities": [3], "duration_s": 0.8, "rate_pps": 50,
                  "quanta": quanta},
    ).result(timeout=10)  # fmt: skip
    sent = sender.result(timeout=10)
    assert storm["frames_sent"] >= 35
    assert sent["pfc_frames_received"] == storm["frames_sent"]
    # Paused from the first XOFF until the last one's quanta ran out.
    expected = 0.8 + sizing.pause_quanta_duration_s(quanta, LINK)
    assert sent["paused_s"] == pytest.approx(expected, rel=0.15)
    unpaused = 2.0 - sent["paused_s"]
    packet_time = (200 + 58 + 24) * 8 / 2_000_000
    assert sent["sent"] <= unpaused / packet_time * 1.05 + 1


def test_pause_on_another_priority_is_ignored(pair: Pair) -> None:
    sender = NetnsRunner("a", pair.a).start(
        "send", {"ifname": "eth1", "dst_ip": pair.ip_b, "rate_bps": 1_000_000,
                 "link_speed_bps": LINK, "duration_s": 1.0, "size": 200},
    )  # fmt: skip
    time.sleep(0.2)
    NetnsRunner("b", pair.b).start(
        "storm", {"ifname": "eth1", "priorities": [4], "duration_s": 0.4, "rate_pps": 50},
    ).result(timeout=10)  # fmt: skip
    sent = sender.result(timeout=10)
    assert sent["pfc_frames_received"] > 0 and sent["paused_s"] == 0


def test_ce_marks_bring_cnps_and_dcqcn_cuts_the_rate(pair: Pair) -> None:
    """Receiver as notification point, sender as reaction point, end to end on the wire."""
    dcqcn = sizing.dcqcn_nic_defaults()
    receiver = NetnsRunner("b", pair.b).start(
        "receive", {"ifname": "eth1", "duration_s": 6, "link_speed_bps": LINK,
                    "idle_timeout_s": 0.5, "min_time_between_cnps_us": 50_000},
    )  # fmt: skip
    receiver.wait_ready()
    sent = NetnsRunner("a", pair.a).start(
        "send", {"ifname": "eth1", "dst_ip": pair.ip_b, "rate_bps": 8_000_000,
                 "link_speed_bps": LINK, "duration_s": 1.5, "size": 500, "ecn": ECN_CE,
                 "dcqcn": dcqcn},
    ).result(timeout=10)  # fmt: skip
    got = receiver.result(timeout=10)
    assert got["totals"]["ce_marked"] == got["totals"]["received"] > 0
    # One CNP per 50 ms at most for the QP, as configured.
    assert 0 < got["cnps_sent"] <= 1.5 / 0.05 + 2
    assert sent["cnps_received"] == got["cnps_sent"]
    assert sent["rate_cuts"] > 0
    assert sent["min_rate_bps"] < 8_000_000 * 0.6


def test_probe_processes_stop_by_themselves(pair: Pair) -> None:
    started = time.monotonic()
    done = NetnsRunner("b", pair.b).start(
        "sniff-pfc", {"interfaces": ["eth1"], "duration_s": 0.5, "link_speed_bps": LINK},
    ).result(timeout=5)  # fmt: skip
    assert time.monotonic() - started < 3
    assert done["interfaces"]["eth1"]["priorities"]["3"]["frames"] == 0


def test_bad_spec_is_reported_not_crashed(pair: Pair) -> None:
    from agent.observe.probes.runner import ProbeError

    with pytest.raises(ProbeError, match="rate_bps"):
        NetnsRunner("a", pair.a).start(
            "send", {"ifname": "eth1", "dst_ip": pair.ip_b, "rate_bps": 50_000_000,
                     "link_speed_bps": LINK, "count": 1},
        ).result(timeout=10)  # fmt: skip

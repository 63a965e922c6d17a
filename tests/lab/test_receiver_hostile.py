"""The live receiver on a real veth link under frames from strangers and a QP flood (issue #11):
its state stays bounded, foreign frames are only counted and cannot end the run early."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from agent.observe.probes.runner import NetnsRunner
from tests.lab.support.labs import REPO
from tests.lab.support.netns_pair import Pair, requires_netns, veth_pair

pytestmark = [
    pytest.mark.lab,
    requires_netns,
]
LINK = 10_000_000
STRANGER = "198.19.254.9"  # not a sender the receiver was told about

INJECT = """
import sys
from agent.observe.probes.packets import Flow, RoceTemplate
from agent.observe.probes.rawsock import REJECT_ALL_FILTER, open_port
src_mac, dst_mac, src_ip, dst_ip, first_qpn, qpns, count = sys.argv[1:]
sock = open_port("eth1", bpf=REJECT_ALL_FILTER)
for qpn in range(int(first_qpn), int(first_qpn) + int(qpns)):
    template = RoceTemplate(Flow(src_mac, dst_mac, src_ip, dst_ip, qpn=qpn, size=64))
    for seq in range(int(count)):
        sock.send(template.frame(seq, seq, 0))
sock.close()
"""


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with veth_pair("rh", subnet_index=3) as created:
        yield created


def inject(pair: Pair, src_ip: str, first_qpn: int, qpns: int, count: int) -> None:
    subprocess.run(
        ["ip", "netns", "exec", pair.a, sys.executable, "-c", INJECT, pair.mac_a, pair.mac_b,
         src_ip, pair.ip_b, str(first_qpn), str(qpns), str(count)],
        check=True, capture_output=True, timeout=30, cwd=REPO,
    )  # fmt: skip


def test_strangers_and_a_qp_flood_leave_the_receiver_bounded(pair: Pair) -> None:
    receiver = NetnsRunner("b", pair.b).start(
        "receive", {"ifname": "eth1", "duration_s": 8, "link_speed_bps": LINK,
                    "idle_timeout_s": 1.0, "senders": [pair.ip_a], "max_flows": 16},
    )  # fmt: skip
    receiver.wait_ready()
    inject(pair, STRANGER, 0x100, 50, 4)  # 200 foreign frames over 50 QPs
    time.sleep(1.6)  # longer than the idle timeout: foreign frames must not have started it
    inject(pair, pair.ip_a, 0x100, 40, 5)  # 40 QPs from the real sender, 16 tracked
    got = receiver.result(timeout=20)
    assert got["senders"] == [pair.ip_a]
    assert got["totals"]["foreign_frames"] == 200
    assert {f["src_ip"] for f in got["flows"]} == {pair.ip_a}
    assert len(got["flows"]) == 16 and got["max_flows"] == 16
    assert got["totals"]["received"] == 16 * 5 and got["totals"]["lost"] == 0
    assert got["totals"]["untracked_frames"] == 24 * 5
    assert got["flows_overflow"] is True
    assert any("flow cap reached" in w for w in got["warnings"])

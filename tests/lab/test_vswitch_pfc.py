"""lab.vswitch PFC: lossless 2:1 incast (XOFF/XON on the wire, ECN marks), the same incast
lossy (drops == sent - received), pause quanta honoured with the right duration, XOFF refresh
and headroom drops."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.lab.support import frames
from tests.lab.support import vswitch as fx

pytestmark = [pytest.mark.lab, fx.requires_vswitch_lab]

ROCE_PORT = 4791
COUNT = 1500  # frames per sender: 1.2 s alone at 10 Mb/s, 2.4 s through the 2:1 bottleneck


@pytest.fixture(scope="module")
def topo() -> Iterator[fx.Topology]:
    with fx.Topology.create("pfc", n_hosts=3) as topology:
        yield topology


def _incast_config(topo: fx.Topology, pfc: bool) -> dict[str, Any]:
    config = topo.base_config()
    lossless = {"pfc_enabled": pfc, "pfc_priorities": [3]}
    config["qos"]["ports"] = {
        "eth1": lossless,
        "eth2": lossless,
        "eth3": {
            **lossless,
            # ECN marks well below the XOFF threshold (30000 B per ingress) so that DCQCN
            # senders would slow down before PFC fires.
            "queues": {
                "3": {"ecn": {"min_bytes": 5000, "max_bytes": 20000, "max_probability": 50}}
            },
        },
    }
    return config


def _run_incast(topo: fx.Topology, pfc: bool) -> dict[str, Any]:
    """Two pause-honouring senders (h1, h2) -> h3 at line rate each, through eth3."""
    h1, h2, h3 = topo.host(1), topo.host(2), topo.host(3)
    with fx.Rig(topo) as rig:
        switch = rig.switch(_incast_config(topo, pfc))
        rig.sink(h3, ROCE_PORT)
        captures = {name: rig.capture(h) for name, h in (("h1", h1), ("h2", h2), ("h3", h3))}
        results = fx.incast_into_h3(topo, switch, COUNT, start_in=1.0)
        sent = sum(r["sent"] for r in results)
        with switch.client() as client:
            counters = client.counters()
        received = captures["h3"].udp(ROCE_PORT)
        return {
            "results": results,
            "sent": sent,
            "received": received,
            "counters": counters,
            "pfc_h1": captures["h1"].pfc(),
            "pfc_h2": captures["h2"].pfc(),
            "log": switch.log_tail(),
        }


def _all_drops(counters: dict[str, Any]) -> int:
    total = 0
    for port in counters["ports"].values():
        total += sum(port["drops"].values()) + sum(port["ingress"]["headroom_drops"])
        total += port["rx_overruns"]
        for queue in port["queues"].values():
            total += queue["tail_drops"] + queue["watchdog"]["dropped_packets"]
    return total


def test_incast_with_pfc_is_lossless_and_pauses_the_senders(topo: fx.Topology) -> None:
    run = _run_incast(topo, pfc=True)
    counters = run["counters"]["ports"]
    assert [r["sent"] for r in run["results"]] == [COUNT, COUNT]
    received = run["received"]
    unique = {(u.src_ip, u.seq) for u in received}
    assert len(received) == len(unique) == 2 * COUNT, run["log"]
    assert _all_drops(run["counters"]) == 0

    for host, port in (("h1", "eth1"), ("h2", "eth2")):
        pfc_frames = run[f"pfc_{host}"]
        assert pfc_frames, f"no PFC frame captured on {host}"
        xoff = xon = 0
        for _ts, frame in pfc_frames:
            cev, quanta = frames.parse_pfc(frame) or (0, [])
            # 60 bytes on the wire without FCS, one class enabled, all 8 time fields present.
            assert len(frame) == 60 and cev == 1 << 3 and len(quanta) == 8
            assert frame[6:12] == frames.mac_bytes(topo.host(int(port[-1])).switch_mac)
            assert quanta[3] in (0, 0xFFFF) and quanta[:3] + quanta[4:] == [0] * 7
            xoff += quanta[3] == 0xFFFF
            xon += quanta[3] == 0
        pfc = counters[port]["pfc"]
        assert xoff >= 1 and xon >= 1
        assert (xoff, xon) == (pfc["tx_xoff"][3], pfc["tx_xon"][3])
        # Ingress accounting crossed XOFF but never needed more than the headroom.
        watermark = counters[port]["ingress"]["watermark_bytes"][3]
        assert 30000 < watermark <= 30000 + 20000
    assert all(r["xoff_rx"] >= 1 and r["paused_s"] > 0 for r in run["results"])

    # Independent dissection of one captured XOFF by scapy's 802.1Qbb layer.
    from scapy.contrib.mac_control import MACControlClassBasedFlowControl
    from scapy.layers.l2 import Ether

    xoff_frame = next(f for _t, f in run["pfc_h1"] if (frames.parse_pfc(f) or (0, [0] * 8))[1][3])
    pfc_layer = Ether(xoff_frame)[MACControlClassBasedFlowControl]
    assert pfc_layer.c3_enabled == 1 and pfc_layer.c3_pause_time == 0xFFFF

    # ECN: thresholds below XOFF -> CE marks reach the receiver, and the switch counted them.
    marked = sum(1 for u in received if u.ecn == 3)
    assert marked > 0
    assert marked == counters["eth3"]["queues"]["3"]["ecn_marked"]
    assert all(u.ecn in (2, 3) for u in received)


def test_incast_without_pfc_drops_and_counts_exactly(topo: fx.Topology) -> None:
    run = _run_incast(topo, pfc=False)
    counters = run["counters"]["ports"]
    sent = run["sent"]
    received = run["received"]
    tail_drops = counters["eth3"]["queues"]["3"]["tail_drops"]
    assert sent == 2 * COUNT
    assert tail_drops > 0
    assert len({(u.src_ip, u.seq) for u in received}) == len(received)
    assert _all_drops(run["counters"]) == tail_drops == sent - len(received)
    assert not run["pfc_h1"] and not run["pfc_h2"]
    assert sum(counters["eth1"]["pfc"]["tx_xoff"]) == 0
    assert counters["eth3"]["queues"]["3"]["watermark_bytes"] <= 60000


def _first_arrival(capture: fx.Capture, after: float, timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        times = [u.ts for u in capture.udp(ROCE_PORT) if u.ts >= after]
        if times:
            return min(times)
        time.sleep(0.01)
    return None


def test_received_pause_lasts_quanta_times_512_bit_times(topo: fx.Topology) -> None:
    """XOFF with quanta Q pauses class 3 for Q*512/speed (±10 %); XON resumes at once."""
    config = topo.base_config()
    config["qos"]["ports"] = {"eth3": {"pfc_enabled": True, "pfc_priorities": [3]}}
    h1, h3 = topo.host(1), topo.host(3)
    data = frames.build_udp(h1.mac, h1.switch_mac, h1.ip, h3.ip, 1234, ROCE_PORT, b"q", dscp=26)
    with fx.Rig(topo) as rig:
        switch = rig.switch(config)
        rig.sink(h3, ROCE_PORT)
        capture = rig.capture(h3)
        tx, inject = rig.raw(h1), rig.raw(h3)
        client = switch.client()
        for quanta in (4000, 8000):
            expected = quanta * 512 / topo.speed_bps
            t0 = time.time()
            inject.send(frames.build_pfc(h3.mac, {3: quanta}))
            time.sleep(0.02)
            tx.send(data)
            eth3 = client.counters()["ports"]["eth3"]
            assert eth3["paused"][3] is True
            assert eth3["queues"]["3"]["depth_bytes"] > 0
            arrival = _first_arrival(capture, t0, expected + 1.0)
            assert arrival is not None, switch.log_tail()
            assert abs((arrival - t0) - expected) <= 0.10 * expected, (quanta, arrival - t0)

        # Maximum pause (3.36 s at 10 Mb/s), then XON after 150 ms: traffic resumes at XON.
        t0 = time.time()
        inject.send(frames.build_pfc(h3.mac, {3: 0xFFFF}))
        time.sleep(0.02)
        tx.send(data)
        time.sleep(0.13)
        t_xon = time.time()
        inject.send(frames.build_pfc(h3.mac, {3: 0}))
        arrival = _first_arrival(capture, t0, 1.0)
        assert arrival is not None and 0 <= arrival - t_xon <= 0.03, (arrival, t_xon)
        eth3 = client.counters()["ports"]["eth3"]
        assert eth3["pfc"]["rx_xoff"][3] == 3 and eth3["pfc"]["rx_xon"][3] == 1

        # Class 0 is not no-drop on eth3: a pause for it is counted but not honoured.
        t0 = time.time()
        inject.send(frames.build_pfc(h3.mac, {0: 0xFFFF}))
        time.sleep(0.02)
        tx.send(frames.build_udp(h1.mac, h1.switch_mac, h1.ip, h3.ip, 1234, ROCE_PORT, b"0"))
        arrival = _first_arrival(capture, t0, 1.0)
        assert arrival is not None and arrival - t0 < 0.1
        assert client.counters()["ports"]["eth3"]["pfc"]["rx_xoff"][0] == 1
        client.close()


def test_xoff_is_refreshed_and_headroom_overflow_is_counted(topo: fx.Topology) -> None:
    """A sender that ignores pause: XOFF is refreshed before it expires, the lossless class
    never tail-drops (even past the lossy queue limit), and only what overflows xoff +
    headroom is dropped -- counted as headroom drops of the ingress priority."""
    config = topo.base_config()
    config["ports"][0]["speed_bps"] = 100_000_000  # eth1: pause 0xFFFF = 335.5 ms, refresh 168
    config["ports"][2]["buffer"] = {  # eth3: lossy limit far below what lossless will queue
        "xoff_bytes": 30000,
        "xon_bytes": 15000,
        "headroom_bytes": 20000,
        "queue_limit_bytes": 20000,
    }
    lossless = {"pfc_enabled": True, "pfc_priorities": [3]}
    config["qos"]["ports"] = {"eth1": lossless, "eth3": lossless}
    h1, h3 = topo.host(1), topo.host(3)
    with fx.Rig(topo) as rig:
        switch = rig.switch(config)
        rig.sink(h3, ROCE_PORT)
        cap1, cap3 = rig.capture(h1), rig.capture(h3)
        tx, inject = rig.raw(h1), rig.raw(h3)
        inject.send(frames.build_pfc(h3.mac, {3: 0xFFFF}))  # hold eth3 class 3 for 3.4 s
        time.sleep(0.02)
        for seq in range(60):
            tx.send(
                frames.build_udp(
                    h1.mac, h1.switch_mac, h1.ip, h3.ip, 7, ROCE_PORT,
                    seq.to_bytes(4, "big"), dscp=26, size=1000,
                )
            )  # fmt: skip
        time.sleep(1.0)
        with switch.client() as client:
            ports = client.counters()["ports"]
            held = [ts for ts, f in cap1.pfc() if (frames.parse_pfc(f) or (0, [0] * 8))[1][3]]
            assert ports["eth1"]["ingress"]["headroom_drops"][3] == 10
            assert ports["eth1"]["ingress"]["buffered_bytes"][3] == 50000
            assert ports["eth3"]["queues"]["3"]["depth_bytes"] == 50000
            assert ports["eth3"]["queues"]["3"]["tail_drops"] == 0
            assert ports["eth1"]["pfc"]["tx_xon"][3] == 0
            assert ports["eth1"]["pfc"]["tx_xoff"][3] == len(held) >= 5
            gaps = [b - a for a, b in itertools.pairwise(held)]
            pause_s = 0xFFFF * 512 / 100e6
            assert all(gap < pause_s for gap in gaps), gaps  # refreshed before expiry
            assert all(abs(gap - pause_s / 2) < 0.05 for gap in gaps), gaps

            inject.send(frames.build_pfc(h3.mac, {3: 0}))
            assert fx.wait_for(lambda: len(cap3.udp(ROCE_PORT)) == 50, 2.0)
            assert fx.wait_for(
                lambda: client.counters()["ports"]["eth1"]["pfc"]["tx_xon"][3] == 1, 1.0
            )
        xon = [f for _ts, f in cap1.pfc() if (frames.parse_pfc(f) or (0, [1] * 8))[1][3] == 0]
        assert len(xon) == 1

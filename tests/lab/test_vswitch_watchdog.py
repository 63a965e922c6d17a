"""lab.vswitch PFC watchdog: a PFC storm injected from a host is detected within
timeout + one polling interval, mitigated per the action, and restored after recovery time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.lab.support import frames
from tests.lab.support import vswitch as fx

pytestmark = [pytest.mark.lab, fx.requires_vswitch_lab]

TIMEOUT_S, POLLING_S, RECOVERY_S = 0.2, 0.1, 0.4
# Scheduling noise on a shared 2-core machine: allowed lateness on top of the spec'd bound.
SLACK_S = 0.12
STORM_S = 1.0
WATCHDOG = {
    "enabled": True,
    "detection_ms": int(TIMEOUT_S * 1000),
    "restoration_ms": int(RECOVERY_S * 1000),
    "polling_ms": int(POLLING_S * 1000),
    "action": "drop",
}


@pytest.fixture(scope="module")
def topo() -> Iterator[fx.Topology]:
    with fx.Topology.create("wd", n_hosts=3) as topology:
        yield topology


@dataclass
class StormRun:
    storm_start: float
    storm_end: float
    mono_to_real: float  # add to a monotonic time to compare with capture (realtime) stamps
    sent_at: dict[int, float] = field(default_factory=dict)  # seq -> monotonic send time
    samples: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    def first(self, predicate: Any) -> float | None:
        return next((t for t, q in self.samples if predicate(q)), None)


def _storm(rig: fx.Rig, switch: fx.VswitchProcess) -> StormRun:
    """XOFF every 10 ms for STORM_S while h1 sends a class-3 frame every 10 ms; poll counters."""
    h1, h3 = rig.topo.host(1), rig.topo.host(3)
    tx, inject = rig.raw(h1), rig.raw(h3)
    xoff = frames.build_pfc(h3.mac, {3: 0xFFFF})
    client = rig.enter_context(switch.client())
    start = time.monotonic()
    run = StormRun(start, start + STORM_S, time.time() - time.monotonic())
    seq = 0
    next_poll = start
    restored_at: float | None = None
    while True:
        now = time.monotonic()
        if now < run.storm_end:
            inject.send(xoff)
        tx.send(
            frames.build_udp(
                h1.mac, h1.switch_mac, h1.ip, h3.ip, 1, 4791, seq.to_bytes(4, "big"), dscp=26
            )
        )
        run.sent_at[seq] = now
        seq += 1
        if now >= next_poll:
            q3 = client.counters()["ports"]["eth3"]["queues"]["3"]
            run.samples.append((time.monotonic(), q3))
            next_poll = now + 0.02
            if restored_at is None and q3["watchdog"]["storms_restored"] >= 1:
                restored_at = now
            if restored_at is not None and now > restored_at + 0.2:
                break  # some traffic after restoration, then stop
            if now > run.storm_end + 2.0:
                break
        time.sleep(0.01)
    time.sleep(0.3)  # let the last frames drain to the capture
    run.samples.append((time.monotonic(), client.counters()["ports"]["eth3"]["queues"]["3"]))
    return run


def _storm_through(
    topo: fx.Topology, config: dict[str, Any]
) -> tuple[StormRun, list[frames.Udp], fx.VswitchProcess]:
    """A switch with ``config`` through :func:`_storm`; the run, what h3 received, the switch
    (stopped: its log remains)."""
    h3 = topo.host(3)
    with fx.Rig(topo) as rig:
        switch = rig.switch(config)
        rig.sink(h3, 4791)
        capture = rig.capture(h3)
        run = _storm(rig, switch)
        received = capture.udp(4791)
    return run, received, switch


def test_storm_detected_dropped_and_restored(topo: fx.Topology) -> None:
    config = topo.base_config()
    lossless = {"pfc_enabled": True, "pfc_priorities": [3]}
    config["qos"]["ports"] = {"eth1": lossless, "eth3": {**lossless, "watchdog": WATCHDOG}}
    run, received, switch = _storm_through(topo, config)

    detected_at = run.first(lambda q: q["watchdog"]["storms_detected"] >= 1)
    assert detected_at is not None, switch.log_tail()
    assert TIMEOUT_S - 0.02 <= detected_at - run.storm_start <= TIMEOUT_S + POLLING_S + SLACK_S
    # Drop action: what was queued is discarded at once and counted; new frames too.
    after_detect = [q for t, q in run.samples if detected_at <= t < run.storm_end]
    assert after_detect and after_detect[0]["watchdog"]["dropped_packets"] > 0
    assert all(q["depth_bytes"] == 0 and q["watchdog"]["state"] == "stormed" for q in after_detect)
    assert (
        after_detect[-1]["watchdog"]["dropped_packets"]
        > after_detect[0]["watchdog"]["dropped_packets"]
    )

    restored_at = run.first(lambda q: q["watchdog"]["storms_restored"] >= 1)
    assert restored_at is not None, switch.log_tail()
    assert RECOVERY_S - 0.02 <= restored_at - run.storm_end <= RECOVERY_S + POLLING_S + SLACK_S
    final = run.samples[-1][1]
    assert final["watchdog"] == {
        "state": "operational",
        "storms_detected": 1,
        "storms_restored": 1,
        "dropped_packets": final["watchdog"]["dropped_packets"],
    }
    # Every frame sent is either dropped by the watchdog or delivered -- and nothing sent
    # during the storm got through.
    assert final["watchdog"]["dropped_packets"] + len(received) == len(run.sent_at)
    assert received, "traffic must flow again after restoration"
    first_delivered = min(u.seq for u in received)
    assert run.sent_at[first_delivered] >= run.storm_end
    assert final["tail_drops"] == 0


def test_storm_with_no_drop_action_keeps_forwarding(topo: fx.Topology) -> None:
    """Global watchdog, action forward (EOS no-drop): after detection pause is ignored and
    frames flow."""
    config = topo.base_config()
    config["qos"]["watchdog"] = {**WATCHDOG, "action": "forward"}
    config["qos"]["ports"] = {"eth3": {"pfc_enabled": True, "pfc_priorities": [3]}}
    run, received, _ = _storm_through(topo, config)
    detected_at = run.first(lambda q: q["watchdog"]["storms_detected"] >= 1)
    assert detected_at is not None
    assert detected_at - run.storm_start <= TIMEOUT_S + POLLING_S + SLACK_S
    final = run.samples[-1][1]["watchdog"]
    assert final["dropped_packets"] == 0 and final["storms_restored"] == 1
    assert len(received) == len(run.sent_at)  # nothing lost
    # While the storm still goes on, everything sent is delivered (pause ignored) -- only
    # frames sent before detection waited, and they left at detection, not at storm end.
    arrival = {u.seq: u.ts - run.mono_to_real for u in received}
    sent_in_storm = [s for s, t in run.sent_at.items() if t < run.storm_end - 0.05]
    assert all(arrival[s] < run.storm_end for s in sent_in_storm)
    before_detection = [s for s in sent_in_storm if run.sent_at[s] < detected_at - POLLING_S]
    assert before_detection
    assert all(arrival[s] >= run.storm_start + TIMEOUT_S - 0.02 for s in before_detection)

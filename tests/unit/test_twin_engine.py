"""The twin's engine and metrics: conservation, the lossless promise, and known outcomes.

Each case runs the shared model (lossless/) on virtual time through agent.twin.engine; the
expected values follow from first principles (a port cannot send faster than its line rate;
PFC with headroom >= the computed minimum loses nothing; with ECN off PFC carries the load;
without PFC a full queue drops; a 2:1 incast under PFC shares the port equally).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.twin.engine import Engine
from agent.twin.flows import FlowSpec
from agent.twin.frames import WIRE_OVERHEAD_BYTES
from agent.twin.network import TwinError, TwinNetwork, load_network, roce_frame_bytes
from agent.twin.results import TwinReport, jain, run_twin, time_weighted_p99
from agent.twin.workloads import ScenarioName
from tests.unit.twin_fabrics import POD_400G, star


@pytest.fixture(scope="module")
def pod() -> TwinNetwork:
    return load_network(POD_400G)


def _frame_slack(result: TwinReport) -> float:
    """One maximum frame of slack: a frame that starts before the end finishes after it."""
    return (
        (roce_frame_bytes(9214) + WIRE_OVERHEAD_BYTES) * 8 / (result.speed_bps * result.duration_s)
    )


# (scenario, senders, duration): every scenario on the 400G pod, short but past the transient.
POD_CASES: list[tuple[ScenarioName, int, float]] = [
    ("incast", 8, 0.5e-3),
    ("incast", 16, 0.3e-3),
    ("all-to-all", 4, 0.3e-3),
    ("victim", 3, 0.5e-3),
]


@pytest.mark.parametrize(("scenario", "senders", "duration"), POD_CASES)
def test_pod_conservation_and_no_lossless_drop(
    pod: TwinNetwork, scenario: ScenarioName, senders: int, duration: float
) -> None:
    result = run_twin(pod, scenario, senders=senders, duration_s=duration)
    slack = _frame_slack(result)
    for port in result.ports:
        assert port.utilisation <= 1 + slack, port
    for flow in result.flows:
        assert flow.rx_bytes <= flow.tx_bytes
    # auto headroom is the computed minimum (agent.intent.sizing): no lossless frame may be lost.
    assert result.lossless_drops == 0
    assert result.drops_by_class == {}
    assert result.passed


def test_headroom_is_at_least_the_computed_minimum(pod: TwinNetwork) -> None:
    for switch in pod.switches.values():
        for port in switch.ports:
            assert port.buffer is not None
            assert port.buffer.headroom_bytes >= port.min_headroom_bytes > 0


# (profile, overrides, senders, expect): what carries an N:1 incast at 100G.
LOAD_CASES = [
    # ECN off: PFC alone holds the senders back; nothing is marked, nothing lost.
    ("pfc-only", "", 4, {"pfc": True, "ce": False, "lossless_drops": False, "lossy_drops": False}),
    # No PFC (lossy): the RoCE queue tail-drops.
    (
        "nvidia-default",
        "mode: lossy\necn: {queues: {3: {min_threshold: 400KB, max_threshold: 800KB, "
        "max_probability: 1}}}",
        4,
        {"pfc": False, "ce": False, "lossless_drops": False, "lossy_drops": True},
    ),
    # DCQCN paper thresholds: ECN marks and CNPs flow, PFC is the backstop, nothing lost (the
    # utilisation is not asserted: mlx5 default rate recovery is slow after the first cuts).
    (
        "dcqcn-paper",
        "",
        4,
        {"pfc": None, "ce": True, "lossless_drops": False, "lossy_drops": False},
    ),
]


@pytest.mark.parametrize(("profile", "overrides", "senders", "expect"), LOAD_CASES)
def test_what_carries_the_load(
    tmp_path: Path, profile: str, overrides: str, senders: int, expect: dict[str, bool | None]
) -> None:
    net = star(tmp_path, senders + 1, "100G", profile=profile, overrides=overrides)
    result = run_twin(net, "incast", senders=senders, duration_s=1e-3)
    if expect["pfc"] is not None:
        assert (result.pfc_frames > 0) is expect["pfc"]
    assert (result.ce_fraction > 0) is expect["ce"]
    assert (result.cnps_received > 0) is expect["ce"]
    assert (result.lossless_drops > 0) is expect["lossless_drops"]
    assert (result.lossy_drops > 0) is expect["lossy_drops"]
    if not expect["ce"]:
        assert result.bottleneck_utilisation > 0.95


def test_two_to_one_incast_under_pfc_is_known(tmp_path: Path) -> None:
    """2:1 at 100 Gb/s, PFC only: the port runs at line rate, each sender gets half and is
    paused about half of the time; the frames and their wire overhead are exactly accounted."""
    net = star(tmp_path, 3, "100G", profile="pfc-only")
    result = run_twin(net, "incast", senders=2, duration_s=2e-3)
    frame = roce_frame_bytes(4096)  # a 2048-byte RoCE MTU: 4096 leaves no room for 4096
    line_goodput = 100e9 * frame / (frame + WIRE_OVERHEAD_BYTES)
    assert result.goodput_bps == pytest.approx(line_goodput, rel=0.01)
    assert result.bottleneck_utilisation == pytest.approx(1.0, abs=0.01)
    assert result.jain == pytest.approx(1.0, abs=1e-3)
    for flow in result.flows:
        assert flow.goodput_bps == pytest.approx(line_goodput / 2, rel=0.02)
        assert flow.paused_fraction == pytest.approx(0.5, abs=0.05)
    assert result.lossless_drops == 0 and result.ce_fraction == 0


def test_a_nic_that_ignores_pause_overruns_the_headroom(tmp_path: Path) -> None:
    """The check can fail: senders that do not honour PFC overrun xoff + headroom."""
    net = star(tmp_path, 5, "100G", profile="pfc-only")
    result = run_twin(net, "incast", senders=4, duration_s=0.5e-3, ignore_pause=True)
    assert result.lossless_drops > 0
    assert not result.passed


# (watchdog action or None = off, storms detected, victim moves again, watchdog drops)
STORM_CASES: list[tuple[str | None, int, bool, bool]] = [
    ("drop", 1, True, True),  # pause ignored and the stormed queue discarded
    ("forward", 1, True, False),  # pause ignored, frames still delivered (EOS no-drop)
    ("alert", 1, False, False),  # only reported: the pause keeps holding everything
    (None, 0, False, False),
]


@pytest.mark.parametrize(("action", "storms", "victim_recovers", "drops"), STORM_CASES)
def test_storm_and_watchdog(
    tmp_path: Path, action: str | None, storms: int, victim_recovers: bool, drops: bool
) -> None:
    overrides = (
        "pfc: {watchdog: {enabled: false}}"
        if action is None
        else f"pfc: {{watchdog: {{action: {action}, detection_ms: 10, polling_ms: 10, "
        "restoration_ms: 20}}"
    )
    net = star(tmp_path, 4, "25G", profile="pfc-only", overrides=overrides)
    result = run_twin(net, "storm", senders=1, duration_s=30e-3)
    assert result.storms_detected == storms
    victim = result.flows[1]
    assert (victim.goodput_second_half_bps > 1e9) is victim_recovers
    # The storm spreads: the sender's NIC is paused although its victim's path is idle.
    assert victim.paused_fraction > 0.3
    assert result.lossless_drops == 0
    assert (result.drops_by_class.get(3, 0) > 0) is drops


def test_victim_is_blocked_by_pfc_it_did_not_cause(tmp_path: Path) -> None:
    """Head-of-line blocking on the 400G pod under PFC only: the victim's source sends no
    incast traffic and its destination is idle, but its first hop is the uplink the incast
    shares, so pause from the receiver's leaf holds it well below line rate."""
    fabric = tmp_path / "pod-pfc-only.yml"
    fabric.write_text(
        POD_400G.read_text().replace("profile: nvidia-default", "profile: pfc-only", 1)
    )
    net = load_network(fabric)
    result = run_twin(net, "victim", senders=4, duration_s=1e-3)
    victim = result.flows[-1]
    senders = {f.flow.split("->")[0] for f in result.flows[:-1]}
    assert victim.flow.split("->")[0] not in senders
    assert victim.goodput_bps < 0.6 * 400e9
    assert victim.paused_fraction > 0.3
    assert result.lossless_drops == 0


def test_same_seed_same_result(tmp_path: Path) -> None:
    net = star(tmp_path, 5, "40G")
    runs = [run_twin(net, "incast", senders=4, duration_s=0.3e-3, seed=7) for _ in range(2)]
    dumps = []
    for result in runs:
        data = result.to_json()
        data.pop("wall_s")
        dumps.append(json.dumps(data, sort_keys=True))
    assert dumps[0] == dumps[1]


def test_flows_keep_to_their_start_and_stop(tmp_path: Path) -> None:
    net = star(tmp_path, 3, "100G", profile="pfc-only")
    engine = Engine(net, [FlowSpec("h2", "h1", start_s=0.2e-3, stop_s=0.4e-3)])
    engine.run(1e-3)
    flow = engine.flows[0]
    sent_s = flow.tx_bytes * 8 / 100e9
    assert sent_s == pytest.approx(0.2e-3, rel=0.05)


JAIN = [([], None), ([1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([0.0, 0.0], 1.0), ([3.0, 1.0], 0.8)]


@pytest.mark.parametrize(("values", "expected"), JAIN)
def test_jain(values: list[float], expected: float | None) -> None:
    assert jain(values) == (None if expected is None else pytest.approx(expected))


# (time at depth bins [KiB -> s], total, p99 bytes)
P99 = [
    ({0: 0.99, 5: 0.01}, 1.0, 1024),
    ({0: 0.5, 5: 0.5}, 1.0, 6 * 1024),
    ({}, 1.0, 0),
]


@pytest.mark.parametrize(("hist", "total", "expected"), P99)
def test_time_weighted_p99(hist: dict[int, float], total: float, expected: int) -> None:
    assert time_weighted_p99(hist, total) == expected


# (fabric, scenario, senders, duration, senders ignore pause)
ACCOUNTING_CASES: list[tuple[str, ScenarioName, int, float, bool]] = [
    ("pod", "incast", 16, 0.2e-3, False),
    ("pod", "victim", 3, 0.2e-3, False),
    ("pod", "all-to-all", 4, 0.2e-3, False),
    ("pod", "incast", 8, 0.2e-3, True),  # with headroom drops
    ("star-lossy", "incast", 4, 0.5e-3, False),  # with tail drops
]


@pytest.mark.parametrize(("fabric", "scenario", "senders", "duration", "deaf"), ACCOUNTING_CASES)
def test_every_frame_is_accounted_for(
    pod: TwinNetwork,
    tmp_path: Path,
    fabric: str,
    scenario: ScenarioName,
    senders: int,
    duration: float,
    deaf: bool,
) -> None:
    """Frames sent = received + queued + dropped + on the wire at the end, and no port or NIC
    sent more than its line rate allows."""
    from agent.twin.workloads import build_scenario

    net = pod
    if fabric == "star-lossy":
        net = star(
            tmp_path,
            senders + 1,
            "100G",
            profile="nvidia-default",
            overrides="mode: lossy\necn: {queues: {3: {min_threshold: 400KB, "
            "max_threshold: 800KB, max_probability: 1}}}",
        )
    flows = build_scenario(net, scenario, senders).flows
    engine = Engine(
        net, flows, ignore_pause=frozenset(f.src for f in flows) if deaf else frozenset()
    )
    engine.run(duration)
    sent = sum(f.tx_packets for f in engine.flows)
    received = sum(f.rx_packets for f in engine.flows)
    queued = dropped = 0
    for node in engine.switches.values():
        for port in node.ports:
            queued += sum(1 for q in port.queues for p in q.packets if not p[0].cnp)
            dropped += sum(port.ingress.headroom_drops) + sum(q.tail_drops for q in port.queues)
            dropped += port.watchdog_drops
            assert port.tx_bytes * 8 <= port.spec.speed_bps * duration + 9252 * 8
            assert port.depth == sum(q.depth_bytes for q in port.queues)
    on_wire = sum(
        1
        for event in engine.pending_events()
        if event[1] in ("_switch_rx", "_host_rx") and not event[2].cnp
    )
    assert sent == received + queued + dropped + on_wire
    assert (dropped > 0) is (deaf or fabric == "star-lossy")
    for nic in engine.nics.values():
        assert nic.tx_bytes * 8 <= nic.spec.port.speed_bps * duration + 9252 * 8


# (flow, what the error says)
BAD_FLOWS = [
    (FlowSpec("h9", "h1"), "Actual: h9"),
    (FlowSpec("h1", "nowhere"), "Actual: nowhere"),
    (FlowSpec("h1", "h1"), "to itself"),
    (FlowSpec("leaf1", "h1"), "Actual: leaf1"),
]


@pytest.mark.parametrize(("flow", "needle"), BAD_FLOWS)
def test_bad_flows_are_refused(tmp_path: Path, flow: FlowSpec, needle: str) -> None:
    net = star(tmp_path, 2, "100G")
    with pytest.raises(TwinError, match=needle):
        Engine(net, [flow])


def test_an_engine_runs_once(tmp_path: Path) -> None:
    engine = Engine(star(tmp_path, 2, "100G"), [FlowSpec("h2", "h1")])
    engine.run(1e-5)
    with pytest.raises(TwinError, match="runs once"):
        engine.run(1e-5)

"""The twin engine's messages: post, in-order completion at the responder, finish.

Expected values from first principles: a message cannot complete before its frames have been
serialised at the sender's line rate and the last one has crossed every hop (store and
forward) and every cable; every posted byte is sent and received exactly once on a lossless
run; messages of one QP complete in the order they were posted.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.twin.engine import Engine, MessageCallback
from agent.twin.flows import Flow, FlowSpec
from agent.twin.frames import MIN_FRAME_BYTES, WIRE_OVERHEAD_BYTES, propagation_ticks, wire_ticks
from agent.twin.network import ROCE_FRAME_OVERHEAD, TwinError, TwinNetwork
from agent.twin.results import report
from agent.twin.workloads import build_scenario
from lossless.clock import TICKS_PER_SECOND
from tests.unit.twin_fabrics import star


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> TwinNetwork:
    # PFC only: no ECN mark, so DCQCN never cuts and a lone flow runs at line rate.
    return star(tmp_path_factory.mktemp("msg"), 4, "100G", profile="pfc-only")


def _frames(engine: Engine, flow: Flow, nbytes: int) -> list[int]:
    """The frame lengths a message of ``nbytes`` is sent as (the module docstring's rule)."""
    payload = engine.nics[flow.src].frame_bytes - ROCE_FRAME_OVERHEAD
    full, rest = divmod(nbytes, payload)
    frames = [payload + ROCE_FRAME_OVERHEAD] * full
    if rest or not frames:
        frames.append(max(rest + ROCE_FRAME_OVERHEAD, MIN_FRAME_BYTES))
    return frames


def _earliest_done(engine: Engine, flow: Flow, frames: list[int]) -> int:
    """A lower bound in ticks: every frame serialised at the sender's NIC, the last one again
    at each switch on the path (store and forward), plus every cable's propagation."""
    nic = engine.nics[flow.src]
    speed = nic.spec.port.speed_bps
    ticks = sum(wire_ticks(f, speed) for f in frames) + propagation_ticks(nic.spec.port)
    hops = engine.network.path(flow.src, flow.dst, flow.hash)
    for switch, index in hops:
        spec = engine.network.switches[switch].ports[index]
        ticks += wire_ticks(frames[-1], spec.speed_bps) + propagation_ticks(spec)
    return ticks


Done = list[tuple[int, object, int]]


def _recorder(done: Done) -> MessageCallback:
    def on_message(engine: Engine, flow: Flow, tag: object, tick: int) -> None:
        done.append((flow.index, tag, tick))

    return on_message


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(nbytes=st.integers(min_value=0, max_value=3_000_000))
def test_one_message_completes_once_no_earlier_than_the_wire_allows(
    net: TwinNetwork, nbytes: int
) -> None:
    done: Done = []
    engine = Engine(net, [FlowSpec("h2", "h1", size_bytes=0)], on_message=_recorder(done))
    engine.post(0, nbytes, "m")
    engine.run(1e-3)
    flow = engine.flows[0]
    frames = _frames(engine, flow, nbytes)
    assert [(i, tag) for i, tag, _ in done] == [(0, "m")]
    earliest = _earliest_done(engine, flow, frames)
    tick = done[0][2]
    assert tick >= earliest
    # Alone on an idle fabric at line rate: within a frame time per hop of the bound.
    slack = 3 * wire_ticks(max(frames), 100 * 10**9) + 10**6
    assert tick <= earliest + slack
    # Every byte sent once and received once, in order.
    assert flow.tx_packets == flow.rx_packets == len(frames)
    assert flow.tx_bytes == flow.rx_bytes == flow.delivered_bytes == sum(frames)
    assert flow.epsn == flow.end_psn == len(frames)
    assert flow.messages_done == 1 and not flow.msgs


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sizes=st.lists(st.integers(min_value=0, max_value=200_000), min_size=1, max_size=8))
def test_messages_of_a_flow_complete_in_order(net: TwinNetwork, sizes: list[int]) -> None:
    done: Done = []
    specs = [FlowSpec("h2", "h1", size_bytes=0), FlowSpec("h3", "h1", size_bytes=0)]
    engine = Engine(net, specs, on_message=_recorder(done))
    for k, size in enumerate(sizes):
        engine.post(0, size, ("a", k))
        engine.post(1, size, ("b", k))
    engine.run(2e-3)
    for index, name in ((0, "a"), (1, "b")):
        mine = [(tag, tick) for i, tag, tick in done if i == index]
        assert [tag for tag, _ in mine] == [(name, k) for k in range(len(sizes))]
        ticks = [tick for _, tick in mine]
        assert ticks == sorted(ticks)
        flow = engine.flows[index]
        frames = [f for size in sizes for f in _frames(engine, flow, size)]
        assert flow.delivered_bytes == flow.tx_bytes == sum(frames)


def test_a_callback_posts_the_next_message(net: TwinNetwork) -> None:
    """A chain: each completion posts the next message, as a ring step waits for the last."""
    ticks: list[int] = []

    def on_message(engine: Engine, flow: Flow, tag: object, tick: int) -> None:
        ticks.append(tick)
        assert isinstance(tag, int)
        if tag < 9:
            engine.post(flow.index, 100_000, tag + 1)

    engine = Engine(net, [FlowSpec("h2", "h1", size_bytes=0)], on_message=on_message)
    engine.post(0, 100_000, 0)
    engine.run(2e-3)
    assert len(ticks) == 10
    # Each message waits for the previous one's completion: at least its own wire time apart.
    frames = _frames(engine, engine.flows[0], 100_000)
    one = _earliest_done(engine, engine.flows[0], frames)
    assert all(b - a >= one for a, b in itertools.pairwise(ticks))
    assert ticks[0] >= one


def test_finish_ends_the_run_at_the_tick(net: TwinNetwork) -> None:
    """finish() from the callback: no later event runs, the run closes at that tick, and the
    report divides by the real duration."""
    done: Done = []

    def on_message(engine: Engine, flow: Flow, tag: object, tick: int) -> None:
        done.append((flow.index, tag, tick))
        engine.finish()

    scenario = build_scenario(net, "incast", 2)
    specs = [FlowSpec(f.src, f.dst, udp_sport=f.udp_sport, size_bytes=0) for f in scenario.flows]
    engine = Engine(net, specs, on_message=on_message)
    engine.post(0, 50_000, "first")
    engine.post(1, 5_000_000, "long")
    engine.run(5e-3)
    assert [tag for _, tag, _ in done] == ["first"]
    tick = done[0][2]
    assert engine.end == tick == engine.clock.ticks
    assert engine.duration_s == tick / TICKS_PER_SECOND
    assert all(event[0] >= tick for event in engine.pending_events())
    assert engine.samples[-1].t_s == engine.duration_s
    # The long message was still sending: it had not finished, and stopped with the run.
    assert engine.flows[1].messages_done == 0
    sent_s = engine.flows[1].tx_bytes * 8 / 100e9
    assert sent_s <= engine.duration_s
    summary = report(
        engine, scenario, fabric="star", profile="pfc-only", senders=2, seed=1, wall_s=0.0
    )
    assert summary.duration_s == engine.duration_s
    largest = max(n.frame_bytes for n in engine.nics.values()) + WIRE_OVERHEAD_BYTES
    for port in summary.ports:
        assert port.utilisation <= 1.0 + largest * 8 / (100e9 * summary.duration_s)


def test_size_bytes_posts_one_message(net: TwinNetwork) -> None:
    done: Done = []
    engine = Engine(net, [FlowSpec("h2", "h1", size_bytes=12_345)], on_message=_recorder(done))
    engine.run(1e-3)
    assert [tag for _, tag, _ in done] == [None]
    assert engine.flows[0].delivered_bytes == sum(_frames(engine, engine.flows[0], 12_345))


def test_stop_at_tick_and_idle_flows(net: TwinNetwork) -> None:
    """An int flow with nothing posted sends nothing and leaves its NIC's heap; a stop
    requested for a later tick ends the run there."""
    engine = Engine(net, [FlowSpec("h2", "h1", size_bytes=0)])
    stop = 10**8  # 100 us
    engine.stop_at_tick(stop)
    engine.run(1e-3)
    assert engine.end == stop
    assert engine.flows[0].tx_packets == 0
    assert not engine.flows[0].in_heap


BAD_POSTS: list[tuple[list[FlowSpec], int, int, str]] = [
    ([FlowSpec("h2", "h1")], 0, 1000, "an infinite flow"),
    ([FlowSpec("h2", "h1", size_bytes=0)], 1, 1000, "flow index"),
    ([FlowSpec("h2", "h1", size_bytes=0)], 0, -1, "Expected: >= 0 bytes"),
]


@pytest.mark.parametrize(("specs", "index", "nbytes", "needle"), BAD_POSTS)
def test_bad_posts_are_refused(
    tmp_path: Path, specs: list[FlowSpec], index: int, nbytes: int, needle: str
) -> None:
    engine = Engine(star(tmp_path, 3, "100G"), specs)
    with pytest.raises(TwinError, match=needle):
        engine.post(index, nbytes, None)

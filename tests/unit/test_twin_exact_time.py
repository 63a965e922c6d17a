"""The twin's time is exact: integer picoseconds, so no scenario on any fabric ends in an
internal error, and the engine's books balance whatever the speeds, cables and seeds.

The property test draws every scenario the twin offers on every fabric of the repository
(``playbooks/fabrics/*.yml``), on one-switch fabrics (:func:`star_fabric_yaml`, the test
fabrics of :mod:`tests.unit.twin_fabrics`) and on two-tier fabrics with mixed host speeds
(:func:`leaf_spine_fabric_yaml`), with sender counts, speeds (some whose byte time is no
whole number of picoseconds), cable lengths, payloads and seeds.  It is derandomized (the same
examples on every run) and bounded: each run is short and capped at a number of frames, so
the whole test stays within a few tens of seconds.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.intent.loader import load_fabric
from agent.intent.units import parse_speed
from agent.twin.engine import Engine
from agent.twin.frames import WIRE_OVERHEAD_BYTES, wire_ticks
from agent.twin.network import (
    TwinError,
    TwinNetwork,
    leaf_spine_fabric_yaml,
    load_network,
    roce_frame_bytes,
    star_fabric_yaml,
)
from agent.twin.results import TwinReport, simulate
from agent.twin.switch import SwitchPort
from agent.twin.tune.search import tune
from agent.twin.workloads import SCENARIOS, STORM_START_S, ScenarioName, build_scenario
from lossless.clock import TICKS_PER_SECOND, TickClock, ticks_at_or_after, to_ticks
from tests.unit.twin_fabrics import POD_400G, ROOT

REPO_FABRICS = sorted((ROOT / "playbooks" / "fabrics").glob("*.yml"))
# Byte times of 20 ps (400G), 80 ps (100G) ... and some that are no whole number of ticks
# (56G: 142.857 ps, 3G: 2666.7 ps), where the rounding has something to do.
SPEEDS = ("3G", "10G", "25G", "40G", "56G", "100G", "200G", "400G", "800G")
CABLES_M = (0.5, 1.0, 3.0, 7.0, 30.0, 100.0, 300.0)
PROFILES = ("nvidia-default", "dcqcn-paper", "pfc-only")
FRAMES_PER_RUN = 12_000  # what bounds one example's time: frames the senders can put out
_FOLDER = Path(tempfile.mkdtemp(prefix="twin-exact-time-"))


@dataclass(frozen=True)
class Fabric:
    """A fabric to draw: a file of the repository, or a generated one (then its parameters)."""

    kind: str  # "repo", "star" or "leaf-spine"
    path: str = ""
    speeds: tuple[str, ...] = ()  # star: one; leaf-spine: the hosts' speed per leaf
    hosts: int = 0  # star: hosts; leaf-spine: hosts per leaf
    cables_m: tuple[float, float] = (3.0, 3.0)  # (uplinks, host links)
    profile: str = "nvidia-default"
    mtu: int = 9214

    def yaml(self) -> str:
        if self.kind == "star":
            return star_fabric_yaml(
                self.hosts, self.speeds[0], profile=self.profile, mtu=self.mtu,
                cable_m=self.cables_m[1],
            )  # fmt: skip
        return leaf_spine_fabric_yaml(
            self.speeds, self.hosts, uplink_cable_m=self.cables_m[0],
            host_cable_m=self.cables_m[1], profile=self.profile, mtu=self.mtu,
        )  # fmt: skip


@functools.cache
def _network(fabric: Fabric) -> TwinNetwork:
    """The fabric's network, loaded once (a plan is not free to build)."""
    if fabric.kind == "repo":
        return load_network(Path(fabric.path))
    path = _FOLDER / f"{fabric.kind}-{abs(hash(fabric))}.yml"
    path.write_text(fabric.yaml())
    return load_network(path)


@dataclass(frozen=True)
class Case:
    fabric: Fabric
    scenario: ScenarioName
    senders: int
    speed: str | None  # hosts at this speed (None: the fabric's first host's)
    duration_s: float
    seed: int = 1
    payload: int | None = None
    deaf: bool = False  # the senders' NICs ignore pause (headroom overruns: drops to account for)
    dcqcn: bool = True


@st.composite
def _fabric(draw: st.DrawFn) -> tuple[Fabric, str | None]:
    """A fabric and the host speed to run at (None: the fabric's first host's)."""
    kind = draw(st.sampled_from(("repo", "star", "leaf-spine")))
    if kind == "repo":
        return Fabric(kind, path=str(draw(st.sampled_from(REPO_FABRICS)))), None
    profile = draw(st.sampled_from(PROFILES))
    cables = (draw(st.sampled_from(CABLES_M)), draw(st.sampled_from(CABLES_M)))
    if kind == "star":
        speed = draw(st.sampled_from(SPEEDS))
        star = Fabric(kind, speeds=(speed,), hosts=draw(st.integers(3, 10)), cables_m=cables,
                      profile=profile, mtu=draw(st.sampled_from((1500, 4096, 9214))))  # fmt: skip
        return star, speed
    speeds = tuple(draw(st.lists(st.sampled_from(SPEEDS), min_size=2, max_size=4)))
    two_tier = Fabric(kind, speeds=speeds, hosts=draw(st.integers(1, 4)), cables_m=cables,
                      profile=profile)  # fmt: skip
    # Mostly every host (mixed speeds in one run), sometimes one speed's hosts.
    return two_tier, draw(st.one_of(st.none(), st.none(), st.sampled_from(speeds)))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    fabric, speed = draw(_fabric())
    # A one-switch fabric has no other leaf for a victim (refused, as documented).
    offered = [s for s in SCENARIOS if fabric.kind != "star" or s != "victim"]
    scenario = draw(st.sampled_from(offered))
    duration = draw(st.sampled_from((20e-6, 60e-6, 150e-6, 400e-6)))
    if scenario == "storm":
        duration += STORM_START_S  # the XOFFs start at 1 ms
    return Case(
        fabric=fabric,
        scenario=scenario,
        senders=draw(st.integers(1, 16)),
        speed=speed,
        duration_s=duration,
        seed=draw(st.integers(0, 2**32 - 1)),
        payload=draw(st.sampled_from((None, 256, 1024, 4096))),
        deaf=draw(st.booleans()),
        dcqcn=draw(st.booleans()),
    )


def _most_senders(net: TwinNetwork, scenario: ScenarioName, speed_bps: int | None) -> int:
    """The most senders the scenario can have on the fabric (at least its least)."""
    hosts = net.hosts_at(speed_bps)
    if scenario == "all-to-all":
        return max(2, len(hosts))
    if scenario == "victim" and hosts:
        return max(1, sum(1 for h in hosts if h.leaf != hosts[0].leaf))
    return max(1, len(hosts) - 1)


def _bounded(net: TwinNetwork, case: Case, sending_nics: int, speed_bps: int) -> float:
    """The case's duration, cut so that the senders put out at most FRAMES_PER_RUN frames."""
    frame = roce_frame_bytes(min(h.port.mtu for h in net.hosts.values()), case.payload)
    most = FRAMES_PER_RUN * (frame + WIRE_OVERHEAD_BYTES) * 8 / (speed_bps * sending_nics)
    floor = STORM_START_S + 20e-6 if case.scenario == "storm" else 10e-6
    return max(min(case.duration_s, most), floor)


def _queued_and_dropped(port: SwitchPort) -> tuple[int, int]:
    """Data frames a port holds, and frames it dropped (headroom, tail, watchdog)."""
    queued = sum(1 for q in port.queues for p in q.packets if not p[0].cnp)
    dropped = sum(port.ingress.headroom_drops) + sum(q.tail_drops for q in port.queues)
    return queued, dropped + port.watchdog_drops


def _frames_accounted(engine: Engine) -> None:
    """Every data frame sent is received, queued, dropped or still on a wire."""
    sent = sum(f.tx_packets for f in engine.flows)
    received = sum(f.rx_packets for f in engine.flows)
    held = [_queued_and_dropped(port) for node in engine.switches.values() for port in node.ports]
    arriving = ("_switch_rx", "_host_rx")
    on_wire = sum(1 for e in engine.pending_events() if e[1] in arriving and not e[2].cnp)
    assert sent == received + sum(q for q, _ in held) + sum(d for _, d in held) + on_wire
    for flow in engine.flows:
        assert flow.rx_bytes <= flow.tx_bytes


def _line_rates_kept(engine: Engine) -> None:
    """No port or NIC sent more than its speed allows in the run (a frame that starts by the
    last tick counts whole), compared in exact integers; queue depths add up."""
    largest = (max(n.frame_bytes for n in engine.nics.values()) + WIRE_OVERHEAD_BYTES) * 8

    def within(wire_bytes: int, speed_bps: int) -> bool:
        allowed = speed_bps * engine.end + largest * TICKS_PER_SECOND
        return wire_bytes * 8 * TICKS_PER_SECOND <= allowed

    for node in engine.switches.values():
        for port in node.ports:
            assert within(port.tx_bytes, port.spec.speed_bps), port.name
            assert port.depth == sum(q.depth_bytes for q in port.queues)
            assert 0 <= port.pause_meter.paused <= engine.end
    for nic in engine.nics.values():
        assert within(nic.tx_bytes, nic.spec.port.speed_bps), nic.name


def check_books(engine: Engine, report: TwinReport) -> None:
    """Conservation and line rates hold; the clock stopped at the end of the run with every
    event left after it; the report's fractions are fractions."""
    _frames_accounted(engine)
    _line_rates_kept(engine)
    assert engine.clock.ticks == engine.end
    assert all(event[0] > engine.end for event in engine.pending_events())
    assert all(0 <= p.paused_fraction <= 1 for p in report.ports)
    assert 0 <= report.max_paused_fraction <= 1


def run_case(case: Case) -> tuple[Engine, TwinReport] | None:
    """Run one case; None when the fabric cannot host it (a located TwinError: bad input)."""
    net = _network(case.fabric)
    speed_bps = parse_speed(case.speed) if case.speed is not None else None
    senders = min(case.senders, _most_senders(net, case.scenario, speed_bps))
    try:
        scenario = build_scenario(net, case.scenario, senders, speed_bps)
    except TwinError as exc:
        assert "Expected" in str(exc) or "twin" in str(exc)
        return None
    sending = len({f.src for f in scenario.flows})
    duration = _bounded(net, case, sending, scenario.speed_bps)
    return simulate(
        net,
        scenario,
        senders=senders,
        duration_s=duration,
        seed=case.seed,
        ignore_pause=case.deaf,
        payload_bytes=case.payload,
        reaction_point=case.dcqcn,
    )


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=cases())
def test_every_scenario_runs_and_the_books_balance(case: Case) -> None:
    outcome = run_case(case)
    event(f"{case.fabric.kind} {case.scenario}: {'ran' if outcome else 'refused (TwinError)'}")
    if outcome is not None:
        check_books(*outcome)
        if not case.deaf:
            # Senders that honour pause, headroom at least the computed minimum: the promise.
            assert outcome[1].lossless_drops == 0


# The runs that ended in "virtual clock: time cannot go back" with float time: a NIC whose
# next flow was due while it was busy scheduled that flow's wake in the past.
MIXED = Fabric("leaf-spine", speeds=("100G", "100G", "400G", "400G"), hosts=4, cables_m=(30, 3))
CRASHED: list[tuple[Fabric, ScenarioName, int, float]] = [
    (Fabric("repo", path=str(POD_400G)), "victim", 16, 50e-6),
    (MIXED, "all-to-all", 16, 20e-6),
    (MIXED, "victim", 4, 100e-6),
    (MIXED, "victim", 7, 100e-6),
]


@pytest.mark.parametrize(("fabric", "scenario", "senders", "duration"), CRASHED)
def test_the_runs_that_went_back_in_time(
    fabric: Fabric, scenario: ScenarioName, senders: int, duration: float
) -> None:
    outcome = run_case(Case(fabric, scenario, senders, None, duration))
    assert outcome is not None
    check_books(*outcome)


def test_tune_all_to_all_runs(tmp_path: Path) -> None:
    """``tune --scenario all-to-all`` on the mixed fabric went back in time too."""
    fabric = tmp_path / "mixed.yml"
    fabric.write_text(MIXED.yaml())
    result = tune(
        load_fabric(fabric).intent,
        scenario="all-to-all",
        senders=4,
        duration_s=0.2e-3,
        candidates=4,
        seeds=(1,),
    )
    assert sorted(s.speed_bps for s in result.speeds) == [100_000_000_000, 400_000_000_000]


# (seconds, the first tick at or after it)
AT_OR_AFTER = [
    (0.0, 0),
    (1e-12, 1),
    (0.01, 10**10),
    (1.5e-12, 2),
    (3.0000000000000004e-05, 30_000_001),
]


@pytest.mark.parametrize(("seconds", "ticks"), AT_OR_AFTER)
def test_a_deadline_wakes_at_the_first_tick_at_or_after_it(seconds: float, ticks: int) -> None:
    assert ticks_at_or_after(seconds) == ticks
    assert ticks / TICKS_PER_SECOND >= seconds
    assert (ticks - 1) / TICKS_PER_SECOND < seconds


@given(st.floats(0, 10, allow_nan=False))
@settings(max_examples=300, derandomize=True, database=None)
def test_at_or_after_is_the_least_such_tick(seconds: float) -> None:
    ticks = ticks_at_or_after(seconds)
    assert ticks / TICKS_PER_SECOND >= seconds > (ticks - 1) / TICKS_PER_SECOND or ticks == 0


def test_wire_times_round_up_and_exactly() -> None:
    # 400G: 20 ps a byte, exactly; 56G: 142.857... ps a byte, rounded up per frame.
    assert wire_ticks(4158, 400_000_000_000) == (4158 + 20) * 20
    wire = wire_ticks(4158, 56_000_000_000)
    assert wire == -(-(4178 * 8 * TICKS_PER_SECOND) // 56_000_000_000)
    assert wire * 56_000_000_000 >= 4178 * 8 * TICKS_PER_SECOND


def test_the_tick_clock_never_goes_back() -> None:
    clock = TickClock()
    clock.set(to_ticks(1.5e-6))
    assert clock.ticks == 1_500_000 and clock.now() == 1.5e-6
    with pytest.raises(ValueError, match=r"cannot go back. Expected: >= 1500000 ps Actual: 7 ps"):
        clock.set(7)

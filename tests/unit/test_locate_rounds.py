"""The adaptive locate run (issue #30): the mesh in rounds until the SPRT decides every
path or time runs out, how that shows in JSON and the table, the hook that splits ties, and
the CLI's options. The mesh here is simulated: seeded binomial draws per round."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

import agent.observe.locate.gather as gather
from agent.app.locate import OUT_OF_TIME, locate_command, render_markdown, render_table
from agent.observe.locate.evidence import PathResult
from agent.observe.locate.followup import Findings
from agent.observe.locate.gather import LocateRun, MeshRounds, Settings, as_json
from agent.observe.locate.verdict import Verdict
from agent.observe.probes.mesh import MeshResult
from agent.observe.probes.transport import ROCE
from tests.unit.test_locate_stats import binomial

OVERHEAD_S = 3.0  # what each simulated round costs beyond its probing time


class FakeMesh:
    """Paths ``name -> loss rate``, each sending ``pps`` probes a second; a clock that each
    round moves by its length plus the set-up."""

    def __init__(self, losses: dict[str, float], pps: float, seed: int) -> None:
        self.losses, self.pps, self.rng = losses, pps, random.Random(seed)
        self.now = 0.0
        self.lengths: list[float] = []

    def clock(self) -> float:
        return self.now

    def round(self, seconds: float) -> list[MeshResult]:
        self.lengths.append(seconds)
        self.now += seconds + OVERHEAD_S
        rows = []
        for index, (name, loss) in enumerate(sorted(self.losses.items())):
            sent = int(self.pps * seconds)
            lost = binomial(self.rng, sent, loss)
            rows.append(MeshResult(name, "h9", 49152 + index, sent, sent - lost, 0, 0.01))
        return rows


def rounds_for(mesh: FakeMesh, deadline: float, **options: Any) -> MeshRounds:
    return MeshRounds(Settings(**options), deadline, clock=mesh.clock)


def test_clean_paths_stop_confident_as_soon_as_the_sprt_allows() -> None:
    mesh = FakeMesh({f"h{i}": 0.0 for i in range(6)}, pps=30, seed=1)
    rounds = rounds_for(mesh, deadline=60.0)
    rounds.run(mesh.round, 1.0)
    assert rounds.stopped == "confident"
    assert set(rounds.decisions().values()) == {"h0"}
    # 783 probes decide a clean path at 0.5 %, 95 %: one short round, then one that is long
    # enough for what is still missing and its 10 % margin.
    minimum = Settings().sprt().min_probes()
    assert rounds.rounds == 2 and mesh.lengths[0] == 1.0
    assert (minimum - 30) / 30 <= mesh.lengths[1] <= 1.1 * minimum / 30
    assert all(r.sent >= minimum for r in rounds.results())


def test_out_of_time_before_sure_says_max_duration_and_keeps_the_deadline() -> None:
    # A path at 0.25 %: in the indifference zone between clean (0.125 %) and lossy (0.5 %).
    mesh = FakeMesh({"h1": 0.0, "h2": 0.0025}, pps=10, seed=3)
    rounds = rounds_for(mesh, deadline=20.0)
    rounds.run(mesh.round, 1.0)
    assert rounds.stopped == "max-duration"
    assert mesh.now <= 20.0 + OVERHEAD_S  # the last round was sized to end by the deadline
    assert None in rounds.decisions().values()


@pytest.mark.parametrize(
    ("min_loss", "rate", "expected_s"),
    # 4 hosts x 5 flows (the 2x2 lab), a probe 338 bytes on the wire: 29.6 probes/s a flow
    # at 400 kb/s; 783 clean probes decide at 0.5 %, 77 at 5 %; 10 % margin.
    [(0.005, 400_000, 29.1), (0.05, 400_000, 2.8), (0.005, 4_000_000, 2.9), (0.5, 4_000_000, 1.0)],
)  # fmt: skip
def test_the_first_round_is_long_enough_to_decide_clean_paths(
    min_loss: float, rate: int, expected_s: float
) -> None:
    from agent.observe.probes.mesh import MeshProbe

    probes = [MeshProbe(f"h{s}", f"h{(s + 1) % 4}", 49152 + k) for s in range(4) for k in range(5)]
    first = gather.first_round_s(probes, Settings(min_loss=min_loss, rate_per_host_bps=rate))
    assert first == pytest.approx(expected_s, abs=0.1)


def test_a_path_that_sends_nothing_does_not_hold_the_run_up() -> None:
    mesh = FakeMesh({"h1": 0.0, "h2": 0.0}, pps=30, seed=2)

    def one_silent(seconds: float) -> list[MeshResult]:
        rows = mesh.round(seconds)
        return [rows[0], MeshResult("h2", "h9", 1, 0, 0, 0, None)]

    rounds = rounds_for(mesh, deadline=60.0)
    rounds.run(one_silent, 30.0)
    assert (rounds.stopped, rounds.rounds) == ("confident", 1)
    assert rounds.decisions()[("h2", "h9", 1)] is None


def test_rounds_add_up_per_path() -> None:
    rounds = MeshRounds(Settings(), 100.0)
    rounds.add([MeshResult("h1", "h2", 1, 100, 99, 1, 0.5)])
    rounds.add(
        [MeshResult("h1", "h2", 1, 50, 50, 0, 0.2), MeshResult("h2", "h1", 1, 5, 5, 0, None)]
    )
    by_key = {(r.src, r.dst, r.sport): r for r in rounds.results()}
    assert by_key[("h1", "h2", 1)] == MeshResult("h1", "h2", 1, 150, 149, 1, 0.2)
    assert rounds.tests[("h1", "h2", 1)].sent == 150 and rounds.tests[("h1", "h2", 1)].lost == 1


def test_rounds_keep_the_kernel_stamps_and_the_host_delay() -> None:
    """A host stalled in one round and not the next is still a host that held its frames:
    the larger 90th percentile, the lowest latencies, the weakest timestamp source."""
    rounds = MeshRounds(Settings(), 100.0)
    rounds.add([MeshResult("h1", "h4", 1, 100, 100, 0, 0.9, 0.2, "software", 35.0)])
    rounds.add([MeshResult("h1", "h4", 1, 100, 100, 0, 0.4, 0.3, "user", 0.5)])
    rounds.add([MeshResult("h1", "h4", 1, 100, 100, 0, 0.6, None, "software", None)])
    (row,) = rounds.results()
    assert row == MeshResult("h1", "h4", 1, 300, 300, 0, 0.4, 0.2, "user", 35.0)


@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from([0.01, 0.02, 0.05]))
@settings(max_examples=15, deadline=None, derandomize=True)
def test_a_lossy_path_among_clean_ones_is_found_within_a_minute(seed: int, loss: float) -> None:
    """24 paths, one losing ``loss`` (twice min_loss or more, where the SPRT's miss rate is
    far below beta; at min_loss itself beta bounds it: test_locate_stats): the lossy path is
    never called clean, the clean ones always are, within the deadline (30 probes/s a path,
    the lab's default mesh rate)."""
    losses = {f"h{i:02}": 0.0 for i in range(24)} | {"h99": loss}
    mesh = FakeMesh(losses, pps=30, seed=seed)
    rounds = rounds_for(mesh, deadline=45.0)
    rounds.run(mesh.round, 1.0)
    decided = {key[0]: decision for key, decision in rounds.decisions().items()}
    assert decided.pop("h99") in ("h1", None)
    assert set(decided.values()) == {"h0"}
    assert rounds.stopped == "confident" or decided.get("h99") is None


def test_settings_refuse_what_the_cli_refuses() -> None:
    for bad in ({"confidence": 1.5}, {"confidence": 0.0}, {"min_loss": 1.0}, {"max_duration_s": 0}):
        with pytest.raises(ValueError, match="Expected"):
            Settings(**bad)


# --------------------------------------------------------------------------- ties


class Tied(Verdict):
    """A verdict with a tied group, as rank.py's ties (issue #30) mark it in the JSON."""

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "tied": True}


class FakeLocating:
    """run_locate's phases with nothing behind them: the verdict is given."""

    verdict: Verdict = Verdict([], 4, 0, [])

    def __init__(self, intent: Any, settings: Settings, started: float) -> None:
        from common.phases import Phases

        self.phases, self.topology = Phases(), "topology"
        self.stopped, self.rounds, self.decisions = "confident", 2, {}
        self.transport = ROCE

    def trace(self, max_sports: int) -> None: ...
    def probe(self, incasts: Any) -> None: ...
    def read_switches(self) -> dict[str, Any]:
        return {}

    def path_results(self) -> list[PathResult]:
        return [PathResult("h1", "h2", 1, ("h1>leaf1",), 10, 10)]

    def load_results(self, incasts: Any) -> list[PathResult]:
        return []

    def compare(self) -> tuple[list[Any], list[Any], list[str]]:
        return [], [], []

    def join(self, *args: Any) -> Verdict:
        return self.verdict

    def untraced(self) -> list[str]:
        return []


@pytest.mark.parametrize("tied", [True, False])
def test_a_tied_verdict_goes_to_the_follow_ups_with_the_time_left(
    monkeypatch: pytest.MonkeyPatch, tied: bool
) -> None:
    calls: list[tuple[Any, int, float, float]] = []

    def fake_split(intent: Any, found: Findings, c: float, s: float, udp_port: int) -> Verdict:
        assert udp_port == ROCE.udp_port  # the follow-ups probe with the run's own port
        calls.append((found.topology, len(found.paths), c, s))
        return Verdict([], found.verdict.paths, 0, [], ["split"])

    monkeypatch.setattr(gather, "split_ties", fake_split)
    monkeypatch.setattr(
        FakeLocating, "verdict", Tied([], 4, 0, []) if tied else Verdict([], 4, 0, [])
    )
    monkeypatch.setattr(gather, "_Locating", FakeLocating)
    run = gather.run_locate(None, confidence=0.9, max_duration_s=30.0)  # type: ignore[arg-type]
    assert (run.stopped, run.rounds, run.confidence) == ("confident", 2, 0.9)
    if tied:
        assert run.verdict.notes == ["split"] and len(calls) == 1
        topology, paths, confidence, left = calls[0]
        assert (topology, paths, confidence) == ("topology", 1, 0.9) and 25.0 < left <= 30.0
        assert "follow-ups" in run.phases
    else:
        assert calls == [] and run.verdict.notes == []


# --------------------------------------------------------------------------- output


def _run(stopped: Any, decisions: dict[Any, Any]) -> LocateRun:
    paths = [PathResult("h1", "h2", 49152, ("h1>leaf1",), 1000, 990)]
    return LocateRun(
        Verdict([], 1, 0, []), paths, 40.0, {}, stopped=stopped, rounds=3, confidence=0.95,
        decisions=decisions,
    )  # fmt: skip


def test_json_says_how_it_stopped_and_how_sure_each_path_is() -> None:
    document = as_json(_run("confident", {("h1", "h2", 49152): "h1"}))
    assert (document["stopped"], document["rounds"], document["confidence"]) == (
        "confident", 3, 0.95,
    )  # fmt: skip
    path = document["probed_paths"][0]
    assert path["sprt"] == "lossy"
    low, high = path["loss_interval"]
    assert low < 0.01 < high
    undecided = as_json(_run("max-duration", {("h1", "h2", 49152): None}))
    assert undecided["probed_paths"][0]["sprt"] == "undecided"


@pytest.mark.parametrize(
    ("stopped", "says", "never"),
    [("max-duration", OUT_OF_TIME, "stopped when sure"),
     ("confident", "stopped when sure", OUT_OF_TIME), ("fixed", "fixed --duration", OUT_OF_TIME)],
)  # fmt: skip
def test_table_and_markdown_say_when_it_ran_out_of_time(
    stopped: str, says: str, never: str
) -> None:
    run = _run(stopped, {})
    console = Console(record=True, width=200)
    render_table(run, console)
    for text in (console.export_text(), render_markdown(run)):
        assert says in text and never not in text


# --------------------------------------------------------------------------- CLI


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--confidence", "1.5"], "--confidence"), (["--confidence", "0"], "--confidence"),
     (["--max-duration", "60"], "--max-duration"), (["--min-loss", "0.5"], "--min-loss"),
     (["--min-loss", "0%"], "--min-loss"), (["--duration", "5"], "--duration")],
)  # fmt: skip
def test_bad_settings_exit_2_naming_the_option(args: list[str], option: str) -> None:
    done = CliRunner().invoke(locate_command, ["fabric.yml", *args])
    assert done.exit_code == 2, done.output
    assert f"'{option}'" in done.output and "Expected:" in done.output


def test_cli_passes_the_settings_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    seen: dict[str, Any] = {}

    def fake_run_locate(intent: Any, **options: Any) -> LocateRun:
        seen.update(options)
        return _run("confident", {})

    import agent.app.locate as app

    monkeypatch.setattr(app, "run_locate", fake_run_locate)
    monkeypatch.setattr(app, "load_fabric", lambda _: type("F", (), {"intent": None})())
    fabric = tmp_path / "fabric.yml"
    fabric.write_text("{}")
    done = CliRunner().invoke(
        locate_command,
        [str(fabric), "--confidence", "0.99", "--max-duration", "90s", "--min-loss", "2%",
         "-o", "json"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["stopped"] == "confident"
    assert (seen["confidence"], seen["max_duration_s"], seen["min_loss"], seen["duration_s"]) == (
        0.99, 90.0, 0.02, None,
    )  # fmt: skip

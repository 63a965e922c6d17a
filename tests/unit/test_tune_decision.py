"""``tune`` says one thing: the table, the JSON, the written override and the explanation are
rendered from one decision record (agent.twin.tune.decision), and name the same setting --
a change, "no change: no candidate measured better", or none -- on seeded random searches,
ties included, and on a rail-optimised fabric where every candidate measured the same (issue
#41, finding 5)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.app.tune import render, stage_table, tune_command, write_override
from agent.intent.loader import load_fabric
from agent.twin.network import PAPER_DCQCN, star_fabric_yaml
from agent.twin.tune.decision import decide, indistinguishable, no_load
from agent.twin.tune.judge import evaluate
from agent.twin.tune.objectives import Objectives, ObjectiveSpec
from agent.twin.tune.results import RunMetrics, SpeedResult, Trial, TuneResult
from agent.twin.tune.runners import Runner
from agent.twin.tune.runs import Job
from agent.twin.tune.search import tune
from agent.twin.tune.space import Candidate, EcnSetting
from common.conventions import console

# A rail-optimised pod in small: NIC eth<r> of every host on leaf r+1, so a ring whose
# neighbours sit on the same rail never crosses a spine -- every candidate measures the same.
RAIL = """\
name: rail-small
profile: nvidia-default
defaults:
  username: netops
  credentials: {password_env: ROCE_FABRIC_PASSWORD}
  ports: {speed: 100G, mtu: 9214, cable_m: 3}
devices:
  - {name: spine1, platform: arista_eos, role: spine, host: 10.0.0.1,
     ports: [{name: Ethernet1-2, peer: "leaf{n}:Ethernet9", cable_m: 30}]}
  - {name: leaf1, platform: arista_eos, role: leaf, host: 10.0.1.1,
     ports: [{name: Ethernet1-4, peer: "gpu{n}:eth0"}]}
  - {name: leaf2, platform: arista_eos, role: leaf, host: 10.0.1.2,
     ports: [{name: Ethernet1-4, peer: "gpu{n}:eth1"}]}
  - {name: gpu1, platform: linux_host, role: host, host: 10.0.2.1}
  - {name: gpu2, platform: linux_host, role: host, host: 10.0.2.2}
  - {name: gpu3, platform: linux_host, role: host, host: 10.0.2.3}
  - {name: gpu4, platform: linux_host, role: host, host: 10.0.2.4}
"""

G = 1_000_000_000
COLLECTIVE = ObjectiveSpec("collective", ranks=4, size_bytes=1 << 20)


# ------------------------------------------------------------------------------ decide()


def _trial(index: int, p99: int, util: float = 0.95) -> Trial:
    trial = Trial(Candidate(index, EcnSetting(10_000 * (index + 1), 40_000 * (index + 1), 5)))
    trial.runs = [
        RunMetrics(seed, util, 0.0, p99, p99, 0.01, 0, 200_000, "leaf1:E1", 1, 0.0,
                   senders=4, jain=1.0)
        for seed in (1, 2)
    ]  # fmt: skip
    trial.reasons = evaluate(trial.runs, Objectives())
    return trial


@pytest.mark.parametrize(
    ("p99s", "utils", "kind", "index", "best"),
    [
        # a candidate measured better than a feasible current: change
        ([300_000, 50_000, 80_000], [0.95] * 3, "change", 1, 1),
        # the best ties with today's (within 5 %): no change, the best named
        ([100_000, 97_000, 120_000], [0.95] * 3, "no change", 0, 1),
        # today's setting is the best: no change
        ([40_000, 50_000, 80_000], [0.95] * 3, "no change", 0, 0),
        # today's misses the utilisation floor: any feasible candidate is a change
        ([100_000, 99_000, 120_000], [0.5, 0.95, 0.95], "change", 1, 1),
        # nothing feasible: none, the closest named
        ([1_000, 2_000], [0.5, 0.7], "none", 1, None),
    ],
)
def test_decide(
    p99s: list[int], utils: list[float], kind: str, index: int, best: int | None
) -> None:
    trials = [_trial(i, p99, u) for i, (p99, u) in enumerate(zip(p99s, utils, strict=True))]
    decision = decide(trials)
    assert decision.kind == kind
    assert decision.trial is not None and decision.trial.candidate.index == index
    assert (decision.best.candidate.index if decision.best else None) == best
    assert (decision.recommended is None) == (kind == "none")
    if kind == "no change":
        assert decision.headline().startswith("no change: no candidate measured better")
        assert decision.why


# ------------------------------------------------------------------------------ agreement


def _label(trial: Trial | None) -> str | None:
    return None if trial is None else trial.candidate.label()


def _table_verdicts(speed: SpeedResult, objective: ObjectiveSpec) -> dict[int, str]:
    """Candidate number -> verdict cell, from the rendered table (wide: no cell folds)."""
    screen = console(width=400)
    with screen.capture() as captured:
        screen.print(stage_table(speed, speed.ecn, objective))
    rows = {}
    for line in captured.get().splitlines():
        match = re.match(r"^ *(\d+)│.*│([^│]*)$", line)
        if match:
            rows[int(match.group(1))] = match.group(2).strip()
    return rows


def _named_as_recommended(text: str) -> set[str]:
    """Every setting a text calls recommended or kept (the candidate labels after the words)."""
    end = r"(?: --|;|\n|$)"
    found = re.findall(r"recommended: (ECN [^;\n]*?)" + end, text)
    found += re.findall(r"than the current setting, (ECN [^;\n]*?)" + end, text)
    return {name.strip() for name in found}


def assert_agrees(result: TuneResult, fabric: Path, tmp: Path) -> None:
    """Table, JSON, override file and explanation name the decision's setting, and only it."""
    data = result.to_json()
    for speed, js in zip(result.speeds, data["speeds"], strict=True):
        decision = speed.decision
        recommended = decision.recommended
        label = _label(decision.trial)
        # the JSON
        assert js["decision"]["kind"] == decision.kind
        assert js["decision"]["setting"] == label
        assert js["recommended"] == (recommended.candidate.index if recommended else None)
        # the table: one row says recommended, the decision's; no change tells the ties apart
        verdicts = _table_verdicts(speed, result.objective)
        marked = [i for i, v in verdicts.items() if "recommended" in v]
        assert marked == ([recommended.candidate.index] if recommended else []), verdicts
        if decision.kind == "no change":
            assert verdicts[0] == "current; recommended: no change"
        # the explanation and the summary
        text = speed.explanation
        if recommended is None:
            assert "no candidate meets the constraints" in text
            assert "recommended" not in text.replace("NOT recommended", "")
        else:
            assert text.startswith(f"{speed.speed_bps // G}G: {decision.headline()}")
            assert text.endswith(f"decision: {decision.headline()}")
            assert _named_as_recommended(text) == {label}, text
            assert ("(current → recommended" in speed.summary) == decision.changes
    # the override: the dominant speed's decision, and the file says which
    decision = result.decision()
    out = tmp / "override.yml"
    written = write_override(out, result, fabric)
    assert data["decision"] == decision.to_json()
    if decision.recommended is None:
        assert not written and data["override"] is None
        return
    assert written
    text = out.read_text()
    assert f"# {decision.headline()}\n" in text
    document = yaml.safe_load(text)["overrides"]
    existing = yaml.safe_load(fabric.read_text()).get("overrides") or {}
    if not decision.changes:
        assert data["override"] == {} and document == existing
        return
    candidate = decision.recommended.candidate
    queue = document["ecn"]["queues"][result.roce_queue]
    assert (queue["min_threshold"], queue["max_threshold"], queue["max_probability"]) == (
        candidate.ecn.min_bytes,
        candidate.ecn.max_bytes,
        candidate.ecn.max_probability,
    )
    assert data["override"]["ecn"]["queues"][result.roce_queue] == queue
    for key, value in candidate.dcqcn:
        assert document["nic"]["dcqcn"][key] == value
    if result.objective.name == "collective":
        assert document["job"]["qps_per_connection"] == candidate.qps


def _scored(draw: int, levels: int) -> Runner:
    """A runner that scores a candidate without the twin, from a seeded draw over ``levels``
    values per measure (few levels: ties are common; low ones break a constraint; 0: every
    candidate misses the utilisation floor)."""
    utils = [0.8] if levels == 0 else [0.95, 0.8, 0.99][:levels]
    levels = max(levels, 1)

    def run(jobs: list[Job]) -> Iterator[RunMetrics]:
        for job in jobs:
            queue = job.intent.profile.ecn.queues[job.intent.profile.roce.priority]
            key = (queue.min_threshold, queue.max_threshold, queue.max_probability,
                   job.intent.profile.nic.dcqcn.rpg_ai_rate, job.qps)  # fmt: skip
            rng = random.Random(f"{draw}:{key}")
            util = rng.choice(utils)
            p99 = rng.choice([20_000, 20_500, 60_000][:levels])
            busbw = rng.choice([12.0e9, 12.2e9, 20e9][:levels])
            yield RunMetrics(job.seed, util, 0.0, p99, p99, 0.01, 0, 200_000, "leaf1:E1", 1,
                             0.0, senders=job.senders, jain=1.0, busbw_Bps=busbw,
                             ranks=job.objective.name == "collective")  # fmt: skip

    return run


@pytest.fixture(scope="module")
def star(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("decision") / "star.yml"
    path.write_text(star_fabric_yaml(5, "40G", profile="dcqcn-paper", dcqcn=PAPER_DCQCN))
    return path


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    draw=st.integers(0, 10_000),
    levels=st.integers(0, 3),
    collective=st.booleans(),
    candidates=st.sampled_from([4, 8]),
)
def test_every_rendering_names_the_decision(
    star: Path, tmp_path: Path, draw: int, levels: int, collective: bool, candidates: int
) -> None:
    """Seeded random searches (scores drawn, not simulated: ties, changes and nothing
    feasible all occur): table, JSON, override and explanation agree."""
    objective = COLLECTIVE if collective else ObjectiveSpec()
    result = tune(load_fabric(star).intent, senders=4, candidates=candidates, seeds=(1, 2),
                  objective=objective, qps_levels=(1, 2), runner=_scored(draw, levels))  # fmt: skip
    assert_agrees(result, star, tmp_path)


def test_a_search_where_everything_ties_keeps_the_current_setting(
    star: Path, tmp_path: Path
) -> None:
    result = tune(load_fabric(star).intent, senders=4, candidates=4, runner=_scored(1, 1))
    (speed,) = result.speeds
    assert speed.decision.kind == "no change" and speed.recommended is not None
    assert speed.recommended.candidate.current
    assert_agrees(result, star, tmp_path)


@pytest.mark.parametrize(
    ("p99s", "utils", "flat"),
    [
        ([100_000, 97_000, 101_000], [0.95] * 3, True),  # all within 5 %, all feasible
        ([100_000, 97_000, 120_000], [0.95] * 3, False),  # one 20 % apart: told apart
        ([100_000, 100_500, 100_200], [0.95, 0.95, 0.5], False),  # one misses a constraint
        ([100_000], [0.95], False),  # one candidate: nothing compared
        ([100_000, 100_000], [0.95, 0.95], True),
    ],
    ids=["flat", "spread", "infeasible", "alone", "equal"],
)
def test_a_job_that_cannot_tell_settings_apart_is_named(
    p99s: list[int], utils: list[float], flat: bool
) -> None:
    trials = [_trial(i, p99, u) for i, (p99, u) in enumerate(zip(p99s, utils, strict=True))]
    assert indistinguishable(trials) is flat
    if flat:
        said = no_load(decide(trials), trials, ObjectiveSpec(), ["more senders (--senders 8)"])
        assert said.kind == "no change"
        assert said.why.startswith("this job does not load the fabric enough")
        assert said.why.endswith("heavier jobs to try: more senders (--senders 8)")


def test_a_rung_where_every_candidate_misses_alike_is_still_flat() -> None:
    """A halving rung runs a smaller job: a 1/16 collective fills no link, every candidate
    misses the utilisation floor alike -- nothing told apart there; at the end (the job
    itself) the claim needs every candidate meeting the constraints."""
    trials = [_trial(i, 100_000 + i, 0.5) for i in range(3)]
    assert indistinguishable(trials, feasible=False)
    assert not indistinguishable(trials)
    mixed = [_trial(0, 100_000, 0.5), _trial(1, 100_000, 0.95)]
    assert not indistinguishable(mixed, feasible=False)


# ------------------------------------------------------------------------------ in the twin


@pytest.fixture(scope="module")
def rail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rail") / "rail.yml"
    path.write_text(RAIL)
    return path


@pytest.mark.parametrize("seed", [1, 7])
def test_rail_optimised_every_candidate_ties_and_all_say_no_change(
    rail: Path, tmp_path: Path, seed: int
) -> None:
    """The issue's case, in the twin: on a rail-optimised fabric every candidate measures the
    same busbw; the table, JSON, override and explanation all say no change, and why: the job
    does not load the fabric enough to tell settings apart (the grid is not widened along a
    flat objective), naming a heavier job to try."""
    result = tune(load_fabric(rail).intent, candidates=4, seeds=(seed,), objective=COLLECTIVE)
    (speed,) = result.speeds
    assert speed.decision.kind == "no change", speed.explanation
    assert "does not load the fabric enough to tell settings apart" in speed.decision.why
    assert "--workload alltoall" in speed.decision.why
    assert "after widening" not in speed.explanation and not speed.edge_notes
    assert_agrees(result, rail, tmp_path)


@pytest.mark.parametrize("seed", [2, 5])
def test_queue_objective_in_the_twin_agrees(star: Path, tmp_path: Path, seed: int) -> None:
    result = tune(load_fabric(star).intent, senders=4, candidates=4, seeds=(seed,),
                  duration_s=3e-3, dcqcn=False)  # fmt: skip
    assert_agrees(result, star, tmp_path)


def test_the_command_says_no_change_everywhere(rail: Path, tmp_path: Path) -> None:
    out = tmp_path / "tuned.yml"
    args = [str(rail), "--ranks", "4", "--size", "1MiB", "--candidates", "4", "--seeds", "1",
            "--write-override", str(out)]  # fmt: skip
    result = CliRunner().invoke(tune_command, args)
    assert result.exit_code == 0, result.stderr
    assert re.search(r"^ *0│.*│current; recommended: no change *$", result.stdout, re.M)
    assert "decision: no change: no candidate measured better" in result.stdout
    assert "next: " not in result.stdout  # nothing to apply
    assert "(no change: the overrides as they are)" in result.stderr
    assert yaml.safe_load(out.read_text()) == {"overrides": {}}
    data = CliRunner().invoke(tune_command, [*args[:-2], "-o", "json"])
    assert data.exit_code == 0
    assert '"kind": "no change"' in data.stdout and '"override": {}' in data.stdout


def test_today_qps_is_the_fabrics_job_setting(rail: Path, tmp_path: Path) -> None:
    """The current setting runs with the fabric's QPs per connection, so no change keeps them."""
    path = tmp_path / "rail-qps.yml"
    path.write_text(
        RAIL.replace("devices:", "overrides:\n  job: {qps_per_connection: 2}\ndevices:")
    )
    result = tune(load_fabric(path).intent, candidates=4, seeds=(1,), objective=COLLECTIVE,
                  runner=_scored(3, 1))  # fmt: skip
    current = next(t for t in result.speeds[0].ecn.trials if t.candidate.current)
    assert current.candidate.qps == 2
    assert result.qps_per_connection() == 2 and result.override() == {}


def test_render_prints_the_decision(rail: Path) -> None:
    result = tune(load_fabric(rail).intent, candidates=4, seeds=(1,), objective=COLLECTIVE,
                  runner=_scored(3, 1))  # fmt: skip
    screen = console(width=100)
    with screen.capture() as captured:
        render(result, screen)
    assert "decision: no change" in captured.get()

"""``tune`` without ``--job`` or ``--ranks`` searches for every GPU NIC of the speed (issue
#43): the job ``twin --workload`` runs by default, rail-aligned on multi-NIC hosts.  Where the
job's rails share no link its shorter rungs run rail 0 alone and one more rung runs the best on
every rail at the stated job; where they share one, nothing is sampled.

Checked on seeded random rail pods (the runs replaced by a placing stand-in, as in
test_tune_job), and on a pod whose NICs of one host share a leaf.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.app.tune import tune_command
from agent.twin.placement import nics_by_host
from agent.twin.tune import runners
from tests.unit.rail_pods import pod_shapes, rail_pod
from tests.unit.test_tune_job import Recording
from tests.unit.test_twin_rail_sample import _shared_pod

FAST = ("--seeds", "2", "--candidates", "4", "--no-dcqcn", "--method", "halving", "-o", "json")


def _tune(tmp_path: Path, fabric: str, *options: str) -> tuple[int, str]:
    (tmp_path / "pod.yml").write_text(fabric)
    done = CliRunner().invoke(tune_command, [str(tmp_path / "pod.yml"), "--no-progress", *options])
    return done.exit_code, done.stdout


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shape=pod_shapes(5), seed=st.integers(0, 99))
def test_the_default_job_is_every_nic_and_its_rail_sample_is_checked_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shape: tuple[int, int, int], seed: int
) -> None:
    hosts, rails, groups = shape
    recording = Recording()
    monkeypatch.setattr(runners, "run_job", recording)
    code, output = _tune(tmp_path, rail_pod(hosts, rails, groups, spines=1 + seed % 2), *FAST)
    assert code in (0, 1), output
    assert recording.network is not None
    nics = nics_by_host(recording.network)
    every = tuple(e for host in sorted(nics, key=lambda h: int(h[3:])) for e in nics[host])
    searched = [(run, spec) for run, spec in recording.runs if "held out" not in run.label]
    assert searched[0][0].senders == len(every) == hosts * groups * rails
    for run, spec in searched:
        assert spec.hosts == every[: len(spec.hosts or ())]  # the job on its first whole hosts
        assert run.sample_rails == spec.sample_rails
    sampled = [run for run, _ in searched if run.sample_rails]
    whole = [run for run, _ in searched if not run.sample_rails]
    speed = json.loads(output)["speeds"][0]
    if rails == 1:
        assert not sampled
        return
    assert sampled and whole, "rails on their own leaves share no link: rail 0 screens"
    last = speed["rungs"][-1]
    assert last["sample_rails"] is None and last["fidelity"].endswith("every rail")
    assert {p["senders"] for p in last["points"]} == {len(every)}  # the stated job only
    assert all(r["sample_rails"] == 1 for r in speed["rungs"][:-1] if "rail 0" in r["fidelity"])


def test_rails_that_share_a_leaf_are_never_sampled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recording = Recording()
    monkeypatch.setattr(runners, "run_job", recording)
    code, output = _tune(tmp_path, _shared_pod(2), *FAST)
    assert code in (0, 1), output
    assert recording.runs and all(spec.sample_rails == 0 for _, spec in recording.runs)
    assert {len(spec.hosts or ()) for _, spec in recording.runs} >= {8}  # 4 hosts x 2 NICs


def test_ranks_runs_one_rank_per_host_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recording = Recording()
    monkeypatch.setattr(runners, "run_job", recording)
    code, output = _tune(tmp_path, rail_pod(3, 2, 2), "--ranks", "4", *FAST)
    assert code in (0, 1), output
    for run, spec in recording.runs:
        hosts = [e.partition(":")[0] for e in spec.hosts or ()]
        assert len(set(hosts)) == len(hosts) == run.senders  # one NIC of each host
        assert spec.sample_rails == 0


def test_the_rail_sample_can_be_turned_off_for_the_bench(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agent.intent.loader import load_fabric
    from agent.twin.tune.objectives import ObjectiveSpec
    from agent.twin.tune.search import tune

    (tmp_path / "pod.yml").write_text(rail_pod(2, 2, 2))
    intent = load_fabric(tmp_path / "pod.yml").intent
    for sample, expected in ((True, {0, 1}), (False, {0})):
        recording = Recording()
        result = tune(intent, objective=ObjectiveSpec("collective"), runner=recording.run_all,
                      seeds=(1,), candidates=4, dcqcn=False, method="halving",
                      rail_sample=sample)  # fmt: skip
        assert {spec.sample_rails for _, spec in recording.runs} == expected
        assert result.speeds[0].load_points[0] == 8

"""A training step of several collectives (agent/twin/step.py; a job file's ``step``).

The step's numbers are checked against runs of each collective alone on seeded random rail
pods, collectives, sizes and call counts (not the example it was written on); the job file's
refusals table-driven for where they point; ``twin --job`` and ``tune --job`` end to end.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.tune import tune_command
from agent.app.twin import twin_command
from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.twin import collectives as C
from agent.twin.jobfile import job_file_schema, load_jobs, resolve_jobs
from agent.twin.network import TwinNetwork, build_network, load_network
from agent.twin.placement import place_ranks
from agent.twin.step import StepPart, run_step
from agent.twin.tune import runs as runs_module
from agent.twin.tune.objectives import ObjectiveSpec, TunedJob
from agent.twin.tune.runs import Job
from agent.twin.workloads import COLLECTIVES
from tests.unit.rail_pods import load_pod, rail_pod

ROOT = Path(__file__).resolve().parents[2]
STEP = (
    "jobs:\n  - name: moe\n    hosts: [gpu1, gpu3]\n    step:\n"
    "      - {collective: allreduce, size: 2MiB}\n"
    "      - {collective: alltoall, size: 1MiB, per_step: 4}\n"
)


def _the_same(a: dict[str, object], b: dict[str, object]) -> None:
    """Two reports of one run, but for the wall-clock time."""
    assert {k: v for k, v in a.items() if k != "wall_s"} == {
        k: v for k, v in b.items() if k != "wall_s"
    }


@pytest.mark.parametrize("draw", [3, 11, 27, 58])
def test_a_step_adds_up_its_collectives_each_run_as_alone(tmp_path: Path, draw: int) -> None:
    """T = sum(per_step x time), the shares its parts, busbw the bus bytes over T; each
    collective's report is its run alone with the same seed."""
    rng = random.Random(draw)
    hosts, rails, groups = rng.choice([(2, 2, 2), (3, 2, 1), (2, 4, 1), (4, 1, 2)])
    network = load_pod(tmp_path, rail_pod(hosts=hosts, rails=rails, groups=groups))
    parts = tuple(
        StepPart(rng.choice(COLLECTIVES), rng.choice([1, 2, 3]) << 20, rng.randint(1, 12))
        for _ in range(rng.randint(2, 3))
    )
    job = C.CollectiveSpec("allreduce", 0, 1 << 20, rng.choice([1, 2]), split_data_on_qps=True)
    step = run_step(network, job, parts, "s", seed=draw)
    alone = [C.run_collectives(network, [part.of(job)], ["s"], seed=draw)[0] for part in parts]
    for report, own in zip(step.reports, alone, strict=True):
        _the_same(report.to_json(), own.to_json())
    times = [p.per_step * r.time_s for p, r in zip(parts, alone, strict=True)]
    assert step.time_s == pytest.approx(sum(times), rel=1e-12)
    assert step.shares == pytest.approx([t / sum(times) for t in times], rel=1e-12)
    bus_bytes = sum(p.per_step * r.busbw_Bps * r.time_s for p, r in zip(parts, alone, strict=True))
    assert all(r.completed for r in alone)
    assert step.busbw_Bps == pytest.approx(bus_bytes / sum(times), rel=1e-9)
    assert min(r.busbw_Bps for r in alone) <= step.busbw_Bps <= max(r.busbw_Bps for r in alone)
    assert 0 < step.line_rate_fraction <= 1.001
    assert step.passed == all(r.passed for r in alone)


def test_a_step_that_did_not_complete_claims_no_busbw(tmp_path: Path) -> None:
    network = load_pod(tmp_path, rail_pod(hosts=2, rails=2))
    job = C.CollectiveSpec("allreduce", 0, 4 << 20)
    parts = (StepPart("allreduce", 4 << 20), StepPart("alltoall", 4 << 20, 3))
    step = run_step(network, job, parts, max_duration_s=20e-6)
    assert not step.completed
    assert step.busbw_Bps == 0 and step.line_rate_fraction == 0
    assert step.to_json()["completed"] is False


# ---------------------------------------------------------------- the job file


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> TwinNetwork:
    return load_pod(tmp_path_factory.mktemp("pod"), rail_pod(hosts=4, rails=2, groups=2))


def test_a_step_is_read_with_its_counts_on_the_jobs_gpus(tmp_path: Path, pod: TwinNetwork) -> None:
    (tmp_path / "jobs.yml").write_text(STEP)
    [named] = resolve_jobs(load_jobs(tmp_path / "jobs.yml"), pod)
    assert [p.describe() for p in named.step] == ["allreduce 2 MiB x1", "alltoall 1 MiB x4"]
    assert named.spec.workload == "allreduce" and named.spec.size_bytes == 2 << 20
    assert named.spec.hosts == ("gpu1:eth0", "gpu1:eth1", "gpu3:eth0", "gpu3:eth1")
    assert "step" in job_file_schema()["$defs"]["Job"]["properties"]


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        (
            "jobs:\n  - name: a\n    collective: alltoall\n    step:\n"
            "      - {collective: allreduce, size: 1MiB}\n",
            "jobs.yml:2:", "Expected: step, or collective Actual: both",
        ),
        (
            "jobs:\n  - name: a\n    size: 1MiB\n    channels: 2\n    step:\n"
            "      - {collective: allreduce, size: 1MiB}\n",
            "jobs.yml:2:", "Expected: step, or channels, size Actual: both",
        ),
        (
            "jobs:\n  - name: a\n    step:\n      - {collective: allreduce, size: 1MiB}\n"
            "      - {collective: sendrecv, size: 1MiB, channels: 2}\n",
            "jobs.yml:5:", "channels: Expected: 1 for sendrecv",
        ),
        (
            "jobs:\n  - name: a\n    step:\n      - {collective: allreduce, size: 1MiB, "
            "per_step: 0}\n",
            "jobs.yml:4:", "jobs[0].step[0].per_step",
        ),
        (
            "jobs:\n  - name: a\n    step:\n      - {collective: allreduce}\n",
            "jobs.yml:4:", "jobs[0].step[0].size",
        ),
        (
            "jobs:\n  - name: a\n    step:\n      - {collective: allreduce, size: 1MiB}\n"
            "      - {collective: allgather, size: 16}\n",
            "jobs.yml:5:", "jobs[0].step[1]: Expected: at least",
        ),
        (
            "jobs:\n  - {name: a, hosts: [gpu1, gpu2]}\n  - name: b\n    hosts: [gpu3, gpu4]\n"
            "    step:\n      - {collective: alltoall, size: 1MiB}\n",
            "jobs.yml:6:", "Expected: one collective per job when several run side by side",
        ),
        (
            "jobs:\n  - name: a\n    step:\n"
            + "      - {collective: allreduce, size: 1MiB}\n" * 9,
            "jobs.yml:4:", "jobs[0].step: List should have at most 8",
        ),
    ],
    ids=["step-and-collective", "step-and-size", "p2p-channels", "per-step-0", "no-size",
         "too-small", "beside", "nine"],
)  # fmt: skip
def test_a_bad_step_names_its_line_and_field(
    tmp_path: Path, pod: TwinNetwork, text: str, where: str, says: str
) -> None:
    (tmp_path / "jobs.yml").write_text(text)
    with pytest.raises(IntentError) as caught:
        resolve_jobs(load_jobs(tmp_path / "jobs.yml"), pod)
    message = str(caught.value)
    assert where in message and says in message, message


# ---------------------------------------------------------------- twin --job, tune --job


def test_twin_job_reports_each_collective_and_the_step(tmp_path: Path) -> None:
    fabric = tmp_path / "pod.yml"
    fabric.write_text(rail_pod(hosts=4, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text(STEP)
    runner = CliRunner()
    args = [str(fabric), "--job", str(tmp_path / "jobs.yml"), "--no-progress"]
    done = runner.invoke(twin_command, [*args, "-o", "json", "--show-placement"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    [step] = data["jobs"]
    assert step["job"] == "moe" and step["step"] == "allreduce 2 MiB x1 + alltoall 1 MiB x4"
    parts = step["collectives"]
    assert [(c["workload"], c["per_step"]) for c in parts] == [("allreduce", 1), ("alltoall", 4)]
    assert sum(c["share_of_step"] for c in parts) == pytest.approx(1)
    assert step["time_s"] == pytest.approx(sum(c["time_per_step_s"] for c in parts))
    assert all(c["placement"] for c in parts) and data["passed"] is True
    text = runner.invoke(twin_command, args)
    assert text.exit_code == 0, text.output
    assert "job moe: its step, allreduce 2 MiB x1 + alltoall 1 MiB x4" in text.output
    assert "share" in text.output and "step busbw" in text.output


def test_tunes_run_of_a_step_is_the_step_at_the_rungs_share_of_each_size(tmp_path: Path) -> None:
    """One run of the search on a step job: each collective at the rung's share of its own
    size, the searched QPs; busbw the step's, the constraints' numbers the worst collective's."""
    fabric = tmp_path / "pod.yml"
    fabric.write_text(rail_pod(hosts=4, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text(STEP)
    intent = load_fabric(fabric).intent
    network = build_network(intent)
    [named] = resolve_jobs(load_jobs(tmp_path / "jobs.yml"), network)
    placed = place_ranks(network, named.spec)
    spec = replace(named.spec, ranks=len(placed.endpoints), hosts=tuple(placed.endpoints),
                   speed_bps=placed.speed_bps)  # fmt: skip
    tuned = TunedJob(named.name, spec, placed.rails, named.step)
    objective = ObjectiveSpec("collective", "allreduce", 4, 1 << 20, tuned)  # half of 2 MiB
    metrics = runs_module.run_job(Job(intent, "incast", 4, 400 * 10**9, 0.005, 5, 3, objective, 2))
    job = replace(spec, qps_per_connection=2, split_data_on_qps=True)
    step = run_step(network, job, named.step, "moe", fraction=0.5, seed=5)
    assert [r.size_bytes for r in step.reports] == [1 << 20, 1 << 19]
    assert metrics.busbw_Bps == step.busbw_Bps and metrics.duration_s == step.time_s
    assert metrics.paused_fraction == max(r.max_paused_fraction for r in step.reports)
    assert metrics.queue_p99_bytes == max(r.queue_p99_bytes for r in step.reports)
    assert metrics.lossless_drops == sum(r.lossless_drops for r in step.reports)
    assert metrics.completed and 0 < metrics.bound_fraction <= 1.001  # type: ignore[operator]


def test_tune_job_with_a_step_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "pod.yml").write_text(rail_pod(hosts=2, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text(STEP)
    args = [str(tmp_path / "pod.yml"), "--job", str(tmp_path / "jobs.yml"), "--no-progress",
            "--seeds", "1", "--candidates", "4", "--qps", "1,2", "--no-dcqcn"]  # fmt: skip
    done = CliRunner().invoke(tune_command, [*args, "-o", "json"])
    assert done.exit_code in (0, 1), done.output
    result = json.loads(done.output)
    assert [p["per_step"] for p in result["objective"]["job"]["step"]] == [1, 4]
    assert result["scenario"] == "step allreduce 2 MiB x1 + alltoall 1 MiB x4"
    [speed] = result["speeds"]
    runs = [r for trial in speed["stages"][-1]["trials"] for r in trial["runs"]]
    assert runs and all(r["completed"] and r["busbw_Bps"] > 0 for r in runs)
    text = CliRunner().invoke(tune_command, args)
    assert "step busbw of job moe" in text.output, text.output


def test_the_shipped_step_runs_on_its_fabric() -> None:
    fabric = load_network(ROOT / "playbooks" / "fabrics" / "pod-32-leaf.yml")
    [named] = resolve_jobs(load_jobs(ROOT / "playbooks" / "jobs" / "pod-32-leaf-moe-step.yml"),
                           fabric)  # fmt: skip
    assert [(p.workload, p.per_step) for p in named.step] == [("allreduce", 1), ("alltoall", 8)]

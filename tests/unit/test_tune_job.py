"""``tune --job FILE``: tune for the job of a job file (issue #43), on its own NICs, and for
several jobs side by side (the slowest job's share of its bound).

Every run a search makes is the job itself on its first whole hosts (a load point or a rung
never splits a host's rails), with the candidate's QPs, at the job's size in full runs; checked
on seeded random rail pods and host choices (the runs are replaced by a placing stand-in, as in
test_tune_never_refuses), and once end to end in the twin. Refusals name the option or the job
file's line.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.app.tune import tune_command
from agent.intent.loader import load_fabric
from agent.twin import collectives as C
from agent.twin.jobfile import load_jobs, resolve_jobs
from agent.twin.network import TwinNetwork, build_network
from agent.twin.placement import CollectiveSpec, nics_by_host, place_ranks
from agent.twin.tune import runners
from agent.twin.tune import runs as runs_module
from agent.twin.tune.objectives import ObjectiveSpec, TunedJob
from agent.twin.tune.results import RunMetrics
from agent.twin.tune.runs import Job, collective_spec
from tests.unit.rail_pods import pod_shapes, rail_pod
from tests.unit.test_tune_never_refuses import pod


class Recording:
    """Stands in for ``runs.run_job``: places each run as the real one does and keeps its
    collective; metrics drawn from a seed."""

    def __init__(self) -> None:
        self.network: TwinNetwork | None = None
        self.runs: list[tuple[Job, CollectiveSpec]] = []

    def run_all(self, jobs: list[Job]) -> Iterator[RunMetrics]:
        """A runner (``tune(runner=...)``): the jobs in order, in this process."""
        return iter([self(job) for job in jobs])

    def __call__(self, job: Job) -> RunMetrics:
        if self.network is None:
            self.network = build_network(job.intent)
        spec = collective_spec(job, self.network)
        C.check_placement(self.network, spec)
        self.runs.append((job, spec))
        rng = random.Random(f"{job.seed}:{job.qps}:{job.intent.profile.nic.dcqcn.rpg_ai_rate}")
        return RunMetrics(job.seed, rng.choice([0.95, 0.8]), 0.0, 20_000, 20_000, 0.01, 0,
                          200_000, "leaf1:E1", 1, 0.0, senders=job.senders, jain=1.0,
                          busbw_Bps=rng.choice([30e9, 45e9]), ranks=True)  # fmt: skip


def _tune(tmp_path: Path, fabric: str, jobs: str, *options: str) -> Any:
    (tmp_path / "pod.yml").write_text(fabric)
    (tmp_path / "jobs.yml").write_text(jobs)
    return CliRunner().invoke(
        tune_command,
        [str(tmp_path / "pod.yml"), "--job", str(tmp_path / "jobs.yml"), "--no-progress",
         *options],
    )  # fmt: skip


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shape=pod_shapes(6), draw=st.randoms(use_true_random=False))
def test_every_run_is_the_job_on_its_first_whole_hosts(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    shape: tuple[int, int, int],
    draw: random.Random,
) -> None:
    hosts, rails, groups = shape
    fabric = rail_pod(hosts=hosts, rails=rails, groups=groups)
    names = [f"gpu{h}" for h in range(1, hosts * groups + 1)]
    chosen = draw.sample(names, draw.randint(2, len(names)))
    recording = Recording()
    monkeypatch.setattr(runners, "run_job", recording)
    done = _tune(
        tmp_path, fabric, f"jobs:\n  - {{name: train, hosts: [{', '.join(chosen)}], size: 8MiB}}\n",
        "--seeds", "1", "--candidates", "4", "--no-dcqcn", "--method", "halving", "-o", "json",
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    assert recording.network is not None
    nics = nics_by_host(recording.network)
    job = tuple(e for host in chosen for e in nics[host])  # the job's NICs, host by host
    assert recording.runs
    for run, spec in recording.runs:
        assert spec.hosts is not None and len(spec.hosts) % rails == 0
        if "held out" in run.label:  # a recommended change run elsewhere: the job's shape
            assert len(spec.hosts) == len(job) and spec.size_bytes == 8 << 20
            continue
        assert spec.hosts == job[: len(spec.hosts)], (spec.hosts, job)
        assert spec.qps_per_connection == run.qps
        assert spec.split_data_on_qps == (run.qps > 1)  # the job file's: 1 QP, no split
        assert spec.size_bytes <= 8 << 20
    full = [
        spec for run, spec in recording.runs if spec.hosts == job and "held out" not in run.label
    ]
    assert full and max(spec.size_bytes for spec in full) == 8 << 20
    result = json.loads(done.output)
    assert result["objective"]["job"]["name"] == "train"
    [speed] = result["speeds"]
    assert speed["load_points"][0] == len(job)
    assert all(point % rails == 0 for point in speed["load_points"])


@pytest.mark.parametrize(
    ("jobs", "options", "says"),
    [
        ("jobs:\n  - {name: a}\n", ("--ranks", "4"), "tune --ranks: Expected: --job or --ranks"),
        ("jobs:\n  - {name: a}\n", ("--size", "1MiB"), "tune --size: Expected: --job or --size"),
        ("jobs:\n  - {name: a}\n", ("--speed", "400G"), "tune --speed: Expected: --job or"),
        ("jobs:\n  - {name: a}\n", ("--workload", "alltoall"), "tune --workload: Expected"),
        ("jobs:\n  - {name: a}\n", ("--objective", "queue"), "Expected: collective with --job"),
        ("jobs:\n  - name: a\n    hosts: [gpu1, gpu99]\n", (), "jobs.yml:3:"),
        ("jobs:\n  - name: a\n    size: 512GiB\n", (), "job a's size at most"),
        (
            "jobs:\n  - {name: a, hosts: [gpu1, gpu2]}\n"
            "  - {name: b, hosts: [gpu3, gpu4], size: 512GiB}\n",
            (),
            "job b's size at most",
        ),
    ],
    ids=["ranks", "size", "speed", "workload", "queue", "unknown-host", "too-big", "beside-big"],
)
def test_what_tune_job_refuses_exits_2_naming_it(
    tmp_path: Path, jobs: str, options: tuple[str, ...], says: str
) -> None:
    done = _tune(tmp_path, rail_pod(hosts=2, rails=2, groups=2), jobs, *options)
    assert done.exit_code == 2, done.output
    assert says in done.output, done.output


def test_tune_job_end_to_end_in_the_twin(tmp_path: Path) -> None:
    """A real search on a 2-host x 2-NIC job: its one load point is all 4 NICs, every full run
    measured the job (busbw within the NICs' bound), and the JSON says whose job it was."""
    done = _tune(
        tmp_path, rail_pod(hosts=2, rails=2, groups=2),
        "jobs:\n  - {name: moe, hosts: [gpu1, gpu3], collective: alltoall, size: 2MiB}\n",
        "--seeds", "1", "--candidates", "4", "--qps", "1,2", "--no-dcqcn", "-o", "json",
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    result = json.loads(done.output)
    assert result["objective"]["workload"] == "alltoall"
    assert result["objective"]["job"]["spec"]["hosts"] == [
        "gpu1:eth0", "gpu1:eth1", "gpu3:eth0", "gpu3:eth1",
    ]  # fmt: skip
    [speed] = result["speeds"]
    assert speed["load_points"] == [4]
    bound = C.busbw_bound_Bps("alltoall", 4, 400 * 10**9, rails=2)
    runs = [r for trial in speed["stages"][0]["trials"] for r in trial["runs"]]
    assert runs and all(r["senders"] == 4 and r["completed"] for r in runs)
    assert all(0 < r["busbw_Bps"] <= bound * 1.001 for r in runs), bound
    assert "more hosts in job moe (hosts:)" in speed["decision"]["why"]


def test_todays_setting_runs_the_job_as_its_file_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The current candidate: the job file's 4 QPs unsplit; the searched levels split above 1."""
    recording = Recording()
    monkeypatch.setattr(runners, "run_job", recording)
    done = _tune(
        tmp_path, rail_pod(hosts=2, rails=2, groups=2),
        "jobs:\n  - {name: a, hosts: [gpu1, gpu3], qps_per_connection: 4, "
        "split_data_on_qps: false}\n",
        "--seeds", "1", "--candidates", "4", "--no-dcqcn", "--qps", "1,2",
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    split = {(spec.qps_per_connection, spec.split_data_on_qps) for _, spec in recording.runs}
    assert split == {(4, False), (1, False), (2, True)}, split


# ---------------------------------------------------------------- jobs side by side

TWO_JOBS = (
    "jobs:\n"
    "  - {name: train, hosts: [gpu1, gpu2, gpu5, gpu6], size: 4MiB}\n"
    "  - {name: moe, hosts: [gpu3, gpu7], collective: alltoall, size: 1MiB}\n"
)


def test_jobs_side_by_side_run_whole_and_are_judged_by_the_slowest(tmp_path: Path) -> None:
    """One run of the search: both jobs at once, whole, at the searched QPs and the rung's
    share of each one's size; its metrics are the side-by-side run's (checked against
    run_collectives itself), the objective the slowest job's share of its bound."""
    fabric = tmp_path / "pod.yml"
    fabric.write_text(rail_pod(hosts=4, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text(TWO_JOBS)
    intent = load_fabric(fabric).intent
    network = build_network(intent)
    named = resolve_jobs(load_jobs(tmp_path / "jobs.yml"), network)
    jobs = []
    for one in named:
        placed = place_ranks(network, one.spec)
        spec = replace(one.spec, ranks=len(placed.endpoints), hosts=tuple(placed.endpoints),
                       speed_bps=placed.speed_bps)  # fmt: skip
        jobs.append(TunedJob(one.name, spec, placed.rails))
    quarter = 1 << 20  # a quarter of train's 4 MiB: moe runs a quarter of its own, 256 KiB
    objective = ObjectiveSpec("collective", "allreduce", 8, quarter, jobs[0], (jobs[1],))
    run = Job(intent, "incast", 12, 400 * 10**9, 0.005, 3, 3, objective, 2)
    metrics = runs_module.run_job(run)
    specs = [
        replace(jobs[0].spec, size_bytes=quarter, qps_per_connection=2, split_data_on_qps=True),
        replace(jobs[1].spec, size_bytes=quarter // 4, qps_per_connection=2,
                split_data_on_qps=True),
    ]  # fmt: skip
    reports = C.run_collectives(network, specs, ["train", "moe"], seed=3)
    assert metrics.job_busbw == tuple(r.busbw_Bps for r in reports)
    assert metrics.bound_fraction == min(r.line_rate_fraction for r in reports)
    assert metrics.completed and metrics.senders == 12 and 0 < metrics.bound_fraction <= 1.001


def test_tune_jobs_side_by_side_end_to_end(tmp_path: Path) -> None:
    done = _tune(
        tmp_path, rail_pod(hosts=4, rails=2, groups=2), TWO_JOBS,
        "--seeds", "1", "--candidates", "4", "--no-dcqcn", "--qps", "1,2", "-o", "json",
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    result = json.loads(done.output)
    assert [j["name"] for j in result["objective"]["beside"]] == ["moe"]
    assert result["scenario"] == "train (allreduce) + moe (alltoall)"
    [speed] = result["speeds"]
    assert speed["load_points"] == [12]  # both jobs, whole: 4 x 2 + 2 x 2 GPUs
    trials = speed["stages"][0]["trials"]
    ran = [r for t in trials for r in t["runs"]]
    assert ran and all(len(r["job_busbw"]) == 2 for r in ran)
    assert all(r["bound_fraction"] <= 1.001 for r in ran)
    if speed["held_out"] is not None:  # a change: held out on seeds and joint placements
        held = [r["hosts"] for r in speed["held_out"]["runs"]]
        assert held[:2] == [None, None] and all(len(h) == 2 for h in held[2:])


@pytest.mark.parametrize(
    ("fabric", "second", "says"),
    [
        (
            pod([(2, 1, "400G"), (2, 1, "100G")], 1),
            "",
            "one speed's setting) Actual: a 400G, b 100G",
        ),
        (pod([(4, 1, "400G")], 1), ", qps_per_connection: 4", "Actual: a 1, b 4"),
        (pod([(4, 1, "400G")], 1), ", split_data_on_qps: true", "Actual: a 1, b 1 split"),
    ],
    ids=["speeds", "qps", "split"],
)
def test_jobs_that_cannot_share_one_setting_are_refused(
    tmp_path: Path, fabric: str, second: str, says: str
) -> None:
    jobs = (
        "jobs:\n  - {name: a, hosts: [gpu1, gpu2]}\n"
        f"  - {{name: b, hosts: [gpu3, gpu4]{second}}}\n"
    )
    done = _tune(tmp_path, fabric, jobs)
    assert done.exit_code == 2, done.output
    assert says in done.output, done.output

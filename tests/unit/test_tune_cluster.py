"""``roce-agent tune --executor dask://HOST:PORT``: the search on a Dask cluster gives what it
gives locally (agent.twin.cluster, agent.twin.tune.runners.dask_runner).

A real cluster of two worker processes on loopback (``distributed.LocalCluster``, 127.0.0.1
only), started once for the module and closed at its end, with a check that none of its
processes outlives it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster

import agent
from agent.app.tune import ExecutorType, tune_command
from agent.intent.loader import load_fabric
from agent.twin.cluster import ClusterError, DaskMap
from agent.twin.network import PAPER_DCQCN, star_fabric_yaml
from agent.twin.tune.results import RunMetrics
from agent.twin.tune.runners import dask_runner, serial_runner
from agent.twin.tune.runs import Job, run_job

LOOPBACK = "127.0.0.1"
SPEED = 40_000_000_000
# The small search of test_twin_tune.py's command tests: 7 candidates x 3 load points + the
# widening, about 25 runs of 3 ms at 40G (a second in one process).
FAST = ["--objective", "queue", "--senders", "4", "--duration", "3ms", "--candidates", "8"]
FAST += ["--seeds", "1", "--no-dcqcn"]


def _local_cluster(**options: Any) -> LocalCluster:
    """A cluster whose scheduler and workers, and their HTTP servers, listen on loopback only,
    on ports the system picks (two test processes start one each)."""
    return LocalCluster(
        host=LOOPBACK,
        protocol="tcp://",  # also without processes (inproc:// then), as the CLI connects
        scheduler_port=0,
        dashboard_address=f"{LOOPBACK}:0",
        worker_dashboard_address=f"{LOOPBACK}:0",
        threads_per_worker=1,
        **options,
    )


def _new_children(before: set[int]) -> list[psutil.Process]:
    """Child processes started since ``before`` that are still there, but multiprocessing's
    resource tracker (one per process, for the life of the process, by design)."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid in before or "resource_tracker" in " ".join(child.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        alive.append(child)
    return alive


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Two worker processes of one thread each (as two single-core hosts would run)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = _local_cluster(n_workers=2, processes=True)
    try:
        assert started.scheduler_address.startswith(f"tcp://{LOOPBACK}:")
        assert all(w.startswith(f"tcp://{LOOPBACK}:") for w in started.scheduler_info["workers"])
        listening = {
            c.laddr.ip
            for child in _new_children(before)
            for c in child.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening == {LOOPBACK}, listening  # the workers' and nannies' sockets
        yield started
    finally:
        started.close()
        _, left = psutil.wait_procs(_new_children(before), timeout=15)
        for process in left:  # reported below; not left running for the next module
            process.kill()
    assert not left, f"the cluster left processes behind: {[p.pid for p in left]}"


def _executor(cluster: LocalCluster) -> str:
    return "dask://" + cluster.scheduler_address.removeprefix("tcp://")


@pytest.fixture(scope="module")
def star(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40G, 5 hosts, the DCQCN paper's thresholds and NIC parameters (test_twin_tune.py's)."""
    path = tmp_path_factory.mktemp("cluster") / "star.yml"
    path.write_text(star_fabric_yaml(5, "40G", profile="dcqcn-paper", dcqcn=PAPER_DCQCN))
    return path


def _jobs(star: Path, duration_s: float, seeds: range) -> list[Job]:
    """Distinct runs (seed and sender count differ), so an answer out of order shows."""
    intent = load_fabric(star).intent
    roce = intent.profile.roce.priority
    return [Job(intent, "incast", 2 + s % 3, SPEED, duration_s, s, roce) for s in seeds]


def _numbers(runs: list[RunMetrics]) -> list[dict[str, Any]]:
    """What a run measured: everything but its wall clock."""
    return [{k: v for k, v in asdict(r).items() if k != "wall_s"} for r in runs]


def _without_wall_times(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_wall_times(v) for k, v in data.items() if k != "wall_s"}
    if isinstance(data, list):
        return [_without_wall_times(v) for v in data]
    return data


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(tune_command, list(args))
    return result.exit_code, result.stdout, result.stderr


def _executed(cluster: LocalCluster) -> int:
    """Tasks the cluster's workers have run, all together."""
    with Client(cluster.scheduler_address, set_as_default=False) as client:
        counts = client.run(lambda dask_worker: dask_worker.state.executed_count)
    return sum(counts.values())


# ------------------------------------------------------------------ the same search, anywhere


def test_the_json_is_the_same_with_jobs_1_jobs_2_and_the_cluster(
    cluster: LocalCluster, star: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results: dict[str, Any] = {}
    overrides: dict[str, str] = {}
    out = Path("tuned.yml")  # each run in a folder of its own: the JSON names the file
    for name, extra in [
        ("jobs 1", ["--jobs", "1"]),
        ("jobs 2", ["--jobs", "2"]),
        ("cluster", ["--executor", _executor(cluster)]),
    ]:
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        executed = _executed(cluster)
        code, stdout, stderr = _invoke(str(star), *FAST, *extra, "-o", "json",
                                       "--write-override", str(out))  # fmt: skip
        assert code == 0, stderr
        results[name] = json.loads(stdout)
        overrides[name] = out.read_text()
        ran_there = _executed(cluster) - executed
        if name == "cluster":
            # every run went to the workers, once each; the local runs sent none
            assert ran_there == results[name]["runs"] > 20
            assert f"tune --executor: {cluster.scheduler_address}, 2 workers" in stderr
        else:
            assert ran_there == 0
    local = _without_wall_times(results["jobs 1"])
    assert local == _without_wall_times(results["jobs 2"])
    assert local == _without_wall_times(results["cluster"])
    assert local["complete"] and local["override"]  # a search that found something
    # the override files: the same values and commands
    assert overrides["jobs 1"] == overrides["jobs 2"] == overrides["cluster"]


def test_the_runner_answers_in_job_order_batch_after_batch(
    cluster: LocalCluster, star: Path
) -> None:
    jobs = _jobs(star, 3e-3, range(1, 7))
    expected = _numbers(list(serial_runner(jobs)))
    assert len({json.dumps(r, sort_keys=True) for r in expected}) == len(jobs)  # all distinct
    with dask_runner(cluster.scheduler_address) as runner:
        assert sorted(runner.workers.values()) == [agent.__version__] * 2
        assert _numbers(list(runner(jobs))) == expected
        # the same client, a second batch: in its own order, none taken from the first
        assert _numbers(list(runner(jobs[::-1]))) == expected[::-1]
        assert list(runner([])) == []


def test_a_worker_killed_mid_batch_changes_no_result(cluster: LocalCluster, star: Path) -> None:
    # 0.4 s per run: the others are still running when the first answer is in
    jobs = _jobs(star, 20e-3, range(1, 5))
    expected = _numbers(list(serial_runner(jobs)))
    got: list[RunMetrics] = []
    with dask_runner(cluster.scheduler_address) as runner:
        client = runner.client
        for metrics in runner(jobs):
            if not got:
                busy = [w for w, keys in client.processing().items() if keys]
                assert busy, "no run in flight to lose"
                pids = client.run(os.getpid, workers=busy[:1])
                os.kill(pids[busy[0]], signal.SIGKILL)
            got.append(metrics)
        # the nanny starts a new worker in its place: the next test has two again
        client.wait_for_workers(2, timeout=30)
    assert _numbers(got) == expected


# ------------------------------------------------------------------ clusters that cannot run it


def test_a_worker_with_another_version_is_refused_naming_it(
    cluster: LocalCluster, star: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers run this checkout's agent; this process claims another version.
    theirs = agent.__version__
    monkeypatch.setattr(agent, "__version__", "9.9.9")
    out = tmp_path / "o.yml"
    code, stdout, stderr = _invoke(str(star), *FAST, "--executor", _executor(cluster),
                                   "--write-override", str(out))  # fmt: skip
    assert code == 2
    assert f"tune --executor: worker tcp://{LOOPBACK}:" in stderr
    assert f"runs roce-fabric-agent {theirs}, Expected: 9.9.9" in stderr
    assert not out.exists() and stdout == "" and "Traceback" not in stderr


def _hide_agent() -> Callable[[], None]:
    """Run on a worker: ``import agent`` fails there until :func:`_show_agent` (nested:
    sent by value, see agent.twin.cluster._version_probe)."""

    def hide() -> None:
        import importlib

        # imported first: a worker that has run nothing yet has not loaded it
        sys.modules["_hidden_agent"] = importlib.import_module("agent")
        sys.modules["agent"] = None  # type: ignore[assignment]

    return hide


def _show_agent() -> Callable[[], None]:
    def show() -> None:
        sys.modules["agent"] = sys.modules.pop("_hidden_agent")

    return show


def test_a_worker_without_the_package_is_refused_naming_it(cluster: LocalCluster) -> None:
    with Client(cluster.scheduler_address, set_as_default=False) as client:
        worker = sorted(client.nthreads())[0]
        client.run(_hide_agent(), workers=[worker])
        try:
            with pytest.raises(ClusterError) as caught:
                dask_runner(cluster.scheduler_address)
        finally:
            client.run(_show_agent(), workers=[worker])
    message = str(caught.value)
    assert message.startswith(
        f"worker {worker} cannot import roce-fabric-agent (ModuleNotFoundError: import of agent "
        "halted"
    )
    assert (
        f"Expected: {agent.__version__} installed on the scheduler's and every worker's" in message
    )


def test_a_scheduler_with_another_version_is_refused_first(cluster: LocalCluster) -> None:
    # The scheduler unpacks the runs: it imports agent too (this process's, LocalCluster's
    # scheduler runs here), and is asked before the workers.
    with pytest.raises(ClusterError) as caught:
        DaskMap(cluster.scheduler_address, run_job, expected_version="9.9.9")
    assert str(caught.value).startswith(
        f"the scheduler at {cluster.scheduler_address} runs roce-fabric-agent "
        f"{agent.__version__}, Expected: 9.9.9"
    )


def _free_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_unreachable_cluster_exits_2_within_the_timeout(star: Path, tmp_path: Path) -> None:
    port = _free_port()
    out = tmp_path / "o.yml"
    started = time.monotonic()
    executor = ["--executor", f"dask://{LOOPBACK}:{port}", "--executor-timeout", "1s"]
    code, stdout, stderr = _invoke(str(star), *FAST, *executor, "--write-override", str(out))
    waited = time.monotonic() - started
    assert code == 2
    assert (
        f"error: tune --executor: no Dask scheduler answered at tcp://{LOOPBACK}:{port} within "
        "1 s" in stderr
    )
    assert not out.exists() and stdout == "" and "Traceback" not in stderr
    assert waited < 10, waited  # the option's 1 s, not Dask's own 30 s connect timeout


def test_a_scheduler_without_workers_is_an_error_naming_it() -> None:
    with _local_cluster(n_workers=0, processes=False) as empty:
        with pytest.raises(ClusterError, match="has no worker") as caught:
            dask_runner(empty.scheduler_address, timeout_s=0.5)
        assert f"dask worker {empty.scheduler_address}" in str(caught.value)


def test_the_whole_cluster_lost_mid_search_is_an_error_naming_it(star: Path) -> None:
    jobs = _jobs(star, 3e-3, range(1, 9))
    lost = _local_cluster(n_workers=1, processes=False)
    address = lost.scheduler_address
    try:
        with dask_runner(address) as runner:
            answers = runner(jobs)
            next(answers)
            lost.close()
            with pytest.raises(ClusterError) as caught:
                list(answers)
    finally:
        lost.close()
    assert str(caught.value).startswith(f"lost the Dask cluster at {address} while waiting")


def test_every_worker_gone_mid_search_is_an_error_after_the_timeout(star: Path) -> None:
    jobs = _jobs(star, 3e-3, range(1, 9))
    with _local_cluster(n_workers=1, processes=False) as shrinking:
        address = shrinking.scheduler_address
        with dask_runner(address, timeout_s=0.5) as runner:
            answers = runner(jobs)
            next(answers)
            shrinking.scale(0)  # the scheduler stays; the runs left wait for a worker
            with pytest.raises(ClusterError) as caught:
                list(answers)
    # which run waits depends on when the worker left; that one is named
    assert re.match(
        rf"the Dask scheduler at {re.escape(address)} has had no worker for 0.5 s, with run "
        r"[2-8] of a batch of 8 still to do",
        str(caught.value),
    ), caught.value


# ------------------------------------------------------------------ the option


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "foo"], "Invalid value for '--executor': Expected: dask://HOST:PORT"),
        (["--executor", "dask://"], "Invalid value for '--executor'"),
        (["--executor", f"dask://{LOOPBACK}"], f"Actual: 'dask://{LOOPBACK}'"),  # no port
        (["--executor", f"dask://{LOOPBACK}:"], "Invalid value for '--executor'"),
        (["--executor", f"dask://{LOOPBACK}:0"], "Invalid value for '--executor'"),
        (["--executor", f"dask://{LOOPBACK}:70000"], "Invalid value for '--executor'"),
        (["--executor", f"dask://{LOOPBACK}:port"], "Invalid value for '--executor'"),
        (["--executor", f"tcp://{LOOPBACK}:8786"], "Expected: dask://HOST:PORT"),
        (["--executor", f"dask://{LOOPBACK}:8786/x"], "Invalid value for '--executor'"),
        (["--executor", f"dask://me@{LOOPBACK}:8786"], "Invalid value for '--executor'"),
        (["--executor", "dask://:8786"], "Invalid value for '--executor'"),
        # --jobs with --executor: refused before any connection (nothing listens there)
        (["--executor", f"dask://{LOOPBACK}:8786", "--jobs", "2"],
         "Invalid value for '--executor': Expected: --jobs 1 (the default) with --executor"),
        (["--executor-timeout", "10"], "'--executor-timeout'"),  # the unit is required
        (["--executor-timeout", "0s"], "Invalid value for '--executor-timeout'"),
        (["--executor-timeout", "1h"], "Invalid value for '--executor-timeout'"),
    ],
)  # fmt: skip
def test_bad_executor_values_exit_2_naming_the_option(
    star: Path, args: list[str], message: str
) -> None:
    started = time.monotonic()
    code, stdout, stderr = _invoke(str(star), *FAST, *args)
    assert code == 2, stderr
    assert message in stderr
    assert stdout == "" and "Traceback" not in stderr
    assert time.monotonic() - started < 5  # refused, not tried


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("dask://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
        (" dask://127.0.0.1:8786/ ", "tcp://127.0.0.1:8786"),
        ("dask://[::1]:8786", "tcp://[::1]:8786"),
        ("dask://Sched-1.example:65535", "tcp://sched-1.example:65535"),
    ],
)
def test_the_option_gives_the_address_dask_prints(value: str, address: str) -> None:
    assert ExecutorType().convert(value, None, None) == address


def test_start_up_does_not_import_dask() -> None:
    """``roce-agent`` loads every command; Dask only comes with --executor."""
    code = (
        "import sys, agent.app.cli, agent.twin.tune.runners, agent.twin.cluster; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'dask', 'distributed', 'tornado', 'cloudpickle'}))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert shown.stdout.strip() == "[]"

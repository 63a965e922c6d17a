"""NCCL's double binary tree for an all-reduce (``algorithm: tree``, ``twin --algorithm tree``).

The trees are checked against the ones NCCL's source draws (src/graph/trees.cc) and, on drawn
node counts, for what makes them NCCL's double binary tree; the schedule for moving every
byte up and down each edge once; runs on seeded random rail pods for completing, for never
beating the NICs' bytes at line rate, for a rail run alone being exact, and for equalling
the ring where the two move the same bytes (2 hosts).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.tune import tune_command
from agent.app.twin import twin_command
from agent.errors import IntentError
from agent.twin import collectives as C
from agent.twin.jobfile import load_jobs, resolve_jobs
from agent.twin.nccl_algo import nccl_choice
from agent.twin.placement import btree, double_binary_tree, rails_share_no_link, tree_pairs
from agent.twin.step import StepPart
from agent.twin.tune import runners
from tests.unit.rail_pods import load_pod, rail_pod
from tests.unit.test_tune_job import Recording
from tests.unit.test_twin_rail_sample import _done_ticks

# trees.cc's pictures: the binary tree of 14 ranks, its mirror for 12, its shift for 13.
NCCL_BTREE_14 = {0: [8], 8: [4, 12], 4: [2, 6], 12: [10, 13], 2: [1, 3], 6: [5, 7], 10: [9, 11]}
NCCL_MIRROR_12 = {11: [3], 3: [1, 7], 1: [0, 2], 7: [5, 9], 5: [4, 6], 9: [8, 10]}
NCCL_SHIFT_13 = {1: [9], 9: [5, 0], 5: [3, 7], 0: [11], 3: [2, 4], 7: [6, 8], 11: [10, 12]}


def _children(parents: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        if parent != -1:
            out.setdefault(parent, []).append(node)
    return {p: sorted(c) for p, c in out.items()}


@pytest.mark.parametrize(
    ("nodes", "tree", "drawn"),
    [(14, 0, NCCL_BTREE_14), (12, 1, NCCL_MIRROR_12), (13, 1, NCCL_SHIFT_13)],
    ids=["btree-14", "mirror-12", "shift-13"],
)
def test_the_trees_are_the_ones_nccl_draws(
    nodes: int, tree: int, drawn: dict[int, list[int]]
) -> None:
    assert _children(double_binary_tree(nodes)[tree]) == {p: sorted(c) for p, c in drawn.items()}


@pytest.mark.parametrize("nodes", [2, 3, 5, 8, 17, 31, 64, 100, 255])
def test_each_tree_spans_every_node_with_at_most_two_children(nodes: int) -> None:
    for parents in double_binary_tree(nodes):
        assert parents.count(-1) == 1
        for node in range(nodes):  # every node reaches the root without a cycle
            seen, at = set(), node
            while parents[at] != -1:
                assert at not in seen
                seen.add(at)
                at = parents[at]
        assert all(len(c) <= 2 for c in _children(parents).values())
    first, second = (set(_children(p)) for p in double_binary_tree(nodes))
    if nodes % 2 == 0:  # the mirror: no node is inside both trees
        assert not first & second


def test_btree_of_one_and_two() -> None:
    assert btree(1, 0) == (-1, -1, -1)
    assert btree(2, 0) == (-1, -1, 1) and btree(2, 1) == (0, -1, -1)


@pytest.mark.parametrize("draw", [1, 4, 9, 16, 25])
def test_every_chunk_goes_up_and_down_each_edge_once(draw: int) -> None:
    rng = random.Random(draw)
    hosts, rails, channels = rng.randint(2, 20), rng.choice([1, 2, 4]), rng.randint(1, 2)
    size = rng.randint(1, 40) << 20
    pairs = tree_pairs(hosts, rails, channels)
    slices = C.tree_slices(hosts, rails, size, channels)
    assert len(slices) == len(pairs) == channels * rails * 2 * 2 * (hosts - 1)
    # each tree channel's part goes up and comes down on each of its H - 1 edges
    assert sum(s.nbytes for conn in slices for s in conn) == 2 * (hosts - 1) * size
    for conn, (src, dst) in zip(slices, pairs, strict=True):
        assert src % rails == dst % rails  # on its rail
        for j, item in enumerate(conn):
            assert item.key == (0, 0, j) and item.nbytes <= C.STEP_BYTES
            assert all(slices[c][n].nbytes == item.nbytes and n == j for c, n in item.needs)
            assert len(item.needs) <= 2


@pytest.mark.parametrize("seed", [3, 8, 21, 34])
def test_a_tree_completes_and_never_beats_its_busiest_nic(tmp_path: Path, seed: int) -> None:
    """Time >= the bytes the busiest NIC sends (or receives) at line rate."""
    rng = random.Random(seed)
    hosts, rails, groups = rng.randint(1, 4), rng.choice([1, 2]), rng.randint(2, 3)
    network = load_pod(tmp_path, rail_pod(hosts, rails, groups, spines=rng.randint(1, 2)))
    qps = rng.choice([1, 2])
    spec = C.CollectiveSpec("allreduce", 0, rng.choice([2, 5, 9]) << 20, algorithm="tree",
                            qps_per_connection=qps, split_data_on_qps=True)  # fmt: skip
    report = C.run_collective(network, spec, seed=seed)
    assert report.completed and report.delivered_fraction == 1.0 and report.lossless_drops == 0
    nodes = len(report.hosts) // rails
    slices = C.tree_slices(nodes, rails, report.size_bytes)
    sent: dict[int, int] = {}
    received: dict[int, int] = {}
    for conn, (src, dst) in zip(slices, tree_pairs(nodes, rails), strict=True):
        sent[src] = sent.get(src, 0) + sum(s.nbytes for s in conn)
        received[dst] = received.get(dst, 0) + sum(s.nbytes for s in conn)
    busiest = max(*sent.values(), *received.values())
    assert report.time_s >= busiest / (report.speed_bps / 8)
    assert 0 < report.line_rate_fraction <= 1.0 + 1e-9
    assert report.algorithm == "tree" and any("double binary tree" in n for n in report.notes)


def test_on_two_one_nic_hosts_the_tree_moves_what_the_ring_does_as_fast(tmp_path: Path) -> None:
    """Two one-NIC hosts: each tree's one edge carries half the buffer each way, as the
    ring's two connections do; no incast, so the same busbw (within the chunking's)."""
    network = load_pod(tmp_path, rail_pod(hosts=1, rails=1, groups=2))
    ring = C.run_collective(network, C.CollectiveSpec("allreduce", 0, 16 << 20), seed=1)
    tree = C.run_collective(
        network, C.CollectiveSpec("allreduce", 0, 16 << 20, algorithm="tree"), seed=1
    )
    assert tree.busbw_Bps == pytest.approx(ring.busbw_Bps, rel=0.02)
    assert C.tree_busbw_bound_Bps(2, 400 * 10**9) == C.busbw_bound_Bps("allreduce", 2, 400 * 10**9)


@pytest.mark.parametrize(
    ("hosts", "rails", "degree"), [(2, 1, 2), (2, 8, 2), (3, 1, 3), (8, 1, 4), (64, 8, 4)]
)
def test_the_trees_bound_is_the_busiest_hosts_bytes_at_line_rate(
    hosts: int, rails: int, degree: int
) -> None:
    ranks, rate = hosts * rails, 400 * 10**9 / 8
    bound = C.tree_busbw_bound_Bps(ranks, 400 * 10**9, rails)
    assert bound == pytest.approx(4 * rails * rate * (ranks - 1) / (degree * ranks))
    if degree == 4:  # every host inside one tree, a leaf in the other: the ring's bytes
        assert bound == pytest.approx(rails * rate * (ranks - 1) / ranks)


@pytest.mark.parametrize("seed", [5, 13])
def test_a_sampled_rail_of_a_tree_finishes_as_in_the_whole_job(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    hosts, rails, groups = rng.randint(2, 3), rng.choice([2, 4]), rng.randint(2, 3)
    network = load_pod(tmp_path, rail_pod(hosts, rails, groups, spines=2))
    spec = C.CollectiveSpec("allreduce", 0, 3 << 20, algorithm="tree")
    assert rails_share_no_link(network, spec)
    whole, _ = _done_ticks(monkeypatch, network, spec, seed)
    part, report = _done_ticks(monkeypatch, network, replace(spec, sample_rails=1), seed)
    assert part and set(part) < set(whole)
    assert part == {index: whole[index] for index in part}
    assert report.completed


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--workload", "alltoall", "--algorithm", "tree"], "Actual: tree for alltoall"),
        (["--algorithm", "bush"], "'bush' is not one of 'ring', 'tree'"),
    ],
    ids=["alltoall", "unknown"],
)
def test_what_a_tree_cannot_run_exits_2_naming_the_option(
    tmp_path: Path, args: list[str], says: str
) -> None:
    fabric = tmp_path / "pod.yml"
    fabric.write_text(rail_pod(hosts=2, rails=2, groups=2))
    done = CliRunner().invoke(twin_command, [str(fabric), *args, "--no-progress"])
    assert done.exit_code == 2, done.output
    assert says in done.output, done.output


def test_twin_algorithm_tree_reports_it(tmp_path: Path) -> None:
    fabric = tmp_path / "pod.yml"
    fabric.write_text(rail_pod(hosts=2, rails=2, groups=2))
    done = CliRunner().invoke(
        twin_command,
        [
            str(fabric),
            "--workload",
            "allreduce",
            "--algorithm",
            "tree",
            "--size",
            "4MiB",
            "--no-progress",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "NCCL_ALGO=tree" in done.output and "double binary tree" in done.output


# ---------------------------------------------------------------- job files and tune


@pytest.mark.parametrize(
    ("job", "workloads"),
    [
        ("{name: a, algorithm: tree}", [("allreduce", "tree")]),
        (
            "{name: a, algorithm: tree, step: [{collective: allreduce, size: 2MiB}, "
            "{collective: alltoall, size: 1MiB, per_step: 2}]}",
            [("allreduce", "tree"), ("alltoall", "ring")],
        ),
    ],
    ids=["one", "step"],
)
def test_a_jobs_algorithm_is_its_all_reduces(
    tmp_path: Path, job: str, workloads: list[tuple[str, str]]
) -> None:
    network = load_pod(tmp_path, rail_pod(hosts=2, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text(f"jobs:\n  - {job}\n")
    [named] = resolve_jobs(load_jobs(tmp_path / "jobs.yml"), network)
    parts = named.step or (StepPart(named.spec.workload, named.spec.size_bytes),)
    specs = [part.of(named.spec) for part in parts]
    assert [(s.workload, s.algorithm) for s in specs] == workloads


@pytest.mark.parametrize(
    ("job", "says"),
    [
        ("{name: a, collective: alltoall, algorithm: tree}", "Actual: tree for alltoall"),
        ("{name: a, algorithm: bush}", "jobs[0].algorithm"),
    ],
    ids=["alltoall", "unknown"],
)
def test_a_tree_the_job_cannot_run_names_its_line(tmp_path: Path, job: str, says: str) -> None:
    network = load_pod(tmp_path, rail_pod(hosts=2, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text(f"jobs:\n  - {job}\n")
    with pytest.raises(IntentError) as caught:
        resolve_jobs(load_jobs(tmp_path / "jobs.yml"), network)
    assert "jobs.yml:2:" in str(caught.value) and says in str(caught.value), str(caught.value)


def test_tune_job_with_a_tree_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "pod.yml").write_text(rail_pod(hosts=2, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text("jobs:\n  - {name: t, size: 2MiB, algorithm: tree}\n")
    done = CliRunner().invoke(
        tune_command,
        [str(tmp_path / "pod.yml"), "--job", str(tmp_path / "jobs.yml"), "--no-progress",
         "--seeds", "1", "--candidates", "4", "--qps", "1,2", "--no-dcqcn", "-o", "json"],
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    result = json.loads(done.stdout)  # stderr may say that no candidate met the constraints
    assert result["objective"]["job"]["spec"]["algorithm"] == "tree"
    assert result["scenario"] == "allreduce of 2 MiB, all-reduce by tree"
    [speed] = result["speeds"]
    runs = [r for trial in speed["stages"][-1]["trials"] for r in trial["runs"]]
    assert runs and all(r["completed"] and 0 < r["bound_fraction"] <= 1 + 1e-9 for r in runs)


# ---------------------------------------------------------------- auto: NCCL's choice


def test_nccls_model_by_hand_for_one_case() -> None:
    """32 hosts x 8 NICs at 400G, 64 MiB, 8 channels of 50 GB/s (tuning.cc's terms):
    ring: busbw 400, algbw 400 x 256/510; latency (8.4 + 448 x 3.4 + 62 x 14) x 1.4;
    tree: busbw min(0.92 x 400, 8 x 36.0) = 288, x 0.8 (the correction at log2(64 MiB / 64) =
    20), algbw half; latency 8.4 + 2 (7 x 4 + 5 x 14)."""
    size = 64 << 20
    choice = nccl_choice(size, 256, 32, 8, 400 * 10**9)
    ring = (8.4 + 448 * 3.4 + 62 * 14) * 1.4 + size / (1000 * 400 * 256 / 510)
    tree = 8.4 + 2 * (7 * 4 + 5 * 14) + size / (1000 * 288 * 0.8 / 2)
    assert choice.ring_us == pytest.approx(ring) and choice.tree_us == pytest.approx(tree)
    assert choice.algorithm == "tree"


@pytest.mark.parametrize("seed", [2, 6, 11, 29, 47])
def test_auto_goes_from_tree_to_ring_at_most_once_as_the_size_grows(seed: int) -> None:
    """Latency weighs on small sizes (the ring's grows with the ranks, the tree's with their
    logarithm); bandwidth on large ones (the ring's is the tree's / 0.92 or more): one switch
    over, and a ring at the largest size whenever a tree's channels are capped."""
    rng = random.Random(seed)
    hosts, per_host = rng.randint(2, 64), rng.choice([1, 2, 4, 8])
    speed = rng.choice([100, 200, 400, 800]) * 10**9
    picks = [
        nccl_choice(1 << k, hosts * per_host, hosts, per_host, speed).algorithm
        for k in range(10, 41)
    ]
    changes = sum(a != b for a, b in itertools.pairwise(picks))
    assert changes <= 1, picks
    assert picks[-1] == "ring"  # 1 TiB: bandwidth alone decides


def test_auto_resolves_when_placed_and_says_why(tmp_path: Path) -> None:
    network = load_pod(tmp_path, rail_pod(hosts=2, rails=2, groups=2))
    small = C.run_collective(network, C.CollectiveSpec("allreduce", 0, 1 << 20, algorithm="auto"))
    assert small.algorithm in ("ring", "tree")
    assert small.notes[0].startswith(f"--algorithm auto: {small.algorithm}, as NCCL's")
    gather = C.run_collective(network, C.CollectiveSpec("allgather", 0, 1 << 20, algorithm="auto"))
    assert gather.algorithm == "ring" and not gather.notes[0].startswith("--algorithm auto")


def test_tune_resolves_auto_once_at_the_jobs_own_size(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every run of the search, a rung's smaller size included, runs the algorithm NCCL picks
    for the job's stated size."""
    (tmp_path / "pod.yml").write_text(rail_pod(hosts=4, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text("jobs:\n  - {name: t, size: 16MiB, algorithm: auto}\n")
    (tmp_path / "n").mkdir()
    network = load_pod(tmp_path / "n", rail_pod(hosts=4, rails=2, groups=2))
    whole = C.run_collective(
        network, C.CollectiveSpec("allreduce", 0, 16 << 20, algorithm="auto"), max_duration_s=1e-6
    )
    recording = Recording()
    monkeypatch.setattr(runners, "run_job", recording)
    done = CliRunner().invoke(
        tune_command,
        [str(tmp_path / "pod.yml"), "--job", str(tmp_path / "jobs.yml"), "--no-progress",
         "--seeds", "1", "--candidates", "4", "--no-dcqcn", "--method", "halving"],
    )  # fmt: skip
    assert done.exit_code in (0, 1), done.output
    assert {spec.algorithm for _, spec in recording.runs} == {whole.algorithm}
    # ... which is not what NCCL would pick for the smallest rung's size on its own
    assert nccl_choice(1 << 20, 16, 8, 2, 400 * 10**9).algorithm != whole.algorithm
    assert min(spec.size_bytes for _, spec in recording.runs) < 16 << 20


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            ["--workload", "alltoall", "--algorithm", "tree"],
            "tune --algorithm: Expected: ring or auto",
        ),
        (["--algorithm", "bush"], "'bush' is not one of"),
    ],
    ids=["alltoall", "unknown"],
)
def test_what_tune_cannot_run_as_a_tree_exits_2(
    tmp_path: Path, options: list[str], says: str
) -> None:
    (tmp_path / "pod.yml").write_text(rail_pod(hosts=2, rails=2, groups=2))
    done = CliRunner().invoke(tune_command, [str(tmp_path / "pod.yml"), *options, "--no-progress"])
    assert done.exit_code == 2 and says in done.output, done.output


def test_tune_job_refuses_algorithm_beside_a_job_file(tmp_path: Path) -> None:
    (tmp_path / "pod.yml").write_text(rail_pod(hosts=2, rails=2, groups=2))
    (tmp_path / "jobs.yml").write_text("jobs:\n  - {name: a}\n")
    done = CliRunner().invoke(
        tune_command,
        [str(tmp_path / "pod.yml"), "--job", str(tmp_path / "jobs.yml"), "--algorithm", "tree",
         "--no-progress"],
    )  # fmt: skip
    assert done.exit_code == 2 and "tune --algorithm: Expected: --job or" in done.output


@pytest.mark.parametrize(
    ("options", "size"),
    [([], 16 << 20), (["--ranks", "6"], 16 << 20)],
    ids=["every-nic", "ranks"],
)
def test_tunes_own_job_runs_the_algorithm_asked_and_auto_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, options: list[str], size: int
) -> None:
    """--algorithm tree: every run is a tree; auto: every run, rungs included, runs what NCCL
    picks at the stated size, and a note says which."""
    (tmp_path / "pod.yml").write_text(rail_pod(hosts=4, rails=1, groups=2))
    for algorithm in ("tree", "auto"):
        recording = Recording()
        monkeypatch.setattr(runners, "run_job", recording)
        done = CliRunner().invoke(
            tune_command,
            [str(tmp_path / "pod.yml"), "--algorithm", algorithm, "--size", "16MiB", *options,
             "--no-progress", "--seeds", "1", "--candidates", "4", "--no-dcqcn",
             "--method", "halving", "-o", "json"],
        )  # fmt: skip
        assert done.exit_code in (0, 1), done.output
        ran = {spec.algorithm for _, spec in recording.runs}
        assert len(ran) == 1 and "auto" not in ran, ran
        assert min(spec.size_bytes for _, spec in recording.runs) < size
        notes = " ".join(json.loads(done.stdout)["notes"])
        if algorithm == "tree":
            assert ran == {"tree"}
        else:
            assert f"--algorithm auto: {ran.pop()}, as NCCL's cost model picks" in notes

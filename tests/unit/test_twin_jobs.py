"""The job file (agent/twin/jobfile.py) and jobs side by side (collectives.run_collectives).

Errors are checked table-driven for where they point (FILE:LINE, the field, the hostfile's own
line); the runs on seeded random rail pods and host splits, not only the pod the code was
written against.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from agent.app.twin import twin_command
from agent.errors import IntentError
from agent.twin import collectives as C
from agent.twin.jobfile import job_file_schema, load_jobs, resolve_jobs
from agent.twin.network import TwinError, TwinNetwork, load_network
from agent.twin.placement import CollectiveSpec, connection_pairs, flow_paths
from tests.unit.rail_pods import load_pod, rail_pod

ROOT = Path(__file__).resolve().parents[2]
SMALL = 4 << 20  # 4 MiB: a collective that runs in well under a second


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> TwinNetwork:
    """2 groups of 4 hosts x 2 rails: leaf1-2 serve gpu1-4, leaf3-4 gpu5-8."""
    return load_pod(tmp_path_factory.mktemp("pod"), rail_pod(hosts=4, rails=2, groups=2))


def _jobs(tmp_path: Path, text: str, network: TwinNetwork) -> list[tuple[str, CollectiveSpec]]:
    path = tmp_path / "jobs.yml"
    path.write_text(text)
    return [(job.name, job.spec) for job in resolve_jobs(load_jobs(path), network)]


def _error(tmp_path: Path, text: str, network: TwinNetwork) -> str:
    with pytest.raises(IntentError) as caught:
        _jobs(tmp_path, text, network)
    return str(caught.value)


# ---------------------------------------------------------------- naming the hosts


def test_globs_hosts_and_host_port_name_endpoints_in_the_order_written(
    tmp_path: Path, pod: TwinNetwork
) -> None:
    [(name, spec)] = _jobs(
        tmp_path, "jobs:\n  - {name: a, hosts: ['gpu[5-6]', gpu2, 'gpu1']}\n", pod
    )
    assert name == "a"
    assert spec.hosts == (
        "gpu5:eth0", "gpu5:eth1", "gpu6:eth0", "gpu6:eth1",
        "gpu2:eth0", "gpu2:eth1", "gpu1:eth0", "gpu1:eth1",
    )  # fmt: skip


def test_nics_choose_and_order_each_hosts_rails(tmp_path: Path, pod: TwinNetwork) -> None:
    [(_, spec)] = _jobs(tmp_path, "jobs:\n  - {name: a, hosts: ['gpu*'], nics: [eth1]}\n", pod)
    assert spec.hosts == tuple(f"gpu{h}:eth1" for h in range(1, 9))


@pytest.fixture(scope="module")
def rdma_pod(tmp_path_factory: pytest.TempPathFactory) -> TwinNetwork:
    """2 hosts x 4 rails whose eth0-3 declare rdma_device mlx5_{i+4}/1: the device numbers
    are not the port numbers, so a name can only be found through the fabric file."""
    text = rail_pod(hosts=2, rails=4, rdma_device="mlx5_{i+4}/1")
    return load_pod(tmp_path_factory.mktemp("rdma"), text)


@pytest.mark.parametrize(
    ("nics", "ports"),
    [
        ("[mlx5_7, mlx5_5]", ["eth3", "eth1"]),
        ("[mlx5_6/1]", ["eth2"]),
        ("[eth0, mlx5_7]", ["eth0", "eth3"]),
    ],
    ids=["device", "device-port", "mixed"],
)
def test_nics_by_rdma_device_pick_the_ports_behind_them(
    tmp_path: Path, rdma_pod: TwinNetwork, nics: str, ports: list[str]
) -> None:
    [(_, spec)] = _jobs(tmp_path, f"jobs:\n  - {{name: a, nics: {nics}}}\n", rdma_pod)
    assert spec.hosts == tuple(f"gpu{h}:{p}" for h in (1, 2) for p in ports)


@pytest.mark.parametrize(
    ("nics", "says"),
    [
        ("[eth0, mlx5_4]", "gpu1:eth0 named 2 times"),
        ("[mlx5_4/2]", "named mlx5_4/2 (a port or its rdma_device) Actual: none"),
        ("[mlx5_5, mlx5_0]", "none for mlx5_0"),
    ],
    ids=["twice", "other-port", "unknown"],
)
def test_nics_by_rdma_device_refuse_what_the_fabric_does_not_say(
    tmp_path: Path, rdma_pod: TwinNetwork, nics: str, says: str
) -> None:
    message = _error(tmp_path, f"jobs:\n  - name: a\n    nics: {nics}\n", rdma_pod)
    assert "jobs.yml:3:" in message and "jobs[0].nics" in message and says in message, message


@pytest.mark.parametrize(
    ("hostfile", "expected"),
    [
        ("gpu3 slots=2\ngpu4 slots=2 max_slots=2\n", ["gpu3", "gpu4"]),
        ("# Hydra\ngpu3:2\n\ngpu4:2   # trailing comment\n", ["gpu3", "gpu4"]),
        ("gpu7\ngpu8\n", ["gpu7", "gpu8"]),
    ],
    ids=["open-mpi", "hydra", "bare"],
)
def test_a_hostfile_as_mpirun_takes_it(
    tmp_path: Path, pod: TwinNetwork, hostfile: str, expected: list[str]
) -> None:
    (tmp_path / "hosts").write_text(hostfile)
    [(_, spec)] = _jobs(tmp_path, "jobs:\n  - {name: a, hostfile: hosts}\n", pod)
    assert spec.hosts == tuple(f"{h}:eth{r}" for h in expected for r in range(2))


def test_slots_take_a_hosts_first_nics(tmp_path: Path, pod: TwinNetwork) -> None:
    (tmp_path / "hosts").write_text("gpu1 slots=1\ngpu2 slots=1\n")
    [(_, spec)] = _jobs(tmp_path, "jobs:\n  - {name: a, hostfile: hosts}\n", pod)
    assert spec.hosts == ("gpu1:eth0", "gpu2:eth0")


# ---------------------------------------------------------------- errors, located


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("jobs:\n  - {name: a, hosts: [gpu1], bogus: 1}\n", "jobs.yml:2:", "unknown field"),
        ("jobs:\n  - name: a\n    hosts: [gpu1]\n    hostfile: h\n", "jobs.yml:2:", "both"),
        ("jobs:\n  - {name: a}\n  - {name: a}\n", "jobs.yml:", "a twice"),
        ("jobs:\n  - name: a\n    size: 12 parsecs\n", "jobs.yml:3:", "jobs[0].size"),
        ("jobs:\n  - name: a\n    qps_per_connection: 0\n", "jobs.yml:3:", "qps_per_connection"),
        ("jobs:\n  - name: a\n    collective: broadcast\n", "jobs.yml:3:", "jobs[0].collective"),
        ("jobs:\n  - name: a\n    hosts: ['gpu 1']\n", "jobs.yml:3:", "jobs[0].hosts[0]"),
        ("jobs: []\n", "jobs.yml:1:", "jobs"),
        ("jobs:\n" + "".join(f"  - {{name: j{i}}}\n" for i in range(9)), "jobs.yml:", "jobs"),
    ],
    ids=["unknown", "both", "twice", "size", "qps", "collective", "pattern", "none", "nine"],
)
def test_a_bad_job_file_names_its_line_and_field(
    tmp_path: Path, pod: TwinNetwork, text: str, where: str, says: str
) -> None:
    message = _error(tmp_path, text, pod)
    assert where in message and says in message, message


@pytest.mark.parametrize(
    ("text", "hostfile", "where", "says"),
    [
        ("jobs:\n  - name: a\n    hosts: [gpu1, gpu99]\n", None, "jobs.yml:3:", "gpu99"),
        ("jobs:\n  - name: a\n    hosts: ['cpu*']\n", None, "jobs.yml:3:", "cpu*"),
        ("jobs:\n  - name: a\n    nics: [eth0, eth7]\n", None, "jobs.yml:3:", "eth7"),
        ("jobs:\n  - {name: a, hostfile: h}\n", "gpu1\ngpu42 slots=8\n", "h:2:1", "gpu42"),
        ("jobs:\n  - {name: a, hostfile: h}\n", "gpu1 slots=3\n", "h:1:1", "slots 1-2"),
        ("jobs:\n  - {name: a, hostfile: h}\n", "gpu1 cores\n", "h:1:1", "HOST [slots=N]"),
        ("jobs:\n  - {name: a, hostfile: h}\n", "gpu1" + " " * 600 + "x\n", "h:1:1", "at most 512"),
        ("jobs:\n  - {name: a, hostfile: h}\n", "# nobody\n", "h:1:1", "Actual: none"),
        ("jobs:\n  - {name: a, hostfile: missing}\n", None, "jobs.yml:2:", "missing"),
        (
            "jobs:\n  - {name: b, hosts: [gpu1, gpu2]}\n  - {name: a}\n",
            None,
            "jobs.yml:3:",
            "every job",
        ),
        (
            "jobs:\n  - {name: a, hosts: [gpu1, gpu2, gpu1]}\n",
            None,
            "jobs.yml:2:",
            "each host once",
        ),
        (
            "jobs:\n  - {name: a, hostfile: h}\n",
            "gpu1 slots=1\ngpu2\n",
            "jobs.yml:2:",
            "same count",
        ),
        (
            "jobs:\n  - {name: a, collective: allgather, size: 16}\n",
            None,
            "jobs.yml:2:",
            "at least",
        ),
    ],
    ids=[
        "host",
        "glob",
        "nics",
        "hostfile-host",
        "slots",
        "format",
        "long",
        "empty",
        "no-file",
        "default",
        "twice",
        "uneven",
        "size",
    ],
)
def test_a_job_the_fabric_cannot_place_names_the_line_that_says_so(
    tmp_path: Path, pod: TwinNetwork, text: str, hostfile: str | None, where: str, says: str
) -> None:
    if hostfile is not None:
        (tmp_path / "h").write_text(hostfile)
    message = _error(tmp_path, text, pod)
    assert where in message and says in message, message


def test_two_jobs_on_one_nic_are_refused_naming_both(pod: TwinNetwork) -> None:
    a = CollectiveSpec("allreduce", 0, SMALL, hosts=("gpu1", "gpu2"))
    b = CollectiveSpec("allreduce", 0, SMALL, hosts=("gpu2", "gpu3"))
    with pytest.raises(TwinError, match=r"train: .*gpu2:eth0, gpu2:eth1 of serve"):
        C.run_collectives(pod, [b, a], ["serve", "train"])


# ---------------------------------------------------------------- side by side


def test_jobs_that_share_no_switch_run_as_they_run_alone(pod: TwinNetwork) -> None:
    """gpu1-4 and gpu5-8 are two leaf groups: a rail ring inside a group stays on its leaf, so
    neither job touches the other's switches, and each runs exactly as alone."""
    a = CollectiveSpec("allreduce", 0, SMALL, hosts=("gpu1", "gpu2", "gpu3", "gpu4"))
    b = CollectiveSpec("allgather", 0, SMALL, hosts=("gpu5", "gpu6", "gpu7", "gpu8"))
    alone = [C.run_collective(pod, spec) for spec in (a, b)]
    both = C.run_collectives(pod, [a, b], ["a", "b"])
    for one, beside in zip(alone, both, strict=True):
        assert beside.time_s == one.time_s
        assert beside.busbw_Bps == one.busbw_Bps
        assert beside.completed
    assert [r.job for r in both] == ["a", "b"]
    assert "2 jobs side by side" in both[0].notes[0]


def test_a_jobs_qps_are_the_same_alone_and_beside_another(pod: TwinNetwork) -> None:
    """QP numbers are each NIC's own: a second job on other NICs changes no UDP source port,
    so no ECMP path, of the first."""
    a = CollectiveSpec("alltoall", 0, SMALL, hosts=("gpu1", "gpu5"))
    b = CollectiveSpec("alltoall", 0, SMALL, hosts=("gpu2", "gpu6"))
    alone = C._Jobs([C._place(pod, a)]).flows
    both = C._Jobs([C._place(pod, b), C._place(pod, a)]).flows
    assert both[len(both) - len(alone) :] == alone


@pytest.mark.parametrize("seed", [5, 17, 23, 41, 59])
def test_a_second_job_across_the_spines_never_speeds_the_first(tmp_path: Path, seed: int) -> None:
    """Seeded random pods and host splits: job A alone, then beside job B (an all-to-all or a
    ring on the other hosts). Each can only take bandwidth from the other: neither job's time
    gets shorter beside the other (by more than one part in ten thousand), every job finishes,
    and the jobs' reports share the fabric's counters."""
    rng = random.Random(seed)
    hosts, rails, groups = rng.randint(2, 4), rng.randint(1, 3), 2
    network = load_pod(tmp_path, rail_pod(hosts=hosts, rails=rails, groups=groups, spines=1))
    names = [f"gpu{h}" for h in range(1, hosts * groups + 1)]
    rng.shuffle(names)
    cut = rng.randint(2, len(names) - 2)
    workload_b = rng.choice(["alltoall", "allreduce"])
    a = CollectiveSpec("allreduce", 0, SMALL, hosts=tuple(names[:cut]))
    b = CollectiveSpec(workload_b, 0, SMALL, hosts=tuple(names[cut:]))  # type: ignore[arg-type]
    alone = [C.run_collective(network, spec) for spec in (a, b)]
    first, second = C.run_collectives(network, [a, b], ["a", "b"])
    assert first.completed and second.completed
    for one, beside in zip(alone, (first, second), strict=True):
        assert beside.time_s >= one.time_s * (1 - 1e-4), (one.time_s, beside.time_s)
    assert first.pfc_frames == second.pfc_frames
    assert first.lossless_drops == second.lossless_drops == 0


def test_all_to_all_without_pxn_crosses_rails(pod: TwinNetwork) -> None:
    """PXN keeps every connection on its rail (one leaf per rail inside a group); without it
    each GPU sends to every GPU of the other hosts over its own NIC, so rail 0 reaches rail 1
    through a spine even inside one group."""
    hosts = ("gpu1", "gpu2")
    pxn = flow_paths(pod, CollectiveSpec("alltoall", 0, SMALL, hosts=hosts))
    direct = flow_paths(pod, CollectiveSpec("alltoall", 0, SMALL, hosts=hosts, pxn=False))
    assert all(len(p.egress) == 1 for p in pxn)
    assert {(p.src, p.dst) for p in direct} == {
        (f"{s}:eth{i}", f"{d}:eth{j}")
        for s in hosts for d in hosts if s != d for i in range(2) for j in range(2)
    }  # fmt: skip
    cross = [p for p in direct if p.rail != pod.hosts[p.dst].rail]
    assert cross and all(p.egress[1].startswith("spine") for p in cross)
    report = C.run_collective(pod, CollectiveSpec("alltoall", 0, SMALL, hosts=hosts, pxn=False))
    assert report.completed


@pytest.mark.parametrize(("ranks", "rails"), [(6, 2), (8, 4), (4, 1)])
def test_pairs_without_pxn_are_every_pair_on_different_hosts(ranks: int, rails: int) -> None:
    pairs = connection_pairs("alltoall", ranks, rails, pxn=False)
    assert len(pairs) == len(set(pairs)) == ranks * (ranks - rails)
    assert all(s // rails != d // rails for s, d in pairs)


# ---------------------------------------------------------------- the command


def test_twin_job_reports_each_job_and_refuses_a_collective_option(
    tmp_path: Path, pod: TwinNetwork
) -> None:
    fabric = tmp_path / "pod.yml"
    fabric.write_text(rail_pod(hosts=4, rails=2, groups=2))
    (tmp_path / "moe.hosts").write_text("gpu5 slots=2\ngpu6:2\n")
    jobs = tmp_path / "jobs.yml"
    jobs.write_text(
        "jobs:\n"
        "  - {name: train, hosts: ['gpu[1-4]'], size: 4MiB, channels: 2}\n"
        "  - {name: moe, hostfile: moe.hosts, collective: alltoall, size: 1MiB, pxn: false}\n"
    )
    runner = CliRunner()
    result = runner.invoke(
        twin_command, [str(fabric), "--job", str(jobs), "-o", "json", "--show-placement"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["passed"] is True
    assert [j["job"] for j in data["jobs"]] == ["train", "moe"]
    assert data["jobs"][1]["workload"] == "alltoall"
    assert data["jobs"][0]["channels"] == 2
    assert {p["channel"] for p in data["jobs"][0]["placement"]} == {0, 1}
    assert data["jobs"][1]["hosts"] == ["gpu5:eth0", "gpu5:eth1", "gpu6:eth0", "gpu6:eth1"]
    assert {p["from"] for p in data["jobs"][1]["placement"]} == set(data["jobs"][1]["hosts"])
    table = runner.invoke(twin_command, [str(fabric), "--job", str(jobs)])
    assert table.exit_code == 0 and "job moe: twin alltoall" in table.output
    clash = runner.invoke(twin_command, [str(fabric), "--job", str(jobs), "--ranks", "4"])
    assert clash.exit_code == 2
    assert "--ranks: Expected: --job or --ranks, not both" in clash.output
    speed = runner.invoke(twin_command, [str(fabric), "--job", str(jobs), "--speed", "400G"])
    assert speed.exit_code == 2 and "--speed: Expected: --job or --speed" in speed.output


def test_the_shipped_job_files_follow_the_schema_and_place_on_their_fabric() -> None:
    schema = json.loads((ROOT / "docs" / "reference" / "job.schema.json").read_text())
    pod = load_network(ROOT / "playbooks" / "fabrics" / "pod-32-leaf.yml")
    shipped = sorted((ROOT / "playbooks" / "jobs").glob("*.yml"))
    assert shipped
    for path in shipped:
        assert "$schema=../../docs/reference/job.schema.json" in path.read_text().splitlines()[0]
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
        jobs = resolve_jobs(load_jobs(path), pod)
        placed = [C._place(pod, job.spec, job.name) for job in jobs]
        C._check_disjoint(placed)
        assert all(p.rails == 8 for p in placed)


def test_the_job_file_schema_is_the_models() -> None:
    schema = job_file_schema()
    job = schema["$defs"]["Job"]["properties"]
    assert {"hosts", "hostfile", "nics", "collective", "size", "pxn"} <= set(job)
    assert schema["properties"]["jobs"]["maxItems"] == 8


# ---------------------------------------------------------------- channels


@pytest.mark.parametrize("draw", [2, 7, 19, 33])
def test_channels_split_the_buffer_each_hop_sends_what_one_channel_sends(draw: int) -> None:
    """Seeded draws of collective, ranks, rails and channels: k channels per NIC are k rings
    of connections between the same NICs, and together they put the same bytes on each hop
    as one channel (to the 16-byte pieces the buffer is cut into)."""
    rng = random.Random(draw)
    workload = rng.choice(["allreduce", "allgather", "reducescatter"])
    rails, hosts, channels = rng.randint(1, 4), rng.randint(2, 5), rng.randint(2, 4)
    size = rng.choice([1 << 20, 3_000_000, 64 << 20])
    size = C.nccl_tests_size(workload, hosts * rails, size)  # type: ignore[arg-type]

    def per_hop(k: int) -> dict[tuple[int, int], int]:
        pairs = connection_pairs(workload, hosts * rails, rails, channels=k)  # type: ignore[arg-type]
        if rails > 1:
            slices = C.rail_ring_slices(workload, hosts, rails, size, k)  # type: ignore[arg-type]
        else:
            slices = C.ring_slices(workload, hosts, size, k)  # type: ignore[arg-type]
        assert (
            len(slices) == len(pairs) == k * len(connection_pairs(workload, hosts * rails, rails))
        )  # type: ignore[arg-type]
        sent: dict[tuple[int, int], int] = {}
        for pair, conn in zip(pairs, slices, strict=True):
            sent[pair] = sent.get(pair, 0) + sum(s.nbytes for s in conn)
        return sent

    one, many = per_hop(1), per_hop(channels)
    assert one.keys() == many.keys()
    for pair, nbytes in one.items():
        assert abs(many[pair] - nbytes) <= 16 * channels * 2 * hosts * rails, (pair, nbytes)


def test_each_channel_has_connections_and_ports_of_its_own(pod: TwinNetwork) -> None:
    spec = CollectiveSpec("allreduce", 0, SMALL, hosts=("gpu1", "gpu5"), channels=3)
    paths = flow_paths(pod, spec)
    assert sorted({p.channel for p in paths}) == [0, 1, 2]
    one = flow_paths(pod, CollectiveSpec("allreduce", 0, SMALL, hosts=("gpu1", "gpu5")))
    assert len(paths) == 3 * len(one)
    hop = [p for p in paths if p.src == "gpu1:eth0" and p.dst == "gpu5:eth0"]
    assert len({p.udp_sport for p in hop}) == 3  # one QP per channel, each its own port
    names = [c.name for c in C._Jobs([C._place(pod, spec)]).connections]
    assert len(set(names)) == len(names) and "gpu1:eth0->gpu5:eth0#2" in names
    report = C.run_collective(pod, spec)
    assert report.completed and report.channels == 3
    assert report.line_rate_fraction > 0.5


@pytest.mark.parametrize("collective", ["alltoall", "sendrecv"])
def test_channels_are_for_rings_and_say_so(
    tmp_path: Path, pod: TwinNetwork, collective: C.CollectiveName
) -> None:
    with pytest.raises(
        TwinError, match=rf"twin --channels: Expected: 1-16 .* Actual: 2 for {collective}"
    ):
        C.run_collective(
            pod, CollectiveSpec(collective, 0, SMALL, hosts=("gpu1", "gpu5"), channels=2)
        )
    message = _error(
        tmp_path, f"jobs:\n  - name: a\n    collective: {collective}\n    channels: 2\n", pod
    )
    assert "jobs.yml:2:" in message and f"Expected: 1 for {collective}" in message, message
    message = _error(tmp_path, "jobs:\n  - name: a\n    channels: 17\n", pod)
    assert "jobs.yml:3:" in message and "jobs[0].channels" in message, message


@pytest.mark.parametrize(
    "jobs", sorted((ROOT / "playbooks" / "jobs").glob("*.yml")), ids=lambda p: p.stem
)
def test_a_shipped_job_file_places_on_the_fabric_it_names(jobs: Path) -> None:
    assert jobs.stem.startswith("pod-32-leaf-"), "a shipped job file names its fabric first"
    fabric = ROOT / "playbooks" / "fabrics" / "pod-32-leaf.yml"
    named = resolve_jobs(load_jobs(jobs), load_network(fabric))
    assert named and all(job.spec.hosts for job in named)

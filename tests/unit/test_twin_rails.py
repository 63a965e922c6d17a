"""Multi-NIC hosts in the twin (agent/twin/placement.py, collectives.rail_ring_slices): every
GPU NIC an endpoint, the default job every NIC at the dominant speed, one ring per rail.

The invariants are checked on seeded random rail-optimised pods (hosts, rails, groups, sizes
drawn), not only on the fabric the code was written against.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.app.twin import twin_command
from agent.twin import collectives as C
from agent.twin.flows import FlowSpec
from agent.twin.network import TwinError, TwinNetwork, load_network
from tests.unit.rail_pods import load_pod, pod_shapes, rail_pod


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> TwinNetwork:
    return load_pod(tmp_path_factory.mktemp("pod"), rail_pod(hosts=3, rails=2, groups=2))


def test_every_nic_is_an_endpoint_and_the_leaves_point_at_it(pod: TwinNetwork) -> None:
    assert len(pod.hosts) == 12
    nic = pod.hosts["gpu4:eth1"]
    assert (nic.host, nic.rail, nic.leaf) == ("gpu4", 1, "leaf4")
    peers = {p.peer_device for p in pod.switches["leaf4"].ports}
    assert {"gpu4:eth1", "gpu5:eth1", "gpu6:eth1"} <= peers
    # rail 1 of group 1 to rail 1 of group 2: up one spine and down
    assert [hop[0] for hop in pod.path("gpu1:eth1", "gpu4:eth1", 7)][::2] == ["leaf2", "leaf4"]


def test_the_default_job_is_every_gpu_nic_one_ring_per_rail(pod: TwinNetwork) -> None:
    report = C.run_collective(pod, C.CollectiveSpec("allreduce", 0, 4 << 20))
    assert (report.ranks, report.rails) == (12, 2)
    assert report.hosts[:2] == ["gpu1:eth0", "gpu1:eth1"]
    assert report.completed and report.lossless_drops == 0
    # each rail's ring stays on its rail: no rail-0 leaf carries rail-1 traffic
    for link in report.links:
        device, _, _ = link.port.partition(":")
        if device.startswith("leaf") and link.utilisation > 0:
            leaf = int(device[4:])
            assert all(
                pod.hosts[p.peer_device].rail == (leaf - 1) % 2
                for p in pod.switches[device].ports
                if p.peer_device in pod.hosts
            )
    assert report.line_rate_fraction > 0.8, report.verdict.says
    assert "2 x 400G" in report.verdict.says
    assert any("one ring per rail" in note for note in report.notes)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (C.CollectiveSpec("allreduce", 3, 1 << 20), "the same count on every host"),
        (C.CollectiveSpec("allreduce", 2, 1 << 20), "two hosts at least"),
        (C.CollectiveSpec("allreduce", 99, 1 << 20), "--ranks: one rank per GPU NIC"),
        (C.CollectiveSpec("allreduce", 0, 1 << 20, hosts=("gpu1", "gpu9")), "--hosts"),
        (C.CollectiveSpec("allreduce", 0, 1 << 20, hosts=("gpu1", "gpu1:eth0")), "each host once"),
    ],
)
def test_placements_nccl_would_not_make_are_refused_naming_the_option(
    pod: TwinNetwork, spec: C.CollectiveSpec, message: str
) -> None:
    with pytest.raises(TwinError, match=message):
        C.run_collective(pod, spec)


def test_hosts_stand_for_their_nics_and_host_port_for_one(pod: TwinNetwork) -> None:
    whole = C.place_ranks(pod, C.CollectiveSpec("allreduce", 0, 1, hosts=("gpu2", "gpu5")))
    assert whole == C.Placement(
        400 * 10**9, ["gpu2:eth0", "gpu2:eth1", "gpu5:eth0", "gpu5:eth1"], 2
    )
    one_each = C.place_ranks(
        pod, C.CollectiveSpec("allreduce", 0, 1, hosts=("gpu2:eth1", "gpu5:eth0"))
    )
    assert one_each.rails == 1 and one_each.endpoints == ["gpu2:eth1", "gpu5:eth0"]


def test_the_default_speed_is_the_one_most_nics_run_at(tmp_path: Path) -> None:
    text = rail_pod(hosts=2, rails=4, speed="400G")
    # two one-NIC hosts at 100G on a leaf of their own, listed first
    text = text.replace(
        "devices:\n",
        "devices:\n  - {name: slow1, role: host, platform: linux_host, host: 10.0.3.1,"
        ' ports: [{name: eth0, peer: "leafx:Ethernet1", speed: 100G}]}\n'
        "  - {name: slow2, role: host, platform: linux_host, host: 10.0.3.2,"
        ' ports: [{name: eth0, peer: "leafx:Ethernet2", speed: 100G}]}\n'
        "  - {name: leafx, role: leaf, platform: arista_eos, host: 10.0.1.99,"
        ' ports: [{name: Ethernet100, peer: "spine1:Ethernet9"}]}\n',
    )
    network = load_pod(tmp_path, text)
    placement = C.place_ranks(network, C.CollectiveSpec("allreduce", 0, 1 << 20))
    assert placement.speed_bps == 400 * 10**9 and placement.rails == 4
    assert len(placement.endpoints) == 8


# ------------------------------------------------------------------ the rail rings' schedule


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    workload=st.sampled_from(["allreduce", "allgather", "reducescatter"]),
    hosts=st.integers(2, 6),
    rails=st.integers(2, 8),
    size=st.integers(1 << 10, 48 << 20),
)
def test_rail_rings_send_what_the_flat_ring_sends_across_hosts(
    workload: str, hosts: int, rails: int, size: int
) -> None:
    """Per channel, the bytes on the network are exactly the flat N x G ring's transfers out of
    each host's last GPU, and each waits for the previous host's step k - G on its rail."""
    ranks = hosts * rails
    size = C.nccl_tests_size(workload, ranks, size)  # type: ignore[arg-type]
    slices = C.rail_ring_slices(workload, hosts, rails, size)  # type: ignore[arg-type]
    assert len(slices) == hosts * rails
    parts = C.channel_parts(workload, ranks, size, rails)  # type: ignore[arg-type]
    expected_total = sum(parts) if workload == "allreduce" else size
    assert sum(parts) == expected_total
    for c, part in enumerate(parts):
        schedule = C.ring_schedule(workload, ranks, part)  # type: ignore[arg-type]
        for h in range(hosts):
            conn = slices[c * hosts + h]
            exit_rank = h * rails + rails - 1
            sent = sum(
                t.nbytes for loop in schedule for step in loop for t in step if t.src == exit_rank
            )
            assert sum(s.nbytes for s in conn) == sent
            for item in conn:
                if item.after is None:
                    assert item.key[1] < rails
                    continue
                up, seq = item.after
                assert up == c * hosts + (h - 1) % hosts
                lp, k, j = item.key
                assert slices[up][seq].key == (lp, k - rails, j)
                assert slices[up][seq].nbytes == item.nbytes


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_random_rail_pods_run_their_default_job_to_the_end(tmp_path: Path, seed: int) -> None:
    """Pods nobody wrote by hand: the default all-reduce and all-to-all are never refused,
    finish, lose nothing and move every byte."""
    rng = random.Random(seed)
    hosts, rails, groups = rng.randint(2, 3), rng.choice([2, 4]), rng.randint(1, 2)
    network = load_pod(tmp_path, rail_pod(hosts, rails, groups, spines=rng.randint(1, 2)))
    for workload in ("allreduce", "alltoall"):
        report = C.run_collective(network, C.CollectiveSpec(workload, 0, 1 << 20), seed=seed)
        assert (report.ranks, report.rails) == (hosts * groups * rails, rails), workload
        assert report.completed and report.delivered_fraction == 1.0, report.verdict.says
        assert report.lossless_drops == 0
        senders = Counter(link.port.partition(":")[0] for link in report.links)
        assert senders  # the job used the fabric


def test_twin_with_only_a_workload_runs_the_fabrics_job(tmp_path: Path) -> None:
    path = tmp_path / "pod.yml"
    path.write_text(rail_pod(hosts=2, rails=2))
    result = CliRunner().invoke(
        twin_command, [str(path), "--workload", "allreduce", "--size", "1MiB", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["ranks"], data["rails"]) == (4, 2)
    assert data["hosts"] == ["gpu1:eth0", "gpu1:eth1", "gpu2:eth0", "gpu2:eth1"]


@pytest.mark.parametrize(
    ("workload", "ranks", "rails", "bound_in_nics"),
    [
        ("allreduce", 8, 1, 1.0),
        ("alltoall", 8, 1, 1.0),  # one-NIC hosts: the NIC's rate, as before
        ("allreduce", 16, 8, 8.0),
        ("allgather", 16, 4, 4.0),
        ("alltoall", 16, 8, 15 / 8),
        ("alltoall", 256, 8, 255 / 248),
        ("sendrecv", 8, 1, 1.0),
        ("sendrecv", 16, 8, 1.0),  # each GPU's buffer over its own NIC, on any host
    ],
)
def test_the_busbw_bound_is_what_the_nics_carry(
    workload: str, ranks: int, rails: int, bound_in_nics: float
) -> None:
    bound = C.busbw_bound_Bps(workload, ranks, 400 * 10**9, rails)  # type: ignore[arg-type]
    assert bound == pytest.approx(50e9 * bound_in_nics)


def test_pxn_all_to_all_on_one_rail_group_runs_near_its_nic_bound(pod: TwinNetwork) -> None:
    """Three hosts of one group, two rails: no spine on any path; each NIC receives from two
    others at once, which PFC holds lossless; busbw near the one-NIC bound, not 2 x."""
    spec = C.CollectiveSpec("alltoall", 0, 4 << 20, hosts=("gpu1", "gpu2", "gpu3"))
    report = C.run_collective(pod, spec)
    assert report.completed and report.lossless_drops == 0
    assert 0.8 < report.line_rate_fraction <= 1.0, report.verdict.says
    assert report.busbw_Bps < 1.05 * C.busbw_bound_Bps("alltoall", 6, report.speed_bps, 2)
    assert not any(link.port.startswith("spine") for link in report.links)


def test_show_placement_lists_every_qp_on_the_path_the_engine_takes(tmp_path: Path) -> None:
    """Two groups, two rails, 2 QPs: every QP listed once, each egress list the path the
    network's ECMP gives its hash, rail c's QPs leaving from rail c's leaves only."""
    path = tmp_path / "pod.yml"
    path.write_text(rail_pod(hosts=2, rails=2, groups=2))
    network = load_network(path)
    args = [str(path), "--workload", "allreduce", "--size", "1MiB", "--qps-per-connection", "2"]
    result = CliRunner().invoke(twin_command, [*args, "--show-placement", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    placement = data["placement"]
    assert len(placement) == data["ranks"] * 2  # one ring connection per rank, 2 QPs each
    for row in placement:
        src, dst = network.hosts[row["from"]], network.hosts[row["to"]]
        assert src.rail == dst.rail == row["rail"]
        hops = network.path(
            row["from"],
            row["to"],
            FlowSpec(row["from"], row["to"], udp_sport=row["udp_sport"]).hash_value(),
        )
        assert row["egress"] == [f"{s}:{network.switches[s].ports[i].name}" for s, i in hops]
        assert row["egress"][0].partition(":")[0] == src.leaf
    table = CliRunner().invoke(twin_command, [*args, "--show-placement", "--no-progress"])
    assert "placement (every QP" in table.stdout and "gpu1:eth1" in table.stdout
    scenario = CliRunner().invoke(twin_command, [str(path), "--show-placement"])
    assert scenario.exit_code == 2 and "--show-placement" in scenario.output


@settings(max_examples=8, deadline=None)
@given(shape=pod_shapes(4), size=st.integers(1 << 18, 4 << 20), seed=st.integers(0, 2**16))
def test_sendrecv_sends_each_gpus_buffer_to_the_same_gpu_of_the_next_host(
    tmp_path_factory: pytest.TempPathFactory, shape: tuple[int, int, int], size: int, seed: int
) -> None:
    """A pipeline's stage boundary: GPU c of host h to GPU c of host h + 1 (the last to the
    first), each connection the whole buffer, over the rails' NICs; busbw = algbw, within
    the one NIC's bound, and no byte lost."""
    hosts, rails, groups = shape
    network = load_pod(tmp_path_factory.mktemp("pod"), rail_pod(hosts, rails, groups))
    spec = C.CollectiveSpec("sendrecv", 0, size)
    report = C.run_collective(network, spec, seed=seed)
    ranks, per_host = report.ranks, report.rails
    pairs = C.connection_pairs("sendrecv", ranks, per_host)
    assert sorted(pairs) == sorted(
        (r, (r // per_host + 1) % (ranks // per_host) * per_host + r % per_host)
        for r in range(ranks)
    )
    slices = C.sendrecv_slices(len(pairs), C.nccl_tests_size("sendrecv", ranks, size))
    assert {sum(s.nbytes for s in conn) for conn in slices} == {size // 4 * 4}
    assert report.completed and report.lossless_drops == 0
    assert report.busbw_Bps == pytest.approx(report.algbw_Bps)
    assert report.busbw_Bps <= C.busbw_bound_Bps("sendrecv", ranks, report.speed_bps, per_host)

"""NCCL collectives in the twin: the ring schedule, nccl-tests' bandwidths, QPs, collisions, and
runs through the engine (agent.twin.collectives; docs/collectives.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.app.twin import twin_command
from agent.twin import collectives as C
from agent.twin.network import (
    TwinError,
    TwinNetwork,
    leaf_spine_fabric_yaml,
    load_network,
    star_fabric_yaml,
)

RING = st.sampled_from(C.RING_COLLECTIVES)


# ------------------------------------------------------------------ nccl-tests' definitions

# nccl-tests doc/PERFORMANCE.md, "Summary": AllReduce 2(n-1)/n, ReduceScatter and AllGather
# (n-1)/n, AlltoAll (n-1)/n -- written out, not recomputed with the formula under test.
BUSBW_FACTORS = [
    ("allreduce", 2, 1.0),
    ("allreduce", 4, 1.5),
    ("allreduce", 16, 1.875),
    ("allgather", 2, 0.5),
    ("allgather", 8, 0.875),
    ("reducescatter", 4, 0.75),
    ("reducescatter", 16, 0.9375),
    ("alltoall", 4, 0.75),
    ("alltoall", 64, 0.984375),
    ("sendrecv", 2, 1.0),  # SendRecvGetBw: factor 1
    ("sendrecv", 64, 1.0),
]


@pytest.mark.parametrize(("workload", "ranks", "factor"), BUSBW_FACTORS)
def test_busbw_factor_is_nccl_tests(workload: C.CollectiveName, ranks: int, factor: float) -> None:
    assert C.busbw_factor(workload, ranks) == pytest.approx(factor)


# (workload, ranks, requested, what nccl-tests prints): float elements; per-rank pieces of
# all-gather, reduce-scatter and all-to-all 16-byte aligned (*GetCollByteCount).
SIZES = [
    ("allreduce", 16, 64_000_000, 64_000_000),
    ("allreduce", 4, 10, 8),
    ("allgather", 16, 64_000_000, 64_000_000),
    ("allgather", 3, 1000, 960),
    ("reducescatter", 5, 1_000_000, 1_000_000),
    ("reducescatter", 3, 1_000_000, 999_984),
    ("alltoall", 4, 100, 64),
    ("alltoall", 8, 100, 0),
    ("sendrecv", 8, 100, 100),  # the whole buffer to one peer, whole floats
    ("sendrecv", 4, 10, 8),
]


@pytest.mark.parametrize(("workload", "ranks", "requested", "printed"), SIZES)
def test_size_as_nccl_tests_prints_it(
    workload: C.CollectiveName, ranks: int, requested: int, printed: int
) -> None:
    assert C.nccl_tests_size(workload, ranks, requested) == printed


# ------------------------------------------------------------------ the ring schedule


def _replay(workload: str, ranks: int, schedule: list[list[list[C.Transfer]]]) -> None:
    """Run the schedule on symbols: what each rank holds of each chunk (the set of ranks whose
    input it contains), checking that every sender holds what it sends."""
    for loop in schedule:
        # all-gather starts with each rank's own piece only; the others with every chunk's input
        held: list[dict[int, frozenset[int]]] = [
            {r: frozenset({r})} if workload == "allgather" else
            {c: frozenset({r}) for c in range(ranks)}
            for r in range(ranks)
        ]  # fmt: skip
        for k, step in enumerate(loop):
            reduce = workload != "allgather" and k < ranks - 1
            for t in step:
                assert t.dst == (t.src + 1) % ranks
                assert t.chunk in held[t.src], (k, t)
                if not reduce:
                    assert held[t.src][t.chunk] == frozenset(range(ranks)) or (
                        workload == "allgather"
                    )
            for t in step:
                sent = held[t.src][t.chunk]
                mine = held[t.dst].get(t.chunk, frozenset())
                held[t.dst][t.chunk] = sent | mine if reduce else sent
        everyone = frozenset(range(ranks))
        for r in range(ranks):
            if workload == "reducescatter":
                assert held[r][r] == everyone  # rank r ends with chunk r, fully reduced
            elif workload == "allgather":
                assert held[r] == {c: frozenset({c}) for c in range(ranks)}
            else:
                assert all(held[r][c] == everyone for c in range(ranks))


@settings(max_examples=60, deadline=None)
@given(
    workload=RING,
    ranks=st.integers(2, 12),
    size=st.integers(4, 3_000_000),
    chunk=st.sampled_from([64, 4096, 65536, C.CHUNK_BYTES]),
)
def test_ring_schedule_delivers_every_chunk(
    workload: C.CollectiveName, ranks: int, size: int, chunk: int
) -> None:
    size = C.nccl_tests_size(workload, ranks, size)
    schedule = C.ring_schedule(workload, ranks, size, chunk)
    assert all(len(loop) == C.ring_steps(workload, ranks) for loop in schedule)
    assert C.ring_steps("allreduce", ranks) == 2 * (ranks - 1)
    assert all(len(step) == ranks for loop in schedule for step in loop)
    # Every byte of the buffer is in exactly one chunk of one loop.
    chunks = C.loop_chunks(workload, ranks, size, chunk)
    total = size if workload == "allreduce" else size // ranks
    assert sum(sum(c) if workload == "allreduce" else c[0] for c in chunks) == total
    _replay(workload, ranks, schedule)


@settings(max_examples=60, deadline=None)
@given(
    workload=RING,
    ranks=st.integers(2, 24),
    size=st.integers(4, 30_000_000),
    data=st.data(),
)
def test_ring_sends_are_the_schedules_transfers_of_those_ranks(
    workload: C.CollectiveName, ranks: int, size: int, data: st.DataObject
) -> None:
    """The lean path the twin builds its hops from equals the reference schedule's transfers
    of the chosen senders, in (loop, step) order."""
    size = C.nccl_tests_size(workload, ranks, size)
    senders = data.draw(st.lists(st.integers(0, ranks - 1), min_size=1, max_size=ranks))
    schedule = C.ring_schedule(workload, ranks, size)
    expected = [
        [(t.loop, t.step, t.nbytes) for loop in schedule for step in loop for t in step
         if t.src == rank]
        for rank in senders
    ]  # fmt: skip
    assert C.ring_sends(workload, ranks, size, senders) == expected


@settings(max_examples=60, deadline=None)
@given(
    workload=RING,
    ranks=st.integers(2, 16),
    size=st.integers(4, 40_000_000),
)
def test_bytes_each_rank_sends(workload: C.CollectiveName, ranks: int, size: int) -> None:
    """All-reduce: 2(N - 1)/N x size per rank (PERFORMANCE.md's t = S 2(n-1) / (n B)), up to
    the uneven chunks of the last loop; all-gather, reduce-scatter: (N - 1)/N x size."""
    size = C.nccl_tests_size(workload, ranks, size)
    schedule = C.ring_schedule(workload, ranks, size)
    sent = [0] * ranks
    for loop in schedule:
        for step in loop:
            for t in step:
                sent[t.src] += t.nbytes
    factor = C.busbw_factor(workload, ranks)
    assert sum(sent) == pytest.approx(factor * size * ranks, abs=1e-6)
    uneven = sum(max(c) - min(c) for c in C.loop_chunks(workload, ranks, size))
    for nbytes in sent:
        assert abs(nbytes - factor * size) <= 2 * uneven + 1e-6


@settings(max_examples=80, deadline=None)
@given(nbytes=st.integers(0, 5_000_000), qps=st.integers(1, C.MAX_QPS))
def test_slices_and_qp_parts_conserve_bytes(nbytes: int, qps: int) -> None:
    slices = C.slice_sizes(nbytes)
    assert sum(slices) == nbytes and all(0 < s <= C.SLICE_BYTES for s in slices)
    parts = C.qp_parts(nbytes, qps)
    assert sum(parts) == nbytes and len(parts) <= qps
    assert all(p % C.IB_WRITE_ALIGN == 0 for p in parts[:-1])


def test_slices_wait_for_the_previous_step_of_the_same_slice() -> None:
    slices = C.ring_slices("allreduce", 4, 20_000_000)
    for r, conn in enumerate(slices):
        for item in conn:
            loop, step, j = item.key
            assert item.last == (step == 2 * (4 - 1) - 1)
            if step == 0:
                assert item.after is None
                continue
            assert item.after is not None
            up, seq = item.after
            assert up == (r - 1) % 4
            assert slices[up][seq].key == (loop, step - 1, j)
            assert slices[up][seq].nbytes == item.nbytes


# ------------------------------------------------------------------ placement, QPs, collisions


@pytest.fixture(scope="module")
def star(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("coll") / "star.yml"
    path.write_text(star_fabric_yaml(4, "100G", profile="nvidia-default", mtu=9214))
    return path


@pytest.fixture(scope="module")
def star_net(star: Path) -> TwinNetwork:
    return load_network(star)


# A 4-leaf, 4-spine fabric, hosts and uplinks at 100G, PFC alone (no ECN: the collision's
# cost is the shared link, not DCQCN's recovery). The ring order below was picked because with
# one QP per connection two pairs of its inter-leaf connections hash onto the same uplinks
# (the test checks that it still does).
COLLIDING_RING = ("h5", "h2", "h6", "h3", "h1", "h4", "h8", "h7")


@pytest.fixture(scope="module")
def clos(tmp_path_factory: pytest.TempPathFactory) -> TwinNetwork:
    path = tmp_path_factory.mktemp("coll") / "clos.yml"
    path.write_text(
        leaf_spine_fabric_yaml(["100G"] * 4, 2, spines=4, uplink_speed="100G", profile="pfc-only")
    )
    return load_network(path)


def test_ranks_beyond_the_hosts_name_the_option(star_net: TwinNetwork) -> None:
    with pytest.raises(TwinError, match="--ranks"):
        C.place_ranks(star_net, C.CollectiveSpec("allreduce", 5, 1000))
    with pytest.raises(TwinError, match="--hosts"):
        C.place_ranks(star_net, C.CollectiveSpec("allreduce", 2, 1000, hosts=("h1", "nope")))
    assert C.place_ranks(star_net, C.CollectiveSpec("allreduce", 3, 1000)) == C.Placement(
        100_000_000_000, ["h1", "h2", "h3"], rails=1
    )


@given(connection=st.integers(0, 4000), qp=st.integers(0, C.MAX_QPS - 1))
def test_source_ports_are_roce_dynamic_ports(connection: int, qp: int) -> None:
    assert 0xC000 <= C.qp_sport(connection, qp) <= 0xFFFF


def test_qp0_keeps_its_port_and_each_qp_has_its_own() -> None:
    hosts = ["a", "b", "c"]
    one = C.build_flows(hosts, "allreduce", 1)[1]
    four_conns, four = C.build_flows(hosts, "allreduce", 4)
    assert [f.udp_sport for f in one] == [four[c.flows[0]].udp_sport for c in four_conns]
    for conn in four_conns:
        assert len({four[i].udp_sport for i in conn.flows}) == 4


def test_alltoall_connects_every_ordered_pair() -> None:
    conns, flows = C.build_flows(["a", "b", "c", "d"], "alltoall", 2)
    assert {(c.src, c.dst) for c in conns} == {(s, d) for s in range(4) for d in range(4) if s != d}
    assert len(flows) == 12 * 2


def test_fabric_order_ring_on_one_leaf_has_no_collision(clos: TwinNetwork) -> None:
    conns, flows = C.build_flows(["h1", "h2"], "allreduce", 1)
    assert C.find_collisions(clos, conns, flows) == []


# ------------------------------------------------------------------ runs through the engine


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("size", [1_000_000, 3_000_000])
def test_allreduce_on_an_uncongested_fabric_runs_near_line_rate(
    star_net: TwinNetwork, ranks: int, size: int
) -> None:
    """A ring on one switch shares no port: busbw is at most what the wire carries of payload
    (4096 of 4178 bytes on the wire per frame) and at least 90 % of the line rate."""
    report = C.run_collective(star_net, C.CollectiveSpec("allreduce", ranks, size))
    assert report.completed and report.verdict.kind == "healthy"
    line = report.speed_bps / 8
    assert report.busbw_Bps <= line * 4096 / (4096 + 62 + 20)
    assert report.busbw_Bps >= 0.90 * line
    assert report.algbw_Bps == pytest.approx(report.size_bytes / report.time_s)
    assert report.lossless_drops == 0 and report.collisions == []
    assert report.jain == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("workload", C.COLLECTIVES)
def test_every_collective_completes(star_net: TwinNetwork, workload: C.CollectiveName) -> None:
    report = C.run_collective(star_net, C.CollectiveSpec(workload, 4, 2_000_000))
    assert report.completed and report.delivered_fraction == 1.0
    assert 0 < report.busbw_Bps <= report.speed_bps / 8
    assert report.not_modelled == list(C.NOT_MODELLED)
    data = report.to_json()
    assert data["busbw_GBps"] == pytest.approx(report.busbw_Bps / 1e9)


def test_a_collective_cut_short_is_incomplete(star_net: TwinNetwork) -> None:
    report = C.run_collective(
        star_net, C.CollectiveSpec("allreduce", 4, 4_000_000), max_duration_s=200e-6
    )
    assert not report.completed and report.verdict.kind == "incomplete"
    assert report.algbw_Bps == 0 and 0 < report.delivered_fraction < 1
    assert report.time_s == pytest.approx(200e-6)


def test_more_qps_spread_a_colliding_ring(clos: TwinNetwork) -> None:
    """More QPs per connection (messages split over them) never add a collision here and lift
    busbw where one QP collides."""
    reports = {
        q: C.run_collective(
            clos,
            C.CollectiveSpec(
                "allreduce",
                8,
                4_000_000,
                qps_per_connection=q,
                hosts=COLLIDING_RING,
                split_data_on_qps=True,
            ),
        )
        for q in (1, 2, 4, 8)
    }
    counts = [len(reports[q].collisions) for q in (1, 2, 4, 8)]
    assert counts[0] > 0 and reports[1].verdict.kind == "ecmp-collision"
    assert counts == sorted(counts, reverse=True)
    assert all(r.completed and r.lossless_drops == 0 for r in reports.values())
    assert reports[8].busbw_Bps >= 1.5 * reports[1].busbw_Bps
    assert reports[4].busbw_Bps > reports[1].busbw_Bps


# ------------------------------------------------------------------ the command line


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(twin_command, list(args))
    return result.exit_code, result.stdout, result.stderr


BAD_INPUT = [
    (["--workload", "allreduce", "--ranks", "5"], "--ranks"),  # 4 hosts
    (["--workload", "allreduce", "--ranks", "99"], "--ranks"),
    (["--workload", "allreduce", "--ranks", "2", "--qps-per-connection", "0"],
     "--qps-per-connection"),
    (["--workload", "allreduce", "--ranks", "2", "--size", "0"], "--size"),
    (["--workload", "allreduce", "--ranks", "2", "--size", "12XB"], "--size"),
    (["--workload", "allreduce", "--ranks", "2", "--scenario", "incast"], "--scenario"),
    (["--workload", "allreduce", "--ranks", "2", "--senders", "3"], "--senders"),
    (["--workload", "allreduce", "--hosts", "h1,h9"], "--hosts"),
    (["--workload", "allreduce", "--ranks", "2", "--duration", "10"], "--duration"),
    (["--ranks", "2"], "--ranks"),
    (["--qps-per-connection", "4"], "--qps-per-connection"),
    (["--workload", "broadcast", "--ranks", "2"], "--workload"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "option"), BAD_INPUT)
def test_bad_input_exits_2_naming_the_option(star: Path, args: list[str], option: str) -> None:
    code, _, err = _run(str(star), *args)
    assert code == 2, err
    assert option in err


def test_cli_json_and_table(star: Path) -> None:
    args = [str(star), "--workload", "allreduce", "--ranks", "4", "--size", "1MB"]
    code, out, err = _run(*args, "--output", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["completed"] and data["passed"] and data["ranks"] == 4
    assert data["hosts"] == ["h1", "h2", "h3", "h4"]
    assert data["busbw_GBps"] > 0.9 * 100 / 8
    code, out, err = _run(*args, "--hosts", "h4,h3,h2,h1", "--qps-per-connection", "2")
    assert code == 0, err
    assert "busbw" in out and "verdict: healthy" in out and "ranks: h4, h3, h2, h1" in out


# (workload, ranks, size, messages a connection has in flight at most): a ring's step is
# min(2 MiB, size/N) in 1 MiB slices; all-to-all's pairs post 128 KiB messages, 8 at a time.
IN_FLIGHT = [
    ("allreduce", 16, 16_000_000, 1),
    ("allreduce", 16, 64_000_000, 2),
    ("allreduce", 2, 64_000_000, 2),
    ("allgather", 4, 1_000_000, 1),
    ("alltoall", 4, 4_000_000, 8),
    ("alltoall", 4, 400_000, 1),
]


@pytest.mark.parametrize(("workload", "ranks", "size", "busy"), IN_FLIGHT)
def test_messages_in_flight(workload: C.CollectiveName, ranks: int, size: int, busy: int) -> None:
    if workload == "alltoall":
        slices, window = C.alltoall_slices(ranks, size), C.NCCL_STEPS
    else:
        slices, window = C.ring_slices(workload, ranks, size), C.WINDOW_SLICES
    assert C.messages_in_flight(slices, window) == busy


def test_one_message_at_a_time_does_not_spread_over_qps(clos: TwinNetwork) -> None:
    """Without the split, a connection with one message in flight uses one QP at a time:
    wherever two connections' QPs meet, they may meet at full rate."""
    conns, flows = C.build_flows(list(COLLIDING_RING), "allreduce", 4)
    spread = C.find_collisions(clos, conns, flows)
    one_at_a_time = C.find_collisions(clos, conns, flows, at_once=1)
    assert len(one_at_a_time) >= len(spread)
    assert all(c.load == pytest.approx(2.0) for c in one_at_a_time)


def test_a_single_uplink_is_oversubscribed_not_a_hash_collision(tmp_path: Path) -> None:
    """Two ring connections up one 100G uplink: no hashing helps, and the collision says so
    (the colliding ring on four spines is a hash collision: test_more_qps_...'s verdict)."""
    path = tmp_path / "one-spine.yml"
    path.write_text(leaf_spine_fabric_yaml(["100G"] * 2, 2, spines=1, uplink_speed="100G"))
    conns, flows = C.build_flows(["h1", "h3", "h2", "h4"], "allreduce", 4)
    found = C.find_collisions(load_network(path), conns, flows)
    assert found and all(c.oversubscribed for c in found)
    assert {c.link.partition(":")[0] for c in found} == {"leaf1", "leaf2", "spine1"}


@pytest.fixture(scope="module")
def stars(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TwinNetwork]:
    out = {}
    for speed in ("25G", "100G", "400G"):
        path = tmp_path_factory.mktemp("coll") / f"star-{speed}.yml"
        path.write_text(star_fabric_yaml(4, speed, profile="nvidia-default", mtu=9214))
        out[speed] = load_network(path)
    return out


@settings(max_examples=12, deadline=None)
@given(
    speed=st.sampled_from(["25G", "100G", "400G"]),
    workload=st.sampled_from(C.COLLECTIVES),
    ranks=st.integers(2, 4),
    size=st.integers(300_000, 3_000_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_collective_on_one_switch_is_near_line_rate(
    stars: dict[str, TwinNetwork],
    speed: str,
    workload: C.CollectiveName,
    ranks: int,
    size: int,
    seed: int,
) -> None:
    """On one switch nothing collides (a ring shares no port; all-to-all's pairs share only
    the receivers' ports, at the rate the senders split): busbw between 85 % of the line rate
    and the payload's share of it."""
    report = C.run_collective(stars[speed], C.CollectiveSpec(workload, ranks, size), seed=seed)
    assert report.completed and report.lossless_drops == 0
    line = report.speed_bps / 8
    assert 0.85 * line <= report.busbw_Bps <= line * 4096 / (4096 + 62 + 20)

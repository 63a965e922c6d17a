"""perftest over a fabric (agent.observe.perftest.scenario, agent.observe.perftest.worker): the
pair schedule,
the paths a pair can take, the causes named from counters, the worker's own helpers, the CLI
and playbook refusals. The runs themselves are lab tests (tests/lab/test_rdma_vm_lab.py)."""

from __future__ import annotations

import io
import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.cli import main as cli_main
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.observe.locate.counters import PortSymptoms
from agent.observe.locate.topology import Topology
from agent.observe.perftest import scenario, worker
from agent.observe.perftest.command import qp_timeout_for, tx_depth_for
from agent.observe.perftest.inputs import NicDelta
from agent.observe.perftest.verdict import LinkRow, Verdict

REPO = Path(__file__).resolve().parents[2]
LAB_FABRIC = REPO / "playbooks" / "fabrics" / "lab-leafspine.yml"


# --------------------------------------------------------------------------- schedule


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8])
def test_round_robin_pairs_every_host_once_and_no_host_twice_a_round(count: int) -> None:
    hosts = [f"h{i}" for i in range(1, count + 1)]
    rounds = scenario.round_robin(hosts)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == sorted(itertools.combinations(hosts, 2))  # each pair once
    for round_ in rounds:
        busy = [h for p in round_ for h in p]
        assert len(busy) == len(set(busy))  # nobody in two pairs at once
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)  # the fewest rounds


@pytest.mark.parametrize(
    ("pairs", "rounds"),
    [
        ([("h1", "h3"), ("h2", "h4")], [[("h1", "h3"), ("h2", "h4")]]),
        ([("h1", "h3"), ("h2", "h3")], [[("h1", "h3")], [("h2", "h3")]]),  # h3 in both
        ([("h1", "h2"), ("h2", "h3"), ("h3", "h4")], [[("h1", "h2"), ("h3", "h4")],
                                                       [("h2", "h3")]]),
    ],
)  # fmt: skip
def test_given_pairs_run_in_rounds_of_disjoint_pairs(
    pairs: list[tuple[str, str]], rounds: list[list[tuple[str, str]]]
) -> None:
    assert scenario.in_rounds(pairs) == rounds


# --------------------------------------------------------------------------- tuning knobs


@pytest.mark.parametrize(
    ("rate", "qps", "size", "depth"),
    [
        (400e9, 4, 65536, None),  # perftest's 128 drains in 0.7 ms: keep it
        (100e9, 16, 1 << 20, None),
        (10e6, 4, 65536, 1),  # a lab link: 128 would be 27 s of data after -D ends
        (1e9, 4, 65536, 119),
    ],
)
def test_send_depth_keeps_the_drain_within_a_quarter_second(
    rate: float, qps: int, size: int, depth: int | None
) -> None:
    assert tx_depth_for(rate, qps, size) == depth


@pytest.mark.parametrize(("dilation", "timeout"), [(1, None), (2, 15), (100, 21), (10**6, 31)])
def test_ack_timeout_grows_with_the_labs_time_dilation(dilation: int, timeout: int | None) -> None:
    assert qp_timeout_for(dilation) == timeout


# --------------------------------------------------------------------------- paths, causes


@pytest.fixture(scope="module")
def leafspine(tmp_path_factory: pytest.TempPathFactory) -> FabricIntent:
    return load_fabric(LAB_FABRIC).intent


def test_path_ports_of_a_cross_leaf_pair_and_a_same_leaf_pair(leafspine: FabricIntent) -> None:
    topology = Topology.from_intent(leafspine)
    cross = scenario.path_ports(topology, "h1", "h3")
    assert ("leaf1", "Ethernet3") in cross and ("leaf2", "Ethernet3") in cross  # access ports
    assert {
        ("leaf1", "Ethernet1"),
        ("spine1", "Ethernet1"),
        ("spine1", "Ethernet2"),
        ("leaf2", "Ethernet1"),
        ("leaf1", "Ethernet2"),
        ("spine2", "Ethernet1"),
        ("spine2", "Ethernet2"),
        ("leaf2", "Ethernet2"),
    } <= cross  # both ECMP paths
    assert ("leaf1", "Ethernet4") not in cross  # h2's port is not on h1's path
    local = scenario.path_ports(topology, "h1", "h2")
    assert local == {("leaf1", "Ethernet3"), ("leaf1", "Ethernet4")}  # fmt: skip


def _pair(client: str = "h1", server: str = "h3", error: str | None = None) -> Any:
    return scenario.PairResult(
        client, server, 1, scenario.SideResult(client, "client", error=error),
        scenario.SideResult(server, "server"),
    )  # fmt: skip


def _verdict(status: str) -> Verdict:
    row = LinkRow("h1→h3", "h1", "h3", status, 4e9 if status == "fail" else 9.5e9, 10e9)  # type: ignore[arg-type]
    return Verdict("pairwise", "write", (row,), ())


RXE_LOSS = NicDelta("h3", "rxe0/1", {"out_of_seq_request": 12, "rcvd_pkts": 500})
SENDER_RETRIES = NicDelta("h1", "rxe0/1", {"rcvd_seq_err": 11, "completer_retry_err": 8})

# name -> (verdict status, NIC deltas, port symptoms, what the cause says)
CAUSES: dict[str, tuple[str, tuple[NicDelta, ...], tuple[PortSymptoms, ...], list[str]]] = {
    "a clean pass names nothing": ("pass", (), (), []),
    # rxe retries once or twice per QP when perftest tears its QPs down: no loss by itself
    "retries at teardown are not loss": (
        "pass", (NicDelta("h1", "rxe0/1", {"completer_retry_err": 8}),), (), [],
    ),
    "a bad optic on h1's link": (
        "fail", (RXE_LOSS, SENDER_RETRIES),
        (PortSymptoms("leaf1", "Ethernet3", fcs_errors=14, in_errors=14),),
        ["h1→h3: leaf1:Ethernet3 received 14 frames with FCS errors (frames arriving over "
         "h1>leaf1) — the NICs saw it: h1 rxe0/1 rcvd_seq_err +11, h1 rxe0/1 retransmitted "
         "(completer_retry_err +8), h3 rxe0/1 out_of_seq_request +12"],
    ),
    "errors off the pair's paths are not blamed": (
        "fail", (RXE_LOSS,), (PortSymptoms("leaf1", "Ethernet4", fcs_errors=50),),
        ["h1→h3: packets were lost on the way (h3 rxe0/1 out_of_seq_request +12) but no switch "
         "port on the pair's paths counted an error or a drop: a link or optic that drops "
         "silently; `roce-agent locate` ranks the links"],
    ),
    "lossless drops in a spine": (
        "fail", (RXE_LOSS,),
        (PortSymptoms("spine1", "Ethernet2", lossless_drops=7, headroom_drops=7),),
        ["h1→h3: spine1:Ethernet2 dropped 7 lossless frames, 7 beyond the PFC headroom — the "
         "NICs saw it: h3 rxe0/1 out_of_seq_request +12"],
    ),
    "slow without loss, held by PFC": (
        "fail", (), (PortSymptoms("leaf2", "Ethernet1", pfc_tx=40),),
        ["h1→h3: no loss; the switches on its paths sent 40 PFC pause frames: the pair was "
         "held back by congestion downstream"],
    ),
    "slow without loss or pause: the hosts": (
        "fail", (), (),
        ["h1→h3: no loss, no drop and no pause on its paths: the hosts themselves (CPU, PCIe, "
         "NIC firmware or settings) hold the rate"],
    ),
    "a pass with loss signs still says where": (
        "pass", (RXE_LOSS,), (PortSymptoms("leaf2", "Ethernet3", fcs_errors=2, in_errors=2),),
        ["h1→h3: leaf2:Ethernet3 received 2 frames with FCS errors (frames arriving over "
         "h3>leaf2) — the NICs saw it: h3 rxe0/1 out_of_seq_request +12"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", CAUSES)
def test_causes_are_named_from_the_counters_on_the_pairs_paths(
    leafspine: FabricIntent, name: str
) -> None:
    status, nics, symptoms, expected = CAUSES[name]
    causes = scenario.name_causes(leafspine, _verdict(status), [_pair()], nics, symptoms)
    assert causes == expected


def test_a_run_that_did_not_measure_says_why(leafspine: FabricIntent) -> None:
    pair = _pair(error="did not start: perftest on h3 did not start")
    causes = scenario.name_causes(leafspine, _verdict("fail"), [pair], (), ())
    assert causes == [
        "h1→h3: perftest did not measure: did not start: perftest on h3 did not start"
    ]


# --------------------------------------------------------------------------- the worker's helpers


PROC_NET_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid
   0: 00000000:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:0016 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 2 1
"""  # 0x4853 = 18515 listening; 22 only as an established connection


@pytest.mark.parametrize(("port", "listens"), [(18515, True), (22, False), (18516, False)])
def test_a_server_is_ready_when_its_port_listens(tmp_path: Path, port: int, listens: bool) -> None:
    (tmp_path / "tcp").write_text(PROC_NET_TCP)
    assert worker.listening(port, tmp_path) is listens


@pytest.mark.parametrize(("stdin", "ok"), [("GO\n", True), ("", False), ("STOP\n", False)])
def test_a_client_starts_only_on_go(monkeypatch: pytest.MonkeyPatch, stdin: str, ok: bool) -> None:
    reader, writer = os.pipe()
    os.write(writer, stdin.encode())
    os.close(writer)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.FileIO(reader)))
    if ok:
        worker.wait_for_go(timeout=2)
    else:
        with pytest.raises(ValueError, match="Expected: GO on stdin"):
            worker.wait_for_go(timeout=2)


def test_the_worker_reads_only_the_counters_a_nic_has() -> None:
    """The recorded rxe tree and virtio_net's ethtool -S (tests/data/sysfs/README.md)."""
    sysfs = REPO / "tests" / "data" / "sysfs"
    virtio = (sysfs / "ethtool" / "eth1.txt").read_text()
    nic = worker.read_nic("rxe0", 1, "eth1", sysfs, ethtool=lambda netdev: virtio)
    assert "rcvd_pkts" in nic["hw"] and "np_cnp_sent" not in nic["hw"]  # rxe: no DCQCN
    assert nic["pause"] is None  # virtio_net reports no per-priority pause: None, not zeros


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"side": "client"}, "server_address: Expected: set for clients only"),
        ({"side": "server", "server_address": "198.18.0.13"}, "set for clients only"),
        ({"side": "bystander"}, "side: Expected: server or client"),
    ],
)
def test_bad_worker_specs_are_refused(spec: dict[str, Any], message: str) -> None:
    base = {"test": "write", "device": "rxe0", "netdev": "eth1", "qps": 4,
            "message_bytes": 65536, "duration_s": 3, "tcp_port": 18515}  # fmt: skip
    with pytest.raises(ValueError, match=message):
        worker.PerftestSpec(**{**base, **spec})


def test_a_server_refuses_a_port_something_else_listens_on() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        spec = worker.PerftestSpec(
            side="server", test="write", device="rxe0", netdev="eth1", qps=4,
            message_bytes=65536, duration_s=3, tcp_port=port,
        )  # fmt: skip
        with pytest.raises(ValueError, match=f"TCP port {port}: Expected: free"):
            worker.run_perftest(spec, ready=lambda: None)


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "h3"], "an incast needs both --to and --from"),
        (["--to", "h3", "--from", "h1", "--pairs", "h1:h2"], "cannot go with --pairs"),
        (["--pairs", "h1-h3"], "expected CLIENT:SERVER pairs"),
        ([], "Expected: two or more hosts with an rdma_device Actual: none"),
        (["--pairs", "h1:h9"], "no host named 'h9'"),
    ],
)
def test_perftest_cli_refuses_what_cannot_run(
    monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    """The lab's namespace hosts declare no rdma_device: nothing can run there, and the
    error says so, exit 2, before anything is started."""
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "admin")
    result = CliRunner().invoke(
        cli_main, ["probe", "perftest", "--fabric", str(LAB_FABRIC), "--no-switches", *args]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_host_without_an_rdma_port_is_named(leafspine: FabricIntent) -> None:
    with pytest.raises(scenario.PerftestError, match="host h1: Expected: a port with rdma_device"):
        scenario.rdma_end(leafspine, "h1")


def test_playbook_step_is_skipped_without_rdma_hosts(
    leafspine: FabricIntent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.ops.playbooks import PerftestStepSpec, PlaybookRunner

    monkeypatch.setenv("ROCE_LAB_PASSWORD", "admin")  # the runner's pusher resolves it

    runner = PlaybookRunner(leafspine)
    outcome = runner._perftest(PerftestStepSpec())
    assert outcome.status == "skipped"
    assert outcome.detail == {
        "reason": "fewer than two hosts declare an rdma_device: no perftest to run"
    }


@pytest.mark.parametrize(
    ("device", "value", "message"),
    [
        ("leaf1", "mlx5_0", "ports.rdma_device: Expected: only on host ports Actual: set on "
         "leaf leaf1 port(s) Ethernet1"),
        ("h1", "mlx5 0", "invalid RDMA device 'mlx5 0'"),
        ("h1", "mlx5_0/0", "invalid RDMA device 'mlx5_0/0'"),
        ("h1", "../sys", "invalid RDMA device '../sys'"),
    ],
)  # fmt: skip
def test_bad_rdma_devices_in_the_fabric_file_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device: str, value: str, message: str
) -> None:
    import yaml

    from agent.errors import IntentError

    monkeypatch.setenv("ROCE_AGENT_PROFILES", str(REPO / "playbooks" / "profiles"))
    document = yaml.safe_load(LAB_FABRIC.read_text())
    target = next(d for d in document["devices"] if d["name"] == device)
    target["ports"][0]["rdma_device"] = value
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    shown = [str(p) for p in caught.value.problems]
    assert any(message in p and str(path) in p for p in shown), shown

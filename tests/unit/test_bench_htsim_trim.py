"""bench/htsim_trim.py, the parts that need no htsim build and run no simulation: reading
htsim's output (real outputs in tests/data/htsim/, README there), the parameter mapping, and the
table's arithmetic."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests/data/htsim"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("htsim_trim", REPO / "bench/htsim_trim.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["htsim_trim"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()
CASE = bench.Case(senders=4, frames=512, cable_m=200.0)


def _read(name: str) -> str:
    return (DATA / name).read_text()


# --- htsim's output ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "finished", "new", "rtx", "stripped", "queue"),
    [
        ("ndp-bdp-4.txt", [173.85, 174.099, 174.182, 174.432], 2048, 27, None, 540408),
        ("ndp-unpaced-4.txt", [136.488, 157.943, 176.072, 176.82], 2048, 1893, None, 540408),
        ("eqds-4.txt", [173.684, 173.85, 174.266, 174.432], 2048, 27, None, 536382),
        (
            "ndp-unpaced-4-stripped.txt",
            [136.488, 157.943, 176.072, 176.82],
            2048,
            1893,
            1893,
            540408,
        ),
    ],
)
def test_parse_recorded_outputs(
    name: str, finished: list[float], new: int, rtx: int, stripped: int | None, queue: int
) -> None:
    out = bench.parse_htsim(_read(name))
    assert sorted(out.finished_us.values()) == pytest.approx(finished)
    assert len(out.finished_us) == 4
    assert (out.new, out.rtx, out.bounced, out.stripped, out.rtos) == (new, rtx, 0, stripped, 0)
    assert out.queue_bytes == queue


def test_uec_output_and_its_log() -> None:
    """htsim_uec prints no finish lines: the totals carry NACKs, the log the finish times."""
    out = bench.parse_htsim(_read("uec-nscc-4.txt"))
    assert out.finished_us == {}
    assert (out.new, out.rtx, out.bounced, out.nacks, out.stripped) == (2048, 132, 0, 132, None)
    assert out.queue_bytes == 129 * bench.EQDS_MTU
    done = bench.log_finish_us((DATA / "uec-nscc-4.log").read_bytes())
    assert sorted(done.values()) == pytest.approx([166.1672, 168.57884, 172.23788, 175.99096])
    assert len(done) == 4  # the 4 start records (event 5000) are not finishes
    assert bench.log_finish_us(b"no trace here") == {}


def test_uec_outcome_takes_the_nacks() -> None:
    out = bench.parse_htsim(_read("uec-nscc-4.txt").replace("NACKs: 132", "NACKs: 130"))
    finished = bench.log_finish_us((DATA / "uec-nscc-4.log").read_bytes())
    out = dataclasses.replace(out, finished_us={str(k): v for k, v in finished.items()})
    outcome = bench.htsim_outcome("uec-nscc", CASE, out)
    assert (outcome.trims, outcome.retransmitted) == (130, 132)
    assert outcome.notes == ["NACKs 130 != Rtx 132"]
    assert outcome.max_us == pytest.approx(175.99096)


def test_flow_names_of_both_transports() -> None:
    ndp = bench.parse_htsim(_read("ndp-unpaced-4.txt")).finished_us
    eqds = bench.parse_htsim(_read("eqds-4.txt")).finished_us
    assert set(ndp) == {f"ndp_{s}_0" for s in range(1, 5)}
    assert set(eqds) == {f"Eqds_{s}_0" for s in range(1, 5)}
    assert ndp["ndp_1_0"] == pytest.approx(176.82)


def test_the_recorded_queue_is_the_mapped_one() -> None:
    """The bench's -q for the twin's 129 frames is what htsim reports it built, in bytes."""
    ndp = bench.parse_htsim(_read("ndp-bdp-4.txt"))
    eqds = bench.parse_htsim(_read("eqds-4.txt"))
    assert ndp.queue_bytes == bench.htsim_queue(129, bench.NDP_MTU) * bench.NDP_MTU
    assert eqds.queue_bytes == bench.htsim_queue(129, bench.EQDS_MTU) * bench.EQDS_MTU


def test_outcome_from_recorded_output() -> None:
    out = bench.htsim_outcome("ndp-unpaced", CASE, bench.parse_htsim(_read("ndp-unpaced-4.txt")))
    assert (out.trims, out.retransmitted, out.notes) == (1893, 1893, [])
    assert out.p50_us == pytest.approx(157.943)  # nearest rank: the 2nd of 4
    assert out.max_us == pytest.approx(176.82)
    assert (out.wire_bytes, out.trim_wire_bytes) == (4158, 64)


def test_outcome_prefers_stripped_and_notes_a_mismatch() -> None:
    text = _read("ndp-unpaced-4-stripped.txt").replace("Stripped: 1893", "Stripped: 1900")
    out = bench.htsim_outcome("ndp-unpaced", CASE, bench.parse_htsim(text))
    assert out.trims == 1900
    assert out.retransmitted == 1893
    assert out.notes == ["Stripped 1900 != Rtx 1893"]


def test_outcome_notes_unfinished_flows_bounces_and_rtos() -> None:
    lines = [
        line for line in _read("ndp-bdp-4.txt").splitlines() if not line.startswith("Flow ndp_1_0")
    ]
    text = "\n".join(lines).replace("Bounced: 0", "Bounced: 2") + "\nTotal RTOs: 3\n"
    out = bench.htsim_outcome("ndp-bdp", CASE, bench.parse_htsim(text))
    assert len(out.completions_us) == 3
    assert out.notes == [
        "2 headers bounced",
        "3 RTOs (their retransmissions are in Rtx)",
        "1 flows unfinished at -end",
    ]


def test_output_without_totals_is_an_error() -> None:
    text = _read("ndp-bdp-4.txt").split(".Done")[0]
    with pytest.raises(bench.BenchError, match=re.escape("New: .. Rtx")):
        bench.parse_htsim(text)


# --- the parameter mapping -----------------------------------------------------------------


def test_queue_frames_and_htsim_queue() -> None:
    assert bench.queue_frames(538_624) == 129  # the twin's 400G, 200 m lossy limit
    assert bench.htsim_queue(129, bench.NDP_MTU) == 132
    assert bench.htsim_queue(129, bench.EQDS_MTU) == 129


def test_htsim_queue_holds_exactly_the_frames() -> None:
    """htsim admits a packet while queued + it <= q * unit: ``frames`` fit, one more not."""
    for frames in range(1, 400):
        for unit in (bench.NDP_MTU, bench.EQDS_MTU):
            q = bench.htsim_queue(frames, unit)
            assert frames * bench.FRAME <= q * unit < (frames + 1) * bench.FRAME


def test_bdp_and_runs() -> None:
    assert bench.bdp_packets(1.0) == 51  # 4 us + 2 packets' serialisation at 400 G
    runs = {r.label: r for r in bench.htsim_runs(CASE, 129, 1.0)}
    assert set(runs) == {"ndp-bdp", "ndp-unpaced", "eqds", "uec-nscc"}
    uec = runs["uec-nscc"].argv(Path("u"), CASE, 1.0, (Path("m.cm"), Path("l.log")))
    assert "-cwnd" not in uec  # NSCC's own start
    assert uec[uec.index("-q") + 1] == "129"
    assert (runs["ndp-unpaced"].cwnd, runs["ndp-bdp"].cwnd, runs["eqds"].cwnd) == (512, 51, 51)
    assert (runs["ndp-bdp"].mss, runs["eqds"].mss) == (4094, 4094)
    argv = runs["ndp-bdp"].argv(Path("/x/htsim_ndp"), CASE, 1.0, (Path("m.cm"), Path("l.log")))
    assert argv[:3] == ["/x/htsim_ndp", "-nodes", "50"]
    assert argv[argv.index("-q") + 1] == "132"
    assert argv[argv.index("-mtu") + 1] == "4094"
    assert argv[argv.index("-end") + 1] == "3407"  # 20 line times (170.3 us), rounded up


def test_matrix_text() -> None:
    text = bench.matrix_text(CASE, bench.NDP_MTU)
    assert text.splitlines() == [
        "Nodes 50",
        "Connections 4",
        *(f"{s}->0 start 0 size {512 * 4094}" for s in range(1, 5)),
    ]


def test_fabric_yaml_is_a_lossy_trim_sonic_star() -> None:
    import yaml

    data = yaml.safe_load(bench.fabric_yaml(5, 200.0))
    assert data["overrides"] == {"mode": "lossy-trim", "trim": {"size_bytes": 64}}
    switch, *hosts = data["devices"]
    assert switch["platform"] == "sonic"
    assert len(switch["ports"]) == len(hosts) == 5
    assert {p["cable_m"] for p in switch["ports"]} == {200}


def test_find_binaries(tmp_path: Path) -> None:
    dc = tmp_path / "sim" / "datacenter"
    dc.mkdir(parents=True)
    (dc / "htsim_ndp").write_text("")
    assert bench.find_binaries(tmp_path) == {"htsim_ndp": dc / "htsim_ndp"}
    (dc / "htsim_eqds").write_text("")
    expected = {"htsim_ndp": dc / "htsim_ndp", "htsim_eqds": dc / "htsim_eqds"}
    for given in (tmp_path, tmp_path / "sim", dc, dc / "htsim_ndp"):
        assert bench.find_binaries(given) == expected
    with pytest.raises(bench.BenchError, match="fetches and builds nothing"):
        bench.find_binaries(tmp_path / "elsewhere")


def test_find_uec(tmp_path: Path) -> None:
    build = tmp_path / "htsim" / "sim" / "build" / "datacenter"
    build.mkdir(parents=True)
    (build / "htsim_uec").write_text("")
    for given in (tmp_path, tmp_path / "htsim" / "sim", build, build / "htsim_uec"):
        assert bench.find_uec(given) == build / "htsim_uec"
    with pytest.raises(bench.BenchError, match="spcl/HTSIM"):
        bench.find_uec(tmp_path / "elsewhere")


# --- the table's arithmetic --------------------------------------------------------------


def test_nearest_rank_and_ratio() -> None:
    assert bench.nearest_rank([], 0.5) is None
    assert bench.nearest_rank([3.0], 0.5) == 3.0
    assert bench.nearest_rank([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert bench.nearest_rank([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert bench.nearest_rank([1.0, 2.0], 1.0) == 2.0
    assert bench.ratio(3.0, 2.0) == 1.5
    assert bench.ratio(None, 2.0) is None
    assert bench.ratio(1.0, 0) is None


def _outcome(model: str, trims: int, times: list[float], wire: int, trim_wire: int) -> object:
    return bench.Outcome(model, 4, trims, trims, times, wire, trim_wire)


def test_rows_and_ratios() -> None:
    twin = _outcome("twin-dcqcn-off", 3015, [61.8, 101.8, 140.8, 178.3], 4178, 84)
    ndp = bench.htsim_outcome("ndp-unpaced", CASE, bench.parse_htsim(_read("ndp-unpaced-4.txt")))
    assert CASE.line_us(4178) == pytest.approx(171.1, abs=0.05)
    assert CASE.line_us(4158) == pytest.approx(170.3, abs=0.05)
    assert bench.header_us(twin) == pytest.approx(3015 * 84 * 8 / 400e9 * 1e6)
    assert bench.outcome_row(CASE, twin) == [
        "4:1", "twin-dcqcn-off", "3015", "1.47", "3015", "4/4",
        "101.8", "178.3", "171.1", "5.1", "2.1", "1.04",
    ]  # fmt: skip
    rows = bench.pair_rows(CASE, {"twin-dcqcn-off": twin, "ndp-unpaced": ndp})
    assert rows == [["4:1", "twin-dcqcn-off / ndp-unpaced", "3015 / 1893", "1.59", "0.64", "1.01"]]
    # a pair with one side missing is left out
    assert bench.pair_rows(CASE, {"twin-dcqcn-on": twin}) == []


def test_row_of_a_run_without_messages() -> None:
    empty = _outcome("eqds", 0, [], 4158, 64)
    row = bench.outcome_row(CASE, empty)
    assert row[4:] == ["0", "0/4", "-", "-", "170.3", "0.0", "-", "-"]


def test_markdown() -> None:
    table = bench.markdown("| a | b |", [["1", "2"]])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_parse_args() -> None:
    args = bench.parse_args(["--htsim", "/x", "--senders", "4, 16"])
    assert (args.senders, args.frames, args.cable_m) == ([4, 16], 512, 200.0)
    assert args.htsim_commit == bench.HTSIM_COMMIT
    with pytest.raises(SystemExit):
        bench.parse_args(["--htsim", "/x", "--senders", "0"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--htsim", "/x", "--frames", "0"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--senders", "4"])  # --htsim is required

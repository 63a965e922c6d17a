"""bench/twin_vs_cpp.py, the parts that need no htsim build and start no process: the PFC
threshold mapping, the htsim log reader, the command line and the report's arithmetic."""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("twin_vs_cpp", REPO / "bench/twin_vs_cpp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["twin_vs_cpp"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()
FRAME: int = bench.FRAME
MSS = FRAME - bench.HTSIM_HEADER  # 4094, htsim's -mtu in the bench
ROCE_SINK: int = bench.ROCE_SINK

# --- PFC thresholds: the docstring's rule, restated here frame by frame ---------------------


def _twin_pauses(frames: int, xoff: int) -> bool:
    return frames * FRAME > xoff  # XOFF above xoff_bytes


def _twin_resumes(frames: int, xon: int) -> bool:
    return frames * FRAME < xon or frames == 0  # XON below xon_bytes, or empty (lossless/pfc.py)


def _pauses_like_twin(xoff: int, mss: int, high: int) -> bool:
    counts = range(xoff // FRAME + 4)
    return [_twin_pauses(n, xoff) for n in counts] == [n * FRAME > high * mss for n in counts]


def _resumes_like_twin(xoff: int, xon: int, mss: int, low: int) -> bool:
    counts = range(xoff // FRAME + 4)
    return [_twin_resumes(n, xon) for n in counts] == [n * FRAME < low * mss for n in counts]


def _assert_same_frames(xoff: int, xon: int, mss: int, low: int, high: int) -> None:
    assert high > low >= 1  # htsim asserts high > 0 and high > low
    assert _pauses_like_twin(xoff, mss, high)
    assert _resumes_like_twin(xoff, xon, mss, low)


@pytest.mark.parametrize(
    ("xoff", "xon", "mss", "expected"),
    [
        (27_856, 8_400, 4094, (3, 7)),  # the twin's plan for the bench's fabric
        (27_856, 0, 4094, (1, 7)),  # XON only when empty
        (4158, 1, 4094, (1, 2)),  # pause on the 2nd frame, resume when empty
        (100_000, 50_000, 1000, (50, 100)),
        # the twin resumes one frame below where it pauses: two mss multiples in one frame
        (27_856, 27_000, 1000, (25, 26)),  # xon within a frame of xoff
        (1000, 500, 1000, (1, 2)),  # xoff under one frame: pause on the 1st
        (0, 0, 2000, (1, 2)),
    ],
)
def test_htsim_thresholds_table(xoff: int, xon: int, mss: int, expected: tuple[int, int]) -> None:
    low, high = bench.htsim_thresholds(xoff, xon, mss)
    assert (low, high) == expected
    _assert_same_frames(xoff, xon, mss, low, high)


@pytest.mark.parametrize(
    ("xoff", "xon", "mss"),
    [
        (1000, 500, MSS),  # xoff under one frame: high >= 2 would let the 1st frame through
        (FRAME - 1, 0, MSS),
        (27_856, 27_000, MSS),  # xon within a frame of xoff: low 7 needs high 8, the 8th frame
        (27_856, 27_856, MSS),  # xon == xoff
        (27_856, 0, FRAME + 1000),  # mss above a frame: low 1 resumes at 1 frame, not empty
    ],
)
def test_htsim_thresholds_without_a_pair_name_them(xoff: int, xon: int, mss: int) -> None:
    with pytest.raises(bench.BenchError) as err:
        bench.htsim_thresholds(xoff, xon, mss)
    message = str(err.value)
    assert f"xoff_bytes {xoff} and xon_bytes {xon}" in message
    assert f"(x {mss} B)" in message
    assert "Expected: low < high" in message and " Actual: none does" in message


@pytest.mark.parametrize("seed", range(10))
def test_htsim_thresholds_raise_only_where_no_pair_matches(seed: int) -> None:
    """Against a search of every pair: a pair comes back exactly where one exists."""
    rng = random.Random(seed)
    for _ in range(40):
        xoff = rng.randrange(0, 6 * FRAME)
        xon = rng.randrange(0, xoff + 1)
        mss = rng.randrange(1024, MSS + 1)
        bound = range(1, (xoff + FRAME) // mss + 3)  # high * mss < xoff + FRAME
        lows = [low for low in bound if _resumes_like_twin(xoff, xon, mss, low)]
        highs = [high for high in bound if _pauses_like_twin(xoff, mss, high)]
        exists = bool(lows and highs) and min(lows) < max(highs)
        if exists:
            _assert_same_frames(xoff, xon, mss, *bench.htsim_thresholds(xoff, xon, mss))
        else:
            with pytest.raises(bench.BenchError):
                bench.htsim_thresholds(xoff, xon, mss)


@pytest.mark.parametrize("seed", range(10))
def test_htsim_thresholds_pause_and_resume_on_the_twins_frames(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        xoff = rng.randrange(FRAME, 100 * FRAME)
        xon = rng.randrange(0, xoff - FRAME + 1)  # at least a frame below xoff
        mss = rng.randrange(512, MSS + 1)
        _assert_same_frames(xoff, xon, mss, *bench.htsim_thresholds(xoff, xon, mss))


def test_htsim_params_follow_the_twins_plan(tmp_path: Path) -> None:
    fabric = bench.twin_fabric(tmp_path, 8)
    port = next(iter(bench.load_network(fabric).switches.values())).ports[0]
    buffer = port.buffer
    params = bench.htsim_params(fabric, 8)
    assert (params.nodes, params.mss, params.hop_us) == (162, MSS, pytest.approx(1.0))
    assert (params.pfc_low, params.pfc_high) == bench.htsim_thresholds(
        buffer.xoff_bytes, buffer.xon_bytes, MSS
    )
    assert params.queue_pkts * MSS >= 8 * (buffer.xoff_bytes + buffer.headroom_bytes)
    assert params.matrix().splitlines() == [
        "Nodes 162",
        "Connections 8",
        *(f"{s}->0 start 0 size 0" for s in range(1, 9)),
    ]


# --- htsim's sink log ---------------------------------------------------------------------


def _record(when: float, acked: float, sink: int = 1, kind: int = ROCE_SINK) -> bytes:
    packed: bytes = bench.LOG_RECORD.pack(when, kind, sink, 0, acked, 0.0, 0.0)
    return packed


TORN = _record(9e-3, 1e12)[:30]
# two sinks, two rounds: 3 + 1 frames at 0.25 ms, 10 + 6 at 0.5 ms
SAMPLES = b"".join(
    [
        _record(2.5e-4, 3 * MSS, sink=1),
        _record(2.5e-4, 1 * MSS, sink=2),
        _record(5e-4, 10 * MSS, sink=1),
        _record(5e-4, 6 * MSS, sink=2),
    ]
)


@pytest.mark.parametrize(
    ("trace", "frames", "at_s"),
    [
        (SAMPLES, 16, 5e-4),  # every sink's cumulative ACK at the last time, summed
        (SAMPLES + TORN, 16, 5e-4),  # a record cut short at the end is left out
        (SAMPLES + _record(1e-3, 1e9, kind=1), 16, 5e-4),  # another logger's record
        # the last round incomplete (sink 2 missing at 0.75 ms): the round before
        (SAMPLES + _record(7.5e-4, 20 * MSS, sink=1), 16, 5e-4),
        (SAMPLES + _record(5e-4, 6 * MSS, sink=2), 16, 5e-4),  # a record repeated: once
        # both: sink 1 repeated at 0.5 ms, sink 1 missing at 0.75 ms
        (SAMPLES + _record(5e-4, 10 * MSS, sink=1) + _record(7.5e-4, 1e9, sink=2), 16, 5e-4),
        # sink 3 reported once, at 0.25 ms: the latest time with all three
        (_record(2.5e-4, MSS, sink=3) + SAMPLES, 5, 2.5e-4),
        (_record(2.5e-4, MSS), 1, 2.5e-4),
        (_record(1e-3, 1e9, kind=1), None, 0.0),  # no sink sample
        (_record(0.0, 5 * MSS), None, 0.0),  # a sample at t = 0 only
        # complete at t = 0 only; the later round lacks sink 2
        (_record(0.0, MSS, sink=2) + _record(2.5e-4, MSS, sink=1), None, 0.0),
        (TORN, None, 0.0),
        (b"", None, 0.0),
    ],
)
def test_htsim_delivered(tmp_path: Path, trace: bytes, frames: int | None, at_s: float) -> None:
    log = tmp_path / "htsim.dat"
    log.write_bytes(b"# htsim\n# LOGGER ROCE_SINK 26\n# TRACE\n" + trace)
    bps, sampled_s = bench.htsim_delivered(log, MSS)
    assert sampled_s == at_s
    if frames is None:
        assert bps is None
    else:
        assert bps == pytest.approx(frames * FRAME * 8 / at_s)


def test_htsim_delivered_needs_the_trace_line(tmp_path: Path) -> None:
    log = tmp_path / "htsim.dat"
    log.write_bytes(b"# htsim\n" + _record(5e-4, MSS))
    with pytest.raises(bench.BenchError, match="no '# TRACE' line") as err:
        bench.htsim_delivered(log, MSS)
    assert str(log) in str(err.value)


# --- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "us"),
    [
        ("10ms", 10_000),
        ("1us", 1),
        ("0.5s", 500_000),
        (" 100ms ", 100_000),
        ("2.5ms", 2500),
        # exact decimals: float arithmetic gave 1.001 * 1000 = 1000.9999999999999
        ("1.001ms", 1001),
        ("0.000123s", 123),
        ("0.000001s", 1),
        ("1.000ms", 1000),
        ("0.1ms", 100),
    ],
)
def test_parse_duration(text: str, us: int) -> None:
    assert bench.parse_duration(text) == us


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        *((text, "a duration with its unit") for text in ["10", "ms", "10 ms", "10MS", "-1ms"]),
        *((text, "a duration with its unit") for text in ["1e3us", ".5ms", "", "1.ms", "١ms"]),
        ("0us", "a whole number of us, at least 1us Actual: '0us' (0 us)"),
        ("0.5us", "a whole number of us, at least 1us Actual: '0.5us' (0.5 us)"),
        ("1.0005ms", "Actual: '1.0005ms' (1000.5 us)"),
        ("0.0000005s", "Actual: '0.0000005s' (0.5 us)"),
        # past the default decimal precision (28 digits): not rounded to a whole 1 s
        ("1.000000000000000000000000000001s", "(1000000.000000000000000000000001 us)"),
    ],
)
def test_parse_duration_rejects(text: str, expected: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"^--durations: Expected: ") as err:
        bench.parse_duration(text)
    assert f"Actual: {text!r}" in str(err.value)
    assert expected in str(err.value)


def test_parse_args_defaults() -> None:
    args = bench.parse_args([])
    assert (args.rounds, args.senders, args.json) == (5, [8, 16], None)
    assert args.durations == [("10ms", 10_000), ("100ms", 100_000)]
    assert (args.htsim_src, args.twin_python) == (bench.HTSIM_REPO, sys.executable)
    assert args.cache == Path.home() / ".cache/roce-agent-bench" / "htsim-841d9e7be46b"


@pytest.mark.parametrize(
    ("argv", "field", "expected"),
    [
        (["--senders", "4,,2,"], "senders", [4, 2]),  # blanks between values left out
        (["--senders", f" 1 , {bench.MAX_SENDERS} "], "senders", [1, 64]),
        (["--durations", "1.001ms, 1s,"], "durations", [("1.001ms", 1001), ("1s", 10**6)]),
        (["--rounds", "1"], "rounds", 1),
    ],
)
def test_parse_args_takes(argv: list[str], field: str, expected: object) -> None:
    assert getattr(bench.parse_args(argv), field) == expected


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--senders", "8,x"], "--senders: Expected: whole numbers 1-64 (the twin's limit), "),
        (["--senders", "8.5"], "Actual: '8.5'"),
        (["--senders", "0"], "--senders: Expected: whole numbers 1-64"),
        (["--senders", "8,65"], "--senders: Expected: whole numbers 1-64"),
        (["--senders=-1"], "--senders: Expected: whole numbers 1-64"),
        (["--senders", "+8"], "--senders: Expected: whole numbers 1-64"),
        (["--senders", ","], "--senders: Expected: one value or more, comma-separated"),
        (["--senders", ""], "--senders: Expected: one value or more, comma-separated"),
        (["--durations", " , "], "--durations: Expected: one value or more, comma-separated"),
        (["--durations", "10ms,fast"], "--durations: Expected: a duration with its unit"),
        (["--durations", "10ms,0.5us"], "--durations: Expected: a whole number of us"),
        (["--rounds", "0"], "--rounds: Expected: 1 or more Actual: 0"),
        (["--rounds=-2"], "--rounds: Expected: 1 or more Actual: -2"),
        (["--rounds", "two"], "--rounds"),
    ],
)
def test_parse_args_rejects(
    capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert named in err
    value = argv[-1].split("=")[-1].split(",")[-1].strip()
    assert value in err  # the value at fault, named too


# --- the report's arithmetic and goals ----------------------------------------------------


def _result(
    cpu: dict[str, list[float]],
    duration_us: int = 10_000,
    report: dict[str, float | int | None] | None = None,
    senders: int = 8,
) -> Any:
    case = bench.Case(senders, f"{duration_us // 1000}ms", duration_us)
    params = bench.HtsimParams(8, 162, MSS, 1.0, 217, 3, 7)
    samples = {k: [bench.Sample(c, c, 1024, report or {}) for c in v] for k, v in cpu.items()}
    return bench.CaseResult(case, params, samples)


KEYS = ("twin", "htsim", "twin-1us", "htsim-1us")


def _cases(*cases: tuple[float, ...]) -> list[Any]:
    """One result per case (8:1, 16:1, ...), from its CPU s at D and at 1 us, in KEYS order."""
    return [
        _result({k: [c] for k, c in zip(KEYS, cpu, strict=True)}, senders=8 * (i + 1))
        for i, cpu in enumerate(cases)
    ]


def test_min_median_ratio_and_loop_per_ms() -> None:
    assert bench._mm([3.0, 1.0, 2.0, 10.0]) == (1.0, 2.5)
    assert bench._mm([5.0]) == (5.0, 5.0)
    assert bench.ratio((2.0, 3.0), (4.0, 1.5)) == (0.5, 2.0)
    result = _result({"twin": [1.0, 1.5, 1.3], "twin-1us": [0.1, 0.3, 0.2]}, 100_000)
    assert result.case.sim_ms == 100.0
    assert result.case.label == "8:1, 100ms"
    # ms of CPU per simulated ms: (min - min) and (median - median) over 100 ms
    assert bench.loop_per_ms(result, "twin") == pytest.approx((9.0, 11.0))


@pytest.mark.parametrize(
    ("twin", "htsim", "expected", "text"),
    [
        ((1.0, 2.0), (0.0, 4.0), (None, 0.5), "not measured (0 s or less) / 0.50"),
        ((1.0, 2.0), (0.0, 0.0), (None, None), "not measured (0 s or less)"),  # said once
        ((1.0, 2.0), (-0.01, 1.0), (None, 2.0), "not measured (0 s or less) / 2.00"),
    ],
)
def test_ratio_over_nothing_measured(
    twin: tuple[float, float], htsim: tuple[float, float], expected: tuple[Any, Any], text: str
) -> None:
    """rusage counts whole ticks: htsim's CPU or loop can read 0 s (or less, a difference)."""
    assert bench.ratio(twin, htsim) == expected
    assert bench._fmt_ratio(bench.ratio(twin, htsim)) == text


# per tool, CPU s at D and at 1 us: twin, htsim, twin-1us, htsim-1us
MET = (1.0, 1.0, 0.1, 0.05)  # loop 0.95, e2e 1.0, start-up 0.1
LOOP_SLOW = (1.2, 1.0, 0.1, 0.1)  # loop 1.22
E2E_SLOW = (0.16, 0.1, 0.07, 0.001)  # loop 0.91, e2e 1.6
STARTUP_SLOW = (1.0, 1.0, 0.2, 0.2)  # loop exactly 1.0 (met: the limits are inclusive)
HTSIM_ZERO = (1.0, 0.0, 0.1, 0.0)  # htsim read 0 s at D and at 1 us: no ratio
HTSIM_LOOP_ZERO = (1.0, 0.1, 0.1, 0.1)  # htsim's loop 0 s: no loop ratio; e2e 10


@pytest.mark.parametrize(
    ("cases", "verdicts"),
    [
        ([MET], ("met", "met", "met")),
        ([LOOP_SLOW], ("MISSED", "met", "met")),
        ([E2E_SLOW], ("met", "MISSED", "met")),
        ([STARTUP_SLOW], ("met", "met", "MISSED")),
        ([MET, LOOP_SLOW], ("MISSED", "met", "met")),  # the worst case decides
        ([HTSIM_ZERO], ("not", "not", "met")),  # not measured: neither met nor missed
        ([HTSIM_LOOP_ZERO], ("not", "MISSED", "met")),
        ([MET, HTSIM_ZERO], ("not", "not", "met")),
        ([LOOP_SLOW, HTSIM_ZERO], ("MISSED", "not", "met")),  # a measured miss is a miss
    ],
)
def test_goals(
    capsys: pytest.CaptureFixture[str],
    cases: list[tuple[float, ...]],
    verdicts: tuple[str, str, str],
) -> None:
    bench.goals(_cases(*cases))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("- ")]
    assert [line.split()[1] for line in lines] == ["loop", "e2e", "twin"]
    assert tuple(line.split(": ", 1)[1].split()[0] for line in lines) == verdicts


def test_goals_say_which_case_is_not_measured(capsys: pytest.CaptureFixture[str]) -> None:
    bench.goals(_cases(HTSIM_ZERO))
    out = capsys.readouterr().out
    assert "- loop ratio <= 1.0 on every case: not measured (8:1, 10ms: not measured (0 s" in out
    assert "- e2e ratio <= 1.5 at 10 ms: not measured (8:1, 10ms: not measured (0 s" in out


def test_goals_without_cases(capsys: pytest.CaptureFixture[str]) -> None:
    bench.goals([])
    assert capsys.readouterr().out.splitlines()[2:] == [
        "- loop ratio <= 1.0 on every case: no case run",
        "- e2e ratio at 10 ms: no 10 ms case run",
        "- twin start-up (1 us run) <= 0.15 s CPU: no case run",
    ]


def test_goals_e2e_time_from_its_constant(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "GOAL_E2E_AT_US", 100_000)
    cpu = {"twin": [1.0], "htsim": [1.0], "twin-1us": [0.1], "htsim-1us": [0.1]}
    bench.goals([_result(cpu, 100_000)])
    assert "- e2e ratio <= 1.5 at 100 ms: met" in capsys.readouterr().out
    bench.goals([_result(cpu, 10_000)])
    assert "- e2e ratio at 100 ms: no 100 ms case run" in capsys.readouterr().out


def test_goals_without_a_10ms_case(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = {"twin": [1.0], "htsim": [1.0], "twin-1us": [0.1], "htsim-1us": [0.1]}
    bench.goals([_result(cpu, 100_000)])
    out = capsys.readouterr().out
    assert "- e2e ratio at 10 ms: no 10 ms case run" in out
    assert "- loop ratio <= 1.0 on every case: met (worst 1;" in out


def test_tables_with_htsim_at_zero_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    bench.main_table(_cases(HTSIM_ZERO), 1)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 8:1")]
    assert len(rows) == 2
    main, startup = (row.split(" | ") for row in rows)
    assert main[3] == "not measured (0 s or less)"  # e2e, min and median
    assert main[7] == main[3]  # loop
    assert startup[3] == main[3]


NONE_FIELDS = dict.fromkeys((*bench.TWIN_FIELDS, *bench.TWIN_FIELDS_MORE), None) | {
    "delivered_bps": None,
    "sampled_s": None,
    "rtx_packets": None,
    "overflow_warnings": None,
}


@pytest.mark.parametrize("report", [NONE_FIELDS, {}], ids=["null", "absent"])
def test_tables_print_fields_not_read(
    capsys: pytest.CaptureFixture[str], report: dict[str, float | int | None]
) -> None:
    cpu = {k: [c] for k, c in zip(KEYS, MET, strict=True)}
    results = [_result(cpu, report=report)]
    bench.check_table(results)
    bench.main_table(results, 1)
    check, main, _ = (
        line for line in capsys.readouterr().out.splitlines() if line.startswith("| 8:1")
    )
    assert check == (
        "| 8:1, 10ms | not read | not read | not read | not read/not read/not read "
        "| not read (to not read) | not reported | not read / not read |"
    )
    cells = main.split(" | ")
    assert cells[5] == "not read"  # the twin's wall_s per ms
    assert cells[8:] == ["not read / -", "1.0 / 1.0", "not read / not read |"]


def test_check_table_reads_the_medians(capsys: pytest.CaptureFixture[str]) -> None:
    report: dict[str, float | int | None] = {
        "goodput_bps": 99e9,
        "pfc_frames": 12,
        "max_paused_fraction": 0.25,
        "lossless_drops": 0,
        "ce_fraction": 0.0,
        "cnps_sent": 0,
        "delivered_bps": 100e9,
        "sampled_s": 0.01,
        "rtx_packets": 0,
        "overflow_warnings": 0,
    }
    cpu = {k: [c] for k, c in zip(KEYS, MET, strict=True)}
    bench.check_table([_result(cpu, report=report)])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "| 8:1, 10ms | 99.00 (99.0%) | 12 | 25.0% | 0/0/0 "
        "| 100.00 (100.0%) (to 10 ms) | not reported | 0 / 0 |"
    )

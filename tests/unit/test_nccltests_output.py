"""nccl-tests output parsing (agent.observe.nccltests.output) on published outputs and on
tables generated with nccl-tests' own format strings.

Where each file comes from: tests/data/nccl-tests/README.md.
"""

# ruff: noqa: UP031 -- printf formats on purpose: they are nccl-tests' C format strings
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.observe.nccltests.output import (
    MAX_OUTPUT_CHARS,
    NcclTestsOutputError,
    parse_output,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"


def read(name: str) -> str:
    return (DATA / name).read_text()


# file, rows, check column, largest size, its out-of-place busbw, avg busbw, footer, hosts
RECORDED = [
    ("issue119_all_reduce_tail.txt", 6, "#wrong", 133169160, 95.74, 84.8558, True, ()),
    ("issue319_all_reduce_tail_interleaved.txt", 10, "#wrong", 17179869184, 44.27, 20.017,
     True, ()),
    ("issue232_all_reduce_tree_head.txt", 5, "#wrong", 33554432, 41.31, None, False, ()),
    ("pr103_all_reduce_2.20.0_head.txt", 4, "#wrong", 65536, 0.96, None, False,
     ("spark-d708", "spark-dbf4")),
    ("issue287_alltoall_na.txt", 1, "#wrong", 33554432, 0.0, 0.0, True, ("GENOA-01",)),
    ("pr503_tag_output_head.txt", 3, "#wrong", 32, 0.0, None, False, ()),
    ("issue82_broadcast_error_column.txt", 1, "error", 8, 0.0, None, False,
     ("v100-gpu-1", "v100-gpu-5")),
    ("nccl258_all_reduce_error_delta.txt", 4, "error", 64, 0.0, None, False,
     ("51e6e7896958",)),
    ("nccl340_all_gather_tail.txt", 12, "error", 134217728, 20.34, 6.6972, True, ()),
    # recorded here on one H200 (nccl-tests 2.19.6, NCCL 2.28.3): one rank, so busbw is 0
    ("h200_all_reduce_perf_np1.txt", 28, "#wrong", 1073741824, 0.0, 0.0, True, ("vm",)),
    ("h200_alltoall_perf_np1.txt", 28, "#wrong", 1073741824, 0.0, 0.0, True, ("vm",)),
    ("h200_sendrecv_perf_np1.txt", 28, "#wrong", 1073741824, 1896.9, 15482.5, True, ("vm",)),
    ("h200_all_reduce_perf_debug.txt", 4, "#wrong", 67108864, 0.0, 0.0, True, ("vm",)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "rows", "check", "largest", "busbw", "avg", "footer", "hosts"), RECORDED
)
def test_recorded_outputs(
    name: str, rows: int, check: str, largest: int, busbw: float, avg: float | None,
    footer: bool, hosts: tuple[str, ...],
) -> None:  # fmt: skip
    run = parse_output(read(name))
    assert len(run.rows) == rows
    assert run.layout is not None and run.layout.check == check
    assert run.largest is not None
    assert run.largest.size_bytes == largest
    assert run.largest.judged.busbw_GBps == busbw
    assert run.avg_busbw_GBps == avg
    assert run.footer is footer
    assert run.hosts == hosts
    assert not run.failures


def test_version_and_test_name_of_2_20() -> None:
    run = parse_output(read("pr103_all_reduce_2.20.0_head.txt"))
    assert (run.version, run.test) == ("2.20.0", "all_reduce_perf")
    assert [(r.rank, r.host, r.device, r.gpu) for r in run.ranks] == [
        (0, "spark-d708", 0, "NVIDIA GB10"),
        (1, "spark-dbf4", 0, "NVIDIA GB10"),
    ]


def test_not_checked_is_none_not_zero() -> None:
    row = parse_output(read("issue287_alltoall_na.txt")).rows[0]
    assert row.out_of_place is not None and row.out_of_place.wrong == 0
    assert row.in_place.wrong is None  # N/A: alltoall in place is not checked
    broadcast = parse_output(read("issue82_broadcast_error_column.txt")).rows[0]
    assert broadcast.root == 0 and broadcast.redop is None
    assert broadcast.judged.wrong is None


def test_error_column_keeps_the_deviation() -> None:
    rows = parse_output(read("nccl258_all_reduce_error_delta.txt")).rows
    assert rows[0].out_of_place is not None and rows[0].out_of_place.wrong == 1e-07
    assert rows[0].in_place.wrong == 0.0


def test_log_lines_between_rows_are_not_rows() -> None:
    run = parse_output(read("issue319_all_reduce_tail_interleaved.txt"))
    assert run.rows[-1].size_bytes == 17179869184
    assert run.out_of_bounds == 0


def test_exponent_form_of_a_huge_in_place_bandwidth() -> None:
    """util.cu's getFloatStr falls back to %g when a value does not fit 7 columns: a one-rank
    in-place all_reduce of 256 MiB prints its algbw as ``1e+06`` (recorded on an H200)."""
    run = parse_output(read("h200_all_reduce_perf_np1.txt"))
    by_size = {row.size_bytes: row for row in run.rows}
    assert by_size[268435456].in_place is not None
    assert by_size[268435456].in_place.algbw_GBps == 1e6
    assert by_size[536870912].in_place is not None
    assert by_size[536870912].in_place.algbw_GBps == 3e6
    assert run.test == "all_reduce_perf" and run.version == "2.19.6"


def test_more_ranks_than_gpus_keeps_the_cause() -> None:
    """mpirun -np 2 on a one-GPU host (recorded on an H200): the failure line and, after it
    on stderr, util.cu's reason; both are kept, so a report says why."""
    run = parse_output(read("h200_all_reduce_perf_np2_one_gpu.txt"))
    assert run.rows == () and not run.footer
    assert run.failures == (
        ".. vm pid 2007: Test failure common.cu:1454",
        "Invalid number of GPUs: 2 requested but only 1 were found.",
    )


def test_failure_line() -> None:
    run = parse_output(read("issue185_nccl_failure_tail.txt"))
    assert run.rows == ()
    assert run.failures == ("dgxh100-3: Test NCCL failure common.cu:908 'int",)
    assert not run.footer


# --------------------------------------------------------------------------- generated
# The format strings of src/util.cu (v2.19.6) and src/common.cu (2.13-2.18), in Python's
# printf, which formats %li, %s, %g, %f and %e as C does.


def float_str(value: float, width: int) -> str:
    """util.cu getFloatStr: the most decimals that fit the width, then exponent form."""
    for spec in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        text = spec % value
        if len(text) <= width:
            return text
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def header(name: str) -> str:
    cols = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong")  # fmt: skip
    units = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
             "(GB/s)", "(GB/s)", "")  # fmt: skip
    line = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
    return (
        f"# nccl-tests version 2.19.6 nccl-headers=22704 nccl-library=22704\n"
        f"# Collective test starting: {name}\n#\n"
        + "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
        "in-place          \n"
        % ("", "", "", "", "")
        + line % (*cols, 0, "")
        + line % (*units, 0, "")
    )


def body(time: float, algbw: float, busbw: float, wrong: int | None) -> str:
    check = "%6g" % wrong if wrong is not None else "   N/A"
    return "  %7s  %6s  %6s  %s" % (float_str(time, 7), float_str(algbw, 6),
                                   float_str(busbw, 6), check)  # fmt: skip


def footer(errors: int, avg: float, name: str) -> str:
    return (
        "# %-20s : %d %s\n" % ("Out of bounds values", errors, "FAILED" if errors else "OK")
        + "# %-20s : %g %s\n" % ("Avg bus bandwidth", avg, "")
        + f"#\n# Collective test concluded: {name}\n"
    )


finite = st.floats(min_value=0, max_value=1e9, allow_nan=False)
rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 2**40),  # size
        st.integers(0, 2**38),  # count
        st.sampled_from(["float", "half", "bfloat16", "int8", "double"]),
        st.sampled_from(["sum", "prod", "max", "min", "avg", "none"]),
        st.integers(-1, 255),  # root
        st.tuples(finite, finite, finite, st.one_of(st.none(), st.integers(0, 10**7))),
        st.tuples(finite, finite, finite, st.one_of(st.none(), st.integers(0, 10**7))),
    ),
    min_size=1,
    max_size=40,
)


def printed(value: float, width: int) -> float:
    """What nccl-tests prints of ``value`` in a column of ``width``, read back."""
    return float(float_str(value, width))


@settings(max_examples=150, deadline=None)
@given(rows=rows_strategy, errors=st.integers(0, 10**6), avg=finite,
       name=st.sampled_from(["all_reduce_perf", "alltoall_perf", "broadcast_perf"]))  # fmt: skip
def test_generated_tables_parse_back(rows: list[tuple], errors: int, avg: float, name: str) -> None:
    text = header(name)
    for size, count, kind, redop, root, oop, inp in rows:
        text += "%12li  %12li  %8s  %6s  %6s" % (size, count, kind, redop, "%6i" % root)
        text += body(*oop) + body(*inp) + "\n"
    text += footer(errors, avg, name)
    run = parse_output(text)
    assert run.test == name and run.footer and run.out_of_bounds == errors
    assert run.avg_busbw_GBps == float("%g" % avg)
    assert len(run.rows) == len(rows)
    for row, (size, count, kind, redop, root, oop, inp) in zip(run.rows, rows, strict=True):
        assert (row.size_bytes, row.count, row.type, row.redop, row.root) == (
            size, count, kind, redop, root,
        )  # fmt: skip
        assert row.out_of_place is not None
        for side, (time, algbw, busbw, wrong) in ((row.out_of_place, oop), (row.in_place, inp)):
            assert side.time_us == printed(time, 7)
            assert side.algbw_GBps == printed(algbw, 6)
            assert side.busbw_GBps == printed(busbw, 6)
            assert side.wrong == (None if wrong is None else float("%6g" % wrong))


@settings(max_examples=100, deadline=None)
@given(rows=rows_strategy, cut=st.integers(1, 200))
def test_a_row_cut_short_is_refused_with_its_line(rows: list[tuple], cut: int) -> None:
    lines = [header("all_reduce_perf").rstrip("\n")]
    for size, count, kind, redop, root, oop, inp in rows:
        lines.append(
            "%12li  %12li  %8s  %6s  %6s" % (size, count, kind, redop, "%6i" % root)
            + body(*oop) + body(*inp)
        )  # fmt: skip
    last = lines[-1]
    words = last.split()
    keep = cut % (len(words) - 2) + 2  # cut after 2..12 words: never a whole row
    lines[-1] = last[: last.index(words[keep - 1]) + len(words[keep - 1])]
    text = "\n".join(lines)
    with pytest.raises(NcclTestsOutputError, match=f"line {text.count(chr(10)) + 1}:"):
        parse_output(text)


HOSTILE = [
    ("", "Actual: neither"),
    ("hello\nworld\n", "Actual: neither"),
    ("\x00\xff garbage \x1b[2J\n", "Actual: neither"),
    ("# Out of bounds values : 0 OK\n# Avg bus bandwidth : 1\n", "Actual: neither"),
    # a headerless row of 9 words: no nccl-tests layout has that many
    ("   8   2   float   sum   -1   1.0   0.0   0.0   0\n", "line 1"),
    # the header says 13 columns; a row of garbage numbers
    (header("all_reduce_perf") + "   8   2  float  sum  -1  abc  0.0  0.0  0  1.0  0.0  0.0  0\n",
     "out-of-place time: Expected: a number"),
    (header("all_reduce_perf") + "   8   2  float  sum  -1  1.0  0.0  -5  0  1.0  0.0  0.0  0\n",
     "busbw: Expected: a finite number >= 0"),
    (header("all_reduce_perf") + "   8   2  float  sum  -1  1.0  nan  1  0  1.0  0.0  0.0  0\n",
     "algbw: Expected: a finite number >= 0"),
    (header("all_reduce_perf") + "   8   2  float  sum  x1  1.0  0.0  1  0  1.0  0.0  0.0  0\n",
     "root: Expected: an integer"),
    (header("all_reduce_perf") + "   8   2  float  sum  -1  1.0  0.0  1  0  1.0  0.0  0.0  0\n"
     "      16\n", "output cut inside the table"),
    ("x" * 5000 + "\n", "line 1: Expected: at most 4096 characters"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), HOSTILE)
def test_hostile_output_gives_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(NcclTestsOutputError, match=message.replace("(", r"\(").replace(
        ")", r"\)")):  # fmt: skip
        parse_output(text)


def test_output_too_large() -> None:
    with pytest.raises(NcclTestsOutputError, match="at most"):
        parse_output("#\n" * (MAX_OUTPUT_CHARS // 2 + 1))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_any_text_parses_or_is_refused_clearly(text: str) -> None:
    try:
        run = parse_output(text)
    except NcclTestsOutputError as exc:
        assert "Expected" in str(exc)
    else:
        assert run.rows or run.failures


def test_trace_replay_prints_the_in_place_side_only() -> None:
    # writeBenchMarkLineNullBody: 32 blanks where the out-of-place side would be.
    line = "%12li  %12li  %8s  %6s  %6s" % (1024, 256, "float", "sum", "%6i" % -1)
    line += " " * 32 + body(10.0, 1.5, 2.5, 0) + "\n"
    run = parse_output(header("all_reduce_perf") + line)
    assert run.rows[0].out_of_place is None
    assert run.rows[0].judged.busbw_GBps == 2.5


def test_per_iteration_and_timestamp_columns() -> None:
    # writeResultHeader with -I 1 -S 1: four more columns per side and a timestamp.
    names = ("size", "count", "type", "redop", "root",
             "time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
             "time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")  # fmt: skip
    head = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s"
            "  %6s  %7s  %7s  %7s  %7s %*s\n") % (*names, 19, "timestamp")  # fmt: skip
    side = body(100.0, 10.0, 18.75, 0) + "  %7s  %7s  %7s  %7s" % ("99.00", "101.00", "101.00",
                                                                   "0.50")  # fmt: skip
    row = "%12li  %12li  %8s  %6s  %6s" % (1048576, 262144, "float", "sum", "    -1")
    row += side + side + "%21s\n" % "2026-11-26 21:00:00"
    run = parse_output(head + row)
    assert run.layout is not None and run.layout.timestamp
    assert run.rows[0].judged.busbw_GBps == 18.75

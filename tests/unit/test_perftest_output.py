"""perftest output parsing (agent.observe.perftest.output) on recorded and reconstructed outputs.

Where each file comes from: tests/data/perftest/README.md.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.observe.perftest.output import (
    MAX_OUTPUT_BYTES,
    PerftestOutputError,
    PerftestRun,
    Unit,
    from_bits_per_second,
    parse_json,
    parse_run,
    parse_stdout,
    to_bits_per_second,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"
GB = 10**9
MIB = 8 * 2**20


def read(name: str) -> str:
    return (DATA / name).read_text()


def stdout_of(stem: str) -> PerftestRun:
    stderr = DATA / f"{stem}.stderr"
    return parse_stdout(read(f"{stem}.stdout"), stderr.read_text() if stderr.exists() else "")


# stem: (test, bidirectional, device, qps, mtu, gid index, unit,
#        [(scope, message bytes, iterations, average bit/s)], local GID, remote GID)
Row = tuple[str, int, int, float]
Case = tuple[str, bool, str, int, int, int, str, list[Row], str, str]
STDOUT_CASES: dict[str, Case] = {
    "rxe_write_client_4.5-0.17": (
        "RDMA_Write", False, "rxe0", 2, 1024, 1, "Gb/s",
        [("total", 65536, 883, 0.15 * GB)], "198.18.99.2", "198.18.99.1",
    ),
    "rxe_write_server_4.5-0.17": (
        "RDMA_Write", False, "rxe0", 2, 1024, 1, "Gb/s",
        [("total", 65536, 0, 0.0)], "198.18.99.1", "198.18.99.2",
    ),
    "mlx5_write_client_25.10": (
        "RDMA_Write", False, "mlx5_0", 4, 4096, 3, "Gb/s",
        [("total", 65536, 1118412, 97.73 * GB)], "198.18.0.11", "198.18.0.13",
    ),
    "mlx5_write_client_mb_4.5-0.17": (
        "RDMA_Write", False, "mlx5_0", 2, 4096, 3, "MiB/s",
        [("total", 65536, 549312, 5722 * MIB)], "198.18.0.11", "198.18.0.13",
    ),
    "mlx5_write_client_mib_25.10": (
        "RDMA_Write", False, "mlx5_0", 2, 4096, 3, "MiB/s",
        [("total", 65536, 549312, 5722 * MIB)], "198.18.0.11", "198.18.0.13",
    ),
    "mlx5_write_bidir_client_4.5-0.17": (
        "RDMA_Write", True, "mlx5_0", 4, 4096, 3, "Gb/s",
        [
            ("total", 65536, 1114200, 193.65 * GB),
            ("local", 65536, 1114200, 97.36 * GB),
            ("remote", 65536, 1101960, 96.29 * GB),
        ],
        "198.18.0.11", "198.18.0.12",
    ),
    "mlx5_read_client_4.5-0.17": (
        "RDMA_Read", False, "mlx5_0", 4, 4096, 3, "Gb/s",
        [("total", 65536, 1109880, 96.98 * GB)], "198.18.0.13", "198.18.0.11",
    ),
    "mlx5_send_client_4.5-0.17": (
        "Send", False, "mlx5_0", 4, 4096, 3, "Gb/s",
        [("total", 65536, 1112760, 97.23 * GB)], "198.18.0.11", "198.18.0.13",
    ),
    "mlx5_send_server_4.5-0.17": (
        "Send", False, "mlx5_0", 4, 4096, 3, "Gb/s",
        [("total", 65536, 1112544, 97.22 * GB)], "198.18.0.13", "198.18.0.11",
    ),
    "incast_unfair_h4_to_h3_25.10": (
        "RDMA_Write", False, "mlx5_0", 4, 4096, 3, "Gb/s",
        [("total", 65536, 101860, 8.90 * GB)], "198.18.0.14", "198.18.0.13",
    ),
}  # fmt: skip


@pytest.mark.parametrize("stem", sorted(STDOUT_CASES))
def test_stdout_fields(stem: str) -> None:
    test, bidir, device, qps, mtu, gid, unit, rows, local, remote = STDOUT_CASES[stem]
    run = stdout_of(stem)
    assert (run.test, run.bidirectional, run.device, run.qps, run.mtu, run.gid_index) == (
        test, bidir, device, qps, mtu, gid,
    )  # fmt: skip
    assert run.unit == unit
    assert run.source == "stdout"
    assert [(r.scope, r.message_bytes, r.iterations) for r in run.results] == [
        row[:3] for row in rows
    ]
    for result, (*_, bps) in zip(run.results, rows, strict=True):
        assert result.bw_average_bps == pytest.approx(bps, rel=1e-12)
        assert (result.device, result.qps, result.test, result.source) == (
            device, qps, test, "stdout",
        )  # fmt: skip
    assert run.local_gid == str(ipaddress.IPv6Address(f"::ffff:{local}"))
    assert run.remote_gid == str(ipaddress.IPv6Address(f"::ffff:{remote}"))


def test_recorded_rxe_run_exact_values() -> None:
    """The real Soft-RoCE run: 0.15 Gb/s is 150 000 000 bit/s exactly, 0.000294 Mpps is 294
    messages/s, and duration mode measured no peak."""
    run = stdout_of("rxe_write_client_4.5-0.17")
    (row,) = run.results
    assert row.bw_average_bps == 150_000_000.0
    assert row.msg_rate_per_s == 294.0
    assert row.bw_peak_bps == 0.0
    assert row.reported_average == "0.15"
    assert row.line == 27
    assert run.connection == "RC"
    assert run.link_type == "Ethernet"
    assert run.kind == "write"
    assert row.kind == "write"


def test_mib_is_two_to_the_twenty_bytes() -> None:
    """perftest's "MB/sec" is MiB/s (format_factor 0x100000): 5722.00 of them are
    5722 * 8 * 2^20 bit/s, not 5722 * 8 * 10^6."""
    (row,) = stdout_of("mlx5_write_client_mb_4.5-0.17").results
    assert row.bw_average_bps == 47_999_614_976.0
    assert row.bw_average_bps != 5722 * 8 * 10**6


def test_old_and_new_labels_give_the_same_numbers() -> None:
    old = stdout_of("mlx5_write_client_mb_4.5-0.17").results[0]
    new = stdout_of("mlx5_write_client_mib_25.10").results[0]
    assert (old.bw_average_bps, old.msg_rate_per_s) == (new.bw_average_bps, new.msg_rate_per_s)


def test_new_header_warns_but_parses() -> None:
    run = stdout_of("mlx5_write_client_25.10")
    assert run.warnings == ("WARNING: BW peak won't be measured in this run.",)
    assert run.results[0].msg_rate_per_s == pytest.approx(186_402.0)


def test_all_sizes_keeps_every_row() -> None:
    run = stdout_of("mlx5_write_all_sizes_4.5-0.17")
    sizes = [row.message_bytes for row in run.results]
    assert sizes == [2**n for n in range(1, 24)]
    # below 0.1 Gb/s perftest prints six decimals (REPORT_FMT_EXT)
    assert run.results[0].reported_average == "0.089600"
    assert run.results[1].reported_average == "0.18"
    assert run.results[0].bw_peak_bps > run.results[0].bw_average_bps > 0
    assert run.row().message_bytes == 2**23  # type: ignore[union-attr]
    assert run.row(message_bytes=65536).message_bytes == 65536  # type: ignore[union-attr]
    assert run.row(message_bytes=3) is None
    assert run.row("local") is None


def test_bidirectional_rows() -> None:
    run = stdout_of("mlx5_write_bidir_client_4.5-0.17")
    total, local, remote = run.results
    assert total.bw_average_bps == pytest.approx(local.bw_average_bps + remote.bw_average_bps)
    assert run.row("local") == local
    assert run.row("remote") == remote


# stem, unit, standard JSON?, (message bytes, iterations, average bit/s), warnings
JSON_CASES = [
    ("rxe_write_client_4.5-0.17", "Gb/s", False, (65536, 883, 0.15 * GB), 1),
    ("mlx5_write_client_25.10", "Gb/s", True, (65536, 1118412, 97.73 * GB), 0),
    ("mlx5_write_client_mb_4.5-0.17", "MiB/s", False, (65536, 549312, 5722 * MIB), 1),
    ("mlx5_read_client_4.5-0.17", "Gb/s", False, (65536, 1109880, 96.98 * GB), 1),
    ("mlx5_write_all_sizes_4.5-0.17", "Gb/s", False, (8388608, 5000, 96.40 * GB), 1),
    ("mlx5_write_bidir_client_4.5-0.17", "Gb/s", False, (65536, 1101960, 96.29 * GB), 2),
]


@pytest.mark.parametrize(("stem", "unit", "standard", "row", "warnings"), JSON_CASES)
def test_json_both_styles(
    stem: str, unit: Unit, standard: bool, row: tuple[int, int, float], warnings: int
) -> None:
    text = read(f"{stem}.json")
    try:
        json.loads(text)
        is_standard = True
    except json.JSONDecodeError:
        is_standard = False
    assert is_standard is standard  # the fixtures are what they claim to be
    run = parse_json(text, unit=unit)
    (result,) = run.results
    assert run.source == result.source == "json"
    assert (result.message_bytes, result.iterations) == row[:2]
    assert result.bw_average_bps == pytest.approx(row[2], rel=1e-12)
    assert len(run.warnings) == warnings
    from_stdout = stdout_of(stem)
    assert (run.test, run.device, run.qps, run.mtu, run.gid_index, run.link_type) == (
        from_stdout.test, from_stdout.device, from_stdout.qps, from_stdout.mtu,
        from_stdout.gid_index, from_stdout.link_type,
    )  # fmt: skip


@pytest.mark.parametrize(("stem", "unit", "standard", "row", "warnings"), JSON_CASES)
def test_run_cross_checks_json_against_stdout(
    stem: str, unit: Unit, standard: bool, row: tuple[int, int, float], warnings: int
) -> None:
    run = parse_run(read(f"{stem}.stdout"), "", read(f"{stem}.json"))
    assert run.json_checked
    assert run.source == "stdout"
    assert run.results == stdout_of(stem).results


def test_stale_json_is_refused() -> None:
    """A JSON file left from another run (perftest writes it only when it reports)."""
    with pytest.raises(PerftestOutputError) as caught:
        parse_run(
            read("rxe_write_client_4.5-0.17.stdout"), "", read("mlx5_read_client_4.5-0.17.json")
        )
    error = caught.value
    assert "another run" in error.what
    assert "rxe0 65536 B, 883 iterations, 0.15 Gb/s (stdout line 27)" in error.expected
    assert "mlx5_0 65536 B, 1109880 iterations" in error.actual


def test_results_local_and_remote_when_present() -> None:
    """linux-rdma/perftest PR #322's keys for -b --report-both."""
    text = read("mlx5_write_client_25.10.json").rstrip().removesuffix("}").rstrip()
    text += (
        ',\n"results_local": {\n"MsgSize": 65536,\n"n_iterations": 10,\n"BW_peak": 0.00,\n'
        '"BW_average": 48.00,\n"MsgRate": 0.1\n},\n"results_remote": {\n"MsgSize": 65536,\n'
        '"n_iterations": 9,\n"BW_peak": 0.00,\n"BW_average": 47.00,\n"MsgRate": 0.1\n}\n}\n'
    )
    run = parse_json(text, unit="Gb/s")
    assert [(r.scope, r.bw_average_bps) for r in run.results] == [
        ("total", 97.73 * GB),
        ("local", 48 * GB),
        ("remote", 47 * GB),
    ]


# stem -> (where, cause lines)
ERROR_CASES = {
    "error_connect_4.5-0.17": (
        "stderr line 1",
        (
            "Couldn't connect to 198.18.99.1:18515",
            "Unable to open file descriptor for socket connection Unable to init the socket "
            "connection",
        ),
    ),
    "error_retry_exceeded_25.10": (
        "stderr line 1",
        (
            "Completion with error at client",
            "Failed status-transport retry counter exceeded (12): wr_id 0 syndrom 0x81",
            "Failed to complete run_iter_bw function successfully",
        ),
    ),
    "real_no_device_4.5-0.17": (
        "stderr line 1",
        ("Did not detect devices", "Unable to find the Infiniband/RoCE device"),
    ),
    "real_gid_index_4.5-0.17": (
        "stderr line 1",
        ("Gid index should be between 0 and 64", "Parser function exited with Error"),
    ),
}


@pytest.mark.parametrize("stem", sorted(ERROR_CASES))
def test_perftest_errors_are_the_cause(stem: str) -> None:
    where, cause = ERROR_CASES[stem]
    with pytest.raises(PerftestOutputError) as caught:
        stdout_of(stem)
    assert caught.value.where == where
    assert caught.value.cause == cause
    assert caught.value.what == "perftest reported an error"
    assert cause[0] in str(caught.value)


def test_error_beats_missing_rows() -> None:
    """The retry run printed its column line and no row: the reason is the completion
    error, not "no result row"."""
    with pytest.raises(PerftestOutputError) as caught:
        parse_stdout(read("error_retry_exceeded_25.10.stdout"), "")
    assert caught.value.what == "result row"
    assert caught.value.actual == "none (run cut short)"
    with pytest.raises(PerftestOutputError) as caught:
        stdout_of("error_retry_exceeded_25.10")
    assert caught.value.cause


def test_cpu_frequency_warning_is_not_an_error() -> None:
    stderr = (
        "Conflicting CPU frequency values detected: 2100.000000 != 3400.000000. CPU Frequency "
        "is not max.\n"
    )
    run = parse_stdout(read("rxe_write_client_4.5-0.17.stdout"), stderr)
    assert run.warnings[0].startswith("Conflicting CPU frequency")


RXE = read("rxe_write_client_4.5-0.17.stdout")
ROW = " 65536      883              0.00               0.15   \t\t   0.000294"


# name -> (stdout, where, what, expected fragment, actual fragment)
GARBAGE = {
    "empty": ("", "stdout", "test header", "header", "none"),
    "bandwidth only": (
        read("mlx5_write_client_output_bandwidth_25.10.stdout"),
        "stdout line 1", "test header", "full verbosity", "97.728332",
    ),
    "latency test": (
        RXE.replace("RDMA_Write BW Test", "RDMA_Write Latency Test"),
        "stdout line 2", "test name", "a BW test", "RDMA_Write_Latency_Test",
    ),
    "unknown test": (
        RXE.replace("RDMA_Write BW Test", "Frobnicate BW Test"),
        "stdout line 2", "test name", "RDMA_Write_BW_Test", "Frobnicate",
    ),
    "no column line": (
        RXE.replace(" #bytes     #iterations", " bytes     iterations"),
        "stdout line 27", "result row", "column line first", "65536",
    ),
    "odd columns": (
        RXE.replace("BW average[Gb/sec]", "BW average[Tb/sec]"),
        "stdout line 26", "result columns", "#bytes #iterations", "Tb/sec",
    ),
    "bad row": (
        RXE.replace(ROW, " 65536      883   zero   0.15   0.000294"),
        "stdout line 27", "result row", "(numbers)", "zero",
    ),
    "negative average (perftest issue #82)": (
        RXE.replace("0.15   \t", "-0.15  \t"),
        "stdout line 27", "BW average", "non-negative", "-0.15",
    ),
    "not a number": (
        RXE.replace("0.15   \t", "-nan   \t"),
        "stdout line 27", "BW average", "finite", "-nan",
    ),
    "infinite rate": (
        RXE.replace("0.000294", "inf"), "stdout line 27", "MsgRate", "finite", "inf",
    ),
    "absurd figure": (
        RXE.replace("0.15   \t", "99999999999999999.99\t"),
        "stdout line 27", "BW average", "below 10^15", "99999999999999999.99",
    ),
    "no rows": (
        RXE.replace(ROW + "\n", ""), "stdout", "result row", "at least one", "cut short",
    ),
    "cut before columns": (
        RXE[: RXE.index(" #bytes")], "stdout", "result line", "column line", "cut short",
    ),
    "missing device": (
        RXE.replace("Device         : rxe0", "Devise         : rxe0"),
        "stdout", "header field 'Device'", "present", "missing",
    ),
    "bad mtu": (
        RXE.replace("1024[B]", "lots[B]"), "stdout line 10", "mtu", "an integer", "lots",
    ),
    "units change": (
        RXE.replace(ROW, ROW + "\n #bytes     #iterations    BW peak[MB/sec]    "
                    "BW average[MB/sec]   MsgRate[Mpps]"),
        "stdout line 28", "result unit", "Gb/s", "MiB/s",
    ),
    "long line": ("x" * 5000, "stdout line 1", "line length", "4096", "5000"),
    "too big": (
        "\n" * (MAX_OUTPUT_BYTES + 1), "stdout", "output size", str(MAX_OUTPUT_BYTES),
        str(MAX_OUTPUT_BYTES + 1),
    ),
    "error on stdout": (
        RXE + "Error: BW result is below bw limit\n", "stdout line 29",
        "perftest reported an error", "without error lines", "below bw limit",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_garbage_is_refused_by_name(name: str) -> None:
    text, where, what, expected, actual = GARBAGE[name]
    with pytest.raises(PerftestOutputError) as caught:
        parse_stdout(text)
    error = caught.value
    assert (error.where, error.what) == (where, what)
    assert expected in error.expected
    assert actual in error.actual
    assert f"Expected: {error.expected} Actual: {error.actual}" in str(error)


def test_control_characters_are_shown_not_obeyed() -> None:
    with pytest.raises(PerftestOutputError) as caught:
        parse_stdout(RXE.replace(ROW, " 65536 \x1b[2J 883"))
    assert "\x1b" not in str(caught.value)
    assert "\\x1b" in caught.value.actual


LEGACY = read("rxe_write_client_4.5-0.17.json")
STANDARD = read("mlx5_write_client_25.10.json")


# name -> (text, where, what, expected fragment, actual fragment)
JSON_GARBAGE = {
    "empty": ("", "JSON", "structure", "one object", "empty"),
    "not an object": ("[1, 2]", "JSON", "top level", "an object", "list"),
    "no start": ("test_info: {\n", "JSON line 1", "start", "'{'", "test_info"),
    "unclosed": (LEGACY.rstrip().removesuffix("}"), "JSON", "structure", "closed", "unclosed"),
    "after the end": (LEGACY + "trailing\n", "JSON line 29", "content after the closing brace",
                      "none", "trailing"),
    "no key": (LEGACY.replace("MsgSize: 65536,", ": 65536,"), "JSON line 22", "line",
               "'key: value,'", ": 65536"),
    "two strings": (LEGACY.replace('Device: "rxe0"', 'Device: "rx"e0"'), "JSON line 5",
                    "value", "one quoted string", "rx"),
    "no results": (LEGACY[: LEGACY.index("results")] + "}\n", "JSON", "results", "an object",
                   "missing"),
    "bandwidth only": (read("mlx5_write_client_output_bandwidth_25.10.json"), "JSON results",
                       "MsgSize", "a non-negative integer", "missing"),
    "text iterations": (LEGACY.replace("n_iterations: 883", "n_iterations: many"),
                        "JSON results", "n_iterations", "a non-negative integer", "many"),
    "boolean qps": (STANDARD.replace('"Number_of_qps": 4', '"Number_of_qps": true'), "JSON",
                    "Number_of_qps", "a non-negative integer", "True"),
    "NaN average": (STANDARD.replace('"BW_average": 97.73', '"BW_average": NaN'),
                    "JSON results", "BW_average", "finite", "NaN"),
    "latency test": (LEGACY.replace("RDMA_Write_BW_Test", "RDMA_Write_Latency_Test"), "JSON",
                     "test name", "a BW test", "Latency"),
    "no device": (LEGACY.replace('Device: "rxe0",\n', ""), "JSON", "Device", "a string",
                  "missing"),
    "huge integer": (STANDARD.replace("1118412", "9" * 5000), "JSON line 24", "line length",
                     "4096", "5017"),
    "deep": ("{\n" + "a: {\n" * 5, "JSON line 4", "nesting", "2 levels", "deeper"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(JSON_GARBAGE))
def test_json_garbage_is_refused_by_name(name: str) -> None:
    text, where, what, expected, actual = JSON_GARBAGE[name]
    with pytest.raises(PerftestOutputError) as caught:
        parse_json(text, unit="Gb/s")
    error = caught.value
    assert (error.where, error.what) == (where, what)
    assert expected in error.expected
    assert actual in error.actual


def test_json_big_but_short_integer_is_refused() -> None:
    """json.loads refuses integers past Python's digit limit with ValueError, which is not
    JSONDecodeError; the line parser then refuses the line."""
    text = STANDARD.replace("1118412", "9" * 4400)
    with pytest.raises(PerftestOutputError):
        parse_json(text, unit="Gb/s")


# --------------------------------------------------------------------------- properties


@given(
    st.decimals(min_value=0, max_value=10**6, places=2, allow_nan=False, allow_infinity=False),
    st.sampled_from(["Gb/s", "MiB/s"]),
)
def test_unit_conversion_round_trips(value: Decimal, unit: Unit) -> None:
    bps = to_bits_per_second(value, unit)
    assert from_bits_per_second(bps, unit) == value
    assert bps == pytest.approx(float(value) * (GB if unit == "Gb/s" else MIB), rel=1e-15)


@given(st.integers(min_value=0, max_value=10**8))
def test_gbit_is_exactly_ten_to_the_nine(hundredths: int) -> None:
    value = Decimal(hundredths).scaleb(-2)
    assert to_bits_per_second(value, "Gb/s") == hundredths * 10**7


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000), st.text(max_size=300))
def test_stdout_parser_raises_only_its_error(stdout: str, stderr: str) -> None:
    with contextlib.suppress(PerftestOutputError):
        parse_stdout(stdout, stderr)


LINES = [*RXE.splitlines(), *read("mlx5_write_bidir_client_4.5-0.17.stdout").splitlines()]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(LINES), st.text(max_size=60)), max_size=60))
def test_stdout_parser_on_shuffled_real_lines(lines: list[str]) -> None:
    try:
        run = parse_stdout("\n".join(lines))
    except PerftestOutputError:
        return
    assert run.results
    assert all(row.bw_average_bps >= 0 and row.iterations >= 0 for row in run.results)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([LEGACY, STANDARD]), st.integers(0, 10**6), st.text(max_size=5))
def test_json_parser_on_mutated_files(text: str, position: int, insert: str) -> None:
    at = position % (len(text) + 1)
    with contextlib.suppress(PerftestOutputError):
        parse_json(text[:at] + insert + text[at + 1 :], unit="Gb/s")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@settings(max_examples=300)
@given(st.one_of(JSON_VALUES.map(json.dumps), st.text(max_size=500)))
def test_json_parser_raises_only_its_error(text: str) -> None:
    with contextlib.suppress(PerftestOutputError):
        parse_json(text, unit="MiB/s")

"""perftest argv (agent.observe.perftest.command), checked against the Debian 12 binaries'
--help."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.intent.model import PerftestPolicy
from agent.observe.perftest.command import (
    PerftestCommand,
    PerftestCommandError,
    Test,
    command_from_policy,
    duration_seconds,
    measured_seconds,
    tcp_port_for,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"


def command(**changes: object) -> PerftestCommand:
    fields: dict[str, object] = {
        "test": "write",
        "device": "rxe0",
        "gid_index": 1,
        "qps": 2,
        "message_bytes": 65536,
        "duration_s": 5,
        "tcp_port": 18515,
        "tclass": 106,
        "json_path": "/tmp/perftest-h1-h3.json",
    }
    fields.update(changes)
    return PerftestCommand(**fields)  # type: ignore[arg-type]


def test_write_client_argv() -> None:
    assert command().client_argv("198.18.99.1") == [
        "ib_write_bw", "-d", "rxe0", "-i", "1", "-x", "1", "-q", "2", "-s", "65536",
        "-D", "5", "-p", "18515", "-F", "--report_gbits", "--tclass=106",
        "--out_json", "--out_json_file=/tmp/perftest-h1-h3.json", "198.18.99.1",
    ]  # fmt: skip


def test_server_is_the_client_without_address() -> None:
    spec = command()
    assert spec.client_argv("h3.example") == [*spec.server_argv(), "h3.example"]


def test_recorded_run_is_a_subset() -> None:
    """The recorded rxe run (tests/data/perftest/README.md) used these flags."""
    argv = command(json_path=None, tclass=None).client_argv("198.18.99.1")
    recorded = [
        "ib_write_bw",
        "-d",
        "rxe0",
        "-x",
        "1",
        "-q",
        "2",
        "--report_gbits",
        "-D",
        "5",
        "198.18.99.1",
    ]
    assert set(recorded) <= set(argv)


@pytest.mark.parametrize(
    ("test", "binary", "both"),
    [("write", "ib_write_bw", True), ("read", "ib_read_bw", True), ("send", "ib_send_bw", False)],
)
def test_bidirectional(test: Test, binary: str, both: bool) -> None:
    """send -b -D never exchanges reports: its "Remote results" would be garbage."""
    argv = command(test=test, bidirectional=True).server_argv()
    assert argv[0] == binary
    assert "-b" in argv
    assert ("--report-both" in argv) is both


def test_optional_flags_left_out() -> None:
    argv = command(tclass=None, json_path=None).server_argv()
    assert not any(arg.startswith(("--tclass", "--out_json")) for arg in argv)
    assert "-b" not in argv


def _options(argv: list[str]) -> list[str]:
    return [arg.partition("=")[0] for arg in argv if arg.startswith("-")]


@pytest.mark.parametrize("test", ["write", "read", "send"])
def test_every_flag_is_in_perftest_4_5_help(test: Test) -> None:
    """Debian 12's perftest 4.5+0.17 lists each option we pass (recorded --help)."""
    binary = {"write": "ib_write_bw", "read": "ib_read_bw", "send": "ib_send_bw"}[test]
    help_text = (DATA / f"{binary}_help_4.5-0.17.txt").read_text()
    argv = command(test=test, bidirectional=True).client_argv("198.18.99.1")
    for option in _options(argv):
        if option.startswith("--"):
            assert re.search(rf"^\s+(?:-\w, )?{re.escape(option)}\b", help_text, re.M), option
        else:
            assert re.search(rf"^\s+{re.escape(option)}, --", help_text, re.M), option


def test_real_parser_accepted_the_argv() -> None:
    """Recorded: the binary got past option parsing with this argv (it failed later, on the
    missing RDMA device), while -x 65 fails in the parser."""
    stderr = (DATA / "real_no_device_4.5-0.17.stderr").read_text()
    assert "Parser function exited" not in stderr
    assert "Unable to find the Infiniband/RoCE device" in stderr
    assert "should be between 0 and 64" in (DATA / "real_gid_index_4.5-0.17.stderr").read_text()


# field -> (value, fragment of the message)
INVALID = [
    ("test", "atomic", "test: Expected: write, read or send"),
    ("device", "mlx5_0;reboot", "invalid RDMA device"),
    ("device", "mlx5_0/1", "without its port"),
    ("ib_port", 0, "RDMA port: Expected: 1-255"),
    ("ib_port", 256, "RDMA port: Expected: 1-255"),
    ("gid_index", 65, "-x: Expected: an integer 0-64"),
    ("gid_index", -1, "-x: Expected: an integer 0-64"),
    ("qps", 0, "-q: Expected: an integer 1-16384"),
    ("qps", 16385, "-q: Expected: an integer 1-16384"),
    ("qps", True, "-q: Expected"),
    ("message_bytes", 0, "-s: Expected: an integer 1-2147483647"),
    ("message_bytes", 2**31, "-s: Expected"),
    ("duration_s", 0, "-D: Expected"),
    ("duration_s", 2.5, "-D: Expected"),
    ("tcp_port", 0, "-p: Expected: an integer 1-65535"),
    ("tcp_port", 65536, "-p: Expected: an integer 1-65535"),
    ("tclass", 256, "--tclass: Expected: an integer 0-255"),
    ("json_path", "relative.json", "--out_json_file: Expected: an absolute path"),
    ("json_path", "/tmp/a b.json", "--out_json_file: Expected"),
    ("json_path", "/tmp/x;rm -rf", "--out_json_file: Expected"),
]


@pytest.mark.parametrize(("field", "value", "fragment"), INVALID)
def test_invalid_inputs(field: str, value: object, fragment: str) -> None:
    with pytest.raises(PerftestCommandError) as caught:
        command(**{field: value})
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    "address", ["-x", "--help", "198.18.0.1 -b", "", "host;reboot", "a" * 254, "h3\n"]
)
def test_server_address_cannot_become_an_option(address: str) -> None:
    with pytest.raises(PerftestCommandError, match="server address"):
        command().client_argv(address)


@pytest.mark.parametrize(
    ("address", "argument"),
    [("198.18.0.13", "198.18.0.13"), ("fd00::13", "fd00::13"), ("h3.lab", "h3.lab")],
)
def test_server_addresses(address: str, argument: str) -> None:
    assert command().client_argv(address)[-1] == argument


def test_from_policy() -> None:
    policy = PerftestPolicy(test="read", qps=8, duration_s=10.5, message_bytes=1048576)
    spec = command_from_policy(policy, device="mlx5_0", gid_index=3, tcp_port=18516, tclass=106)
    assert (spec.test, spec.qps, spec.message_bytes, spec.duration_s) == ("read", 8, 1048576, 11)
    assert spec.binary == "ib_read_bw"
    assert spec.measured_seconds == 7  # 11 - 2 * (11 // 4)


@pytest.mark.parametrize(
    ("duration", "measured"), [(1, 1), (3, 3), (4, 2), (5, 3), (10, 6), (30, 16)]
)
def test_measured_seconds(duration: int, measured: int) -> None:
    """perftest skips duration // 4 at each end; the recorded -D 5 run measured 3 s."""
    assert measured_seconds(duration) == measured


@pytest.mark.parametrize(("given_s", "seconds"), [(0.1, 1), (1.0, 1), (9.2, 10), (3600.0, 3600)])
def test_duration_rounds_up(given_s: float, seconds: int) -> None:
    assert duration_seconds(given_s) == seconds


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_duration_refused(bad: float) -> None:
    with pytest.raises(PerftestCommandError, match="-D"):
        duration_seconds(bad)


def test_tcp_ports_per_pair() -> None:
    policy = PerftestPolicy(base_tcp_port=65000)
    assert [tcp_port_for(policy, i) for i in range(3)] == [65000, 65001, 65002]
    with pytest.raises(PerftestCommandError, match="-p"):
        tcp_port_for(policy, 536)


@given(
    st.sampled_from(["write", "read", "send"]),
    st.integers(0, 64),
    st.integers(1, 16384),
    st.integers(1, 2**31 - 1),
    st.integers(1, 65535),
    st.booleans(),
)
def test_argv_is_plain_strings(
    test: Test, gid: int, qps: int, size: int, port: int, bidirectional: bool
) -> None:
    argv = command(
        test=test, gid_index=gid, qps=qps, message_bytes=size, tcp_port=port,
        bidirectional=bidirectional,
    ).client_argv("198.18.0.13")  # fmt: skip
    assert all(isinstance(arg, str) and arg and not any(c.isspace() for c in arg) for arg in argv)
    assert argv[argv.index("-x") + 1] == str(gid)
    assert argv[argv.index("-q") + 1] == str(qps)
    assert argv[-1] == "198.18.0.13"

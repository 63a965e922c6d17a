"""bench/push_fanout.py: the emulated NOS latency, its argument errors, and bounded start-up
(a server that dies stops the others and fails the run at once, instead of a wait for a port
file that never comes)."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("push_fanout", REPO / "bench/push_fanout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["push_fanout"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()

# command hold 0.1 s, commit hold 2 s: which one each line gets is then exact.
FIXED = bench.Latency(command=(0.1, 0.1), commit=(2.0, 2.0))


@pytest.mark.parametrize(
    ("line", "hold"),
    [
        ("", 0.0),  # netmiko looking for the prompt: answered at once
        ("   ", 0.0),
        ("show running-config | json", 0.1),
        ("configure session roce-agent-1", 0.1),
        ("priority-flow-control priority 3 no-drop", 0.1),
        ("commit timer 00:05:00", 2.0),
        ("commit", 2.0),
        ("copy running-config startup-config", 2.0),
        ("write memory", 2.0),
        ("configure session roce-agent-1 commit", 0.1),  # confirming a timer: a command
        ("show session-config diffs", 0.1),
    ],
)
def test_latency_by_kind_of_line(line: str, hold: float) -> None:
    assert FIXED.delay(line, random.Random(0)) == hold


def test_latency_stays_in_its_range_and_follows_the_seed() -> None:
    latency = bench.Latency(command=(0.03, 0.2), commit=(1.0, 2.0))
    first = [latency.delay("show version", random.Random(7)) for _ in range(3)]
    rng = random.Random(7)
    holds = [latency.delay("show version", rng) for _ in range(500)]
    assert all(0.03 <= h <= 0.2 for h in holds)
    assert max(holds) - min(holds) > 0.1  # spread over the range, not a constant
    assert first == [holds[0]] * 3
    assert all(1.0 <= latency.delay("commit", rng) <= 2.0 for _ in range(100))


@pytest.mark.parametrize(
    ("text", "expected"), [(None, (32,)), ("40", (40,)), ("32,40,48", (32, 40, 48))]
)
def test_agent_sessions_default_to_the_pools(text: str | None, expected: tuple[int, ...]) -> None:
    assert bench.parse_sessions(text, 32) == expected


@pytest.mark.parametrize(
    ("text", "scale", "expected"),
    [
        ("30,200", 1e-3, (0.03, 0.2)),
        ("1,2", 1.0, (1.0, 2.0)),
        ("5", 1.0, (5.0, 5.0)),
        ("0,0", 1.0, (0.0, 0.0)),
    ],
)
def test_parse_range(text: str, scale: float, expected: tuple[float, float]) -> None:
    assert bench.parse_range(text, "--x", scale) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("abc", "Expected: LOW,HIGH or one number. Actual: 'abc'"),
        ("1,2,3", "Expected: LOW,HIGH, both >= 0. Actual: '1,2,3'"),
        ("-1,2", "both >= 0"),
        ("nan,2", "both >= 0"),
        ("3,2", "Expected: LOW <= HIGH. Actual: '3,2'"),
        ("", "Expected: LOW,HIGH or one number"),
    ],
)
def test_parse_range_errors(text: str, why: str) -> None:
    with pytest.raises(bench.BenchError, match=r"^--x: ") as caught:
        bench.parse_range(text, "--x")
    assert why in str(caught.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--command-ms", "fast"], "push_fanout: --command-ms: Expected: LOW,HIGH"),
        (["--commit-s", "2,1"], "push_fanout: --commit-s: Expected: LOW <= HIGH"),
        (["--switches", "0"], "push_fanout: --switches: Expected: >= 1. Actual: 0"),
        (["--shards", "5000"], "push_fanout: --shards: shard: Expected: K/N"),
        (["--agent-parallelism", "32,x"], "push_fanout: --agent-parallelism: Expected: N[,N"),
        (["--agent-parallelism", "0"], "push_fanout: --agent-parallelism: Expected: N[,N"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main([*argv, "--no-baseline"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1


def _processes_naming(text: str) -> list[int]:
    """PIDs whose command line holds ``text`` (a path unique to this test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_server_that_dies_at_start_fails_the_run_at_once(tmp_path: Path) -> None:
    state = tmp_path / f"state-{os.getpid()}"
    state.mkdir()
    (state / "sw0").write_text("not a directory")  # the first server cannot make sw0's dir
    started = time.monotonic()
    with pytest.raises(bench.BenchError, match="exited with 1 during start-up"):
        bench.start_servers(4, 2, state, FIXED, seed=1)
    assert time.monotonic() - started < bench.START_TIMEOUT_S
    assert _processes_naming(str(state)) == []  # its sibling was stopped too
    assert "FileExistsError: [Errno 17] File exists" in (state / "servers.log").read_text()


def test_servers_share_one_key_made_before_they_start(tmp_path: Path) -> None:
    state = tmp_path / f"state-{os.getpid()}"
    processes, ports = bench.start_servers(4, 4, state, FIXED, seed=1)
    try:
        assert sorted(ports) == ["sw0", "sw1", "sw2", "sw3"]
        assert len(set(ports.values())) == 4
        assert not list(state.glob(".ssh_host_ed25519_key.*"))  # no half-made key left
    finally:
        bench.stop_servers(processes)
    assert all(p.returncode is not None for p in processes)


def test_the_emulated_switch_holds_back_its_replies(tmp_path: Path) -> None:
    """Over real SSH: a command takes its hold, a commit-class line the longer one."""
    from netmiko import ConnectHandler

    latency = bench.Latency(command=(0.4, 0.4), commit=(1.5, 1.5))
    state = tmp_path / f"state-{os.getpid()}"
    processes, ports = bench.start_servers(1, 1, state, latency, seed=1)
    try:
        with ConnectHandler(
            device_type="arista_eos",
            host="127.0.0.1",
            port=ports["sw0"],
            username="admin",
            password=bench.PASSWORD,
            fast_cli=True,
        ) as conn:
            started = time.monotonic()
            assert "hostname" in conn.send_command("show hostname").lower()
            show = time.monotonic() - started
            started = time.monotonic()
            conn.save_config()
            save = time.monotonic() - started
    finally:
        bench.stop_servers(processes)
    assert 0.4 <= show < 1.4
    assert 1.5 <= save < 3.5

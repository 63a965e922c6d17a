"""The lab's ``host-stall`` fault (issue #30, item 4): planned on a host only, its bounds, and
the stall process continuing every process it stopped however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import lab.faults_stall as stall_module
from lab.cli import group
from lab.faults import KINDS, LabFaults, describe


def test_host_stall_is_planned_as_a_process_outside_the_hosts_namespace(
    state_dir: Path,
) -> None:
    fault = LabFaults(state_dir).plan("host-stall", "h3", ms=30.0)
    assert fault.actions == [
        {
            "type": "process",
            "node": "h3",
            "netns": "clab-flt-h3",
            "stall_ms": 30.0,
            "period_ms": 100.0,
        }
    ]
    assert "processes of h3 stopped 30 ms of every 100 ms" in describe(fault)
    assert KINDS["host-stall"].target == "host"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["host-stall", "h3"], "--delay: host-stall needs it"),
        (["host-stall", "leaf1", "--delay", "30ms"], "host-stall needs a host; leaf1 is a switch"),
        (["host-stall", "h3:eth1", "--delay", "30ms"], "host-stall needs a host like h1"),
        (
            ["host-stall", "h3", "--delay", "100ms"],
            "--delay: Expected: a stall shorter than its period (100 ms). Actual: 100 ms",
        ),
        (["host-stall", "h3", "--percent", "5", "--delay", "5ms"], "--percent: does not apply"),
    ],
)
def test_bad_host_stall_input_exits_2_and_applies_nothing(
    state_dir: Path,
    args: list[str],
    message: str,
) -> None:
    result = CliRunner().invoke(group, ["fault", "add", *args, "--state-dir", str(state_dir)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (state_dir / "faults.json").exists()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.mark.parametrize("stop_after_sleeps", [1, 2, 3], ids=["mid-stall", "between", "next"])
def test_the_stall_continues_what_it_stopped_however_it_is_ended(
    monkeypatch: pytest.MonkeyPatch, stop_after_sleeps: int
) -> None:
    """SIGTERM lands while the child is stopped, between stalls, or in the next stall: the
    child runs afterwards, and it was stopped while the stall lasted."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    seen: list[str] = []
    sleeps = 0
    real_sleep = time.sleep

    def listed(_netns: str) -> list[int]:
        return [os.pidfd_open(child.pid)]  # as if the child were the namespace

    def sleep(_seconds: float) -> None:
        nonlocal sleeps
        sleeps += 1
        real_sleep(0.02)  # let the signal land
        seen.append(_state(child.pid))
        if sleeps == stop_after_sleeps:
            raise stall_module._Stop

    monkeypatch.setattr(stall_module, "namespace_pidfds", listed)
    monkeypatch.setattr(time, "sleep", sleep)  # the module calls time.sleep
    try:
        stall_module.stall("unused", ms=30, period_ms=100)
        monkeypatch.undo()
        time.sleep(0.05)
        assert seen[0] == "T"  # stopped during the first stall
        if len(seen) > 1:
            assert seen[1] != "T"  # running between stalls
        assert _state(child.pid) != "T"
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait()


def test_the_stall_refuses_its_own_namespace_and_a_missing_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(stall_module, "NETNS_DIR", tmp_path)
    assert stall_module.main(["--netns", "absent", "--ms", "30"]) == 2
    assert "no network namespace 'absent'" in capsys.readouterr().err
    (tmp_path / "mine").symlink_to("/proc/self/ns/net")
    assert stall_module.main(["--netns", "mine", "--ms", "30"]) == 2
    assert "run outside the namespace it stalls" in capsys.readouterr().err

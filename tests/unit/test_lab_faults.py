"""The lab management plane's fault knobs (lab/mgmt/ssh_server.py ``Faults``): parsing and
which command each knob hits. Live use is in tests/lab/test_fault_drill.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.mgmt.ssh_server import Faults


def load(tmp_path: Path, **knobs: object) -> Faults:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(knobs))
    faults = Faults()
    faults.load(path)
    return faults


@pytest.mark.parametrize(
    ("knobs", "line", "delay", "cut"),
    [
        ({}, "commit timer 00:00:05", 0.0, None),
        ({"delay_s": 3}, "show version", 3.0, None),
        ({"delay_s": 3, "slow_on": "^commit"}, "show version", 0.0, None),
        ({"delay_s": 3, "slow_on": "^commit"}, "commit timer 00:00:05", 3.0, None),
        ({"cut_on": "^commit timer"}, "commit timer 00:00:05", 0.0, "before"),
        ({"cut_on": "^commit timer", "cut_when": "after"}, "commit timer 1", 0.0, "after"),
        ({"cut_on": "^commit timer"}, "configure session x commit", 0.0, None),
    ],
)
def test_knobs_hit_the_matching_commands(
    tmp_path: Path, knobs: dict[str, object], line: str, delay: float, cut: str | None
) -> None:
    faults = load(tmp_path, **knobs)
    assert faults.delay_for(line) == delay
    assert faults.cut_for(line) == cut


def test_cuts_are_counted_and_restart_fires_once(tmp_path: Path) -> None:
    faults = load(tmp_path, cut_on="x", cut_count=2, restart_on="^show session")
    assert [faults.cut_for("x") for _ in range(3)] == ["before", "before", None]
    restarts: list[int] = []
    faults.request_restart = lambda: restarts.append(1)
    assert faults.cut_for("show session-config diffs") == "restart"
    assert faults.cut_for("show session-config diffs") is None
    assert restarts == [1]


def test_missing_file_clears_and_bad_values_are_refused(tmp_path: Path) -> None:
    faults = load(tmp_path, delay_s=5)
    faults.load(tmp_path / "absent.json")
    assert faults.delay_for("anything") == 0.0
    with pytest.raises(ValueError, match="cut_when must be before or after"):
        load(tmp_path, cut_on="x", cut_when="during")

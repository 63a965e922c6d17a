"""How many SSH sessions a rollout holds at once: ``apply: {parallelism}`` in agent.yaml and in
a playbook's ``apply`` step reach the push path; a bad value names file, line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.app.daemon import load_config
from agent.loader import load_fabric
from agent.playbooks import PlaybookRunner, load_playbook
from agent.push import DEFAULT_PARALLELISM, DeviceResult, Pusher
from tests.unit.problems import the_one_problem

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "playbooks" / "fabrics" / "pod-400g.yml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_FABRIC_PASSWORD", "x")  # pod-400g's credentials: only checked


def write_agent_yaml(folder: Path, apply_line: str) -> Path:
    config = folder / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nexporter: null\n{apply_line}\n")
    return config


@pytest.mark.parametrize(
    ("apply_line", "expected"),
    [("", DEFAULT_PARALLELISM), ("apply: {parallelism: 48}", 48), ("apply: {canary: 2}", 32)],
)
def test_agent_yaml_parallelism(tmp_path: Path, apply_line: str, expected: int) -> None:
    loaded = load_config(write_agent_yaml(tmp_path, apply_line))
    assert loaded.config.apply.parallelism == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "greater than or equal to 1"), ("many", "valid integer"), ("1.5", "valid integer")],
)
def test_bad_parallelism_names_file_line_and_field(
    tmp_path: Path, value: str, message: str
) -> None:
    config = write_agent_yaml(tmp_path, f"apply:\n  parallelism: {value}")
    problem = the_one_problem(load_config, config, 4)
    assert problem.field == "apply.parallelism"
    assert message in problem.message

    # The daemon itself: exit 2, one line with FILE:LINE and the field, nothing started.
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"{config}:4" in result.output and "apply.parallelism" in result.output
    assert "Traceback" not in result.output


def test_bad_parallelism_in_a_playbook_names_file_line_and_field(tmp_path: Path) -> None:
    playbook = tmp_path / "roll.yml"
    playbook.write_text("name: roll\nsteps:\n  - apply:\n      parallelism: 0\n")
    problem = the_one_problem(load_playbook, playbook, 4)
    assert problem.field.endswith("apply.parallelism")


@pytest.mark.parametrize(
    ("line", "expected"), [("", DEFAULT_PARALLELISM), (", parallelism: 44", 44)]
)
def test_playbook_apply_step_holds_that_many_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, expected: int
) -> None:
    """The step hands its parallelism to the push path (recorded here instead of pushing: the
    push itself is tested against lab switches in tests/lab/test_push_lab.py)."""
    seen: list[dict[str, Any]] = []

    def record(self: Pusher, devices: Any, **options: Any) -> list[DeviceResult]:
        seen.append(options)
        return []

    monkeypatch.setattr(Pusher, "apply_all", record)
    playbook = tmp_path / "roll.yml"
    playbook.write_text(f"name: roll\nsteps:\n  - apply: {{devices: all{line}}}\n")
    report = PlaybookRunner(load_fabric(FABRIC).intent, tmp_path).run(load_playbook(playbook))
    assert [step.status for step in report.steps] == ["success"]
    assert [options["parallelism"] for options in seen] == [expected]

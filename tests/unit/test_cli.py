"""The CLI surface: exit codes, both output formats, help and version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent import __version__
from agent.app.cli import COMMANDS, main, summary_line
from agent.intent import sizing

ROOT = Path(__file__).resolve().parents[2]
POD = str(ROOT / "playbooks" / "fabrics" / "pod-400g.yml")
LAB = str(ROOT / "playbooks" / "fabrics" / "lab-leafspine.yml")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0 and __version__ in out


def test_help_explains_each_command() -> None:
    code, out, _ = run("--help")
    assert code == 0
    for command in ("check", "plan", "lab", "rules"):
        assert command in out
    assert "Exit codes" in out
    for command in ("check", "plan"):
        code, sub, _ = run(command, "--help")
        assert code == 0 and "FABRIC" in sub


# Commands whose line in the listing is shorter than their help's first sentence.
SHORTER_LISTING = {"checks", "discover", "lab", "nccl", "probe", "render", "rules"}


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - SHORTER_LISTING))
def test_command_table_summary_is_the_commands_own_line(name: str) -> None:
    """The listing comes from the table without importing the command: it must say what the
    command's own help says."""
    command = COMMANDS.load(name)
    assert summary_line(COMMANDS[name].summary) == command.get_short_help_str(limit=70)


def test_help_lists_every_command_without_importing_one() -> None:
    code = (
        "import sys\n"
        "from agent.app.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    *help_lines, imported = done.stdout.splitlines()
    listing, modules = "\n".join(help_lines), set(imported.split())
    targets = {COMMANDS[name].module for name in COMMANDS}
    assert not targets & modules, sorted(targets & modules)
    for name in COMMANDS:
        assert f"  {name} " in listing


def test_an_optional_group_that_cannot_be_imported_is_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "lab.cli", None)  # import lab.cli raises ImportError
    code, _, err = run("lab", "--help")
    assert code == 1 and "the lab commands are unavailable:" in err
    assert isinstance(main.get_command(click.Context(main), "twin"), click.Command)


@pytest.mark.parametrize("fabric", [POD, LAB])
def test_check_valid_fabric_exits_0(fabric: str) -> None:
    code, out, err = run("check", fabric)
    assert code == 0, err
    assert "valid" in out and err == ""


def test_check_missing_file_exits_2() -> None:
    code, out, err = run("check", "/nonexistent/fabric.yml")
    assert code == 2
    assert "no such file" in err and "Traceback" not in err + out


def test_plan_json_pod_headroom_matches_tuning() -> None:
    code, out, err = run("plan", POD, "--output", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["fabric"] == "pod-400g" and len(plan["devices"]) == 76
    spine = next(d for d in plan["devices"] if d["name"] == "spine1")
    port = spine["ports"][0]
    expected = sizing.pfc_headroom(400_000_000_000, 30, 9214)
    assert port["headroom"]["3"]["xoff"] == expected.xoff
    assert port["headroom"]["3"]["xon"] == expected.xon
    assert port["headroom"]["3"]["size"] == expected.size
    assert port["ecn"] == [
        {"queue": 3, "min_bytes": 150000, "max_bytes": 1500000, "max_probability": 100}
    ]
    assert spine["watchdog"]["action"] == "drop"


def test_plan_device_filter() -> None:
    code, out, _ = run("plan", POD, "--output", "json", "--device", "leaf3", "--device", "gpu17")
    assert code == 0
    assert [d["name"] for d in json.loads(out)["devices"]] == ["leaf3", "gpu17"]


def test_plan_unknown_device_exits_2() -> None:
    code, _, err = run("plan", POD, "--device", "leaf99")
    assert code == 2
    assert "'--device'" in err and "'leaf99' matches none" in err


def test_plan_table_shows_ports_headroom_and_nic() -> None:
    code, out, _ = run("plan", LAB, "--device", "leaf1", "--device", "h1")
    assert code == 0
    for text in ("leaf1 ports", "Ethernet3", "6000-18000 B", "PFC vector", "00010000", "26→3"):
        assert text in out, text


def test_plan_of_invalid_fabric_exits_2() -> None:
    bad = str(ROOT / "tests" / "data" / "bad" / "13-roce-priority-without-pfc.yml")
    code, out, err = run("plan", bad)
    assert code == 2 and out == ""
    assert "IR001" in err


def test_rules_lists_ids() -> None:
    code, out, _ = run("rules")
    assert code == 0
    assert "IR001" in out and "IR019" in out

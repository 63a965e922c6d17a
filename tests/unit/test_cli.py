"""The CLI surface: exit codes, both output formats, help and version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent import __version__
from agent.app.cli import main
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

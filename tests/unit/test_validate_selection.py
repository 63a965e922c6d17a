"""`validate --checks ID…` and `validate --no-traffic`: which steps and checks run, what the
report says about the others, and bad input exiting 2 naming the option."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from agent.app.cli import main
from agent.observe.checks import CATALOG, Collected, default_ids, needs
from agent.ops.playbooks import (
    TRAFFIC_KINDS,
    WRITE_KINDS,
    PlaybookRunner,
    StepReport,
    load_playbook,
    playbook_path,
    select_steps,
    step_check_ids,
)

ROOT = Path(__file__).resolve().parents[2]
LEAFSPINE = ROOT / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"
SHIPPED = ["validate", "acceptance", "lossless-rollout", "storm-drill", "host-preflight"]
TRAFFIC = [c for c in CATALOG if "traffic" in needs(c)]


def kinds(name: str) -> list[str]:
    return [s.kind() for s in load_playbook(playbook_path(name)).steps]


def checks_of(name: str, only: tuple[str, ...] = (), no_traffic: bool = False) -> list[str]:
    playbook, skip = select_steps(load_playbook(playbook_path(name)), only, no_traffic=no_traffic)
    return [
        c
        for i, s in enumerate(playbook.steps)
        if s.checks is not None and i not in skip
        for c in step_check_ids(s.checks)
    ]


# (playbook, --checks, --no-traffic, checks run, reasons of the skipped steps)
CASES: list[tuple[str, tuple[str, ...], bool, list[str], set[str]]] = [
    ("validate", (), True, [c for c in default_ids() if c not in TRAFFIC],
     {"--no-traffic: this step sends traffic"}),
    ("validate", ("RC003",), False, ["RC003"],
     {"--checks: none of the selected checks needs this step"}),
    ("validate", ("RC003", "RC101"), True, ["RC003", "RC101"],
     {"--no-traffic: this step sends traffic"}),
    ("validate", ("RC301",), False, ["RC301"], set()),  # RC301 judges the probes: they run
    ("lossless-rollout", ("RC101",), False, ["RC101"],
     {"--checks: none of RC101 is run by this step",
      "--checks: none of the selected checks needs this step"}),
    ("host-preflight", ("RC204", "RC202"), True, ["RC204", "RC202"], set()),
    ("lossless-rollout", (), True, [c for c in default_ids() if c not in TRAFFIC] + [],
     {"--no-traffic is read-only: this step changes the devices",
      "--no-traffic: this step sends traffic"}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "only", "no_traffic", "expected", "reasons"), CASES)
def test_selection(
    name: str, only: tuple[str, ...], no_traffic: bool, expected: list[str], reasons: set[str]
) -> None:
    original = load_playbook(playbook_path(name))
    playbook, skip = select_steps(original, only, no_traffic=no_traffic)
    assert len(playbook.steps) == len(original.steps)  # skipped steps stay in the report
    assert set(skip.values()) == reasons
    ran = checks_of(name, only, no_traffic)
    assert list(dict.fromkeys(ran)) == expected or set(ran) == set(expected)


def test_lossless_rollout_no_traffic_applies_nothing() -> None:
    playbook, skip = select_steps(load_playbook(playbook_path("lossless-rollout")), no_traffic=True)
    for index, step in enumerate(playbook.steps):
        if step.kind() in WRITE_KINDS + TRAFFIC_KINDS:
            assert index in skip


@pytest.mark.parametrize(
    ("name", "only", "named"),
    [
        ("host-preflight", ("RC001",), "Actual: RC001"),
        ("host-preflight", ("RC202", "RC101"), "Actual: RC101"),
        ("ecn-sweep", ("RC003",), "(no check) Actual: RC003"),
    ],
)
def test_a_check_the_playbook_does_not_run_is_refused(
    name: str, only: tuple[str, ...], named: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        select_steps(load_playbook(playbook_path(name)), only)


def test_a_traffic_check_with_no_traffic_is_refused() -> None:
    with pytest.raises(ValueError, match="RC301 need"):
        select_steps(load_playbook(playbook_path("validate")), ("RC301",), no_traffic=True)


@given(
    name=st.sampled_from(SHIPPED),
    only=st.lists(st.sampled_from(sorted(CATALOG)), unique=True, max_size=6),
    no_traffic=st.booleans(),
)
def test_selection_runs_only_what_was_asked(name: str, only: list[str], no_traffic: bool) -> None:
    original = load_playbook(playbook_path(name))
    try:
        playbook, skip = select_steps(original, tuple(only), no_traffic=no_traffic)
    except ValueError:
        runnable: set[str] = set()
        for step in original.steps:
            if step.checks is not None:
                runnable |= set(CATALOG) if step.checks.ids == "all" else set(step.checks.ids)
        assert (no_traffic and any(c in TRAFFIC for c in only)) or set(only) - runnable
        return
    for index, step in enumerate(playbook.steps):
        kind = step.kind()
        if no_traffic and kind not in ("collect", "checks"):
            assert index in skip, "--no-traffic ran a step that sends traffic or writes"
        if kind == "collect":
            assert index not in skip
        if step.checks is not None and index not in skip:
            ids = step_check_ids(step.checks)
            assert ids, "a checks step with nothing to run must be skipped"
            assert not only or set(ids) <= set(only)
            assert not no_traffic or not any(c in TRAFFIC for c in ids)
            if only and original.steps[index].checks.ids == "all":  # type: ignore[union-attr]
                assert ids == only
    assert all(reason.startswith(("--checks", "--no-traffic")) for reason in skip.values())


# ------------------------------------------------------------------------------------ CLI


def validate(*args: str) -> Any:
    return CliRunner().invoke(main, ["validate", str(LEAFSPINE), *args])


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("--checks", "RC999"), "'RC999'"),
        (("--checks", "RC001,nope"), "'NOPE'"),
        (("--checks", "RC001,"), "''"),
    ],
)
def test_unknown_check_exits_2_naming_the_option_and_the_known_ids(
    args: tuple[str, ...], shown: str
) -> None:
    done = validate(*args)
    assert done.exit_code == 2
    assert "'--checks'" in done.stderr and shown in done.stderr
    assert "RC001" in done.stderr and "RC301" in done.stderr  # the known IDs


def test_no_traffic_with_a_traffic_check_exits_2_naming_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "unused")
    done = validate("--no-traffic", "--checks", "RC301")
    assert done.exit_code == 2
    assert "'--checks'" in done.stderr and "--no-traffic" in done.stderr


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No switch is running here: collect steps succeed with nothing collected, and any
    traffic step that runs is recorded (and must not be)."""
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "unused")
    sent: list[str] = []

    def collect(self: PlaybookRunner, spec: Any) -> StepReport:
        from agent.intent.plan import build_plan

        self.collected = Collected(self.intent, build_plan(self.intent))
        return StepReport("collect", "collect", "success")

    def traffic(kind: str) -> Any:
        def run(self: PlaybookRunner, *args: Any) -> StepReport:
            sent.append(kind)
            return StepReport(kind, kind, "success")

        return run

    monkeypatch.setattr(PlaybookRunner, "_collect", collect)
    for kind in ("_probe", "_perftest", "_nccl", "_locate"):
        monkeypatch.setattr(PlaybookRunner, kind, traffic(kind))
    return sent


def test_no_traffic_sends_nothing_and_the_report_says_why(offline: list[str]) -> None:
    done = validate("--no-traffic", "-o", "json")
    report = json.loads(done.stdout)
    assert offline == [], "a traffic step ran under --no-traffic"
    skipped = {
        s["name"]: s["detail"]["reason"] for s in report["steps"] if s["status"] == "skipped"
    }
    assert len(skipped) == 3 and set(skipped.values()) == {"--no-traffic: this step sends traffic"}
    assert report["selection"] == {"checks": [], "no_traffic": True}
    assert not {c["check"] for c in report["checks"]} & set(TRAFFIC)
    assert report["probes"] == []


def test_checks_runs_only_those(offline: list[str]) -> None:
    done = validate("--checks", "rc003", "--checks", "RC001,RC003", "-o", "json")
    report = json.loads(done.stdout)
    assert offline == []
    assert {c["check"] for c in report["checks"]} <= {"RC001", "RC003"}
    assert report["selection"]["checks"] == ["RC003", "RC001"]


@pytest.mark.parametrize("output", ["table", "markdown", "junit"])
def test_every_format_says_why_a_step_was_skipped(offline: list[str], output: str) -> None:
    done = validate("--no-traffic", "-o", output)
    assert "--no-traffic: this step sends traffic" in done.stdout, done.stdout


# ------------------------------------------------------------------------ tables at 100


def long_report() -> Any:
    """A report with long step names, errors, check names and messages, as a 32-leaf
    fabric's validate gives."""
    from agent.observe.checks import CheckResult
    from agent.ops.playbooks import Report

    report = Report("validate", "pod-32-leaf", 0.0)
    report.steps = [
        StepReport("baseline (state and counters)", "collect", "success", {}, 12.5),
        StepReport("perftest line rate between RDMA hosts (skipped when no host declares an "
                   "rdma_device)", "perftest", "skipped",
                   {"reason": "--no-traffic: this step sends traffic"}),
        StepReport("all checks", "checks", "error", {"error": "leaf32.example.net:22: SSH "
                   "timed out after 30 s (the device did not answer)"}, 30.0),
    ]  # fmt: skip
    for leaf in range(1, 33):
        report.checks.append(
            CheckResult("RC007", "Headroom", f"leaf{leaf}", "failure",
                        [f"Ethernet1/{p} priority 3 headroom xoff: Expected: >= 124928 "
                         f"Actual: 105472" for p in (31, 32)],
                        "Every lossless port's PFC headroom is at least the minimum")
        )  # fmt: skip
    report.checks.append(CheckResult("RC010", "ClassifiedByDscpNotUdpPort", "spine1", "success"))
    return report


def test_validate_tables_fit_100_columns_and_keep_names_whole() -> None:
    from agent.app.playbook_report import render_table
    from common.conventions import console

    report = long_report()
    screen = console(width=100)
    with screen.capture() as captured:
        render_table(report, screen)
    text = captured.get()
    assert "…" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    cells = {c.strip() for line in text.splitlines() for c in line.split("│")}
    for result in report.checks:
        assert {result.check, result.device, result.status} <= cells
    assert "ClassifiedByDscpNotUdpPort" in cells  # a check name is never folded
    assert re.search(r"│ Ethernet1/31 priority 3 headroom", text)  # a message wraps at spaces
    assert "--no-traffic: this step sends" in text  # why the step was skipped

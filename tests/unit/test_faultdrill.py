"""The fault drill's verdict (agent/ops/faultdrill.py ``judge``): each lie it must catch.

The drill itself runs live in tests/lab/test_fault_drill.py; here the rules are pinned on
hand-made outcomes, one per way a broken rollout can be misreported.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from agent.ops.faultdrill import DrillError, Row, RowResult, judge, select_rows

OLD = {"s1": "old", "s2": "old"}


def outcome(**fields: Any) -> RowResult:
    base: dict[str, Any] = {"name": "row", "exit_code": 1, "expected_exit": 1}
    base.update(fields)
    return RowResult(**base)


@pytest.mark.parametrize(
    ("fields", "records", "problem"),
    [
        ({"exit_code": 0}, [], "exit 0, want 1"),
        ({"after_fault": {"s1": "mixed(3)", "s2": "old"}}, [], "s1 is mixed(3)"),
        ({"after_fault": {"s1": "old", "s2": "old"}, "reported": {"s1": "applied"}}, [],
         "s1 reported applied but is old"),
        ({"after_fault": {"s1": "new", "s2": "old"}, "reported": {"s1": "failed"},
          "audited": {"s1": "applied"}}, [], "s1 reported failed but changed to new"),
        ({"after_fault": {"s1": "old", "s2": "old"}, "audited": {"s1": "applied"}}, [],
         "audit says s1 applied but it is old"),
        ({"after_fault": {"s1": "new", "s2": "old"}}, [], "s1 changed with no audit record"),
        ({"after_fault": {"s1": "new", "s2": "old"}, "audited": {"s1": "failed"}}, [],
         "audit says s1 failed but it changed to new"),
        ({"after_fault": OLD}, [{"unparsable": '{"dev'}], "audit log has a torn line"),
    ],
    ids=["exit", "mixed", "reported-applied-old", "reported-failed-new", "audit-applied-old",
         "no-record", "audit-failed-new", "torn-line"],
)  # fmt: skip
def test_each_misreport_is_caught(
    fields: dict[str, Any], records: list[dict[str, Any]], problem: str
) -> None:
    result = outcome(**fields)
    judge(result, OLD, records)
    assert problem in result.problems


@pytest.mark.parametrize(
    ("fields"),
    [
        {"after_fault": OLD, "reported": {"s1": "failed", "s2": "skipped"},
         "audited": {"s1": "failed"}},
        {"exit_code": -9, "expected_exit": -9, "after_fault": {"s1": "new", "s2": "old"},
         "audited": {"s1": "intent"}},
        {"exit_code": 0, "expected_exit": 0, "after_fault": {"s1": "new", "s2": "new"},
         "reported": {"s1": "applied", "s2": "applied"},
         "audited": {"s1": "applied", "s2": "applied"}},
    ],
    ids=["refused-all-old", "killed-after-confirm", "recovered"],
)  # fmt: skip
def test_truthful_outcomes_pass(fields: dict[str, Any]) -> None:
    result = outcome(**fields)
    judge(result, OLD, [])
    assert result.problems == []


def test_unknown_row_names_are_refused() -> None:
    with pytest.raises(DrillError, match="unknown row"):
        select_rows(["kill nowhere"])
    assert [r.name for r in select_rows(["wrong credentials"])] == ["wrong credentials"]


def _knobs(row: Row) -> dict[str, Any]:
    """The fault knobs a row's inject writes to the canary's management plane."""
    written: dict[str, Any] = {}
    lab = SimpleNamespace(set_faults=lambda _switch, **given: written.update(given))
    assert row.inject is not None
    row.inject(SimpleNamespace(lab=lab, canary="s1"))  # type: ignore[arg-type]
    return written


@pytest.mark.parametrize(
    ("platform", "commit_line", "confirm_line"),
    [
        ("arista_eos", "commit timer 00:00:05", "configure session roce-agent-1 commit"),
        ("sonic", "sudo config apply-patch /tmp/roce-agent-1.json",
         "sudo config delete-checkpoint roce-agent-1"),
        ("cumulus_nvue", "nv config apply --confirm 5s -y", "nv config apply --confirm-yes"),
        ("cisco_nxos", "configure replace bootflash:roce-agent-1.cfg commit-timeout 30",
         "configure replace commit ; no checkpoint roce-agent-1"),
    ],
)  # fmt: skip
def test_each_platforms_faults_fire_on_its_own_commit_and_confirm(
    platform: str, commit_line: str, confirm_line: str
) -> None:
    rows = {r.name: r for r in select_rows(None, platform=platform)}
    knobs = {
        name: _knobs(rows[name])
        for name in ("ssh cut before commit", "ssh cut after confirm (reply lost)",
                     "mgmt plane restart in session")
    }  # fmt: skip
    assert re.search(knobs["ssh cut before commit"]["cut_on"], commit_line)
    assert not re.search(knobs["ssh cut before commit"]["cut_on"], confirm_line)
    assert re.search(knobs["ssh cut after confirm (reply lost)"]["cut_on"], confirm_line)
    assert not re.search(knobs["ssh cut after confirm (reply lost)"]["cut_on"], commit_line)
    assert re.search(knobs["mgmt plane restart in session"]["restart_on"], commit_line)


def test_a_platform_without_drill_rows_is_named() -> None:
    with pytest.raises(DrillError, match="no rows for platform 'linux_host'"):
        select_rows(None, platform="linux_host")

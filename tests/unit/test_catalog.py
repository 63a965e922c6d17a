"""`roce-agent rules` and `roce-agent checks`: the catalogues list everything `check` and
`validate` enforce, in each output format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.catalog import check_rows, summary
from agent.app.cli import main
from agent.intent.rules import rules_by_id
from agent.observe.checks import CATALOG, NEEDS_ORDER, needs
from agent.ops.playbooks import PLAYBOOKS, load_playbook, playbook_check_ids
from common.conventions import console

ROOT = Path(__file__).resolve().parents[2]
INTENT_SOURCES = sorted((ROOT / "agent" / "intent").glob("*.py"))


def invoke(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, list(args))
    return done.exit_code, done.stdout, done.stderr


def rule_ids_in_sources() -> set[str]:
    """Every IR0nn written in agent/intent/*.py: the rules `check` can report."""
    return {m for path in INTENT_SOURCES for m in re.findall(r"\bIR0\d\d\b", path.read_text())}


def test_every_rule_id_in_the_intent_code_is_listed() -> None:
    # Needs rules_by_id() to include the model-level rules (IR007, IR020, IR021): issue 29's
    # A2 part. Until it is merged this names the missing IDs.
    found = rule_ids_in_sources()
    assert found, "no IR0nn in agent/intent/*.py: the pattern is wrong"
    code, out, _ = invoke("rules", "-o", "json")
    assert code == 0
    listed = {row["id"] for row in json.loads(out)}
    assert found - listed == set(), (
        f"rules check enforces but `rules` does not list: {found - listed}"
    )


@pytest.mark.parametrize("output", ["table", "json", "markdown"])
def test_rules_in_every_format_name_every_rule(output: str) -> None:
    code, out, _ = invoke("rules", "-o", output)
    assert code == 0
    for rule_id in rules_by_id():
        assert rule_id in out
    if output == "markdown":
        assert out.startswith("| id | summary |\n|---|---|\n")


@pytest.mark.parametrize("output", ["table", "json", "markdown"])
def test_checks_in_every_format_name_every_check(output: str) -> None:
    code, out, _ = invoke("checks", "-o", output)
    assert code == 0
    for check_id, check in CATALOG.items():
        assert check_id in out and check.name() in out


def test_checks_json_says_what_each_needs_and_which_playbooks_run_it() -> None:
    code, out, _ = invoke("checks", "-o", "json")
    rows = {row["id"]: row for row in json.loads(out)}
    assert code == 0 and set(rows) == set(CATALOG)
    for check_id, row in rows.items():
        assert row["needs"] and set(row["needs"]) <= set(NEEDS_ORDER)
        assert row["summary"] == summary(CATALOG[check_id]) and "\n" not in row["summary"]
    # independently: read each shipped playbook and see that its checks name it
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        playbook = load_playbook(path)
        for check_id in playbook_check_ids(playbook):
            assert playbook.name in rows[check_id]["playbooks"]
    assert rows["RC301"]["needs"] == ["traffic"] and "validate" in rows["RC301"]["playbooks"]
    assert rows["RC104"]["playbooks"] == ["storm-drill"]  # a drill check: not in `ids: all`
    assert rows["RC202"]["needs"] == ["hosts"] and "host-preflight" in rows["RC202"]["playbooks"]


CASES = [
    # (check, what it needs)
    ("RC001", ("config",)),
    ("RC101", ("counters",)),
    ("RC104", ("counters", "traffic")),
    ("RC201", ("hosts",)),
    ("RC301", ("traffic",)),
]


@pytest.mark.parametrize(("check_id", "expected"), CASES)
def test_needs(check_id: str, expected: tuple[str, ...]) -> None:
    assert needs(check_id) == expected


def test_every_check_row_has_a_summary_ending_its_sentence() -> None:
    for row in check_rows():
        assert row["summary"].endswith((".", ")")), row


@pytest.mark.parametrize("command", ["rules", "checks"])
def test_bad_output_exits_2_naming_the_option(command: str) -> None:
    code, _, err = invoke(command, "-o", "yaml")
    assert code == 2 and "'-o' / '--output'" in err


@pytest.mark.parametrize("command", ["rules", "checks"])
def test_table_fits_100_columns_without_cutting(command: str) -> None:
    from agent.app import catalog

    if command == "rules":
        title, headers, rows = catalog.RULES_TITLE, catalog.RULE_HEADERS, catalog.rule_rows()
    else:
        title, headers, rows = catalog.CHECKS_TITLE, catalog.CHECK_HEADERS, catalog.check_rows()
    screen = console(width=100)
    with screen.capture() as captured:
        screen.print(catalog.catalog_table(title, headers, catalog.cells_of(headers, rows)))
    text = captured.get()
    assert "…" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    for row in rows:
        assert re.search(rf"│ {row['id']} +│", text), row["id"]  # whole, in its own cell


@pytest.mark.parametrize(
    "command", [["rules"], ["checks"], ["render"], ["validate"], ["run"], ["serve"], ["tune"]]
)
def test_help_has_examples_and_o(command: list[str]) -> None:
    code, out, _ = invoke(*command, "--help")
    assert code == 0 and "Examples:" in out
    if command[0] != "serve":  # serve prints no report: no format to choose
        assert "-o, --output" in out

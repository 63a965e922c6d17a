"""Renderings of a perftest verdict (agent.observe.perftest.report): Markdown, JUnit, table rows."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from agent.observe.perftest.acceptance import evaluate
from agent.observe.perftest.inputs import AcceptanceInput, LinkRun, NicDelta
from agent.observe.perftest.output import parse_stdout
from agent.observe.perftest.report import (
    TABLE_COLUMNS,
    render_junit,
    render_markdown,
    summary,
    table_rows,
)
from agent.observe.perftest.verdict import RuleOutcome, Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"


def incast() -> Verdict:
    links = tuple(
        LinkRun(host, "h3", 100e9, client_run=parse_stdout((DATA / name).read_text()))
        for host, name in (
            ("h1", "incast_unfair_h1_to_h3_25.10.stdout"),
            ("h2", "incast_unfair_h2_to_h3_25.10.stdout"),
            ("h4", "incast_unfair_h4_to_h3_25.10.stdout"),
        )
    )
    nics = (NicDelta("h3", "rxe0/1", {"rcvd_seq_err": 0}),)
    return evaluate(AcceptanceInput("incast", links, (3,), 3, nics=nics))


HOSTILE = "Couldn't connect to <h3> | \x1b[31m & \x00 ]]> `x`"


def hostile() -> Verdict:
    """A failed link whose error text came from a remote host."""
    return evaluate(
        AcceptanceInput("pairwise", (LinkRun("h1", "h3", 100e9, error=HOSTILE),), (3,), 3)
    )


def test_table_rows() -> None:
    rows = table_rows(incast())
    assert rows[0] == ("h1→h3", "h1", "h3", "44.10 Gb/s", "44.1", "100 Gb/s", "fail")
    assert rows[2] == ("h4→h3", "h4", "h3", "8.90 Gb/s", "8.9", "100 Gb/s", "fail")
    assert all(len(row) == len(TABLE_COLUMNS) for row in rows)


def test_table_rows_show_control_characters() -> None:
    verdict = hostile()
    link = replace(verdict.links[0], link="h1\x1b[2J→h3")
    (row,) = table_rows(replace(verdict, links=(link,)))
    assert row[0] == "h1\\x1b[2J→h3"
    assert row[3] == row[4] == "-"


def test_summary() -> None:
    verdict = incast()
    assert {f"{o.rule} {o.subject}" for o in verdict.unverified} == {
        "PT004 fabric",  # no switch counters
        "PT005 h3 rxe0/1",  # rxe counts no ECN marks
        "PT007 h1",  # no NIC counters from the senders
        "PT007 h2",
        "PT007 h4",
    }
    assert summary(verdict) == "perftest incast (write): FAIL, 1 failed, 5 unverified"


def test_markdown() -> None:
    text = render_markdown(incast())
    lines = text.splitlines()
    assert lines[0] == "## perftest incast (write): FAIL, 1 failed, 5 unverified"
    assert (
        "| link | client | server | measured | % of line rate | line rate | status | details |"
        in lines
    )
    assert any(
        line.startswith("| h4→h3 | h4 | h3 | 8.90 Gb/s | 8.9 | 100 Gb/s | fail |") for line in lines
    )
    assert any(line.startswith("| PT003 IncastFairness | h1+h2+h4→h3 | fail |") for line in lines)
    assert "- PT005 h3 rxe0/1" in lines
    # every table row has the header's number of cells
    table = [line for line in lines if line.startswith("| h")]
    assert all(line.count(" | ") == len(TABLE_COLUMNS) for line in table)


def test_markdown_keeps_hostile_text_inert() -> None:
    text = render_markdown(hostile())
    row = next(line for line in text.splitlines() if line.startswith("| h1→h3"))
    assert "\\<h3\\>" in row
    assert "\\|" in row
    assert "\\`x\\`" in row
    assert "\\&" in row
    assert "\x1b" not in text and "\x00" not in text
    assert "\\x1b" in row
    # the escaped pipe does not add a cell
    assert row.count(" | ") == len(TABLE_COLUMNS)


def test_junit_structure() -> None:
    root = ET.fromstring(render_junit(incast()))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 3 + len(incast().outcomes)
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == str(sum(c.find("failure") is not None for c in cases))
    assert suite.get("skipped") == str(sum(c.find("skipped") is not None for c in cases))
    by_name = {(c.get("classname"), c.get("name")): c for c in cases}
    fairness = by_name[("PT003.IncastFairness", "h1+h2+h4→h3")].find("failure")
    assert fairness is not None
    assert "Jain's fairness: Expected: >= 0.90 Actual: 0.789" in (fairness.text or "")
    unverified = by_name[("PT005.CnpWhereMarked", "h3 rxe0/1")].find("skipped")
    assert unverified is not None
    assert (unverified.get("message") or "").startswith("unverified: ")
    assert by_name[("PT002.IncastAggregate", "h1+h2+h4→h3")].find("failure") is None


def test_junit_survives_hostile_text() -> None:
    """Control characters XML cannot carry are shown as escapes; the rest is escaped."""
    document = render_junit(hostile())
    root = ET.fromstring(document)  # parses: no raw \x1b or \x00 in the XML
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    assert "Couldn't connect to <h3> | \\x1b[31m & \\x00 ]]> `x`" in (failure.text or "")
    assert "&lt;h3&gt;" in document


def test_junit_passing_outcome_keeps_its_notes() -> None:
    verdict = incast()
    note = RuleOutcome("PT005", "CnpWhereMarked", "h3", "pass", ("note: marked",), "d")
    root = ET.fromstring(render_junit(replace(verdict, outcomes=(note,))))
    out = root.find("testsuite/testcase[@classname='PT005.CnpWhereMarked']/system-out")
    assert out is not None and out.text == "note: marked"

"""Renderings of a perftest :class:`~agent.observe.perftest.verdict.Verdict`: Markdown, JUnit XML
and
the rows of a terminal table.

Messages carry text that came from remote hosts (perftest's error lines) and from the fabric
file: every renderer escapes it for its format, and the table rows are plain strings with
control characters shown as escapes (``agent.errors.printable``), never obeyed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from agent.errors import printable
from agent.intent.units import format_rate
from agent.observe.perftest.verdict import RuleOutcome, Verdict

TABLE_COLUMNS = ("link", "client", "server", "measured", "% of line rate", "line rate", "status")
# Characters XML 1.0 cannot carry even escaped (https://www.w3.org/TR/xml/#charsets).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def _gbps(bps: float | None) -> str:
    return "-" if bps is None else format_rate(bps)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table_rows(verdict: Verdict) -> list[tuple[str, ...]]:
    """One row per link (direction) in :data:`TABLE_COLUMNS` order, for a rich table."""
    return [
        tuple(
            printable(cell)
            for cell in (
                row.link,
                row.client,
                row.server,
                _gbps(row.measured_bps),
                _percent(row.percent_of_line_rate),
                format_rate(row.line_rate_bps, trim=True),
                row.status,
            )
        )
        for row in verdict.links
    ]


def summary(verdict: Verdict) -> str:
    """One line: the scenario, the verdict, and how many outcomes could not be verified."""
    line = f"perftest {verdict.scenario} ({verdict.test}): {verdict.status.upper()}"
    if verdict.failures:
        line += f", {len(verdict.failures)} failed"
    if verdict.unverified:
        line += f", {len(verdict.unverified)} unverified"
    return line


# --------------------------------------------------------------------------- Markdown


def _md(text: str) -> str:
    """Plain text in a Markdown table cell: Markdown and HTML inert, one line."""
    text = printable(text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def render_markdown(verdict: Verdict, causes: Sequence[str] = (), notes: Sequence[str] = ()) -> str:
    lines = [f"## {_md(summary(verdict))}", ""]
    lines += [
        "| " + " | ".join(TABLE_COLUMNS) + " | details |",
        "|---" * (len(TABLE_COLUMNS) + 1) + "|",
    ]
    for row, cells in zip(verdict.links, table_rows(verdict), strict=True):
        details = "<br>".join(_md(m) for m in row.messages)
        lines.append("| " + " | ".join(_md(c) for c in cells) + f" | {details} |")
    lines += ["", "| rule | subject | status | details |", "|---|---|---|---|"]
    for outcome in verdict.outcomes:
        details = "<br>".join(_md(m) for m in outcome.messages)
        lines.append(
            f"| {outcome.rule} {outcome.name} | {_md(outcome.subject)} | {outcome.status} "
            f"| {details} |"
        )
    if verdict.unverified:
        lines += ["", "Unverified (not a failure, not a pass):", ""]
        lines += [f"- {outcome.rule} {_md(outcome.subject)}" for outcome in verdict.unverified]
    for title, items in (("Causes", causes), ("Notes", notes)):
        if items:
            lines += ["", f"{title}:", ""] + [f"- {_md(item)}" for item in items]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- JUnit


def _xml(text: str) -> str:
    """Text XML can carry; ElementTree escapes & < > and quotes itself."""
    return _XML_INVALID.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _Suite:
    """A JUnit testsuite being filled, and its counts of tests, failures and skips."""

    def __init__(self, suite: ET.Element) -> None:
        self.suite = suite
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(
        self, classname: str, name: str, status: str, messages: tuple[str, ...], description: str
    ) -> None:
        case = ET.SubElement(self.suite, "testcase", classname=_xml(classname), name=_xml(name))
        self.counts["tests"] += 1
        text = _xml("\n".join(messages))
        if status == "fail":
            self.counts["failures"] += 1
            ET.SubElement(case, "failure", message=_xml(description)).text = text
        elif status == "unverified":
            self.counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_xml(f"unverified: {description}")).text = text
        elif messages:
            ET.SubElement(case, "system-out").text = text


def render_junit(verdict: Verdict, causes: Sequence[str] = (), notes: Sequence[str] = ()) -> str:
    """One testcase per link (direction) and one per rule outcome; unverified ones are
    skipped with the reason, as CI systems show JUnit. Causes and notes go to the suite's
    system-out."""
    suites = ET.Element("testsuites", name="roce-agent perftest")
    suite = ET.SubElement(suites, "testsuite", name=_xml(f"perftest {verdict.scenario}"))
    cases = _Suite(suite)
    for row in verdict.links:
        cases.case("perftest.link", row.link, row.status, row.messages,
                   f"{row.link}: {_gbps(row.measured_bps)}")  # fmt: skip
    outcome: RuleOutcome
    for outcome in verdict.outcomes:
        cases.case(f"{outcome.rule}.{outcome.name}", outcome.subject, outcome.status,
                   outcome.messages, outcome.description)  # fmt: skip
    for key, value in cases.counts.items():
        suite.set(key, str(value))
    if causes or notes:
        lines = [f"cause: {c}" for c in causes] + [f"note: {n}" for n in notes]
        ET.SubElement(suite, "system-out").text = _xml("\n".join(lines))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)

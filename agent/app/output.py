"""How a command writes its result for tools, CI and tickets: JSON, JUnit XML and Markdown.

Each format has one shape for every command, made here:

- JSON: indented by two spaces, one object or list per run (:func:`echo_json`,
  :func:`json_text`).
- JUnit XML (the schema Jenkins, GitLab and GitHub's test reporters read,
  https://github.com/testmoapp/junitxml): a ``<testsuites>`` root named for the command, one
  ``<testsuite>`` per group of results carrying its counts (``tests``, ``failures``,
  ``errors``, ``skipped``), one ``<testcase>`` per result; a result that did not pass has one
  ``<failure>``, ``<error>`` or ``<skipped>`` child with a ``message`` and the details as its
  text (:func:`junit_xml`).
- Markdown: GitHub tables (https://github.github.com/gfm/#tables-extension-) whose cells are
  escaped here, so a pipe or a newline in a device's text never breaks a row
  (:func:`markdown_table`).
- ``--report-file``: its suffix picks the format (:func:`write_report_file`).

What a command's result *is* in each format (which results are test cases, which columns a
table has) stays with the command; only the syntax lives here. Imports nothing heavy: the
twin's ``-o json`` path goes through it (issue #31).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

# ----------------------------------------------------------------------------- JSON


def json_text(data: object) -> str:
    """``data`` as the JSON every command writes, ending in a newline: exactly what
    ``json.dumps(data, indent=2)`` writes.

    Written here because ``json.dumps`` with an indent encodes every item in Python, and a twin
    report holds thousands of sampled numbers: a list or mapping whose items are all numbers,
    strings, booleans or null goes to the json module's C encoder in one call, its separator
    carrying the line break and the indent; only containers of containers are walked here.
    ``tests/unit/test_output_json.py`` compares the text with ``json.dumps``'s, byte for byte.
    """
    return _indented(data, "\n", set()) + "\n"


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _indented(value: object, newline: str, path: set[int]) -> str:
    """``value`` at the indent that ``newline`` ends with; ``path``: the containers above it."""
    if isinstance(value, list | tuple | dict):
        if not value:
            return "{}" if isinstance(value, dict) else "[]"
        if id(value) in path:
            raise ValueError("Circular reference detected")  # json's own words
        inner = newline + "  "
        items = value.values() if isinstance(value, dict) else value
        if all(type(item) in _ATOMS for item in items):
            text = json.dumps(value, separators=("," + inner, ": "))
            return text[0] + inner + text[1:-1] + newline + text[-1]
        path.add(id(value))
        if isinstance(value, dict):
            parts = [f"{_key(k)}: {_indented(v, inner, path)}" for k, v in value.items()]
            text = "{" + inner + ("," + inner).join(parts) + newline + "}"
        else:
            parts = [_indented(item, inner, path) for item in value]
            text = "[" + inner + ("," + inner).join(parts) + newline + "]"
        path.discard(id(value))
        return text
    return json.dumps(value)  # an atom; anything else raises json's own TypeError


def _key(key: object) -> str:
    """A mapping's key as json writes it (a number, boolean or null becomes a string)."""
    if type(key) is str:
        return json.dumps(key)
    return json.dumps({key: None})[1 : -len(": null}")]


def echo_json(data: object) -> None:
    """Print ``data`` as JSON on stdout."""
    click.echo(json_text(data), nl=False)


# ----------------------------------------------------------------------------- JUnit

Outcome = Literal["passed", "failure", "error", "skipped"]


@dataclass(frozen=True)
class JUnitCase:
    """One result as a test case. ``message`` is the outcome element's attribute (a line a CI
    server shows in its list), ``detail`` its text (shown when the case is opened)."""

    classname: str
    name: str
    outcome: Outcome = "passed"
    message: str = ""
    detail: str | None = None
    time_s: float | None = None


@dataclass(frozen=True)
class JUnitSuite:
    """A group of results (a playbook run on a fabric, a drift run) as one test suite."""

    name: str
    cases: Sequence[JUnitCase]

    def count(self, outcome: Outcome) -> int:
        return sum(case.outcome == outcome for case in self.cases)


def junit_xml(name: str, suites: Iterable[JUnitSuite]) -> str:
    """The JUnit document: ``<testsuites name>`` with a ``<testsuite>`` per suite."""
    # ElementTree only when a document is written: the JSON paths never load it.
    from xml.etree import ElementTree

    root = ElementTree.Element("testsuites", name=name)
    for suite in suites:
        element = ElementTree.SubElement(root, "testsuite", name=suite.name)
        element.set("tests", str(len(suite.cases)))
        element.set("failures", str(suite.count("failure")))
        element.set("errors", str(suite.count("error")))
        element.set("skipped", str(suite.count("skipped")))
        for case in suite.cases:
            _case_element(element, case)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _case_element(suite: Element, case: JUnitCase) -> None:
    from xml.etree import ElementTree

    element = ElementTree.SubElement(suite, "testcase", classname=case.classname, name=case.name)
    if case.time_s is not None:
        element.set("time", f"{case.time_s:.3f}")
    if case.outcome != "passed":
        outcome = ElementTree.SubElement(element, case.outcome, message=case.message)
        outcome.text = case.detail


# ----------------------------------------------------------------------------- Markdown


class Markdown(str):
    """Text that is already Markdown (a code span, cells joined with ``<br>``): a table
    writes it as it is; any other cell is escaped with :func:`md_cell`."""

    __slots__ = ()


def md_cell(text: object) -> Markdown:
    """Plain text as one table cell: a pipe would end the cell, a newline the row."""
    return Markdown(str(text).replace("|", "\\|").replace("\n", "<br>"))


def md_code(text: str) -> Markdown:
    """Text as inline code in a cell (a name such as ``*leaf*`` or ``[x]`` stays literal);
    empty text stays empty."""
    text = text.replace("|", "\\|").replace("\n", " ")
    if not text:
        return Markdown("")
    # a backtick in the text needs a longer fence (https://github.github.com/gfm/#code-spans)
    return Markdown(f"`` {text} ``" if "`" in text else f"`{text}`")


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], *, right: Collection[int] = ()
) -> list[str]:
    """The lines of a table: the header, its rule (columns at the indexes in ``right``
    aligned right), a line per row. A cell that is not :class:`Markdown` is escaped."""
    rule = "".join("---:|" if index in right else "---|" for index in range(len(header)))
    lines = [_row(header), "|" + rule]
    lines += [_row(row) for row in rows]
    return lines


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(c if isinstance(c, Markdown) else md_cell(c) for c in cells) + " |"


# ----------------------------------------------------------------------------- report files

FORMAT_BY_SUFFIX = {".xml": "junit", ".md": "markdown", ".json": "json"}


def write_report_file(
    path: Path, renderers: Mapping[str, Callable[[], str]], fallback: str = "json"
) -> None:
    """Write the result to ``path`` in the format its suffix names (.xml JUnit, .md
    Markdown, .json JSON), else in ``fallback``."""
    path.write_text(renderers[FORMAT_BY_SUFFIX.get(path.suffix, fallback)]())

"""A playbook run's :class:`~agent.ops.playbooks.Report` in every format ``validate`` and
``run`` print: tables for people (the steps, a fault drill's matrix, the checks, an ECN
sweep), JSON for tools, JUnit for CI and Markdown for tickets (their syntax is
:mod:`agent.app.output`'s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from agent.app.output import (
    JUnitCase,
    JUnitSuite,
    Outcome,
    json_text,
    junit_xml,
    markdown_table,
)
from agent.errors import printable
from agent.intent.units import format_rate
from agent.observe.checks import CheckResult
from agent.ops.playbooks import Report, StepReport
from common.conventions import add_column
from common.conventions import table as folding_table

SKIPPED_AFTER_FAILURE = "not run: an earlier step failed"


def verdict(report: Report) -> str:
    return "PASS" if report.passed else "FAIL"


def _note(step: StepReport) -> str:
    """What the steps table says beside a step: its error, or why it was skipped."""
    if not isinstance(step.detail, dict):
        return ""
    if step.status == "skipped":
        return str(step.detail.get("reason", SKIPPED_AFTER_FAILURE))
    return str(step.detail.get("error", ""))


def _matrices(report: Report) -> Iterator[tuple[StepReport, list[dict[str, Any]]]]:
    """The steps that carry a table of their own (the fault drill's matrix), with it."""
    for step in report.steps:
        matrix = step.detail.get("matrix") if isinstance(step.detail, dict) else None
        if matrix:
            yield step, matrix


# ----------------------------------------------------------------------------- JSON


def render_json(report: Report) -> str:
    return json_text(report.as_dict())


# ----------------------------------------------------------------------------- JUnit


def render_junit(report: Report) -> str:
    """One test case per step and per check result."""
    cases = [_step_case(step) for step in report.steps]
    cases += [_check_case(result) for result in report.checks]
    suite = JUnitSuite(f"{report.playbook} {report.fabric}", cases)
    return junit_xml(f"roce-agent {report.playbook}", [suite])


def _step_case(step: StepReport) -> JUnitCase:
    case = JUnitCase(f"step.{step.kind}", step.name, time_s=step.duration_s)
    if step.status == "failure":
        return replace(case, outcome="failure", message="step failed",
                       detail=json.dumps(step.detail))  # fmt: skip
    if step.status == "error":
        return replace(case, outcome="error", message=str(step.detail.get("error", "")))
    if step.status == "skipped":
        reason = step.detail.get("reason") if isinstance(step.detail, dict) else None
        return replace(case, outcome="skipped", message=reason or SKIPPED_AFTER_FAILURE)
    return case


# A check's status as JUnit says it. unverified: the source could not be read, which JUnit
# can only call an error.
_CHECK_OUTCOMES: dict[str, Outcome] = {
    "failure": "failure",
    "error": "error",
    "unverified": "error",
    "skipped": "skipped",
}


def _check_case(result: CheckResult) -> JUnitCase:
    case = JUnitCase(f"{result.check}.{result.name}", result.device)
    outcome = _CHECK_OUTCOMES.get(result.status)
    text = "\n".join(result.messages)
    if outcome is None:
        return case
    if outcome == "skipped":
        return replace(case, outcome=outcome, message=text or "skipped")
    message = "unverified" if result.status == "unverified" else result.description
    return replace(case, outcome=outcome, message=message, detail=text)


# ----------------------------------------------------------------------------- Markdown


def render_markdown(report: Report) -> str:
    lines = [f"## roce-agent {report.playbook}: {verdict(report)} (fabric {report.fabric})", ""]
    lines += markdown_table(
        ("step", "status", "duration", "note"),
        [(s.name, s.status, f"{s.duration_s:.1f} s", _note(s)) for s in report.steps],
    )
    lines += _transport_lines(report)
    lines += _perftest_lines(report)
    if report.checks:
        lines.append("")
        lines += markdown_table(
            ("check", "device", "status", "details"),
            [(f"{r.check} {r.name}", r.device, r.status, "\n".join(r.messages))
             for r in report.checks],
        )  # fmt: skip
    for _, matrix in _matrices(report):  # e.g. the fault drill's
        lines.append("")
        lines += markdown_table(list(matrix[0]), [list(row.values()) for row in matrix])
    lines += _recommendation_lines(report)
    return "\n".join(lines) + "\n"


def _transport_lines(report: Report) -> list[str]:
    """Which UDP port the probes used (not 4791 on RDMA hosts), and why."""
    ports = [
        f"- {s.name}: probes on UDP {t['udp_port']}: {t['reason']}"
        for s in report.steps
        if isinstance(s.detail, dict) and (t := s.detail.get("transport"))
    ]
    return ["", *ports] if ports else []


def _perftest_lines(report: Report) -> list[str]:
    """Per perftest step: each link's rate against its line rate, then the causes."""
    lines: list[str] = []
    for step in report.steps:
        if step.kind != "perftest":
            continue
        verdict = step.detail.get("verdict")
        if isinstance(verdict, dict):
            lines += ["", f"- {step.name}: {verdict['status'].upper()}"]
            lines += [f"  - {link['link']}: {_link_rate(link)}, {link['status']}"
                      for link in verdict["links"]]  # fmt: skip
            lines += [f"  - cause: {cause}" for cause in step.detail.get("causes", [])]
        elif step.status == "skipped":
            lines += ["", f"- {step.name}: skipped: {step.detail.get('reason', '')}"]
    return lines


def _link_rate(link: dict[str, Any]) -> str:
    measured = link["measured_bps"]
    if measured is None:
        return "no measurement"
    return (
        f"{format_rate(measured)} ({link['percent_of_line_rate']:.1f} % of "
        f"{format_rate(link['line_rate_bps'], trim=True)})"
    )


def _recommendation_lines(report: Report) -> list[str]:
    best = (report.recommendation or {}).get("recommended")
    if not best:
        return []
    return [
        "",
        "Recommended ECN thresholds: "
        f"{best['min_threshold']}-{best['max_threshold']} B @ {best['max_probability']} %",
    ]


# ----------------------------------------------------------------------------- tables


def render_table(report: Report, out: Console) -> None:
    """The report as tables whose cells fold to the console's width (100 columns and up:
    names and IDs stay whole, long messages wrap)."""
    steps = folding_table(f"{report.playbook} on {report.fabric}", "step", "status")
    add_column(steps, "duration", justify="right", no_wrap=True)
    add_column(steps, "error / why skipped")
    for step in report.steps:
        steps.add_row(step.name, step.status, f"{step.duration_s:.1f} s", _note(step))
    out.print(steps)
    for step, matrix in _matrices(report):  # e.g. the fault drill's
        drill = folding_table(step.name, *matrix[0])
        for row in matrix:
            drill.add_row(*(str(v) for v in row.values()))
        out.print(drill)
    if report.checks:
        out.print(_checks_table(report))
    if report.recommendation:
        render_sweep(report.recommendation, out)
    if report.rolled_back:
        out.print(
            "rolled back: " + ", ".join(f"{r.device} ({r.result})" for r in report.rolled_back)
        )
    out.print(f"{report.playbook}: {verdict(report)}")


def _checks_table(report: Report) -> Table:
    checks = folding_table("checks")
    # The ID and the device never break (RC101, leaf12); the check's name may fold.
    add_column(checks, "check", no_wrap=True)
    add_column(checks, "name", min_width=8)
    add_column(checks, "device", no_wrap=True)
    add_column(checks, "status", no_wrap=True)
    add_column(checks, "details", ratio=1, min_width=20)
    for result in report.checks:
        checks.add_row(
            result.check,
            result.name,
            printable(result.device),
            result.status,
            printable("\n".join(result.messages), keep_newlines=True),
        )
    return checks


# ----------------------------------------------------------------------------- ECN sweep

# The sweep's table: the lab's medians, then the twin's prediction of the same incast
# (every run's numbers and the absolute counts are in the JSON).
_SWEEP_COLUMNS = (("min", "min_threshold"), ("max", "max_threshold"), ("prob %", "max_probability"),
                  ("lost", "lost"), ("PFC frames", "pfc_frames"), ("CNPs", "cnps"),
                  ("runs w/ loss", "runs_with_loss"))  # fmt: skip
# Headers on several lines so that no column is wider than its numbers need (the sweep's 14
# columns then fit 100 columns of terminal).
_SWEEP_HEADERS = {"runs w/ loss": "runs\nw/ loss", "PFC frames": "PFC\nframes", "min": "min B",
                  "max": "max B"}  # fmt: skip
_SWEEP_FRACTIONS = (("paused", "paused_fraction"), ("CE", "ce_fraction"),
                    ("goodput", "goodput_fraction"))  # fmt: skip
_SHORT = {"rpg_time_reset": "T", "rpg_ai_rate": "AI", "rpg_hai_rate": "HAI",
          "paused_fraction": "paused", "ce_fraction": "CE",
          "goodput_fraction": "goodput"}  # fmt: skip


def _cell(value: object) -> str:
    # Medians of whole counts come back as floats (6000000.0): print them as counts.
    if isinstance(value, float):
        return f"{value:.0f}" if value >= 1000 else f"{value:g}"
    return str(value)


def _ecn(row: dict[str, Any]) -> str:
    low, high = row["min_threshold"] / 1000, row["max_threshold"] / 1000
    return f"{low:g}-{high:g} @{row['max_probability']}"


def _short(change: str | None) -> str:
    """'rpg_time_reset 15, rpg_hai_rate 40' as 'T 15, HAI 40' (the JSON keeps the names)."""
    for name, short in _SHORT.items():
        change = (change or "").replace(name, short)
    return change or ""


def _percent(value: float) -> str:
    return f"{value:.1%}".removesuffix("%")


@dataclass(frozen=True)
class _SweepLayout:
    """Which column groups a sweep's table has: named settings (current, recommended,
    neighbours, or DCQCN of their own) with their ECN and DCQCN, the twin's fractions beside
    the lab's, and whether the twin agreed."""

    named: bool
    with_twin: bool
    agreement: bool

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> _SweepLayout:
        with_twin = bool(rows) and "twin" in rows[0]
        return cls(
            named=any(row.get("name") or row.get("dcqcn_change") for row in rows),
            with_twin=with_twin,
            agreement=with_twin and "agreement" in rows[0],
        )

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        if not self.named:
            return _SWEEP_COLUMNS
        # a named setting's thresholds are in its own "ECN" column
        return tuple(c for c in _SWEEP_COLUMNS if c[0] not in ("min", "max", "prob %"))

    def add_columns(self, sweep: Table) -> None:
        if self.named:
            add_column(sweep, "setting", no_wrap=True)  # names whole (rich shrinks the widest)
            add_column(sweep, "ECN KB\n@P %", no_wrap=True)  # a threshold pair split misreads
            add_column(sweep, "DCQCN")
        for header in self.headers():
            # numbers never wrap: rich narrows the widest wrapping columns first, the words
            add_column(sweep, header, justify="right", no_wrap=True)
        if self.agreement:
            add_column(sweep, "twin\nwithin\n±15 %")

    def headers(self) -> list[str]:
        """Headers that wrap at their spaces into narrow columns; fractions are in %, said
        in the header, so the cells are bare numbers."""
        headers = [_SWEEP_HEADERS.get(title, title) for title, _ in self.columns]
        headers += [f"lab\n{title}\n%" for title, _ in _SWEEP_FRACTIONS]
        if self.with_twin:
            headers += [f"twin\n{title}\n%" for title, _ in _SWEEP_FRACTIONS]
        return headers

    def cells(self, row: dict[str, Any]) -> list[str]:
        cells = []
        if self.named:
            cells += [row.get("name") or "", _ecn(row), _short(row.get("dcqcn_change"))]
        cells += [_cell(row[key]) for _, key in self.columns]
        cells += [_percent(row[key]) for _, key in _SWEEP_FRACTIONS]
        if self.with_twin:
            cells += [_percent(row["twin"][key]) for _, key in _SWEEP_FRACTIONS]
        if self.agreement:
            off = [_SHORT.get(m, m) for m, ok in row["agreement"].items() if not ok]
            cells.append("all" if not off else "not " + ", ".join(off))
        return cells


def render_sweep(recommendation: dict[str, Any], out: Console) -> None:
    rows = recommendation["candidates"]
    layout = _SweepLayout.of(rows)
    title = "ECN sweep: lab (median of runs)" + (" | twin" if layout.with_twin else "")
    # One bar between columns and no padding: with padding and edges the sweep's up to 14
    # columns would not fit 100 columns of terminal.
    sweep = folding_table(title, box=box.MINIMAL, padding=(0, 0), show_edge=False)
    layout.add_columns(sweep)
    for row in rows:
        sweep.add_row(*(printable(c) for c in layout.cells(row)))
    out.print(sweep)
    _sweep_footer(recommendation, layout.named, out)


def _sweep_footer(recommendation: dict[str, Any], named: bool, console: Console) -> None:
    """The legend, the check's verdict, and the lab's and the twin's picks."""
    if named:
        console.print("DCQCN: what differs from the fabric's; T = rpg_time_reset (µs), AI / HAI "
                      "= rpg_ai_rate / rpg_hai_rate (Mb/s)", markup=False)  # fmt: skip
    check = recommendation.get("check")
    if check:
        passed = "PASS" if check["passed"] else "FAIL: " + "; ".join(check["reasons"])
        console.print(f"check of the recommendation: {passed}", markup=False)
    lab_label = "best in the lab" if named else "recommended"  # "recommended" names a setting
    for label, key in ((lab_label, "recommended"), ("twin would pick", "twin_recommended")):
        if key in recommendation:
            console.print(_pick_line(label, recommendation[key]))


_PICK_KEYS = ("name", "min_threshold", "max_threshold", "max_probability", "dcqcn_change")


def _pick_line(label: str, best: dict[str, Any] | None) -> str:
    shown = {k: best[k] for k in _PICK_KEYS if best.get(k) is not None} if best else None
    return f"{label}: {shown}" if shown else f"{label}: none (zero loss above the goodput floor)"

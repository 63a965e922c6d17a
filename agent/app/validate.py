"""``roce-agent validate`` and ``roce-agent run``: playbooks with reports for people and CI."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

from agent.app.support import EXIT_ERROR, EXIT_FAILED, FABRIC, handle_errors
from agent.device.push import state_dir as resolve_state_dir
from agent.errors import AgentError, printable
from agent.intent.loader import load_fabric
from agent.intent.units import format_rate
from agent.observe.checks import CATALOG
from agent.ops.playbooks import (
    PlaybookRunner,
    Report,
    StepReport,
    load_playbook,
    playbook_path,
    select_steps,
)
from common.conventions import add_column, console, examples, output_option
from common.conventions import table as folding_table

FORMATS = ("table", "json", "junit", "markdown")
HOST_PREFLIGHT = "host-preflight"  # playbooks/host-preflight.yml: `validate --hosts-only`


def render_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2)


def render_junit(report: Report) -> str:
    """One testcase per check result and per step, as CI systems show JUnit."""
    suites = ET.Element("testsuites", name=f"roce-agent {report.playbook}")
    suite = ET.SubElement(suites, "testsuite", name=f"{report.playbook} {report.fabric}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for step in report.steps:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"step.{step.kind}",
            name=step.name,
            time=str(step.duration_s),
        )
        counts["tests"] += 1
        if step.status == "failure":
            counts["failures"] += 1
            ET.SubElement(case, "failure", message="step failed").text = json.dumps(step.detail)
        elif step.status == "error":
            counts["errors"] += 1
            ET.SubElement(case, "error", message=str(step.detail.get("error", "")))
        elif step.status == "skipped":
            counts["skipped"] += 1
            reason = step.detail.get("reason") if isinstance(step.detail, dict) else None
            ET.SubElement(case, "skipped", message=reason or "not run: an earlier step failed")
    for result in report.checks:
        case = ET.SubElement(
            suite, "testcase", classname=f"{result.check}.{result.name}", name=result.device
        )
        counts["tests"] += 1
        text = "\n".join(result.messages)
        if result.status == "failure":
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=result.description).text = text
        elif result.status in ("error", "unverified"):
            # unverified: the source could not be read, which JUnit can only call an error
            counts["errors"] += 1
            message = result.description if result.status == "error" else "unverified"
            ET.SubElement(case, "error", message=message).text = text
        elif result.status == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=text or "skipped")
    for key, value in counts.items():
        suite.set(key, str(value))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def render_markdown(report: Report) -> str:
    verdict = "PASS" if report.passed else "FAIL"
    lines = [f"## roce-agent {report.playbook}: {verdict} (fabric {report.fabric})", ""]
    lines += ["| step | status | duration | note |", "|---|---|---|---|"]
    lines += [
        f"| {s.name} | {s.status} | {s.duration_s:.1f} s | {_md(_note(s))} |" for s in report.steps
    ]
    ports = [  # which UDP port the probes used (not 4791 on RDMA hosts), and why
        f"- {s.name}: probes on UDP {t['udp_port']}: {t['reason']}"
        for s in report.steps
        if isinstance(s.detail, dict) and (t := s.detail.get("transport"))
    ]
    lines += ["", *ports] if ports else []
    lines += _perftest_lines(report)
    if report.checks:
        lines += ["", "| check | device | status | details |", "|---|---|---|---|"]
        for result in report.checks:
            details = "<br>".join(m.replace("|", "\\|") for m in result.messages)
            lines.append(
                f"| {result.check} {result.name} | {result.device} | {result.status} | {details} |"
            )
    for step in report.steps:  # e.g. the fault drill's matrix
        matrix = step.detail.get("matrix") if isinstance(step.detail, dict) else None
        if matrix:
            lines += ["", "| " + " | ".join(matrix[0]) + " |", "|---" * len(matrix[0]) + "|"]
            lines += [
                "| " + " | ".join(str(v).replace("|", "\\|") for v in row.values()) + " |"
                for row in matrix
            ]
    if report.recommendation and report.recommendation.get("recommended"):
        best = report.recommendation["recommended"]
        lines += [
            "",
            "Recommended ECN thresholds: "
            f"{best['min_threshold']}-{best['max_threshold']} B @ {best['max_probability']} %",
        ]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """A Markdown table cell: a pipe would end the cell, a newline the row."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def _perftest_lines(report: Report) -> list[str]:
    """Per perftest step: each link's rate against its line rate, then the causes."""
    lines: list[str] = []
    for step in report.steps:
        verdict = step.detail.get("verdict") if step.kind == "perftest" else None
        if not isinstance(verdict, dict):
            if step.kind == "perftest" and step.status == "skipped":
                lines += ["", f"- {step.name}: skipped: {step.detail.get('reason', '')}"]
            continue
        lines += ["", f"- {step.name}: {verdict['status'].upper()}"]
        for link in verdict["links"]:
            measured = link["measured_bps"]
            rate = "no measurement" if measured is None else (
                f"{format_rate(measured)} ({link['percent_of_line_rate']:.1f} % of "
                f"{format_rate(link['line_rate_bps'], trim=True)})"
            )  # fmt: skip
            lines.append(f"  - {link['link']}: {rate}, {link['status']}")
        lines += [f"  - cause: {cause}" for cause in step.detail.get("causes", [])]
    return lines


def _cell(value: object) -> str:
    # Medians of whole counts come back as floats (6000000.0): print them as counts.
    if isinstance(value, float):
        return f"{value:.0f}" if value >= 1000 else f"{value:g}"
    return str(value)


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


def _ecn(row: dict[str, Any]) -> str:
    low, high = row["min_threshold"] / 1000, row["max_threshold"] / 1000
    return f"{low:g}-{high:g} @{row['max_probability']}"


def _short(change: str | None) -> str:
    """'rpg_time_reset 15, rpg_hai_rate 40' as 'T 15, HAI 40' (the JSON keeps the names)."""
    for name, short in _SHORT.items():
        change = (change or "").replace(name, short)
    return change or ""


def _compact(title: str) -> Table:
    """A folding table with one bar between columns and no padding: the sweep has up to 14
    columns, which with padding and edges would not fit 100 columns of terminal."""
    return folding_table(title, box=box.MINIMAL, padding=(0, 0), show_edge=False)


def _sweep_headers(columns: tuple[tuple[str, str], ...], with_twin: bool) -> list[str]:
    """Headers that wrap at their spaces into narrow columns; fractions are in %, said in
    the header, so the cells are bare numbers."""
    headers = [_SWEEP_HEADERS.get(title, title) for title, _ in columns]
    headers += [f"lab\n{title}\n%" for title, _ in _SWEEP_FRACTIONS]
    if with_twin:
        headers += [f"twin\n{title}\n%" for title, _ in _SWEEP_FRACTIONS]
    return headers


def _percent(value: float) -> str:
    return f"{value:.1%}".removesuffix("%")


def render_sweep(recommendation: dict[str, Any], out: Console) -> None:
    rows = recommendation["candidates"]
    with_twin = bool(rows) and "twin" in rows[0]
    sweep = _compact("ECN sweep: lab (median of runs)" + (" | twin" if with_twin else ""))
    named = any(row.get("name") or row.get("dcqcn_change") for row in rows)
    columns: tuple[tuple[str, str], ...] = _SWEEP_COLUMNS
    if named:  # settings with names (current, recommended, neighbours) or DCQCN of their own
        add_column(sweep, "setting", no_wrap=True)  # names whole (rich shrinks the widest first)
        add_column(sweep, "ECN KB\n@P %", no_wrap=True)  # a threshold pair split misreads
        add_column(sweep, "DCQCN")
        columns = tuple(c for c in _SWEEP_COLUMNS if c[0] not in ("min", "max", "prob %"))
    for header in _sweep_headers(columns, with_twin):
        # numbers never wrap: rich narrows the widest wrapping columns first, the words
        add_column(sweep, header, justify="right", no_wrap=True)
    agreement = with_twin and "agreement" in rows[0]
    if agreement:
        add_column(sweep, "twin\nwithin\n±15 %")
    for row in rows:
        cells = [row.get("name") or "", _ecn(row), _short(row.get("dcqcn_change"))] if named else []
        cells += [_cell(row[key]) for _, key in columns]
        cells += [_percent(row[key]) for _, key in _SWEEP_FRACTIONS]
        if with_twin:
            cells += [_percent(row["twin"][key]) for _, key in _SWEEP_FRACTIONS]
        if agreement:
            off = [_SHORT.get(m, m) for m, ok in row["agreement"].items() if not ok]
            cells.append("all" if not off else "not " + ", ".join(off))
        sweep.add_row(*(printable(c) for c in cells))
    out.print(sweep)
    _sweep_footer(recommendation, named, out)


def _sweep_footer(recommendation: dict[str, Any], named: bool, console: Console) -> None:
    """The legend, the check's verdict, and the lab's and the twin's picks."""
    if named:
        console.print("DCQCN: what differs from the fabric's; T = rpg_time_reset (µs), AI / HAI "
                      "= rpg_ai_rate / rpg_hai_rate (Mb/s)", markup=False)  # fmt: skip
    check = recommendation.get("check")
    if check:
        verdict = "PASS" if check["passed"] else "FAIL: " + "; ".join(check["reasons"])
        console.print(f"check of the recommendation: {verdict}", markup=False)
    lab_label = "best in the lab" if named else "recommended"  # "recommended" names a setting
    for label, key in ((lab_label, "recommended"), ("twin would pick", "twin_recommended")):
        if key not in recommendation:
            continue
        best = recommendation[key]
        if best:
            keys = ("name", "min_threshold", "max_threshold", "max_probability", "dcqcn_change")
            best = {k: best[k] for k in keys if best.get(k) is not None}
        console.print(
            f"{label}: {best}" if best else f"{label}: none (zero loss above the goodput floor)"
        )


def _note(step: StepReport) -> str:
    """What the steps table says beside a step: its error, or why it was skipped."""
    if not isinstance(step.detail, dict):
        return ""
    if step.status == "skipped":
        return str(step.detail.get("reason", "not run: an earlier step failed"))
    return str(step.detail.get("error", ""))


def render_table(report: Report, out: Console) -> None:
    """The report as tables whose cells fold to the console's width (100 columns and up:
    names and IDs stay whole, long messages wrap)."""
    steps = folding_table(f"{report.playbook} on {report.fabric}", "step", "status")
    add_column(steps, "duration", justify="right", no_wrap=True)
    add_column(steps, "error / why skipped")
    for step in report.steps:
        steps.add_row(step.name, step.status, f"{step.duration_s:.1f} s", _note(step))
    out.print(steps)
    for step in report.steps:  # e.g. the fault drill's matrix
        matrix = step.detail.get("matrix") if isinstance(step.detail, dict) else None
        if matrix:
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
    out.print(f"{report.playbook}: {'PASS' if report.passed else 'FAIL'}")


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


def run_playbook(
    fabric: Path,
    playbook_name: str,
    output: str,
    report_file: Path | None,
    state_dir: Path | None,
    *,
    only: tuple[str, ...] = (),
    no_traffic: bool = False,
) -> None:
    """Run a playbook and print its report; ``only``/``no_traffic``: validate's ``--checks``
    and ``--no-traffic`` (:func:`agent.ops.playbooks.select_steps`)."""
    intent = load_fabric(fabric).intent
    playbook = load_playbook(playbook_path(playbook_name))
    try:
        playbook, skip = select_steps(playbook, only, no_traffic=no_traffic)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--checks'") from None
    err = console(stderr=True)

    def progress(step: StepReport) -> None:
        if output == "table" or report_file is not None:
            err.print(f"[{step.status}] {step.name} ({step.duration_s:.1f} s)")

    runner = PlaybookRunner(
        intent, resolve_state_dir(state_dir), on_step=progress, fabric_file=fabric
    )
    with (
        err.status(f"running {playbook.name} on {intent.name}", spinner="dots")
        if err.is_terminal
        else _null()
    ):
        report = runner.run(playbook, skip)
    if only or no_traffic:
        report.selection = {"checks": list(only), "no_traffic": no_traffic}
    _emit(report, output, report_file)
    if any(s.status == "error" for s in report.steps) and not report.checks and not report.probes:
        sys.exit(EXIT_ERROR)
    if not report.passed:
        sys.exit(EXIT_FAILED)


def _emit(report: Report, output: str, report_file: Path | None) -> None:
    text = {"json": render_json, "junit": render_junit, "markdown": render_markdown}
    if output == "table":
        render_table(report, console())
    else:
        click.echo(text[output](report), nl=False)
    if report_file is not None:
        # The file's suffix picks its format (.xml JUnit, .md Markdown), else JSON.
        by_suffix = {".xml": "junit", ".md": "markdown", ".json": "json"}
        fmt = by_suffix.get(report_file.suffix, output if output != "table" else "json")
        report_file.write_text(text[fmt](report))


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def _check_ids(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """``--checks RC001,RC101 --checks RC202``: known IDs, in the order given, once each."""
    ids = [part.strip().upper() for value in values for part in value.split(",")]
    unknown = [i for i in ids if i not in CATALOG]
    if unknown or "" in ids:
        raise click.BadParameter(
            f"Expected: check IDs from `roce-agent checks` ({', '.join(CATALOG)}) "
            f"Actual: {', '.join(repr(i) for i in unknown) or repr(values)}",
            param_hint="'--checks'",
        )
    return tuple(dict.fromkeys(ids))


REPORT_FILE = click.option(
    "--report-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the report here: .xml JUnit, .md Markdown, else JSON.",
)
STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where audit logs and transaction records go [default: the agent's state dir].",
)


@click.command("validate")
@examples(
    "roce-agent validate fabric.yml",
    "roce-agent validate fabric.yml --no-traffic -o junit > validate.xml",
    "roce-agent validate fabric.yml --checks RC003,RC101",
    "roce-agent validate fabric.yml --hosts-only -o json",
    "roce-agent validate fabric.yml --playbook storm-drill --report-file drill.md",
)
@FABRIC
@click.option(
    "--playbook",
    "playbook_name",
    default="validate",
    show_default=True,
    help="A playbook file, or a shipped one (validate, lossless-rollout, storm-drill, ecn-sweep).",
)
@output_option(*FORMATS)
@REPORT_FILE
@STATE_DIR
@click.option(
    "--hosts-only",
    is_flag=True,
    help="Only the host pre-flight checks (RC202-RC207, playbooks/host-preflight.yml): read "
    "the RDMA hosts, no switch, no traffic.",
)
@click.option(
    "--checks",
    "only",
    multiple=True,
    metavar="ID[,ID…]",
    callback=_check_ids,
    help="Run only these checks (repeatable or comma-separated; `roce-agent checks` lists "
    "them). Traffic steps run only if a chosen check needs traffic.",
)
@click.option(
    "--no-traffic",
    is_flag=True,
    help="Read-only: collect state and counters and run the config, counter and host checks; "
    "no probe, perftest, nccl, locate, storm or apply step (the report says which were "
    "skipped).",
)
@click.pass_context
@handle_errors
def validate_command(
    ctx: click.Context,
    fabric: Path,
    playbook_name: str,
    output: str,
    report_file: Path | None,
    state_dir: Path | None,
    hosts_only: bool,
    only: tuple[str, ...],
    no_traffic: bool,
) -> None:
    """Validate FABRIC: read the switches, drive traffic, run every check.

    --checks runs only some checks and --no-traffic none of the steps that send traffic
    (read-only); the report lists every skipped step with the reason.

    Exit 0 when every check passes, 1 when any fails or is unverified (a host check that
    could not read its source), 2 when validation cannot run (bad input, nothing reachable).
    """
    if hosts_only:
        source = ctx.get_parameter_source("playbook_name")
        if source is not None and source != click.core.ParameterSource.DEFAULT:
            raise click.UsageError("--hosts-only runs its own playbook: leave out --playbook")
        playbook_name = HOST_PREFLIGHT
    run_playbook(
        fabric, playbook_name, output, report_file, state_dir, only=only, no_traffic=no_traffic
    )


@click.command("run")
@examples(
    "roce-agent run lossless-rollout fabric.yml",
    "roce-agent run storm-drill fabric.yml -o markdown",
    "roce-agent run my-playbook.yml fabric.yml --report-file report.xml",
)
@click.argument("playbook_name", metavar="PLAYBOOK")
@FABRIC
@output_option(*FORMATS)
@REPORT_FILE
@STATE_DIR
@handle_errors
def run_command(
    playbook_name: str, fabric: Path, output: str, report_file: Path | None, state_dir: Path | None
) -> None:
    """Run PLAYBOOK (a file or lossless-rollout, storm-drill, ecn-sweep, validate) on FABRIC."""
    if not playbook_name:
        raise AgentError("name a playbook")
    run_playbook(fabric, playbook_name, output, report_file, state_dir)


@click.command("serve")
@examples(
    "roce-agent serve --config /etc/roce-agent/agent.yaml",
    "roce-agent serve --config agent.yaml --check-config",
    "roce-agent serve --shard 2/4",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default="/etc/roce-agent/agent.yaml",
    show_default=True,
)
@click.option(
    "--shard",
    metavar="K/N",
    callback=lambda _ctx, _param, value: _shard_option(value),
    help="Own only shard K of N of the fabric's switches (wins over `shard:` in agent.yaml).",
)
@click.option(
    "--check-config",
    is_flag=True,
    help="Validate agent.yaml, the fabric, the web config and credential files, then exit "
    "(0: valid, 2: not, naming file:line and field). Starts nothing.",
)
@handle_errors
def serve_command(config_path: Path, shard: Any, check_config: bool) -> None:
    """Run the daemon: reconcile loop (observe reports drift, enforce repairs it through the
    push path), scheduled playbooks, the Prometheus exporter, sd_notify for systemd.

    SIGHUP reloads (an invalid new configuration is refused, the old one keeps running);
    SIGTERM stops with exit 0. Logs are JSON lines on stdout.
    """
    from agent.app import daemon
    from agent.errors import printable

    if check_config:
        click.echo(printable(daemon.check_config(config_path, shard)))
        return
    sys.exit(daemon.serve(config_path, shard))


def _shard_option(value: str | None) -> Any:
    from agent.intent.shard import ShardError, parse_shard

    if value is None:
        return None
    try:
        return parse_shard(value)
    except ShardError as exc:
        raise click.BadParameter(str(exc).removeprefix("shard: "), param_hint="'--shard'") from None

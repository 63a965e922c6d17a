"""``roce-agent diff | apply | drift``: what would change, change it safely, detect drift."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.app.output import (
    JUnitCase,
    JUnitSuite,
    Markdown,
    echo_json,
    junit_xml,
    markdown_table,
    md_code,
)
from agent.app.support import (
    AS_INTENDED,
    EXIT_FAILED,
    FABRIC,
    NOT_AS_INTENDED,
    NOT_REACHED,
    NOT_TRIED,
    OUTPUT,
    DeviceProgress,
    exit_code,
    handle_errors,
)
from agent.device.failures import NOT_CONNECTED
from agent.device.fanout import DEFAULT_PARALLELISM
from agent.device.push import (
    PENDING_POLICIES,
    AuditLog,
    DeviceResult,
    Pusher,
    Rollout,
)
from agent.device.push import state_dir as resolve_state_dir
from agent.device.state import Difference
from agent.errors import AgentError, printable
from agent.intent.loader import load_fabric
from agent.intent.model import Device, FabricIntent
from common.conventions import (
    add_column,
    console,
    device_options,
    duration,
    examples,
    output_option,
    select_devices,
    table,
)

DEVICES = device_options
# diff and drift: markdown pastes into a ticket or a pull request; drift's junit makes each
# device a test case a CI server shows (a difference is a failure, an unreadable device an
# error). apply keeps table|json: its result is a run log, not a report to file.
REPORT = output_option("table", "json", "markdown")
DRIFT_REPORT = output_option("table", "json", "markdown", "junit")
STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Audit log location (default $ROCE_AGENT_STATE_DIR or /var/lib/roce-agent).",
)


def _console() -> Console:
    return console()


def choose(pusher: Pusher, patterns: Sequence[str], roles: Sequence[str]) -> list[Device]:
    """The devices ``--device`` (names or globs) and ``--role`` select; all switches when
    neither is given (hosts only where the pusher includes them)."""
    if not patterns and not roles:
        return pusher.select(())
    names = select_devices(((d.name, d.role) for d in pusher.intent.devices), patterns, roles)
    if not pusher.include_hosts:
        hosts = {d.name for d in pusher.intent.devices if d.role == "host"}
        names = [n for n in names if n not in hosts]
        if not names:
            raise click.BadParameter(
                "Expected: a switch Actual: only hosts selected (host NICs are configured "
                "with apply --include-hosts)",
                param_hint="'--device' / '--role'",
            )
    return pusher.select(names)


def _grouped(differences: list[Difference]) -> list[Difference]:
    """One row per run of DSCPs with the same expected/actual (64 rows help nobody)."""
    rows: list[Difference] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            first = rows.pop()
            span = f"{run[0]}" if len(run) == 1 else f"{run[0]}-{run[-1]}"
            rows.append(
                Difference(
                    first.device, "", f"dscp_to_priority[{span}]", first.expected, first.actual
                )
            )
            run.clear()

    for item in differences:
        match = re.fullmatch(r"dscp_to_priority\[(\d+)\]", item.setting)
        if match:
            dscp = int(match.group(1))
            previous = rows[-1] if rows else None
            if (
                run
                and previous is not None
                and dscp == run[-1] + 1
                and (previous.expected, previous.actual) == (item.expected, item.actual)
            ):
                run.append(dscp)
                continue
            flush()
            rows.append(item)
            run.append(dscp)
            continue
        flush()
        rows.append(item)
    flush()
    return rows


def _differences_table(results: list[DeviceResult], title: str) -> Table:
    differences = table(title, "device", "interface", "setting", "expected", "actual")
    for result in results:
        for item in _grouped(result.differences):
            differences.add_row(
                item.device,
                item.interface or "-",
                item.setting,
                str(item.expected),
                str(item.actual),
            )
    return differences


def _summary_table(results: list[DeviceResult], title: str) -> Table:
    summary = table(title)
    for column in ("device", "platform", "changes", "result", "duration", "detail"):
        right = column in ("changes", "duration")
        add_column(summary, column, justify="right" if right else "left")
    for result in results:
        summary.add_row(
            result.device,
            result.platform,
            str(len(result.differences)),
            result.result,
            f"{result.duration_s:.1f} s",
            detail(result),
        )
    return summary


def detail(result: DeviceResult) -> str:
    """The summary's detail: the error without the device and the kind the row already
    shows (``timed out`` in the result column, then what happened and the fix), else the
    session."""
    text = result.error or result.session or ""
    text = text.removeprefix(f"{result.device}: ")
    if result.result in NOT_CONNECTED:
        text = text.removeprefix(f"{result.result}: ")
    return text


def device_outcome(result: DeviceResult) -> str:
    """The device's outcome for the exit-code contract (agent.app.support.exit_code)."""
    if result.result in NOT_CONNECTED:
        return NOT_REACHED
    if result.result == "skipped":
        return NOT_TRIED
    if result.result in ("no-change", "applied") and not result.pending:
        return AS_INTENDED
    return NOT_AS_INTENDED


def report_failures(results: list[DeviceResult]) -> None:
    """One line on stderr per device that could not be read or changed (the report on stdout
    may be JSON for a program; a person or a CI log reads these)."""
    err = console(stderr=True)
    for result in results:
        if result.error and result.result != "skipped":
            text = result.error
            if not text.startswith(f"{result.device}: "):
                text = f"{result.device}: {text}"
            err.print(f"error: {printable(text)}", markup=False)


def finish(results: list[DeviceResult]) -> None:
    """Report the failures and exit by the contract (0, 1 or 2; docs/cli-conventions.md)."""
    report_failures(results)
    code = exit_code(device_outcome(r) for r in results)
    if code:
        sys.exit(code)


def _pending_table(results: list[DeviceResult], title: str) -> Table:
    pending = table(title, "device", "session", "kind", "state", "user", "age", "rolls back in")
    for result in results:
        for session in result.pending:
            pending.add_row(
                session.device,
                session.name,
                session.kind,
                session.state,
                session.user or "?",
                "?" if session.age_s is None else f"{session.age_s:.0f} s",
                "-" if session.rollback_in_s is None else f"{session.rollback_in_s:.0f} s",
            )
    return pending


def _cell(value: object) -> Markdown:
    """A Markdown table cell shown as code (so a name such as ``*leaf*`` or ``[x]`` stays
    literal in a ticket), control characters made visible."""
    return md_code(printable(str(value)))


def _summary_cells(result: DeviceResult) -> tuple[object, ...]:
    changes = len(result.differences)
    return _cell(result.device), result.platform, result.result, changes, _cell(detail(result))


def render_markdown(results: list[DeviceResult], title: str, show_lines: bool) -> str:
    """Differences, pending sessions and the per-device result as GitHub Markdown tables:
    for a ticket or a pull request."""
    out = [f"### roce-agent {title}", ""]
    out += markdown_table(
        ("device", "platform", "result", "changes", "detail"),
        [_summary_cells(r) for r in results],
        right={3},
    )
    rows = [item for r in results for item in _grouped(r.differences)]
    if rows:
        out.append("")
        out += markdown_table(
            ("device", "interface", "setting", "expected", "actual"),
            [[_cell(v) for v in (i.device, i.interface or "-", i.setting, i.expected, i.actual)]
             for i in rows],
        )  # fmt: skip
    for r in results:
        out += [f"- {r.device}: pending {p.describe()}" for p in r.pending]
        out += [f"- {r.device}: {printable(note)}" for note in r.notes]
    for r in results:
        if show_lines and r.lines:
            out += ["", f"{r.device} would receive:", "", "```", *r.lines, "```"]
    return "\n".join(out) + "\n"


def render_junit(results: list[DeviceResult], title: str) -> str:
    """One test case per device: a difference or a pending session is a failure, a device
    that could not be read an error."""
    name = f"roce-agent {title}"
    return junit_xml(name, [JUnitSuite(name, [_junit_case(r, title) for r in results])])


def _junit_case(result: DeviceResult, title: str) -> JUnitCase:
    case = JUnitCase(f"roce-agent.{title}", result.device, time_s=result.duration_s)
    if result.result in (*NOT_CONNECTED, "failed", "unknown"):
        message = f"{result.result}: {detail(result)}"
        return replace(case, outcome="error", message=message,
                       detail=printable(result.error or result.result))  # fmt: skip
    if result.differences or result.pending:
        lines = [f"{i.interface or '-'} {i.setting}: Expected: {i.expected} "
                 f"Actual: {i.actual}" for i in _grouped(result.differences)]  # fmt: skip
        lines += [f"pending {p.describe()}" for p in result.pending]
        message = f"{len(result.differences)} difference(s) from the intent"
        return replace(case, outcome="failure", message=message,
                       detail=printable("\n".join(lines), keep_newlines=True))  # fmt: skip
    return case


def _emit(results: list[DeviceResult], output: str, title: str, show_lines: bool) -> None:
    if output == "json":
        echo_json({"devices": [r.as_dict() for r in results]})
        return
    if output == "markdown":
        click.echo(render_markdown(results, title, show_lines), nl=False)
        return
    if output == "junit":
        click.echo(render_junit(results, title), nl=False)
        return
    console = _console()
    if any(r.differences for r in results):
        console.print(_differences_table(results, f"{title}: differences"))
    if any(r.pending for r in results):
        console.print(_pending_table(results, f"{title}: pending sessions (not final)"))
    for result in results:
        for note in result.notes:
            console.print(f"{result.device}: {note}")
    if show_lines:
        for result in results:
            if result.lines:
                console.print(f"{result.device} would receive:", style="bold")
                console.print("\n".join(result.lines))
    console.print(_summary_table(results, title))


@click.command("diff")
@examples(
    "roce-agent diff fabric.yml",
    "roce-agent diff fabric.yml --device 'leaf*' -o markdown > ticket.md",
    "roce-agent diff fabric.yml --role spine -o json",
)
@FABRIC
@DEVICES
@REPORT
@click.option("--parallelism", type=int, default=DEFAULT_PARALLELISM, show_default=True)
@handle_errors
def diff_command(
    fabric: Path, devices: tuple[str, ...], roles: tuple[str, ...], output: str, parallelism: int
) -> None:
    """Show what would change on each switch (and the lines that would be sent).

    Exit 0 when every switch is as intended, 1 when one would change or could not be read, 2
    when none could be reached (or bad input).
    """
    pusher = Pusher.for_intent(load_fabric(fabric).intent)
    selected = choose(pusher, devices, roles)
    with DeviceProgress("diff", [d.name for d in selected]):
        results = pusher.inspect_all(selected, parallelism)
    _emit(results, output, "diff", show_lines=True)
    finish(results)


@click.command("drift")
@examples(
    "roce-agent drift fabric.yml",
    "roce-agent drift fabric.yml --role leaf -o junit > drift.xml",
    "roce-agent drift fabric.yml --device 'spine*' -o markdown",
)
@FABRIC
@DEVICES
@DRIFT_REPORT
@click.option("--parallelism", type=int, default=DEFAULT_PARALLELISM, show_default=True)
@handle_errors
def drift_command(
    fabric: Path, devices: tuple[str, ...], roles: tuple[str, ...], output: str, parallelism: int
) -> None:
    """Compare every switch with the intent: exit 1 listing every difference (or a switch that
    could not be read), 0 if none, 2 if no switch could be reached."""
    pusher = Pusher.for_intent(load_fabric(fabric).intent)
    selected = choose(pusher, devices, roles)
    with DeviceProgress("drift", [d.name for d in selected]):
        results = pusher.inspect_all(selected, parallelism)
    _emit(results, output, "drift", show_lines=False)
    for session in (p for r in results for p in r.pending):
        # A pending session means the device can still change by itself: not converged.
        click.echo(f"drift: {session.device}: pending {session.describe()}", err=True)
    finish(results)


@click.command("apply")
@examples(
    "roce-agent apply fabric.yml --dry-run",
    "roce-agent apply fabric.yml --yes --role leaf --canary 2",
    "roce-agent apply fabric.yml --yes --device 'leaf1*' --confirm-timeout 120s",
)
@FABRIC
@DEVICES
@click.option("--dry-run", is_flag=True, help="Show the changes; open no session.")
@click.option(
    "--canary",
    type=int,
    default=1,
    show_default=True,
    help="Devices changed one by one first; a failure stops everything.",
)
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option(
    "--parallelism",
    type=int,
    default=DEFAULT_PARALLELISM,
    show_default=True,
    help="At most this many SSH sessions at once.",
)
@click.option(
    "--confirm-timeout",
    type=duration(3600, min_s=5),
    default="300s",
    show_default=True,
    help="How long the device waits for confirmation before rolling back (5s to 1h; "
    "whole seconds, rounded up).",
)
@click.option(
    "--hold",
    "hold_s",
    type=duration(3600),
    default=None,
    help="Rollback drill: hold each change unconfirmed this long (e.g. 60s).",
)
@click.option(
    "--pending",
    "pending_policy",
    type=click.Choice(PENDING_POLICIES),
    default="wait",
    show_default=True,
    help="A live (unconfirmed) session on a device: wait for it to end, abort it, or "
    "confirm it if it is this fabric's own and reads back as planned.",
)
@click.option(
    "--pending-timeout",
    type=duration(3600),
    default="360s",
    show_default=True,
    help="How long --pending wait waits before failing the device.",
)
@click.option("--include-hosts", is_flag=True, help="Also configure host NICs (opt-in).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@STATE_DIR
@OUTPUT
@handle_errors
def apply_command(fabric: Path, **options: Any) -> None:
    """Bring switches to the intent: canary first, then batches, each change in a transaction
    the switch rolls back by itself unless the readback matches and the agent confirms.

    Exit 0 when every device is applied or already right (with --dry-run: would not change),
    1 when one failed, would change, was skipped or could not be reached, 2 when none could be
    reached (or bad input).
    """
    run = ApplyFlags(**options)
    pusher = run.pusher(load_fabric(fabric).intent)
    selected = choose(pusher, run.devices, run.roles)
    if not run.dry_run and not run.yes:
        if not sys.stdin.isatty():
            raise AgentError("apply changes devices: pass --yes (or run --dry-run first)")
        click.confirm(f"Apply the intent to {len(selected)} device(s)?", abort=True)
    with DeviceProgress("dry run" if run.dry_run else "apply", [d.name for d in selected]):
        results = pusher.apply_all(
            selected, Rollout(run.canary, run.batch_size, run.parallelism), run.dry_run
        )
    _emit(
        results, run.output, "apply (dry run)" if run.dry_run else "apply", show_lines=run.dry_run
    )
    finish(results)


@dataclass(frozen=True)
class ApplyFlags:
    """``roce-agent apply``'s options as the command line gives them."""

    devices: tuple[str, ...]
    roles: tuple[str, ...]
    dry_run: bool
    canary: int
    batch_size: int
    parallelism: int
    confirm_timeout: float
    hold_s: float | None
    pending_policy: str
    pending_timeout: float
    include_hosts: bool
    yes: bool
    state_dir: Path | None
    output: str

    def pusher(self, intent: FabricIntent) -> Pusher:
        return Pusher.for_intent(
            intent,
            resolve_state_dir(self.state_dir),
            # The switches' commit timers count whole seconds (EOS `commit timer hh:mm:ss`).
            confirm_timeout_s=math.ceil(self.confirm_timeout),
            include_hosts=self.include_hosts,
            hold_before_confirm_s=self.hold_s or 0.0,
            pending_policy=self.pending_policy,
            pending_timeout_s=self.pending_timeout,
        )


@click.command("audit")
@examples(
    "roce-agent audit",
    "roce-agent audit --incomplete -o json",
    "roce-agent audit --state-dir /var/lib/roce-agent",
)
@click.option("--incomplete", is_flag=True, help="Only attempts with an intent and no result.")
@STATE_DIR
@OUTPUT
@handle_errors
def audit_command(incomplete: bool, state_dir: Path | None, output: str) -> None:
    """Show change attempts from the write-ahead audit log (intent, result, reconciled).

    Exit 0; 1 with --incomplete when there is any (a run died mid-change: the next apply
    reconciles it)."""
    log = AuditLog(resolve_state_dir(state_dir))
    attempts = log.incomplete() if incomplete else log.attempts()
    rows = [_attempt_row(a) for a in attempts]
    if output == "json":
        echo_json({"audit_log": str(log.path), "attempts": rows})
    elif not rows:
        what = "no incomplete attempt" if incomplete else "no change attempt"
        _console().print(Text(f"audit: {printable(str(log.path))}: {what}"))
    else:
        attempts_table = table(
            f"audit: {printable(str(log.path))}",
            "time", "attempt", "device", "session", "operator", "status", "detail",
        )  # fmt: skip
        for row in rows:
            who = row["operator"].get("user", "?")
            if row["operator"].get("claimed_sudo_user"):
                who += f" (claims sudo by {row['operator']['claimed_sudo_user']})"
            cells = (row["time"], row["attempt"][:12], row["device"], row["session"] or "",
                     who, row["status"], row["detail"])  # fmt: skip
            # The log is a file on disk: its text is shown, never taken as rich markup.
            attempts_table.add_row(*(Text(printable(str(cell))) for cell in cells))
        _console().print(attempts_table)
    if incomplete and rows:
        sys.exit(EXIT_FAILED)


def _attempt_row(attempt: dict[str, Any]) -> dict[str, Any]:
    intent = attempt["intent"]
    result = attempt["result"]
    reconciled = attempt["reconciled"]
    if result is not None:
        status, detail = result.get("result", "?"), result.get("error") or ""
    elif reconciled:
        status, detail = "reconciled", reconciled[-1].get("outcome", "")
    else:
        status, detail = "incomplete", "intent written, no result: the run died mid-change"
    return {
        "time": intent.get("time", ""),
        "attempt": attempt["attempt"],
        "fabric": intent.get("fabric"),
        "device": intent.get("device", "?"),
        "session": intent.get("session"),
        "operator": intent.get("operator") if isinstance(intent.get("operator"), dict) else {},
        "status": status,
        "detail": detail,
        "lines": intent.get("lines", []),
    }

"""``roce-agent diff | apply | drift``: what would change, change it safely, detect drift."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agent.app.support import EXIT_ERROR, EXIT_FAILED, FABRIC, OUTPUT, handle_errors
from agent.device.fanout import DEFAULT_PARALLELISM
from agent.device.push import (
    PENDING_POLICIES,
    STOPPING,
    AuditLog,
    DeviceResult,
    Pusher,
)
from agent.device.push import state_dir as resolve_state_dir
from agent.device.state import Difference
from agent.errors import AgentError, printable
from agent.intent.loader import load_fabric
from common.clicktypes import FiniteFloat

DEVICES = click.option(
    "--device", "devices", multiple=True, metavar="NAME", help="Only this device (repeatable)."
)
STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Audit log location (default $ROCE_AGENT_STATE_DIR or /var/lib/roce-agent).",
)


def _console() -> Console:
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


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
    table = Table(title=title)
    for column in ("device", "interface", "setting", "expected", "actual"):
        table.add_column(column)
    for result in results:
        for item in _grouped(result.differences):
            table.add_row(
                item.device,
                item.interface or "-",
                item.setting,
                str(item.expected),
                str(item.actual),
            )
    return table


def _summary_table(results: list[DeviceResult], title: str) -> Table:
    table = Table(title=title)
    for column in ("device", "platform", "changes", "result", "duration", "detail"):
        table.add_column(column, justify="right" if column in ("changes", "duration") else "left")
    for result in results:
        table.add_row(
            result.device,
            result.platform,
            str(len(result.differences)),
            result.result,
            f"{result.duration_s:.1f} s",
            result.error or (result.session or ""),
        )
    return table


def _pending_table(results: list[DeviceResult], title: str) -> Table:
    table = Table(title=title)
    for column in ("device", "session", "kind", "state", "user", "age", "rolls back in"):
        table.add_column(column)
    for result in results:
        for session in result.pending:
            table.add_row(
                session.device,
                session.name,
                session.kind,
                session.state,
                session.user or "?",
                "?" if session.age_s is None else f"{session.age_s:.0f} s",
                "-" if session.rollback_in_s is None else f"{session.rollback_in_s:.0f} s",
            )
    return table


def _emit(results: list[DeviceResult], output: str, title: str, show_lines: bool) -> None:
    if output == "json":
        click.echo(json.dumps({"devices": [r.as_dict() for r in results]}, indent=2))
        return
    console = _console()
    if any(r.differences for r in results):
        console.print(_differences_table(results, f"{title}: differences"))
    if any(r.pending for r in results):
        console.print(_pending_table(results, f"{title}: pending sessions (not final)"))
    for result in results:
        for note in result.notes:
            console.print(f"{result.device}: {note}", markup=False, highlight=False)
    if show_lines:
        for result in results:
            if result.lines:
                console.print(f"[bold]{result.device}[/bold] would receive:")
                console.print("\n".join(result.lines), markup=False, highlight=False)
    console.print(_summary_table(results, title))


@click.command("diff")
@FABRIC
@DEVICES
@OUTPUT
@click.option("--parallelism", type=int, default=DEFAULT_PARALLELISM, show_default=True)
@handle_errors
def diff_command(fabric: Path, devices: tuple[str, ...], output: str, parallelism: int) -> None:
    """Show what would change on each switch (and the lines that would be sent). Exit 0."""
    pusher = Pusher.for_intent(load_fabric(fabric).intent)
    results = pusher.inspect_all(pusher.select(devices), parallelism)
    _emit(results, output, "diff", show_lines=True)
    if results and all(r.result in ("unreachable", "failed") for r in results):
        sys.exit(EXIT_ERROR)


@click.command("drift")
@FABRIC
@DEVICES
@OUTPUT
@click.option("--parallelism", type=int, default=DEFAULT_PARALLELISM, show_default=True)
@handle_errors
def drift_command(fabric: Path, devices: tuple[str, ...], output: str, parallelism: int) -> None:
    """Compare every switch with the intent: exit 1 listing every difference, 0 if none,
    2 if a device could not be read."""
    pusher = Pusher.for_intent(load_fabric(fabric).intent)
    results = pusher.inspect_all(pusher.select(devices), parallelism)
    _emit(results, output, "drift", show_lines=False)
    pending = [p for r in results for p in r.pending]
    for session in pending:
        # A pending session means the device can still change by itself: not converged.
        click.echo(f"drift: {session.device}: pending {session.describe()}", err=True)
    if any(r.differences for r in results) or pending:
        sys.exit(EXIT_FAILED)
    if any(r.result in ("unreachable", "failed") for r in results):
        sys.exit(EXIT_ERROR)


@click.command("apply")
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
    type=click.IntRange(5, 3600),
    default=300,
    show_default=True,
    help="Seconds the device waits for confirmation before rolling back.",
)
@click.option(
    "--hold",
    "hold_s",
    type=FiniteFloat(0, 3600),
    default=0,
    metavar="SECONDS",
    help="Rollback drill: hold each change unconfirmed this long.",
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
    type=FiniteFloat(0, 3600),
    default=360,
    show_default=True,
    metavar="SECONDS",
    help="How long --pending wait waits before failing the device.",
)
@click.option("--include-hosts", is_flag=True, help="Also configure host NICs (opt-in).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@STATE_DIR
@OUTPUT
@handle_errors
def apply_command(
    fabric: Path,
    devices: tuple[str, ...],
    dry_run: bool,
    canary: int,
    batch_size: int,
    parallelism: int,
    confirm_timeout: int,
    hold_s: float,
    pending_policy: str,
    pending_timeout: float,
    include_hosts: bool,
    yes: bool,
    state_dir: Path | None,
    output: str,
) -> None:
    """Bring switches to the intent: canary first, then batches, each change in a transaction
    the switch rolls back by itself unless the readback matches and the agent confirms.

    Exit 0 when every device is applied or already right, 1 on any failure.
    """
    intent = load_fabric(fabric).intent
    pusher = Pusher.for_intent(
        intent,
        resolve_state_dir(state_dir),
        confirm_timeout_s=confirm_timeout,
        include_hosts=include_hosts,
        hold_before_confirm_s=hold_s,
        pending_policy=pending_policy,
        pending_timeout_s=pending_timeout,
    )
    selected = pusher.select(devices)
    if not dry_run and not yes:
        if not sys.stdin.isatty():
            raise AgentError("apply changes devices: pass --yes (or run --dry-run first)")
        click.confirm(f"Apply the intent to {len(selected)} device(s)?", abort=True)
    console = Console(stderr=True, highlight=False)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=output == "json" or not console.is_terminal,
    ) as progress:
        task = progress.add_task("apply" if not dry_run else "dry run", total=len(selected))
        results = pusher.apply_all(
            selected,
            canary,
            batch_size,
            parallelism,
            dry_run,
            on_result=lambda r: progress.advance(task),
        )
    _emit(results, output, "apply (dry run)" if dry_run else "apply", show_lines=dry_run)
    if any(r.result in (*STOPPING, "skipped") for r in results):
        sys.exit(EXIT_FAILED)


@click.command("audit")
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
        click.echo(json.dumps({"audit_log": str(log.path), "attempts": rows}, indent=2))
    elif not rows:
        what = "no incomplete attempt" if incomplete else "no change attempt"
        _console().print(Text(f"audit: {printable(str(log.path))}: {what}"))
    else:
        table = Table(title=Text(f"audit: {printable(str(log.path))}"))
        for column in ("time", "attempt", "device", "session", "operator", "status", "detail"):
            table.add_column(column)
        for row in rows:
            who = row["operator"].get("user", "?")
            if row["operator"].get("claimed_sudo_user"):
                who += f" (claims sudo by {row['operator']['claimed_sudo_user']})"
            cells = (row["time"], row["attempt"][:12], row["device"], row["session"] or "",
                     who, row["status"], row["detail"])  # fmt: skip
            # The log is a file on disk: its text is shown, never taken as rich markup.
            table.add_row(*(Text(printable(str(cell))) for cell in cells))
        _console().print(table)
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

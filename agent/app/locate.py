"""``roce-agent locate FABRIC``: which link, port, switch or host NIC (issue #15).

1. discover each host pair's ECMP paths: UDP traceroute with the probes' own 5-tuple
   (:mod:`agent.observe.probes.paths`);
2. read every switch's configuration, counters and link state over SSH;
3. run the path-aware mesh — one low-rate flow per path, every host at once
   (:mod:`agent.observe.probes.mesh`) — and TTL-limited probes to every hop of every path;
4. read the counters and link state again;
5. join it all with the topology and rank the suspects (:mod:`agent.observe.locate.rank`).

Exit codes: 0 no fault found; 1 at least one suspect; 2 the command could not run (bad
input, a host that cannot probe). A switch that cannot be read is a note, not an exit 2: the
other evidence still counts.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from agent.app.support import EXIT_FAILED, EXIT_OK, FABRIC, handle_errors
from agent.errors import printable
from agent.intent.loader import load_fabric
from agent.observe.locate.gather import LocateRun, as_json, run_locate
from agent.observe.locate.rank import Suspect
from common.conventions import add_column, console, duration, examples, output_option, table

SECONDS = duration(3600)


# --------------------------------------------------------------------------- output


def _rank(suspect: Suspect, position: int) -> str:
    """The suspect's rank (a tied group's members share one) and the tie marker."""
    return f"{suspect.rank or position}{' tied' if suspect.tied_with else ''}"


def _evidence_lines(suspect: Suspect) -> list[str]:
    """Its evidence, then for a tied member what it is tied with and the probes that would
    split the group on a real fabric."""
    lines = list(suspect.evidence)
    if suspect.tied_with:
        lines.append("tied with: " + ", ".join(suspect.tied_with))
        lines += [f"would split them: {text}" for text in suspect.split_by]
    return lines


def render_markdown(run: LocateRun) -> str:
    verdict = run.verdict
    lines = [
        f"**locate:** {verdict.as_dict()['summary']} — {verdict.paths} paths probed, "
        f"{verdict.bad_paths} bad, {run.duration_s:.0f} s",
        "",
    ]
    if verdict.suspects:
        lines += ["| rank | kind | element | confidence | evidence |", "|---|---|---|---|---|"]
        for rank, suspect in enumerate(verdict.suspects, start=1):
            evidence = "<br>".join(e.replace("|", "\\|") for e in _evidence_lines(suspect))
            lines.append(
                f"| {_rank(suspect, rank)} | {suspect.kind} | `{suspect.element}` | "
                f"{suspect.confidence:.2f} | {evidence} |"
            )
    lines.append(f"- {run.transport.summary()}")
    lines += [f"- follow-up probes {r.describe()}" for r in verdict.follow_ups]
    for note in verdict.notes:
        lines.append(f"- note: {note}")
    return "\n".join(lines)


def render_table(run: LocateRun, console: Console) -> None:
    verdict = run.verdict
    suspects = table(printable(f"locate: {verdict.as_dict()['summary']}"))
    for column in ("rank", "kind", "element", "confidence", "evidence"):
        right = column in ("rank", "confidence")
        add_column(suspects, column, justify="right" if right else "left")
    for rank, suspect in enumerate(verdict.suspects, start=1):
        suspects.add_row(
            _rank(suspect, rank),
            suspect.kind,
            Text(printable(suspect.element)),
            f"{suspect.confidence:.2f}",
            Text(printable("\n".join(_evidence_lines(suspect)))),
        )
    if verdict.suspects:
        console.print(suspects)
    console.print(
        Text(
            printable(
                f"{verdict.as_dict()['summary']}: {verdict.paths} paths probed, "
                f"{verdict.bad_paths} bad; time to verdict {run.duration_s:.1f} s"
            )
        )
    )
    console.print(Text(printable(run.transport.summary())))
    for result in verdict.follow_ups:
        console.print(Text(printable(f"follow-up probes {result.describe()}")))
    for note in verdict.notes:
        console.print(Text(printable(f"note: {note}")))


@click.command("locate")
@examples(
    "roce-agent locate fabric.yml",
    "roce-agent locate fabric.yml --duration 10s --load",
    "roce-agent locate fabric.yml -o markdown > incident.md",
)
@FABRIC
@click.option(
    "--duration",
    type=SECONDS,
    default="5s",
    show_default=True,
    help="Mesh probing time, with its unit (5s, 500ms).",
)
@output_option("table", "json", "markdown")
@click.option(
    "--rate-per-host",
    "rate_per_host",
    type=int,
    default=400_000,
    show_default=True,
    help="Probe bits per second a host sends in total (capped at a tenth of its link).",
)
@click.option(
    "--load",
    is_flag=True,
    help="Also run a 2 s line-rate incast per leaf while probing: finds faults that "
    "only show under congestion (RoCE in a lossy class, pause not honoured).",
)
@handle_errors
def locate_command(
    fabric: Any, duration: float, output: str, rate_per_host: int, load: bool
) -> None:
    """Find the link, port, switch or host NIC behind a symptom.

    Traces every host pair's ECMP paths with the probes' own 5-tuple, probes each path,
    reads the switches' counters, link state and configuration before and after, and ranks
    the suspects with their evidence. Exit 0: no fault found; 1: suspects; 2: could not run.
    """
    if rate_per_host <= 0:
        raise click.BadParameter("Expected: > 0", param_hint="--rate-per-host")
    intent = load_fabric(fabric).intent
    run = run_locate(intent, duration_s=duration, rate_per_host_bps=rate_per_host, load=load)
    if output == "json":
        click.echo(json.dumps(as_json(run), indent=2))
    elif output == "markdown":
        click.echo(render_markdown(run))
    else:
        render_table(run, console())
    sys.exit(EXIT_FAILED if run.verdict.fault_found else EXIT_OK)

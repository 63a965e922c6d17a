"""``roce-agent locate FABRIC``: which link, port, switch or host NIC (issue #15).

1. discover each host pair's ECMP paths: UDP traceroute with the probes' own 5-tuple
   (:mod:`agent.observe.probes.paths`);
2. read every switch's configuration, counters and link state over SSH;
3. run the path-aware mesh — one low-rate flow per path, every host at once
   (:mod:`agent.observe.probes.mesh`) — and TTL-limited probes to every hop of every path;
   in rounds until Wald's SPRT has decided every path clean or lossy at ``--confidence``
   (:mod:`agent.observe.locate.stats`), or ``--max-duration``; ``--duration`` runs it once;
4. read the counters and link state again;
5. join it all with the topology and rank the suspects (:mod:`agent.observe.locate.rank`),
   and split tied suspects with targeted follow-up probes in the time left.

Exit codes: 0 no fault found; 1 at least one suspect; 2 the command could not run (bad
input, a host that cannot probe). A switch that cannot be read is a note, not an exit 2: the
other evidence still counts.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from agent.app.output import echo_json, markdown_table, md_code
from agent.app.support import EXIT_FAILED, EXIT_OK, FABRIC, handle_errors
from agent.errors import printable
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.observe.locate.gather import LocateRun, as_json, run_locate
from agent.observe.locate.verdict import Suspect
from common.conventions import add_column, console, duration, examples, output_option, table

SECONDS = duration(3600)
OUT_OF_TIME = "ran out of time before it was sure"


class Percentage(click.ParamType[float]):
    """A share written as a percentage with its sign, ``0.5%``, strictly between 0 and 100 %.
    The sign is required: a bare ``0.5`` reads as half a percent to some and as half of
    everything to others."""

    name = "percentage"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value  # a default, already a share
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*%\s*", str(value))
        share = float(match.group(1)) / 100 if match else math.nan
        if not 0 < share < 1:
            self.fail(f"Expected: a percentage between 0 and 100 %, e.g. 0.5% Actual: {value!r}",
                      param, ctx)  # fmt: skip
        return share


class Confidence(click.ParamType[float]):
    """A probability strictly between 0 and 1 (``0.95``)."""

    name = "probability"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not 0 < number < 1:
            self.fail(f"Expected: 0 < confidence < 1, e.g. 0.95 Actual: {value!r}", param, ctx)
        return number


def stopped_line(run: LocateRun) -> str:
    """How the probing ended, in words."""
    if run.stopped == "max-duration":
        return (
            f"{OUT_OF_TIME}: after {run.rounds} rounds some paths were neither clean nor lossy "
            f"at confidence {run.confidence:g} (loss from {run.min_loss:.2%})"
        )
    if run.stopped == "confident":
        return (
            f"stopped when sure: every path clean or lossy at confidence {run.confidence:g} "
            f"(loss from {run.min_loss:.2%}) after {run.rounds} rounds"
        )
    return "a fixed --duration run: paths decided by the SPRT are marked in the JSON"


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
        lines += markdown_table(
            ("rank", "kind", "element", "confidence", "evidence"),
            [(_rank(suspect, rank), suspect.kind, md_code(suspect.element),
              f"{suspect.confidence:.2f}", "\n".join(_evidence_lines(suspect)))
             for rank, suspect in enumerate(verdict.suspects, start=1)],
        )  # fmt: skip
    lines.append(f"- {stopped_line(run)}")
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
    console.print(Text(printable(stopped_line(run))))
    console.print(Text(printable(run.transport.summary())))
    for result in verdict.follow_ups:
        console.print(Text(printable(f"follow-up probes {result.describe()}")))
    for note in verdict.notes:
        console.print(Text(printable(f"note: {note}")))


@click.command("locate")
@examples(
    "roce-agent locate fabric.yml",
    "roce-agent locate fabric.yml --confidence 0.99 --max-duration 120s",
    "roce-agent locate fabric.yml --min-loss 2% --max-duration 20s",
    "roce-agent locate fabric.yml --duration 10s --load",
    "roce-agent locate fabric.yml -o markdown > incident.md",
)
@FABRIC
@click.option(
    "--confidence",
    type=Confidence(),
    default=0.95,
    show_default=True,
    help="How sure each path's verdict (clean or lossy) must be before probing stops: "
    "both error rates of the SPRT are 1 - this.",
)
@click.option(
    "--max-duration",
    "max_duration",
    type=SECONDS,
    default="60s",
    show_default=True,
    help="The whole run's time limit, with its unit: probing stops earlier once sure, "
    "and says so when it ran out of time first.",
)
@click.option(
    "--min-loss",
    "min_loss",
    type=Percentage(),
    default="0.5%",
    show_default=True,
    help="The smallest loss rate a path must be found lossy at (a quarter of it counts "
    "as clean); lower needs more probes.",
)
@click.option(
    "--duration",
    type=SECONDS,
    default=None,
    help="Probe the mesh once for this long instead (5s, 500ms): a fixed run, no stopping rule.",
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
def locate_command(fabric: Any, output: str, **options: Any) -> None:
    """Find the link, port, switch or host NIC behind a symptom.

    Traces every host pair's ECMP paths with the probes' own 5-tuple, probes each path,
    reads the switches' counters, link state and configuration before and after, and ranks
    the suspects with their evidence. Probing stops as soon as every path is clean or lossy
    at --confidence, or at --max-duration. Exit 0: no fault found; 1: suspects; 2: could
    not run.
    """
    search = LocateFlags(**options)
    if search.rate_per_host <= 0:
        raise click.BadParameter("Expected: > 0", param_hint="--rate-per-host")
    run = search.run(load_fabric(fabric).intent)
    if output == "json":
        echo_json(as_json(run))
    elif output == "markdown":
        click.echo(render_markdown(run))
    else:
        render_table(run, console())
    sys.exit(EXIT_FAILED if run.verdict.fault_found else EXIT_OK)


@dataclass(frozen=True)
class LocateFlags:
    """How locate probes: its stopping rule (``--confidence``, ``--min-loss``,
    ``--max-duration``) or a fixed ``--duration``, the probe rate per host and ``--load``."""

    confidence: float
    max_duration: float
    min_loss: float
    duration: float | None
    rate_per_host: int
    load: bool

    def run(self, intent: FabricIntent) -> LocateRun:
        return run_locate(
            intent,
            confidence=self.confidence,
            max_duration_s=self.max_duration,
            min_loss=self.min_loss,
            duration_s=self.duration,
            rate_per_host_bps=self.rate_per_host,
            load=self.load,
        )

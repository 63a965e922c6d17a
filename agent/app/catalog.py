"""``roce-agent rules`` and ``roce-agent checks``: what ``check`` and ``validate`` enforce.

``rules`` lists every IR rule of the fabric file (:func:`agent.intent.rules.rules_by_id`,
cross-field and model-level alike); ``checks`` every RC check ``validate`` can run
(:data:`agent.observe.checks.CATALOG`), with what it needs collected and which shipped
playbooks run it, so ``validate --checks ID…`` can be chosen from it. Like ANTA's catalogue
(https://anta.arista.com/stable/api/tests/ : one test per ID, grouped by what it reads).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import click
from rich.table import Table

from agent.app.output import echo_json, markdown_table
from agent.app.support import handle_errors
from agent.errors import AgentError
from agent.intent.rules import rules_by_id
from agent.observe.checks import CATALOG, Check, needs
from common.conventions import add_column, console, examples, output_option, table

FORMATS = ("table", "json", "markdown")


def _print(output: str, title: str, headers: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """The rows as a folding table, JSON (a list of objects) or a Markdown table."""
    if output == "json":
        echo_json(rows)
        return
    cells = cells_of(headers, rows)
    if output == "markdown":
        click.echo("\n".join(markdown_table(headers, cells)) + "\n", nl=False)
        return
    console().print(catalog_table(title, headers, cells))


# Identifiers never break (an ID or a class name cut in two is found by no search); the
# prose takes the width that is left, the lists a share of it (at 100 columns, the width of a
# pipe, the summary had 20 columns and the playbooks 23 before).
_IDENTIFIERS = frozenset({"id", "name"})
_SHARES = {"summary": 3, "needs": 1, "playbooks": 2}


def catalog_table(title: str, headers: Sequence[str], cells: list[list[str]]) -> Table:
    """A table that folds to the console's width; the identifiers (IR021, RC101,
    RoceModeConsistent) never break, the summary takes most of what is left (the shares
    apply to a table that fills the width: ``expand``)."""
    shown = table(title, expand=True)
    for header in headers:
        if header in _IDENTIFIERS:
            add_column(shown, header, no_wrap=True)
        else:
            add_column(shown, header, ratio=_SHARES.get(header, 1))
    for row in cells:
        shown.add_row(*row)
    return shown


def cells_of(headers: Sequence[str], rows: list[dict[str, Any]]) -> list[list[str]]:
    return [[_text(row[h]) for h in headers] for row in rows]


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "-"
    return str(value)


# ---------------------------------------------------------------------------------- rules


RULES_TITLE = "fabric file rules (roce-agent check)"
RULE_HEADERS = ("id", "summary")


def rule_rows() -> list[dict[str, Any]]:
    return [{"id": rule_id, "summary": summary} for rule_id, summary in rules_by_id().items()]


@click.command("rules")
@examples(
    "roce-agent rules",
    "roce-agent rules -o markdown > docs/rules.md",
    "roce-agent rules -o json | jq -r '.[].id'",
)
@output_option(*FORMATS)
@handle_errors
def rules_command(output: str) -> None:
    """List every rule ``check`` applies to a fabric file (IR001…), with its ID.

    A problem ``check`` reports names its rule's ID: look it up here.
    """
    _print(output, RULES_TITLE, RULE_HEADERS, rule_rows())


# --------------------------------------------------------------------------------- checks


def summary(check: type[Check]) -> str:
    """The first sentence of the check's docstring, on one line (what it expects; the rest
    of the docstring explains, and the docs carry it)."""
    paragraph = " ".join((check.__doc__ or "").strip().split("\n\n")[0].split())
    first = re.match(r"(.+?[.!?])(?:\s|$)", paragraph)
    return first.group(1) if first else paragraph


def playbooks_by_check() -> dict[str, list[str]]:
    """Check ID -> the shipped playbooks that run it (``ids: all`` counts as every check but
    the drill ones, as the runner does)."""
    from agent.ops.playbooks import PLAYBOOKS, load_playbook, playbook_check_ids

    found: dict[str, list[str]] = {check_id: [] for check_id in CATALOG}
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        try:
            playbook = load_playbook(path)
        except AgentError as exc:  # a broken shipped playbook is a bug: say which
            raise AgentError(f"{path}: cannot be read for the catalogue: {exc}") from None
        for check_id in playbook_check_ids(playbook):
            found[check_id].append(playbook.name)
    return found


CHECKS_TITLE = "checks (roce-agent validate)"
CHECK_HEADERS = ("id", "name", "summary", "needs", "playbooks")


def check_rows() -> list[dict[str, Any]]:
    runs = playbooks_by_check()
    return [
        {
            "id": check_id,
            "name": check.name(),
            "summary": summary(check),
            "needs": list(needs(check_id)),
            "playbooks": runs[check_id],
        }
        for check_id, check in CATALOG.items()
    ]


@click.command("checks")
@examples(
    "roce-agent checks",
    "roce-agent checks -o json | jq -r '.[] | select(.needs | index(\"traffic\") | not) | .id'",
    "roce-agent validate fabric.yml --checks RC003,RC101",
)
@output_option(*FORMATS)
@handle_errors
def checks_command(output: str) -> None:
    """List every check ``validate`` can run (RC001…): what it expects, what it needs
    collected (config, counters, hosts, traffic) and which shipped playbooks run it.

    ``validate --checks ID…`` runs only some; ``validate --no-traffic`` runs those that need
    no traffic.
    """
    _print(output, CHECKS_TITLE, CHECK_HEADERS, check_rows())

"""``python -m exporters.alerts [--selector S] [--runbook-base URL] [-o FILE|-]``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from exporters.alerts import (
    DEFAULT_RUNBOOK_BASE,
    DEFAULT_SELECTOR,
    RULES,
    OptionError,
    render,
)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--selector",
    default=DEFAULT_SELECTOR,
    show_default=True,
    help="Label matchers that select the exporter's series, e.g. 'job=\"roce-agent\"'.",
)
@click.option(
    "--runbook-base",
    default=DEFAULT_RUNBOOK_BASE,
    show_default=True,
    help="Where the docs' runbook page is served; runbook_url is this plus '#<alert anchor>'.",
)
@click.option(
    "-o",
    "--output",
    default=str(RULES),
    show_default=True,
    help="File to write, or - for standard output.",
)
def main(selector: str, runbook_base: str, output: str) -> None:
    """Write the RoCE alert rules for SELECTOR (exit 2 on a bad selector)."""
    try:
        text = render(selector, runbook_base)
    except OptionError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    if output == "-":
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as error:
        click.echo(f"error: --output {output}: {error.strerror}", err=True)
        sys.exit(2)
    click.echo(f"wrote {output}", err=True)


if __name__ == "__main__":
    main()

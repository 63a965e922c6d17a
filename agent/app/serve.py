"""``roce-agent serve``: the daemon from the command line (:mod:`agent.app.daemon` is the
daemon), or ``--check-config`` to validate its configuration and start nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agent.app.support import handle_errors
from common.conventions import examples


def _shard_option(value: str | None) -> Any:
    from agent.intent.shard import ShardError, parse_shard

    if value is None:
        return None
    try:
        return parse_shard(value)
    except ShardError as exc:
        raise click.BadParameter(str(exc).removeprefix("shard: "), param_hint="'--shard'") from None


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

    SIGHUP reloads: the new files are parsed in a child process, killed at reload_timeout_s;
    an invalid or hung configuration is refused and the old one keeps running. SIGTERM stops
    with exit 0; whatever holds it, the process is gone 9 s later (exit 1, stacks on
    stderr). Logs are JSON lines on stdout.
    """
    from agent.app import daemon, daemon_config
    from agent.errors import printable

    if check_config:
        click.echo(printable(daemon_config.check_config(config_path, shard)))
        return
    sys.exit(daemon.serve(config_path, shard))

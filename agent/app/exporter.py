"""``roce-agent exporter``: serve the fabric's health to Prometheus until stopped.

Registered in ``agent/app/cli.py`` as ``main.add_command(exporter_command)``. The exporter package
is imported inside the command so the rest of the CLI does not load it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from agent.app.support import FABRIC, handle_errors
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.intent.shard import ShardError, parse_shard
from common.conventions import duration, examples, named_durations

if TYPE_CHECKING:  # the exporter package is imported when the command runs
    from exporters.exporter import ExporterOptions

INTERVAL = duration(86400)
TIMEOUT = duration(3600)


def _device_intervals(values: tuple[str, ...]) -> dict[str, float]:
    return named_durations(values, "'--device-interval'", INTERVAL)


@click.command("exporter")
@examples(
    "roce-agent exporter fabric.yml",
    "roce-agent exporter fabric.yml --listen :9417 --interval 30s --device-interval leaf1=5s",
    "roce-agent exporter fabric.yml --shard 1/4 --timeout 5s",
    "roce-agent exporter fabric.yml --telemetry gnmi --interval 1s",
)
@FABRIC
@click.option(
    "--listen",
    default="127.0.0.1:9417",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to serve /metrics on (:PORT for every address, [v6]:PORT).",
)
@click.option(
    "--interval",
    type=INTERVAL,
    default="15s",
    show_default=True,
    help="Time between two polls of a switch, with its unit (15s, 500ms).",
)
@click.option(
    "--device-interval",
    "device_intervals",
    multiple=True,
    metavar="NAME=DURATION",
    help="Another interval for one switch, e.g. leaf1=5s (repeatable).",
)
@click.option(
    "--timeout",
    type=TIMEOUT,
    default="10s",
    show_default=True,
    help="A poll longer than this counts as failed (reason timeout); the device reads down.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1024),
    default=16,
    show_default=True,
    help="Switches polled at the same time at most.",
)
@click.option(
    "--web-config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="TLS and basic auth, in the Prometheus exporter-toolkit web config format.",
)
@click.option(
    "--host-nic/--no-host-nic",
    default=None,
    help="Export this host's RDMA NIC counters (default: when /sys/class/infiniband exists).",
)
@click.option(
    "--sysfs-root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("/sys"),
    show_default=True,
    help="Where sysfs is (tests point it at a fake tree).",
)
@click.option(
    "--probe-results",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory of probe results (`roce-agent probe ... --output json > DIR/x.json`); "
    "new files are added to the probe metrics.",
)
@click.option(
    "--shard",
    "shard_spec",
    default="1/1",
    show_default=True,
    metavar="K/N",
    help="Poll and serve only the switches of shard K of N (consistent hash of the device "
    "name; every switch is in exactly one shard).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    metavar="N",
    help="Connections served at once, from all clients together.",
)
@click.option(
    "--max-connections-per-address",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    metavar="N",
    help="Connections served at once from one client address (an IPv6 /64); at most "
    "--max-connections. Behind a reverse proxy every scrape shares the proxy's address.",
)
@click.option(
    "--telemetry",
    type=click.Choice(["auto", "gnmi", "ssh"]),
    default="auto",
    show_default=True,
    help="How switch counters are read: gnmi (a STREAM subscription sampled every --interval), "
    "ssh (a poll every --interval), or auto (gNMI where a switch answers it at start, else SSH).",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Subscribe to gNMI without TLS (plain text, credentials included); logged as a "
    "warning. Without it, every gNMI connection verifies the switch's certificate.",
)
@click.option(
    "--no-ssh-complement",
    is_flag=True,
    help="Under gNMI, do not read over SSH the counter families a switch's stream lacks (the "
    "PFC watchdog on Cumulus Linux, headroom drops); they then read as not read.",
)
@click.option("--no-drift", is_flag=True, help="Do not read the configuration for drift.")
@click.option("-v", "--verbose", is_flag=True, help="Log every poll failure detail.")
@handle_errors
def exporter_command(fabric: Path, **options: Any) -> None:
    """Serve PFC, ECN, drop, watchdog, drift, probe and NIC metrics for Prometheus.

    Every switch of FABRIC is read into a snapshot, by a gNMI subscription or an SSH poll
    (--telemetry); a scrape renders the latest snapshot and never waits for a device. A
    device that does not answer within --timeout, or whose stream fails, reads
    roce_device_up 0 with the reason and keeps its last values.
    Stops on SIGTERM or Ctrl-C (exit 0); bad input (fabric, web config, listen address,
    unreadable credentials) exits 2 before anything is served.

    \b
    Metrics: https://roce-fabric-agent.readthedocs.io/en/latest/reference/metrics/
    (the installed version's table: python -m exporters.metrics)
    """
    from exporters.exporter import Exporter

    flags = ExporterFlags(**options)
    flags.configure_logging()
    exporter_options = flags.exporter_options()  # bad input exits 2 before any work
    intent = load_fabric(fabric).intent
    exporter = Exporter(intent, exporter_options)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    exporter.start()
    shard = exporter_options.shard
    part = "" if shard.whole else f" shard {shard}"
    click.echo(
        f"roce-agent exporter: serving {exporter.url} for fabric {intent.name}{part} "
        f"({len(exporter.switches)} switches, every {flags.interval:g} s)",
        err=True,
    )
    try:
        while not stop.wait(1.0):
            pass
    finally:
        exporter.stop()
    # Leave without the interpreter's shutdown: a thread still in C code that let go of the
    # interpreter lock (bcrypt or the SSH library's crypto, both Rust) is ended there by a
    # forced unwind that aborts the process ("FATAL: exception not rethrown", exit 134;
    # issue #42). Everything this command writes is flushed first.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True)
class ExporterFlags:
    """``roce-agent exporter``'s options as the command line gives them; checked and turned
    into the exporter's own by :meth:`exporter_options`."""

    listen: str
    interval: float
    device_intervals: tuple[str, ...]
    timeout: float
    concurrency: int
    web_config: Path | None
    host_nic: bool | None
    sysfs_root: Path
    probe_results: Path | None
    shard_spec: str
    max_connections: int
    max_connections_per_address: int
    no_drift: bool
    verbose: bool
    telemetry: str = "auto"
    insecure: bool = False
    no_ssh_complement: bool = False

    def configure_logging(self) -> None:
        logging.basicConfig(
            level=logging.DEBUG if self.verbose else logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
        if not self.verbose:
            # paramiko logs every failed banner read at ERROR; the poller's own warning says it.
            logging.getLogger("paramiko").setLevel(logging.CRITICAL)

    def exporter_options(self) -> ExporterOptions:
        """The options checked, each bad one an error naming it (exit 2)."""
        from exporters.exporter import ExporterOptions
        from exporters.server import LimitsError, ServerLimits, parse_listen
        from exporters.webconfig import load_web_config

        intervals = _device_intervals(self.device_intervals)
        try:
            shard = parse_shard(self.shard_spec)
        except ShardError as exc:
            raise AgentError(f"--shard: {str(exc).removeprefix('shard: ')}") from None
        address = parse_listen(self.listen)
        if self.max_connections_per_address > self.max_connections:
            raise LimitsError(
                f"--max-connections-per-address: Expected: at most --max-connections "
                f"({self.max_connections}) Actual: {self.max_connections_per_address}"
            )
        limits = ServerLimits(self.max_connections, self.max_connections_per_address)
        web = load_web_config(self.web_config) if self.web_config is not None else None
        return ExporterOptions(
            listen=address,
            interval_s=self.interval,
            device_intervals=intervals,
            timeout_s=self.timeout,
            concurrency=self.concurrency,
            web_config=web,
            host_nic=self.host_nic,
            sysfs_root=self.sysfs_root,
            probe_results=self.probe_results,
            drift=not self.no_drift,
            shard=shard,
            limits=limits,
            telemetry=self.telemetry,
            insecure=self.insecure,
            ssh_complement=not self.no_ssh_complement,
        )

"""``roce-agent probe …``: wire scenarios over a fabric, low-level probes, pcap analysis."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent.app.output import echo_json, write_report_file
from agent.app.support import FABRIC, OUTPUT, HostList, SizeType, handle_errors
from agent.errors import AgentError
from agent.intent.units import UnitError, parse_speed
from agent.observe.probes.pcap import DEFAULT_MAX_BYTES, DEFAULT_MAX_FRAMES
from common.clicktypes import FiniteFloat
from common.conventions import add_column, console, duration, examples, output_option, table

if TYPE_CHECKING:  # the commands load agent.observe.perftest and nccltests on first use
    from rich.table import Table

    from agent.observe.nccltests.verdict import BinaryRow
    from agent.observe.perftest.scenario import PerftestReport, Scenario

# A time with its unit (3s, 200ms); a bare number, nan, inf, 0 and negatives are refused:
# a probe of nan seconds never ends.
SECONDS = duration(86400)
# Hand-run probes: the destination port is the user's to choose; on a host whose NIC does RoCE
# it must not be 4791 (the NIC's RDMA engine takes those frames: see "Probes on RDMA hosts").
UDP_PORT = click.option(
    "--udp-port", type=click.IntRange(1, 65535), default=4791, show_default=True,
    help="UDP destination port of the probes (4791 is RoCEv2's).",
)  # fmt: skip
PACKETS_PER_S = FiniteFloat(0, 1e7, min_open=True)

TABLE_MAX_FLOWS = 1000


def _speed(_: click.Context, __: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_speed(value)
    except UnitError as exc:
        raise click.BadParameter(str(exc)) from None


def _console() -> Any:
    return console()


def _emit(result: dict[str, Any], output: str, title: str) -> None:
    if output == "json":
        echo_json(result)
        return
    console = _console()
    rows = result.get("flows")
    if isinstance(rows, list) and rows and "from" in rows[0]:
        flows = table(title)
        columns = ("from", "to", "sent", "received", "lost", "ce_marked", "cnps_received",
                   "pfc_frames_received", "paused_s", "send_rate_bps", "rate_cuts")  # fmt: skip
        for column in columns:
            add_column(flows, column, justify="left" if column in ("from", "to") else "right")
        for row in rows:
            flows.add_row(*(str(row[c]) for c in columns))
        console.print(flows)
    else:
        console.print_json(json.dumps(result))
    transport = result.get("transport")
    if isinstance(transport, dict):
        # Which port the probes used, and why: on RDMA hosts it is not RoCEv2's 4791.
        from agent.observe.probes.transport import Transport

        chosen = Transport(transport["udp_port"], transport["reason"], transport.get("rdma", {}))
        console.print(chosen.summary(), markup=False)
    if "passed" in result:
        verdict = "PASS" if result["passed"] else "FAIL"
        console.print(f"{title}: {verdict}")
        for failure in result.get("failures", []):
            console.print(f"  - {failure}", markup=False)


def _exit_for(result: dict[str, Any]) -> None:
    if result.get("passed") is False:
        sys.exit(1)


def _intent(fabric: Path) -> Any:
    from agent.intent.loader import load_fabric

    return load_fabric(fabric).intent


@click.group("probe")
@examples(
    "roce-agent probe pairwise fabric.yml --rate 1M",
    "roce-agent probe incast fabric.yml --to h3 --from h1,h2 --duration 3s",
    "roce-agent probe analyze capture.pcap -o json",
)
def group() -> None:
    """Inject and sniff RoCEv2 traffic: drops, ECN marks, CNPs, PFC pauses and storms.

    Scenarios exit 0 when the fabric behaved as a lossless fabric should, 1 when not, 2 when
    they could not run.
    """


@group.command()
@examples(
    "roce-agent probe incast fabric.yml --to h3 --from h1,h2",
    "roce-agent probe incast fabric.yml --to h3 --from h1,h2 --duration 500ms --no-dcqcn -o json",
)
@FABRIC
@click.option("--to", "to", required=True, help="Receiving host.")
@click.option("--from", "senders", required=True, help="Sending hosts, comma separated.")
@click.option("--duration", type=SECONDS, default="3s", show_default=True,
              help="How long the senders send (3s, 500ms).")  # fmt: skip
@click.option("--rate", callback=_speed, help="Per-sender rate (default: line rate).")
@click.option("--size", type=int, default=1000, show_default=True, help="Payload bytes.")
@click.option("--no-dcqcn", is_flag=True, help="Senders ignore CNPs (no reaction point).")
@OUTPUT
@handle_errors
def incast(fabric: Path, output: str, **options: Any) -> None:
    """N senders at line rate into one receiver: expect 0 loss, CE and CNPs with ECN on."""
    spec = IncastFlags(**options)
    result = spec.run(_intent(fabric))
    _emit(result, output, f"incast {','.join(spec.names)} → {spec.to}")
    _exit_for(result)


@dataclass(frozen=True)
class IncastFlags:
    """``probe incast``'s receiver, senders (comma-separated), duration, per-sender rate
    (None: line rate), payload size and whether the senders react to CNPs."""

    to: str
    senders: str
    duration: float
    rate: int | None
    size: int
    no_dcqcn: bool

    @property
    def names(self) -> list[str]:
        return [s.strip() for s in self.senders.split(",") if s.strip()]

    def run(self, intent: Any) -> dict[str, Any]:
        from agent.observe.probes.scenarios import incast as run_incast

        return run_incast(
            intent, self.to, self.names, self.duration, self.rate, size=self.size,
            dcqcn=not self.no_dcqcn,
        )  # fmt: skip


@group.command()
@examples(
    "roce-agent probe pairwise fabric.yml",
    "roce-agent probe pairwise fabric.yml --hosts h1,h2,h3 --rate 10M --duration 5s",
)
@FABRIC
@click.option("--hosts", help="Hosts to include, comma separated (default: all).")
@click.option("--duration", type=SECONDS, default="3s", show_default=True,
              help="How long each pair sends (3s, 500ms).")  # fmt: skip
@click.option("--rate", callback=_speed, default="1M", show_default=True)
@OUTPUT
@handle_errors
def pairwise(fabric: Path, hosts: str | None, duration: float, rate: int, output: str) -> None:
    """Every host pair at a low rate: expect zero loss everywhere."""
    from agent.observe.probes.scenarios import pairwise as run_pairwise

    names = [h.strip() for h in hosts.split(",")] if hosts else None
    result = run_pairwise(_intent(fabric), names, rate, duration)
    _emit(result, output, "pairwise")
    _exit_for(result)


@group.command()
@examples(
    "roce-agent probe storm fabric.yml --host h3",
    "roce-agent probe storm fabric.yml --host h3 --traffic-from h1 --duration 1s",
)
@FABRIC
@click.option("--host", required=True, help="Host that injects the storm into its switch port.")
@click.option("--duration", type=SECONDS, default="2s", show_default=True,
              help="How long the storm lasts (2s, 500ms).")  # fmt: skip
@click.option("--rate", "rate_pps", type=PACKETS_PER_S, default=200.0, show_default=True,
              help="XOFF frames per second.")  # fmt: skip
@click.option("--traffic-from", help="Host that sends to --host during the storm.")
@OUTPUT
@handle_errors
def storm(fabric: Path, host: str, output: str, **options: Any) -> None:
    """Inject a PFC storm (bounded, self-stopping) and check it is seen as one on the wire."""
    from agent.observe.probes.scenarios import storm as run_storm

    injected = StormFlags(**options)
    result = run_storm(_intent(fabric), host, injected.duration, injected.rate_pps,
                       traffic_from=injected.traffic_from)  # fmt: skip
    _emit(result, output, f"storm from {host}")
    _exit_for(result)


@dataclass(frozen=True)
class StormFlags:
    """How long ``probe storm`` injects, how many XOFF frames a second, and which host sends
    traffic into the storm (None: no traffic)."""

    duration: float
    rate_pps: float
    traffic_from: str | None


TWIN_AGREEMENT = 0.15  # the lab ring's completion time vs the twin's (issue #26 item 5)


def _twin_ring(fabric: Path, hosts: list[str], size: int, lab_s: float | None) -> dict[str, Any]:
    """The twin's ring all-reduce on the same fabric and hosts, and whether its completion
    time is within :data:`TWIN_AGREEMENT` of the lab's (in the time of the fabric the lab
    stands for)."""
    from agent.twin.collectives import CollectiveSpec, run_collective
    from agent.twin.network import load_network

    spec = CollectiveSpec("allreduce", len(hosts), size, hosts=tuple(hosts))
    twin = run_collective(load_network(fabric), spec)
    error = (twin.time_s - lab_s) / lab_s if lab_s and twin.completed else None
    return {
        "time_s": twin.time_s if twin.completed else None,
        "busbw_Bps": twin.busbw_Bps if twin.completed else None,
        "error": error,
        "agrees": error is not None and abs(error) <= TWIN_AGREEMENT,
    }


@group.command()
@examples(
    "roce-agent probe allreduce fabric.yml --hosts h1,h2,h3,h4 --size 400KB",
    "roce-agent probe allreduce fabric.yml --hosts h1,h2 --deadline 30s --no-twin -o json",
)
@FABRIC
@click.option("--hosts", type=HostList(), required=True,
              help="The ranks, comma separated, in ring order (two or more).")  # fmt: skip
@click.option("--size", "size_bytes", type=SizeType(), default="400KB", show_default=True,
              help="nccl-tests' size: each rank's buffer (400KB, 1MiB, bytes).")  # fmt: skip
@click.option(
    "--payload",
    type=click.IntRange(64, 9000),
    default=4096,
    show_default=True,
    help="Payload bytes per frame (4096: the RoCE MTU the twin sends at MTU 9000).",
)
@click.option(
    "--deadline",
    type=SECONDS,
    default="60s",
    show_default=True,
    help="Lab time before an unfinished ring fails, with its unit (60s, 500ms).",
)
@click.option(
    "--twin/--no-twin",
    "with_twin",
    default=True,
    show_default=True,
    help="Run the twin's ring on the same fabric and compare the completion times.",
)
@OUTPUT
@handle_errors
def allreduce(fabric: Path, with_twin: bool, output: str, **options: Any) -> None:
    """A ring all-reduce among the hosts (2(N-1) steps of size/N): every step must arrive.

    Reports the completion time and nccl-tests' algbw and busbw (in lab time and, on a
    time-dilated lab, in the time of the fabric it stands for) and, with --twin, the twin's
    ring on the same fabric: the check fails when the two differ by more than 15 %.

    """
    ring = RingFlags(**options)
    result = ring.run(_intent(fabric))
    if output != "json":  # per-rank step times: JSON only, a table would be 2(N-1) wide
        result.pop("ranks_detail", None)
    if with_twin:
        twin = _twin_ring(fabric, list(ring.hosts), ring.size_bytes, result.get("emulated_time_s"))
        result["twin"] = twin
        if result["passed"] and not twin["agrees"]:
            result["passed"] = False
            result["failures"] = [*result["failures"], (
                f"twin: Expected: completion within {TWIN_AGREEMENT:.0%} of the lab's "
                f"{result['emulated_time_s']:.6f} s Actual: {twin['time_s']}"
            )]  # fmt: skip
    _emit(result, output, f"ring all-reduce {','.join(ring.hosts)}")
    _exit_for(result)


@dataclass(frozen=True)
class RingFlags:
    """``probe allreduce``'s ring: its ranks in order, each rank's buffer, the payload per
    frame and the lab time it may take."""

    hosts: tuple[str, ...]
    size_bytes: int
    payload: int
    deadline: float

    def run(self, intent: Any) -> dict[str, Any]:
        from agent.observe.probes.scenarios import ring_allreduce

        return ring_allreduce(intent, list(self.hosts), self.size_bytes, payload=self.payload,
                              deadline_s=self.deadline)  # fmt: skip


def _pairs(value: str | None) -> list[tuple[str, str]] | None:
    if not value:
        return None
    pairs = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        client, sep, server = item.partition(":")
        if not sep or not client or not server:
            raise click.BadParameter(f"expected CLIENT:SERVER pairs, got {item!r}")
        pairs.append((client, server))
    return pairs


@group.command()
@examples(
    "roce-agent probe perftest fabric.yml",
    "roce-agent probe perftest fabric.yml --pairs h1:h3,h2:h4 --duration 10s",
    "roce-agent probe perftest fabric.yml --to h3 --from h1,h2 -o junit > perftest.xml",
)
@FABRIC
@click.option("--pairs", help="CLIENT:SERVER pairs, comma separated (default: every pair of "
              "RDMA hosts, in rounds of disjoint pairs).")  # fmt: skip
@click.option("--to", "to", help="Incast: the receiving host (with --from).")
@click.option("--from", "senders", help="Incast: sending hosts, comma separated.")
@click.option("--bidirectional", is_flag=True, help="Pairs with -b: both directions at once.")
@click.option(
    "--test",
    type=click.Choice(["write", "read", "send"]),
    help="ib_write_bw, ib_read_bw or ib_send_bw (default: validation.perftest.test).",
)
@click.option("--duration", type=SECONDS, help="perftest -D per run, with its unit: 10s "
              "(default: validation.perftest.duration_s).")  # fmt: skip
@click.option("--qps", type=click.IntRange(1, 64), help="QPs per client (-q).")
@click.option("--no-switches", is_flag=True, help="Do not read the switches' counters.")
@output_option("table", "json", "junit", "markdown")
@click.option("--report", "report_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the report here (.xml JUnit, .md Markdown, .json).")  # fmt: skip
@handle_errors
def perftest(fabric: Path, output: str, report_file: Path | None, **options: Any) -> None:
    """Line-rate acceptance with perftest on the RDMA hosts, judged with NIC and switch
    counters: >= 90 % of line rate per pair, fair shares and no lossless drops in an incast,
    CNPs where ECN marked, no pause on lossy priorities. Exit 0 pass, 1 fail, 2 not run (no
    side of any pair ran: hosts not reached, or perftest could not start on them)."""
    report = PerftestFlags(**options).run(_intent(fabric))
    _emit_perftest(report, output, report_file)
    if report.pairs and not any(p.client_side.raw or p.server_side.raw for p in report.pairs):
        sys.exit(2)
    if not report.passed:
        sys.exit(1)


@dataclass(frozen=True)
class PerftestFlags:
    """What ``probe perftest`` runs: pairs (``--pairs``, or every pair, ``--bidirectional``)
    or an incast (``--to``/``--from``), and what overrides the fabric's
    validation.perftest (``--test``, ``--qps``, ``--duration``)."""

    pairs: str | None
    to: str | None
    senders: str | None
    bidirectional: bool
    test: str | None
    duration: float | None
    qps: int | None
    no_switches: bool

    def run(self, intent: Any) -> PerftestReport:
        from agent.observe.perftest.scenario import PerftestError, run_perftest

        intent = self.with_policy(intent)
        scenario = self.scenario()
        names = [s.strip() for s in self.senders.split(",") if s.strip()] if self.senders else None
        try:
            return run_perftest(
                intent, scenario, pairs=_pairs(self.pairs), to=self.to, senders=names,
                duration_s=self.duration, read_switches=not self.no_switches,
            )  # fmt: skip
        except PerftestError as exc:
            raise AgentError(str(exc)) from None

    def with_policy(self, intent: Any) -> Any:
        """The intent with ``--test`` and ``--qps`` in its perftest policy."""
        changes = {k: v for k, v in (("test", self.test), ("qps", self.qps)) if v is not None}
        if not changes:
            return intent
        policy = intent.validation.perftest.model_copy(update=changes)
        validation = intent.validation.model_copy(update={"perftest": policy})
        return intent.model_copy(update={"validation": validation})

    def scenario(self) -> Scenario:
        if (self.to is None) != (self.senders is None):
            raise click.UsageError("an incast needs both --to and --from")
        if self.to is not None and (self.pairs or self.bidirectional):
            raise click.UsageError("--to/--from (incast) cannot go with --pairs or --bidirectional")
        if self.to:
            return "incast"
        return "bidirectional" if self.bidirectional else "pairwise"


def _emit_perftest(report: PerftestReport, output: str, report_file: Path | None) -> None:
    from agent.observe.perftest.report import (
        TABLE_COLUMNS,
        render_junit,
        render_markdown,
        summary,
        table_rows,
    )

    verdict = report.verdict
    texts = {
        "json": lambda: json.dumps(report.as_json(), indent=2),
        "junit": lambda: render_junit(verdict, report.causes, report.notes),
        "markdown": lambda: render_markdown(verdict, report.causes, report.notes),
    }
    if report_file is not None:
        write_report_file(report_file, texts)
    if output in texts:
        click.echo(texts[output]())
        return
    console = _console()
    results = table(f"perftest {report.scenario} ({verdict.test})")
    numbers = ("measured", "% of line rate", "line rate")
    for column in TABLE_COLUMNS:
        add_column(results, column, justify="right" if column in numbers else "left")
    for row in table_rows(verdict):
        results.add_row(*row)
    console.print(results)
    for outcome in verdict.outcomes:
        if outcome.status != "pass":
            for message in outcome.messages or (outcome.description,):
                console.print(f"  {outcome.status}: {outcome.rule} {message}", markup=False)
    for cause in report.causes:
        console.print(f"  cause: {cause}", markup=False)
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)
    console.print(summary(verdict), markup=False)


NCCL_TESTS = ["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
              "broadcast_perf", "reduce_perf", "sendrecv_perf"]  # fmt: skip


@group.command("nccl")
@examples(
    "roce-agent probe nccl fabric.yml",
    "roce-agent probe nccl fabric.yml --test all_reduce_perf --min-busbw-fraction 0.9",
)
@FABRIC
@click.option("--test", "tests", multiple=True, type=click.Choice(NCCL_TESTS),
              help="nccl-tests binary, repeatable (default: validation.nccl.tests).")  # fmt: skip
@click.option("--min-busbw-fraction", type=FiniteFloat(0, 1, min_open=True),
              help="busbw per NIC over line rate (default: validation.nccl: 0.9).")  # fmt: skip
@click.option("--host", "hosts", multiple=True,
              help="RDMA host to include, repeatable (default: every one with a GPU).")  # fmt: skip
@click.option("--no-switches", is_flag=True, help="Do not read the switches' counters.")
@OUTPUT
@handle_errors
def nccl(fabric: Path, output: str, **options: Any) -> None:
    """NCCL acceptance: nccl-tests (mpirun from the first GPU host) with the job environment
    of `roce-agent nccl`, judged on busbw at the largest size per NIC against line rate, no
    wrong value, and no loss at the switches and NICs read before and after.

    Exit 0 pass, 1 fail, 2 not run: no two hosts with GPUs (skipped, with each host's
    reason), or a host's environment or tools missing (docs/nccl-acceptance.md).

    """
    report = NcclFlags(**options).run(_intent(fabric))
    _emit_nccl(report, output)
    if report.skipped is not None:
        sys.exit(2)
    if not report.passed:
        sys.exit(1)


@dataclass(frozen=True)
class NcclFlags:
    """``probe nccl``'s overrides of the fabric's validation.nccl (``--test``,
    ``--min-busbw-fraction``), its hosts (empty: every one with a GPU) and whether the
    switches are read."""

    tests: tuple[str, ...]
    min_busbw_fraction: float | None
    hosts: tuple[str, ...]
    no_switches: bool

    def run(self, intent: Any) -> Any:
        from agent.observe.nccltests.run import NcclProbeError, run_nccl_acceptance

        changes: dict[str, Any] = {}
        if self.tests:
            changes["tests"] = list(dict.fromkeys(self.tests))
        if self.min_busbw_fraction is not None:
            changes["min_busbw_fraction"] = self.min_busbw_fraction
        policy = intent.validation.nccl.model_copy(update=changes)
        try:
            return run_nccl_acceptance(intent, hosts=list(self.hosts) or None, policy=policy,
                                       read_switches=not self.no_switches)  # fmt: skip
        except NcclProbeError as exc:
            raise AgentError(str(exc)) from None


def _emit_nccl(report: Any, output: str) -> None:
    if output == "json":
        echo_json(report.as_json())
        return
    console = _console()
    if report.skipped is not None:
        click.echo(f"nccl acceptance skipped: {report.skipped}", err=True)
        return
    console.print(_nccl_table(report.verdict.rows))
    for outcome in report.verdict.outcomes:
        if outcome.status != "pass":
            for message in outcome.messages or (outcome.subject,):
                console.print(f"  {outcome.status}: {outcome.rule} {message}", markup=False)
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)
    console.print(f"nccl acceptance: {'PASS' if report.passed else 'FAIL'}", markup=False)


def _nccl_table(verdict_rows: Sequence[BinaryRow]) -> Table:
    """One row per nccl-tests binary: its busbw at the largest size against line rate."""
    rows = table("nccl-tests")
    columns = ("test", "status", "largest size (B)", "busbw GB/s", "per NIC GB/s",
               "line rate GB/s", "% of line rate", "avg busbw GB/s")  # fmt: skip
    for column in columns:
        add_column(rows, column, justify="left" if column in ("test", "status") else "right")
    for row in verdict_rows:
        cells = (row.size_bytes, row.busbw_GBps, row.busbw_per_nic_GBps, row.line_rate_GBps)
        fraction = "-" if row.fraction is None else f"{row.fraction:.1%}"
        avg = "-" if row.avg_busbw_GBps is None else f"{row.avg_busbw_GBps:g}"
        rows.add_row(row.test, row.status, *map(_nccl_number, cells), fraction, avg)
    return rows


def _nccl_number(value: float | None) -> str:
    """A size in bytes as it is, a rate with two decimals, "-" when not measured."""
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, int) else f"{value:.2f}"


def _worker(role: str, spec: dict[str, Any], output: str) -> None:
    from agent.observe.probes.worker import run

    try:
        result = run(role, spec)
    except (ValueError, TypeError) as exc:
        raise AgentError(str(exc)) from None
    _emit(result, output, role)


@group.command()
@examples(
    "roce-agent probe send --interface eth1 --dst 10.0.0.3 --rate 1M --link-speed 10M "
    "--duration 2s",
)
@click.option("--interface", "ifname", required=True)
@click.option("--dst", "dst_ip", required=True, help="Destination IPv4 address.")
@click.option("--rate", callback=_speed, required=True)
@click.option("--link-speed", callback=_speed, required=True, help="Speed of --interface.")
@click.option("--count", type=int)
@click.option("--duration", type=SECONDS, help="How long to send, with its unit (or --count).")
@click.option("--size", type=int, default=1000, show_default=True)
@click.option("--dscp", type=int, default=26, show_default=True)
@click.option("--priority", type=int, default=3, show_default=True)
@click.option("--qpn", type=lambda v: int(v, 0), default="0x100", show_default=True)
@click.option("--sport", type=int, default=49152, show_default=True)
@UDP_PORT
@OUTPUT
@handle_errors
def send(output: str, **spec: Any) -> None:
    """Send one paced RoCEv2 flow from this host (honours PFC like a NIC)."""
    spec = {"rate_bps": spec.pop("rate"), "link_speed_bps": spec.pop("link_speed"), **spec}
    spec["duration_s"] = spec.pop("duration")
    _worker("send", spec, output)


@group.command()
@examples(
    "roce-agent probe receive --interface eth1 --duration 10s --link-speed 10M -o json",
)
@click.option("--interface", "ifname", required=True)
@click.option("--duration", type=SECONDS, required=True, help="How long to receive (10s).")
@click.option("--link-speed", callback=_speed, required=True)
@click.option("--no-cnp", is_flag=True, help="Do not answer CE marks with CNPs.")
@click.option("--sender", "senders", multiple=True,
              help="IPv4 source to track (repeatable); others are only counted.")  # fmt: skip
@click.option("--max-flows", type=click.IntRange(min=1), default=65_536, show_default=True,
              help="QPs tracked at most; frames of further flows are only counted.")  # fmt: skip
@UDP_PORT
@OUTPUT
@handle_errors
def receive(output: str, **spec: Any) -> None:
    """Receive RoCEv2 on this host: per-QP loss, reorder, CE, ICRC, latency; send CNPs."""
    spec["duration_s"] = spec.pop("duration")
    spec["link_speed_bps"] = spec.pop("link_speed")
    spec["notification_point"] = not spec.pop("no_cnp")
    spec["senders"] = list(spec["senders"]) or None
    _worker("receive", spec, output)


@group.command("sniff-pfc")
@examples(
    "roce-agent probe sniff-pfc --interface eth1 --duration 5s --link-speed 10M",
    "roce-agent probe sniff-pfc --interface eth1 --link-speed 100G --duration 5s --storm-after 1s",
)
@click.option("--interface", "interfaces", multiple=True, required=True)
@click.option("--duration", type=SECONDS, required=True, help="How long to sniff (5s).")
@click.option("--link-speed", callback=_speed, required=True)
@click.option("--storm-after", type=SECONDS, default="200ms", show_default=True,
              help="Pause longer than this counts as a storm (200ms, 1s).")  # fmt: skip
@OUTPUT
@handle_errors
def sniff_pfc(
    interfaces: tuple[str, ...], duration: float, link_speed: int, storm_after: float, output: str
) -> None:
    """Count PFC frames, XOFF/XON, paused time and storms per interface and priority."""
    _worker(
        "sniff-pfc",
        {"interfaces": list(interfaces), "duration_s": duration, "link_speed_bps": link_speed,
         "storm_after_s": storm_after},
        output,
    )  # fmt: skip


@group.command()
@examples(
    "roce-agent probe analyze capture.pcap",
    "roce-agent probe analyze capture.pcapng --link-speed 400G -o json",
)
@click.argument("capture", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--link-speed", callback=_speed, default="100G", show_default=True,
              help="Link speed the capture was taken at (for PFC paused time).")  # fmt: skip
@click.option("--storm-after", type=SECONDS, default="200ms", show_default=True,
              help="Pause longer than this counts as a storm (200ms, 1s).")  # fmt: skip
@click.option("--max-flows", type=click.IntRange(min=1), default=65_536, show_default=True,
              help="QPs tracked at most; frames of further flows are only counted.")  # fmt: skip
@click.option("--max-frames", type=click.IntRange(min=1), default=DEFAULT_MAX_FRAMES,
              show_default=True, help="Packets read at most; the rest is not read.")  # fmt: skip
@click.option("--max-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_BYTES,
              show_default=True, help="Bytes read at most: captured packets and the other "
              "pcapng blocks.")  # fmt: skip
@UDP_PORT
@OUTPUT
@handle_errors
def analyze(capture: Path, output: str, **options: Any) -> None:
    """Analyze a tcpdump capture: per-QP loss, reorder, CE, CNPs, ICRC errors; PFC per priority.

    pcap and pcapng; Ethernet, Linux cooked (SLL, SLL2) and raw IPv4 link types, VLAN tags
    stripped. Exit 2 for a file that is not a capture, is truncated or garbled (with the byte
    offset), or holds no packet of a supported link type.
    """
    from agent.errors import printable

    result, warnings = AnalysisFlags(**options).analyze(capture)
    for warning in warnings:  # a file name can hold escape sequences: shown, never obeyed
        click.echo(f"warning: {printable(warning)}", err=True)
    if output == "json":
        # Streamed: the text of 65 536 flows would otherwise be held whole in memory.
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    console = _console()
    flow_table = table(
        f"RoCE flows in {printable(str(capture))}",
        "src_ip", "dst_ip", "qpn", "received", "lost", "reordered", "duplicates",
        "ce_marked", "cnps", "icrc_errors",
    )  # fmt: skip
    columns = ("src_ip", "dst_ip", "qpn", "received", "lost", "reordered", "duplicates",
               "ce_marked", "cnps", "icrc_errors")  # fmt: skip
    flows = result["roce"]["flows"]
    if len(flows) > TABLE_MAX_FLOWS:  # a terminal cannot show 65 536 rows; show the worst
        flows = sorted(
            flows, key=lambda f: -(f["lost"] + f["reordered"] + f["duplicates"] + f["icrc_errors"])
        )[:TABLE_MAX_FLOWS]
    for flow in flows:
        flow_table.add_row(*(f"0x{flow[c]:06x}" if c == "qpn" else str(flow[c]) for c in columns))
    console.print(flow_table)
    if len(flows) < len(result["roce"]["flows"]):
        console.print(
            f"{len(result['roce']['flows']) - len(flows)} more flows not shown (fewest errors); "
            "--output json lists all"
        )
    pfc = table("PFC per priority", "priority", "frames", "xoff", "xon", "paused_s", "storms")
    for priority, stats in result["pfc"]["priorities"].items():
        pfc.add_row(priority, *(str(stats[c]) for c in ("frames", "xoff", "xon", "paused_s",
                                                        "storms")))  # fmt: skip
    console.print(pfc)
    totals = result["roce"]["totals"]
    console.print(
        f"invalid RoCE frames: {totals['invalid']}  untracked (over --max-flows): "
        f"{totals['untracked_frames']}  skipped packets: {result['skipped_packets']}"
    )


@dataclass(frozen=True)
class AnalysisFlags:
    """How ``probe analyze`` reads a capture: the link speed it was taken at (for paused
    time), when a pause counts as a storm, the UDP port of RoCEv2, and its bounds (flows
    tracked, packets and bytes read)."""

    link_speed: int
    storm_after: float
    max_flows: int
    max_frames: int
    max_bytes: int
    udp_port: int

    def analyze(self, capture: Path) -> tuple[dict[str, Any], list[str]]:
        """The analysis, with what the capture was and how much of it was read, and the
        warnings for stderr (the capture's, then the analysis')."""
        from agent.observe.probes.analysis import analyze_frames
        from agent.observe.probes.pcap import Capture

        source = Capture(capture, max_frames=self.max_frames, max_bytes=self.max_bytes)
        result = analyze_frames(
            source.frames_or_nothing(), self.link_speed, self.storm_after, self.max_flows,
            self.udp_port,
        )  # fmt: skip
        result["capture"] = str(capture)
        # A cap is a documented acceptance, not a failure: said in a warning and here.
        result["frames_capped"] = source.capped
        result["capped_by"] = source.capped_by
        result["max_frames"] = self.max_frames
        result["max_bytes"] = self.max_bytes
        result["link_types"] = {str(k): v for k, v in sorted(source.linktypes.items())}
        result["skipped_packets"] = sum(source.skipped.values())
        return result, source.warnings() + result["roce"]["warnings"]

"""``roce-agent serve``: the daemon — reconcile loop, scheduled playbooks, the exporter.

Runs under systemd (``Type=notify``): ``READY=1`` once the configuration is loaded and the
exporter listens, ``WATCHDOG=1`` at half the watchdog interval, ``STATUS=`` after every cycle
(the sd_notify protocol is one datagram to the unix socket in ``$NOTIFY_SOCKET``). SIGHUP
reloads the configuration and fabric; a bad new configuration is refused and the old one keeps
running — fabric, pollers and the exporter on its old address (one JSON log line with
FILE:LINE and ``roce_agent_config_reload_success 0`` say why). A reload never exits the
daemon, whatever the new files hold: under ``Restart=on-failure`` a bad file must not turn
into a crash loop. The new files are parsed and validated in a child process
(:mod:`agent.app.reload_worker`) with a deadline (``reload_timeout_s``) and a memory cap, so
a parse that never ends is killed while the daemon serves scrapes, pings the watchdog and
obeys signals (issue #42).

SIGTERM stops with exit 0 within ``STOP_GRACE_S`` plus the exporter's shutdown: work in
flight on a switch is protected by the switch's own commit timer. Whatever holds it, the
process is gone ``STOP_LIMIT_S`` after SIGTERM (exit 1, every thread's stack on stderr); and
a main loop held for ``FREEZE_LIMIT_S`` (an interpreter stuck in a C call) ends the process
the same way, as systemd's watchdog would. Logs are JSON lines on stdout; reports and the
audit log go to the state dir.

With ``--shard K/N`` (or ``shard:`` in agent.yaml) the daemon is one of N agents of a fleet:
it reconciles, exports and runs playbooks for its shard's switches only, and runs a wire
probe only if its shard owns the probe's target host (:mod:`agent.intent.shard`,
docs/fleet.md).
"""

from __future__ import annotations

import faulthandler
import functools
import json
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client.metrics_core import Metric

from agent.app.daemon_config import (
    ExporterConfig,
    Loaded,
    configure_connections,
    error_fields,
    listen_position,
    load_config,
)
from agent.app.reload_worker import Refused, ReloadWorker
from agent.device.push import DeviceResult, Pusher, Rollout
from agent.errors import AgentError
from agent.intent.model import Device
from agent.intent.shard import Shard
from agent.ops.playbooks import PlaybookRunner, load_playbook, playbook_path
from common.permissions import set_config_override

# After SIGTERM: how long a reconcile or playbook in flight may take to finish.
STOP_GRACE_S = 5.0
# After SIGTERM the process is gone by then, whatever holds it (faulthandler's own thread
# ends it: it needs neither the interpreter lock nor the main loop).
STOP_LIMIT_S = 9.0
# A main loop that has not turned for this long is frozen (the interpreter held by a C call
# that never returns): the process ends, its stacks on stderr, as systemd's watchdog would.
FREEZE_LIMIT_S = 60.0
log = logging.getLogger("roce_agent")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "message": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            entry.update(extra)
        return json.dumps(entry, default=str)


def notify(message: str) -> bool:
    """Send one sd_notify datagram; False when not under systemd (no $NOTIFY_SOCKET)."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        # Never block on the notify socket: a manager that stops reading (its queue holds
        # ~10 datagrams) must not freeze the daemon, its watchdog pings or its shutdown.
        sock.setblocking(False)
        try:
            sock.connect(address)
            sock.send(message.encode())
        except OSError as exc:
            log.warning("sd_notify failed: %s", exc)
            return False
    return True


@dataclass
class Prepared:
    """A validated new configuration with its exporter built and its socket bound (or the
    old socket to be reused), waiting to be swapped in."""

    loaded: Loaded
    exporter: EmbeddedExporter | None
    server: Any  # exporters.server.MetricsServer, new; None to reuse or to serve nothing
    reuse_server: bool

    def discard(self) -> None:
        if self.server is not None:
            self.server.stop()


@dataclass
class ReloadJob:
    """A reload in flight: its child process (parse and validate), then the thread that
    builds the new exporter from what it loaded. One deadline covers both."""

    worker: ReloadWorker
    thread: threading.Thread | None = None
    prepared: list[Prepared | BaseException] = field(default_factory=list)
    abandoned: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keep(self, outcome: Prepared | BaseException) -> None:
        """The preparing thread's outcome; one that comes after the deadline is discarded
        (its socket closed), so a late success never sneaks in."""
        with self.lock:
            if not self.abandoned:
                self.prepared.append(outcome)
                return
        if isinstance(outcome, Prepared):
            outcome.discard()

    def abandon(self) -> bool:
        """Give up on it; False if its outcome had arrived meanwhile."""
        with self.lock:
            self.abandoned = not self.prepared
            return self.abandoned

    def overdue(self) -> bool:
        return time.monotonic() - self.worker.started >= self.worker.deadline_s


class FreezeGuard:
    """Ends the process when the main loop stops turning (:data:`FREEZE_LIMIT_S`) or, after
    SIGTERM, when the graceful stop takes too long (:data:`STOP_LIMIT_S`): faulthandler's
    watchdog is a C thread that needs neither the interpreter lock nor the main loop, so it
    fires whatever holds them, writes every thread's stack to stderr and exits 1."""

    def __init__(self, freeze_limit_s: float = FREEZE_LIMIT_S) -> None:
        self.freeze_limit_s = freeze_limit_s
        self.armed_at = -math.inf
        self.stopping = False

    def alive(self) -> None:
        """The main loop turned: push the freeze deadline back (once a second is enough)."""
        now = time.monotonic()
        if not self.stopping and now - self.armed_at >= 1.0:
            faulthandler.dump_traceback_later(self.freeze_limit_s, exit=True)
            self.armed_at = now

    def stop_within(self, seconds: float) -> None:
        """SIGTERM: the process ends within ``seconds`` from now, gracefully or not."""
        self.stopping = True
        faulthandler.dump_traceback_later(seconds, exit=True)


@dataclass
class Daemon:
    config_path: Path
    loaded: Loaded
    shard_override: Shard | None = None  # `serve --shard`: wins over agent.yaml, reloads too
    stop: threading.Event = field(default_factory=threading.Event)
    reload: threading.Event = field(default_factory=threading.Event)
    exporter: EmbeddedExporter | None = None
    server: Any = None  # exporters.server.MetricsServer
    next_reconcile: float = 0.0
    next_playbook: dict[str, float] = field(default_factory=dict)
    last_status: str = "starting"
    reload_ok: bool = True
    reload_error: str = ""
    reload_failures: int = 0
    last_reload_success: float = field(default_factory=time.time)
    reconciles: int = 0
    guard: FreezeGuard | None = None  # serve() sets one; in-process tests run without
    reloading: ReloadJob | None = None

    # ------------------------------------------------------------------ lifecycle

    def prepare(self, loaded: Loaded) -> Prepared:
        """Everything that can fail before anything running is touched: the exporter's
        pollers and credentials, and a bind of a new listen address (so a reload to an
        address in use or not on this host is refused while the old exporter serves)."""
        from exporters.server import ListenError, MetricsServer, parse_listen

        settings = loaded.config.exporter
        if settings is None:
            return Prepared(loaded, None, None, False)
        exporter = EmbeddedExporter.build(loaded, settings, self)
        address = parse_listen(settings.listen)
        if self.server is not None and self.server.requested == address:
            return Prepared(loaded, exporter, None, True)
        try:
            server = MetricsServer(
                exporter.registry,
                address,
                loaded.web,
                exporter.page,
                settings.server_limits(),
            )
        except ListenError as exc:
            raise ListenError(f"{listen_position(loaded.path)}: exporter.listen: {exc}") from None
        server.requested = address
        return Prepared(loaded, exporter, server, False)

    def commit(self, prepared: Prepared) -> None:
        """Swap in a prepared configuration; nothing here reads a file, binds a socket or
        waits: the old exporter (and an old server) are stopped in a thread of their own."""
        old_exporter, old_server = self.exporter, self.server
        retire: list[Callable[[], None]] = [old_exporter.stop] if old_exporter else []
        if prepared.reuse_server:
            assert prepared.exporter is not None and old_server is not None
            settings = prepared.loaded.config.exporter
            assert settings is not None
            old_server.reconfigure(
                prepared.exporter.registry,
                prepared.loaded.web,
                prepared.exporter.page,
                settings.server_limits(),
            )
        else:
            if prepared.server is not None:
                prepared.server.start()
            self.server = prepared.server
            if old_server is not None:
                old_server.close()  # its address is free once "reloaded" is logged
                retire.append(old_server.drain)
        self.loaded = prepared.loaded
        configure_connections(self.loaded.config)
        self.exporter = prepared.exporter
        if self.exporter is not None:
            self.exporter.start()
        if retire:
            threading.Thread(
                target=_run_all, args=(retire,), name="roce-retire", daemon=True
            ).start()

    def stop_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None
        if self.server is not None:
            self.server.stop()
            self.server = None

    def status(self, text: str) -> None:
        self.last_status = text
        notify(f"STATUS={text}")

    def shard_fields(self) -> dict[str, Any]:
        """What every start/reload log line says about this agent's part of the fabric."""
        owned = self.loaded.owned_switches()
        return {"shard": str(self.loaded.shard), "switches": len(owned), "owned": owned}

    def shard_text(self) -> str:
        """``, shard 2/4 (3 switches)`` for STATUS=; empty for an agent of the whole fabric."""
        if self.loaded.shard.whole:
            return ""
        return f", shard {self.loaded.shard} ({len(self.loaded.owned_switches())} switches)"

    def run(self) -> int:
        self.loaded.config.state_dir.mkdir(parents=True, exist_ok=True)
        self.commit(self.prepare(self.loaded))
        notify("READY=1")
        self.status(
            f"running ({self.loaded.config.mode}), fabric {self.loaded.intent.name}"
            + self.shard_text()
        )
        log.info(
            "started",
            extra={
                "fields": {
                    "mode": self.loaded.config.mode,
                    "fabric": str(self.loaded.config.fabric),
                    "exporter": self.server.url if self.server is not None else None,
                    **self.shard_fields(),
                }
            },
        )
        self.warn_if_empty()
        worker = self.loop()
        notify("STOPPING=1")
        log.info("stopping")
        self.shut_down(worker)
        log.info("stopped")
        return 0

    def loop(self) -> threading.Thread | None:
        """Until SIGTERM: watchdog pings, reloads and work, each only started or looked at
        here, never waited for (a turn takes at most 0.2 s whatever a reload or a poll does).
        Returns the reconcile or playbook thread in flight."""
        watchdog_usec = int(os.environ.get("WATCHDOG_USEC", "0") or 0)
        ping_every = watchdog_usec / 2e6 if watchdog_usec else None
        next_ping = time.monotonic()
        worker: threading.Thread | None = None
        while not self.stop.is_set():
            if self.guard is not None:
                self.guard.alive()
            now = time.monotonic()
            if ping_every is not None and now >= next_ping:
                notify("WATCHDOG=1")
                next_ping = now + ping_every
            if self.reload.is_set() and self.reloading is None:
                self.reload.clear()
                self.start_reload()
            self.finish_reload()
            if worker is None or not worker.is_alive():
                worker = self.maybe_start_work(now)
            self.stop.wait(0.2)
        return worker

    def shut_down(self, worker: threading.Thread | None) -> None:
        """Kill a reload in flight, give work in flight STOP_GRACE_S (a change on a switch is
        covered by its commit timer), stop the exporter."""
        job, self.reloading = self.reloading, None
        if job is not None:
            job.worker.kill()
            job.abandon()
        if worker is not None and worker.is_alive():
            worker.join(STOP_GRACE_S)
        self.stop_exporter()

    def start_reload(self) -> None:
        """Load and validate in a child process (:mod:`agent.app.reload_worker`); the main
        loop looks at it again each turn."""
        shard = str(self.shard_override) if self.shard_override is not None else None
        timeout = self.loaded.config.reload_timeout_s
        try:
            self.reloading = ReloadJob(ReloadWorker(self.config_path, shard, timeout))
        except OSError as exc:  # no process to be had (memory, a process limit): refused
            self.refuse(AgentError(f"{self.config_path}: cannot start the reload worker: {exc}"))

    def finish_reload(self) -> None:
        """One look at the reload in flight: its child's answer starts the exporter's build in
        a thread; a built one is swapped in; past the deadline it is refused. Never waits."""
        job = self.reloading
        if job is None:
            return
        if job.thread is None:
            self._loaded_answer(job)
            return
        if not job.prepared:
            if job.overdue() and job.abandon():
                self.reloading = None
                self.refuse_fields(_overdue_fields(self.config_path, job.worker.deadline_s))
            return
        self.reloading = None
        outcome = job.prepared[0]
        if isinstance(outcome, Prepared):
            self._swap_in(outcome)
        else:
            self.refuse(outcome)

    def _loaded_answer(self, job: ReloadJob) -> None:
        answer = job.worker.answer()
        if answer is None:
            return
        if isinstance(answer, Refused):
            self.reloading = None
            self.refuse_fields(answer.fields)
            return

        def build() -> None:
            outcome: Prepared | BaseException
            try:
                outcome = self.prepare(answer)
            except BaseException as exc:
                outcome = exc
            job.keep(outcome)

        job.thread = threading.Thread(target=build, name="roce-reload", daemon=True)
        job.thread.start()

    def _swap_in(self, prepared: Prepared) -> None:
        try:
            self.commit(prepared)
        except Exception as exc:  # a swap that fails half-way: say so, keep running
            self.refuse(exc)
            return
        # The worker process read the new files under the new agent.yaml's
        # insecure_permissions; this process reads credentials later under the same.
        loaded = self.loaded
        set_config_override(loaded.path if loaded.config.insecure_permissions else None)
        self.reload_ok, self.reload_error = True, ""
        self.last_reload_success = time.time()
        self.next_reconcile = 0.0
        self.next_playbook.clear()
        log.info(
            "reloaded",
            extra={
                "fields": {
                    "fabric": str(self.loaded.config.fabric),
                    "mode": self.loaded.config.mode,
                    "exporter": self.server.url if self.server is not None else None,
                    **self.shard_fields(),
                }
            },
        )
        self.warn_if_empty()

    def do_reload(self, poll_s: float = 0.05) -> None:
        """A whole reload at once (tests and callers without the main loop)."""
        self.start_reload()
        while self.reloading is not None:
            time.sleep(poll_s)
            self.finish_reload()

    def warn_if_empty(self) -> None:
        # Not an error: while a fleet grows (N + 1 agents, a small fabric) a shard may own
        # nothing yet; it still serves roce_exporter_devices 0 so the fleet view shows it.
        if not self.loaded.owned_switches():
            log.warning(
                "this shard owns no switch",
                extra={"fields": {"shard": str(self.loaded.shard)}},
            )

    def refuse(self, exc: BaseException) -> None:
        self.refuse_fields(error_fields(exc))

    def refuse_fields(self, fields: dict[str, Any]) -> None:
        self.reload_ok, self.reload_error = False, fields["reason"]
        self.reload_failures += 1
        log.error(
            "reload refused: the old configuration keeps running",
            extra={"fields": fields},
        )

    # ------------------------------------------------------------------ work

    def maybe_start_work(self, now: float) -> threading.Thread | None:
        job: Any = None
        if now >= self.next_reconcile:
            self.next_reconcile = now + self.loaded.config.intervals.reconcile_s
            job = self.reconcile
        else:
            for scheduled in self.loaded.config.playbooks:
                due = self.next_playbook.get(scheduled.name, now)
                if now >= due:
                    self.next_playbook[scheduled.name] = now + scheduled.every_s
                    job = functools.partial(self.run_playbook, scheduled.name)
                    break
        if job is None:
            return None
        thread = threading.Thread(target=self._guarded, args=(job,), daemon=True)
        thread.start()
        return thread

    def _guarded(self, job: Any) -> None:
        try:
            job()
        except Exception as exc:  # the daemon outlives any single failed cycle
            log.error("cycle failed", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})

    def reconcile(self) -> None:
        loaded = self.loaded
        config = loaded.config
        pusher = Pusher.for_intent(
            loaded.intent,
            config.state_dir,
            confirm_timeout_s=config.apply.confirm_timeout_s,
            # A live pending session fails the device for this cycle (retried next cycle)
            # instead of holding the reconcile loop until its timer ends.
            pending_timeout_s=0.0,
        )
        owned = loaded.owned_switches()
        # select(()) would mean every switch: a shard that owns none inspects none.
        devices = pusher.select(owned) if owned else []
        results = pusher.inspect_all(devices)
        drifted = [r for r in results if r.differences]
        for result in results:
            self._log_inspected(result)
        repaired: list[str] = []
        if drifted and config.mode == "enforce":
            repaired = self._enforce(
                pusher, [d for d in devices if d.name in {r.device for r in drifted}]
            )
        self.reconciles += 1
        unread = [r.device for r in results if not r.read]
        summary = {
            "time": time.time(),
            "mode": config.mode,
            "shard": str(loaded.shard),
            "devices": [r.as_dict() for r in results],  # an unread one: read false, changes null
            "not_read": unread,
            "repaired": repaired,
        }
        (config.state_dir / "last-reconcile.json").write_text(json.dumps(summary, indent=2))
        self.status(
            f"{config.mode}: {len(results) - len(unread)} of {len(results)} switches read, "
            f"{len(drifted)} drifted"
            + (f", repaired {len(repaired)}" if repaired else "")
            + self.shard_text()
        )

    def _log_inspected(self, result: DeviceResult) -> None:
        """A switch's pending sessions, drift or read error in the log; its drift in the
        exporter."""
        for session in result.pending:
            log.warning("pending session", extra={"fields": session.as_dict()})
        if self.exporter is not None and result.read:
            # A switch whose configuration was not read has no drift figure (issue #41).
            self.exporter.update_drift(result.device, len(result.differences))
        if result.differences:
            differences = [d.as_dict() for d in result.differences]
            log.warning("drift", extra={"fields": {"device": result.device,
                                                   "differences": differences}})  # fmt: skip
        elif result.error:
            log.error(
                "device unreadable",
                extra={"fields": {"device": result.device, "error": result.error}},
            )

    def _enforce(self, pusher: Pusher, targets: list[Device]) -> list[str]:
        """Apply the intent to the drifted switches; the names of those repaired."""
        settings = self.loaded.config.apply
        repaired: list[str] = []
        results = pusher.apply_all(
            targets,
            Rollout(settings.canary, settings.batch_size, parallelism=settings.parallelism),
        )
        for result in results:
            log.info("enforce", extra={"fields": result.as_dict()})
            if result.result == "applied":
                repaired.append(result.device)
                if self.exporter is not None:
                    self.exporter.update_drift(result.device, 0)
        return repaired

    def run_playbook(self, name: str) -> None:
        loaded = self.loaded
        config = loaded.config
        runner = PlaybookRunner(loaded.intent, config.state_dir, shard=loaded.shard)
        report = runner.run(load_playbook(playbook_path(name)))
        reports = config.state_dir / "reports"
        reports.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        text = json.dumps({**report.as_dict(), "shard": str(loaded.shard)}, indent=2)
        # The playbook's own name (a safe file name by its schema), not `name`: a scheduled
        # playbook may be given as a path.
        (reports / f"{report.playbook}-{stamp}.json").write_text(text)
        (reports / f"last-{report.playbook}.json").write_text(text)
        if self.exporter is not None:
            self.exporter.update_checks(report.checks)
            for probe in report.probes:
                self.exporter.update_probe(probe)
            for step in report.steps:
                # Only a run that reached a verdict: an errored step leaves the last verdict
                # (its age, roce_locate_last_run_timestamp_seconds, tells the alert).
                if step.kind == "locate" and step.status in ("success", "failure"):
                    self.exporter.update_locate(step.detail)
        log.info(
            "playbook",
            extra={
                "fields": {
                    "playbook": name,
                    "passed": report.passed,
                    "shard": str(loaded.shard),
                    # Steps another shard owns (a probe whose target host is there) ran
                    # there: not missing here.
                    "other_shards": [s.name for s in report.steps if "owner" in s.detail],
                }
            },
        )


def _run_all(steps: list[Callable[[], None]]) -> None:
    for step in steps:
        try:
            step()
        except Exception as exc:  # stopping what is being replaced: log it, go on
            log.warning("stopping the old exporter: %s: %s", type(exc).__name__, exc)


def _overdue_fields(config: Path, deadline_s: float) -> dict[str, Any]:
    return error_fields(
        AgentError(f"{config}: preparing the new configuration took longer than {deadline_s:g} s")
    )


class DaemonCollector:
    """The daemon's own metrics, registered next to the exporter's."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        # Prometheus's own names are prometheus_config_last_reload_successful and
        # ..._success_timestamp_seconds; issue #11 asked for this name, which alert rules
        # use: one gauge, no second spelling of the same fact.
        yield GaugeMetricFamily(
            "roce_agent_config_reload_success",
            "1 if the last configuration (re)load succeeded, 0 if it was refused (the old "
            "configuration keeps running; the log says why, with FILE:LINE)",
            value=1.0 if self.daemon.reload_ok else 0.0,
        )
        yield GaugeMetricFamily(
            "roce_agent_config_last_reload_success_timestamp_seconds",
            "When the running configuration was loaded (Unix time)",
            value=self.daemon.last_reload_success,
        )
        yield CounterMetricFamily(
            "roce_agent_config_reload_failures",
            "SIGHUP reloads refused because the new configuration was invalid",
            value=self.daemon.reload_failures,
        )
        mode = GaugeMetricFamily("roce_agent_mode", "1 for the running mode", labels=["mode"])
        for name in ("observe", "enforce"):
            mode.add_metric([name], 1.0 if self.daemon.loaded.config.mode == name else 0.0)
        yield mode
        yield CounterMetricFamily(
            "roce_agent_reconcile_cycles",
            "Reconcile cycles completed",
            value=self.daemon.reconciles,
        )


class EmbeddedExporter:
    """The exporter inside the daemon: switch pollers, plus what the daemon learns (drift,
    check results, probe results, locate verdicts) fed into the same snapshot store. The HTTP
    server is the daemon's, so a reload can keep its socket or bind a new one before letting
    go of it."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self.registry = exporter.registry
        self.text = exporter.exposition_text
        self.page = exporter.exposition_page  # what the server sends (rendered once a snapshot)

    @classmethod
    def build(cls, loaded: Loaded, settings: ExporterConfig, daemon: Daemon) -> EmbeddedExporter:
        from exporters.exporter import Exporter, ExporterOptions

        # The exporter polls and serves only the shard's switches (and says which shard it
        # is in roce_exporter_shard_info), so N agents' targets add up to the fabric once.
        options = ExporterOptions(
            listen=None,
            interval_s=settings.poll_interval_s,
            host_nic=False,
            shard=loaded.shard,
            telemetry=settings.telemetry,
            ssh_complement=settings.ssh_complement,
        )
        exporter = Exporter(loaded.intent, options)
        exporter.registry.register(DaemonCollector(daemon))
        return cls(exporter)

    def start(self) -> None:
        self.exporter.start()

    def stop(self) -> None:
        self.exporter.stop()

    def update_drift(self, device: str, items: int) -> None:
        self.exporter.store.update_drift(device, items)

    def update_checks(self, results: list[Any]) -> None:
        from exporters.store import CheckOutcome

        self.exporter.store.update_checks(
            CheckOutcome(r.check, "" if r.device == "fabric" else r.device, r.status)
            for r in results
        )

    def update_probe(self, result: dict[str, Any]) -> None:
        self.exporter.store.update_probe(result)

    def update_locate(self, result: dict[str, Any]) -> None:
        self.exporter.store.update_locate(result)


def serve(config_path: Path, shard: Shard | None = None) -> int:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    # The exporter's bad-client lines are JSON lines too (one per client, rate-limited).
    for name in ("roce_agent", "exporters"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    loaded = load_config(config_path).with_shard(shard)
    guard = FreezeGuard()
    daemon = Daemon(config_path, loaded, shard_override=shard, guard=guard)

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        if not daemon.stop.is_set():
            guard.stop_within(STOP_LIMIT_S)
        daemon.stop.set()

    def on_hup(_signum: int, _frame: FrameType | None) -> None:
        daemon.reload.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGHUP, on_hup)
    code = daemon.run()
    # Worker threads still inside an SSH exchange would hold the interpreter open (thread
    # pools join at exit). Leave now: an unconfirmed change on a switch rolls back by its
    # commit timer, an uncommitted session is discarded when its connection drops.
    logging.shutdown()
    sys.stdout.flush()
    os._exit(code)

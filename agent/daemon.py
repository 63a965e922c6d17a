"""``roce-agent serve``: the daemon — reconcile loop, scheduled playbooks, the exporter.

Runs under systemd (``Type=notify``): ``READY=1`` once the configuration is loaded and the
exporter listens, ``WATCHDOG=1`` at half the watchdog interval, ``STATUS=`` after every cycle
(the sd_notify protocol is one datagram to the unix socket in ``$NOTIFY_SOCKET``). SIGHUP
reloads the configuration and fabric; a bad new configuration is refused and the old one keeps
running (a log line and ``roce_agent_config_last_reload_successful`` say why). SIGTERM stops
within seconds with exit 0: work in flight on a switch is protected by the switch's own
commit timer. Logs are JSON lines on stdout; reports and the audit log go to the state dir.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from prometheus_client.metrics_core import Metric
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import AgentError, IntentError, Problem
from agent.intent import FabricIntent
from agent.loader import load_fabric
from agent.playbooks import PlaybookRunner, load_playbook, playbook_path
from agent.push import Pusher
from agent.yamlsource import dotted_path, load_yaml

DEFAULT_CONFIG = Path("/etc/roce-agent/agent.yaml")
STOP_GRACE_S = 5.0
log = logging.getLogger("roce_agent")


class DaemonModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExporterConfig(DaemonModel):
    listen: str = "127.0.0.1:9810"
    web_config: Path | None = None
    poll_interval_s: float = Field(default=30.0, gt=0, le=3600)


class Intervals(DaemonModel):
    reconcile_s: float = Field(default=300.0, gt=0, le=86400)


class ScheduledPlaybook(DaemonModel):
    name: str
    every_s: float = Field(gt=0, le=7 * 86400)


class ApplySettings(DaemonModel):
    canary: int = Field(default=1, ge=0)
    batch_size: int = Field(default=8, ge=1)
    confirm_timeout_s: int = Field(default=300, ge=5, le=3600)


class DaemonConfig(DaemonModel):
    """``agent.yaml``: every key but ``fabric`` has a default."""

    fabric: Path
    mode: Literal["observe", "enforce"] = "observe"
    state_dir: Path = Path("/var/lib/roce-agent")
    exporter: ExporterConfig | None = ExporterConfig()
    intervals: Intervals = Intervals()
    playbooks: list[ScheduledPlaybook] = Field(default_factory=list)
    apply: ApplySettings = ApplySettings()


@dataclass
class Loaded:
    config: DaemonConfig
    intent: FabricIntent
    path: Path


def load_config(path: Path) -> Loaded:
    """Parse and validate agent.yaml, its fabric and its playbooks; IntentError on anything."""
    data, source = load_yaml(path)
    try:
        config = DaemonConfig.model_validate(data)
    except ValidationError as exc:
        raise IntentError(
            [
                Problem(source.locate(e["loc"]), dotted_path(e["loc"]), e["msg"])
                for e in exc.errors(include_url=False)
            ]
        ) from None
    fabric = config.fabric if config.fabric.is_absolute() else path.parent / config.fabric
    config = config.model_copy(update={"fabric": fabric})
    intent = load_fabric(fabric).intent
    for scheduled in config.playbooks:
        load_playbook(playbook_path(scheduled.name))
    return Loaded(config, intent, path)


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
class Daemon:
    config_path: Path
    loaded: Loaded
    stop: threading.Event = field(default_factory=threading.Event)
    reload: threading.Event = field(default_factory=threading.Event)
    exporter: Any = None
    next_reconcile: float = 0.0
    next_playbook: dict[str, float] = field(default_factory=dict)
    last_status: str = "starting"
    reload_ok: bool = True
    reload_error: str = ""
    reload_failures: int = 0
    reconciles: int = 0

    # ------------------------------------------------------------------ lifecycle

    def start_exporter(self) -> None:
        settings = self.loaded.config.exporter
        if settings is None:
            return
        self.exporter = EmbeddedExporter.start(self.loaded.intent, settings, self)

    def stop_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None

    def status(self, text: str) -> None:
        self.last_status = text
        notify(f"STATUS={text}")

    def run(self) -> int:
        self.loaded.config.state_dir.mkdir(parents=True, exist_ok=True)
        self.start_exporter()
        notify("READY=1")
        self.status(f"running ({self.loaded.config.mode}), fabric {self.loaded.intent.name}")
        log.info(
            "started",
            extra={
                "fields": {
                    "mode": self.loaded.config.mode,
                    "fabric": str(self.loaded.config.fabric),
                }
            },
        )
        watchdog_usec = int(os.environ.get("WATCHDOG_USEC", "0") or 0)
        ping_every = watchdog_usec / 2e6 if watchdog_usec else None
        next_ping = time.monotonic()
        worker: threading.Thread | None = None
        while not self.stop.is_set():
            now = time.monotonic()
            if ping_every is not None and now >= next_ping:
                notify("WATCHDOG=1")
                next_ping = now + ping_every
            if self.reload.is_set():
                self.reload.clear()
                self.do_reload()
            if worker is None or not worker.is_alive():
                worker = self.maybe_start_work(now)
            self.stop.wait(0.2)
        notify("STOPPING=1")
        log.info("stopping")
        if worker is not None and worker.is_alive():
            worker.join(STOP_GRACE_S)  # a change in flight is covered by the switch's timer
        self.stop_exporter()
        log.info("stopped")
        return 0

    def do_reload(self) -> None:
        try:
            new = load_config(self.config_path)
        except (AgentError, OSError) as exc:
            self.reload_ok, self.reload_error = False, str(exc).splitlines()[0]
            log.error(
                "reload refused: the old configuration keeps running",
                extra={"fields": {"reason": str(exc)}},
            )
            self.reload_failures += 1
            return
        self.stop_exporter()
        self.loaded = new
        self.reload_ok, self.reload_error = True, ""
        self.next_reconcile = 0.0
        self.next_playbook.clear()
        self.start_exporter()
        log.info(
            "reloaded",
            extra={"fields": {"fabric": str(new.config.fabric), "mode": new.config.mode}},
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
            loaded.intent, config.state_dir, confirm_timeout_s=config.apply.confirm_timeout_s
        )
        devices = pusher.select(())
        results = pusher.inspect_all(devices)
        drifted = [r for r in results if r.differences]
        for result in results:
            if self.exporter is not None:
                self.exporter.update_drift(result.device, len(result.differences))
            if result.differences:
                log.warning(
                    "drift",
                    extra={
                        "fields": {
                            "device": result.device,
                            "differences": [d.as_dict() for d in result.differences],
                        }
                    },
                )
            elif result.error:
                log.error(
                    "device unreadable",
                    extra={"fields": {"device": result.device, "error": result.error}},
                )
        repaired: list[str] = []
        if drifted and config.mode == "enforce":
            targets = [d for d in devices if d.name in {r.device for r in drifted}]
            for result in pusher.apply_all(targets, config.apply.canary, config.apply.batch_size):
                log.info("enforce", extra={"fields": result.as_dict()})
                if result.result == "applied":
                    repaired.append(result.device)
                    if self.exporter is not None:
                        self.exporter.update_drift(result.device, 0)
        self.reconciles += 1
        summary = {
            "time": time.time(),
            "mode": config.mode,
            "devices": [r.as_dict() for r in results],
            "repaired": repaired,
        }
        (config.state_dir / "last-reconcile.json").write_text(json.dumps(summary, indent=2))
        self.status(
            f"{config.mode}: {len(drifted)} of {len(results)} switches drifted"
            + (f", repaired {len(repaired)}" if repaired else "")
        )

    def run_playbook(self, name: str) -> None:
        config = self.loaded.config
        runner = PlaybookRunner(self.loaded.intent, config.state_dir)
        report = runner.run(load_playbook(playbook_path(name)))
        reports = config.state_dir / "reports"
        reports.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        text = json.dumps(report.as_dict(), indent=2)
        (reports / f"{name}-{stamp}.json").write_text(text)
        (reports / f"last-{name}.json").write_text(text)
        if self.exporter is not None:
            self.exporter.update_checks(report.checks)
            for probe in report.probes:
                self.exporter.update_probe(probe)
        log.info("playbook", extra={"fields": {"playbook": name, "passed": report.passed}})


class DaemonCollector:
    """The daemon's own metrics, registered next to the exporter's."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        ok = GaugeMetricFamily(
            "roce_agent_config_last_reload_successful",
            "1 if the last configuration (re)load succeeded, 0 if it was refused",
        )
        ok.add_metric([], 1.0 if self.daemon.reload_ok else 0.0)
        yield ok
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
    check results, probe results) fed into the same snapshot store."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter

    @classmethod
    def start(
        cls, intent: FabricIntent, settings: ExporterConfig, daemon: Daemon
    ) -> EmbeddedExporter:
        from exporters.exporter import Exporter
        from exporters.webconfig import load_web_config

        host, _, port = settings.listen.rpartition(":")
        if not host or not port.isdigit():
            raise AgentError(f"exporter.listen: expected HOST:PORT, got {settings.listen!r}")
        web = load_web_config(settings.web_config) if settings.web_config else None
        exporter = Exporter(
            intent,
            listen=(host.strip("[]"), int(port)),
            interval_s=settings.poll_interval_s,
            web_config=web,
            host_nic=False,
        )
        exporter.registry.register(DaemonCollector(daemon))
        exporter.start()
        return cls(exporter)

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


def serve(config_path: Path) -> int:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("roce_agent")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    loaded = load_config(config_path)
    daemon = Daemon(config_path, loaded)

    def on_term(_signum: int, _frame: FrameType | None) -> None:
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

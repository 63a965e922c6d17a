"""The exporter as one object: store, pollers, collector and HTTP server for one fabric.

Embedding (the daemon)::

    exporter = Exporter(intent, ExporterOptions(listen=("0.0.0.0", 9417), interval_s=15))
    exporter.start()
    exporter.store.update_probe(result)          # a probe scenario or receiver result
    exporter.store.update_checks([CheckOutcome("RC001", "leaf1", "fail")])
    exporter.store.update_drift("leaf1", 3)
    ...
    exporter.stop()

``ExporterOptions(listen=None)`` serves nothing: register ``exporter.collector`` in a registry
of your own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from agent.device.platforms import platform_for
from agent.device.push import check_credentials, connect
from agent.device.state import UnreadFamily
from agent.errors import AgentError
from agent.intent.model import Device, FabricIntent
from agent.intent.plan import Plan, build_plan
from agent.intent.shard import WHOLE, Shard
from agent.observe.hostnic import HostNicReader, host_nic_present, run_ethtool
from exporters.collector import RoceCollector
from exporters.fasttext import render_text
from exporters.pages import Page
from exporters.poller import (
    Connector,
    NicPoller,
    Pollable,
    PollScheduler,
    ProbeResultsPoller,
    SwitchPoller,
    SwitchRead,
)
from exporters.server import MetricsServer, ServerLimits
from exporters.store import Complement, Snapshot, SnapshotStore
from exporters.telemetry import (
    TELEMETRY_MODES,
    GnmiTarget,
    GnmiTelemetry,
    Unsupported,
    choose_transports,
    gnmi_target,
)
from exporters.webconfig import WebConfig

log = logging.getLogger("exporters")


class _WithFabric(Collector):
    """Another collector's ``roce_*`` series with the ``fabric`` label added (the HTTP
    server's and the daemon's own series), so every series this exporter serves has it."""

    def __init__(self, inner: Collector, fabric: str) -> None:
        self.inner = inner
        self.fabric = fabric

    def _labelled(self, families: Iterable[Metric]) -> Iterator[Metric]:
        for family in families:
            if family.name.startswith("roce_"):
                family.samples = [
                    s
                    if "fabric" in s.labels
                    else s._replace(labels={**s.labels, "fabric": self.fabric})
                    for s in family.samples
                ]
            yield family

    def collect(self) -> Iterable[Metric]:
        return self._labelled(self.inner.collect())

    def describe(self) -> Iterable[Metric]:
        describe = getattr(self.inner, "describe", None)
        return self._labelled(describe() if describe is not None else self.inner.collect())


class ExporterRegistry(CollectorRegistry):
    """The exporter's registry; remembers the collectors registered next to its own, so the
    fast text path (:mod:`exporters.fasttext`) can serve them too. Their ``roce_*`` series get
    the fabric label."""

    def __init__(self, own: Collector, fabric: str) -> None:
        super().__init__(auto_describe=True)
        self.own = own
        self.fabric = fabric
        self.others: list[Collector] = []
        self._wrapped: dict[int, Collector] = {}
        super().register(own)

    def register(self, collector: Collector) -> None:
        wrapped = _WithFabric(collector, self.fabric)
        super().register(wrapped)
        self._wrapped[id(collector)] = wrapped
        self.others.append(wrapped)

    def unregister(self, collector: Collector) -> None:
        wrapped = self._wrapped.pop(id(collector), collector)
        super().unregister(wrapped)
        if wrapped in self.others:
            self.others.remove(wrapped)


class _Chain(Collector):
    def __init__(self, collectors: list[Collector]) -> None:
        self.collectors = collectors

    def collect(self) -> Iterable[Metric]:
        for collector in list(self.collectors):
            yield from collector.collect()


DEFAULT_INTERVAL_S = 15.0
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_CONCURRENCY = 16
DEFAULT_PORT = 9417
# Switches streaming their counters over gNMI still have their configuration read over SSH for
# drift, but not at a 1 s sampling interval: no more often than this.
CONFIG_INTERVAL_MIN_S = 15.0


@dataclass(frozen=True)
class ExporterOptions:
    """How an :class:`Exporter` polls and serves (``roce-agent exporter``'s options; the
    daemon's embedded exporter sets a few).

    ``listen`` None serves nothing (register ``exporter.collector`` in a registry of your
    own); ``device_intervals`` overrides ``interval_s`` per switch; ``host_nic`` None reads
    the host's RDMA NICs when ``sysfs_root`` has any; ``drift`` compares each switch with
    its plan; ``shard`` (``--shard K/N``) limits the exporter to the devices the shard owns.
    ``connector``, ``ethtool`` and ``poll_switches`` are for tests and embedding.

    ``telemetry`` (``--telemetry``): ``ssh`` polls every switch, ``gnmi`` subscribes to them,
    ``auto`` subscribes where a switch answers gNMI and polls the others
    (:mod:`exporters.telemetry`); ``insecure`` subscribes without TLS (``--insecure``);
    ``ssh_complement`` reads over SSH the counter families a switch's stream lacks (off:
    ``--no-ssh-complement``, they read as not read)."""

    listen: tuple[str, int] | None = ("127.0.0.1", DEFAULT_PORT)
    interval_s: float = DEFAULT_INTERVAL_S
    device_intervals: Mapping[str, float] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    concurrency: int = DEFAULT_CONCURRENCY
    web_config: WebConfig | None = None
    host_nic: bool | None = None
    sysfs_root: Path = Path("/sys")
    ethtool: Callable[[str], str] = run_ethtool
    probe_results: Path | None = None
    drift: bool = True
    connector: Connector = connect
    poll_switches: bool = True
    shard: Shard = WHOLE
    limits: ServerLimits | None = None
    telemetry: str = "ssh"
    insecure: bool = False
    ssh_complement: bool = True

    def owned_switches(self, intent: FabricIntent) -> list[Device]:
        """The switches this exporter polls; bad options are an error naming the option."""
        if self.interval_s <= 0 or self.timeout_s <= 0 or self.concurrency < 1:
            raise AgentError("--interval and --timeout must be > 0, --concurrency >= 1")
        if self.telemetry not in TELEMETRY_MODES:
            raise AgentError(
                f"--telemetry: Expected: one of {', '.join(TELEMETRY_MODES)} "
                f"Actual: {self.telemetry!r}"
            )
        every_switch = [d for d in intent.devices if d.role != "host"]
        unknown = sorted(set(self.device_intervals) - {d.name for d in every_switch})
        if unknown:
            raise AgentError(f"--device-interval: no switch named {', '.join(unknown)}")
        if any(value <= 0 for value in self.device_intervals.values()):
            raise AgentError("--device-interval: intervals must be > 0")
        # A --device-interval for another shard's switch is fine: one command line for all.
        return [d for d in every_switch if self.shard.owns(d.name)]


class Exporter:
    """Polls the fabric's switches (and optionally the host NIC and probe results) into a
    :class:`SnapshotStore` and serves it; scrapes never wait for a device. With a ``shard``
    it polls, and serves series of, only the devices the shard owns."""

    def __init__(self, intent: FabricIntent, options: ExporterOptions | None = None) -> None:
        options = options or ExporterOptions()
        switches = options.owned_switches(intent)
        if options.poll_switches:
            check_credentials(switches)  # an unreadable secret is a startup error, not a poll
        plan = build_plan(intent)
        self.intent = intent
        self.shard = options.shard
        self.switches = [d.name for d in switches]
        self.store = SnapshotStore.for_fabric(intent, plan, options.shard)
        self.collector = RoceCollector(self.store)
        self.registry = ExporterRegistry(self.collector, intent.name)
        self.jobs: list[Pollable] = []
        self.telemetry: GnmiTelemetry | None = None
        if options.poll_switches:
            self.jobs += self._switch_readers(switches, plan, options)
        self.jobs += self._local_pollers(options)
        self.scheduler = PollScheduler(self.jobs, concurrency=options.concurrency)
        self._rendered: tuple[Snapshot, bytes] | None = None
        self.server = (
            MetricsServer(self.registry, options.listen, options.web_config,
                          self.exposition_page, options.limits)
            if options.listen
            else None
        )  # fmt: skip
        self._started = False

    def _switch_readers(
        self, switches: list[Device], plan: Plan, options: ExporterOptions
    ) -> list[Pollable]:
        """The SSH pollers, and the gNMI subscriptions (``self.telemetry``), of the switches:
        one transport per switch for its counters."""
        targets = {}
        if options.telemetry != "ssh":
            for device in switches:
                interval_s = options.device_intervals.get(device.name, options.interval_s)
                targets[device.name] = gnmi_target(device, interval_s, options.insecure)
            if options.insecure:
                log.warning("--insecure: gNMI subscriptions without TLS (credentials in clear)")
        chosen = choose_transports(targets, options.telemetry) if targets else {}
        streamed = [targets[name] for name, how in chosen.items() if how == "gnmi"]
        if streamed:
            self.telemetry = GnmiTelemetry(self.store, streamed)
        complements = {}  # every streamed switch: the families read over SSH all the same
        for device in switches:
            self.store.set_transport(device.name, chosen.get(device.name, "ssh"))
            if chosen.get(device.name) == "gnmi":
                complements[device.name] = self._complement(device.name, targets, options)
        return self._switch_pollers(switches, plan, options, complements)

    def _complement(
        self, name: str, targets: dict[str, GnmiTarget | Unsupported], options: ExporterOptions
    ) -> frozenset[UnreadFamily]:
        """The families ``name``'s stream lacks, to be read over SSH; marked not read yet."""
        target = targets.get(name)
        if not options.ssh_complement or not isinstance(target, GnmiTarget):
            return frozenset()
        families = frozenset(target.profile.unread) | _trim_family(target.profile.platform)
        if not families:
            return frozenset()
        self.store.set_complement(name, Complement(families))
        return families

    def _switch_pollers(
        self,
        switches: list[Device],
        plan: Plan,
        options: ExporterOptions,
        complements: dict[str, frozenset[UnreadFamily]],
    ) -> list[Pollable]:
        """SSH pollers: counters (and drift) for switches read over SSH; for those streaming
        over gNMI (the keys of ``complements``), drift and the families their stream lacks,
        no more often than every :data:`CONFIG_INTERVAL_MIN_S`."""
        pollers: list[Pollable] = []
        for device in switches:
            streamed = device.name in complements
            complement = complements.get(device.name, frozenset())
            if streamed and not options.drift and not complement:
                continue
            platform = platform_for(device.platform)
            device_plan = plan.device(device.name)
            desired = platform.desired(device_plan) if options.drift and device_plan else None
            interval_s = options.device_intervals.get(device.name, options.interval_s)
            if streamed:
                interval_s = max(interval_s, CONFIG_INTERVAL_MIN_S)
            read = SwitchRead(desired, platform, options.connector, not streamed, complement)
            pollers.append(SwitchPoller(device, self.store, interval_s, options.timeout_s, read))
        return pollers

    def _local_pollers(self, options: ExporterOptions) -> list[Pollable]:
        """This host's RDMA NICs and the probe results directory, when asked for."""
        pollers: list[Pollable] = []
        host_nic = options.host_nic
        if host_nic is None:
            host_nic = host_nic_present(options.sysfs_root)
        if host_nic:
            reader = HostNicReader(sysfs_root=options.sysfs_root, ethtool=options.ethtool)
            pollers.append(NicPoller(reader, self.store, options.interval_s, options.timeout_s))
        if options.probe_results is not None:
            if not options.probe_results.is_dir():
                raise AgentError(f"--probe-results: {options.probe_results} is not a directory")
            interval_s = min(options.interval_s, 5.0)
            pollers.append(ProbeResultsPoller(options.probe_results, self.store, interval_s))
        return pollers

    def exposition_page(self) -> Page:
        """The exposition in the text format: the snapshot fast (rendered once per snapshot,
        the same bytes object while it is current, so the server gzips it once), then the
        other collectors' series, rendered per scrape."""
        snapshot = self.store.snapshot()
        rendered = self._rendered
        if rendered is None or rendered[0] is not snapshot:
            rendered = self._rendered = (snapshot, render_text(snapshot))
        tail = generate_latest(_Chain(self.registry.others)) if self.registry.others else b""
        return Page(rendered[1], tail)

    def exposition_text(self) -> bytes:
        """:meth:`exposition_page` as one text."""
        return self.exposition_page().text()

    @property
    def url(self) -> str | None:
        return self.server.url if self.server else None

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.server is not None:
            self.server.start()
        self.scheduler.start()
        if self.telemetry is not None:
            self.telemetry.start()

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self.server is not None:
            self.server.stop()
        self.scheduler.stop()
        if self.telemetry is not None:
            self.telemetry.stop()

    def __enter__(self) -> Exporter:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _trim_family(platform: str) -> frozenset[UnreadFamily]:
    """The trim family, for a platform that trims: no gNMI profile of the agent folds trim
    counters, so they come over SSH with the other families a stream lacks."""
    return frozenset({"trim"}) if platform_for(platform).trims else frozenset()

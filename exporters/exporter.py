"""The exporter as one object: store, pollers, collector and HTTP server for one fabric.

Embedding (the daemon)::

    exporter = Exporter(intent, listen=("0.0.0.0", 9417), interval_s=15)
    exporter.start()
    exporter.store.update_probe(result)          # a probe scenario or receiver result
    exporter.store.update_checks([CheckOutcome("RC001", "leaf1", "fail")])
    exporter.store.update_drift("leaf1", 3)
    ...
    exporter.stop()

``listen=None`` serves nothing: register ``exporter.collector`` in a registry of your own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from agent.device.platforms import platform_for
from agent.device.push import check_credentials, connect
from agent.errors import AgentError
from agent.intent.model import FabricIntent
from agent.intent.plan import build_plan
from agent.intent.shard import WHOLE, Shard
from agent.observe.hostnic import HostNicReader, host_nic_present, run_ethtool
from exporters.collector import RoceCollector
from exporters.fasttext import render_text
from exporters.poller import (
    Connector,
    NicPoller,
    Pollable,
    PollScheduler,
    ProbeResultsPoller,
    SwitchPoller,
)
from exporters.server import MetricsServer, ServerLimits
from exporters.store import SnapshotStore
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


class Exporter:
    """Polls the fabric's switches (and optionally the host NIC and probe results) into a
    :class:`SnapshotStore` and serves it; scrapes never wait for a device. With ``shard``
    (``--shard K/N``) it polls, and serves series of, only the devices the shard owns."""

    def __init__(
        self,
        intent: FabricIntent,
        *,
        listen: tuple[str, int] | None = ("127.0.0.1", DEFAULT_PORT),
        interval_s: float = DEFAULT_INTERVAL_S,
        device_intervals: Mapping[str, float] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        concurrency: int = DEFAULT_CONCURRENCY,
        web_config: WebConfig | None = None,
        host_nic: bool | None = None,
        sysfs_root: Path = Path("/sys"),
        ethtool: Callable[[str], str] = run_ethtool,
        probe_results: Path | None = None,
        drift: bool = True,
        connector: Connector = connect,
        poll_switches: bool = True,
        shard: Shard = WHOLE,
        limits: ServerLimits | None = None,
    ) -> None:
        if interval_s <= 0 or timeout_s <= 0 or concurrency < 1:
            raise AgentError("--interval and --timeout must be > 0, --concurrency >= 1")
        intervals = dict(device_intervals or {})
        every_switch = [d for d in intent.devices if d.role != "host"]
        unknown = sorted(set(intervals) - {d.name for d in every_switch})
        if unknown:
            raise AgentError(f"--device-interval: no switch named {', '.join(unknown)}")
        # A --device-interval for another shard's switch is fine: one command line for all.
        switches = [d for d in every_switch if shard.owns(d.name)]
        if any(value <= 0 for value in intervals.values()):
            raise AgentError("--device-interval: intervals must be > 0")
        if poll_switches:
            check_credentials(switches)  # an unreadable secret is a startup error, not a poll
        plan = build_plan(intent)
        self.intent = intent
        self.shard = shard
        self.switches = [d.name for d in switches]
        self.store = SnapshotStore.for_fabric(intent, plan, shard)
        self.collector = RoceCollector(self.store)
        self.registry = ExporterRegistry(self.collector, intent.name)
        jobs: list[Pollable] = []
        if poll_switches:
            for device in switches:
                platform = platform_for(device.platform)
                device_plan = plan.device(device.name)
                desired = platform.desired(device_plan) if drift and device_plan else None
                jobs.append(
                    SwitchPoller(
                        device,
                        self.store,
                        intervals.get(device.name, interval_s),
                        timeout_s,
                        desired=desired,
                        connector=connector,
                        platform=platform,
                    )
                )
        if host_nic is None:
            host_nic = host_nic_present(sysfs_root)
        if host_nic:
            reader = HostNicReader(sysfs_root=sysfs_root, ethtool=ethtool)
            jobs.append(NicPoller(reader, self.store, interval_s, timeout_s))
        if probe_results is not None:
            if not probe_results.is_dir():
                raise AgentError(f"--probe-results: {probe_results} is not a directory")
            jobs.append(ProbeResultsPoller(probe_results, self.store, min(interval_s, 5.0)))
        self.jobs = jobs
        self.scheduler = PollScheduler(jobs, concurrency=concurrency)
        self.server = (
            MetricsServer(
                self.registry, listen[0], listen[1], web_config, self.exposition_text, limits
            )
            if listen
            else None
        )
        self._started = False

    def exposition_text(self) -> bytes:
        """The exposition in the text format: the snapshot fast, other collectors as usual."""
        text = render_text(self.store.snapshot())
        if self.registry.others:
            text += generate_latest(_Chain(self.registry.others))
        return text

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

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self.server is not None:
            self.server.stop()
        self.scheduler.stop()

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

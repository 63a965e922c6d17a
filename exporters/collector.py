"""The custom collector: renders the store's current snapshot, never touching a device.

A scrape costs one reference read plus formatting; pollers, probes and checks update the store
on their own schedule. Families and labels come from :mod:`exporters.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import cast

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from agent.device.state import TrimColumn, WatchdogCounters
from agent.observe.hostnic import MICROSECONDS, provides_dcqcn
from exporters.metrics import CHECK_RESULTS, DEVICE_STATES, SPECS, MetricSpec
from exporters.probe_deltas import BUCKET_BOUNDS
from exporters.store import Snapshot, SnapshotStore

PRIORITIES = tuple(str(p) for p in range(8))
BUCKET_LABELS: tuple[str, ...] = tuple(floatToGoString(b) for b in BUCKET_BOUNDS)  # type: ignore[no-untyped-call]
NO_WATCHDOG = WatchdogCounters()
ON_OFF = {True: "on", False: "off"}
YES_NO = {True: "yes", False: "no"}


def new_family(spec: MetricSpec) -> Metric:
    labels = list(spec.labels)
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=labels)
    if spec.type == "histogram":
        return HistogramMetricFamily(spec.name, spec.help, labels=labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=labels)


Add = Callable[[Sequence[str], float], None]


class Families:
    """One metric family per spec, filled in any order, yielded in the table's order. Every
    sample gets the ``fabric`` label first (the specs list it first)."""

    def __init__(self, fabric: str) -> None:
        self.fabric = fabric
        self.by_name = {spec.name: new_family(spec) for spec in SPECS}

    def __getitem__(self, name: str) -> Add:
        """``add(label_values, value)`` of a counter or gauge family, labels after fabric."""
        family = self.by_name[name]
        assert isinstance(family, CounterMetricFamily | GaugeMetricFamily), name
        add = cast(Add, family.add_metric)
        fabric = self.fabric

        def add_with_fabric(values: Sequence[str], value: float) -> None:
            add([fabric, *values], value)

        return add_with_fabric

    def histogram(
        self, name: str, values: Sequence[str], buckets: list[tuple[str, float]], sum_value: float
    ) -> None:
        family = self.by_name[name]
        assert isinstance(family, HistogramMetricFamily), name
        family.add_metric([self.fabric, *values], buckets, sum_value)

    def populated(self) -> Iterator[Metric]:
        # Families without samples are left out: the text format has no use for bare HELP/TYPE
        # lines, and `promtool check metrics` reads them as metrics without values.
        return (family for family in self.by_name.values() if family.samples)


def render(snapshot: Snapshot) -> Iterator[Metric]:
    """Every metric family of ``snapshot``."""
    families = Families(snapshot.fabric)
    _switches(snapshot, families)
    _trims(snapshot, families)
    _agent(snapshot, families)
    _compliance(snapshot, families)
    _probes(snapshot, families)
    _locate(snapshot, families)
    _nic(snapshot, families)
    return families.populated()


def _switches(snapshot: Snapshot, f: Families) -> None:
    pfc = f["roce_pfc_frames_total"]
    tx_packets = f["roce_queue_transmitted_packets_total"]
    tx_bytes = f["roce_queue_transmitted_bytes_total"]
    dropped = f["roce_queue_dropped_packets_total"]
    marked = f["roce_queue_ecn_marked_packets_total"]
    watermark = f["roce_queue_watermark_bytes"]
    headroom = f["roce_headroom_dropped_packets_total"]
    detected = f["roce_pfc_watchdog_storms_detected_total"]
    restored = f["roce_pfc_watchdog_storms_restored_total"]
    stormed = f["roce_pfc_watchdog_stormed"]
    intended = f["roce_intended_class_info"]
    for device, view in snapshot.devices.items():
        reported = view.counters.interfaces if view.counters is not None else {}
        unread = view.counters.unread if view.counters is not None else {}
        for interface in view.interface_names():
            counters = reported[interface]
            for priority, label in enumerate(PRIORITIES):
                queue = counters.queues.get(priority)
                if queue is None:
                    continue  # a queue the device did not report: no series, not zeros
                where = (device, interface, label)
                tx_packets(where, queue.tx_packets)
                tx_bytes(where, queue.tx_bytes)
                dropped(where, queue.dropped_packets)
                marked(where, queue.ecn_marked_packets)
                if queue.watermark_bytes is not None:
                    watermark(where, queue.watermark_bytes)
            for priority in view.priorities(interface):
                where = (device, interface, PRIORITIES[priority])
                pfc((*where, "rx"), counters.pfc_rx[priority])
                pfc((*where, "tx"), counters.pfc_tx[priority])
                if "headroom_drops" not in unread:
                    headroom(where, counters.headroom_drops[priority])
                if "watchdog" in unread:
                    continue  # not published by this transport: no series, not zeros
                # The watchdog's output was read with the rest (a poll that cannot read it
                # fails); NOSes list only the queues with watchdog events, so one not listed
                # had none: a read 0, unlike a queue the device did not report at all.
                watchdog = counters.watchdog.get(priority, NO_WATCHDOG)
                detected(where, watchdog.storms_detected)
                restored(where, watchdog.storms_restored)
                stormed(where, 1 if watchdog.stormed else 0)
        for cls in view.inventory.classes:
            label = PRIORITIES[cls.priority]
            intended((device, cls.interface, label, label, ON_OFF[cls.pfc], ON_OFF[cls.ecn]), 1)


TRIM_METRICS: tuple[tuple[TrimColumn, str], ...] = (
    ("trimmed", "trimmed"),
    ("sent", "trim_sent"),
    ("dropped", "trim_dropped"),
)


def _trims(snapshot: Snapshot, f: Families) -> None:
    """Packet trimming, per queue and per port: only the figures a switch reported (a
    family not read, a column it did not print and a queue or port it did not list have no
    series, not 0). Few ports and queues trim, so these go through the families on each
    scrape rather than the fast text's per-poll blocks; a port without any costs one test."""
    queue_adds = [(c, f[f"roce_queue_{what}_packets_total"]) for c, what in TRIM_METRICS]
    port_adds = [(c, f[f"roce_interface_{what}_packets_total"]) for c, what in TRIM_METRICS]
    for device, view in snapshot.devices.items():
        if view.counters is None or "trim" in view.counters.unread:
            continue
        reported = view.counters.interfaces
        for interface in view.interface_names():
            trim = reported[interface].trim
            if trim.port is None and not trim.queues:
                continue
            for column, add in queue_adds:
                for queue, counts in trim.queues.items():
                    value = getattr(counts, column)
                    if value is not None:
                        add((device, interface, PRIORITIES[queue]), value)
            for column, add in port_adds:
                value = None if trim.port is None else getattr(trim.port, column)
                if value is not None:
                    add((device, interface), value)


def _agent(snapshot: Snapshot, f: Families) -> None:
    f["roce_exporter_info"]((snapshot.version,), 1)
    f["roce_exporter_shard_info"]((snapshot.shard,), 1)
    f["roce_exporter_devices"]((), snapshot.owned_devices)
    up, state = f["roce_device_up"], f["roce_device_state"]
    for device, view in snapshot.devices.items():
        status = view.status
        up((device,), 1 if status.up else 0)
        now = status.state
        for candidate in DEVICE_STATES:
            state((device, candidate), 1 if candidate == now else 0)
        if status.transport is not None:
            f["roce_device_telemetry_info"]((device, status.transport), 1)
        if status.last_success_at is None:
            continue  # nothing read yet: no statistics that would read as zeros
        f["roce_polls_total"]((device,), status.polls)
        for reason, count in status.errors.items():
            f["roce_poll_errors_total"]((device, reason), count)
        if status.last_duration_s is not None:
            f["roce_poll_duration_seconds"]((device,), status.last_duration_s)
        if status.last_success_at is not None:
            f["roce_last_successful_poll_timestamp_seconds"]((device,), status.last_success_at)


def _compliance(snapshot: Snapshot, f: Families) -> None:
    drift = f["roce_drift_items"]
    for device, view in snapshot.devices.items():
        if view.drift is not None:
            drift((device,), view.drift)
    for device, items in snapshot.host_drift.items():
        drift((device,), items)
    for device, view in snapshot.devices.items():
        if view.sessions_pending is not None:
            f["roce_config_sessions_pending"]((device,), view.sessions_pending)
        if view.sessions_oldest_age_s is not None:
            f["roce_config_session_oldest_age_seconds"]((device,), view.sessions_oldest_age_s)
    checks = f["roce_check_result"]
    for (check, device), result in sorted(snapshot.checks.items()):
        for candidate in CHECK_RESULTS:
            checks((check, device, candidate), 1 if candidate == result else 0)
    if snapshot.checks_at is not None:
        f["roce_check_last_run_timestamp_seconds"]((), snapshot.checks_at)


# A flow's counts (exporters.probe_deltas.FLOW_COUNTS) and their metrics.
FLOW_METRICS = {
    "sent": "roce_probe_packets_sent_total",
    "received": "roce_probe_packets_received_total",
    "lost": "roce_probe_packets_lost_total",
    "reordered": "roce_probe_packets_reordered_total",
    "ce_marked": "roce_probe_packets_ce_marked_total",
    "cnps_received": "roce_probe_cnps_received_total",
}


def _probes(snapshot: Snapshot, f: Families) -> None:
    probes = snapshot.probes
    for key, flow in sorted(probes.flows.items()):
        # Only what some result carried: a count no result gave has no series (not 0).
        for carried, metric in FLOW_METRICS.items():
            if carried in flow.counts:
                f[metric](key, flow.counts[carried])
        if flow.last_run_lost is not None:
            f["roce_probe_last_run_lost_packets"](key, flow.last_run_lost)
        if flow.latency_buckets is None:
            continue
        cumulative = 0
        buckets = []
        for bound, count in zip(BUCKET_LABELS, flow.latency_buckets, strict=True):
            cumulative += count
            buckets.append((bound, float(cumulative)))
        f.histogram("roce_probe_latency_seconds", key, buckets, flow.latency_sum_s)
    for where, count in sorted(probes.invalid.items()):
        f["roce_probe_invalid_frames_total"](where, count)
    for (scenario, host, priority), seconds in sorted(probes.paused_s.items()):
        f["roce_probe_paused_seconds_total"]((scenario, host, PRIORITIES[priority]), seconds)
    for verdict, count in sorted(probes.runs.items()):
        f["roce_probe_runs_total"](verdict, count)
    for scenario, at in sorted(probes.last_run_at.items()):
        f["roce_probe_last_run_timestamp_seconds"]((scenario,), at)
    for reason, count in snapshot.probe_files_skipped.items():
        f["roce_probe_result_files_skipped_total"]((reason,), count)


def _locate(snapshot: Snapshot, f: Families) -> None:
    run = snapshot.locate
    if run is None:
        return  # no run yet: nothing that would read as "no suspect" or "0 paths"
    for (kind, element), confidence in sorted(run.suspects.items()):
        f["roce_locate_suspect"]((kind, element), confidence)
    f["roce_locate_last_run_timestamp_seconds"]((), run.at)
    f["roce_locate_paths"]((), run.paths)
    f["roce_locate_bad_paths"]((), run.bad_paths)


def _nic(snapshot: Snapshot, f: Families) -> None:
    for source, count in sorted(snapshot.nic_errors.items()):
        f["roce_nic_collect_errors_total"]((source,), count)
    nic = snapshot.nic
    if nic is None:
        return  # nothing read yet: no series that would read as zeros
    port_info = f["roce_nic_port_info"]
    for (rdma_device, port), values in sorted(nic.hw.items()):
        port_info((rdma_device, port, YES_NO[provides_dcqcn(values)]), 1)
        # Only the counters the NIC provides: a counter it lacks (rxe has no np_/rp_) stays
        # absent rather than claiming 0. A name without a metric is skipped, not a failed
        # scrape.
        for counter, value in values.items():
            name = f"roce_nic_{counter}_total"
            if name in f.by_name:
                f[name]((rdma_device, port), value)
    frames = f["roce_nic_pause_frames_total"]
    duration = f["roce_nic_pause_duration_seconds_total"]
    for interface, pause in sorted(nic.pause.items()):
        if pause is None:
            continue  # the driver lists no per-priority pause (virtio_net): absent, not 0
        # Only the priorities the driver listed (mlx5: the PFC-enabled ones): a priority it
        # does not report has no series, not 0.
        for priority in pause.listed:
            label = PRIORITIES[priority]
            frames((interface, label, "rx"), pause.rx_frames[priority])
            frames((interface, label, "tx"), pause.tx_frames[priority])
            duration((interface, label, "rx"), pause.rx_duration_us[priority] * MICROSECONDS)
            duration((interface, label, "tx"), pause.tx_duration_us[priority] * MICROSECONDS)


class RoceCollector(Collector):
    """A prometheus_client collector over a :class:`SnapshotStore` (register it anywhere)."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        return render(self.store.snapshot())

    def describe(self) -> Iterator[Metric]:
        """Names only, so a registry can detect clashes without rendering a snapshot."""
        return (new_family(spec) for spec in SPECS)

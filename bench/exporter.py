"""Scrape cost at ~100k series: the snapshot collector versus plain prometheus_client metrics.

Both sides get the same parsed device counters (``agent.state.Counters``, what a poll yields)
and must end with the same exposition:

- snapshot path: ``SnapshotStore.update_counters`` per device (one reference swap), then
  rendered two ways: ``generate_latest`` over :class:`exporters.collector.RoceCollector` (what
  an embedding registry does) and :func:`exporters.fasttext.render_text` (what the exporter's
  HTTP server sends Prometheus);
- plain path: ``Counter.labels(...).inc(delta)`` / ``Gauge.labels(...).set(value)`` for every
  series (what an exporter built on ordinary metric objects does after each poll), then
  ``generate_latest`` over that registry.

Measured in the same run, median of ``--rounds``; prints both and the ratio.

    python bench/exporter.py [--devices 36] [--ports 32] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge, disable_created_metrics, generate_latest
from prometheus_client.registry import CollectorRegistry

from agent.state import Counters, InterfaceCounters, QueueCounters, WatchdogCounters
from exporters.collector import RoceCollector
from exporters.fasttext import render_text
from exporters.metrics import BY_NAME
from exporters.store import IntendedClass, SnapshotStore, SwitchInventory

PRIORITIES = range(8)


def inventory(devices: int, ports: int) -> list[SwitchInventory]:
    names = tuple(f"Ethernet{p}/1" for p in range(1, ports + 1))
    classes = tuple(
        IntendedClass(port, p, pfc=p == 3, ecn=p == 3) for port in names for p in PRIORITIES
    )
    return [SwitchInventory(f"leaf{d:03d}", names, classes) for d in range(devices)]


def poll_results(switches: list[SwitchInventory], round_no: int) -> list[Counters]:
    rng = random.Random(round_no)
    base = round_no * 1000
    results = []
    for switch in switches:
        interfaces = {}
        for name in switch.interfaces:
            interfaces[name] = InterfaceCounters(
                pfc_rx=tuple(base + rng.randrange(100) for _ in PRIORITIES),
                pfc_tx=tuple(base + rng.randrange(100) for _ in PRIORITIES),
                queues={
                    q: QueueCounters(
                        tx_packets=base * 50 + rng.randrange(10_000),
                        tx_bytes=base * 50_000 + rng.randrange(10_000_000),
                        dropped_packets=base + rng.randrange(10),
                        ecn_marked_packets=base + rng.randrange(1000),
                    )
                    for q in PRIORITIES
                },
                watchdog={q: WatchdogCounters(storms_detected=round_no) for q in PRIORITIES},
                headroom_drops=tuple(base + rng.randrange(5) for _ in PRIORITIES),
            )
        results.append(Counters(device=switch.device, collected_at=0.0, interfaces=interfaces))
    return results


class PlainExporter:
    """The same series on ordinary prometheus_client Counter/Gauge objects."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

        def counter(name: str) -> Counter:
            spec = BY_NAME[name]
            return Counter(spec.name, spec.help, list(spec.labels), registry=self.registry)

        def gauge(name: str) -> Gauge:
            spec = BY_NAME[name]
            return Gauge(spec.name, spec.help, list(spec.labels), registry=self.registry)

        self.pfc = counter("roce_pfc_frames_total")
        self.tx_packets = counter("roce_queue_transmitted_packets_total")
        self.tx_bytes = counter("roce_queue_transmitted_bytes_total")
        self.dropped = counter("roce_queue_dropped_packets_total")
        self.marked = counter("roce_queue_ecn_marked_packets_total")
        self.headroom = counter("roce_headroom_dropped_packets_total")
        self.detected = counter("roce_pfc_watchdog_storms_detected_total")
        self.restored = counter("roce_pfc_watchdog_storms_restored_total")
        self.stormed = gauge("roce_pfc_watchdog_stormed")
        self.intended = gauge("roce_intended_class_info")
        self.up = gauge("roce_device_up")
        self.previous: dict[tuple[str, ...], float] = {}

    def _count(self, metric: Counter | Gauge, labels: tuple[str, ...], value: float) -> None:
        if isinstance(metric, Gauge):
            metric.labels(*labels).set(value)
            return
        key = (metric._name, *labels)
        # Counters only go up by deltas: keep the last device value to compute them.
        delta = value - self.previous.get(key, 0.0)
        self.previous[key] = value
        metric.labels(*labels).inc(max(0.0, delta))

    def update(self, switches: list[SwitchInventory], results: list[Counters]) -> None:
        for switch, counters in zip(switches, results, strict=True):
            device = switch.device
            self.up.labels(device).set(1)
            on = {True: "on", False: "off"}
            for cls in switch.classes:
                tc = str(cls.priority)
                labels = (device, cls.interface, tc, tc, on[cls.pfc], on[cls.ecn])
                self.intended.labels(*labels).set(1)
            for name, ic in counters.interfaces.items():
                for p in PRIORITIES:
                    label = str(p)
                    where = (device, name, label)
                    self._count(self.pfc, (*where, "rx"), ic.pfc_rx[p])
                    self._count(self.pfc, (*where, "tx"), ic.pfc_tx[p])
                    queue = ic.queues[p]
                    self._count(self.tx_packets, where, queue.tx_packets)
                    self._count(self.tx_bytes, where, queue.tx_bytes)
                    self._count(self.dropped, where, queue.dropped_packets)
                    self._count(self.marked, where, queue.ecn_marked_packets)
                    self._count(self.headroom, where, ic.headroom_drops[p])
                    watchdog = ic.watchdog[p]
                    self._count(self.detected, where, watchdog.storms_detected)
                    self._count(self.restored, where, watchdog.storms_restored)
                    self._count(self.stormed, where, 1 if watchdog.stormed else 0)


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=36)
    parser.add_argument("--ports", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    # Counters would also expose a `_created` series each; the snapshot path has none.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    switches = inventory(args.devices, args.ports)
    store = SnapshotStore("bench", switches)
    snapshot_registry = CollectorRegistry()
    snapshot_registry.register(RoceCollector(store))
    plain = PlainExporter()

    rounds = [poll_results(switches, r + 1) for r in range(args.rounds)]
    snap_update, snap_render, fast_render, plain_update, plain_render = [], [], [], [], []
    for results in rounds:

        def store_update(results: list[Counters] = results) -> None:
            for counters in results:
                store.update_counters(counters.device, counters, 0.1)

        def plain_update_all(results: list[Counters] = results) -> None:
            plain.update(switches, results)

        snap_update.append(timed(store_update))
        snap_render.append(timed(lambda: generate_latest(snapshot_registry)))
        fast_render.append(timed(lambda: render_text(store.snapshot())))
        plain_update.append(timed(plain_update_all))
        plain_render.append(timed(lambda: generate_latest(plain.registry)))
    text = generate_latest(snapshot_registry).decode()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    plain_text = generate_latest(plain.registry).decode()
    plain_series = sum(1 for line in plain_text.splitlines() if line and not line.startswith("#"))

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    snap_total = ms(snap_update) + ms(snap_render)
    fast_total = ms(snap_update) + ms(fast_render)
    plain_total = ms(plain_update) + ms(plain_render)
    same = render_text(store.snapshot()) == generate_latest(snapshot_registry)
    print(f"series exposed              snapshot {series:,}   plain {plain_series:,}")
    print(f"rounds                      {args.rounds} (median)")
    print(
        f"snapshot: update {ms(snap_update):8.1f} ms   render {ms(snap_render):8.1f} ms   "
        f"total {snap_total:8.1f} ms"
    )
    print(
        f"plain:    update {ms(plain_update):8.1f} ms   render {ms(plain_render):8.1f} ms   "
        f"total {plain_total:8.1f} ms"
    )
    print(
        f"fast text: update {ms(snap_update):7.1f} ms   render {ms(fast_render):8.1f} ms   "
        f"total {fast_total:8.1f} ms   (byte-identical to generate_latest: {same})"
    )
    print(
        f"ratio plain/snapshot (generate_latest)  render {ms(plain_render) / ms(snap_render):5.2f}x"
        f"   update+render {plain_total / snap_total:5.2f}x"
    )
    fast_ratio = ms(plain_render) / ms(fast_render)
    print(
        f"ratio plain/snapshot (fast text)        render {fast_ratio:5.2f}x"
        f"   update+render {plain_total / fast_total:5.2f}x"
    )


if __name__ == "__main__":
    main()

"""Fleet-scale scrape cost: 1 000 switches x 64 ports split into 4 shards, against today's render.

Issue #14 goal, checked in one run:

- each shard (~250 switches; jump consistent hash, ``--shard K/N``) renders in < 1 s;
- a full scrape of all shards, rendered one after another as one scrape pool would see them,
  stays under the shipped ``scrape_timeout`` (5 s, exporters/prometheus/prometheus.yml);
- ratios against today's render of the whole 1 000 switches, measured in the same run:
  :func:`render_before_14` is the switch render of ``exporters/fasttext.py`` before #14
  (commit fb9957e): every fabric port, all 8 priorities of every family, no fabric label,
  every line formatted at scrape time.

Counters are what a RoCE fabric reports: PFC, headroom and watchdog counters are 0 on the lossy
priorities (no PFC is sent or honoured there), except on 1 % of ports where a misconfigured
peer sends PFC on lossy priority 5 (the lean rule must show those); queue counters are large
(past 10^6, the slow number format). Per shard it reports:

- ``format``: what the pollers pay, in their threads, once per poll (each device's lines are
  formatted right after its poll is stored; ``exporters.fasttext.device_block``);
- ``scrape``: what a scrape pays once every device was polled (joins the formatted blocks) —
  what Prometheus waits for;
- ``cold``: a scrape that has to format every device itself (no poller formatted them, e.g.
  the store fed by code that does not call device_block) — the worst case.

    python bench/exporter.py [--devices 1000] [--ports 64] [--shards 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from agent.device.state import Counters, InterfaceCounters, QueueCounters, WatchdogCounters
from agent.intent.shard import Shard
from exporters.collector import NO_WATCHDOG, ON_OFF, PRIORITIES, Families, _agent
from exporters.fasttext import (
    SWITCH_FAMILIES,
    _family_lines,
    _n,
    device_block,
    escape_value,
    render_text,
)
from exporters.metrics import SPECS
from exporters.store import IntendedClass, Snapshot, SnapshotStore, SwitchInventory

LOSSLESS = 3
SCRAPE_TIMEOUT_S = 5.0  # exporters/prometheus/prometheus.yml
# The earlier renderer's filler (the fabric here reports every queue anyway).
NO_QUEUE = QueueCounters()


def inventory(devices: int, ports: int) -> list[SwitchInventory]:
    names = tuple(f"Ethernet{p}/1" for p in range(1, ports + 1))
    classes = tuple(
        IntendedClass(port, p, pfc=p == LOSSLESS, ecn=p == LOSSLESS)
        for port in names
        for p in range(8)
    )
    return [SwitchInventory(f"leaf{d:04d}", names, classes) for d in range(devices)]


def poll_result(switch: SwitchInventory, rng: random.Random, round_no: int) -> Counters:
    """One poll's counters (built without validation: the bench measures the exporter)."""
    base = round_no * 10**6
    interfaces = {}
    for name in switch.interfaces:
        pfc_rx = [0] * 8
        pfc_tx = [0] * 8
        pfc_rx[LOSSLESS] = base + rng.randrange(10**5)
        pfc_tx[LOSSLESS] = base + rng.randrange(10**5)
        if rng.random() < 0.01:
            pfc_rx[5] = rng.randrange(1, 1000)  # a peer sending PFC on a lossy priority
        queues = {
            q: QueueCounters.model_construct(
                tx_packets=10**9 * round_no + rng.randrange(10**8),
                tx_bytes=10**12 * round_no + rng.randrange(10**11),
                dropped_packets=rng.randrange(10) if q != LOSSLESS else 0,
                ecn_marked_packets=rng.randrange(10**7) if q == LOSSLESS else 0,
                watermark_bytes=None,
            )
            for q in range(8)
        }
        interfaces[name] = InterfaceCounters.model_construct(
            pfc_rx=tuple(pfc_rx),
            pfc_tx=tuple(pfc_tx),
            queues=queues,
            watchdog={LOSSLESS: WatchdogCounters.model_construct()},
            headroom_drops=(0,) * 8,
        )
    return Counters.model_construct(device=switch.device, collected_at=0.0, interfaces=interfaces)


def render_before_14(snapshot: Snapshot) -> bytes:
    """Today's (pre-#14) fast text render of the switch series, plus the exporter's own."""
    lines: dict[str, list[str]] = {name: [] for name in SWITCH_FAMILIES}
    pfc = lines["roce_pfc_frames_total"]
    tx_packets = lines["roce_queue_transmitted_packets_total"]
    tx_bytes = lines["roce_queue_transmitted_bytes_total"]
    dropped = lines["roce_queue_dropped_packets_total"]
    marked = lines["roce_queue_ecn_marked_packets_total"]
    headroom = lines["roce_headroom_dropped_packets_total"]
    detected = lines["roce_pfc_watchdog_storms_detected_total"]
    restored = lines["roce_pfc_watchdog_storms_restored_total"]
    stormed = lines["roce_pfc_watchdog_stormed"]
    intended = lines["roce_intended_class_info"]
    for device, view in snapshot.devices.items():
        assert view.counters is not None
        reported = view.counters.interfaces
        dev = f'device="{escape_value(device)}"'
        for interface in view.inventory.interfaces:
            counters = reported[interface]
            iface = f'interface="{escape_value(interface)}"'
            for priority, label in enumerate(PRIORITIES):
                rx = f'{{{dev},direction="rx",{iface},priority="{label}"}} '
                tx = f'{{{dev},direction="tx",{iface},priority="{label}"}} '
                by_priority = f'{{{dev},{iface},priority="{label}"}} '
                by_queue = f'{{{dev},{iface},queue="{label}"}} '
                pfc.append(f"roce_pfc_frames_total{rx}{_n(counters.pfc_rx[priority])}")
                pfc.append(f"roce_pfc_frames_total{tx}{_n(counters.pfc_tx[priority])}")
                queue = counters.queues.get(priority, NO_QUEUE)
                tx_packets.append(
                    f"roce_queue_transmitted_packets_total{by_queue}{_n(queue.tx_packets)}"
                )
                tx_bytes.append(f"roce_queue_transmitted_bytes_total{by_queue}{_n(queue.tx_bytes)}")
                dropped.append(
                    f"roce_queue_dropped_packets_total{by_queue}{_n(queue.dropped_packets)}"
                )
                marked.append(
                    f"roce_queue_ecn_marked_packets_total{by_queue}{_n(queue.ecn_marked_packets)}"
                )
                headroom.append(
                    f"roce_headroom_dropped_packets_total{by_priority}"
                    f"{_n(counters.headroom_drops[priority])}"
                )
                watchdog = counters.watchdog.get(priority, NO_WATCHDOG)
                detected.append(
                    f"roce_pfc_watchdog_storms_detected_total{by_priority}"
                    f"{_n(watchdog.storms_detected)}"
                )
                restored.append(
                    f"roce_pfc_watchdog_storms_restored_total{by_priority}"
                    f"{_n(watchdog.storms_restored)}"
                )
                stormed.append(
                    f"roce_pfc_watchdog_stormed{by_priority}{_n(1 if watchdog.stormed else 0)}"
                )
        for cls in view.inventory.classes:
            label = PRIORITIES[cls.priority]
            intended.append(
                f'roce_intended_class_info{{{dev},ecn="{ON_OFF[cls.ecn]}",'
                f'interface="{escape_value(cls.interface)}",pfc="{ON_OFF[cls.pfc]}",'
                f'priority="{label}",queue="{label}"}} 1.0'
            )
    rest = Families(snapshot.fabric)
    _agent(snapshot, rest)
    rest_lines = {k: [b.decode() for b in v] for k, v in _family_lines(rest.populated()).items()}
    every = {**lines, **rest_lines}
    chunks: list[str] = []
    for spec in SPECS:
        body = every.get(spec.name)
        if body:
            chunks += [f"# HELP {spec.name} {spec.help}", f"# TYPE {spec.name} {spec.type}"]
            chunks.extend(body)
    chunks.append("")
    return "\n".join(chunks).encode()


def timed(action: Callable[[], object]) -> tuple[float, float, object]:
    """Wall and CPU seconds of ``action()`` and its result. CPU time is what the render costs
    on an idle machine; on a shared one wall time also counts the waits for a core."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def series_in(text: bytes) -> int:
    return text.count(b"\n") - text.count(b"\n# ") - (1 if text.startswith(b"#") else 0)


@dataclass(frozen=True)
class Render:
    """One rendered text's size and what it cost (medians over the rounds for a shard)."""

    series: int
    size: int
    wall_s: float
    cpu_s: float


@dataclass(frozen=True)
class ShardCost:
    switches: int
    scrape: Render  # every device formatted by its poller beforehand
    cold_wall_s: float  # the scrape formats every device itself
    cold_cpu_s: float
    format_wall_s: float  # what the pollers pay formatting
    format_cpu_s: float


def render_today(switches: list[SwitchInventory], polls: dict[str, Counters]) -> Render:
    """Today's (pre-#14) render of the whole fabric on one target."""
    whole = SnapshotStore("bench", switches)
    for name, counters in polls.items():
        whole.update_counters(name, counters, 0.1)
    snapshot = whole.snapshot()
    wall, cpu, text = timed(lambda: render_before_14(snapshot))
    assert isinstance(text, bytes)
    return Render(series_in(text), len(text), wall, cpu)


def measure_shard(
    shard: Shard, switches: list[SwitchInventory], polls: dict[str, Counters], rounds: int
) -> ShardCost:
    """The pollers' format, then ``rounds`` warm and ``rounds`` cold scrapes of one shard."""
    store = SnapshotStore("bench", switches, shard=shard)
    owned = list(store.snapshot().devices)

    def poll_cycle() -> None:
        # A copy, as each real poll brings new counters (formatted lines are remembered
        # per counters object).
        for name in owned:
            store.update_counters(name, polls[name].model_copy(), 0.1)

    def format_all() -> None:
        snapshot = store.snapshot()
        for view in snapshot.devices.values():
            device_block(snapshot.fabric, view)

    def scrape() -> bytes:
        return render_text(store.snapshot())

    poll_cycle()
    format_s, format_cpu, _ = timed(format_all)
    warm = [timed(scrape) for _ in range(rounds)]
    text = warm[0][2]
    assert isinstance(text, bytes)
    cold = []
    for _ in range(rounds):
        poll_cycle()  # new views, nothing formatted yet
        cold.append(timed(scrape))
        assert series_in(cast(bytes, cold[-1][2])) == series_in(text)
    return ShardCost(
        switches=len(owned),
        scrape=Render(
            series_in(text),
            len(text),
            statistics.median(t[0] for t in warm),
            statistics.median(t[1] for t in warm),
        ),
        cold_wall_s=statistics.median(t[0] for t in cold),
        cold_cpu_s=statistics.median(t[1] for t in cold),
        format_wall_s=format_s,
        format_cpu_s=format_cpu,
    )


def shard_line(shard: Shard, cost: ShardCost, today: Render) -> str:
    got = cost.scrape
    verdict = "ok" if got.wall_s < 1.0 else "OVER 1 s"
    return (
        f"shard {shard}: {cost.switches:4d} switches  {got.series:>9,} series  "
        f"{got.size / 1e6:5.1f} MB"
        f"  scrape {got.wall_s:5.2f} s (cpu {got.cpu_s:4.2f}) [{verdict}]"
        f"  cold {cost.cold_wall_s:5.2f} s (cpu {cost.cold_cpu_s:4.2f})"
        f"  pollers' format {cost.format_wall_s:5.2f} s (cpu {cost.format_cpu_s:4.2f})"
        f"  vs today: series {got.series / today.series:.3f}x bytes {got.size / today.size:.3f}x"
        f" cpu {got.cpu_s / today.cpu_s:.3f}x (cold {cost.cold_cpu_s / today.cpu_s:.3f}x)"
    )


def totals_lines(costs: list[ShardCost], today: Render) -> list[str]:
    """All shards rendered one after another, against the scrape timeout and today."""
    scrape = sum(c.scrape.wall_s for c in costs)
    scrape_cpu = sum(c.scrape.cpu_s for c in costs)
    cold = sum(c.cold_wall_s for c in costs)
    cold_cpu = sum(c.cold_cpu_s for c in costs)
    series = sum(c.scrape.series for c in costs)
    size = sum(c.scrape.size for c in costs)
    verdict = "ok" if scrape < SCRAPE_TIMEOUT_S else "OVER"
    return [
        f"all {len(costs)} shards, rendered one after another: scrape {scrape:.2f} s "
        f"(cpu {scrape_cpu:.2f}) [{verdict} against scrape_timeout "
        f"{SCRAPE_TIMEOUT_S:g} s]  cold {cold:.2f} s (cpu {cold_cpu:.2f})",
        f"all shards vs today's single render: series {series / today.series:.3f}x  "
        f"bytes {size / today.size:.3f}x  wall {scrape / today.wall_s:.3f}x  "
        f"cpu {scrape_cpu / today.cpu_s:.3f}x "
        f"(cold: wall {cold / today.wall_s:.3f}x, cpu {cold_cpu / today.cpu_s:.3f}x)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--ports", type=int, default=64)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many scrapes")
    args = parser.parse_args()

    switches = inventory(args.devices, args.ports)
    rng = random.Random(14)
    polls = {s.device: poll_result(s, rng, 1) for s in switches}
    print(f"{args.devices} switches x {args.ports} ports, {args.shards} shards")
    today = render_today(switches, polls)
    print(
        f"today (pre-#14), whole fabric on one target: {today.series:,} series, "
        f"{today.size / 1e6:,.1f} MB, render {today.wall_s:.2f} s (cpu {today.cpu_s:.2f} s)"
    )
    costs = []
    for index in range(1, args.shards + 1):
        shard = Shard(index, args.shards)
        costs.append(measure_shard(shard, switches, polls, args.rounds))
        print(shard_line(shard, costs[-1], today))
    for line in totals_lines(costs, today):
        print(line)


if __name__ == "__main__":
    main()

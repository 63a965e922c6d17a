"""A fast renderer of the Prometheus text format (0.0.4) for a snapshot.

prometheus_client's ``generate_latest`` validates and escapes every label of every sample
at every scrape, which a fabric's worth of series cannot afford. Here the switch block —
almost all of the series — is formatted from label prefixes built once per interface, once
per poll of the switch (by its poller, :func:`device_block`), and kept as bytes with the
immutable counters they were made from, so a scrape of a 250-switch, 64-port shard (~700k
series) only joins bytes; the small remaining families go through the collector's
functions and a plain formatter. The output is byte for byte what ``generate_latest`` writes for
:class:`exporters.collector.RoceCollector` (a unit test compares them); the server uses it for
clients that accept the text format, which Prometheus does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar, cast

from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from exporters.collector import (
    NO_WATCHDOG,
    ON_OFF,
    PRIORITIES,
    Families,
    _agent,
    _compliance,
    _locate,
    _nic,
    _probes,
    _trims,
)
from exporters.metrics import SPECS
from exporters.store import DeviceView, Snapshot, SwitchInventory

_T = TypeVar("_T")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SWITCH_FAMILIES = (
    "roce_pfc_frames_total",
    "roce_queue_transmitted_packets_total",
    "roce_queue_transmitted_bytes_total",
    "roce_queue_dropped_packets_total",
    "roce_queue_ecn_marked_packets_total",
    "roce_queue_watermark_bytes",
    "roce_headroom_dropped_packets_total",
    "roce_pfc_watchdog_storms_detected_total",
    "roce_pfc_watchdog_storms_restored_total",
    "roce_pfc_watchdog_stormed",
    "roce_intended_class_info",
)


def escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _n(value: int) -> str:
    """An integer as floatToGoString writes it, without its cost: plain up to 6 digits, then
    Go-style exponents (``1.234567e+06``). Device counters pass 10^6 within minutes, so both
    branches are hot. Exact for integers below 2^53, where float() loses nothing."""
    if 0 <= value < 1_000_000:
        return f"{value}.0"
    if value < 1 << 53:
        digits = str(value)
        mantissa = f"{digits[0]}.{digits[1:]}".rstrip("0.")
        return f"{mantissa}e+{len(digits) - 1:02d}"
    return format_value(value)


def format_value(value: float) -> str:
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


QUEUE_FAMILIES = (
    "roce_queue_transmitted_packets_total",
    "roce_queue_transmitted_bytes_total",
    "roce_queue_dropped_packets_total",
    "roce_queue_ecn_marked_packets_total",
    "roce_queue_watermark_bytes",
)
PRIORITY_FAMILIES = (
    "roce_headroom_dropped_packets_total",
    "roce_pfc_watchdog_storms_detected_total",
    "roce_pfc_watchdog_storms_restored_total",
    "roce_pfc_watchdog_stormed",
)


class _Prefixes:
    """The ``name{labels} `` of one interface's series, label names sorted as generate_latest
    writes them. Built once per (fabric, device, interface) and reused by every poll:
    formatting labels was most of a render, and the labels of a port never change. The 4
    always-present queue families are built at once; watermark and per-priority prefixes
    only when a priority or a watermark first needs them (most never do), to keep the cache
    small per port."""

    __slots__ = ("_by_priority", "_labels", "_watermark", "queue")

    def __init__(self, fabric: str, device: str, interface: str) -> None:
        self._labels = (
            f'device="{escape_value(device)}"',
            f'fabric="{escape_value(fabric)}"',
            f'interface="{escape_value(interface)}"',
        )
        dev, fab, iface = self._labels
        self.queue = tuple(
            tuple(f'{name}{{{dev},{fab},{iface},queue="{q}"}} ' for q in PRIORITIES)
            for name in QUEUE_FAMILIES[:4]
        )
        self._watermark: tuple[str, ...] | None = None
        self._by_priority: dict[int, tuple[str, ...]] = {}

    def watermark(self, queue: int) -> str:
        if self._watermark is None:
            dev, fab, iface = self._labels
            name = QUEUE_FAMILIES[4]
            self._watermark = tuple(
                f'{name}{{{dev},{fab},{iface},queue="{q}"}} ' for q in PRIORITIES
            )
        return self._watermark[queue]

    def priority(self, priority: int) -> tuple[str, ...]:
        """PFC rx, PFC tx, then the PRIORITY_FAMILIES, for one priority."""
        found = self._by_priority.get(priority)
        if found is None:
            dev, fab, iface = self._labels
            p = PRIORITIES[priority]
            pfc = "roce_pfc_frames_total"
            found = (
                f'{pfc}{{{dev},direction="rx",{fab},{iface},priority="{p}"}} ',
                f'{pfc}{{{dev},direction="tx",{fab},{iface},priority="{p}"}} ',
                *(f'{name}{{{dev},{fab},{iface},priority="{p}"}} ' for name in PRIORITY_FAMILIES),
            )
            self._by_priority[priority] = found
        return found


# Sized for a shard of ~2 000 switches x 64 ports; past that, least recent ports are rebuilt.
@lru_cache(maxsize=1 << 17)
def _prefixes(fabric: str, device: str, interface: str) -> _Prefixes:
    return _Prefixes(fabric, device, interface)


_HEADERS = {
    spec.name: f"# HELP {spec.name} {escape_help(spec.help)}\n"
    f"# TYPE {spec.name} {spec.type}".encode()
    for spec in SPECS
}
# Index of each switch family in a device block.
_SLOT = {name: i for i, name in enumerate(SWITCH_FAMILIES)}
_CACHE = "_fasttext_block"


def _counter_block(fabric: str, view: DeviceView) -> tuple[bytes, ...]:
    """The counter lines of one polled switch, one newline-joined chunk per switch family."""
    lines: list[list[str]] = [[] for _ in SWITCH_FAMILIES]
    pfc = lines[_SLOT["roce_pfc_frames_total"]]
    tx_packets, tx_bytes, dropped, marked, watermark = (lines[_SLOT[n]] for n in QUEUE_FAMILIES)
    headroom, detected, restored, stormed = (lines[_SLOT[n]] for n in PRIORITY_FAMILIES)
    assert view.counters is not None
    reported = view.counters.interfaces
    unread = view.counters.unread
    headroom_read = "headroom_drops" not in unread
    watchdog_read = "watchdog" not in unread
    device = view.inventory.device
    n = _n
    for interface in view.interface_names():
        counters = reported[interface]
        prefix = _prefixes(fabric, device, interface)
        p_tx, p_bytes, p_dropped, p_marked = prefix.queue
        queues = counters.queues
        for q in range(8):
            queue = queues.get(q)
            if queue is None:  # not reported: no lines (the collector's rule)
                continue
            tx_packets.append(p_tx[q] + n(queue.tx_packets))
            tx_bytes.append(p_bytes[q] + n(queue.tx_bytes))
            dropped.append(p_dropped[q] + n(queue.dropped_packets))
            marked.append(p_marked[q] + n(queue.ecn_marked_packets))
            if queue.watermark_bytes is not None:
                watermark.append(prefix.watermark(q) + n(queue.watermark_bytes))
        for p in view.priorities(interface):
            p_rx, p_tx_pfc, p_headroom, p_detected, p_restored, p_stormed = prefix.priority(p)
            pfc.append(p_rx + n(counters.pfc_rx[p]))
            pfc.append(p_tx_pfc + n(counters.pfc_tx[p]))
            if headroom_read:
                headroom.append(p_headroom + n(counters.headroom_drops[p]))
            if not watchdog_read:
                continue  # not published by this transport: no lines, not zeros
            watchdog = counters.watchdog.get(p, NO_WATCHDOG)  # not listed: no events (read)
            detected.append(p_detected + n(watchdog.storms_detected))
            restored.append(p_restored + n(watchdog.storms_restored))
            stormed.append(p_stormed + ("1.0" if watchdog.stormed else "0.0"))
    return tuple("\n".join(chunk).encode() for chunk in lines)


def _intended_chunk(fabric: str, inventory: SwitchInventory) -> bytes:
    dev = f'device="{escape_value(inventory.device)}"'
    fab = f'fabric="{escape_value(fabric)}"'
    return "\n".join(
        f'roce_intended_class_info{{{dev},ecn="{ON_OFF[cls.ecn]}",{fab},'
        f'interface="{escape_value(cls.interface)}",pfc="{ON_OFF[cls.pfc]}",'
        f'priority="{PRIORITIES[cls.priority]}",queue="{PRIORITIES[cls.priority]}"}} 1.0'
        for cls in inventory.classes
    ).encode()


def _memo(owner: object, attribute: str, key: tuple[object, ...], build: Callable[[], _T]) -> _T:
    """``build()`` remembered on ``owner`` (a frozen dataclass) for ``key``, whose items are
    compared by identity: the key holds them, so an id is never reused while remembered."""
    cached = owner.__dict__.get(attribute)
    if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
        return cast(_T, cached[1])
    value = build()
    object.__setattr__(owner, attribute, (key, value))  # frozen: a private memo, not a field
    return value


def device_block(fabric: str, view: DeviceView) -> tuple[bytes, ...]:
    """One switch's switch-family chunks (b"" where it has no line).

    Remembered on the switch's inventory (the same object for the exporter's lifetime) for
    exactly the objects the lines are made of: the fabric name, the counters of the latest
    successful poll and the ever-active priorities. A new poll brings new counters, so nothing
    stale is ever served; a failed poll or a drift update keeps both, so the formatted lines
    are reused. The poller calls this right after storing a poll: formatting is paid once per
    poll, in the poller thread, and a scrape only joins the chunks."""
    inventory = view.inventory

    def build() -> tuple[bytes, ...]:
        if view.counters is None:
            return (b"",) * (len(_SLOT) - 1)
        return _counter_block(fabric, view)[:-1]

    counters = _memo(inventory, _CACHE, (fabric, view.counters, view.active), build)
    intended = _memo(
        inventory, _CACHE + "_plan", (fabric,), lambda: _intended_chunk(fabric, inventory)
    )
    return (*counters, intended)


def _switch_lines(snapshot: Snapshot) -> dict[str, list[bytes]]:
    """Per switch family, the chunks of every device (label names sorted and integers as
    ``N.0``, as generate_latest writes them)."""
    blocks = [device_block(snapshot.fabric, view) for view in snapshot.devices.values()]
    return {
        name: [chunk for block in blocks if (chunk := block[slot])] for name, slot in _SLOT.items()
    }


def _family_lines(families: Iterable[Metric]) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for family in families:
        rendered = []
        for sample in family.samples:
            labels = ",".join(f'{k}="{escape_value(v)}"' for k, v in sorted(sample.labels.items()))
            rendered.append(
                f"{sample.name}{{{labels}}} {format_value(sample.value)}"
                if labels
                else f"{sample.name} {format_value(sample.value)}"
            )
        key = family.name + ("_total" if family.type == "counter" else "")
        out[key] = ["\n".join(rendered).encode()]
    return out


def render_text(snapshot: Snapshot) -> bytes:
    """The whole exposition of ``snapshot`` in the text format 0.0.4."""
    rest = Families(snapshot.fabric)
    _trims(snapshot, rest)
    _agent(snapshot, rest)
    _compliance(snapshot, rest)
    _probes(snapshot, rest)
    _locate(snapshot, rest)
    _nic(snapshot, rest)
    lines = {**_switch_lines(snapshot), **_family_lines(rest.populated())}
    chunks: list[bytes] = []
    for spec in SPECS:
        body = lines.get(spec.name)
        if not body:
            continue
        chunks.append(_HEADERS[spec.name])
        chunks.extend(body)
    chunks.append(b"")
    # Chunks are bytes already: one copy of the whole exposition, no str-to-bytes pass.
    return b"\n".join(chunks)

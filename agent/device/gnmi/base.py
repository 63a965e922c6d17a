"""What every NOS's gNMI telemetry shares: the counters being assembled from a stream, the
decoding of a counter value, and the profile a NOS overrides (netmiko's pattern: one module
per NOS, overriding only what differs).

A profile says where the NOS serves gNMI (port, target, origin, encoding), which paths the
agent subscribes to and in which mode, and how one update folds into the counters; it never
touches the network (:mod:`agent.device.gnmi.stream` does).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from agent.device.gnmi.paths import Elem, GnmiPath, parse_path
from agent.device.state import (
    Counters,
    InterfaceCounters,
    QueueCounters,
    UnreadFamily,
    WatchdogCounters,
)

Mode = Literal["sample", "on_change"]
QueueField = Literal[
    "tx_packets", "tx_bytes", "dropped_packets", "ecn_marked_packets", "watermark_bytes"
]
# A queue is reported once these were all read: a queue missing one would export a 0 that
# was never read.
REQUIRED_QUEUE_FIELDS = frozenset(
    ("tx_packets", "tx_bytes", "dropped_packets", "ecn_marked_packets")
)
PRIORITIES = range(8)
# More interfaces than any switch has: a stream that names more is not a switch's (and would
# otherwise grow the exporter's memory without bound).
MAX_INTERFACES = 4096
# A counter leaf is an unsigned 64-bit integer (oc-yang:counter64); anything bigger is
# malformed, not a counter.
COUNTER_MAX = (1 << 64) - 1


# Folds one update's value into the counters: what a profile makes of one path, once.
Folder = Callable[[Any, "CounterBuilder"], None]


class UpdateError(ValueError):
    """An update the agent cannot use: a malformed value, or a path nobody asked for.

    ``reason`` is the exporter's bounded reason label (``parse``)."""

    reason = "parse"


@dataclass
class _InterfaceSoFar:
    pfc_rx: list[int] = field(default_factory=lambda: [0] * 8)
    pfc_tx: list[int] = field(default_factory=lambda: [0] * 8)
    queues: dict[int, dict[str, int]] = field(default_factory=dict)
    watchdog: dict[int, dict[str, int | bool]] = field(default_factory=dict)

    def freeze(self) -> InterfaceCounters:
        queues = {
            q: QueueCounters(**values)
            for q, values in sorted(self.queues.items())
            if values.keys() >= REQUIRED_QUEUE_FIELDS
        }
        watchdog = {p: WatchdogCounters(**values) for p, values in sorted(self.watchdog.items())}
        return InterfaceCounters(
            pfc_rx=tuple(self.pfc_rx), pfc_tx=tuple(self.pfc_tx), queues=queues, watchdog=watchdog
        )


class CounterBuilder:
    """The latest value of every counter leaf the stream delivered, per interface."""

    def __init__(self) -> None:
        self.interfaces: dict[str, _InterfaceSoFar] = {}

    def _interface(self, name: str) -> _InterfaceSoFar:
        found = self.interfaces.get(name)
        if found is None:
            if len(self.interfaces) >= MAX_INTERFACES:
                raise UpdateError(f"{name}: more than {MAX_INTERFACES} interfaces")
            found = self.interfaces[name] = _InterfaceSoFar()
        return found

    def pfc(self, interface: str, priority: int, direction: str, value: int) -> None:
        """Pause frames received (``rx``) or sent (``tx``) for one priority."""
        counts = self._interface(interface)
        (counts.pfc_rx if direction == "rx" else counts.pfc_tx)[valid_priority(priority)] = value

    def queue(self, interface: str, queue: int, name: QueueField, value: int) -> None:
        self._interface(interface).queues.setdefault(valid_priority(queue), {})[name] = value

    def watchdog(self, interface: str, priority: int, name: str, value: int | bool) -> None:
        """``storms_detected``, ``storms_restored`` or ``stormed`` of one lossless priority."""
        self._interface(interface).watchdog.setdefault(valid_priority(priority), {})[name] = value

    def counters(
        self, device: str, collected_at: float, unread: dict[UnreadFamily, str]
    ) -> Counters:
        interfaces = {name: so_far.freeze() for name, so_far in self.interfaces.items()}
        return Counters(
            device=device, collected_at=collected_at, interfaces=interfaces, unread=unread
        )


def valid_priority(value: int) -> int:
    if value not in PRIORITIES:
        raise UpdateError(f"priority or queue {value} is outside 0-7")
    return value


def ignore(value: Any, builder: CounterBuilder) -> None:
    """The folder of a leaf under a subscribed path that the agent does not use."""


def pfc_folder(interface: str, priority: int, direction: str, where: str) -> Folder:
    """One priority's pause frames, received (``rx``) or sent (``tx``), one leaf per update."""
    valid_priority(priority)

    def fold(value: Any, builder: CounterBuilder) -> None:
        builder.pfc(interface, priority, direction, counter_value(value, where))

    return fold


def queue_folder(interface: str, queue: int, name: QueueField, where: str) -> Folder:
    """One egress queue counter, one leaf per update."""
    valid_priority(queue)

    def fold(value: Any, builder: CounterBuilder) -> None:
        builder.queue(interface, queue, name, counter_value(value, where))

    return fold


def key_number(path: GnmiPath, elem: str, key: str) -> int:
    """The integer a key ends with (``queue[name=3]``, ``queue[name=UC3]``)."""
    text = key_text(path, elem, key)
    digits = text[len(text.rstrip("0123456789")) :]
    if not digits:
        raise UpdateError(f"{path.text()}: {elem}[{key}={text}] is not numbered")
    return int(digits)


def key_text(path: GnmiPath, elem: str, key: str) -> str:
    for name, keys in path.elems:
        if name == elem:
            value = dict(keys).get(key)
            if value is not None:
                return value
    raise UpdateError(f"{path.text()}: no {elem}[{key}=...] in the path")


def counter_value(value: Any, where: str) -> int:
    """A counter from a gNMI ``TypedValue``: uint/int, or a JSON number or numeric string
    (SONiC writes every counter as a string)."""
    kind = value.WhichOneof("value")
    if kind in ("uint_val", "int_val"):
        number = getattr(value, kind)
    elif kind in ("json_val", "json_ietf_val"):
        number = decode_json(getattr(value, kind), where)
    elif kind == "string_val":
        number = value.string_val
    else:
        raise UpdateError(f"{where}: a {kind or 'empty'} value where a counter belongs")
    return as_counter(number, where)


def as_counter(number: Any, where: str) -> int:
    if isinstance(number, str) and number.isascii() and number.isdigit():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= COUNTER_MAX:
        raise UpdateError(f"{where}: {str(number)[:40]!r} is not a counter")
    return number


def decode_json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UpdateError(f"{where}: the JSON value does not parse ({exc})") from None


@dataclass(frozen=True)
class Subscription:
    path: GnmiPath
    mode: Mode


def _elem_matches(pattern: Elem, actual: Elem) -> bool:
    name, keys = pattern
    if name != actual[0] and not fnmatch.fnmatchcase(actual[0], name):
        return False
    have = dict(actual[1])
    return all(have.get(k) == v or (v == "*" and k in have) for k, v in keys)


def under(subscription: GnmiPath, path: GnmiPath) -> bool:
    """True if ``path`` lies at or below what ``subscription`` asked for (wildcards match)."""
    if len(path.elems) < len(subscription.elems):
        return False
    pairs = zip(subscription.elems, path.elems, strict=False)
    return all(_elem_matches(pattern, actual) for pattern, actual in pairs)


class GnmiProfile:
    """One NOS's gNMI telemetry. Subclasses set the class attributes and :meth:`fold`."""

    platform: ClassVar[str]
    default_port: ClassVar[int]
    target: ClassVar[str] = ""
    origin: ClassVar[str] = ""
    encoding: ClassVar[str] = "PROTO"  # gnmi.Encoding name
    # (path, mode) the agent subscribes to, as the NOS documents them.
    paths: ClassVar[tuple[tuple[str, Mode], ...]] = ()
    # True where each notification of a sample carries one subscribed path's whole table, so
    # a sample is complete once every sampled path delivered.
    table_per_notification: ClassVar[bool] = False
    # Counter families the NOS does not publish over gNMI, and why (no series for them).
    unread: ClassVar[dict[UnreadFamily, str]] = {}

    def subscriptions(self) -> list[Subscription]:
        return [
            Subscription(parse_path(text, self.origin, self.target), mode)
            for text, mode in self.paths
        ]

    def fold(self, path: GnmiPath, value: Any, builder: CounterBuilder) -> None:
        """Add one update to ``builder``; :class:`UpdateError` if it cannot be used. Leaves
        under a subscribed path that the agent does not use are ignored."""
        self.folder(path)(value, builder)

    def folder(self, path: GnmiPath) -> Folder:
        """What to do with every update at ``path``. A stream sends the same paths every
        sample, so the subscriber asks once per path and keeps the answer; a profile whose
        paths each carry one leaf (thousands a sample) works out the path here, once.
        :class:`UpdateError` if no update at ``path`` can be used."""
        raise NotImplementedError

"""Turning probe results (the JSON of ``roce-agent probe ... --output json``) into metric deltas.

Accepted shapes, told apart by their keys:

- a scenario result (``agent.observe.probes.scenarios``: ``scenario`` = pairwise | incast | storm) —
  per-flow rows with ``from``/``to`` host names, sent, received, lost, reordered, ce_marked,
  cnps_received and the sender's ``paused_s``; rows that also carry a receiver ``latency``
  dict or an ``invalid`` count contribute those too;
- a receiver result (``role`` = receive, from ``probe receive`` or the worker) — flows keyed
  by IP (mapped back to fabric host names), latency buckets, ``totals.invalid`` and the PFC
  seen on the wire per priority.

Label values stay bounded: host names are checked against the fabric (``unknown`` otherwise),
scenarios against a fixed set, never IP addresses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.errors import AgentError
from exporters.metrics import PROBE_SCENARIOS

UNKNOWN_HOST = "unknown"
# The receiver's latency buckets (agent.observe.probes.analysis.LATENCY_BUCKETS_S) plus +Inf.
# Copied,
# not imported: that module pulls in scapy (slow to import, large) which the exporter never needs;
# a unit test keeps the two equal.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
BUCKET_BOUNDS: tuple[float, ...] = (*LATENCY_BUCKETS_S, float("inf"))


class ProbeResultError(AgentError):
    """Something that is not a probe result this exporter understands."""


# The per-flow counts a result may carry; a flow's count exists only where a result carried
# it (a receiver knows nothing of what was sent, nor of the CNPs the sender got).
FLOW_COUNTS = ("sent", "received", "lost", "reordered", "ce_marked", "cnps_received")


def add_known(a: int | None, b: int | None) -> int | None:
    """The sum of what was read; None when neither was."""
    if a is None:
        return b
    return a if b is None else a + b


@dataclass
class FlowDelta:
    """What one result says of one flow: only the counts it carried, and latency samples
    only when it carried a latency histogram (None: no figure, never 0)."""

    counts: dict[str, int] = field(default_factory=dict)
    latency_buckets: list[int] | None = None
    latency_sum_s: float = 0.0
    latency_count: int = 0

    def add(self, key: str, value: int | None) -> None:
        total = add_known(self.counts.get(key), value)
        if total is not None:
            self.counts[key] = total


@dataclass
class ProbeRun:
    """What one probe result adds to the running totals."""

    scenario: str
    passed: bool | None  # None: a bare receiver result has no verdict
    flows: dict[tuple[str, str], FlowDelta] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=dict)  # receiving host -> frames
    # (host, priority) -> seconds, for the priorities the result measured (0 included)
    paused_s: dict[tuple[str, int], float] = field(default_factory=dict)


@dataclass(frozen=True)
class HostDirectory:
    """Fabric host names and their addresses, for turning results into bounded labels."""

    names: frozenset[str]
    by_ip: Mapping[str, str]
    roce_priority: int

    def name(self, value: Any) -> str:
        text = str(value) if value is not None else ""
        return text if text in self.names else UNKNOWN_HOST

    def name_of_ip(self, value: Any) -> str:
        return self.by_ip.get(str(value), UNKNOWN_HOST)


def _int(row: Mapping[str, Any], key: str) -> int | None:
    """The count ``key`` of a row; None when the row does not carry it (not read)."""
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProbeResultError(f"probe result field {key!r} is not a number: {value!r}")
    return max(0, int(value))


def _add_latency(delta: FlowDelta, latency: Any) -> None:
    """Add the receiver's per-bucket (non-cumulative) latency counts."""
    if not isinstance(latency, Mapping):
        return
    buckets = latency.get("buckets_le_s")
    if not isinstance(buckets, Mapping):
        return
    if len(buckets) != len(BUCKET_BOUNDS):
        raise ProbeResultError(
            f"latency has {len(buckets)} buckets, expected {len(BUCKET_BOUNDS)} "
            "(agent.observe.probes.analysis.LATENCY_BUCKETS_S and +Inf)"
        )
    counts = [int(v) for v in buckets.values()]
    if delta.latency_buckets is None:
        delta.latency_buckets = [0] * len(BUCKET_BOUNDS)
    for index, count in enumerate(counts):
        delta.latency_buckets[index] += max(0, count)
    count = int(latency.get("count") or 0)
    average = latency.get("avg_s")
    delta.latency_count += count
    if count and isinstance(average, int | float):
        delta.latency_sum_s += float(average) * count


def _add_counts(delta: FlowDelta, row: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        delta.add(key, _int(row, key))


def _add_paused(run: ProbeRun, slot: tuple[str, int], paused: Any) -> None:
    """Seconds paused on a (host, priority) the result measured; 0 is a measurement too."""
    if isinstance(paused, int | float) and not isinstance(paused, bool) and paused >= 0:
        run.paused_s[slot] = run.paused_s.get(slot, 0.0) + float(paused)


def _flow(run: ProbeRun, src: str, dst: str) -> FlowDelta:
    return run.flows.setdefault((src, dst), FlowDelta())


def _scenario_label(value: Any) -> str:
    return value if value in PROBE_SCENARIOS else "other"


def _add_pfc(run: ProbeRun, host: str, pfc: Any) -> None:
    """PFC seen on the wire per priority (receiver's or sniffer's ``priorities`` dict)."""
    if not isinstance(pfc, Mapping):
        return
    priorities = pfc.get("priorities")
    if not isinstance(priorities, Mapping):
        return
    for key, stats in priorities.items():
        if not str(key).isdigit() or not 0 <= int(key) <= 7 or not isinstance(stats, Mapping):
            continue
        _add_paused(run, (host, int(key)), stats.get("paused_s"))


def parse_probe_result(result: Mapping[str, Any], hosts: HostDirectory) -> ProbeRun:
    """The metric deltas of one probe result; raises :class:`ProbeResultError` otherwise."""
    if not isinstance(result, Mapping):
        raise ProbeResultError(f"a probe result is a JSON object, not {type(result).__name__}")
    if "scenario" in result:
        return _scenario(result, hosts)
    if result.get("role") == "receive":
        return _receiver(result, hosts, "receive")
    raise ProbeResultError(
        "not a probe result: expected a scenario result (key 'scenario') or a receiver "
        "result (role 'receive')"
    )


def _scenario(result: Mapping[str, Any], hosts: HostDirectory) -> ProbeRun:
    scenario = _scenario_label(result.get("scenario"))
    passed = result.get("passed")
    run = ProbeRun(scenario, bool(passed) if isinstance(passed, bool) else None)
    if scenario == "storm":
        host = hosts.name(result.get("host"))
        _add_pfc(run, host, result.get("sniffed"))
        return run
    rows = result.get("flows")
    if not isinstance(rows, list):
        raise ProbeResultError(f"{scenario} result has no 'flows' list")
    for row in rows:
        if not isinstance(row, Mapping):
            raise ProbeResultError("a flow row is not a JSON object")
        src, dst = hosts.name(row.get("from")), hosts.name(row.get("to"))
        delta = _flow(run, src, dst)
        _add_counts(delta, row, FLOW_COUNTS)
        _add_latency(delta, row.get("latency"))
        invalid = _int(row, "invalid")
        if invalid is not None:
            run.invalid[dst] = run.invalid.get(dst, 0) + invalid
        # The sender is paused on the class it sends in: the profile's RoCE priority.
        _add_paused(run, (src, hosts.roce_priority), row.get("paused_s"))
    return run


def _receiver(result: Mapping[str, Any], hosts: HostDirectory, scenario: str) -> ProbeRun:
    run = ProbeRun(scenario, None)
    flows = result.get("flows")
    if not isinstance(flows, list):
        raise ProbeResultError("receiver result has no 'flows' list")
    receiver = UNKNOWN_HOST
    for flow in flows:
        if not isinstance(flow, Mapping):
            raise ProbeResultError("a receiver flow is not a JSON object")
        src, dst = hosts.name_of_ip(flow.get("src_ip")), hosts.name_of_ip(flow.get("dst_ip"))
        receiver = dst if dst != UNKNOWN_HOST else receiver
        delta = _flow(run, src, dst)
        # What a receiver sees; sent and CNPs are the sender's to say.
        _add_counts(delta, flow, ("received", "lost", "reordered", "ce_marked"))
        _add_latency(delta, flow.get("latency"))
    totals = result.get("totals")
    invalid = _int(totals, "invalid") if isinstance(totals, Mapping) else None
    if invalid is not None:
        run.invalid[receiver] = invalid
    _add_pfc(run, receiver, result.get("pfc"))
    return run

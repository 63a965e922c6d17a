"""The Grafana dashboards, as code: ``python -m exporters.dashboards`` writes exporters/grafana/.

Provisioning-ready JSON: no dashboard ``id``, a stable ``uid``, no ``__inputs``; the Prometheus
data source is the template variable ``datasource`` (type datasource, query prometheus), so the
same files work on any Grafana with any Prometheus data source name.

Fleet use: every dashboard has the chained variables job → instance → fabric (from
``roce_exporter_shard_info``, which every exporter shard serves from its first scrape), then
the ones that apply to it (device → interface → priority, scenario/src/dst, ...), and every
selector in every query filters by all of them. Drill-down goes overview → switch → interface
through data links that carry the clicked series' labels and keep the other selections.

Panel queries use only metrics from :mod:`exporters.metrics`; tests/unit/test_dashboards.py
validates the files against Grafana's schema (grafana-foundation-sdk models) and restates
grafana/dashboard-linter's rules; a lab test runs every query against a real Prometheus; a
unit test fails when the files differ from this module.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporters.metrics import BY_NAME

GRAFANA_DIR = Path(__file__).resolve().parent / "grafana"
DS = {"type": "prometheus", "uid": "${datasource}"}
# Grafana 10.4 / 11.0; later Grafanas migrate it on load, earlier ones cannot read newer.
SCHEMA_VERSION = 39
TAG = "roce-fabric-agent"

Panel = dict[str, Any]
Grid = tuple[int, int, int, int]

# Each variable: (label in the UI, metric whose label values it lists). The order is the
# chain: a variable's values are filtered by every variable before it on the same dashboard
# whose label its metric carries.
VARIABLES: dict[str, tuple[str, str]] = {
    "job": ("Job", "roce_exporter_shard_info"),
    "instance": ("Instance", "roce_exporter_shard_info"),
    "fabric": ("Fabric", "roce_exporter_shard_info"),
    "device": ("Device", "roce_device_up"),
    # Queue series exist for every queue of every polled interface (lean series keep them).
    "interface": ("Interface", "roce_queue_transmitted_packets_total"),
    "priority": ("Priority", "roce_intended_class_info"),
    "scenario": ("Scenario", "roce_probe_runs_total"),
    "src": ("From", "roce_probe_packets_sent_total"),
    "dst": ("To", "roce_probe_packets_sent_total"),
    # Every RDMA port read has its info series; a counter family would leave out the NICs
    # that lack it (rxe has no np_cnp_sent).
    "rdma_device": ("RDMA device", "roce_nic_port_info"),
    "nic_interface": ("NIC port", "roce_nic_pause_frames_total"),
}
# Host NIC series name the host's port ``interface``, as switch series do; a separate
# variable keeps a switch's interface selection from emptying the host NIC dashboard.
LABEL_OF = {"nic_interface": "interface"}
FLEET = ("job", "instance", "fabric")
SWITCH = (*FLEET, "device")
PORT = (*SWITCH, "interface")
PROBE = (*FLEET, "scenario", "src", "dst")
NIC = (*FLEET, "rdma_device", "nic_interface")


def sel(names: tuple[str, ...], *extra: str) -> str:
    """A label matcher list for ``{...}``: every variable in ``names``, then fixed matchers."""
    matchers = [f'{LABEL_OF.get(name, name)}=~"${name}"' for name in names]
    return ", ".join([*matchers, *extra])


PFC_ON = 'pfc="on"'
FAILED = 'result=~"fail|error"'
UNVERIFIED = 'result="unverified"'


def or_zero_if_read(expr: str, read: str) -> str:
    """``expr``, or 0 when it finds nothing but ``read`` (a series that exists only once
    something was read) exists: 0 only where a 0 was read, absent ("not read") otherwise.
    Never ``or vector(0)``, which turns "never read" into 0 (issue #41)."""
    return f"{expr} or count({read}) * 0"


def read_states(names: tuple[str, ...]) -> str:
    """Each switch's read state now (roce_device_state): up, or why it is not read."""
    return f"roce_device_state{{{sel(names)}}} == 1"


def lossless(names: tuple[str, ...]) -> str:
    """The intent's lossless classes, filtered like the counters they are joined with."""
    return f"roce_intended_class_info{{{sel(names, PFC_ON)}}}"


def target(expr: str, legend: str = "", ref: str = "A", **extra: Any) -> dict[str, Any]:
    out = {"refId": ref, "expr": expr, "legendFormat": legend or "__auto", "datasource": DS}
    out.update(extra)
    return out


def link(title: str, uid: str, clicked: tuple[str, ...]) -> dict[str, Any]:
    """A data link to dashboard ``uid``: the clicked series' labels become its variables; the
    data source, job, instance and fabric selections and the time range are kept
    (``${var:queryparam}`` keeps every value of a multi-value selection)."""
    params = ["${__url_time_range}", "${datasource:queryparam}"]
    params += [f"${{{name}:queryparam}}" for name in FLEET]
    params += [f"var-{name}=${{__field.labels.{name}}}" for name in clicked]
    return {"title": title, "url": f"/d/{uid}/{uid}?{'&'.join(params)}", "targetBlank": False}


NOT_READ = "not read"
NO_PROBE = "no probe result yet"
NO_LOCATE = "no locate run yet"
NO_CHECKS = "no checks fed yet"


@dataclass(frozen=True)
class Look:
    """How a panel shows: its place on the dashboard's 24-column grid (x, y, width,
    height), the unit of its values, its description (the panel's info tooltip), the data
    links a click on a series follows, and what it says when its query returns nothing
    (issue #41: absent means never read, which must not look like 0)."""

    grid: Grid
    unit: str
    description: str
    links: Sequence[dict[str, Any]] = ()
    no_value: str = NOT_READ


def panel(
    kind: str, title: str, targets: list[dict[str, Any]], look: Look, **options: Any
) -> Panel:
    x, y, w, h = look.grid
    defaults: dict[str, Any] = {"unit": look.unit, "noValue": look.no_value}
    if look.links:
        defaults["links"] = list(look.links)
    return {
        "type": kind,
        "title": title,
        "description": look.description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
    }


def stat(title: str, expr: str, look: Look, red_above: float | None = 0) -> Panel:
    body = panel("stat", title, [target(expr, title)], look,
                 reduceOptions={"calcs": ["lastNotNull"], "fields": "", "values": False},
                 colorMode="background", graphMode="none")  # fmt: skip
    if red_above is not None:
        body["fieldConfig"]["defaults"]["thresholds"] = {
            "mode": "absolute",
            "steps": [
                {"color": "green", "value": None},
                {"color": "red", "value": red_above + 1e-9},
            ],
        }
    return body


def series(title: str, targets: list[dict[str, Any]], look: Look) -> Panel:
    return panel("timeseries", title, targets, look,
                 legend={"displayMode": "table", "placement": "bottom", "showLegend": True,
                         "calcs": ["max", "last"]},
                 tooltip={"mode": "multi", "sort": "desc"})  # fmt: skip


def table(title: str, expr: str, look: Look) -> Panel:
    return panel("table", title, [target(expr, "", format="table", instant=True)], look,
                 showHeader=True)  # fmt: skip


def datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def query_variable(name: str, before: tuple[str, ...]) -> dict[str, Any]:
    label, metric = VARIABLES[name]
    # Chained on the variables before it whose label the metric carries: a matcher on a label
    # the series lack (rdma_device on pause frames) would leave the variable empty.
    carried = {"job", "instance", *BY_NAME[metric].labels}
    before = tuple(v for v in before if LABEL_OF.get(v, v) in carried)
    chained = f"{{{sel(before)}}}" if before else ""
    query = f"label_values({metric}{chained}, {LABEL_OF.get(name, name)})"
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-values"},
        # On time range change: a fleet's devices come and go (grafana/dashboard-linter).
        "refresh": 2,
        "includeAll": True,
        # .+ rather than .*: "All" must not match series that lack the label.
        "allValue": ".+",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": 0,
        "options": [],
    }


def dashboard(uid: str, title: str, description: str, panels: list[Panel],
              variables: tuple[str, ...]) -> dict[str, Any]:  # fmt: skip
    for number, item in enumerate(panels, start=1):
        item["id"] = number
    chain = [query_variable(name, variables[:i]) for i, name in enumerate(variables)]
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["roce", "lossless", TAG],
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [datasource_variable(), *chain]},
        "annotations": {"list": []},
        "links": [
            {
                "type": "dashboards",
                "tags": [TAG],
                "asDropdown": True,
                "title": "RoCE dashboards",
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "panels": panels,
    }


# --------------------------------------------------------------------------- dashboards


def overview() -> dict[str, Any]:
    f = sel(FLEET)
    to_switch = [link("Switch ${__field.labels.device}", "roce-switch", ("device",))]
    lossless_drops = (
        f"increase(roce_queue_dropped_packets_total{{{f}}}[$__range]) and on "
        f"(fabric, device, interface, queue) {lossless(FLEET)}"
    )
    panels = [
        stat("Devices down", or_zero_if_read(f"count(roce_device_up{{{f}}} == 0)",
             f"roce_device_up{{{f}}}"), Look((0, 0, 3, 4), "none", "Switches the exporter has "
             "not read in its latest poll: not polled yet, or the poll failed (the table "
             "'Switches: read, or why not' says why). 0 only when every switch was read.")),
        stat("Lossless drops", f"sum({lossless_drops})", Look((3, 0, 3, 4), "none",
             "Packets dropped on lossless (PFC) queues over the dashboard range, on the "
             "switches read. Must be 0. 'not read' until a switch was read.")),
        stat("Headroom drops", f"sum(increase(roce_headroom_dropped_packets_total{{{f}}}"
             "[$__range]) and on (fabric, device, interface, priority) "
             f"{lossless(FLEET)})", Look((6, 0, 3, 4), "none",
             "Ingress drops of lossless priorities over the range: PFC headroom too small. "
             "'not read' until a switch was read.")),
        stat("PFC storms now", f"sum(roce_pfc_watchdog_stormed{{{f}}})",
             Look((9, 0, 3, 4), "none", "Queues the PFC watchdog holds in the stormed state, "
             "on the switches read.")),
        stat("Pause frames/s", f'sum(rate(roce_pfc_frames_total{{{f}, direction="tx"}}'
             "[$__rate_interval]))", Look((12, 0, 3, 4), "pps",
             "PFC pause frames the switches send."), red_above=None),
        stat("ECN marks/s", f"sum(rate(roce_queue_ecn_marked_packets_total{{{f}}}"
             "[$__rate_interval]))",
             Look((15, 0, 3, 4), "pps", "Packets CE-marked by the switches."), red_above=None),
        stat("Drift items", f"sum(roce_drift_items{{{f}}})",
             Look((18, 0, 3, 4), "none",
                  "Settings that differ from the fabric intent (`roce-agent drift`), summed "
                  "over the devices whose configuration was read; 'not read' when none was.")),
        stat("Probe loss (latest runs)",
             f"sum(roce_probe_last_run_lost_packets{{{f}}})",
             Look((21, 0, 3, 4), "none", "Packets the latest run of each probe flow lost.",
                  no_value=NO_PROBE)),
        series("Lossless drops/s by device", [target(
            f"sum by (fabric, device) (rate(roce_queue_dropped_packets_total{{{f}}}"
            "[$__rate_interval]) and on (fabric, device, interface, queue) "
            f"{lossless(FLEET)})", "{{fabric}} {{device}}")], Look((0, 4, 12, 8), "pps",
            "Drops on the queues the intent makes lossless. Click a series for its switch.",
            to_switch)),
        series("PFC pause frames/s by device", [target(
            f"sum by (fabric, device, direction) (rate(roce_pfc_frames_total{{{f}}}"
            "[$__rate_interval]))", "{{fabric}} {{device}} {{direction}}")], Look((12, 4, 12, 8),
            "pps", "Pause frames received (rx) and sent (tx). Click a series for its switch.",
            to_switch)),
        series("ECN marks/s by device", [target(
            f"sum by (fabric, device) (rate(roce_queue_ecn_marked_packets_total{{{f}}}"
            "[$__rate_interval]))", "{{fabric}} {{device}}")], Look((0, 12, 12, 8), "pps",
            "Packets CE-marked on egress. Click a series for its switch.", to_switch)),
        series("Probe loss ratio by scenario", [target(
            f"sum by (scenario) (increase(roce_probe_packets_lost_total{{{f}}}"
            "[$__rate_interval])) / sum by (scenario) (increase(roce_probe_packets_sent_total"
            f"{{{f}}}[$__rate_interval]))", "{{scenario}}")], Look((12, 12, 12, 8), "percentunit",
            "Lost over sent packets of the wire probes, per scenario.")),
        series("Devices up", [target(f"roce_device_up{{{f}}}", "{{fabric}} {{device}}")],
               Look((0, 20, 8, 7), "none", "1 while the latest poll of the switch succeeded.",
               to_switch)),
        series("Poll duration", [target(f"roce_poll_duration_seconds{{{f}}}",
               "{{fabric}} {{device}}")], Look((8, 20, 8, 7), "s",
               "How long the latest poll of each switch took (the timeout if it timed out).")),
        series("Poll errors by reason", [target(
            f"sum by (fabric, device, reason) (increase(roce_poll_errors_total{{{f}}}"
            "[$__rate_interval]))", "{{device}} {{reason}}")], Look((16, 20, 8, 7), "none",
            "Failed polls per interval, by reason (timeout, auth, connect, parse, other).")),
        table("Locate: suspects of the latest run",
              f"sort_desc(roce_locate_suspect{{{f}}})", Look((0, 27, 18, 7), "percentunit",
              "The link, port, switch or host NIC the latest scheduled `roce-agent locate` "
              "run blames, with its confidence; empty when it found no fault. The evidence is "
              "in the daemon's reports/last-locate.json (runbook: RoceLocateSuspect).",
              no_value="no suspect, or no locate run yet (see its age)")),
        stat("Locate: age of the latest run",
             f"time() - max by (fabric) (roce_locate_last_run_timestamp_seconds{{{f}}})",
             Look((18, 27, 6, 7), "s", "Seconds since the latest locate run was stored. A verdict "
             "older than two schedules no longer fires RoceLocateSuspect.",
             no_value=NO_LOCATE), red_above=None),
        table("Switches: read, or why not", read_states(FLEET), Look((0, 34, 24, 6), "none",
              "Every switch and what the exporter knows of it now: state up (its latest poll "
              "read it), not_polled_yet, or why its latest poll failed (timeout, auth, "
              "connect, parse, other). A switch not up has no figures (or its last ones, "
              "aged), never 0.", to_switch)),
    ]  # fmt: skip
    return dashboard(
        "roce-fabric-overview",
        "RoCE fabric overview",
        "Health of the lossless fabric at a glance: drops on lossless classes, PFC storms, "
        "pause and ECN rates, drift, probe loss and the exporter's own view of the devices. "
        "Click a device's series to open its switch dashboard.",
        panels,
        FLEET,
    )


def switch() -> dict[str, Any]:
    s = sel(PORT)
    to_port = [link("Interface ${__field.labels.device} ${__field.labels.interface}",
                    "roce-interface", ("device", "interface"))]  # fmt: skip
    by = "sum by (fabric, device, interface"
    panels = [
        series("PFC frames/s by interface", [target(
            f"{by}, direction) (rate(roce_pfc_frames_total{{{s}}}[$__rate_interval]))",
            "{{device}} {{interface}} {{direction}}")], Look((0, 0, 12, 8), "pps",
            "Pause frames received (rx) and sent (tx), all priorities. Click for the "
            "interface.", to_port)),
        series("Queue drops/s by interface", [target(
            f"{by}) (rate(roce_queue_dropped_packets_total{{{s}}}[$__rate_interval]))",
            "{{device}} {{interface}}")], Look((12, 0, 12, 8), "pps",
            "Egress queue drops, all queues; the interface dashboard tells lossless from lossy.",
            to_port)),
        series("ECN marks/s by interface", [target(
            f"{by}) (rate(roce_queue_ecn_marked_packets_total{{{s}}}[$__rate_interval]))",
            "{{device}} {{interface}}")], Look((0, 8, 12, 8), "pps",
            "Packets CE-marked on egress, all queues.", to_port)),
        series("Transmitted by interface", [target(
            f"8 * {by}) (rate(roce_queue_transmitted_bytes_total{{{s}}}[$__rate_interval]))",
            "{{device}} {{interface}}")], Look((12, 8, 12, 8), "bps",
            "Egress throughput of the interface, all queues.", to_port)),
        series("Headroom (ingress) drops/s by interface", [target(
            f"{by}) (rate(roce_headroom_dropped_packets_total{{{s}}}[$__rate_interval]))",
            "{{device}} {{interface}}")], Look((0, 16, 12, 8), "pps",
            "Ingress drops of lossless priorities: headroom too small for the cable.", to_port)),
        series("PFC watchdog: stormed queues", [target(
            f"{by}) (roce_pfc_watchdog_stormed{{{s}}})", "{{device}} {{interface}}")],
            Look((12, 16, 12, 8), "none", "Queues the PFC watchdog holds in the stormed state.",
            to_port)),
        table("Intended lossless classes",
              f"roce_intended_class_info{{{sel(PORT, PFC_ON)}}}", Look((0, 24, 24, 8),
              "none", "From the fabric intent: the classes that must never drop.")),
    ]  # fmt: skip
    return dashboard(
        "roce-switch",
        "RoCE switch: PFC, ECN and drops",
        "Per switch and interface: PFC frames, ECN marks, drops, headroom drops and the PFC "
        "watchdog. Click an interface's series for its priorities and queues.",
        panels,
        PORT,
    )


# The storm panel's step: with gNMI sampled every second (exporter --telemetry gnmi
# --interval 1s) and a 1 s scrape, a point a second, each the rate over $__rate_interval (4
# scrapes: the shortest window Grafana deems safe).
STORM_INTERVAL = "1s"


def storm_panel(by: str, selector: str) -> Panel:
    """Pause frames received per second at the finest step the data has: a storm's start,
    to the second, when the switch streams."""
    body = series("PFC storm: pause frames received, 1 s steps", [
        target(f"{by}, priority) (rate(roce_pfc_frames_total{{{selector}, direction=\"rx\"}}"
               "[$__rate_interval]))", "{{interface}} p{{priority}} rx"),
    ], Look((0, 32, 24, 8), "pps",
            "Pause frames received per second, a point every second when the exporter streams "
            "gNMI at --interval 1s and Prometheus scrapes every second (each point the rate over "
            "the last 4 scrapes); at a 15 s SSH poll it shows 15 s steps. The stormed panel "
            "above says when the watchdog stepped in."))  # fmt: skip
    body["interval"] = STORM_INTERVAL
    return body


def trim_panel(by: str, selector: str) -> Panel:
    """Packet trimming per queue (a lossy-trim class): trimmed, sent on, and dropped at the
    trim queue. Empty, not zero, where the switch does not trim or report a column."""
    return series("Packet trimming/s by queue", [
        target(f"{by}, queue) (rate(roce_queue_trimmed_packets_total{{{selector}}}"
               "[$__rate_interval]))", "{{interface}} q{{queue}} trimmed"),
        target(f"{by}, queue) (rate(roce_queue_trim_sent_packets_total{{{selector}}}"
               "[$__rate_interval]))", "{{interface}} q{{queue}} sent", "B"),
        target(f"{by}, queue) (rate(roce_queue_trim_dropped_packets_total{{{selector}}}"
               "[$__rate_interval]))", "{{interface}} q{{queue}} dropped", "C"),
    ], Look((0, 48, 24, 8), "pps",
            "Packets the switch trimmed to their header instead of dropping them (lossy-trim "
            "class), the trimmed packets it sent on, and those dropped at the trim queue (the "
            "loss notice itself lost). Only what the switch reports: SONiC 202505 and Cumulus "
            "per queue report trimmed packets alone."))  # fmt: skip


def interface() -> dict[str, Any]:
    p = sel((*PORT, "priority"))
    q = sel(PORT)
    by = "sum by (fabric, device, interface"
    panels = [
        series("PFC frames/s by priority", [target(
            f"{by}, priority, direction) (rate(roce_pfc_frames_total{{{p}}}"
            "[$__rate_interval]))", "{{interface}} p{{priority}} {{direction}}")],
            Look((0, 0, 12, 8), "pps", "Pause frames per priority (lossless priorities, and any "
            "other that ever paused).")),
        series("Queue drops/s", [target(
            f"{by}, queue) (rate(roce_queue_dropped_packets_total{{{q}}}[$__rate_interval]))",
            "{{interface}} q{{queue}}")], Look((12, 0, 12, 8), "pps",
            "Egress queue drops; any on a lossless queue is a fault.")),
        series("ECN marks/s", [target(
            f"{by}, queue) (rate(roce_queue_ecn_marked_packets_total{{{q}}}"
            "[$__rate_interval]))", "{{interface}} q{{queue}}")], Look((0, 8, 12, 8), "pps",
            "Packets CE-marked per egress queue.")),
        series("ECN marked fraction", [target(
            f"{by}, queue) (rate(roce_queue_ecn_marked_packets_total{{{q}}}"
            f"[$__rate_interval])) / {by}, queue) "
            f"(rate(roce_queue_transmitted_packets_total{{{q}}}[$__rate_interval]))",
            "{{interface}} q{{queue}}")], Look((12, 8, 12, 8), "percentunit",
            "Marked over transmitted packets per queue: how hard DCQCN is being asked to slow.")),
        series("Transmitted by queue", [target(
            f"8 * {by}, queue) (rate(roce_queue_transmitted_bytes_total{{{q}}}"
            "[$__rate_interval]))", "{{interface}} q{{queue}}")], Look((0, 16, 12, 8), "bps",
            "Egress throughput per queue.")),
        series("Headroom (ingress) drops/s by priority", [target(
            f"{by}, priority) (rate(roce_headroom_dropped_packets_total{{{p}}}"
            "[$__rate_interval]))", "{{interface}} p{{priority}}")], Look((12, 16, 12, 8), "pps",
            "Ingress drops per priority: PFC fired too late or the headroom is too small.")),
        series("PFC watchdog: stormed queues", [target(
            f"{by}, priority) (roce_pfc_watchdog_stormed{{{p}}})",
            "{{interface}} p{{priority}}")], Look((0, 24, 12, 8), "none",
            "1 while the watchdog holds the priority's queue in the stormed state.")),
        series("PFC watchdog: storms detected and restored", [
            target(f"{by}, priority) (increase(roce_pfc_watchdog_storms_detected_total"
                   f"{{{p}}}[$__rate_interval]))", "{{interface}} p{{priority}} detected"),
            target(f"{by}, priority) (increase(roce_pfc_watchdog_storms_restored_total"
                   f"{{{p}}}[$__rate_interval]))", "{{interface}} p{{priority}} restored", "B"),
        ], Look((12, 24, 12, 8), "none",
                "Storms the watchdog detected and restored per interval.")),
        storm_panel(by, p),
        table("Intended classes", f"roce_intended_class_info{{{p}}}", Look((0, 40, 24, 8), "none",
              "From the fabric intent: every class of the interface; pfc=on must never drop.")),
        trim_panel(by, q),
    ]  # fmt: skip
    return dashboard(
        "roce-interface",
        "RoCE interface: priorities and queues",
        "One switch interface per priority and queue: PFC frames, drops, ECN marks, "
        "throughput, headroom drops and the PFC watchdog, beside the intended classes.",
        panels,
        (*PORT, "priority"),
    )


def probes() -> dict[str, Any]:
    s = sel(PROBE)
    look = functools.partial(Look, no_value=NO_PROBE)
    hosts = sel((*FLEET, "scenario"))
    panels = [
        series("Packets lost by flow", [target(
            f"sum by (scenario, src, dst) (increase(roce_probe_packets_lost_total{{{s}}}"
            "[$__rate_interval]))", "{{scenario}} {{src}}→{{dst}}")], look((0, 0, 12, 8), "none",
            "Probe packets lost per interval (PSN gaps at the receiver).")),
        series("Loss ratio", [target(
            f"sum by (scenario) (increase(roce_probe_packets_lost_total{{{s}}}[$__range])) / "
            f"sum by (scenario) (increase(roce_probe_packets_sent_total{{{s}}}[$__range]))",
            "{{scenario}}")], look((12, 0, 12, 8), "percentunit",
            "Lost over sent packets over the dashboard range, per scenario.")),
        panel("heatmap", "One-way latency", [target(
            f"sum by (le) (increase(roce_probe_latency_seconds_bucket{{{s}}}"
            "[$__rate_interval]))", "{{le}}", format="heatmap")], look((0, 8, 12, 9), "s",
            "Histogram of probe one-way latency."), calculate=False,
            yAxis={"unit": "s"}, color={"mode": "scheme", "scheme": "Oranges"}),
        series("Latency quantiles", [
            target(f"histogram_quantile(0.5, sum by (le) (rate(roce_probe_latency_seconds_bucket"
                   f"{{{s}}}[$__rate_interval])))", "p50"),
            target(f"histogram_quantile(0.99, sum by (le) (rate(roce_probe_latency_seconds_bucket"
                   f"{{{s}}}[$__rate_interval])))", "p99", "B"),
        ], look((12, 8, 12, 9), "s", "Median and 99th percentile of probe one-way latency.")),
        series("CE-marked packets and CNPs/s", [
            target(f"sum by (src, dst) (rate(roce_probe_packets_ce_marked_total{{{s}}}"
                   "[$__rate_interval]))", "CE {{src}}→{{dst}}"),
            target(f"sum by (src, dst) (rate(roce_probe_cnps_received_total{{{s}}}"
                   "[$__rate_interval]))", "CNP {{src}}→{{dst}}", "B"),
        ], look((0, 17, 12, 8), "pps", "ECN CE marks the receivers saw and CNPs the senders got.")),
        series("Paused on the wire (fraction of time) by host and priority", [target(
            f"sum by (host, priority) (rate(roce_probe_paused_seconds_total{{{hosts}}}"
            "[$__rate_interval]))", "{{host}} p{{priority}}")], look((12, 17, 12, 8), "percentunit",
            "Share of time the probe hosts were paused by PFC, per priority.")),
        series("Reordered and invalid", [
            target(f"sum by (src, dst) (increase(roce_probe_packets_reordered_total{{{s}}}"
                   "[$__rate_interval]))", "reordered {{src}}→{{dst}}"),
            target(f"sum by (host) (increase(roce_probe_invalid_frames_total{{{hosts}}}"
                   "[$__rate_interval]))", "invalid at {{host}}", "B"),
        ], look((0, 25, 12, 8), "none", "Packets out of order and frames the receiver rejected.")),
        table("Runs by verdict", "sum by (scenario, result) (increase(roce_probe_runs_total"
              f"{{{hosts}}}[$__range]))", look((12, 25, 6, 8), "none",
              "Probe runs over the dashboard range, by scenario and verdict.")),
        table("Last run (seconds ago)", "time() - roce_probe_last_run_timestamp_seconds"
              f"{{{hosts}}}", look((18, 25, 6, 8), "s", "Age of each scenario's latest result.")),
        table("Latest run: packets lost by flow", f"roce_probe_last_run_lost_packets{{{s}}}",
              look((0, 33, 24, 6), "none", "Packets the latest run of each flow lost.")),
    ]  # fmt: skip
    return dashboard(
        "roce-probes",
        "RoCE probes",
        "Wire probes (pairwise, incast, storm drills): loss, one-way latency, CE marks, CNPs "
        "and PFC pause seen on the wire.",
        panels,
        PROBE,
    )


def compliance() -> dict[str, Any]:
    d = sel(SWITCH)
    to_switch = [link("Switch ${__field.labels.device}", "roce-switch", ("device",))]
    panels = [
        stat("Devices with drift", or_zero_if_read(f"count(roce_drift_items{{{d}}} > 0)",
             f"roce_drift_items{{{d}}}"), Look((0, 0, 5, 4), "none", "Devices whose "
             "configuration differs from the plan, among those read ('not read' when none "
             "was; the table 'Switches: read, or why not' lists the others).")),
        stat("Failing checks",
             or_zero_if_read(f"count(roce_check_result{{{sel(SWITCH, FAILED)}}} == 1)",
                             f"roce_check_result{{{d}}}"),
             Look((5, 0, 5, 4), "none",
             "Checks whose latest result is fail or error.", no_value=NO_CHECKS)),
        stat("Unverified checks",
             or_zero_if_read(f"count(roce_check_result{{{sel(SWITCH, UNVERIFIED)}}} == 1)",
                             f"roce_check_result{{{d}}}"),
             Look((10, 0, 5, 4), "none", "Checks that could not judge their device: it was "
             "not read (the report's message says why). Neither a pass nor a failure.",
             no_value=NO_CHECKS)),
        stat("Checks last fed (seconds ago)",
             f"max(time() - roce_check_last_run_timestamp_seconds{{{sel(FLEET)}}})",
             Look((15, 0, 5, 4), "s", "Age of the latest check results the exporter was fed.",
                  no_value=NO_CHECKS), red_above=None),
        stat("Oldest successful poll (seconds ago)",
             f"max(time() - roce_last_successful_poll_timestamp_seconds{{{d}}})",
             Look((20, 0, 4, 4), "s", "Age of the stalest switch reading ('not read' when no "
             "switch was ever read)."), red_above=None),
        panel("bargauge", "Drift items by device", [target(f"roce_drift_items{{{d}}}",
              "{{device}}", instant=True)], Look((0, 4, 12, 8), "none",
              "Settings that differ from the plan; `roce-agent drift FABRIC` lists them.",
              to_switch), orientation="horizontal", displayMode="basic",
              reduceOptions={"calcs": ["lastNotNull"], "fields": "", "values": False}),
        series("Drift over time", [target(f"roce_drift_items{{{d}}}", "{{device}}")],
               Look((12, 4, 12, 8), "none", "Drift items per device over time.", to_switch)),
        table("Check results", f"roce_check_result{{{d}}} == 1", Look((0, 12, 16, 10), "none",
              "The latest result of every check on every device (unverified: the device was "
              "not read).", no_value=NO_CHECKS)),
        table("Lossless classes per device (intent)",
              f"count by (fabric, device) ({lossless(SWITCH)})", Look((16, 12, 8, 10), "none",
              "How many (interface, priority) classes the intent makes lossless per device.")),
        table("Switches: read, or why not", read_states(SWITCH), Look((0, 22, 24, 6), "none",
              "Whether each switch was read (state up), or why not (not_polled_yet, timeout, "
              "auth, connect, parse, other): a switch not read has no drift and unverified "
              "checks.", to_switch)),
    ]  # fmt: skip
    return dashboard(
        "roce-compliance",
        "RoCE compliance: drift and checks",
        "Is the fabric configured as intended? Drift per device and validation check results.",
        panels,
        SWITCH,
    )


def host_nic() -> dict[str, Any]:
    n = sel(NIC[:-1])
    ports = sel((*FLEET, "nic_interface"))
    by = "sum by (instance, rdma_device) "
    panels = [
        series("CNPs sent (notification point) and handled (reaction point)/s", [
            target(f"{by}(rate(roce_nic_np_cnp_sent_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} sent"),
            target(f"{by}(rate(roce_nic_rp_cnp_handled_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} handled", "B"),
            target(f"{by}(rate(roce_nic_rp_cnp_ignored_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} ignored", "C"),
        ], Look((0, 0, 12, 8), "pps", "DCQCN at the host: CNPs sent as notification point, handled "
           "and ignored as reaction point. mlx5 only: a NIC without these counters (rxe, "
           "dcqcn=no in the ports table) has no line here, which means it cannot tell, not 0.")),
        series("ECN-marked RoCE packets received/s", [target(
            f"{by}(rate(roce_nic_np_ecn_marked_roce_packets_total{{{n}}}[$__rate_interval]))",
            "{{instance}} {{rdma_device}}")], Look((12, 0, 12, 8), "pps",
            "The switches' ECN marks reaching this host (mlx5 only; rxe does not count them).")),
        series("Out of sequence and NAK sequence errors/s (mlx5)", [
            target(f"{by}(rate(roce_nic_out_of_sequence_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} out of sequence"),
            target(f"{by}(rate(roce_nic_packet_seq_err_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} seq err", "B"),
        ], Look((0, 8, 12, 8), "pps", "Signs of loss in the fabric as an mlx5 NIC sees it: "
           "packets that arrived past a PSN gap, and sequence NAKs from the peer.")),
        series("Loss signs/s (rxe): sequence NAKs, out-of-sequence requests, retries exhausted", [
            target(f"{by}(rate(roce_nic_rcvd_seq_err_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} seq NAK received"),
            target(f"{by}(rate(roce_nic_out_of_seq_request_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} out of sequence", "B"),
            target(f"{by}(rate(roce_nic_retry_exceeded_err_total{{{n}}}[$__rate_interval]))",
                   "{{instance}} {{rdma_device}} retries exhausted", "C"),
        ], Look((12, 8, 12, 8), "pps", "Signs of loss in the fabric as Soft-RoCE (rxe) sees it: "
           "sequence NAKs received (as mlx5 packet_seq_err), requests past a PSN gap (as mlx5 "
           "out_of_sequence), and work requests that failed when retransmissions ran out.")),
        series("PFC pause frames/s by priority", [target(
            "sum by (instance, interface, priority, direction) (rate(roce_nic_pause_frames_total"
            f"{{{ports}}}[$__rate_interval]))", "{{instance}} {{interface}} p{{priority}} "
            "{{direction}}")], Look((0, 16, 12, 8), "pps",
            "Pause frames the host port received (rx) and sent (tx), per priority. Only ports "
            "whose driver lists per-priority pause (mlx5); virtio_net under rxe has none.")),
        series("Paused (fraction of time) by priority", [target(
            "sum by (instance, interface, priority, direction) "
            f"(rate(roce_nic_pause_duration_seconds_total{{{ports}}}[$__rate_interval]))",
            "{{instance}} {{interface}} p{{priority}} {{direction}}")], Look((12, 16, 12, 8),
            "percentunit", "Share of time the port was paused (rx) or pausing its peer (tx).")),
        table("RDMA ports and their DCQCN counters", f"roce_nic_port_info{{{n}}}",
              Look((0, 24, 12, 8), "none",
              "Every RDMA port read: dcqcn=yes when it provides np_cnp_sent and rp_cnp_handled "
              "(mlx5), no when it cannot show DCQCN at all (rxe).")),
        series("Counter read errors", [target(
            "sum by (instance, source) (increase(roce_nic_collect_errors_total"
            f"{{{sel(FLEET)}}}[$__rate_interval]))", "{{instance}} {{source}}")],
            Look((12, 24, 12, 8), "none",
                 "Failed reads of the NIC counters per interval, by source.")),
    ]  # fmt: skip
    return dashboard(
        "roce-host-nic",
        "RoCE host NICs",
        "RDMA NIC counters of hosts running the exporter with --host-nic: CNPs, ECN marks, "
        "sequence errors and per-priority PFC pause (hw_counters and ethtool -S). mlx5 and "
        "Soft-RoCE (rxe) provide different counters; a series a NIC lacks is absent, not 0.",
        panels,
        NIC,
    )


DASHBOARDS = {
    "roce-fabric-overview.json": overview,
    "roce-switch.json": switch,
    "roce-interface.json": interface,
    "roce-probes.json": probes,
    "roce-compliance.json": compliance,
    "roce-host-nic.json": host_nic,
}


def render_all() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in DASHBOARDS.items()}


def main(directory: Path = GRAFANA_DIR) -> None:
    for name, text in render_all().items():
        (directory / name).write_text(text, encoding="utf-8")
        sys.stderr.write(f"wrote {directory / name}\n")


if __name__ == "__main__":
    main()

"""The Grafana dashboards, as code: ``python -m exporters.dashboards`` writes exporters/grafana/.

Provisioning-ready JSON: no dashboard ``id``, a stable ``uid``, no ``__inputs``; the Prometheus
data source is the template variable ``datasource`` (type datasource, query prometheus), so the
same files work on any Grafana with any Prometheus data source name. Panel queries use only
metrics from :mod:`exporters.metrics` (a unit test checks that, and a lab test runs every
query against a real Prometheus). A unit test fails when the files differ from this module.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

GRAFANA_DIR = Path(__file__).resolve().parent / "grafana"
DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39
LOSSLESS = 'roce_intended_class_info{pfc="on"}'
IFSEL = 'device=~"$device", interface=~"$interface"'

Panel = dict[str, Any]


def target(expr: str, legend: str = "", ref: str = "A", **extra: Any) -> dict[str, Any]:
    out = {"refId": ref, "expr": expr, "legendFormat": legend or "__auto", "datasource": DS}
    out.update(extra)
    return out


def panel(
    kind: str,
    title: str,
    targets: list[dict[str, Any]],
    grid: tuple[int, int, int, int],
    unit: str = "short",
    description: str = "",
    **options: Any,
) -> Panel:
    x, y, w, h = grid
    body: Panel = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": options,
    }
    return body


def stat(title: str, expr: str, grid: tuple[int, int, int, int], unit: str = "short",
         description: str = "", red_above: float | None = 0) -> Panel:  # fmt: skip
    body = panel("stat", title, [target(expr, title)], grid, unit, description,
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


def series(title: str, targets: list[dict[str, Any]], grid: tuple[int, int, int, int],
           unit: str = "short", description: str = "") -> Panel:  # fmt: skip
    return panel("timeseries", title, targets, grid, unit, description,
                 legend={"displayMode": "table", "placement": "bottom", "calcs": ["max", "last"]},
                 tooltip={"mode": "multi", "sort": "desc"})  # fmt: skip


def table(title: str, expr: str, grid: tuple[int, int, int, int], description: str = "") -> Panel:
    return panel("table", title, [target(expr, "", format="table", instant=True)], grid,
                 description=description, showHeader=True)  # fmt: skip


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


def query_variable(name: str, query: str, label: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-values"},
        "refresh": 2,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": 0,
        "options": [],
    }


def dashboard(uid: str, title: str, description: str, panels: list[Panel],
              variables: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    for number, item in enumerate(panels, start=1):
        item["id"] = number
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["roce", "lossless", "roce-fabric-agent"],
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [datasource_variable(), *variables]},
        "annotations": {"list": []},
        "links": [
            {
                "type": "dashboards",
                "tags": ["roce-fabric-agent"],
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
    lossless_drops = (
        f"increase(roce_queue_dropped_packets_total[$__range]) and on (device, interface, queue) "
        f"{LOSSLESS}"
    )
    panels = [
        stat("Devices down", "count(roce_device_up == 0) or vector(0)", (0, 0, 3, 4),
             description="Switches the exporter could not poll within its timeout."),
        stat("Lossless drops", f"sum({lossless_drops}) or vector(0)", (3, 0, 3, 4),
             description="Packets dropped on lossless (PFC) queues over the dashboard range. "
                         "Must be 0."),
        stat("Headroom drops", "sum(increase(roce_headroom_dropped_packets_total[$__range]) and "
             f"on (device, interface, priority) {LOSSLESS}) or vector(0)", (6, 0, 3, 4),
             description="Ingress drops of lossless priorities: PFC headroom too small."),
        stat("PFC storms now", "sum(roce_pfc_watchdog_stormed)", (9, 0, 3, 4),
             description="Queues the PFC watchdog holds in the stormed state."),
        stat("Pause frames/s", 'sum(rate(roce_pfc_frames_total{direction="tx"}[$__rate_interval]))',
             (12, 0, 3, 4), "pps", "PFC pause frames the switches send.", red_above=None),
        stat("ECN marks/s", "sum(rate(roce_queue_ecn_marked_packets_total[$__rate_interval]))",
             (15, 0, 3, 4), "pps", "Packets CE-marked by the switches.", red_above=None),
        stat("Drift items", "sum(roce_drift_items)", (18, 0, 3, 4),
             description="Settings that differ from the fabric intent (`roce-agent drift`)."),
        stat("Probe loss (latest runs)", "sum(roce_probe_last_run_lost_packets) or vector(0)",
             (21, 0, 3, 4), description="Packets the latest run of each probe flow lost."),
        series("Lossless drops/s by device", [target(
            f"sum by (device) (rate(roce_queue_dropped_packets_total[$__rate_interval]) and on "
            f"(device, interface, queue) {LOSSLESS})", "{{device}}")], (0, 4, 12, 8), "pps"),
        series("PFC pause frames/s by device", [target(
            "sum by (device, direction) (rate(roce_pfc_frames_total[$__rate_interval]))",
            "{{device}} {{direction}}")], (12, 4, 12, 8), "pps"),
        series("ECN marks/s by device", [target(
            "sum by (device) (rate(roce_queue_ecn_marked_packets_total[$__rate_interval]))",
            "{{device}}")], (0, 12, 12, 8), "pps"),
        series("Probe loss ratio by scenario", [target(
            "sum by (scenario) (increase(roce_probe_packets_lost_total[$__rate_interval])) / "
            "sum by (scenario) (increase(roce_probe_packets_sent_total[$__rate_interval]))",
            "{{scenario}}")], (12, 12, 12, 8), "percentunit"),
        series("Devices up", [target("roce_device_up", "{{device}}")], (0, 20, 8, 7)),
        series("Poll duration", [target("roce_poll_duration_seconds", "{{device}}")],
               (8, 20, 8, 7), "s"),
        series("Poll errors by reason", [target(
            "sum by (device, reason) (increase(roce_poll_errors_total[$__rate_interval]))",
            "{{device}} {{reason}}")], (16, 20, 8, 7)),
    ]  # fmt: skip
    return dashboard(
        "roce-fabric-overview",
        "RoCE fabric overview",
        "Health of the lossless fabric at a glance: drops on lossless classes, PFC storms, "
        "pause and ECN rates, drift, probe loss and the exporter's own view of the devices.",
        panels,
        [],
    )


def switch() -> dict[str, Any]:
    panels = [
        series("PFC frames/s by interface and priority", [target(
            f"sum by (interface, priority, direction) (rate(roce_pfc_frames_total{{{IFSEL}}}"
            "[$__rate_interval]))", "{{interface}} p{{priority}} {{direction}}")],
            (0, 0, 12, 8), "pps"),
        series("Queue drops/s", [target(
            f"sum by (interface, queue) (rate(roce_queue_dropped_packets_total{{{IFSEL}}}"
            "[$__rate_interval]))", "{{interface}} q{{queue}}")], (12, 0, 12, 8), "pps",
            "Egress queue drops; any on a lossless queue is a fault."),
        series("ECN marks/s", [target(
            f"sum by (interface, queue) (rate(roce_queue_ecn_marked_packets_total{{{IFSEL}}}"
            "[$__rate_interval]))", "{{interface}} q{{queue}}")], (0, 8, 12, 8), "pps"),
        series("ECN marked fraction", [target(
            f"sum by (interface, queue) (rate(roce_queue_ecn_marked_packets_total{{{IFSEL}}}"
            "[$__rate_interval])) / sum by (interface, queue) "
            f"(rate(roce_queue_transmitted_packets_total{{{IFSEL}}}[$__rate_interval]))",
            "{{interface}} q{{queue}}")], (12, 8, 12, 8), "percentunit"),
        series("Transmitted by queue", [target(
            f"8 * sum by (interface, queue) (rate(roce_queue_transmitted_bytes_total{{{IFSEL}}}"
            "[$__rate_interval]))", "{{interface}} q{{queue}}")], (0, 16, 12, 8), "bps"),
        series("Headroom (ingress) drops/s by priority", [target(
            f"sum by (interface, priority) (rate(roce_headroom_dropped_packets_total{{{IFSEL}}}"
            "[$__rate_interval]))", "{{interface}} p{{priority}}")], (12, 16, 12, 8), "pps"),
        series("PFC watchdog: stormed queues", [target(
            f"sum by (interface, priority) (roce_pfc_watchdog_stormed{{{IFSEL}}})",
            "{{interface}} p{{priority}}")], (0, 24, 12, 8)),
        series("PFC watchdog: storms detected and restored", [
            target(f"sum by (interface) (increase(roce_pfc_watchdog_storms_detected_total"
                   f"{{{IFSEL}}}[$__rate_interval]))", "{{interface}} detected"),
            target(f"sum by (interface) (increase(roce_pfc_watchdog_storms_restored_total"
                   f"{{{IFSEL}}}[$__rate_interval]))", "{{interface}} restored", "B"),
        ], (12, 24, 12, 8)),
        table("Intended lossless classes", f'roce_intended_class_info{{{IFSEL}, pfc="on"}}',
              (0, 32, 24, 8), "From the fabric intent: the classes that must never drop."),
    ]  # fmt: skip
    return dashboard(
        "roce-switch",
        "RoCE switch: PFC, ECN and drops",
        "Per switch, interface, priority and queue: PFC frames, ECN marks, drops, headroom "
        "drops and the PFC watchdog.",
        panels,
        [
            query_variable("device", "label_values(roce_device_up, device)", "Device"),
            query_variable(
                "interface",
                'label_values(roce_pfc_frames_total{device=~"$device"}, interface)',
                "Interface",
            ),
        ],
    )


def probes() -> dict[str, Any]:
    sel = 'scenario=~"$scenario", src=~"$src", dst=~"$dst"'
    panels = [
        series("Packets lost by flow", [target(
            f"sum by (scenario, src, dst) (increase(roce_probe_packets_lost_total{{{sel}}}"
            "[$__rate_interval]))", "{{scenario}} {{src}}→{{dst}}")], (0, 0, 12, 8)),
        series("Loss ratio", [target(
            f"sum by (scenario) (increase(roce_probe_packets_lost_total{{{sel}}}[$__range])) / "
            f"sum by (scenario) (increase(roce_probe_packets_sent_total{{{sel}}}[$__range]))",
            "{{scenario}}")], (12, 0, 12, 8), "percentunit"),
        panel("heatmap", "One-way latency", [target(
            f"sum by (le) (increase(roce_probe_latency_seconds_bucket{{{sel}}}"
            "[$__rate_interval]))", "{{le}}", format="heatmap")], (0, 8, 12, 9), "s",
            "Histogram of probe one-way latency.", calculate=False,
            yAxis={"unit": "s"}, color={"mode": "scheme", "scheme": "Oranges"}),
        series("Latency quantiles", [
            target(f"histogram_quantile(0.5, sum by (le) (rate(roce_probe_latency_seconds_bucket"
                   f"{{{sel}}}[$__rate_interval])))", "p50"),
            target(f"histogram_quantile(0.99, sum by (le) (rate(roce_probe_latency_seconds_bucket"
                   f"{{{sel}}}[$__rate_interval])))", "p99", "B"),
        ], (12, 8, 12, 9), "s"),
        series("CE-marked packets and CNPs/s", [
            target(f"sum by (src, dst) (rate(roce_probe_packets_ce_marked_total{{{sel}}}"
                   "[$__rate_interval]))", "CE {{src}}→{{dst}}"),
            target(f"sum by (src, dst) (rate(roce_probe_cnps_received_total{{{sel}}}"
                   "[$__rate_interval]))", "CNP {{src}}→{{dst}}", "B"),
        ], (0, 17, 12, 8), "pps"),
        series("Paused on the wire (fraction of time) by host and priority", [target(
            'sum by (host, priority) (rate(roce_probe_paused_seconds_total{scenario=~"$scenario"}'
            "[$__rate_interval]))", "{{host}} p{{priority}}")], (12, 17, 12, 8), "percentunit"),
        series("Reordered and invalid", [
            target(f"sum by (src, dst) (increase(roce_probe_packets_reordered_total{{{sel}}}"
                   "[$__rate_interval]))", "reordered {{src}}→{{dst}}"),
            target('sum by (host) (increase(roce_probe_invalid_frames_total{scenario=~'
                   '"$scenario"}[$__rate_interval]))', "invalid at {{host}}", "B"),
        ], (0, 25, 12, 8)),
        table("Latest run: packets lost by flow", "roce_probe_last_run_lost_packets"
              f"{{{sel}}}", (0, 33, 24, 6)),
        table("Runs by verdict", 'sum by (scenario, result) (roce_probe_runs_total{scenario=~'
              '"$scenario"})', (12, 25, 6, 8)),
        table("Last run (seconds ago)", 'time() - roce_probe_last_run_timestamp_seconds'
              '{scenario=~"$scenario"}', (18, 25, 6, 8)),
    ]  # fmt: skip
    return dashboard(
        "roce-probes",
        "RoCE probes",
        "Wire probes (pairwise, incast, storm drills): loss, one-way latency, CE marks, CNPs "
        "and PFC pause seen on the wire.",
        panels,
        [
            query_variable(
                "scenario", "label_values(roce_probe_packets_received_total, scenario)", "Scenario"
            ),
            query_variable(
                "src",
                'label_values(roce_probe_packets_received_total{scenario=~"$scenario"}, src)',
                "From",
            ),
            query_variable(
                "dst",
                'label_values(roce_probe_packets_received_total{scenario=~"$scenario"}, dst)',
                "To",
            ),
        ],
    )


def compliance() -> dict[str, Any]:
    panels = [
        stat("Devices with drift", "count(roce_drift_items > 0) or vector(0)", (0, 0, 6, 4)),
        stat("Failing checks", 'count(roce_check_result{result=~"fail|error"} == 1) or vector(0)',
             (6, 0, 6, 4)),
        stat("Checks last fed (seconds ago)", "time() - roce_check_last_run_timestamp_seconds",
             (12, 0, 6, 4), "s", red_above=None),
        stat("Oldest successful poll (seconds ago)",
             "max(time() - roce_last_successful_poll_timestamp_seconds)", (18, 0, 6, 4), "s",
             red_above=None),
        panel("bargauge", "Drift items by device", [target("roce_drift_items", "{{device}}",
              instant=True)], (0, 4, 12, 8), "short",
              "Settings that differ from the plan; `roce-agent drift FABRIC` lists them.",
              orientation="horizontal", displayMode="basic",
              reduceOptions={"calcs": ["lastNotNull"], "fields": "", "values": False}),
        series("Drift over time", [target("roce_drift_items", "{{device}}")], (12, 4, 12, 8)),
        table("Check results", "roce_check_result == 1", (0, 12, 16, 10),
              "The latest result of every check on every device."),
        table("Lossless classes per device (intent)",
              f"count by (device) ({LOSSLESS})", (16, 12, 8, 10)),
    ]  # fmt: skip
    return dashboard(
        "roce-compliance",
        "RoCE compliance: drift and checks",
        "Is the fabric configured as intended? Drift per device and validation check results.",
        panels,
        [],
    )


def host_nic() -> dict[str, Any]:
    hw = 'instance=~"$instance"'
    panels = [
        series("CNPs sent (notification point) and handled (reaction point)/s", [
            target(f"sum by (instance, rdma_device) (rate(roce_nic_np_cnp_sent_total{{{hw}}}"
                   "[$__rate_interval]))", "{{instance}} {{rdma_device}} sent"),
            target(f"sum by (instance, rdma_device) (rate(roce_nic_rp_cnp_handled_total{{{hw}}}"
                   "[$__rate_interval]))", "{{instance}} {{rdma_device}} handled", "B"),
            target(f"sum by (instance, rdma_device) (rate(roce_nic_rp_cnp_ignored_total{{{hw}}}"
                   "[$__rate_interval]))", "{{instance}} {{rdma_device}} ignored", "C"),
        ], (0, 0, 12, 8), "pps"),
        series("ECN-marked RoCE packets received/s", [target(
            f"sum by (instance, rdma_device) (rate(roce_nic_np_ecn_marked_roce_packets_total"
            f"{{{hw}}}[$__rate_interval]))", "{{instance}} {{rdma_device}}")],
            (12, 0, 12, 8), "pps"),
        series("Out of sequence and NAK sequence errors/s", [
            target(f"sum by (instance, rdma_device) (rate(roce_nic_out_of_sequence_total{{{hw}}}"
                   "[$__rate_interval]))", "{{instance}} {{rdma_device}} out of sequence"),
            target(f"sum by (instance, rdma_device) (rate(roce_nic_packet_seq_err_total{{{hw}}}"
                   "[$__rate_interval]))", "{{instance}} {{rdma_device}} seq err", "B"),
        ], (0, 8, 12, 8), "pps"),
        series("PFC pause frames/s by priority", [target(
            f"sum by (instance, interface, priority, direction) (rate(roce_nic_pause_frames_total"
            f"{{{hw}}}[$__rate_interval]))", "{{instance}} {{interface}} p{{priority}} "
            "{{direction}}")], (12, 8, 12, 8), "pps"),
        series("Paused (fraction of time) by priority", [target(
            "sum by (instance, interface, priority, direction) "
            f"(rate(roce_nic_pause_duration_seconds_total{{{hw}}}[$__rate_interval]))",
            "{{instance}} {{interface}} p{{priority}} {{direction}}")], (0, 16, 12, 8),
            "percentunit"),
        series("Counter read errors", [target(
            f"sum by (instance, source) (increase(roce_nic_collect_errors_total{{{hw}}}"
            "[$__rate_interval]))", "{{instance}} {{source}}")], (12, 16, 12, 8)),
    ]  # fmt: skip
    return dashboard(
        "roce-host-nic",
        "RoCE host NICs",
        "RDMA NIC counters of hosts running the exporter with --host-nic: CNPs, ECN marks, "
        "sequence errors and per-priority PFC pause (mlx5 hw_counters and ethtool -S).",
        panels,
        [
            query_variable(
                "instance", "label_values(roce_nic_collect_errors_total, instance)", "Host"
            )
        ],
    )


DASHBOARDS = {
    "roce-fabric-overview.json": overview,
    "roce-switch.json": switch,
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

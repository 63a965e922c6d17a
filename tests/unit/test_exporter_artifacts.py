"""What the project ships besides code: Grafana dashboards, provisioning, alert rules.

The lab test runs every query against a real Prometheus; these check the files themselves and,
with ``promtool test rules``, that each alert fires on the series it is meant for and not on
the 0 -> running-total step of an exporter start.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporters import dashboards, metrics

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "exporters" / "grafana"
RULES = REPO / "exporters" / "alerts" / "roce.rules.yml"
PROMQL_WORDS = {
    "sum",
    "by",
    "on",
    "and",
    "or",
    "unless",
    "rate",
    "increase",
    "count",
    "max",
    "min",
    "min_over_time",
    "max_over_time",
    "histogram_quantile",
    "time",
    "vector",
    "le",
    "without",
    "group_left",
    "group_right",
    "bool",
    "avg",
    "label_values",
    "ignoring",
    "offset",
}
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool")


def panels() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(GRAFANA.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            found.append((path.name, panel))
    return found


def metric_names(expr: str) -> set[str]:
    """Identifiers in a PromQL expression that are not functions, keywords or label names."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    without_groupings = re.sub(
        r"\b(by|on|without|ignoring|group_left)\s*\([^)]*\)", "", without_labels
    )
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_groupings)
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_ranges))
    return {n for n in names if n not in PROMQL_WORDS and not n.startswith("__")}


def test_dashboard_files_are_generated_from_code() -> None:
    for name, text in dashboards.render_all().items():
        assert (GRAFANA / name).read_text() == text, (
            f"{name} is stale: run python -m exporters.dashboards"
        )


def test_dashboards_are_provisioning_ready() -> None:
    uids = set()
    for path in sorted(GRAFANA.glob("*.json")):
        board = json.loads(path.read_text())
        assert "id" not in board and "__inputs" not in board, path.name
        assert re.fullmatch(r"roce-[a-z-]+", board["uid"]), path.name
        uids.add(board["uid"])
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        for variable in variables.values():
            if variable["type"] == "query":
                assert variable["definition"].startswith("label_values(")
                assert variable["datasource"]["uid"] == "${datasource}"
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]
    assert len(uids) == len(list(GRAFANA.glob("*.json")))


def test_every_query_uses_only_exported_metrics() -> None:
    known = metrics.exposed_names()
    for name, panel in panels():
        for target in panel["targets"]:
            unknown = metric_names(target["expr"]) - known
            assert not unknown, f"{name} / {panel['title']}: {unknown}"
    for path in sorted(GRAFANA.glob("*.json")):
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] == "query":
                inner = variable["definition"][len("label_values(") : -1]
                assert metric_names(inner.rsplit(",", 1)[0]) <= known, variable["name"]


def test_overview_covers_fabric_health_at_a_glance() -> None:
    board = json.loads((GRAFANA / "roce-fabric-overview.json").read_text())
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for needle in (
        "roce_queue_dropped_packets_total",
        "roce_pfc_watchdog_stormed",
        "roce_pfc_frames_total",
        "roce_queue_ecn_marked_packets_total",
        "roce_drift_items",
        "roce_probe_packets_lost_total",
        "roce_device_up",
    ):
        assert needle in exprs, needle


def test_provisioning_examples_parse() -> None:
    datasource = yaml.safe_load(
        (GRAFANA / "provisioning/datasources/roce-prometheus.yml").read_text()
    )
    assert datasource["datasources"][0]["type"] == "prometheus"
    provider = yaml.safe_load((GRAFANA / "provisioning/dashboards/roce.yml").read_text())
    assert provider["providers"][0]["type"] == "file"


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(RULES.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def test_every_alert_has_for_severity_and_text() -> None:
    known = metrics.exposed_names()
    names = set()
    for rule in rules():
        assert "alert" in rule and "for" in rule, rule
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert metric_names(rule["expr"]) <= known, rule["alert"]
        names.add(rule["alert"])
    assert {
        "RoceLosslessQueueDrops",
        "RocePfcWatchdogStormed",
        "RocePauseWithoutEcn",
        "RoceConfigDrift",
        "RoceConfigSessionPending",
        "RoceDeviceDown",
        "RoceProbeLoss",
    } <= names


@needs_promtool
def test_promtool_check_rules() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


LEAF1 = 'device="leaf1",interface="Ethernet1"'
RULE_TESTS = {
    "evaluation_interval": "1m",
    "tests": [
        {
            # Exporter starts at 0m (device down, counters zero-filled); the first poll at 1m
            # brings the device's running total (500 drops from before); real drops at 20m.
            "interval": "1m",
            "input_series": [
                {"series": 'roce_device_up{device="leaf1"}', "values": "0 1x40"},
                {
                    "series": f'roce_queue_dropped_packets_total{{{LEAF1},queue="3"}}',
                    "values": "0 500x18 520x21",
                },
                {
                    "series": f'roce_queue_dropped_packets_total{{{LEAF1},queue="0"}}',
                    "values": "0 900x18 990x21",
                },
                {
                    "series": f'roce_intended_class_info{{{LEAF1},priority="3",queue="3",'
                    'pfc="on",ecn="on"}',
                    "values": "1x40",
                },
                {
                    "series": f'roce_intended_class_info{{{LEAF1},priority="0",queue="0",'
                    'pfc="off",ecn="off"}',
                    "values": "1x40",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "RoceLosslessQueueDrops", "exp_alerts": []},
                {
                    "eval_time": "23m",
                    "alertname": "RoceLosslessQueueDrops",
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "critical",
                                "device": "leaf1",
                                "interface": "Ethernet1",
                                "queue": "3",
                            }
                        }
                    ],
                },
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                {"series": 'roce_device_up{device="leaf1"}', "values": "1x30"},
                {"series": 'roce_device_up{device="leaf2"}', "values": "1x2 0x28"},
                {
                    "series": f'roce_pfc_frames_total{{{LEAF1},priority="3",direction="tx"}}',
                    "values": "0+600x30",
                },
                {
                    "series": f'roce_queue_ecn_marked_packets_total{{{LEAF1},queue="3"}}',
                    "values": "0x30",
                },
                {
                    "series": f'roce_intended_class_info{{{LEAF1},priority="3",queue="3",'
                    'pfc="on",ecn="on"}',
                    "values": "1x30",
                },
                {"series": 'roce_drift_items{device="leaf1"}', "values": "2x30"},
                {
                    "series": 'roce_pfc_watchdog_stormed{device="leaf1",interface="Ethernet1",'
                    'priority="3"}',
                    "values": "0x5 1x25",
                },
                {
                    "series": 'roce_probe_last_run_lost_packets{scenario="incast",src="h1",'
                    'dst="h3"}',
                    "values": "0x10 7x20",
                },
                {
                    "series": 'roce_check_result{check="RC001",device="leaf1",result="fail"}',
                    "values": "1x30",
                },
                {  # leaf2's session lingers; spine1's is confirmed within minutes
                    "series": 'roce_config_sessions_pending{device="leaf2"}',
                    "values": "1x30",
                },
                {
                    "series": 'roce_config_sessions_pending{device="spine1"}',
                    "values": "1x5 0x25",
                },
            ],
            "alert_rule_test": [
                {
                    "eval_time": "20m",
                    "alertname": "RocePauseWithoutEcn",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "device": "leaf1"}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "RoceConfigDrift",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "device": "leaf1"}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "RoceConfigSessionPending",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "device": "leaf2"}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "RoceDeviceDown",
                    "exp_alerts": [{"exp_labels": {"severity": "critical", "device": "leaf2"}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "RocePfcWatchdogStormed",
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "critical",
                                "device": "leaf1",
                                "interface": "Ethernet1",
                                "priority": "3",
                            }
                        }
                    ],
                },
                {
                    "eval_time": "12m",
                    "alertname": "RoceProbeLoss",
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "critical",
                                "scenario": "incast",
                                "src": "h1",
                                "dst": "h3",
                            }
                        }
                    ],
                },
                {
                    "eval_time": "20m",
                    "alertname": "RoceCheckFailed",
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "warning",
                                "check": "RC001",
                                "device": "leaf1",
                                "result": "fail",
                            }
                        }
                    ],
                },
            ],
        },
    ],
}


@needs_promtool
def test_promtool_rule_unit_tests(tmp_path: Path) -> None:
    """Each alert fires on its condition; the guard ignores the exporter-start step.

    promtool compares annotations too; the copy drops them (their text is checked above) so
    the test is about expressions, ``for:`` and labels."""
    data = yaml.safe_load(RULES.read_text())
    for group in data["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    copy = tmp_path / "roce.rules.yml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    suite = {"rule_files": [str(copy)], **RULE_TESTS}
    path = tmp_path / "roce.rules.test.yml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_check_config_on_the_shipped_example() -> None:
    """The example scrape config, and through its rule_files the shipped rules."""
    config = REPO / "exporters" / "prometheus" / "prometheus.yml"
    done = subprocess.run(
        ["promtool", "check", "config", str(config)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout + done.stderr

"""What the project ships besides code: Grafana dashboards, provisioning, alert rules.

The lab test runs every query against a real Prometheus; these check the files themselves and,
with ``promtool test rules`` (cases in exporters/alerts/tests/), that each alert fires on its
condition, stays silent on exporter start, a lossy class and the stale values of a down device,
and still fires on what built up during an outage; mutants of the rules prove the cases can fail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporters import alerts, dashboards, metrics

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "exporters" / "grafana"
RULES = REPO / "exporters" / "alerts" / "roce.rules.yml"
RULE_TESTS = REPO / "exporters" / "alerts" / "tests"
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
    "absent",
    "sort_desc",
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


def rules(path: Path = RULES) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, - for spaces."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def runbook_anchors() -> set[str]:
    """The anchors of docs/runbook.md's sections (mkdocs' toc slugs them as GitHub does)."""
    runbook = (REPO / "docs" / "runbook.md").read_text()
    return {github_anchor(h) for h in re.findall(r"^## (.+)$", runbook, re.MULTILINE)}


def test_shipped_rules_are_generated_from_the_template() -> None:
    assert RULES.read_text() == alerts.render(), "stale: run python -m exporters.alerts"
    assert alerts.DEFAULT_SELECTOR in RULES.read_text()


def test_every_alert_has_for_severity_text_and_a_runbook() -> None:
    known = metrics.exposed_names() | {"up"}  # `up`: Prometheus' own series for a target
    anchors = runbook_anchors()
    names = set()
    for rule in rules():
        assert "alert" in rule and "for" in rule, rule
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert metric_names(rule["expr"]) <= known, rule["alert"]
        url = rule["annotations"]["runbook_url"]
        assert url == f"{alerts.DEFAULT_RUNBOOK_BASE}#{github_anchor(rule['alert'])}", url
        assert url.split("#", 1)[1] in anchors, f"docs/runbook.md has no ## {rule['alert']}"
        names.add(rule["alert"])
    assert {
        "RoceLosslessQueueDrops",
        "RocePfcWatchdogStormed",
        "RocePauseWithoutEcn",
        "RoceConfigDrift",
        "RoceConfigSessionPending",
        "RoceDeviceDown",
        "RoceProbeLoss",
        "RoceExporterDown",
        "RoceExporterAbsent",
    } <= names


# A metric name, then its optional {matchers}: every place an expression reads series.
VECTOR_SELECTOR = re.compile(r"\b(roce_[a-z_]+|up)\b(\{[^}]*\})?")


@pytest.mark.parametrize(
    "selector",
    ['job="roce-agent"', 'job=~"roce-.*", env="prod"', 'cluster!="lab",job="a\\"b"'],
)
def test_a_custom_selector_lands_in_every_expression_reading_exporter_series(
    tmp_path: Path, selector: str
) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(alerts.render(selector, "https://docs.example/roce/runbook/"))
    reads = 0
    for rule in rules(path):
        for match in VECTOR_SELECTOR.finditer(rule["expr"]):
            reads += 1
            matchers = match.group(2) or ""
            assert matchers.startswith("{" + selector), (rule["alert"], match.group(0))
        assert alerts.DEFAULT_SELECTOR not in rule["expr"], rule["alert"]
        assert rule["annotations"]["runbook_url"].startswith("https://docs.example/roce/runbook/#")
    body = alerts.TEMPLATE.read_text().split("\ngroups:\n", 1)[1]
    assert reads == body.count(alerts.SELECTOR_MARK)
    if shutil.which("promtool"):
        done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        ("", "empty: would read every job's series"),
        ('job="a', "unterminated string"),
        ("job=roce", "value not quoted"),
        ('{job="a"}', "braces belong to the template"),
        ('job="a",', "trailing comma"),
        ('job="a"} or vector(1) or x{a="b"', "an expression smuggled in"),
        ('job=="a"', "no such operator"),
    ],
)
def test_a_bad_selector_exits_2_naming_the_option(tmp_path: Path, selector: str, why: str) -> None:
    out = tmp_path / "rules.yml"
    done = subprocess.run(
        [sys.executable, "-m", "exporters.alerts", "--selector", selector, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2, (why, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --selector: Expected:"), done.stderr
    assert repr(selector) in lines[0] and "Traceback" not in done.stderr
    assert not out.exists(), why


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--runbook-base", "https://x/runbook/#top"], "error: --runbook-base: Expected:"),
        (["--runbook-base", "a b"], "error: --runbook-base: Expected:"),
        (["-o", "/nonexistent-dir/roce.rules.yml"], "error: --output /nonexistent-dir/"),
    ],
)
def test_other_bad_generator_options_exit_2(args: list[str], expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exporters.alerts", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(expected) and done.stderr.count("\n") == 1, done.stderr
    assert RULES.read_text() == alerts.render()  # the shipped file untouched


def test_the_generator_writes_a_custom_selector_to_stdout() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exporters.alerts", "--selector", 'job="roce-agent"', "-o", "-"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == alerts.render('job="roce-agent"')


@needs_promtool
def test_promtool_check_rules() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


CASES = ("fires", "exporter-start", "lossy-class", "outage-recovery", "stale-while-down")


def rule_test_file(alert: str) -> Path:
    return RULE_TESTS / f"{alert}.yml"


def test_every_alert_has_a_promtool_test_for_each_case() -> None:
    """exporters/alerts/tests/ALERT.yml: one group per case, about ALERT only; `fires` and
    `outage-recovery` expect it to fire at least once (a silent-only test proves nothing)."""
    alert_names = [rule["alert"] for rule in rules()]
    assert sorted(p.stem for p in RULE_TESTS.glob("*.yml")) == sorted(alert_names)
    for alert in alert_names:
        suite = yaml.safe_load(rule_test_file(alert).read_text())
        assert suite["rule_files"] == ["../roce.rules.yml"], alert
        found: dict[str, dict[str, Any]] = {}
        for group in suite["tests"]:
            case = group["name"].split(":", 1)[0]
            assert case in CASES, f"{alert}: {group['name']}"
            found[case] = group
            assert {t["alertname"] for t in group["alert_rule_test"]} == {alert}, group["name"]
        assert set(found) == set(CASES), f"{alert}: missing {set(CASES) - set(found)}"
        for case in ("fires", "outage-recovery"):
            if "n/a" in found[case]["name"]:
                continue
            assert any(t["exp_alerts"] for t in found[case]["alert_rule_test"]), (alert, case)


def promtool_suite(tmp_path: Path, mutate: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """The shipped rules without annotations (promtool compares those too; their text is
    checked above), optionally with one rule changed, and the test files pointed at it."""
    data = yaml.safe_load(RULES.read_text())
    for group in data["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
            if mutate is not None:
                mutate(rule)
    copy = tmp_path / "roce.rules.yml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    for path in RULE_TESTS.glob("*.yml"):
        suite = yaml.safe_load(path.read_text())
        suite["rule_files"] = [str(copy)]
        (tmp_path / path.name).write_text(yaml.safe_dump(suite, sort_keys=False))
    return tmp_path


@needs_promtool
@pytest.mark.parametrize("alert", [rule["alert"] for rule in rules()])
def test_promtool_rule_unit_tests(tmp_path: Path, alert: str) -> None:
    suite = promtool_suite(tmp_path) / f"{alert}.yml"
    done = subprocess.run(["promtool", "test", "rules", str(suite)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def change(alert: str, edit: Callable[[str], str]) -> Callable[[dict[str, Any]], None]:
    def mutate(rule: dict[str, Any]) -> None:
        if rule["alert"] == alert:
            rule["expr"] = edit(rule["expr"])

    return mutate


def set_for(alert: str, value: str) -> Callable[[dict[str, Any]], None]:
    def mutate(rule: dict[str, Any]) -> None:
        if rule["alert"] == alert:
            rule["for"] = value

    return mutate


def before_unless(expr: str) -> str:
    return expr.split("unless", 1)[0]


def before_class_join(expr: str) -> str:
    return expr.split("and on", 1)[0]


OLD_GUARD = " and on (fabric, device) min_over_time(roce_device_up[{}]) == 1"
# Each blind spot the cases exist for, put back into one rule: the named case must catch it.
MUTANTS = [
    (
        "RoceLosslessQueueDrops",
        "outage-recovery",
        "the old min_over_time(up) guard",
        change("RoceLosslessQueueDrops", lambda e: e + OLD_GUARD.format("5m")),
    ),
    (
        "RoceLosslessHeadroomDrops",
        "outage-recovery",
        "the old min_over_time(up) guard",
        change("RoceLosslessHeadroomDrops", lambda e: e + OLD_GUARD.format("5m")),
    ),
    (
        "RocePfcStormsDetected",
        "outage-recovery",
        "the old min_over_time(up) guard",
        change("RocePfcStormsDetected", lambda e: e + OLD_GUARD.format("10m")),
    ),
    (
        "RocePauseWithoutEcn",
        "outage-recovery",
        "the old min_over_time(up) guard",
        change("RocePauseWithoutEcn", lambda e: before_unless(e) + OLD_GUARD.format("10m")),
    ),
    (
        "RoceLosslessQueueDrops",
        "lossy-class",
        "no join with the intent",
        change("RoceLosslessQueueDrops", before_class_join),
    ),
    (
        "RocePfcStormsDetected",
        "lossy-class",
        "no join with the intent",
        change("RocePfcStormsDetected", before_class_join),
    ),
    (
        "RoceLosslessQueueDrops",
        "exporter-start",
        "a level instead of an increase",
        change("RoceLosslessQueueDrops", lambda e: e.replace("increase(", "(").replace("[5m]", "")),
    ),
    (
        "RocePfcWatchdogStormed",
        "stale-while-down",
        "no device_up guard (the issue's bug)",
        change("RocePfcWatchdogStormed", before_unless),
    ),
    (
        "RocePauseWithoutEcn",
        "stale-while-down",
        "no device_up guard",
        change("RocePauseWithoutEcn", before_unless),
    ),
    (
        "RoceConfigDrift",
        "stale-while-down",
        "no device_up guard",
        change("RoceConfigDrift", before_unless),
    ),
    (
        "RoceConfigSessionPending",
        "stale-while-down",
        "no device_up guard",
        change("RoceConfigSessionPending", before_unless),
    ),
    (
        "RoceCheckFailed",
        "stale-while-down",
        "`and up == 1` drops hosts the exporter never polls",
        change(
            "RoceCheckFailed",
            lambda e: before_unless(e) + " and on (fabric, device) roce_device_up == 1",
        ),
    ),
    ("RoceExporterDown", "exporter-start", "no `for`", set_for("RoceExporterDown", "0m")),
    ("RoceDeviceDown", "exporter-start", "no `for`", set_for("RoceDeviceDown", "0m")),
    (
        "RoceExporterAbsent",
        "outage-recovery",
        "absent() read over a window",
        change(
            "RoceExporterAbsent",
            lambda e: e.replace("absent(up", "absent_over_time(up").replace("})", "}[30m])"),
        ),
    ),
]


@needs_promtool
@pytest.mark.parametrize(
    ("alert", "case", "mutant", "mutate"), MUTANTS, ids=[f"{m[0]}-{m[1]}" for m in MUTANTS]
)
def test_the_cases_catch_each_blind_spot(
    tmp_path: Path,
    alert: str,
    case: str,
    mutant: str,
    mutate: Callable[[dict[str, Any]], None],
) -> None:
    """The cases can fail: put a blind spot back into a rule and the named case fails."""
    suite = promtool_suite(tmp_path, mutate) / f"{alert}.yml"
    done = subprocess.run(["promtool", "test", "rules", str(suite)], capture_output=True, text=True)
    assert done.returncode != 0, f"{alert} with {mutant}: every case still passes"
    failed = set(re.findall(r"name: ([a-z-]+):", done.stdout + done.stderr))
    assert case in failed, (mutant, failed, done.stdout[-2000:])


@needs_promtool
def test_promtool_check_config_on_the_shipped_example() -> None:
    """The example scrape config, and through its rule_files every shipped rule file."""
    config = REPO / "exporters" / "prometheus" / "prometheus.yml"
    done = subprocess.run(
        ["promtool", "check", "config", str(config)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = yaml.safe_load(config.read_text())["rule_files"]
    assert "../alerts/roce.rules.yml" in listed
    counts = re.findall(r"SUCCESS: (\d+) rules found", done.stdout + done.stderr)
    total = sum(len(rules(config.parent / name)) for name in listed)
    assert sum(map(int, counts)) == total and total >= len(rules())

"""The dashboards against Grafana's schema, grafana/dashboard-linter's rules and the fleet
contract (chained variables that every query honours, drill-down that keeps the selection).

Schema: the models of grafana-foundation-sdk (Grafana Labs, generated from the Grafana 11.6
dashboard schema) decode each file and encode it again; a key the schema does not know is
dropped and a value it cannot hold comes back different, so the round trip must give back
everything we wrote; and every decoded value must have the type the model declares (enum
members, integers, strings, nested objects), which the SDK's decoder itself does not check.
Units: the SDK's ``models.units`` registry (the ids of Grafana's valueFormats/categories.ts)
and, per query, the unit its metric calls for.

Linter: the rules of github.com/grafana/dashboard-linter (lint/rule_*.go) re-stated as
table-driven checks, since the linter is a Go binary no registry here ships. Rule names are
the linter's; where a rule is generalised (job/instance matchers → every variable of the
dashboard) the docstring says so.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import units as grafana_units
from grafana_foundation_sdk.models.dashboard import Dashboard

from exporters import dashboards, metrics

GRAFANA = Path(dashboards.__file__).resolve().parent / "grafana"
BOARDS = {name: json.loads(text) for name, text in dashboards.render_all().items()}
# Keys Grafana's own UI writes that the schema does not model: the query editor's text.
UI_ONLY = {"definition"}
GRAFANA_UNITS = {v for v in vars(grafana_units).values() if isinstance(v, str)}

Dash = dict[str, Any]


def panels() -> Iterator[tuple[str, Dash, Dash]]:
    for name, board in BOARDS.items():
        for panel in board["panels"]:
            yield name, board, panel


def targets() -> Iterator[tuple[str, Dash, Dash, Dash]]:
    for name, board, panel in panels():
        for target in panel["targets"]:
            yield name, board, panel, target


def variables(board: Dash) -> dict[str, Dash]:
    return {v["name"]: v for v in board["templating"]["list"]}


def where(name: str, panel: Dash) -> str:
    return f"{name} / {panel['title']}"


# --------------------------------------------------------------------------- schema


def lost_in_round_trip(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """What we wrote that the schema model did not give back (key or value)."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [f"{path}: Expected: an object Actual: {theirs!r}"]
        lost = []
        for key, value in ours.items():
            if key in UI_ONLY:
                continue
            if key not in theirs:
                lost.append(f"{path}/{key}: not in Grafana's dashboard schema")
            else:
                lost += lost_in_round_trip(value, theirs[key], f"{path}/{key}")
        return lost
    if isinstance(ours, list):
        if not isinstance(theirs, list) or len(ours) != len(theirs):
            return [f"{path}: Expected: {ours!r} Actual: {theirs!r}"]
        return [
            loss
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for loss in lost_in_round_trip(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: Expected: {ours!r} Actual: {theirs!r}"]


def round_trip(board: Dash) -> Dash:
    register_default_plugins()
    decoded: Dash = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
    return decoded


def type_errors(value: Any, hint: Any, path: str) -> list[str]:
    """Where a decoded value does not have the type the schema model declares (the SDK's
    decoder copies values as they come, so a wrong enum or a string width passes it)."""
    if hint in (typing.Any, object):
        return []
    origin = typing.get_origin(hint)
    if origin in _OF_GENERIC:
        return _OF_GENERIC[origin](value, typing.get_args(hint), path)
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        allowed = [m.value for m in hint]
        ok = isinstance(value, hint) or value in allowed
        return [] if ok else [f"{path}: Expected: one of {allowed} Actual: {value!r}"]
    if hint in (bool, str, int, float):
        return _scalar_errors(value, hint, path)
    if inspect.isclass(hint):
        return _model_errors(value, hint, path)
    return [f"{path}: the test does not know the schema type {hint}"]


def _union_errors(value: Any, args: tuple[Any, ...], path: str) -> list[str]:
    if value is None:
        return [] if type(None) in args else [f"{path}: Expected: a value Actual: null"]
    options = [a for a in args if a is not type(None)]
    exact = [a for a in options if inspect.isclass(a) and isinstance(value, a)]
    if exact or len(options) == 1:
        return type_errors(value, (exact or options)[0], path)
    if any(not type_errors(value, a, path) for a in options):
        return []
    return [f"{path}: Expected: one of {options} Actual: {value!r}"]


def _list_errors(value: Any, args: tuple[Any, ...], path: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{path}: Expected: a list Actual: {value!r}"]
    return [e for i, v in enumerate(value) for e in type_errors(v, args[0], f"{path}[{i}]")]


def _dict_errors(value: Any, args: tuple[Any, ...], path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: Expected: an object Actual: {value!r}"]
    return [e for k, v in value.items() for e in type_errors(v, args[1], f"{path}/{k}")]


def _literal_errors(value: Any, args: tuple[Any, ...], path: str) -> list[str]:
    return [] if value in args else [f"{path}: Expected: one of {args} Actual: {value!r}"]


# The generic types of the schema models, by their origin: Optional/Union, list, dict, Literal.
_OF_GENERIC: dict[Any, Callable[[Any, tuple[Any, ...], str], list[str]]] = {
    typing.Union: _union_errors,
    list: _list_errors,
    dict: _dict_errors,
    typing.Literal: _literal_errors,
}


def _scalar_errors(value: Any, hint: type, path: str) -> list[str]:
    """A bool or a string as such; a number that is no bool, and an integer where the model
    says int."""
    if hint in (bool, str):
        ok = isinstance(value, hint)
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and (hint is float or isinstance(value, int))
    return [] if ok else [f"{path}: Expected: {hint.__name__} Actual: {value!r}"]


def _model_errors(value: Any, hint: type, path: str) -> list[str]:
    """An instance of the model class, each field of the type its ``__init__`` declares."""
    if not isinstance(value, hint):
        return [f"{path}: Expected: {hint.__name__} Actual: {type(value).__name__}"]
    fields = typing.get_type_hints(type(value).__init__)
    fields.pop("return", None)
    return [
        e
        for name, h in fields.items()
        for e in type_errors(getattr(value, name), h, f"{path}/{name}")
    ]


def schema_errors(board: Dash) -> list[str]:
    register_default_plugins()
    found = lost_in_round_trip(board, round_trip(board))
    return found + type_errors(Dashboard.from_json(board), Dashboard, "")


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_fits_grafanas_schema(name: str) -> None:
    errors = schema_errors(BOARDS[name])
    assert not errors, f"{name}:\n" + "\n".join(errors)


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda b: b["panels"][0].__setitem__("descripton", "typo"), "/panels[0]/descripton"),
        (lambda b: b["panels"][0]["gridPos"].__setitem__("width", 3), "/gridPos/width"),
        (lambda b: b.__setitem__("refreshEvery", "30s"), "/refreshEvery"),
        (lambda b: b["templating"]["list"][1].__setitem__("allvalue", ".*"), "/allvalue"),
        (lambda b: b.__setitem__("graphTooltip", 7), "/graph_tooltip"),
        (lambda b: b["panels"][0]["gridPos"].__setitem__("w", "12"), "/grid_pos/w"),
        (lambda b: b["panels"][0]["fieldConfig"]["defaults"].__setitem__("unit", 3), "/unit"),
        (lambda b: b["templating"]["list"][1].__setitem__("multi", "yes"), "/multi"),
    ],
)
def test_schema_check_catches_what_grafana_would_not_know(
    mutate: Callable[[Dash], None], expected: str
) -> None:
    board = json.loads(json.dumps(BOARDS["roce-switch.json"]))
    mutate(board)
    errors = schema_errors(board)
    assert any(expected in error for error in errors), errors


# --------------------------------------------------------------------------- units


# What a query is, from its text, and the unit it calls for (first match wins).
UNIT_RULES: list[tuple[str, str, str]] = [
    ("latency histogram", r"histogram_quantile|_seconds_bucket", "s"),
    ("age of a timestamp", r"time\(\) -", "s"),
    ("share of time paused", r"rate\(roce_\w+_seconds_total", "percentunit"),
    ("ratio of two counters", r"\) / ", "percentunit"),
    ("bytes as bit rate", r"^8 \* .*rate\(roce_\w+_bytes_total", "bps"),
    ("packets or frames per second", r"\brate\(roce_\w+_total", "pps"),
    ("a duration", r"roce_\w+_seconds\b", "s"),
    ("a confidence (0-1)", r"roce_locate_suspect\b", "percentunit"),
    ("a count, a state or a counter's increase", r".", "none"),
]


def expected_unit(expr: str) -> str:
    for _, pattern, unit in UNIT_RULES:
        if re.search(pattern, expr):
            return unit
    raise AssertionError(expr)


@pytest.mark.parametrize(
    "expr, unit",
    [
        (
            "histogram_quantile(0.99, sum by (le) (rate(roce_probe_latency_seconds_bucket[1m])))",
            "s",
        ),
        ("time() - roce_probe_last_run_timestamp_seconds", "s"),
        ("sum(rate(roce_nic_pause_duration_seconds_total[1m]))", "percentunit"),
        ("sum(rate(a_total[1m])) / sum(rate(b_total[1m]))", "percentunit"),
        ("8 * sum(rate(roce_queue_transmitted_bytes_total[1m]))", "bps"),
        ("sum(rate(roce_pfc_frames_total[1m]))", "pps"),
        ("roce_poll_duration_seconds", "s"),
        ("sum(increase(roce_poll_errors_total[1m]))", "none"),
        ("roce_device_up", "none"),
        ("sort_desc(roce_locate_suspect)", "percentunit"),
    ],
)
def test_unit_rules(expr: str, unit: str) -> None:
    assert expected_unit(expr) == unit


def test_every_panel_has_a_grafana_unit_that_fits_its_queries() -> None:
    """panel-units-rule, plus: the unit is the one the metric calls for."""
    wrong = []
    for name, _, panel in panels():
        unit = panel["fieldConfig"]["defaults"].get("unit")
        if unit not in GRAFANA_UNITS:
            wrong.append(f"{where(name, panel)}: unit Expected: a Grafana unit Actual: {unit!r}")
            continue
        for target in panel["targets"]:
            if (want := expected_unit(target["expr"])) != unit:
                wrong.append(f"{where(name, panel)}: unit Expected: {want} Actual: {unit}")
    assert not wrong, "\n".join(wrong)


def test_every_panel_and_dashboard_is_described() -> None:
    """panel-title-description-rule, for dashboards too; titles unique per dashboard."""
    for name, board in BOARDS.items():
        assert board["description"].strip(), name
        titles = [p["title"] for p in board["panels"]]
        assert len(titles) == len(set(titles)), name
    for name, _, panel in panels():
        assert panel["title"].strip() and len(panel["description"]) >= 20, where(name, panel)


# --------------------------------------------------------------------------- linter rules


def selectors(expr: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Every ``roce_*`` selector in a PromQL expression, with its regex matchers."""
    for match in re.finditer(r"\b(roce_\w+)(\{[^}]*\})?", expr):
        body = match.group(2) or ""
        yield match.group(1), dict(re.findall(r'(\w+)=~"([^"]*)"', body))


def labels_of(metric: str) -> set[str]:
    base = re.sub(r"_(bucket|sum|count)$", "", metric)
    spec = metrics.BY_NAME.get(metric) or metrics.BY_NAME[base]
    # Prometheus adds job and instance to every scraped series.
    return {"job", "instance", *spec.labels}


def test_template_datasource_rule() -> None:
    for name, board in BOARDS.items():
        first = board["templating"]["list"][0]
        assert (first["name"], first["type"], first["query"]) == (
            "datasource",
            "datasource",
            "prometheus",
        ), name


@pytest.mark.parametrize("variable", ["job", "instance", "fabric"])
def test_template_job_instance_rules_and_fabric(variable: str) -> None:
    """template-job-rule / template-instance-rule (lint/template_utils.go checkTemplate),
    and the same for fabric, which a fleet needs on every dashboard."""
    for name, board in BOARDS.items():
        found = variables(board).get(variable)
        assert found is not None, f"{name}: no {variable} variable"
        assert found["type"] == "query" and found["datasource"]["uid"] == "${datasource}"
        assert found["label"] == variable.title(), name
        assert found["multi"] and found["includeAll"] and found["allValue"] == ".+", name


def test_template_on_time_change_reload_rule() -> None:
    for name, board in BOARDS.items():
        for variable in variables(board).values():
            if variable["type"] == "query":
                assert variable["refresh"] == 2, f"{name} / {variable['name']}"


def test_variables_are_chained() -> None:
    """Each query variable lists only values under every variable before it."""
    for name, board in BOARDS.items():
        seen: list[str] = []
        for variable in board["templating"]["list"][1:]:
            query = variable["query"]["query"]
            assert query == variable["definition"], name
            inner = query[len("label_values(") : query.rindex(",")]
            for metric, matchers in selectors(inner):
                carried = {v for v in seen if dashboards.LABEL_OF.get(v, v) in labels_of(metric)}
                missing = carried - {v.strip("$") for v in matchers.values()}
                assert not missing, f"{name} / {variable['name']}: not chained on {missing}"
            seen.append(variable["name"])


def test_panel_datasource_and_no_targets_rules() -> None:
    for name, _, panel in panels():
        assert panel["datasource"]["uid"] == "${datasource}", where(name, panel)
        assert panel["targets"], where(name, panel)
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", where(name, panel)


def queries() -> Iterator[tuple[str, Dash, str]]:
    """Every PromQL text of every dashboard: panel targets and variable queries."""
    for name, board, _, target in targets():
        yield name, board, target["expr"]
    for name, board in BOARDS.items():
        for variable in board["templating"]["list"][1:]:
            yield name, board, variable["query"]["query"]


def test_no_matcher_on_a_label_the_series_lack() -> None:
    """Such a matcher selects nothing: a dead panel, or a variable with no values."""
    bad = [
        f"{name}: {metric} has no label {label} ({expr})"
        for name, _, expr in queries()
        for metric, matchers in selectors(expr)
        for label in matchers
        if label not in labels_of(metric)
    ]
    assert not bad, "\n".join(bad)


def test_target_matcher_rules_for_every_variable() -> None:
    """target-job-rule / target-instance-rule, generalised: every selector carries
    ``label=~"$var"`` for each variable of its dashboard whose label the metric has."""
    missing = []
    for name, board, panel, target in targets():
        wanted = {dashboards.LABEL_OF.get(v, v): v for v in variables(board) if v != "datasource"}
        for metric, matchers in selectors(target["expr"]):
            for label, var in wanted.items():
                if label in labels_of(metric) and matchers.get(label) != f"${var}":
                    missing.append(f'{where(name, panel)}: {metric} lacks {label}=~"${var}"')
    assert not missing, "\n".join(missing)


def test_every_variable_is_used() -> None:
    """template-unused rule: a variable no query uses only misleads."""
    for name, board in BOARDS.items():
        text = json.dumps([p["targets"] for p in board["panels"]])
        for variable in variables(board):
            if variable != "datasource":
                assert f'"${variable}' in text.replace('\\"', '"'), f"{name}: ${variable}"


def test_target_rate_interval_and_counter_agg_rules() -> None:
    """target-rate-interval-rule: rate() over $__rate_interval; target-counter-agg-rule:
    counters only inside rate() or increase() (over $__rate_interval or $__range)."""
    bad = []
    for name, _, panel, target in targets():
        expr = target["expr"]
        for window in re.findall(r"\brate\([^\[]*\[([^\]]*)\]", expr):
            if window != "$__rate_interval":
                bad.append(f"{where(name, panel)}: rate over {window}")
        for match in re.finditer(r"\b(roce_\w+(?:_total|_bucket))\b", expr):
            before = expr[: match.start()]
            if not re.search(r"\b(rate|increase)\($", before):
                bad.append(f"{where(name, panel)}: {match.group(1)} not in rate/increase")
        for window in re.findall(r"\bincrease\([^\[]*\[([^\]]*)\]", expr):
            if window not in {"$__rate_interval", "$__range"}:
                bad.append(f"{where(name, panel)}: increase over {window}")
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------- drill-down


def data_links() -> Iterator[tuple[str, Dash, Dash, Dash]]:
    for name, board, panel in panels():
        for item in panel["fieldConfig"]["defaults"].get("links", []):
            yield name, board, panel, item


def test_drill_down_overview_to_switch_to_interface() -> None:
    pairs = {
        (board["uid"], re.match(r"/d/([\w-]+)/", item["url"]).group(1))  # type: ignore[union-attr]
        for _, board, _, item in data_links()
    }
    assert ("roce-fabric-overview", "roce-switch") in pairs
    assert ("roce-switch", "roce-interface") in pairs


def test_drill_down_links_keep_the_selection() -> None:
    """A link sets the target's variables from the clicked series' labels (which the query
    keeps in its ``by``), carries every other shared selection and the time range."""
    by_uid = {board["uid"]: board for board in BOARDS.values()}
    for name, board, panel, item in data_links():
        url = item["url"]
        uid = re.match(r"/d/([\w-]+)/", url).group(1)  # type: ignore[union-attr]
        target_vars = set(variables(by_uid[uid]))
        source_vars = set(variables(board))
        assert "${__url_time_range}" in url, where(name, panel)
        kept = set(re.findall(r"\$\{(\w+):queryparam\}", url))
        clicked = dict(re.findall(r"var-(\w+)=\$\{__field\.labels\.(\w+)\}", url))
        assert kept <= source_vars & target_vars, f"{where(name, panel)}: {kept}"
        assert set(clicked) <= target_vars and not set(clicked) & kept, where(name, panel)
        assert {"datasource", *dashboards.FLEET} <= kept | set(clicked), where(name, panel)
        for target in panel["targets"]:
            grouping = re.search(r"^\w*\s*(?:8 \* )?sum by \(([^)]*)\)", target["expr"])
            if grouping:
                keep = {label.strip() for label in grouping.group(1).split(",")}
                assert set(clicked.values()) <= keep, f"{where(name, panel)}: {keep}"


def test_generated_files_match_the_generator() -> None:
    on_disk = {path.name for path in GRAFANA.glob("*.json")}
    assert on_disk == set(BOARDS)
    for name, text in dashboards.render_all().items():
        assert (GRAFANA / name).read_text() == text, f"{name}: run python -m exporters.dashboards"


# --------------------------------------------------------------------------- never read is not 0

# Labels that make a series about one device (switch, host, NIC port) or a pair of them.
DEVICE_LABELS = {"device", "host", "src", "dst", "rdma_device", "interface", "element"}
# PromQL that makes a value out of nothing: with any of them a panel can show 0 (or 1) for a
# device nobody read.
FROM_NOTHING = re.compile(r"\b(vector|absent|absent_over_time|scalar)\s*\(")


def about_devices(metric: str) -> bool:
    return bool(labels_of(metric) & DEVICE_LABELS)


def alternatives(expr: str) -> list[str]:
    """The operands of the top-level ``or`` operators of ``expr`` (outside parentheses)."""
    out, depth, start = [], 0, 0
    for match in re.finditer(r"[()]|\bor\b", expr):
        token = match.group()
        depth += {"(": 1, ")": -1}.get(token, 0)
        if token == "or" and depth == 0:
            out.append(expr[start : match.start()])
            start = match.end()
    return [*out, expr[start:]]


def zero_from_absence(expr: str) -> str | None:
    """Why ``expr`` can show a figure for devices never read, or None. Issue #41: absent must
    stay absent (the panel then says "not read"); an ``or`` fallback may only be made of
    series that themselves exist only once a device was read."""
    found = FROM_NOTHING.search(expr)
    if found:
        return f"{found.group(1)}() makes a value from nothing"
    metrics_used = [metric for metric, _ in selectors(expr)]
    if not any(about_devices(m) for m in metrics_used):
        return None
    for alternative in alternatives(expr)[1:]:
        fallback = [metric for metric, _ in selectors(alternative)]
        if not fallback or not all(about_devices(m) for m in fallback):
            return f"`or {alternative.strip()}` answers when no device was read"
    return None


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ('sum(roce_drift_items{fabric=~"$fabric"}) or vector(0)', "vector() makes"),
        ("count(roce_drift_items > 0) or on() vector(0)", "vector() makes"),
        ("absent(roce_device_up) * 0", "absent() makes"),
        ("count(roce_drift_items > 0) or count(roce_exporter_info) * 0", "answers when no"),
        ("sum(roce_pfc_watchdog_stormed) or 0 * time()", "answers when no"),
        ("count(roce_drift_items > 0) or count(roce_drift_items) * 0", None),
        ("sum(roce_drift_items)", None),
        ("count(roce_device_up == 0) or count(roce_device_up) * 0", None),
        ("time() - max(roce_check_last_run_timestamp_seconds)", None),
    ],
)
def test_the_absent_as_zero_rule_catches_what_it_must(expr: str, why: str | None) -> None:
    found = zero_from_absence(expr)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_no_panel_about_devices_shows_absent_as_zero() -> None:
    """Issue #41: a panel about devices says "not read" (or why nothing is there) when its
    query returns nothing, and no query of it turns "never read" into a 0."""
    bad = []
    for name, _, panel in panels():
        exprs = [target["expr"] for target in panel["targets"]]
        if not any(about_devices(m) for e in exprs for m, _ in selectors(e)):
            continue
        bad += [f"{where(name, panel)}: {why}" for e in exprs if (why := zero_from_absence(e))]
        shown = panel["fieldConfig"]["defaults"].get("noValue", "")
        if not shown or shown.strip() in {"0", "-", ""}:
            bad.append(f"{where(name, panel)}: no 'not read' text for an empty result")
    assert not bad, "\n".join(bad)


def test_every_device_panel_says_not_read_the_same_way() -> None:
    """The words a reader learns once: "not read" for devices, or what is missing."""
    texts = {
        panel["fieldConfig"]["defaults"]["noValue"]
        for _, _, panel in panels()
        if panel["fieldConfig"]["defaults"].get("noValue")
    }
    assert dashboards.NOT_READ in texts
    assert all(t == dashboards.NOT_READ or t.startswith(("no ", "none")) for t in texts), texts


def test_the_read_state_table_shows_each_switch_current_state() -> None:
    states = [
        target["expr"]
        for _, _, panel in panels()
        if panel["title"] == "Switches: read, or why not"
        for target in panel["targets"]
    ]
    assert len(states) == 2  # overview and compliance
    assert all(e.startswith("roce_device_state{") and e.endswith("} == 1") for e in states)
    assert "up" in metrics.DEVICE_STATES and "not_polled_yet" in metrics.DEVICE_STATES

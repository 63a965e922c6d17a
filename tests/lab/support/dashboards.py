"""The shipped Grafana dashboards' queries as a lab test runs them against Prometheus: the
dashboard variables substituted, and which queries read the packet-trimming family (served
only by a switch that trims: tests/lab/test_trim_lab.py proves those, the lossless exporter
lab the rest)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

GRAFANA = Path(__file__).resolve().parents[3] / "exporters" / "grafana"
VARIABLES = {
    "$datasource": "prometheus",
    "$job": ".+",
    "$instance": ".+",
    "$fabric": ".+",
    "$device": "leaf1",
    "$interface": "Ethernet.*",
    "$priority": ".+",
    "$scenario": "incast|receive",
    "$src": "h1",
    "$dst": "h3",
    "$rdma_device": ".+",
    "$nic_interface": ".+",
    "$__rate_interval": "20s",
    "$__interval": "5s",
    "$__range": "2m",
}
# The trim counters (roce_queue_trimmed_packets_total, roce_interface_trim_sent_…): a switch
# that does not trim reads them as not read and serves no series of them.
TRIM_SERIES = re.compile(r"roce_(queue|interface)_trim")


def substitute(expr: str, **values: str) -> str:
    """``expr`` with the dashboard variables replaced (``values``: others, e.g.
    ``interface="swp.*"``)."""
    given = {**VARIABLES, **{f"${name}": value for name, value in values.items()}}
    for name in sorted(given, key=len, reverse=True):
        expr = expr.replace(name, given[name])
    return expr


def targets() -> Iterator[tuple[str, str, str]]:
    """Every dashboard panel query: (file, panel title, expression)."""
    for path in sorted(GRAFANA.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                yield path.name, panel["title"], target["expr"]

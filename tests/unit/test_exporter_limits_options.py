"""The exporter's connection limits as settings: `roce-agent exporter --max-connections[-per-
address]` and agent.yaml's `exporter: {max_connections, max_connections_per_address}`; bad
values exit 2 naming the option or FILE:LINE and the field; a reload changes the limits of
the running server on the same socket."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from agent.app.cli import main
from agent.app.daemon_config import load_config
from exporters.collector import RoceCollector
from exporters.server import MetricsServer, ServerLimits
from exporters.store import SnapshotStore
from tests.unit.problems import the_one_problem

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "playbooks" / "fabrics" / "pod-400g.yml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_FABRIC_PASSWORD", "x")  # pod-400g's credentials: only checked


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-connections", "0"], "--max-connections"),
        (["--max-connections-per-address", "0"], "--max-connections-per-address"),
        (["--max-connections-per-address", "many"], "--max-connections-per-address"),
        (
            ["--max-connections", "16", "--max-connections-per-address", "17"],
            "--max-connections-per-address: Expected: at most --max-connections (16) Actual: 17",
        ),
    ],
)
def test_bad_limits_on_the_command_line_exit_2_naming_the_option(
    args: list[str], message: str
) -> None:
    result = CliRunner().invoke(main, ["exporter", "--fabric", str(FABRIC), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def write_agent_yaml(folder: Path, exporter: str) -> Path:
    config = folder / "agent.yaml"
    config.write_text(f"fabric: {FABRIC}\nexporter:\n{exporter}\n")
    return config


def test_agent_yaml_limits_and_their_defaults(tmp_path: Path) -> None:
    loaded = load_config(write_agent_yaml(tmp_path, "  listen: 127.0.0.1:0"))
    assert loaded.config.exporter is not None
    assert loaded.config.exporter.server_limits() == ServerLimits(32, 8)
    config = write_agent_yaml(tmp_path, "  max_connections: 64\n  max_connections_per_address: 64")
    exporter = load_config(config).config.exporter
    assert exporter is not None and exporter.server_limits() == ServerLimits(64, 64)


@pytest.mark.parametrize(
    ("lines", "line", "field", "message"),
    [
        ("  max_connections: 0", 3, "exporter.max_connections", "greater than or equal to 1"),
        (
            "  max_connections: 4\n  max_connections_per_address: 5",
            3,
            "exporter",
            "max_connections_per_address: Expected: at most max_connections (4) Actual: 5",
        ),
    ],
)
def test_bad_limits_in_agent_yaml_name_file_line_and_field(
    tmp_path: Path, lines: str, line: int, field: str, message: str
) -> None:
    config = write_agent_yaml(tmp_path, lines)
    problem = the_one_problem(load_config, config, line)
    assert problem.field == field
    assert message in problem.message
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"{config}:{line}" in result.output


def gauge(registry: CollectorRegistry, name: str) -> float:
    """A gauge as a scrape shows it (the server registers its own families in the registry)."""
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name == name:
            return float(family.samples[0].value)
    raise AssertionError(f"{name} not exported")


def test_a_reload_changes_the_limits_of_the_running_server() -> None:
    registry = CollectorRegistry()
    registry.register(RoceCollector(SnapshotStore("lab", [])))
    server = MetricsServer(registry, ("127.0.0.1", 0), limits=ServerLimits(32, 8))
    server.start()
    try:
        assert gauge(registry, "roce_exporter_http_max_connections_per_address") == 8
        server.reconfigure(registry, None, None, ServerLimits(64, 16))
        assert gauge(registry, "roce_exporter_http_max_connections") == 64
        assert gauge(registry, "roce_exporter_http_max_connections_per_address") == 16
        assert server.stats.slots.limits.max_connections_per_address == 16
    finally:
        server.stop()

"""The fleet's Prometheus artifacts: the fleet example config and its file_sd targets pass
`promtool check config`, and the recording rules (exporters/alerts/roce.recording.yml) give
the fabric-wide view over shards, proven with `promtool test rules` on recorded series of
two shards. The real Prometheus over a lab fleet: tests/lab/test_fleet_prometheus.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = REPO / "exporters" / "prometheus"
RECORDING = REPO / "exporters" / "alerts" / "roce.recording.yml"
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool")
F = 'fabric="pod1"'


@needs_promtool
@pytest.mark.parametrize("name", ["prometheus.yml", "prometheus-fleet.yml"])
def test_example_configs_check(name: str) -> None:
    done = subprocess.run(
        ["promtool", "check", "config", str(PROMETHEUS / name)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "roce.recording.yml" in done.stdout


def test_file_sd_targets_name_no_label_the_exporter_sets() -> None:
    fleet = yaml.safe_load((PROMETHEUS / "prometheus-fleet.yml").read_text())
    (job,) = fleet["scrape_configs"]
    (pattern,) = job["file_sd_configs"][0]["files"]
    files = sorted(PROMETHEUS.glob(pattern))
    assert files, pattern
    for path in files:
        for group in yaml.safe_load(path.read_text()):
            assert set(group) <= {"targets", "labels"}
            assert all(t.rpartition(":")[2].isdigit() for t in group["targets"])
            # A target label `fabric` or `shard` would rename the exporter's own labels.
            assert not {"fabric", "shard", "device"} & set(group.get("labels", {}))


def series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


# (what, input series, expression, expected samples at 5m) — two shards' targets t1, t2.
CASES: list[tuple[str, list[dict[str, str]], str, list[dict[str, Any]]]] = [
    (
        "each switch served once, sums over shards",
        [
            series("roce_device_up", f'{F},device="a",instance="t1"', "1x10"),
            series("roce_device_up", f'{F},device="b",instance="t2"', "1x10"),
            series("roce_device_up", f'{F},device="c",instance="t2"', "0x10"),
        ],
        "fabric_device:roce_device_up:count",
        [{"labels": f"fabric_device:roce_device_up:count{{{F},device=\"{d}\"}}", "value": 1}
         for d in "abc"],
    ),
    (
        "switches up over shards (one down)",
        [
            series("roce_device_up", f'{F},device="a",instance="t1"', "1x10"),
            series("roce_device_up", f'{F},device="b",instance="t2"', "1x10"),
            series("roce_device_up", f'{F},device="c",instance="t2"', "0x10"),
        ],
        "fabric:roce_device_up:sum",
        [{"labels": f"fabric:roce_device_up:sum{{{F}}}", "value": 2}],
    ),
    (
        "two agents disagree on N: a switch served twice",
        [
            series("roce_device_up", f'{F},device="a",instance="t1"', "1x10"),
            series("roce_device_up", f'{F},device="a",instance="t2"', "1x10"),
        ],
        "fabric_device:roce_device_up:count",
        [{"labels": f"fabric_device:roce_device_up:count{{{F},device=\"a\"}}", "value": 2}],
    ),
    (
        "owned switches and shards over agents",
        [
            series("roce_exporter_devices", f'{F},instance="t1"', "1x10"),
            series("roce_exporter_devices", f'{F},instance="t2"', "3x10"),
        ],
        "fabric:roce_exporter_devices:sum",
        [{"labels": f"fabric:roce_exporter_devices:sum{{{F}}}", "value": 4}],
    ),
    (
        "shards reporting",
        [
            series("roce_exporter_shard_info", f'{F},shard="1/2",instance="t1"', "1x10"),
            series("roce_exporter_shard_info", f'{F},shard="2/2",instance="t2"', "1x10"),
        ],
        "fabric:roce_exporter_shards:count",
        [{"labels": f"fabric:roce_exporter_shards:count{{{F}}}", "value": 2}],
    ),
    (
        "PFC rate summed over shards (60/min + 120/min = 3/s)",
        [
            series("roce_pfc_frames_total",
                   f'{F},device="a",interface="e1",priority="3",direction="rx",instance="t1"',
                   "0+60x10"),
            series("roce_pfc_frames_total",
                   f'{F},device="b",interface="e1",priority="3",direction="rx",instance="t2"',
                   "0+120x10"),
        ],
        "fabric:roce_pfc_frames:rate5m",
        [{"labels": f'fabric:roce_pfc_frames:rate5m{{{F},direction="rx",priority="3"}}',
          "value": 3}],
    ),
    (
        "lossless drops count only the intent's lossless queues, over shards",
        [
            series("roce_queue_dropped_packets_total",
                   f'{F},device="a",interface="e1",queue="3",instance="t1"', "0+60x10"),
            series("roce_queue_dropped_packets_total",
                   f'{F},device="b",interface="e1",queue="3",instance="t2"', "0+60x10"),
            series("roce_queue_dropped_packets_total",
                   f'{F},device="b",interface="e1",queue="0",instance="t2"', "0+600x10"),
            series("roce_intended_class_info",
                   f'{F},device="a",interface="e1",priority="3",queue="3",pfc="on",ecn="on",'
                   'instance="t1"', "1x10"),
            series("roce_intended_class_info",
                   f'{F},device="b",interface="e1",priority="3",queue="3",pfc="on",ecn="on",'
                   'instance="t2"', "1x10"),
            series("roce_intended_class_info",
                   f'{F},device="b",interface="e1",priority="0",queue="0",pfc="off",ecn="off",'
                   'instance="t2"', "1x10"),
        ],
        "fabric:roce_lossless_queue_dropped_packets:rate5m",
        [{"labels": f"fabric:roce_lossless_queue_dropped_packets:rate5m{{{F}}}", "value": 2}],
    ),
    (
        "stormed interfaces of a down switch are stale, not counted",
        [
            series("roce_pfc_watchdog_stormed",
                   f'{F},device="a",interface="e1",priority="3",instance="t1"', "1x10"),
            series("roce_pfc_watchdog_stormed",
                   f'{F},device="b",interface="e1",priority="3",instance="t2"', "1x10"),
            series("roce_device_up", f'{F},device="a",instance="t1"', "1x10"),
            series("roce_device_up", f'{F},device="b",instance="t2"', "0x10"),
        ],
        "fabric:roce_pfc_watchdog_stormed:sum",
        [{"labels": f"fabric:roce_pfc_watchdog_stormed:sum{{{F}}}", "value": 1}],
    ),
    (
        "drift over shards",
        [
            series("roce_drift_items", f'{F},device="a",instance="t1"', "2x10"),
            series("roce_drift_items", f'{F},device="b",instance="t2"', "0x10"),
            series("roce_drift_items", f'{F},device="c",instance="t2"', "5x10"),
        ],
        "fabric:roce_devices_drifted:count",
        [{"labels": f"fabric:roce_devices_drifted:count{{{F}}}", "value": 2}],
    ),
]  # fmt: skip


@needs_promtool
def test_recording_rules_build_the_fabric_view_over_shards(tmp_path: Path) -> None:
    tests = [
        {
            "name": what,
            "interval": "1m",
            "input_series": inputs,
            "promql_expr_test": [{"expr": expr, "eval_time": "5m", "exp_samples": expected}],
        }
        for what, inputs, expr, expected in CASES
    ]
    path = tmp_path / "recording.test.yml"
    path.write_text(
        yaml.safe_dump(
            {"rule_files": [str(RECORDING)], "evaluation_interval": "1m", "tests": tests}
        )
    )
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_rule_test_can_fail(tmp_path: Path) -> None:
    """A wrong expectation is caught (the harness above is not vacuous)."""
    _what, inputs, expr, expected = CASES[1]
    wrong = [{**expected[0], "value": 3}]
    path = tmp_path / "wrong.test.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(RECORDING)],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": inputs,
                        "promql_expr_test": [
                            {"expr": expr, "eval_time": "5m", "exp_samples": wrong}
                        ],
                    }
                ],
            }
        )
    )
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode != 0

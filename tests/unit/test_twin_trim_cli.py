"""``roce-agent twin --mode`` and ``--compare-modes`` (issue #47), through click's CliRunner:
the JSON of each, the recommendation, what the fabric needs, and bad combinations (exit 2,
naming the option)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.twin import twin_command
from agent.twin.compare import NIC_REQUIREMENT
from agent.twin.trimming import TRIM_RECEIVER

DATA = Path(__file__).resolve().parents[1] / "data" / "twin"
INCAST_400G = str(DATA / "incast-400g.yml")
LEAF_SPINE_400G = str(DATA / "leaf-spine-400g.yml")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(twin_command, list(args))
    return result.exit_code, result.stdout, result.stderr


def _json(*args: str) -> dict[str, Any]:
    code, out, err = _run(*args, "--output", "json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


# (arguments, what the JSON of a single run says)
MODE_CASES: list[tuple[list[str], dict[str, Any]]] = [
    (
        [INCAST_400G, "--senders", "16", "--duration", "200us", "--mode", "lossy-trim"],
        {"mode": "lossy-trim", "paths": "spray", "recovery": "selective-repeat",
         "pfc_frames": 0, "trimmed": lambda n: n > 0, "trim_receiver": TRIM_RECEIVER,
         "retransmitted": lambda n: n > 0,
         "ports": lambda ports: sum(p["trimmed"] for p in ports) > 0},
    ),
    (
        [INCAST_400G, "--senders", "16", "--duration", "200us"],
        {"mode": "lossless", "paths": "flow", "pfc_frames": lambda n: n > 0, "trimmed": 0,
         "trim_receiver": None, "reorder_depth": 0},
    ),
    (
        [INCAST_400G, "--workload", "allreduce", "--ranks", "4", "--size", "4MB", "--mode",
         "lossy-trim", "--paths", "flow"],
        {"mode": "lossy-trim", "paths": "flow", "completed": True,
         "completion_p99_s": lambda t: t > 0},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("args", "expect"), MODE_CASES)
def test_mode_json(args: list[str], expect: dict[str, Any]) -> None:
    data = _json(*args)
    for key, value in expect.items():
        assert value(data[key]) if callable(value) else data[key] == value, (key, data[key])


# (fabric, workload arguments): an all-reduce and an all-to-all, compared.
COMPARE_CASES: list[tuple[str, list[str]]] = [
    (INCAST_400G, ["--workload", "allreduce", "--ranks", "8", "--size", "8MB"]),
    (LEAF_SPINE_400G, ["--workload", "alltoall", "--size", "8MB"]),
]


@pytest.mark.parametrize(("fabric", "workload"), COMPARE_CASES)
def test_compare_modes_json(fabric: str, workload: list[str]) -> None:
    data = _json(fabric, "--compare-modes", *workload)
    rows = {row["mode"]: row for row in data["rows"]}
    assert list(rows) == ["lossless", "lossy-trim"]
    for row in rows.values():
        assert row["completed"]
        assert row["busbw_GBps"] > 0
        assert 0 < row["completion_p50_s"] <= row["completion_p99_s"] <= row["completion_max_s"]
        assert row["queue_peak_bytes"] >= row["queue_p99_bytes"] >= 0
    assert rows["lossy-trim"]["pfc_frames"] == 0
    assert rows["lossless"]["trimmed"] == 0
    assert rows["lossy-trim"]["retransmitted"] >= (
        rows["lossy-trim"]["trimmed"] - rows["lossy-trim"]["trim_dropped"]
    )
    assert data["recommended"] in rows
    assert data["reason"]
    assert data["support"]["nics"] == NIC_REQUIREMENT
    assert "sonic" in data["support"]["trimming_platforms"]


def test_compare_names_the_switches_that_cannot_trim() -> None:
    data = _json(LEAF_SPINE_400G, "--compare-modes", "--workload", "alltoall", "--size", "4MB")
    cannot = {s["switch"]: s["platform"] for s in data["support"]["switches_cannot"]}
    assert cannot == {"spine1": "arista_eos", "spine2": "arista_eos"}
    # Without --paths lossless also runs on lossy-trim's sprayed paths (the control): the
    # rows say which is which, the notes what the paths alone changed, and the
    # recommendation compares the modes on the same paths.
    assert [(r["mode"], r["paths"]) for r in data["rows"]] == [
        ("lossless", "flow"), ("lossless", "spray"), ("lossy-trim", "spray"),
    ]  # fmt: skip
    assert any(note.startswith("the paths alone:") for note in data["notes"])
    assert data["reason"].endswith("(both on spray paths)")


def test_compare_modes_with_paths_runs_each_mode_once() -> None:
    data = _json(LEAF_SPINE_400G, "--compare-modes", "--paths", "flow", "--workload",
                 "alltoall", "--size", "4MB")  # fmt: skip
    assert [(r["mode"], r["paths"]) for r in data["rows"]] == [
        ("lossless", "flow"), ("lossy-trim", "flow"),
    ]  # fmt: skip
    assert not data["notes"]


def test_compare_modes_table() -> None:
    code, out, err = _run(INCAST_400G, "--compare-modes", "--senders", "4", "--duration", "50us")
    assert code == 0, err
    assert "lossy-trim" in out and "recommended:" in out and "NICs:" in out


# (arguments, the option the message names)
BAD_CASES: list[tuple[list[str], str]] = [
    (["--compare-modes", "--plot", "q.png"], "--plot"),
    (["--compare-modes", "--mode", "lossless"], "--mode"),
    (["--compare-modes", "--workload", "allreduce", "--show-placement"], "--show-placement"),
    (["--mode", "lossy-trim", "--recovery", "go-back-n"], "--recovery"),
    (["--paths", "spray", "--recovery", "go-back-n"], "--recovery"),
    (["--mode", "lossy"], "--mode"),
    (["--paths", "random"], "--paths"),
]


@pytest.mark.parametrize(("args", "option"), BAD_CASES)
def test_bad_combinations_exit_2_naming_the_option(args: list[str], option: str) -> None:
    code, out, err = _run(INCAST_400G, "--duration", "20us", *args)
    assert code == 2, out
    assert option in err


def test_compare_modes_of_a_job_file(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yml"
    jobs.write_text(
        "jobs:\n"
        "  - {name: train, hosts: ['h[1-4]'], collective: allreduce, size: 4MB}\n"
        "  - {name: moe, hosts: ['h[5-8]'], collective: alltoall, size: 4MB}\n"
    )
    data = _json(INCAST_400G, "--compare-modes", "--job", str(jobs))
    assert [(r["mode"], r["paths"], r["job"]) for r in data["rows"]] == [
        ("lossless", "flow", "train"), ("lossless", "flow", "moe"),
        ("lossless", "spray", "train"), ("lossless", "spray", "moe"),
        ("lossy-trim", "spray", "train"), ("lossy-trim", "spray", "moe"),
    ]  # fmt: skip
    # Each job its own completion times and trims (not the run's): the two jobs differ.
    trim = [r for r in data["rows"] if r["mode"] == "lossy-trim"]
    assert trim[0]["completion_p99_s"] != trim[1]["completion_p99_s"]
    assert data["workload"] == "--job jobs.yml"
    assert all(r["completed"] for r in data["rows"])

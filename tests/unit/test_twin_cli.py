"""``roce-agent twin``: output shapes, exit codes and located errors (click's CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.twin import twin_command
from tests.unit.twin_fabrics import LAB_LEAFSPINE, POD_400G


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(twin_command, list(args))
    return result.exit_code, result.stdout, result.stderr


# (arguments, exit code, what the JSON says)
JSON_CASES: list[tuple[list[str], int, dict[str, Any]]] = [
    ([str(POD_400G), "--senders", "4", "--duration", "300us"], 0, {"scenario": "incast"}),
    (
        [str(POD_400G), "--scenario", "all-to-all", "--senders", "3", "--duration", "200us"],
        0,
        {"scenario": "all-to-all"},
    ),
    (
        [str(POD_400G), "--scenario", "victim", "--senders", "2", "--duration", "200us"],
        0,
        {"scenario": "victim"},
    ),
    # The lab's 10 Mb/s ports stand for 1 Gb/s (time_dilation 100): the twin runs that fabric.
    ([str(LAB_LEAFSPINE), "--senders", "2", "--duration", "5ms"], 0, {"speed_bps": 1_000_000_000}),
    # NICs with DCQCN off: CNPs arrive (ECN marks), no rate is ever cut.
    (
        [str(POD_400G), "--senders", "4", "--duration", "200us", "--no-dcqcn", "--payload", "1024"],
        0,
        {
            "cnps_received": lambda n: n > 0,
            "flows": lambda fl: all(f["rate_cuts"] == 0 for f in fl),
        },
    ),
    # Senders that ignore PFC overrun the headroom: a lossless drop is exit 1.
    (
        [str(POD_400G), "--senders", "8", "--duration", "200us", "--senders-ignore-pause"],
        1,
        {"passed": False},
    ),
]


@pytest.mark.parametrize(("args", "code", "expect"), JSON_CASES)
def test_json(args: list[str], code: int, expect: dict[str, object]) -> None:
    exit_code, out, err = _run(*args, "--output", "json")
    assert exit_code == code, err
    data = json.loads(out)
    for key, value in expect.items():
        assert value(data[key]) if callable(value) else data[key] == value, (key, data[key])
    assert data["lossless_drops"] == 0 if code == 0 else data["lossless_drops"] > 0
    assert len(data["series"]["t_s"]) == len(data["series"]["queue_bytes"]) > 10
    assert {"ports", "flows", "jain", "converge_s", "ce_fraction", "cnps_sent"} <= set(data)


def test_table() -> None:
    exit_code, out, err = _run(str(LAB_LEAFSPINE), "--senders", "2", "--duration", "0.5s")
    assert exit_code == 0, err
    for text in ("lossless drops", "PFC frames sent", "Jain fairness", "ports", "flows"):
        assert text in out


# (arguments, what the one-line error names)
ERROR_CASES = [
    ([str(POD_400G), "--duration", "0"], "--duration"),
    ([str(POD_400G), "--duration", "soon"], "--duration"),
    ([str(POD_400G), "--duration", "11s"], "--duration"),
    ([str(POD_400G), "--senders", "64"], "Expected: >= 65"),
    ([str(POD_400G), "--senders", "65"], "--senders"),
    ([str(POD_400G), "--speed", "100G"], "no host NIC at 100G. Expected: one of 400G"),
    ([str(POD_400G), "--speed", "fast"], "--speed"),
    ([str(POD_400G), "--plot", "out.txt"], ".png or .svg"),
    (["does-not-exist.yml"], "does-not-exist.yml"),
    ([str(POD_400G), "--scenario", "victim", "--senders", "60"], "Expected: >= 60"),
]


@pytest.mark.parametrize(("args", "needle"), ERROR_CASES)
def test_errors_are_one_located_line(args: list[str], needle: str) -> None:
    exit_code, out, err = _run(*args)
    assert exit_code == 2
    assert needle in err
    assert "Traceback" not in err + out


def test_bad_fabric_is_located(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(POD_400G.read_text().replace("speed: 400G", "speed: 400Q", 1))
    exit_code, _, err = _run(str(bad))
    assert exit_code == 2
    assert f"{bad}:" in err and "speed" in err


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"twin{suffix}"
    exit_code, _, err = _run(
        str(POD_400G), "--senders", "2", "--duration", "200us", "--plot", str(target)
    )
    assert exit_code == 0, err
    head = target.read_bytes()[:64]
    assert (
        head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in target.read_bytes()[:2000]
    )


def test_plot_into_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "twin.png"
    exit_code, _, err = _run(str(POD_400G), "--duration", "100us", "--plot", str(target))
    assert exit_code == 2
    assert str(target) in err and "cannot write" in err

"""``tune --modes lossless,lossy-trim`` (issue #47, item 5): the same tune once per RoCE mode,
side by side, with :func:`agent.twin.compare.recommend`'s recommendation and what switching
needs; the default (the fabric's own mode) is today's tune, its output as it was.

Small real runs in the twin: the 16:1 incast of ``tests/data/twin/incast-400g.yml`` at 1 ms
(lossless pauses, lossy-trim trims) and a 4-rank all-reduce of 1 MiB on it (no congestion: a
tie), four ECN settings on the grid, one seed: about 2 s each.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from agent.app.tune import tune_command
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.twin.compare import ModeRow, recommend
from agent.twin.network import with_mode
from agent.twin.tune.fabric import host_facing_ports, trim_limit
from agent.twin.tune.modes import parse_modes

FABRIC = Path(__file__).parents[1] / "data" / "twin" / "incast-400g.yml"
SMALL = ["--method", "grid", "--candidates", "4", "--seeds", "1", "--no-dcqcn", "--no-progress"]
# The incast: lossless pauses, lossy-trim trims; constraints opened so both modes decide.
INCAST = [*SMALL, "--objective", "queue", "--scenario", "incast", "--senders", "16",
          "--duration", "1ms", "--min-utilisation", "0", "--min-jain", "0",
          "--max-paused", "100"]  # fmt: skip
ALLREDUCE = [*SMALL, "--qps", "1", "--ranks", "4", "--size", "1MiB"]
BOTH = ["--modes", "lossless,lossy-trim"]


def _tune(*args: str, fabric: Path = FABRIC) -> Any:
    return CliRunner().invoke(tune_command, [str(fabric), *args])


JOB_FILE = "jobs:\n  - {name: train, hosts: [h1, h2, h3, h4], collective: allreduce, size: 1MiB}\n"


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each job's ``tune --modes lossless,lossy-trim -o json``: the incast, the all-reduce
    and a job file's job (tune --job)."""
    job = tmp_path_factory.mktemp("job") / "jobs.yml"
    job.write_text(JOB_FILE)
    out = {}
    cases = (("incast", INCAST), ("allreduce", ALLREDUCE),
             ("job", [*SMALL, "--qps", "1", "--job", str(job)]))  # fmt: skip
    for name, options in cases:
        result = _tune(*options, *BOTH, "-o", "json")
        assert result.exit_code == 0, result.output
        out[name] = json.loads(result.stdout)
    return out


def _rows(data: dict[str, Any]) -> list[ModeRow]:
    return [ModeRow(**entry["row"]) for entry in data["modes"]]


@pytest.mark.parametrize("job", ["incast", "allreduce", "job"])
def test_json_shape(compared: dict[str, dict[str, Any]], job: str) -> None:
    data = compared[job]
    assert [m["mode"] for m in data["modes"]] == ["lossless", "lossy-trim"]
    for key in ("recommended_mode", "reason", "support", "notes", "override", "apply",
                "override_file", "fabric_mode"):  # fmt: skip
        assert key in data, key
    for entry in data["modes"]:
        assert set(entry) == {"mode", "settings", "row", "tune"}
        assert entry["settings"].startswith("ECN ")
        assert entry["tune"]["speeds"][0]["stages"][0]["trials"]
    assert data["fabric_mode"] == "lossless"
    assert data["support"]["switches_cannot"] == []  # one SONiC leaf: it trims
    assert "NAK" in data["support"]["nics"]
    # Both modes on the same (per-flow) paths: the difference is the mode's, and a note says so.
    assert any(note.startswith("both modes ran on flow paths") for note in data["notes"])


@pytest.mark.parametrize(
    ("job", "mode", "paths", "recovery"),
    [
        ("incast", "lossless", "flow", "go-back-n"),
        ("incast", "lossy-trim", "flow", "selective-repeat"),
        ("allreduce", "lossless", "flow", "go-back-n"),
        ("allreduce", "lossy-trim", "flow", "selective-repeat"),
        ("job", "lossless", "flow", "go-back-n"),
        ("job", "lossy-trim", "flow", "selective-repeat"),
    ],
)
def test_each_mode_ran_in_its_mode(
    compared: dict[str, dict[str, Any]], job: str, mode: str, paths: str, recovery: str
) -> None:
    row = next(r for r in _rows(compared[job]) if r.mode == mode)
    assert (row.paths, row.recovery) == (paths, recovery)
    assert row.completed
    if mode == "lossy-trim":
        assert row.pfc_frames == 0
        assert row.max_paused_fraction == 0.0
        tune = next(m["tune"] for m in compared[job]["modes"] if m["mode"] == mode)
        trials = tune["speeds"][0]["stages"][0]["trials"]
        assert all(r["paused_fraction"] == 0.0 for t in trials for r in t["runs"])
    else:
        assert row.trimmed == row.retransmitted == 0


def test_incast_pauses_lossless_and_trims_lossy(compared: dict[str, dict[str, Any]]) -> None:
    rows = {r.mode: r for r in _rows(compared["incast"])}
    assert rows["lossless"].pfc_frames > 0
    assert rows["lossy-trim"].trimmed > 0
    assert rows["lossy-trim"].retransmitted >= rows["lossy-trim"].trimmed
    assert rows["lossless"].goodput_Gbps is not None and rows["lossless"].busbw_GBps is None


@pytest.mark.parametrize("job", ["incast", "allreduce", "job"])
def test_recommendation_is_compares_rule(compared: dict[str, dict[str, Any]], job: str) -> None:
    data = compared[job]
    assert (data["recommended_mode"], data["reason"]) == recommend(_rows(data))


def test_lossy_trim_caps_ecn_at_the_trim_limit(compared: dict[str, dict[str, Any]]) -> None:
    """In lossy-trim the queue's limit, where trimming starts, stands for the pause threshold:
    no ECN candidate's max goes above it."""
    intent = with_mode(load_fabric(FABRIC).intent, "lossy-trim")
    _, port = next(host_facing_ports(build_plan(intent), 400_000_000_000))
    limit = trim_limit(port)
    tune = compared["incast"]["modes"][1]["tune"]
    assert tune["speeds"][0]["pause_threshold_bytes"] == limit
    searched = [t for t in tune["speeds"][0]["stages"][0]["trials"] if not t["current"]]
    assert searched and all(t["ecn"]["max_bytes"] < limit for t in searched)


def test_write_override_carries_the_recommended_mode(tmp_path: Path) -> None:
    """The incast's winner is lossy-trim: the override sets mode and trim, and the fabric with
    that block loads in lossy-trim with the decided ECN."""
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(FABRIC.read_text())
    out = tmp_path / "tuned.yml"
    result = _tune(*INCAST, *BOTH, "--write-override", str(out), fabric=fabric)
    assert result.exit_code == 0, result.output
    assert "recommended mode: lossy-trim" in result.stdout
    assert "switches (RoCE class lossy-trim" in result.stdout
    written = yaml.safe_load(out.read_text())["overrides"]
    assert written["mode"] == "lossy-trim"
    assert set(written["trim"]) == {"size_bytes", "dscp", "priority"}
    assert "# RoCE mode lossy-trim (tune --modes: lossy-trim has" in out.read_text()
    data = yaml.safe_load(FABRIC.read_text())
    data["overrides"] = written
    fabric.write_text(yaml.safe_dump(data, sort_keys=False))
    profile = load_fabric(fabric).intent.profile
    assert profile.mode == "lossy-trim"
    decided = written["ecn"]["queues"][profile.roce.priority]["max_threshold"]
    assert profile.ecn.queues[profile.roce.priority].max_threshold == decided


def _without_wall_time(text: str) -> str:
    return re.sub(r"wall time [0-9.]+ s", "wall time", text)


# The JSON keys of a tune as it was before --modes (the top level and one run).
TUNE_KEYS = {"fabric", "profile", "scenario", "objective", "dcqcn_searched", "duration_s",
             "seeds", "objectives", "dominant_speed", "complete", "decision", "override",
             "qps_per_connection", "runs", "wall_s", "notes", "speeds", "override_file",
             "apply"}  # fmt: skip
RUN_KEYS = {"seed", "utilisation", "paused_fraction", "queue_p99_bytes", "queue_peak_bytes",
            "ce_fraction", "lossless_drops", "pause_threshold_bytes", "bottleneck", "events",
            "wall_s", "paused_fraction_whole", "senders", "jain", "busbw_Bps", "duration_s",
            "completed", "ranks", "utilisation_whole", "bound_fraction", "job_busbw",
            "goodput_fraction"}  # fmt: skip


def test_default_is_todays_tune() -> None:
    """No --modes, or the fabric's own mode alone: the tune as it was (its JSON keys as
    before; the same table, but the wall time). Checked against the last commit's code by
    hand (docs/tune.md, "Lossless or trimming?")."""
    plain = _tune(*ALLREDUCE)
    own = _tune(*ALLREDUCE, "--modes", "lossless")
    assert plain.exit_code == own.exit_code == 0
    assert _without_wall_time(plain.stdout) == _without_wall_time(own.stdout)
    assert "mode" not in plain.stdout
    data = json.loads(_tune(*ALLREDUCE, "-o", "json").stdout)
    assert set(data) == TUNE_KEYS
    run = data["speeds"][0]["stages"][0]["trials"][0]["runs"][0]
    assert set(run) == RUN_KEYS


# The lab check's options beside a mode other than the fabric's.
FINALISTS = [*BOTH, "--objective", "queue", "--write-finalists", "f.yml"]
CALIBRATED = ["--modes", "lossy-trim", "--objective", "queue", "--min-goodput", "90",
              "--calibration", "x.json"]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--modes", "lossless,lossy"], "'--modes'"),
        (["--modes", "lossless,lossless"], "each mode once"),
        (["--modes", ""], "'--modes'"),
        (FINALISTS, "tune --write-finalists: Expected: --modes lossless alone"),
        (CALIBRATED, "tune --calibration: Expected: --modes lossless"),
    ],
)
def test_bad_input_names_the_option(args: list[str], says: str) -> None:
    result = _tune(*args)
    assert result.exit_code == 2, result.output
    assert says in result.output


@pytest.mark.parametrize(
    ("text", "modes"),
    [
        ("lossless", ("lossless",)),
        ("lossy-trim,lossless", ("lossy-trim", "lossless")),
        (" lossless , lossy-trim ", ("lossless", "lossy-trim")),
    ],
)
def test_parse_modes(text: str, modes: tuple[str, ...]) -> None:
    assert parse_modes(text) == modes

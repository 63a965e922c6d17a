"""The lab check's margin: tune's goodput floor in the lab check's terms, raised by the twin's
error a lab check measured (``--calibration``), and the finalists it measures it on."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from agent.app.cli import main
from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.ops.playbooks import load_playbook
from agent.ops.sweep import read_candidates, sweep_candidates
from agent.twin.network import ROCE_FRAME_OVERHEAD, TwinError, build_network, star_fabric_yaml
from agent.twin.tune.calibration import read_calibration
from agent.twin.tune.judge import evaluate, misses
from agent.twin.tune.objectives import Objectives
from agent.twin.tune.results import RunMetrics
from agent.twin.tune.runs import Job, run_candidate

REPO = Path(__file__).resolve().parents[2]
LAB_FABRIC = REPO / "playbooks" / "fabrics" / "lab-leafspine.yml"
# The demo's search at a quarter of its run time: the default grid, fine enough for several
# settings to clear a 90 % goodput floor.
SEARCH = ["--objective", "queue", "--senders", "2", "--payload", "1000", "--duration", "10ms",
          "--seeds", "1", "--no-progress", "--min-goodput", "90", "-o", "json"]  # fmt: skip
QUEUE = ["--objective", "queue", "--senders", "2", "--payload", "1000", "--duration", "4ms",
         "--candidates", "4", "--seeds", "1", "--no-progress"]  # fmt: skip


def row(
    name: str, lab: float, twin: float, low: int = 2124, probability: int = 100
) -> dict[str, Any]:
    """A row of an ecn_sweep's report as the sweep writes it (the fields the margin reads)."""
    return {"name": name, "label": f"{low}-4248 B @{probability} %", "goodput_fraction": lab,
            "min_threshold": low, "max_threshold": 4248, "max_probability": probability,
            "dcqcn": {"rpg_time_reset": 20, "rpg_ai_rate": 4},
            "twin": {"goodput_fraction": twin, "paused_fraction": 0.0}}  # fmt: skip


def report(tmp_path: Path, rows: list[Any], name: str = "a") -> Path:
    path = tmp_path / f"{name}.json"
    steps = [{"name": "calibrate", "kind": "ecn_sweep", "status": "success",
              "detail": {"candidates": rows}}]  # fmt: skip
    path.write_text(json.dumps({"playbook": "cal", "fabric": "roce-leafspine", "steps": steps}))
    return path


KEY_100 = (2124, 4248, 100, (("rpg_ai_rate", 4), ("rpg_time_reset", 20)))
MARGINS = [
    # (rows, the margin elsewhere, the first row's own, why)
    ([row("finalist 1", 0.884, 0.914), row("finalist 2", 0.912, 0.916, probability=20),
      row("finalist 3", 0.914, 0.919, low=2500)], 0.005, 0.030,
     "one setting's low tail is its own; elsewhere the median error"),
    ([row("finalist 1", 0.920, 0.913), row("finalist 2", 0.915, 0.900, probability=20)], 0.0,
     0.0, "a twin below the lab everywhere: its own number is the safer one"),
    ([row("finalist 1", 0.910, 0.914), row("current", 0.775, 0.701, low=6000)], 0.0, 0.004,
     "a pessimistic row lowers the median, never below zero"),
]  # fmt: skip


@pytest.mark.parametrize(("rows", "margin", "own", "why"), MARGINS)
def test_each_checked_setting_takes_its_own_error_and_the_rest_the_median(
    tmp_path: Path, rows: list[Any], margin: float, own: float, why: str
) -> None:
    calibration = read_calibration([report(tmp_path, rows)], "roce-leafspine")
    assert calibration.margin == pytest.approx(margin), why
    objectives = Objectives(min_goodput=0.9, goodput_margin=calibration.margin,
                            measured=calibration.by_setting())  # fmt: skip
    assert objectives.for_setting(KEY_100).goodput_margin == pytest.approx(own), why
    elsewhere = objectives.for_setting((3000, 9000, 100, ()))
    assert elsewhere.goodput_margin == pytest.approx(margin) and not elsewhere.at_setting, why
    assert all(r["name"] in calibration.describe() for r in rows), why


def test_several_reports_are_read_together(tmp_path: Path) -> None:
    first = report(tmp_path, [row("finalist 1", 0.91, 0.912)], name="one")
    second = report(tmp_path, [row("finalist 1", 0.90, 0.915)], name="two")
    calibration = read_calibration([first, second], "roce-leafspine")
    assert calibration.margin == pytest.approx(0.0085)  # the median of +0.2 and +1.5
    assert dict(calibration.by_setting())[KEY_100] == pytest.approx(0.015)  # its largest
    assert "one.json, two.json" in calibration.describe()


BAD_REPORTS = [
    # (file content, what the error says, why)
    ("{not json", "a JSON report", "a torn file"),
    ("[1, 2]", "a JSON object", "not an object"),
    (json.dumps({"fabric": "roce-leafspine", "steps": []}), "ecn_sweep",
     "a report without a sweep"),
    (json.dumps({"fabric": "other", "steps": []}), "fabric roce-leafspine Actual: fabric other",
     "another fabric's check"),
    (json.dumps({"fabric": "roce-leafspine", "steps": [{"kind": "ecn_sweep", "detail": {
        "candidates": [{"name": "x", "goodput_fraction": "high", "twin": {}}]}}]}),
     "ecn_sweep", "rows without numbers"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "says", "why"), BAD_REPORTS)
def test_a_bad_calibration_names_the_file(
    tmp_path: Path, content: str, says: str, why: str
) -> None:
    path = tmp_path / "check.json"
    path.write_text(content)
    with pytest.raises(TwinError) as caught:
        read_calibration([path], "roce-leafspine")
    assert str(path) in str(caught.value) and says in str(caught.value), why


def metrics(goodput: float | None, seed: int = 1) -> RunMetrics:
    return RunMetrics(
        seed=seed, utilisation=1.0, paused_fraction=0.0, queue_p99_bytes=6000,
        queue_peak_bytes=13000, ce_fraction=0.2, lossless_drops=0, pause_threshold_bytes=30000,
        bottleneck="leaf2:Ethernet8", events=1, wall_s=0.1, senders=2, jain=0.99,
        utilisation_whole=0.99, goodput_fraction=goodput,
    )  # fmt: skip


JUDGED = [
    # (goodput of the two seeds, floor, margin, missed, why)
    ((0.917, 0.919), None, 0.0, False, "no floor: not judged"),
    ((0.917, 0.919), 0.90, 0.0, False, "above the floor in every seed"),
    ((0.917, 0.899), 0.90, 0.0, True, "the worst seed decides"),
    ((0.917, 0.912), 0.90, 0.010, False, "clears the floor by the margin"),
    ((0.917, 0.912), 0.90, 0.015, True, "clears the floor, not by the margin"),
    ((0.917, 0.912), 0.90, 0.021, True, "above the floor but not by the twin's error"),
    ((None, None), 0.90, 0.0, False, "no receiver measured (all-to-all): nothing to judge"),
]  # fmt: skip


@pytest.mark.parametrize(("goodput", "floor", "margin", "missed", "why"), JUDGED)
def test_the_goodput_floor_with_its_margin(
    goodput: tuple[float | None, float | None],
    floor: float | None,
    margin: float,
    missed: bool,
    why: str,
) -> None:
    objectives = Objectives(min_goodput=floor, goodput_margin=margin)
    runs = [metrics(goodput[0], seed=1), metrics(goodput[1], seed=2)]
    found = [m for m in misses(runs, objectives) if m.constraint == "goodput"]
    assert bool(found) == missed, why
    if found:
        (miss,) = found
        text = evaluate(runs, objectives)[0]
        assert miss.run.seed == 2 and "seed 2" in text, why
        assert ("error measured" in text) == bool(margin), why


def test_the_header_states_the_floor_and_the_margin() -> None:
    assert "goodput" not in Objectives().describe()
    text = Objectives(min_goodput=0.9, goodput_margin=0.012).describe()
    assert "goodput >= 90.0 % + 1.2 % (the twin's measured error)" in text


@pytest.mark.parametrize("draw", range(6))
def test_goodput_is_the_bottleneck_wire_rate_less_the_headers(draw: int) -> None:
    """Two readings of one run that share no code: the receiver's goodput (whole frames
    delivered in order, their payload) and the port facing it (wire bits sent, preamble and
    gap included). On a one-switch incast that port carries only the receiver's frames, so
    goodput = utilisation x payload / (payload + 82), less what is still on the last cable
    -- on payloads, sender counts, speeds and seeds drawn at random."""
    rng = random.Random(4000 + draw)
    senders = rng.randint(2, 6)
    payload = rng.choice((256, 512, 1000, 1500, 2048, 4096))
    speed = rng.choice(("25G", "100G"))
    fabric = load_fabric_text(star_fabric_yaml(senders + 1, speed))
    network = build_network(fabric)
    job = Job(fabric, "incast", senders, network.hosts["h1"].port.speed_bps, 2e-3,
              rng.randint(1, 1000), 3, payload_bytes=payload)  # fmt: skip
    measured = run_candidate(job, network, 30000)
    assert measured.goodput_fraction is not None and measured.utilisation_whole is not None
    expected = measured.utilisation_whole * payload / (payload + ROCE_FRAME_OVERHEAD + 20)
    frame_share = (payload + ROCE_FRAME_OVERHEAD) * 8 / (job.speed_bps * job.duration_s)
    assert expected - 3 * frame_share <= measured.goodput_fraction <= expected + 1e-9


def load_fabric_text(text: str) -> Any:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as handle:
        handle.write(text)
    path = Path(handle.name)
    try:
        return load_fabric(path).intent
    finally:
        path.unlink()


def test_the_finalists_file_is_a_lab_checks_candidates(tmp_path: Path) -> None:
    """tune --write-finalists writes what an ecn_sweep's ``candidates:`` reads back: the same
    settings, in the ranking's order, found beside the playbook."""
    finalists = tmp_path / "finalists.yml"
    args = [*QUEUE, "--min-goodput", "80", "--write-finalists", str(finalists), "-o", "json"]
    done = CliRunner().invoke(main, ["tune", str(LAB_FABRIC), *args])
    assert done.exit_code == 0, done.output
    tuned = json.loads(done.stdout)
    listed = read_candidates(finalists)
    assert 1 <= len(listed) <= 3
    assert str(listed[0].name).startswith("finalist 1")
    trials = {t["index"]: t for t in tuned["speeds"][0]["stages"][-1]["trials"]}
    first = trials[tuned["speeds"][0]["recommended"]]
    assert (listed[0].min_threshold, listed[0].max_threshold) == (
        first["ecn"]["min_bytes"], first["ecn"]["max_bytes"])  # fmt: skip
    playbook = tmp_path / "calibrate.yml"
    playbook.write_text(yaml.safe_dump({"name": "cal", "steps": [
        {"ecn_sweep": {"candidates": "finalists.yml", "repeats": 3}}]}))  # fmt: skip
    spec = load_playbook(playbook).steps[0].ecn_sweep
    assert spec is not None
    tried, _ = sweep_candidates(spec, load_fabric(LAB_FABRIC).intent, "h3")
    assert [c.label() for c in tried] == [c.label() for c in listed]


def test_a_bad_finalists_file_names_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "finalists.yml").write_text(
        "candidates:\n- {min_threshold: 2KB, max_threshold: 4KB}\n"
        "- {min_threshold: 2KB, max_threshold: 4KB, dcqcn: {rpg_time_rest: 3}}\n"
    )
    playbook = tmp_path / "calibrate.yml"
    playbook.write_text(yaml.safe_dump({"name": "cal", "steps": [
        {"ecn_sweep": {"candidates": "finalists.yml"}}]}))  # fmt: skip
    with pytest.raises(IntentError) as caught:
        load_playbook(playbook)
    text = "\n".join(str(p) for p in caught.value.problems)
    assert f"{tmp_path / 'finalists.yml'}:3" in text and "rpg_time_rest" in text


REFUSED = [
    # (options, the option the error names, why)
    (["--min-goodput", "90"], "--min-goodput", "the collective objective has no receiver"),
    (["--objective", "queue", "--scenario", "all-to-all", "--min-goodput", "90"],
     "--min-goodput", "all-to-all has many receivers"),
    (["--objective", "queue", "--calibration", "x.json"], "--calibration",
     "a margin without the floor it raises"),
    (["--objective", "queue", "--min-goodput", "90", "--calibration", "nowhere.json"],
     "nowhere.json", "a missing report"),
    (["--write-finalists", "f.yml"], "--write-finalists", "finalists of a collective"),
    (["--objective", "queue", "--min-goodput", "101"], "--min-goodput", "above 100 %"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "named", "why"), REFUSED)
def test_refused_before_the_search(
    tmp_path: Path, options: list[str], named: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["tune", str(LAB_FABRIC), *options])
    assert done.exit_code == 2, (why, done.output)
    assert named in done.output, why
    assert not (tmp_path / "f.yml").exists(), why


def test_a_margin_no_candidate_clears_exits_1_and_says_so(tmp_path: Path) -> None:
    """A measured error of 5 points above a 90 % floor: no 1000-byte incast reaches 95 %
    goodput (the wire holds 92.4 %), so no recommendation, exit 1, the margin named."""
    calibration = report(tmp_path, [row("finalist 1", 0.87, 0.92)])
    override = tmp_path / "override.yml"
    args = [*QUEUE, "--min-goodput", "90", "--calibration", str(calibration),
            "--write-override", str(override)]  # fmt: skip
    done = CliRunner().invoke(main, ["tune", str(LAB_FABRIC), *args])
    assert done.exit_code == 1, done.output
    assert "goodput margin 5.0 %" in done.output and "measured error" in done.output
    assert not override.exists()


def test_a_setting_the_lab_read_low_is_not_picked_again(tmp_path: Path) -> None:
    """The demo's first fresh run: the lab read tune's pick 3 points under the twin, and two
    other settings within half a point. The pick is then held to its own error and rejected
    for it (named), and tune picks another setting the margin elsewhere lets through."""
    first = json.loads(CliRunner().invoke(main, ["tune", str(LAB_FABRIC), *SEARCH]).stdout)
    trials = {t["index"]: t for t in first["speeds"][0]["stages"][-1]["trials"]}
    pick = trials[first["speeds"][0]["recommended"]]
    others = [t for t in trials.values() if t["feasible"] and t is not pick][:2]
    assert others, "the search needs two more settings that meet the floor"

    def measured(name: str, trial: dict[str, Any], over: float) -> dict[str, Any]:
        twin = trial["goodput_fraction_worst"]
        return {**row(name, twin - over, twin), "min_threshold": trial["ecn"]["min_bytes"],
                "max_threshold": trial["ecn"]["max_bytes"],
                "max_probability": trial["ecn"]["max_probability"],
                "dcqcn": trial["dcqcn"]}  # fmt: skip

    rows = [measured("finalist 1", pick, 0.03)]
    rows += [measured(f"finalist {i}", t, 0.003) for i, t in enumerate(others, 2)]
    args = [*SEARCH, "--calibration", str(report(tmp_path, rows))]
    again = json.loads(CliRunner().invoke(main, ["tune", str(LAB_FABRIC), *args]).stdout)
    after = {t["index"]: t for t in again["speeds"][0]["stages"][-1]["trials"]}
    assert again["speeds"][0]["recommended"] not in (None, pick["index"])
    assert any("measured at this setting" in r for r in after[pick["index"]]["reasons"])


def test_a_checks_row_that_names_every_dcqcn_value_is_the_same_setting(tmp_path: Path) -> None:
    """The lab check's ``recommended`` row lists every DCQCN value the hosts ran (the fabric's
    and the override's); tune's candidate lists only the ones it changes. Both are read over the
    fabric's own values, so they are one setting and the row's error is the candidate's."""
    from agent.app.tune import fabric_dcqcn

    base = fabric_dcqcn(load_fabric(LAB_FABRIC).intent)
    assert dict(base)["rpg_time_reset"] == 55  # the lab fabric's own, which the pick changes
    changed = {"rpg_time_reset": 20, "rpg_ai_rate": 4, "rpg_hai_rate": 20}
    everything = {**row("recommended", 0.884, 0.914), "dcqcn": {**dict(base), **changed}}
    calibration = read_calibration([report(tmp_path, [everything])], "roce-leafspine", base)
    objectives = Objectives(min_goodput=0.9, goodput_margin=0.0,
                            measured=calibration.by_setting(), dcqcn_base=base)  # fmt: skip
    candidate = (2124, 4248, 100, tuple(sorted(changed.items())))
    assert objectives.for_setting(candidate).goodput_margin == pytest.approx(0.030)
    other = (2124, 4248, 100, (("rpg_time_reset", 30),))
    assert not objectives.for_setting(other).at_setting

"""The daemon's shard (`serve --shard K/N`, `shard:` in agent.yaml) and playbooks per shard:
bad values exit 2 naming the flag or FILE:LINE, the flag wins over the file and survives a
reload, every switch is in exactly one shard's reconcile and playbook, and every probe runs
in exactly one shard. Against real switches: tests/lab/test_fleet_prometheus.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.app.daemon import Daemon
from agent.app.daemon_config import load_config
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.intent.shard import WHOLE, Shard, shard_index
from agent.ops.playbooks import Playbook, PlaybookRunner, ProbeSpec
from tests.unit.problems import the_one_problem

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "playbooks" / "fabrics" / "pod-400g.yml"


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_FABRIC_PASSWORD", "x")  # pod-400g's credentials: only checked


@pytest.fixture(scope="module")
def intent() -> FabricIntent:
    return load_fabric(FABRIC).intent


def write_config(folder: Path, shard_line: str = "") -> Path:
    config = folder / "agent.yaml"
    config.write_text(
        f"fabric: {FABRIC}\nstate_dir: {folder / 'state'}\n{shard_line}exporter: null\n"
    )
    return config


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", WHOLE),
        ("shard: 1/1\n", WHOLE),
        ("shard: 2/3\n", Shard(2, 3)),
        ("shard: ' 4 / 4 '\n", Shard(4, 4)),
    ],
)
def test_shard_in_agent_yaml(tmp_path: Path, line: str, expected: Shard) -> None:
    assert load_config(write_config(tmp_path, line)).shard == expected


@pytest.mark.parametrize(
    ("value", "actual"),
    [
        ("0/2", "Actual: 0/2"),
        ("3/2", "Actual: 3/2"),
        ("1/0", "Actual: 1/0"),
        ("1/5000", "Actual: 1/5000"),
        ("two/four", "Actual: 'two/four'"),
        ("2", "Actual: 2"),  # an int to YAML
        ("''", "Actual: ''"),
        ("[1, 2]", "Actual: [1, 2]"),
    ],
)
def test_bad_shard_in_agent_yaml_names_file_line_and_field(
    tmp_path: Path, value: str, actual: str
) -> None:
    config = write_config(tmp_path, f"shard: {value}\n")
    problem = the_one_problem(load_config, config, 3)
    assert problem.field == "shard"
    assert "Expected: K/N" in problem.message and actual in problem.message

    # The command: exit 2, one line with FILE:LINE, no traceback.
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"{config}:3" in result.output and "shard" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", ["0/2", "3/2", "x", "1/", "/2", "-1/2"])
def test_bad_shard_flag_exits_2_naming_the_flag(tmp_path: Path, value: str) -> None:
    config = write_config(tmp_path)
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--shard", value])
    assert result.exit_code == 2, result.output
    assert "--shard" in result.output and "Expected: K/N" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "state").exists()  # refused before the daemon started


def test_the_flag_wins_over_the_file_and_survives_reloads(tmp_path: Path) -> None:
    config = write_config(tmp_path, "shard: 1/2\n")
    daemon = Daemon(config, load_config(config).with_shard(Shard(2, 2)), Shard(2, 2))
    assert daemon.loaded.shard == Shard(2, 2)
    config.write_text(config.read_text().replace("shard: 1/2", "shard: 1/3"))
    daemon.do_reload()
    assert daemon.reload_ok, daemon.reload_error
    assert daemon.loaded.shard == Shard(2, 2)

    # Without the flag, a reload takes the file's new value.
    plain = Daemon(config, load_config(config))
    config.write_text(config.read_text().replace("shard: 1/3", "shard: 3/3"))
    plain.do_reload()
    assert plain.reload_ok and plain.loaded.shard == Shard(3, 3)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_every_switch_in_exactly_one_shard_of_the_daemon_and_the_playbooks(
    tmp_path: Path, intent: FabricIntent, count: int
) -> None:
    switches = [d.name for d in intent.devices if d.role != "host"]
    config = write_config(tmp_path)
    owned: list[list[str]] = []
    for index in range(1, count + 1):
        loaded = load_config(config).with_shard(Shard(index, count))
        runner = PlaybookRunner(loaded.intent, tmp_path, shard=loaded.shard)
        assert [d.name for d in runner.switches] == loaded.owned_switches()
        owned.append(loaded.owned_switches())
    flat = [name for names in owned for name in names]
    assert sorted(flat) == sorted(switches)  # the union is the fabric, nothing twice


SCENARIOS = [
    ProbeSpec(scenario="pairwise"),
    ProbeSpec(scenario="incast"),
    ProbeSpec.model_validate({"scenario": "incast", "to": "gpu07", "from": ["gpu33"]}),
    ProbeSpec(scenario="storm"),
    ProbeSpec(scenario="storm", host="gpu33"),
]


@pytest.mark.parametrize("count", [2, 3, 4])
@pytest.mark.parametrize("spec", SCENARIOS, ids=lambda s: f"{s.scenario}-{s.to}-{s.host}")
def test_each_probe_runs_in_exactly_one_shard(
    tmp_path: Path, intent: FabricIntent, count: int, spec: ProbeSpec
) -> None:
    playbook = Playbook(name="p", steps=[{"probe": spec.model_dump(by_alias=True)}])
    runners = [PlaybookRunner(intent, tmp_path, shard=Shard(i, count)) for i in range(1, count + 1)]
    target = runners[0]._probe_target(spec)
    owners = [r for r in runners if r.shard.owns_probe(target)]
    assert len(owners) == 1 and owners[0].shard.index == shard_index(target, count)
    for runner in runners:
        if runner is owners[0]:
            continue
        # A shard that does not own the probe skips it without sending a frame (the lab is
        # not running here: sending would fail, not be skipped).
        report = runner.run(playbook)
        (step,) = report.steps
        assert step.status == "skipped", step
        assert step.detail == {"target": target, "owner": f"{owners[0].shard}"}
        assert report.passed and not report.probes


@pytest.mark.parametrize("count", [2, 3])
def test_locate_runs_in_exactly_one_shard(tmp_path: Path, intent: FabricIntent, count: int) -> None:
    """locate reads every switch and probes every host pair: one shard runs it, the shard of
    the mesh's first host; the others skip it without a frame sent or a switch read."""
    playbook = Playbook(name="l", steps=[{"locate": {"duration_s": 1}}])
    runners = [PlaybookRunner(intent, tmp_path, shard=Shard(i, count)) for i in range(1, count + 1)]
    anchor = runners[0]._probe_target(ProbeSpec(scenario="pairwise"))
    owner = f"{shard_index(anchor, count)}/{count}"
    skipped = []
    for runner in runners:
        if runner.shard.owns_probe(anchor):
            continue
        (step,) = runner.run(playbook).steps
        assert (step.kind, step.status) == ("locate", "skipped"), step
        assert step.detail == {"target": anchor, "owner": owner}
        skipped.append(str(runner.shard))
    assert len(skipped) == count - 1 and owner not in skipped


def test_scheduled_playbook_given_as_a_path_reports_under_its_name(
    tmp_path: Path, intent: FabricIntent
) -> None:
    """A daemon of a shard that does not own the probe: the step is skipped (no frame sent),
    and the report lands in reports/last-<playbook name>.json with the shard in it."""
    target = intent.devices[-1].name if intent.devices[-1].role == "host" else None
    assert target is not None
    count = 3
    shard = next(Shard(i, count) for i in range(1, count + 1) if not Shard(i, count).owns(target))
    playbook = tmp_path / "my playbooks" / "storm.yml"
    playbook.parent.mkdir()
    playbook.write_text(
        f"name: night-storm\nsteps:\n  - probe: {{scenario: storm, host: {target}}}\n"
    )
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"fabric: {FABRIC}\nstate_dir: {tmp_path / 'state'}\nexporter: null\n"
        f"shard: {shard}\nplaybooks: [{{name: '{playbook}', every_s: 60}}]\n"
    )
    daemon = Daemon(config, load_config(config))
    daemon.run_playbook(str(playbook))
    report = json.loads((tmp_path / "state" / "reports" / "last-night-storm.json").read_text())
    assert report["shard"] == str(shard) and report["passed"]
    (step,) = report["steps"]
    assert step["status"] == "skipped"
    assert step["detail"] == {"target": target, "owner": f"{shard_index(target, count)}/{count}"}


@pytest.mark.parametrize(
    ("names", "status", "error"),
    [
        ("others", "success", None),  # another shard's switches: theirs to apply, skipped here
        (["no-such-switch"], "error", "no device named 'no-such-switch'"),
    ],
)
def test_apply_by_name_acts_on_the_shards_own_switches_only(
    tmp_path: Path, intent: FabricIntent, names: Any, status: str, error: str | None
) -> None:
    shard = Shard(1, 3)
    switches = [d.name for d in intent.devices if d.role != "host"]
    if names == "others":
        names = [n for n in switches if not shard.owns(n)][:3]
    playbook = Playbook(name="p", steps=[{"apply": {"devices": names}}])
    report = PlaybookRunner(intent, tmp_path, shard=shard).run(playbook)
    (step,) = report.steps
    assert step.status == status, step
    if error is None:
        assert step.detail == {} and not report.applied  # nothing connected, nothing pushed
    else:
        assert error in step.detail["error"]

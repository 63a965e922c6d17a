"""A fleet of two agents over one lab fabric, scraped by the real Prometheus through file_sd
with the shipped recording rules loaded: every switch is served by exactly one target, the
union is the whole fabric, and the fabric-wide recording rules equal the sum over the shards.

Run twice: with two daemons (`serve --shard 1/2` on the command line, `shard: 2/2` in the
other's agent.yaml; each reconciles only its own switches) and with two standalone
exporters (`exporter --shard K/N`), so both ways of deploying compute the same split.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.intent.shard import Shard
from tests.lab.support.labs import PASSWORD_ENV, REPO, Lab, LabFactory, requires_lab
from tests.lab.support.prometheus import query, run_prometheus, stop

pytestmark = [
    pytest.mark.lab,
    pytest.mark.lab_parallel,
    requires_lab,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed"),
]
RECORDING = REPO / "exporters" / "alerts" / "roce.recording.yml"
SHARDS = (Shard(1, 2), Shard(2, 2))
CONVERGE_S = 40.0
# The daemons' scheduled playbook: collect and checks on the shard's switches, and one
# incast whose receiver (h3) only one shard owns.
PLAYBOOK = {
    "name": "fleet",
    "steps": [
        {"collect": {"counters": False}},
        {"probe": {"scenario": "incast", "to": "h3", "from": ["h1"], "duration_s": 1},
         "stop_on_failure": False},
        {"checks": {"ids": "all"}},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    return module_labs.start("fl")


def check_playbook_report(agent: Agent, own: list[str], switches: list[str]) -> None:
    """The scheduled playbook checked the shard's switches only, and ran the incast only in
    the shard of its receiver (h3); the other shard reports it skipped, naming the owner."""
    assert agent.state_dir is not None
    path = agent.state_dir / "reports" / "last-fleet.json"
    deadline = time.monotonic() + 45
    while not path.exists():
        assert time.monotonic() < deadline, agent.log.read_text()[-3000:]
        time.sleep(0.5)
    report = json.loads(path.read_text())
    assert report["shard"] == str(agent.shard)
    checked = {c["device"] for c in report["checks"]} & set(switches)
    assert checked == set(own), (checked, own)
    probe = next(s for s in report["steps"] if s["kind"] == "probe")
    if agent.shard.owns_probe("h3"):
        assert probe["status"] != "skipped" and len(report["probes"]) == 1, probe
    else:
        owning = next(s for s in SHARDS if s.owns_probe("h3"))
        assert probe["status"] == "skipped" and not report["probes"], probe
        assert probe["detail"] == {"target": "h3", "owner": str(owning)}


@dataclass
class Agent:
    shard: Shard
    process: subprocess.Popen[bytes]
    log: Path
    state_dir: Path | None  # a daemon's; None for a standalone exporter
    target: str = ""  # HOST:PORT, from the agent's own log (it listens on port 0)

    def wait_for_target(self, timeout: float = 30) -> str:
        """The address the agent bound, as its start line says: no free-port race with the
        other tests on this machine."""
        deadline = time.monotonic() + timeout
        while not self.target:
            found = re.search(r"http://(127\.0\.0\.1:[0-9]+)/metrics", self.log.read_text())
            if found:
                self.target = found.group(1)
                break
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.2)
        return self.target


def start_agent(kind: str, shard: Shard, fabric: Path, folder: Path) -> Agent:
    folder.mkdir(parents=True, exist_ok=True)
    state_dir = None
    if kind == "serve":
        state_dir = folder / "state"
        config: dict[str, Any] = {
            "fabric": str(fabric),
            "mode": "observe",
            "state_dir": str(state_dir),
            "exporter": {"listen": "127.0.0.1:0", "poll_interval_s": 1},
            "intervals": {"reconcile_s": 3600},  # one reconcile, at start
            "playbooks": [{"name": str(folder / "fleet.yml"), "every_s": 3600}],
        }
        (folder / "fleet.yml").write_text(yaml.safe_dump(PLAYBOOK))
        flag: list[str] = ["--shard", str(shard)]
        if shard.index == 2:  # the other way to say it: in agent.yaml
            config["shard"] = str(shard)
            flag = []
        (folder / "agent.yaml").write_text(yaml.safe_dump(config))
        argv = ["serve", "--config", str(folder / "agent.yaml"), *flag]
    else:
        argv = ["exporter", str(fabric), "--listen", "127.0.0.1:0",
                "--interval", "1s", "--no-host-nic", "--shard", str(shard)]  # fmt: skip
    log = folder / "agent.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, PASSWORD_ENV: "admin"},
        )
    return Agent(shard, process, log, state_dir)


def start_prometheus(folder: Path, targets: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    # The shipped rules, evaluated every second instead of every 30 s.
    rules = folder / "roce.recording.yml"
    rules.write_text(re.sub(r"interval: \d+s", "interval: 1s", RECORDING.read_text()))
    sd = folder / "targets" / "roce-agents.yml"
    sd.parent.mkdir()
    sd.write_text(yaml.safe_dump([{"targets": targets}]))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {"job_name": "roce-fleet", "file_sd_configs": [{"files": [str(sd)]}]},
        ],
    }
    return run_prometheus(config, folder)


def values(url: str, expr: str, *by: str) -> dict[tuple[str, ...], float]:
    """{label values: value} of an instant query (empty while Prometheus is not up yet)."""
    try:
        rows = query(url, expr)
    except OSError:
        return {}
    return {tuple(r["metric"].get(k, "") for k in by): float(r["value"][1]) for r in rows}


@dataclass
class Fleet:
    """The two shards' agents, scraped by the Prometheus at ``url``."""

    url: str
    agents: list[Agent]
    intent: FabricIntent
    switches: list[str]  # sorted
    expected: dict[int, list[str]]  # shard index -> the switches it owns

    def values(self, expr: str, *by: str) -> dict[tuple[str, ...], float]:
        return values(self.url, expr, *by)


@pytest.mark.parametrize("kind", ["serve", "exporter"])
def test_two_shards_cover_the_fabric_once_and_the_recording_rules_add_them_up(
    lab: Lab, tmp_path: Path, kind: str
) -> None:
    fabric = Path(lab.status["fabric_file"])
    intent = load_fabric(fabric).intent
    switches = sorted(d.name for d in intent.devices if d.role != "host")
    expected = {s.index: s.select(switches) for s in SHARDS}
    assert all(expected.values()), f"a lab shard would be empty: {expected}"
    agents = [start_agent(kind, s, fabric, tmp_path / f"shard{s.index}") for s in SHARDS]
    prometheus: subprocess.Popen[bytes] | None = None
    try:
        prometheus, url = start_prometheus(tmp_path, [a.wait_for_target() for a in agents])
        fleet = Fleet(url, agents, intent, switches, expected)
        _every_switch_by_exactly_the_target_of_its_shard(fleet)
        _each_target_says_its_shard_and_what_it_owns(fleet)
        _fabric_wide_rules_are_the_sum_of_the_shards(fleet)
        if kind == "serve":
            for agent in agents:
                _the_daemon_reconciled_its_own_switches_only(fleet, agent)
    finally:
        if prometheus is not None:
            stop(prometheus)
        for agent in agents:
            stop(agent.process)


def _converged(
    fleet: Fleet,
) -> tuple[dict[tuple[str, ...], float], dict[tuple[str, ...], float]]:
    """The switch -> target map Prometheus sees, and how many targets serve each, once every
    switch is up there."""
    deadline = time.monotonic() + CONVERGE_S
    while True:
        for agent in fleet.agents:
            assert agent.process.poll() is None, agent.log.read_text()[-3000:]
        served = fleet.values("roce_device_up == 1", "device", "instance", "fabric")
        owners = fleet.values("fabric_device:roce_device_up:count", "device", "fabric")
        if sorted(d for d, *_ in served) == fleet.switches and len(owners) == len(fleet.switches):
            return served, owners
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not converged in {CONVERGE_S:g} s: up {served}, owners {owners}\n"
                + "\n".join(a.log.read_text()[-1500:] for a in fleet.agents)
            )
        time.sleep(0.5)


def _every_switch_by_exactly_the_target_of_its_shard(fleet: Fleet) -> None:
    """Every switch by exactly one target, the one of its shard; the union is the fabric."""
    served, owners = _converged(fleet)
    owner = {a.target: a.shard.index for a in fleet.agents}
    assert fleet.values("count by (device) (roce_device_up)", "device") == {
        (d,): 1.0 for d in fleet.switches
    }
    for device, instance, label in served:
        assert device in fleet.expected[owner[instance]], (device, instance)
        assert label == fleet.intent.name  # contract 1: every roce_* series has fabric
    assert set(owners.values()) == {1.0}
    assert {fabric_label for _, fabric_label in owners} == {fleet.intent.name}


def _each_target_says_its_shard_and_what_it_owns(fleet: Fleet) -> None:
    infos = fleet.values("roce_exporter_shard_info", "instance", "shard")
    assert infos == {(a.target, str(a.shard)): 1.0 for a in fleet.agents}
    # roce_exporter_devices counts the fabric devices a shard owns, hosts included.
    devices = [d.name for d in fleet.intent.devices]
    owned = fleet.values("roce_exporter_devices", "instance")
    assert owned == {(a.target,): float(len(a.shard.select(devices))) for a in fleet.agents}


def _fabric_wide_rules_are_the_sum_of_the_shards(fleet: Fleet) -> None:
    name = fleet.intent.name
    for rule, per_target in [
        ("fabric:roce_device_up:sum", "sum by (instance) (roce_device_up)"),
        ("fabric:roce_exporter_devices:sum", "sum by (instance) (roce_exporter_devices)"),
        ("fabric:roce_exporter_shards:count", "count by (instance) (roce_exporter_shard_info)"),
    ]:
        shards = _once_the_rule_is_the_sum(fleet, rule, per_target)
        assert set(shards) == {(a.target,) for a in fleet.agents}, (per_target, shards)
    assert fleet.values("fabric:roce_device_up:sum", "fabric") == {
        (name,): float(len(fleet.switches))
    }
    assert fleet.values("fabric:roce_exporter_devices:sum", "fabric") == {
        (name,): float(len(fleet.intent.devices))
    }
    # A rate rule over the shards' counters has a fabric-wide series too.
    # (a rate needs two scrapes of the counter and an evaluation after them).
    settle = time.monotonic() + 15
    while not fleet.values("fabric:roce_pfc_frames:rate5m", "fabric"):
        raw = fleet.values("count by (instance) (roce_pfc_frames_total)", "instance")
        assert time.monotonic() < settle, f"no fabric PFC rate; raw series {raw}"
        time.sleep(0.5)


def _once_the_rule_is_the_sum(fleet: Fleet, rule: str, per_target: str) -> dict[Any, float]:
    """The shards' own values once ``rule`` records their sum (a rule records at its
    evaluation, up to a second behind the raw series)."""
    settle = time.monotonic() + 10
    while True:
        shards = fleet.values(per_target, "instance")
        recorded = fleet.values(rule, "fabric")
        if recorded == {(fleet.intent.name,): sum(shards.values())}:
            return shards
        assert time.monotonic() < settle, (rule, recorded, shards)
        time.sleep(0.5)


def _the_daemon_reconciled_its_own_switches_only(fleet: Fleet, agent: Agent) -> None:
    assert agent.state_dir is not None
    own = fleet.expected[agent.shard.index]
    summary = agent.state_dir / "last-reconcile.json"
    wait_until = time.monotonic() + 30
    while not summary.exists() and time.monotonic() < wait_until:
        time.sleep(0.5)
    reconciled = json.loads(summary.read_text())
    assert reconciled["shard"] == str(agent.shard)
    devices = sorted(d["device"] for d in reconciled["devices"])
    assert devices == own  # its own switches only
    started = next(
        json.loads(line)
        for line in agent.log.read_text().splitlines()
        if line.startswith("{") and json.loads(line)["message"] == "started"
    )
    assert started["shard"] == str(agent.shard)
    assert started["owned"] == [d.name for d in fleet.intent.devices if d.name in own]
    check_playbook_report(agent, own, fleet.switches)

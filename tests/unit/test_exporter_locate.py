"""Locate verdicts in the exporter (issue #15): `roce_locate_*` series from the latest run only,
suspect labels that can only be names of the fabric, bad verdicts refused whole, both
renderers byte for byte, the daemon feeding its `locate` step, and the RoceLocateSuspect cases
catching the blind spots they exist for.

Verdicts come from the real join (`agent.observe.locate.rank.locate`) over the lab's leaf-spine
fabric with
recorded-style symptoms, rendered by the real `agent.observe.locate.gather.as_json`: the exporter
reads
exactly what the `locate` step produces. Against the lab: tests/lab/test_locate_lab.py."""

from __future__ import annotations

import copy
import math
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agent.device.state import Difference
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.observe.locate.counters import PortSymptoms
from agent.observe.locate.evidence import PathResult
from agent.observe.locate.gather import LocateRun, as_json
from agent.observe.locate.rank import locate
from agent.observe.locate.topology import Topology
from exporters import metrics
from exporters.collector import RoceCollector
from exporters.fasttext import render_text
from exporters.store import SnapshotStore, StoreError
from tests.unit.test_exporter_artifacts import change, needs_promtool, promtool_suite

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"
NAME = "roce-leafspine"
LOCATE_FAMILIES = (
    "roce_locate_suspect",
    "roce_locate_last_run_timestamp_seconds",
    "roce_locate_paths",
    "roce_locate_bad_paths",
)


@pytest.fixture(scope="module")
def intent() -> FabricIntent:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")  # only checked, never used here
    return load_fabric(FABRIC).intent


@pytest.fixture
def store(intent: FabricIntent) -> SnapshotStore:
    return SnapshotStore.for_fabric(intent)


def path(src: str, dst: str, sport: int, links: tuple[str, ...], lost: int = 0) -> PathResult:
    return PathResult(src, dst, sport, links, 200, 200 - lost, 0, 0.1, ())


# Two paths h1 -> h3, one per spine; and h2 -> h4 the same way.
PATHS = (
    ("h1", "h3", 49152, ("h1>leaf1", "leaf1:Ethernet1>spine1", "spine1:Ethernet2>leaf2",
                         "leaf2:Ethernet3>h3")),
    ("h1", "h3", 49153, ("h1>leaf1", "leaf1:Ethernet2>spine2", "spine2:Ethernet2>leaf2",
                         "leaf2:Ethernet3>h3")),
    ("h2", "h4", 49152, ("h2>leaf1", "leaf1:Ethernet1>spine1", "spine1:Ethernet2>leaf2",
                         "leaf2:Ethernet4>h4")),
    ("h2", "h4", 49153, ("h2>leaf1", "leaf1:Ethernet2>spine2", "spine2:Ethernet2>leaf2",
                         "leaf2:Ethernet4>h4")),
)  # fmt: skip


def verdict(
    topology: Topology,
    lossy: str | None = None,
    ports: tuple[PortSymptoms, ...] = (),
    differences: tuple[Difference, ...] = (),
) -> dict[str, Any]:
    """``as_json`` of a run whose paths through ``lossy`` lost 30 of 200 probes."""
    results = [
        path(src, dst, sport, links, lost=30 if lossy in links else 0)
        for src, dst, sport, links in PATHS
    ]
    found = locate(topology, results, list(ports), list(differences), duration_s=5.0)
    return as_json(LocateRun(found, results, 7.5, {"probes": 5.0}))


def series(text: str) -> dict[str, float]:
    """``name{label=value,...}`` (fabric left out, labels sorted) -> value, locate families."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("roce_locate_"):
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "fabric")
            assert sample.labels["fabric"] == NAME
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def exposition(store: SnapshotStore) -> str:
    registry = CollectorRegistry()
    registry.register(RoceCollector(store))
    return generate_latest(registry).decode()


def suspects(text: str) -> dict[str, float]:
    return {k: v for k, v in series(text).items() if k.startswith("roce_locate_suspect{")}


# --------------------------------------------------------------------------- the series

# One row per suspect kind: the evidence, and the suspect locate must rank first.
KINDS: list[tuple[str, dict[str, Any], tuple[str, str]]] = [
    (
        "link (directed, from the paths)",
        # Lost on spine1:Ethernet2>leaf2; leaf1:Ethernet1>spine1 lies on exactly the same
        # paths, so the probes cannot tell them apart (both are named, at lower confidence).
        {"lossy": "spine1:Ethernet2>leaf2"},
        ("link", "leaf1:Ethernet1>spine1"),
    ),
    (
        "link (directed, FCS errors on the receiving port)",
        {"ports": (PortSymptoms("spine1", "Ethernet1", up=True, fcs_errors=40),)},
        ("link", "leaf1:Ethernet1>spine1"),
    ),
    (
        "link (a cable that is down)",
        {"ports": (PortSymptoms("leaf2", "Ethernet2", up=False),)},
        ("link", "leaf2:Ethernet2<>spine2:Ethernet2"),
    ),
    (
        "port (configuration read back differs)",
        {"differences": (Difference("leaf1", "Ethernet3", "qos trust", "dscp", "cos"),)},
        ("port", "leaf1:Ethernet3"),
    ),
    (
        "switch (a switch-wide setting differs)",
        {"differences": (Difference("spine2", "", "dscp map 26", "tc 3", "tc 1"),)},
        ("switch", "spine2"),
    ),
    (
        "host-nic (a storming NIC: pauses into its leaf port)",
        {"ports": (PortSymptoms("leaf2", "Ethernet4", up=True, pfc_rx=5000, storms=1),)},
        ("host-nic", "h4"),
    ),
]


@pytest.mark.parametrize(("kind", "evidence", "first"), KINDS, ids=[k[0] for k in KINDS])
def test_each_suspect_kind_becomes_one_series_with_its_confidence(
    intent: FabricIntent,
    store: SnapshotStore,
    kind: str,
    evidence: dict[str, Any],
    first: tuple[str, str],
) -> None:
    found = verdict(Topology.from_intent(intent), **evidence)
    assert (found["suspects"][0]["kind"], found["suspects"][0]["element"]) == first, found
    store.update_locate(found, at=1700000000.0)
    text = exposition(store)
    got = series(text)
    assert suspects(text) == {
        f"roce_locate_suspect{{element={s['element']},kind={s['kind']}}}": s["confidence"]
        for s in found["suspects"]
    }
    assert got["roce_locate_last_run_timestamp_seconds{}"] == 1700000000.0
    assert got["roce_locate_paths{}"] == found["paths"] == len(PATHS)
    assert got["roce_locate_bad_paths{}"] == found["bad_paths"]
    # The fast renderer the server uses writes exactly what prometheus_client writes.
    assert render_text(store.snapshot()).decode() == text


def test_absent_until_the_first_run(store: SnapshotStore) -> None:
    assert series(exposition(store)) == {}
    assert "roce_locate_" not in render_text(store.snapshot()).decode()


def test_only_the_latest_run_is_served(intent: FabricIntent, store: SnapshotStore) -> None:
    """A suspect the next run no longer names loses its series; a clean run leaves none,
    while its paths and time are served (a verdict of "nothing wrong" is a verdict)."""
    topology = Topology.from_intent(intent)
    two = verdict(
        topology,
        ports=(
            PortSymptoms("spine1", "Ethernet1", up=True, fcs_errors=40),
            PortSymptoms("leaf2", "Ethernet4", up=True, pfc_rx=5000, storms=1),
        ),
    )
    store.update_locate(two, at=100.0)
    assert set(suspects(exposition(store))) == {
        "roce_locate_suspect{element=leaf1:Ethernet1>spine1,kind=link}",
        "roce_locate_suspect{element=h4,kind=host-nic}",
    }
    one = verdict(
        topology, ports=(PortSymptoms("leaf2", "Ethernet4", up=True, pfc_rx=5000, storms=1),)
    )
    store.update_locate(one, at=200.0)
    assert set(suspects(exposition(store))) == {"roce_locate_suspect{element=h4,kind=host-nic}"}
    clean = verdict(topology)
    assert not clean["fault_found"] and clean["summary"].startswith("no fault found")
    store.update_locate(clean, at=300.0)
    assert series(exposition(store)) == {
        "roce_locate_last_run_timestamp_seconds{}": 300.0,
        "roce_locate_paths{}": 4.0,
        "roce_locate_bad_paths{}": 0.0,
    }


def test_every_element_the_fabric_defines_is_accepted(
    intent: FabricIntent, store: SnapshotStore
) -> None:
    topology = Topology.from_intent(intent)
    names = {
        "link": sorted({*topology.links, *(link.cable for link in topology.links.values())}),
        "port": [f"{d.name}:{p.name}" for d in intent.devices if d.role != "host" for p in d.ports],
        "switch": [d.name for d in intent.devices if d.role != "host"],
        "host-nic": sorted(topology.hosts),
        "host": sorted(topology.hosts),
    }
    # 16 directed links and their 8 cables, 12 switch ports, 4 switches, 4 hosts (twice).
    assert [len(v) for v in names.values()] == [24, 12, 4, 4, 4]
    listed = [
        {"kind": kind, "element": element, "confidence": 0.5}
        for kind, elements in names.items()
        for element in elements
    ]
    store.update_locate({"paths": 8, "bad_paths": 8, "suspects": listed})
    assert len(suspects(exposition(store))) == 48


def test_an_element_named_twice_is_one_series_at_its_highest_confidence(
    store: SnapshotStore,
) -> None:
    twice = [
        {"kind": "port", "element": "leaf1:Ethernet3", "confidence": 0.5},
        {"kind": "port", "element": "leaf1:Ethernet3", "confidence": 0.95},
        {"kind": "switch", "element": "leaf1", "confidence": 0.4},
    ]
    store.update_locate({"paths": 4, "bad_paths": 2, "suspects": twice})
    assert suspects(exposition(store)) == {
        "roce_locate_suspect{element=leaf1:Ethernet3,kind=port}": 0.95,
        "roce_locate_suspect{element=leaf1,kind=switch}": 0.4,
    }


# --------------------------------------------------------------------------- bad verdicts


def good() -> dict[str, Any]:
    return {
        "fault_found": True,
        "paths": 4,
        "bad_paths": 2,
        "suspects": [
            {"rank": 1, "kind": "link", "element": "h1>leaf1", "confidence": 0.9},
            {"rank": 2, "kind": "port", "element": "leaf1:Ethernet3", "confidence": 0.5},
        ],
    }


def edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    result = good()
    change(result)
    return result


def suspect(index: int, field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def set_it(result: dict[str, Any]) -> None:
        result["suspects"][index][field] = value

    return set_it


def top(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def set_it(result: dict[str, Any]) -> None:
        result[field] = value

    return set_it


def drop(field: str) -> Callable[[dict[str, Any]], None]:
    return lambda result: result.pop(field)


def both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def set_all(result: dict[str, Any]) -> None:
        for one in changes:
            one(result)

    return set_all


ELEMENT = "suspects[1].element: Expected: "
BAD: list[tuple[str, Any, str]] = [
    ("not an object", ["h1>leaf1"], "locate result: Expected: a JSON object"),
    ("paths missing", edit(drop("paths")), "locate result paths: Expected: a count"),
    (
        "paths negative",
        edit(top("paths", -1)),
        "paths: Expected: a count (an integer >= 0). Actual: -1",
    ),
    ("paths a bool", edit(top("paths", True)), "paths: Expected: a count"),
    ("paths a float", edit(top("paths", 4.5)), "paths: Expected: a count"),
    (
        "bad paths over paths",
        edit(top("bad_paths", 5)),
        "bad_paths: Expected: at most paths (4). Actual: 5",
    ),
    ("suspects missing", edit(drop("suspects")), "suspects: Expected: a list. Actual: None"),
    ("suspects an object", edit(top("suspects", {"a": 1})), "suspects: Expected: a list"),
    (
        "a suspect not an object",
        edit(top("suspects", [1])),
        "suspects[0]: Expected: an object. Actual: 1",
    ),
    (
        "unknown kind",
        edit(suspect(1, "kind", "cable")),
        "suspects[1].kind: Expected: one of link, port, switch, host-nic, host. Actual: 'cable'",
    ),
    (
        "kind missing",
        edit(lambda r: r["suspects"][1].pop("kind")),
        "suspects[1].kind: Expected: one of",
    ),
    (
        "element not in the fabric",
        edit(suspect(1, "element", "leaf9:Ethernet3")),
        ELEMENT
        + "a switch port (leaf1:Ethernet3) of fabric roce-leafspine. Actual: 'leaf9:Ethernet3'",
    ),
    (
        "element in the lab's spelling",
        edit(suspect(1, "element", "leaf1:eth3")),
        ELEMENT + "a switch port",
    ),
    (
        "a port given as a link",
        edit(suspect(1, "kind", "link")),
        ELEMENT + "a directed link (leaf1:Ethernet3>spine1, h1>leaf1) or a cable",
    ),
    (
        "a host given as a switch",
        edit(both(suspect(1, "kind", "switch"), suspect(1, "element", "h1"))),
        ELEMENT + "a switch name",
    ),
    (
        "a switch given as a host NIC",
        edit(both(suspect(1, "kind", "host-nic"), suspect(1, "element", "leaf1"))),
        ELEMENT + "a host name",
    ),
    (
        "a link the fabric lacks",
        edit(suspect(0, "element", "leaf1:Ethernet1>spine2")),
        "suspects[0].element: Expected: a directed link",
    ),
    ("an address", edit(suspect(0, "element", "198.18.0.1")), "Actual: '198.18.0.1'"),
    ("free text", edit(suspect(0, "element", "x" * 500 + "\n")), "Actual: 'xxxxx"),
    ("element not a string", edit(suspect(0, "element", ["h1>leaf1"])), "Actual: ['h1>leaf1']"),
    (
        "confidence above 1",
        edit(suspect(0, "confidence", 1.5)),
        "suspects[0].confidence: Expected: a number from 0 to 1. Actual: 1.5",
    ),
    (
        "confidence negative",
        edit(suspect(0, "confidence", -0.1)),
        "confidence: Expected: a number from 0 to 1",
    ),
    ("confidence nan", edit(suspect(0, "confidence", math.nan)), "Actual: nan"),
    ("confidence a string", edit(suspect(0, "confidence", "0.9")), "Actual: '0.9'"),
    ("confidence a bool", edit(suspect(0, "confidence", True)), "Actual: True"),
    ("confidence missing", edit(lambda r: r["suspects"][0].pop("confidence")), "Actual: None"),
]


@pytest.mark.parametrize(("case", "result", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_verdict_is_refused_whole_naming_the_field(
    store: SnapshotStore, case: str, result: Any, message: str
) -> None:
    store.update_locate(good(), at=50.0)
    before = store.snapshot()
    served = exposition(store)
    with pytest.raises(StoreError) as raised:
        store.update_locate(copy.deepcopy(result), at=60.0)
    text = str(raised.value)
    assert message in text, text
    assert "\n" not in text and len(text) < 300, text  # one line, however long the input
    # Nothing changed: the previous verdict is still the one served.
    assert store.snapshot() is before
    assert exposition(store) == served


def test_a_store_without_the_fabric_refuses_every_suspect() -> None:
    bare = SnapshotStore(NAME, [])
    with pytest.raises(StoreError, match=r"suspects\[0\]\.element: Expected: a directed link"):
        bare.update_locate(good())
    bare.update_locate({"paths": 0, "bad_paths": 0, "suspects": []})  # a verdict without names
    assert series(exposition(bare))["roce_locate_paths{}"] == 0


def test_the_series_are_documented_with_bounded_kinds() -> None:
    for name in LOCATE_FAMILIES:
        assert metrics.BY_NAME[name].type == "gauge"
    assert metrics.BY_NAME["roce_locate_suspect"].labels == ("fabric", "kind", "element")
    assert metrics.LOCATE_KINDS == ("link", "port", "switch", "host-nic", "host")
    assert "`kind` (locate suspects): link, port, switch, host-nic, host" in metrics.markdown()


# --------------------------------------------------------------------------- the daemon


def test_the_daemon_feeds_its_locate_step_to_the_exporter(
    tmp_path: Path, intent: FabricIntent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_playbook` of playbooks/locate.yml: a verdict reaches /metrics; a run that errors
    keeps the previous verdict (its timestamp ages and the alert's freshness gate judges it).
    The probing itself is replaced here (no lab): the lab test runs it for real."""
    import agent.observe.locate.gather
    from agent.app.daemon import Daemon, EmbeddedExporter
    from agent.app.daemon_config import ExporterConfig, load_config

    config = tmp_path / "agent.yaml"
    config.write_text(
        f"fabric: {FABRIC}\nstate_dir: {tmp_path / 'state'}\nexporter: null\n"
        "playbooks: [{name: locate, every_s: 600}]\n"
    )
    loaded = load_config(config)
    daemon = Daemon(config, loaded)
    daemon.exporter = EmbeddedExporter.build(loaded, ExporterConfig(), daemon)
    topology = Topology.from_intent(intent)
    runs: list[Any] = [
        PortSymptoms("leaf2", "Ethernet4", up=True, pfc_rx=5000, storms=1),
        AgentError("h1: cannot probe"),
    ]

    def fake_run_locate(intent_: FabricIntent, **_: Any) -> LocateRun:
        step = runs.pop(0)
        if isinstance(step, Exception):
            raise step
        found = locate(topology, [], [step], duration_s=5.0)
        return LocateRun(found, [], 1.0, {})

    monkeypatch.setattr(agent.observe.locate.gather, "run_locate", fake_run_locate)
    daemon.run_playbook("locate")
    served = daemon.exporter.text().decode()
    assert 'roce_locate_suspect{element="h4",fabric="roce-leafspine",kind="host-nic"} 0.9' in (
        served
    )
    kept = daemon.exporter.exporter.store.snapshot().locate
    assert kept is not None
    daemon.run_playbook("locate")  # the step errors
    report = (tmp_path / "state" / "reports" / "last-locate.json").read_text()
    assert '"status": "error"' in report, report
    assert daemon.exporter.exporter.store.snapshot().locate is kept
    assert series(daemon.exporter.text().decode()) == series(served)


# --------------------------------------------------------------------------- the alert


def freshness_gate_removed(expr: str) -> str:
    return expr.split("and on", 1)[0]


MUTANTS = [
    ("stale-while-down", "no freshness gate", change("RoceLocateSuspect", freshness_gate_removed)),
    (
        "lossy-class",
        "any confidence alerts",
        change("RoceLocateSuspect", lambda e: e.replace(">= 0.5", "> 0")),
    ),
    (
        "stale-while-down",
        "silenced while a switch is down",
        change(
            "RoceLocateSuspect",
            lambda e: e + " unless on (fabric) roce_device_up == 0",
        ),
    ),
    (
        "exporter-start",
        "the verdict read over a window",
        change(
            "RoceLocateSuspect",
            lambda e: e.replace(
                'roce_locate_suspect{job="roce-fabric"}',
                'max_over_time(roce_locate_suspect{job="roce-fabric"}[10m])',
            ).replace(
                'roce_locate_last_run_timestamp_seconds{job="roce-fabric"}',
                'max_over_time(roce_locate_last_run_timestamp_seconds{job="roce-fabric"}[10m])',
            ),
        ),
    ),
]


@needs_promtool
@pytest.mark.parametrize(("case", "mutant", "mutate"), MUTANTS, ids=[m[1] for m in MUTANTS])
def test_the_cases_catch_each_blind_spot(
    tmp_path: Path, case: str, mutant: str, mutate: Callable[[dict[str, Any]], None]
) -> None:
    suite = promtool_suite(tmp_path, mutate) / "RoceLocateSuspect.yml"
    done = subprocess.run(["promtool", "test", "rules", str(suite)], capture_output=True, text=True)
    assert done.returncode != 0, f"with {mutant}: every case still passes"
    failed = set(re.findall(r"name: ([a-z-]+):", done.stdout + done.stderr))
    assert case in failed, (mutant, failed, done.stdout[-2000:])

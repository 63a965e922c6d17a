"""bench/locate.py and datasets/locate/score.py (#30): the seeded matrix draw, how a trial
runs locate (adaptive when it can, fixed otherwise, faults always removed), the record schema
of the published data set, and the metrics and goals computed from it."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import AgentError
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent
from agent.observe.locate.evidence import HopProbe, PathResult
from agent.observe.locate.gather import LocateRun
from agent.observe.locate.topology import Topology
from agent.observe.locate.verdict import Suspect, Verdict
from lab import faults as lab_faults
from lab.fault_registry import FaultError

REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "tests" / "data" / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("locate_bench", REPO / "bench" / "locate.py")
score = bench.score


@pytest.fixture(scope="module")
def intent() -> FabricIntent:
    os.environ.setdefault("ROCE_LAB_PASSWORD", "unused")
    return load_fabric(FABRIC).intent


@pytest.fixture(scope="module")
def topology(intent: FabricIntent) -> Topology:
    return Topology.from_intent(intent)


# --------------------------------------------------------------------------- the draw


def test_every_direction_kind_has_the_lab_s_four_links(
    intent: FabricIntent, topology: Topology
) -> None:
    found = bench.directions(intent)
    assert {k: len(v) for k, v in found.items()} == dict.fromkeys(bench.DIRECTIONS, 4)
    assert ("h1>leaf1", "h1>leaf1") in found["host>leaf"]
    assert ("spine2:eth2>leaf2", "spine2:Ethernet2>leaf2") in found["spine>leaf"]
    for kind, links in found.items():
        for _, element in links:  # locate's own link name, of the right direction kind
            link = topology.links[element]
            roles = {d.name: d.role for d in intent.devices}
            assert f"{roles[link.tx[0]]}>{roles[link.rx[0]]}" == kind


def test_the_matrix_covers_each_rate_and_direction_kind_once_per_trial(
    intent: FabricIntent,
) -> None:
    trials = bench.draw(intent, ("loss", "corrupt", "latency"), 1, seed=7, no_fault=2)
    cells = Counter((t.kind, t.rate, t.direction) for t in trials)
    expected = {(k, r, d): 1 for k in ("loss", "corrupt") for r in bench.RATES
                for d in bench.DIRECTIONS}  # fmt: skip
    # The lab delays a switch's egress: latency has no host>leaf cell.
    expected |= {("latency", None, d): 1 for d in bench.DIRECTIONS if d != "host>leaf"}
    expected[("none", None, None)] = 2
    assert dict(cells) == expected
    for trial in trials:
        if trial.rate is not None:
            assert trial.params["percent"] == trial.rate and trial.params["seed"] >= 1
        assert (trial.expected is None) == (trial.kind == "none")


@pytest.mark.parametrize(("trials", "distinct"), [(1, 1), (3, 3), (4, 4), (6, 4)])
def test_no_repeat_in_a_cell_while_the_pool_lasts(
    intent: FabricIntent, trials: int, distinct: int
) -> None:
    drawn = bench.draw(intent, ("loss",), trials, seed=3, rates=(2.0,), no_fault=0)
    for direction in bench.DIRECTIONS:
        targets = [t.target for t in drawn if t.direction == direction]
        assert len(targets) == trials and len(set(targets)) == distinct


def test_the_draw_is_seeded(intent: FabricIntent) -> None:
    kinds = bench.KINDS
    assert bench.draw(intent, kinds, 2, seed=1) == bench.draw(intent, kinds, 2, seed=1)
    assert bench.draw(intent, kinds, 2, seed=1) != bench.draw(intent, kinds, 2, seed=2)


def test_every_drawn_fault_is_one_the_lab_accepts(intent: FabricIntent, topology: Topology) -> None:
    """Parameters and the target's form as ``lab fault add`` checks them (without a lab)."""
    forms = {lab_faults.LINK: lab_faults.PORT}
    for trial in bench.draw(intent, bench.KINDS, 4, seed=11):
        if trial.kind == "none":
            continue
        lab_faults.check_parameters(trial.kind, trial.params)
        spec = lab_faults.KINDS[trial.kind]
        assert lab_faults._target_form(trial.target) == forms.get(spec.target, spec.target)
        kind, element = trial.expected  # named as locate names it
        cables = {link.cable for link in topology.links.values()}
        ports = {f"{link.tx[0]}:{link.tx[1]}" for link in topology.links.values()}
        named = {"link": set(topology.links) | cables, "port": ports, "host-nic": topology.hosts,
                 "host": topology.hosts}  # fmt: skip
        assert element in named[kind], trial


def test_latency_on_a_host_s_sending_would_be_refused_by_the_lab() -> None:
    """Why the matrix has no latency host>leaf cell: the lab delays a switch's egress."""
    request = SimpleNamespace(
        direction=SimpleNamespace(src=SimpleNamespace(node="h1"), dst="leaf1:eth3"),
        wiring=SimpleNamespace(is_switch=lambda node: node != "h1"),
        fault=SimpleNamespace(target="h1>leaf1", kind="latency"),
    )
    with pytest.raises(FaultError, match="acts on a switch egress"):
        lab_faults._Request.switch_egress(request)  # type: ignore[arg-type]


def test_host_stall_is_drawn_only_when_the_lab_has_it(
    intent: FabricIntent, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = lab_faults.KindSpec(lab_faults.HOST, frozenset({"ms"}), frozenset(), "stall")
    monkeypatch.setitem(lab_faults.KINDS, "host-stall", spec)
    assert "host-stall" in bench.lab_kinds()
    stalls = bench.draw(intent, ("host-stall",), 2, seed=5, no_fault=0)
    assert [t.params for t in stalls] == [{"ms": bench.STALL_MS}] * 2
    assert all(t.expected == ("host", t.target) for t in stalls)
    monkeypatch.delitem(lab_faults.KINDS, "host-stall")
    assert "host-stall" not in bench.lab_kinds()


# --------------------------------------------------------------------------- running a trial


def _adaptive_locate(intent: Any, *, confidence: float = 0.95, max_duration_s: float = 60.0,
                     min_loss: float = 0.005, duration_s: float | None = None,
                     load: bool = False) -> Any:  # fmt: skip
    raise NotImplementedError


def _fixed_locate(intent: Any, *, duration_s: float = 5.0, load: bool = False) -> Any:
    raise NotImplementedError


LOSS = bench.Trial("loss", "h1>leaf1", {"percent": 1.0, "seed": 9}, ("link", "h1>leaf1"),
                   "host>leaf", 1.0)  # fmt: skip
IGNORE = bench.Trial("ignore-pfc", "spine1:eth1", {}, ("port", "spine1:Ethernet1"))


@pytest.mark.parametrize(
    ("locate", "duration", "trial", "kwargs", "note"),
    [
        (_adaptive_locate, None, LOSS,
         {"confidence": 0.95, "max_duration_s": 60.0, "min_loss": 0.005, "duration_s": None,
          "load": False}, "adaptive locate"),
        (_adaptive_locate, 3.0, LOSS,
         {"confidence": 0.95, "max_duration_s": 60.0, "min_loss": 0.005, "duration_s": 3.0,
          "load": False}, "fixed 3 s mesh (--duration)"),
        (_fixed_locate, None, LOSS, {"duration_s": 5.0, "load": False},
         "fixed 5 s mesh: this locate has no adaptive run (run_locate does not take "
         "confidence, max_duration_s, min_loss)"),
        (_fixed_locate, 2.0, IGNORE, {"duration_s": 2.0, "load": True}, "fixed 2 s"),
    ],
)  # fmt: skip
def test_locate_is_adaptive_when_it_can_be_and_says_so_when_not(
    locate: Any, duration: float | None, trial: Any, kwargs: dict[str, Any], note: str
) -> None:
    chosen = bench.settings_for(locate, duration, load=False)
    assert chosen.kwargs(trial) == kwargs
    assert chosen.note.startswith(note)
    # Whatever is passed, the function takes it.
    import inspect

    inspect.signature(locate).bind(None, **chosen.kwargs(trial))


class _Faults:
    def __init__(self) -> None:
        self.active: dict[str, tuple[str, str]] = {}
        self.log: list[str] = []

    def add(self, kind: str, target: str, **params: Any) -> Any:
        self.active["f1"] = (kind, target)
        self.log.append(f"add {kind} {target} {sorted(params.items())}")
        return SimpleNamespace(id="f1")

    def remove(self, fault_id: str) -> None:
        del self.active[fault_id]
        self.log.append(f"remove {fault_id}")


def _run(suspects: list[Suspect], seconds: float = 21.5) -> LocateRun:
    path = PathResult("h1", "h3", 49152, ("h1>leaf1", "leaf1:Ethernet1>spine1",
                      "spine1:Ethernet2>leaf2", "leaf2:Ethernet3>h3"), 200, 196,
                      hops=(HopProbe(40, 40), HopProbe(40, 39, rtt_min_ms=0.4), None))  # fmt: skip
    verdict = Verdict(suspects, paths=1, bad_paths=1 if suspects else 0, unexplained=[])
    return LocateRun(verdict, [path], seconds, {"paths": 3.0, "mesh": 9.0})


def _suspect(element: str, kind: str = "link") -> Suspect:
    return Suspect(kind, element, 0.9, [f"4 of 4 paths through {element} lost (1.5%)"])  # type: ignore[arg-type]


def test_a_trial_removes_its_fault_even_when_locate_fails() -> None:
    faults = _Faults()
    settings_ = bench.settings_for(_fixed_locate, 2.0, load=False)

    def broken(intent: Any, **kwargs: Any) -> LocateRun:
        assert faults.active, "locate runs while the fault is in"
        raise AgentError("h2: cannot probe")

    outcome = bench.run_trial(None, faults, LOSS, settings_, locate=broken)
    assert faults.active == {} and faults.log[-1] == "remove f1"
    assert outcome.run is None and outcome.error == "h2: cannot probe" and not outcome.right
    assert outcome.summary() == "error: h2: cannot probe"


def test_a_no_fault_trial_injects_nothing() -> None:
    faults = _Faults()
    settings_ = bench.settings_for(_fixed_locate, 2.0, load=False)
    none = bench.Trial("none", "", {}, None)
    outcome = bench.run_trial(None, faults, none, settings_, locate=lambda i, **k: _run([]))
    assert faults.log == [] and outcome.right


@pytest.mark.parametrize(
    ("first", "suspects", "right"),
    [
        ("absent", [_suspect("h1>leaf1")], True),  # today's Verdict: the rank-1 suspect
        ("absent", [_suspect("leaf1:Ethernet3>h1"), _suspect("h1>leaf1")], False),
        (None, [_suspect("h1>leaf1"), _suspect("leaf1:Ethernet3>h1")], False),  # a tie
        ("h1>leaf1", [_suspect("h1>leaf1"), _suspect("x")], True),
    ],
)
def test_the_first_suspect_is_verdict_first_where_locate_has_it(
    first: str | None, suspects: list[Suspect], right: bool
) -> None:
    run = _run(suspects)
    if first != "absent":  # #30's Verdict.first: None when rank 1 is tied
        top = None if first is None else _suspect(first)
        run.verdict = SimpleNamespace(suspects=suspects, first=top)  # type: ignore[assignment]
        assert bench.Outcome(LOSS, run, 20.0).right is right
        run.verdict = SimpleNamespace(suspects=suspects, first=lambda: top)  # type: ignore[assignment]
    outcome = bench.Outcome(LOSS, run, 20.0)
    assert outcome.right is right


# --------------------------------------------------------------------------- records


INFO = bench.RunInfo("20261127T010000Z-s1", 1, "v0-1-gabc", bench.Settings(False, 5.0))


def _record(
    trial: Any = LOSS, suspects: list[Suspect] | None = None, error: str | None = None
) -> dict[str, Any]:
    run = None if error else _run(suspects or [])
    line: dict[str, Any] = bench.record(
        bench.Outcome(trial, run, 21.5, error, "2026-11-27T01:00:00Z"), 4, INFO
    )
    return line


def test_a_record_holds_the_trial_the_verdict_and_what_locate_saw() -> None:
    line = json.loads(json.dumps(_record(suspects=[_suspect("h1>leaf1")])))
    assert score.problems(line) == []
    assert line["id"] == "20261127T010000Z-s1/004"
    assert line["fault"] == {
        "kind": "loss",
        "target": "h1>leaf1",
        "rate_percent": 1.0,
        "params": {"percent": 1.0, "seed": 9},
        "direction": "host>leaf",
    }
    assert line["expected"] == {"kind": "link", "element": "h1>leaf1"}
    assert line["seed"] == {"matrix": 1, "index": 4, "fault": 9}
    assert line["settings"]["mode"] == "fixed" and line["settings"]["duration_s"] == 5.0
    assert line["verdict"]["suspects"][0]["element"] == "h1>leaf1"
    assert line["verdict"]["probed_paths"][0]["received"] == 196
    assert line["evidence"] == ["4 of 4 paths through h1>leaf1 lost (1.5%)"]
    assert line["observations"]["paths"][0]["hops"][1] == {
        "sent": 40, "answered": 39, "corrupted": 0, "rtt_min_ms": 0.4}  # fmt: skip
    assert line["code_version"] == "v0-1-gabc" and line["time_to_verdict_s"] == 21.5


def test_a_failed_trial_is_a_valid_record_without_a_verdict() -> None:
    line = _record(error="h2: cannot probe")
    assert score.problems(line) == []
    assert line["verdict"] is None and line["time_to_verdict_s"] is None
    assert score.score(line).error and not score.score(line).right_first


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda r: r.pop("verdict"), "verdict: Expected: present"),
        (lambda r: r.update(schema=2), "schema: Expected: 1"),
        (lambda r: r.update(id=4), "id: Expected: str"),
        (lambda r: r.update(expected=None), "expected: Expected: null exactly when"),
        (lambda r: r["fault"].pop("direction"), "fault.direction: Expected: present"),
        (lambda r: r.update(error="x"), "verdict/error: Expected: exactly one"),
        (lambda r: r["verdict"].pop("suspects"), "verdict.suspects: Expected: a list"),
        (lambda r: r.update(expected={"element": "x"}), "expected: Expected: kind and element"),
    ],
)
def test_the_schema_check_names_what_is_wrong(change: Any, problem: str) -> None:
    line = json.loads(json.dumps(_record(suspects=[_suspect("h1>leaf1")])))
    change(line)
    assert any(p.startswith(problem) for p in score.problems(line)), score.problems(line)


# --------------------------------------------------------------------------- scoring


def _s(element: str, rank: int, tied: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"kind": "link", "element": element, "rank": rank, "tied_with": list(tied)}


@pytest.mark.parametrize(
    ("suspects", "first", "tied"),
    [
        ([], None, 0),
        ([_s("a", 1), _s("b", 2)], ("link", "a"), 0),
        ([_s("b", 2), _s("a", 1)], ("link", "a"), 0),  # by rank, not by order
        ([_s("a", 1, ("b",)), _s("b", 1, ("a",))], None, 2),  # a tie is not first
        ([_s("a", 1, ("b", "c"))], None, 3),  # the group named, its others not listed
        ([{"kind": "link", "element": "a"}, {"kind": "port", "element": "b"}], ("link", "a"), 0),
    ],
)
def test_first_suspect_and_tied_group(
    suspects: list[dict[str, Any]], first: tuple[str, str] | None, tied: int
) -> None:
    assert score.first(suspects) == first
    line = _record(suspects=[_suspect("a")])
    assert score.score(line, suspects).tied_size == tied


def _scored(kind: str, rate: float | None, suspects: list[str], want: str | None = "a",
            time_s: float = 20.0) -> Any:  # fmt: skip
    line = _record(suspects=[_suspect("a")])
    line["fault"].update(kind=kind, rate_percent=rate)
    line["expected"] = None if want is None else {"kind": "link", "element": want}
    line["time_to_verdict_s"] = time_s
    return score.score(line, [_s(e, i) for i, e in enumerate(suspects, start=1)])


def test_precision_recall_and_false_suspects_of_a_group() -> None:
    trials = [
        _scored("loss", 1.0, ["a"]),  # right first
        _scored("loss", 1.0, ["b", "a"]),  # found, not first: 1 false
        _scored("loss", 1.0, ["b", "c"]),  # missed: 2 false
        _scored("loss", 1.0, [], time_s=40.0),  # nothing named
    ]
    s = score.summarise(trials)
    assert (s.trials, s.first, s.recall) == (4, 0.25, 0.5)
    assert s.precision == pytest.approx(2 / 5)
    assert (s.false_suspects, s.trials_with_false) == (3, 2)
    assert (s.time_median_s, s.time_max_s) == (20.0, 40.0)
    clean = score.summarise([_scored("none", None, [], want=None),
                             _scored("none", None, ["b"], want=None)])  # fmt: skip
    assert (clean.first, clean.recall, clean.precision, clean.false_suspects) == (0.5, None, 0.0, 1)


@pytest.mark.parametrize(
    ("trials", "statuses"),
    [
        # 19 of 20 at >= 1 % is 95 %: PASS; 4 of 5 at 0.5 % is 80 %: PASS.
        ([_scored("loss", 2.0, ["a"])] * 19 + [_scored("corrupt", 1.0, ["b"])]
         + [_scored("loss", 0.5, ["a"])] * 4 + [_scored("loss", 0.5, [])]
         + [_scored("storm", None, ["a"]), _scored("none", None, [], want=None)],
         ["PASS", "PASS", "PASS", "PASS", "PASS"]),
        ([_scored("loss", 2.0, ["a"])] * 18 + [_scored("loss", 1.0, ["b"])] * 2
         + [_scored("loss", 0.5, ["a"])] * 3 + [_scored("loss", 0.5, [])] * 2
         + [_scored("storm", None, ["b", "a"]), _scored("none", None, ["x"], want=None)]
         + [_scored("down", None, ["a"], time_s=61.0)],
         ["FAIL", "FAIL", "FAIL", "FAIL", "FAIL"]),
        ([_scored("none", None, [], want=None)], ["n/a", "n/a", "n/a", "PASS", "PASS"]),
    ],
)  # fmt: skip
def test_goals(trials: list[Any], statuses: list[str]) -> None:
    assert [g.status for g in score.goals(trials)] == statuses


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4, unique=True),
    st.lists(st.integers(1, 3), min_size=4, max_size=4),
)
def test_scores_are_consistent_for_any_verdict(elements: list[str], ranks: list[int]) -> None:
    suspects = [_s(e, r) for e, r in zip(elements, ranks, strict=False)]
    one = score.score(_record(suspects=[_suspect("a")]), suspects)
    assert not one.right_first or one.found  # first implies found
    assert one.right_suspects <= one.suspects
    assert one.tied_size != 1
    assert one.right_first == (score.first(suspects) == ("link", "h1>leaf1"))


# --------------------------------------------------------------------------- the script


def test_the_scoring_script_scores_a_file_and_another_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "trials.jsonl"
    lines = [_record(suspects=[_suspect("leaf1:Ethernet3>h1")]),
             _record(bench.Trial("none", "", {}, None))]  # fmt: skip
    lines[1]["id"] = "other"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert score.main([str(data)]) == 0
    out = capsys.readouterr().out
    assert "| loss | 1 | 1 | 0% (0/1) | 0% | 0% |" in out and "| no fault | – | 1 |" in out
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": lines[0]["id"], "suspects": [_s("h1>leaf1", 1)]}) + "\n")
    assert score.main([str(data), "--verdicts", str(mine), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [g["first"] for g in result["groups"]] == [1.0, 1.0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema": 1}\n', "trials.jsonl:1: id: Expected: present"),
        ("[]\n", "trials.jsonl:1: Expected: a JSON object"),
    ],
)
def test_the_scoring_script_refuses_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    data = tmp_path / "trials.jsonl"
    data.write_text(content)
    assert score.main([str(data)]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--rates", "0,1"], "--rates"),
        (["--rates", "x"], "--rates"),
        (["--kinds", "loss,flood"], "--kinds"),
        (["--trials", "0"], "--trials"),
        (["--duration", "-1"], "--duration"),
        (["--no-fault", "-1"], "--no-fault"),
    ],
)
def test_bad_bench_arguments_exit_2_naming_the_option(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench.parse(argv)
    assert exited.value.code == 2
    assert f"{option}: Expected" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "rates", "no_fault"),
    [
        (["--matrix", "--trials", "2"], (0.5, 1.0, 2.0, 5.0), 8),
        (["--trials", "2"], (5.0,), None),  # draw(): as many as --trials
        (["--matrix", "--rates", "2%,0.5", "--no-fault", "0"], (2.0, 0.5), 0),
    ],
)
def test_the_matrix_takes_every_rate_and_four_no_fault_runs_per_trial(
    argv: list[str], rates: tuple[float, ...], no_fault: int | None
) -> None:
    args = bench.parse(argv)
    assert (args.rates, args.no_fault, args.kinds) == (rates, no_fault, bench.KINDS)

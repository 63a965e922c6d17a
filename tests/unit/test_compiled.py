"""The compiled hot path and its Python source (lossless/compiled.py, setup.py).

- Which one runs: compiled where the build made extensions, the source under
  ROCE_AGENT_PURE_PYTHON=1, and the source when the files were edited after the build.
- They agree: seeded random twin runs (incast, all-to-all, victim, storm; collectives with
  losses and both recoveries) give the same report, field for field, from both -- one process
  per mode, the same cases, only wall-clock fields left out.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lossless import compiled
from lossless.compiled import (
    COMPILED_MODULES,
    DIGEST_FILE,
    GROUP,
    PURE_ENV,
    SourceFirst,
    source_digest,
    stale,
)

ROOT = Path(__file__).resolve().parents[2]
BUILT = (ROOT / "lossless" / DIGEST_FILE).is_file()
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _python(code: str, pure: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


WHICH = """
    import importlib, json
    from lossless.compiled import COMPILED_MODULES, is_compiled
    print(json.dumps({n: is_compiled(importlib.import_module(n)) for n in COMPILED_MODULES}))
"""


@pytest.mark.parametrize("pure", [True, False], ids=["source", "compiled"])
def test_every_listed_module_comes_from_one_side(pure: bool) -> None:
    """All of them compiled, or all from source: never a mix (they call each other in C)."""
    if not pure and not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    done = _python(WHICH, pure)
    assert done.returncode == 0, done.stderr
    which = json.loads(done.stdout)
    assert set(which) == set(COMPILED_MODULES)
    assert set(which.values()) == {not pure}, which
    assert "built from other sources" not in done.stderr


def test_the_build_compiled_what_is_here() -> None:
    """`make` builds the extensions from these sources (CI must not test a stale build)."""
    if os.environ.get("CI") != "true" and not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    assert BUILT, "make builds the compiled modules (lossless/compiled.sha256 is missing)"
    assert not stale(), "lossless/compiled.sha256 differs from the sources: rebuild (make venv)"


def _fake_tree(tmp: Path, built: bool) -> Path:
    """A tree with the listed sources and, if ``built``, a group library and the record."""
    for name in COMPILED_MODULES:
        source = tmp.joinpath(*name.split(".")).with_suffix(".py")
        source.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT.joinpath(*name.split(".")).with_suffix(".py"), source)
    if built:
        (tmp / f"{GROUP}__mypyc{SUFFIX}").write_bytes(b"")
        (tmp / "lossless" / DIGEST_FILE).write_text(source_digest(tmp) + "\n")
    return tmp


def test_an_edit_after_the_build_is_stale(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path, built=True)
    assert not stale(tree)
    engine = tree / "agent" / "twin" / "engine.py"
    engine.write_text(engine.read_text() + "\n# an edit\n")
    assert stale(tree)


def test_a_touch_without_an_edit_is_not_stale(tmp_path: Path) -> None:
    """The record is the sources' digest, not their times: a checkout or a touch keeps it."""
    tree = _fake_tree(tmp_path, built=True)
    queues = tree / "lossless" / "queues.py"
    os.utime(queues, (queues.stat().st_atime + 3600, queues.stat().st_mtime + 3600))
    assert not stale(tree)


@pytest.mark.parametrize("library", [True, False], ids=["record-only", "nothing-built"])
def test_without_a_build_there_is_nothing_stale(tmp_path: Path, library: bool) -> None:
    tree = _fake_tree(tmp_path, built=False)
    if library:
        (tree / "lossless" / DIGEST_FILE).write_text("0" * 64 + "\n")
    assert not stale(tree)


def test_the_source_finder_resolves_only_listed_modules(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path, built=False)
    finder = SourceFirst(frozenset(COMPILED_MODULES))
    spec = finder.find_spec("lossless.queues", [str(tree / "lossless")])
    assert spec is not None and spec.origin == str(tree / "lossless" / "queues.py")
    assert finder.find_spec("lossless.config", [str(tree / "lossless")]) is None
    assert finder.find_spec("lossless.queues", None) is None


def test_the_mode_is_decided_once_per_process() -> None:
    expected = compiled.pure_python_requested() or stale()
    assert expected == compiled.RUN_SOURCE


# ---------------------------------------------------------------------- the same results

RUNS = """
    import dataclasses, json, sys, tempfile
    from pathlib import Path
    from agent.twin.collectives import CollectiveSpec, run_collective
    from agent.twin.engine import Engine, FlowSpec
    from agent.twin.network import load_network, star_fabric_yaml
    from agent.twin.results import run_twin

    cases = json.loads(sys.argv[1])
    tmp = Path(tempfile.mkdtemp())
    out = []

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not str(k).startswith("wall")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    for case in cases:
        if case["kind"] == "collective":
            net = load_network(Path(case["fabric"]))
            spec = CollectiveSpec(case["workload"], case["ranks"], case["size"],
                                  qps_per_connection=case["qps"])
            report = run_collective(net, spec, seed=case["seed"], recovery=case["recovery"])
            out.append(strip(dataclasses.asdict(report)))
            continue
        if case.get("fabric"):
            net = load_network(Path(case["fabric"]))
        else:
            path = tmp / f"star-{len(out)}.yml"
            path.write_text(star_fabric_yaml(case["hosts"], case["speed"],
                                             profile=case["profile"], mtu=case["mtu"],
                                             cable_m=case["cable_m"]))
            net = load_network(path)
        report = run_twin(net, case["scenario"], senders=case["senders"],
                          duration_s=case["duration_s"], seed=case["seed"],
                          ignore_pause=case["ignore_pause"], recovery=case["recovery"])
        out.append(strip(report.to_json()))
    from lossless.compiled import is_compiled
    import agent.twin.engine
    print(json.dumps({"compiled": is_compiled(agent.twin.engine), "reports": out}))
"""


def _cases(seed: int) -> list[dict[str, Any]]:
    """Seeded draws over what the hot path decides: speeds, cables, MTUs, profiles (PFC only,
    ECN with DCQCN), sender counts, scenarios (a storm runs the watchdog; a deaf sender drops
    on headroom), recoveries, and collectives on the two-tier pod."""
    rng = random.Random(seed)
    pod = str(ROOT / "playbooks" / "fabrics" / "pod-400g.yml")
    cases: list[dict[str, Any]] = []
    for scenario in ("incast", "all-to-all", "victim", "storm"):
        senders = rng.randint(2, 6)
        cases.append(
            {
                "kind": "scenario",
                # The victim needs a second tier: a sender on another leaf.
                "fabric": pod if scenario == "victim" or rng.random() < 0.25 else None,
                "scenario": scenario,
                "hosts": senders + 2,
                "senders": senders,
                "speed": rng.choice(["25G", "100G", "400G"]),
                "profile": rng.choice(["pfc-only", "dcqcn-paper", "nvidia-default"]),
                "mtu": rng.choice([1500, 4096, 9214]),
                "cable_m": rng.choice([1.0, 3.0, 30.0, 200.0]),
                "duration_s": rng.choice([0.5e-3, 1e-3, 2e-3]),
                "seed": rng.randint(1, 1000),
                "ignore_pause": scenario == "incast" and rng.random() < 0.5,
                "recovery": rng.choice(["go-back-n", "selective-repeat"]),
            }
        )
    for workload in ("allreduce", "alltoall"):
        cases.append(
            {
                "kind": "collective",
                "fabric": pod,
                "workload": workload,
                "ranks": rng.choice([4, 8]),
                "size": rng.choice([1 << 20, 3_000_000]),
                "qps": rng.choice([1, 2]),
                "seed": rng.randint(1, 1000),
                "recovery": rng.choice(["go-back-n", "selective-repeat"]),
            }
        )
    return cases


@pytest.mark.parametrize("seed", [7, 2026])
def test_compiled_and_source_give_the_same_reports(seed: int) -> None:
    if not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    cases = _cases(seed)
    argv = json.dumps(cases)
    reports = {}
    for pure in (False, True):
        code = textwrap.dedent(RUNS)
        done = subprocess.run(
            [sys.executable, "-c", code, argv],
            cwd=ROOT,
            env={**{k: v for k, v in os.environ.items() if k != PURE_ENV},
                 **({PURE_ENV: "1"} if pure else {})},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["compiled"] is not pure, done.stderr
        reports[pure] = result["reports"]
    for case, fast, slow in zip(cases, reports[False], reports[True], strict=True):
        assert fast == slow, case

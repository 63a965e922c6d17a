"""What the twin's start-up imports: only what a twin run needs (issue #31, start-up under
0.3 s for a 10 ms run).

Each path runs in a fresh interpreter and reports ``sys.modules``; no module of the table may
be among them. No timing here (bench/twin_startup.py measures): an import that comes back
on the path -- a command module imported eagerly by the command line, rich for a run that
prints JSON, the collectives for a scenario -- fails the test whatever the machine's speed.
docs/architecture.md ("Lazy imports, for start-up") says why the imports are lazy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.twin.network import star_fabric_yaml

ROOT = Path(__file__).resolve().parents[2]

# The paths of a twin run, each the body of a fresh ``python -c``; ``sys.argv[1]`` is a small
# star fabric, ``sys.argv[2]`` the file the path writes ``sys.modules`` into.
REPORT = "open(sys.argv[2], 'w').write('\\n'.join(sorted(sys.modules)))"
# A whole run that prints JSON, lazy imports at run time included.
JSON_RUN = (
    "import sys\n"
    "from agent.app.cli import main\n"
    "try:\n"
    "    main(['twin', sys.argv[1], '--duration', '50us', '-o', 'json'])\n"
    "except SystemExit as exc:\n"
    "    assert exc.code in (0, 1), exc.code\n" + REPORT
)
PATHS: dict[str, str] = {
    # The command line up to the twin command, as click resolves it, and the run's results.
    "twin resolved": (
        "import sys, click\n"
        "from agent.app.cli import main\n"
        "command = main.get_command(click.Context(main), 'twin')\n"
        "assert command is not None and command.name == 'twin'\n"
        "import agent.twin.results\n" + REPORT
    ),
    "twin -o json run": JSON_RUN,
    # The Python API in a fresh interpreter (the network cache is each path's own and empty,
    # but for the next path's).
    "run_twin (API)": (
        "import sys\n"
        "from pathlib import Path\n"
        "from agent.twin.network import load_network\n"
        "from agent.twin.results import run_twin\n"
        "run_twin(load_network(Path(sys.argv[1])), 'incast', senders=2, duration_s=50e-6)\n"
        + REPORT
    ),
    # The same run again: the network the run before kept (agent.twin.netcache) is read back.
    "twin -o json run, network kept": JSON_RUN,
}
# The path that reads a kept network, and what loading a fabric needs that it does not.
KEPT = "twin -o json run, network kept"
NOT_WHEN_KEPT: list[tuple[str, str]] = [
    ("pydantic", "validating the fabric intent (a kept network was validated when it was kept)"),
    ("pydantic_core", "pydantic"),
    ("yaml", "reading the fabric file"),
    ("agent.intent.loader", "loading the fabric file"),
    ("agent.intent.model", "the fabric intent's models"),
    ("agent.intent.plan", "the plan"),
    ("agent.intent.rules", "the fabric's rule checks"),
    ("common.yamlsource", "positions in the fabric file"),
    ("logging", "--debug"),
]

# (module or package, what needs it instead): none of them is imported by any path.
NOT_ON_THE_TWIN_PATH: list[tuple[str, str]] = [
    ("matplotlib", "--plot (agent.twin.plot imports it when a plot is asked for)"),
    ("numpy", "the fluid model (agent.twin.fluid) and plots; the engine is pure Python"),
    ("scapy", "probes: roce-agent probe and validate"),
    ("netmiko", "switch sessions: diff, apply, drift, validate"),
    ("paramiko", "SSH, under netmiko"),
    ("asyncssh", "the lab's management plane"),
    ("prometheus_client", "the exporter and the daemon"),
    ("rich", "tables, progress bars and errors: a run that prints JSON needs none"),
    ("lab", "roce-agent lab"),
    ("exporters", "roce-agent exporter and serve"),
    ("agent.device", "device state, platforms, push: diff, apply, drift"),
    ("agent.observe", "collection, checks, probes: validate, locate, nccl"),
    ("agent.ops", "playbooks: run, serve"),
    ("agent.twin.tune", "roce-agent tune"),
    ("agent.twin.collectives", "twin --workload"),
    ("agent.twin.fluid", "the DCQCN fluid model (benches, tests)"),
    ("agent.twin.plot", "twin --plot"),
    ("agent.intent.plan_tables", "roce-agent plan's tables"),
    ("agent.app.change", "diff, apply, drift, audit"),
    ("agent.app.validate", "roce-agent validate"),
    ("agent.app.run", "roce-agent run (and validate)"),
    ("agent.app.playbook_report", "validate's and run's reports"),
    ("agent.app.serve", "roce-agent serve"),
    ("agent.app.exporter", "roce-agent exporter"),
    ("agent.app.tune", "roce-agent tune"),
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The modules each path leaves in ``sys.modules``."""
    tmp = tmp_path_factory.mktemp("startup")
    star = tmp / "star.yml"
    star.write_text(star_fabric_yaml(3, "100G"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    found: dict[str, set[str]] = {}
    for name, code in PATHS.items():
        report = tmp / f"{len(found)}.txt"
        if name != KEPT:  # the kept path reads what the path before it kept
            env["ROCE_AGENT_CACHE_DIR"] = str(tmp / f"cache-{len(found)}")
        done = subprocess.run(
            [sys.executable, "-c", code, str(star), str(report)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"{name}: {done.stderr}"
        found[name] = set(report.read_text().split())
    return found


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(("module", "needed_by"), NOT_ON_THE_TWIN_PATH)
def test_not_imported_on_the_twin_path(
    imported: dict[str, set[str]], path: str, module: str, needed_by: str
) -> None:
    loaded = sorted(m for m in imported[path] if m == module or m.startswith(module + "."))
    shown = ", ".join(loaded[:4]) + (f" and {len(loaded) - 4} more" if len(loaded) > 4 else "")
    assert not loaded, f"{path} imports {shown} (needed only by {needed_by})"


@pytest.mark.parametrize(("module", "needed_by"), NOT_WHEN_KEPT)
def test_a_kept_network_loads_no_fabric(
    imported: dict[str, set[str]], module: str, needed_by: str
) -> None:
    loaded = sorted(m for m in imported[KEPT] if m == module or m.startswith(module + "."))
    assert not loaded, f"{KEPT} imports {', '.join(loaded[:4])} (needed only by {needed_by})"


def test_the_paths_run_the_twin(imported: dict[str, set[str]]) -> None:
    """The tables above mean something only if the paths do reach the twin, and the fabric is
    loaded by the runs that find no network kept (the first path only resolves the command)."""
    for name, modules in imported.items():
        assert {"agent.twin.engine", "agent.twin.results"} <= modules, name
        loads = name in ("twin -o json run", "run_twin (API)")
        assert ("agent.intent.loader" in modules) is loads, name

"""The import rules of the layering (README "Architecture"; ../shared/DESIGN.md).

Every ``import`` counts, also those inside functions and ``if TYPE_CHECKING:`` blocks: a lazy
import is still a dependency, and a type-only one still ties the packages together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "common", "exporters", "lab", "lossless")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from agent import app`` imports the module agent.app.
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno, id(node) in top_level


def is_within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# The agent's own packages, bottom to top: each imports only those below it (twin and observe
# stand side by side: neither imports the other). ``agent/errors.py`` is below them all.
CORE_PACKAGES = ("agent.intent", "agent.device", "agent.observe", "agent.twin", "agent.ops")
APP = ("agent.app", "agent.__main__")
OUTSIDE = ("exporters", "lab")

# (layer, what it is made of, what it must not import, why)
RULES: list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], str]] = [
    (
        "agent core",
        ("agent",),
        APP,
        (*APP, *OUTSIDE),
        "the core is used by the app layer and the exporters; it uses neither, nor the lab",
    ),
    (
        "agent.intent",
        ("agent/intent",),
        (),
        ("agent.device", "agent.observe", "agent.twin", "agent.ops", *APP),
        "what the fabric should be is read and planned without touching a device",
    ),
    (
        "agent.device",
        ("agent/device",),
        (),
        ("agent.observe", "agent.twin", "agent.ops", *APP),
        "the push path reads and changes devices; observing and simulating build on it",
    ),
    (
        "agent.observe",
        ("agent/observe",),
        (),
        ("agent.twin", "agent.ops", *APP),
        "checks, probes, perftest and locate read the fabric; procedures compose them",
    ),
    (
        "agent.twin",
        ("agent/twin",),
        (),
        ("agent.device", "agent.observe", "agent.ops", *APP),
        "the twin simulates the intent; comparing it with the lab is an operation (agent.ops)",
    ),
    (
        "agent.ops",
        ("agent/ops",),
        (),
        APP,
        "playbooks, the fault drill and the twin-vs-lab check are run by the commands",
    ),
    (
        "exporters",
        ("exporters",),
        (),
        (*APP, "lab"),
        "the exporters build on the core; the app layer wires them to commands",
    ),
    (
        "lab",
        ("lab",),
        (),
        ("agent", "exporters"),
        "the agent must talk to a lab switch exactly as to a real one",
    ),
    (
        "lossless model",
        ("lossless",),
        (),
        ("agent", "common", "exporters", "lab"),
        "the model is shared by the lab, the probes and the twin, so it depends on none",
    ),
    (
        "common",
        ("common",),
        (),
        ("agent", "exporters", "lab", "lossless"),
        "the YAML loader and errors are shared by agent and lab, so they depend on neither",
    ),
]


def violations(
    root: Path,
    members: tuple[str, ...],
    exempt: tuple[str, ...],
    forbidden: tuple[str, ...],
) -> list[str]:
    found = []
    for package in members:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(path, root)
            if any(is_within(module, prefix) for prefix in exempt):
                continue
            for imported, line, _ in imports_of(path, root):
                if any(is_within(imported, prefix) for prefix in forbidden):
                    found.append(f"{path.relative_to(root)}:{line}: imports {imported}")
    return found


@pytest.mark.parametrize(
    ("layer", "members", "exempt", "forbidden", "why"), RULES, ids=[rule[0] for rule in RULES]
)
def test_layer_imports(
    layer: str,
    members: tuple[str, ...],
    exempt: tuple[str, ...],
    forbidden: tuple[str, ...],
    why: str,
) -> None:
    assert (ROOT / members[0]).is_dir(), f"{layer}: package {members[0]} is missing"
    found = violations(ROOT, members, exempt, forbidden)
    assert not found, f"{layer} ({why}):\n" + "\n".join(found)


def test_app_layer_imports_lab_only_lazily() -> None:
    """``roce-agent`` without the lab installed still runs every non-lab command."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: imports {imported} at module level"
        for path in sorted((ROOT / "agent" / "app").rglob("*.py"))
        for imported, line, top in imports_of(path, ROOT)
        if top and is_within(imported, "lab")
    ]
    assert not found, "\n".join(found)


def package_graph(root: Path, package: str, exclude: str | None = None) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports (any import, anywhere in the file)."""
    paths = {
        module_name(path, root): path
        for path in (root / package).rglob("*.py")
        if exclude is None or not is_within(module_name(path, root), exclude)
    }
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = set()
        for imported, _, _ in imports_of(path, root):
            # ``from agent.observe.probes import packets``: the submodule if it is one, else the
            # package.
            while imported and imported not in paths:
                imported = imported.rpartition(".")[0]
            if imported and imported != module and not module.startswith(imported + "."):
                targets.add(imported)
        graph[module] = targets
    return graph


def core_graph(root: Path) -> dict[str, set[str]]:
    """The agent core's modules (everything but the app layer) and what each imports of it."""
    return package_graph(root, "agent", exclude="agent.app")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_core_has_no_import_cycles() -> None:
    """A cycle (like the old loader ↔ rules one) means two modules are really one."""
    assert cycles(core_graph(ROOT)) == []


def test_lab_has_no_import_cycles() -> None:
    """Faults and the runtime share state and process helpers through modules of their own."""
    assert cycles(package_graph(ROOT, "lab")) == []


TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py"}


def test_the_agent_core_is_packages() -> None:
    """``ls agent/`` shows the architecture: the layers as packages, no flat room of modules
    (errors.py is the one module every layer imports)."""
    loose = sorted(
        path.name for path in (ROOT / "agent").glob("*.py") if path.name not in TOP_LEVEL_MODULES
    )
    assert loose == []
    packages = sorted(
        f"agent.{path.name}"
        for path in (ROOT / "agent").iterdir()
        if (path / "__init__.py").exists()
    )
    assert packages == sorted([*CORE_PACKAGES, "agent.app"])


VIOLATING_TREE = {
    "agent/__init__.py": "",
    "agent/loader.py": "from agent.rules import check\n",
    "agent/rules.py": "def f():\n    from agent.loader import load\n",
    "agent/app/__init__.py": "",
    "agent/app/cli.py": "import lab.cli\n",
    "agent/platforms/__init__.py": "",
    "agent/platforms/base.py": "from ..app import cli\n",
    "agent/report.py": "if True:\n    import exporters.store\n",
    "lab/__init__.py": "",
    "lab/topology.py": "from agent import errors\n",
    "lossless/__init__.py": "",
    "lossless/pfc.py": "from lab.vswitch import config\n",
}


def test_the_checker_finds_each_kind_of_violation(tmp_path: Path) -> None:
    for relative, text in VIOLATING_TREE.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    core = violations(tmp_path, ("agent",), ("agent.app",), ("agent.app", "exporters", "lab"))
    assert core == [
        "agent/platforms/base.py:1: imports agent.app.cli",
        "agent/report.py:2: imports exporters.store",
    ]
    assert violations(tmp_path, ("lab",), (), ("agent",)) == [
        "lab/topology.py:1: imports agent.errors"
    ]
    assert violations(tmp_path, ("lossless",), (), ("lab",)) == [
        "lossless/pfc.py:1: imports lab.vswitch.config"
    ]
    assert cycles(core_graph(tmp_path)) == [["agent.loader", "agent.rules"]]

"""The docs site (mkdocs.yml, docs/): the generated reference pages are current, the site
builds in strict mode (a broken link or anchor fails it), the README stays a short front door,
and the alerts' runbook links and the site agree on the docs' address."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from exporters import alerts

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
MKDOCS_ENV = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"}


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        env=MKDOCS_ENV,
        timeout=120,
    )


def test_reference_pages_are_generated_from_the_current_code() -> None:
    # A fresh interpreter, as `make docs` runs it: the CLI page is click's help of the
    # commands, and tests that ran earlier in this process may have changed click's state.
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_docs.py"), "--check"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"stale: run python scripts/gen_docs.py\n{done.stdout}{done.stderr}"
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = mkdocs_build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    runbook = (tmp_path / "site" / "runbook" / "index.html").read_text()
    for rule in alerts.RULES.read_text().split("runbook_url: ")[1:]:
        anchor = rule.split("#", 1)[1].split('"', 1)[0]
        assert f'id="{anchor}"' in runbook, anchor


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    for name in ("mkdocs.yml", "docs", "scripts/mkdocs_hooks.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, tmp_path / name)
    page = tmp_path / "docs" / "getting-started.md"
    page.write_text(page.read_text() + "\n[gone](runbook.md#no-such-alert)\n")
    done = mkdocs_build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "getting-started.md" in done.stderr and "no-such-alert" in done.stderr, done.stderr


def test_repository_files_outside_docs_are_not_broken_links() -> None:
    hooks = load_script("mkdocs_hooks")
    assert hooks.repo_file(DOCS, "deploy/agent.yaml") == "deploy/agent.yaml"
    assert hooks.repo_file(DOCS, "../deploy/agent.yaml") == "deploy/agent.yaml"
    assert hooks.repo_file(DOCS, "runbook.md#rocedevicedown") is None  # a page: mkdocs checks it
    assert hooks.repo_file(DOCS, "deploy/no-such-file") is None  # broken: left to fail
    assert hooks.repo_file(DOCS, "../../etc/passwd") is None  # outside the repository
    assert hooks.repo_file(DOCS, "https://example.org/x") is None


def test_the_site_and_the_alert_rules_use_one_docs_address() -> None:
    match = re.search(r'^site_url: !ENV \[ROCE_AGENT_DOCS_URL, "([^"]+)"\]$',
                      (REPO / "mkdocs.yml").read_text(), re.MULTILINE)  # fmt: skip
    assert match, "mkdocs.yml: site_url from ROCE_AGENT_DOCS_URL with a default"
    assert match.group(1) == alerts.DEFAULT_DOCS_URL
    assert alerts.DEFAULT_RUNBOOK_BASE == alerts.DEFAULT_DOCS_URL + "runbook/"
    assert (DOCS / "runbook.md").is_file()


def test_the_readme_is_a_short_front_door_whose_links_resolve() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 15 * 1024
    assert "## Runbook" not in readme  # moved to docs/runbook.md
    links = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", readme)
    assert "docs/install.md" in links and "docs/runbook.md" in links
    for link in links:
        if "://" not in link:
            assert (REPO / link).exists(), link


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["--out", "README.md"], "'--out'"), (["--no-such"], "--no-such")],
)
def test_bad_generator_options_exit_2_naming_the_option(args: list[str], expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr


def test_check_names_a_stale_page_and_exits_1(tmp_path: Path) -> None:
    gen_docs = load_script("gen_docs")
    shutil.copytree(gen_docs.OUT, tmp_path / "ref")
    (tmp_path / "ref" / "rules.md").write_text("# edited by hand\n")
    done = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", "--check", "--out", str(tmp_path / "ref")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"stale: {tmp_path / 'ref' / 'rules.md'} (run python scripts/gen_docs.py)"
    )


def test_the_runbook_has_a_section_for_each_shipped_alert_and_no_other() -> None:
    alert_names = set(re.findall(r"^\s*- alert: (\w+)$", alerts.RULES.read_text(), re.MULTILINE))
    sections = set(re.findall(r"^## (\w+)$", (DOCS / "runbook.md").read_text(), re.MULTILINE))
    assert alert_names and sections == alert_names

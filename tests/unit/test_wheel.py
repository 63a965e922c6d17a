"""The wheel works outside the repository (docs/install.md).

Builds an sdist from a copy of the sources, a wheel from that sdist, installs the wheel into a
fresh venv and runs ``roce-agent`` from a temporary folder on a copy of an example fabric, with
the repository not importable. Offline: the build uses this venv's setuptools
(``--no-build-isolation``, the ``dev`` extra pins it) and the fresh venv borrows this venv's
site-packages for the dependencies through a ``.pth`` line (a folder named in a .pth is added
to ``sys.path`` after the venv's own, and the .pth files inside it are not run: the editable
install's finder that points at the checkout stays off).
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from common.resources import KINDS
from lossless.compiled import COMPILED_MODULES, DIGEST_FILE, GROUP

ROOT = Path(__file__).resolve().parents[2]
FABRIC = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
# What an sdist needs: the packages, the data behind common/data's symlinks, the metadata.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "agent", "common", "exporters",
           "lab", "lossless", "playbooks", "deploy")  # fmt: skip
SHIPPED = (
    "common/data/playbooks/profiles/nvidia-default.yml",
    "common/data/playbooks/validate.yml",
    "common/data/playbooks/fabrics/pod-400g.yml",
    "common/data/deploy/agent.yaml",
    "common/data/deploy/systemd/roce-agent.service",
    "exporters/grafana/roce-fabric-overview.json",
    "exporters/alerts/roce.rules.yml",
)


def _env() -> dict[str, str]:
    """No PYTHONPATH (the tests run with the checkout on it) and no way to the network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1", COLUMNS="200")
    return env


def _run(argv: list[str | Path], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240
    )
    if check:
        assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _ignore(_folder: str, names: list[str]) -> set[str]:
    # The checkout's own compiled build stays behind: the wheel compiles from the sources.
    return {
        n
        for n in names
        if n == "__pycache__" or n.endswith((".egg-info", ".so")) or n == "compiled.sha256"
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel), built from a copy of the sources (the build writes build/ and egg-info)."""
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=_ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp / "dist"
    build_sdist = f"from setuptools import build_meta as b; print(b.build_sdist({str(dist)!r}))"
    sdist = dist / _run([sys.executable, "-c", build_sdist], src).stdout.strip().splitlines()[-1]
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", dist, sdist],
        tmp,
    )  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def venv(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; its dependencies come from this venv."""
    target = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", target], target.parent)
    python = target / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "-q", built[1]],
        target.parent,
    )  # fmt: skip
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   target.parent).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "_deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    return target


def test_the_sdist_and_the_wheel_carry_the_data_and_the_license(built: tuple[Path, Path]) -> None:
    sdist, wheel = built
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = [archive.getinfo(n) for n in names]
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = archive.read(metadata).decode()
    assert "License-Expression: Apache-2.0" in headers.splitlines()
    missing = [path for path in SHIPPED if path not in names]
    assert missing == [], f"the wheel lacks {missing}"
    # Real files, not the repository's symlinks (the mode's high bits say S_IFLNK).
    assert not [i.filename for i in info if (i.external_attr >> 16) & 0o170000 == 0o120000]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # Every profile, playbook and example fabric of the checkout is in the wheel, and all of
    # deploy/ (the unit, the example config, what else the daemon's install uses).
    files = [*(ROOT / "playbooks").rglob("*.yml"), *(ROOT / "deploy").rglob("*")]
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        assert path.is_dir() or f"common/data/{relative}" in names, relative
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1]: m for m in archive.getmembers() if "/" in m.name}
    assert "LICENSE" in members
    assert members["common/data/playbooks/profiles/nvidia-default.yml"].isfile()


def test_the_wheel_carries_the_compiled_hot_path(built: tuple[Path, Path], venv: Path) -> None:
    """setup.py compiles the listed modules into the wheel (the build's mypyc, offline), with
    the digest of what it compiled; installed, they load compiled and up to date."""
    with zipfile.ZipFile(built[1]) as archive:
        names = set(archive.namelist())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    expected = [f"{n.replace('.', '/')}{suffix}" for n in COMPILED_MODULES]
    expected += [f"{GROUP}__mypyc{suffix}", f"lossless/{DIGEST_FILE}"]
    assert [name for name in expected if name not in names] == []
    which = _run(
        [venv / "bin" / "python", "-c",
         "import importlib, lossless.compiled as c; "
         "print(c.stale(), all(c.is_compiled(importlib.import_module(n)) "
         "for n in c.COMPILED_MODULES))"],
        venv.parent,
    )  # fmt: skip
    assert which.stdout.split() == ["False", "True"], which.stderr


def test_installed_roce_agent_works_outside_the_repository(venv: Path, tmp_path: Path) -> None:
    """check, plan, run --help and twin on a copy of pod-400g.yml, from a folder of its own."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(FABRIC, work / "pod-400g.yml")
    python, agent = venv / "bin" / "python", venv / "bin" / "roce-agent"
    where = _run(
        [python, "-c", "import agent, common.resources as r; print(agent.__file__); "
         "print(r.builtin_profiles()); print(r.builtin_playbooks())"],
        work,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(venv) for p in where), where  # not the checkout

    check = _run([agent, "check", "pod-400g.yml"], work)
    assert "profile nvidia-default" in check.stdout
    assert str(venv) in check.stdout  # the built-in profile, read from the installed wheel
    plan = _run([agent, "plan", "pod-400g.yml"], work)
    assert "spine1" in plan.stdout
    run_help = _run([agent, "run", "--help"], work)
    assert "PLAYBOOK" in run_help.stdout
    twin = _run([agent, "twin", "pod-400g.yml", "--duration", "1ms"], work)
    assert "verdict:" in twin.stdout
    # The shipped playbooks load by name, as `roce-agent run validate FABRIC` finds them.
    loaded = _run(
        [python, "-c", "from agent.ops.playbooks import load_playbook, playbook_path; "
         "p = playbook_path('validate'); load_playbook(p); print(p)"],
        work,
    )  # fmt: skip
    assert Path(loaded.stdout.strip()).is_relative_to(venv)
    assert sorted(p.name for p in work.iterdir()) == ["pod-400g.yml"]


def test_installed_resources_name_every_kind(venv: Path, tmp_path: Path) -> None:
    """``python -m common.resources`` (docs/install.md) finds each kind inside the venv."""
    python = venv / "bin" / "python"
    lines = _run([python, "-m", "common.resources"], tmp_path).stdout.splitlines()
    found = dict(line.split(None, 1) for line in lines)
    assert sorted(found) == sorted(KINDS)
    for kind, path in found.items():
        assert Path(path).is_relative_to(venv) and Path(path).exists(), (kind, path)
    one = _run([python, "-m", "common.resources", "systemd-unit"], tmp_path).stdout.strip()
    assert Path(one).name == "roce-agent.service"
    bad = _run([python, "-m", "common.resources", "nope"], tmp_path, check=False)
    assert bad.returncode == 2
    assert "argument kind: invalid choice: 'nope'" in bad.stderr


def test_in_a_checkout_the_data_is_the_top_level_folders() -> None:
    """The symlinks lead the one lookup to playbooks/ and deploy/ (docs and tests name them)."""
    from agent.intent import profiles
    from agent.ops import playbooks
    from common.resources import resource
    from lab import faults

    assert resource("profiles") == ROOT / "playbooks" / "profiles"
    assert resource("systemd-unit") == ROOT / "deploy" / "systemd" / "roce-agent.service"
    assert resource("dashboards") == ROOT / "exporters" / "grafana"
    assert profiles.BUILTIN_PROFILES == faults.BUILTIN_PROFILES == resource("profiles")
    assert resource("playbooks") == playbooks.PLAYBOOKS


def test_no_other_module_finds_built_in_data_by_repository_path() -> None:
    """common/resources.py is the one place: a path built from ``__file__`` to playbooks/ or
    deploy/ would work in a checkout and break in the wheel."""
    found = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for package in ("agent", "common", "exporters", "lab", "lossless")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "common" / "resources.py"
        for line in path.read_text(encoding="utf-8").splitlines()
        if "__file__" in line
        and any(f'/ "{name}"' in line for name in ("playbooks", "profiles", "deploy"))
    ]
    assert found == []

"""Where the built-in data is: the one place that finds it, in a checkout and when installed.

Everything is looked up where the package is, so the same names work in the repository, in an
installed wheel (site-packages) and in an editable install -- on disk directly (importing
:mod:`importlib.resources` costs a one-shot command more than the look-up), else through
:mod:`importlib.resources` (a zipped install):

- ``common/data/playbooks`` and ``common/data/deploy`` are symlinks in the repository to the
  top-level ``playbooks/`` and ``deploy/`` folders (tests, docs and users name those paths);
  building the wheel copies the files behind them into ``common/data/`` (pyproject.toml,
  package-data), so the wheel carries real files and no symlink;
- the dashboards and alert rules stay in the ``exporters`` package, where their generators
  (``python -m exporters.dashboards``, ``python -m exporters.alerts``) write them; they are
  looked up by package name, which runs only ``exporters/__init__.py`` (a docstring): no
  dependency on the exporters' code, and the layering test counts none.

``python -m common.resources`` prints where each kind of data is (docs/install.md).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# A zipped install (zipimport) has no folder to read: its files are extracted once for the
# process and removed at exit (a folder needs Python 3.12's as_file; pip and pipx unpack).
_EXTRACTED = contextlib.ExitStack()
atexit.register(_EXTRACTED.close)

# kind -> (package, path inside it): the names `python -m common.resources` prints.
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "profiles": ("common", ("data", "playbooks", "profiles")),
    "playbooks": ("common", ("data", "playbooks")),
    "fabrics": ("common", ("data", "playbooks", "fabrics")),
    "jobs": ("common", ("data", "playbooks", "jobs")),
    "systemd-unit": ("common", ("data", "deploy", "systemd", "roce-agent.service")),
    "example-config": ("common", ("data", "deploy", "agent.yaml")),
    "dashboards": ("exporters", ("grafana",)),
    "alert-rules": ("exporters", ("alerts",)),
    "prometheus": ("exporters", ("prometheus",)),
}


def resource(kind: str) -> Path:
    """The file or folder of built-in data ``kind`` (one of :data:`KINDS`), as a real path."""
    package, parts = KINDS[kind]
    origin = getattr(importlib.import_module(package), "__file__", None)
    on_disk = Path(origin).parent.joinpath(*parts) if origin else None
    if on_disk is not None and on_disk.exists():
        # resolve(): in the repository this goes through the symlink to the top-level folder,
        # so messages name playbooks/profiles/…, as the docs do.
        return on_disk.resolve()
    from importlib.resources import as_file, files  # here: a zipped install only

    found: Traversable = files(package)
    for part in parts:
        found = found / part
    if isinstance(found, Path):
        return found.resolve()
    return _EXTRACTED.enter_context(as_file(found))


def builtin_profiles() -> Path:
    """The folder of the built-in lossless profiles (``profile: nvidia-default``)."""
    return resource("profiles")


def builtin_playbooks() -> Path:
    """The folder of the shipped playbooks (``roce-agent run validate``)."""
    return resource("playbooks")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # only for ``python -m common.resources``: every command imports this module

    parser = argparse.ArgumentParser(
        prog="python -m common.resources",
        description="Where roce-fabric-agent's built-in data is (profiles, playbooks, example "
        "fabrics and job files, systemd unit, example config, dashboards, alert rules).",
    )
    parser.add_argument("kind", nargs="?", choices=sorted(KINDS), help="print only this one's path")
    args = parser.parse_args(argv)
    kinds = [args.kind] if args.kind else list(KINDS)
    for kind in kinds:
        path = resource(kind)
        print(path if args.kind else f"{kind:<15} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

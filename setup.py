"""The build: the twin's hot path compiled by mypyc from its own Python source.

``lossless/compiled.py`` names the modules (``COMPILED_MODULES``).  ``ROCE_AGENT_COMPILE``
chooses:

* ``auto`` (the default): compile when mypyc is importable and the compile succeeds, else build
  the pure-Python package and say so (a user's ``pip install`` never fails for want of a
  compiler);
* ``require``: compile or fail the build (``make`` and CI: a broken compile must not pass
  unnoticed);
* ``off``: pure Python.

A compiled build records the digest of its sources (``lossless/compiled.sha256``), so that a
checkout edited since runs its source, not an outdated extension.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
MODE = os.environ.get("ROCE_AGENT_COMPILE", "auto")
COMPILED = runpy.run_path(str(HERE / "lossless" / "compiled.py"))


def _modules() -> list[str]:
    return [name.replace(".", "/") + ".py" for name in COMPILED["COMPILED_MODULES"]]


class BuildAndRecord(build_ext):
    """build_ext, then the digest of the compiled sources beside them (in the build tree for
    a wheel, in the checkout for an in-place or editable build)."""

    def run(self) -> None:
        super().run()
        if not self.extensions:
            return
        digest = COMPILED["source_digest"](HERE)
        targets = [Path(self.build_lib) / "lossless"]
        if self.inplace or self.editable_mode:
            targets.append(HERE / "lossless")
        for folder in targets:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / COMPILED["DIGEST_FILE"]).write_text(digest + "\n")


def _ext_modules() -> list[object]:
    if MODE not in ("auto", "require", "off"):
        sys.exit(f"ROCE_AGENT_COMPILE: Expected: auto, require or off Actual: {MODE!r}")
    if MODE == "off":
        return []
    try:
        from mypyc.build import mypycify

        # The build reads no project mypy config: it type-checks the compiled modules with
        # what the build environment has (third-party imports it lacks are Any).
        return list(
            mypycify(
                [
                    "--config-file=",
                    "--ignore-missing-imports",
                    "--follow-imports=silent",
                    *_modules(),
                ],
                opt_level="3",
                group_name=COMPILED["GROUP"],
            )
        )
    except Exception as error:  # any failure means: no compiled build
        if MODE == "require":
            raise
        print(f"roce-fabric-agent: building pure Python (mypyc: {error})", file=sys.stderr)
        return []


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": BuildAndRecord})

"""The build: the twin's hot path compiled by mypyc from its own Python source.

``lossless.compiled.COMPILED_MODULES`` names the modules.  ``ROCE_AGENT_COMPILE`` chooses:

* ``auto`` (the default): compile when mypyc is importable and the compile succeeds, else build
  the pure-Python package and say so (a user's ``pip install`` never fails for want of a
  compiler);
* ``require``: compile or fail the build (``make`` and CI: a broken compile must not pass
  unnoticed);
* ``off``: pure Python.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
MODE = os.environ.get("ROCE_AGENT_COMPILE", "auto")


def _modules() -> list[str]:
    names = runpy.run_path(str(HERE / "lossless" / "compiled.py"))["COMPILED_MODULES"]
    return [name.replace(".", "/") + ".py" for name in names]


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
                group_name="roce_agent_hotpath",
            )
        )
    except Exception as error:  # noqa: BLE001 -- any failure means: no compiled build
        if MODE == "require":
            raise
        print(f"roce-fabric-agent: building pure Python (mypyc: {error})", file=sys.stderr)
        return []


setup(ext_modules=_ext_modules())

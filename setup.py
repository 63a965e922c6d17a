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

The build says what it compiles and how long each step took (:func:`say`): pip shows a
build's own output only with ``-v`` and otherwise a spinner ("Building wheel ...") for the
minutes mypyc and the C compiler take, so the lines also go to the terminal pip or pipx was
started from (``/dev/tty``), which their capture does not touch; without a terminal (CI) they
are in the build log (``pip -v``).  pip runs ``setup.py`` for its metadata too (``egg_info``,
``dist_info``): those runs need no extension, and mypyc (about half a minute each) runs only
for the build itself.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
MODE = os.environ.get("ROCE_AGENT_COMPILE", "auto")
COMPILED = runpy.run_path(str(HERE / "lossless" / "compiled.py"))


# setup.py commands that only write metadata (pip's get_requires and prepare_metadata hooks,
# setuptools.build_meta): no extension is built, so mypyc need not run.
METADATA_COMMANDS = frozenset({"egg_info", "dist_info", "sdist"})


_SAID = []  # lines written to the terminal by this process


def say(text: str) -> None:
    """One line of the build's progress, on stderr and, when that is captured (pip, pipx),
    on the terminal the install was started from."""
    line = f"roce-fabric-agent: {text}\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    if sys.stderr.isatty():
        return
    # pip's spinner shares the line: the first line starts below pip's "Building wheel …",
    # the next ones clear the spinner's character first (carriage return, erase line).
    start = "\r\x1b[K" if _SAID else "\n"
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(start + line)
    except OSError:  # no controlling terminal: CI, a service; the log has the line
        return
    _SAID.append(line)


def _modules() -> list[str]:
    return [name.replace(".", "/") + ".py" for name in COMPILED["COMPILED_MODULES"]]


def _metadata_only() -> bool:
    commands = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    return bool(commands) and set(commands[:1]) <= METADATA_COMMANDS


class BuildAndRecord(build_ext):
    """build_ext, saying which extension it compiles and how long the C took, then the digest
    of the compiled sources beside them (in the build tree for a wheel, in the checkout for
    an in-place or editable build)."""

    def run(self) -> None:
        started = time.monotonic()
        super().run()
        if not self.extensions:
            return
        say(f"compiled the C of {len(self.extensions)} extensions in "
            f"{time.monotonic() - started:.0f} s")  # fmt: skip
        digest = COMPILED["source_digest"](HERE)
        targets = [Path(self.build_lib) / "lossless"]
        if self.inplace or self.editable_mode:
            targets.append(HERE / "lossless")
        for folder in targets:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / COMPILED["DIGEST_FILE"]).write_text(digest + "\n")

    def build_extension(self, ext: object) -> None:
        name = getattr(ext, "name", "?")
        say(f"C compiler: {name} ({self.extensions.index(ext) + 1} of {len(self.extensions)})")
        super().build_extension(ext)


def _ext_modules() -> list[object]:
    if MODE not in ("auto", "require", "off"):
        sys.exit(f"ROCE_AGENT_COMPILE: Expected: auto, require or off Actual: {MODE!r}")
    if MODE == "off" or _metadata_only():
        return []
    modules = _modules()
    say(
        f"compiling {len(modules)} modules with mypyc (the twin's engine, the lossless model, "
        "the lab switch's data plane): a few minutes (the docs' Install page); "
        "ROCE_AGENT_COMPILE=off builds pure Python at once"
    )
    started = time.monotonic()
    try:
        from mypyc.build import mypycify

        # The build reads no project mypy config: it type-checks the compiled modules with
        # what the build environment has (third-party imports it lacks are Any).
        extensions = list(
            mypycify(
                ["--config-file=", "--ignore-missing-imports", "--follow-imports=silent",
                 *modules],
                opt_level="3",
                group_name=COMPILED["GROUP"],
            )
        )  # fmt: skip
    except Exception as error:  # any failure means: no compiled build
        if MODE == "require":
            raise
        say(f"building pure Python (mypyc: {error})")
        return []
    say(
        f"mypyc type-checked the modules and wrote their C in {time.monotonic() - started:.0f} "
        f"s; next the C compiler, {len(extensions)} extensions"
    )
    return extensions


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": BuildAndRecord})
